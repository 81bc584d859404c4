//! The seam between the collective layer and the transport (protocol §8,
//! §8.3 and §8.8 "Interleaving with DATA and early frames").
//!
//! [`Peers`] is one rank's view of the other ranks of its job, everything
//! [`Comm`](crate::Comm) needs from a transport: who am I, how many ranks
//! are there, send one COLLECTIVE payload to a peer, take the next
//! COLLECTIVE payload that came from a peer, and end the job with ABORT.
//! The transport's [`Endpoint`](sperli_transport::Endpoint) implements it;
//! tests use the in-memory [`FakePeers`](crate::fake::FakePeers). (It is
//! not the transport's per-socket link: one `Peers` value stands for all
//! of a rank's connections.)

use sperli_transport::{ErrorMode, Recovered};
use sperli_wire::abort::AbortReason;
use sperli_wire::error::UsageError;
use sperli_wire::payload::Payload;
use sperli_wire::{Error, FrameType};

/// What the collective layer needs from a transport (protocol §8, §8.3, §8.8).
///
/// Contract an implementation must keep:
///
/// - **Payloads, not frames.** `send_collective` gets one COLLECTIVE
///   payload (the 16-byte collective header, then at most 16777200 bytes of
///   data); the implementation wraps it in a frame (type 3, tag 0) to `to`.
///   `recv_collective` returns the payload of the next COLLECTIVE frame that
///   came from `from`, in arrival order (protocol §8.8: frames that arrive
///   before the call they answer are kept, in order, until taken). The
///   collective layer checks the collective header and the data length
///   itself; the implementation has already applied the frame-header checks (a
///   COLLECTIVE payload shorter than 16 bytes never gets here, H1610).
/// - **Peers only.** The collective layer sends to and receives from the
///   peers the star of protocol §8.2 names or, with feature bit 1
///   ([`Peers::features`]), the chains, rings and trees of protocol §14.3;
///   `to` / `from` are never this rank.
/// - **Sends do not wait for the peer's call.** A send may block on flow
///   control but must not wait until the peer makes the matching call
///   (the receiver keeps early frames, protocol §8.8).
/// - **No call blocks forever after a failure.** Once the job failed (an
///   ABORT came from any peer, a peer was lost, or this rank called
///   [`Peers::abort`]) every pending and later `send_collective` and
///   `recv_collective` fails: with H1612 [`Error::AbortedByPeer`] carrying
///   the originator's reason and code when an ABORT came, H1613 when a peer
///   was lost.
pub trait Peers {
    /// This rank, `0..size`.
    fn rank(&self) -> u32;

    /// The job size, 1..=4096.
    fn size(&self) -> u32;

    /// Sends one COLLECTIVE frame payload (16-byte collective header + data)
    /// to rank `to`. The implementation copies or encrypts what it needs
    /// before it returns, so it borrows the payload.
    fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error>;

    /// The next COLLECTIVE payload (collective header + data) from rank
    /// `from`, in arrival order. Blocks until one is there; fails once the
    /// job failed (see the trait's contract).
    fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error>;

    /// Sends ABORT (`reason`, `code` = the H number, `message` cut to 1024
    /// bytes) to every peer, best effort, and ends this rank's job step:
    /// every later call on these peers fails. Errors while sending the ABORT
    /// are ignored (the job is over either way).
    fn abort(&self, reason: AbortReason, code: u32, message: &str);

    /// An empty buffer with room for a payload of `len` bytes. An
    /// implementation with a buffer pool hands out a reused buffer; the
    /// default allocates one.
    fn take_buffer(&self, len: usize) -> Vec<u8> {
        Vec::with_capacity(len)
    }

    /// As [`Peers::send_collective`] with a payload the implementation
    /// takes over (no copy needed). The default sends the borrowed bytes.
    fn send_collective_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        self.send_collective(to, &payload)
    }

    /// As [`Peers::send_collective`] with the payload in two pieces, the
    /// 16-byte collective header `head` and the data: an implementation
    /// that can write a frame from two buffers sends `data` without
    /// copying it; the default joins them in a buffer from
    /// [`Peers::take_buffer`].
    fn send_collective_parts(&self, to: u32, head: &[u8], data: &[u8]) -> Result<(), Error> {
        let mut p = self.take_buffer(head.len() + data.len());
        p.extend_from_slice(head);
        p.extend_from_slice(data);
        self.send_collective_vec(to, p)
    }

    /// Gives back a payload from [`Peers::recv_collective`] (or a buffer from
    /// [`Peers::take_buffer`]) the caller is done with, for reuse. The
    /// default drops it.
    fn recycle(&self, buf: Vec<u8>) {
        drop(buf);
    }

    /// Sends the same COLLECTIVE payload to every rank in `to` (a root's
    /// result or broadcast), returning once each is sent as
    /// [`Peers::send_collective`] would. An implementation may overlap the
    /// sends (the transport encrypts for the next peer while the previous
    /// one reads); the default sends one after another, in the order given.
    fn send_collective_each(&self, to: &[u32], payload: &[u8]) -> Result<(), Error> {
        for &r in to {
            self.send_collective(r, payload)?;
        }
        Ok(())
    }

    // ---- communicators (HELLO feature bit 2, protocol §15) ---------------

    /// Sends one COLLECTIVE payload to job rank `to` with the communicator
    /// id `tag` in the frame header's tag (protocol §15.2). The default
    /// carries tag 0 only (peers without communicators).
    fn send_collective_tagged(&self, to: u32, tag: u32, payload: &[u8]) -> Result<(), Error> {
        if tag == 0 {
            self.send_collective(to, payload)
        } else {
            Err(UsageError::NoCommunicators.into())
        }
    }

    /// Takes the earliest COLLECTIVE payload from job rank `from` whose tag
    /// is `tag` (protocol §15.4); every frame of `from` with another tag
    /// before it (or arriving while this waits) is shown to `pass`, whose
    /// error ends the take. `pass` must not call these peers. The default
    /// carries tag 0 only.
    fn recv_collective_where(
        &self,
        from: u32,
        tag: u32,
        pass: &dyn Fn(u32) -> Result<(), Error>,
    ) -> Result<Vec<u8>, Error> {
        let _ = pass;
        if tag == 0 {
            self.recv_collective(from)
        } else {
            Err(UsageError::NoCommunicators.into())
        }
    }

    /// This rank now holds communicator `id` of `members` (job ranks, in
    /// its rank order), or made none in the call that gave out `id`
    /// (`None`): a transport with point-to-point on communicators (HELLO
    /// feature bit 3, protocol §16.4) judges the messages for it that came
    /// early. Called when the call that makes `id` has ended on this rank.
    /// The default has no point-to-point: nothing to do.
    fn communicator_made(
        &self,
        id: u32,
        members: Option<std::sync::Arc<[u32]>>,
    ) -> Result<(), Error> {
        let _ = (id, members);
        Ok(())
    }

    /// What tells the link that this rank freed a communicator (protocol
    /// §16.4 check 4: later messages for it are rejected), kept by the
    /// communicator and called when its last view goes. The default: none
    /// (no point-to-point on communicators).
    fn communicator_freer(&self) -> Option<Freer> {
        None
    }

    // ---- pipelined collectives (HELLO feature bit 1, protocol §14) ------

    /// The HELLO feature bits of the job (protocol §7.1.1): the AND of this
    /// rank's and every peer's, fixed once the connections are up. Bit 1
    /// ([`FEATURE_PIPELINED`](sperli_wire::limits::FEATURE_PIPELINED)) lets
    /// large collectives run pipelined (protocol §14); without it every
    /// call is the v1 star byte for byte, and a pipelined frame is rejected
    /// (H1610). The default is a v1-only job.
    fn features(&self) -> u64 {
        sperli_wire::limits::FEATURE_V1_CORE
    }

    // ---- Checkpoint and RESUME frames (sperli-ckpt; protocol §7.7-§7.11,
    // §9.4, §10.2). An implementation that carries no checkpoint frames
    // keeps the defaults: sending and receiving fail with
    // `UsageError::NoCheckpointFrames`, no handle is ever open, and the job
    // error is only what the other calls report.
    //
    // Contract: checkpoint and RESUME frames of one peer come in the order
    // sent and are kept apart from COLLECTIVE payloads (a queue of their
    // own per peer, like the transport's), so a collective call never takes
    // one and `recv_ckpt` never takes a COLLECTIVE payload. After a failure
    // both fail as the collective calls do.

    /// Sends one CKPT_BEGIN, CKPT_DATA, CKPT_ACK, CKPT_COMMIT or RESUME
    /// frame with header `epoch` to rank `to` (protocol §7.7-§7.11). Any
    /// other payload type is refused (H1610, nothing sent).
    fn send_ckpt(&self, to: u32, epoch: u64, payload: &Payload<'_>) -> Result<(), Error> {
        let _ = (to, epoch, payload);
        Err(UsageError::NoCheckpointFrames.into())
    }

    /// The next checkpoint or RESUME frame from rank `from`, in arrival
    /// order. Blocks until one is there; fails once the job failed.
    fn recv_ckpt(&self, from: u32) -> Result<CkptFrame, Error> {
        let _ = from;
        Err(UsageError::NoCheckpointFrames.into())
    }

    /// This rank's open point-to-point send and receive handles (a
    /// checkpoint needs none on any rank: protocol §9.4, H1624).
    fn open_handles(&self) -> (u64, u64) {
        (0, 0)
    }

    /// The error that ended the job, if it failed (an ABORT received or
    /// sent, a lost peer): a rank that fails a checkpoint sends its own
    /// ABORT only when the job has not failed already.
    fn job_error(&self) -> Option<Error> {
        None
    }

    /// The job ranks a MEMBERSHIP record of this run removed (protocol
    /// §18.8), ascending. Default: none.
    fn failed_ranks(&self) -> Vec<u32> {
        Vec::new()
    }

    /// Revokes communicator `comm` on the link (protocol §18.8.1): its
    /// other members are told. Default, for peers without it: nothing.
    fn revoke_communicator(&self, _comm: u32) -> Result<(), Error> {
        Ok(())
    }

    /// Whether the link holds communicator `comm` revoked (by a member's
    /// notice, protocol §18.8.1). Default: never.
    fn is_communicator_revoked(&self, _comm: u32) -> bool {
        false
    }

    /// Says whether the program can go on after a lost peer (feature bit
    /// 5, protocol §18.6; the transport's `Endpoint::set_recoverable`).
    /// Default: nothing.
    fn set_recoverable(&self, _on: bool) {}

    /// See [`Peers::set_recoverable`]. Default: false.
    fn recoverable(&self) -> bool {
        false
    }

    /// Notes that this rank holds a verified COMMIT of checkpoint `epoch`
    /// (feature bit 5, protocol §18.4; the transport's
    /// `Endpoint::set_best_commit`). Default: nothing.
    fn set_best_commit(&self, _epoch: u64) {}

    /// Waits for the membership that follows a revoke and lets calls run
    /// again in it (feature bit 5, protocol §18.6; the transport's
    /// `Endpoint::recover`). Default, for peers without recovery: the job's
    /// ranks, epoch 0, at once.
    fn recover(&self) -> Result<Recovered, Error> {
        Ok(Recovered::whole_job(self.size()))
    }

    /// The membership in force (feature bit 5, protocol §18.1; the
    /// transport's `Endpoint::membership`): a replacement learns from it,
    /// right after it joined, that it joins a replace-mode epoch and the
    /// COMMIT epoch to roll back to (§18.7). Default, for peers without
    /// recovery: the job's ranks, epoch 0, no record.
    fn membership(&self) -> Recovered {
        Recovered::whole_job(self.size())
    }

    /// What happens when the job step fails (the transport's
    /// `Endpoint::errors`). Default, for peers that return every error to
    /// the caller (the in-memory ones): [`ErrorMode::Return`].
    fn errors(&self) -> ErrorMode {
        ErrorMode::Return
    }

    /// Chooses what happens when the job step fails, from now on (the
    /// transport's `Endpoint::set_errors`; a lost peer starts a recovery
    /// only under [`ErrorMode::Return`], protocol §18.6). Default: nothing
    /// (peers that always return errors).
    fn set_errors(&self, _mode: ErrorMode) {}
}

/// Called with a communicator's id when this rank frees it
/// ([`Peers::communicator_freer`]).
pub type Freer = std::sync::Arc<dyn Fn(u32) + Send + Sync>;

/// One checkpoint or RESUME frame as [`Peers::recv_ckpt`] returns it: the
/// header fields the checkpoint layer judges and the payload bytes, which
/// decode with `Payload::decode(frame_type, ..)` or the frame's own codec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CkptFrame {
    /// CKPT_BEGIN, CKPT_DATA, CKPT_ACK, CKPT_COMMIT or RESUME.
    pub frame_type: FrameType,
    /// The header's `epoch`.
    pub epoch: u64,
    /// The payload.
    pub payload: Vec<u8>,
}

impl CkptFrame {
    /// Whether `t` is a checkpoint or RESUME frame type (types 6-10).
    pub fn carries(t: FrameType) -> bool {
        matches!(
            t,
            FrameType::CkptBegin
                | FrameType::CkptData
                | FrameType::CkptAck
                | FrameType::CkptCommit
                | FrameType::Resume
        )
    }
}

/// The delegating impl of [`Peers`] for a pointer to one.
macro_rules! delegate_peers {
    ($($ptr:ty),*) => {$(
        impl<L: Peers + ?Sized> Peers for $ptr {
        fn rank(&self) -> u32 {
            (**self).rank()
        }
        fn size(&self) -> u32 {
            (**self).size()
        }
        fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
            (**self).send_collective(to, payload)
        }
        fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
            (**self).recv_collective(from)
        }
        fn abort(&self, reason: AbortReason, code: u32, message: &str) {
            (**self).abort(reason, code, message)
        }
        fn take_buffer(&self, len: usize) -> Vec<u8> {
            (**self).take_buffer(len)
        }
        fn send_collective_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
            (**self).send_collective_vec(to, payload)
        }
        fn recycle(&self, buf: Vec<u8>) {
            (**self).recycle(buf)
        }
        fn send_collective_each(&self, to: &[u32], payload: &[u8]) -> Result<(), Error> {
            (**self).send_collective_each(to, payload)
        }
        fn send_collective_tagged(&self, to: u32, tag: u32, payload: &[u8]) -> Result<(), Error> {
            (**self).send_collective_tagged(to, tag, payload)
        }
        fn recv_collective_where(
            &self,
            from: u32,
            tag: u32,
            pass: &dyn Fn(u32) -> Result<(), Error>,
        ) -> Result<Vec<u8>, Error> {
            (**self).recv_collective_where(from, tag, pass)
        }
        fn features(&self) -> u64 {
            (**self).features()
        }
        fn communicator_made(&self, id: u32, members: Option<std::sync::Arc<[u32]>>) -> Result<(), Error> {
            (**self).communicator_made(id, members)
        }
        fn communicator_freer(&self) -> Option<Freer> {
            (**self).communicator_freer()
        }

        // ---- Checkpoint and RESUME frames ----
        fn send_ckpt(&self, to: u32, epoch: u64, payload: &Payload<'_>) -> Result<(), Error> {
            (**self).send_ckpt(to, epoch, payload)
        }
        fn recv_ckpt(&self, from: u32) -> Result<CkptFrame, Error> {
            (**self).recv_ckpt(from)
        }
        fn open_handles(&self) -> (u64, u64) {
            (**self).open_handles()
        }
        fn job_error(&self) -> Option<Error> {
            (**self).job_error()
        }
        fn recover(&self) -> Result<Recovered, Error> {
            (**self).recover()
        }
        fn revoke_communicator(&self, comm: u32) -> Result<(), Error> {
            (**self).revoke_communicator(comm)
        }
        fn failed_ranks(&self) -> Vec<u32> {
            (**self).failed_ranks()
        }
        fn set_best_commit(&self, epoch: u64) {
            (**self).set_best_commit(epoch)
        }
        fn set_recoverable(&self, on: bool) {
            (**self).set_recoverable(on)
        }
        fn recoverable(&self) -> bool {
            (**self).recoverable()
        }
        fn membership(&self) -> Recovered {
            (**self).membership()
        }
        fn errors(&self) -> ErrorMode {
            (**self).errors()
        }
        fn set_errors(&self, mode: ErrorMode) {
            (**self).set_errors(mode)
        }
        fn is_communicator_revoked(&self, comm: u32) -> bool {
            (**self).is_communicator_revoked(comm)
        }
        }
    )*};
}

// Borrowed peers, and peers shared behind an `Arc` (e.g. an endpoint a
// program also keeps, with non-blocking collectives).
delegate_peers!(&L, std::sync::Arc<L>);
