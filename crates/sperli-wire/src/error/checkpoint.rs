//! Checkpoint and resume errors: what a SHA-256 was computed over (H1620,
//! [`HashSubject`]), why no epoch can be resumed (H1622, [`ResumeFailure`])
//! and why a COMMIT is refused (H1621, [`CommitError`]); protocol §9, §10.2.

use std::fmt;

use super::{DecodeError, Error};
use crate::ids::JobId;

/// What a SHA-256 was computed over (H1620).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HashSubject {
    /// The payload against the rank file header.
    RankFilePayload,
    /// The whole rank file against the COMMIT entry.
    CommitEntry,
    /// A rank file against the hash in CKPT_ACK.
    Ack,
}

impl fmt::Display for HashSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashSubject::RankFilePayload => "rank file payload vs its header",
            HashSubject::CommitEntry => "rank file vs its COMMIT entry",
            HashSubject::Ack => "rank file vs CKPT_ACK",
        })
    }
}

/// Why no epoch can be resumed (H1622, [`Error::NoResumableEpoch`];
/// protocol §10.2): the first failure a rank knows of.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeFailure {
    /// This rank's own failure: its rank file, the copy its buddy sent, or
    /// a COMMIT (an error with its own code, e.g. H1620).
    #[error("{0}")]
    Own(Error),
    /// This rank's own file is missing and its buddy answered that it has
    /// no valid copy (CKPT_DATA kind 3).
    #[error(
        "epoch {epoch}: the own rank file is missing and rank {buddy} has no valid copy of it"
    )]
    NoBuddyCopy {
        /// The buddy, (rank + 1) mod size.
        buddy: u32,
        /// The epoch being loaded.
        epoch: u64,
    },
    /// Rank 0's view: rank `rank` answered RESUME status 2 for `epoch`.
    #[error("rank {rank} cannot load its state of epoch {epoch} (RESUME status 2)")]
    CannotLoad {
        /// The rank that cannot load.
        rank: u32,
        /// The epoch it was asked to load.
        epoch: u64,
    },
    /// The view of a rank that loaded: rank 0 ended the exchange with
    /// RESUME status 2 after `epoch`, the last epoch it chose.
    #[error("rank 0 ended the resume with RESUME status 2 after epoch {epoch}")]
    Abandoned {
        /// The last epoch rank 0 chose.
        epoch: u64,
    },
    /// Rank 0's view in a rollback in place (protocol §18.7): neither its
    /// own tree nor any offer holds a COMMIT of the rollback epoch or an
    /// older one that verifies.
    #[error("no rank holds a COMMIT of the rollback epoch {epoch} or an older one that verifies")]
    NoRollbackCommit {
        /// The rollback epoch of the MEMBERSHIP record (protocol §18.3).
        epoch: u64,
    },
}

/// Why a COMMIT file is refused (H1621).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// It does not decode.
    #[error("malformed: {0}")]
    Malformed(DecodeError),
    /// Another job's COMMIT.
    #[error("job id {got}, expected {expected}")]
    Job {
        /// Our job.
        expected: JobId,
        /// The file's.
        got: JobId,
    },
    /// Another epoch's COMMIT.
    #[error("epoch {got}, expected {expected}")]
    Epoch {
        /// The epoch asked for.
        expected: u64,
        /// The file's.
        got: u64,
    },
    /// The signature does not verify.
    #[error("signature does not verify with the job public key")]
    BadSignature,
}
