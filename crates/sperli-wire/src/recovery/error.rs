//! The errors of feature bit 5 (protocol §18), with their H-codes written
//! once, in [`RecoveryError::h_code`] (docs/error-codes.md, "With HELLO
//! feature bit 5").

use crate::error::{DecodeError, HCode};

/// The check of protocol §18.3 (MEMBERSHIP record), §18.4 (REPORT) or
/// §18.5 (RECOVER payload) that a record failed while it was read; the
/// names are the vectors' `<check>` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordCheck {
    /// A field does not fit.
    Truncated,
    /// Not the record's magic.
    Magic,
    /// Version ≠ 1.
    Version,
    /// Mode not 1 or 2 (§18.3 check 4).
    Mode,
    /// `agreed` above 1.
    Agreed,
    /// A REPORT `flag` above 1.
    Flag,
    /// A REPORT `rank` of 4096 or more.
    Rank,
    /// Epoch below its minimum, or start incarnation 0.
    Epoch,
    /// Size outside 1..=4096.
    Size,
    /// Change count outside 1..=size − 1.
    Changed,
    /// `rollback` against the mode.
    Rollback,
    /// A change entry breaks its rule.
    Entry,
    /// No member left.
    Members,
    /// sig_len ≠ 2484.
    SigLen,
    /// Bytes after the last field.
    Trailing,
    /// RECOVER kind not 1, 2 or 3.
    Kind,
    /// A reserved byte not 0.
    Reserved,
    /// REVOKE or REPORT suspect count out of range.
    Count,
    /// A suspect out of order, out of range or the sender itself.
    Suspects,
    /// A REVOKE COMMUNICATOR id above 2147483647 (protocol §18.5).
    Comm,
}

impl RecordCheck {
    /// The check's word in the vectors (protocol §18.10).
    pub fn name(self) -> &'static str {
        match self {
            RecordCheck::Truncated => "truncated",
            RecordCheck::Magic => "magic",
            RecordCheck::Version => "version",
            RecordCheck::Mode => "mode",
            RecordCheck::Agreed => "agreed",
            RecordCheck::Flag => "flag",
            RecordCheck::Rank => "rank",
            RecordCheck::Epoch => "epoch",
            RecordCheck::Size => "size",
            RecordCheck::Changed => "changed",
            RecordCheck::Rollback => "rollback",
            RecordCheck::Entry => "entry",
            RecordCheck::Members => "members",
            RecordCheck::SigLen => "sig_len",
            RecordCheck::Trailing => "trailing",
            RecordCheck::Kind => "kind",
            RecordCheck::Reserved => "reserved",
            RecordCheck::Count => "count",
            RecordCheck::Suspects => "suspects",
            RecordCheck::Comm => "comm",
        }
    }
}

/// A failure of feature bit 5 (protocol §18).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryError {
    /// A record or RECOVER payload that does not decode (protocol §18.3
    /// checks 1-13, §18.4, §18.5): H1610.
    #[error("{} does not decode ({}): {error}", .what, .check.name())]
    Malformed {
        /// What was read: "MEMBERSHIP record", "REPORT record", "RECOVER payload".
        what: &'static str,
        /// The failing check.
        check: RecordCheck,
        /// The field and values.
        error: DecodeError,
    },
    /// A record of another job, size or start incarnation (§18.3 check 14): H1610.
    #[error("MEMBERSHIP record for another job: {field} must be {expected}, got {got}")]
    Job {
        /// `job_id` (the values are then the first 8 bytes), `size` or `start_incarnation`.
        field: &'static str,
        /// The receiver's value.
        expected: u64,
        /// The record's value.
        got: u64,
    },
    /// A second, different record of the current epoch (§18.3 check 15): H1610.
    #[error("a second, different MEMBERSHIP record of epoch {epoch}")]
    Equivocation {
        /// The epoch.
        epoch: u32,
    },
    /// The signature does not verify (§18.3 check 16, context
    /// `SPERLI-MEMBER-1`): H1610.
    #[error("MEMBERSHIP record: the signature does not verify with the job key")]
    BadSignature,
    /// The record does not follow the receiver's membership (§18.3 check 17): H1610.
    #[error("MEMBERSHIP record does not follow the membership: rank {rank} {field} must be {expected}, got {got}")]
    History {
        /// The rank whose entry is wrong.
        rank: u32,
        /// What is wrong: "incarnation" or "member".
        field: &'static str,
        /// What the receiver allows (for an incarnation above: its current + 1).
        expected: u64,
        /// The record's value.
        got: u64,
    },
    /// A change entry names a refused host (§18.3 check 17): H1614.
    #[error("MEMBERSHIP record: the host of rank {rank} is refused")]
    HostRefused {
        /// The rank of the entry.
        rank: u32,
    },
    /// The receiver was declared failed (§18.3 check 18): H1613.
    #[error("removed from the membership in epoch {epoch}")]
    Fenced {
        /// The record's epoch.
        epoch: u32,
    },
    /// The control channel ended, or no record came within 60 s of the
    /// revoke (§18.6): H1613.
    #[error("the launcher is lost (its control channel ended or no record came)")]
    LauncherLost,
    /// A call of a revoked epoch (§18.8): H1613.
    #[error("membership epoch {epoch} was revoked")]
    Revoked {
        /// The revoked epoch.
        epoch: u32,
    },
    /// A call on a communicator that was revoked (protocol §18.8.1: by
    /// this rank or by a RECOVER REVOKE COMMUNICATOR): H1613.
    #[error("communicator {comm} was revoked")]
    CommunicatorRevoked {
        /// The communicator id (protocol §15.2).
        comm: u32,
    },
    /// A frame type that is not 1..=11 (1..=12 with bit 5) (§6.2, §18.2
    /// check 2): H1610.
    #[error("frame type {got} is not a type of this job")]
    HeaderType {
        /// The type byte.
        got: u8,
    },
    /// A frame of a newer membership epoch, or epoch 0 on a frame other
    /// than HELLO (§18.2 check 5); without bit 5, any membership epoch but
    /// 0 (`current` is then 0): H1610.
    #[error("membership_epoch {got} on a frame, current {current}")]
    HeaderEpoch {
        /// The receiver's current epoch.
        current: u32,
        /// The frame's.
        got: u32,
    },
}

impl RecoveryError {
    /// The H-code (docs/error-codes.md, "With HELLO feature bit 5").
    pub fn h_code(&self) -> HCode {
        match self {
            RecoveryError::Malformed { .. }
            | RecoveryError::Job { .. }
            | RecoveryError::Equivocation { .. }
            | RecoveryError::BadSignature
            | RecoveryError::History { .. }
            | RecoveryError::HeaderType { .. }
            | RecoveryError::HeaderEpoch { .. } => HCode::H1610,
            RecoveryError::HostRefused { .. } => HCode::H1614,
            RecoveryError::Fenced { .. }
            | RecoveryError::LauncherLost
            | RecoveryError::Revoked { .. }
            | RecoveryError::CommunicatorRevoked { .. } => HCode::H1613,
        }
    }

    /// The vectors' `<check>` word of this error (protocol §18.10).
    pub fn check_name(&self) -> &'static str {
        match self {
            RecoveryError::Malformed { check, .. } => check.name(),
            RecoveryError::Job { .. } => "job",
            RecoveryError::Equivocation { .. } => "equivocation",
            RecoveryError::BadSignature => "signature",
            RecoveryError::History { .. } | RecoveryError::HostRefused { .. } => "history",
            RecoveryError::Fenced { .. } => "fenced",
            RecoveryError::LauncherLost => "launcher",
            RecoveryError::Revoked { .. } | RecoveryError::CommunicatorRevoked { .. } => "revoked",
            RecoveryError::HeaderType { .. } => "type",
            RecoveryError::HeaderEpoch { .. } => "membership_epoch",
        }
    }
}

/// Wraps a reader failure as [`RecoveryError::Malformed`]: a field that
/// does not fit is `truncated`, any other failure is the given check.
pub(crate) fn malformed(
    what: &'static str,
    check: RecordCheck,
    error: DecodeError,
) -> RecoveryError {
    let check = match error {
        DecodeError::Truncated { .. } => RecordCheck::Truncated,
        _ => check,
    };
    RecoveryError::Malformed { what, check, error }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(RecoveryError::BadSignature.h_code(), HCode::H1610);
        assert_eq!(
            RecoveryError::HostRefused { rank: 1 }.h_code(),
            HCode::H1614
        );
        assert_eq!(RecoveryError::Fenced { epoch: 2 }.h_code(), HCode::H1613);
        assert_eq!(RecoveryError::LauncherLost.check_name(), "launcher");
        let revoked = RecoveryError::CommunicatorRevoked { comm: 3 };
        assert_eq!(revoked.h_code(), HCode::H1613);
        assert_eq!(revoked.check_name(), "revoked");
        assert_eq!(revoked.to_string(), "communicator 3 was revoked");
    }
}
