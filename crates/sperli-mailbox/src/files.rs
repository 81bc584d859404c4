//! The mailbox file and its manifest on disk (docs/mailbox.md §1): names,
//! creation with mode 0600, the checks of an attach, the manifest, the
//! client lease (flock) and removal.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

use crate::error::{FileProblem, MailboxError, ManifestError, NameError};
use crate::layout::{Header, HEADER_LEN, LAYOUT_SIZE, VERSION};
use crate::shm::Mapping;

/// Where mailboxes live: the shared-memory file system.
pub const SHM_DIR: &str = "/dev/shm";
/// The longest mailbox name.
pub const MAX_NAME: usize = 64;

/// Checks a mailbox name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting
/// with `.` or `-` (it becomes part of a file name in `/dev/shm`).
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(NameError::Length { len: name.len() });
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(NameError::Character { c });
    }
    if name.starts_with(['.', '-']) {
        return Err(NameError::Leading);
    }
    Ok(())
}

/// The checks every mailbox file and manifest gets after an `O_NOFOLLOW`
/// open (docs/mailbox.md §1.2, §2.3): a regular file, owned by this user,
/// mode without group or other bits. The first failure, if any.
fn owner_only(meta: &std::fs::Metadata) -> Option<FileProblem> {
    if !meta.file_type().is_file() {
        Some(FileProblem::NotRegular)
    } else if meta.uid() != euid() {
        Some(FileProblem::Owner {
            expected: euid(),
            got: meta.uid(),
        })
    } else if meta.mode() & 0o077 != 0 {
        Some(FileProblem::Mode {
            got: meta.mode() & 0o7777,
        })
    } else {
        None
    }
}

/// Whether an open error is the `ELOOP` of `O_NOFOLLOW` on a symbolic link.
fn is_symlink_refusal(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// `/dev/shm/sperli-mailbox-u<uid>-<name>`: the file says whose it is.
pub fn mailbox_path(name: &str) -> PathBuf {
    Path::new(SHM_DIR).join(format!("sperli-mailbox-u{}-{name}", euid()))
}

/// The manifest beside it: `<mailbox path>.manifest`.
pub fn manifest_path(name: &str) -> PathBuf {
    Path::new(SHM_DIR).join(format!("sperli-mailbox-u{}-{name}.manifest", euid()))
}

/// An open, mapped mailbox file.
#[derive(Debug)]
pub struct MailboxFile {
    /// Its path.
    pub path: PathBuf,
    /// The open file (the lease is a flock on it).
    pub file: File,
    /// The shared mapping.
    pub map: Mapping,
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> MailboxError + 'a {
    move |e| MailboxError::Io {
        op,
        path: path.to_path_buf(),
        kind: e.kind(),
    }
}

impl MailboxFile {
    /// Creates `name`'s file (O_EXCL, O_NOFOLLOW, mode 0600), sizes it to
    /// 33554688 bytes and writes the fresh header, reserved bytes zero
    /// (docs/mailbox.md §2.2).
    pub fn create(name: &str, world_size: u32) -> Result<Self, MailboxError> {
        check_name(name)?;
        if !(1..=crate::layout::MAX_WORLD).contains(&world_size) {
            return Err(crate::layout::LayoutError::WorldSize {
                expected: None,
                got: world_size,
            }
            .into());
        }
        let path = mailbox_path(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => MailboxError::Exists { path: path.clone() },
                kind => MailboxError::Io {
                    op: "creating the mailbox",
                    path: path.clone(),
                    kind,
                },
            })?;
        let made = (|| {
            // The umask may only have taken bits away; make it exactly 0600.
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(io("setting mode 0600", &path))?;
            file.set_len(LAYOUT_SIZE)
                .map_err(io("sizing the mailbox", &path))?;
            let map = Mapping::map(&file).map_err(io("mapping the mailbox", &path))?;
            map.write(0, &Header::fresh(world_size).encode());
            Ok(map)
        })();
        match made {
            Ok(map) => Ok(Self { path, file, map }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Opens `name`'s file for an attach: a regular file (not a symlink)
    /// owned by this user, mode without group/other bits, exactly 33554688
    /// bytes (docs/mailbox.md §2.3). The header is checked by the caller.
    pub fn open(name: &str) -> Result<Self, MailboxError> {
        check_name(name)?;
        let path = mailbox_path(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => MailboxError::NotFound { path: path.clone() },
                _ if is_symlink_refusal(&e) => MailboxError::File {
                    path: path.clone(),
                    problem: FileProblem::Symlink,
                },
                kind => MailboxError::Io {
                    op: "opening the mailbox",
                    path: path.clone(),
                    kind,
                },
            })?;
        let meta = file
            .metadata()
            .map_err(io("reading the mailbox's metadata", &path))?;
        let problem = owner_only(&meta).or_else(|| {
            (meta.len() != LAYOUT_SIZE).then_some(FileProblem::Size { got: meta.len() })
        });
        if let Some(problem) = problem {
            return Err(MailboxError::File { path, problem });
        }
        let map = Mapping::map(&file).map_err(io("mapping the mailbox", &path))?;
        Ok(Self { path, file, map })
    }

    /// Rank 0's attach (docs/mailbox.md §2.3): [`MailboxFile::open`], then
    /// a fresh version-1 header for `world_size` ([`Header::check_fresh`]).
    pub fn attach_rank0(name: &str, world_size: u32) -> Result<Self, MailboxError> {
        let f = Self::open(name)?;
        f.header()?.check_fresh(world_size)?;
        Ok(f)
    }

    /// A copy of the header, decoded and checked (H1640 on any refusal).
    pub fn header(&self) -> Result<Header, MailboxError> {
        let mut b = [0u8; HEADER_LEN];
        self.map.read(0, &mut b);
        Ok(Header::decode(&b)?)
    }

    /// Takes the client lease if no one holds it (flock LOCK_EX|LOCK_NB).
    pub fn try_lease(&self) -> Result<bool, MailboxError> {
        match flock(&self.file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
            Err(e) => Err(MailboxError::Io {
                op: "taking the client lease (flock)",
                path: self.path.clone(),
                kind: std::io::Error::from(e).kind(),
            }),
        }
    }

    /// Rank 0's probe: whether some client holds the lease now. A probe
    /// that fails for another reason counts as held (never end a job on
    /// a probe error).
    pub fn lease_held(&self) -> bool {
        match flock(&self.file, FlockOperation::NonBlockingLockShared) {
            Ok(()) => {
                let _ = flock(&self.file, FlockOperation::Unlock);
                false
            }
            Err(_) => true,
        }
    }
}

/// What the manifest says (docs/mailbox.md §1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The mailbox name.
    pub name: String,
    /// The mailbox file.
    pub path: PathBuf,
    /// The layout version.
    pub version: u32,
    /// The layout size.
    pub layout_size: u64,
    /// The job's world size.
    pub world_size: u32,
    /// The launcher's pid.
    pub launcher_pid: u32,
}

const MANIFEST_FIRST: &str = "sperli-mailbox manifest 1";
/// The longest manifest accepted, in bytes.
pub const MAX_MANIFEST: u64 = 4096;

impl Manifest {
    /// The manifest of a mailbox this process creates now.
    pub fn new(name: &str, world_size: u32) -> Self {
        Self {
            name: name.to_string(),
            path: mailbox_path(name),
            version: VERSION,
            layout_size: LAYOUT_SIZE,
            world_size,
            launcher_pid: std::process::id(),
        }
    }

    /// Its text: a first line, then `key value` lines in a fixed order.
    pub fn to_text(&self) -> String {
        format!(
            "{MANIFEST_FIRST}\nname {}\npath {}\nversion {}\nlayout_size {}\nworld_size {}\nlauncher_pid {}\n",
            self.name,
            self.path.display(),
            self.version,
            self.layout_size,
            self.world_size,
            self.launcher_pid
        )
    }

    /// Parses a manifest; every line and key must be there, in order,
    /// each line ended by `\n` (the last one too), no `\r`, nothing after
    /// the last line (docs/mailbox.md §1.2).
    pub fn parse(text: &str) -> Result<Self, ManifestError> {
        let Some(body) = text.strip_suffix('\n') else {
            return Err(ManifestError::FinalNewline);
        };
        if text.contains('\r') {
            return Err(ManifestError::CarriageReturn);
        }
        let mut lines = body.split('\n');
        if lines.next() != Some(MANIFEST_FIRST) {
            return Err(ManifestError::FirstLine);
        }
        let mut field = |key: &'static str| -> Result<&str, ManifestError> {
            let line = lines.next().ok_or(ManifestError::Missing { key })?;
            match line.split_once(' ') {
                Some((k, v)) if k == key && !v.is_empty() => Ok(v),
                _ => Err(ManifestError::Missing { key }),
            }
        };
        fn num<T: std::str::FromStr>(key: &'static str, v: &str) -> Result<T, ManifestError> {
            v.parse().map_err(|_| ManifestError::Value {
                key,
                value: v.chars().take(64).collect(),
            })
        }
        let name = field("name")?.to_string();
        let path = PathBuf::from(field("path")?);
        let version = num("version", field("version")?)?;
        let layout_size = num("layout_size", field("layout_size")?)?;
        let world_size = num("world_size", field("world_size")?)?;
        let launcher_pid = num("launcher_pid", field("launcher_pid")?)?;
        if lines.next().is_some() {
            return Err(ManifestError::Trailing);
        }
        check_name(&name).map_err(|_| ManifestError::Value {
            key: "name",
            value: name.chars().take(64).collect(),
        })?;
        Ok(Self {
            name,
            path,
            version,
            layout_size,
            world_size,
            launcher_pid,
        })
    }

    /// Writes the manifest of `name` atomically (a 0600 temporary file
    /// renamed into place).
    pub fn write(&self) -> Result<(), MailboxError> {
        let path = manifest_path(&self.name);
        let tmp = path.with_extension(format!("manifest.tmp{}", std::process::id()));
        let r = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                .open(&tmp)?;
            f.write_all(self.to_text().as_bytes())?;
            std::fs::rename(&tmp, &path)
        })();
        r.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            MailboxError::Io {
                op: "writing the manifest",
                path: path.clone(),
                kind: e.kind(),
            }
        })
    }

    /// Reads `name`'s manifest (`Ok(None)` if there is none yet).
    pub fn read(name: &str) -> Result<Option<Self>, MailboxError> {
        check_name(name)?;
        let path = manifest_path(name);
        let refused = |path: PathBuf, problem| MailboxError::Manifest {
            path,
            error: ManifestError::File(problem),
        };
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if is_symlink_refusal(&e) => return Err(refused(path, FileProblem::Symlink)),
            Err(e) => {
                return Err(MailboxError::Io {
                    op: "opening the manifest",
                    path,
                    kind: e.kind(),
                })
            }
        };
        // The manifest gets the mailbox file's checks (docs/mailbox.md
        // §1.2): whoever may write it chooses the file a client maps.
        let meta = file
            .metadata()
            .map_err(io("reading the manifest's metadata", &path))?;
        if let Some(problem) = owner_only(&meta) {
            return Err(refused(path, problem));
        }
        if meta.len() > MAX_MANIFEST {
            return Err(MailboxError::Manifest {
                path,
                error: ManifestError::TooLong { len: meta.len() },
            });
        }
        let mut text = String::new();
        use std::io::Read;
        file.take(MAX_MANIFEST)
            .read_to_string(&mut text)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => MailboxError::Manifest {
                    path: path.clone(),
                    error: ManifestError::NotUtf8,
                },
                kind => MailboxError::Io {
                    op: "reading the manifest",
                    path: path.clone(),
                    kind,
                },
            })?;
        let m = Self::parse(&text).map_err(|error| MailboxError::Manifest {
            path: path.clone(),
            error,
        })?;
        if m.name != name || m.path != mailbox_path(name) {
            return Err(MailboxError::Manifest {
                path,
                error: ManifestError::Value {
                    key: "name",
                    value: m.name,
                },
            });
        }
        Ok(Some(m))
    }
}

/// Removes `name`'s mailbox file and manifest (missing ones are fine).
pub fn remove(name: &str) {
    if check_name(name).is_ok() {
        let _ = std::fs::remove_file(mailbox_path(name));
        let _ = std::fs::remove_file(manifest_path(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("job-1.a_b").is_ok());
        assert_eq!(check_name(""), Err(NameError::Length { len: 0 }));
        assert_eq!(
            check_name(&"a".repeat(65)),
            Err(NameError::Length { len: 65 })
        );
        assert_eq!(check_name("a/b"), Err(NameError::Character { c: '/' }));
        assert_eq!(check_name(".x"), Err(NameError::Leading));
        assert_eq!(check_name("-x"), Err(NameError::Leading));
        let p = mailbox_path("j");
        assert!(p.starts_with("/dev/shm"));
        assert!(p.to_string_lossy().contains(&format!("-u{}-", euid())));
    }

    #[test]
    fn manifest_round_trip_and_refusals() {
        let m = Manifest::new("t1", 4);
        assert_eq!(Manifest::parse(&m.to_text()), Ok(m.clone()));
        let t = m.to_text();
        assert_eq!(Manifest::parse(""), Err(ManifestError::FinalNewline));
        assert_eq!(Manifest::parse("\n"), Err(ManifestError::FirstLine));
        assert_eq!(
            Manifest::parse(&t.replace("world_size 4", "world_size x")),
            Err(ManifestError::Value {
                key: "world_size",
                value: "x".into()
            })
        );
        assert_eq!(
            Manifest::parse(&t.replace("version 1\n", "")),
            Err(ManifestError::Missing { key: "version" })
        );
        assert_eq!(
            Manifest::parse(&format!("{t}extra 1\n")),
            Err(ManifestError::Trailing)
        );
        assert_eq!(
            Manifest::parse(&format!("{t}\n")),
            Err(ManifestError::Trailing),
            "an empty line after the last"
        );
        assert_eq!(
            Manifest::parse(t.trim_end_matches('\n')),
            Err(ManifestError::FinalNewline)
        );
        assert_eq!(
            Manifest::parse(&t.replace('\n', "\r\n")),
            Err(ManifestError::CarriageReturn)
        );
    }

    #[test]
    fn create_open_lease_remove() {
        let name = format!("unit-files-{}", std::process::id());
        remove(&name);
        let c = MailboxFile::create(&name, 3).unwrap();
        let meta = std::fs::metadata(&c.path).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o600);
        assert_eq!(meta.len(), LAYOUT_SIZE);
        assert!(matches!(
            MailboxFile::create(&name, 3),
            Err(MailboxError::Exists { .. })
        ));
        let a = MailboxFile::open(&name).unwrap();
        a.header().unwrap().check_fresh(3).unwrap();
        let b = MailboxFile::open(&name).unwrap();
        assert!(!b.lease_held());
        assert!(a.try_lease().unwrap());
        assert!(b.lease_held());
        assert!(!b.try_lease().unwrap());
        drop(a);
        assert!(!b.lease_held());
        std::fs::set_permissions(&c.path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(
            MailboxFile::open(&name),
            Err(MailboxError::File {
                problem: FileProblem::Mode { got: 0o640 },
                ..
            })
        ));
        remove(&name);
        assert!(matches!(
            MailboxFile::open(&name),
            Err(MailboxError::NotFound { .. })
        ));
    }
}
