//! In-place recovery (protocol §18.7, `sperli run --recover inplace`):
//! the `ckpt` example loses ranks (SIGKILL during a step, during a
//! checkpoint, during a recovery, twice, rank 0, SIGSTOP); only the lost
//! ranks' processes are replaced, the survivors keep theirs and roll back
//! to the last COMMIT in place, and the job ends with the result bytes of
//! an undisturbed run.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::reliability::{launch, retry};

const STEPS: &str = "30";

/// Each rank's pids as its `rank R: pid P incarnation I` lines say, in
/// order, and the pid of its `rank R: done, pid P` line.
/// Per rank: each start's (pid, incarnation).
type Starts = BTreeMap<u32, Vec<(String, u32)>>;

fn pids(stdout: &str) -> (Starts, BTreeMap<u32, String>) {
    let mut started: Starts = BTreeMap::new();
    let mut done = BTreeMap::new();
    for l in stdout.lines() {
        let Some(rest) = l.split_once("] rank ").map(|(_, r)| r) else {
            continue;
        };
        let Some((r, rest)) = rest.split_once(": ") else {
            continue;
        };
        let Ok(r) = r.parse::<u32>() else { continue };
        if let Some(rest) = rest.strip_prefix("pid ") {
            if let Some((pid, inc)) = rest.split_once(" incarnation ") {
                let inc = inc.trim().parse().unwrap();
                started.entry(r).or_default().push((pid.to_owned(), inc));
            }
        } else if let Some(pid) = rest.strip_prefix("done, pid ") {
            assert!(done.insert(r, pid.trim().to_owned()).is_none(), "{stdout}");
        }
    }
    (started, done)
}

/// Runs `ckpt 30 5 SLEEP LOSSES...` at `n` ranks with `--recover
/// inplace` (and `env`), and checks: the job succeeds with the result of
/// an undisturbed run; every rank in `lost` was replaced by a new process
/// with a higher incarnation and ended in the last of them; every other rank ended in
/// the process it started in; rank 0 said it rolled back; the launcher
/// said where each replacement runs. Returns stdout and stderr.
fn inplace_job(n: u32, losses: &[&str], lost: &[u32], env: &[(&str, &str)]) -> (String, String) {
    let _cpu = crate::shared_cpu();
    let dir = std::env::temp_dir().join(format!(
        "sperli-inplace-{}-{}",
        std::process::id(),
        losses.join("_").replace(':', "-")
    ));
    let n_s = n.to_string();
    let mut ex = vec!["ckpt", STEPS, "5", "20"];
    ex.extend_from_slice(losses);
    let out = retry(|| {
        let _ = std::fs::remove_dir_all(&dir);
        launch(
            &[
                "run",
                "-n",
                &n_s,
                "--recover",
                "inplace",
                "--restart-max",
                "4",
                "--silence-ms",
                "1500",
                "--timeout",
                "120",
                "--checkpoint-dir",
                dir.to_str().unwrap(),
            ],
            &ex,
            env,
            Duration::from_secs(180),
        )
    });
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let reference = std::process::Command::new(crate::example())
        .args(["ckpt-reference", &n_s, STEPS])
        .output()
        .unwrap();
    let want = format!("[0] {}", String::from_utf8_lossy(&reference.stdout).trim());
    assert!(
        stdout.lines().any(|l| l == want),
        "no `{want}`:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("[0] rolled back to epoch "), "{stdout}");
    let (started, done) = pids(&stdout);
    for r in 0..n {
        let runs = started
            .get(&r)
            .unwrap_or_else(|| panic!("rank {r}:\n{stdout}"));
        let end = done
            .get(&r)
            .unwrap_or_else(|| panic!("rank {r} not done:\n{stdout}"));
        if lost.contains(&r) {
            // Replaced once, or again when its replacement's join was cut
            // short by a later loss (protocol §18.6), each time by a new
            // process with a higher incarnation.
            assert!(runs.len() >= 2, "rank {r}: {runs:?}\n{stdout}");
            assert!(runs.windows(2).all(|w| w[0].1 < w[1].1 && w[0].0 != w[1].0));
            assert_eq!(runs[0].1, 1, "{stdout}");
            let last = &runs[runs.len() - 1].0;
            assert_eq!(end, last, "rank {r} ended elsewhere:\n{stdout}");
            let line = format!("replacement of rank {r} runs on ");
            assert!(stderr.contains(&line), "no `{line}`:\n{stderr}");
        } else {
            assert_eq!(runs.len(), 1, "rank {r} restarted: {runs:?}\n{stdout}");
            assert_eq!(end, &runs[0].0, "{stdout}");
        }
    }
    (stdout, stderr)
}

#[test]
fn a_rank_killed_during_a_step_is_replaced_in_place() {
    let (_, stderr) = inplace_job(4, &["2:17"], &[2], &[]);
    // Its end, or the survivors' reports if they all came first (it is
    // then fenced: killed again, protocol §18.6).
    assert!(
        stderr.contains("rank 2 lost (killed by signal 9 (SIGKILL))")
            || stderr.contains("rank 2 lost (lost by rank "),
        "{stderr}"
    );
}

/// Rank 0 (it holds the job secret key that signs COMMITs, protocol §2.4)
/// of a 2-rank job: its replacement gets the key and leads the resume.
#[test]
fn rank_0_killed_is_replaced_in_place() {
    inplace_job(2, &["0:12"], &[0], &[]);
}

#[test]
fn two_ranks_killed_one_after_the_other() {
    inplace_job(4, &["2:8", "1:22"], &[1, 2], &[]);
}

#[test]
fn a_rank_killed_during_a_recovery() {
    inplace_job(5, &["2:12", "4:12:recovery"], &[2, 4], &[]);
}

#[test]
fn a_stopped_rank_is_fenced_and_replaced() {
    let (_, stderr) = inplace_job(3, &["1:12:stop"], &[1], &[]);
    assert!(stderr.contains("rank 1 lost"), "{stderr}");
}

/// SIGKILL inside the checkpoint of epoch 3 (rank 1 after a push chunk to
/// its buddy, protocol §9.4 step 3): the epoch is void, every rank rolls
/// back to epoch 2.
#[test]
fn a_rank_killed_during_a_checkpoint() {
    let (stdout, _) = inplace_job(3, &[], &[1], &[("SPERLI_TEST_CKPT_KILL", "step3,1,1,3")]);
    assert!(
        stdout.contains("[0] rolled back to epoch 2 (step 10)"),
        "{stdout}"
    );
}

/// The same at 8 ranks: one SIGKILL during a step.
#[test]
fn eight_ranks_lose_one() {
    inplace_job(8, &["5:14"], &[5], &[]);
}
