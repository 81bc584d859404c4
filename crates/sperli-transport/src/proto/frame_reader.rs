//! Incremental frame decoder (protocol §6; the header check order is
//! protocol §6.2).
//!
//! Fed arbitrary chunks of plaintext (one byte at a time works too). It
//! collects the 52 header bytes, runs [`sperli_wire::header::check`]
//! *before* reading or allocating any payload byte, asks its
//! [`FrameSink`] whether the frame may come now (the connection's state:
//! nothing before HELLO, nothing after BYE) and where its payload goes,
//! then collects exactly `length` payload bytes into a buffer allocated
//! once for that frame (a frame of an older incarnation is read and
//! dropped without being stored), and finally checks the payload with
//! [`Payload::decode_with`].
//!
//! Checks 12 (tag) and 13 (payload) of protocol §6.2 depend on the job's
//! negotiated HELLO features: a COLLECTIVE tag is a communicator id only
//! with bit 2 (§15.2), the pipelined payloads of §14.2 decode only with
//! bit 1. The reader judges every frame with the features its sink knows
//! at that moment ([`FrameSink::features`]; the connection's: the AND of
//! both HELLOs, then the job's once set-up is done), else with its
//! [`Receiver`]'s. With a [`BufPool`] ([`FrameReader::with_pool`])
//! that buffer is taken from the pool (again only after the header check,
//! by the checked length), so a rank that hands its received buffers back
//! reuses them.
//!
//! A DATA payload, which any bytes decode as (protocol §7.2), may instead
//! be streamed: the sink answers [`PayloadDest::Stream`] and gets the
//! payload piece by piece in [`FrameSink::chunk`], as the bytes come,
//! without a buffer of the reader's own (how `recv_large` receives
//! straight into the message it assembles).

use std::sync::Arc;

use sperli_wire::error::FrameError;
use sperli_wire::header::{check, FrameHeader, Receiver, Verdict};
use sperli_wire::limits::HEADER_LEN;
use sperli_wire::payload::Payload;
use sperli_wire::{Error, FrameType};

use crate::pool::BufPool;

/// One whole, accepted frame: its header and its payload bytes, which
/// passed [`Payload::decode`] for the header's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The checked header.
    pub header: FrameHeader,
    /// The payload (exactly `header.length` bytes).
    pub payload: Vec<u8>,
}

impl Frame {
    /// The decoded payload (cannot fail: the reader decoded it already).
    pub fn decoded(&self) -> Payload<'_> {
        Payload::decode(self.header.frame_type, &self.payload)
            .expect("FrameReader only yields payloads that decode")
    }
}

/// Where an accepted frame's payload goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadDest {
    /// Into a buffer of its own, handed over whole in [`FrameSink::frame`].
    Collect,
    /// Piece by piece to [`FrameSink::chunk`], then
    /// [`FrameSink::end_stream`] (DATA only; any other type is collected).
    Stream,
}

/// What the reader reports to: the connection that owns it.
pub trait FrameSink {
    /// A header passed the check of protocol §6.2; no payload byte is read
    /// or allocated yet. An error rejects the frame here.
    fn header(&mut self, header: &FrameHeader) -> Result<PayloadDest, Error>;
    /// A piece of a streamed DATA payload, in order.
    fn chunk(&mut self, header: &FrameHeader, bytes: &[u8]);
    /// A streamed DATA frame is complete.
    fn end_stream(&mut self, header: &FrameHeader) -> Result<(), Error>;
    /// A collected frame is complete and its payload decoded.
    fn frame(&mut self, frame: Frame) -> Result<(), Error>;
    /// The job's HELLO features as the sink knows them now (protocol §6.2
    /// checks 12 and 13), asked for every header; `None`: the reader's own
    /// [`Receiver::features`].
    fn features(&self) -> Option<u64> {
        None
    }
    /// The receiver's current membership epoch, judged with feature bit 5
    /// (protocol §18.2). Default: 1, the epoch set-up makes.
    fn membership_epoch(&self) -> u32 {
        1
    }
    /// Asked after each complete frame: true stops the feed right there,
    /// at the frame boundary ([`FrameReader::feed`] returns how much it
    /// took), so what the frame completed can act before the next header
    /// is judged. Default: never.
    fn pause(&mut self) -> bool {
        false
    }
}

/// A [`FrameSink`] that collects every frame and hands it to a closure
/// (tests, fuzzing, simple users); frames are judged with the reader's
/// [`Receiver::features`].
pub struct Collect<F>(pub F);

impl<F: FnMut(Frame) -> Result<(), Error>> FrameSink for Collect<F> {
    fn header(&mut self, _: &FrameHeader) -> Result<PayloadDest, Error> {
        Ok(PayloadDest::Collect)
    }
    fn chunk(&mut self, _: &FrameHeader, _: &[u8]) {}
    fn end_stream(&mut self, _: &FrameHeader) -> Result<(), Error> {
        Ok(())
    }
    fn frame(&mut self, frame: Frame) -> Result<(), Error> {
        (self.0)(frame)
    }
}

#[derive(Debug)]
enum State {
    Header,
    Payload {
        header: FrameHeader,
        left: usize,
        /// The features the header was judged with (the payload is judged
        /// with the same).
        features: u64,
    },
    Stream {
        header: FrameHeader,
        left: usize,
    },
    Discard {
        left: usize,
    },
    Failed,
}

/// The incremental decoder of one connection's plaintext.
#[derive(Debug)]
pub struct FrameReader {
    rx: Receiver,
    head: [u8; HEADER_LEN],
    head_len: usize,
    payload: Vec<u8>,
    state: State,
    pool: Option<Arc<BufPool>>,
}

impl FrameReader {
    /// A reader for a connection whose receiver-side expectations are `rx`.
    pub fn new(rx: Receiver) -> Self {
        Self {
            rx,
            head: [0; HEADER_LEN],
            head_len: 0,
            payload: Vec::new(),
            state: State::Header,
            pool: None,
        }
    }

    /// A reader that takes its payload buffers from `pool`.
    pub fn with_pool(rx: Receiver, pool: Arc<BufPool>) -> Self {
        Self {
            pool: Some(pool),
            ..Self::new(rx)
        }
    }

    /// Capacity of the payload buffer currently held (0 between frames and
    /// after a rejected header: nothing is allocated for a rejected frame).
    pub fn payload_capacity(&self) -> usize {
        self.payload.capacity()
    }

    /// True when no frame is partly read.
    pub fn at_frame_boundary(&self) -> bool {
        matches!(self.state, State::Header) && self.head_len == 0
    }

    /// Bytes read of the frame in progress and its total (header + payload),
    /// for [`FrameError::CutShort`] when the connection closes mid-frame.
    pub fn progress(&self) -> (usize, usize) {
        match &self.state {
            State::Header | State::Failed => (self.head_len, HEADER_LEN),
            State::Payload { header, left, .. } | State::Stream { header, left } => {
                let total = HEADER_LEN + header.length as usize;
                (total - left, total)
            }
            State::Discard { left } => (HEADER_LEN, HEADER_LEN + left),
        }
    }

    /// Feeds `input`; reports headers, streamed pieces and whole frames to
    /// `sink`, and returns how many bytes it took: all of them, unless the
    /// sink asked for a pause after a frame. The first rejection is
    /// returned and the reader refuses all further input.
    pub fn feed(&mut self, mut input: &[u8], sink: &mut dyn FrameSink) -> Result<usize, Error> {
        let total = input.len();
        while !input.is_empty() || self.frame_complete() {
            match &mut self.state {
                State::Failed => {
                    return Err(FrameError::Unexpected {
                        frame_type: FrameType::Data,
                        when: "after a rejected frame",
                    }
                    .into())
                }
                State::Header => {
                    let n = (HEADER_LEN - self.head_len).min(input.len());
                    self.head[self.head_len..self.head_len + n].copy_from_slice(&input[..n]);
                    self.head_len += n;
                    input = &input[n..];
                    if self.head_len < HEADER_LEN {
                        continue;
                    }
                    self.head_len = 0;
                    let features = sink.features().unwrap_or(self.rx.features);
                    let rx = Receiver {
                        features,
                        membership_epoch: sink.membership_epoch(),
                        ..self.rx
                    };
                    match check(&self.head, &rx) {
                        Verdict::Reject(e) => {
                            self.state = State::Failed;
                            return Err(e.into());
                        }
                        Verdict::Discard { length } => {
                            // "discard. The receiver reads the frame's
                            // `length` payload bytes and drops them;
                            // nothing else happens." (protocol §1.2)
                            self.state = State::Discard {
                                left: length as usize,
                            };
                        }
                        Verdict::Accept(header) => {
                            let dest = match sink.header(&header) {
                                Ok(d) => d,
                                Err(e) => {
                                    self.state = State::Failed;
                                    return Err(e);
                                }
                            };
                            let left = header.length as usize;
                            if dest == PayloadDest::Stream && header.frame_type == FrameType::Data {
                                self.state = State::Stream { header, left };
                                continue;
                            }
                            // Allocated (or taken from the pool) only now,
                            // after the header check, and exactly once: the
                            // header is checked "before it reads or
                            // allocates any payload byte" (protocol §6.2).
                            self.payload = match &self.pool {
                                Some(p) => p.take(left),
                                None => Vec::with_capacity(left),
                            };
                            self.state = State::Payload {
                                header,
                                left,
                                features,
                            };
                        }
                    }
                }
                State::Discard { left } => {
                    let n = (*left).min(input.len());
                    *left -= n;
                    input = &input[n..];
                    if *left == 0 {
                        self.state = State::Header;
                    }
                }
                State::Stream { header, left } => {
                    let n = (*left).min(input.len());
                    let header = *header;
                    *left -= n;
                    let done = *left == 0;
                    if n > 0 {
                        sink.chunk(&header, &input[..n]);
                    }
                    input = &input[n..];
                    if done {
                        self.state = State::Header;
                        if let Err(e) = sink.end_stream(&header) {
                            self.state = State::Failed;
                            return Err(e);
                        }
                        if sink.pause() {
                            return Ok(total - input.len());
                        }
                    }
                }
                State::Payload {
                    header,
                    left,
                    features,
                } => {
                    let n = (*left).min(input.len());
                    self.payload.extend_from_slice(&input[..n]);
                    *left -= n;
                    input = &input[n..];
                    if *left == 0 {
                        let (header, features) = (*header, *features);
                        self.state = State::Header;
                        let payload = std::mem::take(&mut self.payload);
                        let decoded = Payload::decode_with(header.frame_type, &payload, features);
                        if let Err(e) = decoded {
                            self.state = State::Failed;
                            return Err(e.into());
                        }
                        if let Err(e) = sink.frame(Frame { header, payload }) {
                            self.state = State::Failed;
                            return Err(e);
                        }
                        if sink.pause() {
                            return Ok(total - input.len());
                        }
                    }
                }
            }
        }
        Ok(total)
    }

    /// A zero-length payload is complete as soon as its header is.
    fn frame_complete(&self) -> bool {
        matches!(
            self.state,
            State::Payload { left: 0, .. }
                | State::Stream { left: 0, .. }
                | State::Discard { left: 0 }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_wire::frame::encode_frame;
    use sperli_wire::header::RawHeader;
    use sperli_wire::{data::Data, FrameType, JobId};

    fn rx() -> Receiver {
        Receiver {
            job_id: JobId([9; 16]),
            own_rank: 1,
            peer_rank: 0,
            incarnation: 2,
            size: 3,
            features: sperli_wire::limits::FEATURE_V1_CORE,
            membership_epoch: 0,
        }
    }

    fn data(tag: u32, msg: &[u8], inc: u32) -> Vec<u8> {
        let h = FrameHeader::new(FrameType::Data, JobId([9; 16]), 0, 1, inc).with_tag(tag);
        encode_frame(h, &Payload::Data(Data(msg)))
    }

    fn feed_all(r: &mut FrameReader, bytes: &[u8], chunk: usize) -> Result<Vec<Frame>, Error> {
        let mut out = Vec::new();
        for c in bytes.chunks(chunk) {
            r.feed(
                c,
                &mut Collect(|f| {
                    out.push(f);
                    Ok(())
                }),
            )?;
        }
        Ok(out)
    }

    #[test]
    fn one_byte_at_a_time() {
        let mut stream = data(5, b"hello", 2);
        stream.extend(data(6, b"", 2));
        stream.extend(data(7, b"old", 1)); // older incarnation: dropped
        stream.extend(data(8, &[7; 1000], 2));
        for chunk in [1, 3, 52, 53, 4096] {
            let mut r = FrameReader::new(rx());
            let frames = feed_all(&mut r, &stream, chunk).unwrap();
            let got: Vec<(u32, usize)> = frames
                .iter()
                .map(|f| (f.header.tag, f.payload.len()))
                .collect();
            assert_eq!(got, vec![(5, 5), (6, 0), (8, 1000)], "chunk {chunk}");
            assert_eq!(frames[0].payload, b"hello");
            assert!(r.at_frame_boundary());
        }
    }

    #[test]
    fn too_long_is_rejected_without_allocating() {
        let raw = RawHeader {
            length: 16_777_217,
            frame_type: FrameType::Data.code(),
            job_id: JobId([9; 16]),
            source: 0,
            target: 1,
            incarnation: 2,
            ..RawHeader::default()
        };
        let mut r = FrameReader::new(rx());
        let err = feed_all(&mut r, &raw.to_bytes(), 1).unwrap_err();
        assert!(matches!(
            err,
            sperli_wire::Error::FrameRejected(FrameError::TooLong {
                got: 16_777_217,
                ..
            })
        ));
        assert_eq!(r.payload_capacity(), 0, "nothing allocated for the payload");
        // The reader refuses everything after a rejection.
        assert!(feed_all(&mut r, &data(1, b"x", 2), 1).is_err());
    }

    #[test]
    fn max_length_header_allocates_only_after_check() {
        let h = RawHeader {
            length: 16_777_216,
            frame_type: FrameType::Data.code(),
            job_id: JobId([9; 16]),
            source: 0,
            target: 1,
            incarnation: 2,
            ..RawHeader::default()
        };
        let mut r = FrameReader::new(rx());
        let bytes = h.to_bytes();
        feed_all(&mut r, &bytes[..51], 1).unwrap();
        assert_eq!(r.payload_capacity(), 0);
        feed_all(&mut r, &bytes[51..], 1).unwrap();
        assert_eq!(r.payload_capacity(), 16_777_216);
        assert_eq!(r.progress(), (52, 52 + 16_777_216));
    }

    #[test]
    fn older_incarnation_payload_is_not_stored() {
        let mut r = FrameReader::new(rx());
        let old = data(3, &[1; 5000], 1);
        feed_all(&mut r, &old[..2000], 7).unwrap();
        assert_eq!(r.payload_capacity(), 0);
        let frames = feed_all(&mut r, &old[2000..], 7).unwrap();
        assert!(frames.is_empty());
        assert!(r.at_frame_boundary());
    }

    /// Streams DATA of tag 8, refuses tag 9 on its header.
    #[derive(Default)]
    struct Picky {
        frames: Vec<u32>,
        streamed: Vec<u8>,
        ends: usize,
    }

    impl FrameSink for Picky {
        fn header(&mut self, h: &FrameHeader) -> Result<PayloadDest, Error> {
            match h.tag {
                8 => Ok(PayloadDest::Stream),
                9 => Err(FrameError::Unexpected {
                    frame_type: h.frame_type,
                    when: "in this test",
                }
                .into()),
                _ => Ok(PayloadDest::Collect),
            }
        }
        fn chunk(&mut self, _: &FrameHeader, bytes: &[u8]) {
            self.streamed.extend_from_slice(bytes);
        }
        fn end_stream(&mut self, _: &FrameHeader) -> Result<(), Error> {
            self.ends += 1;
            Ok(())
        }
        fn frame(&mut self, f: Frame) -> Result<(), Error> {
            self.frames.push(f.header.tag);
            Ok(())
        }
    }

    #[test]
    fn the_sink_streams_or_refuses_on_the_header() {
        let mut stream = data(8, &[5; 3000], 2);
        stream.extend(data(8, b"", 2));
        stream.extend(data(4, b"kept", 2));
        for chunk in [1, 7, 4096] {
            let mut r = FrameReader::new(rx());
            let mut sink = Picky::default();
            for c in stream.chunks(chunk) {
                r.feed(c, &mut sink).unwrap();
            }
            assert_eq!(sink.streamed, vec![5; 3000], "chunk {chunk}");
            assert_eq!(sink.ends, 2, "the empty frame ends too");
            assert_eq!(sink.frames, vec![4]);
            assert_eq!(r.payload_capacity(), 0, "streams need no buffer");
        }
        // Refused on its header: nothing of the payload is allocated.
        let mut r = FrameReader::new(rx());
        let refused = data(9, &[1; 100_000], 2);
        assert!(r.feed(&refused[..60], &mut Picky::default()).is_err());
        assert_eq!(r.payload_capacity(), 0);
    }

    /// Pauses after every frame.
    struct Pausing(Vec<u32>);

    impl FrameSink for Pausing {
        fn header(&mut self, _: &FrameHeader) -> Result<PayloadDest, Error> {
            Ok(PayloadDest::Collect)
        }
        fn chunk(&mut self, _: &FrameHeader, _: &[u8]) {}
        fn end_stream(&mut self, _: &FrameHeader) -> Result<(), Error> {
            Ok(())
        }
        fn frame(&mut self, f: Frame) -> Result<(), Error> {
            self.0.push(f.header.tag);
            Ok(())
        }
        fn pause(&mut self) -> bool {
            true
        }
    }

    #[test]
    fn a_pause_stops_the_feed_at_the_frame_boundary() {
        let mut stream = data(1, b"one", 2);
        let first = stream.len();
        stream.extend(data(2, b"two", 2));
        let mut r = FrameReader::new(rx());
        let mut sink = Pausing(Vec::new());
        let n = r.feed(&stream, &mut sink).unwrap();
        assert_eq!(n, first, "stopped after the first frame");
        assert_eq!(sink.0, vec![1]);
        assert!(r.at_frame_boundary());
        assert_eq!(r.feed(&stream[n..], &mut sink).unwrap(), stream.len() - n);
        assert_eq!(sink.0, vec![1, 2]);
    }

    #[test]
    fn pooled_reader_takes_buffers_only_after_the_header_check() {
        let pool = Arc::new(BufPool::new());
        let mut spare = Vec::with_capacity(1 << 20);
        spare.push(1u8);
        let ptr = spare.as_ptr();
        pool.put(spare);
        // A rejected header (too long) takes nothing from the pool.
        let raw = RawHeader {
            length: 16_777_217,
            frame_type: FrameType::Data.code(),
            job_id: JobId([9; 16]),
            source: 0,
            target: 1,
            incarnation: 2,
            ..RawHeader::default()
        };
        let mut r = FrameReader::with_pool(rx(), pool.clone());
        assert!(feed_all(&mut r, &raw.to_bytes(), 1).is_err());
        assert_eq!(pool.held(), (1, 1 << 20));
        // An accepted 600 KiB frame is read into the pooled buffer.
        let msg: Vec<u8> = (0..600 * 1024).map(|i| i as u8).collect();
        let mut r = FrameReader::with_pool(rx(), pool.clone());
        let frames = feed_all(&mut r, &data(4, &msg, 2), 4096).unwrap();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].payload, msg);
        assert_eq!(frames[0].payload.as_ptr(), ptr, "the pooled allocation");
        assert_eq!(pool.held().0, 0);
        // Small frames are allocated as before.
        let frames = feed_all(&mut r, &data(5, b"tiny", 2), 7).unwrap();
        assert_eq!(frames[0].payload, b"tiny");
    }
}
