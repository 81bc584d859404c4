//! The launcher's side of a recovery (protocol §18.6): it collects the
//! REPORTs of an epoch, fences the failed ranks, and either decides the
//! next membership (a MEMBERSHIP record, signed by the caller with the
//! job key) or falls back to a full restart.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use sperli_wire::ids::{JobId, Sha256Digest};
use sperli_wire::limits::SIGNATURE_LEN;
use sperli_wire::recovery::{Change, MembershipRecord, Mode, Report, NO_ROLLBACK};

use super::rank::members;
use super::REPORT_WAIT_MS;

/// Why the launcher restarts the job in full (protocol §18.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartCause {
    /// Every member failed.
    NoSurvivor,
    /// A replacement is due and the replacements allowed are used up.
    ReplacementsUsedUp,
}

/// What the launcher must do (taken with [`Decider::poll_output`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeciderOutput {
    /// Kill this rank's process and wait for its end, before anything else.
    Fence {
        /// The rank.
        rank: u32,
    },
    /// Sign this record (its signature is a placeholder, and so are the
    /// certificate fingerprints and endpoints of its change entries in
    /// replace mode: the caller issues them), start the
    /// replacements it names (replace mode, with the record on their
    /// control channel), then write it to every member in `to`.
    Issue {
        /// The record to sign.
        record: MembershipRecord,
        /// The members (not new) to write it to.
        to: Vec<u32>,
    },
    /// End every rank and start the job again (protocol §10.1).
    FullRestart(RestartCause),
}

/// The launcher's recovery state (protocol §18.6).
pub struct Decider {
    job_id: JobId,
    start_incarnation: u32,
    mode: Mode,
    epoch: u32,
    incarnations: Vec<u32>,
    replacements_left: u32,
    exited: BTreeSet<u32>,
    reports: BTreeMap<u32, Report>,
    started: Option<u64>,
    done: bool,
    out: VecDeque<DeciderOutput>,
}

impl Decider {
    /// A launcher after set-up (epoch 1), allowed `replacements` replacements
    /// (`--restart-max`).
    pub fn new(
        job_id: JobId,
        size: u32,
        start_incarnation: u32,
        mode: Mode,
        replacements: u32,
    ) -> Self {
        Decider {
            job_id,
            start_incarnation,
            mode,
            epoch: 1,
            incarnations: vec![start_incarnation; size as usize],
            replacements_left: replacements,
            exited: BTreeSet::new(),
            reports: BTreeMap::new(),
            started: None,
            done: false,
            out: VecDeque::new(),
        }
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    fn member(&self, rank: u32) -> bool {
        self.incarnations
            .get(rank as usize)
            .is_some_and(|i| *i != 0)
    }

    /// A REPORT from `rank`'s control channel (protocol §18.4): a report of
    /// an older epoch is dropped; one that does not fit fences its rank.
    pub fn handle_report(&mut self, report: Report, now: u64) {
        if self.done || report.epoch < self.epoch {
            return;
        }
        if report.job_id != self.job_id
            || !self.member(report.rank)
            || self.incarnations[report.rank as usize] != report.incarnation
            || report.epoch > self.epoch
        {
            let rank = report.rank;
            if self.member(rank) {
                self.exited.insert(rank);
                self.started.get_or_insert(now);
            }
            return self.try_decide(now);
        }
        self.started.get_or_insert(now);
        self.reports.insert(report.rank, report);
        self.try_decide(now);
    }

    /// The process of `rank` at `incarnation` ended (the launcher saw it);
    /// the end of a process it fenced, or of an older incarnation, changes nothing.
    pub fn handle_exit(&mut self, rank: u32, incarnation: u32, now: u64) {
        if self.done || !self.member(rank) || self.incarnations[rank as usize] != incarnation {
            return;
        }
        self.exited.insert(rank);
        self.started.get_or_insert(now);
        self.try_decide(now);
    }

    /// Runs the report wait (protocol §18.6: members silent past it are failed).
    pub fn poll_timers(&mut self, now: u64) {
        if let Some(t) = self.started {
            if !self.done && now >= t + REPORT_WAIT_MS {
                self.decide(now, true);
            }
        }
    }

    /// The next deadline of [`Self::poll_timers`].
    pub fn poll_timeout(&self) -> Option<u64> {
        self.started
            .filter(|_| !self.done)
            .map(|t| t + REPORT_WAIT_MS)
    }

    /// The next thing to do.
    pub fn poll_output(&mut self) -> Option<DeciderOutput> {
        self.out.pop_front()
    }

    /// The failed set F (protocol §18.6): the ranks seen ending, then the
    /// suspects of each reporter not already in F, in ascending reporter rank.
    fn failed(&self) -> BTreeSet<u32> {
        let mut f = self.exited.clone();
        for (rank, rep) in &self.reports {
            if !f.contains(rank) {
                f.extend(rep.suspects.iter().copied().filter(|s| self.member(*s)));
            }
        }
        f
    }

    fn try_decide(&mut self, now: u64) {
        self.decide(now, false);
    }

    fn decide(&mut self, _now: u64, deadline: bool) {
        let mut f = self.failed();
        let missing: Vec<u32> = members(&self.incarnations)
            .filter(|m| !f.contains(m) && !self.reports.contains_key(m))
            .collect();
        if !missing.is_empty() && !deadline {
            return;
        }
        f.extend(missing);
        if f.is_empty() {
            return;
        }
        for r in &f {
            self.out.push_back(DeciderOutput::Fence { rank: *r });
        }
        let survivors: Vec<u32> = members(&self.incarnations)
            .filter(|m| !f.contains(m))
            .collect();
        if survivors.is_empty() {
            self.done = true;
            return self
                .out
                .push_back(DeciderOutput::FullRestart(RestartCause::NoSurvivor));
        }
        if self.mode == Mode::Replace {
            if self.replacements_left < f.len() as u32 {
                self.done = true;
                return self
                    .out
                    .push_back(DeciderOutput::FullRestart(RestartCause::ReplacementsUsedUp));
            }
            self.replacements_left -= f.len() as u32;
        }
        let agreed = survivors
            .iter()
            .all(|s| self.reports.get(s).is_some_and(|r| r.flag));
        let rollback = match self.mode {
            Mode::Replace => survivors
                .iter()
                .filter_map(|s| self.reports.get(s))
                .map(|r| r.best_commit)
                .min()
                .unwrap_or(0),
            Mode::Shrink => NO_ROLLBACK,
        };
        let mut incarnations = self.incarnations.clone();
        let changes = f
            .iter()
            .map(|r| {
                let i = &mut incarnations[*r as usize];
                match self.mode {
                    Mode::Replace => {
                        *i += 1;
                        Change {
                            rank: *r,
                            cert_sha256: Sha256Digest([*i as u8; 32]),
                            endpoint: Some((7000 + *r as u16, format!("127.0.0.{}", 1 + r % 200))),
                        }
                    }
                    Mode::Shrink => {
                        *i = 0;
                        Change {
                            rank: *r,
                            cert_sha256: Sha256Digest([0; 32]),
                            endpoint: None,
                        }
                    }
                }
            })
            .collect();
        self.epoch += 1;
        let record = MembershipRecord {
            mode: self.mode,
            agreed,
            job_id: self.job_id,
            start_incarnation: self.start_incarnation,
            epoch: self.epoch,
            size: self.incarnations.len() as u32,
            rollback,
            incarnations: incarnations.clone(),
            changes,
            signature: vec![0; SIGNATURE_LEN],
        };
        self.incarnations = incarnations;
        self.exited.clear();
        self.reports.clear();
        self.started = None;
        self.out.push_back(DeciderOutput::Issue {
            record,
            to: survivors,
        });
    }
}
