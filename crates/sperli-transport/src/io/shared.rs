//! The state one rank's threads share: the receive state, the job's
//! error, the links to the peers, the settings that may change at run
//! time, and the way to the I/O thread.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use mio::{Registry, Waker};
use sperli_wire::error::UsageError;
use sperli_wire::recovery::FEATURE_MEMBERSHIP;
use sperli_wire::Error;

use crate::io::driver::Driver;
use crate::io::link::Link;
use crate::io::recovery::Recovery;
use crate::pool::BufPool;
use crate::proto::close_grace::{self, CloseGrace};
use crate::proto::connection::JobContext;
use crate::proto::ending::AbortFrame;
use crate::proto::matching::Matching;
use crate::ErrorMode;

/// From the program's threads to the I/O thread.
#[derive(Debug)]
pub(crate) enum Command {
    /// Bytes wait for peer `to`'s socket and no caller drives it: the I/O
    /// thread takes it back and writes them as the socket drains.
    Kick { to: u32 },
    /// A caller ended the job step (the error is published): ABORT to
    /// every peer, close, linger.
    Failed,
    /// The program aborts: this ABORT to every peer, close, linger (the
    /// error is published).
    Abort(AbortFrame),
    /// Normal end: BYE to all, close_notify, close.
    Finish,
    /// The recovery has RECOVER frames to send or connections to close
    /// (feature bit 5, protocol §18.6).
    Recovery,
    /// The last leader stepped down while the I/O thread was parked
    /// (`Driver::park_io`): its hand-back timer starts now.
    Released,
    /// A close without BYE is held (protocol §7.5): the I/O thread ends
    /// the step with it at its deadline unless an ABORT came first.
    Settle,
}

/// See the module docs.
pub(crate) struct Shared {
    pub ctx: Arc<JobContext>,
    state: Mutex<Matching>,
    /// Counts every change a waiter may be waiting for (a delivery, a
    /// written send, a departure, the job's failure).
    gen: AtomicU64,
    /// The job's error, set once.
    pub error: OnceLock<Error>,
    fail_lock: Mutex<()>,
    /// The grace of the first close without BYE (protocol §7.5).
    close_grace: Mutex<CloseGrace>,
    /// The error is the program's own `abort`.
    local_abort: AtomicBool,
    /// Large payload buffers for reuse (received frames, written frames).
    pub pool: Arc<BufPool>,
    /// This rank's HELLO features ANDed with every authenticated peer's
    /// (protocol §7.1.1).
    pub job_features: AtomicU64,
    /// Per rank: the authenticated peer's link, set at its
    /// authentication (again for a replacement that joins, protocol
    /// §18.7). Weak: the I/O thread owns the sockets and closes them by
    /// dropping its references.
    links: Vec<RwLock<Weak<Link>>>,
    /// The callers' side of the sockets.
    pub driver: Driver,
    cmds: Sender<Command>,
    io_waker: Waker,
    /// The I/O thread's poller, where callers take sockets out of.
    pub io_registry: Registry,
    errors: AtomicU8,
    spin_ns: AtomicU64,
    /// How long a failing rank keeps its connections.
    pub linger: Duration,
    /// Set-up completed (every peer authenticated).
    pub setup_done: AtomicBool,
    /// The normal end completed.
    pub finished: AtomicBool,
    /// The I/O work of the step is over (every socket closed).
    pub io_ended: AtomicBool,
    error_file: Option<PathBuf>,
    /// Feature bit 5's recovery, when this rank has a control channel
    /// (protocol §18.1).
    pub recovery: Option<Recovery>,
    /// The program can go on after a lost peer
    /// ([`Settings::recoverable`](crate::Settings::recoverable)).
    recoverable: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("rank", &self.ctx.rank)
            .finish_non_exhaustive()
    }
}

/// What [`Shared::new`] needs.
pub(crate) struct SharedParts {
    pub ctx: Arc<JobContext>,
    pub driver: Driver,
    pub cmds: Sender<Command>,
    pub io_waker: Waker,
    pub io_registry: Registry,
    pub errors: ErrorMode,
    pub spin: Duration,
    pub linger: Duration,
    pub error_file: Option<PathBuf>,
    pub recovery: Option<Recovery>,
    pub recoverable: bool,
}

fn mode_code(m: ErrorMode) -> u8 {
    match m {
        ErrorMode::Fatal => 0,
        ErrorMode::Return => 1,
    }
}

impl Shared {
    pub fn new(p: SharedParts) -> Self {
        let size = p.ctx.size;
        Self {
            state: Mutex::new(Matching::new(size, p.ctx.rank)),
            gen: AtomicU64::new(0),
            error: OnceLock::new(),
            fail_lock: Mutex::new(()),
            close_grace: Mutex::default(),
            local_abort: AtomicBool::new(false),
            pool: Arc::default(),
            job_features: AtomicU64::new(p.ctx.features),
            links: (0..size).map(|_| RwLock::new(Weak::new())).collect(),
            driver: p.driver,
            cmds: p.cmds,
            io_waker: p.io_waker,
            io_registry: p.io_registry,
            errors: AtomicU8::new(mode_code(p.errors)),
            spin_ns: AtomicU64::new(p.spin.as_nanos() as u64),
            linger: p.linger,
            setup_done: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            io_ended: AtomicBool::new(false),
            error_file: p.error_file,
            recovery: p.recovery,
            recoverable: AtomicBool::new(p.recoverable),
            ctx: p.ctx,
        }
    }

    /// The receive state (lock order: a link's lock first, if any).
    pub fn state(&self) -> MutexGuard<'_, Matching> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The change counter.
    pub fn gen(&self) -> u64 {
        self.gen.load(Ordering::SeqCst)
    }

    /// Counts a change; [`Shared::wake`] (after every lock is released)
    /// tells the waiters.
    pub fn bump(&self) {
        self.gen.fetch_add(1, Ordering::SeqCst);
    }

    /// Wakes the threads that wait for a change: the caller that drives
    /// the sockets, if it sleeps in the kernel, and the callers that wait
    /// for it.
    pub fn wake(&self) {
        self.driver.wake();
    }

    /// [`Shared::bump`] and [`Shared::wake`].
    pub fn changed(&self) {
        self.bump();
        self.wake();
    }

    /// The error mode now in force.
    pub fn errors(&self) -> ErrorMode {
        match self.errors.load(Ordering::Relaxed) {
            0 => ErrorMode::Fatal,
            _ => ErrorMode::Return,
        }
    }

    /// Changes the error mode.
    pub fn set_errors(&self, m: ErrorMode) {
        self.errors.store(mode_code(m), Ordering::Relaxed);
    }

    /// How long a waiting caller busy-polls.
    pub fn spin(&self) -> Duration {
        Duration::from_nanos(self.spin_ns.load(Ordering::Relaxed))
    }

    /// Changes the spin time.
    pub fn set_spin(&self, d: Duration) {
        self.spin_ns
            .store(d.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    /// True when the error is the program's own `abort`.
    pub fn aborted_locally(&self) -> bool {
        self.local_abort.load(Ordering::SeqCst)
    }

    /// Ends the job step with `error`, unless it already ended: writes the
    /// failure record first (the program may exit as soon as it sees the
    /// error, and the launcher reads the record then), publishes the error
    /// and wakes every waiter. True when `error` became the job's error.
    /// `local`: the program's own `abort`. The caller then has the I/O
    /// thread send the ABORT ([`Shared::command`]) unless it is the I/O
    /// thread.
    pub fn fail(&self, error: Error, local: bool) -> bool {
        if !local && self.recover_from(&error) {
            return false;
        }
        if !local && self.hold_loss(&error).is_some() {
            self.command(Command::Settle);
            return false;
        }
        self.publish(error, local)
    }

    /// [`Shared::fail`] without the recovery and the grace.
    fn publish(&self, error: Error, local: bool) -> bool {
        {
            let _g = self.fail_lock.lock().unwrap_or_else(|e| e.into_inner());
            if self.error.get().is_some() {
                return false;
            }
            if let Some(path) = &self.error_file {
                crate::failure_record::write(
                    &crate::failure_record::FailureRecord::of(&error),
                    path,
                );
            }
            self.local_abort.store(local, Ordering::SeqCst);
            let _ = self.error.set(error);
        }
        if let Some(r) = &self.recovery {
            r.wake();
        }
        self.changed();
        true
    }

    /// Holds `error` back when it is a close without BYE and the grace is
    /// not spent (protocol §7.5, [`CloseGrace`]): `Some(deadline)`, and
    /// the step does not end now. `None` when it counts now (also once the
    /// step has its error: nothing is to wait for).
    pub fn hold_loss(&self, error: &Error) -> Option<Instant> {
        if self.error.get().is_some() {
            return None;
        }
        self.grace().handle_loss(error, Instant::now())
    }

    /// Ends the step with the held close once its grace is over at `now`,
    /// unless it has its error already (an ABORT came meanwhile). Returns
    /// the error when it became the step's: the caller then has the ABORT
    /// sent, as after [`Shared::fail`]. Published under the grace's lock,
    /// so whoever finds the grace spent finds the error set.
    pub fn settle_due(&self, now: Instant) -> Option<Error> {
        let mut g = self.grace();
        let due = g.poll(now)?;
        self.publish(due.clone(), false).then_some(due)
    }

    /// When the held close falls due, while one is held.
    pub fn grace_deadline(&self) -> Option<Instant> {
        self.grace().deadline()
    }

    /// On a caller's thread that needs the step's error now (a write to a
    /// closed socket): waits out a held close's grace, ending the step
    /// with it at its deadline if nothing else did (the I/O thread may be
    /// first; either way the error is set when this returns, unless no
    /// close was held).
    pub fn await_settled(&self) {
        while self.error.get().is_none() {
            let Some(deadline) = self.grace_deadline() else {
                return;
            };
            let now = Instant::now();
            if now >= deadline {
                if self.settle_due(now).is_some() {
                    self.command(Command::Failed);
                }
                return;
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(2)));
        }
    }

    fn grace(&self) -> MutexGuard<'_, CloseGrace> {
        self.close_grace.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a lost peer starts a recovery instead of ending the job
    /// step (protocol §18.6): the job negotiated feature bit 5, set-up is
    /// done, the program takes errors itself (`ErrorMode::Return`) and
    /// can go on after a loss ([`Shared::set_recoverable`]).
    pub fn recovering(&self) -> bool {
        self.recovery.is_some()
            && self.job_features.load(Ordering::SeqCst) & FEATURE_MEMBERSHIP != 0
            && self.setup_done.load(Ordering::SeqCst)
            && self.errors() == ErrorMode::Return
            && self.recoverable.load(Ordering::SeqCst)
            && self.error.get().is_none()
    }

    /// Whether the program can go on after a lost peer (see
    /// [`Settings::recoverable`](crate::Settings::recoverable)).
    pub fn set_recoverable(&self, on: bool) {
        self.recoverable.store(on, Ordering::SeqCst);
    }

    /// See [`Shared::set_recoverable`].
    pub fn recoverable(&self) -> bool {
        self.recoverable.load(Ordering::SeqCst)
    }

    /// Takes `error` into the recovery when it is the loss of a peer (a
    /// close without BYE, silence, a reset, or ABORT reason 1: the peer
    /// ends itself; reason 2, the program's abort of the job, ends it as in
    /// v1, protocol §18.6) and the rank is
    /// [`Shared::recovering`]: the epoch is revoked, the I/O thread sends
    /// the REVOKEs. True when the recovery took it.
    pub fn recover_from(&self, error: &Error) -> bool {
        // Protocol §18.6 step 2: a close (FIN or reset) is seen by every
        // member at once when a process ends; silence and ABORT are not.
        let (peer, closed) = match error {
            Error::PeerLost { peer, .. } => (*peer, close_grace::is_close_loss(error)),
            Error::AbortedByPeer {
                from, reason: 1, ..
            } => (*from, false),
            _ => return false,
        };
        let Some(r) = &self.recovery else {
            return false;
        };
        if !self.recovering() {
            return false;
        }
        {
            let mut st = self.state();
            r.peer_lost(peer, closed, &mut st, &self.ctx.membership);
        }
        self.command(Command::Recovery);
        self.changed();
        true
    }

    /// Sends `cmd` to the I/O thread and wakes it. False when it is gone.
    pub fn command(&self, cmd: Command) -> bool {
        self.cmds.send(cmd).is_ok() && self.io_waker.wake().is_ok()
    }

    /// The link to `rank`, while its socket exists.
    pub fn link(&self, rank: u32) -> Option<Arc<Link>> {
        self.links
            .get(rank as usize)?
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade()
    }

    /// The links of every rank that has one now, by rank.
    pub fn links(&self) -> impl Iterator<Item = (u32, Arc<Link>)> + '_ {
        (0..self.links.len() as u32).filter_map(|r| Some((r, self.link(r)?)))
    }

    /// `link` is `rank`'s authenticated connection from now on (at set-up,
    /// or a replacement's join, protocol §18.7).
    pub fn set_link(&self, rank: u32, link: &Arc<Link>) {
        if let Some(slot) = self.links.get(rank as usize) {
            *slot.write().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(link);
        }
    }

    /// The job's state for a new call: the error, or after the normal end
    /// a usage error.
    pub fn check(&self) -> Result<(), Error> {
        match self.error.get() {
            Some(e) => Err(e.clone()),
            None if self.finished.load(Ordering::SeqCst) => Err(UsageError::AfterFinish.into()),
            None => match self.recovery.as_ref().and_then(|r| r.revoked()) {
                Some(e) => Err(e),
                None => Ok(()),
            },
        }
    }

    /// Written sends (`seqs`) for their waiters, who are woken.
    pub fn mark_written(&self, seqs: &mut Vec<u64>) {
        if self.note_written(seqs) {
            self.wake();
        }
    }

    /// As [`Shared::mark_written`] without waking anyone (under a link's
    /// lock; the caller wakes the waiters once it released it). True when
    /// there was something to note.
    pub fn note_written(&self, seqs: &mut Vec<u64>) -> bool {
        if seqs.is_empty() {
            return false;
        }
        let mut st = self.state();
        for s in seqs.drain(..) {
            st.handle_written(s);
        }
        drop(st);
        self.bump();
        true
    }
}
