//! Rank mode `rtt`: small-message round trips between ranks 0 and 1 with
//! the context switches they cost (the transport's latency notes: `perf
//! stat -e context-switches` for the whole job, and this mode's own count
//! of the loop alone).

use std::time::Instant;

use sperli_collective::Comm;
use sperli_wire::Error;

use crate::result;

/// Voluntary plus involuntary context switches of every thread of this
/// process so far (`/proc/self/task/*/status`); NaN when unreadable.
pub fn context_switches() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let mut sum = 0u64;
    for t in tasks.flatten() {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for l in status.lines() {
            if let Some(v) = l
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                sum += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    sum as f64
}

/// `rank rtt [ROUNDS [BYTES]]`: ROUNDS round trips of BYTES between ranks
/// 0 and 1 after a warm-up of a tenth of them; rank 0 prints the half
/// round trip (µs) and each rank's context switches over the timed loop.
pub fn rtt(args: &[&str]) -> Result<(), Error> {
    let rounds: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let bytes: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(8);
    let comm = Comm::from_stdin()?;
    crate::rank::apply_spin(comm.link());
    let me = comm.rank();
    let mut figures = [0.0f64; 2];
    if me <= 1 && comm.size() > 1 {
        let ep = comm.link();
        let peer = 1 - me;
        let mut buf = vec![7u8; bytes];
        for (count, timed) in [(rounds / 10, false), (rounds, true)] {
            let before = context_switches();
            let t = Instant::now();
            for _ in 0..count {
                if me == 0 {
                    ep.send(peer, 1, &buf)?;
                    let m = ep.recv(peer, 1)?;
                    buf.copy_from_slice(&m);
                } else {
                    let m = ep.recv(peer, 1)?;
                    ep.send(peer, 1, &m)?;
                }
            }
            if timed {
                let half_us = t.elapsed().as_secs_f64() * 1e6 / (2 * count.max(1)) as f64;
                figures = [half_us, context_switches() - before];
            }
        }
    }
    if let Some(all) = comm.gather(0, &figures)? {
        result("rtt_half_us", bytes, all[0]);
        result("rtt_ctx_switches_rank0", bytes, all[1]);
        result("rtt_ctx_switches_rank1", bytes, all[3]);
    }
    comm.barrier()?;
    comm.into_link().finish()
}
