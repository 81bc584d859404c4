//! The Jacobi row of `cargo xtask bench`: halo-exchange steps per second
//! of the example `crates/sperli-collective/examples/jacobi.rs` at 4 ranks
//! under `sperli run` (ranks on 127.0.0.1-4), next to the same program
//! against OpenMPI over TCP (`bench/mpi/sperli_mpi_jacobi.c`, built with
//! `mpicc` as the other baseline) in the same run, the two in alternating
//! order. A step is one halo exchange with both neighbours (DATA), the
//! sweep of the rank's block and one allreduce (max) of the change; the
//! tolerance is 0, so every job makes exactly the asked number of steps,
//! and each program checks its result against the serial iteration.

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::programs::{is_root, on_path};
use super::{mpi_argv, spread_hosts, Options, Programs, Samples, MPI_ENV, TIMEOUT};

/// The group of the Jacobi figures (figures `sperli` and `mpi`, size = ranks).
pub const GROUP: &str = "jacobi";
/// The job size of the row.
pub const RANKS: u32 = 4;
/// Grid points: 1000 per rank, so the step is communication-bound.
pub const POINTS: u32 = 4000;

/// Steps per job.
fn steps(quick: bool) -> u32 {
    if quick {
        2_000
    } else {
        20_000
    }
}

/// The release build of the example and the compiled C twin (`Err`: why
/// it is missing), made once per `cargo xtask bench`.
struct Built {
    example: PathBuf,
    mpi: Result<PathBuf, String>,
}

fn built(root: &Path, p: &Programs) -> Result<&'static Built, String> {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            println!("==> cargo build --release -p sperli-collective --example jacobi");
            let st = Command::new(cargo)
                .args(["build", "--release", "-p", "sperli-collective"])
                .args(["--example", "jacobi"])
                .current_dir(root)
                .status()
                .map_err(|e| format!("cannot run cargo: {e}"))?;
            if !st.success() {
                return Err(format!(
                    "the release build of the jacobi example failed ({st})"
                ));
            }
            let release = p
                .sperli
                .parent()
                .ok_or("the sperli binary has no directory")?;
            let mpi = match (&p.mpi, on_path("mpicc")) {
                (Ok(_), Some(mpicc)) => {
                    let out = release.join("sperli_mpi_jacobi");
                    let src = root.join("bench/mpi/sperli_mpi_jacobi.c");
                    println!("==> mpicc -O2 -o {} {} -lm", out.display(), src.display());
                    let st = Command::new(mpicc)
                        .args(["-O2", "-Wall", "-o"])
                        .arg(&out)
                        .arg(&src)
                        .arg("-lm")
                        .status()
                        .map_err(|e| format!("cannot run mpicc: {e}"))?;
                    if !st.success() {
                        return Err(format!("mpicc failed ({st}) on {}", src.display()));
                    }
                    Ok(out)
                }
                (Err(why), _) => Err(why.clone()),
                (Ok(_), None) => Err("no mpicc on PATH".into()),
            };
            Ok(Built {
                example: release.join("examples/jacobi"),
                mpi,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Runs `argv` to its end (bounded: the launcher's `--timeout`, and
/// OpenMPI's `--timeout`); the `steps_per_s` figure of rank 0's line,
/// which must also say `serial same`. Started again (at most twice) when
/// a rank lost the launcher's free-port race (AddrInUse).
fn steps_per_s(label: &str, argv: &[String], env: &[(&str, &str)]) -> Result<f64, String> {
    for attempt in 0.. {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd
            .output()
            .map_err(|e| format!("{label}: cannot start {}: {e}", argv[0]))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            if attempt < 2 && stderr.contains("AddrInUse") {
                println!(
                    "    {label}: a rank's port was taken (AddrInUse); starting the job again"
                );
                continue;
            }
            return Err(format!(
                "{label}: {} exited with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
                argv.join(" "),
                out.status
            ));
        }
        let line = stdout
            .lines()
            .find(|l| l.contains("jacobi: ") && l.contains("serial same"))
            .ok_or_else(|| format!("{label}: no checked result line in\n{stdout}"))?;
        let mut words = line.split_whitespace();
        let v = words
            .by_ref()
            .skip_while(|w| *w != "steps_per_s")
            .nth(1)
            .and_then(|w| w.parse::<f64>().ok())
            .ok_or_else(|| format!("{label}: no steps_per_s in {line:?}"))?;
        return Ok(v);
    }
    unreachable!("the loop returns")
}

/// Runs the Jacobi jobs of run number `run` and files their figures.
pub(super) fn job(
    p: &Programs,
    opts: &Options,
    run: usize,
    samples: &mut Samples,
) -> Result<(), String> {
    let b = built(&crate::workspace_root(), p)?;
    let args = [
        POINTS.to_string(),
        steps(opts.quick).to_string(),
        "0".into(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut sides = ["sperli", "mpi"];
    if run % 2 == 1 {
        sides.reverse();
    }
    for side in sides {
        let (argv, env): (Vec<String>, &[(&str, &str)]) = match (side, &b.mpi, &p.mpi) {
            ("sperli", _, _) => {
                let mut v = vec![p.sperli.display().to_string(), "run".into(), "-n".into()];
                v.push(RANKS.to_string());
                v.extend(["--timeout".into(), TIMEOUT.as_secs().to_string()]);
                v.extend(["-H".into(), spread_hosts(RANKS), "--".into()]);
                v.push(b.example.display().to_string());
                v.extend(args.iter().map(|s| s.to_string()));
                (v, &[])
            }
            (_, Ok(prog), Ok((mpirun, _))) => {
                let mut v = mpi_argv(mpirun, prog, RANKS, &args);
                // OpenMPI's own bound, as the launcher's --timeout.
                v.insert(1 + usize::from(is_root()), "--timeout".into());
                v.insert(2 + usize::from(is_root()), TIMEOUT.as_secs().to_string());
                (v, &MPI_ENV)
            }
            _ => continue,
        };
        let label = format!("jacobi {side} {RANKS}");
        let v = steps_per_s(&label, &argv, env)?;
        println!("    {label}: {v:.0} steps/s");
        samples.add(GROUP, side, u64::from(RANKS), v);
    }
    Ok(())
}

/// The "## Jacobi" section of docs/performance.md.
pub(super) fn section(o: &mut String, s: &Samples, opts: &Options) {
    let g = |side: &str| s.get(GROUP, side, u64::from(RANKS));
    let _ = writeln!(o, "## Jacobi example: halo-exchange steps per second\n");
    let _ = writeln!(
        o,
        "`crates/sperli-collective/examples/jacobi.rs` under `sperli run -n {RANKS}` \
         (ranks on 127.0.0.1-{RANKS}), {POINTS} grid points ({} per rank), {} steps per \
         job, tolerance 0, next to the same program in C against OpenMPI over TCP \
         (`bench/mpi/sperli_mpi_jacobi.c`, `mpirun --mca btl tcp,self`) in the same run. \
         A step is one halo exchange with both neighbours, the sweep and one allreduce \
         (max); both programs check their result against the serial iteration, bit for \
         bit. Median (min..max) of the runs.\n",
        POINTS / RANKS,
        steps(opts.quick)
    );
    let _ = writeln!(
        o,
        "| ranks | SPERLI steps/s | OpenMPI steps/s | SPERLI / OpenMPI |"
    );
    let _ = writeln!(o, "|---|---|---|---|");
    let (a, m) = (g("sperli"), g("mpi"));
    let _ = writeln!(
        o,
        "| {RANKS} | {} | {} | {} |\n",
        super::report::cell(a),
        super::report::cell(m),
        super::report::ratio_cell(super::report::ratio(a, m))
    );
}
