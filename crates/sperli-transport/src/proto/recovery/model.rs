//! Model check of the recovery (protocol §18.6-18.8): random schedules
//! (a seeded generator, thousands of runs) of failures and message
//! orders among N = 2..6 ranks and the launcher, in both modes. Crashes
//! and pauses (a false suspicion: the rank goes on later unless the
//! launcher fenced it first) strike at any step, during a recovery too,
//! and the launcher (the deciding party) may die. Each run must end
//! with the same decision on every survivor, or in the full restart
//! (protocol §18.6), never in disagreement, a rejected frame or a hang.
//!
//! Messages between two processes keep their order (one TLS connection);
//! the model's clock moves only when no message is in flight (a message
//! is delivered within the silence limit, the assumption the protocol
//! makes, §7.4), so only the protocol's own timers fire.

use std::collections::{BTreeSet, HashMap, VecDeque};

use sperli_wire::ids::JobId;
use sperli_wire::recovery::{MembershipView, Mode, RecoverPayload, Report};

use super::decider::{Decider, DeciderOutput};
use super::rank::{Decision, Event, Output, Phase, RankRecovery};

/// A small seeded generator (splitmix64), so a failing seed replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.next() % 1000 < per_mille
    }
}

enum Msg {
    Frame {
        header_epoch: u32,
        payload: RecoverPayload,
    },
    /// The connection's end as the receiver detects it: by its close
    /// (`closed`) or by silence.
    Lost { closed: bool },
}

enum Ctl {
    Record(Vec<u8>),
    Closed,
}

enum ToLauncher {
    Report(Report),
    Exit { rank: u32, inc: u32 },
}

struct Proc {
    rank: u32,
    rr: RankRecovery,
    alive: bool,
    /// Stopped for a while (a false suspicion): its peers see silence; it
    /// goes on later unless the launcher fenced it first.
    paused: bool,
    decision: Option<Decision>,
    ended: Option<Output>,
    /// The record it applied last (what its connections send ahead of
    /// their first frame of its epoch, protocol §18.6).
    record: Vec<u8>,
}

struct World {
    rng: Rng,
    now: u64,
    procs: Vec<Proc>,
    current: Vec<usize>,
    chans: HashMap<(usize, usize), VecDeque<Msg>>,
    conns: BTreeSet<(usize, usize)>,
    /// Per direction (from, to): the newest epoch `to` is known to hold
    /// (absent: 1, set-up's), as the transport's connections track it.
    told: HashMap<(usize, usize), u32>,
    control: HashMap<usize, VecDeque<Ctl>>,
    launcher_in: VecDeque<ToLauncher>,
    connects: VecDeque<(usize, u32)>,
    decider: Decider,
    launcher_alive: bool,
    restart: bool,
    issued: Option<(u32, Vec<u32>, bool)>,
    failures_left: u32,
    /// Records issued in this run (≥ 2: a failure during or after a recovery).
    records: u32,
    /// The launcher died while a recovery was under way.
    launcher_died_in_recovery: bool,
    /// A falsely suspected rank went on before the launcher fenced it.
    resumed_before_fence: bool,
}

fn verify() -> super::rank::Verifier {
    Box::new(|_, _| true)
}

fn pair(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

impl World {
    fn new(seed: u64, size: u32, mode: Mode) -> Self {
        let mut rng = Rng(seed);
        let job_id = JobId([9; 16]);
        let view = MembershipView {
            job_id,
            size,
            start_incarnation: 1,
            epoch: 1,
            incarnations: vec![1; size as usize],
            current_record: vec![],
        };
        let procs: Vec<Proc> = (0..size)
            .map(|rank| {
                let mut rr = RankRecovery::new(rank, view.clone(), verify());
                rr.set_report_values(rng.chance(800), 3 + (rng.next() % 2));
                Proc {
                    rank,
                    rr,
                    alive: true,
                    paused: false,
                    decision: None,
                    ended: None,
                    record: Vec::new(),
                }
            })
            .collect();
        let mut conns = BTreeSet::new();
        for a in 0..size as usize {
            for b in a + 1..size as usize {
                conns.insert((a, b));
            }
        }
        let failures_left = 1 + rng.below(3) as u32;
        World {
            rng,
            now: 0,
            current: (0..size as usize).collect(),
            procs,
            chans: HashMap::new(),
            conns,
            told: HashMap::new(),
            control: HashMap::new(),
            launcher_in: VecDeque::new(),
            connects: VecDeque::new(),
            decider: Decider::new(job_id, size, 1, mode, 4),
            launcher_alive: true,
            restart: false,
            issued: None,
            failures_left,
            records: 0,
            launcher_died_in_recovery: false,
            resumed_before_fence: false,
        }
    }

    fn live(&self, p: usize) -> bool {
        self.procs[p].alive && !self.procs[p].paused && self.procs[p].ended.is_none()
    }

    /// Every connection of `p` ends; its peers see the close (`closed`:
    /// each, unless its FIN is lost, which the generator decides) or the
    /// silence after what it already sent.
    fn cut(&mut self, p: usize, closed: bool) {
        let peers: Vec<usize> = self
            .conns
            .iter()
            .filter_map(|&(a, b)| {
                if a == p {
                    Some(b)
                } else if b == p {
                    Some(a)
                } else {
                    None
                }
            })
            .collect();
        for q in peers {
            let closed = closed && !self.rng.chance(150);
            self.chans
                .entry((p, q))
                .or_default()
                .push_back(Msg::Lost { closed });
            self.conns.remove(&pair(p, q));
        }
    }

    /// A process stops (crash, hang, fence or its own end): its peers
    /// see the close or the silence after what it already sent.
    fn stop(&mut self, p: usize, tell_launcher: bool) {
        if !self.procs[p].alive {
            return;
        }
        self.procs[p].alive = false;
        self.cut(p, true);
        if tell_launcher && self.launcher_alive {
            let (rank, inc) = (self.procs[p].rank, self.procs[p].rr.incarnation());
            self.launcher_in.push_back(ToLauncher::Exit { rank, inc });
        }
    }

    fn drain(&mut self) {
        loop {
            let mut any = false;
            for p in 0..self.procs.len() {
                while let Some(o) = self.procs[p].rr.poll_output() {
                    any = true;
                    self.output(p, o);
                }
            }
            while let Some(o) = self.decider.poll_output() {
                any = true;
                self.decided(o);
            }
            if !any {
                return;
            }
        }
    }

    fn output(&mut self, p: usize, o: Output) {
        if !self.procs[p].alive {
            return;
        }
        match o {
            Output::Send {
                to,
                header_epoch,
                payload,
            } => {
                let q = self.current[to as usize];
                if self.conns.contains(&pair(p, q)) {
                    // The connection's rule of protocol §18.6: the record
                    // ahead of the first frame of its epoch.
                    let told = self.told.get(&(p, q)).copied().unwrap_or(1);
                    let chan = self.chans.entry((p, q)).or_default();
                    if header_epoch > told {
                        if !self.procs[p].record.is_empty() {
                            chan.push_back(Msg::Frame {
                                header_epoch: told,
                                payload: RecoverPayload::Membership {
                                    record: self.procs[p].record.clone(),
                                },
                            });
                        }
                        let newest = header_epoch.max(self.procs[p].rr.epoch());
                        self.told.insert((p, q), newest);
                    }
                    chan.push_back(Msg::Frame {
                        header_epoch,
                        payload,
                    });
                }
            }
            Output::Report(r) => {
                if self.launcher_alive {
                    self.launcher_in.push_back(ToLauncher::Report(r));
                }
            }
            Output::Close { peer } => {
                let gone: Vec<(usize, usize)> = self
                    .conns
                    .iter()
                    .copied()
                    .filter(|&(a, b)| {
                        (a == p && self.procs[b].rank == peer)
                            || (b == p && self.procs[a].rank == peer)
                    })
                    .collect();
                for c in gone {
                    self.conns.remove(&c);
                }
            }
            Output::Decided(d) => self.procs[p].decision = Some(d),
            // The epoch's frames: the model's links carry RECOVER only.
            Output::Applied(a) => self.procs[p].record = a.record,
            Output::End(e) => {
                self.procs[p].ended = Some(Output::End(e));
                self.stop(p, true);
            }
        }
    }

    fn decided(&mut self, o: DeciderOutput) {
        if !self.launcher_alive {
            return;
        }
        match o {
            DeciderOutput::Fence { rank } => {
                let p = self.current[rank as usize];
                self.stop(p, false);
            }
            DeciderOutput::Issue { record, to } => {
                let bytes = record.encode();
                self.issued = Some((record.epoch, record.incarnations.clone(), record.agreed));
                self.records += 1;
                let changed: Vec<u32> = record.changes.iter().map(|c| c.rank).collect();
                for c in &record.changes {
                    if record.mode == Mode::Replace {
                        let rr = RankRecovery::replacement(
                            (c.rank, record.incarnations[c.rank as usize]),
                            &bytes,
                            verify(),
                            self.now,
                        )
                        .expect("the launcher's record admits its replacement");
                        let p = self.procs.len();
                        self.procs.push(Proc {
                            rank: c.rank,
                            rr,
                            alive: true,
                            paused: false,
                            decision: None,
                            ended: None,
                            record: Vec::new(),
                        });
                        self.current[c.rank as usize] = p;
                        // It dials every survivor, and every replacement
                        // of a higher rank (protocol §18.7).
                        for m in to.iter().chain(changed.iter().filter(|r| **r > c.rank)) {
                            self.connects.push_back((p, *m));
                        }
                    }
                }
                for m in to {
                    let p = self.current[m as usize];
                    self.control
                        .entry(p)
                        .or_default()
                        .push_back(Ctl::Record(bytes.clone()));
                }
            }
            DeciderOutput::FullRestart(_) => {
                // The launcher ends every rank and starts the job again (§10.1).
                self.restart = true;
                for p in 0..self.procs.len() {
                    self.stop(p, false);
                }
            }
        }
    }

    /// One step; false when nothing is left to do.
    fn step(&mut self) -> bool {
        #[derive(Clone, Copy)]
        enum A {
            Chan(usize, usize),
            Control(usize),
            Launcher,
            Connect,
            Crash,
            Hang,
            Resume(usize),
            KillLauncher,
        }
        let mut acts = Vec::new();
        for (&(a, b), q) in &self.chans {
            if !q.is_empty() && self.live(b) {
                acts.push(A::Chan(a, b));
            }
        }
        for (&p, q) in &self.control {
            if !q.is_empty() && self.live(p) {
                acts.push(A::Control(p));
            }
        }
        if self.launcher_alive && !self.launcher_in.is_empty() {
            acts.push(A::Launcher);
        }
        if !self.connects.is_empty() {
            acts.push(A::Connect);
        }
        for p in 0..self.procs.len() {
            if self.procs[p].alive && self.procs[p].paused {
                acts.push(A::Resume(p));
            }
        }
        acts.sort_by_key(|a| match a {
            A::Chan(x, y) => (0, *x, *y),
            A::Control(x) => (1, *x, 0),
            A::Resume(x) => (2, *x, 0),
            _ => (3, 0, 0),
        });
        let busy = !acts.is_empty();
        if self.failures_left > 0 && !self.restart && self.rng.chance(if busy { 60 } else { 400 }) {
            acts.push(match self.rng.below(10) {
                0 if self.launcher_alive => A::KillLauncher,
                1 | 2 => A::Hang,
                _ => A::Crash,
            });
        }
        if acts.is_empty() {
            // Quiescent: the clock moves to the next timer.
            let next = (0..self.procs.len())
                .filter(|p| self.live(*p))
                .filter_map(|p| self.procs[p].rr.poll_timeout())
                .chain(self.decider.poll_timeout().filter(|_| self.launcher_alive))
                .min();
            let Some(t) = next else { return false };
            self.now = self.now.max(t);
            for p in 0..self.procs.len() {
                if self.live(p) {
                    self.procs[p].rr.poll_timers(self.now);
                }
            }
            if self.launcher_alive {
                self.decider.poll_timers(self.now);
            }
            self.drain();
            return true;
        }
        self.now += 1;
        let now = self.now;
        match acts[self.rng.below(acts.len())] {
            A::Chan(a, b) => {
                let m = self.chans.get_mut(&(a, b)).and_then(|q| q.pop_front());
                let from = self.procs[a].rank;
                match m {
                    Some(Msg::Frame {
                        header_epoch,
                        payload,
                    }) => {
                        // A frame of an epoch: its sender holds that record.
                        let t = self.told.entry((b, a)).or_insert(1);
                        *t = (*t).max(header_epoch);
                        self.procs[b].rr.handle_event(
                            Event::Recover {
                                from,
                                header_epoch,
                                payload,
                            },
                            now,
                        )
                    }
                    // A loss of an incarnation the receiver no longer has is stale.
                    Some(Msg::Lost { closed })
                        if self.procs[b].rr.incarnation_of(from)
                            == self.procs[a].rr.incarnation() =>
                    {
                        self.procs[b]
                            .rr
                            .handle_event(Event::PeerLost { peer: from, closed }, now)
                    }
                    Some(Msg::Lost { .. }) | None => {}
                }
            }
            A::Control(p) => match self.control.get_mut(&p).and_then(|q| q.pop_front()) {
                Some(Ctl::Record(record)) => self.procs[p]
                    .rr
                    .handle_event(Event::Control { record }, now),
                Some(Ctl::Closed) => self.procs[p].rr.handle_event(Event::ControlClosed, now),
                None => {}
            },
            A::Launcher => match self.launcher_in.pop_front() {
                Some(ToLauncher::Report(r)) => self.decider.handle_report(r, now),
                Some(ToLauncher::Exit { rank, inc }) => self.decider.handle_exit(rank, inc, now),
                None => {}
            },
            A::Connect => {
                let i = self.rng.below(self.connects.len());
                let Some((p, m)) = self.connects.remove(i) else {
                    return true;
                };
                let q = self.current[m as usize];
                let r = self.procs[p].rank;
                if !self.live(p)
                    || !self.live(q)
                    || self.procs[q].rr.incarnation() != self.procs[p].rr.incarnation_of(m)
                {
                    return true;
                }
                let (ep, eq) = (self.procs[p].rr.epoch(), self.procs[q].rr.epoch());
                let waits = matches!(self.procs[q].rr.phase(), Phase::Joining { waiting, .. } if waiting.contains(&r));
                if eq < ep
                    && matches!(
                        self.procs[q].rr.phase(),
                        Phase::Running | Phase::Revoked { .. }
                    )
                {
                    self.connects.push_back((p, m)); // refused for now; the replacement dials again (§18.7)
                } else if eq == ep
                    && waits
                    && matches!(self.procs[p].rr.phase(), Phase::Joining { .. })
                {
                    self.conns.insert(pair(p, q));
                    // Both ends of a join hold the record of its epoch.
                    self.told.insert((p, q), ep);
                    self.told.insert((q, p), ep);
                    self.procs[q]
                        .rr
                        .handle_event(Event::Joined { peer: r }, now);
                    self.procs[p]
                        .rr
                        .handle_event(Event::Joined { peer: m }, now);
                }
            }
            A::Crash | A::Hang => {
                self.failures_left -= 1;
                let live: Vec<usize> = (0..self.procs.len()).filter(|p| self.live(*p)).collect();
                if !live.is_empty() {
                    let p = live[self.rng.below(live.len())];
                    // A hang is a false suspicion: peers see silence, the
                    // launcher sees no exit and must fence the rank before
                    // it goes on. A rank without a live peer that stops is
                    // only computing: nobody can tell, and it is no failure.
                    let watched = self
                        .conns
                        .iter()
                        .any(|&(a, b)| (a == p && self.live(b)) || (b == p && self.live(a)));
                    if !matches!(acts.last(), Some(A::Hang)) {
                        self.stop(p, true);
                    } else if watched {
                        self.procs[p].paused = true;
                        self.cut(p, false);
                    }
                }
            }
            A::Resume(p) => {
                self.procs[p].paused = false;
                self.resumed_before_fence = true;
            }
            A::KillLauncher => {
                self.failures_left -= 1;
                self.launcher_died_in_recovery = (0..self.procs.len())
                    .any(|p| self.live(p) && !matches!(self.procs[p].rr.phase(), Phase::Running));
                self.launcher_alive = false;
                for p in 0..self.procs.len() {
                    if self.live(p) {
                        self.control.entry(p).or_default().push_back(Ctl::Closed);
                    }
                }
            }
        }
        self.drain();
        true
    }

    /// The property (protocol §18.6, §18.8).
    fn check(&self, seed: u64) {
        let ctx = format!("seed {seed}");
        let fallback = self.restart || !self.launcher_alive;
        for p in &self.procs {
            if let Some(Output::End(e)) = &p.ended {
                assert!(
                    matches!(e, sperli_wire::recovery::RecoveryError::LauncherLost),
                    "{ctx}: rank {} ended with {e}",
                    p.rank
                );
                assert!(fallback, "{ctx}: rank {} lost a live launcher", p.rank);
            }
        }
        if fallback {
            return; // the full restart: every rank is ended (§18.6)
        }
        let live: Vec<&Proc> = self
            .procs
            .iter()
            .filter(|p| p.alive && p.ended.is_none())
            .collect();
        assert!(!live.is_empty(), "{ctx}: no survivor and no restart");
        for p in &live {
            assert_eq!(
                p.rr.phase(),
                &Phase::Running,
                "{ctx}: rank {} hangs",
                p.rank
            );
            let got = p
                .decision
                .as_ref()
                .map(|d| (d.epoch, d.incarnations.clone(), d.agreed));
            assert_eq!(got, self.issued, "{ctx}: rank {} disagrees", p.rank);
            if let Some((_, incs, _)) = &self.issued {
                assert_eq!(
                    incs[p.rank as usize],
                    p.rr.incarnation(),
                    "{ctx}: rank {} not a member",
                    p.rank
                );
            }
        }
        assert_eq!(
            live.len(),
            self.procs.iter().filter(|p| p.alive).count(),
            "{ctx}"
        );
    }
}

/// What the runs of one mode covered.
#[derive(Debug, Default)]
struct Coverage {
    decided: u64,
    restarts: u64,
    several_records: u64,
    launcher_died_in_recovery: u64,
    resumed_before_fence: u64,
}

fn explore(mode: Mode, runs: u64) -> Coverage {
    let mut c = Coverage::default();
    for seed in 0..runs {
        let size = 2 + (seed % 5) as u32;
        let mut w = World::new(seed ^ 0x5eed_0000 ^ (mode as u64) << 40, size, mode);
        let mut steps = 0;
        while w.step() {
            steps += 1;
            assert!(
                steps < 100_000,
                "seed {seed}: no end after {steps} steps (a hang)"
            );
        }
        w.check(seed);
        if w.restart || !w.launcher_alive {
            c.restarts += 1;
        } else if w.issued.is_some() {
            c.decided += 1;
        }
        c.several_records += u64::from(w.records >= 2);
        c.launcher_died_in_recovery += u64::from(w.launcher_died_in_recovery);
        c.resumed_before_fence += u64::from(w.resumed_before_fence);
    }
    c
}

fn assert_covered(c: &Coverage) {
    assert!(
        c.decided > 1000
            && c.restarts > 50
            && c.several_records > 100
            && c.launcher_died_in_recovery > 10
            && c.resumed_before_fence > 50,
        "too little explored: {c:?}"
    );
}

#[test]
fn replace_mode_every_schedule_agrees_or_restarts() {
    assert_covered(&explore(Mode::Replace, 4000));
}

#[test]
fn shrink_mode_every_schedule_agrees_or_restarts() {
    assert_covered(&explore(Mode::Shrink, 4000));
}
