//! CKPT_DATA (frame type 7) payload (protocol §7.8). Splitting a file into
//! chunks and checking them as they arrive is [`crate::ckpt_chunks`].
//!
//! | off | size | field | rule |
//! |---|---|---|---|
//! | 0 | 1 | kind | 0 push, 1 request, 2 reply chunk, 3 no valid copy, 4 nothing needed |
//! | 1 | 3 | reserved | 0 |
//! | 4 | 4 | owner | the rank whose file it concerns (protocol §7.8, table of kinds) |
//! | 8 | 8 | offset | kinds 1, 3, 4: 0 |
//! | 16 | 8 | total | kinds 1, 3, 4: 0 |
//! | 24 | var | chunk | at most 1048576 bytes; none for kinds 1, 3, 4; kinds 0, 2: `offset + len <= total` |
//!
//! A file travels as kind 0 (push to the buddy) or kind 2 (reply to a
//! request) chunks in order: each chunk's offset is the number of bytes sent
//! before it, the total never changes, and an empty file is one empty chunk
//! with total 0 ([`crate::ckpt_chunks::chunks`]).

use std::fmt;

use crate::codec::{Codec, PutLe, Reader};
use crate::error::DecodeError;
use crate::limits::MAX_CKPT_CHUNK;

/// Length of the fixed part of a CKPT_DATA payload before the chunk
/// (protocol §6.3: `CKPT_DATA 24..=24 + 1048576`).
pub const CKPT_DATA_FIXED_LEN: usize = 24;

/// The CKPT_DATA kinds (protocol §7.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CkptDataKind {
    /// 0: rank r pushes its finished rank file to its buddy (r + 1) mod size.
    Push = 0,
    /// 1: a rank asks its buddy for its own file (no chunk, offset = total = 0).
    Request = 1,
    /// 2: the buddy answers a request with the file's chunks.
    Reply = 2,
    /// 3: the buddy has no valid copy (no chunk, offset = total = 0).
    NoValidCopy = 3,
    /// 4: the sender needs nothing, so its buddy does not wait for a request
    /// (no chunk, offset = total = 0).
    NothingNeeded = 4,
}

impl CkptDataKind {
    /// Every kind in code order.
    pub const ALL: [CkptDataKind; 5] = [
        CkptDataKind::Push,
        CkptDataKind::Request,
        CkptDataKind::Reply,
        CkptDataKind::NoValidCopy,
        CkptDataKind::NothingNeeded,
    ];

    /// The kind for a code, if it is 0..=4.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Whether this kind carries file chunks (0 push, 2 reply); the others
    /// carry no chunk and have offset = total = 0 (protocol §7.8).
    pub fn carries_chunks(self) -> bool {
        matches!(self, CkptDataKind::Push | CkptDataKind::Reply)
    }
}

impl fmt::Display for CkptDataKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CkptDataKind::Push => "push",
            CkptDataKind::Request => "request",
            CkptDataKind::Reply => "reply",
            CkptDataKind::NoValidCopy => "no valid copy",
            CkptDataKind::NothingNeeded => "nothing needed",
        })
    }
}

/// The CKPT_DATA payload (protocol §7.8), borrowing its chunk from the input.
///
/// Decoding enforces every rule of the payload alone: kind 0..=4, reserved
/// bytes 0, chunk at most 1 MiB, kinds 1/3/4 with offset = total = 0 and no
/// chunk, kinds 0/2 with `offset + chunk.len() <= total`. Encoding writes the
/// fields as they are; build values with [`crate::ckpt_chunks::chunks`] or
/// the constructors to stay within the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CkptData<'a> {
    /// What this frame is.
    pub kind: CkptDataKind,
    /// The rank whose file it concerns (protocol §7.8): for kinds 1 and 3 the
    /// asking rank, for kind 4 the sender itself.
    pub owner: u32,
    /// Bytes of the file before this chunk (0 for kinds 1, 3, 4).
    pub offset: u64,
    /// Length of the whole file (0 for kinds 1, 3, 4).
    pub total: u64,
    /// The chunk: at most [`MAX_CKPT_CHUNK`] bytes, empty for kinds 1, 3, 4.
    pub chunk: &'a [u8],
}

impl CkptData<'static> {
    /// A kind 1 request for `owner`'s file (protocol §7.8).
    pub fn request(owner: u32) -> Self {
        Self::signal(CkptDataKind::Request, owner)
    }

    /// A kind 3 "no valid copy of `owner`'s file" (protocol §7.8).
    pub fn no_valid_copy(owner: u32) -> Self {
        Self::signal(CkptDataKind::NoValidCopy, owner)
    }

    /// A kind 4 "rank `owner` needs nothing" (protocol §7.8).
    pub fn nothing_needed(owner: u32) -> Self {
        Self::signal(CkptDataKind::NothingNeeded, owner)
    }

    fn signal(kind: CkptDataKind, owner: u32) -> Self {
        CkptData {
            kind,
            owner,
            offset: 0,
            total: 0,
            chunk: &[],
        }
    }
}

impl<'a> Codec<'a> for CkptData<'a> {
    const NAME: &'static str = "CKPT_DATA payload";

    /// Writes the 24-byte fixed part and the chunk (protocol §7.8).
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.kind.code());
        out.extend_from_slice(&[0; 3]);
        out.put_u32(self.owner);
        out.put_u64(self.offset);
        out.put_u64(self.total);
        out.extend_from_slice(self.chunk);
    }

    /// Reads a whole CKPT_DATA payload: the chunk is everything after the
    /// fixed part (protocol §7.8). Errors: kind above 4 is `OutOfRange` on
    /// `kind`; reserved non-zero is `NotZero` on `reserved`; a chunk above
    /// 1048576 bytes is `OutOfRange` on `chunk length`; kinds 1/3/4 with a
    /// non-zero `offset`, `total` or `chunk length` are `NotZero` on that
    /// field; kinds 0/2 with `offset + len > total` are `OutOfRange` on
    /// `offset + chunk length` (max = total).
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let code = r.u8("kind")?;
        let kind = CkptDataKind::from_code(code).ok_or(DecodeError::OutOfRange {
            field: "kind",
            min: 0,
            max: 4,
            got: u64::from(code),
        })?;
        r.zeros(3, "reserved")?;
        let owner = r.u32("owner")?;
        let offset = r.u64("offset")?;
        let total = r.u64("total")?;
        let chunk = r.rest();
        if chunk.len() > MAX_CKPT_CHUNK {
            return Err(DecodeError::OutOfRange {
                field: "chunk length",
                min: 0,
                max: MAX_CKPT_CHUNK as u64,
                got: chunk.len() as u64,
            });
        }
        if kind.carries_chunks() {
            let end = offset.checked_add(chunk.len() as u64);
            if end.is_none_or(|end| end > total) {
                return Err(DecodeError::OutOfRange {
                    field: "offset + chunk length",
                    min: 0,
                    max: total,
                    got: end.unwrap_or(u64::MAX),
                });
            }
        } else {
            for (field, got) in [
                ("offset", offset),
                ("total", total),
                ("chunk length", chunk.len() as u64),
            ] {
                if got != 0 {
                    return Err(DecodeError::NotZero { field, got });
                }
            }
        }
        Ok(CkptData {
            kind,
            owner,
            offset,
            total,
            chunk,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn payload(kind: u8, owner: u32, offset: u64, total: u64, chunk: &[u8]) -> Vec<u8> {
        let mut v = vec![kind, 0, 0, 0];
        v.put_u32(owner);
        v.put_u64(offset);
        v.put_u64(total);
        v.extend_from_slice(chunk);
        v
    }

    #[test]
    fn round_trip_each_kind() {
        let chunk = [1u8, 2, 3];
        let values = [
            CkptData {
                kind: CkptDataKind::Push,
                owner: 5,
                offset: 10,
                total: 13,
                chunk: &chunk,
            },
            CkptData {
                kind: CkptDataKind::Reply,
                owner: 5,
                offset: 0,
                total: 0,
                chunk: &[],
            },
            CkptData::request(2),
            CkptData::no_valid_copy(3),
            CkptData::nothing_needed(4),
        ];
        for v in values {
            let bytes = v.to_vec();
            assert_eq!(bytes.len(), CKPT_DATA_FIXED_LEN + v.chunk.len());
            assert_eq!(CkptData::decode(&bytes), Ok(v.clone()));
        }
        assert_eq!(
            CkptData::request(7).to_vec(),
            payload(1, 7, 0, 0, &[]),
            "layout"
        );
    }

    #[test]
    fn every_proper_prefix_of_fixed_part_fails() {
        let bytes = CkptData::request(9).to_vec();
        for n in 0..bytes.len() {
            assert!(
                matches!(
                    CkptData::decode(&bytes[..n]),
                    Err(DecodeError::Truncated { .. })
                ),
                "prefix {n}"
            );
        }
    }

    #[test]
    fn chunk_limit() {
        let big = vec![0u8; MAX_CKPT_CHUNK + 1];
        let ok = payload(0, 1, 0, MAX_CKPT_CHUNK as u64, &big[..MAX_CKPT_CHUNK]);
        assert_eq!(
            CkptData::decode(&ok).map(|d| d.chunk.len()),
            Ok(MAX_CKPT_CHUNK)
        );
        assert_eq!(MAX_CKPT_CHUNK, 1_048_576);
        let bad = payload(0, 1, 0, u64::MAX, &big);
        assert_eq!(
            CkptData::decode(&bad),
            Err(DecodeError::OutOfRange {
                field: "chunk length",
                min: 0,
                max: 1_048_576,
                got: 1_048_577
            })
        );
    }

    #[test]
    fn unknown_kind_rejected() {
        assert_eq!(
            CkptData::decode(&payload(5, 0, 0, 0, &[])),
            Err(DecodeError::OutOfRange {
                field: "kind",
                min: 0,
                max: 4,
                got: 5
            })
        );
    }

    #[test]
    fn reserved_nonzero_rejected() {
        for i in 1..4 {
            let mut bytes = CkptData::request(1).to_vec();
            bytes[i] = 0x80;
            assert_eq!(
                CkptData::decode(&bytes),
                Err(DecodeError::NotZero {
                    field: "reserved",
                    got: 0x80
                })
            );
        }
    }

    #[test]
    fn signal_kinds_carry_nothing() {
        for kind in [1u8, 3, 4] {
            assert_eq!(
                CkptData::decode(&payload(kind, 0, 1, 0, &[])),
                Err(DecodeError::NotZero {
                    field: "offset",
                    got: 1
                })
            );
            assert_eq!(
                CkptData::decode(&payload(kind, 0, 0, 2, &[])),
                Err(DecodeError::NotZero {
                    field: "total",
                    got: 2
                })
            );
            assert_eq!(
                CkptData::decode(&payload(kind, 0, 0, 0, &[7])),
                Err(DecodeError::NotZero {
                    field: "chunk length",
                    got: 1
                })
            );
        }
    }

    #[test]
    fn chunk_past_total_rejected() {
        for kind in [0u8, 2] {
            assert!(CkptData::decode(&payload(kind, 0, 2, 4, &[1, 2])).is_ok());
            assert_eq!(
                CkptData::decode(&payload(kind, 0, 3, 4, &[1, 2])),
                Err(DecodeError::OutOfRange {
                    field: "offset + chunk length",
                    min: 0,
                    max: 4,
                    got: 5
                })
            );
            assert_eq!(
                CkptData::decode(&payload(kind, 0, u64::MAX, u64::MAX, &[1])),
                Err(DecodeError::OutOfRange {
                    field: "offset + chunk length",
                    min: 0,
                    max: u64::MAX,
                    got: u64::MAX
                })
            );
        }
    }

    fn arb_data() -> impl Strategy<Value = (u8, u32, u64, u64, Vec<u8>)> {
        (
            0u8..5,
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(kind, owner, a, b, chunk)| {
                if CkptDataKind::from_code(kind).is_some_and(CkptDataKind::carries_chunks) {
                    let total = a.max(chunk.len() as u64);
                    let room = total - chunk.len() as u64;
                    let offset = if room == u64::MAX { b } else { b % (room + 1) };
                    (kind, owner, offset, total, chunk)
                } else {
                    (kind, owner, 0, 0, Vec::new())
                }
            })
    }

    proptest! {
        #[test]
        fn prop_round_trip((kind, owner, offset, total, chunk) in arb_data()) {
            let v = CkptData {
                kind: CkptDataKind::from_code(kind).unwrap(),
                owner,
                offset,
                total,
                chunk: &chunk,
            };
            let bytes = v.to_vec();
            prop_assert_eq!(CkptData::decode(&bytes), Ok(v));
        }

        #[test]
        fn prop_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            if let Ok(d) = CkptData::decode(&bytes) {
                prop_assert_eq!(d.to_vec(), bytes);
            }
        }
    }
}
