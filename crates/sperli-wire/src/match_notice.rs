//! The match notice of a synchronous message (HELLO feature bit 3,
//! protocol §16.5): a DATA frame of kind 2 whose DATA header carries the
//! communicator and the number of the message it answers, total 0 and no
//! data; the frame header's tag is the message's tag.

use crate::codec::{Codec, Reader};
use crate::data_header::{DataFrame, DataHeader, DataKind};
use crate::error::DecodeError;
use crate::limits::DATA_HEADER_LEN;

/// A match notice: "a receive matched your synchronous message number
/// `message` on `communicator`" (protocol §16.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchNotice {
    /// The message's communicator.
    pub communicator: u32,
    /// The message's number, as its sender numbered it on this connection.
    pub message: u64,
}

impl MatchNotice {
    /// The DATA header of this notice.
    pub fn header(&self) -> DataHeader {
        DataHeader {
            communicator: self.communicator,
            kind: DataKind::Notice,
            message: self.message,
            total: 0,
        }
    }
}

impl<'a> Codec<'a> for MatchNotice {
    const NAME: &'static str = "match notice";

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.header().to_bytes());
    }

    /// A DATA payload of exactly 24 bytes with kind 2 (the rules of
    /// [`DataFrame`], then the kind).
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let head = r.take(DATA_HEADER_LEN, "match notice")?;
        let f = DataFrame::decode(head)?;
        if f.header.kind != DataKind::Notice {
            return Err(DecodeError::Mismatch {
                field: "kind",
                expected: u64::from(DataKind::Notice.code()),
                got: u64::from(f.header.kind.code()),
            });
        }
        Ok(Self {
            communicator: f.header.communicator,
            message: f.header.message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_message_frame_is_no_notice() {
        let mut b = MatchNotice {
            communicator: 1,
            message: 4,
        }
        .to_vec();
        b[4] = 1;
        assert!(MatchNotice::decode(&b).is_err());
    }

    proptest! {
        #[test]
        fn round_trip_and_every_proper_prefix_fails(communicator in 0..=crate::limits::MAX_COMMUNICATOR_ID, message in 1u64..) {
            let n = MatchNotice { communicator, message };
            let b = n.to_vec();
            prop_assert_eq!(b.len(), DATA_HEADER_LEN);
            prop_assert_eq!(MatchNotice::decode(&b).unwrap(), n);
            for k in 0..b.len() {
                prop_assert!(MatchNotice::decode(&b[..k]).is_err());
            }
            let mut long = b.clone();
            long.push(0);
            prop_assert!(MatchNotice::decode(&long).is_err());
        }
    }
}
