//! The send paths of [`Endpoint`]: every send is written on the caller's
//! thread, straight into TLS and the socket; the I/O thread only takes
//! over bytes the socket could not take when no caller drives it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sperli_wire::error::ArgumentError;
use sperli_wire::header::FrameHeader;
use sperli_wire::limits::{MAX_PAYLOAD, MAX_USER_TAG};
use sperli_wire::{Error, FrameType};

use super::{Endpoint, EndpointRef, EAGER_LIMIT};
use crate::io::link::{Link, Refused, StreamJob};
use crate::io::service::{self, Serviced};
use crate::io::shared::Command;
use crate::pool::BufPool;
use crate::proto::connection::{Incoming, Outgoing};
use crate::proto::matching::departed;

/// A message to send: the caller's bytes (copied once, into a pooled
/// buffer, where it must be queued) or a buffer the transport takes over.
pub(super) enum Bytes<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl Bytes<'_> {
    pub(super) fn len(&self) -> usize {
        match self {
            Bytes::Borrowed(b) => b.len(),
            Bytes::Owned(v) => v.len(),
        }
    }

    /// Called only after the length was checked.
    pub(super) fn into_vec(self, pool: &BufPool) -> Vec<u8> {
        match self {
            Bytes::Borrowed(b) => {
                let mut v = pool.take(b.len());
                v.extend_from_slice(b);
                v
            }
            Bytes::Owned(v) => v,
        }
    }
}

/// A started send, holding its endpoint as `E` ([`EndpointRef`]): use
/// the names [`SendHandle`] (from [`Endpoint::isend`]) and
/// [`OwnedSendHandle`] (from [`Endpoint::isend_owned`]). Dropping it
/// unfinished is allowed: the message still goes out, the handle just
/// stops counting as open.
#[derive(Debug)]
pub struct StartedSend<E: EndpointRef> {
    ep: E,
    seq: u64,
    done: bool,
    closed: bool,
    /// A synchronous send: the peer and message number whose match notice
    /// completes it too (protocol §16.5).
    notice: Option<(u32, u64)>,
}

/// A started send that borrows its endpoint ([`Endpoint::isend`]).
pub type SendHandle<'a> = StartedSend<&'a Endpoint>;

/// A started send that holds a counted handle on its endpoint
/// ([`Endpoint::isend_owned`]), so it borrows nothing.
pub type OwnedSendHandle = StartedSend<Arc<Endpoint>>;

impl<E: EndpointRef> StartedSend<E> {
    /// Starts a DATA send on `ep` (the one implementation of
    /// [`Endpoint::isend`] and [`Endpoint::isend_owned`]).
    fn start(ep: E, to: u32, tag: u32, data: &[u8]) -> Result<Self, Error> {
        if ep.has_p2p_communicators() {
            ep.check_data(to, tag, data.len())?;
            let (seq, notice) = ep.start_message(0, to, tag, Bytes::Borrowed(data), false)?;
            return Ok(Self::started(ep, seq, notice));
        }
        let seq = ep.seq();
        let local = ep.start_send(to, tag, Bytes::Borrowed(data), seq)?;
        Ok(Self::started(ep, if local { 0 } else { seq }, None))
    }

    /// A send whose frames are queued: `seq` the last one's (0: written
    /// already), `notice` what a synchronous send waits for too.
    pub(super) fn started(ep: E, seq: u64, notice: Option<(u32, u64)>) -> Self {
        ep.shared.state().count_send(true);
        Self {
            ep,
            seq,
            done: seq == 0,
            closed: false,
            notice,
        }
    }

    /// Whether the match notice came (or none is needed).
    fn noticed(&mut self) -> Result<bool, Error> {
        let Some((to, message)) = self.notice else {
            return Ok(true);
        };
        match self.ep.shared.state().poll_notice(to, message) {
            Some(r) => {
                r?;
                self.notice = None;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.ep.shared.state().count_send(false);
        }
    }

    /// True once the message is written into TLS (the handle is then
    /// closed). Makes progress first, as every `test` does.
    pub fn test(&mut self) -> Result<bool, Error> {
        if self.closed {
            return Ok(true);
        }
        self.ep.progress()?;
        if !self.done {
            self.done = match self.ep.shared.state().poll_written(self.seq) {
                Some(r) => {
                    r?;
                    true
                }
                None => false,
            };
        }
        let complete = self.done && self.noticed()?;
        if complete {
            self.close();
        }
        Ok(complete)
    }

    /// Waits until the message is written into TLS (and, for a synchronous
    /// send, matched by its receiver).
    pub fn wait(mut self) -> Result<(), Error> {
        if !self.done {
            self.ep.wait_written(self.seq)?;
            self.done = true;
        }
        if let Some((to, message)) = self.notice {
            self.ep
                .wait(|| self.ep.shared.state().poll_notice(to, message))?;
            self.notice = None;
        }
        self.close();
        Ok(())
    }
}

impl<E: EndpointRef> Drop for StartedSend<E> {
    fn drop(&mut self) {
        self.close();
    }
}

impl Endpoint {
    pub(super) fn seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn ended(&self) -> bool {
        self.shared.error.get().is_some()
    }

    /// The link to `to`, or the error when the peer left or the job step
    /// is over.
    pub(super) fn link_to(&self, to: u32) -> Result<Arc<Link>, Error> {
        match self.shared.link(to) {
            Some(l) => Ok(l),
            None => {
                self.check()?;
                Err(departed(to))
            }
        }
    }

    /// Delivers a v1 message or COLLECTIVE payload to this rank itself
    /// (a local delivery is judged by nothing: it never fails).
    pub(super) fn deliver_local(&self, inc: Incoming) {
        let _ = self.shared.state().handle_incoming(self.rank(), inc);
        self.shared.changed();
    }

    /// What a send's outcome means for the caller: written sends reported,
    /// bytes left for a socket nobody drives handed to the I/O thread, a
    /// socket error ends the job step. `Ok(true)`: the frame is written.
    fn after_send(
        &self,
        to: u32,
        link: &Link,
        r: Result<std::io::Result<bool>, Refused>,
        backlog: bool,
        done: &mut Vec<u64>,
    ) -> Result<bool, Error> {
        self.shared.mark_written(done);
        match r {
            Ok(Ok(written)) => {
                if backlog && !link.io_owns.load(Ordering::SeqCst) && !self.shared.driver.leading()
                {
                    self.shared.command(Command::Kick { to });
                }
                Ok(written)
            }
            Ok(Err(e)) => Err(self.write_failed(link, &e)),
            Err(refused) => Err(self.refused(to, refused)),
        }
    }

    /// A socket write failed on the caller's thread: what the peer sent
    /// before is read first (a BYE makes it a departure, the job goes
    /// on); else the peer is lost and the job step ends.
    fn write_failed(&self, link: &Link, e: &std::io::Error) -> Error {
        let mut out = Serviced::default();
        let peer = {
            let mut l = link.lock();
            let peer = l.conn.as_ref().map_or(0, |c| c.peer());
            service::write_failed(&self.shared, &mut l, peer, e, &mut out);
            peer
        };
        self.shared.wake();
        match out.error {
            Some(err) => {
                if self.shared.fail(err, false) {
                    self.shared.command(Command::Failed);
                }
                // A close without BYE waits for the ABORT that may explain
                // it (protocol §7.5).
                self.shared.await_settled();
                match self.check() {
                    Err(job) => job,
                    Ok(()) => Error::io("writing to a socket", e),
                }
            }
            None => departed(peer),
        }
    }

    fn refused(&self, to: u32, r: Refused) -> Error {
        if let Err(e) = self.check() {
            return e;
        }
        match r {
            Refused::PeerLeft | Refused::Ended => departed(to),
        }
    }

    /// Queues `frame` to `to` and writes what the socket takes now (no
    /// thread is woken unless bytes are left and nobody drives the
    /// socket). True when the frame is whole in TLS.
    pub(super) fn push(&self, to: u32, frame: Outgoing) -> Result<bool, Error> {
        let link = self.link_to(to)?;
        let mut done = Vec::new();
        let (r, backlog) = {
            let mut l = link.lock();
            let r = l.send_now(self.ended(), frame, &mut |s| done.push(s));
            (r, link.note_backlog(&l))
        };
        self.after_send(to, &link, r, backlog, &mut done)
    }

    /// Starts a frame of `header` and `payload` to peer `to` (not this
    /// rank). A large borrowed payload whose sender will wait for it
    /// (`seq` != 0) goes into TLS whole when nothing is queued ahead of it
    /// (no copy); otherwise the payload (a pooled copy of a borrowed one)
    /// is queued. True when the frame is written.
    pub(super) fn push_bytes(
        &self,
        to: u32,
        header: FrameHeader,
        payload: Bytes<'_>,
        seq: u64,
    ) -> Result<bool, Error> {
        if let Bytes::Borrowed(b) = payload {
            if seq != 0 && b.len() > EAGER_LIMIT {
                let link = self.link_to(to)?;
                let mut done = Vec::new();
                let (r, backlog) = {
                    let mut l = link.lock();
                    let r = l.send_whole(self.ended(), header, b, seq, &mut |s| done.push(s));
                    (r, link.note_backlog(&l))
                };
                match r {
                    Ok(Ok(None)) => {} // frames queued ahead: queue a copy
                    Ok(Ok(Some(w))) => {
                        return self.after_send(to, &link, Ok(Ok(w)), backlog, &mut done)
                    }
                    Ok(Err(e)) => {
                        return self.after_send(to, &link, Ok(Err(e)), backlog, &mut done)
                    }
                    Err(refused) => {
                        return self.after_send(to, &link, Err(refused), backlog, &mut done)
                    }
                }
            }
        }
        let payload = payload.into_vec(&self.shared.pool);
        self.push(to, Outgoing::new(header, payload, seq))
    }

    /// Writes one frame from the caller's buffers (`first` then `second`)
    /// into `to`'s socket, as fast as the socket takes it: pieces go into
    /// TLS while earlier ones go out. Returns once every byte is in TLS
    /// (at most the TLS buffer is left for the socket).
    pub(super) fn send_streamed(
        &self,
        to: u32,
        header: FrameHeader,
        first: &[u8],
        second: &[u8],
    ) -> Result<(), Error> {
        let link = self.link_to(to)?;
        let mut job = StreamJob::new(header, first, second);
        let mut complete = false;
        link.writers.fetch_add(1, Ordering::SeqCst);
        let r = self.shared.wait_until(|| {
            let mut done = Vec::new();
            let (r, backlog) = {
                let mut l = link.lock();
                let r = l.stream_step(self.ended(), &mut job, &mut |s| done.push(s));
                (r, link.note_backlog(&l))
            };
            match r {
                Ok(Ok(false)) => {
                    self.shared.mark_written(&mut done);
                    None
                }
                Ok(Ok(true)) => {
                    complete = true;
                    Some(self.after_send(to, &link, Ok(Ok(true)), backlog, &mut done))
                }
                r => Some(self.after_send(to, &link, r, backlog, &mut done)),
            }
        });
        if link.writers.fetch_sub(1, Ordering::SeqCst) > 1 {
            // Another caller may wait for this frame to be complete.
            self.shared.changed();
        }
        if job.opened && !complete {
            // The wait ended inside the frame (the job failed): complete
            // it, so the ABORT queued behind it can go out.
            let _ = link.lock().stream_step(true, &mut job, &mut |_| {});
            self.shared.command(Command::Kick { to });
        }
        self.outcome(r).map(|_| ())
    }

    pub(super) fn wait_written(&self, seq: u64) -> Result<(), Error> {
        self.wait(|| self.shared.state().poll_written(seq))
    }

    pub(super) fn check_data(&self, to: u32, tag: u32, len: usize) -> Result<(), Error> {
        self.check()?;
        self.check_rank(to)?;
        if tag > MAX_USER_TAG {
            return Err(ArgumentError::Tag { tag }.into());
        }
        if len > MAX_PAYLOAD as usize {
            return Err(ArgumentError::TooLong {
                len,
                max: MAX_PAYLOAD as usize,
            }
            .into());
        }
        Ok(())
    }

    /// Starts a DATA send; `seq` 0: nobody waits for it. True when the
    /// message is complete (queued locally, or whole in TLS). A borrowed
    /// message is copied once, into a pooled buffer, after the checks.
    fn start_send(&self, to: u32, tag: u32, data: Bytes<'_>, seq: u64) -> Result<bool, Error> {
        if self.has_p2p_communicators() {
            // Protocol §16.1: every DATA frame of the job is one of §16.2.
            self.check_data(to, tag, data.len())?;
            let (s, _) = self.start_message(0, to, tag, data, false)?;
            if s != 0 && seq != 0 {
                self.wait_written(s)?;
            }
            return Ok(true);
        }
        self.check_data(to, tag, data.len())?;
        if to == self.rank() {
            let payload = data.into_vec(&self.shared.pool);
            self.deliver_local(Incoming::Data { tag, payload });
            return Ok(true);
        }
        let h = self.shared.ctx.header(FrameType::Data, to).with_tag(tag);
        self.push_bytes(to, h, data, seq)
    }

    /// An empty buffer with room for `len` bytes, from this rank's pool of
    /// large buffers when one fits (else freshly allocated). Fill it and
    /// pass it to [`Endpoint::send_vec`] or
    /// [`Endpoint::send_collective_vec`]: written frames go back to the
    /// pool, so steady traffic of large messages stops allocating.
    pub fn take_buffer(&self, len: usize) -> Vec<u8> {
        self.shared.pool.take(len)
    }

    /// Hands a buffer back for reuse, typically a received message the
    /// caller is done with (`recv`, `recv_collective`, ...). Buffers under
    /// 32 KiB are simply freed. Optional: dropping a buffer is always fine.
    pub fn recycle(&self, buf: Vec<u8>) {
        self.shared.pool.put(buf);
    }

    /// Sends `data` to rank `to` with `tag` (0..=2147483647; a bigger tag is
    /// refused here with H1618 before anything is sent, as is a rank >= size
    /// (`ArgumentError::Tag`, `ArgumentError::Rank`); neither ends the job).
    /// A send to a peer that already said BYE fails with H1613
    /// (`LossCause::Departed`) without ending the job. At most 16777216
    /// bytes (see [`Endpoint::send_large`]); empty messages are valid; a
    /// send to this rank itself is queued locally. Up to 64 KiB it returns
    /// once the message is queued (written at once when the socket takes
    /// it); bigger messages are written from `data` itself, piece by piece
    /// as the socket takes them, and the call returns once every byte is
    /// in TLS, so a sender never runs far ahead of a slow receiver.
    pub fn send(&self, to: u32, tag: u32, data: &[u8]) -> Result<(), Error> {
        if self.has_p2p_communicators() {
            self.check_data(to, tag, data.len())?;
            return self.send_on(0, to, tag, data, crate::SendMode::Standard);
        }
        if data.len() <= EAGER_LIMIT || to == self.rank() {
            return self
                .start_send(to, tag, Bytes::Borrowed(data), 0)
                .map(|_| ());
        }
        self.check_data(to, tag, data.len())?;
        let h = self.shared.ctx.header(FrameType::Data, to).with_tag(tag);
        self.send_streamed(to, h, data, &[])
    }

    /// As [`Endpoint::send`] with a message the transport takes over (no
    /// copy); e.g. a buffer from [`Endpoint::take_buffer`].
    pub fn send_vec(&self, to: u32, tag: u32, data: Vec<u8>) -> Result<(), Error> {
        if data.len() <= EAGER_LIMIT {
            self.start_send(to, tag, Bytes::Owned(data), 0).map(|_| ())
        } else {
            let seq = self.seq();
            if !self.start_send(to, tag, Bytes::Owned(data), seq)? {
                self.wait_written(seq)?;
            }
            Ok(())
        }
    }

    /// Starts a send; the handle completes when the frame is written into
    /// TLS. The message is copied (or, when nothing is queued ahead of it,
    /// encrypted) before this returns, so `data` is free again at once.
    pub fn isend(&self, to: u32, tag: u32, data: &[u8]) -> Result<SendHandle<'_>, Error> {
        StartedSend::start(self, to, tag, data)
    }

    /// As [`Endpoint::isend`], with a handle that holds a clone of the
    /// `Arc` instead of a borrow (keep it in a struct without a lifetime,
    /// move it to another thread); it behaves the same.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sperli_tls::job_plan::JobPlan;
    /// use sperli_transport::{Endpoint, ErrorMode, OwnedRecvHandle, Settings};
    ///
    /// let plan = JobPlan::localhost(2).unwrap();
    /// let settings = Settings { errors: ErrorMode::Return, ..Settings::default() };
    /// let ranks: Vec<_> = (0..2)
    ///     .map(|r| {
    ///         let (desc, s) = (plan.description(r), settings.clone());
    ///         std::thread::spawn(move || {
    ///             let ep = Arc::new(Endpoint::start(&desc, s).unwrap());
    ///             if ep.rank() == 0 {
    ///                 let h = ep.isend_owned(1, 7, b"hello").unwrap();
    ///                 h.wait().unwrap();
    ///                 return Vec::new();
    ///             }
    ///             // The handle borrows nothing: it can go where `ep` cannot.
    ///             let h: OwnedRecvHandle = ep.irecv_owned(0, Some(7)).unwrap();
    ///             std::thread::spawn(move || h.wait()).join().unwrap().unwrap().1
    ///         })
    ///     })
    ///     .collect();
    /// let got: Vec<Vec<u8>> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
    /// assert_eq!(got[1], b"hello");
    /// ```
    pub fn isend_owned(
        self: &Arc<Self>,
        to: u32,
        tag: u32,
        data: &[u8],
    ) -> Result<OwnedSendHandle, Error> {
        StartedSend::start(Arc::clone(self), to, tag, data)
    }
}
