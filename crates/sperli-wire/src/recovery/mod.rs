//! HELLO feature bit 5, membership epochs (protocol §18): the RECOVER
//! frame's payload (type 12, protocol §18.5), the launcher-signed
//! MEMBERSHIP record (§18.3), the REPORT record a rank writes to its
//! control channel (§18.4), the header rules of checks 5 and 9 with bit 5
//! (§18.2), and their typed errors ([`RecoveryError`], one `h_code()`).
//! A job without bit 5 on every rank uses none of this (protocol §18).

pub mod error;
mod fields;
pub mod header;
pub mod membership;
pub mod recover;
pub mod report;

pub use error::{RecordCheck, RecoveryError};
pub use membership::{Change, MembershipRecord, MembershipView, Mode, Precheck};
pub use recover::RecoverPayload;
pub use report::Report;

/// HELLO feature bit 5 (protocol §7.1.1, §18).
pub const FEATURE_MEMBERSHIP: u64 = 1 << 5;
/// Frame type 12, RECOVER (protocol §18.2, §18.5); only with bit 5.
pub const RECOVER_FRAME_TYPE: u8 = 12;
/// The CompositeSig context of a MEMBERSHIP record (protocol §18.3).
pub const CONTEXT_MEMBER: &[u8] = b"SPERLI-MEMBER-1";
/// `rollback` of a shrink record: no rollback (protocol §18.3).
pub const NO_ROLLBACK: u64 = u64::MAX;
/// The reserved user tag of an agreement's messages on its communicator
/// (protocol §18.8.1, "Agree and shrink in this implementation").
pub const AGREE_TAG: u32 = crate::limits::MAX_USER_TAG - 2;
/// The reserved user tag of the id exchange of a communicator's shrink
/// (protocol §18.8.1).
pub const SHRINK_TAG: u32 = crate::limits::MAX_USER_TAG - 3;

/// Whether messages with `tag` still pass on a revoked communicator: the
/// agreement's and the shrink's (protocol §18.8.1), how members leave it.
pub fn passes_revoked(tag: u32) -> bool {
    tag == AGREE_TAG || tag == SHRINK_TAG
}

/// A rank's wait for a record after its revoke before it treats the
/// launcher as failed (protocol §18.6: 60 s).
pub const RECORD_WAIT_MS: u64 = 60_000;

/// How long a rank may hold back its REVOKEs when each of its suspects was
/// detected by the close of its connection (protocol §18.6 step 2: every
/// member sees a dead process's close at once, and the record usually
/// comes first): 250 ms.
pub const REVOKE_DELAY_MS: u64 = 250;
