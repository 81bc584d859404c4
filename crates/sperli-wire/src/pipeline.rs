//! The bodies of pipelined COLLECTIVE frames (HELLO feature bit 1,
//! protocol §14.2) and the receiver's chunk-stream rules (protocol §14.4).
//!
//! A COLLECTIVE payload is the 16-byte collective header
//! ([`CollectiveHeader`]) and then, by phase:
//!
//! | phase | body |
//! |---|---|
//! | 0, 1 (star, v1) | data, at most 16777200 bytes |
//! | 2 OPEN | exactly 16 bytes: `total` u64, `fanout` u32, `reserved` u32 |
//! | 3 PARTIAL, 4 FINAL | a 16-byte chunk header (`offset` u64, `total` u64), then the chunk's data |
//!
//! [`CollectivePayload::decode`] applies every rule a frame can be judged
//! by alone (H1610); [`ChunkStream`] the rules that need the frames before
//! it (H1617). The collective layer calls both when it takes a frame; a
//! transport may call the first when a frame arrives.

use std::ops::Range;

use crate::codec::{PutLe, Reader};
use crate::collective::{CollectiveHeader, Operation, Phase};
use crate::element::ElementType;
use crate::error::DecodeError;
use crate::limits::{COLLECTIVE_HEADER_LEN, FEATURE_ELEMENT_TYPES, MAX_PAYLOAD};

/// Length of an OPEN body.
pub const OPEN_LEN: usize = 16;
/// Length of the chunk header of a PARTIAL or FINAL frame.
pub const CHUNK_HEADER_LEN: usize = 16;
/// The most data one chunk carries: the largest payload less the collective
/// header and the chunk header (16777184 bytes).
pub const MAX_CHUNK_DATA: usize = MAX_PAYLOAD as usize - COLLECTIVE_HEADER_LEN - CHUNK_HEADER_LEN;
/// Every chunk that does not end its stream carries a multiple of this many
/// bytes, so a chunk never splits an element of any width (protocol §14.2).
pub const CHUNK_ALIGN: usize = 8;

/// T of protocol §14.5: a reduce-type call or an allgather of at least this
/// many bytes per rank (allgather: in all) runs pipelined in a job with
/// feature bit 1.
pub const PIPELINE_MIN_BYTES: u64 = 262_144;

/// Protocol §14.5: whether a call of `op` with `len` bytes at `size` ranks
/// runs pipelined in a job with feature bit 1 (`len` is the rank's
/// contribution for reduce, allreduce and reduce_scatter, the total `size ·
/// block` for allgather, the root's data for bcast). Every rank of a
/// reduce-type call and of an allgather must apply exactly this rule; for
/// bcast it is the root's choice (its OPEN announces it), and this is the
/// rule this implementation's roots use. Barrier, gather and scatter never
/// run pipelined.
///
/// ```
/// use sperli_wire::collective::Operation;
/// use sperli_wire::pipeline::runs_pipelined;
/// assert!(!runs_pipelined(Operation::Allreduce, 4, 65_536)); // small: the star
/// assert!(runs_pipelined(Operation::Allreduce, 2, 16 << 20));
/// assert!(!runs_pipelined(Operation::Reduce, 2, 8 << 20)); // the star either way
/// assert!(runs_pipelined(Operation::Reduce, 2, 64 << 20)); // more than one frame
/// assert!(!runs_pipelined(Operation::Gather, 8, 64 << 20));
/// ```
pub fn runs_pipelined(op: Operation, size: u32, len: u64) -> bool {
    let big = len >= PIPELINE_MIN_BYTES;
    let beyond_a_frame = len > crate::limits::MAX_COLLECTIVE_DATA as u64;
    match op {
        Operation::Allreduce | Operation::ReduceScatter | Operation::Allgather => size >= 2 && big,
        Operation::Reduce | Operation::Bcast => (size >= 3 && big) || (size >= 2 && beyond_a_frame),
        Operation::Barrier | Operation::Gather | Operation::Scatter => false,
    }
}

/// The body of an OPEN frame (phase 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    /// The call's length in bytes: the sender's own contribution or block
    /// (reduce-type calls, allgather) or the broadcast data (bcast); >= 1.
    pub total: u64,
    /// bcast: the fanout d of the relay tree (1 = chain), 1..=size-1;
    /// every other operation: 1.
    pub fanout: u32,
}

/// The chunk header of a PARTIAL or FINAL frame (phases 3 and 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Where the chunk's data starts in its stream.
    pub offset: u64,
    /// The stream's length in bytes.
    pub total: u64,
}

/// What follows the collective header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// A v1 star frame's data (phases 0 and 1).
    Star(&'a [u8]),
    /// An OPEN frame (phase 2).
    Open(Open),
    /// A PARTIAL or FINAL chunk (phases 3 and 4) and its data.
    Chunk(ChunkHeader, &'a [u8]),
}

/// A decoded COLLECTIVE payload, v1 or pipelined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectivePayload<'a> {
    /// The collective header.
    pub header: CollectiveHeader,
    /// The rest, by phase.
    pub body: Body<'a>,
}

impl<'a> CollectivePayload<'a> {
    /// Decodes a whole COLLECTIVE payload in a job whose negotiated HELLO
    /// features are `features`. Every failure is a rejected frame (H1610,
    /// ABORT reason 7): without bit 1 the v1 rules (a pipelined phase or
    /// operation does not decode); with it the rules of protocol §14.2:
    ///
    /// - OPEN: exactly 16 bytes; `total` >= 1; `fanout` >= 1, and 1 unless
    ///   the operation is bcast; `reserved` 0;
    /// - a chunk: its 16-byte header, at least 1 data byte, `offset + len
    ///   <= total` (a chunk past the end), and a multiple of 8 bytes unless
    ///   it ends the stream (`offset + len == total`).
    ///
    /// ```
    /// use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
    /// use sperli_wire::limits::{FEATURE_PIPELINED, FEATURE_V1_CORE};
    /// use sperli_wire::pipeline::{encode_chunk, Body, ChunkHeader, CollectivePayload};
    /// let h = CollectiveHeader { operation: Operation::Bcast, element_type: 0, reduction: 0,
    ///                            phase: Phase::Final, root: 0, sequence: 1 };
    /// let mut p = Vec::new();
    /// encode_chunk(&h, ChunkHeader { offset: 0, total: 3 }, &[7, 8, 9], &mut p);
    /// let both = FEATURE_V1_CORE | FEATURE_PIPELINED;
    /// let c = CollectivePayload::decode(&p, both).unwrap();
    /// assert_eq!(c.body, Body::Chunk(ChunkHeader { offset: 0, total: 3 }, &[7, 8, 9]));
    /// // The same frame in a job without bit 1 is rejected.
    /// assert!(CollectivePayload::decode(&p, FEATURE_V1_CORE).is_err());
    /// ```
    pub fn decode(bytes: &'a [u8], features: u64) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let header = CollectiveHeader::read_with(&mut r, features)?;
        let body = match header.phase {
            Phase::ToRoot | Phase::FromRoot => Body::Star(r.rest()),
            Phase::Open => Body::Open(read_open(&mut r, header.operation)?),
            Phase::Partial | Phase::Final => {
                let chunk = ChunkHeader {
                    offset: r.u64("chunk offset")?,
                    total: r.u64("chunk total")?,
                };
                let data = r.rest();
                // Protocol §17.3: with bit 4 a chunk that does not end
                // its stream is a multiple of lcm(8, width).
                let align = if features & FEATURE_ELEMENT_TYPES != 0 {
                    ElementType::from_code(header.element_type)
                        .map_or(CHUNK_ALIGN, ElementType::chunk_align)
                } else {
                    CHUNK_ALIGN
                };
                check_chunk(&chunk, data.len(), align)?;
                Body::Chunk(chunk, data)
            }
        };
        r.expect_end("COLLECTIVE payload")?;
        Ok(Self { header, body })
    }
}

fn read_open(r: &mut Reader<'_>, op: Operation) -> Result<Open, DecodeError> {
    let total = r.u64("open total")?;
    let fanout = r.u32("open fanout")?;
    r.zeros(4, "open reserved")?;
    r.expect_end("OPEN body")?;
    if total == 0 {
        return Err(DecodeError::OutOfRange {
            field: "open total",
            min: 1,
            max: u64::MAX,
            got: 0,
        });
    }
    let max_fanout = if op == Operation::Bcast {
        u64::from(crate::limits::MAX_SIZE - 1)
    } else {
        1
    };
    if fanout == 0 || u64::from(fanout) > max_fanout {
        return Err(DecodeError::OutOfRange {
            field: "open fanout",
            min: 1,
            max: max_fanout,
            got: u64::from(fanout),
        });
    }
    Ok(Open { total, fanout })
}

/// The rules a chunk is judged by alone (protocol §14.2).
fn check_chunk(c: &ChunkHeader, len: usize, align: usize) -> Result<(), DecodeError> {
    if len == 0 {
        return Err(DecodeError::OutOfRange {
            field: "chunk data length",
            min: 1,
            max: MAX_CHUNK_DATA as u64,
            got: 0,
        });
    }
    let end = c.offset.checked_add(len as u64);
    match end {
        Some(end) if end <= c.total => {
            if end < c.total && len % align != 0 {
                return Err(DecodeError::Mismatch {
                    field: if align == CHUNK_ALIGN {
                        "chunk data length mod 8"
                    } else {
                        "chunk data length mod lcm(8, width)"
                    },
                    expected: 0,
                    got: (len % align) as u64,
                });
            }
            Ok(())
        }
        // A chunk past the end of its stream.
        _ => Err(DecodeError::OutOfRange {
            field: "chunk end",
            min: 1,
            max: c.total,
            got: end.unwrap_or(u64::MAX),
        }),
    }
}

/// Appends an OPEN payload (collective header with phase 2, then the body).
pub fn encode_open(header: &CollectiveHeader, open: Open, out: &mut Vec<u8>) {
    debug_assert_eq!(header.phase, Phase::Open);
    out.extend_from_slice(&header.to_bytes());
    out.put_u64(open.total);
    out.put_u32(open.fanout);
    out.put_u32(0);
}

/// Appends the 32 bytes that start a chunk payload: the collective header
/// (phase 3 or 4) and the chunk header. The caller appends the data.
pub fn encode_chunk_head(header: &CollectiveHeader, chunk: ChunkHeader, out: &mut Vec<u8>) {
    debug_assert!(matches!(header.phase, Phase::Partial | Phase::Final));
    out.extend_from_slice(&header.to_bytes());
    out.put_u64(chunk.offset);
    out.put_u64(chunk.total);
}

/// Appends a whole chunk payload: [`encode_chunk_head`], then `data`.
pub fn encode_chunk(header: &CollectiveHeader, chunk: ChunkHeader, data: &[u8], out: &mut Vec<u8>) {
    encode_chunk_head(header, chunk, out);
    out.extend_from_slice(data);
}

/// How a well-formed chunk fails to continue its stream (H1617, protocol
/// §14.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamError {
    /// `total` differs from the stream's length.
    Total {
        /// The stream's length.
        expected: u64,
        /// The chunk's `total`.
        got: u64,
    },
    /// The chunk does not start where the previous one ended (out of order,
    /// repeated, or after the stream is complete).
    Offset {
        /// Where the next chunk must start.
        expected: u64,
        /// The chunk's `offset`.
        got: u64,
    },
    /// The chunk's data length breaks the chunk-length rule: every chunk
    /// but the last carries exactly the first chunk's length.
    Length {
        /// The length the chunk must have.
        expected: u64,
        /// The length it has.
        got: u64,
    },
}

impl StreamError {
    /// The name of the field that failed (`total`, `offset`, `length`), as
    /// in the vectors' verdicts.
    pub fn field(&self) -> &'static str {
        match self {
            StreamError::Total { .. } => "total",
            StreamError::Offset { .. } => "offset",
            StreamError::Length { .. } => "length",
        }
    }

    /// (expected, got).
    pub fn values(&self) -> (u64, u64) {
        match *self {
            StreamError::Total { expected, got }
            | StreamError::Offset { expected, got }
            | StreamError::Length { expected, got } => (expected, got),
        }
    }
}

/// The receiver's view of one chunk stream (protocol §14.4): the chunks of
/// one phase of one call from one sender (for allgather and reduce_scatter:
/// of one block). Chunks arrive in order without gaps; the first one fixes
/// the stream's chunk length L, and every later chunk carries
/// `min(L, total - offset)` bytes.
///
/// ```
/// use sperli_wire::pipeline::{ChunkHeader, ChunkStream, StreamError};
/// let mut s = ChunkStream::new(20);
/// assert_eq!(s.take(&ChunkHeader { offset: 0, total: 20 }, 8), Ok(0..8));
/// assert_eq!(s.take(&ChunkHeader { offset: 16, total: 20 }, 4),
///            Err(StreamError::Offset { expected: 8, got: 16 }));
/// assert_eq!(s.take(&ChunkHeader { offset: 8, total: 20 }, 8), Ok(8..16));
/// assert_eq!(s.take(&ChunkHeader { offset: 16, total: 20 }, 4), Ok(16..20));
/// assert!(s.is_complete());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkStream {
    total: u64,
    next: u64,
    chunk_len: Option<u64>,
}

impl ChunkStream {
    /// A stream of `total` bytes (the call's length) with no chunk taken.
    pub fn new(total: u64) -> Self {
        Self {
            total,
            next: 0,
            chunk_len: None,
        }
    }

    /// The stream's length.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes taken so far (where the next chunk must start).
    pub fn taken(&self) -> u64 {
        self.next
    }

    /// Whether every byte of the stream has arrived.
    pub fn is_complete(&self) -> bool {
        self.next == self.total
    }

    /// Judges the next chunk (already decoded: [`CollectivePayload::decode`])
    /// of `len` data bytes, in the order total, offset, length; returns the
    /// byte range it fills.
    pub fn take(&mut self, c: &ChunkHeader, len: usize) -> Result<Range<u64>, StreamError> {
        if c.total != self.total {
            return Err(StreamError::Total {
                expected: self.total,
                got: c.total,
            });
        }
        if c.offset != self.next {
            return Err(StreamError::Offset {
                expected: self.next,
                got: c.offset,
            });
        }
        let len = len as u64;
        let left = self.total - self.next;
        if let Some(l) = self.chunk_len {
            let want = l.min(left);
            if len != want {
                return Err(StreamError::Length {
                    expected: want,
                    got: len,
                });
            }
        } else {
            self.chunk_len = Some(len);
        }
        let start = self.next;
        self.next += len.min(left);
        Ok(start..self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{FEATURE_PIPELINED, FEATURE_V1_CORE};
    use proptest::prelude::*;

    const BOTH: u64 = FEATURE_V1_CORE | FEATURE_PIPELINED;

    fn hdr(op: Operation, phase: Phase) -> CollectiveHeader {
        let (et, red) = if op.reduces() { (6, 1) } else { (0, 0) };
        CollectiveHeader {
            operation: op,
            element_type: et,
            reduction: red,
            phase,
            root: 0,
            sequence: 9,
        }
    }

    fn open(op: Operation, total: u64, fanout: u32) -> Vec<u8> {
        let mut p = Vec::new();
        encode_open(&hdr(op, Phase::Open), Open { total, fanout }, &mut p);
        p
    }

    fn chunk(phase: Phase, offset: u64, total: u64, len: usize) -> Vec<u8> {
        let mut p = Vec::new();
        let h = hdr(Operation::Allreduce, phase);
        encode_chunk(&h, ChunkHeader { offset, total }, &vec![5; len], &mut p);
        p
    }

    fn field(p: &[u8]) -> &'static str {
        match CollectivePayload::decode(p, BOTH) {
            Err(
                DecodeError::OutOfRange { field, .. }
                | DecodeError::Mismatch { field, .. }
                | DecodeError::NotZero { field, .. }
                | DecodeError::Truncated { field, .. },
            ) => field,
            Err(DecodeError::TrailingBytes { item, .. }) => item,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bit_4_chunks_keep_whole_elements_of_every_width() {
        use crate::limits::{FEATURE_ELEMENT_TYPES, FEATURE_V1_CORE};
        let f = FEATURE_V1_CORE | FEATURE_PIPELINED | FEATURE_ELEMENT_TYPES;
        let h = CollectiveHeader {
            operation: Operation::Allreduce,
            element_type: 14, // f64_i32, width 12: chunks of 24k bytes
            reduction: 11,
            phase: Phase::Partial,
            root: 0,
            sequence: 1,
        };
        let chunk = |len: usize, total: u64| {
            let mut p = Vec::new();
            encode_chunk(&h, ChunkHeader { offset: 0, total }, &vec![0; len], &mut p);
            p
        };
        assert!(CollectivePayload::decode(&chunk(24, 48), f).is_ok());
        assert!(CollectivePayload::decode(&chunk(16, 48), f).is_err());
        assert!(CollectivePayload::decode(&chunk(36, 36), f).is_ok()); // ends its stream
        assert!(
            CollectivePayload::decode(&chunk(24, 48), FEATURE_V1_CORE | FEATURE_PIPELINED).is_err()
        );
    }

    #[test]
    fn open_rules() {
        let ok = open(Operation::Bcast, 100, 2);
        assert_eq!(
            CollectivePayload::decode(&ok, BOTH).unwrap().body,
            Body::Open(Open {
                total: 100,
                fanout: 2
            })
        );
        for n in 0..ok.len() {
            assert!(CollectivePayload::decode(&ok[..n], BOTH).is_err(), "{n}");
        }
        let mut long = ok.clone();
        long.push(0);
        assert_eq!(field(&long), "OPEN body");
        assert_eq!(field(&open(Operation::Bcast, 0, 1)), "open total");
        assert_eq!(field(&open(Operation::Bcast, 1, 0)), "open fanout");
        assert_eq!(field(&open(Operation::Bcast, 1, 4096)), "open fanout");
        assert!(CollectivePayload::decode(&open(Operation::Bcast, 1, 4095), BOTH).is_ok());
        assert_eq!(field(&open(Operation::Allreduce, 8, 2)), "open fanout");
        let mut res = open(Operation::Allreduce, 8, 1);
        res[31] = 1;
        assert_eq!(field(&res), "open reserved");
        assert!(CollectivePayload::decode(&ok, FEATURE_V1_CORE).is_err());
    }

    #[test]
    fn chunk_rules() {
        let ok = chunk(Phase::Partial, 8, 24, 16);
        match CollectivePayload::decode(&ok, BOTH).unwrap().body {
            Body::Chunk(h, d) => assert_eq!((h.offset, h.total, d.len()), (8, 24, 16)),
            other => panic!("{other:?}"),
        }
        for n in 0..32 {
            assert!(CollectivePayload::decode(&ok[..n], BOTH).is_err(), "{n}");
        }
        assert_eq!(field(&chunk(Phase::Final, 0, 24, 0)), "chunk data length");
        assert_eq!(field(&chunk(Phase::Final, 16, 24, 16)), "chunk end");
        assert_eq!(field(&chunk(Phase::Final, u64::MAX, 24, 1)), "chunk end");
        assert_eq!(
            field(&chunk(Phase::Final, 0, 24, 12)),
            "chunk data length mod 8"
        );
        // The last chunk may have any length.
        assert!(CollectivePayload::decode(&chunk(Phase::Final, 16, 21, 5), BOTH).is_ok());
        assert!(CollectivePayload::decode(&ok, FEATURE_V1_CORE).is_err());
    }

    #[test]
    fn stream_rules_in_order() {
        let h = |offset, total| ChunkHeader { offset, total };
        let mut s = ChunkStream::new(40);
        assert_eq!(
            s.take(&h(0, 41), 16),
            Err(StreamError::Total {
                expected: 40,
                got: 41
            })
        );
        assert_eq!(s.take(&h(0, 40), 16), Ok(0..16));
        // Out of order, repeated.
        assert_eq!(s.take(&h(32, 40), 8).unwrap_err().field(), "offset");
        assert_eq!(s.take(&h(0, 40), 16).unwrap_err().field(), "offset");
        // Shorter than L and not the last; longer than L.
        assert_eq!(
            s.take(&h(16, 40), 8),
            Err(StreamError::Length {
                expected: 16,
                got: 8
            })
        );
        assert_eq!(s.take(&h(16, 40), 16), Ok(16..32));
        assert_eq!(
            s.take(&h(32, 40), 16),
            Err(StreamError::Length {
                expected: 8,
                got: 16
            })
        );
        assert_eq!(s.take(&h(32, 40), 8), Ok(32..40));
        assert!(s.is_complete());
        // (A chunk after the end does not decode: it is past the end.)
        assert!(s.take(&h(40, 40), 1).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(c) = CollectivePayload::decode(&bytes, BOTH) {
                let mut out = Vec::new();
                match c.body {
                    Body::Star(d) => { out.extend_from_slice(&c.header.to_bytes()); out.extend_from_slice(d); }
                    Body::Open(o) => encode_open(&c.header, o, &mut out),
                    Body::Chunk(h, d) => encode_chunk(&c.header, h, d, &mut out),
                }
                prop_assert_eq!(out, bytes);
            }
        }

        #[test]
        fn split_into_chunks_is_a_valid_stream(total in 1u64..5000, l in 1u64..600) {
            let l = (l * 8).min(total);
            let mut s = ChunkStream::new(total);
            let mut off = 0;
            while off < total {
                let len = l.min(total - off);
                let mut p = Vec::new();
                encode_chunk(&hdr(Operation::Bcast, Phase::Final), ChunkHeader { offset: off, total },
                             &vec![1; len as usize], &mut p);
                let c = CollectivePayload::decode(&p, BOTH).unwrap();
                let Body::Chunk(h, d) = c.body else { panic!() };
                prop_assert_eq!(s.take(&h, d.len()), Ok(off..off + len));
                off += len;
            }
            prop_assert!(s.is_complete());
        }
    }
}
