//! The Markdown of `docs/performance.md`, from one `cargo xtask bench` run.

use std::fmt::Write;
use std::process::Command;

use super::{
    ckpt_sizes, group, rss_ranks, Options, Samples, Stat, CKPT_RANKS, COLL_RANKS, RSS_GOAL_RANKS,
    STARTUP_RANKS,
};

const MIB: u64 = 1 << 20;
/// Ping-pong sizes: latency (half round trip) and streaming bandwidth.
pub const LAT_SIZES: [u64; 3] = [8, 1024, 64 * 1024];
/// Streaming sizes.
pub const BW_SIZES: [u64; 3] = [MIB, 16 * MIB, 64 * MIB];
/// Bytes per rank of the collectives.
pub const COLL_SIZES: [u64; 4] = [8, 64 * 1024, MIB, 16 * MIB];
const OPS: [&str; 5] = ["bcast", "reduce", "allreduce", "gather", "scatter"];

/// `8 B`, `64 KiB`, `16 MiB`.
pub fn size_name(b: u64) -> String {
    if b >= MIB && (b / MIB) * MIB == b {
        format!("{} MiB", b / MIB)
    } else if b >= 1024 && (b / 1024) * 1024 == b {
        format!("{} KiB", b / 1024)
    } else {
        format!("{b} B")
    }
}

fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// `median (min..max)` in the figure's unit.
pub(super) fn cell(s: Option<Stat>) -> String {
    match s {
        Some(s) => format!("{} ({}..{})", num(s.median), num(s.min), num(s.max)),
        None => "n/a".into(),
    }
}

/// A time in µs, shown in µs or ms: `median (min..max) unit`.
pub(super) fn time_cell(s: Option<Stat>) -> String {
    match s {
        Some(s) if s.median >= 10_000.0 => format!(
            "{} ms ({}..{})",
            num(s.median / 1e3),
            num(s.min / 1e3),
            num(s.max / 1e3)
        ),
        Some(s) => format!("{} µs ({}..{})", num(s.median), num(s.min), num(s.max)),
        None => "n/a".into(),
    }
}

pub(super) fn ratio(a: Option<Stat>, b: Option<Stat>) -> Option<f64> {
    Some(a?.median / b?.median)
}

pub(super) fn ratio_cell(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.2}")).unwrap_or_else(|| "n/a".into())
}

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map(|kib| format!("{:.1} GiB", kib / 1048576.0))
        .unwrap_or_else(|| "unknown".into());
    let nproc = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!(
        "{nproc} cores (nproc), {model}, {mem} memory, Linux {}, {}",
        sh("uname", &["-r"]),
        sh("rustc", &["-V"])
    )
}

fn goal_row(out: &mut String, goal: &str, measured: String, met: Option<bool>) {
    let verdict = match met {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "n/a (not measured)",
    };
    let _ = writeln!(out, "| {goal} | {measured} | {verdict} |");
}

/// The group of the checkpoint benchmark's figures.
fn ckpt_group() -> String {
    group("sperli", "ckpt", CKPT_RANKS)
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

/// The whole `docs/performance.md`.
pub fn markdown(s: &Samples, opts: &Options, mpi_missing: Option<&str>, secs: f64) -> String {
    let mut o = String::new();
    let runs = opts.runs;
    let date = sh("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let mpi_version = sh("mpirun", &["--version"])
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let cipher = s
        .info
        .get("cipher")
        .cloned()
        .unwrap_or_else(|| "unknown".into());
    let _ = writeln!(o, "# SPERLI performance\n");
    let _ = writeln!(
        o,
        "Written by `{}` on {date} in {secs:.0} s (build included). Do not edit by hand: \
         run `cargo xtask bench` again (`--quick` for a smoke run that writes to \
         `target/bench-quick/` instead). No figure here is checked by a test.\n",
        opts.command
    );
    let _ = writeln!(o, "Machine: {}.", machine());
    let _ = writeln!(
        o,
        "Load average (1, 5, 15 min) before the runs: {}; after: {} (other work on \
         the machine moves the figures; the spreads show how much).",
        s.info.get("load_before").map_or("?", String::as_str),
        s.info.get("load_after").map_or("?", String::as_str)
    );
    let _ = writeln!(
        o,
        "Baseline: {}.\n",
        match mpi_missing {
            Some(why) => format!("none, {why}"),
            None => format!(
                "{mpi_version}, `mpirun --mca btl tcp,self --mca btl_tcp_if_include lo \
                 --oversubscribe`, program `bench/mpi/sperli_mpi_bench.c` (mpicc -O2)"
            ),
        }
    );
    let _ = writeln!(
        o,
        "How it is measured. Every program run is one process tree (a SPERLI job \
         started by `target/release/sperli run`, each rank a `sperli-bench rank` process \
         that joins with `Comm::from_stdin()`; an OpenMPI job started by `mpirun`; the \
         limits in one `sperli-bench limits` process, one blocking thread per side). \
         The whole set runs {runs} times, interleaved: each run measures the limits, then \
         every SPERLI job next to its OpenMPI twin, the twin first in every other run \
         (the memory and checkpoint jobs have no twin). \
         Each figure is the median of the {runs} runs with the spread (min..max of the \
         runs); a run's figure is the mean over its timed iterations after a warm-up \
         (a tenth of them, at least one). Times are µs or ms; GB/s = 10^9 bytes/s; \
         ratios are SPERLI's median over the baseline's median. {}\n",
        if opts.quick {
            "This was a `--quick` run: fewer runs and iterations, for a smoke test only."
        } else {
            ""
        }
    );
    let _ = writeln!(
        o,
        "TLS: SPERLI and the bare rustls baseline negotiate `{cipher}` (rustls 0.23, ring, \
         X25519, TLS 1.3 only: the ring provider's default suite order puts AES-256-GCM \
         first), so the AES-GCM rows below show both key sizes.\n"
    );
    if !s.retries.is_empty() {
        let _ = writeln!(
            o,
            "Started again after a rank lost the launcher's free-port race (AddrInUse; \
             `sperli run` picks a port by binding port 0 and releasing it): {}.\n",
            s.retries.join(", ")
        );
    }
    o.push_str(&goals_section(s, opts.quick));
    o.push('\n');
    o.push_str(&super::latency::section(s));
    o.push('\n');

    // The limits.
    let l = |name: &str, size: u64| s.get("limits", name, size);
    let _ = writeln!(o, "## The limits of this machine\n");
    let _ = writeln!(o, "| what | median (min..max) | unit |");
    let _ = writeln!(o, "|---|---|---|");
    for (name, size, what, unit) in [
        ("memcpy", 16 * MIB, "memcpy 16 MiB (`copy_from_slice`, warm buffers)", "GB/s"),
        ("combine_f64_sum", 16 * MIB, "`combine_into` f64 sum, 16 MiB (bytes of one operand)", "GB/s"),
        ("aes128gcm_seal", 16 * MIB, "AES-128-GCM seal, 16 KiB records (ring aead)", "GB/s"),
        ("aes128gcm_open", 16 * MIB, "AES-128-GCM open, 16 KiB records", "GB/s"),
        ("aes256gcm_seal", 16 * MIB, "AES-256-GCM seal, 16 KiB records", "GB/s"),
        ("aes256gcm_open", 16 * MIB, "AES-256-GCM open, 16 KiB records", "GB/s"),
        ("tcp_connect", 0, "TCP connect + accept, 127.0.0.x", "µs"),
        ("tls_handshake", 0, "TCP connect + TLS 1.3 mutual handshake + SPERLI's subject checks, until the server is done", "µs"),
        ("sig_keygen", 0, "CompositeSig keygen (ML-DSA-44 + Ed25519)", "µs"),
        ("sig_sign", 0, "CompositeSig sign, 46-byte message", "µs"),
        ("sig_verify", 0, "CompositeSig verify", "µs"),
    ] {
        let _ = writeln!(o, "| {what} | {} | {unit} |", cell(l(name, size)));
    }
    let _ = writeln!(
        o,
        "\nThe bare TCP and bare rustls streams are in the ping-pong table below.\n"
    );

    // Ping-pong.
    let pp = |side: &str, name: &str, size: u64| s.get(&group(side, "pingpong", 2), name, size);
    let _ = writeln!(o, "## Ping-pong between two rank processes\n");
    let _ = writeln!(
        o,
        "8 B to 64 KiB: one-way latency = half a round trip (send, the peer echoes), µs. \
         1 to 64 MiB: one-way bandwidth (messages back to back, then a 1-byte ack), GB/s; \
         SPERLI sends 64 MiB with `send_large` (one DATA frame carries at most 16 MiB) and receives it with `recv_large_into` into one reused vector, as the baselines read into one buffer. \
         Bare TCP and bare rustls run in one process, one blocking thread per side, with \
         the same certificates and TLS configuration as SPERLI. Ratios: SPERLI over the \
         baseline (latency: above 1 is slower; bandwidth: below 1 is slower).\n"
    );
    let _ = writeln!(
        o,
        "| size | SPERLI | bare rustls | SPERLI / rustls | OpenMPI (TCP) | SPERLI / OpenMPI | bare TCP |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    for (sizes, sp, mpi, tls, tcp, unit) in [
        (
            LAT_SIZES,
            "sperli_lat",
            "mpi_lat",
            "tls_lat",
            "tcp_lat",
            "µs",
        ),
        (BW_SIZES, "sperli_bw", "mpi_bw", "tls_bw", "tcp_bw", "GB/s"),
    ] {
        for size in sizes {
            let a = pp("sperli", sp, size);
            let m = pp("mpi", mpi, size);
            let t = l(tls, size);
            let _ = writeln!(
                o,
                "| {} ({unit}) | {} | {} | {} | {} | {} | {} |",
                size_name(size),
                cell(a),
                cell(t),
                ratio_cell(ratio(a, t)),
                cell(m),
                ratio_cell(ratio(a, m)),
                cell(l(tcp, size))
            );
        }
    }
    o.push('\n');

    // Collectives.
    let _ = writeln!(o, "## Collectives\n");
    let _ = writeln!(
        o,
        "f64 elements, sum, root 0; size = bytes per rank (gather: each rank's block; \
         scatter: each rank's block of the root's array). Time per call: the slowest \
         rank's mean over the timed calls, which run back to back (calls that do not \
         synchronise, such as bcast and gather of 8 B, may overlap). SPERLI cuts 16 MiB \
         into two calls (16777200 bytes + 16 bytes, the v1 split) and uses the `_into` \
         variants; OpenMPI makes one call. The job negotiates HELLO feature bit 1, so \
         bcast, reduce and allreduce calls of 256 KiB and more run pipelined \
         (docs/sperli-protocol.md §14; the v1 star next to them in \"Pipelined \
         collectives\" below). Ratio: SPERLI time over OpenMPI time (above 1 is \
         slower).\n"
    );
    let mut worst: Option<(f64, String)> = None;
    for n in COLL_RANKS {
        let _ = writeln!(o, "### {n} ranks\n");
        let _ = writeln!(
            o,
            "| operation | size per rank | SPERLI | OpenMPI (TCP) | SPERLI / OpenMPI |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|");
        let mut rows: Vec<(&str, u64)> = vec![("barrier", 0)];
        for size in COLL_SIZES {
            rows.extend(OPS.iter().map(|op| (*op, size)));
        }
        for (op, size) in rows {
            let a = s.get(&group("sperli", "coll", n), op, size);
            let m = s.get(&group("mpi", "coll", n), op, size);
            let r = ratio(a, m);
            if let Some(r) = r {
                if worst.as_ref().is_none_or(|w| r > w.0) {
                    let what = if size == 0 {
                        op.to_string()
                    } else {
                        format!("{op} of {}", size_name(size))
                    };
                    worst = Some((r, format!("{what} at {n} ranks")));
                }
            }
            let _ = writeln!(
                o,
                "| {op} | {} | {} | {} | {} |",
                if size == 0 {
                    "-".into()
                } else {
                    size_name(size)
                },
                time_cell(a),
                time_cell(m),
                ratio_cell(r)
            );
        }
        o.push('\n');
    }
    if let Some((r, what)) = worst {
        let _ = writeln!(o, "Largest gap to OpenMPI in this run: {what}, {r:.1} x.\n");
    }

    // Start-up.
    let _ = writeln!(o, "## Job start-up\n");
    let _ = writeln!(
        o,
        "From the moment the launcher is started (`sperli run -n N -H 127.0.0.1,...`, \
         rank r on 127.0.0.(r+1) as in every SPERLI job here; `mpirun -n N`) until rank 0 has passed a barrier after joining, i.e. every \
         rank is connected: SPERLI's `Comm::from_stdin()` sets up the full TLS mesh \
         (N(N-1)/2 handshakes, a join token checked per peer); OpenMPI connects \
         lazily, so its program first sends one int to and from every other rank. \
         The middle column is when rank 0's `main` started (job CA, certificates, \
         tokens and the process start).\n"
    );
    let _ = writeln!(
        o,
        "| ranks | SPERLI: to all connected (ms) | SPERLI: to rank 0's main (ms) | OpenMPI: to all connected (ms) | SPERLI / OpenMPI |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|");
    for n in STARTUP_RANKS {
        let a = s.get(&group("sperli", "startup", n), "to_all_connected_ms", 0);
        let m0 = s.get(&group("sperli", "startup", n), "to_rank0_main_ms", 0);
        let m = s.get(&group("mpi", "startup", n), "to_all_connected_ms", 0);
        let _ = writeln!(
            o,
            "| {n} | {} | {} | {} | {} |",
            cell(a),
            cell(m0),
            cell(m),
            ratio_cell(ratio(a, m))
        );
    }
    o.push('\n');

    scale_section(&mut o, s, opts.quick);
    ckpt_section(&mut o, s, opts.quick);
    super::mailbox::section(&mut o, s);
    o.push_str(&super::pipelined::section(s, opts));

    let _ = writeln!(o, "## Plots\n");
    let _ = writeln!(
        o,
        "![Bandwidth against message size: SPERLI, OpenMPI, bare rustls, bare TCP](img/bandwidth.svg)\n"
    );
    let _ = writeln!(
        o,
        "![allreduce time against size per rank at 2, 4 and 8 ranks: SPERLI and OpenMPI](img/allreduce.svg)\n"
    );

    let _ = writeln!(o, "## Per-crate benchmarks (earlier runs, kept verbatim)\n");
    let _ = writeln!(
        o,
        "These sections were written by the crates' own `cargo bench` harnesses when \
         those were built; `cargo xtask bench` does not rerun them (its own figures \
         above cover the same goals).\n"
    );
    o.push_str(include_str!("crate_sections.md"));
    o
}

/// Descriptors a rank asks for beyond one per peer (RLIMIT_NOFILE >= size +
/// 64, `needed` in crates/sperli-transport/src/fd_limit.rs).
const FD_MARGIN: u32 = 64;

/// "## Scale": peak RSS and descriptors per rank at each job size of the
/// memory job, the per-connection cost between the smallest and the largest
/// size, and what a rank of the largest job (4096 ranks) needs by that cost.
fn scale_section(o: &mut String, s: &Samples, quick: bool) {
    let sizes = rss_ranks(quick);
    let get = |n: u32, name: &str| s.get(&group("sperli", "rss", n), name, 0);
    let max_size = sperli_wire::limits::MAX_SIZE;
    let _ = writeln!(o, "## Scale: memory and descriptors per rank\n");
    let _ = writeln!(
        o,
        "A job of N ranks (`sperli run -n N -H 127.0.0.1,...`, rank r on 127.0.0.(r+1), \
         `sperli-bench rank rss`); after set-up, a barrier and 20 allreduces of 8 B every \
         rank reads VmHWM (peak RSS) and VmRSS from /proc/self/status and counts its open \
         file descriptors (the entries of /proc/self/fd, without the one that reads them). \
         VmHWM in KiB; descriptors: the largest count of any rank. Each figure is the \
         median (min..max) of the runs. The start-up time at the same sizes is in the \
         start-up table above.\n"
    );
    let _ = writeln!(
        o,
        "| ranks | peers per rank | largest VmHWM (KiB) | median VmHWM (KiB) | descriptors per rank |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|");
    for &n in sizes {
        let _ = writeln!(
            o,
            "| {n} | {} | {} | {} | {} |",
            n - 1,
            cell(get(n, "rss_hwm_max_kib")),
            cell(get(n, "rss_hwm_median_kib")),
            cell(get(n, "fds_max"))
        );
    }
    o.push('\n');
    let (lo, hi) = (sizes[0], sizes[sizes.len() - 1]);
    let figures = (
        get(lo, "rss_hwm_median_kib"),
        get(hi, "rss_hwm_median_kib"),
        get(lo, "fds_max"),
        get(hi, "fds_max"),
    );
    if let (Some(m_lo), Some(m_hi), Some(f_lo), Some(f_hi)) = figures {
        let (p_lo, p_hi, p_max) = (
            f64::from(lo - 1),
            f64::from(hi - 1),
            f64::from(max_size - 1),
        );
        let slope = (m_hi.median - m_lo.median) / (p_hi - p_lo);
        let base = m_lo.median - p_lo * slope;
        let fd_slope = (f_hi.median - f_lo.median) / (p_hi - p_lo);
        let fds_max = f_hi.median - p_hi + p_max;
        let mem_max = base + p_max * slope;
        let limit = max_size + FD_MARGIN;
        let _ = writeln!(
            o,
            "Per-connection cost, from the medians of the median VmHWM: slope = (VmHWM at \
             {hi} ranks - VmHWM at {lo}) / ({} - {} peers) = ({} - {}) / {} = **{slope:.2} KiB \
             per peer**; base = VmHWM at {lo} - {} x slope = **{base:.0} KiB**. Descriptors: \
             ({} - {}) / {} = {fd_slope:.2} per peer (a socket each); the rest, {} at {hi} \
             ranks and {} at {lo}, is stdio, the poller's epoll and eventfd and a few \
             more.\n",
            hi - 1,
            lo - 1,
            num(m_hi.median),
            num(m_lo.median),
            hi - lo,
            lo - 1,
            num(f_hi.median),
            num(f_lo.median),
            hi - lo,
            num(f_hi.median - p_hi),
            num(f_lo.median - p_lo),
        );
        let _ = writeln!(
            o,
            "A rank of a {max_size}-rank job ({} peers), computed from these figures, not \
             measured:\n",
            max_size - 1
        );
        let _ = writeln!(
            o,
            "- descriptors = descriptors at {hi} ranks - {} + {} = {} - {} + {} = **{fds_max:.0}**; \
             the transport asks for RLIMIT_NOFILE >= size + {FD_MARGIN} = {limit} at start \
             (`crates/sperli-transport/src/fd_limit.rs`: it raises the soft limit up to the \
             hard limit and fails when the hard limit is lower): {fds_max:.0} is {} {limit};",
            hi - 1,
            max_size - 1,
            num(f_hi.median),
            hi - 1,
            max_size - 1,
            if fds_max <= f64::from(limit) {
                "within"
            } else {
                "MORE than"
            }
        );
        let _ = writeln!(
            o,
            "- memory = base + {} x slope = {base:.0} + {} x {slope:.2} = **{mem_max:.0} KiB \
             ({:.1} MiB)** of peak RSS, plus its messages (the model is linear in the peers: \
             per-connection state such as TLS sessions and buffers; what a rank receives from \
             many peers at once comes on top).\n",
            max_size - 1,
            max_size - 1,
            mem_max / 1024.0
        );
    } else {
        let _ = writeln!(
            o,
            "No per-connection cost: the median VmHWM or the descriptor count at {lo} or \
             {hi} ranks is missing.\n"
        );
    }
    let g = group("sperli", "rss", RSS_GOAL_RANKS);
    let kib = |name: &str| cell(s.get(&g, name, 0));
    let _ = writeln!(o, "### A rank with {} peers\n", RSS_GOAL_RANKS - 1);
    let _ = writeln!(o, "| figure | KiB, median (min..max) of runs |");
    let _ = writeln!(o, "|---|---|");
    let _ = writeln!(
        o,
        "| largest VmHWM of the ranks | {} |",
        kib("rss_hwm_max_kib")
    );
    let _ = writeln!(
        o,
        "| median VmHWM of the ranks | {} |",
        kib("rss_hwm_median_kib")
    );
    let _ = writeln!(o, "| rank 0's VmHWM | {} |", kib("rss_hwm_rank0_kib"));
    let _ = writeln!(
        o,
        "| largest VmRSS at the end | {} |",
        kib("rss_now_max_kib")
    );
    let _ = writeln!(
        o,
        "| threads of rank 0 | {} |\n",
        cell(s.get(&g, "threads_rank0", 0))
    );
}

/// "## Checkpoints": `checkpoint(state)` at 4 ranks next to write+fsync and
/// transfer of the same bytes, measured in the same job.
fn ckpt_section(o: &mut String, s: &Samples, quick: bool) {
    let g = ckpt_group();
    let sizes = ckpt_sizes(quick);
    let base = s
        .info
        .get("ckpt_base")
        .map_or("the system temp dir", String::as_str);
    let reps = sizes
        .iter()
        .map(|(b, r)| format!("{}: {r}", size_name(*b)))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(o, "## Checkpoints\n");
    let _ = writeln!(
        o,
        "`checkpoint(state)` (sperli-ckpt, docs/sperli-protocol.md §9.4: own file, buddy \
         copy, signed COMMIT) at {CKPT_RANKS} ranks with N bytes of `Vec<u8>` state per \
         rank, in one job `sperli run -n {CKPT_RANKS} -H 127.0.0.1,...,127.0.0.{CKPT_RANKS} \
         --checkpoint-dir DIR -- sperli-bench rank ckpt` (DIR: a fresh directory under \
         {base}, removed after the job), next to what a checkpoint cannot avoid, measured \
         in the same job on the same ranks: *write+fsync* = every rank writes the same \
         bytes plus the 92 bytes a checkpoint adds (rank file header, state prefix) to a \
         file of its own in its checkpoint directory and fsyncs it (all ranks at once); \
         *transfer* = every rank sends the same bytes once to rank (r+1) mod \
         {CKPT_RANKS} and receives its predecessor's (`send_large` / `recv_large`, all \
         ranks at once: the buddy push). Each is rank 0's wall clock between two \
         barriers; a run's figure is the median of its repetitions ({reps}) after two \
         untimed rounds of all three (a job checkpoints the same state again and again: \
         the first checkpoints of a size write new files, later ones write over the files \
         recycled from epoch e - 2), the table shows the median (min..max) of the runs. write+fsync+transfer and the \
         ratio (checkpoint over write+fsync+transfer) are taken per run. Goal: \
         ratio <= 1.5.\n"
    );
    let _ = writeln!(
        o,
        "| state/rank | checkpoint (ms) | write+fsync (ms) | transfer (ms) | write+fsync+transfer (ms) | ratio |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for (size, _) in sizes {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            size_name(size),
            cell(s.get(&g, "ckpt_ms", size)),
            cell(s.get(&g, "ckpt_write_fsync_ms", size)),
            cell(s.get(&g, "ckpt_transfer_ms", size)),
            cell(s.get(&g, "ckpt_baseline_ms", size)),
            cell(s.get(&g, "ckpt_ratio", size))
        );
    }
    super::ckpt::resume_rows(o, s, quick);
    let _ = writeln!(
        o,
        "\nThe same three measurements with the 4 ranks as threads of one process \
         (`sperli-bench ckpt-threads [MIB...]`) and where the time of a checkpoint goes are \
         under \"sperli-ckpt\" below.\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures of a memory job at `n` ranks, as `record` files them.
    fn rss(s: &mut Samples, n: u32, median_kib: f64, fds: f64) {
        let g = group("sperli", "rss", n);
        s.add(&g, "rss_hwm_max_kib", 0, median_kib + 100.0);
        s.add(&g, "rss_hwm_median_kib", 0, median_kib);
        s.add(&g, "fds_max", 0, fds);
    }

    #[test]
    fn scale_section_computes_the_4096_rank_figures() {
        let mut s = Samples::default();
        // 7 and 63 peers: 10 KiB and one descriptor per peer, base 5000 KiB.
        rss(&mut s, 8, 5070.0, 14.0);
        rss(&mut s, 64, 5630.0, 70.0);
        let mut o = String::new();
        scale_section(&mut o, &s, true);
        assert!(o.contains("**10.00 KiB per peer**"), "{o}");
        assert!(o.contains("**5000 KiB**"), "{o}");
        assert!(o.contains("1.00 per peer"), "{o}");
        // 70 - 63 + 4095 descriptors, 5000 + 4095 x 10 KiB.
        assert!(o.contains("= **4102**"), "{o}");
        assert!(o.contains("4102 is within 4160"), "{o}");
        assert!(o.contains("**45950 KiB (44.9 MiB)**"), "{o}");
        assert!(
            o.contains("| 64 | 63 | 5730 (5730..5730) | 5630 (5630..5630) | 70.0 (70.0..70.0) |")
        );
    }

    #[test]
    fn scale_section_says_when_a_size_is_missing() {
        let mut s = Samples::default();
        rss(&mut s, 64, 5630.0, 70.0);
        let mut o = String::new();
        scale_section(&mut o, &s, true);
        assert!(o.contains("No per-connection cost"), "{o}");
        assert!(o.contains("| 8 | 7 | n/a | n/a | n/a |"), "{o}");
    }

    #[test]
    fn checkpoint_goal_uses_the_largest_size_per_run_ratios() {
        let mut s = Samples::default();
        let g = ckpt_group();
        for (c, w, t) in [
            (300.0, 100.0, 100.0),
            (200.0, 50.0, 50.0),
            (900.0, 100.0, 200.0),
        ] {
            s.add(&g, "ckpt_ms", 64 * MIB, c);
            s.add(&g, "ckpt_write_fsync_ms", 64 * MIB, w);
            s.add(&g, "ckpt_transfer_ms", 64 * MIB, t);
            s.add(&g, "ckpt_baseline_ms", 64 * MIB, w + t);
            s.add(&g, "ckpt_ratio", 64 * MIB, c / (w + t));
        }
        let goals = goals_section(&s, false);
        let row = goals
            .lines()
            .find(|l| l.contains("checkpoint within 1.5 x"))
            .expect("a checkpoint goal row");
        // Ratios 1.5, 2.0, 3.0: median 2.0.
        assert!(row.contains("64 MiB per rank at 4 ranks"), "{row}");
        assert!(row.contains(": 2.00 (1.50..3.00) x"), "{row}");
        assert!(row.ends_with("| **not met** |"), "{row}");
        let quick = goals_section(&s, true);
        let row = quick
            .lines()
            .find(|l| l.contains("checkpoint within 1.5 x"))
            .unwrap_or("");
        assert!(row.contains("16 MiB per rank"), "{row}");
        assert!(row.ends_with("| n/a (not measured) |"), "{row}");
        let mut o = String::new();
        ckpt_section(&mut o, &s, false);
        assert!(o.contains("| 64 MiB | 300 (200..900) | 100 (50.0..100) | 100 (50.0..200) | 200 (100..300) | 2.00 (1.50..3.00) |"), "{o}");
        assert!(o.contains("| 1 MiB | n/a | n/a | n/a | n/a | n/a |"), "{o}");
    }
}
