//! The receive side of [`Endpoint`]: receives from a source or any
//! source, posted receives and their handles, probes, waits over several
//! handles. Matching is [`crate::proto::matching`]'s; every wait drives
//! the sockets on the waiting thread (`io::driver`).

use sperli_wire::error::ArgumentError;
use sperli_wire::limits::MAX_USER_TAG;
use sperli_wire::Error;

use std::borrow::{Borrow, BorrowMut};
use std::sync::Arc;

use super::{Endpoint, EndpointRef};
use crate::proto::matching::{departed, Matching, Message, RecvId, Status};

/// A posted receive, holding its endpoint as `E` ([`EndpointRef`]): use
/// the names [`RecvHandle`] (from [`Endpoint::irecv`],
/// [`Endpoint::irecv_match`], [`Endpoint::irecv_joined`]) and
/// [`OwnedRecvHandle`] (from their `*_owned` forms). Dropping it
/// unfinished cancels the receive.
#[derive(Debug)]
pub struct PostedRecv<E: EndpointRef> {
    ep: E,
    id: RecvId,
    closed: bool,
}

/// A posted receive that borrows its endpoint ([`Endpoint::irecv`]).
pub type RecvHandle<'a> = PostedRecv<&'a Endpoint>;

/// A posted receive that holds a counted handle on its endpoint
/// ([`Endpoint::irecv_owned`]), so it borrows nothing.
pub type OwnedRecvHandle = PostedRecv<Arc<Endpoint>>;

impl<E: EndpointRef> PostedRecv<E> {
    /// Posts a receive on `ep` with `post` (single-frame or joined
    /// matching): the one implementation of every `irecv*` call, borrowed
    /// or owned.
    fn post(
        ep: E,
        source: Option<u32>,
        tag: Option<u32>,
        post: fn(&mut Matching, Option<u32>, Option<u32>) -> RecvId,
    ) -> Result<Self, Error> {
        ep.check_source(source, tag)?;
        let id = {
            let mut st = ep.shared.state();
            st.count_recv(true);
            post(&mut st, source, tag)
        };
        Ok(Self {
            ep,
            id,
            closed: false,
        })
    }

    /// Posts a receive on communicator `comm` (whole messages: joined
    /// without feature bit 3): [`Endpoint::irecv_on`].
    pub(super) fn post_on(
        ep: E,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Self, Error> {
        ep.check_source(source, tag)?;
        let (id, due) = {
            let mut st = ep.shared.state();
            st.count_recv(true);
            let id = st.post_joined_on(comm, source, tag);
            (id, st.notices_due())
        };
        if due {
            crate::io::notices::send_due(&ep.shared);
        }
        Ok(Self {
            ep,
            id,
            closed: false,
        })
    }

    /// The handle of a message a matched probe claimed (receive `id`,
    /// already counted open).
    pub(super) fn claimed(ep: E, id: RecvId) -> Self {
        Self {
            ep,
            id,
            closed: false,
        }
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            let mut st = self.ep.shared.state();
            st.count_recv(false);
            st.cancel(self.id);
        }
    }

    /// True once the handle completed (by `test`, `wait` or a wait over
    /// several handles).
    pub fn is_done(&self) -> bool {
        self.closed
    }

    /// MPI's `MPI_Cancel`: true when the receive had not matched a message
    /// yet: it is gone (the handle is done, nothing was received and no
    /// message is lost). False when it already took one (or completed): it
    /// goes on and completes as usual.
    pub fn cancel(&mut self) -> bool {
        if self.closed {
            return false;
        }
        let gone = self.ep.shared.state().try_cancel(self.id);
        if gone {
            self.closed = true;
            self.ep.shared.state().count_recv(false);
        }
        gone
    }

    /// The message, if it has come (the handle is then closed). Makes
    /// progress first, as every `test` does.
    pub fn test(&mut self) -> Result<Option<Message>, Error> {
        if self.closed {
            return Ok(None);
        }
        self.ep.progress()?;
        let r = self.ep.shared.state().poll_recv(self.id);
        match r {
            Some(r) => {
                self.close();
                r.map(Some)
            }
            None => Ok(None),
        }
    }

    /// Waits for the message.
    pub fn wait(mut self) -> Result<Message, Error> {
        let r = self.ep.wait_recv(self.id);
        self.close();
        r
    }
}

impl<E: EndpointRef> Drop for PostedRecv<E> {
    fn drop(&mut self) {
        // A dropped, unfinished receive is cancelled; a message it matched
        // but nobody took is lost with it.
        self.close();
    }
}

impl Endpoint {
    fn check_source(&self, source: Option<u32>, tag: Option<u32>) -> Result<(), Error> {
        self.check()?;
        if let Some(s) = source {
            self.check_rank(s)?;
        }
        if let Some(t) = tag {
            if t > MAX_USER_TAG {
                return Err(ArgumentError::Tag { tag: t }.into());
            }
        }
        Ok(())
    }

    fn post(&self, source: Option<u32>, tag: Option<u32>) -> Result<RecvId, Error> {
        self.check_source(source, tag)?;
        Ok(self.shared.state().post(source, tag))
    }

    pub(super) fn wait_recv(&self, id: RecvId) -> Result<Message, Error> {
        self.wait(|| self.shared.state().poll_recv(id))
    }

    /// Receives the next message from `from` with `tag` (arrival order).
    /// When `from` left (BYE) and nothing queued from it matches: H1613
    /// with `LossCause::Departed`.
    pub fn recv(&self, from: u32, tag: u32) -> Result<Vec<u8>, Error> {
        let id = self.post(Some(from), Some(tag))?;
        self.wait_recv(id).map(|(_, m)| m)
    }

    /// Receives the next message from `from` with any tag.
    pub fn recv_any_tag(&self, from: u32) -> Result<Message, Error> {
        let id = self.post(Some(from), None)?;
        self.wait_recv(id)
    }

    /// Receives the first message to arrive that matches `source` (`None`:
    /// any source) and `tag` (`None`: any tag), with its [`Status`]. Which
    /// of several senders an any-source receive gets depends on timing,
    /// as in MPI (`MPI_ANY_SOURCE`); from one sender, messages come in
    /// the order it sent them.
    pub fn recv_match(&self, source: Option<u32>, tag: Option<u32>) -> Result<Message, Error> {
        let id = self.post(source, tag)?;
        self.wait_recv(id)
    }

    /// Receives the first message to arrive that matches `source` and
    /// `tag` (`None`: any), of any length: a message sent as several DATA
    /// frames by the convention of protocol §7.2 (every frame but the last
    /// exactly 16777216 bytes) is joined; a shorter message is one frame,
    /// as with [`Endpoint::recv_match`].
    pub fn recv_joined(&self, source: Option<u32>, tag: Option<u32>) -> Result<Message, Error> {
        self.check_source(source, tag)?;
        let id = self.shared.state().post_joined(source, tag);
        self.wait_recv(id)
    }

    /// Posts a receive of [`Endpoint::recv_joined`]; posted receives of
    /// either kind match in post order.
    pub fn irecv_joined(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<RecvHandle<'_>, Error> {
        PostedRecv::post(self, source, tag, Matching::post_joined)
    }

    /// As [`Endpoint::irecv_joined`], with an owned handle (see
    /// [`Endpoint::isend_owned`]).
    pub fn irecv_joined_owned(
        self: &Arc<Self>,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<OwnedRecvHandle, Error> {
        PostedRecv::post(Arc::clone(self), source, tag, Matching::post_joined)
    }

    /// As [`Endpoint::probe`] for the messages of [`Endpoint::recv_joined`]:
    /// waits until the whole message has arrived and reports its whole
    /// length.
    pub fn probe_joined(&self, source: Option<u32>, tag: Option<u32>) -> Result<Status, Error> {
        self.wait_probe(source, tag, Matching::probe_joined)
    }

    /// As [`Endpoint::iprobe`] for the messages of [`Endpoint::recv_joined`]
    /// (`None` also while a message's later frames are on their way).
    pub fn iprobe_joined(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Option<Status>, Error> {
        self.check_source(source, tag)?;
        self.progress()?;
        Ok(self.shared.state().probe_joined(source, tag))
    }

    /// [`Endpoint::iprobe_joined`] on communicator `comm`.
    pub(super) fn iprobe_joined_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Option<Status>, Error> {
        self.check_source(source, tag)?;
        self.progress()?;
        let st = self.shared.state();
        st.check_comm(comm)?;
        Ok(st.probe_joined_on(comm, source, tag))
    }

    /// [`Endpoint::probe_joined`] on communicator `comm`.
    pub(super) fn probe_joined_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Status, Error> {
        self.check_source(source, tag)?;
        self.wait(|| {
            let st = self.shared.state();
            if let Err(e) = st.check_comm(comm) {
                return Some(Err(e));
            }
            if let Some(s) = st.probe_joined_on(comm, source, tag) {
                return Some(Ok(s));
            }
            let s = source?;
            st.departed(s).then(|| Err(departed(s)))
        })
    }

    /// Posts a receive from `from` with `tag` (or any tag with `None`).
    /// Posted receives match in post order.
    pub fn irecv(&self, from: u32, tag: Option<u32>) -> Result<RecvHandle<'_>, Error> {
        self.irecv_match(Some(from), tag)
    }

    /// As [`Endpoint::irecv`], with an owned handle (see
    /// [`Endpoint::isend_owned`]).
    pub fn irecv_owned(
        self: &Arc<Self>,
        from: u32,
        tag: Option<u32>,
    ) -> Result<OwnedRecvHandle, Error> {
        self.irecv_match_owned(Some(from), tag)
    }

    /// Posts a receive from `source` (`None`: any source) with `tag`
    /// (`None`: any tag); see [`Endpoint::recv_match`].
    pub fn irecv_match(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<RecvHandle<'_>, Error> {
        PostedRecv::post(self, source, tag, Matching::post)
    }

    /// As [`Endpoint::irecv_match`], with an owned handle (see
    /// [`Endpoint::isend_owned`]).
    pub fn irecv_match_owned(
        self: &Arc<Self>,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<OwnedRecvHandle, Error> {
        PostedRecv::post(Arc::clone(self), source, tag, Matching::post)
    }

    /// Waits until `probe` (single-frame or joined matching) finds a
    /// message, or `source` has departed with nothing queued.
    fn wait_probe(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
        probe: fn(&Matching, Option<u32>, Option<u32>) -> Option<Status>,
    ) -> Result<Status, Error> {
        self.check_source(source, tag)?;
        self.wait(|| {
            let st = self.shared.state();
            if let Some(s) = probe(&st, source, tag) {
                return Some(Ok(s));
            }
            let s = source?;
            st.departed(s).then(|| Err(departed(s)))
        })
    }

    /// Waits until a message matching `source` and `tag` (`None`: any) has
    /// arrived and returns its [`Status`], leaving it to be received
    /// (MPI's `probe`).
    pub fn probe(&self, source: Option<u32>, tag: Option<u32>) -> Result<Status, Error> {
        self.wait_probe(source, tag, Matching::probe)
    }

    /// The [`Status`] of a message matching `source` and `tag` that has
    /// arrived, if any, left to be received (MPI's `iprobe`). Makes
    /// progress first.
    pub fn iprobe(&self, source: Option<u32>, tag: Option<u32>) -> Result<Option<Status>, Error> {
        self.check_source(source, tag)?;
        self.progress()?;
        Ok(self.shared.state().probe(source, tag))
    }

    /// Waits until one of `handles` completes and returns its index and
    /// message; the handle is then done. `Ok(None)` when no handle is
    /// still open (MPI's `MPI_UNDEFINED`). When several complete at once,
    /// the lowest index is reported first.
    ///
    /// `handles` may be the handles themselves or anything that holds one
    /// ([`BorrowMut`]), such as the typed requests of sperli-collective.
    pub fn wait_any<E: EndpointRef, H: BorrowMut<PostedRecv<E>>>(
        &self,
        handles: &mut [H],
    ) -> Result<Option<(usize, Message)>, Error> {
        if handles.iter().all(|h| h.borrow().closed) {
            return Ok(None);
        }
        let (i, r) = self.wait(|| first_complete(self, handles).map(Ok))?;
        handles[i].borrow_mut().close();
        r.map(|m| Some((i, m)))
    }

    /// As [`Endpoint::wait_any`] without waiting: `Ok(None)` when none of
    /// `handles` has completed yet. Makes progress first.
    pub fn test_any<E: EndpointRef, H: BorrowMut<PostedRecv<E>>>(
        &self,
        handles: &mut [H],
    ) -> Result<Option<(usize, Message)>, Error> {
        self.progress()?;
        match first_complete(self, handles) {
            Some((i, r)) => {
                handles[i].borrow_mut().close();
                r.map(|m| Some((i, m)))
            }
            None => Ok(None),
        }
    }

    /// Waits until every one of `handles` completed; their messages in
    /// handle order (`None` for a handle that was done already).
    pub fn wait_all<E: EndpointRef, H: BorrowMut<PostedRecv<E>>>(
        &self,
        handles: &mut [H],
    ) -> Result<Vec<Option<Message>>, Error> {
        let mut out: Vec<Option<Message>> = handles.iter().map(|_| None).collect();
        while let Some((i, m)) = self.wait_any(handles)? {
            out[i] = Some(m);
        }
        Ok(out)
    }

    /// Open send and receive handles `(sends, recvs)`: created and not yet
    /// completed by `wait`/`test` or dropped (H1624 needs them).
    pub fn open_handles(&self) -> (u64, u64) {
        self.shared.state().open_handles()
    }
}

/// The first of `handles` that completed, with its index and outcome.
fn first_complete<E: EndpointRef, H: Borrow<PostedRecv<E>>>(
    ep: &Endpoint,
    handles: &[H],
) -> Option<(usize, Result<Message, Error>)> {
    let mut st = ep.shared.state();
    handles
        .iter()
        .map(|h| h.borrow())
        .enumerate()
        .filter(|(_, h)| !h.closed)
        .find_map(|(i, h)| st.poll_recv(h.id).map(|r| (i, r)))
}
