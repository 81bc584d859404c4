//! Reading and writing an authenticated peer's socket, the same for the
//! I/O thread and for a caller that drives the socket while it waits.
//!
//! What a read or a write finds out about the connection (a rejected frame,
//! an ABORT, a lost peer) is returned, not acted on: the I/O thread judges
//! it by its end-of-step policy, a caller ends the job step with it.

use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};

use sperli_wire::error::LossCause;
use sperli_wire::Error;

use crate::io::deliver::ToMatching;
use crate::io::link::{loss_cause, Link, LinkIo, ReadStatus, SockFail, BATCH};
use crate::io::notices;
use crate::io::shared::Shared;
use crate::job::unix_ms;

/// What servicing a socket found.
#[derive(Debug, Default)]
pub(crate) struct Serviced {
    /// The read budget ran out with bytes left (edge-triggered pollers
    /// report nothing new for those: read again without waiting).
    pub more: bool,
    /// Frames were delivered (waiters must look).
    pub delivered: bool,
    /// The peer left normally (BYE, then close).
    pub departed: bool,
    /// An error of this connection (its socket is dead).
    pub error: Option<Error>,
    /// Bytes still wait for the socket.
    pub backlog: bool,
    /// Match notices are due (feature bit 3, protocol §16.5).
    pub notices: bool,
}

/// Reads `peer`'s socket until it would block or `budget` bytes were
/// read, in batches of at most [`BATCH`] under the lock, then writes what
/// waits for it. Frames go to the receive state as they come; the match
/// notices their matches owe go out once the lock is released.
pub(crate) fn service(shared: &Shared, link: &Link, peer: u32, budget: usize) -> Serviced {
    let out = service_locked(shared, link, peer, budget);
    if out.notices {
        notices::send_due(shared);
    }
    out
}

fn service_locked(shared: &Shared, link: &Link, peer: u32, budget: usize) -> Serviced {
    let mut out = Serviced::default();
    let mut left = budget;
    let now_ms = unix_ms(SystemTime::now());
    loop {
        let mut g = link.lock();
        let l = &mut *g;
        if l.dead {
            return out;
        }
        let now = Instant::now();
        let drain_only = shared.error.get().is_some();
        let mut sink = ToMatching::new(shared, peer, l.stream.take());
        let r = l.read(BATCH.min(left), now, now_ms, &mut sink, drain_only);
        sink.flush();
        l.stream = sink.stream.take();
        out.delivered |= sink.delivered;
        out.notices |= sink.notices;
        // A frame the receive state rejected fails the connection as one
        // its reader rejected (protocol §16.4: H1610, ABORT reason 7).
        let r = match sink.rejected.take() {
            Some(e) => Err(SockFail::Frame(e)),
            None => r,
        };
        match r {
            Ok(ReadStatus::More) => {
                left = left.saturating_sub(BATCH);
                if left == 0 {
                    out.more = true;
                    flush_locked(shared, link, l, &mut out);
                    return out;
                }
                // The lock is released between batches.
                continue;
            }
            Ok(ReadStatus::Paused) => {
                // The waiter looks first; the rest is read on the next turn.
                out.more = true;
                flush_locked(shared, link, l, &mut out);
                return out;
            }
            Ok(ReadStatus::Drained) | Ok(ReadStatus::HandshakeDone) => {
                flush_locked(shared, link, l, &mut out);
                return out;
            }
            Ok(ReadStatus::Closed) => {
                closed(shared, l, peer, &mut out);
                return out;
            }
            Err(f) => {
                failed(shared, l, peer, f, &mut out);
                return out;
            }
        }
    }
}

/// Writes what waits for `peer`'s socket (a writable event, a kick).
pub(crate) fn flush(shared: &Shared, link: &Link, peer: u32) -> Serviced {
    let mut out = Serviced::default();
    let mut g = link.lock();
    let l = &mut *g;
    if !l.dead {
        flush_locked(shared, link, l, &mut out);
        if out.error.is_none() && link.writers.load(Ordering::SeqCst) > 0 {
            // A caller writing a frame of its own waits for room.
            shared.bump();
            out.delivered = true;
        }
    }
    let _ = peer;
    out
}

fn flush_locked(shared: &Shared, link: &Link, l: &mut LinkIo, out: &mut Serviced) {
    let mut done = Vec::new();
    let r = l.flush(&mut |s| done.push(s));
    out.backlog = link.note_backlog(l);
    if shared.note_written(&mut done) {
        out.delivered = true;
    }
    if let Err(e) = r {
        let peer = l.conn.as_ref().map_or(0, |c| c.peer());
        write_failed(shared, l, peer, &e, out);
    }
}

/// A write to `peer`'s socket failed: what the peer sent before comes
/// first (a BYE and its close make this a departure, not a loss), then the
/// write error is judged.
pub(crate) fn write_failed(
    shared: &Shared,
    l: &mut LinkIo,
    peer: u32,
    e: &std::io::Error,
    out: &mut Serviced,
) {
    if !l.dead {
        let now_ms = unix_ms(SystemTime::now());
        let mut sink = ToMatching::new(shared, peer, l.stream.take());
        let drain_only = shared.error.get().is_some();
        let r = l.read(BATCH, Instant::now(), now_ms, &mut sink, drain_only);
        sink.flush();
        l.stream = sink.stream.take();
        out.delivered |= sink.delivered;
        let r = match sink.rejected.take() {
            Some(e) => Err(SockFail::Frame(e)),
            None => r,
        };
        match r {
            Ok(ReadStatus::Closed) => return closed(shared, l, peer, out),
            Err(SockFail::Frame(err)) => return lost(shared, l, peer, err, out),
            _ => {}
        }
    }
    failed(shared, l, peer, SockFail::Socket(loss_cause(e)), out);
}

/// The peer closed: normal after its BYE (it departed), else it is lost.
fn closed(shared: &Shared, l: &mut LinkIo, peer: u32, out: &mut Serviced) {
    l.dead = true;
    let Some(c) = l.conn.as_mut() else {
        return;
    };
    match c.handle_close() {
        Ok(()) => {
            l.close_after_bye();
            departed(shared, l, peer, out);
        }
        Err(e) => lost(shared, l, peer, e, out),
    }
}

/// The socket, TLS or the connection failed. A rejected frame leaves the
/// socket alive: the ABORT that says so goes out on it.
fn failed(shared: &Shared, l: &mut LinkIo, peer: u32, f: SockFail, out: &mut Serviced) {
    let cause = match f {
        SockFail::Frame(e) => return lost(shared, l, peer, e, out),
        SockFail::Socket(cause) => cause,
        SockFail::Tls(_) => LossCause::Reset,
    };
    l.dead = true;
    let Some(c) = l.conn.as_mut() else {
        return;
    };
    match c.handle_reset(cause) {
        // After BYE a reset is a departure too.
        Ok(()) => departed(shared, l, peer, out),
        Err(e) => lost(shared, l, peer, e, out),
    }
}

/// `peer` left normally: what was queued to it can never be written (its
/// senders must not wait for it), and waits on it end (H1613 `Departed`).
fn departed(shared: &Shared, l: &mut LinkIo, peer: u32, out: &mut Serviced) {
    if stale(shared, l) {
        l.dead = true;
        return;
    }
    let mut seqs = l.conn.as_mut().map_or(Vec::new(), |c| c.take_queued_seqs());
    seqs.append(&mut l.drain_seqs);
    let mut st = shared.state();
    for s in seqs {
        st.handle_undelivered(s, peer);
    }
    st.handle_departed(peer);
    drop(st);
    shared.bump();
    out.delivered = true;
    out.departed = true;
}

/// A connection to an incarnation a record replaced (protocol §18.7): its
/// end is no news of the peer's current incarnation.
pub(crate) fn stale(shared: &Shared, l: &LinkIo) -> bool {
    l.conn
        .as_ref()
        .is_some_and(|c| c.peer_incarnation() < shared.ctx.peer_incarnation(c.peer()))
}

fn lost(shared: &Shared, l: &mut LinkIo, peer: u32, e: Error, out: &mut Serviced) {
    if stale(shared, l) {
        l.dead = true;
        return;
    }
    if let Some(s) = l.stream.take() {
        s.cut(shared, peer, e.clone());
    }
    out.delivered = true;
    out.error = Some(e);
}
