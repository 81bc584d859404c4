//! Typed point-to-point on [`Comm`] (protocol §7.2, §6.5): `send`, `recv`,
//! `recv_into`, `isend`, `irecv`, `sendrecv`, receives from any source,
//! `probe`/`iprobe`, and waits over several requests; for slices of any
//! [`Element`] (bytes are `u8`), with byte-named forms beside them.
//!
//! These wrap the transport's calls ([`Endpoint::recv_joined`],
//! [`Endpoint::irecv_joined`], [`Endpoint::probe_joined`],
//! [`Endpoint::wait_any`], ...): a message is the DATA frames of protocol
//! §7.2, so messages larger than one frame (16777216 bytes) go through the
//! same calls, split by the sender and joined by the receiver. Elements
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
//! On a communicator made by split or dup, ranks are its ranks (translated
//! to job ranks underneath: DATA carries no communicator, protocol §15.2)
//! and tags are shared with the job's; a receive from any source is only
//! offered on the job's communicator
//! ([`UsageError::AnySourceOnSubcommunicator`]).
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

use sperli_transport::{Endpoint, Message, RecvHandle, SendHandle, Status};
use sperli_wire::error::{ArgumentError, UsageError};
use sperli_wire::limits::MAX_PAYLOAD;
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

/// The frames of a message of `len` bytes (protocol §7.2): pieces of
/// exactly 16777216 bytes, then one shorter piece (empty when `len` is a
/// multiple of 16777216, and for an empty message).
fn pieces(len: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let max = MAX_PAYLOAD as usize;
    let full = len / max;
    (0..=full).map(move |i| i * max..((i + 1) * max).min(len))
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

/// A started send ([`Comm::isend`]): the data was copied (or encrypted)
/// at the call; complete it with [`SendRequest::wait`] or
/// [`SendRequest::test`]. One transport handle per frame of the message.
#[derive(Debug)]
pub struct SendRequest<'a> {
    frames: Vec<SendHandle<'a>>,
}

impl SendRequest<'_> {
    /// True once every frame is written into TLS (completes the request).
    pub fn test(&mut self) -> Result<bool, Error> {
        for h in &mut self.frames {
            if !h.test()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Waits until every frame is written into TLS.
    pub fn wait(self) -> Result<(), Error> {
        for h in self.frames {
            h.wait()?;
        }
        Ok(())
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

    /// A source as a job rank; any source only on the job's communicator
    /// (a message carries no communicator to tell which one it is for).
    fn src(&self, s: Option<u32>) -> Result<Option<u32>, Error> {
        match s {
            Some(r) => self.dest(r).map(Some),
            None if self.id() != 0 => Err(UsageError::AnySourceOnSubcommunicator.into()),
            None => Ok(None),
        }
    }

    /// A status with its source as this communicator's rank.
    fn status(&self, st: Status) -> Status {
        translated(st, self.group.members.as_ref())
    }

    fn joined(&self, source: Option<u32>, tag: Option<u32>) -> Result<Message, Error> {
        if source == Some(PROC_NULL) {
            check_tag(tag)?;
            return Ok(null_message());
        }
        let (st, b) = self.ep().recv_joined(self.src(source)?, tag)?;
        Ok((self.status(st), b))
    }

    /// Sends `data` to rank `to` with user tag `tag` (protocol §7.2): one
    /// DATA frame up to 16777215 bytes, else consecutive frames of 16777216
    /// bytes and a shorter last one, joined by the receiver. Returns once
    /// the message is queued (small) or written into TLS (large). A tag of
    /// 2147483648 or above or a rank not below the size is H1618 before
    /// anything is sent; the job goes on.
    ///
    /// Send and receive run on the job's ranks (any thread may send on the
    /// endpoint, but the frames of one large message must not be
    /// interleaved with another message of the same tag to the same rank:
    /// send one message per (rank, tag) at a time).
    pub fn send<T: Element>(&self, to: u32, tag: u32, data: &[T]) -> Result<(), Error> {
        self.send_bytes(to, tag, &le(data))
    }

    /// [`Comm::send`] of bytes.
    pub fn send_bytes(&self, to: u32, tag: u32, data: &[u8]) -> Result<(), Error> {
        if to == PROC_NULL {
            return check_tag(Some(tag));
        }
        for r in pieces(data.len()) {
            self.ep().send(self.dest(to)?, tag, &data[r])?;
        }
        Ok(())
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
        let mut frames = Vec::new();
        if to == PROC_NULL {
            check_tag(Some(tag))?;
            return Ok(SendRequest { frames });
        }
        for r in pieces(data.len()) {
            frames.push(self.ep().isend(self.dest(to)?, tag, &data[r])?);
        }
        Ok(SendRequest { frames })
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
            check_tag(tag)?;
            return Ok(RecvRequest {
                handle: None,
                members: None,
                taken: Some(null_message()),
                _t: PhantomData,
            });
        }
        Ok(RecvRequest {
            handle: Some(self.ep().irecv_joined(self.src(source)?, tag)?),
            members: self.group.members.clone(),
            taken: None,
            _t: PhantomData,
        })
    }

    /// Sends `data` to `to` with `send_tag` and receives a message from
    /// `source` with `recv_tag` (`None`: any), without deadlock between
    /// two ranks that exchange with each other (the receive is posted
    /// before the send).
    pub fn sendrecv<T: Element, U: Element>(
        &self,
        data: &[T],
        to: u32,
        send_tag: u32,
        source: Option<u32>,
        recv_tag: Option<u32>,
    ) -> Result<(Status, Vec<U>), Error> {
        let r = self.irecv::<U>(source, recv_tag)?;
        self.send(to, send_tag, data)?;
        r.wait()
    }

    /// [`Comm::sendrecv`] receiving into `buf` (see [`Comm::recv_into`]).
    pub fn sendrecv_into<T: Element, U: Element>(
        &self,
        data: &[T],
        to: u32,
        send_tag: u32,
        buf: &mut [U],
        source: Option<u32>,
        recv_tag: Option<u32>,
    ) -> Result<Status, Error> {
        let r = self.irecv::<u8>(source, recv_tag)?;
        self.send(to, send_tag, data)?;
        let (st, b) = r.wait_bytes()?;
        elements_into(&b, buf)?;
        Ok(st)
    }

    /// Waits until a message matching `source` and `tag` has arrived
    /// (whole, for a message of several frames) and reports it without
    /// taking it.
    pub fn probe(&self, source: Option<u32>, tag: Option<u32>) -> Result<Status, Error> {
        if source == Some(PROC_NULL) {
            check_tag(tag)?;
            return Ok(null_status());
        }
        Ok(self.status(self.ep().probe_joined(self.src(source)?, tag)?))
    }

    /// As [`Comm::probe`] without waiting: `Ok(None)` when no such message
    /// is there yet. Makes progress first.
    pub fn iprobe(&self, source: Option<u32>, tag: Option<u32>) -> Result<Option<Status>, Error> {
        if source == Some(PROC_NULL) {
            check_tag(tag)?;
            return Ok(Some(null_status()));
        }
        Ok(self
            .ep()
            .iprobe_joined(self.src(source)?, tag)?
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
    fn pieces_follow_the_convention_of_protocol_7_2() {
        let m = MAX_PAYLOAD as usize;
        let lens = |n: usize| pieces(n).map(|r| r.len()).collect::<Vec<_>>();
        assert_eq!(lens(0), vec![0]);
        assert_eq!(lens(5), vec![5]);
        assert_eq!(lens(m - 1), vec![m - 1]);
        assert_eq!(lens(m), vec![m, 0]);
        assert_eq!(lens(2 * m + 3), vec![m, m, 3]);
    }

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
