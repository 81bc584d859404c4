//! The I/O thread: one blocking mio event loop per rank that owns every
//! socket and rustls session (protocol text "Verbindungen", "Transport und
//! Sicherheit"; layouts §10 "Who may abort a job", "Heartbeats and
//! silence", "BYE", "Job-wide aborts").
//!
//! Set-up: the listener is bound before the thread starts; the thread dials
//! every higher rank (a new try every 100 ms until the set-up deadline) and
//! accepts from every lower rank. After the TLS 1.3 handshake the peer's
//! subject is checked (dialled rank, or for an accepted connection the rank
//! its CN names, which must be lower than ours and not yet connected); both
//! sides send HELLO at once. A connection that fails TLS, the subject check
//! or the HELLO/token check is dropped and does not count: a stranger can
//! never abort the job. At the deadline set-up fails with H1611 if a peer
//! failed authentication, else H1616.
//!
//! Running: frames from the user's thread arrive as [`Command`]s (the
//! [`mio::Waker`] wakes the loop); accepted frames leave as [`Event`]s. Any
//! failure ends the job step: ABORT to all peers (reason 7 for a rejected
//! frame, 1 for a lost peer, none after an ABORT received), close_notify,
//! close, and the error is published to the user's thread.

use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead};
use std::net::{Shutdown, SocketAddr};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};
use sperli_tls::config::{check_peer, server_name_for_host, tls_failure};
use sperli_tls::pki::{peer_identity, rank_from_cn};
use sperli_wire::abort::AbortReason;
use sperli_wire::error::{AuthError, FrameError, HCode, LossCause, TlsFailure};
use sperli_wire::header::FrameHeader;
use sperli_wire::Error;

use crate::connection::{ConnState, Connection, Incoming, JobContext, Outgoing};
use crate::job::unix_ms;
use crate::pool::BufPool;
use crate::Settings;

const WAKER: Token = Token(0);
const LISTENER: Token = Token(1);
/// How many bytes one socket may deliver before the loop moves on (and
/// comes back to it at once): a peer that streams without pause must not
/// keep this thread from its timers, or this rank stops sending heartbeats
/// to everyone else and is declared silent.
const READ_BUDGET: usize = 4 * 1024 * 1024;

/// How much data rustls may buffer before its writer takes no more: big
/// enough for few, large socket writes, small enough to stay in cache.
fn tls_buffer_limit() -> Option<usize> {
    Some(256 * 1024)
}

/// From the user's thread to the I/O thread.
#[derive(Debug)]
pub(crate) enum Command {
    /// The send fast path left bytes queued for peer `to` (the socket
    /// would block) or met a socket error: the I/O thread takes over.
    Kick { to: u32 },
    /// Abort the job: ABORT to all, close, fail with `error`.
    Abort {
        reason: AbortReason,
        code: u32,
        message: String,
        error: Error,
    },
    /// Normal end: BYE to all, close_notify, close.
    Finish,
}

/// From the I/O thread to the user's thread.
#[derive(Debug)]
pub(crate) enum Event {
    /// An accepted frame from `from`.
    Frame { from: u32, inc: Incoming },
    /// Set-up finished (every peer authenticated).
    Ready,
    /// The job step failed (the error is also in [`Shared::error`]).
    Failed,
    /// The normal end is complete.
    Finished,
}

/// State shared by both threads.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The job's error, set once.
    pub error: OnceLock<Error>,
    /// Send sequence numbers whose frames were written into TLS.
    pub done: Mutex<HashSet<u64>>,
    /// Send sequence numbers whose frames can never be written: their peer
    /// said BYE and closed first. Maps to the peer's rank.
    pub undelivered: Mutex<HashMap<u64, u32>>,
    /// Notified when `done` or `undelivered` grows or the job fails.
    pub cv: Condvar,
    /// Per rank: the authenticated peer's [`Link`] (set before
    /// [`Event::Ready`]). Weak: the I/O thread owns the sockets and closes
    /// them by dropping its references.
    pub links: Mutex<Vec<Option<Weak<Mutex<Link>>>>>,
    /// Large payload buffers for reuse (received frames, written frames).
    pub pool: Arc<BufPool>,
    /// This rank's HELLO features ANDed with every authenticated peer's:
    /// once set-up is done, the job's extensions (protocol §7.1.1).
    pub job_features: std::sync::atomic::AtomicU64,
}

impl Shared {
    /// The shared state of a rank that announces `features`.
    pub(crate) fn new(features: u64) -> Self {
        Self {
            error: OnceLock::new(),
            done: Mutex::default(),
            undelivered: Mutex::default(),
            cv: Condvar::new(),
            links: Mutex::default(),
            pool: Arc::default(),
            job_features: std::sync::atomic::AtomicU64::new(features),
        }
    }

    pub(crate) fn mark_done(&self, seqs: &mut Vec<u64>) {
        if seqs.is_empty() {
            return;
        }
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        d.extend(seqs.drain(..));
        drop(d);
        self.cv.notify_all();
    }

    /// Records sends that will never be written because `peer` left, and
    /// wakes their waiters.
    pub(crate) fn mark_undelivered(&self, seqs: Vec<u64>, peer: u32) {
        if seqs.is_empty() {
            return;
        }
        self.undelivered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(seqs.into_iter().map(|s| (s, peer)));
        // Take the lock so a waiter cannot miss the notification.
        drop(self.done.lock().unwrap_or_else(|e| e.into_inner()));
        self.cv.notify_all();
    }

    /// The peer whose departure left send `seq` undelivered, if so.
    pub(crate) fn take_undelivered(&self, seq: u64) -> Option<u32> {
        self.undelivered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&seq)
    }

    fn set_error(&self, e: Error) -> bool {
        let first = self.error.set(e).is_ok();
        // Take the lock so a waiter cannot miss the notification.
        drop(self.done.lock().unwrap_or_else(|e| e.into_inner()));
        self.cv.notify_all();
        first
    }
}

/// One socket's TLS session and outgoing protocol state. Once the peer is
/// authenticated it is shared: the I/O thread locks it to read, run timers
/// and flush; the user's thread locks it to send without waking the I/O
/// thread ([`send_now`]). Neither thread blocks while holding the lock
/// (sockets are non-blocking, channel sends are unbounded), and the I/O
/// thread never holds two links' locks, nor a link's lock in
/// [`Mesh::fail`]. Every frame of a connection goes through
/// `conn`'s queue under this lock, so frames leave in order.
pub(crate) struct Link {
    tcp: TcpStream,
    tls: rustls::Connection,
    conn: Option<Connection>,
    /// Final phase: no more frames queued; close_notify after the queue.
    closing: bool,
    close_notify_sent: bool,
    write_shut: bool,
    /// EOF or error seen: the socket can go.
    dead: bool,
    /// A socket write error met by the user's thread, for the I/O thread
    /// to report (it alone ends the job step).
    write_error: Option<io::ErrorKind>,
    /// Sequence numbers of frames handed to rustls whole by
    /// [`send_direct`]: their senders wait until rustls has written every
    /// record to the socket (so a sender cannot run ahead of the peer).
    drain_seqs: Vec<u64>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("closing", &self.closing)
            .field("dead", &self.dead)
            .finish_non_exhaustive()
    }
}

fn lock(link: &Mutex<Link>) -> MutexGuard<'_, Link> {
    link.lock().unwrap_or_else(|e| e.into_inner())
}

impl Link {
    fn new(tcp: TcpStream, tls: rustls::Connection) -> Self {
        Self {
            tcp,
            tls,
            conn: None,
            closing: false,
            close_notify_sent: false,
            write_shut: false,
            dead: false,
            write_error: None,
            drain_seqs: Vec::new(),
        }
    }

    /// Writes queued frames into TLS and TLS records to the socket until
    /// nothing is left or the socket would block (mio then reports it
    /// writable to the I/O thread: edge-triggered, whichever thread met
    /// the WouldBlock). `done(seq)` for each whole frame written.
    fn flush(&mut self, done: &mut dyn FnMut(u64)) -> io::Result<()> {
        if self.dead {
            return Ok(());
        }
        loop {
            if let Some(c) = self.conn.as_mut() {
                if !self.tls.is_handshaking() {
                    let mut w = self.tls.writer();
                    if c.write_to(&mut w, done).is_err() {
                        break;
                    }
                    if self.closing && !c.has_output() && !self.close_notify_sent {
                        self.tls.send_close_notify();
                        self.close_notify_sent = true;
                    }
                }
            }
            if !self.tls.wants_write() {
                break;
            }
            match self.tls.write_tls(&mut self.tcp) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if !self.tls.wants_write() {
            for s in self.drain_seqs.drain(..) {
                done(s);
            }
        }
        if self.close_notify_sent && !self.write_shut && !self.tls.wants_write() {
            let _ = self.tcp.shutdown(Shutdown::Write);
            self.write_shut = true;
        }
        Ok(())
    }

    /// Bytes wait: frames queued or TLS records not yet on the socket.
    fn backlog(&self) -> bool {
        self.tls.wants_write() || self.conn.as_ref().is_some_and(Connection::has_output)
    }
}

/// Why [`send_now`] did not take a frame.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The job step failed or is ending: the job's error (if any).
    Ended,
    /// The peer's connection is over (it said BYE or closed).
    PeerLeft,
}

/// What [`send_now`] did with a frame.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendNow {
    /// The frame is whole in TLS (and nothing is left for the I/O thread).
    pub written: bool,
    /// Bytes are left (socket full) or a socket error was met: wake the
    /// I/O thread with [`Command::Kick`].
    pub kick: bool,
}

/// The send fast path, on the user's thread: queues `frame` behind
/// anything queued before it (order) and writes as much as the socket
/// takes now. Other frames completed on the way go to `done`.
pub(crate) fn send_now(
    link: &Mutex<Link>,
    shared: &Shared,
    frame: Outgoing,
    done: &mut Vec<u64>,
) -> Result<SendNow, Refused> {
    let mut g = lock(link);
    let l = &mut *g;
    let c = open_connection(l, shared)?;
    let seq = frame.seq;
    c.queue_frame(frame, Instant::now());
    Ok(flush_for(l, seq, done))
}

/// The connection a user's-thread send may use, checked under the link's
/// lock: `Mesh::fail` publishes the error before it takes this lock to
/// queue ABORT, so no frame follows an ABORT; nothing goes to a closing,
/// dead or departed peer.
fn open_connection<'a>(l: &'a mut Link, shared: &Shared) -> Result<&'a mut Connection, Refused> {
    if shared.error.get().is_some() || l.closing {
        return Err(Refused::Ended);
    }
    let dead = l.dead;
    match l.conn.as_mut() {
        Some(c) if !dead && c.state() == ConnState::Open && !c.bye_sent() => Ok(c),
        _ => Err(Refused::PeerLeft),
    }
}

/// Writes what the link holds to the socket after a send of frame `seq`
/// (0: none to report) and says whether that frame is written and whether
/// the I/O thread must take over; a socket error is left for it.
fn flush_for(l: &mut Link, seq: u64, done: &mut Vec<u64>) -> SendNow {
    let mut written = false;
    let r = l.flush(&mut |s| {
        if s == seq && seq != 0 {
            written = true;
        } else {
            done.push(s);
        }
    });
    match r {
        Ok(()) => SendNow {
            written,
            kick: l.backlog(),
        },
        Err(e) => write_failed(l, &e),
    }
}

/// A socket write error met on the user's thread: left for the I/O thread
/// to report (it alone ends the job step), which the caller kicks.
fn write_failed(l: &mut Link, e: &io::Error) -> SendNow {
    l.write_error = Some(e.kind());
    SendNow {
        written: false,
        kick: true,
    }
}

/// As [`send_now`] for a frame whose payload the caller lends (a large
/// blocking `send` of a borrowed slice): when nothing is queued to the
/// peer, the frame goes straight into rustls, whose buffer limit is lifted
/// for it, and as much as the socket takes is written; no copy of the
/// payload is queued. `Ok(None)`: frames wait in the queue; the caller
/// queues a copy instead. The frame counts as written (`seq` done) once
/// rustls has put its last record on the socket: the sender waits for
/// that, so the ciphertext in rustls stays bounded by one message.
pub(crate) fn send_direct(
    link: &Mutex<Link>,
    shared: &Shared,
    header: FrameHeader,
    payload: &[u8],
    seq: u64,
    done: &mut Vec<u64>,
) -> Result<Option<SendNow>, Refused> {
    let mut g = lock(link);
    let l = &mut *g;
    open_connection(l, shared)?;
    let Link { tls, conn, .. } = &mut *l;
    let Some(c) = conn.as_mut() else {
        return Err(Refused::PeerLeft);
    };
    if c.has_output() || tls.is_handshaking() {
        return Ok(None);
    }
    tls.set_buffer_limit(None);
    let taken = c.write_direct(&mut tls.writer(), header, payload, Instant::now());
    tls.set_buffer_limit(tls_buffer_limit());
    match taken {
        Ok(true) => l.drain_seqs.push(seq),
        Ok(false) => return Ok(None),
        Err(e) => return Ok(Some(write_failed(l, &e))),
    }
    Ok(Some(flush_for(l, seq, done)))
}

struct Sock {
    link: Arc<Mutex<Link>>,
    /// For a dialled socket: the rank dialled.
    dialled: Option<u32>,
    /// TCP connection established (always true for accepted sockets).
    connected: bool,
    /// Authenticated (HELLO verified) and registered in `peers`.
    peer: Option<u32>,
}

/// The I/O thread's state.
pub(crate) struct Mesh {
    poll: Poll,
    ctx: Arc<JobContext>,
    settings: Settings,
    token: Vec<u8>,
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    listener: Option<TcpListener>,
    socks: HashMap<Token, Sock>,
    peers: Vec<Option<Token>>,
    /// Per higher rank: when to dial next (None: connected or dialling).
    redial: Vec<Option<Instant>>,
    next_token: usize,
    cmds: Receiver<Command>,
    events: Sender<Event>,
    shared: Arc<Shared>,
    setup_deadline: Instant,
    setup_done: bool,
    last_auth_error: Option<Error>,
    /// Set when the job step ends (failure or finish): the linger deadline.
    ending: Option<Instant>,
    finishing: bool,
    failed: bool,
    next_timer: Instant,
    incoming: Vec<Incoming>,
    done_seqs: Vec<u64>,
    /// Sockets that used up their read budget with bytes still waiting
    /// (edge-triggered: no new event will come for those).
    unfinished: Vec<Token>,
}

/// What went wrong on one socket.
enum SockError {
    /// Before authentication: drop the socket, keep waiting.
    Unauthenticated(Option<Error>),
    /// Authenticated peer: the job step ends.
    Fatal(Error),
}

fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()?
        .find(SocketAddr::is_ipv4)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no IPv4 address"))
}

/// Binds the rank's own listener (host:port from the job description).
pub(crate) fn bind(ctx: &JobContext) -> Result<TcpListener, Error> {
    let own = &ctx.hosts[ctx.rank as usize];
    let addr = resolve(&own.host, own.port).map_err(|e| Error::io("resolving own host", &e))?;
    TcpListener::bind(addr).map_err(|e| Error::io("binding own host:port", &e))
}

impl Mesh {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        poll: Poll,
        ctx: Arc<JobContext>,
        settings: Settings,
        token: Vec<u8>,
        server: Arc<ServerConfig>,
        client: Arc<ClientConfig>,
        mut listener: TcpListener,
        cmds: Receiver<Command>,
        events: Sender<Event>,
        shared: Arc<Shared>,
    ) -> io::Result<Self> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let now = Instant::now();
        let size = ctx.size as usize;
        let rank = ctx.rank as usize;
        let redial = (0..size)
            .map(|r| if r > rank { Some(now) } else { None })
            .collect();
        Ok(Self {
            poll,
            settings: settings.clone(),
            token,
            server,
            client,
            listener: Some(listener),
            socks: HashMap::new(),
            peers: vec![None; size],
            redial,
            next_token: 2,
            cmds,
            events,
            shared,
            setup_deadline: now + settings.setup_window,
            setup_done: false,
            last_auth_error: None,
            ending: None,
            finishing: false,
            failed: false,
            next_timer: now,
            incoming: Vec::new(),
            done_seqs: Vec::new(),
            unfinished: Vec::new(),
            ctx,
        })
    }

    /// Runs the loop until the job step ends.
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let mut last_activity = Instant::now();
        self.check_setup_done();
        loop {
            let now = Instant::now();
            if now >= self.next_timer {
                // Read what arrived before judging silence: on a loaded
                // machine this thread may not have polled for a while, and
                // bytes waiting in a socket are life (layouts §10).
                match self.poll.poll(&mut events, Some(Duration::ZERO)) {
                    Ok(()) => {
                        for ev in events.iter() {
                            self.dispatch(ev.token());
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => self.fail(Error::io("polling sockets", &e), None),
                }
                self.timers(Instant::now(), true);
            }
            if self.ended() {
                break;
            }
            let now = Instant::now();
            let mut timeout = self.next_timer.saturating_duration_since(now);
            if now.saturating_duration_since(last_activity) < self.settings.spin
                || !self.unfinished.is_empty()
            {
                timeout = Duration::ZERO; // poll without sleeping
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                self.fail(Error::io("polling sockets", &e), None);
                continue;
            }
            if !events.is_empty() {
                last_activity = Instant::now();
            }
            for ev in events.iter() {
                self.dispatch_then_heartbeats(ev.token());
            }
            for t in std::mem::take(&mut self.unfinished) {
                self.dispatch_then_heartbeats(t);
            }
        }
        // Dropping the sockets closes them.
        self.socks.clear();
        if self.failed {
            let _ = self.events.send(Event::Failed);
        } else {
            let _ = self.events.send(Event::Finished);
        }
    }

    fn ended(&mut self) -> bool {
        let Some(deadline) = self.ending else {
            return false;
        };
        self.socks.retain(|_, s| !lock(&s.link).dead);
        self.socks.is_empty() || Instant::now() >= deadline
    }

    fn token(&mut self) -> Token {
        self.next_token += 1;
        Token(self.next_token)
    }

    fn commands(&mut self) {
        let mut touched = Vec::new();
        while let Ok(c) = self.cmds.try_recv() {
            match c {
                Command::Kick { to } => {
                    if let Some(t) = self.peers.get(to as usize).copied().flatten() {
                        touched.push(t);
                    }
                }
                Command::Abort {
                    reason,
                    code,
                    message,
                    error,
                } => self.fail(error, Some((reason, code, message))),
                Command::Finish => self.finish(),
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for t in touched {
            self.flush_or_fail(t);
        }
        self.shared.mark_done(&mut self.done_seqs);
    }

    fn accept(&mut self) {
        loop {
            let Some(l) = self.listener.as_ref() else {
                return;
            };
            match l.accept() {
                Ok((mut tcp, _)) => {
                    if self.setup_done || self.ending.is_some() {
                        continue; // dropped: set-up is over
                    }
                    let _ = tcp.set_nodelay(true);
                    let Ok(mut tls) = ServerConnection::new(self.server.clone()) else {
                        continue;
                    };
                    tls.set_buffer_limit(tls_buffer_limit());
                    let t = self.token();
                    if self
                        .poll
                        .registry()
                        .register(&mut tcp, t, Interest::READABLE | Interest::WRITABLE)
                        .is_err()
                    {
                        continue;
                    }
                    let link = Link::new(tcp, rustls::Connection::Server(tls));
                    self.socks.insert(
                        t,
                        Sock {
                            link: Arc::new(Mutex::new(link)),
                            dialled: None,
                            connected: true,
                            peer: None,
                        },
                    );
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return, // e.g. EMFILE: try again on the next event
            }
        }
    }

    fn dial(&mut self, rank: u32, now: Instant) {
        let entry = &self.ctx.hosts[rank as usize];
        let retry = now + self.settings.connect_retry;
        let (Ok(addr), Ok(name)) = (
            resolve(&entry.host, entry.port),
            server_name_for_host(&entry.host),
        ) else {
            self.redial[rank as usize] = Some(retry);
            return;
        };
        let Ok(mut tls) = ClientConnection::new(self.client.clone(), name) else {
            self.redial[rank as usize] = Some(retry);
            return;
        };
        tls.set_buffer_limit(tls_buffer_limit());
        let Ok(mut tcp) = TcpStream::connect(addr) else {
            self.redial[rank as usize] = Some(retry);
            return;
        };
        let t = self.token();
        if self
            .poll
            .registry()
            .register(&mut tcp, t, Interest::READABLE | Interest::WRITABLE)
            .is_err()
        {
            self.redial[rank as usize] = Some(retry);
            return;
        }
        self.redial[rank as usize] = None;
        let link = Link::new(tcp, rustls::Connection::Client(tls));
        self.socks.insert(
            t,
            Sock {
                link: Arc::new(Mutex::new(link)),
                dialled: Some(rank),
                connected: false,
                peer: None,
            },
        );
    }

    /// Drops an unauthenticated socket; a dialled one is dialled again.
    fn drop_unauthenticated(&mut self, t: Token, error: Option<Error>) {
        if let Some(s) = self.socks.remove(&t) {
            if let Some(r) = s.dialled {
                if !self.setup_done && self.peers[r as usize].is_none() {
                    self.redial[r as usize] = Some(Instant::now() + self.settings.connect_retry);
                    self.next_timer = self
                        .next_timer
                        .min(Instant::now() + self.settings.connect_retry);
                }
            }
        }
        // Only failures to authenticate count for H1611 at the deadline.
        match error {
            Some(e @ (Error::Authentication { .. } | Error::HostRefused { .. })) => {
                self.last_auth_error = Some(e)
            }
            Some(Error::FrameRejected(FrameError::Unexpected { frame_type, .. })) => {
                self.last_auth_error = Some(Error::Authentication {
                    peer: None,
                    error: AuthError::NotHello { got: frame_type },
                })
            }
            Some(Error::FrameRejected(f)) => {
                self.last_auth_error = Some(Error::Authentication {
                    peer: None,
                    error: AuthError::BadFirstFrame(f),
                })
            }
            _ => {}
        }
    }

    fn drive(&mut self, t: Token) {
        match self.drive_inner(t) {
            Ok(()) => {}
            Err(SockError::Unauthenticated(e)) => self.drop_unauthenticated(t, e),
            Err(SockError::Fatal(e)) => self.fail(e, None),
        }
        self.shared.mark_done(&mut self.done_seqs);
    }

    /// The socket's shared state (a clone, so the lock guard does not
    /// borrow `self`).
    fn link(&self, t: Token) -> Option<Arc<Mutex<Link>>> {
        self.socks.get(&t).map(|s| s.link.clone())
    }

    fn drive_inner(&mut self, t: Token) -> Result<(), SockError> {
        let Some(s) = self.socks.get_mut(&t) else {
            return Ok(());
        };
        let link = s.link.clone();
        let mut g = lock(&link);
        let l = &mut *g;
        if l.dead {
            return Ok(());
        }
        if !s.connected {
            match l.tcp.take_error() {
                Ok(None) => {}
                _ => return Err(SockError::Unauthenticated(None)),
            }
            match l.tcp.peer_addr() {
                Ok(_) => {
                    s.connected = true;
                    let _ = l.tcp.set_nodelay(true);
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(()),
                Err(_) => return Err(SockError::Unauthenticated(None)),
            }
        }
        self.read(t, l)?;
        self.flush_locked(t, l)
    }

    /// The error for a socket failure of kind `cause` on socket `t`.
    fn sock_error(
        &mut self,
        t: Token,
        l: &mut Link,
        cause: LossCause,
        tls: Option<TlsFailure>,
    ) -> SockError {
        let Some(s) = self.socks.get_mut(&t) else {
            return SockError::Unauthenticated(None);
        };
        l.dead = true;
        match (&mut l.conn, s.peer) {
            (Some(c), Some(_)) => match c.handle_reset(cause) {
                Ok(()) => SockError::Unauthenticated(None),
                Err(_) if self.ending.is_some() || c.bye_sent() => SockError::Unauthenticated(None),
                Err(e) => SockError::Fatal(e),
            },
            _ => SockError::Unauthenticated(tls.map(|f| Error::Authentication {
                peer: s.dialled,
                error: AuthError::Tls(f),
            })),
        }
    }

    /// Reads the socket until it would block (or the read budget is spent):
    /// rustls reads TLS records from the socket itself, and the decrypted
    /// plaintext goes from rustls's buffer straight to the frame reader.
    fn read(&mut self, t: Token, l: &mut Link) -> Result<(), SockError> {
        let now = Instant::now();
        let now_ms = unix_ms(SystemTime::now());
        let mut budget = READ_BUDGET;
        loop {
            if budget == 0 {
                if !self.unfinished.contains(&t) {
                    self.unfinished.push(t);
                }
                return Ok(());
            }
            let n = match l.tls.read_tls(&mut l.tcp) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(self.sock_error(t, l, loss_cause(&e), Some(TlsFailure::Broken)));
                }
            };
            budget = budget.saturating_sub(n);
            if n > 0 {
                if let Some(c) = l.conn.as_mut() {
                    c.touch(now);
                }
            }
            let handshaking = l.tls.is_handshaking();
            if let Err(e) = l.tls.process_new_packets() {
                // Send the alert, then drop.
                let _ = l.tls.write_tls(&mut l.tcp);
                let f = tls_failure(&e);
                return Err(self.sock_error(t, l, LossCause::Reset, Some(f)));
            }
            if handshaking && !l.tls.is_handshaking() && l.conn.is_none() {
                self.handshake_done(t, l)?;
            }
            // Plaintext, fed to the frame reader straight from rustls's
            // buffer (no copy in between).
            let mut clean_eof = false;
            let Link { tls, conn, .. } = &mut *l;
            loop {
                let mut reader = tls.reader();
                match reader.fill_buf() {
                    Ok([]) => {
                        clean_eof = true;
                        break;
                    }
                    Ok(chunk) => {
                        let k = chunk.len();
                        // After a failure the bytes are only drained.
                        if !self.failed {
                            self.feed(t, conn, chunk, now, now_ms)?;
                        }
                        reader.consume(k);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        // Peer closed TCP without close_notify.
                        clean_eof = true;
                        break;
                    }
                }
            }
            // n == 0: TCP EOF, or rustls takes nothing after close_notify.
            if n == 0 || clean_eof {
                return self.closed(t, l);
            }
        }
    }

    fn feed(
        &mut self,
        t: Token,
        conn: &mut Option<Connection>,
        bytes: &[u8],
        now: Instant,
        now_ms: u64,
    ) -> Result<(), SockError> {
        let Some(c) = conn.as_mut() else {
            return Err(SockError::Unauthenticated(None));
        };
        let mut incoming = std::mem::take(&mut self.incoming);
        let r = c.handle_bytes(bytes, now, now_ms, &mut incoming);
        let authenticated = self.socks.get(&t).is_some_and(|s| s.peer.is_some());
        let peer = c.peer();
        let mut result = Ok(());
        for inc in incoming.drain(..) {
            if result.is_err() {
                continue;
            }
            match inc {
                Incoming::Authenticated { features } => {
                    if let Err(e) = self.authenticated(t, peer, features) {
                        result = Err(e);
                    }
                }
                inc => {
                    let _ = self.events.send(Event::Frame { from: peer, inc });
                }
            }
        }
        self.incoming = incoming;
        result?;
        match r {
            Ok(()) => Ok(()),
            Err(e) if !authenticated && self.socks.get(&t).is_some_and(|s| s.peer.is_none()) => {
                Err(SockError::Unauthenticated(Some(e)))
            }
            Err(e) => {
                if self.ending.is_some() && !matches!(e, Error::AbortedByPeer { .. }) {
                    return Ok(());
                }
                Err(SockError::Fatal(e))
            }
        }
    }

    fn closed(&mut self, t: Token, l: &mut Link) -> Result<(), SockError> {
        l.dead = true;
        let peer = self.socks.get(&t).and_then(|s| s.peer);
        match (&mut l.conn, peer) {
            (Some(c), Some(_)) => match c.handle_close() {
                Ok(()) => {
                    // Frames still queued to it can never be written: their
                    // senders must not wait for them.
                    let mut seqs = c.take_queued_seqs();
                    seqs.append(&mut l.drain_seqs);
                    if let Some(p) = peer {
                        self.shared.mark_undelivered(seqs, p);
                    }
                    // The peer left (BYE, then close): close our side too.
                    l.tls.send_close_notify();
                    let _ = l.tls.write_tls(&mut l.tcp);
                    let _ = l.tcp.shutdown(Shutdown::Both);
                    Ok(())
                }
                Err(_) if self.ending.is_some() || c.bye_sent() => Ok(()),
                Err(e) => Err(SockError::Fatal(e)),
            },
            _ => Err(SockError::Unauthenticated(Some(Error::Authentication {
                peer: self.socks.get(&t).and_then(|s| s.dialled),
                error: AuthError::Tls(TlsFailure::Broken),
            }))),
        }
    }

    fn handshake_done(&mut self, t: Token, l: &mut Link) -> Result<(), SockError> {
        let dialled = self.socks.get(&t).and_then(|s| s.dialled);
        let job = self.ctx.job_id;
        let rank = match dialled {
            Some(r) => r,
            None => {
                // Learn the rank from the certificate's CN.
                let cn = l
                    .tls
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(|c| peer_identity(c).ok())
                    .map(|id| id.common_name)
                    .unwrap_or_default();
                let r = rank_from_cn(&job, &cn);
                match r {
                    Some(r) if r < self.ctx.rank && self.peers[r as usize].is_none() => r,
                    _ => {
                        return Err(SockError::Unauthenticated(Some(Error::Authentication {
                            peer: r,
                            error: AuthError::Subject {
                                expected: format!(
                                    "sperli-{}-<lower rank not yet connected>",
                                    job.to_hex()
                                ),
                                got: cn,
                            },
                        })))
                    }
                }
            }
        };
        check_peer(&l.tls, &job, rank).map_err(|e| SockError::Unauthenticated(Some(e)))?;
        let now = Instant::now();
        let mut c = Connection::with_pool(
            self.ctx.clone(),
            rank,
            self.settings.silence,
            now,
            self.shared.pool.clone(),
        );
        c.queue_hello(&self.token, now).map_err(SockError::Fatal)?;
        l.conn = Some(c);
        self.next_timer = self.next_timer.min(now + Duration::from_millis(10));
        Ok(())
    }

    fn authenticated(&mut self, t: Token, rank: u32, features: u64) -> Result<(), SockError> {
        if self.peers[rank as usize].is_some() {
            return Err(SockError::Unauthenticated(None));
        }
        // Every rank sees every peer's HELLO, so every rank decides the
        // job's extensions alike (protocol §7.1.1).
        self.shared
            .job_features
            .fetch_and(features, std::sync::atomic::Ordering::Relaxed);
        if let Some(s) = self.socks.get_mut(&t) {
            s.peer = Some(rank);
            if s.dialled.is_some() {
                self.redial[rank as usize] = None;
            }
            // From now on the user's thread may send on it directly.
            let mut links = self.shared.links.lock().unwrap_or_else(|e| e.into_inner());
            if links.len() < self.ctx.size as usize {
                links.resize(self.ctx.size as usize, None);
            }
            links[rank as usize] = Some(Arc::downgrade(&s.link));
        }
        self.peers[rank as usize] = Some(t);
        self.check_setup_done();
        Ok(())
    }

    fn check_setup_done(&mut self) {
        if self.setup_done {
            return;
        }
        let own = self.ctx.rank as usize;
        if self
            .peers
            .iter()
            .enumerate()
            .all(|(r, p)| r == own || p.is_some())
        {
            self.setup_done = true;
            // Set-up is over: no more accepts; half-done sockets go.
            if let Some(mut l) = self.listener.take() {
                let _ = self.poll.registry().deregister(&mut l);
            }
            self.socks.retain(|_, s| s.peer.is_some());
            let _ = self.events.send(Event::Ready);
        }
    }

    /// Flushes socket `t`; a failure ends the job step (or drops an
    /// unauthenticated socket). Called without the socket's lock held.
    fn flush_or_fail(&mut self, t: Token) {
        if let Err(e) = self.flush(t) {
            match e {
                SockError::Unauthenticated(e) => self.drop_unauthenticated(t, e),
                SockError::Fatal(e) => self.fail(e, None),
            }
        }
    }

    fn flush(&mut self, t: Token) -> Result<(), SockError> {
        let Some(link) = self.link(t) else {
            return Ok(());
        };
        let mut g = lock(&link);
        self.flush_locked(t, &mut g)
    }

    fn flush_locked(&mut self, t: Token, l: &mut Link) -> Result<(), SockError> {
        if !self.socks.get(&t).is_some_and(|s| s.connected) || l.dead {
            return Ok(());
        }
        if let Some(kind) = l.write_error.take() {
            let e = io::Error::from(kind);
            return Err(self.sock_error(t, l, loss_cause(&e), Some(TlsFailure::Broken)));
        }
        let done = &mut self.done_seqs;
        match l.flush(&mut |seq| done.push(seq)) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.sock_error(t, l, loss_cause(&e), Some(TlsFailure::Broken))),
        }
    }

    /// [`Mesh::dispatch`], then the heartbeats that fell due meanwhile: a
    /// long batch (many handshakes at set-up, sockets with more than their
    /// read budget) must not keep heartbeats from going out. Silence is
    /// judged only at the top of the loop, after reading.
    fn dispatch_then_heartbeats(&mut self, t: Token) {
        self.dispatch(t);
        let now = Instant::now();
        if now >= self.next_timer {
            self.timers(now, false);
        }
    }

    fn dispatch(&mut self, t: Token) {
        match t {
            WAKER => self.commands(),
            LISTENER => self.accept(),
            t => self.drive(t),
        }
    }

    /// Runs the clocks: dials, the set-up deadline, heartbeats and (when
    /// `judge`) the silence limit. Without `judge` only heartbeats are sent.
    fn timers(&mut self, now: Instant, judge: bool) {
        // A heartbeat-only pass keeps the due judging pass due.
        let mut next = if judge {
            now + Duration::from_secs(3600)
        } else {
            self.next_timer
        };
        // Dials.
        if judge && !self.setup_done && self.ending.is_none() {
            for r in 0..self.redial.len() {
                if let Some(at) = self.redial[r] {
                    if now >= at && now < self.setup_deadline {
                        self.dial(r as u32, now);
                    }
                    if let Some(at) = self.redial[r] {
                        next = next.min(at);
                    }
                }
            }
            if now >= self.setup_deadline {
                let missing: Vec<u32> = (0..self.ctx.size)
                    .filter(|&r| r != self.ctx.rank && self.peers[r as usize].is_none())
                    .collect();
                let e = self.last_auth_error.take().unwrap_or(Error::SetupTimeout {
                    after_ms: self.settings.setup_window.as_millis() as u64,
                    missing,
                });
                self.fail(e, None);
            } else {
                next = next.min(self.setup_deadline);
            }
        }
        // Heartbeats and silence.
        let tokens: Vec<Token> = self.socks.keys().copied().collect();
        if judge {
            // A long batch of events (many handshakes on a loaded machine)
            // may have ended seconds after a socket was last read: what
            // its peer sent meanwhile is read now, before it is judged.
            for &t in &tokens {
                let silent = self.link(t).is_some_and(|link| {
                    let l = lock(&link);
                    !l.dead && l.conn.as_ref().is_some_and(|c| c.is_silent(now))
                });
                if silent {
                    self.drive(t);
                }
            }
        }
        for t in tokens {
            let Some(link) = self.link(t) else {
                continue;
            };
            let authenticated = self.socks.get(&t).is_some_and(|s| s.peer.is_some());
            let dialled = self.socks.get(&t).is_some_and(|s| s.dialled.is_some());
            // The lock is released before `fail`, which takes every link's.
            let outcome = {
                let mut g = lock(&link);
                let l = &mut *g;
                let Some(c) = l.conn.as_mut() else {
                    continue;
                };
                if l.dead {
                    continue;
                }
                // A peer we dialled that finished its side of the TLS
                // handshake is alive; a slow one (a loaded machine at
                // set-up) may take longer than the silence limit to read
                // our HELLO and send its own. Giving up on it would make it
                // authenticate a connection we already closed, and lose the
                // job; the set-up deadline bounds the wait instead.
                let patient = dialled
                    && !self.setup_done
                    && now < self.setup_deadline
                    && c.state() == ConnState::AwaitingHello;
                let polled = if judge && !patient {
                    c.poll(now)
                } else {
                    c.poll_heartbeat(now);
                    Ok(())
                };
                match polled {
                    Ok(()) => {
                        if let Some(d) = c.next_deadline() {
                            next = next.min(d);
                        }
                        if c.has_output() {
                            self.flush_locked(t, l)
                        } else {
                            Ok(())
                        }
                    }
                    Err(e) if authenticated && self.ending.is_none() => {
                        l.dead = true;
                        Err(SockError::Fatal(e))
                    }
                    Err(e) => {
                        if authenticated {
                            l.dead = true;
                            Ok(())
                        } else {
                            Err(SockError::Unauthenticated(Some(e)))
                        }
                    }
                }
            };
            match outcome {
                Ok(()) => {}
                Err(SockError::Unauthenticated(e)) => self.drop_unauthenticated(t, e),
                Err(SockError::Fatal(e)) => self.fail(e, None),
            }
        }
        if let Some(end) = self.ending {
            next = next.min(end);
        }
        self.next_timer = next;
    }

    /// Normal end: BYE to every open peer, then close_notify and close.
    fn finish(&mut self) {
        if self.ending.is_some() {
            return;
        }
        self.finishing = true;
        let now = Instant::now();
        self.ending = Some(now + self.settings.silence);
        let tokens: Vec<Token> = self.socks.keys().copied().collect();
        for t in tokens {
            if let Some(link) = self.link(t) {
                let mut l = lock(&link);
                l.closing = true;
                if let Some(c) = l.conn.as_mut() {
                    if c.state() == ConnState::Open {
                        c.queue_bye(now);
                    }
                }
            }
            self.flush_or_fail(t);
        }
        self.next_timer = now;
    }

    /// Ends the job step with `error`: ABORT to every authenticated peer
    /// (unless the error is an ABORT received), close_notify, close.
    /// Called without any link's lock held.
    fn fail(&mut self, error: Error, abort: Option<(AbortReason, u32, String)>) {
        if self.failed {
            return;
        }
        self.failed = true;
        // Before the error is published: once the program sees it, it may
        // exit, and the launcher reads the record when it does.
        if let Some(path) = &self.settings.error_file {
            crate::failure_record::FailureRecord::of(&error).write(path);
        }
        let abort = abort.or_else(|| match &error {
            Error::AbortedByPeer { .. } => None,
            Error::FrameRejected(_) => Some((
                AbortReason::RejectedFrame,
                HCode::H1610.number(),
                error.to_string(),
            )),
            e => Some((
                AbortReason::PeerLost,
                e.h_code().map_or(0, |c| c.number()),
                e.to_string(),
            )),
        });
        // Published before any link is locked: a send fast path that takes
        // a link's lock after this sees the error and queues nothing.
        self.shared.set_error(error);
        let now = Instant::now();
        self.ending = Some(now + self.settings.linger);
        if let Some(mut l) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut l);
        }
        self.socks.retain(|_, s| s.peer.is_some());
        let tokens: Vec<Token> = self.socks.keys().copied().collect();
        for t in tokens {
            let Some(link) = self.link(t) else {
                continue;
            };
            let mut g = lock(&link);
            let l = &mut *g;
            l.closing = true;
            if let Some(c) = l.conn.as_mut() {
                c.discard_queued();
                if let Some((reason, code, msg)) = &abort {
                    if !l.dead && !c.bye_sent() {
                        c.queue_abort(*reason, *code, msg, now);
                    }
                }
                c.close();
            }
            if let Err(SockError::Fatal(_)) = self.flush_locked(t, l) {
                l.dead = true;
            }
        }
        self.next_timer = now;
    }
}

/// The loss cause of a socket error.
fn loss_cause(e: &io::Error) -> LossCause {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => LossCause::Reset,
        kind => LossCause::Socket { kind },
    }
}

/// Makes the waker.
pub(crate) fn waker(poll: &Poll) -> io::Result<Waker> {
    Waker::new(poll.registry(), WAKER)
}

impl std::fmt::Debug for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mesh")
            .field("rank", &self.ctx.rank)
            .finish_non_exhaustive()
    }
}
