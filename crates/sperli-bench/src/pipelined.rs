//! `sperli-bench rank pipe`: the pipelined collectives of HELLO feature
//! bit 1 (protocol §14) next to the v1 star. The xtask starts the
//! same job twice: once as it is (every rank announces bit 1: large calls
//! run pipelined) and once with `SPERLI_FEATURES=1` (v1 only: the star).
//! Each call is one `_large_into` call, so the pipelined side makes one
//! collective call where the star side makes the v1 split (two calls for
//! 16 MiB, five for 64 MiB).
//!
//! Prints `RESULT <side>_<op> <bytes per rank> <µs>`, side `pipe` or
//! `star` (from the negotiated features), op `allreduce` (f64 sum) or
//! `bcast` (root 0): the slowest rank's mean time per call.

use sperli_collective::Comm;
use sperli_transport::Endpoint;
use sperli_wire::element::Reduction;
use sperli_wire::limits::FEATURE_PIPELINED;
use sperli_wire::Error;

use crate::iters;
use crate::rank::{timed, wanted};

const MIB: usize = 1 << 20;
/// Bytes per rank: the small rows (which must stay on the star) and the
/// large ones up to 64 MiB.
pub const PIPE_SIZES: [usize; 9] = [
    8,
    1024,
    64 * 1024,
    256 * 1024,
    MIB,
    4 * MIB,
    16 * MIB,
    32 * MIB,
    64 * MIB,
];

/// Calls per timed run for `size` bytes per rank, after a warm-up of a
/// tenth of them: as the collectives rows (`rank::coll_count`), 5 from
/// 4 MiB to 16 MiB and 3 above.
fn count(size: usize, quick: bool) -> usize {
    match size {
        s if s <= 1024 => iters(quick, 1000, 40),
        s if s <= 64 * 1024 => iters(quick, 100, 10),
        s if s <= MIB => iters(quick, 50, 4),
        s if s <= 16 * MIB => iters(quick, 5, 2),
        _ => iters(quick, 3, 1),
    }
}

/// `SPERLI_BENCH_PIPE_CHUNK=<bytes>`: the chunk length of the streams
/// this rank starts instead of the default rule (for measuring the choice
/// of protocol §14.5; the xtask never sets it).
fn chunk_override() -> Option<usize> {
    std::env::var("SPERLI_BENCH_PIPE_CHUNK")
        .ok()
        .and_then(|v| v.trim().parse().ok())
}

/// `SPERLI_BENCH_PIPE_OPS=allreduce` (or `bcast`): only that operation
/// (for profiling one; the xtask never sets it).
fn op_wanted(op: &str) -> bool {
    std::env::var("SPERLI_BENCH_PIPE_OPS").map_or(true, |v| v.split(',').any(|o| o.trim() == op))
}

/// Runs the mode on this rank.
pub fn run(comm: &mut Comm<Endpoint>, quick: bool) -> Result<(), Error> {
    let side = if comm.features() & FEATURE_PIPELINED != 0 {
        "pipe"
    } else {
        "star"
    };
    comm.set_pipeline_chunk(chunk_override());
    if comm.rank() == 0 {
        println!("INFO pipe_side_{side} features={}", comm.features());
    }
    for bytes in PIPE_SIZES.into_iter().filter(|&s| wanted(s)) {
        let n = bytes / 8;
        let c = count(bytes, quick);
        let data: Vec<f64> = (0..n).map(|i| (i % 1000) as f64 + 0.25).collect();
        let mut out = vec![0f64; n];
        if op_wanted("allreduce") {
            timed(comm, &format!("{side}_allreduce"), bytes, c, |cm| {
                cm.allreduce_into(&data, &mut out, Reduction::Sum)
            })?;
        }
        if op_wanted("bcast") {
            timed(comm, &format!("{side}_bcast"), bytes, c, |cm| {
                cm.bcast_into(0, &mut out)
            })?;
        }
    }
    Ok(())
}
