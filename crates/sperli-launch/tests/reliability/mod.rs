//! Crashes and scale through the launcher (docs/reliability.md, sections 3
//! and 5).
//!
//! Always (a few seconds each): SIGKILL inside each collective, SIGSTOP of
//! a rank, SIGKILL inside each checkpoint step and inside resume with a
//! restart that must resume from a valid COMMIT. Slow (`#[ignore]`d, run
//! by `SPERLI_SLOW_TESTS=1 cargo xtask test`): the 8/16/32/64-rank scale
//! runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sperli_wire::ckpt_path::{buddy_file_name, rank_file_name};
use sperli_wire::ids::Sha256Digest;

use super::{children_of, port_race, ranks_of, result_line, wait_for_lines, wait_gone};

/// `sperli ARGS -- sperli-example EXAMPLE...` with `env`, killed after
/// `limit` (a watchdog over the launcher's own --timeout); None after a
/// port race.
pub(crate) fn launch(
    args: &[&str],
    example: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> Option<Output> {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sperli"));
    c.args(args)
        .arg("--")
        .arg(crate::example())
        .args(example)
        .env_remove("SPERLI_REFUSED_HOSTS")
        .env_remove("SPERLI_TEST_CKPT_KILL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c.spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            for p in children_of(pid) {
                let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
            }
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the job did not end within {limit:?}: {args:?} {example:?}");
        }
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && port_race(&err) {
        return None;
    }
    Some(out)
}

pub(crate) fn retry(f: impl Fn() -> Option<Output>) -> Output {
    (0..3).find_map(|_| f()).expect("three port races in a row")
}

/// SIGKILL of rank 1 while it is blocked inside each v1 collective (4
/// ranks; the example's `die-in` mode). The others end with H1613 (closed
/// without BYE) or H1612 (the ABORT of the first to notice), the launcher
/// exits 137 (128 + SIGKILL) well within the silence limit: a killed
/// process's sockets are closed by the kernel, so nobody waits for silence.
#[test]
fn sigkill_inside_each_collective_ends_every_rank_promptly() {
    let _cpu = crate::shared_cpu();
    for op in [
        "barrier",
        "bcast",
        "reduce",
        "allreduce",
        "gather",
        "scatter",
    ] {
        let t = Instant::now();
        let out = retry(|| {
            launch(
                &["run", "-n", "4", "--silence-ms", "2000", "--timeout", "60"],
                &["die-in", op, "1", "2"],
                &[],
                Duration::from_secs(90),
            )
        });
        let took = t.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(137), "{op}: {stdout}\n{stderr}");
        assert!(
            stdout.contains(&format!("[1] rank 1: SIGKILL inside {op}")),
            "{op}: {stdout}"
        );
        assert!(
            !stdout.contains("returned before the SIGKILL"),
            "{op}: {stdout}"
        );
        for r in [0, 2, 3] {
            let line = stderr
                .lines()
                .find(|l| l.starts_with(&format!("[{r}] rank {r}: H161")))
                .unwrap_or_else(|| panic!("{op}: rank {r} reported no error:\n{stderr}"));
            assert!(
                line.contains("H1613") || line.contains("H1612"),
                "{op}: {line}"
            );
        }
        // Set-up, 300 ms to the kill, the late rank's 1500 ms: far below
        // the 2 s silence limit plus the launcher's 2 s grace.
        assert!(took < Duration::from_secs(15), "{op}: {took:?}");
    }
}

/// SIGSTOP of rank 1 while ranks 0 and 2 wait for it in a barrier
/// (`die-in barrier 99 1 20000`: nobody dies, rank 1 enters 20 s late):
/// its sockets stay open, so only the missing heartbeats show it; ranks 0
/// and 2 end with H1613 "silence" after the 2000 ms limit, within the
/// limit plus 3 s of the stop. The launcher then SIGKILLs the stopped rank.
/// (A rank that is not in a call when the I/O thread notices, e.g. in a
/// long computation, ends as promptly: errors are fatal by default,
/// docs/reliability.md.)
#[test]
fn sigstop_of_a_rank_is_h1613_silence_within_the_limit() {
    let _cpu = crate::shared_cpu();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args([
            "run",
            "-n",
            "3",
            "--silence-ms",
            "2000",
            "--timeout",
            "60",
            "--",
        ])
        .arg(crate::example())
        .args(["die-in", "barrier", "99", "1", "20000"])
        .env_remove("SPERLI_REFUSED_HOSTS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Past the first barrier: rank 1 sleeps, the others wait in the
    // second barrier, heartbeats flow.
    wait_for_lines(
        &mut child,
        (0..3)
            .map(|r| format!("[{r}] rank {r} past the first barrier"))
            .collect(),
    );
    let ranks = ranks_of(child.id(), 3);
    let victim = ranks
        .iter()
        .copied()
        .find(|p| super::rank_of(*p) == Some(1))
        .unwrap();
    let stopped_at = Instant::now();
    let _ = Command::new("kill")
        .args(["-STOP", &victim.to_string()])
        .status();
    let survivors: Vec<u32> = ranks.iter().copied().filter(|p| *p != victim).collect();
    let gone_after = wait_gone(&survivors, stopped_at, Duration::from_secs(30));
    let out = child.wait_with_output().unwrap();
    let _ = Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status();
    let err = String::from_utf8_lossy(&out.stderr);
    let gone = gone_after.unwrap_or_else(|| panic!("survivors still running:\n{err}"));
    // The stopped rank's last heartbeat came up to 1 s before the stop:
    // silence is noticed between 1 s and 2 s after it.
    assert!(
        gone >= Duration::from_millis(2000 - 1000 - 100),
        "{gone:?}: {err}"
    );
    assert!(gone < Duration::from_millis(2000 + 3000), "{gone:?}: {err}");
    assert!(!out.status.success());
    let silence = err
        .lines()
        .filter(|l| l.contains("H1613") && l.contains("silen"))
        .count();
    assert!(silence >= 1, "no H1613 silence:\n{err}");
}

// ---- slow: SIGKILL inside each checkpoint step and inside resume -----

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sperli-rel-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The COMMIT invariants after a run, over every epoch directory
/// `rank-<r>/<job>/<epoch>/` under `root`:
///
/// - a COMMIT held by any rank lists, for EVERY rank whose epoch directory
///   still exists, that rank's own file `rank-<n>.ckpt` with the listed
///   SHA-256 (no COMMIT for an epoch whose rank files are incomplete);
/// - buddy copies are only counted: a COMMIT does NOT imply that the
///   buddy copies of its epoch are complete. Rank 0 writes its COMMIT as
///   soon as every ACK is in, before its own buddy copy has arrived
///   (§9.4 step 4), and the resume exchange stores the chosen COMMIT on
///   every rank without re-replicating a buddy copy that a crash in step
///   3 cut short (§10.2, "keep a copy of the COMMIT"): documented in
///   docs/reliability.md.
///
/// Returns the committed epochs seen (one entry per rank holding a
/// COMMIT) and the count of COMMITs whose buddy copy is missing or
/// incomplete.
fn check_commits(root: &Path, size: u32) -> (Vec<u64>, usize) {
    let mut seen = Vec::new();
    let mut commits = std::collections::BTreeMap::new();
    let mut dirs = Vec::new();
    for r in 0..size {
        let rdir = root.join(format!("rank-{r}"));
        let Ok(jobs) = std::fs::read_dir(&rdir) else {
            continue;
        };
        for job in jobs.flatten() {
            for ep in std::fs::read_dir(job.path()).unwrap().flatten() {
                let Some(epoch) = ep.file_name().to_str().and_then(|e| e.parse::<u64>().ok())
                else {
                    continue;
                };
                dirs.push((r, epoch, ep.path()));
                if let Ok(bytes) = std::fs::read(ep.path().join("COMMIT")) {
                    let cf = sperli_wire::commit_file::decode_file(&bytes)
                        .unwrap_or_else(|e| panic!("{}: {e}", ep.path().display()));
                    assert_eq!(cf.epoch, epoch);
                    seen.push(epoch);
                    commits.insert((r, epoch), cf.hashes.clone());
                }
            }
        }
    }
    let mut gaps = 0;
    for (r, epoch, dir) in &dirs {
        let Some(hashes) = commits
            .iter()
            .find(|((_, e), _)| e == epoch)
            .map(|(_, h)| h)
        else {
            continue;
        };
        let own = std::fs::read(dir.join(rank_file_name(*r)))
            .unwrap_or_else(|_| panic!("{}: committed epoch without own file", dir.display()));
        assert_eq!(
            Sha256Digest::of(&own),
            hashes[*r as usize],
            "{}: own file does not match the COMMIT",
            dir.display()
        );
        if !commits.contains_key(&(*r, *epoch)) {
            continue;
        }
        let pred = (r + size - 1) % size;
        let buddy = std::fs::read(dir.join(buddy_file_name(pred))).ok();
        let ok = buddy.is_some_and(|b| Sha256Digest::of(&b) == hashes[pred as usize]);
        if !ok {
            eprintln!(
                "note: {}: rank {r}'s COMMIT without a complete buddy copy of rank {pred}",
                dir.display()
            );
            gaps += 1;
        }
    }
    (seen, gaps)
}

const STEPS: &str = "30";

/// The result line of an undisturbed `ckpt 30 10` run of 3 ranks.
fn reference(root: &Path) -> String {
    let out = retry(|| {
        let _ = std::fs::remove_dir_all(root);
        launch(
            &[
                "run",
                "-n",
                "3",
                "--timeout",
                "60",
                "--checkpoint-dir",
                root.to_str().unwrap(),
            ],
            &["ckpt", STEPS, "10"],
            &[],
            Duration::from_secs(90),
        )
    });
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}");
    result_line(&stdout).unwrap()
}

/// One `ckpt 30 10` run of 3 ranks with `restart_max` restarts, the test
/// hook `SPERLI_TEST_CKPT_KILL=kill` and extra example args.
fn crashed_run(
    root: &Path,
    kill: &str,
    restart_max: &str,
    extra: &[&str],
) -> (String, String, bool) {
    let mut ex = vec!["ckpt", STEPS, "10", "0"];
    ex.extend_from_slice(extra);
    let out = retry(|| {
        let _ = std::fs::remove_dir_all(root);
        launch(
            &[
                "run",
                "-n",
                "3",
                "--restart-max",
                restart_max,
                "--recover",
                "restart",
                "--silence-ms",
                "2000",
                "--timeout",
                "120",
                "--keep-checkpoints",
                "--checkpoint-dir",
                root.to_str().unwrap(),
            ],
            &ex,
            &[("SPERLI_TEST_CKPT_KILL", kill)],
            Duration::from_secs(180),
        )
    });
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// SIGKILL of one rank inside each step of the checkpoint of epoch 2
/// (incarnation 1; `SPERLI_TEST_CKPT_KILL=POINT,RANK,1,2`): the restart
/// resumes from a valid COMMIT (epoch 1 or 2) and ends with the result of
/// an undisturbed run; every COMMIT left on disk lists the files next to
/// it.
#[test]
fn sigkill_inside_each_checkpoint_step_resumes_with_the_right_result() {
    let _cpu = crate::shared_cpu();
    let base = scratch("steps");
    let want = reference(&base.join("clean"));
    let points = [
        ("step0", 0),
        ("step1", 0),
        ("step1", 2),
        ("step2", 1),
        ("step3", 1),
        ("step4-commit-written", 0),
        ("step4", 2),
        ("step5", 1),
    ];
    for (point, rank) in points {
        let root = base.join(format!("{point}-{rank}"));
        let spec = format!("{point},{rank},1,2");
        let (stdout, stderr, ok) = crashed_run(&root, &spec, "1", &[]);
        let what = format!("{spec}:\n{stdout}\n{stderr}");
        assert!(
            stderr.contains(&format!("test hook: SIGKILL at {point}")),
            "{what}"
        );
        assert!(ok, "{what}");
        assert!(
            stderr.contains("restarting the job as incarnation 2"),
            "{what}"
        );
        let resumed = stdout
            .lines()
            .find(|l| l.starts_with("[0] incarnation 2: resumed from epoch "))
            .unwrap_or_else(|| panic!("no resume: {what}"));
        assert!(
            resumed.contains("epoch 1 ") || resumed.contains("epoch 2 "),
            "{resumed}"
        );
        assert_eq!(
            result_line(&stdout).as_deref(),
            Some(want.as_str()),
            "{what}"
        );
        let (epochs, gaps) = check_commits(&root, 3);
        assert!(epochs.contains(&3), "{spec}: epochs {epochs:?}");
        println!("{spec}: {resumed}; COMMITs without a complete buddy copy: {gaps}");
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Incarnation 1 loses rank 1 (SIGKILL before step 25, after the COMMIT
/// of epoch 2); incarnation 2 loses rank 1 again inside the resume
/// exchange (after the announcement of epoch 2); incarnation 3 resumes
/// epoch 2 and ends with the right result.
#[test]
fn sigkill_inside_resume_is_restarted_again_and_resumes() {
    let _cpu = crate::shared_cpu();
    let base = scratch("resume");
    let want = reference(&base.join("clean"));
    let root = base.join("crashed");
    let (stdout, stderr, ok) = crashed_run(&root, "resume,1,2,2", "2", &["25", "1"]);
    let what = format!("{stdout}\n{stderr}");
    assert!(stderr.contains("test hook: SIGKILL at resume"), "{what}");
    assert!(ok, "{what}");
    assert!(
        stderr.contains("restarting the job as incarnation 3"),
        "{what}"
    );
    assert!(
        stdout.contains("[0] incarnation 3: resumed from epoch 2 "),
        "{what}"
    );
    assert_eq!(
        result_line(&stdout).as_deref(),
        Some(want.as_str()),
        "{what}"
    );
    check_commits(&root, 3);
    let _ = std::fs::remove_dir_all(&base);
}

// ---- slow: scale ------------------------------------------------------

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// One `scale` run of `n` ranks on 127.0.0.1..127.0.0.n with the silence
/// limit `silence_ms`: (start-up ms, wall ms, max VmHWM KiB, mean VmHWM
/// KiB, max fds).
fn scale_run(n: u32, silence_ms: &str) -> (u128, u128, u64, u64, usize) {
    let hosts: Vec<String> = (1..=n).map(|i| format!("127.0.0.{i}")).collect();
    let hosts = hosts.join(",");
    let root = scratch(&format!("scale-{n}"));
    let start = unix_ms();
    let out = scale_launch(n, &hosts, silence_ms, &root);
    let wall = unix_ms() - start;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{n} ranks:\n{stdout}\n{stderr}");
    let ups: Vec<u128> = stdout
        .lines()
        .filter_map(|l| l.split_once("] up ").and_then(|(_, v)| v.parse().ok()))
        .collect();
    assert_eq!(ups.len(), n as usize, "{stdout}");
    let mut hwm = Vec::new();
    let mut fds = Vec::new();
    for l in stdout.lines().filter(|l| l.contains("] stats ")) {
        let w: Vec<&str> = l.split_whitespace().collect();
        let get = |k: &str| -> u64 {
            w.iter()
                .position(|x| *x == k)
                .and_then(|i| w.get(i + 1))
                .and_then(|v| v.parse().ok())
                .unwrap()
        };
        hwm.push(get("hwm_kib"));
        fds.push(get("fds") as usize);
    }
    assert_eq!(hwm.len(), n as usize, "{stdout}");
    assert_eq!(check_commits(&root, n).0.len(), n as usize);
    let _ = std::fs::remove_dir_all(&root);
    let startup = ups.iter().max().unwrap() - start;
    (
        startup,
        wall,
        *hwm.iter().max().unwrap(),
        hwm.iter().sum::<u64>() / u64::from(n),
        *fds.iter().max().unwrap(),
    )
}

/// One launch of the scale job (see [`scale_run`]).
fn scale_launch(n: u32, hosts: &str, silence_ms: &str, root: &std::path::Path) -> Output {
    retry(|| {
        let _ = std::fs::remove_dir_all(root);
        launch(
            &[
                "run",
                "-n",
                &n.to_string(),
                "-H",
                hosts,
                "--silence-ms",
                silence_ms,
                "--timeout",
                "240",
                "--keep-checkpoints",
                "--checkpoint-dir",
                root.to_str().unwrap(),
            ],
            &["scale"],
            &[],
            Duration::from_secs(300),
        )
    })
}

/// 8, 16, 32 and 64 ranks (one loopback address each) start, run an
/// allreduce and a checkpoint, and end cleanly; prints start-up time,
/// peak RSS and descriptors per rank (the figures of docs/reliability.md).
/// With the default silence limit (5000 ms) at every size, and one try:
/// on two cores a 64-rank set-up (2016 TLS handshakes) keeps every I/O
/// thread busy with handshakes for seconds, which must not make any rank
/// look silent (heartbeats go out between handshakes, protocol §5.2).
#[test]
#[ignore = "slow (8-64 ranks): SPERLI_SLOW_TESTS=1 cargo xtask test, or cargo test -- --ignored"]
fn scale_to_64_ranks_on_loopback() {
    let _cpu = crate::exclusive_cpu();
    println!("ranks startup_ms wall_ms hwm_max_kib hwm_mean_kib fds_max");
    for n in [8, 16, 32, 64] {
        let (startup, wall, hwm_max, hwm_mean, fds) = scale_run(n, "5000");
        println!("{n} {startup} {wall} {hwm_max} {hwm_mean} {fds}");
    }
}
