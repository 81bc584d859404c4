//! Which rank failed first: the root cause the launcher reports, and the
//! rank it moves to a spare host on restart (docs/launcher.md, "Which rank
//! failed").
//!
//! When one rank fails, its peers fail too, within milliseconds, and their
//! exits race the first one to the launcher. Exit order alone cannot tell
//! them apart on a loaded machine, so every local rank gets a file to write
//! its [`FailureRecord`] in (`SPERLI_ERROR_FILE`, as torchrun's
//! `TORCHELASTIC_ERROR_FILE`): a rank that failed because a peer was lost
//! or aborted names that peer; a rank that failed on its own, or exited
//! with an error status without a SPERLI error, names nobody.

use std::path::{Path, PathBuf};

use sperli_transport::failure_record::FailureRecord;

use crate::supervise::RankExit;

/// One failed rank as the launcher saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The rank.
    pub rank: u32,
    /// How it ended.
    pub exit: RankExit,
    /// What it wrote about its failure, if anything.
    pub record: Option<FailureRecord>,
}

impl Failure {
    /// True when the rank does not blame another rank for its failure: it
    /// was killed by a signal, wrote no record (the program itself chose
    /// to fail) or wrote one that blames nobody.
    pub fn is_primary(&self) -> bool {
        matches!(self.exit, RankExit::Signal(_))
            || self
                .record
                .is_none_or(|r| r.blame.is_none() || r.blame == Some(self.rank))
    }
}

/// The root cause among `failures` (in the order they were reported):
/// a rank killed by a signal (a SPERLI rank whose peer fails exits with
/// an error, it is not killed); else, among the ranks that blame nobody,
/// the exit status fewest of them share; else (every rank blames another:
/// the culprit has not ended yet, e.g. it is stopped) the exit status
/// fewest ranks share. Ties go to the first reported.
pub fn root_cause(failures: &[Failure]) -> Option<Failure> {
    if let Some(f) = failures
        .iter()
        .find(|f| matches!(f.exit, RankExit::Signal(_)))
    {
        return Some(*f);
    }
    let primary: Vec<Failure> = failures
        .iter()
        .copied()
        .filter(Failure::is_primary)
        .collect();
    let pool = if primary.is_empty() {
        failures
    } else {
        &primary
    };
    let count = |e: &RankExit| pool.iter().filter(|f| f.exit == *e).count();
    pool.iter().min_by_key(|f| count(&f.exit)).copied()
}

/// A private directory (mode 0700) for the failure records of one run of
/// a job, removed when dropped.
#[derive(Debug)]
pub struct RecordDir {
    path: PathBuf,
}

impl RecordDir {
    /// Creates it under the system's temporary directory; `None` when that
    /// fails (the launcher then goes by exit statuses alone).
    pub fn create() -> Option<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("sperli-records-{}-{nanos:09}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .ok()
            .map(|()| Self { path })
    }

    /// The record file of `rank`.
    pub fn file(&self, rank: u32) -> PathBuf {
        self.path.join(format!("rank-{rank}"))
    }

    /// Reads the record `rank` wrote, if any.
    pub fn read(&self, rank: u32) -> Option<FailureRecord> {
        FailureRecord::read(&self.file(rank))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RecordDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(rank: u32, exit: RankExit, blame: Option<Option<u32>>) -> Failure {
        Failure {
            rank,
            exit,
            record: blame.map(|blame| FailureRecord { code: 1613, blame }),
        }
    }

    #[test]
    fn a_killed_rank_comes_first() {
        let v = [
            f(1, RankExit::Code(1), Some(Some(2))),
            f(2, RankExit::Signal(9), None),
            f(0, RankExit::Code(1), Some(Some(2))),
        ];
        assert_eq!(root_cause(&v).unwrap().rank, 2);
    }

    #[test]
    fn the_rank_others_blame_wins_even_when_reported_last() {
        // Rank 1 exits 3 on its own; rank 0 notices and exits 1 first.
        let v = [
            f(0, RankExit::Code(1), Some(Some(1))),
            f(1, RankExit::Code(3), None),
        ];
        assert_eq!(root_cause(&v).unwrap().rank, 1);
        // Rank 2 rejected a frame (blames nobody), the others got its ABORT.
        let v = [
            f(0, RankExit::Code(1), Some(Some(2))),
            f(1, RankExit::Code(1), Some(Some(2))),
            f(2, RankExit::Code(1), Some(None)),
        ];
        assert_eq!(root_cause(&v).unwrap().rank, 2);
    }

    #[test]
    fn without_records_the_rarest_status_then_the_first() {
        let v = [
            f(0, RankExit::Code(1), None),
            f(2, RankExit::Code(1), None),
            f(1, RankExit::Code(3), None),
        ];
        assert_eq!(root_cause(&v).unwrap().rank, 1);
        let v = [f(4, RankExit::Code(1), None), f(1, RankExit::Code(1), None)];
        assert_eq!(root_cause(&v).unwrap().rank, 4);
    }

    #[test]
    fn when_everyone_blames_someone_the_old_rule_holds() {
        let v = [
            f(0, RankExit::Code(1), Some(Some(3))),
            f(1, RankExit::Code(1), Some(Some(3))),
        ];
        assert_eq!(root_cause(&v).unwrap().rank, 0);
        assert_eq!(root_cause(&[]), None);
    }

    #[test]
    fn the_directory_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let d = RecordDir::create().unwrap();
        let p = d.path().to_path_buf();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        FailureRecord {
            code: 1612,
            blame: Some(5),
        }
        .write(&d.file(2));
        assert_eq!(d.read(2).unwrap().blame, Some(5));
        assert_eq!(d.read(3), None);
        drop(d);
        assert!(!p.exists());
    }
}
