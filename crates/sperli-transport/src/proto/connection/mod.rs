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

use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::codec::Codec;
use sperli_wire::error::{AuthError, LossCause, TokenError};
use sperli_wire::header::{FrameHeader, Receiver};
use sperli_wire::hello::Hello;
use sperli_wire::join_token::JoinToken;
use sperli_wire::limits::{FEATURE_V1_CORE, HEADER_LEN, HEARTBEAT_INTERVAL_MS};
use sperli_wire::{Error, FrameType};

use crate::pool::BufPool;
use crate::proto::frame_reader::FrameReader;

pub use context::{verify_token, JobContext, JobKey, MembershipEpoch};
pub use outgoing::Outgoing;
pub use receive::Fed;

mod context;
mod outgoing;
mod receive;

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
    /// A COLLECTIVE payload (16-byte collective header + data) with its
    /// header tag (the communicator id with feature bit 2, protocol §15.2;
    /// else 0).
    Collective {
        /// The header tag.
        tag: u32,
        /// The payload.
        payload: Vec<u8>,
    },
    /// CKPT_BEGIN/DATA/ACK/COMMIT or RESUME: the header (type, epoch) and payload.
    Checkpoint(FrameHeader, Vec<u8>),
    /// The peer said BYE.
    Bye,
    /// A RECOVER frame (feature bit 5, protocol §18.5): its header's
    /// membership epoch and its payload, not yet decoded.
    Recover {
        /// The header's `membership_epoch`.
        membership_epoch: u32,
        /// The payload.
        payload: Vec<u8>,
    },
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
    /// Asked after each complete frame: true stops the bytes fed so far
    /// at that frame's end (see [`Connection::handle_bytes_pausing`]).
    fn pause(&mut self) -> bool {
        false
    }
}

impl Deliver for Vec<Incoming> {
    fn incoming(&mut self, inc: Incoming) {
        self.push(inc);
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
    /// The HELLO features frames are judged with (protocol §6.2 checks 12
    /// and 13): this rank's until the peer's HELLO, then the AND of both,
    /// then the job's ([`Connection::set_job_features`]).
    features: u64,
    /// `inc[peer]` when the connection was made (protocol §18.2 check 9).
    peer_incarnation: u32,
    /// The newest membership epoch the peer is known to hold: whose record
    /// went out on this connection, or of a frame that came on it
    /// (protocol §18.6, "Learning it").
    told_epoch: u32,
}

/// The frame of [`Connection::open_direct`] in progress.
#[derive(Debug)]
struct Direct {
    head: [u8; HEADER_LEN],
    head_off: usize,
    left: usize,
}

/// The heartbeat interval (protocol §7.4: "nothing for 1000 ms").
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(HEARTBEAT_INTERVAL_MS);

impl Connection {
    /// A connection to `peer` (the rank its certificate names) whose TLS
    /// handshake just finished, at time `now`; HELLO is not sent yet.
    pub fn new(ctx: Arc<JobContext>, peer: u32, silence: Duration, now: Instant) -> Self {
        let features = ctx.features | FEATURE_V1_CORE;
        let peer_incarnation = ctx.peer_incarnation(peer);
        let rx = Receiver {
            job_id: ctx.job_id,
            own_rank: ctx.rank,
            peer_rank: peer,
            incarnation: peer_incarnation,
            size: ctx.size,
            features,
            membership_epoch: 0,
        };
        Self {
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
            features,
            peer_incarnation,
            told_epoch: ctx.membership.current(),
            ctx,
        }
    }

    /// The peer's incarnation this connection was made with (protocol
    /// §18.2 check 9): lower than `inc[peer]` of the current membership
    /// once a record replaced the peer (feature bit 5, protocol §18.7).
    pub fn peer_incarnation(&self) -> u32 {
        self.peer_incarnation
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

    /// The HELLO features this connection judges frames with (see the
    /// field's docs; protocol §6.2).
    pub fn features(&self) -> u64 {
        self.features
    }

    /// The job's negotiated features, once set-up is done (protocol
    /// §7.1.1): from now on frames are judged with them. They never add a
    /// bit to what both HELLOs had.
    pub fn set_job_features(&mut self, features: u64) {
        self.features &= features | FEATURE_V1_CORE;
    }

    /// True once we queued BYE (nothing else may follow it).
    pub fn bye_sent(&self) -> bool {
        self.bye_sent
    }

    /// Queues our HELLO with `token` (protocol §7.1: "Both sides send HELLO
    /// immediately after the TLS handshake").
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

    /// Queues a prepared frame (after the record of its membership epoch,
    /// when the peer may not hold it yet: protocol §18.6).
    pub fn queue_frame(&mut self, frame: Outgoing, now: Instant) {
        // BYE is the "last frame on a connection" (protocol §6.4).
        if self.bye_sent {
            return;
        }
        if let Some(e) = frame.membership_epoch() {
            self.tell(e);
        }
        self.last_sent = now;
        self.out.push_back(frame);
    }

    /// Protocol §18.6, "Learning it": before the first frame of epoch
    /// `epoch` on this connection, the record of the newest epoch goes out
    /// (RECOVER MEMBERSHIP, header epoch the one the peer is known to
    /// hold), unless the peer showed it holds it. True when a record was
    /// queued.
    fn tell(&mut self, epoch: u32) -> bool {
        if epoch <= self.told_epoch {
            return false;
        }
        let record = self.ctx.membership.record();
        let old = self.told_epoch;
        self.told_epoch = epoch.max(self.ctx.membership.current());
        if record.is_empty() || old == 0 {
            return false;
        }
        let h = self
            .ctx
            .header(FrameType::Recover, self.peer)
            .with_membership_epoch(old);
        let payload = sperli_wire::recovery::RecoverPayload::Membership {
            record: record.to_vec(),
        };
        self.out.push_back(Outgoing::new(h, payload.encode(), 0));
        true
    }

    /// A frame of membership epoch `epoch` came from the peer: it holds
    /// that epoch's record (protocol §18.6).
    pub(super) fn peer_holds(&mut self, epoch: u32) {
        self.told_epoch = self.told_epoch.max(epoch);
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
        // Protocol §18.6: the record first (queued: this frame waits).
        if self.tell(header.membership_epoch) {
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
    /// byte resets the silence timer (protocol §7.4, refinement: "any byte
    /// received resets a connection's silence timer").
    pub fn touch(&mut self, now: Instant) {
        self.last_recv = now;
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
        // Silence: "A connection that has delivered no byte for the silence
        // limit (default 5000 ms, configurable) is lost" (protocol §7.4).
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
        // "Each side sends a HEARTBEAT on every connection on which it has
        // sent nothing for 1000 ms" (protocol §7.4).
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

#[cfg(test)]
mod tests;
