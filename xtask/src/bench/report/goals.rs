//! The speed goals of `docs/performance.md` with met / not met.

use std::fmt::Write;

use super::ckpt::ckpt_group;
use super::{cell, ratio, ratio_cell, size_name, time_cell, MIB};
use crate::bench::{ckpt_sizes, group, Samples, Stat, CKPT_RANKS, COLL_RANKS, RSS_GOAL_RANKS};

fn goal_row(out: &mut String, goal: &str, measured: String, met: Option<bool>) {
    let verdict = match met {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "n/a (not measured)",
    };
    let _ = writeln!(out, "| {goal} | {measured} | {verdict} |");
}

/// The speed goals with met / not met (`quick`: the
/// checkpoint goal is judged on the largest size a `--quick` run measures).
pub fn goals_section(s: &Samples, quick: bool) -> String {
    let mut o = String::new();
    let l = |name: &str, size: u64| s.get("limits", name, size);
    let _ = writeln!(o, "## Speed goals\n");
    let _ = writeln!(o, "| goal | measured (medians) | verdict |");
    let _ = writeln!(o, "|---|---|---|");
    let r = ratio(l("combine_f64_sum", 16 * MIB), l("memcpy", 16 * MIB));
    goal_row(
        &mut o,
        "combine f64 sum 16 MiB >= 0.5 x memcpy",
        format!(
            "{} GB/s vs memcpy {} GB/s: {} x",
            cell(l("combine_f64_sum", 16 * MIB)),
            cell(l("memcpy", 16 * MIB)),
            ratio_cell(r)
        ),
        r.map(|r| r >= 0.5),
    );
    let sp = s.get("sperli.pingpong.2", "sperli_bw", 16 * MIB);
    let r = ratio(sp, l("tls_bw", 16 * MIB));
    goal_row(
        &mut o,
        "transport 16 MiB bandwidth >= 0.8 x bare rustls",
        format!(
            "{} GB/s vs {} GB/s: {} x",
            cell(sp),
            cell(l("tls_bw", 16 * MIB)),
            ratio_cell(r)
        ),
        r.map(|r| r >= 0.8),
    );
    let sp = s.get("sperli.pingpong.2", "sperli_lat", 8);
    let r = ratio(sp, l("tls_lat", 8));
    goal_row(
        &mut o,
        "8 B latency <= 2 x bare rustls (half round trips; medians and fastest runs)",
        format!(
            "{} µs vs {} µs: {} x (fastest runs: {} x; both are bimodal, about 3 µs when \
             the woken thread runs at once, 35-45 µs when it is woken from the other core)",
            cell(sp),
            cell(l("tls_lat", 8)),
            ratio_cell(r),
            ratio_cell(sp.zip(l("tls_lat", 8)).map(|(a, b)| a.min / b.min))
        ),
        // Met only if both the medians and the fastest runs are within 2 x:
        // a median of one side in its slow mode says nothing.
        sp.zip(l("tls_lat", 8))
            .map(|(a, b)| a.median <= 2.0 * b.median && a.min <= 2.0 * b.min),
    );
    let hwm = s.get(
        &group("sperli", "rss", RSS_GOAL_RANKS),
        "rss_hwm_max_kib",
        0,
    );
    goal_row(
        &mut o,
        &format!(
            "peak RSS of a rank with {} peers < 64 MiB plus its messages (8 B here)",
            RSS_GOAL_RANKS - 1
        ),
        format!(
            "largest VmHWM of the {RSS_GOAL_RANKS} ranks: {} MiB",
            cell(hwm.map(|h| Stat {
                median: h.median / 1024.0,
                min: h.min / 1024.0,
                max: h.max / 1024.0,
                n: h.n
            }))
        ),
        hwm.map(|h| h.median < 65536.0),
    );
    let sp = s.get("sperli.coll.4", "allreduce", 16 * MIB);
    let mpi = s.get("mpi.coll.4", "allreduce", 16 * MIB);
    let r = ratio(sp, mpi);
    goal_row(
        &mut o,
        "allreduce 16 MiB at 4 ranks <= 2 x OpenMPI (TCP)",
        format!(
            "{} vs {}: {} x",
            time_cell(sp),
            time_cell(mpi),
            ratio_cell(r)
        ),
        r.map(|r| r <= 2.0),
    );
    for n in COLL_RANKS {
        let sp = s.get(&group("sperli", "coll", n), "allreduce", 8);
        let mpi = s.get(&group("mpi", "coll", n), "allreduce", 8);
        let r = ratio(sp, mpi);
        goal_row(
            &mut o,
            &format!("allreduce 8 B at {n} ranks <= 3 x OpenMPI (TCP)"),
            format!(
                "{} vs {}: {} x",
                time_cell(sp),
                time_cell(mpi),
                ratio_cell(r)
            ),
            r.map(|r| r <= 3.0),
        );
    }
    let (size, _) = ckpt_sizes(quick)[1];
    let g = ckpt_group();
    let r = s.get(&g, "ckpt_ratio", size);
    goal_row(
        &mut o,
        &format!(
            "checkpoint within 1.5 x of write+fsync+transfer ({} per rank at {CKPT_RANKS} ranks{})",
            size_name(size),
            if quick {
                ", the size of this --quick run: the full run judges 64 MiB"
            } else {
                ""
            }
        ),
        format!(
            "{} ms vs {} ms (write+fsync {} ms + transfer {} ms): {} x",
            cell(s.get(&g, "ckpt_ms", size)),
            cell(s.get(&g, "ckpt_baseline_ms", size)),
            cell(s.get(&g, "ckpt_write_fsync_ms", size)),
            cell(s.get(&g, "ckpt_transfer_ms", size)),
            cell(r)
        ),
        r.map(|r| r.median <= 1.5),
    );
    let _ = writeln!(
        o,
        "| CompositeSig sign / verify (no goal: figures as they are) | {} µs / {} µs (keygen {} µs) | reported |",
        cell(l("sig_sign", 0)),
        cell(l("sig_verify", 0)),
        cell(l("sig_keygen", 0))
    );
    let _ = writeln!(
        o,
        "| TLS 1.3 mutual handshake, 127.0.0.1 (no goal: figure as it is) | {} µs (bare TCP connect {} µs) | reported |",
        cell(l("tls_handshake", 0)),
        cell(l("tcp_connect", 0))
    );
    o
}
