//! The rank's checkpoint tree on disk (protocol §9.1): where the files of
//! an epoch live, reading them back for a resume, and receiving a buddy
//! copy straight to disk. The crash-safe primitives are in [`crate::fsio`].
//!
//! ```text
//! <dir>/<job hex>/<epoch>/rank-<n>.ckpt          rank n's own file
//! <dir>/<job hex>/<epoch>/rank-<r>.ckpt.buddy    copy of rank r's file
//! <dir>/<job hex>/<epoch>/COMMIT                 the epoch's signed COMMIT
//! ```

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use sperli_wire::ckpt_chunks::ChunkTracker;
use sperli_wire::ckpt_data::{CkptData, CkptDataKind};
use sperli_wire::ckpt_path::{
    buddy_file_name, epoch_dir, job_dir, rank_file_name, temp_name, COMMIT_FILE_NAME,
};
use sperli_wire::error::{Error, FrameError};
use sperli_wire::limits::{commit_file_len, MAX_SIZE};
use sperli_wire::{JobId, Sha256Digest};

use crate::fsio::{self, Durable};

/// One rank's checkpoint tree: `dir/<job hex>/...` (protocol §9.1; `dir`
/// is the rank's own directory, two ranks on one host have two).
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    job: JobId,
    /// Whether the rank's directory was fsynced since the job directory
    /// could have appeared in it.
    tree_synced: std::sync::atomic::AtomicBool,
}

/// The longest COMMIT file read from disk (size 4096).
fn max_commit_len() -> u64 {
    commit_file_len(MAX_SIZE) as u64
}

impl Store {
    /// The tree of job `job` under `dir`, which is created if needed.
    pub(crate) fn new(dir: PathBuf, job: JobId) -> Result<Self, Error> {
        fsio::ensure_dir(&dir)?;
        Ok(Self {
            dir,
            job,
            tree_synced: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The rank's checkpoint directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// `dir/<job hex>`.
    pub(crate) fn job_dir(&self) -> PathBuf {
        job_dir(&self.dir, self.job)
    }

    /// `dir/<job hex>/<epoch>`.
    pub(crate) fn epoch_dir(&self, epoch: u64) -> PathBuf {
        epoch_dir(&self.dir, self.job, epoch)
    }

    /// §9.4 step 0 (and its counterpart on the other ranks): the epoch
    /// directory of `epoch` exists and holds no COMMIT of an earlier
    /// attempt (its removal is durable before this returns). A new
    /// directory's entry is made durable by [`Store::sync_tree`].
    pub(crate) fn begin_epoch(&self, epoch: u64) -> Result<PathBuf, Error> {
        let edir = self.epoch_dir(epoch);
        std::fs::create_dir_all(&edir)
            .map_err(|e| Error::io("creating a checkpoint directory", &e))?;
        fsio::remove_if_present(&edir, COMMIT_FILE_NAME)?;
        Ok(edir)
    }

    /// fsync of the job directory (and of the rank's directory the first
    /// time), so new entries in them (a new epoch directory, the job
    /// directory) are durable.
    pub(crate) fn sync_tree(&self) -> Result<(), Error> {
        if !self
            .tree_synced
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            fsio::sync_dir(&self.dir)?;
        }
        fsio::sync_dir(&self.job_dir())
    }

    /// §9.4 step 2: this rank's file of `epoch` (temporary name, fsync,
    /// rename); the rename is made durable by [`Store::sync_epoch`].
    pub(crate) fn write_own(&self, epoch: u64, rank: u32, file: &[u8]) -> Result<(), Error> {
        fsio::write_atomic(
            &self.epoch_dir(epoch),
            &rank_file_name(rank),
            file,
            Durable::WithDir,
        )
    }

    /// §9.4 step 4: the COMMIT of `epoch` (temporary name, fsync, rename);
    /// the directory is fsynced now or by the caller later.
    pub(crate) fn write_commit(
        &self,
        epoch: u64,
        commit: &[u8],
        durable: Durable,
    ) -> Result<(), Error> {
        fsio::write_atomic(&self.epoch_dir(epoch), COMMIT_FILE_NAME, commit, durable)
    }

    /// §9.4 step 4 on a rank other than 0: "stores a copy as COMMIT",
    /// written under its final name; the caller fsyncs the returned file
    /// and the directory. A copy cut short by a crash fails its signature
    /// check and never counts (§9.3), so it needs no temporary name.
    pub(crate) fn create_commit_copy(&self, epoch: u64, commit: &[u8]) -> Result<File, Error> {
        let path = self.epoch_dir(epoch).join(COMMIT_FILE_NAME);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| Error::io("creating a COMMIT copy", &e))?;
        f.write_all(commit)
            .map_err(|e| Error::io("writing a COMMIT copy", &e))?;
        Ok(f)
    }

    /// fsync of the directory of `epoch`: every rename into it so far
    /// (own file, buddy copy, COMMIT) is durable.
    pub(crate) fn sync_epoch(&self, epoch: u64) -> Result<(), Error> {
        fsio::sync_dir(&self.epoch_dir(epoch))
    }

    /// §9.4 step 5 after the COMMIT of `epoch`: removes every epoch below
    /// `epoch - 1` (best effort). The own file and the buddy copy of the
    /// newest removed epoch are recycled first: they become the temporary
    /// files of epoch `epoch + 1` (of `rank`, holding the copy of `pred`'s
    /// file), which the next checkpoint writes over in place. On this
    /// machine's file system a write over cached pages of allocated blocks
    /// costs a fraction of a write into a new file (the same trick as
    /// PostgreSQL's recycled WAL segments). Temporary files are never read,
    /// so a recycled one left by a crash counts for nothing.
    pub(crate) fn remove_below(&self, epoch: u64, rank: u32, pred: Option<u32>) {
        let next = self.epoch_dir(epoch.saturating_add(1));
        let mut recycled = vec![rank_file_name(rank)];
        recycled.extend(pred.map(buddy_file_name));
        let recycled: Vec<(String, PathBuf)> = if std::fs::create_dir_all(&next).is_ok() {
            recycled
                .into_iter()
                .map(|name| {
                    let to = next.join(temp_name(&name));
                    (name, to)
                })
                .collect()
        } else {
            Vec::new()
        };
        fsio::remove_epochs_below(&self.job_dir(), epoch.saturating_sub(1), &recycled);
    }

    /// Every COMMIT file of the tree, highest epoch first (§10.2 steps 1-2).
    /// Unreadable ones are left out; a file longer than the longest COMMIT
    /// is read one byte past that length (so it fails to decode) and no
    /// further.
    pub(crate) fn commits(&self) -> Vec<(u64, Vec<u8>)> {
        fsio::epochs(&self.job_dir())
            .into_iter()
            .filter_map(|(epoch, path)| {
                let bytes =
                    fsio::read_limited(&path.join(COMMIT_FILE_NAME), max_commit_len()).ok()??;
                Some((epoch, bytes))
            })
            .collect()
    }

    /// The COMMIT of `epoch` as stored, if any.
    pub(crate) fn commit(&self, epoch: u64) -> Option<Vec<u8>> {
        fsio::read_limited(
            &self.epoch_dir(epoch).join(COMMIT_FILE_NAME),
            max_commit_len(),
        )
        .ok()
        .flatten()
    }

    /// §10.2 step 4: this rank's own file of `epoch`, unchecked. A missing
    /// file is [`Error::Io`] `NotFound`.
    pub(crate) fn read_own(&self, epoch: u64, rank: u32) -> Result<Vec<u8>, Error> {
        std::fs::read(self.epoch_dir(epoch).join(rank_file_name(rank)))
            .map_err(|e| Error::io("reading the own rank file", &e))
    }

    /// §10.2 step 5: the copy of `owner`'s file this rank holds, unchecked.
    pub(crate) fn read_buddy_copy(&self, epoch: u64, owner: u32) -> Result<Vec<u8>, Error> {
        std::fs::read(self.epoch_dir(epoch).join(buddy_file_name(owner)))
            .map_err(|e| Error::io("reading a buddy copy", &e))
    }

    /// §10.2 step 5: keeps a fetched, checked file as this rank's own file
    /// again (durable when this returns; the epoch directory may have been
    /// lost with the file).
    pub(crate) fn restore_own(&self, epoch: u64, rank: u32, file: &[u8]) -> Result<(), Error> {
        let edir = self.epoch_dir(epoch);
        fsio::ensure_dir(&edir)?;
        fsio::write_atomic(&edir, &rank_file_name(rank), file, Durable::Now)
    }

    /// After a resume of `epoch` (0: from the beginning): removes every
    /// COMMIT of a later epoch from the tree, each removal durable, best
    /// effort. Such an epoch is void (protocol §18.7: a checkpoint under
    /// way at a failure; or one the resume fell back from): the program
    /// goes on from `epoch`, and its next checkpoint writes `epoch + 1`
    /// over whatever files of it are left.
    pub(crate) fn void_above(&self, epoch: u64) {
        for (e, path) in fsio::epochs(&self.job_dir()) {
            if e > epoch {
                let _ = fsio::remove_if_present(&path, COMMIT_FILE_NAME);
            }
        }
    }

    /// After a resume of `epoch`: keeps a copy of its COMMIT when this rank
    /// holds none or another one (durable when this returns).
    pub(crate) fn keep_commit(&self, epoch: u64, commit: &[u8]) -> Result<(), Error> {
        if self.commit(epoch).as_deref() == Some(commit) {
            return Ok(());
        }
        fsio::ensure_dir(&self.epoch_dir(epoch))?;
        self.write_commit(epoch, commit, Durable::Now)
    }
}

/// A buddy copy arriving as CKPT_DATA kind 0 chunks (§9.4 step 3): each
/// chunk is checked ([`ChunkTracker`]), written to the copy's temporary
/// name and hashed as it comes, so the copy is never read back.
#[derive(Debug)]
pub(crate) struct IncomingCopy {
    file: File,
    hasher: Sha256,
    tracker: ChunkTracker,
    dir: PathBuf,
    name: String,
}

impl IncomingCopy {
    /// Starts `owner`'s copy in `dir` (created under its temporary name).
    pub(crate) fn create(dir: &Path, owner: u32) -> Result<Self, Error> {
        let name = buddy_file_name(owner);
        let file = fsio::open_temp(&dir.join(temp_name(&name)))?;
        Ok(Self {
            file,
            hasher: Sha256::new(),
            tracker: ChunkTracker::new(CkptDataKind::Push, owner),
            dir: dir.to_path_buf(),
            name,
        })
    }

    /// Checks, writes and hashes one chunk; true once the copy is complete.
    /// A chunk that does not continue the file is rejected (H1610,
    /// [`FrameError::Chunk`]) before anything of it is written.
    pub(crate) fn push(&mut self, d: &CkptData<'_>) -> Result<bool, Error> {
        self.tracker
            .accept(d)
            .map_err(|e| Error::FrameRejected(FrameError::Chunk(e)))?;
        self.file
            .write_all(d.chunk)
            .map_err(|e| Error::io("writing a buddy copy", &e))?;
        self.hasher.update(d.chunk);
        Ok(self.tracker.is_complete())
    }

    /// The SHA-256 of the bytes received so far (the whole copy once the
    /// last chunk is in).
    pub(crate) fn digest(&self) -> Sha256Digest {
        Sha256Digest(self.hasher.clone().finalize().into())
    }

    /// fsync and rename into place; the directory is fsynced by the caller
    /// (once, with the COMMIT's entry).
    pub(crate) fn finish(self) -> Result<(), Error> {
        fsio::finish_temp(&self.file, self.tracker.received())?;
        drop(self.file);
        fsio::commit_temp(&self.dir, &self.name, Durable::WithDir)
    }
}
