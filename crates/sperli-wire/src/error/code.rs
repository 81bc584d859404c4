//! The documented H-codes (protocol §13, docs/error-codes.md): [`HCode`].

use std::fmt;

/// The documented H-codes (protocol §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HCode {
    /// Frame rejected.
    H1610 = 1610,
    /// Authentication failed (TLS, certificate subject, HELLO or token).
    H1611 = 1611,
    /// Job aborted by a peer (ABORT received).
    H1612 = 1612,
    /// Peer lost (silence limit passed, or a close without BYE).
    H1613 = 1613,
    /// Host refused.
    H1614 = 1614,
    /// Invalid job description.
    H1615 = 1615,
    /// Connection set-up timed out.
    H1616 = 1616,
    /// Collective frame that does not match its call or is truncated.
    H1617 = 1617,
    /// Invalid collective arguments.
    H1618 = 1618,
    /// Not the expected file.
    H1619 = 1619,
    /// SHA-256 mismatch.
    H1620 = 1620,
    /// Malformed COMMIT or bad signature.
    H1621 = 1621,
    /// No epoch can be resumed.
    H1622 = 1622,
    /// Signed COMMIT with another size.
    H1623 = 1623,
    /// Checkpoint with an open send or receive handle.
    H1624 = 1624,
}

impl HCode {
    /// Every code, ascending.
    pub const ALL: [HCode; 15] = [
        HCode::H1610,
        HCode::H1611,
        HCode::H1612,
        HCode::H1613,
        HCode::H1614,
        HCode::H1615,
        HCode::H1616,
        HCode::H1617,
        HCode::H1618,
        HCode::H1619,
        HCode::H1620,
        HCode::H1621,
        HCode::H1622,
        HCode::H1623,
        HCode::H1624,
    ];

    /// The number, e.g. 1617 (as carried in ABORT's `code`).
    pub fn number(self) -> u32 {
        self as u32
    }

    /// The code for a number, if it is one of ours.
    pub fn from_number(n: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.number() == n)
    }

    /// One-line meaning, as in docs/error-codes.md.
    pub fn meaning(self) -> &'static str {
        match self {
            HCode::H1610 => "frame rejected",
            HCode::H1611 => "authentication failed",
            HCode::H1612 => "job aborted by a peer",
            HCode::H1613 => "peer lost",
            HCode::H1614 => "host refused",
            HCode::H1615 => "invalid job description",
            HCode::H1616 => "connection set-up timed out",
            HCode::H1617 => "collective frame does not match its call",
            HCode::H1618 => "invalid collective arguments",
            HCode::H1619 => "not the expected file",
            HCode::H1620 => "SHA-256 mismatch",
            HCode::H1621 => "malformed COMMIT or bad signature",
            HCode::H1622 => "no epoch can be resumed",
            HCode::H1623 => "signed COMMIT with another size",
            HCode::H1624 => "checkpoint with an open send or receive handle",
        }
    }
}

impl fmt::Display for HCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "H{}", self.number())
    }
}
