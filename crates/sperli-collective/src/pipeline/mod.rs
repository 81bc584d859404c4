//! Pipelined collectives (HELLO feature bit 1, protocol §14).
//!
//! In a job whose ranks all announced bit 1, large bcast, reduce,
//! allreduce, allgather and reduce_scatter calls move their data in chunks
//! along chains, rings and trees, each rank forwarding a chunk as soon as
//! it has it (Hoplite's fine-grained pipelining), instead of the v1 star
//! that makes the root encrypt and decrypt `(n-1)·S`. Small calls, and
//! every call in a job without the bit, send exactly the v1 frames.
//!
//! - [`shape`]: which calls run pipelined (protocol §14.5) and the
//!   chunk length and fanout this implementation chooses;
//! - this file: taking a frame and every check a receiver makes (protocol
//!   §14.4), the result sinks;
//! - `chain`: reduce, allreduce and reduce_scatter, a chain 0 → … → n-1
//!   then the result on (bit-identical to the star: protocol §14.6);
//! - `owner_fold`: allreduce with HELLO feature bit 7 (protocol §20):
//!   block b of every rank's array folded at rank b, its result sent to
//!   every rank;
//! - `relay`: bcast along a chain or tree, allgather along a ring.
//!
//! Everything goes through [`Peers`]: `send_collective_vec` hands a
//! received chunk on without a copy, `recv_collective` takes the next frame
//! of one peer. Correctness depends on nothing else: frames that arrive
//! before a rank takes them are kept (protocol §6.5), and every rank sends
//! what no one waits for before it waits itself (protocol §14.3).

mod calls;
pub(crate) mod chain;
mod owner_fold;
pub(crate) mod relay;
pub mod shape;

use std::ops::Range;

use sperli_wire::abort::AbortReason;
use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
use sperli_wire::error::{ArgumentError, FrameError, MismatchError};
use sperli_wire::pipeline::{
    encode_chunk_head, encode_open, Body, ChunkHeader, ChunkStream, CollectivePayload, Open,
    StreamError, CHUNK_HEADER_LEN,
};
use sperli_wire::{Error, FrameType};

use crate::comm::{Call, Comm};
use crate::element::Element;
use crate::peers::Peers;

const H: usize = sperli_wire::limits::COLLECTIVE_HEADER_LEN;
/// Where a chunk's data starts in its payload.
pub(crate) const CHUNK_DATA: usize = H + CHUNK_HEADER_LEN;

/// Where a pipelined call writes its result bytes (little-endian), chunk by
/// chunk; offsets are on element boundaries.
pub(crate) trait Sink {
    /// Result bytes `bytes` at byte `offset`.
    fn put(&mut self, offset: usize, bytes: &[u8]);
    /// `total` bytes are announced (a bcast's OPEN): a growing sink may
    /// reserve room for some of them.
    fn announce(&mut self, _total: usize) {}
}

/// At most this much is reserved ahead of a bcast's chunks on the word of
/// its OPEN alone (the rest grows as the bytes come).
const RESERVE_AHEAD: usize = 64 << 20;

/// The sink of a rank that has no result (the root of a bcast sends its
/// own data): nothing is ever put there.
pub(crate) struct NoResult;

impl Sink for NoResult {
    fn put(&mut self, _offset: usize, bytes: &[u8]) {
        debug_assert!(bytes.is_empty(), "a rank without a result got result bytes");
    }
}

/// Elements of `T` written in place.
pub(crate) struct ElemsMut<'a, T>(pub(crate) &'a mut [T]);

impl<T: Element> Sink for ElemsMut<'_, T> {
    fn put(&mut self, offset: usize, bytes: &[u8]) {
        let (a, b) = (offset / T::WIDTH, (offset + bytes.len()) / T::WIDTH);
        T::read_le(bytes, &mut self.0[a..b]);
    }
}

/// Elements appended as they arrive: a bcast whose receivers do not know
/// the length grows with the chunks that came, never with a `total` alone.
pub(crate) struct Grow<'a, T>(pub(crate) &'a mut Vec<T>);

impl<T: Element> Sink for Grow<'_, T> {
    fn put(&mut self, offset: usize, bytes: &[u8]) {
        debug_assert_eq!(offset, self.0.len() * T::WIDTH, "chunks arrive in order");
        T::extend_from_le(bytes, self.0);
    }
    fn announce(&mut self, total: usize) {
        self.0.reserve(total.min(RESERVE_AHEAD) / T::WIDTH);
    }
}

/// One frame taken for a pipelined call: its payload buffer (kept, so a
/// chunk can be handed on without a copy) and what it decoded to.
pub(crate) struct Frame {
    pub(crate) buf: Vec<u8>,
    pub(crate) header: CollectiveHeader,
    pub(crate) body: Taken,
}

/// The body of a [`Frame`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Taken {
    /// A v1 frame: data at `buf[16..]`.
    Star,
    /// An OPEN.
    Open(Open),
    /// A chunk: data at `buf[32..]`.
    Chunk(ChunkHeader),
}

/// Protocol §14.4 check 2 at a star-mode collector: whether `h` (an OPEN
/// that `call`, a star call, did not expect) is the opening frame of the
/// pipelined form of the same call.
pub(crate) fn other_shape(call: &Call, h: &CollectiveHeader) -> bool {
    if h.sequence != call.seq || h.phase != Phase::Open {
        return false;
    }
    match (call.op, h.operation) {
        (Operation::Reduce, Operation::Reduce) | (Operation::Allreduce, Operation::Allreduce) => {
            true
        }
        (Operation::Reduce, Operation::ReduceScatter)
        | (Operation::Gather, Operation::Allgather) => call.root == 0,
        _ => false,
    }
}

impl<L: Peers> Comm<L> {
    /// Whether the job negotiated feature bit 1 (protocol §7.1.1, §14.1).
    pub(crate) fn bit1(&self) -> bool {
        self.features & sperli_wire::limits::FEATURE_PIPELINED != 0
    }

    /// Whether a call of `op` with `len` bytes runs pipelined here
    /// (protocol §14.5; with feature bit 7 also the allreduce of the owner
    /// fold and the reduce from T7 on, §20.1; with bits 6 and 9 an
    /// allreduce on two ranks of less than 1 MiB exchanges, §22.1).
    pub(crate) fn runs_pipelined(&self, op: Operation, len: usize) -> bool {
        let (n, len) = (self.size(), len as u64);
        let exchange = op == Operation::Allreduce
            && sperli_wire::pair::exchange_replaces_chain(self.features, n, len);
        self.bit1()
            && !exchange
            && (sperli_wire::pipeline::runs_pipelined(op, n, len)
                || sperli_wire::owner_fold::runs_pipelined_with_bit7(op, self.features, n, len))
    }

    /// Whether the root of a bcast of `len` bytes pipelines it for a job
    /// on a network (bit 7, protocol §20.1: this implementation's choice
    /// for bcast, which is the root's): 3 ranks or more, at least T7.
    pub(crate) fn runs_network_bcast(&self, len: usize) -> bool {
        sperli_wire::owner_fold::chain_from_t7(self.features, self.size(), len as u64)
    }

    /// Whether an allreduce of `len` bytes per rank runs the owner fold of
    /// protocol §20 (bits 1 and 7, §20.1); a user-defined reduction never
    /// reaches a pipelined call.
    pub(crate) fn runs_owner_fold(&self, len: usize) -> bool {
        sperli_wire::owner_fold::runs_owner_fold(self.features, self.size(), len as u64)
    }

    /// The chunk length of a stream of `total` bytes this rank starts, in
    /// frames whose header carries `element_type`: with feature bit 4 a
    /// multiple of lcm(8, width) (protocol §17.3), else of 8 (§14.2).
    pub(crate) fn chunk_len(&self, total: usize, element_type: u8) -> usize {
        self.chunk_len_for(total, element_type, self.state.chunk())
    }

    /// The chunk length of a stream of `total` bytes of `call`: with
    /// feature bit 7 (ranks on a network, protocol §20.1) a stream shorter
    /// than T is cut into [`shape::NETWORK_CHUNK`] chunks, so that a
    /// reduce of 64 KiB fills its chain at once; otherwise
    /// [`Comm::chunk_len`].
    pub(crate) fn stream_chunk(&self, call: &Call, total: usize) -> usize {
        let short = (total as u64) < sperli_wire::pipeline::PIPELINE_MIN_BYTES;
        let requested = match self.state.chunk() {
            None if short && self.features & sperli_wire::limits::FEATURE_OWNER_FOLD != 0 => {
                Some(shape::NETWORK_CHUNK)
            }
            r => r,
        };
        self.chunk_len_for(total, call.element_type, requested)
    }

    fn chunk_len_for(&self, total: usize, element_type: u8, requested: Option<usize>) -> usize {
        let align = if self.bit4() {
            sperli_wire::ElementType::from_code(element_type)
                .map_or(sperli_wire::pipeline::CHUNK_ALIGN, |t| t.chunk_align())
        } else {
            sperli_wire::pipeline::CHUNK_ALIGN
        };
        shape::chunk_len_aligned(total, requested, align)
    }

    /// The shape check of protocol §14.4 (check 2) at the collector: the
    /// other rank chose the other shape, so its length (`total`) differs
    /// from this rank's: H1618 for a reducing call, H1617 for a gather.
    pub(crate) fn shape_mismatch<X>(&self, call: &Call, from: u32, total: u64) -> Result<X, Error> {
        let e: Error = if call.op.reduces() {
            ArgumentError::LengthMismatch {
                left: call.len,
                right: usize::try_from(total).unwrap_or(usize::MAX),
            }
            .into()
        } else {
            Error::CollectiveMismatch(MismatchError::Length {
                from,
                expected: call.len as u64,
                got: total,
            })
        };
        self.fail_job(AbortReason::CollectiveMismatch, e)
    }

    /// Takes the next frame from `from` and decodes it with the job's
    /// features (protocol §14.4 check 1): H1610 with ABORT reason 7 when it
    /// does not decode, which includes every pipelined frame in a job
    /// without bit 1.
    pub(crate) fn take(&self, from: u32) -> Result<Frame, Error> {
        let buf = self.take_payload(from)?;
        let decoded = CollectivePayload::decode(&buf, self.features).map(|c| {
            let body = match c.body {
                Body::Star(_) => Taken::Star,
                Body::Open(o) => Taken::Open(o),
                Body::Chunk(ch, _) => Taken::Chunk(ch),
            };
            (c.header, body)
        });
        match decoded {
            Ok((header, body)) => Ok(Frame { buf, header, body }),
            Err(error) => self.fail_job(
                AbortReason::RejectedFrame,
                Error::FrameRejected(FrameError::Payload {
                    frame_type: FrameType::Collective,
                    error,
                }),
            ),
        }
    }

    /// Check 3 of protocol §14.4: the frame's header is what is due from
    /// `from` (operation, element type, reduction and sequence of `call`,
    /// `root_field`, and one of `phases`), else H1617 with ABORT reason 3.
    pub(crate) fn check_due(
        &self,
        from: u32,
        h: &CollectiveHeader,
        call: &Call,
        root_field: u32,
        phases: &[Phase],
    ) -> Result<(), Error> {
        let phase = if phases.contains(&h.phase) {
            h.phase
        } else {
            phases[0]
        };
        let fields: [(&'static str, u64, u64); 6] = [
            (
                "operation",
                call.op.code().into(),
                h.operation.code().into(),
            ),
            (
                "element_type",
                call.element_type.into(),
                h.element_type.into(),
            ),
            ("reduction", call.reduction.into(), h.reduction.into()),
            ("phase", phase as u64, h.phase as u64),
            ("root", root_field.into(), h.root.into()),
            ("sequence", call.seq, h.sequence),
        ];
        match fields.iter().find(|(_, e, g)| e != g) {
            None => Ok(()),
            Some(&(field, expected, got)) => self.mismatch(MismatchError::Header {
                from,
                field,
                expected,
                got,
            }),
        }
    }

    /// Takes the OPEN due from `from` at the collector of `call` (protocol
    /// §14.3): checks 1-4 of protocol §14.4. The OPEN's total must be this
    /// rank's length (else H1618 for a reducing call, H1617 for allgather);
    /// a v1 phase-0 frame of the same call is the other shape (check 2).
    pub(crate) fn take_open_at_collector(&self, from: u32, call: &Call) -> Result<(), Error> {
        let f = self.take(from)?;
        let star_form = match call.op {
            Operation::ReduceScatter => Operation::Reduce,
            Operation::Allgather => Operation::Gather,
            op => op,
        };
        if let Taken::Star = f.body {
            let h = &f.header;
            if h.sequence == call.seq && h.phase == Phase::ToRoot && h.operation == star_form {
                let got = (f.buf.len() - H) as u64;
                return self.shape_mismatch(call, from, got);
            }
        }
        self.check_due(from, &f.header, call, call.root, &[Phase::Open])?;
        if let Taken::Open(o) = f.body {
            if o.total != call.len as u64 {
                return self.shape_mismatch(call, from, o.total);
            }
        }
        self.recycle(f.buf);
        Ok(())
    }

    /// Checks 5-7 of protocol §14.4 for chunk `c` of `len` bytes of
    /// `stream`; returns the byte range it fills. A total that differs is
    /// H1618 on the first PARTIAL chunk of a stream (the contributions
    /// differ), H1617 otherwise (a changed total); out of order and the
    /// chunk-length rule are H1617. ABORT reason 3 either way.
    pub(crate) fn check_chunk(
        &self,
        from: u32,
        stream: &mut ChunkStream,
        c: &ChunkHeader,
        len: usize,
        phase: Phase,
    ) -> Result<Range<usize>, Error> {
        let first = stream.taken() == 0;
        match stream.take(c, len) {
            Ok(r) => Ok(r.start as usize..r.end as usize),
            Err(StreamError::Total { expected, got }) if first && phase == Phase::Partial => {
                let e = ArgumentError::LengthMismatch {
                    left: expected as usize,
                    right: usize::try_from(got).unwrap_or(usize::MAX),
                };
                self.fail_job(AbortReason::CollectiveMismatch, e.into())
            }
            Err(e) => {
                let (expected, got) = e.values();
                self.mismatch(MismatchError::Chunk {
                    from,
                    field: e.field(),
                    expected,
                    got,
                })
            }
        }
    }

    /// Sends OPEN (`total`, `fanout`) for `call` to `to`.
    pub(crate) fn send_open(
        &self,
        to: u32,
        call: &Call,
        root_field: u32,
        total: usize,
        fanout: u32,
    ) -> Result<(), Error> {
        let mut p = Vec::with_capacity(H + 16);
        let open = Open {
            total: total as u64,
            fanout,
        };
        encode_open(&call.pheader(Phase::Open, root_field), open, &mut p);
        self.send_coll(to, &p)
    }
}

/// The collective header and chunk header of a chunk at `offset` of a
/// stream of `total` bytes (protocol §14.2).
pub(crate) fn chunk_head(
    call: &Call,
    phase: Phase,
    root_field: u32,
    offset: usize,
    total: usize,
) -> Vec<u8> {
    let mut head = Vec::with_capacity(CHUNK_DATA);
    let chunk = ChunkHeader {
        offset: offset as u64,
        total: total as u64,
    };
    encode_chunk_head(&call.pheader(phase, root_field), chunk, &mut head);
    head
}

/// The ranges `[offset, offset + len)` of the chunks of a stream of
/// `total` bytes with chunk length `chunk` (one empty range for none).
pub(crate) fn chunk_ranges(total: usize, chunk: usize) -> impl Iterator<Item = Range<usize>> {
    (0..total)
        .step_by(chunk.max(1))
        .map(move |o| o..(o + chunk).min(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_ranges_cover_the_stream_in_order() {
        let r: Vec<_> = chunk_ranges(20, 8).collect();
        assert_eq!(r, vec![0..8, 8..16, 16..20]);
        assert_eq!(chunk_ranges(8, 8).collect::<Vec<_>>(), vec![0..8]);
        assert_eq!(chunk_ranges(0, 8).count(), 0);
    }
}
