//! How a peer was lost (H1613, [`LossCause`]), what stdin was when it held
//! no job description ([`LaunchStdin`], H1615) and why a host is refused
//! ([`RefusalRule`], H1614).

/// How a peer was lost (H1613).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LossCause {
    /// No byte for longer than the silence limit.
    #[error("silent for {silent_ms} ms (limit {limit_ms} ms)")]
    Silence {
        /// How long it was silent.
        silent_ms: u64,
        /// The silence limit.
        limit_ms: u64,
    },
    /// An orderly close (FIN or close_notify) without BYE.
    #[error("closed the connection without BYE")]
    ClosedWithoutBye,
    /// The connection was reset.
    #[error("connection reset")]
    Reset,
    /// The peer ended its job step normally: it sent BYE and closed
    /// (protocol §7.6). Not a failure of the job; a send to it, or a
    /// receive that nothing queued from it can satisfy, cannot complete.
    #[error("left the job (BYE)")]
    Departed,
    /// Another socket error.
    #[error("socket error {kind:?}")]
    Socket {
        /// The OS error kind.
        kind: std::io::ErrorKind,
    },
}

/// What a rank's stdin was when it held no job description at all (H1615,
/// [`Error::NotLaunched`](super::Error::NotLaunched)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchStdin {
    /// A terminal: the program was started by hand.
    #[error("stdin is a terminal")]
    Terminal,
    /// Empty (end of file at once, e.g. `/dev/null`).
    #[error("stdin is empty")]
    Empty,
}

/// Why a host is refused (H1614; protocol §2.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RefusalRule {
    /// One of the built-in reserved names (or below it).
    #[error("matches the reserved name {name:?}")]
    Reserved {
        /// The reserved name.
        name: &'static str,
    },
    /// A name from `SPERLI_REFUSED_HOSTS` (or below it).
    #[error("matches {name:?} from SPERLI_REFUSED_HOSTS")]
    Variable {
        /// The refused name.
        name: String,
    },
    /// A name from the `--deny-hosts` file (or below it).
    #[error("matches {name:?} from the deny-hosts file")]
    DenyFile {
        /// The refused name.
        name: String,
    },
}
