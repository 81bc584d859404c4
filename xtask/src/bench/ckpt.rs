//! The checkpoint job's later run (the resume figures): the checkpoint job runs with
//! `--job-key DIR/job.key --keep-checkpoints`, so its tree and key outlive
//! it; then `sperli run --job-key DIR/job.key --checkpoint-dir DIR --
//! sperli-bench rank resume` is the same job at the next incarnation and
//! resumes its last checkpoint (the last size of the job, 64 MiB per rank;
//! 16 MiB with `--quick`). Its figures: `resume_total_ms`, from the start of
//! that `sperli run` to every rank loaded; `resume_ms`, from rank 0's start
//! to every rank loaded; `resume_exchange_ms`, the resume exchange alone
//! (and a barrier).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::report::{cell, size_name};
use super::{
    ckpt_sizes, group, record, run_retrying, sperli_argv, spread_hosts, Programs, Samples,
    CKPT_RANKS,
};

/// The key file of the checkpoint job, inside its checkpoint directory (so
/// it goes with it).
fn key_file(dir: &Path) -> PathBuf {
    dir.join("job.key")
}

/// The launcher arguments of the checkpoint job in `dir`.
pub fn launcher_args(dir: &Path) -> Vec<String> {
    vec![
        "--checkpoint-dir".into(),
        dir.display().to_string(),
        "--job-key".into(),
        key_file(dir).display().to_string(),
        "--keep-checkpoints".into(),
    ]
}

/// The group of the resume figures.
pub fn resume_group() -> String {
    group("sperli", "resume", CKPT_RANKS)
}

/// Runs the later run of the checkpoint job in `dir` and files its
/// figures (see the module docs).
pub fn resume_job(
    p: &Programs,
    dir: &Path,
    quick: bool,
    samples: &mut Samples,
) -> Result<(), String> {
    let launcher = vec![
        "--checkpoint-dir".into(),
        dir.display().to_string(),
        "--job-key".into(),
        key_file(dir).display().to_string(),
    ];
    let mut args = vec!["rank", "resume"];
    if quick {
        args.push("--quick");
    }
    let argv = sperli_argv(
        p,
        CKPT_RANKS,
        Some(spread_hosts(CKPT_RANKS)),
        &launcher,
        &args,
    );
    let label = format!("sperli resume n={CKPT_RANKS}");
    let o = run_retrying(&label, &argv, &[], samples)?;
    println!("    {label}: {:.1} s", o.secs);
    let (size, _) = ckpt_sizes(quick)[1];
    let loaded = o
        .results
        .iter()
        .find(|r| r.0 == "resume_loaded_unix_ns" && r.1 == size)
        .map(|r| r.2)
        .ok_or_else(|| format!("{label}: resume figures missing for {size} bytes per rank"))?;
    let grp = resume_group();
    record(samples, &grp, &o);
    samples.add(&grp, "resume_total_ms", size, (loaded - o.spawned_ns) / 1e6);
    Ok(())
}

/// The resume rows of the "Checkpoints" section.
pub fn resume_rows(o: &mut String, s: &Samples, quick: bool) {
    let g = resume_group();
    let (size, _) = ckpt_sizes(quick)[1];
    let _ = writeln!(
        o,
        "\nResume (protocol §10.2) of the job above in a later run of it, `sperli run \
         --job-key DIR/job.key --checkpoint-dir DIR -- sperli-bench rank resume` (the \
         checkpoint job ran with `--job-key DIR/job.key --keep-checkpoints`): every rank \
         offers its COMMIT, loads its {} file of the last epoch, checks both SHA-256 of it \
         and decodes the state; then a barrier. Times in ms, the median (min..max) of the \
         runs.\n",
        size_name(size)
    );
    let _ = writeln!(
        o,
        "| state/rank | from `sperli run` to every rank loaded | from rank 0's start | the resume exchange alone |"
    );
    let _ = writeln!(o, "|---|---|---|---|");
    let _ = writeln!(
        o,
        "| {} | {} | {} | {} |",
        size_name(size),
        cell(s.get(&g, "resume_total_ms", size)),
        cell(s.get(&g, "resume_ms", size)),
        cell(s.get(&g, "resume_exchange_ms", size))
    );
}
