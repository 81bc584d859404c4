//! A SPERLI rank program: joins its job with `Comm::from_stdin()` (the
//! launcher wrote the description on stdin) and runs one benchmark mode.
//! Rank 0 prints the figures.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use sperli_collective::{max_chunk_elems, Comm};
use sperli_transport::Endpoint;
use sperli_wire::element::Reduction;
use sperli_wire::Error;

use crate::limits::{bw_count, lat_count, BW_SIZES, LAT_SIZES};
use crate::{cpu_time, iters, result};

const MIB: usize = 1 << 20;
/// Bytes per rank of the collective benchmarks.
pub const COLL_SIZES: [usize; 4] = [8, 64 * 1024, MIB, 16 * MIB];

/// `SPERLI_BENCH_SIZES=1048576,16777216` (bytes; 0 = the barrier) limits
/// the pingpong and coll modes to those sizes, for profiling one size
/// (`perf stat`); unset, every size runs. The xtask never sets it.
pub(crate) fn wanted(size: usize) -> bool {
    match std::env::var("SPERLI_BENCH_SIZES") {
        Ok(v) => v.split(',').any(|s| s.trim().parse() == Ok(size)),
        Err(_) => true,
    }
}

/// `SPERLI_BENCH_SPIN_US=N` sets the transport's spin time of this rank
/// (`Endpoint::set_spin`), for the spin-off rows of the latency
/// benchmark; unset, the default stays (and rank 0 says which it is).
pub fn apply_spin(ep: &Endpoint) {
    if ep.rank() == 0 && std::env::var_os("SPERLI_BENCH_SPIN_US").is_none() {
        println!(
            "INFO spin_default_us.{} {}",
            ep.size(),
            ep.spin().as_micros()
        );
    }
    if let Some(us) = std::env::var("SPERLI_BENCH_SPIN_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        ep.set_spin(std::time::Duration::from_micros(us));
    }
}

fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Runs rank mode `mode` (see the crate docs) as one rank of the job on
/// stdin.
pub fn run(mode: &str, quick: bool) -> Result<(), Error> {
    let started = unix_ns();
    // These join with a checkpointer instead of a bare communicator.
    if mode == "ckpt" {
        return crate::ckpt::run(quick);
    }
    if mode == "resume" {
        return crate::ckpt::resume(quick);
    }
    let mut comm = Comm::from_stdin()?;
    apply_spin(comm.link());
    if mode == "shrink" {
        return crate::recovery::run(comm);
    }
    match mode {
        "pingpong" => pingpong(&comm, quick)?,
        "coll" => coll(&mut comm, quick)?,
        "startup" => {
            comm.barrier()?;
            if comm.rank() == 0 {
                // Unix ns: the xtask subtracts the launcher's start time.
                println!("RESULT rank0_main_unix_ns 0 {started}");
                println!("RESULT all_connected_unix_ns 0 {}", unix_ns());
            }
        }
        "rss" => rss(&mut comm)?,
        "pipe" => crate::pipelined::run(&mut comm, quick)?,
        "overlap" => crate::overlap::run(&comm, quick)?,
        "p2p" => crate::p2p::run(&comm, quick)?,
        other => {
            eprintln!("sperli-bench: unknown rank mode {other}");
            std::process::exit(2);
        }
    }
    comm.into_link().finish()
}

/// Ping-pong between ranks 0 and 1 (two processes): half round trips for
/// 8 B, 1 KiB, 64 KiB; one-way streams of 1, 16, 64 MiB then an ack
/// (64 MiB with `send_large`: one DATA frame carries at most 16 MiB) that
/// carries rank 1's CPU time over the stream (8 bytes, ns), so rank 0 also
/// prints the CPU both processes spent per byte moved (`sperli_bw_cpu`:
/// the lesser of the timed pass and a third pass without busy polling).
fn pingpong(comm: &Comm<Endpoint>, quick: bool) -> Result<(), Error> {
    let ep = comm.link();
    let me = ep.rank();
    if me > 1 {
        return Ok(());
    }
    let peer = 1 - me;
    let mut buf = vec![3u8; 64 * MIB];
    for size in LAT_SIZES.into_iter().filter(|&s| wanted(s)) {
        let n = lat_count(size, quick);
        for (count, timed) in [(n / 10, false), (n, true)] {
            let t = Instant::now();
            for _ in 0..count {
                if me == 0 {
                    ep.send(peer, 1, &buf[..size])?;
                    let m = ep.recv(peer, 1)?;
                    buf[..size].copy_from_slice(&m);
                } else {
                    let m = ep.recv(peer, 1)?;
                    ep.send(peer, 1, &m)?;
                }
            }
            if timed && me == 0 {
                let us = t.elapsed().as_secs_f64() * 1e6 / (2 * count) as f64;
                result("sperli_lat", size, us);
            }
        }
    }
    buf.fill(3);
    // Rank 1 receives into one vector for every size and pass, as the
    // baselines read into one buffer (a fresh 64 MiB vector per pass was
    // faulted in page by page within the timed passes).
    let mut m = Vec::new();
    for size in BW_SIZES.into_iter().filter(|&s| wanted(s)) {
        let large = size > sperli_wire::limits::MAX_PAYLOAD as usize;
        let n = bw_count(size, quick);
        let mut least: Option<f64> = None;
        for (count, pass) in [(1, Pass::Warm), (n, Pass::Rate), (n, Pass::Cpu)] {
            // The CPU time of both processes (every thread) is counted in
            // the timed pass and in a pass without busy polling, where a
            // waiting thread costs no CPU time; the lesser of the two is
            // the work of moving the bytes. Rank 1 sends its share in the
            // ack.
            let spin = ep.spin();
            if pass == Pass::Cpu {
                ep.set_spin(std::time::Duration::ZERO);
            }
            let t = Instant::now();
            let cpu = cpu_time::process_cpu_ns();
            let mut theirs = None;
            if me == 0 {
                for _ in 0..count {
                    if large {
                        ep.send_large(peer, 2, &buf[..size])?;
                    } else {
                        ep.send(peer, 2, &buf[..size])?;
                    }
                }
                let ack = ep.recv(peer, 3)?;
                theirs = <[u8; 8]>::try_from(&ack[..])
                    .ok()
                    .map(u64::from_le_bytes)
                    .filter(|&ns| ns != u64::MAX);
            } else {
                for _ in 0..count {
                    if large {
                        ep.recv_large_into(peer, 2, &mut m)?;
                    } else {
                        ep.recycle(std::mem::take(&mut m));
                        m = ep.recv(peer, 2)?;
                    }
                    assert_eq!(m.len(), size);
                }
                let used = cpu_time::process_cpu_ns().zip(cpu).map(|(b, a)| b - a);
                ep.send(peer, 3, &used.unwrap_or(u64::MAX).to_le_bytes())?;
            }
            ep.set_spin(spin);
            if me != 0 || pass == Pass::Warm {
                continue;
            }
            let bytes = (size * count) as f64;
            if pass == Pass::Rate {
                result("sperli_bw", size, bytes / t.elapsed().as_secs_f64() / 1e9);
            }
            // ns of CPU per byte moved, both ranks together.
            let mine = cpu_time::process_cpu_ns().zip(cpu).map(|(b, a)| b - a);
            if let Some(ns) = mine.zip(theirs).map(|(a, b)| (a + b) as f64 / bytes) {
                least = Some(least.map_or(ns, |l| l.min(ns)));
            }
        }
        if let Some(ns) = least {
            result("sperli_bw_cpu", size, ns);
        }
    }
    Ok(())
}

/// A pass of the ping-pong's streams.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Untimed.
    Warm,
    /// Timed: the rate.
    Rate,
    /// Without busy polling: the CPU time per byte.
    Cpu,
}

/// `SPERLI_BENCH_OPS=bcast,gather` limits the coll mode to those
/// operations, for profiling one row (`perf record`); unset, all run. The
/// xtask never sets it.
fn op_wanted(op: &str) -> bool {
    std::env::var("SPERLI_BENCH_OPS").map_or(true, |v| v.split(',').any(|o| o.trim() == op))
}

/// Calls per timed run of a collective with `size` bytes per rank, after a
/// warm-up of a tenth of them: 1000 up to 8 bytes, 100 up to 64 KiB, 50 up
/// to 1 MiB, 3 above (OSU's micro-benchmarks time 1000 small and 100 large
/// calls; 10 calls at 1 MiB measured mostly the first, cold ones, and
/// swung by 30 % from run to run; a 16 MiB call is long enough, and 8 of
/// them take 1 s on the simulated cluster). `SPERLI_BENCH_COUNT=N` sets
/// it, for profiling; the xtask never does.
fn coll_count(size: usize, quick: bool) -> usize {
    if let Some(n) = std::env::var("SPERLI_BENCH_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    match size {
        s if s <= 8 => iters(quick, 1000, 40),
        s if s <= 64 * 1024 => iters(quick, 100, 6),
        s if s <= MIB => iters(quick, 50, 3),
        _ => iters(quick, 3, 1),
    }
}

/// Times `count` calls of `f` after a warm-up, on every rank; rank 0
/// prints the slowest rank's mean time per call (µs).
pub(crate) fn timed(
    comm: &mut Comm<Endpoint>,
    name: &str,
    size: usize,
    count: usize,
    mut f: impl FnMut(&mut Comm<Endpoint>) -> Result<(), Error>,
) -> Result<(), Error> {
    for _ in 0..count.div_ceil(10) {
        f(comm)?;
    }
    comm.barrier()?;
    let t = Instant::now();
    for _ in 0..count {
        f(comm)?;
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / count as f64;
    let all = comm.gather(0, &[us])?;
    if let Some(all) = all {
        result(name, size, all.iter().cloned().fold(0.0, f64::max));
    }
    Ok(())
}

/// barrier, then bcast, reduce, allreduce, gather, scatter (root 0, f64,
/// sum) for each size per rank, one call per row as an MPI program makes
/// it: bcast, reduce and allreduce take any length (one pipelined call
/// with feature bit 1). gather and scatter blocks longer than one v1 call
/// (16 MiB > 16777200 bytes) are still cut into calls of
/// `max_chunk_elems::<f64>()` elements. The `_into` variants are used so
/// no result vector is allocated per call.
fn coll(comm: &mut Comm<Endpoint>, quick: bool) -> Result<(), Error> {
    let size = comm.size() as usize;
    let root = comm.rank() == 0;
    if wanted(0) {
        timed(comm, "barrier", 0, coll_count(0, quick), |c| c.barrier())?;
    }
    for bytes in COLL_SIZES.into_iter().filter(|&s| wanted(s)) {
        let n = bytes / 8;
        let count = coll_count(bytes, quick);
        let chunk = max_chunk_elems::<f64>();
        let ranges: Vec<(usize, usize)> = (0..n)
            .step_by(chunk)
            .map(|s| (s, (s + chunk).min(n)))
            .collect();
        let data: Vec<f64> = (0..n).map(|i| (i % 1000) as f64).collect();
        let mut out = vec![0f64; n];
        if op_wanted("bcast") {
            timed(comm, "bcast", bytes, count, |c| c.bcast_into(0, &mut out))?;
        }
        if op_wanted("reduce") {
            timed(comm, "reduce", bytes, count, |c| {
                let o: &mut [f64] = if root { &mut out } else { &mut [] };
                c.reduce_into(0, &data, o, Reduction::Sum).map(drop)
            })?;
        }
        if op_wanted("allreduce") {
            timed(comm, "allreduce", bytes, count, |c| {
                c.allreduce_into(&data, &mut out, Reduction::Sum)
            })?;
        }
        // The root's receive buffers, reused as an MPI program's recvbuf.
        let mut gathered: Vec<Vec<f64>> = if root {
            ranges
                .iter()
                .map(|&(s, e)| vec![0.0; (e - s) * size])
                .collect()
        } else {
            ranges.iter().map(|_| Vec::new()).collect()
        };
        if op_wanted("gather") {
            timed(comm, "gather", bytes, count, |c| {
                for (&(s, e), out) in ranges.iter().zip(gathered.iter_mut()) {
                    c.gather_into(0, &data[s..e], out)?;
                }
                Ok(())
            })?;
        }
        let blocks: Vec<Vec<f64>> = if root {
            ranges
                .iter()
                .map(|&(s, e)| vec![1.0; (e - s) * size])
                .collect()
        } else {
            Vec::new()
        };
        if op_wanted("scatter") {
            timed(comm, "scatter", bytes, count, |c| {
                for (k, &(s, e)) in ranges.iter().enumerate() {
                    let d = blocks.get(k).map(Vec::as_slice);
                    c.scatter_into(0, d, &mut out[s..e])?;
                }
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// Open file descriptors of this process, not counting the one that reads
/// /proc/self/fd.
fn open_fds() -> std::io::Result<f64> {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count().saturating_sub(1) as f64)
}

/// Peak RSS (VmHWM), RSS and open file descriptors of every rank after
/// set-up, a barrier and 20 allreduces of 8 B; rank 0 prints the largest
/// and median VmHWM, its own, the largest VmRSS, its thread count and the
/// largest descriptor count of any rank. A rank that cannot read /proc
/// still takes part in the gather (with NaN), then fails with its I/O
/// error; rank 0 then prints no figure (the report shows n/a).
fn rss(comm: &mut Comm<Endpoint>) -> Result<(), Error> {
    comm.barrier()?;
    for _ in 0..20 {
        comm.allreduce(&[1.0f64], Reduction::Sum)?;
    }
    comm.barrier()?;
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| Error::io("reading /proc/self/status", &e));
    let fds = open_fds().map_err(|e| Error::io("reading /proc/self/fd", &e));
    let field = |name: &str| -> f64 {
        let Ok(status) = &status else {
            return f64::NAN;
        };
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let mine = [
        field("VmHWM:"),
        field("VmRSS:"),
        field("Threads:"),
        fds.as_ref().copied().unwrap_or(f64::NAN),
    ];
    let all = comm.gather(0, &mine)?;
    status?;
    fds?;
    if let Some(all) = all {
        if all.iter().any(|v| v.is_nan()) {
            eprintln!("sperli-bench rss: some rank could not read its /proc figures");
            return Ok(());
        }
        let mut hwm: Vec<f64> = all.chunks(4).map(|c| c[0]).collect();
        let rss_max = all.chunks(4).map(|c| c[1]).fold(0.0, f64::max);
        let fds_max = all.chunks(4).map(|c| c[3]).fold(0.0, f64::max);
        hwm.sort_by(f64::total_cmp);
        result("rss_hwm_max_kib", 0, hwm[hwm.len() - 1]);
        result("rss_hwm_median_kib", 0, hwm[hwm.len() / 2]);
        result("rss_hwm_rank0_kib", 0, mine[0]);
        result("rss_now_max_kib", 0, rss_max);
        result("threads_rank0", 0, mine[2]);
        result("fds_max", 0, fds_max);
    }
    Ok(())
}
