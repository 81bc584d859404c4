//! How the package's point-to-point calls reach the transport.
//!
//! In a job where every rank announces HELLO feature bit 3 (the default)
//! a message names its communicator (protocol §16): the calls send and
//! receive on the running call's communicator id, a receive from any
//! source works on every communicator, a message of any length is one
//! message, and synchronous sends exist. Without the bit every call is
//! v1's: messages carry no communicator (job ranks, the job's tags), one
//! buffer message is one DATA frame, an object is the length-prefixed
//! frame series of `send_large`.
//!
//! An object message with bit 3 is the pickle alone, one message, as
//! mpi4py sends it: a buffer message of pickled bytes is read by an object
//! receive and the other way round, and an empty message is `None`.
//! Without the bit it is v1's `send_large` series, the pickle behind its
//! length as 8 little-endian bytes ([`assemble`] reads
//! both).

use std::sync::Arc;

use sperli_collective::Endpoint;
use sperli_transport::{Message, SendMode, Status as WireStatus};
use sperli_wire::error::{DecodeError, FrameError, UsageError};
use sperli_wire::{Error, FrameType};

use crate::errors::Fail;
use crate::rank::{Open, Rank};

/// The communicator id a call's messages carry: `Some` with feature bit 3
/// (0 for the job's communicator), `None` without (v1 calls).
pub(crate) type Wire = Option<u32>;

impl Rank {
    /// The running call's communicator id on the wire (see [`Wire`]).
    pub(crate) fn wire(&mut self) -> Wire {
        if !self.ep().has_p2p_communicators() {
            return None;
        }
        Some(if self.on_sub() { self.comm().id() } else { 0 })
    }

    /// Sends `bytes` to job rank `dest` with `tag` (a buffer message).
    pub(crate) fn send_buffer(
        &mut self,
        dest: u32,
        tag: u32,
        bytes: &[u8],
        mode: SendMode,
    ) -> Result<(), Fail> {
        match self.wire() {
            Some(c) => Ok(self.ep().send_on(c, dest, tag, bytes, mode)?),
            None if mode == SendMode::Synchronous => Err(no_bit_3()),
            None => Ok(self.ep().send(dest, tag, bytes)?),
        }
    }

    /// Sends a pickled object (any length) to job rank `dest`.
    pub(crate) fn send_object(
        &mut self,
        dest: u32,
        tag: u32,
        pickle: &[u8],
        mode: SendMode,
    ) -> Result<(), Fail> {
        match self.wire() {
            Some(c) => Ok(self.ep().send_on(c, dest, tag, pickle, mode)?),
            None if mode == SendMode::Synchronous => Err(no_bit_3()),
            None => Ok(self.ep().send_large(dest, tag, pickle)?),
        }
    }

    /// Receives the first message from job rank `source` (`None`: any)
    /// with `tag` (`None`: any): with bit 3 the whole message, else one
    /// frame.
    pub(crate) fn recv_message(
        &mut self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Message, Fail> {
        match self.wire() {
            Some(c) => Ok(self.ep().recv_on(c, source, tag)?),
            None => Ok(self.ep().recv_match(source, tag)?),
        }
    }

    /// The status of a matching message (`wait`: until there is one).
    pub(crate) fn probe_message(
        &mut self,
        source: Option<u32>,
        tag: Option<u32>,
        wait: bool,
    ) -> Result<Option<WireStatus>, Fail> {
        let w = self.wire();
        let ep = self.ep();
        Ok(match (w, wait) {
            (Some(c), true) => Some(ep.probe_on(c, source, tag)?),
            (Some(c), false) => ep.iprobe_on(c, source, tag)?,
            (None, true) => Some(ep.probe(source, tag)?),
            (None, false) => ep.iprobe(source, tag)?,
        })
    }
}

/// Starts a send of `bytes` to `to` on `wire` (a request's handle).
pub(crate) fn start_send(
    ep: &Arc<Endpoint>,
    wire: Wire,
    to: u32,
    tag: u32,
    bytes: &[u8],
    mode: SendMode,
) -> Result<Open, Error> {
    Ok(Open::Send(match wire {
        Some(c) => ep.isend_on_owned(c, to, tag, bytes, mode)?,
        None if mode == SendMode::Synchronous => {
            return Err(UsageError::NoP2pCommunicators {
                what: "a synchronous send",
            }
            .into())
        }
        None => ep.isend_owned(to, tag, bytes)?,
    }))
}

/// Posts a receive from `from` (`None`: any) on `wire`.
pub(crate) fn start_recv(
    ep: &Arc<Endpoint>,
    wire: Wire,
    from: Option<u32>,
    tag: Option<u32>,
) -> Result<Open, Error> {
    Ok(Open::Recv(match wire {
        Some(c) => ep.irecv_on_owned(c, from, tag)?,
        None => ep.irecv_match_owned(from, tag)?,
    }))
}

/// The pickle behind its length (8 bytes, little-endian): the first frame
/// of v1's `send_large` series, which an object that fits one frame is.
pub(crate) fn prefixed(pickle: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(8 + pickle.len());
    framed.extend_from_slice(&(pickle.len() as u64).to_le_bytes());
    framed.extend_from_slice(pickle);
    framed
}

fn no_bit_3() -> Fail {
    Error::from(UsageError::NoP2pCommunicators {
        what: "a synchronous send",
    })
    .into()
}

fn bad_prefix(left: usize) -> Error {
    Error::FrameRejected(FrameError::Payload {
        frame_type: FrameType::Data,
        error: DecodeError::Truncated {
            field: "send_large length prefix",
            needed: 8,
            left,
        },
    })
}

/// The whole object message whose first frame is `first` (from
/// `st.source` with `st.tag`): with feature bit 3 the message itself (the
/// pickle, as mpi4py sends it); without, v1's `send_large` framing, the
/// rest of the frames received with the same tag.
pub(crate) fn assemble(ep: &Endpoint, st: WireStatus, first: Vec<u8>) -> Result<Vec<u8>, Fail> {
    if ep.has_p2p_communicators() {
        return Ok(first);
    }
    let Some((len, rest)) = first.split_first_chunk::<8>() else {
        return Err(bad_prefix(first.len()).into());
    };
    let total = usize::try_from(u64::from_le_bytes(*len)).unwrap_or(usize::MAX);
    if rest.len() > total {
        return Err(bad_prefix(first.len()).into());
    }
    // Grows as frames arrive: a length prefix alone allocates nothing.
    let mut out = Vec::with_capacity(rest.len());
    out.extend_from_slice(rest);
    ep.recycle(first);
    while out.len() < total {
        let m = ep.recv(st.source, st.tag)?;
        if m.is_empty() || out.len() + m.len() > total {
            return Err(bad_prefix(m.len()).into());
        }
        out.extend_from_slice(&m);
        ep.recycle(m);
    }
    Ok(out)
}
