//! `sperli run --job-key FILE`: one job across launcher runs (protocol
//! §10.1; docs/launcher.md, "Requeued jobs and the key file").
//!
//! Without the flag every launcher run is a new job: a new job id and job
//! key, incarnation 1. With it, the job's identity lives in FILE:
//!
//! - FILE does not exist: the launcher plans a new job and writes FILE
//!   (mode 0600; a missing directory is created mode 0700) before any rank
//!   starts.
//! - FILE exists: it must be a regular file of this user that group and
//!   others may neither read nor write (mode 0600 or 0400), or the launcher
//!   refuses to start. The run is the same job: the same job id and job
//!   key (so its COMMIT files verify) and the next incarnation, so its
//!   ranks run the resume exchange and continue from the last valid COMMIT
//!   in their checkpoint directories.
//!
//! The file holds the job id, the job size, the job's CompositeSig secret
//! key and the last incarnation started, and nothing else; every
//! incarnation is recorded (temporary file, fsync, rename) before its
//! ranks start, so a launcher killed at any point leaves a file the next
//! run continues from.
//!
//! ```text
//! # sperli job key file (keep it secret: it signs this job's COMMIT files)
//! sperli-job-key 1
//! job 5f0c...e1 (32 hex digits)
//! size 4
//! incarnation 3
//! secret 9a41...07 (128 hex digits)
//! ```

use std::fmt;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use sperli_tls::composite_sig::SecretKey;
use sperli_tls::job_plan::{JobPlan, PlanError};
use sperli_wire::job_description::HostEntry;
use sperli_wire::limits::SECRET_KEY_LEN;
use sperli_wire::JobId;

/// The first line of a key file (its format and version).
const MAGIC: &str = "sperli-job-key 1";
/// A key file is a few hundred bytes; anything longer is not one.
const MAX_LEN: u64 = 4096;

/// Why a key file cannot be used, or the job it names cannot be planned.
/// Every message about the file names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFileError {
    /// Group or others may read or write it (`mode` is its permission bits).
    TooOpen {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It belongs to another user.
    NotOwner {
        /// The file.
        path: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// Not a regular file.
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// Not a key file (or a damaged one).
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: &'static str,
    },
    /// The job has another size than `-n`.
    Size {
        /// The file.
        path: PathBuf,
        /// The job's size.
        job: u32,
        /// `-n`.
        asked: u32,
    },
    /// Another launcher run holds the file's lock: it runs this job now.
    InUse {
        /// The file.
        path: PathBuf,
        /// Its lock file.
        lock: PathBuf,
    },
    /// The incarnation counter is used up.
    Exhausted {
        /// The file.
        path: PathBuf,
    },
    /// Reading, writing or creating it failed.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error's kind.
        kind: std::io::ErrorKind,
    },
    /// The job could not be planned (its PKI, key or tokens).
    Plan(PlanError),
}

impl fmt::Display for KeyFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFileError::TooOpen { path, mode } => write!(
                f,
                "the key file {} may be read or written by group or others (mode {mode:04o}); it holds the job's secret key: run `chmod 600 {}` (refusing to start)",
                path.display(),
                path.display()
            ),
            KeyFileError::NotOwner { path, owner, me } => write!(
                f,
                "the key file {} belongs to uid {owner}, not to this user (uid {me}) (refusing to start)",
                path.display()
            ),
            KeyFileError::NotAFile { path } => {
                write!(f, "the key file {} is not a regular file", path.display())
            }
            KeyFileError::Malformed { path, what } => write!(
                f,
                "{} is not a sperli key file: {what}",
                path.display()
            ),
            KeyFileError::Size { path, job, asked } => write!(
                f,
                "the job of the key file {} has {job} ranks; -n {asked} cannot resume it (a resume needs the same size)",
                path.display()
            ),
            KeyFileError::InUse { path, lock } => write!(
                f,
                "another `sperli run` uses the key file {} now (it holds {}): one job runs one incarnation at a time (refusing to start)",
                path.display(),
                lock.display()
            ),
            KeyFileError::Exhausted { path } => write!(
                f,
                "the job of the key file {} has used up its incarnation counter",
                path.display()
            ),
            KeyFileError::Io { path, op, kind } => {
                write!(f, "cannot {op} the key file {}: {kind}", path.display())
            }
            KeyFileError::Plan(e) => write!(f, "cannot create the job: {e}"),
        }
    }
}

impl std::error::Error for KeyFileError {}

/// A job's identity as a key file holds it. `Debug` never shows the key.
pub struct KeyFile {
    path: PathBuf,
    job_id: JobId,
    size: u32,
    incarnation: u32,
    key: SecretKey,
}

impl fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyFile")
            .field("path", &self.path)
            .field("job_id", &self.job_id)
            .field("size", &self.size)
            .field("incarnation", &self.incarnation)
            .finish_non_exhaustive()
    }
}

/// The effective uid of this process (from `/proc/self/status`, so no
/// `unsafe` call is needed).
fn effective_uid() -> Option<u32> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Overwrites `text` with zeros before it is dropped (it held the secret).
fn wipe(text: String) {
    let mut bytes = text.into_bytes();
    bytes.fill(0);
    std::hint::black_box(&bytes);
}

impl KeyFile {
    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The job id.
    pub fn job_id(&self) -> JobId {
        self.job_id
    }

    /// The job size.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The last incarnation started.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// The job's CompositeSig secret key.
    pub fn key(&self) -> &SecretKey {
        &self.key
    }

    fn io(&self, op: &'static str) -> impl Fn(std::io::Error) -> KeyFileError + '_ {
        move |e| KeyFileError::Io {
            path: self.path.clone(),
            op,
            kind: e.kind(),
        }
    }

    /// Reads the key file at `path`: `Ok(None)` when there is none.
    /// Refused (before a byte is read): not a regular file, another
    /// user's, or any permission for group or others.
    pub fn load(path: &Path) -> Result<Option<KeyFile>, KeyFileError> {
        let io = |op| {
            move |e: std::io::Error| KeyFileError::Io {
                path: path.to_path_buf(),
                op,
                kind: e.kind(),
            }
        };
        let mut f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("open")(e)),
        };
        let meta = f.metadata().map_err(io("inspect"))?;
        if !meta.is_file() {
            return Err(KeyFileError::NotAFile {
                path: path.to_path_buf(),
            });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(KeyFileError::TooOpen {
                path: path.to_path_buf(),
                mode,
            });
        }
        if let Some(me) = effective_uid() {
            if meta.uid() != me {
                return Err(KeyFileError::NotOwner {
                    path: path.to_path_buf(),
                    owner: meta.uid(),
                    me,
                });
            }
        }
        let mut text = String::new();
        let read = (&mut f)
            .take(MAX_LEN)
            .read_to_string(&mut text)
            .map_err(io("read"));
        let parsed = read.and_then(|_| Self::parse(path, &text));
        wipe(text);
        parsed.map(Some)
    }

    fn parse(path: &Path, text: &str) -> Result<KeyFile, KeyFileError> {
        let bad = |what| KeyFileError::Malformed {
            path: path.to_path_buf(),
            what,
        };
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        if lines.next() != Some(MAGIC) {
            return Err(bad("the first line is not `sperli-job-key 1`"));
        }
        let mut field = |name: &str, what| {
            lines
                .next()
                .and_then(|l| l.strip_prefix(name))
                .and_then(|v| v.strip_prefix(' '))
                .ok_or(bad(what))
        };
        let job = field("job", "no `job` line after the first")?;
        let size = field("size", "no `size` line after `job`")?;
        let incarnation = field("incarnation", "no `incarnation` line after `size`")?;
        let secret = field("secret", "no `secret` line after `incarnation`")?;
        if lines.next().is_some() {
            return Err(bad("lines after `secret`"));
        }
        let job: [u8; 16] = sperli_wire::hex::decode(job.as_bytes())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(bad("the job id is not 32 lowercase hex digits"))?;
        let size: u32 = size
            .parse()
            .ok()
            .filter(|s| (1..=sperli_wire::limits::MAX_SIZE).contains(s))
            .ok_or(bad("the size is not 1..=4096"))?;
        let incarnation: u32 = incarnation
            .parse()
            .map_err(|_| bad("the incarnation is not a number"))?;
        let mut raw = sperli_wire::hex::decode(secret.as_bytes())
            .map_err(|_| bad("the secret key is not lowercase hex"))?;
        let key = (raw.len() == SECRET_KEY_LEN)
            .then(|| SecretKey::from_slice(&raw).ok())
            .flatten();
        raw.fill(0);
        let key = key.ok_or(bad("the secret key is not 64 bytes"))?;
        Ok(KeyFile {
            path: path.to_path_buf(),
            job_id: JobId(job),
            size,
            incarnation,
            key,
        })
    }

    /// A new key file at `path` for the job `job_id` with `key`, `size`
    /// ranks and `incarnation` started; written before this returns (the
    /// directory is created mode 0700 if it is missing).
    pub fn create(
        path: &Path,
        job_id: JobId,
        key: SecretKey,
        size: u32,
        incarnation: u32,
    ) -> Result<KeyFile, KeyFileError> {
        let kf = KeyFile {
            path: path.to_path_buf(),
            job_id,
            size,
            incarnation,
            key,
        };
        if let Some(dir) = kf.dir() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&dir)
                    .map_err(kf.io("create the directory of"))?;
            }
        }
        kf.write()?;
        Ok(kf)
    }

    fn dir(&self) -> Option<PathBuf> {
        self.path.parent().map(Path::to_path_buf)
    }

    /// Records that `incarnation` starts now (written before this returns).
    pub fn record(&mut self, incarnation: u32) -> Result<(), KeyFileError> {
        let before = self.incarnation;
        self.incarnation = incarnation;
        let r = self.write();
        if r.is_err() {
            self.incarnation = before;
        }
        r
    }

    /// Writes the file: a temporary file (mode 0600, created new) in the
    /// same directory, fsync, rename over the file, fsync of the directory.
    fn write(&self) -> Result<(), KeyFileError> {
        let name = self
            .path
            .file_name()
            .ok_or(KeyFileError::NotAFile {
                path: self.path.clone(),
            })?
            .to_string_lossy()
            .into_owned();
        let dir = self.dir().unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp"));
        let _ = std::fs::remove_file(&tmp);
        let secret = self.key.to_bytes();
        let text = format!(
            "# sperli job key file (keep it secret: it signs this job's COMMIT files)\n{MAGIC}\njob {}\nsize {}\nincarnation {}\nsecret {}\n",
            self.job_id.to_hex(),
            self.size,
            self.incarnation,
            sperli_wire::hex::encode(&secret[..]),
        );
        drop(secret);
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(text.as_bytes())?;
                f.sync_all()
            });
        wipe(text);
        written.map_err(self.io("write"))?;
        std::fs::rename(&tmp, &self.path).map_err(self.io("rename into place"))?;
        let d = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        File::open(&d)
            .and_then(|d| d.sync_all())
            .map_err(self.io("fsync the directory of"))
    }

    /// Removes the file (the job ended normally: its key is not needed
    /// any more).
    pub fn remove(self) -> Result<(), KeyFileError> {
        std::fs::remove_file(&self.path).map_err(self.io("remove"))
    }
}

/// Takes the exclusive lock of the key file at `path` without waiting:
/// an empty file `.NAME.lock` beside it (mode 0600; the directory is
/// created mode 0700 if it is missing), locked with `flock`. The key file
/// itself cannot carry the lock, as every record replaces it by a rename.
/// The lock file holds nothing and may stay; only its lock counts.
pub fn lock(path: &Path) -> Result<Flock<File>, KeyFileError> {
    let io = |op: &'static str| {
        move |e: std::io::Error| KeyFileError::Io {
            path: path.to_path_buf(),
            op,
            kind: e.kind(),
        }
    };
    let name = path.file_name().ok_or(KeyFileError::NotAFile {
        path: path.to_path_buf(),
    })?;
    let dir = path.parent().unwrap_or(Path::new(""));
    if !dir.as_os_str().is_empty() && !dir.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io("create the directory of"))?;
    }
    let lock = dir.join(format!(".{}.lock", name.to_string_lossy()));
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock)
        .map_err(io("create the lock of"))?;
    match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(held) => Ok(held),
        Err((_, Errno::EWOULDBLOCK)) => Err(KeyFileError::InUse {
            path: path.to_path_buf(),
            lock,
        }),
        Err((_, e)) => Err(io("lock")(std::io::Error::from(e))),
    }
}

/// Where a launcher run gets its job from: a new job each run, or the key
/// file's job (see the module docs).
#[derive(Debug)]
pub struct JobIdentity {
    file: Option<PathBuf>,
    /// The key file's lock, held for the whole launcher run (released by
    /// the OS when the launcher exits, however it exits).
    _lock: Option<Flock<File>>,
    key: Option<KeyFile>,
    first: u32,
}

impl JobIdentity {
    /// A run with `--job-key FILE` (or without: `None`). The file's lock
    /// is taken first (an exclusive `flock`: a second run with the same file is
    /// refused with [`KeyFileError::InUse`]), then the file is read and
    /// checked; it is created by [`JobIdentity::plan`].
    pub fn open(file: Option<&Path>) -> Result<Self, KeyFileError> {
        let lock = file.map(lock).transpose()?;
        let key = match file {
            Some(p) => KeyFile::load(p)?,
            None => None,
        };
        Ok(Self {
            file: file.map(Path::to_path_buf),
            _lock: lock,
            key,
            first: 1,
        })
    }

    /// The plan of this run's first incarnation on `hosts`: a new job
    /// (written to the key file, if one was named, before this returns), or
    /// the key file's job at its next incarnation (recorded in the file).
    pub fn plan(
        &mut self,
        hosts: Vec<HostEntry>,
        lifetime: Duration,
    ) -> Result<JobPlan, KeyFileError> {
        let size = hosts.len() as u32;
        match (&mut self.key, &self.file) {
            (Some(kf), _) => {
                if kf.size() != size {
                    return Err(KeyFileError::Size {
                        path: kf.path().to_path_buf(),
                        job: kf.size(),
                        asked: size,
                    });
                }
                let inc =
                    kf.incarnation()
                        .checked_add(1)
                        .ok_or_else(|| KeyFileError::Exhausted {
                            path: kf.path().to_path_buf(),
                        })?;
                let plan =
                    JobPlan::with_job_key(kf.job_id(), kf.key().clone(), hosts, inc, lifetime)
                        .map_err(KeyFileError::Plan)?;
                kf.record(inc)?;
                self.first = inc;
                eprintln!(
                    "sperli: job {} from the key file {}: incarnation {inc}; its ranks resume from their last valid COMMIT",
                    kf.job_id(),
                    kf.path().display()
                );
                Ok(plan)
            }
            (None, file) => {
                let plan = JobPlan::new(hosts, 1, lifetime).map_err(KeyFileError::Plan)?;
                if let Some(path) = file {
                    let kf = KeyFile::create(path, plan.job_id, plan.job_key.clone(), size, 1)?;
                    eprintln!(
                        "sperli: job {}: created the key file {} (a later `sperli run --job-key {}` continues this job)",
                        plan.job_id,
                        path.display(),
                        path.display()
                    );
                    self.key = Some(kf);
                }
                self.first = 1;
                Ok(plan)
            }
        }
    }

    /// The restarts this run has made when `incarnation` runs (the
    /// `--restart-max` budget is per launcher run).
    pub fn restarts(&self, incarnation: u32) -> u32 {
        incarnation.saturating_sub(self.first)
    }

    /// The plan's next incarnation on `hosts`, recorded in the key file
    /// before any of its ranks starts.
    pub fn next_incarnation(
        &mut self,
        plan: &mut JobPlan,
        hosts: Vec<HostEntry>,
    ) -> Result<(), KeyFileError> {
        plan.next_incarnation(hosts).map_err(KeyFileError::Plan)?;
        if let Some(kf) = &mut self.key {
            kf.record(plan.incarnation)?;
        }
        Ok(())
    }

    /// The key file in use, if any.
    pub fn key_file(&self) -> Option<&KeyFile> {
        self.key.as_ref()
    }

    /// Takes the key file (to remove it at a normal end).
    pub fn take_key_file(&mut self) -> Option<KeyFile> {
        self.key.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sperli-job-key-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn key() -> SecretKey {
        sperli_tls::composite_sig::generate().unwrap()
    }

    #[test]
    fn a_second_run_with_the_same_key_file_is_refused_while_the_first_holds_it() {
        let root = scratch("lock");
        let path = root.join("sub").join("job.key");
        let first = JobIdentity::open(Some(&path)).unwrap();
        assert!(root.join("sub").join(".job.key.lock").exists());
        match JobIdentity::open(Some(&path)) {
            Err(KeyFileError::InUse { path: p, lock }) => {
                assert_eq!(p, path);
                assert_eq!(lock, root.join("sub").join(".job.key.lock"));
            }
            other => panic!("expected InUse, got {other:?}"),
        }
        // Another key file in the same directory is not affected.
        let other = JobIdentity::open(Some(&root.join("sub").join("other.key"))).unwrap();
        drop(first);
        let again = JobIdentity::open(Some(&path)).unwrap();
        drop((again, other));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_created_file_is_private_in_a_private_directory_and_reads_back() {
        let root = scratch("create");
        let path = root.join("deep/dir/job.key");
        let k = key();
        let kf = KeyFile::create(&path, JobId([9; 16]), k.clone(), 4, 1).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(path.parent().unwrap()).unwrap().mode() & 0o777,
            0o700
        );
        let mut back = KeyFile::load(&path).unwrap().unwrap();
        assert_eq!(back.job_id(), kf.job_id());
        assert_eq!((back.size(), back.incarnation()), (4, 1));
        assert_eq!(back.key().to_bytes()[..], k.to_bytes()[..]);
        back.record(3).unwrap();
        assert_eq!(KeyFile::load(&path).unwrap().unwrap().incarnation(), 3);
        assert!(!format!("{back:?}").contains(&sperli_wire::hex::encode(&k.to_bytes()[..])));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_file_group_or_others_may_read_is_refused() {
        let root = scratch("open");
        std::fs::create_dir_all(&root).unwrap();
        let path = root.join("job.key");
        KeyFile::create(&path, JobId([1; 16]), key(), 2, 1).unwrap();
        for mode in [0o640, 0o604, 0o620, 0o644] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = KeyFile::load(&path).unwrap_err();
            assert_eq!(
                e,
                KeyFileError::TooOpen {
                    path: path.clone(),
                    mode
                }
            );
            assert!(e.to_string().contains("chmod 600"), "{e}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(KeyFile::load(&path).unwrap().is_some());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_missing_file_is_none_and_a_damaged_one_is_refused() {
        let root = scratch("damaged");
        std::fs::create_dir_all(&root).unwrap();
        let path = root.join("job.key");
        assert!(KeyFile::load(&path).unwrap().is_none());
        let write = |text: &str| {
            let _ = std::fs::remove_file(&path);
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        };
        for text in [
            "",
            "sperli-job-key 2\n",
            "sperli-job-key 1\njob 00\nsize 1\nincarnation 1\nsecret 00\n",
            "sperli-job-key 1\njob 00000000000000000000000000000000\nsize 0\nincarnation 1\nsecret 00\n",
            "sperli-job-key 1\njob 00000000000000000000000000000000\nsize 1\nincarnation x\nsecret 00\n",
            "sperli-job-key 1\njob 00000000000000000000000000000000\nsize 1\nincarnation 1\nsecret 00\n",
        ] {
            write(text);
            assert!(
                matches!(KeyFile::load(&path), Err(KeyFileError::Malformed { .. })),
                "{text:?}"
            );
        }
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(matches!(
            KeyFile::load(&path),
            Err(KeyFileError::NotAFile { .. }) | Err(KeyFileError::Io { .. })
        ));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_later_run_is_the_same_job_at_the_next_incarnation() {
        let root = scratch("identity");
        let path = root.join("job.key");
        let hosts = || sperli_tls::job_plan::local_hosts(2).unwrap();
        let life = Duration::from_secs(60);
        let mut first = JobIdentity::open(Some(&path)).unwrap();
        let mut plan = first.plan(hosts(), life).unwrap();
        assert_eq!(plan.incarnation, 1);
        first.next_incarnation(&mut plan, hosts()).unwrap();
        assert_eq!(first.restarts(plan.incarnation), 1);
        assert_eq!(KeyFile::load(&path).unwrap().unwrap().incarnation(), 2);
        // The first launcher run ends (its lock goes with it).
        drop(first);
        let mut later = JobIdentity::open(Some(&path)).unwrap();
        let again = later.plan(hosts(), life).unwrap();
        assert_eq!(again.job_id, plan.job_id);
        assert_eq!(again.incarnation, 3);
        assert_eq!(later.restarts(3), 0);
        assert_eq!(
            again.description(0).job_public_key,
            plan.description(0).job_public_key
        );
        drop(later);
        let mut other_size = JobIdentity::open(Some(&path)).unwrap();
        let e = other_size
            .plan(sperli_tls::job_plan::local_hosts(3).unwrap(), life)
            .unwrap_err();
        assert!(e.to_string().contains("has 2 ranks; -n 3"), "{e}");
        let _ = std::fs::remove_dir_all(&root);
    }
}
