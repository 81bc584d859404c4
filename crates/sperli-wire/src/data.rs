//! DATA (2): the payload is the user's message; the tag is in the header
//! (protocol §7.2). An empty message is valid.

use crate::codec::{Codec, Reader};
use crate::error::DecodeError;

/// A DATA payload: the message bytes, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data<'a>(pub &'a [u8]);

impl<'a> Codec<'a> for Data<'a> {
    const NAME: &'static str = "DATA payload";

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0);
    }

    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Data(r.rest()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let d = Data::decode(&bytes).unwrap();
            prop_assert_eq!(d.to_vec(), bytes);
        }
    }
}
