//! The example programs of sperli-collective (`examples/jacobi.rs`,
//! `examples/cg.rs`) under the tree's `sperli run -n 4`: each checks its
//! result against a serial computation and exits non-zero on a mismatch.
//!
//! They are examples of another crate, so this test builds them with the
//! cargo that runs it, into the same target directory and profile.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// Builds both examples once; their directory (`target/<profile>/examples`).
fn examples_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        crate::cargo_build(&[
            "-p",
            "sperli-collective",
            "--example",
            "jacobi",
            "--example",
            "cg",
        ])
        .join("examples")
    })
}

/// `sperli run -n 4 --timeout 300 -- EXAMPLE ARGS`: its stdout; fails the
/// test unless it exits 0 and rank 0 printed `verdict`.
fn run_example(name: &str, args: &[&str], verdict: &str) -> String {
    let _cpu = crate::shared_cpu();
    let prog = examples_dir().join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args(["run", "-n", "4", "--timeout", "300", "--"])
        .arg(&prog)
        .args(args)
        .env_remove("SPERLI_REFUSED_HOSTS")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run sperli");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("[0] ") && l.contains(verdict)),
        "{name}: no `{verdict}` from rank 0 in\n{stdout}"
    );
    stdout
}

#[test]
fn the_jacobi_example_matches_its_serial_run_under_sperli_run_n_4() {
    run_example("jacobi", &[], "serial same");
    // Uneven blocks (N not a multiple of 4) and a fixed step count.
    run_example("jacobi", &["37", "500", "0"], "serial same");
}

#[test]
fn the_cg_example_matches_its_serial_solve_under_sperli_run_n_4() {
    run_example("cg", &[], " ok");
    run_example("cg", &["203"], " ok");
}
