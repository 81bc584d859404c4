//! Frame type codes (protocol §6.4).

use std::fmt;

/// The eleven v1 frame types. Code 0 and codes above 11 are invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum FrameType {
    /// 1: first frame on a connection, carries the join token.
    Hello = 1,
    /// 2: a tagged user message.
    Data = 2,
    /// 3: a collective step (16-byte collective header, then data).
    Collective = 3,
    /// 4: liveness counter.
    Heartbeat = 4,
    /// 5: ends the job step.
    Abort = 5,
    /// 6: rank 0 starts checkpoint epoch e.
    CkptBegin = 6,
    /// 7: checkpoint file transfer to or from the buddy.
    CkptData = 7,
    /// 8: SHA-256 of a rank's new file.
    CkptAck = 8,
    /// 9: the signed COMMIT file.
    CkptCommit = 9,
    /// 10: the resume exchange.
    Resume = 10,
    /// 11: orderly goodbye.
    Bye = 11,
    /// 12: RECOVER (revoke, or a MEMBERSHIP record), only in a job with
    /// HELLO feature bit 5 (protocol §18.2, §18.5); not in [`FrameType::ALL`].
    Recover = 12,
}

impl FrameType {
    /// Every type in code order.
    pub const ALL: [FrameType; 11] = [
        FrameType::Hello,
        FrameType::Data,
        FrameType::Collective,
        FrameType::Heartbeat,
        FrameType::Abort,
        FrameType::CkptBegin,
        FrameType::CkptData,
        FrameType::CkptAck,
        FrameType::CkptCommit,
        FrameType::Resume,
        FrameType::Bye,
    ];

    /// The v1 type for a code, if valid (protocol §6.2 check 2: 1..=11).
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }

    /// The type for a code in a job that negotiated the HELLO `features`:
    /// 1..=11, and 12 (RECOVER) with feature bit 5 (protocol §18.2 check 2).
    pub fn from_code_with(code: u8, features: u64) -> Option<Self> {
        if code == FrameType::Recover as u8 && features & crate::recovery::FEATURE_MEMBERSHIP != 0 {
            return Some(FrameType::Recover);
        }
        Self::from_code(code)
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The name as the text writes it (`HELLO`, `CKPT_DATA`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FrameType::Hello => "HELLO",
            FrameType::Data => "DATA",
            FrameType::Collective => "COLLECTIVE",
            FrameType::Heartbeat => "HEARTBEAT",
            FrameType::Abort => "ABORT",
            FrameType::CkptBegin => "CKPT_BEGIN",
            FrameType::CkptData => "CKPT_DATA",
            FrameType::CkptAck => "CKPT_ACK",
            FrameType::CkptCommit => "CKPT_COMMIT",
            FrameType::Resume => "RESUME",
            FrameType::Bye => "BYE",
            FrameType::Recover => "RECOVER",
        }
    }

    /// The type with this name, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain([FrameType::Recover])
            .find(|t| t.name() == name)
    }

    /// Whether the header epoch must be >= 1 (checkpoint frames), may be
    /// anything (RESUME), or must be 0 (all others): check 10 of protocol §6.2.
    pub fn epoch_allowed(self, epoch: u64) -> bool {
        match self {
            FrameType::CkptBegin
            | FrameType::CkptData
            | FrameType::CkptAck
            | FrameType::CkptCommit => epoch >= 1,
            FrameType::Resume => true,
            _ => epoch == 0,
        }
    }
}

impl fmt::Display for FrameType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(FrameType::from_code(0), None);
        assert_eq!(FrameType::from_code(12), None);
        assert_eq!(FrameType::from_code_with(12, 1), None);
        assert_eq!(
            FrameType::from_code_with(12, 1 | crate::recovery::FEATURE_MEMBERSHIP),
            Some(FrameType::Recover)
        );
        assert_eq!(FrameType::from_name("RECOVER"), Some(FrameType::Recover));
        for t in FrameType::ALL {
            assert_eq!(FrameType::from_code(t.code()), Some(t));
            assert_eq!(FrameType::from_name(t.name()), Some(t));
        }
    }
}
