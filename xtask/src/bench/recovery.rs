//! The rows of losing a rank (protocol §18): `sperli-bench rank shrink`
//! under `sperli run --recover shrink` and, for the same job, a full
//! restart (`--recover restart --restart-max 1`). The last rank kills
//! itself after three allreduces; the figures are the time from its kill
//! to the next step every survivor completed, in both, and with the
//! shrink the time from the earliest survivor that knew of the failure
//! (its call returned the revoked error) to the last that recovered and
//! agreed on where to go on (an allreduce over the survivors).
//!
//! In place: `sperli-bench rank inplace BYTES` (a checkpointed state of
//! BYTES per rank) under `--recover inplace --restart-max 1` and, for the
//! same job, `--recover restart --restart-max 1`; the figure is the time
//! from the kill to the first step every rank completed after resuming
//! the COMMIT (in place: the survivors rolled back in their processes and
//! the replacement joined; restart: every rank started again).

use std::fmt::Write;

use super::report::{cell, ratio, ratio_cell};
use super::{
    fresh_ckpt_dir, group, run_retrying, sperli_argv, spread_hosts, Options, Programs, Samples,
};

/// The job sizes: 4, 16 and 64 ranks (`--quick`: 4).
fn ranks(quick: bool) -> &'static [u32] {
    if quick {
        &[4]
    } else {
        &[4, 16, 64]
    }
}

/// The two ways the job goes on: the group word and the launcher's flags.
const WAYS: [(&str, &[&str]); 2] = [
    ("shrink", &["--recover", "shrink"]),
    ("restart", &["--recover", "restart", "--restart-max", "1"]),
];

/// The in-place jobs' state per rank at `n` ranks: 64 MiB at 4 ranks,
/// less at 16 and 64 (the whole job's state fits the machine's memory
/// twice: each rank's own and its buddy's copy).
fn state_bytes(n: u32) -> usize {
    match n {
        0..=4 => 64 << 20,
        5..=16 => 4 << 20,
        _ => 256 << 10,
    }
}

/// The two ways an in-place job goes on: the group word and the
/// launcher's flags.
const INPLACE_WAYS: [(&str, &[&str]); 2] = [
    ("inplace", &["--recover", "inplace", "--restart-max", "1"]),
    (
        "inplace-restart",
        &["--recover", "restart", "--restart-max", "1"],
    ),
];

/// Runs one job that loses a rank (`argv`) and files the time from the
/// kill to the next step in `sperli.recovery-<way>.<n>`; returns its
/// `shrink_agree_us`, if it printed one.
fn kill_to_step(
    way: &str,
    n: u32,
    argv: &[String],
    samples: &mut Samples,
) -> Result<Option<f64>, String> {
    let label = format!("sperli {way} n={n}");
    let o = run_retrying(&label, argv, &[], samples)?;
    println!("    {label}: {:.1} s", o.secs);
    let find = |k: &str| o.results.iter().find(|r| r.0 == k).map(|r| r.2);
    let (Some(kill), Some(step)) = (find("kill_unix_ns"), find("step_after_kill_unix_ns")) else {
        return Err(format!("{label}: the kill or the next step is missing"));
    };
    let g = group("sperli", &format!("recovery-{way}"), n);
    samples.add(&g, "kill_to_step_ms", 0, (step - kill) / 1e6);
    Ok(find("shrink_agree_us"))
}

/// Runs the in-place jobs and files their figures in
/// `sperli.recovery-<way>.<n>`.
fn inplace_jobs(p: &Programs, opts: &Options, samples: &mut Samples) -> Result<(), String> {
    for &n in ranks(opts.quick) {
        let bytes = state_bytes(n).to_string();
        for (way, flags) in INPLACE_WAYS {
            let dir = fresh_ckpt_dir(samples)?;
            let mut launcher: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
            launcher.extend(["--checkpoint-dir".into(), dir.display().to_string()]);
            let argv = sperli_argv(
                p,
                n,
                Some(spread_hosts(n)),
                &launcher,
                &["rank", "inplace", &bytes],
            );
            let o = kill_to_step(way, n, &argv, samples);
            let _ = std::fs::remove_dir_all(&dir);
            o?;
        }
    }
    Ok(())
}

/// Runs the jobs and files their figures in `sperli.recovery-<way>.<n>`.
pub(super) fn jobs(p: &Programs, opts: &Options, samples: &mut Samples) -> Result<(), String> {
    inplace_jobs(p, opts, samples)?;
    for &n in ranks(opts.quick) {
        for (way, flags) in WAYS {
            let launcher: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
            let argv = sperli_argv(p, n, Some(spread_hosts(n)), &launcher, &["rank", "shrink"]);
            if let Some(us) = kill_to_step(way, n, &argv, samples)? {
                let g = group("sperli", &format!("recovery-{way}"), n);
                samples.add(&g, "shrink_agree_ms", 0, us / 1e3);
            }
        }
    }
    Ok(())
}

/// The report section.
pub(super) fn section(o: &mut String, s: &Samples, quick: bool) {
    let _ = writeln!(o, "## Losing a rank\n");
    let _ = writeln!(
        o,
        "`sperli-bench rank shrink` (protocol §18): after three allreduces the last \
         rank kills itself. With `sperli run --recover shrink` the survivors' next call \
         returns the revoked error, the launcher fences the lost rank and signs the next \
         membership, the survivors recover into it (`Comm::recover`), agree on where to \
         go on (an allreduce over them) and make their next step, in the processes and \
         connections they have. With `--recover restart` the same job ends every rank and \
         starts again (set-up of the whole mesh included). Times in ms, the median \
         (min..max) of the runs; from the kill to the next step every survivor completed, \
         and for the shrink from the earliest survivor that knew of the failure to the \
         last that agreed.\n"
    );
    let _ = writeln!(
        o,
        "| ranks | shrink: kill to next step | full restart: kill to next step | shrink / restart | shrink + agree after the failure is known |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|");
    for &n in ranks(quick) {
        let shrink = group("sperli", "recovery-shrink", n);
        let restart = group("sperli", "recovery-restart", n);
        let (a, b) = (
            s.get(&shrink, "kill_to_step_ms", 0),
            s.get(&restart, "kill_to_step_ms", 0),
        );
        let _ = writeln!(
            o,
            "| {n} | {} | {} | {} | {} |",
            cell(a),
            cell(b),
            ratio_cell(ratio(a, b)),
            cell(s.get(&shrink, "shrink_agree_ms", 0))
        );
    }
    if !quick {
        let agree = s.get(
            &group("sperli", "recovery-shrink", 16),
            "shrink_agree_ms",
            0,
        );
        let _ = writeln!(
            o,
            "\nGoal: shrink + agree at 16 ranks ≤ {SHRINK_GOAL_MS} ms after the failure is known \
             (median): {}.",
            verdict(agree.map(|a| a.median <= SHRINK_GOAL_MS))
        );
    }
    let _ = writeln!(
        o,
        "\nIn place (`sperli-bench rank inplace BYTES`, protocol §18.7): every rank \
         checkpoints BYTES of state once, then the last rank kills itself. With `sperli run \
         --recover inplace` the launcher starts a replacement of that rank only, the \
         survivors keep their processes and connections, accept the replacement's \
         connection and roll back to the COMMIT (`Checkpointer::run`); with `--recover \
         restart` every rank ends and the job starts again and resumes the COMMIT. Times in \
         ms from the kill to the first step every rank completed after the resume.\n"
    );
    let _ = writeln!(
        o,
        "| ranks | state per rank | in place: kill to next step | full restart: kill to next step | in place / restart |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|");
    for &n in ranks(quick) {
        let inplace = group("sperli", "recovery-inplace", n);
        let restart = group("sperli", "recovery-inplace-restart", n);
        let (a, b) = (
            s.get(&inplace, "kill_to_step_ms", 0),
            s.get(&restart, "kill_to_step_ms", 0),
        );
        let bytes = state_bytes(n);
        let size = if bytes >= 1 << 20 {
            format!("{} MiB", bytes >> 20)
        } else {
            format!("{} KiB", bytes >> 10)
        };
        let _ = writeln!(
            o,
            "| {n} | {size} | {} | {} | {} |",
            cell(a),
            cell(b),
            ratio_cell(ratio(a, b))
        );
    }
    if !quick {
        let n = 64;
        let r = ratio(
            s.get(
                &group("sperli", "recovery-inplace", n),
                "kill_to_step_ms",
                0,
            ),
            s.get(
                &group("sperli", "recovery-inplace-restart", n),
                "kill_to_step_ms",
                0,
            ),
        );
        let _ = writeln!(
            o,
            "\nGoal: in place at {n} ranks ≤ {INPLACE_GOAL}x the full restart (medians of the \
             same run): {}.",
            verdict(r.map(|r| r <= INPLACE_GOAL))
        );
    }
    let _ = writeln!(o);
}

/// Shrink plus agree at 16 ranks, ms.
const SHRINK_GOAL_MS: f64 = 5.0;
/// In place over a full restart at 64 ranks.
const INPLACE_GOAL: f64 = 0.1;

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_shows_both_ways_and_their_ratio() {
        let mut s = Samples::default();
        s.add(
            &group("sperli", "recovery-shrink", 4),
            "kill_to_step_ms",
            0,
            20.0,
        );
        s.add(
            &group("sperli", "recovery-restart", 4),
            "kill_to_step_ms",
            0,
            400.0,
        );
        s.add(
            &group("sperli", "recovery-shrink", 4),
            "shrink_agree_ms",
            0,
            3.0,
        );
        s.add(
            &group("sperli", "recovery-inplace", 4),
            "kill_to_step_ms",
            0,
            40.0,
        );
        s.add(
            &group("sperli", "recovery-inplace-restart", 4),
            "kill_to_step_ms",
            0,
            800.0,
        );
        for (n, way, what, v) in [
            (16, "recovery-shrink", "shrink_agree_ms", 4.0),
            (64, "recovery-inplace", "kill_to_step_ms", 120.0),
            (64, "recovery-inplace-restart", "kill_to_step_ms", 1000.0),
        ] {
            s.add(&group("sperli", way, n), what, 0, v);
        }
        let mut full = String::new();
        section(&mut full, &s, false);
        assert!(
            full.contains("≤ 5 ms after the failure is known (median): **met**."),
            "{full}"
        );
        assert!(
            full.contains("≤ 0.1x the full restart (medians of the same run): **not met**."),
            "{full}"
        );
        let mut o = String::new();
        section(&mut o, &s, true);
        assert!(
            o.contains("| 4 | 64 MiB | 40.0 (40.0..40.0) | 800 (800..800) | 0.05 |"),
            "{o}"
        );
        assert!(
            o.contains("| 4 | 20.0 (20.0..20.0) | 400 (400..400) | 0.05 | 3.00 (3.00..3.00) |"),
            "{o}"
        );
    }
}
