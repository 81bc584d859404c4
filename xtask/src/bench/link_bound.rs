//! The link bound and the goal of a collective row (the collectives and
//! pipelined tables of the report and of the simulated cluster).
//!
//! **Link bound**: the time the busiest rank needs for the bytes an
//! operation must move through one rank, whatever its algorithm
//! ([`bound_bytes`]), at the ping-pong stream rate of the same run at the
//! nearest measured size, and never below one message's one-way latency of
//! the row's size (a collective of one small message is at least one
//! message). **Goal** on loopback: a row is met when it is at most 2.0 x
//! OpenMPI (TCP), or at most 1.25 x its link bound where the TLS link
//! itself is what is slower.

use super::report::{BW_SIZES, LAT_SIZES};
use super::{group, Samples, Stat};

/// A loopback row is met within this factor of OpenMPI...
pub const MPI_GOAL: f64 = 2.0;
/// ... or within this factor of its link bound.
pub const BOUND_GOAL: f64 = 1.25;

/// The bytes the busiest rank must send (or receive: a link carries both
/// directions at once) in `op` of `s` bytes per rank at `n` ranks,
/// whatever the algorithm: bcast, the root sends s; reduce, the root
/// receives s; allreduce, 2(n-1)/n s (each rank ends with the whole
/// result and can fold only its share of it by itself: the reduce-scatter
/// and allgather bound); gather and scatter, the root receives or sends
/// the n-1 other blocks; a barrier moves nothing.
pub fn bound_bytes(op: &str, n: u32, s: u64) -> f64 {
    let (n, s) = (f64::from(n), s as f64);
    match op {
        "bcast" | "reduce" => s,
        "allreduce" => 2.0 * (n - 1.0) / n * s,
        "gather" | "scatter" => (n - 1.0) * s,
        _ => 0.0,
    }
}

/// The bytes all links carry together in `op` of `s` bytes per rank at
/// `n` ranks, whatever the algorithm: bcast, every other rank receives s;
/// reduce, every other rank's s must leave it (each of its elements goes
/// into the result, folded or not); allreduce, 2(n-1) s (n times the
/// 2(n-1)/n s of [`bound_bytes`]); gather and scatter, the n-1 other
/// blocks; a barrier, none.
pub fn total_bytes(op: &str, n: u32, s: u64) -> f64 {
    let (n, s) = (f64::from(n), s as f64);
    match op {
        "bcast" | "reduce" | "gather" | "scatter" => (n - 1.0) * s,
        "allreduce" => 2.0 * (n - 1.0) * s,
        _ => 0.0,
    }
}

/// The CPU floor (µs) of `op` at `bytes` per rank and `n` ranks on the
/// machine the run measured ([`cores`] CPUs): the [`total_bytes`] at the
/// CPU time both ends of the SPERLI ping-pong stream spent per byte
/// (`sperli_bw_cpu`, ns, every thread of both processes) at the size
/// nearest to `bytes`, spread over every core. No algorithm moves those
/// bytes in less while a byte through TLS costs what it costs the
/// ping-pong: every rank runs on the same cores.
pub fn cpu_floor_us(s: &Samples, op: &str, n: u32, bytes: u64) -> Option<f64> {
    let grp = group("sperli", "pingpong", 2);
    let (_, ns) = nearest(&BW_SIZES, bytes as f64, |z| {
        Some(s.get(&grp, "sperli_bw_cpu", z)?.median)
    })?;
    Some(total_bytes(op, n, bytes) * ns / 1e3 / cores(s))
}

/// Whether a CPU floor puts a row out of reach of its goal: the floor is
/// above both [`MPI_GOAL`] x OpenMPI and [`BOUND_GOAL`] x the link bound
/// (`None` without a floor).
pub fn beyond_goal(floor: Option<f64>, mpi: Option<Stat>, bound: Option<f64>) -> Option<bool> {
    let floor = floor?;
    let limit = [
        mpi.map(|m| MPI_GOAL * m.median),
        bound.map(|b| BOUND_GOAL * b),
    ]
    .into_iter()
    .flatten()
    .reduce(f64::max)?;
    Some(floor > limit)
}

/// The CPUs of the machine a run measured (the `cores` the bench
/// records; one when it is missing).
pub fn cores(s: &Samples) -> f64 {
    s.info
        .get("cores")
        .and_then(|c| c.parse::<f64>().ok())
        .unwrap_or(1.0)
}

/// Whether a row that is not met is out of reach on the machine: its
/// `floor` ([`cpu_floor_us`]) is [`beyond_goal`].
pub fn out_of_reach(
    goal: Option<bool>,
    floor: Option<f64>,
    mpi: Option<Stat>,
    bound: Option<f64>,
) -> bool {
    goal == Some(false) && beyond_goal(floor, mpi, bound) == Some(true)
}

/// The measured size of `sizes` nearest to `bytes` on a log scale, with
/// its figure.
pub fn nearest(sizes: &[u64], bytes: f64, get: impl Fn(u64) -> Option<f64>) -> Option<(u64, f64)> {
    let d = |x: u64| ((x as f64).ln() - bytes.max(1.0).ln()).abs();
    sizes
        .iter()
        .filter_map(|&b| Some((b, get(b)?)))
        .min_by(|a, b| d(a.0).total_cmp(&d(b.0)))
}

/// The loopback link bound (µs) of `op` at `bytes` per rank and `n`
/// ranks, from the SPERLI ping-pong of the same run: the bound bytes at
/// the stream rate (`sperli_bw`, GB/s) of the nearest stream size, and at
/// least the one-way latency (`sperli_lat`) of the largest latency size
/// not above `bytes` (a barrier: of 8 B).
pub fn loopback_us(s: &Samples, op: &str, n: u32, bytes: u64) -> Option<f64> {
    let grp = group("sperli", "pingpong", 2);
    let b = bound_bytes(op, n, bytes);
    let (_, gbs) = nearest(&BW_SIZES, b, |z| Some(s.get(&grp, "sperli_bw", z)?.median))?;
    let stream = b / (gbs * 1e3);
    let lat_size = LAT_SIZES
        .iter()
        .copied()
        .filter(|&z| z <= bytes.max(LAT_SIZES[0]))
        .max()?;
    let lat = s.get(&grp, "sperli_lat", lat_size)?.median;
    Some(stream.max(lat))
}

/// A loopback row's verdict: met at most [`MPI_GOAL`] x OpenMPI or at
/// most [`BOUND_GOAL`] x its link bound; `None` without figures.
pub fn loopback_goal(sp: Option<Stat>, mpi: Option<Stat>, bound: Option<f64>) -> Option<bool> {
    let sp = sp?.median;
    let by_mpi = mpi.map(|m| sp <= MPI_GOAL * m.median);
    let by_bound = bound.map(|b| sp <= BOUND_GOAL * b);
    match (by_mpi, by_bound) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(false) || b.unwrap_or(false)),
    }
}

/// A bound in µs or ms.
pub fn bound_cell(b: Option<f64>) -> String {
    match b {
        Some(b) if b >= 10_000.0 => format!("{:.1} ms", b / 1e3),
        Some(b) if b >= 10.0 => format!("{b:.0} µs"),
        Some(b) => format!("{b:.2} µs"),
        None => "n/a".into(),
    }
}

/// `none`, or how many rows were not met and which.
pub fn missed_list(missed: &[String]) -> String {
    if missed.is_empty() {
        "none".to_string()
    } else {
        format!("{} ({})", missed.len(), missed.join(", "))
    }
}

/// A verdict's cell.
pub fn goal_cell(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "n/a",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(v: f64) -> Option<Stat> {
        Some(Stat {
            median: v,
            min: v,
            max: v,
            n: 1,
        })
    }

    #[test]
    fn bounds_follow_the_bytes_through_the_busiest_rank() {
        assert_eq!(bound_bytes("bcast", 8, 100), 100.0);
        assert_eq!(bound_bytes("reduce", 4, 100), 100.0);
        assert_eq!(bound_bytes("allreduce", 4, 100), 150.0);
        assert_eq!(bound_bytes("allreduce", 2, 100), 100.0);
        assert_eq!(bound_bytes("gather", 4, 100), 300.0);
        assert_eq!(bound_bytes("scatter", 8, 100), 700.0);
        assert_eq!(bound_bytes("barrier", 8, 0), 0.0);
    }

    #[test]
    fn the_bound_is_the_stream_time_but_at_least_one_latency() {
        let mut s = Samples::default();
        let g = group("sperli", "pingpong", 2);
        s.add(&g, "sperli_bw", 1 << 20, 1.0); // 1 GB/s = 1000 bytes/µs
        s.add(&g, "sperli_bw", 16 << 20, 2.0);
        s.add(&g, "sperli_lat", 8, 10.0);
        s.add(&g, "sperli_lat", 64 * 1024, 40.0);
        // 1 MiB reduce at 2 ranks: 1 MiB at 1 GB/s.
        let b = loopback_us(&s, "reduce", 2, 1 << 20).unwrap();
        assert!((b - 1048.576).abs() < 1e-6, "{b}");
        // 16 MiB bcast: the 16 MiB rate.
        let b = loopback_us(&s, "bcast", 4, 16 << 20).unwrap();
        assert!((b - 8388.608).abs() < 1e-6, "{b}");
        // 8 B: one latency; a barrier too.
        assert_eq!(loopback_us(&s, "allreduce", 2, 8), Some(10.0));
        assert_eq!(loopback_us(&s, "barrier", 4, 0), Some(10.0));
        // 64 KiB gather at 2 ranks: 64 KiB at 1 GB/s is 65.5 µs > 40.
        let b = loopback_us(&s, "gather", 2, 64 * 1024).unwrap();
        assert!((b - 65.536).abs() < 1e-6, "{b}");
    }

    #[test]
    fn the_cpu_floor_spreads_every_link_byte_over_the_cores() {
        let mut s = Samples::default();
        let g = group("sperli", "pingpong", 2);
        s.add(&g, "sperli_bw_cpu", 1 << 20, 0.5); // ns per byte
        s.add(&g, "sperli_bw_cpu", 16 << 20, 0.25);
        s.info.insert("cores".into(), "2".into());
        assert_eq!(total_bytes("bcast", 4, 100), 300.0);
        assert_eq!(total_bytes("reduce", 2, 100), 100.0);
        assert_eq!(total_bytes("allreduce", 4, 100), 600.0);
        assert_eq!(total_bytes("gather", 8, 100), 700.0);
        assert_eq!(total_bytes("barrier", 8, 0), 0.0);
        // 1 MiB bcast at 4 ranks on 2 cores: 3 MiB at 0.5 ns/B over 2.
        let f = cpu_floor_us(&s, "bcast", 4, 1 << 20).unwrap();
        assert!((f - 786.432).abs() < 1e-6, "{f}");
        // 16 MiB allreduce at 4 ranks: 6 x 16 MiB at 0.25 ns/B over 2.
        let f = cpu_floor_us(&s, "allreduce", 4, 16 << 20).unwrap();
        assert!((f - 12582.912).abs() < 1e-6, "{f}");
        // Beyond the goal only past both limits.
        assert_eq!(beyond_goal(Some(900.0), st(400.0), Some(500.0)), Some(true));
        assert_eq!(
            beyond_goal(Some(700.0), st(400.0), Some(500.0)),
            Some(false)
        );
        assert_eq!(beyond_goal(Some(700.0), None, Some(500.0)), Some(true));
        assert_eq!(beyond_goal(None, st(400.0), Some(500.0)), None);
        assert_eq!(beyond_goal(Some(1.0), None, None), None);
    }

    #[test]
    fn a_row_is_met_by_openmpi_or_by_its_bound() {
        assert_eq!(
            loopback_goal(st(190.0), st(100.0), Some(1000.0)),
            Some(true)
        );
        assert_eq!(loopback_goal(st(210.0), st(100.0), Some(200.0)), Some(true));
        assert_eq!(
            loopback_goal(st(260.0), st(100.0), Some(200.0)),
            Some(false)
        );
        assert_eq!(loopback_goal(st(260.0), None, Some(200.0)), Some(false));
        assert_eq!(loopback_goal(st(260.0), None, None), None);
        assert_eq!(loopback_goal(None, st(1.0), Some(1.0)), None);
    }
}
