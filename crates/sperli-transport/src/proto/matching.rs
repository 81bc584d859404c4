//! What a rank received and what its program waits for, sans I/O: DATA
//! matched to receives by (source, tag) in arrival order (protocol §6.5),
//! COLLECTIVE, checkpoint and RESUME frames kept in arrival order until
//! the call they answer takes them (protocol §8.8), the peers that left,
//! and which sends are written.
//!
//! Receives match as MPI's do. A posted receive names a source or any
//! source, a tag or any tag. A DATA frame goes to the first posted receive
//! (in post order) that it matches, else it waits in its source's queue of
//! unexpected messages; a receive posted later takes the first queued
//! message it matches, for any source the one that arrived first. Which
//! sender an any-source receive gets is therefore a matter of timing, as
//! in MPI.
//!
//! Every wait of the transport is one [`Matching::wait_on`] with a `pick`
//! that takes what the wait is for: the completed receive, the next
//! COLLECTIVE payload from a peer, the next checkpoint frame.
//!
//! COLLECTIVE frames carry their header tag: with HELLO feature bit 2 the
//! communicator id (protocol §15.2; always 0 otherwise). A take for
//! communicator c gets the earliest frame of the peer with tag c; the
//! frames of other communicators stay in arrival order and are shown to
//! the taker's judgement ([`Matching::pop_collective_where`], protocol
//! §15.4).
//!
//! A *joined* receive ([`Matching::post_joined`]) is one message of the
//! convention of protocol §7.2: a frame of exactly 16777216 bytes goes on
//! into the next frames of the same source and tag until a shorter one.
//!
//! With HELLO feature bit 3 ([`Matching::set_features`], protocol §16) a
//! DATA payload starts with its DATA header: messages are matched by
//! (communicator, source, tag), a message of several frames is one
//! message whose first frame is what a receive matches, and synchronous
//! messages are noticed (the [`messages`] module). Without it every
//! message is of communicator 0 and nothing of this changes.

use std::collections::{HashMap, HashSet, VecDeque};

use sperli_wire::error::{FrameError, LossCause};
use sperli_wire::header::FrameHeader;
use sperli_wire::limits::{FEATURE_COMMUNICATORS, MAX_COMMUNICATOR_ID, MAX_PAYLOAD};
use sperli_wire::payload::Payload;
use sperli_wire::{Error, FrameType};

use crate::proto::connection::Incoming;
use crate::proto::large::LargeAssembly;

pub mod messages;
use messages::P2p;
pub mod revoked;

/// What a completed receive reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The sender's rank.
    pub source: u32,
    /// The message's tag.
    pub tag: u32,
    /// The message length in bytes (with feature bit 3 the whole
    /// message's, also while its later frames are still coming).
    pub len: usize,
}

/// A received message.
pub type Message = (Status, Vec<u8>);

/// A posted receive.
pub type RecvId = u64;

#[derive(Debug)]
enum Want {
    /// One frame is the message.
    Whole,
    /// A `send_large` message, assembled over several frames; `None` while
    /// one of its frames streams straight into the assembly.
    Large(Option<LargeAssembly>),
    /// A message of the convention of protocol §7.2: `None` until its
    /// first frame came, then the bytes so far (the receive then waits for
    /// the next frame of that source and tag).
    Joined(Option<Vec<u8>>),
    /// With feature bit 3: a message whose first frame this receive took
    /// (it matched), its bytes so far and the bytes still coming
    /// (protocol §16.3). It matches nothing new.
    Message { bytes: Vec<u8>, remaining: u64 },
}

/// Whether a frame of `len` bytes ends a joined message (protocol §7.2:
/// every frame but the last is exactly the largest payload).
fn ends_message(len: usize) -> bool {
    len < MAX_PAYLOAD as usize
}

#[derive(Debug)]
struct Posted {
    id: RecvId,
    comm: u32,
    source: Option<u32>,
    tag: Option<u32>,
    want: Want,
    /// With feature bit 3: the buffer the message goes into, when the
    /// caller lent one ([`Matching::post_on_into`]).
    into: Option<Vec<u8>>,
}

impl Posted {
    fn matches(&self, from: u32, comm: u32, tag: u32) -> bool {
        self.comm == comm
            && self.source.is_none_or(|s| s == from)
            && self.tag.is_none_or(|t| t == tag)
            && !matches!(self.want, Want::Large(None) | Want::Message { .. })
    }
}

/// A kept message (v1: one DATA frame) no receive has taken yet.
#[derive(Debug)]
struct Unexpected {
    arrival: u64,
    /// The communicator (always 0 without feature bit 3).
    comm: u32,
    tag: u32,
    payload: Vec<u8>,
    /// With feature bit 3: the message number (0 without).
    message: u64,
    /// With feature bit 3: the bytes still coming in later frames.
    remaining: u64,
    /// With feature bit 3: a synchronous message (noticed when taken).
    sync: bool,
}

impl Unexpected {
    /// A v1 message (one frame, communicator 0).
    fn v1(arrival: u64, tag: u32, payload: Vec<u8>) -> Self {
        Self {
            arrival,
            comm: 0,
            tag,
            payload,
            message: 0,
            remaining: 0,
            sync: false,
        }
    }

    fn len(&self) -> usize {
        self.payload.len() + self.remaining as usize
    }
}

/// One rank's receive state (see the module docs).
#[derive(Debug)]
pub struct Matching {
    me: u32,
    unexpected: Vec<VecDeque<Unexpected>>,
    arrivals: u64,
    posted: VecDeque<Posted>,
    completed: HashMap<RecvId, Result<Message, Error>>,
    collective: Vec<VecDeque<(u32, Vec<u8>)>>,
    ckpt: Vec<VecDeque<(FrameHeader, Vec<u8>)>>,
    departed: Vec<bool>,
    written: HashSet<u64>,
    undelivered: HashMap<u64, u32>,
    next_id: RecvId,
    open_sends: u64,
    open_recvs: u64,
    /// Feature bit 3's state, once the job has it (protocol §16).
    p2p: Option<P2p>,
    /// The communicators revoked one by one (protocol §18.8.1).
    revoked: revoked::Revoked,
}

impl Matching {
    /// The state of rank `me` of a job of `size` ranks.
    pub fn new(size: u32, me: u32) -> Self {
        let n = size as usize;
        Self {
            me,
            unexpected: (0..n).map(|_| VecDeque::new()).collect(),
            arrivals: 0,
            posted: VecDeque::new(),
            completed: HashMap::new(),
            collective: (0..n).map(|_| VecDeque::new()).collect(),
            ckpt: (0..n).map(|_| VecDeque::new()).collect(),
            departed: vec![false; n],
            written: HashSet::new(),
            undelivered: HashMap::new(),
            next_id: 0,
            open_sends: 0,
            open_recvs: 0,
            p2p: None,
            revoked: revoked::Revoked::default(),
        }
    }

    /// A MEMBERSHIP record was applied (protocol §18.2, "What starts again
    /// in a new epoch"): every frame of the old epoch held unmatched is
    /// dropped, every receive of the old epoch still posted fails with
    /// `revoked`, and the counts of protocol §16 start again.
    pub fn new_epoch(&mut self, revoked: Error) {
        for q in &mut self.unexpected {
            q.clear();
        }
        for q in &mut self.collective {
            q.clear();
        }
        for q in &mut self.ckpt {
            q.clear();
        }
        for p in std::mem::take(&mut self.posted) {
            self.completed.insert(p.id, Err(revoked.clone()));
        }
        if let Some(p2p) = &mut self.p2p {
            p2p.new_epoch();
        }
    }

    /// An accepted frame from `from` (the transport handles
    /// `Authenticated` itself; a BYE counts only once the peer closed,
    /// [`Matching::handle_departed`]). With feature bit 3 a DATA frame is
    /// judged here (protocol §16.2, §16.4): an error is a rejected frame
    /// of `from` (H1610, ABORT reason 7), and nothing of it is kept.
    pub fn handle_incoming(&mut self, from: u32, inc: Incoming) -> Result<(), Error> {
        let f = from as usize;
        match inc {
            Incoming::Data { tag, payload } => return self.handle_data(from, tag, payload),
            Incoming::Collective { tag, payload } => self.collective[f].push_back((tag, payload)),
            Incoming::Checkpoint(h, p) => self.ckpt[f].push_back((h, p)),
            // RECOVER frames go to the rank's recovery, not here (protocol §18.5).
            Incoming::Bye | Incoming::Authenticated { .. } | Incoming::Recover { .. } => {}
        }
        Ok(())
    }

    /// A DATA frame from `from` with `tag`: a v1 message, or with feature
    /// bit 3 a frame of a message of protocol §16 (judged, see
    /// [`Matching::handle_incoming`]).
    pub fn handle_data(&mut self, from: u32, tag: u32, payload: Vec<u8>) -> Result<(), Error> {
        if self.p2p.is_some() {
            return self.handle_message_frame(from, tag, payload);
        }
        self.handle_v1_data(from, tag, payload);
        Ok(())
    }

    /// A v1 DATA frame: one message of communicator 0 (protocol §6.5).
    fn handle_v1_data(&mut self, from: u32, tag: u32, payload: Vec<u8>) {
        let pos = self.posted.iter().position(|p| p.matches(from, 0, tag));
        let Some(i) = pos else {
            self.arrivals += 1;
            let arrival = self.arrivals;
            self.unexpected[from as usize].push_back(Unexpected::v1(arrival, tag, payload));
            return;
        };
        let p = &mut self.posted[i];
        match &mut p.want {
            Want::Whole => {
                let status = Status {
                    source: from,
                    tag,
                    len: payload.len(),
                };
                let id = p.id;
                self.posted.remove(i);
                self.completed.insert(id, Ok((status, payload)));
            }
            Want::Large(Some(asm)) => {
                let r = asm.push_frame(&payload);
                self.large_progress(i, from, tag, r);
            }
            Want::Large(None) | Want::Message { .. } => unreachable!("skipped above"),
            Want::Joined(so_far) => {
                let done = ends_message(payload.len());
                let bytes = match so_far.take() {
                    None => payload,
                    Some(mut b) => {
                        b.extend_from_slice(&payload);
                        b
                    }
                };
                if done {
                    let status = Status {
                        source: from,
                        tag,
                        len: bytes.len(),
                    };
                    let id = p.id;
                    self.posted.remove(i);
                    self.completed.insert(id, Ok((status, bytes)));
                } else {
                    // The rest comes from this source with this tag.
                    p.source = Some(from);
                    p.tag = Some(tag);
                    *so_far = Some(bytes);
                }
            }
        }
    }

    /// After a frame went into the large receive at `i`: complete or fail
    /// it, or leave it posted for the next frame.
    fn large_progress(&mut self, i: usize, from: u32, tag: u32, r: Result<bool, Error>) {
        let done = match r {
            Ok(false) => return,
            Ok(true) => None,
            Err(e) => Some(e),
        };
        let Some(p) = self.posted.remove(i) else {
            return;
        };
        let result = match (done, p.want) {
            (Some(e), _) => Err(e),
            (None, Want::Large(Some(asm))) => {
                let m = asm.into_message();
                Ok((
                    Status {
                        source: from,
                        tag,
                        len: m.len(),
                    },
                    m,
                ))
            }
            (None, _) => return,
        };
        self.completed.insert(p.id, result);
    }

    /// A DATA frame from `from` with `tag` passed its checks, its payload
    /// not yet read: when the receive it goes to is a large receive, its
    /// assembly is handed out so the payload streams straight into it
    /// (and must come back through [`Matching::end_stream`]).
    /// With feature bit 3 nothing streams (a payload starts with its DATA
    /// header, judged first).
    pub fn start_stream(&mut self, from: u32, tag: u32) -> Option<(RecvId, LargeAssembly)> {
        if self.p2p.is_some() {
            return None;
        }
        let p = self.posted.iter_mut().find(|p| p.matches(from, 0, tag))?;
        match &mut p.want {
            Want::Large(asm @ Some(_)) => asm.take().map(|a| (p.id, a)),
            _ => None,
        }
    }

    /// The streamed frame of [`Matching::start_stream`] is complete, or
    /// (`cut` is the error) the connection ended inside it: the receive
    /// fails with that error.
    pub fn end_stream(
        &mut self,
        id: RecvId,
        from: u32,
        tag: u32,
        mut asm: LargeAssembly,
        cut: Option<Error>,
    ) {
        let Some(i) = self.posted.iter().position(|p| p.id == id) else {
            return; // cancelled meanwhile
        };
        let r = match cut {
            Some(e) => Err(e),
            None => asm.end_frame(),
        };
        self.posted[i].want = Want::Large(Some(asm));
        self.large_progress(i, from, tag, r);
    }

    /// The peer `from` has left: it said BYE and closed (or never closed
    /// within the silence limit).
    pub fn handle_departed(&mut self, from: u32) {
        if let Some(d) = self.departed.get_mut(from as usize) {
            *d = true;
        }
    }

    /// A replacement of `rank` joined (protocol §18.7): the rank has not
    /// left, whatever its failed incarnation did.
    pub fn handle_rejoined(&mut self, rank: u32) {
        if let Some(d) = self.departed.get_mut(rank as usize) {
            *d = false;
        }
    }

    /// True once `from` has left.
    pub fn departed(&self, from: u32) -> bool {
        self.departed.get(from as usize).copied().unwrap_or(false)
    }

    fn first_match(&self, source: Option<u32>, tag: Option<u32>) -> Option<(usize, usize)> {
        self.first_match_on(0, source, tag)
    }

    /// The earliest kept message of communicator `comm` from `source`
    /// (`None`: any, earliest by arrival) with `tag` (`None`: any).
    fn first_match_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Option<(usize, usize)> {
        let ok = |u: &Unexpected| u.comm == comm && tag.is_none_or(|t| t == u.tag);
        let in_queue = |s: usize| {
            self.unexpected[s]
                .iter()
                .position(ok)
                .map(|i| (s, i, self.unexpected[s][i].arrival))
        };
        match source {
            Some(s) => in_queue(s as usize).map(|(s, i, _)| (s, i)),
            None => (0..self.unexpected.len())
                .filter_map(in_queue)
                .min_by_key(|&(_, _, arrival)| arrival)
                .map(|(s, i, _)| (s, i)),
        }
    }

    /// Posts a receive from `source` (`None`: any) with `tag` (`None`:
    /// any). A queued message it matches completes it at once.
    pub fn post(&mut self, source: Option<u32>, tag: Option<u32>) -> RecvId {
        self.post_on(0, source, tag)
    }

    /// As [`Matching::post`] on communicator `comm` (protocol §16.3; only
    /// 0, the job's, without feature bit 3). With feature bit 3 a receive
    /// takes one whole message, of any length.
    pub fn post_on(&mut self, comm: u32, source: Option<u32>, tag: Option<u32>) -> RecvId {
        self.next_id += 1;
        let id = self.next_id;
        if let Err(e) = self.check_comm_tag(comm, tag) {
            self.completed.insert(id, Err(e));
            return id;
        }
        if self.p2p.is_some() {
            self.post_message(id, comm, source, tag, None);
            return id;
        }
        match self.first_match_on(comm, source, tag) {
            Some((s, i)) => {
                let u = self.unexpected[s].remove(i).expect("found above");
                let status = Status {
                    source: s as u32,
                    tag: u.tag,
                    len: u.payload.len(),
                };
                self.completed.insert(id, Ok((status, u.payload)));
            }
            None => self.posted.push_back(Posted {
                id,
                comm,
                source,
                tag,
                want: Want::Whole,
                into: None,
            }),
        }
        id
    }

    /// Posts a joined receive (protocol §7.2) from `source` (`None`: any)
    /// with `tag` (`None`: any): the first matching message, of any length.
    /// Queued frames complete it at once when the whole message is there;
    /// otherwise it stays posted (in post order) for the rest.
    pub fn post_joined(&mut self, source: Option<u32>, tag: Option<u32>) -> RecvId {
        self.post_joined_on(0, source, tag)
    }

    /// As [`Matching::post_joined`] on communicator `comm` (with feature
    /// bit 3 the same as [`Matching::post_on`]: a message is whole by its
    /// DATA header, protocol §16.2).
    pub fn post_joined_on(&mut self, comm: u32, source: Option<u32>, tag: Option<u32>) -> RecvId {
        if self.p2p.is_some() {
            return self.post_on(comm, source, tag);
        }
        self.next_id += 1;
        let id = self.next_id;
        if let Err(e) = self.check_comm_tag(comm, tag) {
            self.completed.insert(id, Err(e));
            return id;
        }
        let Some((s, i)) = self.first_match_on(comm, source, tag) else {
            self.posted.push_back(Posted {
                id,
                comm,
                source,
                tag,
                want: Want::Joined(None),
                into: None,
            });
            return id;
        };
        let first = self.unexpected[s].remove(i).expect("found above");
        let tag = first.tag;
        let mut bytes = first.payload;
        let mut done = ends_message(bytes.len());
        while !done {
            let Some((_, j)) = self.first_match_on(comm, Some(s as u32), Some(tag)) else {
                break;
            };
            let u = self.unexpected[s].remove(j).expect("found above");
            done = ends_message(u.payload.len());
            bytes.extend_from_slice(&u.payload);
        }
        if done {
            let status = Status {
                source: s as u32,
                tag,
                len: bytes.len(),
            };
            self.completed.insert(id, Ok((status, bytes)));
        } else {
            self.posted.push_back(Posted {
                id,
                comm,
                source: Some(s as u32),
                tag: Some(tag),
                want: Want::Joined(Some(bytes)),
                into: None,
            });
        }
        id
    }

    /// The message a joined receive from `source` with `tag` would take
    /// now, once all its frames are there (protocol §7.2), left where it
    /// is; its `len` is the whole message's. `None` also while a message's
    /// later frames are still on their way.
    pub fn probe_joined(&self, source: Option<u32>, tag: Option<u32>) -> Option<Status> {
        self.probe_joined_on(0, source, tag)
    }

    /// As [`Matching::probe_joined`] on communicator `comm` (with feature
    /// bit 3 the same as [`Matching::probe_on`]).
    pub fn probe_joined_on(
        &self,
        comm: u32,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Option<Status> {
        if self.p2p.is_some() {
            return self.probe_on(comm, source, tag);
        }
        let (s, i) = self.first_match_on(comm, source, tag)?;
        let q = &self.unexpected[s];
        let first = &q[i];
        let mut len = first.payload.len();
        let mut done = ends_message(len);
        for u in q
            .iter()
            .skip(i + 1)
            .filter(|u| u.tag == first.tag && u.comm == comm)
        {
            if done {
                break;
            }
            len += u.payload.len();
            done = ends_message(u.payload.len());
        }
        done.then_some(Status {
            source: s as u32,
            tag: first.tag,
            len,
        })
    }

    /// Posts the receive of a `send_large` message from `from` with `tag`:
    /// queued frames go into it first, later ones as they arrive.
    pub fn post_large(&mut self, from: u32, tag: u32) -> RecvId {
        self.post_large_into(from, tag, Vec::new())
    }

    /// As [`Matching::post_large`], the message assembled in `buf`.
    pub fn post_large_into(&mut self, from: u32, tag: u32, buf: Vec<u8>) -> RecvId {
        self.next_id += 1;
        let id = self.next_id;
        let mut asm = LargeAssembly::with_buffer(buf);
        while let Some((s, i)) = self.first_match(Some(from), Some(tag)) {
            let u = self.unexpected[s].remove(i).expect("found above");
            match asm.push_frame(&u.payload) {
                Ok(false) => continue,
                Ok(true) => {
                    let m = asm.into_message();
                    let status = Status {
                        source: from,
                        tag,
                        len: m.len(),
                    };
                    self.completed.insert(id, Ok((status, m)));
                    return id;
                }
                Err(e) => {
                    self.completed.insert(id, Err(e));
                    return id;
                }
            }
        }
        self.posted.push_back(Posted {
            id,
            comm: 0,
            source: Some(from),
            tag: Some(tag),
            want: Want::Large(Some(asm)),
            into: None,
        });
        id
    }

    /// The outcome of receive `id`: its message (or its failure) once it
    /// completed; `H1613` with [`LossCause::Departed`] once nothing queued
    /// can complete it because its source left (an any-source receive:
    /// every other rank left); `None` while it waits.
    pub fn poll_recv(&mut self, id: RecvId) -> Option<Result<Message, Error>> {
        if let Some(r) = self.completed.remove(&id) {
            return Some(r);
        }
        let i = self.posted.iter().position(|p| p.id == id)?;
        let gone = match self.posted[i].source {
            Some(s) => self.departed(s).then_some(s),
            None => {
                let others = (0..self.departed.len() as u32).filter(|&r| r != self.me);
                let mut last = None;
                for r in others {
                    if !self.departed(r) {
                        return None;
                    }
                    last = Some(r);
                }
                last
            }
        };
        let peer = gone?;
        if matches!(self.posted[i].want, Want::Large(None)) {
            return None; // a frame of it is being read
        }
        if let Want::Joined(Some(_)) = self.posted[i].want {
            // Part of the message came; its source left before the rest.
            self.posted.remove(i);
            return Some(Err(departed(peer)));
        }
        self.posted.remove(i);
        Some(Err(departed(peer)))
    }

    /// Cancels receive `id`: a message it already took is dropped with it
    /// (with feature bit 3 also the frames of it still coming).
    pub fn cancel(&mut self, id: RecvId) {
        self.completed.remove(&id);
        let before = self.posted.len();
        self.posted.retain(|p| p.id != id);
        if before != self.posted.len() {
            self.cancelled_message(id);
        }
    }

    /// MPI's `MPI_Cancel` of receive `id`: true when it had not matched a
    /// message (it is gone, nothing is lost); false when it took one (whole
    /// or its first frames) or is unknown: it stays and completes as
    /// usual.
    pub fn try_cancel(&mut self, id: RecvId) -> bool {
        if self.completed.contains_key(&id) {
            return false;
        }
        let Some(i) = self.posted.iter().position(|p| p.id == id) else {
            return false;
        };
        if !matches!(self.posted[i].want, Want::Whole | Want::Joined(None)) {
            return false;
        }
        self.posted.remove(i);
        true
    }

    /// The message a receive from `source` with `tag` would take now, left
    /// where it is (MPI's probe).
    pub fn probe(&self, source: Option<u32>, tag: Option<u32>) -> Option<Status> {
        self.probe_on(0, source, tag)
    }

    /// As [`Matching::probe`] on communicator `comm`. With feature bit 3 a
    /// message is reported from its first frame on, with its whole length
    /// (protocol §16.3).
    pub fn probe_on(&self, comm: u32, source: Option<u32>, tag: Option<u32>) -> Option<Status> {
        let (s, i) = self.first_match_on(comm, source, tag)?;
        let u = &self.unexpected[s][i];
        Some(Status {
            source: s as u32,
            tag: u.tag,
            len: u.len(),
        })
    }

    /// One step of every wait: `pick` takes what the wait is for; when it
    /// finds nothing and `from` (a peer the wait depends on) has left,
    /// nothing can come any more: `H1613` ([`LossCause::Departed`]).
    /// `None`: keep waiting.
    pub fn wait_on<T>(
        &mut self,
        from: Option<u32>,
        pick: impl FnOnce(&mut Self) -> Option<Result<T, Error>>,
    ) -> Option<Result<T, Error>> {
        if let Some(r) = pick(self) {
            return Some(r);
        }
        let peer = from?;
        self.departed(peer).then(|| Err(departed(peer)))
    }

    /// The next COLLECTIVE payload from `from` of the job's communicator
    /// (tag 0), in arrival order; frames of other communicators stay.
    pub fn pop_collective(&mut self, from: u32) -> Option<Vec<u8>> {
        let r: Option<Result<Vec<u8>, ()>> = self.pop_collective_where(from, 0, |_| Ok(()));
        r.and_then(Result::ok)
    }

    /// The earliest COLLECTIVE payload from `from` whose tag is `tag`
    /// (protocol §15.4). Every frame of `from` with another tag before it
    /// is shown to `pass` (its tag): `Ok` keeps it where it is, an error
    /// ends the take with that error (the frame stays).
    pub fn pop_collective_where<E>(
        &mut self,
        from: u32,
        tag: u32,
        mut pass: impl FnMut(u32) -> Result<(), E>,
    ) -> Option<Result<Vec<u8>, E>> {
        let q = self.collective.get_mut(from as usize)?;
        sperli_wire::communicator::take_earliest(q, tag, &mut pass)
    }

    /// Judges every kept COLLECTIVE frame again with the job's `features`
    /// (protocol §6.2 checks 12 and 13): what arrived before this rank's
    /// set-up ended was judged with the features of two HELLOs only. The
    /// first frame that fails, with its sender.
    pub fn recheck_collective(&self, features: u64) -> Result<(), (u32, FrameError)> {
        let tags_allowed = features & FEATURE_COMMUNICATORS != 0;
        for (from, q) in self.collective.iter().enumerate() {
            for (tag, p) in q {
                if *tag != 0 && (!tags_allowed || *tag > MAX_COMMUNICATOR_ID) {
                    let e = if tags_allowed {
                        FrameError::ReservedTag { got: *tag }
                    } else {
                        FrameError::NonZeroTag {
                            frame_type: FrameType::Collective,
                            got: *tag,
                        }
                    };
                    return Err((from as u32, e));
                }
                if let Err(e) = Payload::decode_with(FrameType::Collective, p, features) {
                    return Err((from as u32, e));
                }
            }
        }
        Ok(())
    }

    /// The next checkpoint or RESUME frame from `from`, in arrival order.
    pub fn pop_ckpt(&mut self, from: u32) -> Option<(FrameHeader, Vec<u8>)> {
        self.ckpt.get_mut(from as usize)?.pop_front()
    }

    /// Send `seq` is written.
    pub fn handle_written(&mut self, seq: u64) {
        self.written.insert(seq);
    }

    /// Send `seq` can never be written: its peer `peer` left first.
    pub fn handle_undelivered(&mut self, seq: u64, peer: u32) {
        self.undelivered.insert(seq, peer);
    }

    /// Whether send `seq` is written (`Some(Ok)`), can never be
    /// (`Some(Err)`: its peer left), or not yet (`None`). Reports once.
    pub fn poll_written(&mut self, seq: u64) -> Option<Result<(), Error>> {
        if self.written.remove(&seq) {
            return Some(Ok(()));
        }
        self.undelivered.remove(&seq).map(|p| Err(departed(p)))
    }

    /// Counts a send handle opened (`true`) or closed.
    pub fn count_send(&mut self, open: bool) {
        if open {
            self.open_sends += 1;
        } else {
            self.open_sends = self.open_sends.saturating_sub(1);
        }
    }

    /// Counts a receive handle opened (`true`) or closed.
    pub fn count_recv(&mut self, open: bool) {
        if open {
            self.open_recvs += 1;
        } else {
            self.open_recvs = self.open_recvs.saturating_sub(1);
        }
    }

    /// Open (send, receive) handles.
    pub fn open_handles(&self) -> (u64, u64) {
        (self.open_sends, self.open_recvs)
    }
}

/// The error of a wait on `peer`, which left.
pub fn departed(peer: u32) -> Error {
    Error::PeerLost {
        peer,
        cause: LossCause::Departed,
    }
}

#[cfg(test)]
mod tests;
