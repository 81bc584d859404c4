//! Progress in the caller: a thread blocked in a library call reads,
//! decrypts and writes the sockets itself, instead of waiting for the I/O
//! thread to do it and hand the result over (two thread wake-ups, each
//! about 30 µs when it crosses cores).
//!
//! Leader and followers. Of the threads waiting in calls, one at a time
//! leads: it drives every peer's socket through the callers' own poller
//! (every authenticated socket is registered there, readable and writable,
//! for the whole job), first busy-polling for the spin time (yielding the
//! core to any other runnable thread between two polls; a yield that ran
//! other work stops the spinning for 10 ms, as the core is not the
//! caller's alone), then sleeping in the kernel until a socket or another
//! thread wakes it. The others
//! follow: they sleep on a condition variable and are woken when what
//! they may be waiting for changed. A leader whose wait is over hands the
//! lead to a follower.
//!
//! Ownership of the sockets. While callers drive a socket, the I/O thread
//! neither reads it nor is woken by it: a leader takes the socket out of
//! the I/O thread's poller when it starts. The I/O thread takes it back
//! once no caller has driven the sockets for [`HANDBACK`] (the program
//! computes: the I/O thread reads, answers heartbeats and notices a lost
//! peer meanwhile), or at once when bytes wait for a socket nobody drives.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use sperli_wire::Error;

use crate::io::link::Link;
use crate::io::service::{self, Serviced};
use crate::io::shared::{Command, Shared};

/// How long the sockets stay with the callers after the last call: a
/// program that calls again within this time finds them ready for it;
/// one that computes longer has the I/O thread read them meanwhile.
pub const HANDBACK: Duration = Duration::from_millis(5);

/// The longest a sleeping leader sleeps before it looks again on its own
/// (a bound, not a clock anything depends on).
const NAP: Duration = Duration::from_millis(250);

/// How much one socket may deliver per event before the leader turns to
/// the others (and comes back to it at once).
const TURN: usize = 4 * 1024 * 1024;

/// A yield that took longer than this ran other work for a slice of its
/// own: the core is contended, and a spinning caller would only take turns
/// with that work (a thread that sleeps is woken at once when its data
/// comes; one that spins waits for its next turn). Short bursts (an I/O
/// thread's timers, a peer's wake-up) stay well below it.
const CONTENDED: Duration = Duration::from_micros(200);

/// After a contended yield, the callers do not spin for this long.
const CONTENDED_PAUSE: Duration = Duration::from_millis(10);

/// The token of the callers' waker; a peer's socket is `Token(rank + 1)`.
const WAKER: Token = Token(0);

#[derive(Debug, Default)]
struct Roles {
    leader: bool,
}

/// The callers' poller and what it left to do.
struct Pollset {
    poll: Poll,
    events: Events,
    /// Peers whose socket was left with bytes (its read budget ran out).
    unfinished: Vec<u32>,
}

/// The callers' side of the sockets (see the module docs).
pub(crate) struct Driver {
    roles: Mutex<Roles>,
    cv: Condvar,
    followers: AtomicUsize,
    leading: AtomicBool,
    sleeping: AtomicBool,
    /// When the last leader stepped down (µs since `epoch`).
    released_us: AtomicU64,
    /// Until when the callers do not spin (µs since `epoch`): the core was
    /// contended.
    no_spin_until_us: AtomicU64,
    epoch: Instant,
    pollset: Mutex<Pollset>,
    waker: Waker,
    registry: Registry,
    /// A socket the callers drive has bytes the I/O thread left unread
    /// (`Link::unread`).
    unread_any: AtomicBool,
    /// The I/O thread found a leader and sleeps without a hand-back timer:
    /// the leader that steps down with no follower wakes it
    /// ([`Command::Released`]), so that a call blocked for long costs the
    /// I/O thread no wake-up every [`HANDBACK`].
    io_parked: AtomicBool,
}

impl Driver {
    pub fn new() -> std::io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let registry = poll.registry().try_clone()?;
        Ok(Self {
            roles: Mutex::default(),
            cv: Condvar::new(),
            followers: AtomicUsize::new(0),
            leading: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            released_us: AtomicU64::new(0),
            no_spin_until_us: AtomicU64::new(0),
            epoch: Instant::now(),
            pollset: Mutex::new(Pollset {
                poll,
                events: Events::with_capacity(256),
                unfinished: Vec::new(),
            }),
            waker,
            registry,
            unread_any: AtomicBool::new(false),
            io_parked: AtomicBool::new(false),
        })
    }

    /// The I/O thread left bytes unread in a socket the callers drive now:
    /// the leader picks it up (woken if it sleeps in the kernel).
    pub fn note_unread(&self) {
        self.unread_any.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
    }

    /// Registers an authenticated peer's socket with the callers' poller.
    pub fn register(&self, rank: u32, link: &Link) -> std::io::Result<()> {
        self.registry.register(
            &mut SourceFd(&link.fd),
            Token(rank as usize + 1),
            Interest::READABLE | Interest::WRITABLE,
        )
    }

    fn roles(&self) -> MutexGuard<'_, Roles> {
        self.roles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes whoever waits for a change (see [`Shared::wake`]).
    pub fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
        if self.followers.load(Ordering::SeqCst) > 0 {
            drop(self.roles());
            self.cv.notify_all();
        }
    }

    /// True while a caller leads.
    pub fn leading(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }

    /// The I/O thread, which found a leader, sleeps without a hand-back
    /// timer unless the lead ended meanwhile: true when it may (the leader
    /// that steps down wakes it), false when the lead is over and the
    /// hand-back timer runs as usual. Both sides store, then load
    /// (SeqCst): one of them sees the other's store.
    pub fn park_io(&self) -> bool {
        self.io_parked.store(true, Ordering::SeqCst);
        if self.leading.load(Ordering::SeqCst) {
            return true;
        }
        self.io_parked.store(false, Ordering::SeqCst);
        false
    }

    /// When the callers last drove the sockets.
    pub fn released(&self) -> Instant {
        self.epoch + Duration::from_micros(self.released_us.load(Ordering::SeqCst))
    }

    /// Whether a caller may spin now.
    fn may_spin(&self) -> bool {
        self.epoch.elapsed().as_micros() as u64 >= self.no_spin_until_us.load(Ordering::Relaxed)
    }

    /// A yield ran other work: no spinning for a while.
    fn note_contended(&self) {
        let until = (self.epoch.elapsed() + CONTENDED_PAUSE).as_micros() as u64;
        self.no_spin_until_us.store(until, Ordering::Relaxed);
    }

    fn note_release(&self) {
        let us = self.epoch.elapsed().as_micros() as u64;
        self.released_us.store(us, Ordering::SeqCst);
    }
}

/// How a wait ended.
enum Led {
    /// Something changed: look again.
    Changed,
}

impl Shared {
    /// Blocks until `ready` returns `Some`, driving the sockets meanwhile
    /// (see the module docs). `ready` is called now and again after every
    /// change (a frame delivered, a send written, a peer departed, the
    /// job's failure), with no lock held; it must not block. The job's
    /// error ends the wait.
    pub fn wait_until<T>(
        &self,
        mut ready: impl FnMut() -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        let d = &self.driver;
        let spin = if d.may_spin() {
            self.spin()
        } else {
            Duration::ZERO
        };
        let mut spin_until = Instant::now() + spin;
        let mut leader = false;
        let result = loop {
            let gen = self.gen();
            if let Err(e) = self.check() {
                break Err(e);
            }
            if let Some(r) = ready() {
                break r;
            }
            if !leader {
                let mut roles = d.roles();
                if roles.leader {
                    // Follow: sleep until something changes or the lead
                    // is free.
                    d.followers.fetch_add(1, Ordering::SeqCst);
                    while self.gen() == gen && roles.leader {
                        roles = d.cv.wait(roles).unwrap_or_else(|e| e.into_inner());
                    }
                    d.followers.fetch_sub(1, Ordering::SeqCst);
                    continue;
                }
                roles.leader = true;
                d.leading.store(true, Ordering::SeqCst);
                leader = true;
            }
            match self.lead(gen, &mut spin_until) {
                Led::Changed => {}
            }
        };
        if leader {
            self.step_down();
        }
        result
    }

    /// Reads and writes what the sockets hold now, without blocking (when
    /// another thread leads, it does that already).
    pub fn progress(&self) {
        let d = &self.driver;
        {
            let mut roles = d.roles();
            if roles.leader || self.error.get().is_some() {
                return;
            }
            roles.leader = true;
            d.leading.store(true, Ordering::SeqCst);
        }
        let mut ps = d.pollset.lock().unwrap_or_else(|e| e.into_inner());
        self.take_sockets();
        self.pick_unread(&mut ps);
        self.drive_once(&mut ps, Some(Duration::ZERO));
        drop(ps);
        self.step_down();
    }

    /// Ends a lead: a follower takes over, or the sockets rest with the
    /// callers until the I/O thread takes them back; bytes that wait for a
    /// socket go to the I/O thread at once.
    fn step_down(&self) {
        let d = &self.driver;
        let followers = {
            let mut roles = d.roles();
            roles.leader = false;
            d.leading.store(false, Ordering::SeqCst);
            d.note_release();
            d.followers.load(Ordering::SeqCst)
        };
        if followers > 0 {
            d.cv.notify_all();
            return;
        }
        if d.io_parked.swap(false, Ordering::SeqCst) {
            // The I/O thread sleeps without a hand-back timer: it starts one.
            self.command(Command::Released);
        }
        // A sender that saw a leader did not kick: look for its bytes.
        for (rank, link) in self.links() {
            if !link.io_owns.load(Ordering::SeqCst) && link.backlog.load(Ordering::SeqCst) {
                self.command(Command::Kick { to: rank });
            }
        }
    }

    /// Takes every socket the I/O thread has out of its poller.
    fn take_sockets(&self) {
        for (_, link) in self.links() {
            if !link.io_owns.load(Ordering::SeqCst) {
                continue;
            }
            let g = link.lock();
            if link.io_owns.swap(false, Ordering::SeqCst) && !g.dead {
                let _ = self.io_registry.deregister(&mut SourceFd(&link.fd));
            }
        }
    }

    /// Leads until the change counter moves past `gen`: busy-polls until
    /// `spin_until` (sooner, when the core turns out to be contended), then
    /// sleeps in the kernel.
    fn lead(&self, gen: u64, spin_until: &mut Instant) -> Led {
        let d = &self.driver;
        let mut ps = d.pollset.lock().unwrap_or_else(|e| e.into_inner());
        self.take_sockets();
        loop {
            self.pick_unread(&mut ps);
            let spinning = Instant::now() < *spin_until;
            if !ps.unfinished.is_empty() || spinning {
                self.drive_once(&mut ps, Some(Duration::ZERO));
                if self.gen() != gen {
                    return Led::Changed;
                }
                if spinning {
                    // Another runnable thread (other work on the host, a
                    // peer rank on an oversubscribed core) gets the core
                    // now; alone, the yield returns at once.
                    let t = Instant::now();
                    std::thread::yield_now();
                    if t.elapsed() > CONTENDED {
                        d.note_contended();
                        *spin_until = Instant::now();
                    }
                }
                continue;
            }
            d.sleeping.store(true, Ordering::SeqCst);
            if self.gen() != gen {
                d.sleeping.store(false, Ordering::SeqCst);
                return Led::Changed;
            }
            self.drive_once(&mut ps, Some(NAP));
            if self.gen() != gen {
                return Led::Changed;
            }
            // Sockets the I/O thread took back meanwhile come back.
            self.take_sockets();
        }
    }

    /// Sockets the I/O thread left with bytes unread (no socket event will
    /// come for those) join the leader's unfinished ones.
    fn pick_unread(&self, ps: &mut Pollset) {
        if !self.driver.unread_any.load(Ordering::SeqCst)
            || !self.driver.unread_any.swap(false, Ordering::SeqCst)
        {
            return;
        }
        for (rank, link) in self.links() {
            if link.unread.swap(false, Ordering::SeqCst) && !ps.unfinished.contains(&rank) {
                ps.unfinished.push(rank);
            }
        }
    }

    /// One turn of the callers' poller: waits up to `timeout`, then
    /// services every socket it reports and those left unfinished.
    fn drive_once(&self, ps: &mut Pollset, timeout: Option<Duration>) {
        let Pollset {
            poll,
            events,
            unfinished,
        } = ps;
        let timeout = if unfinished.is_empty() {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        let polled = poll.poll(events, timeout);
        // Awake: what this thread delivers now needs no wake-up of itself.
        self.driver.sleeping.store(false, Ordering::SeqCst);
        if polled.is_err() {
            // EINTR and the like: the next turn polls again.
            return;
        }
        let mut todo: Vec<(u32, bool, bool)> = std::mem::take(unfinished)
            .into_iter()
            .map(|r| (r, true, false))
            .collect();
        for ev in events.iter() {
            if ev.token() == WAKER {
                continue;
            }
            let rank = (ev.token().0 - 1) as u32;
            let readable = ev.is_readable() || ev.is_read_closed() || ev.is_error();
            todo.push((rank, readable, ev.is_writable()));
        }
        for (rank, readable, writable) in todo {
            let Some(link) = self.link(rank) else {
                continue;
            };
            let s = if readable {
                service::service(self, &link, rank, TURN)
            } else if writable {
                service::flush(self, &link, rank)
            } else {
                continue;
            };
            if s.more && !unfinished.contains(&rank) {
                unfinished.push(rank);
            }
            self.serviced(&link, rank, s);
        }
    }

    /// Acts on what servicing a socket found, on a caller's thread: an
    /// error ends the job step (the I/O thread sends the ABORT).
    fn serviced(&self, _link: &Arc<Link>, _rank: u32, s: Serviced) {
        if let Some(e) = s.error {
            if self.fail(e, false) {
                self.command(Command::Failed);
            }
        }
        if s.delivered {
            self.wake();
        }
    }
}
