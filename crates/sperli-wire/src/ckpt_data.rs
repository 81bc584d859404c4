//! CKPT_DATA (frame type 7) payload, the chunk splitter and the sans-I/O chunk
//! assembler (layouts §2, §6, §10; protocol text "CKPT_DATA (7)",
//! "Checkpoints" step 3 and "Ausfall und Wiederaufnahme").
//!
//! | off | size | field | rule |
//! |---|---|---|---|
//! | 0 | 1 | kind | 0 push, 1 request, 2 reply chunk, 3 no valid copy, 4 nothing needed |
//! | 1 | 3 | reserved | 0 |
//! | 4 | 4 | owner | the rank whose file it concerns (layouts §10) |
//! | 8 | 8 | offset | kinds 1, 3, 4: 0 |
//! | 16 | 8 | total | kinds 1, 3, 4: 0 |
//! | 24 | var | chunk | at most 1048576 bytes; none for kinds 1, 3, 4; kinds 0, 2: `offset + len <= total` |
//!
//! A file travels as kind 0 (push to the buddy) or kind 2 (reply to a
//! request) chunks in order: each chunk's offset is the number of bytes sent
//! before it, the total never changes, and an empty file is one empty chunk
//! with total 0. [`chunks`] splits a file that way; [`ChunkAssembler`] checks
//! and joins the chunks on the receiving side.

use std::fmt;

use crate::codec::{Codec, PutLe, Reader};
use crate::error::DecodeError;
use crate::limits::MAX_CKPT_CHUNK;

/// Length of the fixed part of a CKPT_DATA payload before the chunk
/// (layouts §2: `CKPT_DATA 24..=24+1048576`).
pub const CKPT_DATA_FIXED_LEN: usize = 24;

/// The CKPT_DATA kinds (layouts §6; protocol text "CKPT_DATA (7)").
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
    /// carry no chunk and have offset = total = 0 (layouts §6).
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

/// The CKPT_DATA payload (layouts §6), borrowing its chunk from the input.
///
/// Decoding enforces every rule of the payload alone: kind 0..=4, reserved
/// bytes 0, chunk at most 1 MiB, kinds 1/3/4 with offset = total = 0 and no
/// chunk, kinds 0/2 with `offset + chunk.len() <= total`. Encoding writes the
/// fields as they are; build values with [`chunks`] or the constructors to
/// stay within the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CkptData<'a> {
    /// What this frame is.
    pub kind: CkptDataKind,
    /// The rank whose file it concerns (layouts §10): for kinds 1 and 3 the
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
    /// A kind 1 request for `owner`'s file (layouts §6, §10).
    pub fn request(owner: u32) -> Self {
        Self::signal(CkptDataKind::Request, owner)
    }

    /// A kind 3 "no valid copy of `owner`'s file" (layouts §6, §10).
    pub fn no_valid_copy(owner: u32) -> Self {
        Self::signal(CkptDataKind::NoValidCopy, owner)
    }

    /// A kind 4 "rank `owner` needs nothing" (layouts §6, §10).
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

    /// Writes the 24-byte fixed part and the chunk (layouts §6).
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.kind.code());
        out.extend_from_slice(&[0; 3]);
        out.put_u32(self.owner);
        out.put_u64(self.offset);
        out.put_u64(self.total);
        out.extend_from_slice(self.chunk);
    }

    /// Reads a whole CKPT_DATA payload: the chunk is everything after the
    /// fixed part (layouts §6). Errors: kind above 4 is `OutOfRange` on
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

/// Splits a whole file into the CKPT_DATA chunks that carry it (layouts §6;
/// protocol text "CKPT_DATA (7)"): chunks of [`MAX_CKPT_CHUNK`] bytes (the
/// last one shorter), in order, each with `offset` = bytes before it and
/// `total` = the file's length. An empty file is one empty chunk with
/// total 0. `kind` should be [`CkptDataKind::Push`] or
/// [`CkptDataKind::Reply`]; `owner` is the rank whose file it is.
pub fn chunks(
    kind: CkptDataKind,
    owner: u32,
    file: &[u8],
) -> impl ExactSizeIterator<Item = CkptData<'_>> + '_ {
    let total = file.len() as u64;
    let count = file.len().div_ceil(MAX_CKPT_CHUNK).max(1);
    (0..count).map(move |i| {
        let start = i.saturating_mul(MAX_CKPT_CHUNK).min(file.len());
        let end = start.saturating_add(MAX_CKPT_CHUNK).min(file.len());
        CkptData {
            kind,
            owner,
            offset: start as u64,
            total,
            chunk: file.get(start..end).unwrap_or_default(),
        }
    })
}

/// Why a CKPT_DATA frame does not continue the file being assembled
/// (protocol text "CKPT_DATA (7)": chunks in order, offset = bytes received,
/// total never changes, at most 1 MiB). The frame layer reports it as a
/// checkpoint or resume frame that does not fit its call (layouts §10:
/// H1610 with ABORT reason 5 or 6); [`From`] gives the [`DecodeError`] for
/// [`crate::error::FrameError::Payload`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// A frame of another kind than the transfer's (push or reply).
    #[error("kind {got}, the transfer is a {expected}")]
    Kind {
        /// The transfer's kind.
        expected: CkptDataKind,
        /// The frame's kind.
        got: CkptDataKind,
    },
    /// Another owner than the transfer's.
    #[error("owner {got}, the transfer is rank {expected}'s file")]
    Owner {
        /// The transfer's owner.
        expected: u32,
        /// The frame's owner.
        got: u32,
    },
    /// A total different from the first chunk's.
    #[error("total {got}, the first chunk said {expected}")]
    Total {
        /// The total of the first chunk.
        expected: u64,
        /// The frame's total.
        got: u64,
    },
    /// An offset other than the bytes received so far.
    #[error("offset {got}, {expected} bytes received so far")]
    Offset {
        /// The bytes received so far.
        expected: u64,
        /// The frame's offset.
        got: u64,
    },
    /// A chunk longer than 1 MiB.
    #[error("chunk of {len} bytes, at most {max}")]
    TooLong {
        /// The chunk's length.
        len: usize,
        /// [`MAX_CKPT_CHUNK`].
        max: usize,
    },
    /// A chunk that would take the file past its total.
    #[error("chunk ends at {end}, beyond the total {total}")]
    PastTotal {
        /// The file's total.
        total: u64,
        /// Where the chunk would end.
        end: u64,
    },
    /// A chunk after the file was complete.
    #[error("chunk after the whole file ({total} bytes) was received")]
    AfterComplete {
        /// The file's total.
        total: u64,
    },
}

impl From<ChunkError> for DecodeError {
    /// The nearest [`DecodeError`] for a rejected chunk (`Mismatch` or
    /// `OutOfRange` naming the CKPT_DATA field).
    fn from(e: ChunkError) -> Self {
        match e {
            ChunkError::Kind { expected, got } => DecodeError::Mismatch {
                field: "kind",
                expected: u64::from(expected.code()),
                got: u64::from(got.code()),
            },
            ChunkError::Owner { expected, got } => DecodeError::Mismatch {
                field: "owner",
                expected: u64::from(expected),
                got: u64::from(got),
            },
            ChunkError::Total { expected, got } => DecodeError::Mismatch {
                field: "total",
                expected,
                got,
            },
            ChunkError::Offset { expected, got } => DecodeError::Mismatch {
                field: "offset",
                expected,
                got,
            },
            ChunkError::TooLong { len, max } => DecodeError::OutOfRange {
                field: "chunk length",
                min: 0,
                max: max as u64,
                got: len as u64,
            },
            ChunkError::PastTotal { total, end } => DecodeError::OutOfRange {
                field: "offset + chunk length",
                min: 0,
                max: total,
                got: end,
            },
            ChunkError::AfterComplete { .. } => DecodeError::Mismatch {
                field: "CKPT_DATA frames after the last chunk",
                expected: 0,
                got: 1,
            },
        }
    }
}

/// Joins the chunks of one incoming file, sans I/O (protocol text
/// "CKPT_DATA (7)"; layouts §6).
///
/// Created for one transfer (kind [`CkptDataKind::Push`] or
/// [`CkptDataKind::Reply`], one owner). Each [`ChunkAssembler::push`] checks
/// the frame before copying anything: same kind, same owner, the total of the
/// first chunk never changes, offset = bytes received so far, chunk at most
/// 1 MiB, never past the total, nothing after completion. Memory grows with
/// the bytes actually received, never with the announced total. Empty chunks
/// before the end are allowed (the text does not forbid them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkAssembler {
    kind: CkptDataKind,
    owner: u32,
    total: Option<u64>,
    bytes: Vec<u8>,
}

impl ChunkAssembler {
    /// An assembler for `owner`'s file arriving as `kind` chunks.
    pub fn new(kind: CkptDataKind, owner: u32) -> Self {
        ChunkAssembler {
            kind,
            owner,
            total: None,
            bytes: Vec::new(),
        }
    }

    /// The transfer's kind.
    pub fn kind(&self) -> CkptDataKind {
        self.kind
    }

    /// The rank whose file this is.
    pub fn owner(&self) -> u32 {
        self.owner
    }

    /// The total announced by the first chunk, if one came.
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Whether at least one chunk came and all `total` bytes are here.
    pub fn is_complete(&self) -> bool {
        self.total == Some(self.received())
    }

    /// Checks `data` against the transfer and appends its chunk. On error
    /// nothing is copied and the assembler is unchanged.
    pub fn push(&mut self, data: &CkptData<'_>) -> Result<(), ChunkError> {
        if data.kind != self.kind {
            return Err(ChunkError::Kind {
                expected: self.kind,
                got: data.kind,
            });
        }
        if data.owner != self.owner {
            return Err(ChunkError::Owner {
                expected: self.owner,
                got: data.owner,
            });
        }
        if let Some(total) = self.total {
            if data.total != total {
                return Err(ChunkError::Total {
                    expected: total,
                    got: data.total,
                });
            }
            if self.is_complete() {
                return Err(ChunkError::AfterComplete { total });
            }
        }
        let received = self.received();
        if data.offset != received {
            return Err(ChunkError::Offset {
                expected: received,
                got: data.offset,
            });
        }
        if data.chunk.len() > MAX_CKPT_CHUNK {
            return Err(ChunkError::TooLong {
                len: data.chunk.len(),
                max: MAX_CKPT_CHUNK,
            });
        }
        let end = received.saturating_add(data.chunk.len() as u64);
        if end > data.total {
            return Err(ChunkError::PastTotal {
                total: data.total,
                end,
            });
        }
        self.total = Some(data.total);
        self.bytes.extend_from_slice(data.chunk);
        Ok(())
    }

    /// The bytes received so far (the whole file once
    /// [`ChunkAssembler::is_complete`]).
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
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
    fn every_proper_prefix_of_push_fails() {
        let chunk = [9u8; 5];
        let bytes = CkptData {
            kind: CkptDataKind::Push,
            owner: 1,
            offset: 0,
            total: 5,
            chunk: &chunk,
        }
        .to_vec();
        for n in 0..CKPT_DATA_FIXED_LEN {
            assert!(
                matches!(
                    CkptData::decode(&bytes[..n]),
                    Err(DecodeError::Truncated { .. })
                ),
                "prefix {n}"
            );
        }
        // The chunk is delimited by the frame length only: a cut chunk is a
        // shorter chunk, which the assembler catches (the next offset or the
        // total no longer fit).
        for n in CKPT_DATA_FIXED_LEN..bytes.len() {
            let d = CkptData::decode(&bytes[..n]).unwrap();
            assert_eq!(d.chunk.len(), n - CKPT_DATA_FIXED_LEN);
            let mut a = ChunkAssembler::new(CkptDataKind::Push, 1);
            a.push(&d).unwrap();
            assert!(!a.is_complete());
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

    #[test]
    fn chunks_of_empty_file() {
        let c: Vec<_> = chunks(CkptDataKind::Push, 3, &[]).collect();
        assert_eq!(
            c,
            vec![CkptData {
                kind: CkptDataKind::Push,
                owner: 3,
                offset: 0,
                total: 0,
                chunk: &[]
            }]
        );
        let mut a = ChunkAssembler::new(CkptDataKind::Push, 3);
        assert!(!a.is_complete());
        a.push(&c[0]).unwrap();
        assert!(a.is_complete());
        assert_eq!(a.into_bytes(), Vec::<u8>::new());
    }

    #[test]
    fn chunks_at_boundaries() {
        for len in [
            1,
            MAX_CKPT_CHUNK - 1,
            MAX_CKPT_CHUNK,
            MAX_CKPT_CHUNK + 1,
            3 * MAX_CKPT_CHUNK,
        ] {
            let file: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let c: Vec<_> = chunks(CkptDataKind::Reply, 1, &file).collect();
            assert_eq!(c.len(), len.div_ceil(MAX_CKPT_CHUNK));
            let mut a = ChunkAssembler::new(CkptDataKind::Reply, 1);
            for d in &c {
                assert!(d.chunk.len() <= MAX_CKPT_CHUNK && !d.chunk.is_empty());
                assert_eq!(CkptData::decode(&d.to_vec()).as_ref(), Ok(d));
                assert!(!a.is_complete());
                a.push(d).unwrap();
            }
            assert!(a.is_complete());
            assert_eq!(a.into_bytes(), file);
        }
    }

    #[test]
    fn assembler_refusals_leave_state_unchanged() {
        let file = [1u8, 2, 3, 4, 5, 6];
        let first = CkptData {
            kind: CkptDataKind::Push,
            owner: 2,
            offset: 0,
            total: 6,
            chunk: &file[..3],
        };
        let mut a = ChunkAssembler::new(CkptDataKind::Push, 2);
        a.push(&first).unwrap();
        let before = a.clone();
        let next = CkptData {
            offset: 3,
            chunk: &file[3..],
            ..first.clone()
        };
        let cases = [
            (
                CkptData {
                    kind: CkptDataKind::Reply,
                    ..next.clone()
                },
                ChunkError::Kind {
                    expected: CkptDataKind::Push,
                    got: CkptDataKind::Reply,
                },
            ),
            (
                CkptData {
                    owner: 9,
                    ..next.clone()
                },
                ChunkError::Owner {
                    expected: 2,
                    got: 9,
                },
            ),
            (
                CkptData {
                    total: 7,
                    ..next.clone()
                },
                ChunkError::Total {
                    expected: 6,
                    got: 7,
                },
            ),
            (
                CkptData {
                    offset: 2,
                    ..next.clone()
                },
                ChunkError::Offset {
                    expected: 3,
                    got: 2,
                },
            ),
            (
                CkptData {
                    chunk: &[0; 4],
                    ..next.clone()
                },
                ChunkError::PastTotal { total: 6, end: 7 },
            ),
        ];
        for (d, e) in cases {
            assert_eq!(a.push(&d), Err(e.clone()));
            assert_eq!(a, before);
            let _: DecodeError = e.into();
        }
        a.push(&next).unwrap();
        assert!(a.is_complete());
        let done = a.clone();
        let extra = CkptData {
            offset: 6,
            chunk: &[],
            ..first.clone()
        };
        assert_eq!(a.push(&extra), Err(ChunkError::AfterComplete { total: 6 }));
        assert_eq!(a, done);
        assert_eq!(a.into_bytes(), file);
    }

    #[test]
    fn assembler_refuses_oversized_chunk() {
        let big = vec![0u8; MAX_CKPT_CHUNK + 1];
        let mut a = ChunkAssembler::new(CkptDataKind::Push, 0);
        let d = CkptData {
            kind: CkptDataKind::Push,
            owner: 0,
            offset: 0,
            total: u64::MAX,
            chunk: &big,
        };
        assert_eq!(
            a.push(&d),
            Err(ChunkError::TooLong {
                len: MAX_CKPT_CHUNK + 1,
                max: MAX_CKPT_CHUNK
            })
        );
        assert_eq!(a.received(), 0);
        assert_eq!(a.total(), None);
        let ok = CkptData {
            chunk: &big[..MAX_CKPT_CHUNK],
            ..d
        };
        assert_eq!(a.push(&ok), Ok(()));
        assert_eq!(a.received(), MAX_CKPT_CHUNK as u64);
    }

    #[test]
    fn first_chunk_offset_must_be_zero() {
        let mut a = ChunkAssembler::new(CkptDataKind::Reply, 0);
        let d = CkptData {
            kind: CkptDataKind::Reply,
            owner: 0,
            offset: 1,
            total: 2,
            chunk: &[1],
        };
        assert_eq!(
            a.push(&d),
            Err(ChunkError::Offset {
                expected: 0,
                got: 1
            })
        );
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

        #[test]
        fn prop_chunks_reassemble(file in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let mut a = ChunkAssembler::new(CkptDataKind::Push, 4);
            for d in chunks(CkptDataKind::Push, 4, &file) {
                a.push(&d).unwrap();
            }
            prop_assert!(a.is_complete());
            prop_assert_eq!(a.into_bytes(), file);
        }

        #[test]
        fn prop_assembler_never_panics(
            frames in proptest::collection::vec(
                (0u8..5, 0u32..2, 0u64..8, 0u64..8, proptest::collection::vec(any::<u8>(), 0..6)),
                0..12,
            )
        ) {
            let mut a = ChunkAssembler::new(CkptDataKind::Push, 0);
            for (kind, owner, offset, total, chunk) in &frames {
                let d = CkptData {
                    kind: CkptDataKind::from_code(*kind).unwrap(),
                    owner: *owner,
                    offset: *offset,
                    total: *total,
                    chunk,
                };
                let _ = a.push(&d);
                prop_assert!(a.received() <= a.total().unwrap_or(0));
            }
        }
    }
}
