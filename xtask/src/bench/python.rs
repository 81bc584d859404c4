//! The Python rows (docs/python.md): the 8 B `Send`/`Recv` ping-pong
//! ([`pingpong_job`], reported with the point-to-point rows of p2p.rs), and `Allreduce` of float64
//! numpy arrays, 8 B and 16 MiB per rank, at 2 and 4 ranks (127.0.0.1-N;
//! and at 1 rank, where no byte leaves the process: the binding's cost),
//! three programs per job size and run, their order rotating from run to
//! run:
//!
//! - the `sperli` package (`sperli run -- python3 crates/sperli-py/bench/allreduce.py`);
//! - the same Rust call (`sperli-bench rank coll`, `allreduce_into` on the
//!   same chunks): the binding's cost is Python / Rust, per run;
//! - the same script on mpi4py over OpenMPI TCP (`mpirun --mca btl
//!   tcp,self`), when OpenMPI is installed.
//!
//! The virtual environment (`target/python-env`: the package built from
//! the tree with maturin, numpy, pytest, mpi4py) is made here and by
//! `cargo xtask test` ([`setup_commands`]).

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{
    group, mpi_argv, record, run_retrying, spread_hosts, Options, Programs, Samples, MPI_ENV,
};

/// Job sizes of the Python rows (1 rank: no network, the binding's own
/// cost per call).
pub const PY_RANKS: [u32; 3] = [1, 2, 4];
/// Bytes per rank of the Python rows.
pub const PY_SIZES: [u64; 2] = [8, 16 << 20];

/// The virtual environment of the package's tests and benchmark.
pub fn venv_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("python-env")
}

/// Its interpreter.
pub fn venv_python(root: &Path) -> PathBuf {
    venv_dir(root).join("bin").join("python")
}

/// The commands that make the virtual environment (if missing) and
/// install into it numpy, pytest, maturin, mpi4py (`with_mpi4py`: it
/// builds against the system's OpenMPI) and the package from the tree
/// (maturin, the workspace's release profile).
pub fn setup_commands(root: &Path, with_mpi4py: bool) -> Vec<(String, Command)> {
    let dir = venv_dir(root);
    let py = venv_python(root);
    let mut out = Vec::new();
    if !py.is_file() {
        let mut c = Command::new("python3");
        c.arg("-m").arg("venv").arg(&dir).current_dir(root);
        out.push((format!("python3 -m venv {}", dir.display()), c));
    }
    // The environment's bin/ first on PATH: maturin's build backend runs
    // the `maturin` there (no build isolation: no second download of it).
    let mut path = std::ffi::OsString::from(dir.join("bin"));
    if let Some(p) = std::env::var_os("PATH") {
        path.push(":");
        path.push(p);
    }
    let pip = |args: &[&str]| {
        let mut c = Command::new(&py);
        c.args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
            .args(args)
            .env("PATH", &path)
            .env("VIRTUAL_ENV", &dir)
            .current_dir(root);
        c
    };
    let mut deps = vec!["numpy", "pytest", "maturin>=1.16,<2"];
    if with_mpi4py {
        deps.push("mpi4py");
    }
    out.push((format!("pip install {}", deps.join(" ")), pip(&deps)));
    out.push((
        "pip install ./crates/sperli-py (maturin, release)".to_string(),
        pip(&["--no-build-isolation", "./crates/sperli-py"]),
    ));
    out
}

/// Runs [`setup_commands`]; returns the interpreter.
pub fn setup(root: &Path, with_mpi4py: bool) -> Result<PathBuf, String> {
    for (name, mut c) in setup_commands(root, with_mpi4py) {
        println!("==> {name}");
        match c.status() {
            Ok(s) if s.success() => {}
            Ok(s) => return Err(format!("`{name}` failed ({s})")),
            Err(e) => return Err(format!("`{name}` could not start: {e}")),
        }
    }
    Ok(venv_python(root))
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Python,
    Rust,
    Mpi4py,
}

impl Side {
    fn word(self) -> &'static str {
        match self {
            Side::Python => "sperli",
            Side::Rust => "rust",
            Side::Mpi4py => "mpi4py",
        }
    }
}

/// The group of one side's figures at `n` ranks, e.g. `py.sperli.4`.
pub fn py_group(side: &str, n: u32) -> String {
    group("py", side, n)
}

/// One run of the Python rows: every job size, the three sides in an
/// order that rotates with `run`; files the figures and the run's ratios.
pub(super) fn job(
    p: &Programs,
    opts: &Options,
    python: &Path,
    run: usize,
    samples: &mut Samples,
) -> Result<(), String> {
    let root = crate::workspace_root();
    let script = root.join("crates/sperli-py/bench/allreduce.py");
    let sizes: Vec<String> = PY_SIZES.iter().map(u64::to_string).collect();
    let sizes = sizes.join(",");
    let mut sides = [Side::Python, Side::Rust, Side::Mpi4py];
    sides.rotate_left(run % 3);
    for n in PY_RANKS {
        // This run's figure per side and size, for the run's ratios.
        let mut this_run: Vec<(Side, u64, f64)> = Vec::new();
        for side in sides {
            let mut script_args = vec![
                script.display().to_string(),
                "--sizes".into(),
                sizes.clone(),
            ];
            if side == Side::Mpi4py {
                script_args.push("--mpi4py".into());
            }
            if opts.quick {
                script_args.push("--quick".into());
            }
            // `sperli run -n N -H 127.0.0.1,... -- PROGRAM ARGS`.
            let sperli_run = |program: &Path, args: Vec<String>| {
                let mut v = vec![
                    p.sperli.display().to_string(),
                    "run".into(),
                    "-n".into(),
                    n.to_string(),
                    "-H".into(),
                    spread_hosts(n),
                    "--".into(),
                    program.display().to_string(),
                ];
                v.extend(args);
                v
            };
            let (argv, env): (Vec<String>, Vec<(&str, &str)>) = match side {
                Side::Python => (sperli_run(python, script_args), Vec::new()),
                Side::Rust => {
                    let mut a = vec!["rank".to_string(), "coll".to_string()];
                    if opts.quick {
                        a.push("--quick".into());
                    }
                    (
                        sperli_run(&p.bench, a),
                        vec![("SPERLI_BENCH_SIZES", sizes.as_str())],
                    )
                }
                Side::Mpi4py => match &p.mpi {
                    Ok((mpirun, _)) => {
                        let a: Vec<&str> = script_args.iter().map(String::as_str).collect();
                        (mpi_argv(mpirun, python, n, &a), MPI_ENV.to_vec())
                    }
                    Err(_) => continue,
                },
            };
            let label = format!("python {} n={n}", side.word());
            let o = run_retrying(&label, &argv, &env, samples)?;
            println!("    {label}: {:.1} s", o.secs);
            for size in PY_SIZES {
                match o.results.iter().find(|r| r.0 == "allreduce" && r.1 == size) {
                    Some(r) => this_run.push((side, size, r.2)),
                    None => return Err(format!("{label}: no allreduce figure for {size} bytes")),
                }
            }
            record(samples, &py_group(side.word(), n), &o);
        }
        // This run's ratios, from this run's three figures.
        for size in PY_SIZES {
            let last = |side: Side| -> Option<f64> {
                this_run
                    .iter()
                    .find(|f| f.0 == side && f.1 == size)
                    .map(|f| f.2)
            };
            if let (Some(py), Some(rust)) = (last(Side::Python), last(Side::Rust)) {
                samples.add(&py_group("sperli", n), "binding_ratio", size, py / rust);
                samples.add(&py_group("sperli", n), "binding_us", size, py - rust);
            }
            if let (Some(py), Some(m)) = (last(Side::Python), last(Side::Mpi4py)) {
                samples.add(&py_group("sperli", n), "mpi4py_ratio", size, py / m);
            }
        }
    }
    Ok(())
}

/// One run of the Python ping-pong row: `crates/sperli-py/bench/pingpong.py`
/// at 2 ranks (127.0.0.1-2) on the `sperli` package under `sperli run`
/// and, when OpenMPI is installed, on mpi4py under `mpirun`, the order
/// alternating with `run`; files `pingpong` (8 B one-way, µs) in
/// `py.sperli.2` and `py.mpi4py.2` (reported by `p2p::python_row`).
pub(super) fn pingpong_job(
    p: &Programs,
    opts: &Options,
    python: &Path,
    run: usize,
    samples: &mut Samples,
) -> Result<(), String> {
    let root = crate::workspace_root();
    let script = root.join("crates/sperli-py/bench/pingpong.py");
    let mut sides = [Side::Python, Side::Mpi4py];
    if run % 2 == 1 {
        sides.reverse();
    }
    for side in sides {
        let mut args = vec![script.display().to_string()];
        if side == Side::Mpi4py {
            args.push("--mpi4py".into());
        }
        if opts.quick {
            args.push("--quick".into());
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let (argv, env): (Vec<String>, &[(&str, &str)]) = match side {
            Side::Mpi4py => match &p.mpi {
                Ok((mpirun, _)) => (mpi_argv(mpirun, python, 2, &a), &MPI_ENV),
                Err(_) => continue,
            },
            _ => {
                let mut v = vec![
                    p.sperli.display().to_string(),
                    "run".into(),
                    "-n".into(),
                    "2".into(),
                    "-H".into(),
                    spread_hosts(2),
                    "--".into(),
                    python.display().to_string(),
                ];
                v.extend(args.iter().cloned());
                (v, &[])
            }
        };
        let label = format!("python pingpong {} n=2", side.word());
        let o = run_retrying(&label, &argv, env, samples)?;
        println!("    {label}: {:.1} s", o.secs);
        if !o.results.iter().any(|r| r.0 == "pingpong" && r.1 == 8) {
            return Err(format!("{label}: no pingpong figure for 8 bytes"));
        }
        record(samples, &py_group(side.word(), 2), &o);
    }
    Ok(())
}

fn time_text(us: Option<super::Stat>) -> String {
    match us {
        Some(s) if s.median >= 10_000.0 => format!(
            "{:.2} ms ({:.2}..{:.2})",
            s.median / 1e3,
            s.min / 1e3,
            s.max / 1e3
        ),
        Some(s) => format!("{:.1} µs ({:.1}..{:.1})", s.median, s.min, s.max),
        None => "n/a".into(),
    }
}

/// The "## Python" section of docs/performance.md.
pub(super) fn section(o: &mut String, s: &Samples) {
    let _ = writeln!(o, "## Python (the `sperli` package)\n");
    let _ = writeln!(
        o,
        "`Allreduce(x, y, op=SUM)` of float64 numpy arrays, the same script \
         (`crates/sperli-py/bench/allreduce.py`) on the `sperli` package under \
         `sperli run` and on mpi4py over OpenMPI TCP (`mpirun --mca btl tcp,self`, \
         mpi4py built against the system's OpenMPI in `target/python-env`), next to \
         the Rust call it makes (`sperli-bench rank coll`: one `allreduce_into` \
         per row). Ranks on 127.0.0.1-N. Each figure \
         is the slowest rank's mean per call after a warm-up; the table shows the \
         median (min..max) of the runs. The binding's cost is Python / Rust per \
         run (1.00: none), then the median of the runs; the extra time is \
         Python - Rust per run. At 1 rank no byte leaves the process: what is \
         left is the cost of the call itself.\n"
    );
    let _ = writeln!(
        o,
        "| Allreduce | ranks | sperli (Python) | Rust call | mpi4py on OpenMPI TCP | binding cost (Python / Rust) | extra time (µs) | sperli Python / mpi4py |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
    for size in PY_SIZES {
        for n in PY_RANKS {
            let g = |side: &str, name: &str| s.get(&py_group(side, n), name, size);
            let _ = writeln!(
                o,
                "| {} float64 | {n} | {} | {} | {} | {} | {} | {} |",
                super::report::size_name(size),
                time_text(g("sperli", "allreduce")),
                time_text(g("rust", "allreduce")),
                time_text(g("mpi4py", "allreduce")),
                super::report::cell(g("sperli", "binding_ratio")),
                super::report::cell(g("sperli", "binding_us")),
                super::report::cell(g("sperli", "mpi4py_ratio")),
            );
        }
    }
    if let Some(v) = s.info.get("python_api_mpi4py") {
        let _ = writeln!(o, "\nBaseline: {v}.");
    }
    o.push('\n');
}

/// The report of a `--python` run alone (`target/bench-python/performance.md`):
/// how it was made, the machine's load, the section.
pub(super) fn document(s: &Samples, opts: &Options, secs: f64) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# SPERLI performance: the Python rows\n");
    let _ = writeln!(
        o,
        "Written by `{}` in {secs:.0} s (build included); the full `cargo xtask bench` \
         writes the same section into docs/performance.md.\n",
        opts.command
    );
    let _ = writeln!(
        o,
        "Load average (1, 5, 15 min) before the runs: {}; after: {}.\n",
        s.info.get("load_before").map_or("?", String::as_str),
        s.info.get("load_after").map_or("?", String::as_str)
    );
    section(&mut o, s);
    let _ = writeln!(o, "## Python ping-pong\n");
    super::p2p::table_head(&mut o);
    super::p2p::python_row(&mut o, s);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_shows_every_row_and_the_ratios() {
        let mut s = Samples::default();
        for (side, v) in [("sperli", 90.0), ("rust", 80.0), ("mpi4py", 10.0)] {
            s.add(&py_group(side, 2), "allreduce", 8, v);
            s.add(&py_group(side, 4), "allreduce", 16 << 20, v * 1000.0);
        }
        s.add(&py_group("sperli", 2), "binding_ratio", 8, 1.125);
        let mut o = String::new();
        section(&mut o, &s);
        let row = |needle: &str| o.lines().find(|l| l.contains(needle)).unwrap().to_string();
        assert!(
            row("| 8 B float64 | 2 |").contains("| 90.0 µs (90.0..90.0) | 80.0 µs"),
            "{o}"
        );
        assert!(
            row("| 8 B float64 | 2 |").contains("| 1.12 (1.12..1.12) |"),
            "{o}"
        );
        assert!(
            row("| 16 MiB float64 | 4 |").contains("| 90.00 ms (90.00..90.00) |"),
            "{o}"
        );
        assert!(
            row("| 8 B float64 | 4 |").ends_with("| n/a | n/a | n/a | n/a | n/a |"),
            "{o}"
        );
    }
}
