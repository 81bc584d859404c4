//! `cargo xtask bench [--quick] [--write-docs] [--runs N] [--python] [--simnet]`.
//!
//! Builds `sperli-bench` and the `sperli` launcher in release mode (and
//! `bench/mpi/sperli_mpi_bench.c` with `mpicc` when OpenMPI is installed),
//! then runs every benchmark several times, interleaved: each run measures
//! the limits, then each SPERLI job next to its OpenMPI twin (their order
//! alternates from run to run), so drift of the machine hits both sides.
//! Each figure is the median of the runs with its spread (min..max). The
//! memory/descriptor jobs (`rank rss`) and the checkpoint job (`rank ckpt`,
//! in a fresh checkpoint directory on a real disk, followed by a later run
//! of the same job that resumes it, `rank resume`; the directory is
//! removed afterwards) have no OpenMPI twin.
//!
//! The full run writes `docs/performance.md` and `docs/img/*.svg`; `--quick`
//! (fewer runs and iterations, under five minutes on 2 cores) writes to
//! `target/bench-quick/` unless `--write-docs` is given. It fails only when
//! a program crashes, errs, times out or prints no figure: never on a slow
//! figure.
//!
//! The point-to-point rows on communicators (p2p.rs: `ssend` next to
//! `MPI_Ssend`, a dup next to the job's communicator) run after the
//! latency rows. Each run ends with the Python rows (python.rs: the
//! `sperli` package next to the Rust call and mpi4py, and its 8 B
//! ping-pong next to mpi4py's); `--python` runs only those and writes
//! `target/bench-python/performance.md`. Run as root, each run then
//! measures the simulated cluster (simnet.rs: `scripts/simnet.sh`'s
//! namespaces, 4 and 8 nodes at 1 Gbit/s, next to OpenMPI on the same
//! nodes); elsewhere its section says why it was skipped. `--simnet` runs
//! only those and writes `target/bench-simnet/performance.md`.

mod ckpt;
mod jacobi;
mod latency;
mod link_bound;
mod mailbox;
mod overlap;
mod p2p;
mod pipelined;
mod plot;
mod programs;
pub mod python;
mod recovery;
mod report;
mod simnet;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use programs::{
    build, mpi_argv, run_program, run_retrying, sperli_argv, spread_hosts, unix_ns, Output,
    Programs, MPI_ENV,
};

/// Job sizes of the collective benchmarks.
pub const COLL_RANKS: [u32; 3] = [2, 4, 8];
/// Job sizes of the start-up benchmark (both sides; OpenMPI runs with
/// `--oversubscribe`).
pub const STARTUP_RANKS: [u32; 6] = [2, 4, 8, 16, 32, 64];
/// Job sizes of the peak-RSS and descriptor measurement (rank r on
/// 127.0.0.(r+1)).
pub const RSS_RANKS: [u32; 4] = [8, 16, 32, 64];
/// The same with `--quick`: the smallest and the largest, enough for the
/// per-connection cost.
pub const RSS_RANKS_QUICK: [u32; 2] = [8, 64];
/// The job size of the peak-RSS goal (a rank with 63 peers).
pub const RSS_GOAL_RANKS: u32 = 64;
/// Job size of the checkpoint benchmark.
pub const CKPT_RANKS: u32 = 4;
/// (state bytes per rank, repetitions per run) of the checkpoint benchmark,
/// as `sperli-bench rank ckpt` measures them (`crates/sperli-bench/src/ckpt.rs`).
pub const CKPT_SIZES: [(u64, usize); 2] = [(1 << 20, 9), (64 << 20, 3)];
/// The same with `--quick`.
pub const CKPT_SIZES_QUICK: [(u64, usize); 2] = [(1 << 20, 5), (16 << 20, 3)];

/// The job sizes of the peak-RSS measurement in this run.
pub fn rss_ranks(quick: bool) -> &'static [u32] {
    if quick {
        &RSS_RANKS_QUICK
    } else {
        &RSS_RANKS
    }
}

/// The checkpoint benchmark's sizes and repetitions in this run.
pub fn ckpt_sizes(quick: bool) -> [(u64, usize); 2] {
    if quick {
        CKPT_SIZES_QUICK
    } else {
        CKPT_SIZES
    }
}

/// How long one program may run before it counts as hung.
const TIMEOUT: Duration = Duration::from_secs(600);

/// Median, spread and count of one figure's runs.
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Stat {
    fn of(v: &[f64]) -> Option<Stat> {
        if v.is_empty() {
            return None;
        }
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: s[0],
            max: s[n - 1],
            n,
        })
    }
}

/// Every figure of every run: (group, name, size) -> one value per run.
#[derive(Default)]
pub struct Samples {
    map: BTreeMap<(String, String, u64), Vec<f64>>,
    /// `INFO` lines (e.g. the negotiated cipher suite), last one wins.
    pub info: BTreeMap<String, String>,
    /// Jobs started again after the launcher's free-port race.
    pub retries: Vec<String>,
}

impl Samples {
    fn add(&mut self, group: &str, name: &str, size: u64, v: f64) {
        self.map
            .entry((group.to_string(), name.to_string(), size))
            .or_default()
            .push(v);
    }

    /// The statistics of one figure, if it was measured.
    pub fn get(&self, group: &str, name: &str, size: u64) -> Option<Stat> {
        self.map
            .get(&(group.to_string(), name.to_string(), size))
            .and_then(|v| Stat::of(v))
    }
}

/// What the run was asked to do.
pub struct Options {
    pub quick: bool,
    pub runs: usize,
    pub write_docs: bool,
    /// `--python`: only the Python rows (python.rs), reported in
    /// `target/bench-python/performance.md`.
    pub python_only: bool,
    /// `--simnet`: only the simulated cluster's rows (simnet.rs), reported
    /// in `target/bench-simnet/performance.md`.
    pub simnet_only: bool,
    /// The command line as typed, for the report.
    pub command: String,
}

/// One benchmark program of a run.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Sperli,
    Mpi,
}

#[derive(Clone, Copy)]
enum Mode {
    PingPong,
    Coll(u32),
    Startup(u32),
    Rss(u32),
    Ckpt,
}

impl Mode {
    fn word(self) -> &'static str {
        match self {
            Mode::PingPong => "pingpong",
            Mode::Coll(_) => "coll",
            Mode::Startup(_) => "startup",
            Mode::Rss(_) => "rss",
            Mode::Ckpt => "ckpt",
        }
    }
    fn ranks(self) -> u32 {
        match self {
            Mode::PingPong => 2,
            Mode::Coll(n) | Mode::Startup(n) | Mode::Rss(n) => n,
            Mode::Ckpt => CKPT_RANKS,
        }
    }
    /// Whether the OpenMPI program has the same mode.
    fn has_twin(self) -> bool {
        !matches!(self, Mode::Rss(_) | Mode::Ckpt)
    }
}

/// The group a figure is filed under, e.g. `sperli.coll.4`.
pub fn group(side: &str, mode: &str, n: u32) -> String {
    format!("{side}.{mode}.{n}")
}

fn record(samples: &mut Samples, grp: &str, o: &Output) {
    for (name, size, v) in &o.results {
        samples.add(grp, name, *size, *v);
    }
    for (k, v) in &o.info {
        samples.info.insert(k.clone(), v.clone());
    }
}

/// The file system type of the mount that holds `dir` (from /proc/mounts:
/// the longest mount point that is a prefix of it), if known.
fn fs_type(dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // Mount points escape blanks as \040.
            let point = w.get(1)?.replace("\\040", " ");
            Some((PathBuf::from(point), w.get(2)?.to_string()))
        })
        .filter(|(point, _)| dir.starts_with(point))
        .max_by_key(|(point, _)| point.components().count())
        .map(|(_, fs)| fs)
}

/// Where the checkpoint benchmark's directories go: the system temp dir,
/// or /var/tmp when the temp dir is in memory (tmpfs, ramfs: fsync would
/// measure nothing), with its file system type.
fn ckpt_base() -> (PathBuf, String) {
    let in_memory = |fs: &str| matches!(fs, "tmpfs" | "ramfs");
    let tmp = std::env::temp_dir();
    let tmp_fs = fs_type(&tmp).unwrap_or_else(|| "unknown file system".into());
    if in_memory(&tmp_fs) {
        let var = PathBuf::from("/var/tmp");
        if let Some(fs) = fs_type(&var).filter(|fs| !in_memory(fs)) {
            return (var, fs);
        }
    }
    (tmp, tmp_fs)
}

/// A new, not yet existing checkpoint directory under [`ckpt_base`] (the
/// launcher creates it).
pub(super) fn fresh_ckpt_dir(samples: &mut Samples) -> Result<PathBuf, String> {
    let (base, fs) = ckpt_base();
    samples
        .info
        .insert("ckpt_base".into(), format!("{} ({fs})", base.display()));
    let dir = base.join(format!(
        "sperli-bench-ckpt-{}-{}",
        std::process::id(),
        unix_ns() as u128
    ));
    if dir.exists() {
        return Err(format!(
            "the checkpoint directory {} exists already",
            dir.display()
        ));
    }
    Ok(dir)
}

/// Files the checkpoint job's figures and, per size, the run's baseline
/// (write+fsync + transfer) and ratio (checkpoint / baseline).
fn record_ckpt(
    samples: &mut Samples,
    grp: &str,
    label: &str,
    o: &Output,
    quick: bool,
) -> Result<(), String> {
    record(samples, grp, o);
    for (size, _) in ckpt_sizes(quick) {
        let find = |k: &str| {
            o.results
                .iter()
                .find(|r| r.0 == k && r.1 == size)
                .map(|r| r.2)
        };
        let (Some(c), Some(w), Some(t)) = (
            find("ckpt_ms"),
            find("ckpt_write_fsync_ms"),
            find("ckpt_transfer_ms"),
        ) else {
            return Err(format!(
                "{label}: checkpoint figures missing for {size} bytes per rank"
            ));
        };
        samples.add(grp, "ckpt_baseline_ms", size, w + t);
        samples.add(grp, "ckpt_ratio", size, c / (w + t));
    }
    Ok(())
}

/// The figures of the memory job the report cannot do without.
const RSS_FIGURES: [&str; 3] = ["rss_hwm_max_kib", "rss_hwm_median_kib", "fds_max"];

/// Runs one benchmark job on one side and files its figures.
fn job(
    p: &Programs,
    opts: &Options,
    side: Side,
    mode: Mode,
    samples: &mut Samples,
) -> Result<(), String> {
    let n = mode.ranks();
    let mut args = vec![mode.word()];
    if opts.quick {
        args.push("--quick");
    }
    let ckpt_dir = match (side, mode) {
        (Side::Sperli, Mode::Ckpt) => Some(fresh_ckpt_dir(samples)?),
        _ => None,
    };
    let (name, argv, env): (&str, Vec<String>, &[(&str, &str)]) = match side {
        Side::Sperli => {
            let mut a = vec!["rank"];
            a.extend(&args);
            let launcher: Vec<String> = match &ckpt_dir {
                Some(d) => ckpt::launcher_args(d),
                None => Vec::new(),
            };
            (
                "sperli",
                sperli_argv(p, n, Some(spread_hosts(n)), &launcher, &a),
                &[],
            )
        }
        Side::Mpi if !mode.has_twin() => return Ok(()),
        Side::Mpi => match &p.mpi {
            Ok((mpirun, prog)) => ("mpi", mpi_argv(mpirun, prog, n, &args), &MPI_ENV),
            Err(_) => return Ok(()),
        },
    };
    let label = format!("{name} {} n={n}", mode.word());
    let mut o = run_retrying(&label, &argv, env, samples);
    if let (Some(d), Ok(_)) = (&ckpt_dir, &o) {
        if let Err(e) = ckpt::resume_job(p, d, opts.quick, samples) {
            o = Err(e);
        }
    }
    if let Some(d) = &ckpt_dir {
        if d.exists() {
            std::fs::remove_dir_all(d).map_err(|e| {
                format!(
                    "{label}: cannot remove the checkpoint directory {}: {e}",
                    d.display()
                )
            })?;
        }
    }
    let o = o?;
    println!("    {label}: {:.1} s", o.secs);
    let grp = group(name, mode.word(), n);
    match mode {
        Mode::Startup(_) => {
            let find = |k: &str| o.results.iter().find(|r| r.0 == k).map(|r| r.2);
            let (Some(main), Some(done)) =
                (find("rank0_main_unix_ns"), find("all_connected_unix_ns"))
            else {
                return Err(format!("{label}: start-up figures missing"));
            };
            samples.add(&grp, "to_rank0_main_ms", 0, (main - o.spawned_ns) / 1e6);
            samples.add(&grp, "to_all_connected_ms", 0, (done - o.spawned_ns) / 1e6);
        }
        Mode::Ckpt => record_ckpt(samples, &grp, &label, &o, opts.quick)?,
        Mode::Rss(_) => {
            if let Some(k) = RSS_FIGURES
                .iter()
                .find(|k| !o.results.iter().any(|r| r.0 == **k))
            {
                return Err(format!("{label}: figure {k} missing"));
            }
            record(samples, &grp, &o)
        }
        _ => record(samples, &grp, &o),
    }
    Ok(())
}

fn measure(p: &Programs, opts: &Options, python: &Path) -> Result<Samples, String> {
    let mut samples = Samples::default();
    for run in 0..opts.runs {
        println!("==> run {} of {}", run + 1, opts.runs);
        if opts.python_only {
            python::job(p, opts, python, run, &mut samples)?;
            python::pingpong_job(p, opts, python, run, &mut samples)?;
            continue;
        }
        if opts.simnet_only {
            simnet::jobs(p, opts, run, &mut samples)?;
            continue;
        }
        let mut args = vec![p.bench.display().to_string(), "limits".to_string()];
        if opts.quick {
            args.push("--quick".into());
        }
        let o = run_program("limits", &args, &[])?;
        println!("    limits: {:.1} s", o.secs);
        record(&mut samples, "limits", &o);
        // Alternate which side goes first, so neither always runs on a
        // machine warmed (or heated) by the other.
        let order = if run % 2 == 0 {
            [Side::Sperli, Side::Mpi]
        } else {
            [Side::Mpi, Side::Sperli]
        };
        let mut modes = vec![Mode::PingPong];
        modes.extend(COLL_RANKS.iter().map(|&n| Mode::Coll(n)));
        modes.extend(STARTUP_RANKS.iter().map(|&n| Mode::Startup(n)));
        modes.extend(rss_ranks(opts.quick).iter().map(|&n| Mode::Rss(n)));
        modes.push(Mode::Ckpt);
        for mode in modes {
            for side in order {
                job(p, opts, side, mode, &mut samples)?;
            }
        }
        latency::spin_off(p, opts, &mut samples)?;
        p2p::jobs(p, opts, run, &mut samples)?;
        mailbox::job(p, opts, &mut samples)?;
        pipelined::jobs(p, opts, run, &mut samples)?;
        overlap::jobs(p, opts, &mut samples)?;
        jacobi::job(p, opts, run, &mut samples)?;
        recovery::jobs(p, opts, &mut samples)?;
        python::job(p, opts, python, run, &mut samples)?;
        python::pingpong_job(p, opts, python, run, &mut samples)?;
        simnet::jobs(p, opts, run, &mut samples)?;
    }
    Ok(samples)
}

/// The 1, 5 and 15 minute load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `cargo xtask bench`: returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let quick = args.iter().any(|a| a == "--quick");
    let python_only = args.iter().any(|a| a == "--python");
    let simnet_only = args.iter().any(|a| a == "--simnet");
    let write_docs =
        (args.iter().any(|a| a == "--write-docs") || !quick) && !python_only && !simnet_only;
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 3 } else { 7 });
    if let Some(bad) = args.iter().enumerate().find(|(i, a)| {
        let after_runs = *i > 0 && args[i - 1] == "--runs";
        !after_runs
            && !matches!(
                a.as_str(),
                "--quick" | "--write-docs" | "--runs" | "--python" | "--simnet"
            )
    }) {
        eprintln!(
            "xtask bench: unknown argument {:?}\nusage: cargo xtask bench [--quick] [--write-docs] [--runs N] [--python] [--simnet]",
            bad.1
        );
        return 2;
    }
    let mut command = "cargo xtask bench".to_string();
    for a in args {
        command.push(' ');
        command.push_str(a);
    }
    let opts = Options {
        quick,
        runs: runs.max(1),
        write_docs,
        python_only,
        simnet_only,
        command,
    };
    let root = crate::workspace_root();
    let started = Instant::now();
    let programs = match build(&root) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("xtask bench: {e}");
            return 1;
        }
    };
    let python = if opts.simnet_only {
        PathBuf::new() // no Python rows
    } else {
        match python::setup(&root, programs.mpi.is_ok()) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("xtask bench: the Python environment: {e}");
                return 1;
            }
        }
    };
    let load_before = loadavg();
    let samples = match measure(&programs, &opts, &python) {
        Ok(mut s) => {
            s.info.insert("load_before".into(), load_before);
            s.info.insert("load_after".into(), loadavg());
            let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
            s.info.insert("cores".into(), cores.to_string());
            s
        }
        Err(e) => {
            eprintln!("xtask bench: {e}");
            return 1;
        }
    };
    if opts.python_only || opts.simnet_only {
        let (dir, text) = if opts.python_only {
            let secs = started.elapsed().as_secs_f64();
            (
                "target/bench-python",
                python::document(&samples, &opts, secs),
            )
        } else {
            ("target/bench-simnet", simnet::section(&samples, &opts))
        };
        let doc = root.join(dir).join("performance.md");
        if let Err(e) =
            std::fs::create_dir_all(root.join(dir)).and_then(|_| std::fs::write(&doc, &text))
        {
            eprintln!("xtask bench: cannot write {}: {e}", doc.display());
            return 1;
        }
        println!("{text}");
        println!("xtask bench: wrote {}", doc.display());
        return 0;
    }
    let (doc, img) = if opts.write_docs {
        (root.join("docs/performance.md"), root.join("docs/img"))
    } else {
        let d = root.join("target/bench-quick");
        (d.join("performance.md"), d.join("img"))
    };
    let secs = started.elapsed().as_secs_f64();
    let mpi_note = programs.mpi.as_ref().err().cloned();
    let text = report::markdown(&samples, &opts, mpi_note.as_deref(), secs);
    if let Err(e) = std::fs::create_dir_all(&img)
        .map_err(|e| e.to_string())
        .and_then(|_| plot::bandwidth(&samples, &img.join("bandwidth.svg")))
        .and_then(|_| plot::allreduce(&samples, &img.join("allreduce.svg")))
        .and_then(|_| pipelined::plot(&samples, &img.join("allreduce-pipelined.svg")))
        .and_then(|_| std::fs::write(&doc, &text).map_err(|e| e.to_string()))
    {
        eprintln!("xtask bench: cannot write the report: {e}");
        return 1;
    }
    println!("{}", report::goals_section(&samples, opts.quick));
    println!("{}", pipelined::goals(&samples));
    println!("{}", latency::section(&samples));
    println!("{}", p2p::section(&samples));
    println!(
        "xtask bench: wrote {} and {}/{{bandwidth,allreduce,allreduce-pipelined}}.svg in {secs:.0} s",
        doc.display(),
        img.display()
    );
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(results: &[(&str, u64, f64)]) -> Output {
        Output {
            results: results
                .iter()
                .map(|(n, s, v)| (n.to_string(), *s, *v))
                .collect(),
            info: Vec::new(),
            spawned_ns: 0.0,
            secs: 0.0,
        }
    }

    #[test]
    fn record_ckpt_files_the_baseline_and_ratio_per_run() {
        let mut s = Samples::default();
        let mut figures = Vec::new();
        for (size, _) in CKPT_SIZES_QUICK {
            figures.push(("ckpt_ms", size, 30.0));
            figures.push(("ckpt_write_fsync_ms", size, 5.0));
            figures.push(("ckpt_transfer_ms", size, 10.0));
        }
        record_ckpt(&mut s, "g", "label", &output(&figures), true).expect("complete figures");
        let r = s.get("g", "ckpt_ratio", 16 << 20).expect("a ratio");
        assert_eq!(r.median, 2.0);
        let b = s.get("g", "ckpt_baseline_ms", 1 << 20).expect("a baseline");
        assert_eq!(b.median, 15.0);
    }

    #[test]
    fn record_ckpt_names_a_missing_figure() {
        let mut s = Samples::default();
        let o = output(&[("ckpt_ms", 1 << 20, 30.0)]);
        let e = record_ckpt(&mut s, "g", "sperli ckpt n=4", &o, false).unwrap_err();
        assert!(
            e.contains("sperli ckpt n=4: checkpoint figures missing for 1048576 bytes"),
            "{e}"
        );
    }

    #[test]
    fn fs_type_finds_the_root_mount() {
        // Every Linux machine has a mount at /; /proc is procfs.
        assert!(fs_type(Path::new("/")).is_some());
        assert_eq!(fs_type(Path::new("/proc/self")).as_deref(), Some("proc"));
    }
}
