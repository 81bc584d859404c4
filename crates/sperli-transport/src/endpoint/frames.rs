//! Messages longer than one frame, and the frames of the layers above:
//! COLLECTIVE (sperli-collective) and the checkpoint and RESUME frames
//! (sperli-ckpt).

use sperli_wire::error::{ArgumentError, FrameError, MismatchError, UsageError};
use sperli_wire::header::FrameHeader;
use sperli_wire::limits::{
    COLLECTIVE_HEADER_LEN, FEATURE_COMMUNICATORS, MAX_COMMUNICATOR_ID, MAX_PAYLOAD,
};
use sperli_wire::payload::Payload;
use sperli_wire::{Error, FrameType};

use super::send::Bytes;
use super::{Endpoint, EAGER_LIMIT};
use crate::proto::connection::{Incoming, Outgoing};
use crate::proto::large::split;

impl Endpoint {
    /// Sends a message of any length as several DATA frames (the
    /// convention is in the crate docs). Each frame is written from `data`
    /// itself as the socket takes it, the next one right behind it, so a
    /// large message streams at the rate of a single frame.
    ///
    /// With HELLO feature bit 3 a message carries its length in its DATA
    /// header (protocol §16.2): the message is then sent as one message of
    /// §16 ([`Endpoint::send_on`]), which [`Endpoint::recv_large`] takes.
    pub fn send_large(&self, to: u32, tag: u32, data: &[u8]) -> Result<(), Error> {
        self.check_data(to, tag, 0)?;
        if self.has_p2p_communicators() {
            return self.send_on(0, to, tag, data, crate::SendMode::Standard);
        }
        let pieces = split(data.len());
        if to == self.rank() || pieces[0].len() <= EAGER_LIMIT {
            for p in &pieces {
                let mut f = self.take_buffer(p.len());
                if let Some(prefix) = p.prefix {
                    f.extend_from_slice(&prefix);
                }
                f.extend_from_slice(&data[p.range.clone()]);
                self.send_vec(to, tag, f)?;
            }
            return Ok(());
        }
        let h = self.shared.ctx.header(FrameType::Data, to).with_tag(tag);
        for p in &pieces {
            let prefix = p.prefix.as_ref().map_or(&[][..], |x| &x[..]);
            self.send_streamed(to, h, prefix, &data[p.range.clone()])?;
        }
        Ok(())
    }

    /// Receives a message sent with [`Endpoint::send_large`]: its frames go
    /// straight into the message as they arrive (one copy, from TLS).
    pub fn recv_large(&self, from: u32, tag: u32) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.recv_large_into(from, tag, &mut out)?;
        Ok(out)
    }

    /// As [`Endpoint::recv_large`], into `out` (cleared first): a receiver
    /// that passes the same vector again reuses its memory, as an MPI
    /// receive fills the caller's buffer (a fresh vector of more than
    /// 32 MiB is mapped and faulted in page by page). On an error `out` is
    /// left empty.
    pub fn recv_large_into(&self, from: u32, tag: u32, out: &mut Vec<u8>) -> Result<(), Error> {
        self.check()?;
        self.check_rank(from)?;
        if tag > sperli_wire::limits::MAX_USER_TAG {
            return Err(ArgumentError::Tag { tag }.into());
        }
        let buf = std::mem::take(out);
        if self.has_p2p_communicators() {
            // One message of protocol §16 (see `send_large`).
            let (id, spare) = {
                let mut st = self.shared.state();
                let id = st.post_on_into(0, Some(from), Some(tag), buf);
                (id, st.take_spare())
            };
            for b in spare {
                self.shared.pool.put(b);
            }
            *out = self.wait_recv(id)?.1;
            return Ok(());
        }
        let id = self.shared.state().post_large_into(from, tag, buf);
        *out = self.wait_recv(id)?.1;
        Ok(())
    }

    /// Sends a COLLECTIVE frame to `to`; `payload` is the 16-byte collective
    /// header followed by the data, encoded by the caller (at most 16777216
    /// bytes in all). To this rank itself it is queued locally.
    pub fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        self.send_collective_bytes(to, Bytes::Borrowed(payload))
    }

    /// As [`Endpoint::send_collective`] with the payload in two pieces: the
    /// 16-byte collective header `head`, then `data`. A large frame is
    /// written into TLS straight from both (no payload buffer, no copy of
    /// `data`): what a sender of a collective whose data is the caller's
    /// own memory uses. Same checks and errors as
    /// [`Endpoint::send_collective`] on `head` and `data` together.
    pub fn send_collective_parts(&self, to: u32, head: &[u8], data: &[u8]) -> Result<(), Error> {
        let len = head.len() + data.len();
        if to == self.rank() || len <= EAGER_LIMIT || head.len() < COLLECTIVE_HEADER_LEN {
            let mut p = self.take_buffer(len);
            p.extend_from_slice(head);
            p.extend_from_slice(data);
            return self.send_collective_vec(to, p);
        }
        self.check()?;
        self.check_rank(to)?;
        self.shared.state().check_comm(0)?;
        if len > MAX_PAYLOAD as usize {
            return Err(ArgumentError::TooLong {
                len: len - COLLECTIVE_HEADER_LEN,
                max: MAX_PAYLOAD as usize - COLLECTIVE_HEADER_LEN,
            }
            .into());
        }
        let h = self.shared.ctx.header(FrameType::Collective, to);
        self.send_streamed(to, h, head, data)
    }

    /// As [`Endpoint::send_collective`] with a payload the transport takes
    /// over (no copy); e.g. a buffer from [`Endpoint::take_buffer`].
    pub fn send_collective_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        self.send_collective_bytes(to, Bytes::Owned(payload))
    }

    /// As [`Endpoint::send_collective`] on communicator `tag`: the frame
    /// header's tag carries the communicator id (HELLO feature bit 2,
    /// protocol §15.2; 0 is the job's communicator). A tag other than 0 in
    /// a job without bit 2 is refused before anything is sent
    /// (`UsageError::NoCommunicators`), as is an id above 2147483647.
    pub fn send_collective_tagged(&self, to: u32, tag: u32, payload: &[u8]) -> Result<(), Error> {
        match self.start_collective(to, tag, Bytes::Borrowed(payload))? {
            Some(seq) => self.wait_written(seq),
            None => Ok(()),
        }
    }

    /// As [`Endpoint::send_collective_tagged`] with a payload the transport
    /// takes over (no copy).
    pub fn send_collective_vec_tagged(
        &self,
        to: u32,
        tag: u32,
        payload: Vec<u8>,
    ) -> Result<(), Error> {
        match self.start_collective(to, tag, Bytes::Owned(payload))? {
            Some(seq) => self.wait_written(seq),
            None => Ok(()),
        }
    }

    /// As [`Endpoint::send_collective_each`] on communicator `tag`.
    pub fn send_collective_each_tagged(
        &self,
        to: &[u32],
        tag: u32,
        payload: &[u8],
    ) -> Result<(), Error> {
        let mut pending = Vec::new();
        for &r in to {
            if let Some(seq) = self.start_collective(r, tag, Bytes::Borrowed(payload))? {
                pending.push(seq);
            }
        }
        for seq in pending {
            self.wait_written(seq)?;
        }
        Ok(())
    }

    /// The earliest COLLECTIVE payload from `from` of communicator `tag`
    /// (protocol §15.4). Frames of `from` with other tags stay for their
    /// communicators; each one this take passes over (or that arrives
    /// while it waits) is shown to `pass` with its tag, and an error of
    /// `pass` ends the take with that error (the layer above then ends the
    /// job: a frame of another communicator is H1617). `pass` runs under
    /// the transport's lock and must not call the transport.
    pub fn recv_collective_where(
        &self,
        from: u32,
        tag: u32,
        pass: impl Fn(u32) -> Result<(), Error>,
    ) -> Result<Vec<u8>, Error> {
        self.check_rank(from)?;
        self.check()?;
        self.wait(|| {
            let mut st = self.shared.state();
            // Protocol §18.8.1: a revoked communicator's calls fail.
            if let Err(e) = st.check_comm(tag) {
                return Some(Err(e));
            }
            st.wait_on(Some(from), |m| m.pop_collective_where(from, tag, &pass))
        })
    }

    fn send_collective_bytes(&self, to: u32, payload: Bytes<'_>) -> Result<(), Error> {
        match self.start_collective(to, 0, payload)? {
            Some(seq) => self.wait_written(seq),
            None => Ok(()),
        }
    }

    /// Checks and starts one COLLECTIVE frame to `to` with header `tag`;
    /// `Some(seq)` when the caller must still wait for it to be written (a
    /// large payload).
    fn start_collective(
        &self,
        to: u32,
        tag: u32,
        payload: Bytes<'_>,
    ) -> Result<Option<u64>, Error> {
        self.check()?;
        self.check_rank(to)?;
        self.shared.state().check_comm(tag)?;
        if tag != 0 {
            if self.features() & FEATURE_COMMUNICATORS == 0 {
                return Err(UsageError::NoCommunicators.into());
            }
            if tag > MAX_COMMUNICATOR_ID {
                return Err(ArgumentError::Tag { tag }.into());
            }
        }
        if payload.len() < COLLECTIVE_HEADER_LEN {
            return Err(Error::CollectiveMismatch(MismatchError::Length {
                from: self.rank(),
                expected: COLLECTIVE_HEADER_LEN as u64,
                got: payload.len() as u64,
            }));
        }
        if payload.len() > MAX_PAYLOAD as usize {
            return Err(ArgumentError::TooLong {
                len: payload.len() - COLLECTIVE_HEADER_LEN,
                max: MAX_PAYLOAD as usize - COLLECTIVE_HEADER_LEN,
            }
            .into());
        }
        if to == self.rank() {
            let payload = payload.into_vec(&self.shared.pool);
            self.deliver_local(Incoming::Collective { tag, payload });
            return Ok(None);
        }
        let big = payload.len() > EAGER_LIMIT;
        let h = self
            .shared
            .ctx
            .header(FrameType::Collective, to)
            .with_tag(tag);
        let seq = if big { self.seq() } else { 0 };
        let written = self.push_bytes(to, h, payload, seq)?;
        Ok((big && !written).then_some(seq))
    }

    /// Sends the same COLLECTIVE payload to every rank in `to` and returns
    /// once each frame is written, as [`Endpoint::send_collective`] would
    /// one after another; but every frame is started before any is waited
    /// for, so a large payload's records for the next peer are encrypted
    /// while the previous peer reads. Peak memory: the ciphertext of one
    /// payload per peer in `to`.
    pub fn send_collective_each(&self, to: &[u32], payload: &[u8]) -> Result<(), Error> {
        self.send_collective_each_tagged(to, 0, payload)
    }

    /// The next COLLECTIVE payload from `from` of the job's communicator
    /// (tag 0), in arrival order (DATA that arrives meanwhile is kept for
    /// `recv`, and vice versa; so are frames of other communicators).
    pub fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
        self.check_rank(from)?;
        self.check()?;
        self.wait(|| {
            let mut st = self.shared.state();
            if let Err(e) = st.check_comm(0) {
                return Some(Err(e));
            }
            st.wait_on(Some(from), |m| m.pop_collective(from).map(Ok))
        })
    }

    /// Sends a checkpoint or RESUME frame (CKPT_BEGIN, CKPT_DATA, CKPT_ACK,
    /// CKPT_COMMIT, RESUME) to `to` with `header_epoch` in the header. Other
    /// payload types are refused (use `send`/`send_collective`).
    pub fn send_frame(
        &self,
        to: u32,
        header_epoch: u64,
        payload: &Payload<'_>,
    ) -> Result<(), Error> {
        self.check()?;
        self.check_rank(to)?;
        let t = payload.frame_type();
        if !matches!(
            t,
            FrameType::CkptBegin
                | FrameType::CkptData
                | FrameType::CkptAck
                | FrameType::CkptCommit
                | FrameType::Resume
        ) {
            return Err(FrameError::Unexpected {
                frame_type: t,
                when: "through send_frame (checkpoint and RESUME frames only)",
            }
            .into());
        }
        let mut bytes = Vec::new();
        payload.encode(&mut bytes);
        let h = self.shared.ctx.header(t, to).with_epoch(header_epoch);
        if to == self.rank() {
            let mut h = h;
            h.length = bytes.len() as u32;
            self.deliver_local(Incoming::Checkpoint(h, bytes));
            return Ok(());
        }
        self.push(to, Outgoing::new(h, bytes, 0)).map(|_| ())
    }

    /// The next checkpoint or RESUME frame from `from` (header and payload
    /// bytes, which decode with `Payload::decode(header.frame_type, ..)`),
    /// in arrival order.
    pub fn recv_ckpt(&self, from: u32) -> Result<(FrameHeader, Vec<u8>), Error> {
        self.check_rank(from)?;
        self.check()?;
        self.wait(|| {
            self.shared
                .state()
                .wait_on(Some(from), |m| m.pop_ckpt(from).map(Ok))
        })
    }
}
