//! What the rank-side collectives carry (docs/mailbox.md §5.2): the
//! envelope rank 0 broadcasts for each request and the status block every
//! rank contributes to the gather. Pure.

use crate::layout::{Opcode, TargetKind, REGION_LEN};
use crate::records::{Target, MAX_ERROR_MESSAGE, MAX_ERROR_TYPE, RECORD_HEAD};

/// Bytes of the envelope rank 0 broadcasts.
pub const ENVELOPE_LEN: usize = 32;
/// Bytes of one rank's status block in the gather.
pub const STATUS_LEN: usize = 16;

/// What rank 0 broadcasts to every rank for each request (docs/mailbox.md
/// §5.2): sequence u64, opcode, target, target rank, handler, GROUP
/// payload length (u32 each), 4 zero bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// The request's sequence id.
    pub sequence: u64,
    /// Its opcode.
    pub opcode: Opcode,
    /// Its target.
    pub target: Target,
    /// Its handler id.
    pub handler: u32,
    /// For GROUP: the payload length every rank receives by bcast; else 0.
    pub group_len: u32,
}

/// Why an envelope from rank 0 does not decode (a broken collective).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("envelope from rank 0: {0}")]
pub struct EnvelopeError(pub &'static str);

impl Envelope {
    /// The 32 bytes.
    pub fn encode(&self) -> [u8; ENVELOPE_LEN] {
        let mut b = [0u8; ENVELOPE_LEN];
        b[..8].copy_from_slice(&self.sequence.to_le_bytes());
        let (kind, rank) = self.target.kind();
        for (i, v) in [
            self.opcode.code(),
            kind.code(),
            rank,
            self.handler,
            self.group_len,
        ]
        .into_iter()
        .enumerate()
        {
            b[8 + 4 * i..12 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// Decodes an envelope (exactly 32 bytes, valid codes, zero padding).
    pub fn decode(b: &[u8], world: u32) -> Result<Self, EnvelopeError> {
        if b.len() != ENVELOPE_LEN {
            return Err(EnvelopeError("not 32 bytes"));
        }
        let w = |i: usize| {
            u32::from_le_bytes([b[8 + 4 * i], b[9 + 4 * i], b[10 + 4 * i], b[11 + 4 * i]])
        };
        let opcode = Opcode::from_code(w(0)).ok_or(EnvelopeError("opcode"))?;
        let target = match (TargetKind::from_code(w(1)), w(2)) {
            (Some(TargetKind::Group), 0) => Target::Group,
            (Some(TargetKind::PerRank), 0) => Target::PerRank,
            (Some(TargetKind::Rank), r) if r < world => Target::Rank(r),
            _ => return Err(EnvelopeError("target")),
        };
        if w(5) != 0 {
            return Err(EnvelopeError("padding"));
        }
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&b[..8]);
        Ok(Self {
            sequence: u64::from_le_bytes(seq),
            opcode,
            target,
            handler: w(3),
            group_len: w(4),
        })
    }
}

/// One rank's status in the gather (docs/mailbox.md §5.2, step 5): status (0 ok,
/// 1 error, 2 not a target), then the lengths of its error type, error
/// message and reply (u32 each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// 0 ok, 1 error, 2 not a target.
    pub status: u32,
    /// Bytes of the error type.
    pub type_len: u32,
    /// Bytes of the error message.
    pub message_len: u32,
    /// Bytes of the reply.
    pub reply_len: u32,
}

impl Status {
    /// OK with a reply of `reply_len` bytes.
    pub const STATUS_OK: u32 = 0;
    /// An error.
    pub const STATUS_ERROR: u32 = 1;
    /// The rank did not execute the request.
    pub const STATUS_NOT_TARGET: u32 = 2;

    /// The 16 bytes.
    pub fn encode(&self) -> [u8; STATUS_LEN] {
        let mut b = [0u8; STATUS_LEN];
        for (i, v) in [self.status, self.type_len, self.message_len, self.reply_len]
            .into_iter()
            .enumerate()
        {
            b[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// Decodes one block; a status above 2 or lengths that break the
    /// limits are `None` (a broken rank).
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() != STATUS_LEN {
            return None;
        }
        let w = |i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        let s = Self {
            status: w(0),
            type_len: w(1),
            message_len: w(2),
            reply_len: w(3),
        };
        let ok = match s.status {
            Self::STATUS_OK => {
                s.type_len == 0 && s.message_len == 0 && s.reply_len as usize <= REGION_LEN
            }
            Self::STATUS_ERROR => {
                s.type_len as usize <= MAX_ERROR_TYPE
                    && s.message_len as usize <= MAX_ERROR_MESSAGE
                    && s.reply_len == 0
            }
            Self::STATUS_NOT_TARGET => s.type_len == 0 && s.message_len == 0 && s.reply_len == 0,
            _ => false,
        };
        ok.then_some(s)
    }

    /// Bytes of this rank's record in the reply region (0 for a rank that
    /// did not execute).
    pub fn record_len(&self) -> u64 {
        match self.status {
            Self::STATUS_NOT_TARGET => 0,
            _ => {
                RECORD_HEAD as u64
                    + u64::from(self.type_len)
                    + u64::from(self.message_len)
                    + u64::from(self.reply_len)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_and_statuses() {
        for target in [Target::Group, Target::Rank(2), Target::PerRank] {
            let e = Envelope {
                sequence: 9,
                opcode: Opcode::Control,
                target,
                handler: 77,
                group_len: 5,
            };
            assert_eq!(Envelope::decode(&e.encode(), 3), Ok(e));
        }
        let e = Envelope {
            sequence: 1,
            opcode: Opcode::Task,
            target: Target::Rank(3),
            handler: 0,
            group_len: 0,
        };
        assert!(Envelope::decode(&e.encode(), 3).is_err());
        assert!(Envelope::decode(&[0; 31], 3).is_err());
        let s = Status {
            status: Status::STATUS_ERROR,
            type_len: 3,
            message_len: 4,
            reply_len: 0,
        };
        assert_eq!(Status::decode(&s.encode()), Some(s));
        assert_eq!(s.record_len(), 27);
        let bad = Status { reply_len: 1, ..s };
        assert_eq!(Status::decode(&bad.encode()), None);
    }
}
