//! Identifiers and digests that appear in many frames and files.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::hex;

/// A job id: 16 bytes, written as 32 lowercase hex digits (protocol §1.2).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct JobId(pub [u8; 16]);

impl JobId {
    /// The 32 lowercase hex digits used in paths and certificate names.
    pub fn to_hex(&self) -> String {
        hex::encode(&self.0)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobId({})", self.to_hex())
    }
}

/// A SHA-256 digest (rank files, COMMIT entries, CKPT_ACK).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Sha256Digest(pub [u8; 32]);

impl Sha256Digest {
    /// SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(&self.0))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256({})", hex::encode(&self.0))
    }
}
