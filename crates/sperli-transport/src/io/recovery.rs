//! Feature bit 5 at the edge (protocol §18.6-18.8): the rank's recovery
//! state machine ([`RankRecovery`]) fed with what the sockets and the
//! control channel bring, and what it asks for carried out.
//!
//! A lost peer (silence, a close without BYE, ABORT reason 1 or 2) does not
//! end the job step when the job negotiated bit 5 and the program takes
//! errors itself ([`ErrorMode::Return`](crate::ErrorMode)): the rank
//! revokes its epoch (every pending and later call returns
//! `RecoveryError::Revoked` until the program recovers,
//! [`crate::Endpoint::recover`]), tells its peers (RECOVER REVOKE) and the
//! launcher (a REPORT), and waits for the launcher's MEMBERSHIP record.
//!
//! Lock order: a link's lock, the receive state's, then the recovery's.

use std::collections::{BTreeSet, VecDeque};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use sperli_wire::recovery::{MembershipView, Mode, RecoverPayload, RecoveryError, Report};
use sperli_wire::Error;

use crate::control_channel::MAX_RECORD_LINE;
use crate::job::unix_ms;
use crate::proto::matching::Matching;
use crate::proto::recovery::rank::{members, Decision, Event, Output, Phase, RankRecovery};

/// A RECOVER frame the I/O thread sends, or a connection it closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Todo {
    /// RECOVER with this header epoch to `to`.
    Send {
        to: u32,
        header_epoch: u32,
        payload: RecoverPayload,
    },
    /// Close the connection to `peer` without BYE.
    Close { peer: u32 },
}

/// The membership a rank recovered into (protocol §18.7, §18.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The membership epoch now in force (1: set-up's, no record yet).
    pub epoch: u32,
    /// The mode of the last record applied (`None`: none yet).
    pub mode: Option<Mode>,
    /// The last record's AND of its members' agreement flags (protocol
    /// §18.8); true without a record.
    pub agreed: bool,
    /// The COMMIT epoch every rank resumes (a replace record's `rollback`).
    pub rollback: Option<u64>,
    /// The members of the epoch, ascending job ranks.
    pub members: Vec<u32>,
    /// Every job rank a record of this run removed, ascending.
    pub failed: Vec<u32>,
}

impl Recovered {
    /// The membership of a job without feature bit 5: epoch 0, every one
    /// of `size` ranks a member, no record.
    pub fn whole_job(size: u32) -> Self {
        Recovered {
            epoch: 0,
            mode: None,
            agreed: true,
            rollback: None,
            members: (0..size).collect(),
            failed: Vec::new(),
        }
    }
}

struct Inner {
    machine: RankRecovery,
    todo: VecDeque<Todo>,
    decided: Option<Decision>,
    removed: BTreeSet<u32>,
    /// What is read of the control channel and not yet a whole line.
    line: Vec<u8>,
    /// The buffer the control channel is read into.
    scratch: Vec<u8>,
    /// The step ended with this error (the machine's `End`).
    ended: Option<RecoveryError>,
    /// Batches of `todo` the I/O thread took and has not queued on the
    /// connections yet ([`Recovery::todo_done`]).
    in_flight: usize,
}

/// How much one read of the control channel takes (a record's line is
/// about 7 KB).
const CONTROL_READ: usize = 16 * 1024;

/// The recovery of one rank (see the module docs).
pub(crate) struct Recovery {
    inner: Mutex<Inner>,
    decided: Condvar,
    /// The epoch this rank revoked and its program has not recovered from
    /// yet (0: none): every call fails with `Revoked` meanwhile.
    revoked: AtomicU32,
    control: Arc<UnixStream>,
}

impl Recovery {
    /// The recovery of rank `rank` in the membership set-up makes (epoch 1,
    /// every rank at `incarnation`, protocol §18.1), with its control
    /// channel and the job public key records are verified with.
    pub fn new(
        rank: u32,
        size: u32,
        job_id: sperli_wire::JobId,
        incarnation: u32,
        job_public_key: Vec<u8>,
        control: Arc<UnixStream>,
    ) -> Self {
        let view = MembershipView {
            job_id,
            size,
            start_incarnation: incarnation,
            epoch: 1,
            incarnations: vec![incarnation; size as usize],
            current_record: Vec::new(),
        };
        let machine = RankRecovery::new(rank, view, verifier(job_public_key));
        Self::with_machine(machine, Vec::new(), control)
    }

    fn with_machine(machine: RankRecovery, line: Vec<u8>, control: Arc<UnixStream>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                machine,
                todo: VecDeque::new(),
                decided: None,
                removed: BTreeSet::new(),
                line,
                scratch: vec![0; CONTROL_READ],
                ended: None,
                in_flight: 0,
            }),
            decided: Condvar::new(),
            revoked: AtomicU32::new(0),
            control,
        }
    }

    /// The recovery of a replacement (protocol §18.7): `record` is the
    /// MEMBERSHIP record the first line of its control channel held
    /// (`rest`: what followed that line), checked against this rank and
    /// its incarnation (from its job description) and the job public key.
    /// [`Recovery::settle`] then applies it.
    pub fn replacement(
        own: (u32, u32),
        record: &[u8],
        rest: Vec<u8>,
        job_public_key: Vec<u8>,
        control: Arc<UnixStream>,
    ) -> Result<Self, Error> {
        let machine = RankRecovery::replacement(own, record, verifier(job_public_key), now_ms())?;
        Ok(Self::with_machine(machine, rest, control))
    }

    /// Carries out what the machine has to do now (a replacement's record
    /// applied: its epoch, incarnations and endpoints).
    pub fn settle(&self, st: &mut Matching, epoch: &crate::proto::connection::MembershipEpoch) {
        let mut g = self.lock();
        self.after(&mut g, st, epoch);
    }

    /// The ranks this rank's set-up must reach, for a replacement: `inc[n]`
    /// of the epoch it joins and the ranks that record replaces.
    pub fn join_plan(&self) -> (Vec<u32>, Vec<u32>) {
        let g = self.lock();
        let inc = g.machine.incarnations().to_vec();
        let replaced = match g.machine.phase() {
            Phase::Joining { waiting, .. } => waiting
                .iter()
                .copied()
                .filter(|r| g.machine.awaits_join(*r).is_some())
                .chain(std::iter::once(g.machine.rank()))
                .collect(),
            _ => vec![g.machine.rank()],
        };
        (inc, replaced)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The control channel (the I/O thread polls it).
    pub fn control(&self) -> &UnixStream {
        &self.control
    }

    /// The error every call returns while the epoch is revoked.
    pub fn revoked(&self) -> Option<Error> {
        match self.revoked.load(Ordering::SeqCst) {
            0 => None,
            epoch => Some(RecoveryError::Revoked { epoch }.into()),
        }
    }

    /// `peer` is lost (protocol §18.6 detection; `closed`: by the close of
    /// its connection); `st` is the receive state.
    pub fn peer_lost(
        &self,
        peer: u32,
        closed: bool,
        st: &mut Matching,
        epoch: &crate::proto::connection::MembershipEpoch,
    ) {
        let mut g = self.lock();
        if g.machine.incarnation_of(peer) == 0 {
            return;
        }
        g.machine
            .handle_event(Event::PeerLost { peer, closed }, now_ms());
        self.after(&mut g, st, epoch);
    }

    /// A RECOVER frame from `from` (protocol §18.5): decoded, then judged
    /// by the machine. An error ends the job step (a payload that does not
    /// decode: H1610, ABORT reason 7).
    pub fn frame(
        &self,
        from: u32,
        header_epoch: u32,
        payload: &[u8],
        size: u32,
        st: &mut Matching,
        epoch: &crate::proto::connection::MembershipEpoch,
    ) -> Result<(), Error> {
        let payload = RecoverPayload::decode(payload, size, from)?;
        let mut g = self.lock();
        if let RecoverPayload::RevokeCommunicator { comm } = payload {
            // Protocol §18.8.1: of the current epoch only (check 5 lets an
            // older RECOVER through for its records).
            if header_epoch == g.machine.epoch() {
                let members: Vec<u32> = members(g.machine.incarnations()).collect();
                let to = st.handle_revoke_notice(comm, from, &members);
                self.notify_revoked(&mut g, comm, to);
            }
            return Ok(());
        }
        if matches!(payload, RecoverPayload::Membership { .. }) {
            // The launcher's copy first, if it is in the channel already:
            // it needs no signature check (protocol §18.3 check 16), and
            // the peer's copy is then one the rank holds (check 15).
            self.drain_control(&mut g);
        }
        let event = Event::Recover {
            from,
            header_epoch,
            payload,
        };
        g.machine.handle_event(event, now_ms());
        self.after(&mut g, st, epoch);
        match &g.ended {
            Some(e) => Err(e.clone().into()),
            None => Ok(()),
        }
    }

    /// What the control channel holds now (the I/O thread reads it when
    /// it is readable): whole lines go to the machine as records; the end
    /// of the channel is the launcher's loss. Returns the error that ends
    /// the job step, if one does.
    pub fn read_control(
        &self,
        st: &mut Matching,
        epoch: &crate::proto::connection::MembershipEpoch,
    ) -> Option<Error> {
        let mut g = self.lock();
        self.drain_control(&mut g);
        self.after(&mut g, st, epoch);
        g.ended.clone().map(Error::from)
    }

    /// Reads what the control channel holds now into the machine: whole
    /// lines as records, its end as the launcher's loss.
    fn drain_control(&self, g: &mut Inner) {
        // A record's line is about 7 KB: one read takes it, into a buffer
        // kept from call to call.
        let mut buf = std::mem::take(&mut g.scratch);
        buf.resize(CONTROL_READ, 0);
        loop {
            match (&*self.control).read(&mut buf) {
                Ok(0) => {
                    g.machine.handle_event(Event::ControlClosed, now_ms());
                    break;
                }
                Ok(n) => {
                    g.line.extend_from_slice(&buf[..n]);
                    while let Some(end) = g.line.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = g.line.drain(..=end).collect();
                        // A line that is not hex is a record that does not
                        // decode (protocol §18.3 check 1).
                        let record = sperli_wire::hex::decode(&line[..end]).unwrap_or_default();
                        g.machine.handle_event(Event::Control { record }, now_ms());
                    }
                    if g.line.len() > MAX_RECORD_LINE {
                        g.line.clear();
                        let record = Vec::new();
                        g.machine.handle_event(Event::Control { record }, now_ms());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    g.machine.handle_event(Event::ControlClosed, now_ms());
                    break;
                }
            }
        }
        g.scratch = buf;
    }

    /// Runs the machine's clocks (protocol §18.6: the 60 s wait for a
    /// record; §18.7: the join window). Returns the error that ends the
    /// job step, if one does, and when to look again.
    pub fn timers(
        &self,
        st: &mut Matching,
        epoch: &crate::proto::connection::MembershipEpoch,
    ) -> (Option<Error>, Option<Duration>) {
        let mut g = self.lock();
        let now = now_ms();
        g.machine.poll_timers(now);
        self.after(&mut g, st, epoch);
        let next = g
            .machine
            .poll_timeout()
            .map(|t| Duration::from_millis(t.saturating_sub(now).max(1)));
        (g.ended.clone().map(Error::from), next)
    }

    /// Revokes communicator `comm` on this rank (protocol §18.8.1): the
    /// receive state fails its calls; the first time, REVOKE COMMUNICATOR
    /// goes to its other members. False when it was revoked already.
    pub fn revoke_communicator(&self, comm: u32, me: u32, st: &mut Matching) -> bool {
        let mut g = self.lock();
        if !st.revoke(comm) {
            return false;
        }
        let members: Vec<u32> = members(g.machine.incarnations()).collect();
        let to: Vec<u32> = st
            .members_of(comm, &members)
            .unwrap_or_default()
            .into_iter()
            .filter(|r| *r != me)
            .collect();
        self.notify_revoked(&mut g, comm, to);
        true
    }

    fn notify_revoked(&self, g: &mut Inner, comm: u32, to: Vec<u32>) {
        let header_epoch = g.machine.epoch();
        for to in to {
            g.todo.push_back(Todo::Send {
                to,
                header_epoch,
                payload: RecoverPayload::RevokeCommunicator { comm },
            });
        }
    }

    /// Whether this rank waits for `rank` to join (protocol §18.7), and the
    /// SHA-256 of the certificate its change entry names.
    pub fn awaits_join(&self, rank: u32) -> Option<sperli_wire::ids::Sha256Digest> {
        self.lock().machine.awaits_join(rank)
    }

    /// Whether this rank waits for any replacement to join (protocol §18.7).
    pub fn awaits_any_join(&self) -> bool {
        let g = self.lock();
        match g.machine.phase() {
            Phase::Joining { waiting, .. } => {
                waiting.iter().any(|r| g.machine.awaits_join(*r).is_some())
            }
            _ => false,
        }
    }

    /// `peer`'s connection of the new epoch authenticated (protocol
    /// §18.7): once every one this rank waits for did, the epoch stands.
    pub fn joined(
        &self,
        peer: u32,
        st: &mut Matching,
        epoch: &crate::proto::connection::MembershipEpoch,
    ) {
        let mut g = self.lock();
        g.machine.handle_event(Event::Joined { peer }, now_ms());
        self.after(&mut g, st, epoch);
    }

    /// Notes the highest COMMIT epoch this rank holds (protocol §18.4).
    pub fn set_best_commit(&self, epoch: u64) {
        self.lock().machine.set_best_commit(epoch);
    }

    /// Takes what the I/O thread must send or close, in order; it calls
    /// [`Recovery::todo_done`] once the frames are queued on their
    /// connections.
    pub fn take_todo(&self) -> Vec<Todo> {
        let mut g = self.lock();
        let todo: Vec<Todo> = g.todo.drain(..).collect();
        if !todo.is_empty() {
            g.in_flight += 1;
        }
        todo
    }

    /// What [`Recovery::take_todo`] gave is queued on the connections: a
    /// frame the program sends from now on comes after it on each
    /// (protocol §18.6: a record goes out before its epoch is used).
    pub fn todo_done(&self) {
        let mut g = self.lock();
        g.in_flight = g.in_flight.saturating_sub(1);
        drop(g);
        // A waiter of `recover` waits for the queue to be handed over.
        self.decided.notify_all();
    }

    /// Carries out the machine's outputs that need no socket; queues the
    /// others for the I/O thread.
    fn after(
        &self,
        g: &mut Inner,
        st: &mut Matching,
        epoch: &crate::proto::connection::MembershipEpoch,
    ) {
        while let Some(out) = g.machine.poll_output() {
            match out {
                Output::Send {
                    to,
                    header_epoch,
                    payload,
                } => g.todo.push_back(Todo::Send {
                    to,
                    header_epoch,
                    payload,
                }),
                Output::Close { peer } => g.todo.push_back(Todo::Close { peer }),
                Output::Report(r) => self.report(&r),
                Output::Applied(a) => {
                    // Protocol §18.3 "applied", §18.2 "What starts again
                    // in a new epoch": before any frame of the new epoch
                    // is sent or judged.
                    epoch.apply(a.epoch, &a.incarnations, &a.hosts, Arc::new(a.record));
                    st.new_epoch(RecoveryError::Revoked { epoch: a.epoch - 1 }.into());
                    let was: BTreeSet<u32> = (0..a.incarnations.len() as u32).collect();
                    let now: BTreeSet<u32> = members(&a.incarnations).collect();
                    g.removed.extend(was.difference(&now));
                }
                Output::Decided(d) => {
                    g.decided = Some(d);
                    self.decided.notify_all();
                }
                Output::End(e) => {
                    g.ended.get_or_insert(e);
                    self.decided.notify_all();
                }
            }
        }
        if matches!(g.machine.phase(), Phase::Revoked { .. }) {
            self.revoked.store(g.machine.epoch(), Ordering::SeqCst);
        }
    }

    /// Writes a REPORT line to the control channel (protocol §18.4). A
    /// channel that cannot take it is the launcher's loss, which its read
    /// side notices.
    fn report(&self, r: &Report) {
        let mut line = sperli_wire::hex::encode(&r.encode());
        line.push('\n');
        let mut rest = line.as_bytes();
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while !rest.is_empty() && std::time::Instant::now() < deadline {
            match (&*self.control).write(rest) {
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// Waits until the program may go on after a revoke: the record of a
    /// newer epoch is applied and its frames to the peers are handed to
    /// the I/O thread (protocol §18.6), then clears the revoke. Without a
    /// revoke it returns the membership in force at once. `ended` is the
    /// job's error, if the step ended meanwhile.
    pub fn recover(&self, ended: &dyn Fn() -> Option<Error>) -> Result<Recovered, Error> {
        let mut g = self.lock();
        loop {
            if let Some(e) = &g.ended {
                return Err(e.clone().into());
            }
            if let Some(e) = ended() {
                return Err(e);
            }
            let revoked = self.revoked.load(Ordering::SeqCst);
            let running = matches!(g.machine.phase(), Phase::Running);
            let handed = g.todo.is_empty() && g.in_flight == 0;
            if running && handed && g.machine.epoch() > revoked {
                self.revoked.store(0, Ordering::SeqCst);
                return Ok(self.recovered(&g));
            }
            g = self
                .decided
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The membership in force.
    pub fn membership(&self) -> Recovered {
        self.recovered(&self.lock())
    }

    fn recovered(&self, g: &Inner) -> Recovered {
        let d = g.decided.as_ref();
        Recovered {
            epoch: g.machine.epoch(),
            mode: d.map(|d| d.mode),
            agreed: d.is_none_or(|d| d.agreed),
            rollback: d.filter(|d| d.mode == Mode::Replace).map(|d| d.rollback),
            members: members(g.machine.incarnations()).collect(),
            failed: g.removed.iter().copied().collect(),
        }
    }

    /// Wakes a waiter of [`Recovery::recover`] (the job's error was set).
    pub fn wake(&self) {
        self.decided.notify_all();
    }
}

/// Protocol §18.3 check 16: the job public key, context `SPERLI-MEMBER-1`.
fn verifier(job_public_key: Vec<u8>) -> crate::proto::recovery::rank::Verifier {
    Box::new(move |msg: &[u8], sig: &[u8]| {
        sperli_tls::composite_sig::verify_bytes(
            &job_public_key,
            msg,
            sperli_wire::recovery::CONTEXT_MEMBER,
            sig,
        )
    })
}

fn now_ms() -> u64 {
    unix_ms(SystemTime::now())
}
