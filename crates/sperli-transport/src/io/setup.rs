//! The sockets of set-up (protocol §5): the listener, dialling and
//! accepting, the TLS handshake, the subject check and the HELLO, run by
//! the I/O loop with the policy of [`crate::proto::setup::Setup`].

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Interest, Token};
use rustls::{ClientConnection, ServerConnection};
use sperli_tls::config::{check_peer, server_name_for_host};
use sperli_tls::pki::peer_identity;
use sperli_wire::error::{AuthError, TlsFailure, UsageError};
use sperli_wire::ids::Sha256Digest;
use sperli_wire::Error;

use crate::io::deliver::ToMatching;
use crate::io::event_loop::{EventLoop, Sock, READ_BUDGET};
use crate::io::link::{Link, LinkIo, ReadStatus, SockFail, TLS_BUFFER};
use crate::job::unix_ms;
use crate::proto::connection::{Connection, JobContext};

fn resolve(host: &str, port: u16) -> std::io::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()?
        .find(SocketAddr::is_ipv4)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no IPv4 address"))
}

/// Binds the rank's own listener (host:port from the job description;
/// protocol §5.1 step 1: "Listens on its own port (from its host-list
/// entry) before anything else"), or takes the one handed over already bound
/// ([`Settings::listener`](crate::Settings::listener)) once it is checked
/// to be bound to exactly that address.
pub(crate) fn bind(
    ctx: &JobContext,
    handed: Option<&std::net::TcpListener>,
) -> Result<TcpListener, Error> {
    let own = &ctx.hosts[ctx.rank as usize];
    let addr = resolve(&own.host, own.port).map_err(|e| Error::io("resolving own host", &e))?;
    let Some(handed) = handed else {
        return TcpListener::bind(addr).map_err(|e| Error::io("binding own host:port", &e));
    };
    let got = handed
        .local_addr()
        .map_err(|e| Error::io("reading the handed listener's address", &e))?;
    if got != addr {
        return Err(Error::Usage(UsageError::ListenerAddress {
            expected: addr,
            got,
        }));
    }
    let l = handed
        .try_clone()
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| Error::io("taking the handed listener", &e))?;
    Ok(TcpListener::from_std(l))
}

/// What went wrong on a socket that is not authenticated yet.
enum Dropped {
    /// Close it; `Some`: a failure to authenticate, which counts.
    Socket(Option<Error>),
}

impl EventLoop {
    fn register(&self, link: &Link) -> bool {
        self.poll
            .registry()
            .register(
                &mut SourceFd(&link.fd),
                link.token,
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_ok()
    }

    /// Accepts what the listener queued ("Accepts one connection from
    /// every lower rank", protocol §5.1 step 3).
    pub(crate) fn accept(&mut self) {
        loop {
            let Some(l) = self.listener.as_ref() else {
                return;
            };
            match l.accept() {
                Ok((tcp, _)) => {
                    if (self.setup.is_done() && !self.awaits_joins()) || self.ending.is_ending() {
                        continue; // dropped: set-up is over
                    }
                    let _ = tcp.set_nodelay(true);
                    let Ok(mut tls) = ServerConnection::new(self.server.clone()) else {
                        continue;
                    };
                    tls.set_buffer_limit(Some(TLS_BUFFER));
                    let t = self.new_token();
                    let link = Arc::new(Link::new(t, tcp, rustls::Connection::Server(tls)));
                    if !self.register(&link) {
                        continue;
                    }
                    self.socks.insert(
                        t,
                        Sock {
                            link,
                            dialled: None,
                            connected: true,
                            peer: None,
                            epoch: 0,
                        },
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return, // e.g. EMFILE: try again on the next event
            }
        }
    }

    /// Dials `rank` ("Connects to every higher rank", protocol §5.1 step 2).
    pub(crate) fn dial(&mut self, rank: u32, now: Instant) {
        // The endpoint a record gave a replaced rank, else the
        // description's (protocol §18.7).
        let Some(entry) = self.shared.ctx.peer_host(rank) else {
            self.setup.handle_dial_failed(rank, now);
            return;
        };
        let (Ok(addr), Ok(name)) = (
            resolve(&entry.host, entry.port),
            server_name_for_host(&entry.host),
        ) else {
            self.setup.handle_dial_failed(rank, now);
            return;
        };
        let Ok(mut tls) = ClientConnection::new(self.client.clone(), name) else {
            self.setup.handle_dial_failed(rank, now);
            return;
        };
        tls.set_buffer_limit(Some(TLS_BUFFER));
        let Ok(tcp) = TcpStream::connect(addr) else {
            self.setup.handle_dial_failed(rank, now);
            return;
        };
        let t = self.new_token();
        let link = Arc::new(Link::new(t, tcp, rustls::Connection::Client(tls)));
        if !self.register(&link) {
            self.setup.handle_dial_failed(rank, now);
            return;
        }
        self.socks.insert(
            t,
            Sock {
                link,
                dialled: Some(rank),
                connected: false,
                peer: None,
                epoch: 0,
            },
        );
    }

    /// Drops a socket that did not authenticate; the policy decides what
    /// follows (a dialled rank is dialled again, an authentication failure
    /// counts for H1611).
    pub(crate) fn drop_unauthenticated(&mut self, t: Token, error: Option<Error>) {
        let Some(s) = self.socks.remove(&t) else {
            return;
        };
        let peer = s.link.lock().conn.as_ref().map(Connection::peer);
        self.setup
            .handle_dropped(s.dialled, peer, error, Instant::now());
        if let Some(at) = self.setup.next_timeout() {
            self.next_timer = self.next_timer.min(at);
        }
    }

    /// Drives a socket that is not authenticated yet: connect, TLS, the
    /// subject check, HELLO.
    pub(crate) fn drive_setup(&mut self, t: Token) {
        match self.drive_setup_inner(t) {
            Ok(()) => {}
            Err(Dropped::Socket(e)) => self.drop_unauthenticated(t, e),
        }
        // What was delivered, now that no lock is held.
        self.shared.wake();
    }

    fn drive_setup_inner(&mut self, t: Token) -> Result<(), Dropped> {
        let Some(s) = self.socks.get_mut(&t) else {
            return Ok(());
        };
        let link = s.link.clone();
        let mut g = link.lock();
        let l = &mut *g;
        if l.dead {
            return Ok(());
        }
        if !s.connected {
            match l.tcp.take_error() {
                Ok(None) => {}
                _ => return Err(Dropped::Socket(None)),
            }
            match l.tcp.peer_addr() {
                Ok(_) => {
                    s.connected = true;
                    let _ = l.tcp.set_nodelay(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotConnected => return Ok(()),
                Err(_) => return Err(Dropped::Socket(None)),
            }
        }
        let dialled = s.dialled;
        let now_ms = unix_ms(SystemTime::now());
        let shared = self.shared.clone();
        loop {
            let peer = l.conn.as_ref().map_or(0, Connection::peer);
            let mut sink = ToMatching::new(&shared, peer, None);
            sink.hold = true;
            let r = l.read(READ_BUDGET, Instant::now(), now_ms, &mut sink, false);
            let authenticated = sink.authenticated;
            match r {
                Ok(ReadStatus::HandshakeDone) => {
                    self.handshake_done(dialled, l)?;
                    continue;
                }
                Ok(status) => {
                    if let Some(features) = authenticated {
                        if !self.authenticated(t, peer, features, l) {
                            // A second connection for the rank: its
                            // frames do not count (protocol §5.3).
                            return Err(Dropped::Socket(None));
                        }
                        sink.flush();
                        l.stream = sink.stream.take();
                        if let Some(e) = sink.rejected.take() {
                            return Err(Dropped::Socket(Some(e)));
                        }
                    }
                    match status {
                        // More bytes wait: in the socket (the budget), or
                        // in rustls behind the HELLO (the connection stops
                        // right after it verifies). They are the
                        // authenticated peer's now and are read at once,
                        // where a rejected frame ends the job (protocol
                        // §5.3, §6.2).
                        ReadStatus::More | ReadStatus::Paused if !self.unfinished.contains(&t) => {
                            self.unfinished.push(t);
                        }
                        ReadStatus::Closed => {
                            if authenticated.is_none() {
                                return Err(Dropped::Socket(Some(Error::Authentication {
                                    peer: dialled,
                                    error: AuthError::Tls(TlsFailure::Broken),
                                })));
                            }
                            // Authenticated and closed at once: read again
                            // at once, where the close is the connection's.
                            if !self.unfinished.contains(&t) {
                                self.unfinished.push(t);
                            }
                        }
                        _ => {}
                    }
                    break;
                }
                Err(SockFail::Frame(e)) => return Err(Dropped::Socket(Some(e))),
                Err(SockFail::Tls(f)) => {
                    return Err(Dropped::Socket(Some(Error::Authentication {
                        peer: dialled,
                        error: AuthError::Tls(f),
                    })))
                }
                Err(SockFail::Socket(_)) => {
                    return Err(Dropped::Socket(Some(Error::Authentication {
                        peer: dialled,
                        error: AuthError::Tls(TlsFailure::Broken),
                    })))
                }
            }
        }
        if l.flush(&mut |_| {}).is_err() {
            return Err(Dropped::Socket(None));
        }
        link.note_backlog(l);
        Ok(())
    }

    /// The TLS handshake completed: the peer's certificate must name the
    /// rank dialled, or for an accepted connection a lower rank not yet
    /// connected (protocol §2.2, §5.3); then HELLO goes out at once ("Both
    /// sides send HELLO immediately after the handshake", protocol §5.1 step 5).
    fn handshake_done(&mut self, dialled: Option<u32>, l: &mut LinkIo) -> Result<(), Dropped> {
        let ctx = self.shared.ctx.clone();
        let job = ctx.job_id;
        let rank = match dialled {
            Some(r) => r,
            None => {
                let cert = l.tls.peer_certificates().and_then(|c| c.first());
                let cn = cert
                    .and_then(|c| peer_identity(c).ok())
                    .map(|id| id.common_name)
                    .unwrap_or_default();
                let rank = if self.setup.is_done() {
                    self.joining_rank(&job, &cn)
                } else {
                    // A replacement still in its set-up may have applied a
                    // newer record meanwhile: that record's replacements
                    // dial it as a member (protocol §18.7).
                    self.setup
                        .accepted_rank(&job, &cn)
                        .or_else(|e| self.joining_rank(&job, &cn).map_err(|_| e))
                }
                .map_err(|e| Dropped::Socket(Some(e)))?;
                // Protocol §18.7 check 3: a replacement's certificate is
                // the one its change entry names.
                if let Some(want) = self
                    .shared
                    .recovery
                    .as_ref()
                    .and_then(|r| r.awaits_join(rank))
                {
                    let der = cert.map(|c| c.as_ref()).unwrap_or_default();
                    if Sha256Digest::of(der) != want {
                        return Err(Dropped::Socket(Some(Error::Authentication {
                            peer: Some(rank),
                            error: AuthError::NotRecorded { rank },
                        })));
                    }
                }
                rank
            }
        };
        check_peer(&l.tls, &job, rank).map_err(|e| Dropped::Socket(Some(e)))?;
        let now = Instant::now();
        let mut c = Connection::with_pool(
            ctx,
            rank,
            self.settings.silence,
            now,
            self.shared.pool.clone(),
        );
        c.queue_hello(&self.token, now)
            .map_err(|e| Dropped::Socket(Some(e)))?;
        l.conn = Some(c);
        self.next_timer = self
            .next_timer
            .min(now + std::time::Duration::from_millis(10));
        Ok(())
    }

    /// `rank`'s HELLO verified on socket `t` with `features`. False for a
    /// second connection claiming an authenticated rank.
    /// `held` is socket `t`'s link, locked by the caller.
    fn authenticated(&mut self, t: Token, rank: u32, features: u64, held: &mut LinkIo) -> bool {
        if self.setup.is_done() {
            return self.joined(t, rank, features, held);
        }
        if !self.setup.handle_authenticated(rank) {
            return false;
        }
        // Every rank sees every peer's HELLO, so every rank decides the
        // job's extensions alike (protocol §7.1.1).
        self.shared
            .job_features
            .fetch_and(features, Ordering::Relaxed);
        if let Some(s) = self.socks.get_mut(&t) {
            s.peer = Some(rank);
            s.epoch = self.shared.ctx.membership.current();
            self.shared.set_link(rank, &s.link);
            let _ = self.shared.driver.register(rank, &s.link);
        }
        // A replacement's set-up is its join (protocol §18.7).
        if let Some(rec) = &self.shared.recovery {
            let mut st = self.shared.state();
            rec.joined(rank, &mut st, &self.shared.ctx.membership);
        }
        self.check_setup_done_holding(Some((t, held)));
        true
    }

    /// Once every peer is authenticated: no more accepts, half-done
    /// sockets go, and the program may run.
    pub(crate) fn check_setup_done(&mut self) {
        self.check_setup_done_holding(None);
    }

    /// As [`EventLoop::check_setup_done`] while the caller holds the lock
    /// of one socket's link (`held`: its token and the locked link).
    fn check_setup_done_holding(&mut self, held: Option<(Token, &mut LinkIo)>) {
        if !self.setup.is_done() || self.shared.setup_done.load(Ordering::SeqCst) {
            return;
        }
        if self.ending.is_ending() {
            return;
        }
        let job = self.shared.job_features.load(Ordering::Relaxed);
        // Protocol §18.7: with bit 5 a rank keeps listening for the
        // replacements of later epochs.
        let keep_listening =
            self.shared.recovery.is_some() && job & sperli_wire::recovery::FEATURE_MEMBERSHIP != 0;
        if !keep_listening {
            if let Some(mut l) = self.listener.take() {
                let _ = self.poll.registry().deregister(&mut l);
            }
        }
        self.socks.retain(|_, s| s.peer.is_some());
        // Protocol §6.2 checks 12 and 13: from now on every connection
        // judges with the job's features, and what came before is judged
        // again with them.
        let (held_token, held) = match held {
            Some((t, l)) => (Some(t), Some(l)),
            None => (None, None),
        };
        if let Some(c) = held.and_then(|l| l.conn.as_mut()) {
            c.set_job_features(job);
        }
        for (t, s) in &self.socks {
            if Some(*t) == held_token {
                continue;
            }
            if let Some(c) = s.link.lock().conn.as_mut() {
                c.set_job_features(job);
            }
        }
        let recheck = self.shared.state().recheck_collective(job);
        if let Err((_, e)) = recheck {
            self.fail(Error::FrameRejected(e), None);
            return;
        }
        // Protocol §16.1: with feature bit 3 every DATA payload is judged
        // by protocol §16, those kept so far too.
        let judged = self.shared.state().set_features(job);
        if let Err((_, e)) = judged {
            self.fail(e, None);
            return;
        }
        // Protocol §18.2: with bit 5 in the job, frames carry the epoch.
        if job & sperli_wire::recovery::FEATURE_MEMBERSHIP != 0 {
            self.shared.ctx.membership.start_carrying();
        }
        self.shared.setup_done.store(true, Ordering::SeqCst);
        self.shared.bump();
    }
}

impl EventLoop {
    /// Whether the recovery waits for a replacement to join (protocol
    /// §18.7): only then does the listener take connections after set-up.
    fn awaits_joins(&self) -> bool {
        self.shared
            .recovery
            .as_ref()
            .is_some_and(|r| r.awaits_any_join())
    }

    /// The rank an accepted connection after set-up may be (protocol §18.7
    /// check 2): one with a change entry of the current epoch that has not
    /// joined yet.
    fn joining_rank(&self, job: &sperli_wire::JobId, cn: &str) -> Result<u32, Error> {
        let r = sperli_tls::pki::rank_from_cn(job, cn);
        match r {
            Some(rank)
                if self
                    .shared
                    .recovery
                    .as_ref()
                    .is_some_and(|rec| rec.awaits_join(rank).is_some()) =>
            {
                Ok(rank)
            }
            Some(rank) => Err(Error::Authentication {
                peer: Some(rank),
                error: AuthError::NotAwaited { rank },
            }),
            None => Err(Error::Authentication {
                peer: None,
                error: AuthError::Subject {
                    expected: format!("sperli-{}-<a replacement>", job.to_hex()),
                    got: cn.to_owned(),
                },
            }),
        }
    }

    /// A replacement's HELLO verified on socket `t` after set-up (protocol
    /// §18.7): check 5 (its features hold the job's), then it is `rank`'s
    /// connection, and the recovery learns that it joined. False: the
    /// socket is dropped (it does not count).
    fn joined(&mut self, t: Token, rank: u32, features: u64, held: &mut LinkIo) -> bool {
        let Some(rec) = self.shared.recovery.as_ref() else {
            return false;
        };
        if rec.awaits_join(rank).is_none() {
            return false;
        }
        let job = self.shared.job_features.load(Ordering::Relaxed);
        if features & job != job {
            return false;
        }
        // The failed rank's old connection, if the record's close has not
        // reached it yet.
        let old: Vec<Token> = self
            .socks
            .iter()
            .filter(|(k, s)| **k != t && s.peer == Some(rank))
            .map(|(k, _)| *k)
            .collect();
        for k in old {
            if let Some(s) = self.socks.remove(&k) {
                s.link.lock().close_now();
            }
        }
        if let Some(c) = held.conn.as_mut() {
            c.set_job_features(job);
        }
        if let Some(s) = self.socks.get_mut(&t) {
            s.peer = Some(rank);
            s.epoch = self.shared.ctx.membership.current();
            self.shared.set_link(rank, &s.link);
            let _ = self.shared.driver.register(rank, &s.link);
        }
        {
            let mut st = self.shared.state();
            st.handle_rejoined(rank);
            rec.joined(rank, &mut st, &self.shared.ctx.membership);
        }
        self.shared.changed();
        true
    }
}
