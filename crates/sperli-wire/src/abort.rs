//! ABORT (5): reason, H-code and a message (protocol §7.5).

use std::borrow::Cow;
use std::fmt;

use crate::codec::{Codec, PutLe, Reader};
use crate::error::DecodeError;
use crate::limits::MAX_ABORT_MESSAGE;

/// ABORT reasons (protocol §7.5). An unknown reason still aborts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AbortReason {
    /// 1: a peer was lost.
    PeerLost,
    /// 2: the application aborted.
    Application,
    /// 3: collective mismatch.
    CollectiveMismatch,
    /// 4: invalid scatter at the root.
    InvalidScatter,
    /// 5: checkpoint failed.
    CheckpointFailed,
    /// 6: resume failed.
    ResumeFailed,
    /// 7: a frame was rejected.
    RejectedFrame,
    /// Any other value.
    Unknown(u16),
}

impl AbortReason {
    /// The wire value.
    pub fn code(self) -> u16 {
        match self {
            AbortReason::PeerLost => 1,
            AbortReason::Application => 2,
            AbortReason::CollectiveMismatch => 3,
            AbortReason::InvalidScatter => 4,
            AbortReason::CheckpointFailed => 5,
            AbortReason::ResumeFailed => 6,
            AbortReason::RejectedFrame => 7,
            AbortReason::Unknown(c) => c,
        }
    }

    /// The reason for a wire value.
    pub fn from_code(c: u16) -> Self {
        match c {
            1 => AbortReason::PeerLost,
            2 => AbortReason::Application,
            3 => AbortReason::CollectiveMismatch,
            4 => AbortReason::InvalidScatter,
            5 => AbortReason::CheckpointFailed,
            6 => AbortReason::ResumeFailed,
            7 => AbortReason::RejectedFrame,
            c => AbortReason::Unknown(c),
        }
    }
}

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AbortReason::PeerLost => f.write_str("1 (peer lost)"),
            AbortReason::Application => f.write_str("2 (application abort)"),
            AbortReason::CollectiveMismatch => f.write_str("3 (collective mismatch)"),
            AbortReason::InvalidScatter => f.write_str("4 (invalid scatter at root)"),
            AbortReason::CheckpointFailed => f.write_str("5 (checkpoint failed)"),
            AbortReason::ResumeFailed => f.write_str("6 (resume failed)"),
            AbortReason::RejectedFrame => f.write_str("7 (rejected frame)"),
            AbortReason::Unknown(c) => write!(f, "{c} (unknown)"),
        }
    }
}

/// The ABORT payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abort<'a> {
    /// Why.
    pub reason: AbortReason,
    /// The H number (e.g. 1617) or 0.
    pub code: u32,
    /// UTF-8 text of at most 1024 bytes (shown lossily if it is not UTF-8).
    pub message: &'a [u8],
}

impl Abort<'_> {
    /// The message as text, invalid UTF-8 replaced.
    pub fn message_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.message)
    }

    /// Cuts `text` to at most 1024 bytes on a character boundary.
    pub fn truncate_message(text: &str) -> &str {
        crate::codec::truncate_utf8(text, MAX_ABORT_MESSAGE)
    }
}

impl<'a> Codec<'a> for Abort<'a> {
    const NAME: &'static str = "ABORT payload";

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(self.reason.code());
        out.put_u16(0);
        out.put_u32(self.code);
        out.extend_from_slice(&self.message[..self.message.len().min(MAX_ABORT_MESSAGE)]);
    }

    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let reason = AbortReason::from_code(r.u16("reason")?);
        r.zeros(2, "reserved")?;
        let code = r.u32("code")?;
        let message = r.rest();
        if message.len() > MAX_ABORT_MESSAGE {
            return Err(DecodeError::OutOfRange {
                field: "message length",
                min: 0,
                max: MAX_ABORT_MESSAGE as u64,
                got: message.len() as u64,
            });
        }
        Ok(Self {
            reason,
            code,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn limits_and_lossy() {
        let msg = vec![b'x'; 1024];
        let a = Abort {
            reason: AbortReason::CollectiveMismatch,
            code: 1617,
            message: &msg,
        };
        let bytes = a.to_vec();
        assert_eq!(Abort::decode(&bytes).unwrap(), a);
        let mut long = bytes.clone();
        long.push(b'y');
        assert!(matches!(
            Abort::decode(&long),
            Err(DecodeError::OutOfRange { got: 1025, .. })
        ));
        let bad = Abort {
            reason: AbortReason::from_code(99),
            code: 0,
            message: &[0xff, b'a'],
        };
        assert_eq!(
            Abort::decode(&bad.to_vec()).unwrap().message_lossy(),
            "\u{fffd}a"
        );
        assert_eq!(Abort::truncate_message(&"é".repeat(600)).len(), 1024);
        for n in 0..8 {
            assert!(Abort::decode(&bytes[..n]).is_err());
        }
    }

    proptest! {
        #[test]
        fn round_trip(reason: u16, code: u32, msg in proptest::collection::vec(any::<u8>(), 0..1025)) {
            let a = Abort { reason: AbortReason::from_code(reason), code, message: &msg };
            let bytes = a.to_vec();
            prop_assert_eq!(Abort::decode(&bytes).unwrap(), a);
        }
    }
}
