//! BYE (11): empty payload; sent to every peer on a normal exit (protocol §7.6).

use crate::codec::{Codec, Reader};
use crate::error::DecodeError;

/// The BYE payload (empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bye;

impl<'a> Codec<'a> for Bye {
    const NAME: &'static str = "BYE payload";

    fn encode(&self, _out: &mut Vec<u8>) {}

    fn read(_r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Bye)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_only() {
        assert_eq!(Bye::decode(&[]), Ok(Bye));
        assert!(Bye::decode(&[0]).is_err());
        assert!(Bye.to_vec().is_empty());
    }
}
