//! Process groups (docs/launcher.md, "Process groups: no process of a job
//! outlives it"): no process of a job outlives it, whatever
//! ends it (`--timeout`, SIGINT, SIGTERM, a SIGKILLed launcher), with rank
//! programs that start children of their own (`sh -c 'prog; echo rc=$?'`),
//! and for ranks started through a remote shell.

use std::time::{Duration, Instant};

use super::procs::{fake_ssh, job, kill, marker, wait_none_left, Launched};

/// A rank program that is a shell running the example as its child (the
/// shell waits: it does not `exec`); rank 1's shell and example ignore
/// SIGTERM, so only the SIGKILL after the grace ends them.
const SHELL_AROUND: &str = "if [ \"$SPERLI_RANK\" = 1 ]; then trap '' TERM; fi; \
     EXAMPLE sleep 60000; echo rc=$?";

/// Starts 2 ranks of [`SHELL_AROUND`] and waits until both joined and the
/// examples run as grandchildren of the launcher.
fn started(extra: &[&str], name: &str) -> Launched {
    let mark = marker(name);
    let mut args = vec!["run", "-n", "2", "--silence-ms", "2000"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", SHELL_AROUND]);
    let mut l = Launched::sperli(&args, &mark);
    l.wait_joined(2);
    let procs = job(&l.mark);
    let examples: Vec<_> = procs.iter().filter(|p| p.is_example()).collect();
    assert_eq!(examples.len(), 2, "{name}: {procs:?}");
    for e in &examples {
        let parent = procs.iter().find(|p| p.pid == e.ppid);
        assert!(
            parent.is_some_and(|p| p.argv.first().is_some_and(|a| a == "sh")),
            "{name}: the example is not a grandchild: {procs:?}"
        );
    }
    l
}

fn assert_nothing_left(l: &Launched, name: &str, limit: Duration) {
    if let Err(left) = wait_none_left(&l.mark, limit) {
        for p in &left {
            kill("KILL", p.pid);
        }
        panic!(
            "{name}: processes of the job left: {:?}\n{}\n{}",
            left.iter()
                .map(|p| (p.pid, p.state.clone(), p.argv.clone()))
                .collect::<Vec<_>>(),
            l.out,
            l.err
        );
    }
}

/// `--timeout`, SIGINT and SIGTERM: the launcher ends every rank's process
/// group (SIGTERM, SIGKILL after the 3 s grace for what ignores it) and
/// exits 124 / 130 / 143 only once no process of the job is left.
#[test]
fn timeout_sigint_and_sigterm_leave_no_process_of_the_job() {
    let _cpu = crate::shared_cpu();
    let cases: [(&str, &[&str], Option<&str>, i32); 3] = [
        ("timeout", &["--timeout", "10"], None, 124),
        ("sigint", &[], Some("INT"), 130),
        ("sigterm", &[], Some("TERM"), 143),
    ];
    std::thread::scope(|s| {
        for (name, extra, sig, code) in cases {
            s.spawn(move || {
                let mut l = started(extra, name);
                let t = Instant::now();
                if let Some(sig) = sig {
                    kill(sig, l.child.id());
                }
                let status = l.finish(Duration::from_secs(30));
                assert_eq!(status.code(), Some(code), "{name}:\n{}", l.err);
                assert!(l.err.contains("every rank was ended"), "{name}:\n{}", l.err);
                // Nothing is left once the launcher is gone (a short bound
                // for /proc to show the last exits).
                assert_nothing_left(&l, name, Duration::from_secs(1));
                assert!(
                    t.elapsed() < Duration::from_secs(20),
                    "{name}: {:?}",
                    t.elapsed()
                );
            });
        }
    });
}

/// SIGKILL of the launcher: the ranks' first processes die with it
/// (`PR_SET_PDEATHSIG`), the job's watchdog kills their process groups;
/// nothing is left after the silence limit plus 2 s.
#[test]
fn a_sigkilled_launcher_leaves_no_process_of_the_job() {
    let _cpu = crate::shared_cpu();
    let mut l = started(&[], "sigkill");
    kill("KILL", l.child.id());
    let t = Instant::now();
    let _ = l.child.wait();
    assert_nothing_left(&l, "sigkill", Duration::from_millis(2000 + 2000));
    println!(
        "every process of the job was gone {:?} after the SIGKILL",
        t.elapsed()
    );
}

/// Ranks started through a remote shell (a stand-in for ssh that runs the
/// command in a session of its own, as sshd does): the job runs, and
/// when the launcher is SIGKILLed the remote side's end-of-stdin watchdog
/// ends every remote process.
#[test]
fn remote_ranks_run_and_end_with_the_launcher() {
    let _cpu = crate::shared_cpu();
    let rsh = format!("{} {{host}}", fake_ssh());
    let mark = marker("rsh-run");
    let mut l = Launched::sperli(
        &[
            "run",
            "-n",
            "3",
            "-H",
            "127.0.0.1,127.0.0.2,127.0.0.3",
            "--rsh-local",
            "--rsh",
            &rsh,
            "--timeout",
            "60",
            "--",
            "EXAMPLE",
            "allreduce",
            "1000",
        ],
        &mark,
    );
    let status = l.finish(Duration::from_secs(90));
    assert!(status.success(), "{}\n{}", l.out, l.err);
    assert!(
        l.out
            .contains("[0] allreduce of 1000 f64 over 3 ranks: correct"),
        "{}",
        l.out
    );
    assert!(
        !l.err.contains("sperli:started"),
        "a control line leaked:\n{}",
        l.err
    );
    assert_nothing_left(&l, "rsh-run", Duration::from_secs(2));

    let mark = marker("rsh-kill");
    let args = [
        "run",
        "-n",
        "2",
        "-H",
        "127.0.0.1,127.0.0.2",
        "--rsh-local",
        "--rsh",
        &rsh,
        "--silence-ms",
        "2000",
        "--",
        "sh",
        "-c",
        SHELL_AROUND,
    ];
    let mut l = Launched::sperli(&args, &mark);
    l.wait_joined(2);
    // The "remote" processes are in sessions of their own, not children
    // of the launcher's ranks.
    let procs = job(&mark);
    let remote: Vec<_> = procs.iter().filter(|p| p.is_example()).collect();
    assert_eq!(remote.len(), 2);
    // The wrapper holds the job description in memory only: no process of
    // the job has it in its arguments or environment.
    for p in &procs {
        for what in ["cmdline", "environ"] {
            let bytes = std::fs::read(format!("/proc/{}/{what}", p.pid)).unwrap_or_default();
            assert!(
                super::longest_hex_run(&bytes) < 200,
                "{} {what}: a long hex run",
                p.pid
            );
        }
    }
    kill("KILL", l.child.id());
    let _ = l.child.wait();
    assert_nothing_left(&l, "rsh-kill", Duration::from_millis(2000 + 2000));
}
