//! The rows of the transport's small messages and the waiting caller that
//! drives its own sockets (crate docs of sperli-transport): one-way
//! latency of 8 B and 1 KiB, barrier and allreduce of 8 B at 2, 4 and 8
//! ranks, 16 and 64 MiB streams, each next to its same-run baseline, and
//! every one of them again with the waiting caller's spin switched off
//! (`SPERLI_BENCH_SPIN_US=0`, `Endpoint::set_spin`), to show the chosen
//! spin default against none.

use std::fmt::Write;

use super::report::{cell, ratio, ratio_cell, time_cell};
use super::{
    group, record, run_retrying, sperli_argv, spread_hosts, Options, Programs, Samples, COLL_RANKS,
};

const MIB: u64 = 1 << 20;

/// The side name of the spin-off runs.
const SPIN_OFF: &str = "sperli_spin0";

/// Runs the ping-pong (8 B, 1 KiB, 16 and 64 MiB) and the barrier and 8 B
/// collectives at every job size with the spin switched off.
pub(super) fn spin_off(p: &Programs, opts: &Options, samples: &mut Samples) -> Result<(), String> {
    let mut jobs = vec![(2, "pingpong", "8,1024,16777216,67108864")];
    jobs.extend(COLL_RANKS.iter().map(|&n| (n, "coll", "0,8")));
    for (n, mode, sizes) in jobs {
        let mut args = vec!["rank", mode];
        if opts.quick {
            args.push("--quick");
        }
        let argv = sperli_argv(p, n, Some(spread_hosts(n)), &[], &args);
        let env = [("SPERLI_BENCH_SPIN_US", "0"), ("SPERLI_BENCH_SIZES", sizes)];
        let label = format!("sperli {mode} n={n}, spin off");
        let o = run_retrying(&label, &argv, &env, samples)?;
        println!("    {label}: {:.1} s", o.secs);
        record(samples, &group(SPIN_OFF, mode, n), &o);
    }
    Ok(())
}

/// One row: the figure with spin on (the default) and off, its baseline,
/// and whether the goal (a bound on the ratio) is met.
struct Row {
    what: String,
    on: Option<super::Stat>,
    off: Option<super::Stat>,
    base: Option<super::Stat>,
    base_name: &'static str,
    /// Time (lower is better) or bandwidth (higher is better).
    time: bool,
    goal: f64,
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "n/a",
    }
}

/// The section of `docs/performance.md` with these rows.
pub(super) fn section(s: &Samples) -> String {
    let pp = |side: &str, name: &str, size: u64| s.get(&group(side, "pingpong", 2), name, size);
    let mut rows = Vec::new();
    for size in [8, 1024] {
        rows.push(Row {
            what: format!(
                "{} one-way (half round trip)",
                super::report::size_name(size)
            ),
            on: pp("sperli", "sperli_lat", size),
            off: pp(SPIN_OFF, "sperli_lat", size),
            base: pp("mpi", "mpi_lat", size),
            base_name: "OpenMPI TCP",
            time: true,
            goal: 2.0,
        });
    }
    for n in COLL_RANKS {
        // At 2 ranks the goal is 3 x; at 4 and 8 no worse than the 2.2 x
        // and 1.3 x measured before this work.
        let goal = match n {
            2 => 3.0,
            4 => 2.2,
            _ => 1.3,
        };
        for (op, size) in [("barrier", 0), ("allreduce", 8)] {
            let c = |side: &str| s.get(&group(side, "coll", n), op, size);
            rows.push(Row {
                what: format!("{op}{}, {n} ranks", if size > 0 { " 8 B" } else { "" }),
                on: c("sperli"),
                off: c(SPIN_OFF),
                base: c("mpi"),
                base_name: "OpenMPI TCP",
                time: true,
                goal,
            });
        }
    }
    for size in [16 * MIB, 64 * MIB] {
        rows.push(Row {
            what: format!(
                "{} ping-pong stream{}",
                super::report::size_name(size),
                if size > 16 * MIB {
                    " (`send_large`)"
                } else {
                    ""
                }
            ),
            on: pp("sperli", "sperli_bw", size),
            off: pp(SPIN_OFF, "sperli_bw", size),
            base: s.get("limits", "tls_bw", size),
            base_name: "bare rustls",
            time: false,
            goal: 0.95,
        });
    }
    let spin_at = |n: u32| {
        s.info
            .get(&format!("spin_default_us.{n}"))
            .map_or("?".to_string(), |v| format!("{v} µs"))
    };
    let mut defaults: Vec<String> = COLL_RANKS
        .iter()
        .map(|&n| format!("{} at {n} ranks", spin_at(n)))
        .collect();
    if COLL_RANKS
        .iter()
        .all(|&n| spin_at(n) == spin_at(COLL_RANKS[0]))
    {
        defaults = vec![spin_at(COLL_RANKS[0])];
    }
    let mut o = String::new();
    let _ = writeln!(o, "## Small messages and the waiting caller\n");
    let _ = writeln!(
        o,
        "A thread waiting in a call reads and decrypts its sockets itself: it busy-polls for \
         the spin time (`Settings::spin`, default {}) before it sleeps in the kernel, \
         yielding the core between two polls. \
         Each row is measured with the default and again with the spin off \
         (`SPERLI_BENCH_SPIN_US=0`: `Endpoint::set_spin(Duration::ZERO)`), in the same \
         run. Goal: the ratio to the baseline of the same run (times: SPERLI over the \
         baseline, at most the goal; bandwidth: SPERLI over bare rustls, at least the goal). \
         Spin: the default may not be slower than spin off (times: default over off at \
         most 1.10, bandwidth at least 0.90, to allow for the noise of one run).\n",
        defaults.join(", ")
    );
    let _ = writeln!(
        o,
        "| figure | SPERLI (spin default) | SPERLI (spin off) | baseline | ratio | goal | verdict | spin default / off | spin verdict |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let fmt = |x: Option<super::Stat>| {
            if r.time {
                time_cell(x)
            } else {
                format!("{} GB/s", cell(x))
            }
        };
        let q = ratio(r.on, r.base);
        let met = q.map(|q| if r.time { q <= r.goal } else { q >= r.goal });
        let spin = ratio(r.on, r.off);
        let spin_ok = spin.map(|x| if r.time { x <= 1.10 } else { x >= 0.90 });
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} {} | {} | {} {} x | {} | {} | {} |",
            r.what,
            fmt(r.on),
            fmt(r.off),
            r.base_name,
            fmt(r.base),
            ratio_cell(q),
            if r.time { "<=" } else { ">=" },
            r.goal,
            verdict(met),
            ratio_cell(spin),
            verdict(spin_ok),
        );
    }
    o
}
