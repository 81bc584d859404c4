//! The mailbox's errors and their codes (docs/mailbox.md §8).
//!
//! The codes H1640-H1645 are this crate's until the shared code table
//! (`sperli_wire::HCode`) takes them over; [`MailboxError::code`] is the
//! one place where errors map to them. Errors of the transport and the
//! collectives keep their own H-codes.

use std::fmt;
use std::path::PathBuf;

use crate::layout::{GroupState, LayoutError, RequestState, TerminalReason};
use crate::records::{RankError, RecordError, RequestError};
use crate::Replies;

/// The mailbox's codes (docs/mailbox.md §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MailboxCode {
    /// A mailbox, its file or its manifest refused at create or attach.
    H1640 = 1640,
    /// A request refused before it is published (or by rank 0).
    H1641 = 1641,
    /// A task failed on some target rank; the job goes on serving.
    H1642 = 1642,
    /// The group is not serving: TERMINAL (for good) or CLOSED.
    H1643 = 1643,
    /// A wait passed its timeout.
    H1644 = 1644,
    /// The reply region does not decode, or another client holds the lease.
    H1645 = 1645,
}

impl MailboxCode {
    /// The number, e.g. 1640.
    pub fn number(self) -> u32 {
        self as u32
    }
}

impl fmt::Display for MailboxCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "H{}", self.number())
    }
}

/// Why a mailbox name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Not 1 to 64 bytes.
    #[error("a mailbox name has 1 to 64 characters, got {len}")]
    Length {
        /// Its length.
        len: usize,
    },
    /// A character outside `A-Z a-z 0-9 . _ -`.
    #[error("a mailbox name has only A-Z a-z 0-9 . _ -, got {c:?}")]
    Character {
        /// The first such character.
        c: char,
    },
    /// Starts with `.` or `-`.
    #[error("a mailbox name does not start with '.' or '-'")]
    Leading,
}

/// What is wrong with a mailbox file (not its header).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileProblem {
    /// Not a regular file.
    #[error("not a regular file")]
    NotRegular,
    /// A symbolic link (never followed).
    #[error("a symbolic link (never followed)")]
    Symlink,
    /// Owned by another user.
    #[error("owned by uid {got}, not by this user (uid {expected})")]
    Owner {
        /// This user.
        expected: u32,
        /// The owner.
        got: u32,
    },
    /// Group or other may access it.
    #[error("mode {got:04o}: group and others must have no access (0600)")]
    Mode {
        /// The mode bits.
        got: u32,
    },
    /// Not 33554688 bytes.
    #[error("{got} bytes, a version-1 mailbox has {}", crate::layout::LAYOUT_SIZE)]
    Size {
        /// Its size.
        got: u64,
    },
}

/// Why a manifest is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The first line is not `sperli-mailbox manifest 1`.
    #[error("first line is not \"sperli-mailbox manifest 1\"")]
    FirstLine,
    /// A key is missing or out of order.
    #[error("line `{key} VALUE` missing or out of order")]
    Missing {
        /// The key.
        key: &'static str,
    },
    /// A value that does not parse or does not match the mailbox.
    #[error("{key}: {value:?} is not valid here")]
    Value {
        /// The key.
        key: &'static str,
        /// The value (cut to 64 characters).
        value: String,
    },
    /// Lines after the last key.
    #[error("lines after launcher_pid")]
    Trailing,
    /// Not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// The last line does not end with `\n` (or the file is empty).
    #[error("the last line does not end with a newline")]
    FinalNewline,
    /// A `\r` anywhere (lines end with `\n` alone).
    #[error("a carriage return (lines end with \\n alone)")]
    CarriageReturn,
    /// Longer than [`crate::files::MAX_MANIFEST`] bytes.
    #[error(
        "{len} bytes, a manifest has at most {} bytes",
        crate::files::MAX_MANIFEST
    )]
    TooLong {
        /// Its length.
        len: u64,
    },
    /// The file itself is refused: a symbolic link, not a regular file,
    /// another user's, or open to group or others.
    #[error("{0}")]
    File(FileProblem),
}

/// Every error of the mailbox (docs/mailbox.md §8).
#[derive(Debug, Clone)]
pub enum MailboxError {
    /// The header is refused at attach (H1640).
    Layout(LayoutError),
    /// The file is refused at attach (H1640).
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: FileProblem,
    },
    /// The manifest is refused (H1640).
    Manifest {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: ManifestError,
    },
    /// The manifest and the mailbox header disagree (H1640).
    ManifestMismatch {
        /// The field.
        field: &'static str,
        /// The manifest's value.
        manifest: u64,
        /// The header's value.
        header: u64,
    },
    /// A mailbox name is refused (H1640).
    Name(NameError),
    /// No such mailbox (H1640).
    NotFound {
        /// The file looked for.
        path: PathBuf,
    },
    /// A mailbox of that name exists already (H1640).
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A request refused before it is published (H1641).
    Request(RequestError),
    /// Some target rank failed (H1642); the replies of the others are in it.
    TaskFailed(Box<Replies>),
    /// The group is TERMINAL (H1643), for good.
    Terminal {
        /// Why.
        reason: TerminalReason,
        /// The error record rank 0 left, if it could.
        detail: Option<RankError>,
    },
    /// This rank stopped serving without having seen the group TERMINAL
    /// (H1643): a rank other than 0 (it never maps the mailbox) whose
    /// collective failed, that got rank 0's ABORT or whose start-up check
    /// failed; or rank 0 whose group was CLOSED already. Rank 0 marks the
    /// group TERMINAL when it still can.
    Stopped {
        /// Why.
        reason: TerminalReason,
        /// The error record of the rank it blames.
        detail: Option<RankError>,
    },
    /// The group is not serving requests (H1643): CLOSED, or not READY yet.
    NotServing {
        /// Its state.
        group: GroupState,
    },
    /// A wait passed its timeout (H1644).
    Timeout {
        /// What waited.
        what: &'static str,
        /// How long.
        after_ms: u64,
        /// The request state when it gave up.
        state: RequestState,
    },
    /// The reply region does not decode (H1645).
    Records(RecordError),
    /// Another client holds the lease (H1645).
    Busy {
        /// The pid the header names.
        pid: u32,
    },
    /// A collective or the transport failed (its own H-code).
    Collective(sperli_wire::Error),
    /// The launcher could not be started (no code: a local failure).
    Launch {
        /// The program.
        program: PathBuf,
        /// The OS error kind.
        kind: std::io::ErrorKind,
    },
    /// The launcher ended before the mailbox was READY (no code).
    LauncherEnded {
        /// Its exit status.
        status: String,
    },
    /// A local I/O failure (no code).
    Io {
        /// What was done.
        op: &'static str,
        /// On which file.
        path: PathBuf,
        /// The OS error kind.
        kind: std::io::ErrorKind,
    },
    /// The rank program was not started with a mailbox (no code).
    NoMailboxEnv,
}

fn describe_failures(r: &Replies) -> String {
    let errs: Vec<String> = r.errors().map(|e| e.to_string()).collect();
    errs.join("; ")
}

impl MailboxError {
    /// The mailbox code, if the error has one of them (transport and
    /// collective errors have their own H-code: [`sperli_wire::Error::h_code`]).
    pub fn code(&self) -> Option<MailboxCode> {
        use MailboxError::*;
        match self {
            Layout(_)
            | File { .. }
            | Manifest { .. }
            | ManifestMismatch { .. }
            | Name(_)
            | NotFound { .. }
            | Exists { .. } => Some(MailboxCode::H1640),
            Request(_) => Some(MailboxCode::H1641),
            TaskFailed(_) => Some(MailboxCode::H1642),
            Terminal { .. } | Stopped { .. } | NotServing { .. } => Some(MailboxCode::H1643),
            Timeout { .. } => Some(MailboxCode::H1644),
            Records(_) | Busy { .. } => Some(MailboxCode::H1645),
            Collective(_) | Launch { .. } | LauncherEnded { .. } | Io { .. } | NoMailboxEnv => None,
        }
    }
}

impl fmt::Display for MailboxError {
    /// `H16xx ` from [`MailboxError::code`] (the one place codes are
    /// written), then what happened.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use MailboxError::*;
        if let Some(c) = self.code() {
            write!(f, "{c} ")?;
        }
        match self {
            Layout(e) => write!(f, "mailbox refused: {e}"),
            File { path, problem } => write!(f, "mailbox {} refused: {problem}", path.display()),
            Manifest { path, error } => write!(f, "manifest {} refused: {error}", path.display()),
            ManifestMismatch {
                field,
                manifest,
                header,
            } => write!(
                f,
                "manifest says {field} {manifest}, the mailbox header {header}"
            ),
            Name(e) => write!(f, "{e}"),
            NotFound { path } => write!(
                f,
                "no mailbox {} (is the job started with `sperli run --mailbox NAME`?)",
                path.display()
            ),
            Exists { path } => write!(
                f,
                "mailbox {} exists already (another job uses the name, or remove a stale one)",
                path.display()
            ),
            Request(e) => write!(f, "request refused: {e}"),
            TaskFailed(r) => write!(f, "task {} failed: {}", r.sequence, describe_failures(r)),
            Terminal { reason, detail } => {
                write!(f, "mailbox group is TERMINAL: {reason}")?;
                match detail {
                    Some(d) => write!(f, " ({d})"),
                    None => Ok(()),
                }
            }
            Stopped { reason, detail } => {
                write!(f, "this rank stopped serving the mailbox: {reason}")?;
                match detail {
                    Some(d) => write!(f, " ({d})"),
                    None => Ok(()),
                }
            }
            NotServing { group } => write!(f, "mailbox group is {group}, not READY"),
            Timeout {
                what,
                after_ms,
                state,
            } => write!(
                f,
                "{what}: no answer within {after_ms} ms (request state {state})"
            ),
            Records(e) => write!(f, "reply region malformed: {e}"),
            Busy { pid } => write!(
                f,
                "mailbox busy: another client (pid {pid}) holds its lease"
            ),
            Collective(e) => write!(f, "{e}"),
            Launch { program, kind } => write!(
                f,
                "cannot start the launcher {}: {kind}",
                program.display()
            ),
            LauncherEnded { status } => write!(
                f,
                "the launcher exited ({status}) before the mailbox was READY"
            ),
            Io { op, path, kind } => write!(f, "{op} {}: {kind}", path.display()),
            NoMailboxEnv => write!(
                f,
                "rank 0 has no {} in its environment: start the job with `sperli run --mailbox NAME`",
                crate::MAILBOX_ENV
            ),
        }
    }
}

impl std::error::Error for MailboxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MailboxError::Layout(e) => Some(e),
            MailboxError::Name(e) => Some(e),
            MailboxError::Request(e) => Some(e),
            MailboxError::Records(e) => Some(e),
            MailboxError::Collective(e) => Some(e),
            _ => None,
        }
    }
}

macro_rules! from {
    ($($t:ty => $v:ident),+) => {
        $(impl From<$t> for MailboxError {
            fn from(e: $t) -> Self {
                MailboxError::$v(e)
            }
        })+
    };
}

from!(LayoutError => Layout, NameError => Name, RequestError => Request,
      RecordError => Records, sperli_wire::Error => Collective);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_is_written_once_before_the_text() {
        let e = MailboxError::from(LayoutError::Version { got: 2 });
        assert_eq!(
            e.to_string(),
            "H1640 mailbox refused: version: expected 1, got 2"
        );
        let e = MailboxError::Busy { pid: 7 };
        assert_eq!(
            e.to_string(),
            "H1645 mailbox busy: another client (pid 7) holds its lease"
        );
        let e = MailboxError::NoMailboxEnv;
        assert!(e.code().is_none());
        assert!(e.to_string().starts_with("rank 0 has no SPERLI_MAILBOX"));
    }
}
