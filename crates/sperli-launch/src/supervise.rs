//! Starting ranks and watching them: stdin hand-over of the job
//! description, output, exit status, the root cause, timeouts, signals,
//! and the end of every process of the job (docs/launcher.md).
//!
//! A rank's job description goes only to its stdin (never an argument, an
//! environment variable, a file or a log). Each rank leads a process
//! group of its own ([`crate::os`]); signals go to the group, so what a
//! rank starts ends with it. A rank's group is waited for as a whole: the
//! launcher binary is the reaper of its ranks' orphans, so the job ends
//! when no process of any rank's group is left. The job's watchdog
//! ([`crate::watchdog`]) ends the groups if the launcher dies first.
//!
//! Call [`run_job`] from a thread that lives as long as the job (the main
//! thread): the ranks' death signal fires when the thread that spawned
//! them ends.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use sperli_wire::failure_record::{self, FailureRecord};

use crate::control::{ChannelLine, ControlPair, CONTROL_FD, CONTROL_FD_ENV};
use crate::listen_ahead::LISTEN_FD;
use crate::os::{inherit_fd_at, is_subreaper, signal_group};
use crate::outcome::{Blame, Outcome};
use sperli_transport::inherited::LISTEN_FD_ENV;
// `crate::supervise::EXIT_USAGE` is the path `mailbox_cli` uses.
pub(crate) use crate::outcome::EXIT_USAGE;
use crate::output::{open_output_file, pump, PumpEvent, PumpTarget, Sink, Stream};
use crate::procfs::{proc_state, ProcState};
use crate::rank_exit::RankExit;
use crate::record_dir::RecordDir;
use crate::recovery::{Recovery, RecoveryPlan};
use crate::root_cause::{root_cause, Cause, Failure, Liveness, Verdict};
use crate::spawn::{
    command_for, os_error_text, Control, RankLaunch, SpawnFailure, StartError, Via,
};
use crate::stdin_feed::{StdinFeed, END_LINE};
use crate::watchdog::Watchdog;

pub(crate) mod recover;

/// How long after its spawn a rank must have started (for a wrapped rank:
/// its wrapper said so) before the launcher gives up on it: the ranks'
/// set-up window plus this margin.
pub const SETUP_MARGIN: Duration = Duration::from_secs(5);

/// Supervision settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Remote-shell template for [`Via::Rsh`] ranks; `{host}` is replaced.
    pub rsh: String,
    /// Write rank output without the `[rank]` prefix.
    pub raw_output: bool,
    /// `--output-dir`: also write each rank's output to
    /// `DIR/rank-<r>/{stdout,stderr}`.
    pub output_dir: Option<PathBuf>,
    /// Append to the output files (a later incarnation) instead of
    /// truncating them.
    pub output_append: bool,
    /// After the first failure, how long the other ranks get to stop on
    /// their own (they notice within the silence limit) before SIGTERM;
    /// also how long the launcher waits for a blamed rank to exit.
    pub wait_after_failure: Duration,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// End the job after this long.
    pub timeout: Option<Duration>,
    /// A rank that has not started this long after its spawn fails the
    /// job (the set-up window plus [`SETUP_MARGIN`]).
    pub start_deadline: Duration,
    /// What rank 0 reads on its stdin after its job description: the
    /// launcher's stdin, or an empty stream (docs/launcher.md, "Standard
    /// input").
    pub stdin: StdinFeed,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            rsh: crate::spawn::DEFAULT_RSH.into(),
            raw_output: false,
            output_dir: None,
            output_append: false,
            wait_after_failure: Duration::from_secs(7),
            grace: Duration::from_secs(3),
            timeout: None,
            start_deadline: Duration::from_millis(sperli_wire::limits::SETUP_WINDOW_MS)
                + SETUP_MARGIN,
            stdin: StdinFeed::empty(),
        }
    }
}

/// Whether `host` is this machine (spawned as a child process).
pub fn is_local(host: &str) -> bool {
    sperli_wire::host::is_loopback(host)
}

/// What the supervisor hears from the helper threads of rank `.0` (its
/// index in the job).
#[derive(Debug)]
enum Event {
    Exited(usize, RankExit),
    GroupEmpty(usize),
    Pump(usize, PumpEvent),
    Channel(usize, ChannelLine),
}

/// One started rank.
struct Slot {
    rank: u32,
    host: String,
    via: Via,
    child: Child,
    pgid: u32,
    spawned_at: Instant,
    started: bool,
    exit: Option<(RankExit, Instant)>,
    finalized: bool,
    record: Option<FailureRecord>,
    open_streams: u8,
    group_empty: bool,
    /// Dropping it closes a wrapped rank's stdin (its watchdog ends it)
    /// and stops the forwarding of the launcher's stdin to rank 0.
    _stdin_hold: Option<Sender<()>>,
    /// The launcher's end of the rank's control channel.
    control: Option<std::os::unix::net::UnixStream>,
    /// Its incarnation (with a recovery: the job's, or a replacement's).
    incarnation: u32,
}

/// Waits for every process of the group `pgid` the launcher is the parent
/// of: the leader's exit, then (with the launcher as subreaper) its
/// orphans'.
fn reap_group(idx: usize, pgid: u32, tx: Sender<Event>) {
    use nix::sys::wait::{waitpid, WaitStatus};
    let Ok(leader) = i32::try_from(pgid) else {
        return;
    };
    let mut reported = false;
    loop {
        match waitpid(Pid::from_raw(-leader), None) {
            Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == leader => {
                reported = true;
                let _ = tx.send(Event::Exited(idx, RankExit::Code(code)));
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid.as_raw() == leader => {
                reported = true;
                let _ = tx.send(Event::Exited(idx, RankExit::Signal(sig as i32)));
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
    }
    if !reported {
        // Reaped elsewhere: the status is lost.
        let _ = tx.send(Event::Exited(idx, RankExit::Code(255)));
    }
    let _ = tx.send(Event::GroupEmpty(idx));
}

/// Opens the output files of `rank` when `--output-dir` is set.
fn output_files(
    opts: &Options,
    rank: u32,
) -> Result<(Option<std::fs::File>, Option<std::fs::File>), String> {
    let Some(dir) = &opts.output_dir else {
        return Ok((None, None));
    };
    let open = |s| {
        open_output_file(dir, rank, s, opts.output_append).map_err(|e| {
            format!(
                "cannot write --output-dir {}: {}",
                dir.display(),
                os_error_text(&e)
            )
        })
    };
    Ok((Some(open(Stream::Stdout)?), Some(open(Stream::Stderr)?)))
}

/// A rank whose process runs, before its helper threads do.
struct Spawned {
    launch: RankLaunch,
    child: Child,
    files: (Option<std::fs::File>, Option<std::fs::File>),
    at: Instant,
    control: Option<std::os::unix::net::UnixStream>,
}

/// Starts the process of rank `r`. Every rank is spawned before any
/// helper thread starts: a fork is cheaper while the launcher has few
/// threads (the death signal needs `pre_exec`, so `fork` it is).
fn spawn_rank(
    r: RankLaunch,
    opts: &Options,
    records: Option<&RecordDir>,
    with_control: bool,
    listener: Option<std::os::fd::OwnedFd>,
) -> Result<Spawned, SpawnFailure> {
    let fail = |error: StartError, what: String| SpawnFailure {
        rank: r.rank,
        host: r.host.clone(),
        error,
        what,
    };
    let mut cmd = command_for(&r, &opts.rsh).map_err(|e| fail(StartError::Other, e.to_string()))?;
    let files = output_files(opts, r.rank).map_err(|e| fail(StartError::Other, e))?;
    if let (Some(d), Via::Direct) = (records, &r.via) {
        cmd.env(failure_record::ENV_VAR, d.file(r.rank));
    }
    let mut control = None;
    if with_control && r.via == Via::Direct {
        let pair = ControlPair::new().map_err(|e| {
            fail(
                StartError::Other,
                format!("control channel: {}", os_error_text(&e)),
            )
        })?;
        cmd.env(CONTROL_FD_ENV, CONTROL_FD.to_string());
        inherit_fd_at(&mut cmd, pair.rank, CONTROL_FD);
        control = Some(pair.launcher);
    }
    if let (Some(l), Via::Direct) = (listener, &r.via) {
        // After the control channel's move to 3: the listener's copy is at
        // 10 or above, out of its way (listen_ahead).
        cmd.env(LISTEN_FD_ENV, LISTEN_FD.to_string());
        inherit_fd_at(&mut cmd, l, LISTEN_FD);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().map_err(|e| {
        let what = cmd.get_program().to_string_lossy().into_owned();
        fail(
            StartError::of_os_error(&e),
            format!("{what}: {}", os_error_text(&e)),
        )
    })?;
    Ok(Spawned {
        launch: r,
        child,
        files,
        at: Instant::now(),
        control,
    })
}

/// Starts the helper threads of a spawned rank (job index `idx`): its
/// output pumps, the hand-over of its job description, the waiter of its
/// process group.
fn attach_rank(idx: usize, s: Spawned, opts: &Options, lock: &Sink, tx: &Sender<Event>) -> Slot {
    let Spawned {
        launch: r,
        mut child,
        files: (out_file, err_file),
        at,
        control,
    } = s;
    if let Some(reader) = control.as_ref().and_then(|c| c.try_clone().ok()) {
        let tx = tx.clone();
        thread::spawn(move || {
            crate::control::read_lines(reader, |l| drop(tx.send(Event::Channel(idx, l))))
        });
    }
    let prefix = (!opts.raw_output).then(|| format!("[{}] ", r.rank));
    let report = |tx: Sender<Event>| move |e| drop(tx.send(Event::Pump(idx, e)));
    if let Some(out) = child.stdout.take() {
        let target = PumpTarget {
            stream: Stream::Stdout,
            prefix: prefix.clone(),
            file: out_file,
            controls: false,
        };
        pump(out, target, lock.clone(), report(tx.clone()));
    }
    if let Some(err) = child.stderr.take() {
        let target = PumpTarget {
            stream: Stream::Stderr,
            prefix,
            file: err_file,
            controls: r.via.wrapped(),
        };
        pump(err, target, lock.clone(), report(tx.clone()));
    }
    let mut hold = None;
    if let Some(mut stdin) = child.stdin.take() {
        let line = r.stdin_line;
        let wrapped = r.via.wrapped();
        // Rank 0's stdin goes on with the launcher's (crate::stdin_feed).
        let feed = (r.rank == 0).then(|| opts.stdin.clone());
        // A thread of its own: a description larger than the pipe buffer
        // must not block the launcher. A wrapped rank's stdin stays open
        // until the job ends: its end is what ends the remote rank. Rank
        // 0's forwarding stops when this run of the job ends.
        let (keep_tx, keep_rx) = crossbeam_channel::bounded::<()>(0);
        if wrapped || feed.is_some() {
            hold = Some(keep_tx);
        }
        thread::spawn(move || {
            if stdin.write_all(line.as_bytes()).is_ok() {
                match feed {
                    Some(feed) => feed.forward(&mut stdin, wrapped, &keep_rx),
                    None if wrapped => drop(stdin.write_all(END_LINE)),
                    None => {}
                }
            }
            if !wrapped {
                drop(stdin);
            }
            let _ = keep_rx.recv();
        });
    }
    let pgid = child.id();
    let waiter = tx.clone();
    thread::spawn(move || reap_group(idx, pgid, waiter));
    Slot {
        rank: r.rank,
        host: r.host,
        started: !r.via.wrapped(),
        via: r.via,
        child,
        pgid,
        spawned_at: at,
        exit: None,
        finalized: false,
        record: None,
        open_streams: 2,
        group_empty: false,
        _stdin_hold: hold,
        control,
        incarnation: 0,
    }
}

/// How long after the first failure other failures still count when the
/// root cause is chosen.
const ROOT_CAUSE_WINDOW: Duration = Duration::from_millis(150);

/// How long a wrapped rank's stderr may lag behind its exit (its failure
/// record comes on it).
const RECORD_LAG: Duration = Duration::from_millis(500);

/// How long the output of ended ranks may take to drain.
const DRAIN: Duration = Duration::from_secs(1);

/// The state of one run of a job.
struct Job<'a> {
    /// How each rank was started (without its description), for its
    /// replacement.
    launches: Vec<RankLaunch>,
    /// For the helper threads of a replacement.
    tx: Sender<Event>,
    lock: Sink,
    slots: Vec<Slot>,
    opts: &'a Options,
    records: Option<RecordDir>,
    watchdog: Option<Watchdog>,
    failures: Vec<Failure>,
    first_failure: Option<Instant>,
    outcome: Option<Outcome>,
    /// End every rank now (not after the wait for failures).
    end_now: bool,
    termed_at: Option<Instant>,
    killed: bool,
    reaper: bool,
    /// The Decider's driver (`--recover inplace|shrink`).
    recovery: Option<Recovery<'a>>,
}

impl Job<'_> {
    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Exited(i, e) => self.slots[i].exit = Some((e, Instant::now())),
            Event::GroupEmpty(i) => {
                self.slots[i].group_empty = true;
                let pgid = self.slots[i].pgid;
                if let Some(w) = &mut self.watchdog {
                    w.forget(pgid);
                }
            }
            Event::Channel(i, line) => {
                if let Some(rec) = &mut self.recovery {
                    rec.on_line(self.slots[i].rank, self.slots[i].incarnation, line);
                }
            }
            Event::Pump(i, PumpEvent::Closed(_)) => {
                self.slots[i].open_streams = self.slots[i].open_streams.saturating_sub(1)
            }
            Event::Pump(i, PumpEvent::Control(c)) => match c {
                Control::Started => self.slots[i].started = true,
                Control::Record(line) => self.slots[i].record = FailureRecord::parse(&line),
                Control::CannotStart(error, what) => {
                    if self.outcome.is_none() {
                        let s = &self.slots[i];
                        self.outcome = Some(Outcome::SpawnFailed(SpawnFailure {
                            rank: s.rank,
                            host: s.host.clone(),
                            error,
                            what,
                        }));
                        self.end_now = true;
                    }
                }
            },
        }
    }

    /// Turns exits into failures (a wrapped rank's once its record came).
    fn collect_failures(&mut self) {
        for s in &mut self.slots {
            let Some((exit, at)) = s.exit else {
                continue;
            };
            if s.finalized || (s.via.wrapped() && s.open_streams > 0 && at.elapsed() < RECORD_LAG) {
                continue;
            }
            s.finalized = true;
            if exit.success() || self.outcome.is_some() {
                continue;
            }
            if s.via.wrapped() && !s.started {
                let verdict = Verdict {
                    rank: s.rank,
                    cause: Cause::StartFailed(exit),
                    also: Vec::new(),
                    exit_code: exit.exit_code().max(1),
                    abort: None,
                };
                let host = s.host.clone();
                self.outcome = Some(Outcome::Failed(Blame { verdict, host }));
                self.end_now = true;
                continue;
            }
            let record = match (&s.via, &self.records) {
                (Via::Direct, Some(d)) => d.read(s.rank),
                (Via::Direct, None) => None,
                _ => s.record.take(),
            };
            let failure = Failure {
                rank: s.rank,
                exit,
                record,
            };
            match &mut self.recovery {
                // A fenced rank's end is the launcher's doing.
                Some(rec) if rec.active() && rec.fenced(s.rank, s.incarnation) => {}
                Some(rec) if rec.active() => rec.on_exit(failure, s.incarnation),
                _ => {
                    self.failures.push(failure);
                    self.first_failure.get_or_insert_with(Instant::now);
                }
            }
        }
    }

    /// The newest process of `rank` (a replacement's, after one).
    fn slot_of(&self, rank: u32) -> Option<&Slot> {
        self.slots.iter().rev().find(|s| s.rank == rank)
    }

    fn liveness(&self, rank: u32) -> Liveness {
        let Some(s) = self.slot_of(rank) else {
            return Liveness::Exited;
        };
        match s.exit {
            Some((e, _)) if e.success() => Liveness::Exited,
            Some(_) => Liveness::Running,
            None if !s.started => Liveness::NotStarted,
            None if s.via == Via::Direct && proc_state(s.pgid) == ProcState::Stopped => {
                Liveness::Stopped
            }
            None => Liveness::Running,
        }
    }

    /// Decides the root cause once the failures so far explain the job's
    /// end (see the module docs of [`crate::root_cause`]).
    fn decide(&mut self) {
        if self.outcome.is_some() || self.failures.is_empty() {
            return;
        }
        let Some(v) = root_cause(&self.failures, &|r| self.liveness(r)) else {
            return;
        };
        let waited = self.first_failure.map_or(Duration::ZERO, |f| f.elapsed());
        let all_exited = self.slots.iter().all(|s| s.finalized);
        let accept = all_exited
            || waited >= self.opts.wait_after_failure
            || (waited >= ROOT_CAUSE_WINDOW
                && match v.cause {
                    Cause::Exited(..) => true,
                    Cause::NotStarted => self
                        .slots
                        .iter()
                        .all(|s| s.rank == v.rank || s.exit.is_some()),
                    // The blamed rank has not exited: it is the root cause
                    // once nobody else is left to explain the failure and
                    // /proc shows it alive (stopped or running, not about
                    // to be reaped). A rank behind a remote shell or srun
                    // cannot be looked at, and its exit takes longer to
                    // come: it gets the whole wait.
                    _ => {
                        let others_done = self
                            .slots
                            .iter()
                            .all(|s| s.rank == v.rank || s.exit.is_some());
                        let visibly_alive = self.slots.iter().any(|s| {
                            s.rank == v.rank
                                && s.exit.is_none()
                                && s.via == Via::Direct
                                && proc_state(s.pgid) != ProcState::Gone
                        });
                        others_done && visibly_alive
                    }
                });
        if accept {
            let host = self
                .slots
                .iter()
                .find(|s| s.rank == v.rank)
                .map_or_else(String::new, |s| s.host.clone());
            if v.still_running() {
                self.end_now = true;
            }
            self.outcome = Some(Outcome::Failed(Blame { verdict: v, host }));
        }
    }

    /// The launcher's own set-up deadline: ranks that never started.
    fn check_starts(&mut self) {
        if self.outcome.is_some() {
            return;
        }
        let late = self.slots.iter().find(|s| {
            !s.started && s.exit.is_none() && s.spawned_at.elapsed() >= self.opts.start_deadline
        });
        if let Some(first) = late {
            // Every other rank that has not started either is named too.
            let also = self
                .slots
                .iter()
                .filter(|s| !s.started && s.exit.is_none() && s.rank != first.rank)
                .map(|s| s.rank)
                .collect();
            let verdict = Verdict {
                rank: first.rank,
                cause: Cause::NotStarted,
                also,
                exit_code: 1,
                abort: None,
            };
            let host = first.host.clone();
            self.outcome = Some(Outcome::Failed(Blame { verdict, host }));
            self.end_now = true;
        }
    }

    fn signal_all(&mut self, sig: Signal) {
        for s in &self.slots {
            if !s.group_empty {
                signal_group(s.pgid, sig);
                if sig == Signal::SIGTERM {
                    // A stopped rank handles SIGTERM only once it runs.
                    signal_group(s.pgid, Signal::SIGCONT);
                }
            }
        }
    }

    /// SIGTERM when it is time, SIGKILL after the grace.
    fn terminate(&mut self) {
        let all_exited = self.slots.iter().all(|s| s.exit.is_some());
        let due = self.end_now
            || self
                .first_failure
                .is_some_and(|f| f.elapsed() >= self.opts.wait_after_failure)
            // Every rank's first process ended: what they left in their
            // groups ends too.
            || (all_exited && self.slots.iter().any(|s| !s.group_empty));
        if due && self.termed_at.is_none() {
            self.signal_all(Signal::SIGTERM);
            self.termed_at = Some(Instant::now());
        }
        if let Some(t) = self.termed_at {
            if !self.killed && t.elapsed() >= self.opts.grace {
                self.signal_all(Signal::SIGKILL);
                self.killed = true;
            }
        }
    }

    fn done(&self, drain_since: &mut Option<Instant>) -> bool {
        let leaders = self.slots.iter().all(|s| s.finalized);
        // Without the launcher as subreaper an empty-looking group may
        // still hold orphans: they get the final SIGKILL below.
        let groups = self.slots.iter().all(|s| s.group_empty) || self.killed;
        if !(leaders && groups) {
            return false;
        }
        let start = *drain_since.get_or_insert_with(Instant::now);
        self.slots.iter().all(|s| s.open_streams == 0) || start.elapsed() >= DRAIN
    }
}

/// [`run_job_recovering`] without a recovery (`--recover restart`).
#[cfg(test)]
pub(crate) fn run_job(ranks: Vec<RankLaunch>, opts: &Options, interrupt: &AtomicI32) -> Outcome {
    run_job_recovering(ranks, opts, interrupt, None)
}

/// Starts every rank, streams output, and waits for the job to end.
/// `interrupt` holds the number of a SIGINT/SIGTERM the launcher received
/// (0: none); it ends the job: SIGTERM to every rank's group, SIGKILL after
/// the grace. With a `recovery` (`--recover inplace|shrink`, protocol
/// §18.6) each rank started directly gets a control channel, and a rank's
/// failure goes to the recovery (the transport's Decider) before it can end
/// the run; without one (`--recover restart`) the first failure ends it.
pub fn run_job_recovering<'a>(
    ranks: Vec<RankLaunch>,
    opts: &'a Options,
    interrupt: &AtomicI32,
    recovery: Option<RecoveryPlan<'a>>,
) -> Outcome {
    let lock: Sink = Arc::new(Mutex::new(()));
    let (tx, rx): (Sender<Event>, Receiver<Event>) = crossbeam_channel::unbounded();
    let launches = ranks
        .iter()
        .map(|r| RankLaunch {
            stdin_line: String::new(),
            ..r.clone()
        })
        .collect();
    let mut job = Job {
        launches,
        tx: tx.clone(),
        lock: lock.clone(),
        slots: Vec::new(),
        opts,
        records: RecordDir::create(),
        watchdog: Watchdog::start(),
        failures: Vec::new(),
        first_failure: None,
        outcome: None,
        end_now: false,
        termed_at: None,
        killed: false,
        reaper: is_subreaper(),
        recovery: None,
    };
    // Protocol §5.1 step 1: every listener is bound before any rank starts.
    let mut listeners: Vec<Option<std::os::fd::OwnedFd>> = ranks
        .iter()
        .map(|r| r.port.and_then(|p| crate::listen_ahead::bind(&r.host, p)))
        .collect();
    let mut spawned = Vec::with_capacity(ranks.len());
    for (i, r) in ranks.into_iter().enumerate() {
        let listener = listeners.get_mut(i).and_then(Option::take);
        match spawn_rank(r, opts, job.records.as_ref(), recovery.is_some(), listener) {
            Ok(s) => {
                if let Some(w) = &mut job.watchdog {
                    w.watch(s.child.id());
                }
                spawned.push(s);
            }
            Err(f) => {
                job.outcome = Some(Outcome::SpawnFailed(f));
                job.end_now = true;
                break;
            }
        }
    }
    let incarnation = recovery.map_or(0, |p| p.job.incarnation);
    job.recovery = recovery.map(Recovery::new);
    for (idx, s) in spawned.into_iter().enumerate() {
        let mut slot = attach_rank(idx, s, opts, &lock, &tx);
        slot.incarnation = incarnation;
        job.slots.push(slot);
    }
    drop(tx);
    let start = Instant::now();
    let mut drain_since = None;
    loop {
        if let Ok(ev) = rx.recv_timeout(Duration::from_millis(20)) {
            job.handle(ev);
            while let Ok(ev) = rx.try_recv() {
                job.handle(ev);
            }
        }
        job.collect_failures();
        job.recover();
        job.decide();
        job.check_starts();
        if job.outcome.is_none() {
            let sig = interrupt.load(Ordering::Relaxed);
            if sig != 0 {
                job.outcome = Some(Outcome::Interrupted(sig));
                job.end_now = true;
            } else if opts.timeout.is_some_and(|t| start.elapsed() >= t) {
                job.outcome = Some(Outcome::TimedOut);
                job.end_now = true;
            }
        }
        job.terminate();
        if job.done(&mut drain_since) {
            break;
        }
    }
    if !job.reaper {
        // Orphans of the ranks' groups that the launcher could not wait for.
        for s in &job.slots {
            signal_group(s.pgid, Signal::SIGKILL);
        }
    }
    for s in &mut job.slots {
        // Already reaped by the waiting threads; this only releases handles.
        let _ = s.child.try_wait();
    }
    if let Some(w) = job.watchdog.take() {
        w.end();
    }
    let _guard = lock.lock();
    job.outcome.unwrap_or(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(rank: u32, script: &str) -> RankLaunch {
        RankLaunch {
            rank,
            host: "127.0.0.1".into(),
            via: Via::Direct,
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![("SPERLI_RANK".into(), rank.to_string())],
            stdin_line: "00ff\n".into(),
            port: None,
        }
    }

    fn quick() -> Options {
        Options {
            wait_after_failure: Duration::from_millis(300),
            grace: Duration::from_millis(300),
            ..Options::default()
        }
    }

    #[test]
    fn success_and_stdin() {
        let none = AtomicI32::new(0);
        let ranks = (0..3)
            .map(|r| sh(r, "read line; [ \"$line\" = 00ff ] || exit 9"))
            .collect();
        assert_eq!(run_job(ranks, &quick(), &none), Outcome::Success);
    }

    /// Protocol §5.1 step 1: a rank started directly finds its listener
    /// at descriptor 4, bound to its port before any rank started: rank
    /// 0 dials rank 1's port before rank 1 runs, and is not refused.
    #[test]
    fn each_rank_gets_its_listener_bound_before_any_starts() {
        let none = AtomicI32::new(0);
        let ports: Vec<u16> = (0..2)
            .map(|_| sperli_tls::job_plan::free_port("127.0.0.1").unwrap())
            .collect();
        let dial = format!(
            "read -r d; [ \"$SPERLI_LISTEN_FD\" = 4 ] && [ -S /proc/self/fd/4 ] || exit 9; \
             exec 5<>/dev/tcp/127.0.0.1/{} || exit 10",
            ports[1]
        );
        let wait = "read -r d; sleep 0.3; [ \"$SPERLI_LISTEN_FD\" = 4 ] && [ -S /proc/self/fd/4 ] || exit 9";
        let mut r0 = sh(0, &dial);
        let mut r1 = sh(1, wait);
        r0.argv[0] = "bash".into();
        r0.port = Some(ports[0]);
        r1.port = Some(ports[1]);
        assert_eq!(run_job(vec![r0, r1], &quick(), &none), Outcome::Success);
        // Without a port the rank binds its own: no descriptor 4.
        let plain = sh(
            0,
            "read -r d; [ -z \"$SPERLI_LISTEN_FD\" ] && ! [ -e /proc/self/fd/4 ] || exit 9",
        );
        assert_eq!(run_job(vec![plain], &quick(), &none), Outcome::Success);
    }

    #[test]
    fn first_failure_is_reported() {
        let none = AtomicI32::new(0);
        let ranks = vec![
            sh(0, "sleep 0.5; exit 1"),
            sh(1, "exit 3"),
            sh(2, "sleep 30"),
        ];
        let o = run_job(ranks, &quick(), &none);
        assert_eq!(o.failed_rank(), Some(1));
        assert_eq!(o.exit_code(), 3);
    }

    #[test]
    fn signal_exit_is_128_plus() {
        let none = AtomicI32::new(0);
        let o = run_job(vec![sh(0, "kill -9 $$")], &quick(), &none);
        assert_eq!(o.exit_code(), 137);
    }

    #[test]
    fn timeout_ends_everything() {
        let none = AtomicI32::new(0);
        let opts = Options {
            timeout: Some(Duration::from_millis(300)),
            ..quick()
        };
        let t = Instant::now();
        let o = run_job(
            vec![sh(0, "sleep 30"), sh(1, "trap '' TERM; sleep 30")],
            &opts,
            &none,
        );
        assert_eq!(o, Outcome::TimedOut);
        assert_eq!(o.exit_code(), crate::outcome::EXIT_TIMEOUT);
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_missing_program_names_rank_host_program_and_os_error() {
        let none = AtomicI32::new(0);
        let plain = crate::spawn::tests::not_executable("supervise");
        let mut r = sh(0, "");
        r.argv = vec![plain.to_string_lossy().into_owned()];
        let o = run_job(vec![sh(1, "sleep 30"), r], &quick(), &none);
        match &o {
            Outcome::SpawnFailed(f) => {
                assert_eq!(
                    f.to_string(),
                    format!(
                        "cannot start rank 0 on 127.0.0.1: {}: permission denied",
                        plain.display()
                    )
                );
                assert_eq!(f.error, StartError::NotExecutable);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(o.exit_code(), crate::outcome::EXIT_NOT_EXECUTABLE);
        let mut r = sh(0, "");
        r.argv = vec!["/nonexistent/sperli-supervise".into()];
        let o = run_job(vec![r], &quick(), &none);
        assert_eq!(o.exit_code(), crate::outcome::EXIT_NOT_FOUND, "{o:?}");
    }

    #[test]
    fn a_rank_that_never_starts_fails_the_job_at_the_deadline() {
        use std::os::unix::fs::PermissionsExt;
        let none = AtomicI32::new(0);
        let hang = std::env::temp_dir().join(format!("sperli-hang-rsh-{}", std::process::id()));
        std::fs::write(&hang, "#!/bin/sh\nexec sleep 600\n").unwrap();
        std::fs::set_permissions(&hang, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut r = sh(1, "true");
        r.via = Via::Rsh;
        r.host = "127.0.0.2".into();
        let opts = Options {
            rsh: format!("{} {{host}}", hang.display()),
            start_deadline: Duration::from_millis(500),
            ..quick()
        };
        let mut r2 = sh(2, "true");
        r2.via = Via::Rsh;
        let t = Instant::now();
        let o = run_job(vec![sh(0, "sleep 30"), r, r2], &opts, &none);
        match &o {
            Outcome::Failed(b) => {
                assert_eq!((b.verdict.rank, &b.verdict.cause), (1, &Cause::NotStarted));
                assert_eq!(b.verdict.also, [2]);
                assert!(
                    b.to_string()
                        .starts_with("rank 1 on 127.0.0.2 never started"),
                    "{b}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(t.elapsed() < Duration::from_secs(10));
        let _ = std::fs::remove_file(&hang);
    }

    #[test]
    fn a_stopped_rank_is_the_root_cause() {
        // Rank 1 "loses" rank 0 (its record blames rank 0) while rank 0 is
        // stopped.
        let none = AtomicI32::new(0);
        let ranks = vec![
            sh(0, "kill -STOP $$; sleep 30"),
            sh(
                1,
                "sleep 0.3; echo 'H1613 blame=0' > \"$SPERLI_ERROR_FILE\"; exit 1",
            ),
        ];
        let o = run_job(ranks, &quick(), &none);
        match &o {
            Outcome::Failed(b) => {
                assert_eq!((b.verdict.rank, &b.verdict.cause), (0, &Cause::Stopped));
                assert!(b
                    .to_string()
                    .starts_with("rank 0 on 127.0.0.1 failed: it is stopped"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(o.exit_code(), 1);
    }
}
