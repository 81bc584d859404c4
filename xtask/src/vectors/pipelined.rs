//! The vectors of HELLO feature bit 1 (protocol §14): whole COLLECTIVE
//! frames of the pipelined phases and operations with a `features=3`
//! receiver (accepted, or rejected by a rule of §14.2 that holds whatever
//! the features), and `collective-stream` entries, the frames one receiver
//! takes from one sender in a pipelined call, judged by the checks of
//! protocol §14.4 with the job's features (the sperli-wire decoders and
//! stream rules); those with `features=1` are the frames of bit 1 in a job
//! that did not negotiate it.

use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
use sperli_wire::error::DecodeError;
use sperli_wire::frame::encode_frame_bytes;
use sperli_wire::header::FrameHeader;
use sperli_wire::hex;
use sperli_wire::limits::{FEATURE_PIPELINED, FEATURE_V1_CORE};
use sperli_wire::pipeline::{
    encode_chunk, encode_open, Body, ChunkHeader, ChunkStream, CollectivePayload, Open, StreamError,
};
use sperli_wire::{ElementType, FrameType, JobId};

use super::render;
use super::verify::{derive, field, num};
use super::Entry;

/// Both bits: the features of a job that negotiated bit 1.
pub const BOTH: u64 = FEATURE_V1_CORE | FEATURE_PIPELINED;

const JOB: JobId = JobId([
    0x5b, 0x1e, 0x4c, 0x0d, 0x2a, 0x77, 0x40, 0x19, 0x8e, 0x3f, 0x61, 0xd2, 0x09, 0xa4, 0xc3, 0x5e,
]);
/// The job size of the frame entries (as the v1 frame entries).
const SIZE: u32 = 3;
/// The job size of the `collective-stream` entries.
const STREAM_SIZE: u32 = 4;
const INC: u32 = 2;
const SEQ: u64 = 7;

// ---- deriving ---------------------------------------------------------------

/// The `<check>` word of a pipelined payload that does not decode
/// (protocol §14.2, the words in brackets).
pub fn decode_rule(e: &DecodeError) -> &'static str {
    use DecodeError as D;
    match e {
        D::OutOfRange { field, .. } | D::NotZero { field, .. } | D::Mismatch { field, .. } => {
            match *field {
                "open total" => "open_total",
                "open fanout" => "open_fanout",
                "open reserved" => "open_reserved",
                "chunk data length" => "chunk_empty",
                "chunk end" => "chunk_end",
                "chunk data length mod 8" | "chunk data length mod lcm(8, width)" => "chunk_align",
                f => f,
            }
        }
        D::Truncated { field, .. } => match *field {
            "open total" | "open fanout" | "open reserved" => "open_length",
            "chunk offset" | "chunk total" => "chunk_header",
            _ => "payload_length",
        },
        D::TrailingBytes {
            item: "OPEN body", ..
        } => "open_length",
        _ => "other",
    }
}

/// A decoded payload in the vectors' field-list notation.
pub fn render(c: &CollectivePayload<'_>) -> String {
    let mut v = render::collective_header(&c.header);
    match c.body {
        Body::Star(d) => v.push(format!("data={}", hex::encode(d))),
        Body::Open(o) => {
            v.push(format!("open.total={}", o.total));
            v.push(format!("open.fanout={}", o.fanout));
            v.push("open.reserved=0".into());
        }
        Body::Chunk(ch, d) => {
            v.push(format!("chunk.offset={}", ch.offset));
            v.push(format!("chunk.total={}", ch.total));
            v.push(format!("chunk={}", hex::encode(d)));
        }
    }
    v.join(" ")
}

/// What one receiver's call is and what is due from the sender.
struct Call {
    size: u32,
    features: u64,
    op: u8,
    element_type: u8,
    reduction: u8,
    sequence: u64,
    /// The stream's length as the receiver knows it; None: `any`.
    length: Option<u64>,
    phase: u8,
    root: u32,
    /// The receiver's rank, where the entry gives it (`rank=`, the
    /// two-rank allreduce entries of protocol §19.4): `due` is then checked
    /// against what the receiver takes.
    rank: Option<u32>,
    /// The sender's rank, where the entry gives it (`peer=`, the owner-fold
    /// entries of protocol §20.6).
    peer: Option<u32>,
}

/// What an owner-fold receiver takes from its peer (protocol §20.3): the
/// stream's length and its fixed chunk length L_b.
#[derive(Clone, Copy)]
struct OwnerFold {
    total: u64,
    chunk: u64,
}

fn reduce_type(op: u8) -> bool {
    matches!(op, 3 | 4 | 8)
}

/// The code of a length disagreement at the collector (protocol §14.4):
/// H1618 for the reducing calls, H1617 otherwise.
fn length_code(op: u8) -> &'static str {
    if reduce_type(op) {
        "H1618"
    } else {
        "H1617"
    }
}

impl Call {
    fn parse(e: &Entry) -> Result<Self, String> {
        let rx = e.get("receiver").unwrap_or("");
        let call = e.get("call").unwrap_or("");
        let due = e.get("due").unwrap_or("");
        let length = match field(call, "length")? {
            "any" => None,
            v => Some(v.parse().map_err(|_| "length is not a number")?),
        };
        Ok(Self {
            size: num(rx, "size")?,
            features: num(rx, "features")?,
            op: num(call, "operation")?,
            element_type: num(call, "element_type")?,
            reduction: num(call, "reduction")?,
            sequence: num(call, "sequence")?,
            length,
            phase: num(due, "phase")?,
            root: num(due, "root")?,
            rank: field(rx, "rank")
                .ok()
                .map(str::parse)
                .transpose()
                .map_err(|_| "rank is not a number")?,
            peer: field(rx, "peer")
                .ok()
                .map(str::parse)
                .transpose()
                .map_err(|_| "peer is not a number")?,
        })
    }

    /// An allreduce entry whose receiver names its rank and its peer, in a
    /// job with bits 1 and 7 and a contribution (`length`) that protocol
    /// §20.1 gives the owner fold: the stream due is derived (§20.3), the
    /// PARTIAL stream of block `rank` or the FINAL stream of block `peer`,
    /// and `due` must say so. None for every other entry.
    fn owner_fold(&self) -> Result<Option<OwnerFold>, String> {
        let (Some(rank), Some(peer), 4, Some(len)) = (self.rank, self.peer, self.op, self.length)
        else {
            return Ok(None);
        };
        if !sperli_wire::owner_fold::runs_owner_fold(self.features, self.size, len) {
            return Ok(None);
        }
        let t = ElementType::from_code(self.element_type).map_err(|e| e.to_string())?;
        let b = match self.phase {
            3 => rank,
            4 => peer,
            p => {
                return Err(format!(
                    "due: an owner fold takes phase 3 or 4 from a peer, not {p}"
                ))
            }
        };
        if self.root != b || rank == peer || rank >= self.size || peer >= self.size {
            return Err(format!(
                "due: rank {rank} takes phase {} root={b} from rank {peer}, not root={}",
                self.phase, self.root
            ));
        }
        let r = sperli_wire::owner_fold::block(len, t.width(), self.size, b);
        let total = r.end - r.start;
        let chunk = sperli_wire::owner_fold::owner_fold_chunk(total as usize, t.chunk_align());
        Ok(Some(OwnerFold {
            total,
            chunk: chunk as u64,
        }))
    }

    /// A star allreduce entry of two ranks that names its receiver must
    /// say what that rank takes (protocol §8.2, §19.3); with bits 1, 6 and
    /// 9 an allreduce of T up to 1 MiB is the exchange at both ranks
    /// (§22.1), whatever phase the entry names.
    fn check_due(&self) -> Result<(), String> {
        let large = match (self.rank, self.op, self.length) {
            (Some(_), 4, Some(len)) => {
                sperli_wire::pair::exchange_replaces_chain(self.features, self.size, len)
            }
            _ => false,
        };
        if large && self.phase != 0 {
            return Err(format!(
                "due: an allreduce of {} bytes on two ranks with bit 9 takes phase 0, not {}",
                self.length.unwrap_or(0),
                self.phase
            ));
        }
        let (Some(rank), 4, 0 | 1) = (self.rank, self.op, self.phase) else {
            return Ok(());
        };
        let due = sperli_wire::pair::allreduce_star_due(rank, self.size, self.features) as u8;
        if due != self.phase {
            return Err(format!(
                "due: rank {rank} takes phase {due}, not {}",
                self.phase
            ));
        }
        Ok(())
    }

    /// Check 2 of protocol §14.4: the other shape's opening frame of the
    /// same call at the collector.
    fn other_shape(&self, h: &CollectiveHeader) -> bool {
        if h.sequence != self.sequence {
            return false;
        }
        let op = h.operation.code();
        match (self.phase, h.phase) {
            // OPEN due, a v1 phase-0 frame of the star form came.
            (2, Phase::ToRoot) => match self.op {
                3 | 4 => op == self.op,
                8 => op == 3,
                7 => op == 5,
                _ => false,
            },
            // A v1 frame due (a star-mode collector), an OPEN came.
            (0, Phase::Open) => match self.op {
                3 => op == 3 || (op == 8 && self.root == 0),
                4 => op == 4,
                5 => op == 7 && self.root == 0,
                _ => false,
            },
            _ => false,
        }
    }

    /// Judges one frame; Ok(what it took) or Err(the verdict).
    fn take(
        &self,
        bytes: &[u8],
        stream: &mut Option<ChunkStream>,
        fold: Option<OwnerFold>,
    ) -> Result<String, String> {
        let c = CollectivePayload::decode(bytes, self.features)
            .map_err(|d| format!("reject H1610 {}", decode_rule(&d)))?;
        let h = &c.header;
        if self.other_shape(h) {
            return Err(format!("reject {} shape", length_code(self.op)));
        }
        let fields: [(&str, u64, u64); 6] = [
            ("operation", self.op.into(), h.operation.code().into()),
            (
                "element_type",
                self.element_type.into(),
                h.element_type.into(),
            ),
            ("reduction", self.reduction.into(), h.reduction.into()),
            ("phase", self.phase.into(), (h.phase as u8).into()),
            ("root", self.root.into(), h.root.into()),
            ("sequence", self.sequence, h.sequence),
        ];
        if let Some((f, _, _)) = fields.iter().find(|(_, want, got)| want != got) {
            return Err(format!("reject H1617 {f}"));
        }
        match c.body {
            Body::Star(d) => Ok(format!("star:{}", d.len())),
            Body::Open(o) => {
                if h.operation == Operation::Bcast && o.fanout >= self.size {
                    return Err("reject H1617 fanout".into());
                }
                if let Some(len) = self.length {
                    if o.total != len {
                        return Err(format!("reject {} total", length_code(self.op)));
                    }
                }
                Ok(format!("open:{}/{}", o.total, o.fanout))
            }
            Body::Chunk(ch, d) => {
                let s = stream
                    .as_mut()
                    .ok_or("a chunk stream needs a length, not `any`")?;
                let first = s.taken() == 0;
                match s.take(&ch, d.len()) {
                    // Protocol §20.4: every chunk of an owner fold is L_b
                    // long, the first one too.
                    Ok(r)
                        if fold
                            .is_some_and(|f| r.end - r.start != f.chunk.min(f.total - r.start)) =>
                    {
                        Err("reject H1617 length".into())
                    }
                    Ok(r) => Ok(format!("{}..{}", r.start, r.end)),
                    Err(StreamError::Total { .. }) if first && h.phase == Phase::Partial => {
                        Err("reject H1618 total".into())
                    }
                    Err(e) => Err(format!("reject H1617 {}", e.field())),
                }
            }
        }
    }
}

/// Fills in the derived lines of a `collective-stream` entry: `verdict`,
/// then `at` (the index of the failing frame) or `taken` and `complete`.
pub fn derive_stream(e: Entry) -> Result<Entry, String> {
    let call = Call::parse(&e)?;
    call.check_due()?;
    let frames: Vec<Vec<u8>> = e
        .get("frames")
        .unwrap_or("")
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(|s| hex::decode(s.as_bytes()).map_err(|x| x.to_string()))
        .collect::<Result<_, _>>()?;
    let fold = call.owner_fold()?;
    let mut stream = match (call.phase, fold, call.length) {
        (3 | 4, Some(f), _) => Some(ChunkStream::new(f.total)),
        (3 | 4, None, Some(len)) => Some(ChunkStream::new(len)),
        _ => None,
    };
    let mut taken = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        match call.take(f, &mut stream, fold) {
            Ok(t) => taken.push(t),
            Err(verdict) => return Ok(e.with("verdict", verdict).with("at", i.to_string())),
        }
    }
    let complete = stream.is_none_or(|s| s.is_complete());
    Ok(e.with("verdict", "accept")
        .with("taken", taken.join(" "))
        .with("complete", if complete { "yes" } else { "no" }))
}

/// The payload lines of a whole COLLECTIVE frame in a job with `features`
/// (the frame entries with `features=` in their receiver line).
pub fn frame_payload(payload: &[u8], features: u64) -> Result<String, DecodeError> {
    CollectivePayload::decode(payload, features).map(|c| render(&c))
}

// ---- the entries ------------------------------------------------------------

pub(super) fn header(op: Operation, phase: Phase, root: u32) -> CollectiveHeader {
    let (element_type, reduction) = if op.reduces() { (6, 1) } else { (0, 0) };
    CollectiveHeader {
        operation: op,
        element_type,
        reduction,
        phase,
        root,
        sequence: SEQ,
    }
}

pub(super) fn open(h: CollectiveHeader, total: u64, fanout: u32) -> Vec<u8> {
    let mut p = Vec::new();
    encode_open(&h, Open { total, fanout }, &mut p);
    p
}

/// Chunk data: bytes 0x10, 0x11, ... from `offset` on (distinct per byte).
pub(super) fn chunk(h: CollectiveHeader, offset: u64, total: u64, len: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..len)
        .map(|i| (0x10u64.wrapping_add(offset).wrapping_add(i as u64)) as u8)
        .collect();
    let mut p = Vec::new();
    encode_chunk(&h, ChunkHeader { offset, total }, &data, &mut p);
    p
}

/// `p` with byte `at` set to `value` (a header field made to differ).
fn with_byte(mut p: Vec<u8>, at: usize, value: u8) -> Vec<u8> {
    p[at] = value;
    p
}

pub(super) fn star(h: CollectiveHeader, len: usize) -> Vec<u8> {
    let mut p = h.to_bytes().to_vec();
    p.extend(std::iter::repeat_n(0x42, len));
    p
}

fn frame(name: &str, own: u32, peer: u32, features: Option<u64>, payload: &[u8]) -> Entry {
    frame_tagged(name, own, peer, features, 0, payload)
}

/// A COLLECTIVE `frame` entry with header `tag` (a communicator id with
/// feature bit 2, protocol §15.2). A frame whose header the receiver
/// rejects carries only its 52 header bytes (the receiver reads no more).
pub fn frame_tagged(
    name: &str,
    own: u32,
    peer: u32,
    features: Option<u64>,
    tag: u32,
    payload: &[u8],
) -> Entry {
    let mut rx = format!("job={JOB} rank={own} peer={peer} incarnation={INC} size={SIZE}");
    if let Some(f) = features {
        rx.push_str(&format!(" features={f}"));
    }
    let h = FrameHeader::new(FrameType::Collective, JOB, peer, own, INC).with_tag(tag);
    let bytes = encode_frame_bytes(h, payload);
    let entry = |b: &[u8]| {
        Entry::new(name, "frame")
            .with("receiver", rx.clone())
            .with("bytes", hex::encode(b))
    };
    derive(entry(&bytes))
        .or_else(|_| derive(entry(&bytes[..52])))
        .unwrap_or_else(|why| panic!("{name}: {why}"))
}

fn frames() -> Vec<Entry> {
    use Operation as O;
    use Phase as P;
    let mut v = Vec::new();
    let partial = chunk(header(O::Allreduce, P::Partial, 0), 0, 40, 16);
    let open_ar = open(header(O::Allreduce, P::Open, 0), 40, 1);
    let ag = chunk(header(O::Allgather, P::Final, 2), 0, 5, 5);
    let accept = [
        ("frame-collective-open-allreduce", 0, 1, open_ar.clone()),
        (
            "frame-collective-open-bcast-fanout-2",
            2,
            0,
            open(header(O::Bcast, P::Open, 0), 100, 2),
        ),
        ("frame-collective-partial", 1, 0, partial.clone()),
        (
            "frame-collective-final-last-chunk",
            0,
            2,
            chunk(header(O::Allreduce, P::Final, 0), 32, 40, 8),
        ),
        ("frame-collective-allgather-final", 2, 1, ag.clone()),
        (
            "frame-collective-reduce-scatter-partial",
            2,
            1,
            chunk(header(O::ReduceScatter, P::Partial, 2), 8, 24, 16),
        ),
        (
            "frame-collective-v1-star-with-bit-1",
            0,
            1,
            star(header(O::Allreduce, P::ToRoot, 0), 16),
        ),
    ];
    for (name, own, peer, p) in accept {
        let e = frame(name, own, peer, Some(BOTH), &p);
        assert_eq!(e.get("verdict"), Some("accept"), "{name}");
        v.push(e);
    }
    // Payload rules of protocol §14.2, with the bit.
    let mut reserved = open(header(O::Allreduce, P::Open, 0), 40, 1);
    reserved[31] = 1;
    let rejects = [
        (
            "reject-chunk-past-the-end",
            chunk(header(O::Allreduce, P::Final, 0), 32, 40, 16),
        ),
        (
            "reject-chunk-not-a-multiple-of-8",
            chunk(header(O::Allreduce, P::Partial, 0), 0, 40, 12),
        ),
        (
            "reject-chunk-empty",
            chunk(header(O::Allreduce, P::Partial, 0), 0, 40, 0),
        ),
        ("reject-open-reserved", reserved),
        (
            "reject-open-fanout-2-on-allreduce",
            open(header(O::Allreduce, P::Open, 0), 40, 2),
        ),
        (
            "reject-partial-on-bcast",
            chunk(header(O::Bcast, P::Partial, 0), 0, 8, 8),
        ),
        (
            "reject-star-phase-on-allgather",
            star(header(O::Allgather, P::ToRoot, 0), 8),
        ),
        (
            "reject-open-on-gather",
            open(header(O::Gather, P::Open, 0), 8, 1),
        ),
        ("reject-operation-9", with_byte(partial, 0, 9)),
    ];
    for (name, p) in rejects {
        let e = frame(name, 1, 0, Some(BOTH), &p);
        assert_eq!(e.get("verdict"), Some("reject H1610 payload"), "{name}");
        v.push(e);
    }
    // Protocol §14.1: the frames of bit 1 in a job without it are judged
    // when they arrive, as payloads that do not decode by the v1 rules.
    let without = [
        ("reject-open-without-bit-1", open_ar),
        (
            "reject-partial-without-bit-1",
            chunk(header(O::Allreduce, P::Partial, 0), 0, 40, 16),
        ),
        ("reject-allgather-without-bit-1", ag),
    ];
    for (name, p) in without {
        for (suffix, f) in [
            ("", FEATURE_V1_CORE),
            (
                "-with-bit-2",
                FEATURE_V1_CORE | sperli_wire::limits::FEATURE_COMMUNICATORS,
            ),
        ] {
            let name = format!("{name}{suffix}");
            let e = frame(&name, 2, 1, Some(f), &p);
            assert_eq!(e.get("verdict"), Some("reject H1610 payload"), "{name}");
            v.push(e);
        }
    }
    v.extend(pairs());
    // Protocol §8.4 "What decodes": root and sequence decode whatever
    // their value; the call judges them (H1617).
    let mut seq0 = star(header(O::Allreduce, P::ToRoot, 0), 8);
    seq0[8..16].fill(0);
    for (name, p) in [
        (
            "frame-collective-root-not-below-size",
            star(header(O::Bcast, P::FromRoot, 4095), 8),
        ),
        (
            "frame-collective-barrier-root-1",
            star(header(O::Barrier, P::ToRoot, 1), 0),
        ),
        ("frame-collective-sequence-0", seq0),
    ] {
        for (suffix, f) in [("", None), ("-with-bit-1", Some(BOTH))] {
            let name = format!("{name}{suffix}");
            let e = frame(&name, 1, 0, f, &p);
            assert_eq!(e.get("verdict"), Some("accept"), "{name}");
            v.push(e);
        }
    }
    v
}

/// Whether the pair (operation, phase) decodes in a job with or without
/// feature bit 1: the tables of protocol §14.2 ("Every phase × operation
/// pair"), written out as the document states them.
fn pair_decodes(bit1: bool, op: u8, phase: u8) -> bool {
    match (bit1, op, phase) {
        (_, 0 | 9.., _) => false,
        (false, 7 | 8, _) => false,
        (false, _, 0 | 1) => true,
        (false, _, _) => false,
        (true, 1 | 5 | 6, p) => p <= 1,
        (true, 2, p) => matches!(p, 0 | 1 | 2 | 4),
        (true, 3 | 4, p) => p <= 4,
        (true, 7, p) => matches!(p, 2 | 4),
        (true, 8, p) => (2..=4).contains(&p),
    }
}

/// A COLLECTIVE frame of every phase × operation pair (operations 0..=9,
/// phases 0..=5), with and without feature bit 1 (protocol §14.2): a body
/// that is valid for the phase, so the pair alone decides.
fn pairs() -> Vec<Entry> {
    let mut v = Vec::new();
    for (fname, features) in [("1", FEATURE_V1_CORE), ("3", BOTH)] {
        for op in 0u8..=9 {
            for ph in 0u8..=5 {
                if (op == 0 || op == 9 || ph == 5) && !(op == 4 || ph == 0) {
                    // The out-of-range values once each: on allreduce or
                    // with phase 0.
                    continue;
                }
                let o = Operation::from_code(op).unwrap_or(Operation::Allreduce);
                let mut h = header(o, Phase::ToRoot, 0);
                let mut p = match ph {
                    2 => {
                        h.phase = Phase::Open;
                        open(h, 8, 1)
                    }
                    3 | 4 => {
                        h.phase = Phase::from_code(ph).expect("3 and 4 are phases");
                        chunk(h, 0, 8, 8)
                    }
                    _ => star(h, 8),
                };
                p[0] = op;
                p[3] = ph;
                let name = format!("frame-collective-operation-{op}-phase-{ph}-features-{fname}");
                let e = frame(&name, 1, 0, Some(features), &p);
                let want = if pair_decodes(features & FEATURE_PIPELINED != 0, op, ph) {
                    "accept"
                } else {
                    "reject H1610 payload"
                };
                assert_eq!(e.get("verdict"), Some(want), "{name}");
                v.push(e);
            }
        }
    }
    v
}

/// One `collective-stream` entry.
#[allow(clippy::too_many_arguments)]
fn stream(
    name: &str,
    features: u64,
    op: Operation,
    length: Option<u64>,
    phase: Phase,
    root: u32,
    frames: &[Vec<u8>],
    verdict: &str,
) -> Entry {
    let (et, red) = if op.reduces() { (6, 1) } else { (0, 0) };
    let length = length.map_or("any".to_string(), |l| l.to_string());
    let e = Entry::new(name, "collective-stream")
        .with(
            "receiver",
            format!("size={STREAM_SIZE} features={features}"),
        )
        .with(
            "call",
            format!(
                "operation={} element_type={et} reduction={red} sequence={SEQ} length={length}",
                op.code()
            ),
        )
        .with("due", format!("phase={} root={root}", phase as u8));
    judged(e, frames, verdict)
}

/// A `collective-stream` entry's `frames` line added and the rest derived;
/// the verdict must be `verdict`.
pub(super) fn judged(e: Entry, frames: &[Vec<u8>], verdict: &str) -> Entry {
    let name = e.name().to_string();
    let frames: Vec<String> = frames.iter().map(|f| hex::encode(f)).collect();
    let e =
        derive(e.with("frames", frames.join(" "))).unwrap_or_else(|why| panic!("{name}: {why}"));
    assert_eq!(e.get("verdict"), Some(verdict), "{name}");
    e
}

fn streams() -> Vec<Entry> {
    use Operation as O;
    use Phase as P;
    let ar = |ph| header(O::Allreduce, ph, 0);
    let mut v = Vec::new();
    let c0 = chunk(ar(P::Partial), 0, 40, 16);
    let c1 = chunk(ar(P::Partial), 16, 40, 16);
    let c2 = chunk(ar(P::Partial), 32, 40, 8);
    let s = |name: &str, frames: &[Vec<u8>], verdict: &str| {
        stream(
            name,
            BOTH,
            O::Allreduce,
            Some(40),
            P::Partial,
            0,
            frames,
            verdict,
        )
    };
    v.push(s(
        "stream-partial-three-chunks",
        &[c0.clone(), c1.clone(), c2.clone()],
        "accept",
    ));
    v.push(s(
        "stream-partial-incomplete",
        &[c0.clone(), c1.clone()],
        "accept",
    ));
    v.push(s(
        "stream-partial-one-chunk",
        &[chunk(ar(P::Partial), 0, 40, 40)],
        "accept",
    ));
    v.push(s(
        "stream-chunk-out-of-order",
        &[c0.clone(), c2.clone()],
        "reject H1617 offset",
    ));
    v.push(s(
        "stream-chunk-repeated",
        &[c0.clone(), c0.clone()],
        "reject H1617 offset",
    ));
    v.push(s(
        "stream-chunk-changed-total",
        &[c0.clone(), chunk(ar(P::Partial), 16, 48, 16)],
        "reject H1617 total",
    ));
    v.push(s(
        "stream-partial-other-contribution-length",
        &[chunk(ar(P::Partial), 0, 48, 16)],
        "reject H1618 total",
    ));
    v.push(s(
        "stream-chunk-past-the-end",
        &[c0.clone(), c1.clone(), chunk(ar(P::Partial), 32, 40, 16)],
        "reject H1610 chunk_end",
    ));
    v.push(s(
        "stream-chunk-offset-overflows",
        &[chunk(ar(P::Partial), u64::MAX - 3, 40, 8)],
        "reject H1610 chunk_end",
    ));
    v.push(s(
        "stream-chunk-shorter-than-the-first",
        &[c0.clone(), chunk(ar(P::Partial), 16, 40, 8)],
        "reject H1617 length",
    ));
    v.push(s(
        "stream-chunk-longer-than-the-first",
        &[
            chunk(ar(P::Partial), 0, 40, 8),
            chunk(ar(P::Partial), 8, 40, 16),
        ],
        "reject H1617 length",
    ));
    v.push(s(
        "stream-chunk-not-a-multiple-of-8",
        &[chunk(ar(P::Partial), 0, 40, 12)],
        "reject H1610 chunk_align",
    ));
    v.push(s(
        "stream-chunk-empty",
        &[chunk(ar(P::Partial), 0, 40, 0)],
        "reject H1610 chunk_empty",
    ));
    v.push(s(
        "stream-chunk-header-truncated",
        &[c0[..24].to_vec()],
        "reject H1610 chunk_header",
    ));
    let mut seq = c1.clone();
    seq[8] = 8;
    v.push(s(
        "stream-chunk-wrong-sequence",
        &[c0.clone(), seq],
        "reject H1617 sequence",
    ));
    v.push(s(
        "stream-final-where-partial-is-due",
        &[chunk(ar(P::Final), 0, 40, 16)],
        "reject H1617 phase",
    ));
    let mut red = c0.clone();
    red[2] = 2;
    v.push(s(
        "stream-chunk-wrong-reduction",
        &[red],
        "reject H1617 reduction",
    ));
    let mut et = c0.clone();
    et[1] = 5;
    v.push(s(
        "stream-chunk-wrong-element-type",
        &[et],
        "reject H1617 element_type",
    ));
    v.push(s(
        "stream-chunk-wrong-operation",
        &[chunk(header(O::Reduce, P::Partial, 0), 0, 40, 16)],
        "reject H1617 operation",
    ));
    v.push(stream(
        "stream-partial-without-bit-1",
        FEATURE_V1_CORE,
        O::Allreduce,
        Some(40),
        P::Partial,
        0,
        std::slice::from_ref(&c0),
        "reject H1610 phase",
    ));
    v.push(stream(
        "stream-open-without-bit-1",
        FEATURE_V1_CORE,
        O::Allreduce,
        Some(40),
        P::Open,
        0,
        &[open(ar(P::Open), 40, 1)],
        "reject H1610 phase",
    ));
    v.push(stream(
        "stream-final-without-bit-1",
        FEATURE_V1_CORE,
        O::Allreduce,
        Some(40),
        P::Final,
        0,
        &[chunk(ar(P::Final), 0, 40, 40)],
        "reject H1610 phase",
    ));
    v.push(stream(
        "stream-reduce-scatter-without-bit-1",
        FEATURE_V1_CORE,
        O::ReduceScatter,
        Some(16),
        P::Partial,
        3,
        &[chunk(header(O::ReduceScatter, P::Partial, 3), 0, 16, 16)],
        "reject H1610 operation",
    ));
    v.push(stream(
        "stream-allgather-without-bit-1",
        FEATURE_V1_CORE,
        O::Allgather,
        Some(5),
        P::Final,
        2,
        &[chunk(header(O::Allgather, P::Final, 2), 0, 5, 5)],
        "reject H1610 operation",
    ));
    v.push(stream(
        "stream-final-other-result-length",
        BOTH,
        O::Allreduce,
        Some(40),
        P::Final,
        0,
        &[chunk(ar(P::Final), 0, 48, 16)],
        "reject H1617 total",
    ));
    // Blocks of allgather and reduce_scatter: the root field names the block.
    let ag =
        |root, offset, total, len| chunk(header(O::Allgather, P::Final, root), offset, total, len);
    v.push(stream(
        "stream-allgather-block",
        BOTH,
        O::Allgather,
        Some(20),
        P::Final,
        2,
        &[ag(2, 0, 20, 16), ag(2, 16, 20, 4)],
        "accept",
    ));
    v.push(stream(
        "stream-allgather-other-block",
        BOTH,
        O::Allgather,
        Some(20),
        P::Final,
        2,
        &[ag(1, 0, 20, 16)],
        "reject H1617 root",
    ));
    v.push(stream(
        "stream-reduce-scatter-block",
        BOTH,
        O::ReduceScatter,
        Some(16),
        P::Partial,
        3,
        &[chunk(header(O::ReduceScatter, P::Partial, 3), 0, 16, 16)],
        "accept",
    ));
    // bcast: OPEN from the root, then FINAL chunks from the parent.
    let bc = |ph| header(O::Bcast, ph, 1);
    let b = |name: &str, length, phase, frames: &[Vec<u8>], verdict: &str| {
        stream(name, BOTH, O::Bcast, length, phase, 1, frames, verdict)
    };
    v.push(b(
        "stream-bcast-open-length-unknown",
        None,
        P::Open,
        &[open(bc(P::Open), 1000, 1)],
        "accept",
    ));
    v.push(b(
        "stream-bcast-open-other-known-length",
        Some(999),
        P::Open,
        &[open(bc(P::Open), 1000, 3)],
        "reject H1617 total",
    ));
    v.push(b(
        "stream-bcast-open-fanout-not-below-size",
        None,
        P::Open,
        &[open(bc(P::Open), 1000, 4)],
        "reject H1617 fanout",
    ));
    v.push(b(
        "stream-bcast-final",
        Some(19),
        P::Final,
        &[
            chunk(bc(P::Final), 0, 19, 8),
            chunk(bc(P::Final), 8, 19, 8),
            chunk(bc(P::Final), 16, 19, 3),
        ],
        "accept",
    ));
    v.push(b(
        "stream-bcast-final-other-root",
        Some(19),
        P::Final,
        &[chunk(header(O::Bcast, P::Final, 0), 0, 19, 8)],
        "reject H1617 root",
    ));
    // OPEN at the collector (protocol §14.3, checks 2 and 4 of §14.4).
    let collect = |name: &str, op, length, phase, frames: &[Vec<u8>], verdict: &str| {
        stream(name, BOTH, op, Some(length), phase, 0, frames, verdict)
    };
    v.push(collect(
        "stream-open-at-the-collector",
        O::Allreduce,
        40,
        P::Open,
        &[open(ar(P::Open), 40, 1)],
        "accept",
    ));
    v.push(collect(
        "stream-open-other-contribution-length",
        O::Allreduce,
        40,
        P::Open,
        &[open(ar(P::Open), 48, 1)],
        "reject H1618 total",
    ));
    v.push(collect(
        "stream-open-other-block-length",
        O::Allgather,
        40,
        P::Open,
        &[open(header(O::Allgather, P::Open, 0), 48, 1)],
        "reject H1617 total",
    ));
    v.push(collect(
        "stream-star-frame-where-open-is-due",
        O::Allreduce,
        40,
        P::Open,
        &[star(ar(P::ToRoot), 8)],
        "reject H1618 shape",
    ));
    v.push(collect(
        "stream-open-where-star-frame-is-due",
        O::Allreduce,
        40,
        P::ToRoot,
        &[open(ar(P::Open), 400_000, 1)],
        "reject H1618 shape",
    ));
    v.push(collect(
        "stream-reduce-frame-where-reduce-scatter-open-is-due",
        O::ReduceScatter,
        40,
        P::Open,
        &[star(header(O::Reduce, P::ToRoot, 0), 8)],
        "reject H1618 shape",
    ));
    v.push(collect(
        "stream-gather-frame-where-allgather-open-is-due",
        O::Allgather,
        40,
        P::Open,
        &[star(header(O::Gather, P::ToRoot, 0), 8)],
        "reject H1617 shape",
    ));
    // Check 2 for every row of its table (protocol §14.4), and what a
    // frame of another sequence is instead.
    let open_of = |op| open(header(op, P::Open, 0), 400_000, 1);
    for (name, op, phase, frame, verdict) in [
        (
            "stream-reduce-frame-where-reduce-open-is-due",
            O::Reduce,
            P::Open,
            star(header(O::Reduce, P::ToRoot, 0), 8),
            "reject H1618 shape",
        ),
        (
            "stream-reduce-open-where-star-frame-is-due",
            O::Reduce,
            P::ToRoot,
            open_of(O::Reduce),
            "reject H1618 shape",
        ),
        (
            "stream-reduce-scatter-open-where-reduce-frame-is-due",
            O::Reduce,
            P::ToRoot,
            open_of(O::ReduceScatter),
            "reject H1618 shape",
        ),
        (
            "stream-allgather-open-where-gather-frame-is-due",
            O::Gather,
            P::ToRoot,
            open_of(O::Allgather),
            "reject H1617 shape",
        ),
        (
            "stream-shape-whatever-the-element-type",
            O::ReduceScatter,
            P::Open,
            with_byte(star(header(O::Reduce, P::ToRoot, 0), 8), 1, 5),
            "reject H1618 shape",
        ),
        (
            "stream-star-frame-of-the-next-call-where-open-is-due",
            O::Allreduce,
            P::Open,
            with_byte(star(ar(P::ToRoot), 8), 8, 8),
            "reject H1617 phase",
        ),
        (
            "stream-reduce-frame-of-the-next-call-where-reduce-scatter-open-is-due",
            O::ReduceScatter,
            P::Open,
            with_byte(star(header(O::Reduce, P::ToRoot, 0), 8), 8, 8),
            "reject H1617 operation",
        ),
        (
            "stream-open-of-the-next-call-where-star-frame-is-due",
            O::Allreduce,
            P::ToRoot,
            with_byte(open_of(O::Allreduce), 8, 8),
            "reject H1617 phase",
        ),
    ] {
        v.push(collect(name, op, 40, phase, &[frame], verdict));
    }
    // Check 4 at a bcast receiver: the fanout before the total.
    v.push(b(
        "stream-bcast-open-fanout-and-total-both-wrong",
        Some(999),
        P::Open,
        &[open(bc(P::Open), 1000, 4)],
        "reject H1617 fanout",
    ));
    // Protocol §8.4: a pair that decodes but that no call of its
    // operation sends, a root or a sequence that does not fit: the call
    // judges them (H1617), with and without bit 1.
    let mut seq0 = star(ar(P::ToRoot), 8);
    seq0[8..16].fill(0);
    for (fname, features) in [("", FEATURE_V1_CORE), ("-with-bit-1", BOTH)] {
        for (name, op, length, phase, root, frame, verdict) in [
            (
                "stream-v1-star-frame",
                O::Allreduce,
                Some(8),
                P::ToRoot,
                0,
                star(ar(P::ToRoot), 8),
                "accept",
            ),
            (
                "stream-bcast-phase-0-is-never-due",
                O::Bcast,
                None,
                P::FromRoot,
                1,
                star(header(O::Bcast, P::ToRoot, 1), 8),
                "reject H1617 phase",
            ),
            (
                "stream-reduce-phase-1-is-never-due",
                O::Reduce,
                Some(8),
                P::ToRoot,
                0,
                star(header(O::Reduce, P::FromRoot, 0), 8),
                "reject H1617 phase",
            ),
            (
                "stream-gather-phase-1-is-never-due",
                O::Gather,
                Some(8),
                P::ToRoot,
                0,
                star(header(O::Gather, P::FromRoot, 0), 8),
                "reject H1617 phase",
            ),
            (
                "stream-scatter-phase-0-is-never-due",
                O::Scatter,
                None,
                P::FromRoot,
                1,
                star(header(O::Scatter, P::ToRoot, 1), 8),
                "reject H1617 phase",
            ),
            (
                "stream-root-not-below-size",
                O::Bcast,
                None,
                P::FromRoot,
                1,
                star(header(O::Bcast, P::FromRoot, 4095), 8),
                "reject H1617 root",
            ),
            (
                "stream-barrier-root-1",
                O::Barrier,
                Some(0),
                P::ToRoot,
                0,
                star(header(O::Barrier, P::ToRoot, 1), 0),
                "reject H1617 root",
            ),
            (
                "stream-sequence-0",
                O::Allreduce,
                Some(8),
                P::ToRoot,
                0,
                seq0.clone(),
                "reject H1617 sequence",
            ),
        ] {
            v.push(stream(
                &format!("{name}{fname}"),
                features,
                op,
                length,
                phase,
                root,
                &[frame],
                verdict,
            ));
        }
    }
    let mut res = open(ar(P::Open), 40, 1);
    res[28] = 1;
    let mut long = open(ar(P::Open), 40, 1);
    long.push(0);
    for (name, p, verdict) in [
        ("stream-open-reserved", res, "reject H1610 open_reserved"),
        ("stream-open-17-bytes", long, "reject H1610 open_length"),
        (
            "stream-open-total-0",
            open(ar(P::Open), 0, 1),
            "reject H1610 open_total",
        ),
        (
            "stream-open-fanout-0",
            open(ar(P::Open), 40, 0),
            "reject H1610 open_fanout",
        ),
    ] {
        v.push(collect(name, O::Allreduce, 40, P::Open, &[p], verdict));
    }
    v
}

/// Every bit-1 entry.
pub fn entries() -> Vec<Entry> {
    let mut v = frames();
    v.extend(streams());
    v
}
