//! HELLO (1): protocol version, features and the join token (protocol §7.1.1).

use crate::codec::{Codec, PutLe, Reader};
use crate::error::DecodeError;
use crate::join_token::JoinToken;
use crate::limits::{FEATURE_V1_CORE, PROTOCOL_VERSION};

/// The HELLO payload. Both sides send it right after the TLS handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello<'a> {
    /// Feature bits; bit 0 (the v1 core) must be set.
    pub features: u64,
    /// The sender's join token.
    pub token: JoinToken<'a>,
}

impl<'a> Codec<'a> for Hello<'a> {
    const NAME: &'static str = "HELLO payload";

    fn encode(&self, out: &mut Vec<u8>) {
        let token = self.token.to_vec();
        out.put_u16(PROTOCOL_VERSION);
        out.put_u16(0);
        out.put_u64(self.features);
        out.put_u16(token.len() as u16);
        out.extend_from_slice(&token);
    }

    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let version = r.u16("protocol_version")?;
        if version != PROTOCOL_VERSION {
            return Err(DecodeError::Mismatch {
                field: "protocol_version",
                expected: u64::from(PROTOCOL_VERSION),
                got: u64::from(version),
            });
        }
        r.zeros(2, "reserved")?;
        let features = r.u64("features")?;
        if features & FEATURE_V1_CORE == 0 {
            return Err(DecodeError::Mismatch {
                field: "features bit 0",
                expected: 1,
                got: 0,
            });
        }
        let token_len = r.u16("token_len")?;
        let token_bytes = r.take(usize::from(token_len), "join token")?;
        let token = JoinToken::decode(token_bytes)?;
        Ok(Self { features, token })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::join_token::tests::sample_token;
    use proptest::prelude::*;

    fn sample() -> Vec<u8> {
        let token = sample_token("node-1");
        let mut out = vec![1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        out.put_u16(token.len() as u16);
        out.extend_from_slice(&token);
        out
    }

    #[test]
    fn round_trip_prefixes_and_rules() {
        let bytes = sample();
        let h = Hello::decode(&bytes).unwrap();
        assert_eq!(h.token.message.host, "node-1");
        assert_eq!(h.to_vec(), bytes);
        for n in 0..bytes.len() {
            assert!(Hello::decode(&bytes[..n]).is_err(), "prefix {n}");
        }
        let mut v2 = bytes.clone();
        v2[0] = 2;
        assert!(matches!(
            Hello::decode(&v2),
            Err(DecodeError::Mismatch {
                field: "protocol_version",
                ..
            })
        ));
        let mut res = bytes.clone();
        res[3] = 1;
        assert!(matches!(
            Hello::decode(&res),
            Err(DecodeError::NotZero { .. })
        ));
        let mut feat = bytes.clone();
        feat[4] = 2;
        assert!(Hello::decode(&feat).is_err());
        let mut long = bytes;
        long.push(0);
        assert!(matches!(
            Hello::decode(&long),
            Err(DecodeError::TrailingBytes { .. })
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let _ = Hello::decode(&bytes);
        }
    }
}
