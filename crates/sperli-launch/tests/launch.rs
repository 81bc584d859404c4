//! End-to-end tests of the `sperli` launcher with real TLS ranks on
//! 127.0.0.0/8 (the example program `sperli-example`).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn sperli(args: &[&str]) -> Output {
    let example = env!("CARGO_BIN_EXE_sperli-example");
    let mut full: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    if let Some(pos) = full.iter().position(|a| a == "EXAMPLE") {
        full[pos] = example.to_string();
    }
    Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args(&full)
        .env_remove("SPERLI_REFUSED_HOSTS")
        .output()
        .expect("run sperli")
}

#[test]
fn four_ranks_on_four_loopback_hosts() {
    let out = sperli(&[
        "run",
        "-n",
        "4",
        "-H",
        "127.0.0.1,127.0.0.2,127.0.0.3,localhost",
        "--timeout",
        "60",
        "--",
        "EXAMPLE",
        "allreduce",
        "5000",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("[0] allreduce of 5000 f64 over 4 ranks: correct"),
        "{stdout}"
    );
}

#[test]
fn hello_lines_are_prefixed() {
    let out = sperli(&[
        "run",
        "-n",
        "3",
        "--timeout",
        "60",
        "--",
        "EXAMPLE",
        "hello",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for r in 0..3 {
        assert!(
            stdout.contains(&format!("[{r}] hello from rank {r} of 3")),
            "{stdout}"
        );
    }
}

#[test]
fn a_rank_that_exits_3_makes_the_launcher_exit_3() {
    let t = Instant::now();
    let out = sperli(&[
        "run",
        "-n",
        "3",
        "--silence-ms",
        "2000",
        "--timeout",
        "60",
        "--",
        "EXAMPLE",
        "exit",
        "3",
        "1",
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(30));
}

#[test]
fn refused_hosts_are_refused_before_anything_starts() {
    for list in [
        "127.0.0.1,host-a.invalid",
        "127.0.0.1,HOST-B.INVALID",
        "127.0.0.1,host-a.invalid.",
        "127.0.0.1,n1.host-b.invalid",
    ] {
        let out = sperli(&["run", "-n", "2", "-H", list, "--", "EXAMPLE", "hello"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{list}: {err}");
        assert!(
            err.contains("H1614") && err.contains("reserved"),
            "{list}: {err}"
        );
        assert!(out.stdout.is_empty(), "{list}: a rank ran");
    }
}

#[test]
fn an_unreadable_deny_file_stops_the_launcher() {
    let out = sperli(&[
        "run",
        "-n",
        "1",
        "--deny-hosts",
        "/nonexistent/deny-file",
        "--",
        "EXAMPLE",
        "hello",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("deny-hosts"));
}
