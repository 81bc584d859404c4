//! `cargo xtask test`: the project's one test command (README, `.ci/run`).
//!
//! Runs, in order: the house checks (`cargo fmt --all --check`, `cargo
//! clippy --workspace --all-targets -- -D warnings`, `cargo doc --workspace
//! --no-deps` with rustdoc's warnings denied), `cargo test --workspace`, the `#[ignore]`d tests where
//! asked (below), `cargo xtask vectors --check`, the independent Python
//! checker on `docs/sperli-vectors.txt` and the checker's own tests, then
//! the Python package (crates/sperli-py): a virtual environment in
//! `target/python-env` with numpy, pytest, maturin (and mpi4py where
//! OpenMPI is installed, for the benchmark) and the package built from the
//! tree, its pytest suite against the tree's `sperli` launcher, the
//! example under `sperli run -n 4`, and mpi4py's own test suite on
//! `sperli.MPI` at 1, 2 and 4 ranks held to `scripts/mpi4py-expected.txt`
//! (`scripts/mpi4py-suite.py --expect`) and its demo programs
//! (`scripts/mpi4py-demos.py`). Stops at the first failing step.
//!
//! `SPERLI_SLOW_TESTS=1` also runs every `#[ignore]`d test but the Slurm
//! one (`cargo test --workspace -- --ignored --skip slurm_`: the scale runs,
//! the 30 s set-up window cases, the tests that mount a tmpfs as root);
//! `SPERLI_SLURM_TESTS=1` runs the Slurm cluster test (`-- --ignored
//! slurm_`). An ignored test never passes without running: it is either
//! run and judged, or listed as ignored.
//!
//! `--fuzz SECONDS` also runs every cargo-fuzz target for SECONDS from the
//! committed seed corpus (`scripts/fuzz-smoke.sh`); `--bench-quick` also
//! runs `cargo xtask bench --quick` as a smoke test (it fails on a crash or
//! an error, never on a slow figure). `.ci/run` sets both.

use std::path::Path;
use std::process::Command;

fn step(name: &str, cmd: &mut Command) -> bool {
    println!("==> {name}");
    match cmd.status() {
        Ok(s) if s.success() => true,
        Ok(s) => {
            eprintln!("xtask test: step `{name}` failed ({s})");
            false
        }
        Err(e) => {
            eprintln!("xtask test: step `{name}` could not start: {e}");
            false
        }
    }
}

/// The Python package's steps: its virtual environment, the launcher its
/// tests start, pytest (whose closing line CI shows), the example.
fn python_steps(root: &Path, cargo: &str, steps: &mut Vec<(String, Command)>) {
    let mpi = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("mpicc").is_file()));
    steps.extend(crate::bench::python::setup_commands(root, mpi));
    let mut c = Command::new(cargo);
    c.args(["build", "-p", "sperli-launch", "--bin", "sperli"])
        .current_dir(root);
    steps.push(("cargo build -p sperli-launch --bin sperli".into(), c));
    let python = crate::bench::python::venv_python(root);
    let sperli = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("debug/sperli");
    let mut c = Command::new(&python);
    c.args([
        "-m",
        "pytest",
        "crates/sperli-py/tests",
        "-p",
        "no:cacheprovider",
    ])
    .env("SPERLI_BIN", &sperli)
    .current_dir(root);
    steps.push(("pytest crates/sperli-py/tests".into(), c));
    let mut c = Command::new(&sperli);
    c.args(["run", "-n", "4", "--"])
        .arg(&python)
        .arg("crates/sperli-py/examples/gradient_step.py")
        .current_dir(root);
    steps.push((
        "sperli run -n 4 -- python crates/sperli-py/examples/gradient_step.py".into(),
        c,
    ));
    // mpi4py 4.0.3's own suite on `sperli.MPI` at 1, 2 and 4 ranks (about
    // a minute here): it fails on a hang (120 s a run, 900 s in all), a crash,
    // ranks that disagree, or a count worse than scripts/mpi4py-expected.txt.
    let mut c = Command::new(&python);
    c.args([
        "scripts/mpi4py-suite.py",
        "-n",
        "1,2,4",
        "--timeout",
        "120",
        "--total-timeout",
        "900",
        "--expect",
        "scripts/mpi4py-expected.txt",
    ])
    .env("PYTHON", &python)
    .env("SPERLI_BIN", &sperli)
    .current_dir(root);
    steps.push((
        "python scripts/mpi4py-suite.py -n 1,2,4 --expect scripts/mpi4py-expected.txt".into(),
        c,
    ));
    // mpi4py's demo programs (helloworld, mandelbrot, compute-pi) unchanged
    // under `sperli run -n 4` (a few seconds).
    let mut c = Command::new(&python);
    c.args(["scripts/mpi4py-demos.py", "-n", "4"])
        .env("PYTHON", &python)
        .env("SPERLI_BIN", &sperli)
        .current_dir(root);
    steps.push(("python scripts/mpi4py-demos.py -n 4".into(), c));
}

/// The house checks, first because they are the quickest to fail: the
/// formatting, clippy with every warning an error, and the documentation
/// with rustdoc's warnings (broken links among them) denied.
fn house_steps(root: &Path, cargo: &str, steps: &mut Vec<(String, Command)>) {
    let mut c = Command::new(cargo);
    c.args(["fmt", "--all", "--check"]).current_dir(root);
    steps.push(("cargo fmt --all --check".into(), c));
    let mut c = Command::new(cargo);
    c.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])
    .current_dir(root);
    steps.push((
        "cargo clippy --workspace --all-targets -- -D warnings".into(),
        c,
    ));
    let mut c = Command::new(cargo);
    c.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings")
        .current_dir(root);
    steps.push((
        "cargo doc --workspace --no-deps (warnings denied)".into(),
        c,
    ));
}

/// Runs every step; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let root = crate::workspace_root();
    let mut fuzz_seconds: Option<u32> = None;
    let mut bench_quick = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match (a.as_str(), it.clone().next().and_then(|v| v.parse().ok())) {
            ("--fuzz", Some(s)) => {
                fuzz_seconds = Some(s);
                it.next();
            }
            ("--bench-quick", _) => bench_quick = true,
            _ => {
                eprintln!("usage: cargo xtask test [--fuzz SECONDS] [--bench-quick]");
                return 2;
            }
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut steps: Vec<(String, Command)> = Vec::new();
    house_steps(&root, &cargo, &mut steps);
    let mut c = Command::new(&cargo);
    c.args(["test", "--workspace"]).current_dir(&root);
    steps.push(("cargo test --workspace".into(), c));
    let wanted = |var: &str| std::env::var(var).as_deref() == Ok("1");
    if wanted(sperli_wire::env::SLOW_TESTS) {
        let mut c = Command::new(&cargo);
        c.args(["test", "--workspace", "--", "--ignored", "--skip", "slurm_"])
            .current_dir(&root);
        steps.push(("cargo test --workspace -- --ignored (slow tests)".into(), c));
    }
    if wanted(sperli_wire::env::SLURM_TESTS) {
        let mut c = Command::new(&cargo);
        c.args([
            "test",
            "-p",
            "sperli-launch",
            "--test",
            "launch",
            "--",
            "--ignored",
            "slurm_",
        ])
        .current_dir(&root);
        steps.push((
            "cargo test -p sperli-launch -- --ignored slurm_ (Slurm)".into(),
            c,
        ));
    }
    let mut c = Command::new(&cargo);
    c.args(["xtask", "vectors", "--check"]).current_dir(&root);
    steps.push(("cargo xtask vectors --check".into(), c));
    let mut c = Command::new("python3");
    c.args(["scripts/sperli-vectors.py", "docs/sperli-vectors.txt"])
        .current_dir(&root);
    steps.push((
        "python3 scripts/sperli-vectors.py docs/sperli-vectors.txt".into(),
        c,
    ));
    let mut c = Command::new("python3");
    c.args([
        "-m",
        "unittest",
        "discover",
        "-s",
        "scripts",
        "-p",
        "test_*.py",
    ])
    .current_dir(&root);
    steps.push(("python3 -m unittest (checker tests)".into(), c));
    python_steps(&root, &cargo, &mut steps);
    if let Some(s) = fuzz_seconds {
        let mut c = Command::new("bash");
        c.args(["scripts/fuzz-smoke.sh", &s.to_string()])
            .current_dir(&root);
        steps.push(("scripts/fuzz-smoke.sh (every fuzz target)".into(), c));
    }
    if bench_quick {
        let mut c = Command::new(&cargo);
        c.args(["xtask", "bench", "--quick"]).current_dir(&root);
        steps.push(("cargo xtask bench --quick (smoke)".into(), c));
    }
    let total = steps.len();
    let mut passed = 0;
    for (name, mut cmd) in steps {
        if !step(&name, &mut cmd) {
            println!("steps: {passed} passed, 1 failed");
            return 1;
        }
        passed += 1;
    }
    println!("steps: {passed} passed, {} failed", total - passed);
    0
}
