//! HEARTBEAT (4): a per-connection counter from 1 (protocol §7.4).

use crate::codec::{Codec, PutLe, Reader};
use crate::error::DecodeError;

/// A HEARTBEAT payload. The counter must be the previous one plus 1 (first 1);
/// the connection state checks that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// The sender's counter on this connection.
    pub counter: u64,
}

impl<'a> Codec<'a> for Heartbeat {
    const NAME: &'static str = "HEARTBEAT payload";

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.counter);
    }

    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Self {
            counter: r.u64("counter")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(counter: u64) {
            let h = Heartbeat { counter };
            let bytes = h.to_vec();
            prop_assert_eq!(bytes.len(), 8);
            prop_assert_eq!(Heartbeat::decode(&bytes).unwrap(), h);
            for n in 0..8 {
                prop_assert!(Heartbeat::decode(&bytes[..n]).is_err());
            }
        }
    }
}
