//! The user-facing handle of one rank: [`Endpoint`].

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use mio::{Poll, Waker};
use sperli_tls::config::PrivatePemDir;
use sperli_tls::pki::RankIdentity;
use sperli_wire::abort::AbortReason;
use sperli_wire::error::{ArgumentError, FrameError, LossCause, MismatchError, UsageError};
use sperli_wire::header::FrameHeader;
use sperli_wire::job_description::JobDescription;
use sperli_wire::limits::{COLLECTIVE_HEADER_LEN, FEATURE_V1_CORE, MAX_PAYLOAD, MAX_USER_TAG};
use sperli_wire::payload::Payload;
use sperli_wire::refused_hosts::RefusedHosts;
use sperli_wire::{Error, FrameType};
use zeroize::Zeroizing;

use crate::connection::{Incoming, JobContext, Outgoing};
use crate::mesh::{self, Command, Event, Link, Mesh, Refused, Shared};
use crate::pool::BufPool;
use crate::Settings;

/// Messages up to this size are sent eagerly: a blocking `send` returns
/// once the message is queued. Bigger ones wait until written into TLS.
pub const EAGER_LIMIT: usize = 64 * 1024;

/// A message to send: the caller's bytes (copied once, into a pooled
/// buffer) or a buffer the transport takes over.
enum Bytes<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl Bytes<'_> {
    fn len(&self) -> usize {
        match self {
            Bytes::Borrowed(b) => b.len(),
            Bytes::Owned(v) => v.len(),
        }
    }

    /// Called only after the length was checked.
    fn into_vec(self, pool: &BufPool) -> Vec<u8> {
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

/// Allocates and frees one 24 MiB buffer, once per rank. With glibc this
/// raises malloc's adaptive mmap threshold to 24 MiB (and its trim
/// threshold to 48 MiB), as the first free of any large block would: from
/// then on buffers up to 24 MiB (received 16 MiB frames a user drops,
/// rustls's 16 KiB records, up to 256 KiB of them per connection) come
/// from the heap and are reused from it, instead of being mapped, faulted
/// in and unmapped per message; the heap is trimmed only once 48 MiB at
/// its top are free (the cost: up to that much freed memory stays
/// resident). Without it, the first such free happens at some random later
/// point, or never when the pool keeps every large buffer. Other
/// allocators just allocate and free.
fn warm_malloc() {
    drop(std::hint::black_box(Vec::<u8>::with_capacity(24 << 20)));
}

/// What a completed receive reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The sender's rank.
    pub source: u32,
    /// The message's tag.
    pub tag: u32,
    /// The message length in bytes.
    pub len: usize,
}

#[derive(Debug)]
struct Posted {
    id: u64,
    from: u32,
    tag: Option<u32>,
}

#[derive(Debug, Default)]
struct UserState {
    /// Per source: DATA that came before a matching receive, in arrival order.
    unexpected: Vec<VecDeque<(u32, Vec<u8>)>>,
    /// Posted receives, in post order.
    posted: VecDeque<Posted>,
    /// Completed posted receives.
    completed: HashMap<u64, (u32, Vec<u8>)>,
    /// Per peer: COLLECTIVE payloads in arrival order.
    collective: Vec<VecDeque<Vec<u8>>>,
    /// Per peer: checkpoint and RESUME frames in arrival order.
    ckpt: Vec<VecDeque<(FrameHeader, Vec<u8>)>>,
    /// Per peer: said BYE.
    bye: Vec<bool>,
    open_sends: u64,
    open_recvs: u64,
    next_id: u64,
    ready: bool,
    finished: bool,
}

impl UserState {
    fn deliver(&mut self, from: u32, inc: Incoming) {
        let f = from as usize;
        match inc {
            Incoming::Data { tag, payload } => {
                let pos = self
                    .posted
                    .iter()
                    .position(|p| p.from == from && p.tag.is_none_or(|t| t == tag));
                match pos.and_then(|i| self.posted.remove(i)) {
                    Some(p) => {
                        self.completed.insert(p.id, (tag, payload));
                    }
                    None => self.unexpected[f].push_back((tag, payload)),
                }
            }
            Incoming::Collective(p) => self.collective[f].push_back(p),
            Incoming::Checkpoint(h, p) => self.ckpt[f].push_back((h, p)),
            Incoming::Bye => self.bye[f] = true,
            Incoming::Authenticated { .. } => {}
        }
    }
}

/// One rank of a running job: the user's side of the transport.
///
/// Created by [`Endpoint::start`], which sets up every connection (or fails
/// with H1611/H1616 at the set-up deadline). Not `Sync`: one thread uses it
/// (it may move between threads). Dropping it runs [`Endpoint::finish`].
///
/// Every call first checks the job's state: after a failure (a rejected
/// frame, an ABORT, a lost peer, a local [`Endpoint::abort`]) every pending
/// and future call returns that error. After a local abort the error is
/// [`Error::AbortedByPeer`] naming this rank.
pub struct Endpoint {
    ctx: Arc<JobContext>,
    cmds: Sender<Command>,
    waker: Arc<Waker>,
    events: Receiver<Event>,
    shared: Arc<Shared>,
    thread: RefCell<Option<JoinHandle<()>>>,
    st: RefCell<UserState>,
    next_seq: Cell<u64>,
    spin: std::time::Duration,
    /// Per rank: the peer's socket state for the send fast path (filled
    /// once set-up is done).
    links: Vec<Option<Weak<Mutex<Link>>>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("rank", &self.ctx.rank)
            .field("size", &self.ctx.size)
            .finish_non_exhaustive()
    }
}

fn config_error(e: sperli_tls::config::ConfigError) -> Error {
    Error::Io {
        op: "loading the rank's TLS certificate, key and CA from the job description",
        kind: match e {
            sperli_tls::config::ConfigError::Io { kind, .. } => kind,
            _ => std::io::ErrorKind::InvalidData,
        },
    }
}

fn pem_text(bytes: &[u8]) -> Result<String, Error> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::Io {
        op: "reading a PEM text of the job description",
        kind: std::io::ErrorKind::InvalidData,
    })
}

impl Endpoint {
    /// Starts rank `desc.rank` of the job with the refused-host policy of
    /// `SPERLI_REFUSED_HOSTS` (and the built-in names); see
    /// [`Endpoint::start_with_policy`].
    pub fn start(desc: &JobDescription, settings: Settings) -> Result<Self, Error> {
        let var = std::env::var(sperli_wire::env::REFUSED_HOSTS).ok();
        Self::start_with_policy(desc, settings, RefusedHosts::new(var.as_deref(), None))
    }

    /// Starts rank `desc.rank` of the job: checks RLIMIT_NOFILE, writes
    /// the three PEM texts into a private directory only while the TLS
    /// configurations are built, listens on the rank's own host:port,
    /// starts the I/O thread, and returns once every peer is connected and
    /// authenticated (or with H1611/H1616 at the set-up deadline).
    pub fn start_with_policy(
        desc: &JobDescription,
        settings: Settings,
        refused: RefusedHosts,
    ) -> Result<Self, Error> {
        desc.check_hosts(&refused)?;
        crate::fd_limit::ensure(desc.size)?;
        let ctx = Arc::new(JobContext {
            job_id: desc.job_id,
            size: desc.size,
            rank: desc.rank,
            incarnation: desc.incarnation,
            hosts: desc.hosts.clone(),
            job_public_key: desc.job_public_key.clone(),
            refused,
            features: settings.features | FEATURE_V1_CORE,
        });
        let (server, client) = {
            let identity = RankIdentity::new(
                pem_text(&desc.ca_cert_pem)?,
                pem_text(&desc.rank_cert_pem)?,
                Zeroizing::new(pem_text(&desc.rank_key_pem)?),
            );
            let dir = PrivatePemDir::create(&identity).map_err(config_error)?;
            let server = dir.server_config().map_err(config_error)?;
            let client = dir.client_config().map_err(config_error)?;
            drop(dir); // the PEM files exist only while set-up needs them
            (server, client)
        };
        let listener = mesh::bind(&ctx)?;
        let poll = Poll::new().map_err(|e| Error::io("creating the poller", &e))?;
        let waker = Arc::new(mesh::waker(&poll).map_err(|e| Error::io("creating the waker", &e))?);
        let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
        let (ev_tx, ev_rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared::new(ctx.features));
        warm_malloc();
        let spin = settings.spin;
        let m = Mesh::new(
            poll,
            ctx.clone(),
            settings,
            desc.join_token.clone(),
            server,
            client,
            listener,
            cmd_rx,
            ev_tx,
            shared.clone(),
        )
        .map_err(|e| Error::io("registering the listener", &e))?;
        let thread = std::thread::Builder::new()
            .name(format!("sperli-io-{}", ctx.rank))
            .spawn(move || m.run())
            .map_err(|e| Error::io("starting the I/O thread", &e))?;
        let size = ctx.size as usize;
        let mut ep = Self {
            ctx,
            cmds: cmd_tx,
            waker,
            events: ev_rx,
            shared,
            thread: RefCell::new(Some(thread)),
            st: RefCell::new(UserState {
                unexpected: vec![VecDeque::new(); size],
                collective: vec![VecDeque::new(); size],
                ckpt: vec![VecDeque::new(); size],
                bye: vec![false; size],
                ..UserState::default()
            }),
            next_seq: Cell::new(0),
            spin,
            links: Vec::new(),
        };
        while !ep.st.borrow().ready {
            ep.pump(true)?;
        }
        ep.links = ep
            .shared
            .links
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Ok(ep)
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.ctx.rank
    }

    /// The job size.
    pub fn size(&self) -> u32 {
        self.ctx.size
    }

    /// The HELLO feature bits every rank of the job announced, this one
    /// included (protocol §7.1.1): an extension is used only when its bit
    /// is set here. Fixed once [`Endpoint::start`] returns.
    pub fn features(&self) -> u64 {
        self.shared
            .job_features
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The job's error, if it failed.
    pub fn error(&self) -> Option<Error> {
        self.shared.error.get().cloned()
    }

    fn check(&self) -> Result<(), Error> {
        match self.shared.error.get() {
            Some(e) => Err(e.clone()),
            None if self.st.borrow().finished => Err(UsageError::AfterFinish.into()),
            None => Ok(()),
        }
    }

    /// Takes events from the I/O thread; with `block`, waits for one first.
    fn pump(&self, block: bool) -> Result<(), Error> {
        let mut first = block;
        loop {
            let ev = if first {
                first = false;
                match self.wait_event() {
                    Ok(ev) => ev,
                    Err(_) => return Err(self.gone()),
                }
            } else {
                match self.events.try_recv() {
                    Ok(ev) => ev,
                    Err(crossbeam_channel::TryRecvError::Empty) => return self.check(),
                    Err(_) => return Err(self.gone()),
                }
            };
            let mut st = self.st.borrow_mut();
            match ev {
                Event::Frame { from, inc } => st.deliver(from, inc),
                Event::Ready => st.ready = true,
                Event::Failed => return Err(self.gone()),
                Event::Finished => st.finished = true,
            }
        }
    }

    /// The next event: polls for up to `spin`, then sleeps.
    fn wait_event(&self) -> Result<Event, crossbeam_channel::RecvError> {
        if !self.spin.is_zero() {
            let start = std::time::Instant::now();
            loop {
                match self.events.try_recv() {
                    Ok(ev) => return Ok(ev),
                    Err(crossbeam_channel::TryRecvError::Disconnected) => {
                        return Err(crossbeam_channel::RecvError)
                    }
                    Err(crossbeam_channel::TryRecvError::Empty) => {}
                }
                if start.elapsed() >= self.spin {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        self.events.recv()
    }

    /// The error once the I/O thread is gone.
    fn gone(&self) -> Error {
        self.shared.error.get().cloned().unwrap_or(Error::Io {
            op: "talking to the I/O thread (it ended)",
            kind: std::io::ErrorKind::BrokenPipe,
        })
    }

    fn peer_left(peer: u32) -> Error {
        Error::PeerLost {
            peer,
            cause: LossCause::Departed,
        }
    }

    fn check_rank(&self, r: u32) -> Result<(), Error> {
        if r >= self.ctx.size {
            return Err(ArgumentError::Rank {
                rank: r,
                size: self.ctx.size,
            }
            .into());
        }
        Ok(())
    }

    fn seq(&self) -> u64 {
        let s = self.next_seq.get() + 1;
        self.next_seq.set(s);
        s
    }

    /// Sends a frame on the user's thread (the send fast path,
    /// [`mesh::send_now`]): no I/O-thread wake-up unless the socket would
    /// block or failed. True when the frame is whole in TLS.
    fn push(&self, to: u32, frame: Outgoing) -> Result<bool, Error> {
        let link = self.link_to(to)?;
        let mut done = Vec::new();
        let r = mesh::send_now(&link, &self.shared, frame, &mut done);
        drop(link);
        self.shared.mark_done(&mut done);
        self.after_send(to, r)
    }

    /// Starts a frame of `header` and `payload` to peer `to` (not this
    /// rank). A large borrowed payload whose sender will wait for it
    /// (`seq` != 0) goes straight into TLS when nothing is queued to `to`
    /// ahead of it ([`mesh::send_direct`]: no copy); otherwise the payload
    /// (a pooled copy of a borrowed one) is queued ([`Endpoint::push`]).
    /// True when the frame is written.
    fn push_bytes(
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
                let r = mesh::send_direct(&link, &self.shared, header, b, seq, &mut done);
                drop(link);
                self.shared.mark_done(&mut done);
                match r {
                    Ok(None) => {} // frames queued ahead: queue a copy
                    Ok(Some(sent)) => return self.after_send(to, Ok(sent)),
                    Err(refused) => return self.after_send(to, Err(refused)),
                }
            }
        }
        let payload = payload.into_vec(&self.shared.pool);
        self.push(to, Outgoing::new(header, payload, seq))
    }

    /// The link to `to`, or the error when the peer said BYE or the job
    /// step is over.
    fn link_to(&self, to: u32) -> Result<Arc<Mutex<mesh::Link>>, Error> {
        if self.st.borrow().bye[to as usize] {
            return Err(Self::peer_left(to));
        }
        let link = self
            .links
            .get(to as usize)
            .and_then(|l| l.as_ref()?.upgrade());
        match link {
            Some(link) => Ok(link),
            None => {
                // The I/O thread dropped the socket: the job step is over.
                self.check()?;
                Err(self.gone())
            }
        }
    }

    /// What a send fast path's outcome means for the caller: kicks the I/O
    /// thread when bytes are left; `Ok(true)` when the frame is written.
    fn after_send(&self, to: u32, r: Result<mesh::SendNow, mesh::Refused>) -> Result<bool, Error> {
        match r {
            Ok(sent) => {
                if sent.kick {
                    self.cmds
                        .send(Command::Kick { to })
                        .map_err(|_| self.gone())?;
                    self.waker
                        .wake()
                        .map_err(|e| Error::io("waking the I/O thread", &e))?;
                }
                Ok(sent.written)
            }
            Err(Refused::Ended) => {
                self.check()?;
                Err(self.gone())
            }
            Err(Refused::PeerLeft) => {
                self.check()?;
                Err(Self::peer_left(to))
            }
        }
    }

    fn wait_written(&self, seq: u64) -> Result<(), Error> {
        let mut done = self.shared.done.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(e) = self.shared.error.get() {
                return Err(e.clone());
            }
            if done.remove(&seq) {
                return Ok(());
            }
            if let Some(peer) = self.shared.take_undelivered(seq) {
                return Err(Self::peer_left(peer));
            }
            done = self.shared.cv.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn test_written(&self, seq: u64) -> Result<bool, Error> {
        self.check()?;
        if self
            .shared
            .done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&seq)
        {
            return Ok(true);
        }
        match self.shared.take_undelivered(seq) {
            Some(peer) => Err(Self::peer_left(peer)),
            None => Ok(false),
        }
    }

    /// Starts a DATA send; `seq` 0: nobody waits for it. True when the
    /// message is complete (queued locally, or whole in TLS). A borrowed
    /// message is copied once, into a pooled buffer, after the checks.
    fn start_send(&self, to: u32, tag: u32, data: Bytes<'_>, seq: u64) -> Result<bool, Error> {
        self.check()?;
        self.check_rank(to)?;
        if tag > MAX_USER_TAG {
            return Err(ArgumentError::Tag { tag }.into());
        }
        if data.len() > MAX_PAYLOAD as usize {
            return Err(ArgumentError::TooLong {
                len: data.len(),
                max: MAX_PAYLOAD as usize,
            }
            .into());
        }
        if to == self.ctx.rank {
            let payload = data.into_vec(&self.shared.pool);
            self.st
                .borrow_mut()
                .deliver(to, Incoming::Data { tag, payload });
            return Ok(true);
        }
        let h = self.ctx.header(FrameType::Data, to).with_tag(tag);
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
    /// (`ArgumentError::Tag`, `ArgumentError::Rank`); neither ends the job). A send to a peer
    /// that already said BYE fails with H1613 (`LossCause::Departed`)
    /// without ending the job; so does a receive from it
    /// that nothing queued can satisfy. At most 16777216
    /// bytes (see [`Endpoint::send_large`]); empty messages are valid; a
    /// send to this rank itself is queued locally. Up to 64 KiB it returns
    /// once the message is queued; bigger messages wait until written:
    /// when nothing is queued to `to` ahead of it, the slice goes straight
    /// into TLS (no copy) and the call returns once its last record is on
    /// the socket, so a sender never runs more than one message ahead of a
    /// slow receiver.
    pub fn send(&self, to: u32, tag: u32, data: &[u8]) -> Result<(), Error> {
        self.send_bytes(to, tag, Bytes::Borrowed(data))
    }

    /// As [`Endpoint::send`] with a message the transport takes over (no
    /// copy); e.g. a buffer from [`Endpoint::take_buffer`].
    pub fn send_vec(&self, to: u32, tag: u32, data: Vec<u8>) -> Result<(), Error> {
        self.send_bytes(to, tag, Bytes::Owned(data))
    }

    fn send_bytes(&self, to: u32, tag: u32, data: Bytes<'_>) -> Result<(), Error> {
        if data.len() <= EAGER_LIMIT {
            self.start_send(to, tag, data, 0).map(|_| ())
        } else {
            let seq = self.seq();
            if !self.start_send(to, tag, data, seq)? {
                self.wait_written(seq)?;
            }
            Ok(())
        }
    }

    /// Starts a send; the handle completes when the frame is written into TLS.
    pub fn isend(&self, to: u32, tag: u32, data: &[u8]) -> Result<SendHandle<'_>, Error> {
        let seq = self.seq();
        let local = self.start_send(to, tag, Bytes::Borrowed(data), seq)?;
        self.st.borrow_mut().open_sends += 1;
        Ok(SendHandle {
            ep: self,
            seq,
            done: local,
            closed: false,
        })
    }

    fn post(&self, from: u32, tag: Option<u32>) -> Result<u64, Error> {
        self.check()?;
        self.check_rank(from)?;
        if let Some(t) = tag {
            if t > MAX_USER_TAG {
                return Err(ArgumentError::Tag { tag: t }.into());
            }
        }
        let mut st = self.st.borrow_mut();
        st.next_id += 1;
        let id = st.next_id;
        let q = &mut st.unexpected[from as usize];
        let pos = q
            .iter()
            .position(|(t, _)| tag.is_none_or(|want| want == *t));
        match pos.and_then(|i| q.remove(i)) {
            Some(m) => {
                st.completed.insert(id, m);
            }
            None => st.posted.push_back(Posted { id, from, tag }),
        }
        Ok(id)
    }

    fn wait_recv(&self, id: u64, from: u32) -> Result<(Status, Vec<u8>), Error> {
        loop {
            self.check()?;
            {
                let mut st = self.st.borrow_mut();
                if let Some((tag, m)) = st.completed.remove(&id) {
                    let status = Status {
                        source: from,
                        tag,
                        len: m.len(),
                    };
                    return Ok((status, m));
                }
                if st.bye[from as usize] {
                    st.posted.retain(|p| p.id != id);
                    return Err(Self::peer_left(from));
                }
            }
            self.pump(true)?;
        }
    }

    fn test_recv(&self, id: u64, from: u32) -> Result<Option<(Status, Vec<u8>)>, Error> {
        self.pump(false)?;
        let mut st = self.st.borrow_mut();
        if let Some((tag, m)) = st.completed.remove(&id) {
            let status = Status {
                source: from,
                tag,
                len: m.len(),
            };
            return Ok(Some((status, m)));
        }
        if st.bye[from as usize] {
            st.posted.retain(|p| p.id != id);
            return Err(Self::peer_left(from));
        }
        Ok(None)
    }

    /// Receives the next message from `from` with `tag` (arrival order).
    pub fn recv(&self, from: u32, tag: u32) -> Result<Vec<u8>, Error> {
        let id = self.post(from, Some(tag))?;
        self.wait_recv(id, from).map(|(_, m)| m)
    }

    /// Receives the next message from `from` with any tag.
    pub fn recv_any_tag(&self, from: u32) -> Result<(Status, Vec<u8>), Error> {
        let id = self.post(from, None)?;
        self.wait_recv(id, from)
    }

    /// Posts a receive from `from` with `tag` (or any tag with `None`).
    /// Posted receives match in post order.
    pub fn irecv(&self, from: u32, tag: Option<u32>) -> Result<RecvHandle<'_>, Error> {
        let id = self.post(from, tag)?;
        self.st.borrow_mut().open_recvs += 1;
        Ok(RecvHandle {
            ep: self,
            id,
            from,
            closed: false,
        })
    }

    /// Open send and receive handles `(sends, recvs)`: created and not yet
    /// completed by `wait`/`test` or dropped (H1624 needs them).
    pub fn open_handles(&self) -> (u64, u64) {
        let st = self.st.borrow();
        (st.open_sends, st.open_recvs)
    }

    /// Sends a message of any length as several DATA frames (the
    /// convention is in the crate docs).
    pub fn send_large(&self, to: u32, tag: u32, data: &[u8]) -> Result<(), Error> {
        let max = MAX_PAYLOAD as usize;
        let first_len = data.len().min(max - 8);
        let mut first = self.take_buffer(8 + first_len);
        first.extend_from_slice(&(data.len() as u64).to_le_bytes());
        first.extend_from_slice(&data[..first_len]);
        self.send_vec(to, tag, first)?;
        for chunk in data[first_len..].chunks(max) {
            self.send(to, tag, chunk)?;
        }
        Ok(())
    }

    /// Receives a message sent with [`Endpoint::send_large`].
    pub fn recv_large(&self, from: u32, tag: u32) -> Result<Vec<u8>, Error> {
        let first = self.recv(from, tag)?;
        let bad = || -> Error {
            FrameError::Payload {
                frame_type: FrameType::Data,
                error: sperli_wire::error::DecodeError::Truncated {
                    field: "send_large length prefix",
                    needed: 8,
                    left: 0,
                },
            }
            .into()
        };
        let (len, rest) = first.split_first_chunk::<8>().ok_or_else(bad)?;
        let total = u64::from_le_bytes(*len) as usize;
        if rest.len() > total {
            return Err(bad());
        }
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(rest);
        self.recycle(first);
        while out.len() < total {
            let m = self.recv(from, tag)?;
            if out.len() + m.len() > total || m.is_empty() {
                return Err(bad());
            }
            out.extend_from_slice(&m);
            self.recycle(m);
        }
        Ok(out)
    }

    /// Sends a COLLECTIVE frame to `to`; `payload` is the 16-byte collective
    /// header followed by the data, encoded by the caller (at most 16777216
    /// bytes in all). To this rank itself it is queued locally.
    pub fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        self.send_collective_bytes(to, Bytes::Borrowed(payload))
    }

    /// As [`Endpoint::send_collective`] with a payload the transport takes
    /// over (no copy); e.g. a buffer from [`Endpoint::take_buffer`].
    pub fn send_collective_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        self.send_collective_bytes(to, Bytes::Owned(payload))
    }

    fn send_collective_bytes(&self, to: u32, payload: Bytes<'_>) -> Result<(), Error> {
        match self.start_collective(to, payload)? {
            Some(seq) => self.wait_written(seq),
            None => Ok(()),
        }
    }

    /// Checks and starts one COLLECTIVE frame to `to`; `Some(seq)` when the
    /// caller must still wait for it to be written (a large payload).
    fn start_collective(&self, to: u32, payload: Bytes<'_>) -> Result<Option<u64>, Error> {
        self.check()?;
        self.check_rank(to)?;
        if payload.len() < COLLECTIVE_HEADER_LEN {
            return Err(Error::CollectiveMismatch(MismatchError::Length {
                from: self.ctx.rank,
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
        if to == self.ctx.rank {
            let payload = payload.into_vec(&self.shared.pool);
            self.st
                .borrow_mut()
                .deliver(to, Incoming::Collective(payload));
            return Ok(None);
        }
        let big = payload.len() > EAGER_LIMIT;
        let h = self.ctx.header(FrameType::Collective, to);
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
        let mut pending = Vec::new();
        for &r in to {
            if let Some(seq) = self.start_collective(r, Bytes::Borrowed(payload))? {
                pending.push(seq);
            }
        }
        for seq in pending {
            self.wait_written(seq)?;
        }
        Ok(())
    }

    /// The next COLLECTIVE payload from `from`, in arrival order (DATA that
    /// arrives meanwhile is kept for `recv`, and vice versa).
    pub fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
        self.check_rank(from)?;
        loop {
            self.check()?;
            {
                let mut st = self.st.borrow_mut();
                if let Some(p) = st.collective[from as usize].pop_front() {
                    return Ok(p);
                }
                if st.bye[from as usize] {
                    return Err(Self::peer_left(from));
                }
            }
            self.pump(true)?;
        }
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
        let h = self.ctx.header(t, to).with_epoch(header_epoch);
        if to == self.ctx.rank {
            let mut h = h;
            h.length = bytes.len() as u32;
            self.st
                .borrow_mut()
                .deliver(to, Incoming::Checkpoint(h, bytes));
            return Ok(());
        }
        self.push(to, Outgoing::new(h, bytes, 0)).map(|_| ())
    }

    /// The next checkpoint or RESUME frame from `from` (header and payload
    /// bytes, which decode with `Payload::decode(header.frame_type, ..)`),
    /// in arrival order.
    pub fn recv_ckpt(&self, from: u32) -> Result<(FrameHeader, Vec<u8>), Error> {
        self.check_rank(from)?;
        loop {
            self.check()?;
            {
                let mut st = self.st.borrow_mut();
                if let Some(p) = st.ckpt[from as usize].pop_front() {
                    return Ok(p);
                }
                if st.bye[from as usize] {
                    return Err(Self::peer_left(from));
                }
            }
            self.pump(true)?;
        }
    }

    /// Aborts the job: ABORT with `reason`, `code` (an H number or 0) and
    /// `message` to all peers, close everything. Returns once the I/O
    /// thread has flushed and closed (bounded by the linger setting). Every
    /// later call fails with [`Error::AbortedByPeer`] naming this rank.
    pub fn abort(&self, reason: AbortReason, code: u32, message: &str) {
        let error = Error::AbortedByPeer {
            from: self.ctx.rank,
            reason: reason.code(),
            code,
            message: message.to_owned(),
        };
        if self
            .cmds
            .send(Command::Abort {
                reason,
                code,
                message: message.to_owned(),
                error,
            })
            .is_ok()
        {
            let _ = self.waker.wake();
        }
        let t = self.thread.borrow_mut().take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }

    /// Normal end: BYE to every peer, then close_notify and close. Returns
    /// once every connection is closed; fails with the job's error if the
    /// job failed.
    pub fn finish(self) -> Result<(), Error> {
        self.finish_inner()
    }

    fn finish_inner(&self) -> Result<(), Error> {
        let t = self.thread.borrow_mut().take();
        let Some(t) = t else {
            return self.check_after_end();
        };
        if self.cmds.send(Command::Finish).is_ok() {
            let _ = self.waker.wake();
        }
        let _ = t.join();
        self.check_after_end()
    }

    fn check_after_end(&self) -> Result<(), Error> {
        match self.shared.error.get() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.finish_inner();
    }
}

/// A started send ([`Endpoint::isend`]).
#[derive(Debug)]
pub struct SendHandle<'a> {
    ep: &'a Endpoint,
    seq: u64,
    done: bool,
    closed: bool,
}

impl SendHandle<'_> {
    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.ep.st.borrow_mut().open_sends -= 1;
        }
    }

    /// True once the message is written into TLS (the handle is then closed).
    pub fn test(&mut self) -> Result<bool, Error> {
        if !self.done {
            self.done = self.ep.test_written(self.seq)?;
        }
        if self.done {
            self.close();
        }
        Ok(self.done)
    }

    /// Waits until the message is written into TLS.
    pub fn wait(mut self) -> Result<(), Error> {
        if !self.done {
            self.ep.wait_written(self.seq)?;
            self.done = true;
        }
        self.close();
        Ok(())
    }
}

impl Drop for SendHandle<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

/// A posted receive ([`Endpoint::irecv`]).
#[derive(Debug)]
pub struct RecvHandle<'a> {
    ep: &'a Endpoint,
    id: u64,
    from: u32,
    closed: bool,
}

impl RecvHandle<'_> {
    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            let mut st = self.ep.st.borrow_mut();
            st.open_recvs -= 1;
            let id = self.id;
            st.posted.retain(|p| p.id != id);
        }
    }

    /// The message, if it has come (the handle is then closed).
    pub fn test(&mut self) -> Result<Option<(Status, Vec<u8>)>, Error> {
        if self.closed {
            return Ok(None);
        }
        let r = self.ep.test_recv(self.id, self.from)?;
        if r.is_some() {
            self.close();
        }
        Ok(r)
    }

    /// Waits for the message.
    pub fn wait(mut self) -> Result<(Status, Vec<u8>), Error> {
        let r = self.ep.wait_recv(self.id, self.from);
        self.close();
        r
    }
}

impl Drop for RecvHandle<'_> {
    fn drop(&mut self) {
        // A dropped, unfinished receive is cancelled; a message it matched
        // but nobody took is lost with it.
        if !self.closed {
            self.ep.st.borrow_mut().completed.remove(&self.id);
        }
        self.close();
    }
}
