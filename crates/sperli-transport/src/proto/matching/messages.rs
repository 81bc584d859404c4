//! Point-to-point messages of HELLO feature bit 3 (protocol §16), sans
//! I/O: the DATA header of every payload judged on arrival (decode rules
//! of §16.2, checks of §16.4), messages matched by (communicator, source,
//! tag) from their first frame on (§16.3), messages for a communicator
//! being made kept pending, and the match notices of synchronous messages
//! (§16.5).
//!
//! A message of several frames is one kept message from its first frame
//! on: a receive that takes it (or a matched probe that claims it) has
//! matched it, and the later frames go where the first went. A sender
//! never puts a frame of another message between them (§16.2), so a peer
//! has at most one message still coming: `coming` says where it goes.
//!
//! What the I/O edge does with this state: it tells it the job's features
//! once set-up ended ([`Matching::set_features`]), the communicators this
//! rank makes and frees ([`Matching::communicator_made`],
//! [`Matching::communicator_freed`]) and the synchronous messages it sends
//! ([`Matching::sent_synchronous`]); it sends the notices that are due
//! ([`Matching::take_notices`]) and completes a synchronous send once
//! [`Matching::poll_notice`] says its notice came.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sperli_wire::codec::Codec;
use sperli_wire::communicator::KnownCommunicators;
use sperli_wire::data_header::{DataFrame, DataHeader, DataKind};
use sperli_wire::error::{DecodeError, FrameError};
use sperli_wire::limits::{DATA_HEADER_LEN, FEATURE_COMMUNICATORS, FEATURE_P2P_COMMUNICATORS};
use sperli_wire::message_stream::{route, Arrival, MessageStream, Route};
use sperli_wire::{Error, FrameType};

use super::{departed, Matching, Posted, RecvId, Status, Unexpected, Want};

/// A match notice this rank owes a peer (protocol §16.5): the DATA frame
/// of kind 2 the edge sends to `to`, with `tag` in its frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueNotice {
    /// The peer whose synchronous message was matched.
    pub to: u32,
    /// The message's communicator.
    pub comm: u32,
    /// The message's tag.
    pub tag: u32,
    /// The message's number.
    pub message: u64,
}

/// Where the frames still coming of a peer's message go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dest {
    /// A kept message no receive took yet (by its number).
    Kept(u64),
    /// The posted receive that took it.
    Receive(RecvId),
    /// The last pending message of the peer.
    Pending,
    /// Nobody: the receive that took it was cancelled.
    Dropped,
}

/// A message kept pending: its communicator is not known yet (§16.4).
#[derive(Debug)]
struct PendingMessage {
    arrival: u64,
    from: u32,
    tag: u32,
    header: DataHeader,
    bytes: Vec<u8>,
}

/// The state of feature bit 3 (see the module docs).
#[derive(Debug)]
pub(super) struct P2p {
    /// Communicators can be made in this job (feature bit 2).
    can_make: bool,
    streams: Vec<MessageStream>,
    coming: Vec<Option<Dest>>,
    /// The frame of each peer being handed over ends its message.
    frame_last: Vec<bool>,
    /// What this rank holds of its communicators, for check 4 (§16.4).
    pub(super) known: KnownCommunicators,
    pending: Vec<PendingMessage>,
    notices: Vec<DueNotice>,
    noticed: HashSet<(u32, u64)>,
    /// Numbers of the synchronous messages this rank sends itself.
    local_numbers: u64,
    /// Buffers to give back to the edge's pool ([`Matching::take_spare`]).
    spare: Vec<Vec<u8>>,
}

impl P2p {
    fn new(size: u32, features: u64) -> Self {
        let n = size as usize;
        Self {
            can_make: features & FEATURE_COMMUNICATORS != 0,
            streams: (0..n).map(|_| MessageStream::new()).collect(),
            coming: vec![None; n],
            frame_last: vec![false; n],
            known: KnownCommunicators::default(),
            pending: Vec::new(),
            notices: Vec::new(),
            noticed: HashSet::new(),
            local_numbers: 0,
            spare: Vec::new(),
        }
    }
}

impl P2p {
    /// A new membership epoch (protocol §18.2): message numbers start
    /// again at 1 on every connection, messages still coming, pending ones
    /// and due notices of the old epoch are dropped.
    pub(super) fn new_epoch(&mut self) {
        for s in &mut self.streams {
            *s = MessageStream::new();
        }
        self.coming.iter_mut().for_each(|c| *c = None);
        self.frame_last.iter_mut().for_each(|l| *l = false);
        self.pending.clear();
        self.notices.clear();
        self.noticed.clear();
    }
}

/// The most a message's buffer reserves ahead of its frames (64 MiB).
const FIRST_ROOM: usize = 64 << 20;

fn rejected(error: DecodeError) -> Error {
    Error::FrameRejected(FrameError::Payload {
        frame_type: FrameType::Data,
        error,
    })
}

impl Matching {
    /// The job's features, once set-up ended (protocol §6.2, §16.1). With
    /// feature bit 3 every DATA payload from now on is judged by protocol
    /// §16, and the DATA frames kept before (they came while this rank's
    /// set-up still ran, judged by nothing) are judged now, in arrival
    /// order: the first that fails is returned with its sender.
    pub fn set_features(&mut self, features: u64) -> Result<(), (u32, Error)> {
        if features & FEATURE_P2P_COMMUNICATORS == 0 || self.p2p.is_some() {
            return Ok(());
        }
        let size = self.unexpected.len() as u32;
        self.p2p = Some(P2p::new(size, features));
        let mut early: Vec<(u64, u32, Unexpected)> = Vec::new();
        for (from, q) in self.unexpected.iter_mut().enumerate() {
            early.extend(q.drain(..).map(|u| (u.arrival, from as u32, u)));
        }
        early.sort_by_key(|e| e.0);
        for (_, from, u) in early {
            self.handle_message_frame(from, u.tag, u.payload)
                .map_err(|e| (from, e))?;
        }
        Ok(())
    }

    /// Whether point-to-point messages carry their communicator (feature
    /// bit 3 is on in this job).
    pub fn has_p2p_communicators(&self) -> bool {
        self.p2p.is_some()
    }

    /// One whole DATA frame of `from` with header `tag` in a job with
    /// feature bit 3: [`Matching::message_header`], its data, and
    /// [`Matching::message_end`] (the path of a frame that was not
    /// streamed).
    pub(super) fn handle_message_frame(
        &mut self,
        from: u32,
        tag: u32,
        payload: Vec<u8>,
    ) -> Result<(), Error> {
        let head = &payload[..payload.len().min(DATA_HEADER_LEN)];
        let data_len = payload.len().saturating_sub(DATA_HEADER_LEN);
        self.message_header(from, tag, head, data_len, Vec::with_capacity)?;
        self.message_data(from, &payload[head.len()..]);
        self.message_end(from);
        Ok(())
    }

    /// The DATA header of a frame of `from` with frame header `tag` and
    /// `data_len` bytes after it (protocol §16.2, §16.4), before any of its
    /// data: the decode rules and the checks of §16.4 (an error rejects the
    /// frame: nothing of it is kept), then where its data goes. A first
    /// frame's message gets its buffer from `buffer(capacity)` (a pooled
    /// one, for reuse). The data follows with [`Matching::message_data`],
    /// then [`Matching::message_end`].
    pub fn message_header(
        &mut self,
        from: u32,
        tag: u32,
        head: &[u8],
        data_len: usize,
        buffer: impl FnOnce(usize) -> Vec<u8>,
    ) -> Result<(), Error> {
        let header = DataFrame::decode(head).map_err(rejected)?.header;
        // Decode rules 6 and 7 with the data that follows (protocol §16.2).
        if header.kind == DataKind::Notice && data_len > 0 {
            return Err(rejected(DecodeError::NotZero {
                field: "notice data length",
                got: data_len as u64,
            }));
        }
        if header.kind.is_message() && data_len as u64 > header.total {
            return Err(rejected(DecodeError::OutOfRange {
                field: "data length",
                min: 0,
                max: header.total,
                got: data_len as u64,
            }));
        }
        let p2p = self.p2p.as_mut().expect("bit 3");
        let f = from as usize;
        let arrival = p2p.streams[f]
            .arrive(tag, &header, data_len, from, &p2p.known, p2p.can_make)
            .map_err(Error::from)?;
        // A message's buffer has room for its whole length up to 64 MiB
        // (no regrowth as its frames come); beyond, it grows as they come.
        let room = (header.total as usize).clamp(data_len, data_len.max(FIRST_ROOM));
        match arrival {
            Arrival::Notice { message } => {
                p2p.noticed.insert((from, message));
                p2p.frame_last[f] = false;
            }
            Arrival::Message {
                first: true,
                last,
                route: Route::Pending,
                ..
            } => {
                self.arrivals += 1;
                let p2p = self.p2p.as_mut().expect("bit 3");
                p2p.pending.push(PendingMessage {
                    arrival: self.arrivals,
                    from,
                    tag,
                    header,
                    bytes: buffer(room),
                });
                p2p.coming[f] = Some(Dest::Pending);
                p2p.frame_last[f] = last;
            }
            Arrival::Message {
                first: true,
                last,
                route: Route::Keep,
                ..
            } => {
                self.arrivals += 1;
                let arrival = self.arrivals;
                let dest = self.keep(arrival, from, tag, &header, buffer(room));
                let p2p = self.p2p.as_mut().expect("bit 3");
                p2p.coming[f] = Some(dest);
                p2p.frame_last[f] = last;
            }
            Arrival::Message {
                first: false, last, ..
            } => p2p.frame_last[f] = last,
        }
        Ok(())
    }

    /// Data of the frame of `from` whose header [`Matching::message_header`]
    /// accepted, in order: to where its message went.
    pub fn message_data(&mut self, from: u32, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let dest = self.p2p.as_ref().and_then(|p| p.coming[from as usize]);
        if let Some(dest) = dest {
            self.append(from, dest, data);
        }
    }

    /// The frame of `from` is complete: after its message's last frame
    /// nothing more is coming from `from`.
    pub fn message_end(&mut self, from: u32) {
        if let Some(p2p) = self.p2p.as_mut() {
            let f = from as usize;
            if std::mem::take(&mut p2p.frame_last[f]) {
                p2p.coming[f] = None;
            }
        }
    }

    /// The first frame of a message for a communicator this rank holds:
    /// to the first posted receive it matches (in post order), else kept.
    /// Where its later frames go.
    fn keep(&mut self, arrival: u64, from: u32, tag: u32, h: &DataHeader, bytes: Vec<u8>) -> Dest {
        let sync = h.kind == DataKind::Synchronous;
        let remaining = h.total - bytes.len() as u64;
        let pos = self
            .posted
            .iter()
            .position(|p| p.matches(from, h.communicator, tag));
        let Some(i) = pos else {
            let u = Unexpected {
                arrival,
                comm: h.communicator,
                tag,
                payload: bytes,
                message: h.message,
                remaining,
                sync,
            };
            // In arrival order: a pending message judged later goes
            // before the messages that came after it.
            let q = &mut self.unexpected[from as usize];
            let at = q.partition_point(|k| k.arrival < arrival);
            q.insert(at, u);
            return Dest::Kept(h.message);
        };
        if sync {
            self.owe_notice(from, h.communicator, tag, h.message);
        }
        // A buffer the receive lent takes the message (its memory reused)
        // when nothing of the message is in another one yet.
        let bytes = match self.posted[i].into.take() {
            Some(mut lent) if bytes.is_empty() => {
                lent.clear();
                lent.reserve(bytes.capacity());
                self.spare(bytes);
                lent
            }
            Some(lent) => {
                self.spare(lent);
                bytes
            }
            None => bytes,
        };
        let id = self.posted[i].id;
        self.take_into(i, from, tag, bytes, remaining);
        Dest::Receive(id)
    }

    /// The posted receive at `i` took a message's first frame(s): it
    /// completes when nothing more comes, else it waits for the rest.
    fn take_into(&mut self, i: usize, from: u32, tag: u32, bytes: Vec<u8>, remaining: u64) {
        if remaining == 0 {
            let p = self.posted.remove(i).expect("found");
            let status = Status {
                source: from,
                tag,
                len: bytes.len(),
            };
            self.completed.insert(p.id, Ok((status, bytes)));
        } else {
            let p = &mut self.posted[i];
            p.source = Some(from);
            p.tag = Some(tag);
            p.want = Want::Message { bytes, remaining };
        }
    }

    /// A later frame's data, to where its message went.
    fn append(&mut self, from: u32, dest: Dest, data: &[u8]) {
        match dest {
            Dest::Kept(message) => {
                let q = &mut self.unexpected[from as usize];
                if let Some(u) = q.iter_mut().find(|u| u.message == message) {
                    u.payload.extend_from_slice(data);
                    u.remaining = u.remaining.saturating_sub(data.len() as u64);
                }
            }
            Dest::Receive(id) => {
                let Some(i) = self.posted.iter().position(|p| p.id == id) else {
                    return;
                };
                let done = match &mut self.posted[i].want {
                    Want::Message { bytes, remaining } => {
                        bytes.extend_from_slice(data);
                        *remaining = remaining.saturating_sub(data.len() as u64);
                        *remaining == 0
                    }
                    _ => false,
                };
                if done {
                    let p = self.posted.remove(i).expect("found");
                    if let Want::Message { bytes, .. } = p.want {
                        let status = Status {
                            source: from,
                            tag: p.tag.unwrap_or(0),
                            len: bytes.len(),
                        };
                        self.completed.insert(p.id, Ok((status, bytes)));
                    }
                }
            }
            Dest::Pending => {
                let p2p = self.p2p.as_mut().expect("bit 3");
                if let Some(m) = p2p.pending.iter_mut().rev().find(|m| m.from == from) {
                    m.bytes.extend_from_slice(data);
                }
            }
            Dest::Dropped => {}
        }
    }

    /// A receive with feature bit 3 (see [`Matching::post_on`]).
    pub(super) fn post_message(
        &mut self,
        id: RecvId,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
        into: Option<Vec<u8>>,
    ) {
        let Some((s, i)) = self.first_match_on(comm, source, tag) else {
            self.posted.push_back(Posted {
                id,
                comm,
                source,
                tag,
                want: Want::Whole,
                into,
            });
            return;
        };
        // The kept message has a buffer of its own: the lent one is spare.
        if let Some(lent) = into {
            self.spare(lent);
        }
        self.take_kept(id, s, i);
    }

    /// A buffer this state no longer needs, for the edge to give back to
    /// its pool ([`Matching::take_spare`]) so its memory is reused.
    fn spare(&mut self, buf: Vec<u8>) {
        if let Some(p2p) = self.p2p.as_mut() {
            if buf.capacity() > 0 {
                p2p.spare.push(buf);
            }
        }
    }

    /// The buffers this state no longer needs (a receive's lent buffer
    /// when a kept message came first, a fresh one when a lent one took
    /// the message): the edge gives them back to its pool.
    pub fn take_spare(&mut self) -> Vec<Vec<u8>> {
        self.p2p
            .as_mut()
            .map_or_else(Vec::new, |p| std::mem::take(&mut p.spare))
    }

    /// As [`Matching::post_on`] with feature bit 3, the message going into
    /// `buf` (cleared; its memory reused) when its first frame comes after
    /// this post (a message already kept keeps its own buffer). Without
    /// bit 3 the same as `post_on`.
    pub fn post_on_into(
        &mut self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
        buf: Vec<u8>,
    ) -> RecvId {
        if self.p2p.is_none() {
            return self.post_on(comm, source, tag);
        }
        self.next_id += 1;
        let id = self.next_id;
        if let Err(e) = self.check_comm_tag(comm, tag) {
            self.completed.insert(id, Err(e));
            return id;
        }
        self.post_message(id, comm, source, tag, Some(buf));
        id
    }

    /// Receive `id` takes the kept message at `i` of job rank `s`: it
    /// matched (a synchronous one is noticed now, protocol §16.5); its
    /// frames still coming go to the receive.
    fn take_kept(&mut self, id: RecvId, s: usize, i: usize) -> Status {
        let u = self.unexpected[s].remove(i).expect("found");
        let from = s as u32;
        let status = Status {
            source: from,
            tag: u.tag,
            len: u.len(),
        };
        if u.sync {
            self.owe_notice(from, u.comm, u.tag, u.message);
        }
        if u.remaining == 0 {
            let done = Status {
                len: u.payload.len(),
                ..status
            };
            self.completed.insert(id, Ok((done, u.payload)));
        } else {
            self.posted.push_back(Posted {
                id,
                comm: u.comm,
                source: Some(from),
                tag: Some(u.tag),
                want: Want::Message {
                    bytes: u.payload,
                    remaining: u.remaining,
                },
                into: None,
            });
            if let Some(p2p) = self.p2p.as_mut() {
                p2p.coming[s] = Some(Dest::Receive(id));
            }
        }
        status
    }

    /// A matched probe (MPI's `MPI_Improbe`, protocol §16.3): the message a
    /// receive on `comm` from `source` with `tag` would take now becomes
    /// receive `id`'s (complete it with [`Matching::poll_recv`]); no other
    /// receive takes it. `None` when no such message is kept.
    pub fn claim_on(
        &mut self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Option<(RecvId, Status)> {
        let (s, i) = self.first_match_on(comm, source, tag)?;
        if self.p2p.is_none() && self.unexpected[s][i].payload.len() >= super::MAX_PAYLOAD as usize
        {
            // A v1 message of several frames (§7.2) is claimed whole only.
            return None;
        }
        self.next_id += 1;
        let id = self.next_id;
        let st = self.take_kept(id, s, i);
        Some((id, st))
    }

    /// Receive `id` was cancelled: the frames still coming of the message
    /// it took are dropped.
    pub(super) fn cancelled_message(&mut self, id: RecvId) {
        if let Some(p2p) = self.p2p.as_mut() {
            for c in p2p.coming.iter_mut() {
                if *c == Some(Dest::Receive(id)) {
                    *c = Some(Dest::Dropped);
                }
            }
        }
    }

    fn owe_notice(&mut self, from: u32, comm: u32, tag: u32, message: u64) {
        let me = self.me;
        let p2p = self.p2p.as_mut().expect("bit 3");
        if from == me {
            p2p.noticed.insert((me, message));
        } else if !self.departed.get(from as usize).copied().unwrap_or(true) {
            // No notice to a peer that said BYE (§16.5).
            p2p.notices.push(DueNotice {
                to: from,
                comm,
                tag,
                message,
            });
        }
    }

    /// The notices due (protocol §16.5), to be sent now.
    pub fn take_notices(&mut self) -> Vec<DueNotice> {
        self.p2p
            .as_mut()
            .map_or_else(Vec::new, |p| std::mem::take(&mut p.notices))
    }

    /// Whether notices are due.
    pub fn notices_due(&self) -> bool {
        self.p2p.as_ref().is_some_and(|p| !p.notices.is_empty())
    }

    /// This rank sent synchronous message `message` on `comm` with `tag`
    /// to `to` (call before its first frame goes out): its notice is due
    /// (check 5 of §16.4 accepts it from now on).
    pub fn sent_synchronous(&mut self, to: u32, message: u64, comm: u32, tag: u32) {
        if let Some(s) = self
            .p2p
            .as_mut()
            .and_then(|p| p.streams.get_mut(to as usize))
        {
            s.sent_synchronous(message, comm, tag);
        }
    }

    /// Whether the notice of synchronous message `message` to `to` came
    /// (`Some(Ok)`, reported once), can never come (`Some(Err)`: `to`
    /// left, protocol §16.5 "BYE"), or not yet.
    pub fn poll_notice(&mut self, to: u32, message: u64) -> Option<Result<(), Error>> {
        let p2p = self.p2p.as_mut()?;
        if p2p.noticed.remove(&(to, message)) {
            return Some(Ok(()));
        }
        (to != self.me && self.departed(to)).then(|| Err(departed(to)))
    }

    /// A message this rank sends itself on `comm` with `tag` (no frame,
    /// protocol §16.5: a synchronous one completes when its own receive
    /// matches it). Returns the number to wait on for a synchronous one.
    pub fn handle_local(&mut self, comm: u32, tag: u32, payload: Vec<u8>, sync: bool) -> u64 {
        let me = self.me;
        let Some(p2p) = self.p2p.as_mut() else {
            self.handle_v1_data(me, tag, payload);
            return 0;
        };
        p2p.local_numbers += 1;
        let message = p2p.local_numbers;
        let header = DataHeader::message(comm, message, payload.len(), sync);
        self.arrivals += 1;
        let arrival = self.arrivals;
        self.keep(arrival, me, tag, &header, payload);
        message
    }

    /// This rank now holds communicator `id` of `members` (job ranks), or
    /// (`None`) made no communicator in the call that gave out `id`: its
    /// highest is at least `id` (protocol §15.3). Every pending message is
    /// judged again (§16.4): kept for its communicator (before every later
    /// message), still pending, or rejected: the error and its sender.
    pub fn communicator_made(
        &mut self,
        id: u32,
        members: Option<Arc<[u32]>>,
    ) -> Result<(), (u32, Error)> {
        self.apply_early_revokes(id, members.as_deref());
        let Some(p2p) = self.p2p.as_mut() else {
            return Ok(());
        };
        p2p.known.made(id, members);
        let pending = std::mem::take(&mut p2p.pending);
        // The message still coming of a sender kept pending is its last
        // pending one.
        let mut last_of: HashMap<u32, u64> = HashMap::new();
        for m in &pending {
            last_of.insert(m.from, m.arrival);
        }
        let mut still = Vec::new();
        let mut failed = None;
        for m in pending {
            if failed.is_some() {
                still.push(m);
                continue;
            }
            let p2p = self.p2p.as_ref().expect("bit 3");
            let verdict = route(
                m.header.communicator,
                m.from,
                m.header.message,
                &p2p.known,
                p2p.can_make,
            );
            match verdict {
                Ok(Route::Pending) => still.push(m),
                Ok(Route::Keep) => {
                    let f = m.from as usize;
                    let coming_here = p2p.coming[f] == Some(Dest::Pending)
                        && last_of.get(&m.from) == Some(&m.arrival);
                    let dest = self.keep(m.arrival, m.from, m.tag, &m.header, m.bytes);
                    if coming_here {
                        self.p2p.as_mut().expect("bit 3").coming[f] = Some(dest);
                    }
                }
                Err(e) => failed = Some((m.from, Error::from(e))),
            }
        }
        let p2p = self.p2p.as_mut().expect("bit 3");
        p2p.pending = still;
        failed.map_or(Ok(()), Err)
    }

    /// This rank freed communicator `id`: a later message for it is one of
    /// an id this rank has left behind (check 4 of §16.4).
    pub fn communicator_freed(&mut self, id: u32) {
        if let Some(p2p) = self.p2p.as_mut() {
            p2p.known.comms.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests;
