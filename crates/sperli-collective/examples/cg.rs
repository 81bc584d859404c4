//! A conjugate-gradient solve of a distributed tridiagonal system,
//! checked against the same solve run serially.
//!
//! `A = tridiag(-1, 2 + SHIFT, -1)` of order `N` (symmetric positive
//! definite), `b_i = 1 + (i mod 7)`, rows cut into one block per rank.
//! Each iteration makes one matrix-vector product (the halo exchange of
//! the search direction with the neighbours, point-to-point DATA) and two
//! dot products (allreduce sums, folded in rank order). Rank 0 gathers
//! `x` with `gatherv`, checks its residual `|b - A x| / |b|` with a serial
//! product and compares it with a serial CG (the dot products are summed
//! in another order there, so they agree to rounding, not bit for bit);
//! it exits non-zero unless both hold.
//!
//! ```text
//! sperli run -n 4 -- target/debug/examples/cg [N] [SHIFT] [TOL]
//! ```
//! (defaults 400, 0.01, 1e-10).

mod common;

use std::process::ExitCode;

use common::{arg, block, halo};
use sperli_collective::prelude::*;

fn rhs(i: usize) -> f64 {
    1.0 + (i % 7) as f64
}

/// `out = A p` on one block, `left`/`right` the neighbours' edge values
/// of `p` (0 beyond the ends of the system).
fn matvec(p: &[f64], left: f64, right: f64, diag: f64, out: &mut [f64]) {
    for i in 0..p.len() {
        let l = if i == 0 { left } else { p[i - 1] };
        let r = if i + 1 == p.len() { right } else { p[i + 1] };
        out[i] = diag * p[i] - l - r;
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// CG on `b` with `dot_all` summing a local dot product over the job and
/// `apply` computing `A p`: (x, iterations).
fn cg(
    b: &[f64],
    tol: f64,
    max_iter: usize,
    mut dot_all: impl FnMut(f64) -> Result<f64, Error>,
    mut apply: impl FnMut(&[f64], &mut [f64]) -> Result<(), Error>,
) -> Result<(Vec<f64>, usize), Error> {
    let n = b.len();
    let mut x = vec![0.0; n];
    let mut r = b.to_vec();
    let mut p = r.clone();
    let mut ap = vec![0.0; n];
    let mut rr = dot_all(dot(&r, &r))?;
    let stop = tol * tol * rr;
    let mut it = 0;
    while it < max_iter && rr > stop {
        apply(&p, &mut ap)?;
        let alpha = rr / dot_all(dot(&p, &ap))?;
        for i in 0..n {
            x[i] += alpha * p[i];
            r[i] -= alpha * ap[i];
        }
        let next = dot_all(dot(&r, &r))?;
        let beta = next / rr;
        rr = next;
        for i in 0..n {
            p[i] = r[i] + beta * p[i];
        }
        it += 1;
    }
    Ok((x, it))
}

fn run(comm: &Comm<Endpoint>) -> Result<bool, Error> {
    let (n, shift, tol) = (arg(1, 400usize), arg(2, 0.01f64), arg(3, 1e-10f64));
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    if n < size {
        if rank == 0 {
            eprintln!("cg: N = {n} is less than the {size} ranks");
        }
        return Ok(false);
    }
    let diag = 2.0 + shift;
    let (first, len) = block(n, size, rank);
    let b: Vec<f64> = (first..first + len).map(rhs).collect();
    let (x, iters) = cg(
        &b,
        tol,
        2 * n,
        |local| comm.allreduce_scalar(local, Reduction::Sum),
        |p, out| {
            let (left, right) = halo(comm, p)?;
            matvec(p, left, right, diag, out);
            Ok(())
        },
    )?;
    let Some(all) = comm.gatherv(0, &x)? else {
        return Ok(true);
    };
    // The residual of the gathered solution, computed serially.
    let bs: Vec<f64> = (0..n).map(rhs).collect();
    let mut ax = vec![0.0; n];
    matvec(&all.data, 0.0, 0.0, diag, &mut ax);
    let res: f64 = bs
        .iter()
        .zip(&ax)
        .map(|(b, a)| (b - a) * (b - a))
        .sum::<f64>()
        .sqrt()
        / dot(&bs, &bs).sqrt();
    // The serial solve.
    let (want, serial_iters) = cg(&bs, tol, 2 * n, Ok, |p, out| {
        matvec(p, 0.0, 0.0, diag, out);
        Ok(())
    })?;
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let diff = all
        .data
        .iter()
        .zip(&want)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    let ok = res < 10.0 * tol && diff <= 1e-8 * scale && iters.abs_diff(serial_iters) <= 2;
    println!(
        "cg: n {n} ranks {size} iterations {iters} (serial {serial_iters}) residual {res:.3e} max_diff {diff:.3e} {}",
        if ok { "ok" } else { "MISMATCH" }
    );
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("cg", run)
}
