//! The owner-fold allreduce of HELLO feature bit 7 (protocol §20): which
//! calls use it and how the array is cut into blocks, one per rank. The
//! frames are those of protocol §14.2; nothing here is new on the wire but
//! who sends which stream to whom.

use std::ops::Range;

use crate::collective::Operation;
use crate::limits::{FEATURE_OWNER_FOLD, FEATURE_PIPELINED};

/// Protocol §20.1: T7, the smallest contribution in bytes that runs the
/// owner fold (65536; the chain of protocol §14.5 starts at T = 262144).
pub const OWNER_FOLD_MIN_BYTES: u64 = 65_536;

/// Protocol §20.1: the owner fold needs at least this many bytes per rank
/// (S ≥ 4096 · n), so every block holds at least 256 elements of the
/// widest element type and no rank sends a stream of a few bytes.
pub const OWNER_FOLD_BYTES_PER_RANK: u64 = 4096;

/// Protocol §20.3: the chunk length every stream of the owner fold uses,
/// before it is fitted to the element type (see [`owner_fold_chunk`]).
pub const OWNER_FOLD_CHUNK: usize = 16_384;

/// Protocol §20.3: the chunk length L of every PARTIAL and FINAL stream of
/// a block of `block_len` bytes in an owner fold, `align` being lcm(8,
/// element width) (protocol §14.2, §17.3): the largest multiple of
/// `align` not above 16384, or the whole block when it is shorter. Every
/// sender of a block cuts it alike, so chunk k of every stream of block b
/// covers the same bytes and the owner folds them as they come.
///
/// ```
/// use sperli_wire::owner_fold::owner_fold_chunk;
/// assert_eq!(owner_fold_chunk(1 << 20, 8), 16_384);
/// assert_eq!(owner_fold_chunk(1 << 20, 24), 16_368); // 12-byte pairs
/// assert_eq!(owner_fold_chunk(4_096, 8), 4_096); // one chunk
/// ```
pub fn owner_fold_chunk(block_len: usize, align: usize) -> usize {
    let align = align.max(1);
    let l = (OWNER_FOLD_CHUNK - OWNER_FOLD_CHUNK % align).max(align);
    l.min(block_len).max(1)
}

/// Protocol §20.1: whether an allreduce whose contribution is `len` bytes
/// on `size` ranks of a job that negotiated `features` runs the owner
/// fold: bits 1 and 7, at least two ranks, `len ≥ 65536` and `len ≥ 4096 ·
/// size`. With 16-byte elements a block then holds at least 256 of them.
/// The caller excludes reduction 13 (user-defined, protocol §17.4),
/// which always runs the star.
///
/// ```
/// use sperli_wire::limits::{FEATURE_OWNER_FOLD, FEATURE_PIPELINED, FEATURE_V1_CORE};
/// use sperli_wire::owner_fold::runs_owner_fold;
/// let f = FEATURE_V1_CORE | FEATURE_PIPELINED | FEATURE_OWNER_FOLD;
/// assert!(runs_owner_fold(f, 4, 65_536));
/// assert!(!runs_owner_fold(f, 4, 65_528)); // below T7: the star
/// assert!(!runs_owner_fold(f, 65, 262_144)); // blocks under 4096 bytes: the chain
/// assert!(!runs_owner_fold(FEATURE_V1_CORE | FEATURE_PIPELINED, 4, 1 << 20));
/// assert!(!runs_owner_fold(f, 1, 1 << 20));
/// ```
pub fn runs_owner_fold(features: u64, size: u32, len: u64) -> bool {
    bit7(features)
        && size >= 2
        && len >= OWNER_FOLD_MIN_BYTES
        && len / OWNER_FOLD_BYTES_PER_RANK >= u64::from(size)
}

/// Protocol §20.1: the calls that feature bit 7 adds to those that run
/// pipelined in a job with bit 1 ([`crate::pipeline::runs_pipelined`]):
/// an allreduce that runs the owner fold ([`runs_owner_fold`]), and a
/// reduce on at least 3 ranks of at least T7 bytes (the chain of §14.3).
///
/// ```
/// use sperli_wire::collective::Operation;
/// use sperli_wire::limits::{FEATURE_OWNER_FOLD, FEATURE_PIPELINED, FEATURE_V1_CORE};
/// use sperli_wire::owner_fold::runs_pipelined_with_bit7;
/// let f = FEATURE_V1_CORE | FEATURE_PIPELINED | FEATURE_OWNER_FOLD;
/// assert!(runs_pipelined_with_bit7(Operation::Reduce, f, 4, 65_536));
/// assert!(!runs_pipelined_with_bit7(Operation::Reduce, f, 2, 65_536)); // the star either way
/// assert!(!runs_pipelined_with_bit7(Operation::Bcast, f, 4, 65_536));
/// assert!(!runs_pipelined_with_bit7(Operation::Reduce, f & !FEATURE_OWNER_FOLD, 4, 65_536));
/// ```
pub fn runs_pipelined_with_bit7(op: Operation, features: u64, size: u32, len: u64) -> bool {
    match op {
        Operation::Allreduce => runs_owner_fold(features, size, len),
        Operation::Reduce => chain_from_t7(features, size, len),
        _ => false,
    }
}

/// Protocol §20.1: whether a reduce of `len` bytes per rank on `size`
/// ranks runs the chain of §14.3 because of bit 7 (bits 1 and 7, at least
/// 3 ranks, at least T7). This implementation's bcast root uses the same
/// condition for its own choice of a chain.
///
/// ```
/// use sperli_wire::limits::{FEATURE_OWNER_FOLD, FEATURE_PIPELINED, FEATURE_V1_CORE};
/// use sperli_wire::owner_fold::chain_from_t7;
/// let f = FEATURE_V1_CORE | FEATURE_PIPELINED | FEATURE_OWNER_FOLD;
/// assert!(chain_from_t7(f, 3, 65_536));
/// assert!(!chain_from_t7(f, 3, 65_528));
/// assert!(!chain_from_t7(FEATURE_V1_CORE | FEATURE_OWNER_FOLD, 3, 65_536)); // no bit 1
/// ```
pub fn chain_from_t7(features: u64, size: u32, len: u64) -> bool {
    bit7(features) && size >= 3 && len >= OWNER_FOLD_MIN_BYTES
}

/// Protocol §20.1: bit 7 is used only together with bit 1.
fn bit7(features: u64) -> bool {
    let bits = FEATURE_PIPELINED | FEATURE_OWNER_FOLD;
    features & bits == bits
}

/// Protocol §20.2: the bytes of block `b` of an array of `len` bytes of
/// `width`-byte elements cut into `size` blocks. With E = len / width
/// elements, q = E div size and r = E mod size, block b holds q + 1
/// elements when b < r, else q, and the blocks follow each other in rank
/// order from byte 0. `len` is a whole number of elements and `b < size`.
///
/// ```
/// use sperli_wire::owner_fold::block;
/// // 10 elements of 8 bytes on 4 ranks: 3, 3, 2, 2 elements.
/// assert_eq!(block(80, 8, 4, 0), 0..24);
/// assert_eq!(block(80, 8, 4, 1), 24..48);
/// assert_eq!(block(80, 8, 4, 2), 48..64);
/// assert_eq!(block(80, 8, 4, 3), 64..80);
/// ```
pub fn block(len: u64, width: usize, size: u32, b: u32) -> Range<u64> {
    let w = width.max(1) as u64;
    let n = u64::from(size.max(1));
    let e = len / w;
    let (q, r) = (e / n, e % n);
    let b = u64::from(b);
    let start = b * q + b.min(r);
    let count = q + u64::from(b < r);
    start * w..(start + count) * w
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn blocks_tile_the_array_in_rank_order(
            elems in 0u64..100_000,
            width in prop::sample::select(vec![1usize, 2, 4, 8, 12, 16]),
            size in 1u32..64,
        ) {
            let len = elems * width as u64;
            let mut at = 0;
            for b in 0..size {
                let r = block(len, width, size, b);
                prop_assert_eq!(r.start, at);
                prop_assert_eq!((r.end - r.start) % width as u64, 0);
                let count = (r.end - r.start) / width as u64;
                prop_assert!(count == elems / u64::from(size) || count == elems / u64::from(size) + 1);
                at = r.end;
            }
            prop_assert_eq!(at, len);
        }
    }

    #[test]
    fn every_block_of_an_owner_fold_call_holds_at_least_256_elements() {
        let f = FEATURE_PIPELINED | FEATURE_OWNER_FOLD | 1;
        for size in 2..=300u32 {
            for len in [65_536u64, 65_536 + 16, 4096 * u64::from(size), 1 << 20] {
                if !runs_owner_fold(f, size, len) {
                    continue;
                }
                let len = len / 16 * 16;
                for b in 0..size {
                    let r = block(len, 16, size, b);
                    assert!((r.end - r.start) / 16 >= 256, "size {size} len {len} b {b}");
                }
            }
        }
    }
}
