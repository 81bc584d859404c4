//! The rows of point-to-point on communicators (HELLO feature bit 3,
//! protocol §16), each next to its same-run baseline:
//!
//! - synchronous sends: the one-way latency of an `ssend` ping-pong (8 B
//!   and 1 KiB; `sperli-bench rank p2p`, crates/sperli-bench/src/p2p.rs)
//!   next to OpenMPI's `MPI_Ssend` ping-pong (`sperli_mpi_bench ssend`),
//!   with the standard `send` of the same jobs beside them;
//! - a dup: the 8 B latency and the 16 MiB stream on `comm.dup()` next to
//!   the same on the job's communicator, interleaved in the same job (the
//!   ratio is taken per run, the table shows their median);
//! - Python: the 8 B `Send`/`Recv` ping-pong of `sperli.MPI` next to mpi4py
//!   on OpenMPI (python.rs runs it, [`python_row`] reports it).

use std::fmt::Write;

use super::report::{cell, ratio, ratio_cell, time_cell};
use super::{
    group, mpi_argv, record, run_retrying, sperli_argv, spread_hosts, Options, Programs, Samples,
    Stat, MPI_ENV,
};

/// The stream's message size (as `crates/sperli-bench/src/p2p.rs`).
const STREAM: u64 = 16 << 20;
/// Sizes of the latency rows.
const LAT_SIZES: [u64; 2] = [8, 1024];
/// Goal of `ssend` and of the Python ping-pong: at most this times OpenMPI.
const SSEND_GOAL: f64 = 2.0;
/// Goal of the dup's latency: at most this times the job's communicator.
const DUP_LAT_GOAL: f64 = 1.15;
/// Goal of the dup's stream: at least this times the job's communicator.
const DUP_BW_GOAL: f64 = 0.87;

/// The group of the SPERLI job's figures.
fn sperli_group() -> String {
    group("sperli", "p2p", 2)
}

/// The group of the OpenMPI job's figures.
fn mpi_group() -> String {
    group("mpi", "ssend", 2)
}

/// The SPERLI figures the section cannot do without.
const SPERLI_FIGURES: [(&str, u64); 7] = [
    ("p2p_send_lat", 8),
    ("p2p_ssend_lat", 8),
    ("p2p_dup_lat", 8),
    ("p2p_send_lat", 1024),
    ("p2p_ssend_lat", 1024),
    ("p2p_world_bw", STREAM),
    ("p2p_dup_bw", STREAM),
];

/// One run: `sperli-bench rank p2p` at 2 ranks (127.0.0.1-2) and its
/// OpenMPI twin `sperli_mpi_bench ssend` (when OpenMPI is installed), the
/// twin first in every other run. Files the figures and the run's
/// dup / job ratios.
pub(super) fn jobs(
    p: &Programs,
    opts: &Options,
    run: usize,
    samples: &mut Samples,
) -> Result<(), String> {
    let mut sides = [true, false];
    if run % 2 == 1 {
        sides.reverse();
    }
    for sperli in sides {
        if sperli {
            let mut a = vec!["rank", "p2p"];
            if opts.quick {
                a.push("--quick");
            }
            let argv = sperli_argv(p, 2, Some(spread_hosts(2)), &[], &a);
            let label = "sperli p2p n=2";
            let o = run_retrying(label, &argv, &[], samples)?;
            println!("    {label}: {:.1} s", o.secs);
            let find = |k: &str, size: u64| {
                o.results
                    .iter()
                    .find(|r| r.0 == k && r.1 == size)
                    .map(|r| r.2)
            };
            if let Some((k, size)) = SPERLI_FIGURES
                .iter()
                .find(|(k, size)| find(k, *size).is_none())
            {
                return Err(format!("{label}: figure {k} for {size} bytes missing"));
            }
            let g = sperli_group();
            record(samples, &g, &o);
            if let (Some(d), Some(w)) = (find("p2p_dup_lat", 8), find("p2p_send_lat", 8)) {
                samples.add(&g, "dup_lat_ratio", 8, d / w);
            }
            if let (Some(d), Some(w)) = (find("p2p_dup_bw", STREAM), find("p2p_world_bw", STREAM)) {
                samples.add(&g, "dup_bw_ratio", STREAM, d / w);
            }
        } else {
            let Ok((mpirun, prog)) = &p.mpi else {
                continue;
            };
            let mut a = vec!["ssend"];
            if opts.quick {
                a.push("--quick");
            }
            let argv = mpi_argv(mpirun, prog, 2, &a);
            let label = "mpi ssend n=2";
            let o = run_retrying(label, &argv, &MPI_ENV, samples)?;
            println!("    {label}: {:.1} s", o.secs);
            record(samples, &mpi_group(), &o);
        }
    }
    Ok(())
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "n/a (not measured)",
    }
}

/// One row of the table.
struct Row<'a> {
    what: String,
    figure: String,
    baseline: String,
    ratio: Option<f64>,
    /// `<= 2 x` or `>= 0.87 x`; `None`: a figure for comparison, no goal.
    goal: Option<(bool, f64)>,
    command: &'a str,
}

fn write_row(o: &mut String, r: &Row) {
    let (goal, met) = match r.goal {
        Some((at_most, g)) => (
            format!("{} {g} x", if at_most { "<=" } else { ">=" }),
            verdict(r.ratio.map(|q| if at_most { q <= g } else { q >= g })),
        ),
        None => ("- (for comparison)".to_string(), "-"),
    };
    let _ = writeln!(
        o,
        "| {} | {} | {} | {} | {goal} | {met} | {} |",
        r.what,
        r.figure,
        r.baseline,
        ratio_cell(r.ratio),
        r.command
    );
}

const SPERLI_CMD: &str = "`sperli run -n 2 -H 127.0.0.1,127.0.0.2 -- sperli-bench rank p2p`";
const MPI_CMD: &str = "`mpirun -n 2 sperli_mpi_bench ssend`";
const PY_CMD: &str =
    "`sperli run -n 2 -H 127.0.0.1,127.0.0.2 -- target/python-env/bin/python crates/sperli-py/bench/pingpong.py`; \
     `mpirun -n 2 target/python-env/bin/python crates/sperli-py/bench/pingpong.py --mpi4py`";

/// The Python ping-pong row (python.rs files its figures): `sperli.MPI`
/// next to mpi4py on OpenMPI.
pub(super) fn python_row(o: &mut String, s: &Samples) {
    let py = s.get(&super::python::py_group("sperli", 2), "pingpong", 8);
    let m = s.get(&super::python::py_group("mpi4py", 2), "pingpong", 8);
    write_row(
        o,
        &Row {
            what: "Python 8 B one-way, `comm.Send`/`comm.Recv` of a numpy array (`from sperli import MPI`)".into(),
            figure: time_cell(py),
            baseline: format!("mpi4py on OpenMPI TCP {}", time_cell(m)),
            ratio: ratio(py, m),
            goal: Some((true, SSEND_GOAL)),
            command: PY_CMD,
        },
    );
}

/// The table's head.
pub(super) fn table_head(o: &mut String) {
    let _ = writeln!(
        o,
        "| figure | SPERLI median (min..max) | baseline median (min..max) | ratio | goal | verdict | command |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
}

/// The section of `docs/performance.md` with these rows.
pub(super) fn section(s: &Samples) -> String {
    let sp = |name: &str, size: u64| s.get(&sperli_group(), name, size);
    let mpi = |name: &str, size: u64| s.get(&mpi_group(), name, size);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "## Point-to-point on communicators (HELLO feature bit 3)\n"
    );
    let _ = writeln!(
        o,
        "Messages name their communicator (docs/sperli-protocol.md §16). Two ranks on \
         127.0.0.1 and 127.0.0.2; one-way latency is half a round trip. \
         `sperli-bench rank p2p` (crates/sperli-bench/src/p2p.rs) measures, through \
         `Comm`, a ping-pong with `ssend` both ways (rank 0 `ssend`, rank 1 `recv_into` \
         then `ssend` back), the same with `send`, the same `send` ping-pong on \
         `comm.dup()`, and a 16 MiB stream (messages back to back, then a 1-byte ack) on \
         the job's communicator and on the dup. The variants of one size run \
         interleaved in the same job, in rounds whose order rotates, so drift hits \
         each alike. Its OpenMPI twin `sperli_mpi_bench ssend` does the same with \
         `MPI_Ssend` and `MPI_Send` (`--mca btl tcp,self`). Each figure is the median \
         (min..max) of the runs. Ratios: SPERLI's median over OpenMPI's; for the dup, \
         dup over the job's communicator per run (same job), then the median of the \
         runs (latency: above 1 is slower; stream: below 1 is slower).\n"
    );
    table_head(&mut o);
    for size in LAT_SIZES {
        let name = super::report::size_name(size);
        let (a, m) = (sp("p2p_ssend_lat", size), mpi("mpi_ssend_lat", size));
        write_row(
            &mut o,
            &Row {
                what: format!("`ssend` {name} one-way (`ssend` ping-pong)"),
                figure: time_cell(a),
                baseline: format!("OpenMPI `MPI_Ssend` {}", time_cell(m)),
                ratio: ratio(a, m),
                goal: Some((true, SSEND_GOAL)),
                command: &format!("{SPERLI_CMD}; {MPI_CMD}"),
            },
        );
    }
    for size in LAT_SIZES {
        let name = super::report::size_name(size);
        let (a, m) = (sp("p2p_send_lat", size), mpi("mpi_send_lat", size));
        write_row(
            &mut o,
            &Row {
                what: format!("`send` {name} one-way, the same jobs (`send` ping-pong)"),
                figure: time_cell(a),
                baseline: format!("OpenMPI `MPI_Send` {}", time_cell(m)),
                ratio: ratio(a, m),
                goal: None,
                command: &format!("{SPERLI_CMD}; {MPI_CMD}"),
            },
        );
    }
    write_row(
        &mut o,
        &Row {
            what: "8 B one-way on `comm.dup()` (`send` ping-pong)".into(),
            figure: time_cell(sp("p2p_dup_lat", 8)),
            baseline: format!(
                "the job's communicator {}",
                time_cell(sp("p2p_send_lat", 8))
            ),
            ratio: sp("dup_lat_ratio", 8).map(|r| r.median),
            goal: Some((true, DUP_LAT_GOAL)),
            command: SPERLI_CMD,
        },
    );
    write_row(
        &mut o,
        &Row {
            what: "16 MiB stream on `comm.dup()` (GB/s)".into(),
            figure: format!("{} GB/s", cell(sp("p2p_dup_bw", STREAM))),
            baseline: format!(
                "the job's communicator {} GB/s",
                cell(sp("p2p_world_bw", STREAM))
            ),
            ratio: sp("dup_bw_ratio", STREAM).map(|r| r.median),
            goal: Some((false, DUP_BW_GOAL)),
            command: SPERLI_CMD,
        },
    );
    python_row(&mut o, s);
    let cost = |ss: Option<Stat>, st: Option<Stat>| ratio_cell(ratio(ss, st));
    let _ = writeln!(
        o,
        "\nWhat a synchronous send costs over a standard one (`ssend` / `send` of the \
         same jobs, 8 B; 1 KiB): SPERLI {}; {}, OpenMPI {}; {}. The Python rows' \
         script is the same file on both sides (`--mpi4py` swaps the import); the \
         `sperli` package is the one `target/python-env` holds, built from the tree.\n",
        cost(sp("p2p_ssend_lat", 8), sp("p2p_send_lat", 8)),
        cost(sp("p2p_ssend_lat", 1024), sp("p2p_send_lat", 1024)),
        cost(mpi("mpi_ssend_lat", 8), mpi("mpi_send_lat", 8)),
        cost(mpi("mpi_ssend_lat", 1024), mpi("mpi_send_lat", 1024)),
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_judges_each_goal() {
        let mut s = Samples::default();
        let g = sperli_group();
        for (k, size, v) in [
            ("p2p_ssend_lat", 8, 50.0),
            ("p2p_send_lat", 8, 20.0),
            ("p2p_dup_lat", 8, 21.0),
            ("p2p_ssend_lat", 1024, 90.0),
            ("p2p_send_lat", 1024, 30.0),
            ("p2p_world_bw", STREAM, 1.0),
            ("p2p_dup_bw", STREAM, 0.5),
            ("dup_lat_ratio", 8, 1.05),
            ("dup_bw_ratio", STREAM, 0.5),
        ] {
            s.add(&g, k, size, v);
        }
        for (k, size, v) in [
            ("mpi_ssend_lat", 8, 30.0),
            ("mpi_send_lat", 8, 10.0),
            ("mpi_ssend_lat", 1024, 40.0),
            ("mpi_send_lat", 1024, 15.0),
        ] {
            s.add(&mpi_group(), k, size, v);
        }
        s.add(
            &super::super::python::py_group("sperli", 2),
            "pingpong",
            8,
            60.0,
        );
        let o = section(&s);
        let row = |needle: &str| o.lines().find(|l| l.contains(needle)).unwrap().to_string();
        // 50 / 30 = 1.67 <= 2; 90 / 40 = 2.25 > 2.
        assert!(
            row("`ssend` 8 B one-way").contains("| 1.67 | <= 2 x | **met** |"),
            "{o}"
        );
        assert!(
            row("`ssend` 1 KiB one-way").contains("| 2.25 | <= 2 x | **not met** |"),
            "{o}"
        );
        assert!(
            row("`send` 8 B one-way").contains("| 2.00 | - (for comparison) | - |"),
            "{o}"
        );
        assert!(
            row("8 B one-way on `comm.dup()`").contains("| 1.05 | <= 1.15 x | **met** |"),
            "{o}"
        );
        assert!(
            row("16 MiB stream on").contains("| 0.50 | >= 0.87 x | **not met** |"),
            "{o}"
        );
        // No mpi4py figure: no ratio, no verdict.
        assert!(
            row("Python 8 B").contains("| n/a | <= 2 x | n/a (not measured) |"),
            "{o}"
        );
        assert!(o.contains("SPERLI 2.50; 3.00, OpenMPI 3.00; 2.67."), "{o}");
    }
}
