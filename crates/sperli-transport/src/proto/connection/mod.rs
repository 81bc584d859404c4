//! Per-connection protocol state, sans I/O (protocol §5, §7.1 HELLO, §7.4
//! HEARTBEAT, §7.5 ABORT, §7.6 BYE).
//!
//! A [`Connection`] is driven by `handle_*` (plaintext bytes in, an orderly
//! close, a reset) and [`Connection::poll`] (the clock: heartbeats due,
//! silence limit). Outgoing frames queue here; whoever writes the socket
//! moves them into rustls with [`Connection::write_to`], or writes one
//! frame straight from the caller's buffer ([`Connection::open_direct`]).
//! Nothing here touches a socket, so the whole state machine is tested
//! without one.
//!
//! States: awaiting HELLO (nothing but HELLO may come first), open, BYE
//! received (any frame after it is rejected), closed. The state is judged
//! when a frame's header has passed the check of protocol §6.2, before any
//! of its payload is read.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sperli_tls::composite_sig::PublicKey;
use sperli_tls::join_token::{self, TokenExpectation};
use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::codec::Codec;
use sperli_wire::error::{AuthError, FrameError, LossCause, TokenError};
use sperli_wire::header::{FrameHeader, Receiver};
use sperli_wire::heartbeat::Heartbeat;
use sperli_wire::hello::Hello;
use sperli_wire::job_description::HostEntry;
use sperli_wire::join_token::JoinToken;
use sperli_wire::limits::{FEATURE_V1_CORE, HEADER_LEN, HEARTBEAT_INTERVAL_MS};
use sperli_wire::payload::Payload;
use sperli_wire::refused_hosts::RefusedHosts;
use sperli_wire::{Error, FrameType, JobId};

use crate::pool::BufPool;
use crate::proto::frame_reader::{Frame, FrameReader, FrameSink, PayloadDest};

/// What every connection of one rank knows about the job.
#[derive(Debug, Clone)]
pub struct JobContext {
    /// The job id.
    pub job_id: JobId,
    /// The job size.
    pub size: u32,
    /// This rank.
    pub rank: u32,
    /// This rank's incarnation.
    pub incarnation: u32,
    /// Host list, entry n is rank n.
    pub hosts: Vec<HostEntry>,
    /// The CompositeSig job public key (1344 bytes).
    pub job_public_key: Vec<u8>,
    /// The refused-host policy (a token naming a refused host is H1614).
    pub refused: RefusedHosts,
    /// The feature bits this rank announces in its HELLO (bit 0 always
    /// set; protocol §7.1.1).
    pub features: u64,
}

impl JobContext {
    /// A header of `t` from this rank to `peer`.
    pub fn header(&self, t: FrameType, peer: u32) -> FrameHeader {
        FrameHeader::new(t, self.job_id, self.rank, peer, self.incarnation)
    }
}

/// Checks a join token presented in a peer's HELLO (protocol text "HELLO",
/// "Join-Token"; layouts §4) with `sperli_tls::join_token::verify_token`:
/// signature with the job public key, job id, rank = header source =
/// certificate rank (`peer`, the only source the header check lets
/// through), size, incarnation, host = host-list entry of that rank (and
/// not refused), expiry after the receiver's clock `now_ms` (Unix ms).
/// Fails with H1611 (H1614 for a refused host).
pub fn verify_token(ctx: &JobContext, peer: u32, token: &[u8], now_ms: u64) -> Result<(), Error> {
    let auth = |error| Error::Authentication {
        peer: Some(peer),
        error: AuthError::Token(error),
    };
    let pk =
        PublicKey::from_bytes(&ctx.job_public_key).map_err(|_| auth(TokenError::BadSignature))?;
    let host = ctx
        .hosts
        .get(peer as usize)
        .map(|h| h.host.as_str())
        .unwrap_or("");
    let exp = TokenExpectation {
        job_id: ctx.job_id,
        rank_from_header: peer,
        rank_from_cert: peer,
        size: ctx.size,
        incarnation: ctx.incarnation,
        host_of_that_rank: host,
        now_ms,
        refused: &ctx.refused,
    };
    join_token::verify_token(token, &exp, &pk).map(|_| ())
}

/// The connection's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnState {
    /// TLS is up; the peer's HELLO has not come yet.
    AwaitingHello,
    /// HELLO verified: the peer is authenticated.
    Open,
    /// The peer said BYE; any further frame is rejected.
    ByeReceived,
    /// Closed (after BYE and close, or after a failure).
    Closed,
}

/// What an accepted frame means for the rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// The peer's HELLO verified; `features` are the bits it announced
    /// (protocol §7.1.1).
    Authenticated {
        /// The peer's HELLO feature bits.
        features: u64,
    },
    /// DATA with its tag.
    Data {
        /// The tag.
        tag: u32,
        /// The message.
        payload: Vec<u8>,
    },
    /// A COLLECTIVE payload (16-byte collective header + data).
    Collective(Vec<u8>),
    /// CKPT_BEGIN/DATA/ACK/COMMIT or RESUME: the header (type, epoch) and payload.
    Checkpoint(FrameHeader, Vec<u8>),
    /// The peer said BYE.
    Bye,
}

/// Where a connection delivers what it accepts.
pub trait Deliver {
    /// An accepted frame (or the peer's authentication).
    fn incoming(&mut self, inc: Incoming);
    /// A DATA frame of `len` bytes with `tag` passed the checks: true to
    /// have its payload streamed to [`Deliver::chunk`] as it arrives
    /// instead of delivered whole. Default: whole.
    fn stream(&mut self, _tag: u32, _len: usize) -> bool {
        false
    }
    /// A piece of the streamed DATA payload, in order.
    fn chunk(&mut self, _bytes: &[u8]) {}
    /// The streamed DATA frame with `tag` is complete.
    fn end_stream(&mut self, _tag: u32) {}
}

impl Deliver for Vec<Incoming> {
    fn incoming(&mut self, inc: Incoming) {
        self.push(inc);
    }
}

/// One queued outgoing frame: the header (plus up to 8 inline payload
/// bytes, so a HEARTBEAT needs no allocation) and the payload.
#[derive(Debug)]
pub struct Outgoing {
    head: [u8; HEADER_LEN + 8],
    head_len: usize,
    payload: Vec<u8>,
    /// A send sequence number to report when written (0: none).
    pub seq: u64,
}

impl Outgoing {
    /// A frame with `header` (its length set here) and `payload`.
    pub fn new(mut header: FrameHeader, payload: Vec<u8>, seq: u64) -> Self {
        header.length = payload.len() as u32;
        let mut head = [0u8; HEADER_LEN + 8];
        head[..HEADER_LEN].copy_from_slice(&header.to_bytes());
        Self {
            head,
            head_len: HEADER_LEN,
            payload,
            seq,
        }
    }

    /// Raw bytes, sent as they are (tests of hostile peers use this).
    pub fn raw(bytes: Vec<u8>) -> Self {
        Self {
            head: [0; HEADER_LEN + 8],
            head_len: 0,
            payload: bytes,
            seq: 0,
        }
    }

    fn heartbeat(header: FrameHeader, counter: u64) -> Self {
        let mut h = header;
        h.length = 8;
        let mut head = [0u8; HEADER_LEN + 8];
        head[..HEADER_LEN].copy_from_slice(&h.to_bytes());
        head[HEADER_LEN..].copy_from_slice(&counter.to_le_bytes());
        Self {
            head,
            head_len: HEADER_LEN + 8,
            payload: Vec::new(),
            seq: 0,
        }
    }

    fn len(&self) -> usize {
        self.head_len + self.payload.len()
    }
}

/// Per-connection protocol state (see the module docs).
#[derive(Debug)]
pub struct Connection {
    ctx: Arc<JobContext>,
    peer: u32,
    reader: FrameReader,
    state: ConnState,
    last_sent: Instant,
    last_recv: Instant,
    silence: Duration,
    hb_sent: u64,
    hb_recv: u64,
    bye_sent: bool,
    out: VecDeque<Outgoing>,
    out_offset: usize,
    /// A frame written straight from a caller's buffer, in progress:
    /// queued frames wait behind it.
    direct: Option<Direct>,
    /// Where received payloads come from and written payloads go back to.
    pool: Option<Arc<BufPool>>,
}

/// The frame of [`Connection::open_direct`] in progress.
#[derive(Debug)]
struct Direct {
    head: [u8; HEADER_LEN],
    head_off: usize,
    left: usize,
}

/// The heartbeat interval (protocol text "HEARTBEAT": 1000 ms).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(HEARTBEAT_INTERVAL_MS);

impl Connection {
    /// A connection to `peer` (the rank its certificate names) whose TLS
    /// handshake just finished, at time `now`; HELLO is not sent yet.
    pub fn new(ctx: Arc<JobContext>, peer: u32, silence: Duration, now: Instant) -> Self {
        let rx = Receiver {
            job_id: ctx.job_id,
            own_rank: ctx.rank,
            peer_rank: peer,
            incarnation: ctx.incarnation,
            size: ctx.size,
        };
        Self {
            ctx,
            peer,
            reader: FrameReader::new(rx),
            state: ConnState::AwaitingHello,
            last_sent: now,
            last_recv: now,
            silence,
            hb_sent: 0,
            hb_recv: 0,
            bye_sent: false,
            out: VecDeque::new(),
            out_offset: 0,
            direct: None,
            pool: None,
        }
    }

    /// As [`Connection::new`], with payload buffers from `pool`: received
    /// payloads are taken from it (after the header check), written
    /// payloads go back to it.
    pub fn with_pool(
        ctx: Arc<JobContext>,
        peer: u32,
        silence: Duration,
        now: Instant,
        pool: Arc<BufPool>,
    ) -> Self {
        let mut c = Self::new(ctx, peer, silence, now);
        c.reader = FrameReader::with_pool(c.rx(), pool.clone());
        c.pool = Some(pool);
        c
    }

    /// The peer's rank.
    pub fn peer(&self) -> u32 {
        self.peer
    }

    /// The state.
    pub fn state(&self) -> ConnState {
        self.state
    }

    /// True once we queued BYE (nothing else may follow it).
    pub fn bye_sent(&self) -> bool {
        self.bye_sent
    }

    /// Queues our HELLO with `token` (protocol text "HELLO": sent at once
    /// after the handshake).
    pub fn queue_hello(&mut self, token: &[u8], now: Instant) -> Result<(), Error> {
        let token = JoinToken::decode(token).map_err(|e| Error::Authentication {
            peer: None,
            error: AuthError::Token(TokenError::Malformed(e)),
        })?;
        let hello = Hello {
            features: self.ctx.features | FEATURE_V1_CORE,
            token,
        };
        self.queue(FrameType::Hello, hello.to_vec(), now);
        Ok(())
    }

    /// Queues a frame of type `t` (tag 0, epoch 0).
    pub fn queue(&mut self, t: FrameType, payload: Vec<u8>, now: Instant) {
        let h = self.ctx.header(t, self.peer);
        self.queue_frame(Outgoing::new(h, payload, 0), now);
    }

    /// Queues a prepared frame.
    pub fn queue_frame(&mut self, frame: Outgoing, now: Instant) {
        if self.bye_sent {
            return;
        }
        self.last_sent = now;
        self.out.push_back(frame);
    }

    /// Opens a frame with `header` (its length set here to `len`) whose
    /// payload the caller then writes from its own buffer with
    /// [`Connection::write_direct`], piece by piece as the TLS writer takes
    /// it; queued frames wait until it is complete. False, and nothing
    /// opened, when frames are queued ahead of it (order first), another
    /// direct frame is open, or BYE went out.
    pub fn open_direct(&mut self, mut header: FrameHeader, len: usize, now: Instant) -> bool {
        if self.bye_sent || !self.out.is_empty() || self.direct.is_some() {
            return false;
        }
        header.length = len as u32;
        self.direct = Some(Direct {
            head: header.to_bytes(),
            head_off: 0,
            left: len,
        });
        self.last_sent = now;
        true
    }

    /// True while a frame of [`Connection::open_direct`] is incomplete.
    pub fn direct_open(&self) -> bool {
        self.direct.is_some()
    }

    /// Writes the rest of the open direct frame's header, then as much of
    /// `payload` (the next bytes of its payload) as `w` takes, and returns
    /// how many payload bytes it took; the frame closes once its last
    /// payload byte is taken (a frame of length 0 closes with its header).
    pub fn write_direct(&mut self, w: &mut dyn Write, payload: &[u8]) -> io::Result<usize> {
        let Some(d) = self.direct.as_mut() else {
            return Ok(0);
        };
        while d.head_off < HEADER_LEN {
            let n = w.write(&d.head[d.head_off..])?;
            if n == 0 {
                return Ok(0);
            }
            d.head_off += n;
        }
        let want = payload.len().min(d.left);
        let mut taken = 0;
        while taken < want {
            let n = w.write(&payload[taken..want])?;
            if n == 0 {
                break;
            }
            taken += n;
        }
        d.left -= taken;
        if d.left == 0 {
            self.direct = None;
        }
        Ok(taken)
    }

    /// Writes a whole frame with `header` and a borrowed `payload` straight
    /// into `w`, which must take every byte (the caller lifts rustls's
    /// buffer limit for the call, so the ciphertext waits in rustls instead
    /// of a plaintext copy in this queue). `Ok(false)`, having written
    /// nothing, as [`Connection::open_direct`] refuses.
    pub fn write_whole(
        &mut self,
        w: &mut dyn Write,
        header: FrameHeader,
        payload: &[u8],
        now: Instant,
    ) -> io::Result<bool> {
        if !self.open_direct(header, payload.len(), now) {
            return Ok(false);
        }
        let n = self.write_direct(w, payload)?;
        if self.direct.is_some() {
            // The writer refused bytes although unlimited: the stream is
            // cut mid-frame.
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("TLS writer took {n} of {} bytes", payload.len()),
            ));
        }
        Ok(true)
    }

    /// Queues ABORT.
    pub fn queue_abort(&mut self, reason: AbortReason, code: u32, message: &str, now: Instant) {
        let a = Abort {
            reason,
            code,
            message: Abort::truncate_message(message).as_bytes(),
        };
        self.queue(FrameType::Abort, a.to_vec(), now);
    }

    /// Queues BYE; nothing more is queued after it.
    pub fn queue_bye(&mut self, now: Instant) {
        self.queue(FrameType::Bye, Vec::new(), now);
        self.bye_sent = true;
    }

    /// Drops every queued frame except one already partly written (the
    /// stream must stay whole), e.g. before a final ABORT. An open direct
    /// frame stays too: its writer completes it.
    pub fn discard_queued(&mut self) {
        let keep = usize::from(self.out_offset > 0);
        self.out.truncate(keep);
    }

    /// Drops every queued frame (the connection is gone) and returns the
    /// send sequence numbers that were waiting on them.
    pub fn take_queued_seqs(&mut self) -> Vec<u64> {
        self.out_offset = 0;
        self.out
            .drain(..)
            .map(|f| f.seq)
            .filter(|s| *s != 0)
            .collect()
    }

    /// True while frames wait to be written (queued, or a direct frame
    /// incomplete).
    pub fn has_output(&self) -> bool {
        !self.out.is_empty() || self.direct.is_some()
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.out.iter().map(Outgoing::len).sum::<usize>() - self.out_offset
    }

    /// Writes queued frames into `w` (the rustls plaintext writer) until it
    /// takes no more; `done(seq)` is called for each whole frame written
    /// that carries a sequence number. Returns bytes written. Nothing is
    /// written while a direct frame is open.
    pub fn write_to(&mut self, w: &mut dyn Write, done: &mut dyn FnMut(u64)) -> io::Result<usize> {
        let mut total = 0;
        if self.direct.is_some() {
            return Ok(0);
        }
        while let Some(front) = self.out.front() {
            let off = self.out_offset;
            let n = if off < front.head_len {
                if front.payload.is_empty() {
                    w.write(&front.head[off..front.head_len])?
                } else {
                    w.write_vectored(&[
                        IoSlice::new(&front.head[off..front.head_len]),
                        IoSlice::new(&front.payload),
                    ])?
                }
            } else {
                w.write(&front.payload[off - front.head_len..])?
            };
            if n == 0 {
                break;
            }
            total += n;
            self.out_offset += n;
            if self.out_offset == front.len() {
                let seq = front.seq;
                if let Some(f) = self.out.pop_front() {
                    if let Some(p) = &self.pool {
                        p.put(f.payload);
                    }
                }
                self.out_offset = 0;
                if seq != 0 {
                    done(seq);
                }
            }
        }
        Ok(total)
    }

    /// Notes that some bytes (ciphertext included) arrived at `now`: any
    /// byte resets the silence timer (layouts §10).
    pub fn touch(&mut self, now: Instant) {
        self.last_recv = now;
    }

    /// Handles plaintext bytes from the peer. `now_ms` is the receiver's
    /// wall clock (Unix ms) for the token expiry. Accepted frames go to
    /// `out`. Any error ends this connection; before HELLO verified it is
    /// the peer's failure to authenticate, afterwards it ends the job.
    pub fn handle_bytes(
        &mut self,
        bytes: &[u8],
        now: Instant,
        now_ms: u64,
        out: &mut dyn Deliver,
    ) -> Result<(), Error> {
        self.last_recv = now;
        if self.state == ConnState::Closed {
            return Err(FrameError::Unexpected {
                frame_type: FrameType::Data,
                when: "after close",
            }
            .into());
        }
        let fresh = FrameReader::new(self.rx());
        let mut reader = std::mem::replace(&mut self.reader, fresh);
        let pre_hello = self.state == ConnState::AwaitingHello;
        let result = reader.feed(
            bytes,
            &mut Judge {
                conn: self,
                now_ms,
                out,
            },
        );
        self.reader = reader;
        if let Err(e) = result {
            self.state = ConnState::Closed;
            return Err(match e {
                Error::FrameRejected(FrameError::Payload {
                    frame_type: FrameType::Hello,
                    error,
                }) if pre_hello => Error::Authentication {
                    peer: Some(self.peer),
                    error: AuthError::Hello(error),
                },
                e => e,
            });
        }
        Ok(())
    }

    fn rx(&self) -> Receiver {
        Receiver {
            job_id: self.ctx.job_id,
            own_rank: self.ctx.rank,
            peer_rank: self.peer,
            incarnation: self.ctx.incarnation,
            size: self.ctx.size,
        }
    }

    /// May a frame of type `t` come now? Judged on its header, before any
    /// payload byte is read (protocol §5.1 step 5, §7.1, §7.6).
    fn admit(&self, t: FrameType) -> Result<(), Error> {
        let unexpected = |when| -> Error {
            FrameError::Unexpected {
                frame_type: t,
                when,
            }
            .into()
        };
        match self.state {
            // "Both sides send HELLO immediately after the handshake;
            // nothing may be sent before it." (§5.1)
            ConnState::AwaitingHello if t != FrameType::Hello => Err(unexpected("before HELLO")),
            ConnState::AwaitingHello => Ok(()),
            // "A frame after a BYE is rejected." (§7.6)
            ConnState::ByeReceived => Err(unexpected("after BYE")),
            ConnState::Closed => Err(unexpected("after close")),
            // HELLO is sent once, first (§7.1).
            ConnState::Open if t == FrameType::Hello => Err(unexpected("twice")),
            ConnState::Open => Ok(()),
        }
    }

    fn on_frame(&mut self, f: Frame, now_ms: u64, out: &mut dyn Deliver) -> Result<(), Error> {
        let t = f.header.frame_type;
        let unexpected = |when| -> Error {
            FrameError::Unexpected {
                frame_type: t,
                when,
            }
            .into()
        };
        self.admit(t)?;
        if self.state == ConnState::AwaitingHello {
            let Payload::Hello(hello) = f.decoded() else {
                return Err(unexpected("before HELLO"));
            };
            verify_token(&self.ctx, self.peer, &hello.token.to_vec(), now_ms)?;
            self.state = ConnState::Open;
            out.incoming(Incoming::Authenticated {
                features: hello.features,
            });
            return Ok(());
        }
        match t {
            FrameType::Hello => Err(unexpected("twice")),
            FrameType::Data => {
                out.incoming(Incoming::Data {
                    tag: f.header.tag,
                    payload: f.payload,
                });
                Ok(())
            }
            FrameType::Collective => {
                out.incoming(Incoming::Collective(f.payload));
                Ok(())
            }
            FrameType::Heartbeat => {
                let Payload::Heartbeat(Heartbeat { counter }) = f.decoded() else {
                    return Err(unexpected("malformed"));
                };
                // "the counter must be the previous one plus 1 (first 1)" (§7.4)
                let expected = self.hb_recv + 1;
                if counter != expected {
                    return Err(FrameError::HeartbeatCounter {
                        expected,
                        got: counter,
                    }
                    .into());
                }
                self.hb_recv = counter;
                Ok(())
            }
            FrameType::Abort => {
                let Payload::Abort(a) = f.decoded() else {
                    return Err(unexpected("malformed"));
                };
                self.state = ConnState::Closed;
                Err(Error::AbortedByPeer {
                    from: self.peer,
                    reason: a.reason.code(),
                    code: a.code,
                    message: a.message_lossy().into_owned(),
                })
            }
            FrameType::Bye => {
                self.state = ConnState::ByeReceived;
                out.incoming(Incoming::Bye);
                Ok(())
            }
            FrameType::CkptBegin
            | FrameType::CkptData
            | FrameType::CkptAck
            | FrameType::CkptCommit
            | FrameType::Resume => {
                out.incoming(Incoming::Checkpoint(f.header, f.payload));
                Ok(())
            }
        }
    }

    /// An orderly close (FIN, or TLS close_notify) from the peer: normal
    /// after BYE, otherwise the peer is lost (H1613, closed without BYE).
    pub fn handle_close(&mut self) -> Result<(), Error> {
        let was = self.state;
        self.state = ConnState::Closed;
        match was {
            ConnState::ByeReceived | ConnState::Closed => Ok(()),
            _ => Err(Error::PeerLost {
                peer: self.peer,
                cause: LossCause::ClosedWithoutBye,
            }),
        }
    }

    /// A reset (or another socket error) from the peer's side.
    pub fn handle_reset(&mut self, cause: LossCause) -> Result<(), Error> {
        let was = self.state;
        self.state = ConnState::Closed;
        match was {
            ConnState::ByeReceived | ConnState::Closed => Ok(()),
            _ => Err(Error::PeerLost {
                peer: self.peer,
                cause,
            }),
        }
    }

    /// Marks the connection closed by us.
    pub fn close(&mut self) {
        self.state = ConnState::Closed;
    }

    /// Drives the clock: queues a HEARTBEAT when nothing was sent for
    /// 1000 ms; fails with H1613 (silence) when nothing was received for
    /// longer than the silence limit. Connections that said BYE, or were
    /// closed, are exempt.
    pub fn poll(&mut self, now: Instant) -> Result<(), Error> {
        if !matches!(self.state, ConnState::AwaitingHello | ConnState::Open) {
            return Ok(());
        }
        let silent = now.saturating_duration_since(self.last_recv);
        if silent > self.silence {
            self.state = ConnState::Closed;
            return Err(Error::PeerLost {
                peer: self.peer,
                cause: LossCause::Silence {
                    silent_ms: silent.as_millis() as u64,
                    limit_ms: self.silence.as_millis() as u64,
                },
            });
        }
        self.poll_heartbeat(now);
        Ok(())
    }

    /// True when [`Connection::poll`] at `now` would find the peer silent
    /// past the limit: the I/O loop then reads the socket once more
    /// before judging (protocol §7.4: any byte is life).
    pub fn is_silent(&self, now: Instant) -> bool {
        matches!(self.state, ConnState::AwaitingHello | ConnState::Open)
            && now.saturating_duration_since(self.last_recv) > self.silence
    }

    /// Queues a HEARTBEAT if one is due, without judging silence: what a
    /// busy I/O thread calls between the events of a long batch, when it
    /// has not yet read what its peers sent meanwhile.
    pub fn poll_heartbeat(&mut self, now: Instant) {
        if !matches!(self.state, ConnState::AwaitingHello | ConnState::Open) || self.bye_sent {
            return;
        }
        if now.saturating_duration_since(self.last_sent) >= HEARTBEAT_INTERVAL {
            self.hb_sent += 1;
            let h = self.ctx.header(FrameType::Heartbeat, self.peer);
            let hb = Outgoing::heartbeat(h, self.hb_sent);
            self.queue_frame(hb, now);
        }
    }

    /// True when the peer said BYE longer than the silence limit ago and
    /// has not closed: it has left all the same (protocol §7.6 says it
    /// closes after BYE), and nothing more can come from it.
    pub fn bye_overdue(&self, now: Instant) -> bool {
        self.state == ConnState::ByeReceived
            && now.saturating_duration_since(self.last_recv) > self.silence
    }

    /// When [`Connection::poll`] (or [`Connection::bye_overdue`]) next has
    /// something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.state == ConnState::ByeReceived {
            return Some(self.last_recv + self.silence + Duration::from_millis(1));
        }
        if !matches!(self.state, ConnState::AwaitingHello | ConnState::Open) {
            return None;
        }
        let silence = self.last_recv + self.silence + Duration::from_millis(1);
        if self.bye_sent {
            Some(silence)
        } else {
            Some(silence.min(self.last_sent + HEARTBEAT_INTERVAL))
        }
    }
}

/// The [`FrameSink`] of one `handle_bytes` call: the connection judges
/// each header by its state and delivers what it accepts.
struct Judge<'a> {
    conn: &'a mut Connection,
    now_ms: u64,
    out: &'a mut dyn Deliver,
}

impl FrameSink for Judge<'_> {
    fn header(&mut self, header: &FrameHeader) -> Result<PayloadDest, Error> {
        self.conn.admit(header.frame_type)?;
        let stream = header.frame_type == FrameType::Data
            && self.conn.state == ConnState::Open
            && self.out.stream(header.tag, header.length as usize);
        Ok(if stream {
            PayloadDest::Stream
        } else {
            PayloadDest::Collect
        })
    }

    fn chunk(&mut self, _: &FrameHeader, bytes: &[u8]) {
        self.out.chunk(bytes);
    }

    fn end_stream(&mut self, header: &FrameHeader) -> Result<(), Error> {
        self.out.end_stream(header.tag);
        Ok(())
    }

    fn frame(&mut self, frame: Frame) -> Result<(), Error> {
        self.conn.on_frame(frame, self.now_ms, self.out)
    }
}

#[cfg(test)]
mod tests;
