//! CKPT_ACK (frame type 8) payload (protocol §7.9; the checkpoint sequence,
//! protocol §9.4, step 2).
//!
//! Each rank sends rank 0 the SHA-256 of the whole rank file it has just
//! renamed into place (`rank-<n>.ckpt`, protocol §9.2). Rank 0 writes these
//! hashes into the COMMIT file. The payload is exactly 32 bytes.

use crate::codec::{Codec, Reader};
use crate::error::{DecodeError, Error, HashSubject};
use crate::ids::Sha256Digest;

/// Length of the CKPT_ACK payload (protocol §6.3: `CKPT_ACK = 32`).
pub const CKPT_ACK_LEN: usize = 32;

/// The CKPT_ACK payload (protocol §7.9): `[32]` SHA-256 of the whole rank file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CkptAck {
    /// SHA-256 of the whole file `rank-<n>.ckpt`, header included
    /// ([`crate::rank_file::whole_file_hash`]).
    pub sha256: Sha256Digest,
}

impl CkptAck {
    /// The ACK for a whole rank file's bytes (protocol §7.9, §9.2).
    pub fn for_file(rank_file: &[u8]) -> Self {
        CkptAck {
            sha256: Sha256Digest::of(rank_file),
        }
    }

    /// Checks a whole rank file against this ACK: a different SHA-256 is
    /// H1620 ([`Error::HashMismatch`] with [`HashSubject::Ack`]).
    pub fn check_file(&self, rank_file: &[u8]) -> Result<(), Error> {
        let got = Sha256Digest::of(rank_file);
        if got == self.sha256 {
            Ok(())
        } else {
            Err(Error::HashMismatch {
                what: HashSubject::Ack,
                expected: self.sha256,
                got,
            })
        }
    }
}

impl<'a> Codec<'a> for CkptAck {
    const NAME: &'static str = "CKPT_ACK payload";

    /// Writes the 32 digest bytes (protocol §7.9).
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.sha256.0);
    }

    /// Reads the 32 digest bytes (protocol §7.9).
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(CkptAck {
            sha256: Sha256Digest(r.array("sha256")?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::HCode;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let v = CkptAck::for_file(b"file");
        let bytes = v.to_vec();
        assert_eq!(bytes.len(), CKPT_ACK_LEN);
        assert_eq!(bytes, Sha256Digest::of(b"file").0);
        assert_eq!(CkptAck::decode(&bytes), Ok(v));
    }

    #[test]
    fn every_proper_prefix_fails() {
        let bytes = CkptAck::for_file(b"x").to_vec();
        for n in 0..bytes.len() {
            assert_eq!(
                CkptAck::decode(&bytes[..n]),
                Err(DecodeError::Truncated {
                    field: "sha256",
                    needed: 32,
                    left: n
                })
            );
        }
    }

    #[test]
    fn trailing_byte_fails() {
        let mut bytes = vec![7u8; 33];
        bytes[32] = 0;
        assert_eq!(
            CkptAck::decode(&bytes),
            Err(DecodeError::TrailingBytes {
                item: "CKPT_ACK payload",
                extra: 1
            })
        );
    }

    #[test]
    fn check_file_h1620() {
        let ack = CkptAck::for_file(b"abc");
        assert_eq!(ack.check_file(b"abc"), Ok(()));
        let err = ack.check_file(b"abd").unwrap_err();
        assert_eq!(err.h_code(), Some(HCode::H1620));
        assert_eq!(
            err,
            Error::HashMismatch {
                what: HashSubject::Ack,
                expected: Sha256Digest::of(b"abc"),
                got: Sha256Digest::of(b"abd"),
            }
        );
    }

    proptest! {
        #[test]
        fn prop_round_trip(d in any::<[u8; 32]>()) {
            let v = CkptAck { sha256: Sha256Digest(d) };
            prop_assert_eq!(CkptAck::decode(&v.to_vec()), Ok(v));
        }

        #[test]
        fn prop_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let r = CkptAck::decode(&bytes);
            prop_assert_eq!(r.is_ok(), bytes.len() == 32);
        }
    }
}
