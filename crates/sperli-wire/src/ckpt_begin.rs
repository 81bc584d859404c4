//! CKPT_BEGIN (frame type 6) payload (protocol §7.7; the checkpoint
//! sequence, protocol §9.4, step 1).
//!
//! Rank 0 sends it to every rank; the header epoch is the new epoch `e >= 1`
//! (checked with the frame header, not here). The payload is exactly 8 bytes:
//!
//! | off | size | field | rule |
//! |---|---|---|---|
//! | 0 | 4 | version | 1 |
//! | 4 | 4 | size | the sender's size; must equal the receiver's ([`CkptBegin::check_size`]) |

use crate::codec::{Codec, PutLe, Reader};
use crate::error::DecodeError;
use crate::limits::PROTOCOL_VERSION;

/// The CKPT_BEGIN payload (protocol §7.7): the protocol version (always 1 on the
/// wire, so not stored) and the sender's job size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CkptBegin {
    /// The sender's job size. A receiver refuses a size other than its own
    /// ([`CkptBegin::check_size`]).
    pub size: u32,
}

/// Length of the CKPT_BEGIN payload (protocol §6.3: `CKPT_BEGIN = 8`).
pub const CKPT_BEGIN_LEN: usize = 8;

impl CkptBegin {
    /// The receiver's check of protocol §7.7: a size
    /// other than its own is refused with [`DecodeError::Mismatch`] on field
    /// `size` (the frame layer reports it as a rejected frame).
    pub fn check_size(&self, own_size: u32) -> Result<(), DecodeError> {
        if self.size == own_size {
            Ok(())
        } else {
            Err(DecodeError::Mismatch {
                field: "size",
                expected: u64::from(own_size),
                got: u64::from(self.size),
            })
        }
    }
}

impl<'a> Codec<'a> for CkptBegin {
    const NAME: &'static str = "CKPT_BEGIN payload";

    /// Writes `u32 version` (1) and `u32 size` (protocol §7.7).
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(u32::from(PROTOCOL_VERSION));
        out.put_u32(self.size);
    }

    /// Reads `u32 version` and `u32 size`; a version other than 1 is
    /// [`DecodeError::Mismatch`] on field `version` (protocol §7.7).
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let version = r.u32("version")?;
        if version != u32::from(PROTOCOL_VERSION) {
            return Err(DecodeError::Mismatch {
                field: "version",
                expected: u64::from(PROTOCOL_VERSION),
                got: u64::from(version),
            });
        }
        let size = r.u32("size")?;
        Ok(CkptBegin { size })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_layout() {
        let v = CkptBegin { size: 4096 };
        let bytes = v.to_vec();
        assert_eq!(bytes, [1, 0, 0, 0, 0, 0x10, 0, 0]);
        assert_eq!(bytes.len(), CKPT_BEGIN_LEN);
        assert_eq!(CkptBegin::decode(&bytes), Ok(v));
    }

    #[test]
    fn every_proper_prefix_fails() {
        let bytes = CkptBegin { size: 3 }.to_vec();
        for n in 0..bytes.len() {
            assert!(
                matches!(
                    CkptBegin::decode(&bytes[..n]),
                    Err(DecodeError::Truncated { .. })
                ),
                "prefix {n}"
            );
        }
    }

    #[test]
    fn trailing_byte_fails() {
        let mut bytes = CkptBegin { size: 3 }.to_vec();
        bytes.push(0);
        assert_eq!(
            CkptBegin::decode(&bytes),
            Err(DecodeError::TrailingBytes {
                item: "CKPT_BEGIN payload",
                extra: 1
            })
        );
    }

    #[test]
    fn other_version_rejected() {
        for version in [0u32, 2, u32::MAX] {
            let mut bytes = version.to_le_bytes().to_vec();
            bytes.extend_from_slice(&3u32.to_le_bytes());
            assert_eq!(
                CkptBegin::decode(&bytes),
                Err(DecodeError::Mismatch {
                    field: "version",
                    expected: 1,
                    got: u64::from(version)
                })
            );
        }
    }

    #[test]
    fn size_check() {
        let v = CkptBegin { size: 4 };
        assert_eq!(v.check_size(4), Ok(()));
        assert_eq!(
            v.check_size(5),
            Err(DecodeError::Mismatch {
                field: "size",
                expected: 5,
                got: 4
            })
        );
    }

    proptest! {
        #[test]
        fn prop_round_trip(size in any::<u32>()) {
            let v = CkptBegin { size };
            let bytes = v.to_vec();
            prop_assert_eq!(CkptBegin::decode(&bytes), Ok(v));
        }

        #[test]
        fn prop_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            let _ = CkptBegin::decode(&bytes);
        }
    }
}
