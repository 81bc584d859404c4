//! The join token: the signed message and its framing (protocol §7.1.2).
//!
//! The signature bytes are opaque here; `sperli-tls` signs and verifies
//! them with CompositeSig under the context `SPERLI-JOIN-1`.

use crate::codec::{Codec, PutLe, Reader};
use crate::error::{DecodeError, HostError};
use crate::host;
use crate::ids::JobId;
use crate::limits::MAX_HOST_LEN;

/// The signed part of a join token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinTokenMessage<'a> {
    /// The job.
    pub job_id: JobId,
    /// The rank the token admits.
    pub rank: u32,
    /// The job size.
    pub size: u32,
    /// The incarnation it is valid for.
    pub incarnation: u32,
    /// Expiry, Unix time in milliseconds; must be after the receiver's clock.
    pub expires_at_ms: u64,
    /// The rank's host, exactly as in its host-list entry.
    pub host: &'a str,
}

impl<'a> Codec<'a> for JoinTokenMessage<'a> {
    const NAME: &'static str = "join-token message";

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.job_id.0);
        out.put_u32(self.rank);
        out.put_u32(self.size);
        out.put_u32(self.incarnation);
        out.put_u64(self.expires_at_ms);
        out.push(self.host.len() as u8);
        out.extend_from_slice(self.host.as_bytes());
    }

    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let job_id = JobId(r.array("job_id")?);
        let rank = r.u32("rank")?;
        let size = r.u32("size")?;
        let incarnation = r.u32("incarnation")?;
        let expires_at_ms = r.u64("expires_at")?;
        let host_len = r.u8("host_len")?;
        if host_len == 0 {
            return Err(DecodeError::OutOfRange {
                field: "host_len",
                min: 1,
                max: MAX_HOST_LEN as u64,
                got: 0,
            });
        }
        let raw = r.take(usize::from(host_len), "host")?;
        let host = read_host(raw)?;
        Ok(Self {
            job_id,
            rank,
            size,
            incarnation,
            expires_at_ms,
            host,
        })
    }
}

/// Reads a host entry's bytes: ASCII, valid syntax (protocol §4.3).
pub(crate) fn read_host(raw: &[u8]) -> Result<&str, DecodeError> {
    let s = std::str::from_utf8(raw).map_err(|e| {
        DecodeError::Host(HostError::BadChar {
            byte: raw[e.valid_up_to()],
        })
    })?;
    host::validate(s)?;
    Ok(s)
}

/// A whole token: message, `u16 sig_len` (= 2484), signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinToken<'a> {
    /// The decoded message.
    pub message: JoinTokenMessage<'a>,
    /// The message's bytes exactly as signed.
    pub message_bytes: &'a [u8],
    /// The CompositeSig signature (2484 bytes).
    pub signature: &'a [u8],
}

impl<'a> JoinToken<'a> {
    /// Frames signed message bytes and their signature into a token.
    pub fn assemble(message_bytes: &[u8], signature: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(message_bytes.len() + 2 + signature.len());
        out.extend_from_slice(message_bytes);
        out.put_u16(signature.len() as u16);
        out.extend_from_slice(signature);
        out
    }
}

impl<'a> Codec<'a> for JoinToken<'a> {
    const NAME: &'static str = "join token";

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.message_bytes);
        out.put_u16(self.signature.len() as u16);
        out.extend_from_slice(self.signature);
    }

    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let start = r.clone();
        let message = JoinTokenMessage::read(r)?;
        let message_bytes = start.clone().take(r.used() - start.used(), "message")?;
        let signature = r.signature()?;
        Ok(Self {
            message,
            message_bytes,
            signature,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::limits::SIGNATURE_LEN;
    use proptest::prelude::*;

    pub(crate) fn sample_token(host: &str) -> Vec<u8> {
        let msg = JoinTokenMessage {
            job_id: JobId([7; 16]),
            rank: 1,
            size: 4,
            incarnation: 2,
            expires_at_ms: 1_900_000_000_000,
            host,
        };
        JoinToken::assemble(&msg.to_vec(), &[0xaa; SIGNATURE_LEN])
    }

    #[test]
    fn round_trip_and_prefixes() {
        let bytes = sample_token("127.0.0.1");
        let t = JoinToken::decode(&bytes).unwrap();
        assert_eq!(t.message.host, "127.0.0.1");
        assert_eq!(t.message_bytes.len(), 37 + 9);
        assert_eq!(t.to_vec(), bytes);
        for n in 0..bytes.len() {
            assert!(JoinToken::decode(&bytes[..n]).is_err(), "prefix {n}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(
            JoinToken::decode(&long),
            Err(DecodeError::TrailingBytes { extra: 1, .. })
        ));
    }

    #[test]
    fn limits() {
        let host = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert!(JoinToken::decode(&sample_token(&host)).is_ok());
        let mut bad = sample_token("ab");
        bad[36] = 0;
        assert!(matches!(
            JoinTokenMessage::read(&mut Reader::new(&bad)),
            Err(DecodeError::OutOfRange {
                field: "host_len",
                ..
            })
        ));
        let mut sig = sample_token("ab");
        let at = 37 + 2;
        sig[at..at + 2].copy_from_slice(&2485u16.to_le_bytes());
        assert!(matches!(
            JoinToken::decode(&sig),
            Err(DecodeError::Mismatch {
                field: "sig_len",
                expected: 2484,
                got: 2485
            })
        ));
    }

    proptest! {
        #[test]
        fn message_round_trips(job in any::<[u8; 16]>(), rank: u32, size: u32, inc: u32, exp: u64,
                               host in "[a-z][a-z0-9]{0,20}(\\.[a-z][a-z0-9]{0,10}){0,3}") {
            let m = JoinTokenMessage { job_id: JobId(job), rank, size, incarnation: inc, expires_at_ms: exp, host: &host };
            let bytes = m.to_vec();
            prop_assert_eq!(JoinTokenMessage::decode(&bytes).unwrap(), m);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let _ = JoinToken::decode(&bytes);
            let _ = JoinTokenMessage::decode(&bytes);
        }
    }
}
