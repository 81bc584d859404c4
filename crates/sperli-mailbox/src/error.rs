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
}

/// Every error of the mailbox (docs/mailbox.md §8).
#[derive(Debug, Clone, thiserror::Error)]
pub enum MailboxError {
    /// The header is refused at attach (H1640).
    #[error("H1640 mailbox refused: {0}")]
    Layout(#[from] LayoutError),
    /// The file is refused at attach (H1640).
    #[error("H1640 mailbox {path} refused: {problem}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: FileProblem,
    },
    /// The manifest is refused (H1640).
    #[error("H1640 manifest {path} refused: {error}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: ManifestError,
    },
    /// The manifest and the mailbox header disagree (H1640).
    #[error("H1640 manifest says {field} {manifest}, the mailbox header {header}")]
    ManifestMismatch {
        /// The field.
        field: &'static str,
        /// The manifest's value.
        manifest: u64,
        /// The header's value.
        header: u64,
    },
    /// A mailbox name is refused (H1640).
    #[error("H1640 {0}")]
    Name(#[from] NameError),
    /// No such mailbox (H1640).
    #[error("H1640 no mailbox {path} (is the job started with `sperli run --mailbox NAME`?)")]
    NotFound {
        /// The file looked for.
        path: PathBuf,
    },
    /// A mailbox of that name exists already (H1640).
    #[error(
        "H1640 mailbox {path} exists already (another job uses the name, or remove a stale one)"
    )]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A request refused before it is published (H1641).
    #[error("H1641 request refused: {0}")]
    Request(#[from] RequestError),
    /// Some target rank failed (H1642); the replies of the others are in it.
    #[error("H1642 task {} failed: {}", .0.sequence, describe_failures(.0))]
    TaskFailed(Box<Replies>),
    /// The group is TERMINAL (H1643), for good.
    #[error("H1643 mailbox group is TERMINAL: {reason}{}", detail.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Terminal {
        /// Why.
        reason: TerminalReason,
        /// The error record rank 0 left, if it could.
        detail: Option<RankError>,
    },
    /// The group is not serving requests (H1643): CLOSED, or not READY yet.
    #[error("H1643 mailbox group is {group}, not READY")]
    NotServing {
        /// Its state.
        group: GroupState,
    },
    /// A wait passed its timeout (H1644).
    #[error("H1644 {what}: no answer within {after_ms} ms (request state {state})")]
    Timeout {
        /// What waited.
        what: &'static str,
        /// How long.
        after_ms: u64,
        /// The request state when it gave up.
        state: RequestState,
    },
    /// The reply region does not decode (H1645).
    #[error("H1645 reply region malformed: {0}")]
    Records(#[from] RecordError),
    /// Another client holds the lease (H1645).
    #[error("H1645 mailbox busy: another client (pid {pid}) holds its lease")]
    Busy {
        /// The pid the header names.
        pid: u32,
    },
    /// A collective or the transport failed (its own H-code).
    #[error("{0}")]
    Collective(#[from] sperli_wire::Error),
    /// The launcher could not be started (no code: a local failure).
    #[error("cannot start the launcher {program}: {kind}")]
    Launch {
        /// The program.
        program: PathBuf,
        /// The OS error kind.
        kind: std::io::ErrorKind,
    },
    /// The launcher ended before the mailbox was READY (no code).
    #[error("the launcher exited ({status}) before the mailbox was READY")]
    LauncherEnded {
        /// Its exit status.
        status: String,
    },
    /// A local I/O failure (no code).
    #[error("{op} {}: {kind}", path.display())]
    Io {
        /// What was done.
        op: &'static str,
        /// On which file.
        path: PathBuf,
        /// The OS error kind.
        kind: std::io::ErrorKind,
    },
    /// The rank program was not started with a mailbox (no code).
    #[error(
        "rank 0 has no {} in its environment: start the job with `sperli run --mailbox NAME`",
        crate::MAILBOX_ENV
    )]
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
            Terminal { .. } | NotServing { .. } => Some(MailboxCode::H1643),
            Timeout { .. } => Some(MailboxCode::H1644),
            Records(_) | Busy { .. } => Some(MailboxCode::H1645),
            Collective(_) | Launch { .. } | LauncherEnded { .. } | Io { .. } | NoMailboxEnv => None,
        }
    }
}
