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
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};
use sperli_tls::config::{check_peer, server_name_for_host, tls_failure};
use sperli_tls::pki::peer_identity;
use sperli_wire::abort::AbortReason;
use sperli_wire::error::{AuthError, DecodeError, FrameError, LossCause, TlsFailure};
use sperli_wire::Error;

use crate::connection::{ConnState, Connection, Incoming, JobContext, Outgoing};
use crate::job::unix_ms;
use crate::Settings;

const WAKER: Token = Token(0);
const LISTENER: Token = Token(1);
const READ_BUF: usize = 256 * 1024;

/// How much data rustls may buffer before its writer takes no more: big
/// enough for few, large socket writes, small enough to stay in cache.
fn tls_buffer_limit() -> Option<usize> {
    Some(256 * 1024)
}

/// From the user's thread to the I/O thread.
#[derive(Debug)]
pub(crate) enum Command {
    /// Queue a frame to a peer.
    Frame { to: u32, frame: Outgoing },
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
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// The job's error, set once.
    pub error: OnceLock<Error>,
    /// Send sequence numbers whose frames were written into TLS.
    pub done: Mutex<HashSet<u64>>,
    /// Notified when `done` grows or the job fails.
    pub cv: Condvar,
}

impl Shared {
    fn mark_done(&self, seqs: &mut Vec<u64>) {
        if seqs.is_empty() {
            return;
        }
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        d.extend(seqs.drain(..));
        drop(d);
        self.cv.notify_all();
    }

    fn set_error(&self, e: Error) -> bool {
        let first = self.error.set(e).is_ok();
        // Take the lock so a waiter cannot miss the notification.
        drop(self.done.lock().unwrap_or_else(|e| e.into_inner()));
        self.cv.notify_all();
        first
    }
}

struct Sock {
    tcp: TcpStream,
    tls: rustls::Connection,
    /// For a dialled socket: the rank dialled.
    dialled: Option<u32>,
    /// TCP connection established (always true for accepted sockets).
    connected: bool,
    conn: Option<Connection>,
    /// Authenticated (HELLO verified) and registered in `peers`.
    peer: Option<u32>,
    /// Final phase: no more frames queued; close_notify after the queue.
    closing: bool,
    close_notify_sent: bool,
    write_shut: bool,
    /// EOF or error seen: the socket can go.
    dead: bool,
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
    buf: Vec<u8>,
    incoming: Vec<Incoming>,
    done_seqs: Vec<u64>,
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
            buf: vec![0; READ_BUF],
            incoming: Vec::new(),
            done_seqs: Vec::new(),
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
                self.timers(now);
            }
            if self.ended() {
                break;
            }
            let now = Instant::now();
            let mut timeout = self.next_timer.saturating_duration_since(now);
            if now.saturating_duration_since(last_activity) < self.settings.spin {
                timeout = Duration::ZERO; // poll without sleeping for a moment
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
                match ev.token() {
                    WAKER => self.commands(),
                    LISTENER => self.accept(),
                    t => self.drive(t),
                }
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
        self.socks.retain(|_, s| !s.dead);
        self.socks.is_empty() || Instant::now() >= deadline
    }

    fn token(&mut self) -> Token {
        self.next_token += 1;
        Token(self.next_token)
    }

    fn commands(&mut self) {
        let now = Instant::now();
        let mut touched = Vec::new();
        while let Ok(c) = self.cmds.try_recv() {
            match c {
                Command::Frame { to, frame } => {
                    let seq = frame.seq;
                    let sock = self
                        .peers
                        .get(to as usize)
                        .copied()
                        .flatten()
                        .and_then(|t| {
                            let s = self.socks.get_mut(&t)?;
                            (!s.closing && s.conn.is_some()).then_some((t, s))
                        });
                    match sock {
                        Some((t, s)) => {
                            if let Some(c) = s.conn.as_mut() {
                                c.queue_frame(frame, now);
                            }
                            touched.push(t);
                        }
                        None if seq != 0 => self.done_seqs.push(seq),
                        None => {}
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
                    self.socks.insert(
                        t,
                        Sock {
                            tcp,
                            tls: rustls::Connection::Server(tls),
                            dialled: None,
                            connected: true,
                            conn: None,
                            peer: None,
                            closing: false,
                            close_notify_sent: false,
                            write_shut: false,
                            dead: false,
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
        self.socks.insert(
            t,
            Sock {
                tcp,
                tls: rustls::Connection::Client(tls),
                dialled: Some(rank),
                connected: false,
                conn: None,
                peer: None,
                closing: false,
                close_notify_sent: false,
                write_shut: false,
                dead: false,
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
            Some(Error::FrameRejected(f)) => {
                self.last_auth_error = Some(Error::Authentication {
                    peer: None,
                    error: AuthError::Hello(DecodeError::Mismatch {
                        field: "first frame (a valid HELLO)",
                        expected: 1,
                        got: match f {
                            FrameError::Unexpected { frame_type, .. } => {
                                u64::from(frame_type.code())
                            }
                            _ => 0,
                        },
                    }),
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

    fn drive_inner(&mut self, t: Token) -> Result<(), SockError> {
        let Some(s) = self.socks.get_mut(&t) else {
            return Ok(());
        };
        if s.dead {
            return Ok(());
        }
        if !s.connected {
            match s.tcp.take_error() {
                Ok(None) => {}
                _ => return Err(SockError::Unauthenticated(None)),
            }
            match s.tcp.peer_addr() {
                Ok(_) => {
                    s.connected = true;
                    let _ = s.tcp.set_nodelay(true);
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(()),
                Err(_) => return Err(SockError::Unauthenticated(None)),
            }
        }
        self.read(t)?;
        self.flush(t)
    }

    /// The error for a socket failure of kind `cause` on socket `t`.
    fn sock_error(&mut self, t: Token, cause: LossCause, tls: Option<TlsFailure>) -> SockError {
        let Some(s) = self.socks.get_mut(&t) else {
            return SockError::Unauthenticated(None);
        };
        s.dead = true;
        match (&mut s.conn, s.peer) {
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

    fn read(&mut self, t: Token) -> Result<(), SockError> {
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.read_with(t, &mut buf);
        self.buf = buf;
        r
    }

    fn read_with(&mut self, t: Token, buf: &mut [u8]) -> Result<(), SockError> {
        let now = Instant::now();
        let now_ms = unix_ms(SystemTime::now());
        loop {
            let s = self.socks.get_mut(&t).expect("socket exists");
            let n = match s.tls.read_tls(&mut s.tcp) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let cause = match e.kind() {
                        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => {
                            LossCause::Reset
                        }
                        kind => LossCause::Socket { kind },
                    };
                    return Err(self.sock_error(t, cause, Some(TlsFailure::Broken)));
                }
            };
            if n > 0 {
                if let Some(c) = s.conn.as_mut() {
                    c.touch(now);
                }
            }
            let handshaking = s.tls.is_handshaking();
            if let Err(e) = s.tls.process_new_packets() {
                // Send the alert, then drop.
                let _ = s.tls.write_tls(&mut s.tcp);
                let f = tls_failure(&e);
                return Err(self.sock_error(t, LossCause::Reset, Some(f)));
            }
            if handshaking && !s.tls.is_handshaking() && s.conn.is_none() {
                self.handshake_done(t)?;
            }
            // Plaintext.
            let mut clean_eof = false;
            loop {
                let s = self.socks.get_mut(&t).expect("socket exists");
                match s.tls.reader().read(buf) {
                    Ok(0) => {
                        clean_eof = true;
                        break;
                    }
                    Ok(k) => {
                        if self.failed {
                            continue; // draining after a failure
                        }
                        self.feed(t, &buf[..k], now, now_ms)?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        // Peer closed TCP without close_notify.
                        clean_eof = true;
                        break;
                    }
                }
            }
            if n == 0 || clean_eof {
                return self.closed(t);
            }
        }
    }

    fn feed(&mut self, t: Token, bytes: &[u8], now: Instant, now_ms: u64) -> Result<(), SockError> {
        let s = self.socks.get_mut(&t).expect("socket exists");
        let Some(c) = s.conn.as_mut() else {
            return Err(SockError::Unauthenticated(None));
        };
        let mut incoming = std::mem::take(&mut self.incoming);
        let r = c.handle_bytes(bytes, now, now_ms, &mut incoming);
        let authenticated = s.peer.is_some();
        let peer = c.peer();
        let mut result = Ok(());
        for inc in incoming.drain(..) {
            if result.is_err() {
                continue;
            }
            match inc {
                Incoming::Authenticated => {
                    if let Err(e) = self.authenticated(t, peer) {
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

    fn closed(&mut self, t: Token) -> Result<(), SockError> {
        let s = self.socks.get_mut(&t).expect("socket exists");
        s.dead = true;
        match (&mut s.conn, s.peer) {
            (Some(c), Some(_)) => match c.handle_close() {
                Ok(()) => {
                    // The peer left (BYE, then close): close our side too.
                    s.tls.send_close_notify();
                    let _ = s.tls.write_tls(&mut s.tcp);
                    let _ = s.tcp.shutdown(Shutdown::Both);
                    Ok(())
                }
                Err(_) if self.ending.is_some() || c.bye_sent() => Ok(()),
                Err(e) => Err(SockError::Fatal(e)),
            },
            _ => Err(SockError::Unauthenticated(Some(Error::Authentication {
                peer: s.dialled,
                error: AuthError::Tls(TlsFailure::Broken),
            }))),
        }
    }

    fn handshake_done(&mut self, t: Token) -> Result<(), SockError> {
        let s = self.socks.get_mut(&t).expect("socket exists");
        let job = self.ctx.job_id;
        let rank = match s.dialled {
            Some(r) => r,
            None => {
                // Learn the rank from the certificate's CN.
                let cn = s
                    .tls
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(|c| peer_identity(c).ok())
                    .map(|id| id.common_name)
                    .unwrap_or_default();
                let prefix = format!("sperli-{}-", job.to_hex());
                let r = cn
                    .strip_prefix(&prefix)
                    .and_then(|n| n.parse::<u32>().ok())
                    .filter(|n| n.to_string() == cn[prefix.len()..]);
                match r {
                    Some(r) if r < self.ctx.rank && self.peers[r as usize].is_none() => r,
                    _ => {
                        return Err(SockError::Unauthenticated(Some(Error::Authentication {
                            peer: r,
                            error: AuthError::Subject {
                                expected: format!("{prefix}<lower rank not yet connected>"),
                                got: cn,
                            },
                        })))
                    }
                }
            }
        };
        check_peer(&s.tls, &job, rank).map_err(|e| SockError::Unauthenticated(Some(e)))?;
        let now = Instant::now();
        let mut c = Connection::new(self.ctx.clone(), rank, self.settings.silence, now);
        c.queue_hello(&self.token, now).map_err(SockError::Fatal)?;
        s.conn = Some(c);
        self.next_timer = self.next_timer.min(now + Duration::from_millis(10));
        Ok(())
    }

    fn authenticated(&mut self, t: Token, rank: u32) -> Result<(), SockError> {
        if self.peers[rank as usize].is_some() {
            return Err(SockError::Unauthenticated(None));
        }
        if let Some(s) = self.socks.get_mut(&t) {
            s.peer = Some(rank);
            if s.dialled.is_some() {
                self.redial[rank as usize] = None;
            }
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

    fn flush_or_fail(&mut self, t: Token) {
        if let Err(e) = self.flush(t) {
            match e {
                SockError::Unauthenticated(e) => self.drop_unauthenticated(t, e),
                SockError::Fatal(e) => self.fail(e, None),
            }
        }
    }

    fn flush(&mut self, t: Token) -> Result<(), SockError> {
        let Some(s) = self.socks.get_mut(&t) else {
            return Ok(());
        };
        if !s.connected || s.dead {
            return Ok(());
        }
        let done = &mut self.done_seqs;
        loop {
            if let Some(c) = s.conn.as_mut() {
                if !s.tls.is_handshaking() {
                    let mut w = s.tls.writer();
                    if c.write_to(&mut w, &mut |seq| done.push(seq)).is_err() {
                        break;
                    }
                    if s.closing && !c.has_output() && !s.close_notify_sent {
                        s.tls.send_close_notify();
                        s.close_notify_sent = true;
                    }
                }
            }
            if !s.tls.wants_write() {
                break;
            }
            match s.tls.write_tls(&mut s.tcp) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let cause = match e.kind() {
                        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => {
                            LossCause::Reset
                        }
                        kind => LossCause::Socket { kind },
                    };
                    return Err(self.sock_error(t, cause, Some(TlsFailure::Broken)));
                }
            }
        }
        if s.close_notify_sent && !s.write_shut && !s.tls.wants_write() {
            let _ = s.tcp.shutdown(Shutdown::Write);
            s.write_shut = true;
        }
        Ok(())
    }

    fn timers(&mut self, now: Instant) {
        let mut next = now + Duration::from_secs(3600);
        // Dials.
        if !self.setup_done && self.ending.is_none() {
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
        for t in tokens {
            let Some(s) = self.socks.get_mut(&t) else {
                continue;
            };
            let Some(c) = s.conn.as_mut() else {
                continue;
            };
            if s.dead {
                continue;
            }
            match c.poll(now) {
                Ok(()) => {
                    if let Some(d) = c.next_deadline() {
                        next = next.min(d);
                    }
                    if c.has_output() {
                        self.flush_or_fail(t);
                    }
                }
                Err(e) if s.peer.is_some() && self.ending.is_none() => {
                    s.dead = true;
                    self.fail(e, None);
                }
                Err(e) => {
                    if s.peer.is_none() {
                        self.drop_unauthenticated(t, Some(e));
                    } else {
                        s.dead = true;
                    }
                }
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
            if let Some(s) = self.socks.get_mut(&t) {
                s.closing = true;
                if let Some(c) = s.conn.as_mut() {
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
    fn fail(&mut self, error: Error, abort: Option<(AbortReason, u32, String)>) {
        if self.failed {
            return;
        }
        self.failed = true;
        let abort = abort.or_else(|| match &error {
            Error::AbortedByPeer { .. } => None,
            Error::FrameRejected(_) => Some((AbortReason::RejectedFrame, 1610, error.to_string())),
            e => Some((
                AbortReason::PeerLost,
                e.h_code().map_or(0, |c| c.number()),
                e.to_string(),
            )),
        });
        self.shared.set_error(error);
        let now = Instant::now();
        self.ending = Some(now + self.settings.linger);
        if let Some(mut l) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut l);
        }
        self.socks.retain(|_, s| s.peer.is_some());
        let tokens: Vec<Token> = self.socks.keys().copied().collect();
        for t in tokens {
            if let Some(s) = self.socks.get_mut(&t) {
                s.closing = true;
                if let Some(c) = s.conn.as_mut() {
                    c.discard_queued();
                    if let Some((reason, code, msg)) = &abort {
                        if !s.dead && !c.bye_sent() {
                            c.queue_abort(*reason, *code, msg, now);
                        }
                    }
                    c.close();
                }
            }
            if let Err(SockError::Fatal(_)) = self.flush(t) {
                if let Some(s) = self.socks.get_mut(&t) {
                    s.dead = true;
                }
            }
        }
        self.next_timer = now;
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
