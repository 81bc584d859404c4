//! The vectors of HELLO feature bit 7, the owner-fold allreduce (protocol
//! §20.6): `collective-stream` entries whose receiver names its rank and
//! the sender's, so that the stream due (the PARTIAL stream of the
//! receiver's block or the FINAL stream of the sender's), its length and
//! its fixed chunk length are derived from the contribution, not only
//! stated.
//!
//! The job: 16 ranks, an f64 sum of 32769 elements (262152 bytes, at
//! least T and 4096 · 16): block 0 holds 2049 elements (16392 bytes: a
//! chunk of L = 16384 and one of 8), blocks 1-15 hold 2048 (one chunk).

use sperli_wire::collective::{Operation, Phase};
use sperli_wire::limits::{FEATURE_OWNER_FOLD, FEATURE_PIPELINED, FEATURE_V1_CORE};

use super::pipelined::{chunk, header, judged};
use super::Entry;

const SEQ: u64 = 7;
/// Bits 0, 1 and 7.
const FEATURES: u64 = FEATURE_V1_CORE | FEATURE_PIPELINED | FEATURE_OWNER_FOLD;
const SIZE: u32 = 16;
/// The contribution in bytes.
const S: u64 = 32_769 * 8;
/// Block 0's length, and every other block's.
const B0: u64 = 2_049 * 8;
const B: u64 = 2_048 * 8;
const L: usize = 16_384;

/// One entry: `rank` takes `frames` from `peer`; `due` phase and root.
fn take(
    name: &str,
    rank: u32,
    peer: u32,
    due: (Phase, u32),
    frames: &[Vec<u8>],
    verdict: &str,
) -> Entry {
    let e = Entry::new(name, "collective-stream")
        .with(
            "receiver",
            format!("size={SIZE} features={FEATURES} rank={rank} peer={peer}"),
        )
        .with(
            "call",
            format!("operation=4 element_type=6 reduction=1 sequence={SEQ} length={S}"),
        )
        .with("due", format!("phase={} root={}", due.0 as u8, due.1));
    judged(e, frames, verdict)
}

/// Every bit-7 entry.
pub fn entries() -> Vec<Entry> {
    let ar = |ph, b| header(Operation::Allreduce, ph, b);
    let (p, f) = (Phase::Partial, Phase::Final);
    let block0 = |ph| {
        vec![
            chunk(ar(ph, 0), 0, B0, L),
            chunk(ar(ph, 0), L as u64, B0, 8),
        ]
    };
    vec![
        take(
            "owner-fold-rank-0-takes-its-block-from-rank-5",
            0,
            5,
            (p, 0),
            &block0(p),
            "accept",
        ),
        take(
            "owner-fold-rank-3-takes-block-0-from-its-owner",
            3,
            0,
            (f, 0),
            &block0(f),
            "accept",
        ),
        take(
            "owner-fold-rank-3-takes-its-block-from-rank-7",
            3,
            7,
            (p, 3),
            &[chunk(ar(p, 3), 0, B, L)],
            "accept",
        ),
        // At T7 (65536 bytes, protocol §20.1) on 4 ranks: blocks of
        // 16384 bytes, one chunk each.
        judged(
            Entry::new("owner-fold-at-t7-on-four-ranks", "collective-stream")
                .with(
                    "receiver",
                    format!("size=4 features={FEATURES} rank=1 peer=2"),
                )
                .with(
                    "call",
                    format!("operation=4 element_type=6 reduction=1 sequence={SEQ} length=65536"),
                )
                .with("due", "phase=3 root=1"),
            &[chunk(ar(p, 1), 0, 16_384, 16_384)],
            "accept",
        ),
        take(
            "owner-fold-partial-of-another-block",
            3,
            7,
            (p, 3),
            &[chunk(ar(p, 4), 0, B, L)],
            "reject H1617 root",
        ),
        take(
            "owner-fold-first-chunk-shorter-than-l",
            0,
            5,
            (p, 0),
            &[chunk(ar(p, 0), 0, B0, L / 2)],
            "reject H1617 length",
        ),
        take(
            "owner-fold-partial-total-of-the-whole-array",
            3,
            7,
            (p, 3),
            &[chunk(ar(p, 3), 0, S, L)],
            "reject H1618 total",
        ),
        take(
            "owner-fold-final-with-another-blocks-total",
            3,
            0,
            (f, 0),
            &[chunk(ar(f, 0), 0, B, L)],
            "reject H1617 total",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::verify::derive;
    use super::*;

    fn entry(due: &str) -> Entry {
        Entry::new("x", "collective-stream")
            .with(
                "receiver",
                format!("size={SIZE} features={FEATURES} rank=3 peer=7"),
            )
            .with(
                "call",
                format!("operation=4 element_type=6 reduction=1 sequence={SEQ} length={S}"),
            )
            .with("due", due)
            .with("frames", "")
    }

    #[test]
    fn a_due_stream_that_the_receiver_does_not_take_is_refused() {
        for due in ["phase=3 root=7", "phase=4 root=3", "phase=1 root=0"] {
            assert!(derive(entry(due)).unwrap_err().starts_with("due:"), "{due}");
        }
        assert!(derive(entry("phase=3 root=3")).is_ok());
        assert!(derive(entry("phase=4 root=7")).is_ok());
    }
}
