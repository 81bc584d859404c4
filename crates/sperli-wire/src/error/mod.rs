//! The project's one error type and its mapping to the H-codes
//! (docs/error-codes.md; protocol §13).
//!
//! Every variant carries what was expected and what came. [`Error::h_code`]
//! is the single place where errors map to H-codes. One file per family:
//! [`code`] (the H-codes), [`decode`], [`frame`] (H1610), [`auth`] (H1611),
//! [`peer`] (H1613-H1615), [`collective`] (H1617, H1618), [`checkpoint`]
//! (H1620-H1622) and [`local`] (no code); every item is re-exported here.

use std::fmt;

use crate::ids::Sha256Digest;

pub mod auth;
pub mod checkpoint;
pub mod code;
pub mod collective;
pub mod decode;
pub mod frame;
pub mod local;
pub mod message;
pub mod peer;

pub use auth::{AuthError, TlsFailure, TokenError};
pub use checkpoint::{CommitError, HashSubject, ResumeFailure};
pub use code::HCode;
pub use collective::{ArgumentError, MismatchError};
pub use decode::{DecodeError, HexError, HostError};
pub use frame::FrameError;
pub use local::{IdentityProblem, LocalError, UsageError};
pub use message::MessageError;
pub use peer::{LaunchStdin, LossCause, RefusalRule};

/// What the project's operations can fail with. Each variant maps to one
/// H-code in [`Error::h_code`]; failures of the local machine and misuse of
/// the API carry none. `Display` writes the H-code (from `h_code`, the one
/// place it is written) and then what happened: `H1610 frame rejected: ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// H1610.
    FrameRejected(FrameError),
    /// H1611.
    Authentication {
        /// The rank the peer claimed or was expected to be, if known.
        peer: Option<u32>,
        /// What failed.
        error: AuthError,
    },
    /// H1612.
    AbortedByPeer {
        /// The rank that sent ABORT.
        from: u32,
        /// Its reason code (protocol §7.5).
        reason: u16,
        /// Its H number, or 0.
        code: u32,
        /// Its message (lossy UTF-8).
        message: String,
    },
    /// H1613.
    PeerLost {
        /// The lost rank.
        peer: u32,
        /// How it was noticed.
        cause: LossCause,
    },
    /// H1614.
    HostRefused {
        /// The host as given.
        host: String,
        /// The rule that refuses it.
        rule: RefusalRule,
    },
    /// H1615.
    JobDescription(DecodeError),
    /// H1615: no job description at all: the program was not started by
    /// the launcher. Its message is one line that says how to start it.
    NotLaunched {
        /// What stdin was.
        stdin: LaunchStdin,
        /// The program as it was started (`argv[0]`).
        program: String,
    },
    /// H1616.
    SetupTimeout {
        /// The set-up window.
        after_ms: u64,
        /// Ranks not connected.
        missing: Vec<u32>,
    },
    /// H1617.
    CollectiveMismatch(MismatchError),
    /// H1618.
    InvalidArguments(ArgumentError),
    /// H1619.
    UnexpectedFile {
        /// "rank file", "buddy copy", ...
        what: &'static str,
        /// What differs.
        error: DecodeError,
    },
    /// H1620.
    HashMismatch {
        /// What was hashed.
        what: HashSubject,
        /// The recorded hash.
        expected: Sha256Digest,
        /// The computed hash.
        got: Sha256Digest,
    },
    /// H1621.
    BadCommit(CommitError),
    /// H1622.
    NoResumableEpoch {
        /// Why: the first failure of the resume exchange this rank knows
        /// of (protocol §10.2).
        reason: Box<ResumeFailure>,
    },
    /// H1623.
    CommitSizeMismatch {
        /// The job's size.
        expected: u32,
        /// The COMMIT's size.
        got: u32,
    },
    /// H1624.
    OpenHandles {
        /// Open send handles (on this rank, or summed).
        sends: u64,
        /// Open receive handles.
        recvs: u64,
    },
    /// A failure of feature bit 5's recovery or of ULFM's calls (protocol
    /// §18): a revoked membership epoch or communicator (§18.8.1), a record
    /// that does not verify or fit, this rank fenced, the launcher lost;
    /// its code is [`RecoveryError::h_code`](crate::recovery::RecoveryError::h_code)
    /// (H1610, H1613 or H1614).
    Recovery(crate::recovery::RecoveryError),
    /// The program used the API in a way it does not allow (no H-code:
    /// not bad input from a peer, and nothing was sent).
    Usage(UsageError),
    /// The open-file limit is too low for the job size (no H-code: a local
    /// setting). Raise it with `ulimit -n` (and the hard limit if needed).
    FdLimit {
        /// Descriptors the rank needs.
        needed: u64,
        /// The soft limit.
        soft: u64,
        /// The hard limit.
        hard: u64,
    },
    /// A failure of this machine that is neither bad input nor file or
    /// socket I/O (no H-code; ABORT code 0).
    Local(LocalError),
    /// A local I/O failure (no H-code: not bad input).
    Io {
        /// What was being done.
        op: &'static str,
        /// The OS error kind.
        kind: std::io::ErrorKind,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(code) = self.h_code() {
            write!(f, "{code} ")?;
        }
        match self {
            Error::FrameRejected(e) => write!(f, "frame rejected: {e}"),
            Error::Authentication {
                peer: Some(peer),
                error,
            } => write!(f, "authentication of rank {peer} failed: {error}"),
            Error::Authentication { peer: None, error } => {
                write!(f, "authentication of a peer failed: {error}")
            }
            Error::AbortedByPeer {
                from,
                reason,
                code,
                message,
            } => write!(
                f,
                "job aborted by rank {from}: reason {reason}, code {code}: {message}"
            ),
            Error::PeerLost {
                peer,
                cause: LossCause::Departed,
            } => write!(f, "peer rank {peer} left (BYE)"),
            Error::PeerLost { peer, cause } => write!(f, "peer rank {peer} lost: {cause}"),
            Error::HostRefused { host, rule } => write!(f, "host {host:?} refused: {rule}"),
            Error::JobDescription(e) => write!(f, "invalid job description: {e}"),
            Error::NotLaunched { stdin, program } => write!(
                f,
                "no job description ({stdin}): {program} is a SPERLI rank program; start it with `sperli run -n N -- {program}`"
            ),
            Error::SetupTimeout { after_ms, missing } => write!(
                f,
                "connection set-up timed out after {after_ms} ms; missing ranks {missing:?}"
            ),
            Error::CollectiveMismatch(e) => write!(f, "collective mismatch: {e}"),
            Error::InvalidArguments(e) => write!(f, "invalid collective arguments: {e}"),
            Error::UnexpectedFile { what, error } => write!(f, "not the expected {what}: {error}"),
            Error::HashMismatch {
                what,
                expected,
                got,
            } => write!(f, "SHA-256 mismatch ({what}): expected {expected}, got {got}"),
            Error::BadCommit(e) => write!(f, "bad COMMIT: {e}"),
            Error::NoResumableEpoch { reason } => write!(f, "no epoch can be resumed: {reason}"),
            Error::CommitSizeMismatch { expected, got } => write!(
                f,
                "signed COMMIT for size {got}, this job has size {expected}"
            ),
            Error::OpenHandles { sends, recvs } => write!(
                f,
                "checkpoint with {sends} open send and {recvs} open receive handles"
            ),
            Error::Recovery(e) => write!(f, "{e}"),
            Error::Usage(e) => write!(f, "{e}"),
            Error::Local(e) => write!(f, "{e}"),
            Error::FdLimit { needed, soft, hard } => write!(
                f,
                "the open-file limit (soft {soft}, hard {hard}) is below the {needed} this job needs; raise it with `ulimit -n {needed}`"
            ),
            Error::Io { op, kind } => write!(f, "I/O error during {op}: {kind:?}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::FrameRejected(e) => Some(e),
            Error::Authentication { error, .. } => Some(error),
            Error::PeerLost { cause, .. } => Some(cause),
            Error::HostRefused { rule, .. } => Some(rule),
            Error::JobDescription(e) | Error::UnexpectedFile { error: e, .. } => Some(e),
            Error::CollectiveMismatch(e) => Some(e),
            Error::InvalidArguments(e) => Some(e),
            Error::BadCommit(e) => Some(e),
            Error::NoResumableEpoch { reason } => Some(reason.as_ref()),
            Error::Recovery(e) => Some(e),
            Error::Usage(e) => Some(e),
            Error::Local(e) => Some(e),
            _ => None,
        }
    }
}

impl From<FrameError> for Error {
    fn from(e: FrameError) -> Self {
        Error::FrameRejected(e)
    }
}

impl From<ArgumentError> for Error {
    fn from(e: ArgumentError) -> Self {
        Error::InvalidArguments(e)
    }
}

impl From<crate::recovery::RecoveryError> for Error {
    fn from(e: crate::recovery::RecoveryError) -> Self {
        Error::Recovery(e)
    }
}

impl From<UsageError> for Error {
    fn from(e: UsageError) -> Self {
        Error::Usage(e)
    }
}

impl Error {
    /// The H-code of this error, or `None` for failures of the local
    /// machine and misuse of the API.
    /// This is the one place errors map to codes.
    pub fn h_code(&self) -> Option<HCode> {
        Some(match self {
            Error::FrameRejected(_) => HCode::H1610,
            Error::Authentication { .. } => HCode::H1611,
            Error::AbortedByPeer { .. } => HCode::H1612,
            Error::PeerLost { .. } => HCode::H1613,
            Error::HostRefused { .. } => HCode::H1614,
            Error::JobDescription(_) | Error::NotLaunched { .. } => HCode::H1615,
            Error::SetupTimeout { .. } => HCode::H1616,
            Error::CollectiveMismatch(_) => HCode::H1617,
            Error::InvalidArguments(_) => HCode::H1618,
            Error::UnexpectedFile { .. } => HCode::H1619,
            Error::HashMismatch { .. } => HCode::H1620,
            Error::BadCommit(_) => HCode::H1621,
            Error::NoResumableEpoch { .. } => HCode::H1622,
            Error::CommitSizeMismatch { .. } => HCode::H1623,
            Error::OpenHandles { .. } => HCode::H1624,
            Error::Recovery(e) => e.h_code(),
            Error::Io { .. } | Error::FdLimit { .. } | Error::Usage(_) | Error::Local(_) => {
                return None
            }
        })
    }

    /// A local I/O failure during `op`.
    pub fn io(op: &'static str, e: &std::io::Error) -> Self {
        Error::Io { op, kind: e.kind() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame_type::FrameType;

    #[test]
    fn codes_round_trip() {
        for c in HCode::ALL {
            assert_eq!(HCode::from_number(c.number()), Some(c));
            assert!(c.to_string().starts_with('H'));
        }
        assert_eq!(HCode::from_number(1609), None);
    }

    #[test]
    fn display_writes_the_code_once_from_h_code() {
        let samples = [
            Error::FrameRejected(FrameError::ReservedTag { got: 1 << 31 }),
            Error::PeerLost {
                peer: 1,
                cause: LossCause::Departed,
            },
            Error::Authentication {
                peer: None,
                error: AuthError::NotHello {
                    got: FrameType::Data,
                },
            },
            Error::InvalidArguments(ArgumentError::Tag { tag: 1 << 31 }),
            Error::Recovery(crate::recovery::RecoveryError::CommunicatorRevoked { comm: 4 }),
        ];
        for e in samples {
            let text = e.to_string();
            let code = e.h_code().unwrap().to_string();
            assert!(text.starts_with(&format!("{code} ")), "{text}");
            assert_eq!(text.matches("H16").count(), 1, "{text}");
        }
        let left = Error::PeerLost {
            peer: 1,
            cause: LossCause::Departed,
        };
        assert_eq!(left.to_string(), "H1613 peer rank 1 left (BYE)");
        let usage = Error::Usage(UsageError::AfterFinish);
        assert_eq!(usage.h_code(), None);
        assert!(!usage.to_string().starts_with('H'));
    }

    #[test]
    fn display_starts_with_code() {
        let e = Error::FrameRejected(FrameError::ReservedTag { got: 1 << 31 });
        assert_eq!(e.h_code(), Some(HCode::H1610));
        assert!(e.to_string().starts_with("H1610 "), "{e}");
    }
}
