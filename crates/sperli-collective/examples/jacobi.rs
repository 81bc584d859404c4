//! 1-D Jacobi iteration with halo exchange and an allreduce convergence
//! test, checked against the same iteration run serially.
//!
//! Solves `-u'' = 1` on (0, 1) with `u(0) = u(1) = 0` on `N` interior
//! points, cut into one block per rank. Every step each rank sends its
//! edge values to its neighbours (point-to-point DATA), updates its
//! block, and the ranks agree on the largest change with one allreduce
//! (max); they stop when it is below `TOL` or after `STEPS` steps. Rank 0
//! gathers the blocks with `gatherv` (blocks of different lengths when
//! `N` is not a multiple of the size), runs the same iteration serially
//! and exits non-zero unless both agree bit for bit (each point's update
//! is one formula on the same operands, and max is exact, so they must).
//!
//! ```text
//! sperli run -n 4 -- target/debug/examples/jacobi [N] [STEPS] [TOL]
//! ```
//! (defaults 50, 20000, 1e-9; `TOL` 0 runs exactly `STEPS` steps, as the
//! benchmark does). Rank 0 prints the steps, the time and steps per second.

mod common;

use std::process::ExitCode;
use std::time::Instant;

use common::{arg, block, halo};
use sperli_collective::prelude::*;

/// One Jacobi sweep of `u` (ghosts `left`, `right`) into `next`; returns
/// the largest change.
fn sweep(u: &[f64], left: f64, right: f64, h2f: f64, next: &mut [f64]) -> f64 {
    let mut change = 0.0f64;
    for i in 0..u.len() {
        let l = if i == 0 { left } else { u[i - 1] };
        let r = if i + 1 == u.len() { right } else { u[i + 1] };
        next[i] = 0.5 * (l + r + h2f);
        change = change.max((next[i] - u[i]).abs());
    }
    change
}

/// The serial iteration: (solution, steps).
fn serial(n: usize, steps: u64, tol: f64, h2f: f64) -> (Vec<f64>, u64) {
    let (mut u, mut next) = (vec![0.0; n], vec![0.0; n]);
    let mut done = 0;
    while done < steps {
        let change = sweep(&u, 0.0, 0.0, h2f, &mut next);
        std::mem::swap(&mut u, &mut next);
        done += 1;
        if change < tol {
            break;
        }
    }
    (u, done)
}

fn run(comm: &Comm<Endpoint>) -> Result<bool, Error> {
    let (n, steps, tol) = (arg(1, 50usize), arg(2, 20_000u64), arg(3, 1e-9f64));
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    if n < size {
        if rank == 0 {
            eprintln!("jacobi: N = {n} is less than the {size} ranks");
        }
        return Ok(false);
    }
    let h = 1.0 / (n as f64 + 1.0);
    let h2f = h * h;
    let (_, len) = block(n, size, rank);
    let (mut u, mut next) = (vec![0.0; len], vec![0.0; len]);
    comm.barrier()?;
    let start = Instant::now();
    let mut done = 0u64;
    while done < steps {
        let (left, right) = halo(comm, &u)?;
        let local = sweep(&u, left, right, h2f, &mut next);
        std::mem::swap(&mut u, &mut next);
        done += 1;
        if comm.allreduce_scalar(local, Reduction::Max)? < tol {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let Some(all) = comm.gatherv(0, &u)? else {
        return Ok(true);
    };
    let (want, want_steps) = serial(n, steps, tol, h2f);
    let same = all.data.len() == n
        && done == want_steps
        && all
            .data
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
    println!(
        "jacobi: n {n} ranks {size} steps {done} seconds {secs:.6} steps_per_s {:.1} u_mid {:.9e} serial {}",
        done as f64 / secs,
        all.data[n / 2],
        if same { "same" } else { "DIFFERENT" }
    );
    Ok(same)
}

fn main() -> ExitCode {
    common::main("jacobi", run)
}
