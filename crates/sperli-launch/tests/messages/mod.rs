//! Messages and the deny file (docs/launcher.md, "Failures that are not a
//! rank's"; protocol §2.3): failures say what failed, where
//! and why; the launcher has a set-up deadline of its own; bad settings
//! and bad deny files stop it before anything starts.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::procs::{fake_ssh, marker, script, wait_none_left, Launched};
use super::sperli;

/// A file the test creates without execute permission.
fn not_executable() -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = std::env::temp_dir().join(format!("sperli-not-a-program-{}", std::process::id()));
    std::fs::write(&p, "plain text\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p
}

/// `sperli: cannot start rank 0 on 127.0.0.1: PROGRAM: OS error`, for a
/// program started directly and for one behind a remote shell; exit
/// status 127 for a program that is not found, 126 for one that is not
/// executable, as the shell, `env` and `timeout` (docs/launcher.md, "Exit
/// status").
#[test]
fn a_start_failure_names_the_rank_host_program_and_os_error() {
    let _cpu = crate::shared_cpu();
    let plain = not_executable();
    let plain = plain.to_str().unwrap();
    let rsh = format!("{} {{host}}", fake_ssh());
    // Directly started ranks start in rank order: rank 0 fails first. A
    // remote rank's failure is reported when it comes: one rank.
    let direct = ["run", "-n", "2", "-H", "127.0.0.1,127.0.0.2"];
    let remote = [
        "run",
        "-n",
        "1",
        "-H",
        "127.0.0.1",
        "--rsh-local",
        "--rsh",
        rsh.as_str(),
    ];
    for (base, program, why, status) in [
        (&direct[..], plain, "permission denied", 126),
        (
            &direct[..],
            "/nonexistent/sperli-prog",
            "no such file or directory",
            127,
        ),
        (
            &direct[..],
            "no-such-command-sperli",
            "no such file or directory",
            127,
        ),
        (&remote[..], plain, "permission denied", 126),
        (
            &remote[..],
            "/nonexistent/sperli-prog",
            "no such file or directory",
            127,
        ),
        (
            &remote[..],
            "no-such-command-sperli",
            "command not found",
            127,
        ),
    ] {
        let mut args = base.to_vec();
        args.extend(["--", program]);
        let out = sperli(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "sperli: cannot start rank 0 on 127.0.0.1: {program}: {why}"
            )),
            "{args:?}: {err}"
        );
    }
}

/// `--timeout 0` would end every job at once: refused.
#[test]
fn timeout_0_is_refused() {
    let _cpu = crate::shared_cpu();
    let out = sperli(&["run", "-n", "1", "--timeout", "0", "--", "EXAMPLE", "hello"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--timeout"), "{err}");
    assert!(out.stdout.is_empty());
}

/// A rank program started by hand, with stdin empty or a terminal, says
/// in one line how to start it, at once.
#[test]
fn a_rank_program_run_by_hand_says_how_to_start_it() {
    let _cpu = crate::shared_cpu();
    let example = crate::example();
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    for stdin in [Stdio::null(), Stdio::from(pty.slave)] {
        let t = Instant::now();
        let out = Command::new(example)
            .arg("hello")
            .stdin(stdin)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("H1615 no job description (stdin is"), "{err}");
        assert!(
            err.contains(&format!("start it with `sperli run -n N -- {example}`")),
            "{err}"
        );
        assert!(t.elapsed() < Duration::from_secs(10));
    }
    drop(pty.master);
}

/// The default remote shell has a connect timeout.
#[test]
fn the_default_remote_shell_has_a_connect_timeout() {
    let _cpu = crate::shared_cpu();
    let out = sperli(&["run", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("ConnectTimeout="), "{help}");
}

/// A remote shell that cannot reach its host (ssh to a closed port on
/// 127.0.0.1) fails the job at once, naming the rank and host; nothing is
/// left running.
#[test]
fn a_remote_shell_that_cannot_connect_fails_the_job_at_once() {
    let _cpu = crate::shared_cpu();
    let mark = marker("ssh-refused");
    let t = Instant::now();
    let mut l = Launched::sperli(
        &[
            "run",
            "-n",
            "2",
            "-H",
            "127.0.0.1,127.0.0.2",
            "--rsh-local",
            "--rsh",
            "ssh -o BatchMode=yes -o ConnectTimeout=2 -p 1 {host}",
            "--",
            "EXAMPLE",
            "hello",
        ],
        &mark,
    );
    let status = l.finish(Duration::from_secs(60));
    let what = format!("{}\n{}", l.out, l.err);
    assert_eq!(status.code(), Some(255), "{what}");
    assert!(
        l.err.contains("on 127.0.0.")
            && l.err
                .contains("was not started: the remote shell or srun ended (exit code 255)"),
        "{what}"
    );
    assert!(l.err.contains("Connection refused"), "{what}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert!(wait_none_left(&mark, Duration::from_secs(2)).is_ok());
}

/// A remote shell that never connects (it hangs): for every rank, the
/// launcher's own deadline (set-up window 30 s plus 5 s) fails the job
/// naming the ranks; for one rank of two, the started rank's set-up ends
/// first (H1616 missing [1]) and the launcher names rank 1. Loopback only.
/// Slow: the set-up window is 30 s.
#[test]
#[ignore = "slow (the 30 s set-up window): SPERLI_SLOW_TESTS=1 cargo xtask test, or cargo test -- --ignored"]
fn a_remote_shell_that_never_connects_fails_the_job_within_the_window_plus_margin() {
    let _cpu = crate::shared_cpu();
    // The example is built on first use: before the clocks start, so the
    // build is not counted in the window plus margin.
    let _ = crate::example();
    let hang_all = script("rsh-hangs", "exec sleep 600");
    let hang_one = script(
        "rsh-hangs-for-127.0.0.2",
        &format!(
            "[ \"$1\" = 127.0.0.2 ] && exec sleep 600\nexec {} \"$@\"",
            fake_ssh()
        ),
    );
    std::thread::scope(|s| {
        for (name, rsh, blamed, also) in [
            (
                "all",
                hang_all,
                "rank 0 on 127.0.0.1 never started",
                "(so did ranks 1)",
            ),
            ("one", hang_one, "rank 1 on 127.0.0.2 never started", ""),
        ] {
            s.spawn(move || {
                let mark = marker(&format!("rsh-hangs-{name}"));
                let rsh = format!("{} {{host}}", rsh.display());
                let t = Instant::now();
                let mut l = Launched::sperli(
                    &[
                        "run",
                        "-n",
                        "2",
                        "-H",
                        "127.0.0.1,127.0.0.2",
                        "--rsh-local",
                        "--rsh",
                        &rsh,
                        "--",
                        "EXAMPLE",
                        "hello",
                    ],
                    &mark,
                );
                let status = l.finish(Duration::from_secs(90));
                let took = t.elapsed();
                let what = format!("{name} after {took:?}:\n{}\n{}", l.out, l.err);
                assert_eq!(status.code(), Some(1), "{what}");
                assert!(l.err.contains(blamed), "{what}");
                assert!(l.err.contains(also), "{what}");
                assert!(took >= Duration::from_secs(29), "{what}");
                assert!(took < Duration::from_secs(30 + 5 + 10), "{what}");
                assert!(
                    wait_none_left(&mark, Duration::from_secs(2)).is_ok(),
                    "{what}"
                );
                println!("{name}: the job failed after {took:?}");
            });
        }
    });
}

/// Protocol §2.3: "the same separators as the variable (commas and any
/// whitespace)" in the deny file too; "an entry that is not a valid host
/// ... stops the launcher".
#[test]
fn the_deny_file_separates_names_like_the_variable_and_fails_closed() {
    let _cpu = crate::shared_cpu();
    let dir = std::env::temp_dir().join(format!("sperli-deny-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let deny = dir.join("deny");
    std::fs::write(&deny, "# refused\na.example b.example,127.0.0.3\n").unwrap();
    let deny = deny.to_str().unwrap();
    for host in ["127.0.0.3", "x.b.example", "Sub.A.Example."] {
        let out = sperli(&[
            "run",
            "-n",
            "2",
            "-H",
            &format!("127.0.0.1,{host}"),
            "--deny-hosts",
            deny,
            "--",
            "EXAMPLE",
            "hello",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{host}: {err}");
        assert!(
            err.contains("H1614") && err.contains("deny-hosts file"),
            "{host}: {err}"
        );
        assert!(out.stdout.is_empty(), "{host}: a rank ran");
    }
    let bad = dir.join("bad");
    std::fs::write(&bad, "ok.example not_a_host\n").unwrap();
    let out = sperli(&[
        "run",
        "-n",
        "1",
        "--deny-hosts",
        bad.to_str().unwrap(),
        "--",
        "EXAMPLE",
        "hello",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("\"not_a_host\" is not a valid host"), "{err}");
    assert!(out.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
