//! Failures without an H-code: this machine's ([`LocalError`],
//! [`IdentityProblem`]) and the program's misuse of the API
//! ([`UsageError`]).

/// A local failure that is neither bad input nor I/O ([`Error::Local`](super::Error::Local)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The system random number generator failed (signing needs fresh
    /// randomness: ML-DSA signs hedged).
    #[error("the system random number generator failed while {op}")]
    Random {
        /// What needed it, e.g. "signing the COMMIT file".
        op: &'static str,
    },
    /// A helper thread of this rank panicked.
    #[error("a helper thread panicked while {op}")]
    ThreadPanicked {
        /// What it was doing.
        op: &'static str,
    },
    /// Memory for a message could not be had.
    #[error("out of memory while {op} ({bytes} bytes)")]
    OutOfMemory {
        /// What needed it, e.g. "growing a recv_large message".
        op: &'static str,
        /// How many bytes were asked for.
        bytes: usize,
    },
    /// The rank's own TLS identity (the PEM texts of its job description)
    /// cannot be used to build its TLS configuration.
    #[error("the {what} of the job description cannot be used: {problem}")]
    Identity {
        /// Which item: "CA certificate", "rank certificate", "rank key".
        what: &'static str,
        /// What is wrong with it.
        problem: IdentityProblem,
    },
    /// `SPERLI_CONTROL_FD` does not name an open socket of this process
    /// (protocol §18.1: the launcher's control channel).
    #[error("SPERLI_CONTROL_FD={value:?} does not name an open socket of this process (the launcher's control channel)")]
    ControlChannel {
        /// The variable's value.
        value: String,
    },
    /// `SPERLI_LISTEN_FD` does not name a listening TCP socket of this
    /// process (protocol §5.1 step 1: the listener the launcher bound for
    /// this rank).
    #[error("SPERLI_LISTEN_FD={value:?} does not name a listening TCP socket of this process (the listener the launcher bound for this rank)")]
    ListenerFd {
        /// The variable's value.
        value: String,
    },
    /// An invariant of this library did not hold: a bug, to be reported.
    #[error("internal error: {what}")]
    Internal {
        /// The invariant that did not hold.
        what: &'static str,
    },
}

/// What is wrong with an item of the rank's own TLS identity
/// ([`LocalError::Identity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityProblem {
    /// The bytes are not UTF-8 text.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// The text holds no PEM item of the right kind.
    #[error("not valid PEM")]
    NotPem,
    /// The TLS library refused the certificate, key or CA.
    #[error("refused by the TLS library")]
    Refused,
    /// The CA cannot serve as the root that client certificates are
    /// checked against.
    #[error("not usable as the client-certificate root")]
    NoClientRoot,
}

/// A use of the API the library does not allow ([`Error::Usage`](super::Error::Usage), no
/// H-code): the program's mistake, found before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// A call on an endpoint whose job step already ended normally.
    #[error("the endpoint was used after its job step finished")]
    AfterFinish,
    /// Checkpoint frames through a link that does not carry them.
    #[error("this link carries no checkpoint or RESUME frames")]
    NoCheckpointFrames,
    /// A checkpoint after epoch `u64::MAX`: the epoch counter is used up.
    #[error("no checkpoint epoch is left after {}", u64::MAX)]
    EpochsExhausted,
    /// split or dup in a job that did not negotiate HELLO feature bit 2
    /// (protocol §15.1): nothing is sent, the job goes on.
    #[error("communicators need HELLO feature bit 2 on every rank of the job (protocol §15.1); this job runs without it")]
    NoCommunicators,
    /// A receive or probe from any source on a communicator made by split
    /// or dup in a job without HELLO feature bit 3 (messages carry no
    /// communicator there: name the source).
    #[error("a receive from any source on a communicator other than the job's needs HELLO feature bit 3 on every rank of the job (protocol §16.1); name the source")]
    AnySourceOnSubcommunicator,
    /// A synchronous send, or a message on a communicator other than the
    /// job's, in a job that did not negotiate HELLO feature bit 3
    /// (protocol §16.1): nothing is sent, the job goes on.
    #[error("{what} needs HELLO feature bit 3 on every rank of the job (protocol §16.1); this job runs without it")]
    NoP2pCommunicators {
        /// What was asked, e.g. "a synchronous send".
        what: &'static str,
    },
    /// A message to another rank on a communicator whose id never travels
    /// (above 2147483647, protocol §15.2: COMM_SELF's).
    #[error("communicator {id} is local to this rank: its messages go to this rank only")]
    LocalCommunicator {
        /// The communicator's id.
        id: u32,
    },
    /// A call that needs the communicator's own thread (a non-blocking
    /// collective) where the link cannot be shared with one.
    #[error("this communicator's progress thread is gone (the communicator was taken apart)")]
    ProgressStopped,
    /// A variable the launcher sets is missing from the environment.
    #[error("{var} is not set: {hint}")]
    MissingEnv {
        /// The variable, e.g. `SPERLI_CHECKPOINT_DIR`.
        var: &'static str,
        /// How to get it set, e.g. "run with sperli run --checkpoint-dir DIR".
        hint: &'static str,
    },
    /// A listener handed to the rank (`Settings::listener`) that is not
    /// bound to the rank's own host:port of the job description.
    #[error("the listener handed to rank is bound to {got}, the job description says {expected}")]
    ListenerAddress {
        /// The rank's host:port, as resolved from the job description.
        expected: std::net::SocketAddr,
        /// Where the listener is bound.
        got: std::net::SocketAddr,
    },
}
