//! Point-to-point on communicators (HELLO feature bit 3, protocol §16):
//! messages that name their communicator, synchronous sends, matched
//! probes, and the communicators a receiver knows for check 4 of §16.4.
//!
//! In a job with bit 3 every DATA frame is a frame of §16.2, whichever
//! call sends it: the v1-named calls ([`Endpoint::send`], `isend`,
//! `send_large`, ...) send on communicator 0, and a receive takes one whole
//! message of any length. In a job without it these calls work on
//! communicator 0 only, with v1's frames (a message longer than one frame
//! is the frame series of protocol §7.2), and a synchronous send or
//! another communicator fails before anything is sent
//! ([`UsageError::NoP2pCommunicators`]).

use std::sync::Arc;

use sperli_wire::codec::Codec;
use sperli_wire::data_header::{DataFrame, DataHeader};
use sperli_wire::error::UsageError;
use sperli_wire::limits::{
    DATA_HEADER_LEN, FEATURE_P2P_COMMUNICATORS, MAX_COMMUNICATOR_ID, MAX_MESSAGE_FRAME_DATA,
    MAX_PAYLOAD,
};
use sperli_wire::{Error, FrameType};

use super::recv::PostedRecv;
use super::send::{Bytes, StartedSend};
use super::{Endpoint, EndpointRef, EAGER_LIMIT};
use crate::proto::connection::Outgoing;
use crate::proto::matching::{RecvId, Status};
use crate::{OwnedRecvHandle, OwnedSendHandle, RecvHandle, SendHandle};

/// How a point-to-point send completes (protocol §16.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendMode {
    /// MPI's standard send: complete once the message is written (or, for
    /// a small one, queued).
    #[default]
    Standard,
    /// MPI's synchronous send (`MPI_Ssend`, `MPI_Issend`): complete once
    /// the message is written and its receiver has matched it (its match
    /// notice came). Needs feature bit 3.
    Synchronous,
}

impl Endpoint {
    /// Whether point-to-point messages carry their communicator in this
    /// job (HELLO feature bit 3 on every rank, protocol §16.1).
    pub fn has_p2p_communicators(&self) -> bool {
        self.features() & FEATURE_P2P_COMMUNICATORS != 0
    }

    /// Checks a point-to-point call on `comm` (`to`: a send's target):
    /// without feature bit 3 only communicator 0 and standard sends; with
    /// it a communicator id of protocol §15.2, or any id for this rank
    /// itself (a communicator that never travels, such as COMM_SELF).
    fn check_on(&self, comm: u32, sync: bool, to: Option<u32>) -> Result<(), Error> {
        if !self.has_p2p_communicators() {
            if sync {
                return Err(UsageError::NoP2pCommunicators {
                    what: "a synchronous send",
                }
                .into());
            }
            if comm != 0 {
                return Err(UsageError::NoP2pCommunicators {
                    what: "a message on a communicator other than the job's",
                }
                .into());
            }
        } else if comm > MAX_COMMUNICATOR_ID && to != Some(self.rank()) {
            return Err(UsageError::LocalCommunicator { id: comm }.into());
        }
        Ok(())
    }

    /// Sends `data` (any length) to `to` with `tag` on communicator `comm`
    /// (0: the job's; with feature bit 3 any communicator of protocol §15,
    /// protocol §16.2). Returns as [`Endpoint::send`] does, and for
    /// [`SendMode::Synchronous`] once the receiver matched the message
    /// (protocol §16.5). Errors as [`Endpoint::send`]; a synchronous send
    /// whose receiver says BYE first fails with H1613 (`Departed`).
    pub fn send_on(
        &self,
        comm: u32,
        to: u32,
        tag: u32,
        data: &[u8],
        mode: SendMode,
    ) -> Result<(), Error> {
        let sync = mode == SendMode::Synchronous;
        self.check_on(comm, sync, Some(to))?;
        self.check_data(to, tag, 0)?;
        if to == self.rank() || data.len() <= EAGER_LIMIT || !self.has_p2p_communicators() {
            return self.isend_on(comm, to, tag, data, mode)?.wait();
        }
        // A large message: each frame streams from `data` itself behind
        // its DATA header (no copy), the frames one after the other.
        let mut outbox = self.outbox(to);
        let number = outbox.next(self.shared.ctx.membership.carried());
        let header = DataHeader::message(comm, number, data.len(), sync);
        if sync {
            self.shared.state().sent_synchronous(to, number, comm, tag);
        }
        let h = self.shared.ctx.header(FrameType::Data, to).with_tag(tag);
        let dh = header.to_bytes();
        for chunk in data.chunks(MAX_MESSAGE_FRAME_DATA) {
            self.send_streamed(to, h, &dh, chunk)?;
        }
        let message = number;
        drop(outbox);
        if sync {
            self.wait(|| self.shared.state().poll_notice(to, message))?;
        }
        Ok(())
    }

    /// Starts a send of `data` (any length) on `comm` ([`Endpoint::send_on`]);
    /// the data is copied (or encrypted) before this returns. The handle
    /// completes when the message is written, and for
    /// [`SendMode::Synchronous`] also matched.
    pub fn isend_on(
        &self,
        comm: u32,
        to: u32,
        tag: u32,
        data: &[u8],
        mode: SendMode,
    ) -> Result<SendHandle<'_>, Error> {
        StartedSend::start_on(self, comm, to, tag, data, mode)
    }

    /// As [`Endpoint::isend_on`], with an owned handle (see
    /// [`Endpoint::isend_owned`]).
    pub fn isend_on_owned(
        self: &Arc<Self>,
        comm: u32,
        to: u32,
        tag: u32,
        data: &[u8],
        mode: SendMode,
    ) -> Result<OwnedSendHandle, Error> {
        StartedSend::start_on(Arc::clone(self), comm, to, tag, data, mode)
    }

    /// The last message number used on the connection to `to`, locked:
    /// whoever holds it puts a whole message on the connection, so numbers
    /// go out in order and no frame of another message comes between a
    /// message's frames (protocol §16.2).
    fn outbox(&self, to: u32) -> std::sync::MutexGuard<'_, Outbox> {
        self.outboxes[to as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Queues every frame of a message to `to` (or this rank) and returns
    /// the send's seq to wait on (0: complete), and the synchronous
    /// message's number to wait on.
    pub(super) fn start_message(
        &self,
        comm: u32,
        to: u32,
        tag: u32,
        data: Bytes<'_>,
        sync: bool,
    ) -> Result<(u64, Option<(u32, u64)>), Error> {
        self.check_data(to, tag, 0)?;
        self.shared.state().check_comm_tag(comm, Some(tag))?;
        if to == self.rank() {
            let payload = data.into_vec(&self.shared.pool);
            let message = self.shared.state().handle_local(comm, tag, payload, sync);
            self.shared.changed();
            return Ok((0, sync.then_some((to, message))));
        }
        if !self.has_p2p_communicators() {
            // v1: the frame series of protocol §7.2 (every frame but the
            // last exactly 16777216 bytes), in one piece on the connection.
            let _outbox = self.outbox(to);
            let bytes: &[u8] = match &data {
                Bytes::Borrowed(b) => b,
                Bytes::Owned(v) => v,
            };
            let max = MAX_PAYLOAD as usize;
            let full = bytes.len() / max;
            let mut seq = 0;
            for i in 0..=full {
                let piece = &bytes[i * max..((i + 1) * max).min(bytes.len())];
                seq = if i == full { self.seq() } else { 0 };
                let h = self.shared.ctx.header(FrameType::Data, to).with_tag(tag);
                if self.push_bytes(to, h, Bytes::Borrowed(piece), seq)? && i == full {
                    seq = 0;
                }
            }
            return Ok((seq, None));
        }
        let mut outbox = self.outbox(to);
        let number = outbox.next(self.shared.ctx.membership.carried());
        let header = DataHeader::message(comm, number, data.len(), sync);
        if sync {
            self.shared.state().sent_synchronous(to, number, comm, tag);
        }
        let h = self.shared.ctx.header(FrameType::Data, to).with_tag(tag);
        let bytes: &[u8] = match &data {
            Bytes::Borrowed(b) => b,
            Bytes::Owned(v) => v,
        };
        let mut chunks: Vec<&[u8]> = bytes.chunks(MAX_MESSAGE_FRAME_DATA).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let last = chunks.len() - 1;
        let mut seq = 0;
        for (i, c) in chunks.into_iter().enumerate() {
            let mut payload = self.shared.pool.take(DATA_HEADER_LEN + c.len());
            DataFrame { header, data: c }.encode(&mut payload);
            let s = if i == last { self.seq() } else { 0 };
            let written = self.push(to, Outgoing::new(h, payload, s))?;
            if i == last {
                seq = if written { 0 } else { s };
            }
        }
        let message = number;
        Ok((seq, sync.then_some((to, message))))
    }

    /// Posts a receive on communicator `comm` from `source` (`None`: any
    /// member) with `tag` (`None`: any): one whole message of any length
    /// (protocol §16.3; without feature bit 3 on communicator 0 only, the
    /// frame series of §7.2 joined). The status names the sender's job
    /// rank.
    pub fn irecv_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<RecvHandle<'_>, Error> {
        self.check_on(comm, false, source)?;
        PostedRecv::post_on(self, comm, source, tag)
    }

    /// As [`Endpoint::irecv_on`], with an owned handle.
    pub fn irecv_on_owned(
        self: &Arc<Self>,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<OwnedRecvHandle, Error> {
        self.check_on(comm, false, source)?;
        PostedRecv::post_on(Arc::clone(self), comm, source, tag)
    }

    /// Receives one whole message on `comm` ([`Endpoint::irecv_on`]).
    pub fn recv_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<crate::Message, Error> {
        self.irecv_on(comm, source, tag)?.wait()
    }

    /// The status of the message a receive on `comm` from `source` with
    /// `tag` would take now, left where it is (MPI's `iprobe`); with
    /// feature bit 3 from its first frame on, with its whole length.
    pub fn iprobe_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Option<Status>, Error> {
        self.check_on(comm, false, source)?;
        self.iprobe_joined_on(comm, source, tag)
    }

    /// Waits for a message as [`Endpoint::iprobe_on`] finds it (MPI's
    /// `probe`).
    pub fn probe_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Status, Error> {
        self.check_on(comm, false, source)?;
        self.probe_joined_on(comm, source, tag)
    }

    /// A matched probe (MPI's `MPI_Improbe`, protocol §16.3): the message a
    /// receive on `comm` would take now becomes the returned handle's (no
    /// other receive takes it; a synchronous one is matched now), with its
    /// status. `None` when there is none yet.
    pub fn improbe_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Option<(Status, RecvHandle<'_>)>, Error> {
        PostedRecv::improbe(self, comm, source, tag)
    }

    /// As [`Endpoint::improbe_on`], waiting for a message (MPI's
    /// `MPI_Mprobe`).
    pub fn mprobe_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<(Status, RecvHandle<'_>), Error> {
        PostedRecv::mprobe(self, comm, source, tag)
    }

    /// As [`Endpoint::mprobe_on`] with an owned handle.
    pub fn mprobe_on_owned(
        self: &Arc<Self>,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<(Status, OwnedRecvHandle), Error> {
        PostedRecv::mprobe(Arc::clone(self), comm, source, tag)
    }

    /// As [`Endpoint::improbe_on`] with an owned handle.
    pub fn improbe_on_owned(
        self: &Arc<Self>,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Option<(Status, OwnedRecvHandle)>, Error> {
        PostedRecv::improbe(Arc::clone(self), comm, source, tag)
    }

    fn claim(&self, comm: u32, source: Option<u32>, tag: Option<u32>) -> Option<(RecvId, Status)> {
        let (c, due) = {
            let mut st = self.shared.state();
            let c = st.claim_on(comm, source, tag);
            if c.is_some() {
                st.count_recv(true);
            }
            (c, st.notices_due())
        };
        if due {
            crate::io::notices::send_due(&self.shared);
        }
        c
    }

    /// Tells the transport that this rank now holds communicator `id` of
    /// `members` (job ranks, in the communicator's rank order), or made
    /// none in the call that gave out `id` (`None`): messages for it that
    /// came early are judged now (protocol §16.4, "A communicator the
    /// receiver does not know yet"). Call when the split, dup or other
    /// call that makes `id` has ended on this rank, before the program
    /// uses it. A pending message that now breaks check 4 ends the job
    /// (H1610, ABORT reason 7). Nothing to do without feature bit 3.
    pub fn communicator_made(&self, id: u32, members: Option<Arc<[u32]>>) -> Result<(), Error> {
        let r = self.shared.state().communicator_made(id, members);
        if let Err((_, e)) = r {
            if self.shared.fail(e, false) {
                self.shared.command(crate::io::shared::Command::Failed);
            }
            return self.check();
        }
        self.shared.changed();
        Ok(())
    }

    /// Tells the transport that this rank freed communicator `id`: a later
    /// message for it is rejected (protocol §16.4 check 4).
    pub fn communicator_freed(&self, id: u32) {
        self.shared.state().communicator_freed(id);
    }

    /// A handle that tells this endpoint's transport of freed
    /// communicators ([`Endpoint::communicator_freed`]) without borrowing
    /// the endpoint: what a communicator keeps to report its own end.
    pub fn communicator_freer(&self) -> CommunicatorFreer {
        CommunicatorFreer {
            shared: Arc::downgrade(&self.shared),
        }
    }
}

/// Reports freed communicators to the transport of the endpoint it came
/// from ([`Endpoint::communicator_freer`]); does nothing once that
/// endpoint is gone.
#[derive(Debug, Clone)]
pub struct CommunicatorFreer {
    shared: std::sync::Weak<crate::io::shared::Shared>,
}

impl CommunicatorFreer {
    /// Communicator `id` was freed on this rank.
    pub fn freed(&self, id: u32) {
        if let Some(s) = self.shared.upgrade() {
            s.state().communicator_freed(id);
        }
    }
}

impl<E: EndpointRef> PostedRecv<E> {
    /// [`Endpoint::mprobe_on`] with a handle of either form.
    fn mprobe(
        ep: E,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<(Status, Self), Error> {
        ep.check_on(comm, false, source)?;
        let (id, st) = ep.wait(|| {
            if let Some(c) = ep.claim(comm, source, tag) {
                return Some(Ok(c));
            }
            let s = source?;
            let st = ep.shared.state();
            st.departed(s)
                .then(|| Err(crate::proto::matching::departed(s)))
        })?;
        Ok((st, PostedRecv::claimed(ep, id)))
    }

    /// [`Endpoint::improbe_on`] with a handle of either form.
    fn improbe(
        ep: E,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Option<(Status, Self)>, Error> {
        ep.check_on(comm, false, source)?;
        ep.progress()?;
        Ok(ep
            .claim(comm, source, tag)
            .map(|(id, st)| (st, PostedRecv::claimed(ep, id))))
    }
}

impl<E: EndpointRef> StartedSend<E> {
    /// Starts a send on `comm` ([`Endpoint::isend_on`]).
    pub(super) fn start_on(
        ep: E,
        comm: u32,
        to: u32,
        tag: u32,
        data: &[u8],
        mode: SendMode,
    ) -> Result<Self, Error> {
        let sync = mode == SendMode::Synchronous;
        ep.check_on(comm, sync, Some(to))?;
        let (seq, notice) = ep.start_message(comm, to, tag, Bytes::Borrowed(data), sync)?;
        Ok(Self::started(ep, seq, notice))
    }
}

/// The numbering of the messages this rank sends on one connection
/// (protocol §16.2), which starts again in each membership epoch (protocol
/// §18.2 "What starts again in a new epoch").
#[derive(Debug, Default)]
pub(super) struct Outbox {
    epoch: u32,
    last: u64,
}

impl Outbox {
    /// The number of the next message, sent in membership epoch `epoch`.
    pub(super) fn next(&mut self, epoch: u32) -> u64 {
        if self.epoch != epoch {
            self.epoch = epoch;
            self.last = 0;
        }
        self.last += 1;
        self.last
    }
}
