//! Typed point-to-point on [`Comm`] (protocol §7.2, §6.5): `send`, `recv`,
//! `recv_into`, `isend`, `irecv`, `sendrecv`, receives from any source,
//! `probe`/`iprobe`, and waits over several requests; for slices of any
//! [`Element`] (bytes are `u8`), with byte-named forms beside them.
//!
//! These wrap the transport's calls on communicators
//! ([`Endpoint::send_on`], [`Endpoint::irecv_on`], [`Endpoint::probe_on`],
//! [`Endpoint::improbe_on`], [`Endpoint::wait_any`], ...): a message of
//! any length is one call, split into frames by the sender and joined by
//! the receiver (protocol §16.2 with HELLO feature bit 3, the frame
//! series of §7.2 without it). Elements
//! travel as little-endian bytes (protocol §8.3's encodings), so a receiver
//! names the element type it expects; a message that is not a whole
//! number of elements is refused with H1618 ([`ArgumentError::NotWholeElements`])
//! and dropped.
//!
//! Matching: a receive takes the first message to arrive from its source
//! with its tag (per source, in the order sent, protocol §6.5). With
//! `source: None` (any source) it takes the **first matching message to
//! arrive** from any rank: MPI's semantics, and not deterministic when
//! several ranks send at once. Ranks and sources are job ranks, tags user
//! tags 0..=2147483647.
//!
//! On a communicator made by split, dup or from a group, ranks are its
//! ranks (translated to job ranks underneath). With HELLO feature bit 3 on
//! every rank (the default) a message names its communicator and is
//! matched by (communicator, source, tag), as in MPI: a receive on a dup
//! never takes a message of its parent, and a receive from any source
//! works on every communicator (protocol §16.3). Synchronous sends
//! ([`Comm::ssend`], [`Comm::issend`]) complete once the receiver matched
//! the message, and matched probes ([`Comm::mprobe`], [`Comm::improbe`])
//! take a message for one receive (protocol §16.5). In a job without bit 3
//! (a rank that does not announce it) DATA carries no communicator
//! (protocol §15.2): a communicator's messages travel on the job's tags, a
//! receive from any source is only offered on the job's communicator
//! ([`UsageError::AnySourceOnSubcommunicator`]), and synchronous sends
//! fail before anything is sent ([`UsageError::NoP2pCommunicators`]).
//!
//! [`PROC_NULL`] as a rank or source makes every call here complete at once
//! without traffic: a send does nothing, a receive or probe gets no data and
//! MPI's null status ([`crate::null_status`]), and such a receive request is
//! complete from the start (first in a wait over several).
//!
//! Point-to-point needs the real transport: these calls exist on
//! `Comm<L>` where `L` holds an [`Endpoint`] ([`HasEndpoint`]: `Endpoint`,
//! `&Endpoint`, `Arc<Endpoint>`).

use std::marker::PhantomData;
use std::sync::Arc;

use sperli_transport::{Endpoint, Message, RecvHandle, SendHandle, SendMode, Status};
use sperli_wire::error::{ArgumentError, UsageError};
use sperli_wire::Error;

use crate::comm::Comm;
use crate::element::Element;
use crate::peers::Peers;
use crate::special::{check_tag, null_message, null_status, PROC_NULL};

/// A [`Peers`] implementation that is (or holds) the real transport's
/// [`Endpoint`], so a [`Comm`] over it offers point-to-point calls.
pub trait HasEndpoint: Peers {
    /// The endpoint.
    fn endpoint(&self) -> &Endpoint;
}

impl HasEndpoint for Endpoint {
    fn endpoint(&self) -> &Endpoint {
        self
    }
}

impl<L: HasEndpoint + ?Sized> HasEndpoint for &L {
    fn endpoint(&self) -> &Endpoint {
        (**self).endpoint()
    }
}

impl<L: HasEndpoint + ?Sized> HasEndpoint for Arc<L> {
    fn endpoint(&self) -> &Endpoint {
        (**self).endpoint()
    }
}

/// The elements of a received message, or H1618 if it is not a whole
/// number of them.
fn elements<T: Element>(bytes: &[u8]) -> Result<Vec<T>, Error> {
    if bytes.len() % T::WIDTH != 0 {
        return Err(ArgumentError::NotWholeElements {
            len: bytes.len(),
            width: T::WIDTH,
        }
        .into());
    }
    Ok(T::vec_from_le(bytes))
}

/// `bytes` into `buf` (its first `bytes.len() / WIDTH` elements).
fn elements_into<T: Element>(bytes: &[u8], buf: &mut [T]) -> Result<(), Error> {
    if bytes.len() % T::WIDTH != 0 {
        return Err(ArgumentError::NotWholeElements {
            len: bytes.len(),
            width: T::WIDTH,
        }
        .into());
    }
    let room = buf.len() * T::WIDTH;
    if bytes.len() > room {
        return Err(ArgumentError::Truncated {
            len: bytes.len(),
            room,
        }
        .into());
    }
    T::read_le(bytes, &mut buf[..bytes.len() / T::WIDTH]);
    Ok(())
}

/// A posted receive of elements `T` ([`Comm::irecv`]); complete it with
/// [`RecvRequest::wait`], [`RecvRequest::test`] or a wait over several
/// ([`Comm::wait_any`], [`Comm::wait_all`], [`Comm::test_all`]). Dropping
/// it cancels the receive.
#[derive(Debug)]
pub struct RecvRequest<'a, T> {
    /// The transport's receive; `None` for a receive from
    /// [`PROC_NULL`], complete from the start (its message in `taken`).
    handle: Option<RecvHandle<'a>>,
    /// The communicator's members (job ranks), to report its ranks.
    members: Option<Arc<[u32]>>,
    /// A message `test_all` took while others were still open.
    taken: Option<Message>,
    _t: PhantomData<fn() -> T>,
}

/// `st` with its source as a rank of the communicator of `members`.
fn translated(st: Status, members: Option<&Arc<[u32]>>) -> Status {
    match members {
        Some(m) => Status {
            source: m
                .iter()
                .position(|&j| j == st.source)
                .map_or(st.source, |i| i as u32),
            ..st
        },
        None => st,
    }
}

impl<T: Element> RecvRequest<'_, T> {
    /// True once the message has been taken by this request (by `test`,
    /// `wait` or a wait over several).
    pub fn is_done(&self) -> bool {
        self.handle.as_ref().is_none_or(|h| h.is_done()) && self.taken.is_none()
    }

    /// The message, if it has come; `Ok(None)` while it has not (and after
    /// the request completed).
    pub fn test(&mut self) -> Result<Option<(Status, Vec<T>)>, Error> {
        let m = match self.taken.take() {
            Some(m) => m,
            None => match self.handle.as_mut() {
                Some(h) => match h.test()? {
                    Some(m) => m,
                    None => return Ok(None),
                },
                None => return Ok(None),
            },
        };
        Ok(Some((
            translated(m.0, self.members.as_ref()),
            elements(&m.1)?,
        )))
    }

    /// Waits for the message.
    pub fn wait(self) -> Result<(Status, Vec<T>), Error> {
        let (st, b) = self.wait_bytes()?;
        Ok((st, elements(&b)?))
    }

    /// Waits for the message, as bytes (its status with the
    /// communicator's ranks).
    pub(crate) fn wait_bytes(self) -> Result<Message, Error> {
        let members = self.members;
        let (st, b) = match (self.taken, self.handle) {
            (Some(m), _) => m,
            (None, Some(h)) => h.wait()?,
            // A receive from PROC_NULL already taken by `test`: MPI's
            // wait on a completed request returns at once.
            (None, None) => null_message(),
        };
        Ok((translated(st, members.as_ref()), b))
    }
}

/// A started send ([`Comm::isend`], [`Comm::issend`]): the data was
/// copied (or encrypted) at the call; complete it with
/// [`SendRequest::wait`] or [`SendRequest::test`].
#[derive(Debug)]
pub struct SendRequest<'a> {
    /// The transport's send; `None` for a send to [`PROC_NULL`].
    handle: Option<SendHandle<'a>>,
}

impl SendRequest<'_> {
    /// True once the message is written into TLS (and, for a synchronous
    /// send, its receiver matched it): the request is then complete.
    pub fn test(&mut self) -> Result<bool, Error> {
        match self.handle.as_mut() {
            Some(h) => h.test(),
            None => Ok(true),
        }
    }

    /// Waits until [`SendRequest::test`] would say true.
    pub fn wait(self) -> Result<(), Error> {
        match self.handle {
            Some(h) => h.wait(),
            None => Ok(()),
        }
    }
}

/// The bytes of `data`, borrowed where they already are little-endian.
fn le<T: Element>(data: &[T]) -> std::borrow::Cow<'_, [u8]> {
    match T::le_bytes(data) {
        Some(b) => std::borrow::Cow::Borrowed(b),
        None => std::borrow::Cow::Owned(T::to_le_vec(data)),
    }
}

impl<L: HasEndpoint> Comm<L> {
    fn ep(&self) -> &Endpoint {
        self.link().endpoint()
    }

    /// The job rank of this communicator's rank `r` (protocol §15.2: DATA
    /// carries no communicator; its ranks are translated), H1618 when `r`
    /// is not below the size.
    fn dest(&self, r: u32) -> Result<u32, Error> {
        if r >= self.size() {
            return Err(ArgumentError::Rank {
                rank: r,
                size: self.size(),
            }
            .into());
        }
        Ok(self.job_rank(r))
    }

    /// The communicator id its messages carry (protocol §16.2): its own
    /// with feature bit 3, else the job's (0; DATA carries none, §15.2).
    pub(crate) fn wire(&self) -> u32 {
        if self.ep().has_p2p_communicators() {
            self.id()
        } else {
            0
        }
    }

    /// [`Comm::wire`] of a call that may start: H1613 on a revoked
    /// communicator (protocol §18.8.1).
    fn live_wire(&self) -> Result<u32, Error> {
        self.check_revoked()?;
        Ok(self.wire())
    }

    /// The checks of a call with [`PROC_NULL`], which then completes: a
    /// revoked communicator (H1613, protocol §18.8.1), a reserved tag.
    fn null_call(&self, tag: Option<u32>) -> Result<(), Error> {
        self.check_revoked()?;
        check_tag(tag)
    }

    /// A source as a job rank; any source on every communicator with
    /// feature bit 3, else only on the job's (a message carries no
    /// communicator to tell which one it is for).
    fn src(&self, s: Option<u32>) -> Result<Option<u32>, Error> {
        match s {
            Some(r) => self.dest(r).map(Some),
            None if self.id() != 0 && !self.ep().has_p2p_communicators() => {
                Err(UsageError::AnySourceOnSubcommunicator.into())
            }
            None => Ok(None),
        }
    }

    /// A status with its source as this communicator's rank.
    fn status(&self, st: Status) -> Status {
        translated(st, self.group.members.as_ref())
    }

    fn joined(&self, source: Option<u32>, tag: Option<u32>) -> Result<Message, Error> {
        if source == Some(PROC_NULL) {
            self.null_call(tag)?;
            return Ok(null_message());
        }
        let (st, b) = self
            .ep()
            .recv_on(self.live_wire()?, self.src(source)?, tag)?;
        Ok((self.status(st), b))
    }

    /// Sends `data` to rank `to` with user tag `tag`: one message of any
    /// length (protocol §16.2, or §7.2's frame series without feature bit
    /// 3), joined by the receiver. Returns once the message is queued
    /// (small) or written into TLS (large). A tag of 2147483648 or above or
    /// a rank not below the size is H1618 before anything is sent; the job
    /// goes on. Any thread may send: the frames of one message are never
    /// interleaved with another message's.
    pub fn send<T: Element>(&self, to: u32, tag: u32, data: &[T]) -> Result<(), Error> {
        self.send_bytes(to, tag, &le(data))
    }

    /// [`Comm::send`] of bytes.
    pub fn send_bytes(&self, to: u32, tag: u32, data: &[u8]) -> Result<(), Error> {
        self.send_mode(to, tag, data, SendMode::Standard)
    }

    /// A synchronous send (MPI's `MPI_Ssend`, protocol §16.5): as
    /// [`Comm::send`], returning only once rank `to` has matched the
    /// message with a receive or a matched probe. Needs HELLO feature bit
    /// 3 ([`UsageError::NoP2pCommunicators`] before anything is sent
    /// without it); fails with H1613 (`Departed`) when `to` says BYE first.
    pub fn ssend<T: Element>(&self, to: u32, tag: u32, data: &[T]) -> Result<(), Error> {
        self.ssend_bytes(to, tag, &le(data))
    }

    /// [`Comm::ssend`] of bytes.
    pub fn ssend_bytes(&self, to: u32, tag: u32, data: &[u8]) -> Result<(), Error> {
        self.send_mode(to, tag, data, SendMode::Synchronous)
    }

    fn send_mode(&self, to: u32, tag: u32, data: &[u8], mode: SendMode) -> Result<(), Error> {
        if to == PROC_NULL {
            return self.null_call(Some(tag));
        }
        self.ep()
            .send_on(self.live_wire()?, self.dest(to)?, tag, data, mode)
    }

    /// Receives the next message from `from` with `tag`, of any length.
    /// H1618 (the message dropped) when it is not a whole number of `T`.
    pub fn recv<T: Element>(&self, from: u32, tag: u32) -> Result<Vec<T>, Error> {
        let (_, b) = self.joined(Some(from), Some(tag))?;
        elements(&b)
    }

    /// [`Comm::recv`] of bytes.
    pub fn recv_bytes(&self, from: u32, tag: u32) -> Result<Vec<u8>, Error> {
        Ok(self.joined(Some(from), Some(tag))?.1)
    }

    /// Receives the next message from `from` with `tag` into `buf`, which
    /// must have room for it (MPI's count is an upper bound): the elements
    /// it fills are `status.len / WIDTH`. A longer message is H1618
    /// ([`ArgumentError::Truncated`]) and is dropped.
    pub fn recv_into<T: Element>(
        &self,
        from: u32,
        tag: u32,
        buf: &mut [T],
    ) -> Result<Status, Error> {
        let (st, b) = self.joined(Some(from), Some(tag))?;
        elements_into(&b, buf)?;
        Ok(st)
    }

    /// Receives the first message to arrive that matches `source` and
    /// `tag` (`None`: any source, any tag), with its [`Status`]. With
    /// `source: None` which sender's message comes first is not
    /// deterministic (MPI's `MPI_ANY_SOURCE`).
    ///
    /// ```no_run
    /// # fn f(comm: &sperli_collective::Comm<sperli_collective::Endpoint>) -> Result<(), sperli_collective::Error> {
    /// // Rank 0 collects one result from every worker, in arrival order.
    /// for _ in 1..comm.size() {
    ///     let (status, v) = comm.recv_match::<f64>(None, Some(7))?;
    ///     println!("rank {} sent {} values", status.source, v.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn recv_match<T: Element>(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<(Status, Vec<T>), Error> {
        let (st, b) = self.joined(source, tag)?;
        Ok((st, elements(&b)?))
    }

    /// [`Comm::recv_match`] of bytes.
    pub fn recv_match_bytes(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Message, Error> {
        self.joined(source, tag)
    }

    /// [`Comm::recv_match`] into `buf` (see [`Comm::recv_into`]).
    pub fn recv_match_into<T: Element>(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
        buf: &mut [T],
    ) -> Result<Status, Error> {
        let (st, b) = self.joined(source, tag)?;
        elements_into(&b, buf)?;
        Ok(st)
    }

    /// Starts a send of `data` (copied, or encrypted, before this returns,
    /// so `data` is free at once); complete it with [`SendRequest::wait`].
    pub fn isend<T: Element>(
        &self,
        to: u32,
        tag: u32,
        data: &[T],
    ) -> Result<SendRequest<'_>, Error> {
        self.isend_bytes(to, tag, &le(data))
    }

    /// [`Comm::isend`] of bytes.
    pub fn isend_bytes(&self, to: u32, tag: u32, data: &[u8]) -> Result<SendRequest<'_>, Error> {
        self.isend_mode(to, tag, data, SendMode::Standard)
    }

    /// A synchronous send request (MPI's `MPI_Issend`, protocol §16.5): as
    /// [`Comm::isend`], complete once the message is written and rank `to`
    /// matched it. Errors as [`Comm::ssend`].
    pub fn issend<T: Element>(
        &self,
        to: u32,
        tag: u32,
        data: &[T],
    ) -> Result<SendRequest<'_>, Error> {
        self.issend_bytes(to, tag, &le(data))
    }

    /// [`Comm::issend`] of bytes.
    pub fn issend_bytes(&self, to: u32, tag: u32, data: &[u8]) -> Result<SendRequest<'_>, Error> {
        self.isend_mode(to, tag, data, SendMode::Synchronous)
    }

    fn isend_mode(
        &self,
        to: u32,
        tag: u32,
        data: &[u8],
        mode: SendMode,
    ) -> Result<SendRequest<'_>, Error> {
        if to == PROC_NULL {
            self.null_call(Some(tag))?;
            return Ok(SendRequest { handle: None });
        }
        let h = self
            .ep()
            .isend_on(self.live_wire()?, self.dest(to)?, tag, data, mode)?;
        Ok(SendRequest { handle: Some(h) })
    }

    /// Posts a receive from `source` with `tag` (`None`: any) of elements
    /// `T`; the request borrows the communicator, and collectives may run
    /// while it is open. Posted receives match in post order.
    ///
    /// ```no_run
    /// # use sperli_collective::prelude::*;
    /// # fn f(comm: &Comm<sperli_collective::Endpoint>) -> Result<(), Error> {
    /// let left = (comm.rank() + comm.size() - 1) % comm.size();
    /// let halo = comm.irecv::<f64>(Some(left), Some(1))?;
    /// let norm = comm.allreduce(&[1.0f64], Reduction::Sum)?; // while the receive is open
    /// let (_status, values) = halo.wait()?;
    /// # let _ = (norm, values); Ok(()) }
    /// ```
    pub fn irecv<T: Element>(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<RecvRequest<'_, T>, Error> {
        if source == Some(PROC_NULL) {
            self.null_call(tag)?;
            return Ok(RecvRequest {
                handle: None,
                members: None,
                taken: Some(null_message()),
                _t: PhantomData,
            });
        }
        Ok(RecvRequest {
            handle: Some(
                self.ep()
                    .irecv_on(self.live_wire()?, self.src(source)?, tag)?,
            ),
            members: self.group.members.clone(),
            taken: None,
            _t: PhantomData,
        })
    }

    /// A matched probe (MPI's `MPI_Mprobe`, protocol §16.3): waits for a
    /// message matching `source` and `tag` (`None`: any) and takes it for
    /// the returned request alone (no other receive or probe sees it; a
    /// synchronous sender learns now that it matched). The request's
    /// `wait` is MPI's `MPI_Mrecv`. From [`PROC_NULL`]: MPI's
    /// `MPI_MESSAGE_NO_PROC`, an empty message with the null status.
    pub fn mprobe<T: Element>(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<(Status, RecvRequest<'_, T>), Error> {
        if source == Some(PROC_NULL) {
            return self.null_matched(tag);
        }
        let (st, h) = self
            .ep()
            .mprobe_on(self.live_wire()?, self.src(source)?, tag)?;
        Ok((self.status(st), self.matched(h)))
    }

    /// As [`Comm::mprobe`] without waiting (MPI's `MPI_Improbe`):
    /// `Ok(None)` when no such message is there yet. Makes progress first.
    #[allow(clippy::type_complexity)]
    pub fn improbe<T: Element>(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Option<(Status, RecvRequest<'_, T>)>, Error> {
        if source == Some(PROC_NULL) {
            return self.null_matched(tag).map(Some);
        }
        Ok(self
            .ep()
            .improbe_on(self.live_wire()?, self.src(source)?, tag)?
            .map(|(st, h)| (self.status(st), self.matched(h))))
    }

    fn matched<'a, T>(&self, h: RecvHandle<'a>) -> RecvRequest<'a, T> {
        RecvRequest {
            handle: Some(h),
            members: self.group.members.clone(),
            taken: None,
            _t: PhantomData,
        }
    }

    fn null_matched<T>(&self, tag: Option<u32>) -> Result<(Status, RecvRequest<'_, T>), Error> {
        self.null_call(tag)?;
        Ok((
            null_status(),
            RecvRequest {
                handle: None,
                members: None,
                taken: Some(null_message()),
                _t: PhantomData,
            },
        ))
    }

    /// Sends `data` to `to` with `send_tag` and receives a message from
    /// `source` with `recv_tag` (`None`: any), without deadlock between
    /// two ranks that exchange with each other (the receive is posted
    /// before the send). The arguments come in the order of every
    /// point-to-point call: the send's (`to, tag, data`, as [`Comm::send`])
    /// then the receive's (`source, tag`, as [`Comm::irecv`]).
    ///
    /// ```
    /// use sperli_collective::Comm;
    /// use sperli_transport::Endpoint;
    /// /// Passes this rank's number to the right; returns the left's.
    /// fn ring(c: &Comm<Endpoint>) -> Result<Vec<u32>, sperli_wire::Error> {
    ///     let (me, n) = (c.rank(), c.size());
    ///     let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    ///     let (_status, got) = c.sendrecv(right, 7, &[me], Some(left), Some(7))?;
    ///     Ok(got)
    /// }
    /// ```
    pub fn sendrecv<T: Element, U: Element>(
        &self,
        to: u32,
        send_tag: u32,
        data: &[T],
        source: Option<u32>,
        recv_tag: Option<u32>,
    ) -> Result<(Status, Vec<U>), Error> {
        let r = self.irecv::<U>(source, recv_tag)?;
        self.send(to, send_tag, data)?;
        r.wait()
    }

    /// [`Comm::sendrecv`] receiving into `buf` (see [`Comm::recv_into`]),
    /// which comes last as in [`Comm::recv_into`].
    pub fn sendrecv_into<T: Element, U: Element>(
        &self,
        to: u32,
        send_tag: u32,
        data: &[T],
        source: Option<u32>,
        recv_tag: Option<u32>,
        buf: &mut [U],
    ) -> Result<Status, Error> {
        let r = self.irecv::<u8>(source, recv_tag)?;
        self.send(to, send_tag, data)?;
        let (st, b) = r.wait_bytes()?;
        elements_into(&b, buf)?;
        Ok(st)
    }

    /// Waits until a message matching `source` and `tag` has arrived and
    /// reports it (its whole length) without taking it: with feature bit 3
    /// from its first frame on, else once all its frames are there.
    pub fn probe(&self, source: Option<u32>, tag: Option<u32>) -> Result<Status, Error> {
        if source == Some(PROC_NULL) {
            self.null_call(tag)?;
            return Ok(null_status());
        }
        Ok(self.status(
            self.ep()
                .probe_on(self.live_wire()?, self.src(source)?, tag)?,
        ))
    }

    /// As [`Comm::probe`] without waiting: `Ok(None)` when no such message
    /// is there yet. Makes progress first.
    pub fn iprobe(&self, source: Option<u32>, tag: Option<u32>) -> Result<Option<Status>, Error> {
        if source == Some(PROC_NULL) {
            self.null_call(tag)?;
            return Ok(Some(null_status()));
        }
        Ok(self
            .ep()
            .iprobe_on(self.live_wire()?, self.src(source)?, tag)?
            .map(|st| self.status(st)))
    }

    /// Waits until one of `requests` completes: its index, status and
    /// elements; `Ok(None)` when none is open. When several complete at
    /// once the lowest index comes first; which message arrives first is
    /// up to the senders.
    pub fn wait_any<T: Element>(
        &self,
        requests: &mut [RecvRequest<'_, T>],
    ) -> Result<Option<(usize, Status, Vec<T>)>, Error> {
        if let Some(i) = requests.iter().position(|r| r.taken.is_some()) {
            if let Some((st, b)) = requests[i].taken.take() {
                return Ok(Some((i, self.status(st), elements(&b)?)));
            }
        }
        // Receives from PROC_NULL hold no transport handle (and were taken
        // above): wait over the others, then map the index back.
        let (at, mut handles): (Vec<usize>, Vec<&mut RecvHandle<'_>>) = requests
            .iter_mut()
            .enumerate()
            .filter_map(|(i, r)| r.handle.as_mut().map(|h| (i, h)))
            .unzip();
        match self.ep().wait_any(&mut handles)? {
            Some((k, (st, b))) => Ok(Some((at[k], self.status(st), elements(&b)?))),
            None => Ok(None),
        }
    }

    /// Waits until every one of `requests` completed; their messages in
    /// request order (`None` for one that was complete already).
    #[allow(clippy::type_complexity)]
    pub fn wait_all<T: Element>(
        &self,
        requests: &mut [RecvRequest<'_, T>],
    ) -> Result<Vec<Option<(Status, Vec<T>)>>, Error> {
        let mut out: Vec<Option<(Status, Vec<T>)>> = requests.iter().map(|_| None).collect();
        while let Some((i, st, v)) = self.wait_any(requests)? {
            out[i] = Some((st, v));
        }
        Ok(out)
    }

    /// `Some` with every message (in request order; `None` for a request
    /// that was complete already) once all of `requests` have completed;
    /// `Ok(None)` while any is still open, and then no request completes
    /// (what came stays in its request for a later wait). Makes progress.
    #[allow(clippy::type_complexity)]
    pub fn test_all<T: Element>(
        &self,
        requests: &mut [RecvRequest<'_, T>],
    ) -> Result<Option<Vec<Option<(Status, Vec<T>)>>>, Error> {
        self.ep().progress()?;
        let mut all = true;
        for r in requests.iter_mut() {
            if let (None, Some(h)) = (&r.taken, r.handle.as_mut()) {
                if !h.is_done() {
                    match h.test()? {
                        Some(m) => r.taken = Some(m),
                        None => all = false,
                    }
                }
            }
        }
        if !all {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(requests.len());
        for r in requests.iter_mut() {
            out.push(match r.taken.take() {
                Some((st, b)) => Some((self.status(st), elements(&b)?)),
                None => None,
            });
        }
        Ok(Some(out))
    }

    /// Waits for every send request.
    pub fn wait_all_sends(&self, requests: Vec<SendRequest<'_>>) -> Result<(), Error> {
        for r in requests {
            r.wait()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_bytes_must_be_whole_elements_and_fit() {
        assert!(matches!(
            elements::<u32>(&[1, 2, 3]),
            Err(Error::InvalidArguments(ArgumentError::NotWholeElements {
                len: 3,
                width: 4
            }))
        ));
        let mut buf = [0u32; 1];
        assert!(matches!(
            elements_into(&[0u8; 8], &mut buf),
            Err(Error::InvalidArguments(ArgumentError::Truncated {
                len: 8,
                room: 4
            }))
        ));
        let mut buf = [0u32; 3];
        elements_into(&7u32.to_le_bytes(), &mut buf).unwrap();
        assert_eq!(buf, [7, 0, 0]);
    }
}
