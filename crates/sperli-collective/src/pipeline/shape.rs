//! The choices a sender of a pipelined call makes (protocol §14.5): the
//! chunk length of the streams it starts, and for the root of a bcast the
//! fanout of its relay tree, from a Hoplite-style cost model with per-hop
//! latency L and per-link rate B. Which calls run pipelined at all is the
//! protocol's rule ([`sperli_wire::pipeline::runs_pipelined`]): every rank
//! must apply the same one.

use sperli_wire::pipeline::{CHUNK_ALIGN, MAX_CHUNK_DATA};

/// The model's per-hop latency L in microseconds: a small frame from a
/// send to the receiving rank holding it, measured on the 2-core benchmark
/// machine (a wake-up on each side; docs/performance.md).
pub const HOP_LATENCY_US: f64 = 60.0;
/// The model's per-link rate B in bytes per microsecond (1.5 GB/s: one
/// rank through TLS to one peer on the benchmark machine).
pub const LINK_BYTES_PER_US: f64 = 1500.0;
/// The chunk length this implementation starts its streams with (protocol
/// §14.5): 64 KiB. Measured at 4 ranks, allreduce and bcast of 16 MiB,
/// chunks of 32 KiB to 1 MiB (docs/performance.md, "Pipelined
/// collectives"): 64 KiB cost the least CPU time per call; a chunk stays in
/// the cache while it is decrypted, folded and encrypted again, and per-frame
/// costs are still small.
pub const CHUNK: usize = 64 * 1024;

/// The chunk length of the streams shorter than T that this
/// implementation starts in a job with feature bit 7 (ranks on a network,
/// protocol §20.1): 8 KiB, so that a reduce of 64 KiB along a chain of 8
/// ranks at 1 Gbit/s fills the chain in 8 chunk times (about 70 µs each)
/// instead of waiting a whole 549 µs array per hop.
pub const NETWORK_CHUNK: usize = 8 * 1024;

/// The chunk length L of a stream of `total` bytes (protocol §14.5):
/// [`CHUNK`], or `requested` (rounded down to a multiple of 8, at least 8);
/// never more than the stream or one frame carries.
///
/// ```
/// use sperli_collective::pipeline::shape::chunk_len;
/// assert_eq!(chunk_len(16 << 20, None), 64 << 10);
/// assert_eq!(chunk_len(100, None), 100); // one chunk
/// assert_eq!(chunk_len(1 << 20, Some(1000)), 1000);
/// assert_eq!(chunk_len(1 << 20, Some(3)), 8);
/// ```
pub fn chunk_len(total: usize, requested: Option<usize>) -> usize {
    chunk_len_aligned(total, requested, CHUNK_ALIGN)
}

/// [`chunk_len`] for a stream whose chunks must be multiples of `align`
/// bytes (at least 1): with feature bit 4, lcm(8, width) of the header's
/// element type, so that no chunk splits an element (protocol §17.3).
/// [`CHUNK`] and `requested` are rounded down to a multiple of `align`
/// (at least `align`).
///
/// ```
/// use sperli_collective::pipeline::shape::chunk_len_aligned;
/// assert_eq!(chunk_len_aligned(16 << 20, None, 24), 65520);
/// assert_eq!(chunk_len_aligned(1 << 20, Some(30), 24), 24);
/// assert_eq!(chunk_len_aligned(100, None, 24), 100); // one chunk
/// ```
pub fn chunk_len_aligned(total: usize, requested: Option<usize>, align: usize) -> usize {
    let align = align.max(1);
    let l = requested.unwrap_or(CHUNK);
    let l = (l - l % align).max(align);
    l.min(MAX_CHUNK_DATA - MAX_CHUNK_DATA % align)
        .min(total)
        .max(1)
}

/// The depth (edges from the root to the deepest rank) of the d-ary relay
/// tree of protocol §14.3 over `n` positions.
pub fn depth(n: u32, d: u32) -> u32 {
    let mut p = n.saturating_sub(1);
    let mut h = 0;
    while p > 0 {
        p = (p - 1) / d.max(1);
        h += 1;
    }
    h
}

/// The model's time in microseconds of a broadcast of `s` bytes in chunks
/// of `c` to `n` ranks along a tree of fanout `d` (protocol §14.5):
/// `h·L + (h - 1 + k)·d·c/B` with depth h and k chunks.
pub fn tree_time_us(n: u32, d: u32, s: usize, c: usize) -> f64 {
    let h = f64::from(depth(n, d));
    let k = s.div_ceil(c.max(1)) as f64;
    h * HOP_LATENCY_US + (h - 1.0 + k) * f64::from(d) * c as f64 / LINK_BYTES_PER_US
}

/// The fanout the root of a pipelined bcast announces: the d in
/// `1..=n-1` the model gives the least time for (the first on a tie).
///
/// ```
/// use sperli_collective::pipeline::shape::bcast_fanout;
/// assert_eq!(bcast_fanout(8, 16 << 20, 64 << 10), 1); // large: a chain
/// assert_eq!(bcast_fanout(2, 64 << 20, 64 << 10), 1);
/// ```
pub fn bcast_fanout(n: u32, s: usize, c: usize) -> u32 {
    (1..n.max(2))
        .map(|d| (d, tree_time_us(n, d, s, c)))
        .fold(
            (1, f64::INFINITY),
            |best, (d, t)| {
                if t < best.1 {
                    (d, t)
                } else {
                    best
                }
            },
        )
        .0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_of_chains_and_trees() {
        assert_eq!(depth(1, 1), 0);
        assert_eq!(depth(8, 1), 7);
        assert_eq!(depth(8, 2), 3); // 0; 1 2; 3 4 5 6; 7 is below 3
        assert_eq!(depth(7, 2), 2);
        assert_eq!(depth(8, 7), 1);
    }

    #[test]
    fn chunk_lengths_are_aligned_and_bounded() {
        for total in [
            1usize,
            7,
            8,
            4096,
            262_144,
            1 << 20,
            16 << 20,
            64 << 20,
            1 << 30,
        ] {
            let c = chunk_len(total, None);
            assert!(c >= 1 && c <= total && c <= CHUNK);
            assert!(c == total || c % CHUNK_ALIGN == 0, "{total}: {c}");
        }
        assert_eq!(
            chunk_len(64 << 20, Some(64 << 20)),
            MAX_CHUNK_DATA - MAX_CHUNK_DATA % 8
        );
    }

    #[test]
    fn the_model_prefers_the_chain_for_large_data_and_a_tree_in_between() {
        assert_eq!(bcast_fanout(8, 16 << 20, CHUNK), 1);
        assert_eq!(bcast_fanout(4, 16 << 20, CHUNK), 1);
        let mid = bcast_fanout(64, 256 << 10, 64 << 10);
        assert!(mid > 1, "{mid}");
    }
}
