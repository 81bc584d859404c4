//! The I/O loop of one rank: one blocking mio poller over the listener,
//! the sockets the I/O thread owns and its waker, and the clocks (dials,
//! the set-up deadline, heartbeats, silence, the linger). The same loop
//! sets the mesh up on the thread that called `Endpoint::start` (the
//! thread that waits drives the sockets), then runs on the I/O thread for
//! the rest of the job step, where it keeps the heartbeats going, notices
//! lost peers and reads while the program computes (`io::driver` has the
//! sockets while the program waits in a call).
//!
//! Policy comes from `proto`: set-up from [`Setup`], the end of the step
//! from [`Ending`], the connection rules from the connections.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rustls::{ClientConfig, ServerConfig};
use sperli_wire::Error;

use crate::io::driver::HANDBACK;
use crate::io::link::Link;
use crate::io::recovery::Todo;
use crate::io::service::{self, Serviced};
use crate::io::shared::{Command, Shared};
use crate::proto::connection::ConnState;
use crate::proto::connection::Outgoing;
use crate::proto::ending::{AbortFrame, Ending};
use crate::proto::setup::Setup;
use crate::Settings;
use sperli_wire::FrameType;
use std::os::fd::AsRawFd;

pub(crate) const WAKER: Token = Token(0);
pub(crate) const LISTENER: Token = Token(1);
/// The control channel of feature bit 5 (protocol §18.1).
pub(crate) const CONTROL: Token = Token(2);

/// How many bytes one socket may deliver before the loop moves on (and
/// comes back to it at once): a peer that streams without pause must not
/// keep this thread from its timers, or this rank stops sending heartbeats
/// to everyone else and is declared silent (protocol §5.2).
pub(crate) const READ_BUDGET: usize = 4 * 1024 * 1024;

/// One socket of the loop.
pub(crate) struct Sock {
    pub link: Arc<Link>,
    /// For a dialled socket: the rank dialled.
    pub dialled: Option<u32>,
    /// TCP connection established (always true for accepted sockets).
    pub connected: bool,
    /// Authenticated (HELLO verified) as this rank.
    pub peer: Option<u32>,
    /// The membership epoch in force when it authenticated (protocol
    /// §18.6: a record closes the connections of the ranks it replaces
    /// that are older than it).
    pub epoch: u32,
}

/// The loop's state (see the module docs).
pub(crate) struct EventLoop {
    pub poll: Poll,
    events: Events,
    pub shared: Arc<Shared>,
    pub settings: Settings,
    pub token: Vec<u8>,
    pub server: Arc<ServerConfig>,
    pub client: Arc<ClientConfig>,
    pub listener: Option<TcpListener>,
    pub socks: HashMap<Token, Sock>,
    pub next_token: usize,
    cmds: Receiver<Command>,
    pub setup: Setup,
    pub ending: Ending,
    pub next_timer: Instant,
    /// Sockets that used up their read budget with bytes still waiting
    /// (edge-triggered: no new event will come for those).
    pub unfinished: Vec<Token>,
    /// The program finished while a close without BYE was held (protocol
    /// §7.5): the BYEs wait until the grace decided the step's fate.
    finish_held: bool,
}

impl EventLoop {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        poll: Poll,
        shared: Arc<Shared>,
        settings: Settings,
        token: Vec<u8>,
        server: Arc<ServerConfig>,
        client: Arc<ClientConfig>,
        mut listener: TcpListener,
        cmds: Receiver<Command>,
        setup: Setup,
    ) -> std::io::Result<Self> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        if let Some(r) = &shared.recovery {
            r.control().set_nonblocking(true)?;
            poll.registry().register(
                &mut SourceFd(&r.control().as_raw_fd()),
                CONTROL,
                Interest::READABLE,
            )?;
        }
        let now = Instant::now();
        let ending = Ending::new(settings.linger, settings.silence);
        Ok(Self {
            poll,
            events: Events::with_capacity(256),
            settings,
            token,
            server,
            client,
            listener: Some(listener),
            socks: HashMap::new(),
            next_token: 3,
            cmds,
            setup,
            ending,
            next_timer: now,
            unfinished: Vec::new(),
            finish_held: false,
            shared,
        })
    }

    /// Runs the loop until the job step ends (true) or, with `setup_only`,
    /// until set-up completed (false).
    pub fn run(&mut self, setup_only: bool) -> bool {
        self.check_setup_done();
        loop {
            if setup_only && self.setup.is_done() && !self.ending.is_ending() {
                return false;
            }
            let now = Instant::now();
            if now >= self.next_timer {
                // Read what arrived before judging silence: this thread
                // may not have polled for a while, and bytes waiting in a
                // socket are life (protocol §5.2). This batch too may hold
                // many handshakes: heartbeats go out between them.
                self.poll_once(Some(Duration::ZERO));
                self.timers(Instant::now(), true);
            }
            if self.ended() {
                return true;
            }
            let now = Instant::now();
            let mut timeout = self.next_timer.saturating_duration_since(now);
            if !self.unfinished.is_empty() {
                timeout = Duration::ZERO;
            }
            self.poll_once(Some(timeout));
            for t in std::mem::take(&mut self.unfinished) {
                self.dispatch(t);
                self.heartbeats_if_due();
            }
        }
    }

    fn poll_once(&mut self, timeout: Option<Duration>) {
        if let Err(e) = self.poll.poll(&mut self.events, timeout) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                self.fail(Error::io("polling sockets", &e), None);
            }
            return;
        }
        let tokens: Vec<Token> = self.events.iter().map(|e| e.token()).collect();
        for t in tokens {
            self.dispatch(t);
            self.heartbeats_if_due();
        }
    }

    /// Between two events of a batch: the heartbeats that are due go out.
    /// A long batch (many handshakes at set-up, each a slice of CPU work
    /// that may take a few hundred ms on a loaded machine, or sockets with
    /// more than their read budget) must not keep them from the peers
    /// already authenticated, or those judge this rank silent (protocol
    /// §5.2, §7.4); silence is judged only at the top of the loop.
    fn heartbeats_if_due(&mut self) {
        if Instant::now() >= self.next_timer {
            self.timers(Instant::now(), false);
        }
    }

    /// Ends the loop's work: closes every socket and tells the waiters.
    /// Returns the exit status when the step's failure ends the process.
    pub fn finish_up(&mut self) -> Option<i32> {
        self.socks.clear();
        let sh = &self.shared;
        if !self.ending.failed() {
            sh.finished.store(true, Ordering::SeqCst);
        }
        sh.io_ended.store(true, Ordering::SeqCst);
        sh.changed();
        let error = sh.error.get()?;
        if sh.aborted_locally() {
            return None;
        }
        let setup_done = sh.setup_done.load(Ordering::SeqCst);
        self.ending.fatal_exit(sh.errors(), setup_done, error)
    }

    fn ended(&mut self) -> bool {
        if !self.ending.is_ending() {
            return false;
        }
        self.socks.retain(|_, s| !s.link.lock().dead);
        self.ending.poll(Instant::now(), self.socks.len())
    }

    pub fn new_token(&mut self) -> Token {
        self.next_token += 1;
        Token(self.next_token)
    }

    fn dispatch(&mut self, t: Token) {
        match t {
            WAKER => self.commands(),
            LISTENER => self.accept(),
            CONTROL => self.control(),
            t => {
                let Some(s) = self.socks.get(&t) else {
                    return;
                };
                match s.peer {
                    // Callers drive it: not ours to read. Bytes this thread
                    // left in it (an unfinished read) are the callers' now.
                    Some(_) if !s.link.io_owns.load(Ordering::SeqCst) => {
                        if s.link.unread.load(Ordering::SeqCst) {
                            self.shared.driver.note_unread();
                        }
                    }
                    Some(peer) => {
                        let link = s.link.clone();
                        let r = service::service(&self.shared, &link, peer, READ_BUDGET);
                        self.serviced(t, r);
                    }
                    None => self.drive_setup(t),
                }
            }
        }
    }

    /// Acts on what servicing an authenticated socket found.
    fn serviced(&mut self, t: Token, s: Serviced) {
        if s.more {
            if let Some(sock) = self.socks.get(&t) {
                sock.link.unread.store(true, Ordering::SeqCst);
            }
        }
        if s.more && !self.unfinished.contains(&t) {
            self.unfinished.push(t);
        }
        if let Some(e) = s.error {
            if self.ending.counts(&e) {
                self.fail(e, None);
            }
        }
        if s.delivered {
            self.shared.wake();
        }
    }

    fn commands(&mut self) {
        let mut kicked = Vec::new();
        while let Ok(c) = self.cmds.try_recv() {
            match c {
                Command::Kick { to } => kicked.push(to),
                Command::Failed => {
                    if let Some(e) = self.shared.error.get().cloned() {
                        self.fail(e, None);
                    }
                }
                Command::Abort(frame) => {
                    if let Some(e) = self.shared.error.get().cloned() {
                        self.fail(e, Some(frame));
                    }
                }
                Command::Finish => self.finish(),
                Command::Recovery => self.recovery_todo(&mut kicked),
                Command::Released => {
                    let due = self.shared.driver.released() + HANDBACK;
                    self.next_timer = self.next_timer.min(due);
                }
                Command::Settle => {
                    if let Some(due) = self.shared.grace_deadline() {
                        self.next_timer = self.next_timer.min(due);
                    }
                }
            }
        }
        self.kick(kicked);
    }

    /// Writes what waits for the sockets of `kicked`, taking them back
    /// from the callers when none drives them.
    fn kick(&mut self, mut kicked: Vec<u32>) {
        kicked.sort_unstable();
        kicked.dedup();
        for to in kicked {
            let Some(link) = self.shared.link(to) else {
                continue;
            };
            if !self.shared.driver.leading() {
                self.take_back(&link);
            }
            let r = service::flush(&self.shared, &link, to);
            self.serviced(link.token, r);
        }
    }

    /// Reads the control channel (protocol §18.1): records for the
    /// recovery; an error it ends the step with ends it here.
    fn control(&mut self) {
        let Some(r) = &self.shared.recovery else {
            return;
        };
        let ended = {
            let mut st = self.shared.state();
            r.read_control(&mut st, &self.shared.ctx.membership)
        };
        self.shared.changed();
        match ended {
            Some(e) => self.fail(e, None),
            None => {
                let mut kicked = Vec::new();
                self.recovery_todo(&mut kicked);
                self.kick(kicked);
            }
        }
    }

    /// Sends the RECOVER frames and closes the connections the recovery
    /// asks for (protocol §18.6); the peers to flush go to `kicked`.
    fn recovery_todo(&mut self, kicked: &mut Vec<u32>) {
        let Some(r) = &self.shared.recovery else {
            return;
        };
        let now = Instant::now();
        let todo = r.take_todo();
        if todo.is_empty() {
            return;
        }
        for t in todo {
            match t {
                Todo::Send {
                    to,
                    header_epoch,
                    payload,
                } => {
                    let Some(link) = self.shared.link(to) else {
                        continue;
                    };
                    let mut g = link.lock();
                    if g.dead {
                        continue;
                    }
                    if let Some(c) = g.conn.as_mut() {
                        let h = self
                            .shared
                            .ctx
                            .header(FrameType::Recover, to)
                            .with_membership_epoch(header_epoch);
                        c.queue_frame(Outgoing::new(h, payload.encode(), 0), now);
                    }
                    drop(g);
                    kicked.push(to);
                }
                Todo::Close { peer } => {
                    // Not a replacement that joined the epoch in force
                    // (its join may come before this close is carried out).
                    let current = self.shared.ctx.membership.current();
                    self.socks.retain(|_, s| {
                        if s.peer != Some(peer) || s.epoch >= current {
                            return true;
                        }
                        s.link.lock().close_now();
                        false
                    });
                }
            }
        }
        r.todo_done();
        self.shared.changed();
    }

    /// Puts a socket the callers drove back into this loop's poller.
    pub fn take_back(&self, link: &Link) {
        let g = link.lock();
        if g.dead || link.io_owns.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = self.poll.registry().register(
            &mut SourceFd(&link.fd),
            link.token,
            Interest::READABLE | Interest::WRITABLE,
        );
    }

    /// Every socket back to this loop (the program computes, or the step
    /// ends).
    fn take_all_back(&mut self) {
        let links: Vec<Arc<Link>> = self
            .socks
            .values()
            .filter(|s| s.peer.is_some())
            .map(|s| s.link.clone())
            .collect();
        for l in links {
            self.take_back(&l);
        }
    }

    /// Runs the clocks: dials, the set-up deadline, heartbeats, the hand
    /// back of the sockets and (when `judge`) the silence limit. Without
    /// `judge` only heartbeats are sent.
    fn timers(&mut self, now: Instant, judge: bool) {
        // A heartbeat-only pass keeps the due judging pass due.
        let mut next = if judge {
            now + Duration::from_secs(3600)
        } else {
            self.next_timer
        };
        if judge && !self.setup.is_done() && !self.ending.is_ending() {
            for r in self.setup.poll_dials(now) {
                self.dial(r, now);
            }
            if let Some(e) = self.setup.poll_deadline(now) {
                self.fail(e, None);
            }
            if let Some(t) = self.setup.next_timeout() {
                next = next.min(t);
            }
        }
        if judge
            && self.shared.setup_done.load(Ordering::SeqCst)
            && !self.ending.is_ending()
            && self
                .socks
                .values()
                .any(|s| !s.link.io_owns.load(Ordering::SeqCst))
        {
            let d = &self.shared.driver;
            let due = d.released() + HANDBACK;
            if d.leading() && d.park_io() {
                // No hand-back while a caller leads: the leader that steps
                // down wakes this thread (Command::Released).
            } else if now >= due {
                self.take_all_back();
                // A caller may have left frames in rustls (a read paused
                // at a frame boundary): no socket event says so.
                let socks: Vec<(Token, u32, Arc<Link>)> = self
                    .socks
                    .iter()
                    .filter_map(|(t, s)| Some((*t, s.peer?, s.link.clone())))
                    .collect();
                for (t, peer, link) in socks {
                    let r = service::service(&self.shared, &link, peer, READ_BUDGET);
                    self.serviced(t, r);
                }
            } else {
                next = next.min(due.max(now + HANDBACK));
            }
        }
        let tokens: Vec<Token> = self.socks.keys().copied().collect();
        if judge {
            // What a peer sent while this thread (or the callers) were
            // busy is read before the peer is judged silent. A patient
            // connection is not judged, so not read here (its bytes come
            // with their own event). Reading one that awaits HELLO may
            // verify a HELLO or finish a handshake, a slice of CPU work:
            // heartbeats that fall due meanwhile go out between them, or
            // after a long set-up batch this pass alone could keep them
            // from the authenticated peers past their limit (protocol §5.2).
            for &t in &tokens {
                let silent = self.socks.get(&t).is_some_and(|s| {
                    let l = s.link.lock();
                    !l.dead
                        && l.conn.as_ref().is_some_and(|c| {
                            let awaiting = c.state() == ConnState::AwaitingHello;
                            c.is_silent(now)
                                && !self.setup.is_patient(s.dialled.is_some(), awaiting, now)
                        })
                });
                if silent {
                    match self.socks.get(&t).map(|s| (s.peer, s.link.clone())) {
                        Some((Some(peer), link)) => {
                            let r = service::service(&self.shared, &link, peer, READ_BUDGET);
                            self.serviced(t, r);
                        }
                        Some((None, _)) => self.drive_setup(t),
                        None => {}
                    }
                    self.heartbeats_if_due();
                }
            }
        }
        for t in tokens {
            if let Some(d) = self.clock(t, now, judge) {
                next = next.min(d);
            }
        }
        // Protocol §7.5: a held close ends the step at its deadline unless
        // an ABORT ended it meanwhile; a finish held for it goes on.
        if let Some(e) = self.shared.settle_due(now) {
            self.fail(e, None);
        } else if let Some(due) = self.shared.grace_deadline() {
            next = next.min(due);
        }
        if self.finish_held && self.shared.grace_deadline().is_none() {
            self.finish_held = false;
            self.finish();
        }
        if let Some(end) = self.ending.deadline() {
            next = next.min(end);
        }
        if judge && !self.ending.is_ending() {
            if let Some(r) = &self.shared.recovery {
                let (ended, again) = {
                    let mut st = self.shared.state();
                    r.timers(&mut st, &self.shared.ctx.membership)
                };
                if let Some(d) = again {
                    next = next.min(now + d);
                }
                if let Some(e) = ended {
                    self.fail(e, None);
                } else {
                    let mut kicked = Vec::new();
                    self.recovery_todo(&mut kicked);
                    self.kick(kicked);
                }
            }
        }
        self.next_timer = next;
    }

    /// One socket's clock: heartbeat, silence, a BYE without close.
    /// Returns when it next has something to do.
    fn clock(&mut self, t: Token, now: Instant, judge: bool) -> Option<Instant> {
        let s = self.socks.get(&t)?;
        let (link, peer, dialled) = (s.link.clone(), s.peer, s.dialled.is_some());
        let mut g = link.lock();
        let l = &mut *g;
        if l.dead {
            return None;
        }
        let c = l.conn.as_mut()?;
        // A peer we dialled that finished TLS is alive; a slow one may take
        // longer than the silence limit to send its HELLO (protocol §5.2).
        let patient = self
            .setup
            .is_patient(dialled, c.state() == ConnState::AwaitingHello, now);
        if judge && peer.is_some() && c.bye_overdue(now) {
            // BYE, then no close within the silence limit: it left.
            l.dead = true;
            drop(g);
            let mut st = self.shared.state();
            st.handle_departed(peer.unwrap_or(0));
            drop(st);
            self.shared.changed();
            return None;
        }
        let polled = if judge && !patient {
            c.poll(now)
        } else {
            c.poll_heartbeat(now);
            Ok(())
        };
        let next = c.next_deadline();
        match polled {
            Ok(()) => {
                let has_output = c.has_output();
                drop(g);
                if has_output {
                    self.flush_sock(t);
                }
                next
            }
            Err(e) => {
                l.dead = true;
                let stale = service::stale(&self.shared, l);
                drop(g);
                match peer {
                    Some(_) if stale => {}
                    Some(_) => {
                        if self.ending.counts(&e) {
                            self.fail(e, None);
                        }
                    }
                    None => self.drop_unauthenticated(t, Some(e)),
                }
                None
            }
        }
    }

    /// Writes what waits for socket `t`.
    pub fn flush_sock(&mut self, t: Token) {
        let Some(s) = self.socks.get(&t) else {
            return;
        };
        let link = s.link.clone();
        match s.peer {
            Some(peer) => {
                let r = service::flush(&self.shared, &link, peer);
                if r.backlog
                    && !link.io_owns.load(Ordering::SeqCst)
                    && !self.shared.driver.leading()
                {
                    // Nobody drives it: ours again, for its writable event.
                    self.take_back(&link);
                }
                self.serviced(t, r);
            }
            None => {
                let mut l = link.lock();
                if s.connected && l.flush(&mut |_| {}).is_err() {
                    drop(l);
                    self.drop_unauthenticated(t, None);
                }
            }
        }
    }

    /// Normal end: BYE to every open peer, then close_notify and close.
    fn finish(&mut self) {
        if self.shared.grace_deadline().is_some() {
            // A peer closed without BYE while this step ran: the normal
            // end waits for the grace (protocol §7.5), which ends the step
            // with H1613 or the ABORT that explains the close.
            self.finish_held = true;
            return;
        }
        let now = Instant::now();
        if !self.ending.handle_finish(now) {
            return;
        }
        self.take_all_back();
        let tokens: Vec<Token> = self.socks.keys().copied().collect();
        for t in tokens {
            if let Some(s) = self.socks.get(&t) {
                let mut l = s.link.lock();
                l.closing = true;
                if let Some(c) = l.conn.as_mut() {
                    if c.state() == ConnState::Open {
                        c.queue_bye(now);
                    }
                }
            }
            self.flush_sock(t);
        }
        self.next_timer = now;
    }

    /// Ends the job step with `error`: publishes it (unless published),
    /// then ABORT to every authenticated peer as the end policy says (the
    /// program's own `local` ABORT, or none after an ABORT received),
    /// close_notify, close. Called without any link's lock held.
    pub fn fail(&mut self, error: Error, local: Option<AbortFrame>) {
        // Protocol §18.6: with feature bit 5 a lost peer is a recovery.
        if local.is_none() && self.shared.recover_from(&error) {
            return;
        }
        // Protocol §7.5: a close without BYE first waits for the ABORT
        // that may explain it.
        if local.is_none() {
            if let Some(due) = self.shared.hold_loss(&error) {
                self.next_timer = self.next_timer.min(due);
                return;
            }
        }
        let now = Instant::now();
        let Some(action) = self.ending.handle_failure(&error, local, now) else {
            return;
        };
        // Published before any link is locked: a send that takes a link's
        // lock after this sees the error and queues nothing.
        self.shared.fail(error, false);
        if let Some(mut l) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut l);
        }
        self.socks.retain(|_, s| s.peer.is_some());
        self.take_all_back();
        let tokens: Vec<Token> = self.socks.keys().copied().collect();
        for t in tokens {
            let Some(s) = self.socks.get(&t) else {
                continue;
            };
            let link = s.link.clone();
            let mut g = link.lock();
            let l = &mut *g;
            l.closing = true;
            if let Some(c) = l.conn.as_mut() {
                c.discard_queued();
                if let Some(a) = &action.abort {
                    if !l.dead && !c.bye_sent() {
                        c.queue_abort(a.reason, a.code, &a.message, now);
                    }
                }
                c.close();
            }
            if l.flush(&mut |_| {}).is_err() {
                l.dead = true;
            }
        }
        self.next_timer = now;
    }
}
