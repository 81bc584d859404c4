//! `sperli-bench rank overlap`: a non-blocking `iallreduce` of 16 MiB
//! (f64, sum) overlapped with 20 ms of computation, against the blocking
//! `allreduce` followed by the same computation (protocol §8.9: the
//! same frames; the non-blocking call runs on the communicator's progress
//! thread while the program computes).
//!
//! Prints `RESULT overlap_blocking_ms 16777216 <ms>`,
//! `RESULT overlap_nonblocking_ms 16777216 <ms>` (the slowest rank's mean
//! per step: call plus computation) and `RESULT overlap_compute_ms 0 <ms>`
//! (the computation alone, to read the figures against).

use std::time::{Duration, Instant};

use sperli_collective::Comm;
use sperli_transport::Endpoint;
use sperli_wire::element::Reduction;
use sperli_wire::Error;

use crate::{iters, result};

/// Bytes per rank of the call.
pub const OVERLAP_BYTES: usize = 16 << 20;
/// The computation per step.
const COMPUTE: Duration = Duration::from_millis(20);

/// 20 ms of arithmetic on `v` (a stencil-like sweep, repeated until the
/// time is up); returns a value so the work is not optimised away.
fn compute(v: &mut [f64]) -> f64 {
    let t = Instant::now();
    let mut acc = 0.0;
    while t.elapsed() < COMPUTE {
        for i in 1..v.len() - 1 {
            v[i] = 0.5 * v[i] + 0.25 * (v[i - 1] + v[i + 1]);
        }
        acc += v[v.len() / 2];
    }
    acc
}

/// The slowest rank's mean of `ms` (rank 0 prints it as `name`).
fn report(comm: &Comm<Endpoint>, name: &str, size: usize, ms: f64) -> Result<(), Error> {
    let worst = comm.allreduce_scalar(ms, Reduction::Max)?;
    if comm.rank() == 0 {
        result(name, size, worst);
    }
    Ok(())
}

/// Runs the mode on this rank.
pub fn run(comm: &Comm<Endpoint>, quick: bool) -> Result<(), Error> {
    let steps = iters(quick, 10, 2);
    let data: Vec<f64> = (0..OVERLAP_BYTES / 8).map(|i| (i % 1000) as f64).collect();
    let mut work: Vec<f64> = (0..64 * 1024).map(|i| i as f64).collect();
    let mut sink = 0.0;
    // Warm-up: one of each, so the progress thread and buffers exist.
    comm.allreduce(&data, Reduction::Sum)?;
    comm.iallreduce(&data, Reduction::Sum)?.wait()?;

    comm.barrier()?;
    let t = Instant::now();
    for _ in 0..steps {
        sink += compute(&mut work);
    }
    report(
        comm,
        "overlap_compute_ms",
        0,
        t.elapsed().as_secs_f64() * 1e3 / steps as f64,
    )?;

    comm.barrier()?;
    let t = Instant::now();
    for _ in 0..steps {
        let r = comm.allreduce(&data, Reduction::Sum)?;
        sink += r[1];
        sink += compute(&mut work);
    }
    let blocking = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
    report(comm, "overlap_blocking_ms", OVERLAP_BYTES, blocking)?;

    comm.barrier()?;
    let t = Instant::now();
    for _ in 0..steps {
        let req = comm.iallreduce(&data, Reduction::Sum)?;
        sink += compute(&mut work);
        sink += req.wait()?[1];
    }
    let overlapped = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
    report(comm, "overlap_nonblocking_ms", OVERLAP_BYTES, overlapped)?;
    if comm.rank() == 0 {
        println!("# overlap checksum {sink}");
    }
    Ok(())
}
