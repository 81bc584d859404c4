//! The private directory of a job run's failure records
//! ([`sperli_wire::failure_record`]): the launcher names one file in it to
//! each rank (`SPERLI_ERROR_FILE`) and reads what a failed rank wrote
//! there (docs/launcher.md, "Which rank failed").

use std::io::Read;
use std::path::PathBuf;

use sperli_wire::failure_record::{FailureRecord, MAX_RECORD_BYTES};

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

    /// Reads the record `rank` wrote, if any (at most
    /// [`MAX_RECORD_BYTES`] of its file).
    pub fn read(&self, rank: u32) -> Option<FailureRecord> {
        let mut text = String::new();
        std::fs::File::open(self.file(rank))
            .ok()?
            .take(MAX_RECORD_BYTES)
            .read_to_string(&mut text)
            .ok()?;
        FailureRecord::parse(&text)
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

    #[test]
    fn the_directory_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let d = RecordDir::create().unwrap();
        let p = d.path.clone();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::write(d.file(2), "H1612 blame=5\n").unwrap();
        assert_eq!(d.read(2).unwrap().blame, Some(5));
        assert_eq!(d.read(3), None);
        drop(d);
        assert!(!p.exists());
    }
}
