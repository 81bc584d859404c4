//! End-to-end tests of the `sperli` launcher with real TLS ranks on
//! 127.0.0.0/8 (the example program `sperli-example`).
//!
//! One test binary. The slow cases (the 30 s set-up window, scale) and the
//! Slurm cluster are `#[ignore]`d: `cargo xtask test` runs the slow ones
//! with `SPERLI_SLOW_TESTS=1` and the Slurm one with `SPERLI_SLURM_TESTS=1`
//! (`.ci/run` sets both), or run them with `cargo test -p sperli-launch
//! -- --ignored`.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod blame;
mod examples;
mod habits;
mod inplace;
mod messages;
mod orphans;
mod pipelined;
mod procs;
mod recover;
mod reliability;
mod requeue;
mod shrink;
mod slurm;
mod stdin;

/// The scale runs (64 ranks on 2 cores) need the machine for themselves:
/// they hold this lock exclusively, every other test of this binary holds
/// it shared, so they never overlap (the tests of other crates run in
/// other binaries, one after another).
static CPU: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs beside the other tests, never beside a scale run.
fn shared_cpu() -> std::sync::RwLockReadGuard<'static, ()> {
    CPU.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs alone among this binary's tests.
fn exclusive_cpu() -> std::sync::RwLockWriteGuard<'static, ()> {
    CPU.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads the launcher's stdout until ranks `0..n` of the `sleep` example
/// said `[R] rank R joined` (each has its job description and its
/// connections), at most 60 s, else fails the test; drains the rest.
fn wait_joined(child: &mut std::process::Child, n: u32) {
    wait_for_lines(
        child,
        (0..n).map(|r| format!("[{r}] rank {r} joined")).collect(),
    );
}

/// Reads the launcher's stdout until every line of `missing` came (in any
/// order), at most 60 s, else fails the test; drains the rest.
fn wait_for_lines(child: &mut std::process::Child, mut missing: Vec<String>) {
    use std::io::BufRead;
    let out = child.stdout.take().expect("the launcher's stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !missing.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => missing.retain(|m| *m != l),
            Err(_) => panic!("the ranks did not say {missing:?}"),
        }
    }
}

/// `cargo build ARGS` of another crate of the workspace, by the cargo that
/// runs these tests, into this test binary's target directory and
/// profile; fails the test if it fails. Returns the profile directory
/// (`target/<profile>`, where the `sperli` binary under test is).
fn cargo_build(args: &[&str]) -> std::path::PathBuf {
    // This binary is target/<profile>/deps/launch-<hash>.
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>/deps")
        .to_path_buf();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => panic!("no profile directory above {}", exe.display()),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = profile_dir.parent().expect("the target directory");
    let mut c = Command::new(cargo);
    // What cargo sets for this test binary (CARGO_PKG_NAME, ...): a build
    // script that reruns when one changes (ring's) would otherwise be
    // rebuilt here and again by the next plain `cargo test`.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        let set_for_this_crate = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_BIN_",
            "CARGO_CRATE_",
        ]
        .iter()
        .any(|p| k.starts_with(p))
            || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&&*k);
        if set_for_this_crate {
            c.env_remove(&*k);
        }
    }
    let status = c
        .arg("build")
        .args(args)
        .args(["--profile", &profile, "--target-dir"])
        .arg(target)
        .current_dir(root)
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build {args:?}: {status}");
    profile_dir
}

/// The example rank program `sperli-example` (crates/sperli-example),
/// next to the `sperli` binary under test. The first call builds it
/// ([`cargo_build`]) with the crash tests' checkpoint hook (its
/// `fault-injection` feature, read from `SPERLI_TEST_CKPT_KILL`): a test
/// that times a job calls it before its clock starts.
fn example() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let dir = cargo_build(&["-p", "sperli-example", "--features", "fault-injection"]);
        let example = dir.join("sperli-example");
        assert!(example.is_file(), "no {}", example.display());
        example.to_string_lossy().into_owned()
    })
}

/// `sperli ARGS` to the end, `EXAMPLE` (also inside a word) replaced by
/// the example program.
fn sperli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args(procs::with_example(args))
        .env_remove("SPERLI_REFUSED_HOSTS")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run sperli")
}

/// The stdout lines of a launcher run that succeeded, sorted (ranks print
/// in any order).
fn sorted_lines(out: &Output) -> Vec<String> {
    assert!(out.status.success(), "{out:?}");
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn four_ranks_on_four_loopback_hosts() {
    let _cpu = crate::shared_cpu();
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

/// `sperli demo` runs the `sperli-example` next to it: rank 2 kills
/// itself, is replaced in place, every rank rolls back to the last COMMIT
/// and the job ends well; and
/// `sperli example MODE` runs that program too.
#[test]
fn the_demo_runs_the_example_next_to_sperli() {
    let _cpu = crate::shared_cpu();
    example();
    let out = sperli(&["demo"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("[2] rank 2: raising SIGKILL before step 35"),
        "{stdout}"
    );
    // Replaced in place: rank 0 rolled back, nobody restarted.
    assert!(
        stdout.contains("[0] rolled back to epoch 3 (step 30)"),
        "{stdout}"
    );
    assert!(stderr.contains("replacement of rank 2 runs on"), "{stderr}");
    assert!(stdout.contains("Done in "), "{stdout}");
    // `sperli example MODE` runs the same program.
    let out = sperli(&[
        "run",
        "-n",
        "2",
        "--timeout",
        "60",
        "--",
        env!("CARGO_BIN_EXE_sperli"),
        "example",
        "hello",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("[1] hello from rank 1 of 2"), "{stdout}");
}

#[test]
fn hello_lines_are_prefixed() {
    let _cpu = crate::shared_cpu();
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
    let _cpu = crate::shared_cpu();
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
    let _cpu = crate::shared_cpu();
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
fn a_silence_limit_below_the_heartbeat_margin_is_a_usage_error() {
    let _cpu = crate::shared_cpu();
    let out = sperli(&[
        "run",
        "-n",
        "2",
        "--silence-ms",
        "1000",
        "--",
        "EXAMPLE",
        "hello",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--silence-ms"), "{err}");
    assert!(out.stdout.is_empty(), "a rank ran");
}

#[test]
fn an_unreadable_deny_file_stops_the_launcher() {
    let _cpu = crate::shared_cpu();
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

/// The longest run of lowercase hex digits in `bytes`.
fn longest_hex_run(bytes: &[u8]) -> usize {
    let (mut best, mut cur) = (0, 0);
    for b in bytes {
        if b.is_ascii_digit() || (b'a'..=b'f').contains(b) {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// The rank processes among the children of `pid` (they have
/// `SPERLI_RANK` in their environment; the job's watchdog has not).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // Field 4 (after the parenthesised command) is the parent pid.
        let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
        if after.split_whitespace().nth(1) == Some(&pid.to_string()) && rank_of(p).is_some() {
            out.push(p);
        }
    }
    out
}

/// A pidfd of `pid` (`None`: it is gone, or reaped).
fn pidfd(pid: u32) -> Option<std::os::fd::OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Waits until `done()` holds or `limit` passed (false), looking again at
/// each exit of a process `watched()` names (pidfd): for a set of
/// processes that must end, which sends no other event a test could
/// block on.
fn until_exits(
    limit: Duration,
    mut watched: impl FnMut() -> Vec<u32>,
    mut done: impl FnMut(&[u32]) -> bool,
) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let t = Instant::now();
    loop {
        let pids = watched();
        if done(&pids) {
            return true;
        }
        let left = limit.saturating_sub(t.elapsed());
        if left.is_zero() {
            return false;
        }
        let fds: Vec<_> = pids.iter().filter_map(|&p| pidfd(p)).collect();
        if fds.is_empty() {
            continue;
        }
        let mut set: Vec<PollFd<'_>> = fds.iter().map(|f| PollFd::new(f, PollFlags::IN)).collect();
        let ts = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let _ = poll(&mut set, Some(&ts));
    }
}

/// Waits (at most `limit`) until none of `pids` runs (each gone or a
/// zombie); the time it took from `since`, or `None`.
fn wait_gone(pids: &[u32], since: Instant, limit: Duration) -> Option<Duration> {
    let running = |p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| !s.contains(") Z "))
    };
    until_exits(
        limit.saturating_sub(since.elapsed()),
        || pids.iter().copied().filter(running).collect(),
        |left| left.is_empty(),
    )
    .then(|| since.elapsed())
}

/// The pids of the launcher `pid`'s `n` rank processes. Called once the
/// ranks said they joined (their output is the event), so they all run.
fn ranks_of(pid: u32, n: usize) -> Vec<u32> {
    let ranks = children_of(pid);
    assert_eq!(ranks.len(), n, "ranks not found");
    ranks
}

fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn the_job_description_is_in_no_cmdline_environ_or_file() {
    let _cpu = crate::shared_cpu();
    let scratch = std::env::temp_dir().join(format!("sperli-secret-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.join("tmp")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args(["run", "-n", "3", "--timeout", "60", "--"])
        .arg(crate::example())
        .args(["sleep", "2500"])
        .current_dir(&scratch)
        .env("TMPDIR", scratch.join("tmp"))
        .env_remove("SPERLI_REFUSED_HOSTS")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the ranks have joined, then look at them while they sleep.
    wait_joined(&mut child, 3);
    let ranks = ranks_of(child.id(), 3);
    for pid in &ranks {
        for what in ["cmdline", "environ"] {
            let bytes = std::fs::read(format!("/proc/{pid}/{what}")).unwrap_or_default();
            assert!(!bytes.is_empty(), "{pid} {what} unreadable");
            assert!(
                longest_hex_run(&bytes) < 200,
                "rank {pid}: a long hex run in {what}"
            );
            assert!(!String::from_utf8_lossy(&bytes).contains("PRIVATE KEY"));
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success());
    let mut files = Vec::new();
    files_under(&scratch, &mut files);
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_default();
        assert!(longest_hex_run(&bytes) < 200, "{}", f.display());
        assert!(
            !String::from_utf8_lossy(&bytes).contains("PRIVATE KEY"),
            "{}",
            f.display()
        );
    }
    assert!(files.is_empty(), "the job left files: {files:?}");
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn sigkill_of_a_rank_stops_the_others_and_the_launcher_restarts() {
    let _cpu = crate::shared_cpu();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args([
            "run",
            "-n",
            "3",
            "--restart-max",
            "1",
            "--silence-ms",
            "2000",
            "--timeout",
            "90",
            "--",
        ])
        .arg(crate::example())
        .args(["sleep", "4000"])
        .env_remove("SPERLI_REFUSED_HOSTS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_joined(&mut child, 3);
    let ranks = ranks_of(child.id(), 3);
    let victim = ranks[1];
    let killed_at = Instant::now();
    let _ = Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status();
    // The survivors of the first incarnation must be gone within the
    // silence limit plus a margin.
    let survivors: Vec<u32> = ranks.iter().copied().filter(|p| *p != victim).collect();
    assert!(
        wait_gone(&survivors, killed_at, Duration::from_millis(2000 + 3000)).is_some(),
        "survivors still running"
    );
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("restarting the job as incarnation 2"), "{err}");
    assert!(out.status.success(), "{err}");
}

#[test]
fn a_failed_rank_moves_to_a_spare_host_on_restart() {
    let _cpu = crate::shared_cpu();
    let out = sperli(&[
        "run",
        "-n",
        "2",
        "-H",
        "127.0.0.1,127.0.0.2,127.0.0.9",
        "--restart-max",
        "1",
        "--silence-ms",
        "2000",
        "--timeout",
        "60",
        "--",
        "EXAMPLE",
        "exit-once",
        "3",
        "1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("moving rank 1 from 127.0.0.2 to spare host 127.0.0.9"),
        "{err}"
    );
    assert!(err.contains("restarting the job as incarnation 2"), "{err}");
}

#[test]
fn sigterm_to_the_launcher_ends_every_rank() {
    let _cpu = crate::shared_cpu();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args(["run", "-n", "3", "--timeout", "60", "--"])
        .arg(crate::example())
        .args(["sleep", "30000"])
        .env_remove("SPERLI_REFUSED_HOSTS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    wait_joined(&mut child, 3);
    let ranks = ranks_of(child.id(), 3);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + 15));
    for p in ranks {
        let alive = std::fs::read_to_string(format!("/proc/{p}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false);
        assert!(!alive, "rank {p} still runs");
    }
    assert!(t.elapsed() < Duration::from_secs(25));
}

/// The `[0] result <hex>` line of a `ckpt` example run.
fn result_line(stdout: &str) -> Option<String> {
    stdout
        .lines()
        .find(|l| l.starts_with("[0] result "))
        .map(str::to_owned)
}

/// The rank number in a process's environment (`SPERLI_RANK`).
fn rank_of(pid: u32) -> Option<u32> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"SPERLI_RANK="))
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
}

const CKPT_ARGS: [&str; 4] = ["ckpt", "60", "10", "25"];

/// A port the launcher picked (bind to port 0, release) was taken by a
/// concurrent test before the rank bound it: not what these tests check.
fn port_race(text: &str) -> bool {
    text.contains("AddrInUse")
}

/// An undisturbed `ckpt` run of 3 ranks: its stdout, or None after a port race.
fn undisturbed_ckpt_run(dir: &std::path::Path) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args(["run", "-n", "3", "--timeout", "60", "--checkpoint-dir"])
        .arg(dir)
        .arg("--")
        .arg(crate::example())
        .args(CKPT_ARGS)
        .env_remove("SPERLI_REFUSED_HOSTS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() && port_race(&stderr) {
        return None;
    }
    assert!(out.status.success(), "{stdout}\n{stderr}");
    Some(stdout)
}

/// The same run with rank 1 killed (SIGKILL) once the COMMIT of epoch 2 is
/// there: (stdout, stderr, success), or None after a port race.
fn killed_ckpt_run(dir: &std::path::Path) -> Option<(String, String, bool)> {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args([
            "run",
            "-n",
            "3",
            "--restart-max",
            "1",
            "--recover",
            "restart",
            "--silence-ms",
            "2000",
        ])
        .args(["--timeout", "90", "--checkpoint-dir"])
        .arg(dir)
        .arg("--")
        .arg(crate::example())
        .args(CKPT_ARGS)
        .env_remove("SPERLI_REFUSED_HOSTS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let mut killed = false;
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
        seen.push_str(&line);
        seen.push('\n');
        if line.starts_with("[0] checkpoint epoch 2 ") {
            let victim = children_of(child.id())
                .into_iter()
                .find(|p| rank_of(*p) == Some(1))
                .expect("rank 1 not found");
            let _ = Command::new("kill")
                .args(["-9", &victim.to_string()])
                .status();
            killed = true;
            break;
        }
    }
    let status = child.wait().unwrap();
    reader.join().unwrap();
    seen.extend(rx.try_iter().map(|l| l + "\n"));
    let err = err_reader.join().unwrap();
    if !killed && port_race(&err) {
        return None;
    }
    assert!(killed, "no checkpoint line:\n{seen}\n{err}");
    Some((seen, err, status.success()))
}

#[test]
fn a_rank_killed_mid_run_resumes_from_the_last_commit_with_the_same_result() {
    let _cpu = crate::shared_cpu();
    let scratch = std::env::temp_dir().join(format!("sperli-ckpt-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let clean = (0..3)
        .find_map(|i| undisturbed_ckpt_run(&scratch.join(format!("clean-{i}"))))
        .expect("three port races in a row");
    let want = result_line(&clean).expect("result line");
    assert!(
        clean.contains("[0] checkpoint epoch 6 at step 60"),
        "{clean}"
    );
    let (seen, err, ok) = (0..3)
        .find_map(|i| killed_ckpt_run(&scratch.join(format!("killed-{i}"))))
        .expect("three port races in a row");
    assert!(ok, "{seen}\n{err}");
    assert!(err.contains("restarting the job as incarnation 2"), "{err}");
    let resumed = seen
        .lines()
        .find(|l| l.starts_with("[0] incarnation 2: resumed from epoch "))
        .unwrap_or_else(|| panic!("no resume line:\n{seen}"));
    let epoch: u64 = resumed
        .trim_start_matches("[0] incarnation 2: resumed from epoch ")
        .split(' ')
        .next()
        .and_then(|e| e.parse().ok())
        .unwrap();
    assert!(epoch >= 2, "{resumed}");
    assert_eq!(result_line(&seen).as_deref(), Some(want.as_str()), "{seen}");
    assert!(seen.contains("[0] result check against an undisturbed computation: correct"));
    let _ = std::fs::remove_dir_all(&scratch);
}
