//! Losing ranks without losing the job (protocol §18, `sperli run
//! --recover shrink`): the `shrink` example's allreduce loop checks every
//! fold bit for bit while ranks are SIGKILLed or SIGSTOPped, and the
//! survivors go on in their own processes.

use std::collections::BTreeMap;

use super::sperli;

/// Runs `shrink STEPS LOSSES` at `n` ranks with `--recover shrink` and
/// checks what every survivor says: its pid at the start and the end are
/// the same (one process, never restarted), every fold was checked, and
/// the members at the end are the ranks not in `lost`.
fn shrink_job(n: u32, steps: u32, losses: &[&str], lost: &[u32], extra: &[&str]) -> String {
    let _cpu = crate::shared_cpu();
    let (n_s, steps_s) = (n.to_string(), steps.to_string());
    let mut args = vec!["run", "-n", &n_s, "--recover", "shrink", "--timeout", "90"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "EXAMPLE", "shrink", &steps_s]);
    args.extend_from_slice(losses);
    let out = sperli(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let survivors: Vec<u32> = (0..n).filter(|r| !lost.contains(r)).collect();
    let mut start = BTreeMap::new();
    for l in stdout.lines() {
        if let Some((r, pid)) = l.split_once("]").and_then(|(_, rest)| {
            let rest = rest.trim().strip_prefix("rank ")?;
            let (r, pid) = rest.split_once(": pid ")?;
            Some((r.parse::<u32>().ok()?, pid.to_string()))
        }) {
            assert!(
                start.insert(r, pid).is_none(),
                "rank {r} started twice:\n{stdout}"
            );
        }
    }
    for r in &survivors {
        let done = format!(
            "[{r}] rank {r}: shrink done: {steps} steps over {survivors:?}, every fold checked, pid {}",
            start.get(r).unwrap_or_else(|| panic!("rank {r} never started:\n{stdout}"))
        );
        assert!(stdout.contains(&done), "no `{done}`:\n{stdout}\n{stderr}");
    }
    stderr.into_owned()
}

#[test]
fn a_rank_killed_during_a_step_costs_one_process() {
    let stderr = shrink_job(4, 20, &["3:5"], &[3], &[]);
    assert!(stderr.contains("rank 3"), "{stderr}");
}

#[test]
fn rank_0_killed_the_others_go_on() {
    shrink_job(3, 12, &["0:4"], &[0], &[]);
}

#[test]
fn two_ranks_killed_one_after_the_other() {
    shrink_job(5, 24, &["4:3", "1:11"], &[1, 4], &[]);
}

#[test]
fn a_stopped_rank_is_fenced_and_the_others_go_on() {
    shrink_job(3, 12, &["2:4:stop"], &[2], &["--silence-ms", "1500"]);
}

#[test]
fn a_rank_killed_during_a_recovery() {
    // Rank 3 is lost before step 4; rank 1 dies once its call returned
    // the revoked error, while the launcher decides.
    shrink_job(5, 12, &["3:4", "1:0:recovery"], &[1, 3], &[]);
}
