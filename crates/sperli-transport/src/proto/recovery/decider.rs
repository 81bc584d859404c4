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
        let record = self.record(&f, &survivors, false);
        self.epoch = record.epoch;
        self.incarnations = record.incarnations.clone();
        self.exited.clear();
        self.reports.clear();
        self.started = None;
        self.out.push_back(DeciderOutput::Issue {
            record,
            to: survivors,
        });
    }

    /// The record (signature a placeholder) of the next epoch with failed
    /// set `f` and `survivors`; a survivor without a report counts with
    /// flag `missing_flag` (protocol §18.6, "Decision").
    fn record(&self, f: &BTreeSet<u32>, survivors: &[u32], missing_flag: bool) -> MembershipRecord {
        let agreed = survivors
            .iter()
            .all(|s| self.reports.get(s).map_or(missing_flag, |r| r.flag));
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
        MembershipRecord {
            mode: self.mode,
            agreed,
            job_id: self.job_id,
            start_incarnation: self.start_incarnation,
            epoch: self.epoch + 1,
            size: self.incarnations.len() as u32,
            rollback,
            incarnations,
            changes,
            signature: vec![0; SIGNATURE_LEN],
        }
    }

    /// The shrink record this recovery issues if every member that has
    /// not reported yet reports with its flag set and no new suspect (the
    /// usual case: one process ended, every survivor saw its close). The
    /// launcher may sign it while the reports come in and write it once
    /// the Decider issues the same bytes (protocol §18.6, "This
    /// implementation"). `None` when no recovery is under way, in replace
    /// mode (the replacements' certificates are issued with the record)
    /// or when no member would survive.
    pub fn forecast(&self) -> Option<MembershipRecord> {
        if self.done || self.started.is_none() || self.mode != Mode::Shrink {
            return None;
        }
        let f = self.failed();
        let survivors: Vec<u32> = members(&self.incarnations)
            .filter(|m| !f.contains(m))
            .collect();
        if f.is_empty() || survivors.is_empty() {
            return None;
        }
        Some(self.record(&f, &survivors, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: JobId = JobId([3; 16]);

    fn report(rank: u32, flag: bool, suspects: &[u32]) -> Report {
        Report {
            flag,
            job_id: JOB,
            rank,
            incarnation: 1,
            epoch: 1,
            best_commit: 0,
            suspects: suspects.to_vec(),
        }
    }

    fn issued(d: &mut Decider) -> MembershipRecord {
        loop {
            match d.poll_output() {
                Some(DeciderOutput::Issue { record, .. }) => return record,
                Some(_) => {}
                None => panic!("nothing issued"),
            }
        }
    }

    #[test]
    fn the_forecast_is_the_record_issued_when_every_survivor_reports_the_exit() {
        let mut d = Decider::new(JOB, 4, 1, Mode::Shrink, 0);
        assert_eq!(d.forecast(), None, "no recovery under way");
        d.handle_exit(3, 1, 10);
        let f = d.forecast().unwrap();
        assert_eq!((f.epoch, f.agreed), (2, true));
        assert_eq!(f.incarnations, vec![1, 1, 1, 0]);
        for r in 0..3 {
            d.handle_report(report(r, true, &[3]), 11);
            if r < 2 {
                assert_eq!(d.forecast().as_ref(), Some(&f), "unchanged by report {r}");
            }
        }
        assert_eq!(issued(&mut d), f);
        assert_eq!(d.forecast(), None, "issued");
    }

    #[test]
    fn the_forecast_follows_a_cleared_flag_and_a_new_suspect() {
        let mut d = Decider::new(JOB, 4, 1, Mode::Shrink, 0);
        d.handle_report(report(0, true, &[3]), 10);
        let first = d.forecast().unwrap();
        assert_eq!(first.incarnations, vec![1, 1, 1, 0]);
        d.handle_report(report(1, false, &[3]), 11);
        let second = d.forecast().unwrap();
        assert!(!second.agreed);
        // Rank 2 suspects rank 1 too: F = {1, 3}, and the record issued
        // is not the forecast (the launcher signs it then).
        d.handle_report(report(2, true, &[1, 3]), 12);
        let rec = issued(&mut d);
        assert_eq!(rec.incarnations, vec![1, 0, 1, 0]);
        assert_ne!(rec, second);
    }

    #[test]
    fn no_forecast_in_replace_mode() {
        let mut d = Decider::new(JOB, 4, 1, Mode::Replace, 1);
        d.handle_exit(3, 1, 10);
        assert_eq!(d.forecast(), None);
    }
}
