//! Crash-safe file writes (protocol §9.1, §9.4 steps 2-4): a file is written under its
//! temporary name (`ckpt_path::temp_name`), fsynced, renamed into place,
//! and the directory is fsynced, so a crash at any point leaves either the
//! old file, no file, or the whole new one under the final name, never a
//! half-written file there. Leftover temporary files are never read.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sperli_wire::ckpt_path::{parse_epoch_dir_name, temp_name};
use sperli_wire::error::Error;

/// Opens the temporary file `path` for writing from its start: created
/// (mode 0600: a state may be private) or, when it exists, opened without
/// truncating it, so a recycled file's blocks and cached pages are written
/// over in place ([`recycle`]); [`finish_temp`] cuts it to the bytes
/// written. A temporary file is never read, so its stale tail is harmless
/// until then.
pub(crate) fn open_temp(path: &Path) -> Result<File, Error> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io("creating a checkpoint file", &e))
}

/// Cuts the temporary file `f` to `len` bytes (the bytes written) and
/// fsyncs it.
pub(crate) fn finish_temp(f: &File, len: u64) -> Result<(), Error> {
    if f.metadata().map(|m| m.len()).ok() != Some(len) {
        f.set_len(len)
            .map_err(|e| Error::io("writing a checkpoint file", &e))?;
    }
    f.sync_all()
        .map_err(|e| Error::io("fsync of a checkpoint file", &e))
}

/// fsync of a directory, so renames and new entries in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync of a checkpoint directory", &e))
}

/// Creates `dir` (and parents); fsyncs the parent when `dir` is new.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), Error> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(|e| Error::io("creating a checkpoint directory", &e))?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Writes `bytes` as `dir/name`: temporary name, fsync, rename, and with
/// [`Durable::Now`] an fsync of `dir` (§9.4 step 2). With
/// [`Durable::WithDir`] the caller fsyncs `dir` later, once for several
/// renames into it.
pub(crate) fn write_atomic(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    durable: Durable,
) -> Result<(), Error> {
    let tmp = dir.join(temp_name(name));
    let mut f = open_temp(&tmp)?;
    f.write_all(bytes)
        .map_err(|e| Error::io("writing a checkpoint file", &e))?;
    finish_temp(&f, bytes.len() as u64)?;
    drop(f);
    commit_temp(dir, name, durable)
}

/// When a rename into a directory is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durable {
    /// fsync of the directory right after the rename.
    Now,
    /// The caller fsyncs the directory later ([`sync_dir`]).
    WithDir,
}

/// Renames `dir/<temp_name(name)>` to `dir/name`; with [`Durable::Now`]
/// fsyncs `dir`.
pub(crate) fn commit_temp(dir: &Path, name: &str, durable: Durable) -> Result<(), Error> {
    fs::rename(dir.join(temp_name(name)), dir.join(name))
        .map_err(|e| Error::io("renaming a checkpoint file into place", &e))?;
    match durable {
        Durable::Now => sync_dir(dir),
        Durable::WithDir => Ok(()),
    }
}

/// Removes `dir/name` if it exists and fsyncs `dir` (§9.4 step 0).
pub(crate) fn remove_if_present(dir: &Path, name: &str) -> Result<(), Error> {
    match fs::remove_file(dir.join(name)) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("removing an old COMMIT", &e)),
    }
}

/// Reads at most `limit` bytes of `path`; `Ok(None)` when it does not
/// exist; a longer file yields `limit + 1` bytes (so its length check
/// fails) without reading the rest.
pub(crate) fn read_limited(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, Error> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("opening a checkpoint file", &e)),
    };
    let mut out = Vec::new();
    f.take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| Error::io("reading a checkpoint file", &e))?;
    Ok(Some(out))
}

/// The epoch directories under `job_dir` (names that are canonical
/// decimals >= 1), highest first. A missing job directory has none.
pub(crate) fn epochs(job_dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut out: Vec<(u64, PathBuf)> = fs::read_dir(job_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let epoch = parse_epoch_dir_name(name.to_str()?)?;
            e.file_type().ok()?.is_dir().then(|| (epoch, e.path()))
        })
        .collect();
    out.sort_by_key(|b| std::cmp::Reverse(b.0));
    out
}

/// §9.4 step 5: removes every epoch directory below `keep_from`; later
/// ones stay. Before the newest of them goes, the files named in
/// `recycled` (file name, new path) are moved out of it, to be written
/// over by the next checkpoint ([`open_temp`]). Best effort and not
/// fsynced: the COMMIT is already in place, so a failure here does not
/// fail the checkpoint, and a removal that a crash undoes is done again
/// after the next COMMIT (an older epoch never counts while a newer one
/// does).
pub(crate) fn remove_epochs_below(job_dir: &Path, keep_from: u64, recycled: &[(String, PathBuf)]) {
    let mut first = true;
    for (epoch, path) in epochs(job_dir) {
        if epoch >= keep_from {
            continue;
        }
        if std::mem::take(&mut first) {
            for (name, to) in recycled {
                if !to.exists() {
                    let _ = fs::rename(path.join(name), to);
                }
            }
        }
        let _ = fs::remove_dir_all(&path);
    }
}
