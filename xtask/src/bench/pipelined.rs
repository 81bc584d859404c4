//! The pipelined-collective rows of `cargo xtask bench` (protocol §14):
//! `sperli-bench rank pipe` at 2, 4 and 8
//! ranks as it is (every rank announces HELLO feature bit 1: large calls
//! run pipelined) and with `SPERLI_FEATURES=1` (v1 only: the star), next to
//! the OpenMPI twin (`sperli_mpi_bench pipe`) in the same run; the three
//! jobs of a job size run back to back, in an order that rotates from run
//! to run. The report section, its goals and the allreduce-against-size
//! plot are here too.

use std::fmt::Write;
use std::path::Path;

use plotters::style::RGBColor;

use super::plot::{draw, Series};
use super::report::size_name;
use super::{
    group, link_bound, mpi_argv, record, run_retrying, sperli_argv, spread_hosts, Options,
    Programs, Samples, Stat, MPI_ENV,
};

const MIB: u64 = 1 << 20;
/// Job sizes of the pipelined rows.
pub const PIPE_RANKS: [u32; 3] = [2, 4, 8];
/// Bytes per rank (as `crates/sperli-bench/src/pipelined.rs`).
pub const PIPE_SIZES: [u64; 9] = [
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
/// The largest size that must stay on the star (the goal: "no row from 8 B
/// to 64 KiB may be slower than the v1 star"; protocol §14.5: "Calls of up
/// to 64 KiB therefore send exactly the v1 frames in a job with bit 1").
const SMALL_MAX: u64 = 64 * 1024;

/// The three sides of a pipelined row.
#[derive(Clone, Copy)]
enum Side {
    Pipe,
    Star,
    Mpi,
}

/// Runs the pipelined jobs of run number `run` and files their figures:
/// group `sperli.pipe.N` (figures `pipe_*` and `star_*`) and `mpi.pipe.N`.
pub(super) fn jobs(
    p: &Programs,
    opts: &Options,
    run: usize,
    samples: &mut Samples,
) -> Result<(), String> {
    let mut order = [Side::Pipe, Side::Star, Side::Mpi];
    order.rotate_left(run % 3);
    for n in PIPE_RANKS {
        for side in order {
            let mut args = vec!["pipe"];
            if opts.quick {
                args.push("--quick");
            }
            let (label, grp, argv, env): (&str, String, Vec<String>, &[(&str, &str)]) = match side {
                Side::Pipe | Side::Star => {
                    let mut a = vec!["rank"];
                    a.extend(&args);
                    let argv = sperli_argv(p, n, Some(spread_hosts(n)), &[], &a);
                    let (label, env): (&str, &[(&str, &str)]) = match side {
                        Side::Pipe => ("sperli pipe", &[]),
                        _ => ("sperli star", &[(sperli_wire::env::FEATURES, "1")]),
                    };
                    (label, group("sperli", "pipe", n), argv, env)
                }
                Side::Mpi => match &p.mpi {
                    Ok((mpirun, prog)) => (
                        "mpi pipe",
                        group("mpi", "pipe", n),
                        mpi_argv(mpirun, prog, n, &args),
                        &MPI_ENV,
                    ),
                    Err(_) => continue,
                },
            };
            let label = format!("{label} n={n}");
            let o = run_retrying(&label, &argv, env, samples)?;
            println!("    {label}: {:.1} s", o.secs);
            record(samples, &grp, &o);
        }
    }
    Ok(())
}

fn time(s: Option<Stat>) -> String {
    match s {
        Some(s) if s.median >= 10_000.0 => format!(
            "{:.1} ms ({:.1}..{:.1})",
            s.median / 1e3,
            s.min / 1e3,
            s.max / 1e3
        ),
        Some(s) => format!("{:.0} µs ({:.0}..{:.0})", s.median, s.min, s.max),
        None => "n/a".into(),
    }
}

fn ratio(a: Option<Stat>, b: Option<Stat>) -> Option<f64> {
    Some(a?.median / b?.median)
}

fn ratio_cell(r: Option<f64>) -> String {
    r.map_or("n/a".into(), |r| format!("{r:.2}"))
}

/// The three figures of `op` at `bytes` per rank and `n` ranks.
fn row(s: &Samples, n: u32, op: &str, bytes: u64) -> [Option<Stat>; 3] {
    let sp = group("sperli", "pipe", n);
    [
        s.get(&sp, &format!("pipe_{op}"), bytes),
        s.get(&sp, &format!("star_{op}"), bytes),
        s.get(&group("mpi", "pipe", n), &format!("mpi_{op}"), bytes),
    ]
}

/// Whether the pipelined job is no slower than the star at the small sizes
/// (which send the same v1 frames on both sides): slower only where even
/// its fastest run is slower than the star's slowest.
fn small_rows_ok(s: &Samples) -> (Option<bool>, Vec<String>) {
    let mut ok = None;
    let mut slower = Vec::new();
    for n in PIPE_RANKS {
        for op in ["allreduce", "bcast"] {
            for bytes in PIPE_SIZES.iter().copied().filter(|&b| b <= SMALL_MAX) {
                let [p, st, _] = row(s, n, op, bytes);
                if let (Some(p), Some(st)) = (p, st) {
                    let fine = p.min <= st.max;
                    ok = Some(ok.unwrap_or(true) && fine);
                    if !fine {
                        slower.push(format!(
                            "{op} {} at {n} ranks ({:.0} vs {:.0} µs)",
                            size_name(bytes),
                            p.median,
                            st.median
                        ));
                    }
                }
            }
        }
    }
    (ok, slower)
}

/// The goals of the pipelined collectives with met / not met.
pub(super) fn goals(s: &Samples) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "| goal (pipelined collectives) | measured (medians) | verdict |"
    );
    let _ = writeln!(o, "|---|---|---|");
    for (op, n, bytes, limit) in [
        ("allreduce", 4, 16 * MIB, Some(1.3)),
        ("allreduce", 8, 16 * MIB, Some(1.3)),
        ("bcast", 4, 16 * MIB, Some(1.3)),
        ("bcast", 8, 16 * MIB, Some(1.3)),
        ("allreduce", 4, 64 * MIB, None),
    ] {
        let [p, st, m] = row(s, n, op, bytes);
        let r = ratio(p, m);
        let goal = match limit {
            Some(l) => format!(
                "{op} {} at {n} ranks, pipelined <= {l} x OpenMPI (TCP)",
                size_name(bytes)
            ),
            None => format!(
                "{op} {} at {n} ranks (figures as they are)",
                size_name(bytes)
            ),
        };
        let verdict = match (limit, r) {
            (Some(l), Some(r)) if r <= l => "**met**",
            (Some(_), Some(_)) => "**not met**",
            (None, Some(_)) => "reported",
            _ => "n/a (not measured)",
        };
        let _ = writeln!(
            o,
            "| {goal} | pipelined {} vs OpenMPI {}: {} x (v1 star {}: {} x OpenMPI) | {verdict} |",
            time(p),
            time(m),
            ratio_cell(r),
            time(st),
            ratio_cell(ratio(st, m)),
        );
    }
    let (ok, slower) = small_rows_ok(s);
    let _ = writeln!(
        o,
        "| no row from 8 B to 64 KiB slower than the v1 star (allreduce and bcast at {} ranks; both jobs send the same v1 frames there, so a row counts as slower only when the pipelined job's fastest run is slower than the star's slowest) | {} | {} |",
        PIPE_RANKS.map(|n| n.to_string()).join(", "),
        if slower.is_empty() {
            "no row distinguishably slower".to_string()
        } else {
            format!("slower: {}", slower.join("; "))
        },
        match ok {
            Some(true) => "**met**",
            Some(false) => "**not met**",
            None => "n/a (not measured)",
        }
    );
    o
}

/// `## Pipelined collectives`: goals, tables, the plot, the notes.
pub(super) fn section(s: &Samples, opts: &Options) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "## Pipelined collectives (HELLO feature bit 1, protocol §14)\n"
    );
    let _ = writeln!(
        o,
        "Figures of this section: `{}`, {} run(s){}; load average before {}, after {}.\n",
        opts.command,
        opts.runs,
        if opts.quick {
            ", `--quick` (fewer iterations)"
        } else {
            ""
        },
        s.info.get("load_before").map_or("?", String::as_str),
        s.info.get("load_after").map_or("?", String::as_str)
    );
    let _ = writeln!(
        o,
        "`sperli-bench rank pipe` (crates/sperli-bench/src/pipelined.rs): allreduce (f64 \
         sum) and bcast (root 0) per call, `allreduce_into` and `bcast_into`, \
         so the pipelined job makes one call per row (docs/sperli-protocol.md §14) and \
         the v1 star job the v1 split (two calls at 16 MiB, five at 64 MiB). The star \
         job is the same job with `SPERLI_FEATURES=1` (every rank announces bit 0 only). \
         OpenMPI: `sperli_mpi_bench pipe`, one `MPI_Allreduce` / `MPI_Bcast` per row. \
         The three jobs of a job size run back to back in every run, in an order that \
         rotates from run to run. Time per call: the slowest rank's mean over the timed \
         calls (1000 up to 1 KiB, 100 at 64 KiB, 50 at 256 KiB and 1 MiB, 5 from 4 to \
         16 MiB, 3 above, after a warm-up of a tenth of them, at least one; the same \
         on every side).\n"
    );
    o.push_str(&goals(s));
    o.push('\n');
    let mut missed = Vec::new();
    let mut out_of_reach = Vec::new();
    for n in PIPE_RANKS {
        let _ = writeln!(o, "### {n} ranks\n");
        let _ = writeln!(
            o,
            "| operation | size per rank | pipelined | v1 star | OpenMPI (TCP) | pipelined / star | pipelined / OpenMPI | link bound | pipelined / bound | goal |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|");
        for op in ["allreduce", "bcast"] {
            for bytes in PIPE_SIZES {
                let [p, st, m] = row(s, n, op, bytes);
                let bound = link_bound::loopback_us(s, op, n, bytes);
                let goal = link_bound::loopback_goal(p, m, bound);
                let floor = link_bound::cpu_floor_us(s, op, n, bytes);
                let beyond = link_bound::out_of_reach(goal, floor, m, bound);
                if goal == Some(false) {
                    missed.push(format!("{op} {} at {n} ranks", size_name(bytes)));
                }
                if beyond {
                    out_of_reach.push(format!("{op} {} at {n} ranks", size_name(bytes)));
                }
                let _ = writeln!(
                    o,
                    "| {op} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |",
                    size_name(bytes),
                    time(p),
                    time(st),
                    time(m),
                    ratio_cell(ratio(p, st)),
                    ratio_cell(ratio(p, m)),
                    link_bound::bound_cell(bound),
                    ratio_cell(p.zip(bound).map(|(p, b)| p.median / b)),
                    link_bound::goal_cell(goal),
                    if beyond { " (floor)" } else { "" }
                );
            }
        }
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "Rows not met (goal and link bound as in \"Collectives\"): {}.\n",
        link_bound::missed_list(&missed)
    );
    let _ = writeln!(
        o,
        "Of these, out of reach on this machine by their CPU floor (as in \
         \"Collectives\"; \"(floor)\"): {}.\n",
        link_bound::missed_list(&out_of_reach)
    );
    let _ = writeln!(
        o,
        "![allreduce time against size per rank, pipelined, v1 star and OpenMPI](img/allreduce-pipelined.svg)\n"
    );
    o.push_str(include_str!("pipelined_notes.md"));
    o
}

/// allreduce time per call against size per rank at 4 and 8 ranks:
/// pipelined, v1 star, OpenMPI.
pub(super) fn plot(s: &Samples, path: &Path) -> Result<(), String> {
    let mut series: Vec<Series> = Vec::new();
    let colors = [
        ("pipelined", [RGBColor(230, 110, 30), RGBColor(150, 60, 0)]),
        ("v1 star", [RGBColor(220, 60, 60), RGBColor(120, 0, 0)]),
        (
            "OpenMPI (TCP)",
            [RGBColor(60, 110, 230), RGBColor(10, 20, 120)],
        ),
    ];
    for (k, n) in [4u32, 8].into_iter().enumerate() {
        for (i, (label, c)) in colors.iter().enumerate() {
            let pts: Vec<(f64, f64)> = PIPE_SIZES
                .iter()
                .filter_map(|&b| row(s, n, "allreduce", b)[i].map(|t| (b as f64, t.median)))
                .collect();
            series.push((format!("{label}, {n} ranks"), c[k], pts));
        }
    }
    draw(
        path,
        "allreduce (f64 sum) time per call: pipelined, v1 star, OpenMPI",
        "bytes per rank (1k = 1000)",
        "µs (log)",
        &series,
    )
}
