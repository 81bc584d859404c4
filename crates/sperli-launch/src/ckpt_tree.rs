//! What happens to a job's checkpoint tree when the launcher is done with
//! it (docs/launcher.md, "Requeued jobs and the key file").
//!
//! `sperli run --checkpoint-dir DIR` gives rank r the directory
//! `DIR/rank-<r>`; the job writes `DIR/rank-<r>/<job hex>/<epoch>/...`
//! there (protocol §9.1), at most two epochs at a time.
//!
//! - **The job ends normally** (every rank exited 0): its checkpoints are
//!   of no further use. The launcher removes `DIR/rank-<r>/<job hex>` of
//!   every rank it can see (local ranks, and remote ones when DIR is on a
//!   shared file system), then each `DIR/rank-<r>` left empty, and the key
//!   file of `--job-key` (the job is over; its secret key should not stay
//!   on disk). `--keep-checkpoints` keeps both.
//! - **The job fails** (restarts used up, `--timeout`, a signal, a rank
//!   that cannot start): the tree stays. With `--job-key` the same command
//!   run again continues from it; without, no later run can resume it (no
//!   one has its key any more) and the launcher says where it is.
//!
//! A launcher that is killed removes nothing: the tree and the key file
//! are what the next run with `--job-key` continues from.

use std::path::{Path, PathBuf};

use sperli_wire::ckpt_path::job_dir;
use sperli_wire::JobId;

use crate::job_key::JobIdentity;

/// Every rank's part of one job's checkpoint tree under `DIR`.
#[derive(Debug, Clone)]
pub struct CheckpointTree {
    dir: PathBuf,
    job: JobId,
    size: u32,
}

impl CheckpointTree {
    /// The tree of job `job` with `size` ranks under `dir`
    /// (`--checkpoint-dir`).
    pub fn new(dir: &Path, job: JobId, size: u32) -> Self {
        Self {
            dir: dir.to_path_buf(),
            job,
            size,
        }
    }

    /// Rank `r`'s own checkpoint directory, `DIR/rank-<r>` (passed to the
    /// rank as `SPERLI_CHECKPOINT_DIR`).
    pub fn rank_dir(&self, r: u32) -> PathBuf {
        rank_dir(&self.dir, r)
    }

    /// `DIR/rank-<r>/<job hex>`.
    pub fn rank_job_dir(&self, r: u32) -> PathBuf {
        job_dir(self.rank_dir(r), self.job)
    }

    /// How the tree is named in messages: `DIR/rank-*/<job hex>`.
    pub fn pattern(&self) -> String {
        format!("{}/rank-*/{}", self.dir.display(), self.job.to_hex())
    }

    /// Removes every rank's `DIR/rank-<r>/<job hex>` that this machine
    /// sees, and `DIR/rank-<r>` when that leaves it empty. Returns how many
    /// job directories were removed and the ones that could not be.
    pub fn remove(&self) -> (u32, Vec<(PathBuf, std::io::Error)>) {
        let mut removed = 0;
        let mut failed = Vec::new();
        for r in 0..self.size {
            let d = self.rank_job_dir(r);
            match std::fs::remove_dir_all(&d) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => failed.push((d, e)),
            }
            // Only an empty directory goes; another job's tree stays.
            let _ = std::fs::remove_dir(self.rank_dir(r));
        }
        (removed, failed)
    }
}

/// `DIR/rank-<r>`.
pub fn rank_dir(dir: &Path, r: u32) -> PathBuf {
    dir.join(format!("rank-{r}"))
}

/// The policy at the end of a launcher run (see the module docs): `ok` is
/// a normal end, `keep` is `--keep-checkpoints`. Says what it did on
/// stderr.
pub fn at_end(tree: Option<&CheckpointTree>, identity: &mut JobIdentity, ok: bool, keep: bool) {
    match (ok, keep) {
        (true, false) => {
            if let Some(t) = tree {
                let (removed, failed) = t.remove();
                for (d, e) in &failed {
                    eprintln!(
                        "sperli: cannot remove the checkpoints in {}: {e}",
                        d.display()
                    );
                }
                if removed > 0 && failed.is_empty() {
                    eprintln!(
                        "sperli: the job ended normally; removed its checkpoints {} (--keep-checkpoints keeps them)",
                        t.pattern()
                    );
                }
            }
            if let Some(kf) = identity.take_key_file() {
                let path = kf.path().display().to_string();
                match kf.remove() {
                    Ok(()) => eprintln!(
                        "sperli: removed the key file {path}: the job is over (a later run with it starts a new job)"
                    ),
                    Err(e) => eprintln!("sperli: {e}"),
                }
            }
        }
        (true, true) => {
            if let Some(t) = tree {
                eprintln!("sperli: kept the checkpoints {}", t.pattern());
            }
        }
        (false, _) => {
            let Some(t) = tree else { return };
            match identity.key_file() {
                Some(kf) => eprintln!(
                    "sperli: the checkpoints stay in {}; run the same command again (with --job-key {}) to continue the job from its last valid COMMIT",
                    t.pattern(),
                    kf.path().display()
                ),
                None => eprintln!(
                    "sperli: the checkpoints stay in {}; without --job-key no later run can resume them: remove them when done",
                    t.pattern()
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removal_takes_this_job_only_and_empty_rank_dirs() {
        let root = std::env::temp_dir().join(format!("sperli-ckpt-tree-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let t = CheckpointTree::new(&root, JobId([3; 16]), 3);
        for r in 0..3 {
            std::fs::create_dir_all(t.rank_job_dir(r).join("1")).unwrap();
            std::fs::write(t.rank_job_dir(r).join("1/COMMIT"), b"x").unwrap();
        }
        let other = CheckpointTree::new(&root, JobId([4; 16]), 3);
        std::fs::create_dir_all(other.rank_job_dir(1)).unwrap();
        let (removed, failed) = t.remove();
        assert_eq!((removed, failed.len()), (3, 0));
        assert!(!t.rank_dir(0).exists() && !t.rank_dir(2).exists());
        assert!(other.rank_job_dir(1).exists(), "another job's tree stays");
        assert_eq!(t.remove().0, 0);
        let _ = std::fs::remove_dir_all(&root);
    }
}
