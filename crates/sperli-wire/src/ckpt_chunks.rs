//! A rank file in CKPT_DATA chunks (protocol §7.8, §9.4 step 3, §10.2
//! step 5): [`chunks`] splits a file on the sending side; on the receiving
//! side [`ChunkTracker`] checks each chunk against the transfer (sans I/O,
//! for a file streamed to disk) and [`ChunkAssembler`] does the same and
//! keeps the bytes (for a file fetched into memory).
//!
//! The rules, from protocol §7.8: "Chunks of one file come in order: the
//! offset of each chunk is the number of bytes received so far, and the
//! total never changes. The file is complete when offset + chunk length =
//! total." A chunk holds at most 1048576 bytes (protocol §1.3), and an
//! empty file is one empty chunk with total 0.

use crate::ckpt_data::{CkptData, CkptDataKind};
use crate::limits::MAX_CKPT_CHUNK;

/// Splits a whole file into the CKPT_DATA chunks that carry it (protocol
/// §7.8): chunks of [`MAX_CKPT_CHUNK`] bytes (the last one shorter), in
/// order, each with `offset` = bytes before it and `total` = the file's
/// length. An empty file is one empty chunk with total 0. `kind` should be
/// [`CkptDataKind::Push`] or [`CkptDataKind::Reply`]; `owner` is the rank
/// whose file it is.
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

/// Why a CKPT_DATA frame does not continue the file being received
/// (protocol §7.8). The frame is rejected:
/// [`FrameError::Chunk`](crate::error::FrameError::Chunk), H1610, ABORT
/// reason 5 during a checkpoint or 6 during a resume.
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
    /// A total different from the first chunk's ("the total never changes").
    #[error("total {got}, the first chunk said {expected}")]
    Total {
        /// The total of the first chunk.
        expected: u64,
        /// The frame's total.
        got: u64,
    },
    /// An offset other than the bytes received so far ("the offset of each
    /// chunk is the number of bytes received so far").
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
    /// A chunk after the file was complete ("the file is complete when
    /// offset + chunk length = total").
    #[error("chunk after the whole file ({total} bytes) was received")]
    AfterComplete {
        /// The file's total.
        total: u64,
    },
}

/// The receiving side of one transfer, sans I/O (protocol §7.8): checks
/// each chunk and counts the bytes, without keeping them (the caller
/// streams them to disk and hashes them as they come).
///
/// Created for one transfer (kind [`CkptDataKind::Push`] or
/// [`CkptDataKind::Reply`], one owner). [`ChunkTracker::accept`] checks, in
/// this order: same kind, same owner, the total of the first chunk never
/// changes, nothing after completion, offset = bytes received so far, chunk
/// at most 1 MiB, never past the total. Empty chunks before the end are
/// allowed (the text does not forbid them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkTracker {
    kind: CkptDataKind,
    owner: u32,
    total: Option<u64>,
    received: u64,
}

impl ChunkTracker {
    /// A tracker for `owner`'s file arriving as `kind` chunks.
    pub fn new(kind: CkptDataKind, owner: u32) -> Self {
        ChunkTracker {
            kind,
            owner,
            total: None,
            received: 0,
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
        self.received
    }

    /// Whether at least one chunk came and all `total` bytes are here.
    pub fn is_complete(&self) -> bool {
        self.total == Some(self.received)
    }

    /// Checks `data` against the transfer and counts its chunk. On error
    /// the tracker is unchanged.
    pub fn accept(&mut self, data: &CkptData<'_>) -> Result<(), ChunkError> {
        // "a chunk of r's finished rank file": one kind and one owner per
        // transfer (protocol §7.8, table of kinds).
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
            // "the total never changes"
            if data.total != total {
                return Err(ChunkError::Total {
                    expected: total,
                    got: data.total,
                });
            }
            // "The file is complete when offset + chunk length = total."
            if self.is_complete() {
                return Err(ChunkError::AfterComplete { total });
            }
        }
        // "the offset of each chunk is the number of bytes received so far"
        if data.offset != self.received {
            return Err(ChunkError::Offset {
                expected: self.received,
                got: data.offset,
            });
        }
        // "at most 1048576 bytes" (protocol §1.3, §7.8)
        if data.chunk.len() > MAX_CKPT_CHUNK {
            return Err(ChunkError::TooLong {
                len: data.chunk.len(),
                max: MAX_CKPT_CHUNK,
            });
        }
        // "offset + chunk length ≤ total"
        let end = self.received.saturating_add(data.chunk.len() as u64);
        if end > data.total {
            return Err(ChunkError::PastTotal {
                total: data.total,
                end,
            });
        }
        self.total = Some(data.total);
        self.received = end;
        Ok(())
    }
}

/// Joins the chunks of one incoming file in memory, sans I/O: a
/// [`ChunkTracker`] that keeps the bytes. Each [`ChunkAssembler::push`]
/// makes the tracker's checks before copying anything. Memory grows with
/// the bytes actually received, never with the announced total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkAssembler {
    tracker: ChunkTracker,
    bytes: Vec<u8>,
}

impl ChunkAssembler {
    /// An assembler for `owner`'s file arriving as `kind` chunks.
    pub fn new(kind: CkptDataKind, owner: u32) -> Self {
        ChunkAssembler {
            tracker: ChunkTracker::new(kind, owner),
            bytes: Vec::new(),
        }
    }

    /// The checks and counts so far.
    pub fn tracker(&self) -> &ChunkTracker {
        &self.tracker
    }

    /// The total announced by the first chunk, if one came.
    pub fn total(&self) -> Option<u64> {
        self.tracker.total()
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.tracker.received()
    }

    /// Whether at least one chunk came and all `total` bytes are here.
    pub fn is_complete(&self) -> bool {
        self.tracker.is_complete()
    }

    /// Checks `data` ([`ChunkTracker::accept`]) and appends its chunk. On
    /// error nothing is copied and the assembler is unchanged.
    pub fn push(&mut self, data: &CkptData<'_>) -> Result<(), ChunkError> {
        self.tracker.accept(data)?;
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
    use crate::codec::Codec;
    use crate::error::DecodeError;
    use crate::limits::MAX_CKPT_CHUNK;
    use proptest::prelude::*;

    #[test]
    fn a_cut_push_is_a_shorter_chunk_the_tracker_catches() {
        let chunk = [9u8; 5];
        let bytes = CkptData {
            kind: CkptDataKind::Push,
            owner: 1,
            offset: 0,
            total: 5,
            chunk: &chunk,
        }
        .to_vec();
        // The chunk is delimited by the frame length only: a cut chunk is a
        // shorter chunk, which leaves the file incomplete (the next offset
        // or the total no longer fit).
        for n in crate::ckpt_data::CKPT_DATA_FIXED_LEN..bytes.len() {
            let d = CkptData::decode(&bytes[..n]).unwrap();
            let mut a = ChunkAssembler::new(CkptDataKind::Push, 1);
            a.push(&d).unwrap();
            assert!(!a.is_complete());
        }
        assert!(matches!(
            CkptData::decode(&bytes[..3]),
            Err(DecodeError::Truncated { .. })
        ));
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
            let mut t = ChunkTracker::new(CkptDataKind::Reply, 1);
            for d in &c {
                assert!(d.chunk.len() <= MAX_CKPT_CHUNK && !d.chunk.is_empty());
                assert_eq!(CkptData::decode(&d.to_vec()).as_ref(), Ok(d));
                assert!(!a.is_complete());
                a.push(d).unwrap();
                t.accept(d).unwrap();
            }
            assert!(a.is_complete() && t.is_complete());
            assert_eq!(t.received(), len as u64);
            assert_eq!(a.into_bytes(), file);
        }
    }

    #[test]
    fn refusals_leave_the_state_unchanged() {
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
    fn an_oversized_chunk_is_refused() {
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
    fn the_first_chunk_starts_at_offset_zero() {
        let mut t = ChunkTracker::new(CkptDataKind::Reply, 0);
        let d = CkptData {
            kind: CkptDataKind::Reply,
            owner: 0,
            offset: 1,
            total: 2,
            chunk: &[1],
        };
        assert_eq!(
            t.accept(&d),
            Err(ChunkError::Offset {
                expected: 0,
                got: 1
            })
        );
    }

    proptest! {
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
        fn prop_tracker_and_assembler_agree_and_never_panic(
            frames in proptest::collection::vec(
                (0u8..5, 0u32..2, 0u64..8, 0u64..8, proptest::collection::vec(any::<u8>(), 0..6)),
                0..12,
            )
        ) {
            let mut a = ChunkAssembler::new(CkptDataKind::Push, 0);
            let mut t = ChunkTracker::new(CkptDataKind::Push, 0);
            for (kind, owner, offset, total, chunk) in &frames {
                let d = CkptData {
                    kind: CkptDataKind::from_code(*kind).unwrap(),
                    owner: *owner,
                    offset: *offset,
                    total: *total,
                    chunk,
                };
                prop_assert_eq!(a.push(&d), t.accept(&d));
                prop_assert_eq!(a.tracker(), &t);
                prop_assert!(t.received() <= t.total().unwrap_or(0));
            }
        }
    }
}
