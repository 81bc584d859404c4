//! The launcher's half of a recovery with membership epochs (protocol
//! §18.6, docs/launcher.md "Recovery"): `sperli run --recover
//! inplace|shrink|restart`, and the supervisor's driver of the sans-I/O
//! [`Decider`]. A rank's abnormal end and the REPORTs of its control
//! channel ([`crate::control`]) go to the Decider; what it decides comes
//! back as [`Action`]s for the supervisor: kill a rank's process group
//! (fence), write a signed MEMBERSHIP record to the survivors' channels,
//! print one line, or restart the job in full (protocol §10.1).
//!
//! The record is signed with the job key (CompositeSig, context
//! `SPERLI-MEMBER-1`, protocol §18.3) before it is written; a fenced rank
//! has ended before the record that removes it is signed (protocol §18.6).
//! A replacement (the replace mode, protocol §18.7) does not join yet: in
//! `inplace` mode a decision to replace is carried out as a full restart.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use sperli_tls::composite_sig::{self, SecretKey};
use sperli_transport::proto::recovery::decider::{Decider, DeciderOutput, RestartCause};
use sperli_transport::proto::recovery::REPORT_WAIT_MS;
use sperli_wire::ids::JobId;
use sperli_wire::recovery::{MembershipRecord, Mode, Report, CONTEXT_MEMBER};

use crate::control::ChannelLine;
use crate::rank_exit::RankExit;
use crate::root_cause::Failure;

/// `sperli run --recover`: what the launcher does when a rank fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoverMode {
    /// A replacement of the failed rank joins the survivors, which roll
    /// back to a COMMIT (protocol §18.7). Until a replacement can join,
    /// carried out as a full restart.
    #[default]
    Inplace,
    /// The survivors go on without the failed ranks (protocol §18.8).
    Shrink,
    /// Every rank is ended and the job starts again (protocol §10.1): no
    /// control channel, so the ranks run without feature bit 5.
    Restart,
}

impl RecoverMode {
    /// The record's mode, `None` for [`RecoverMode::Restart`].
    pub fn protocol_mode(self) -> Option<Mode> {
        match self {
            RecoverMode::Inplace => Some(Mode::Replace),
            RecoverMode::Shrink => Some(Mode::Shrink),
            RecoverMode::Restart => None,
        }
    }
}

impl std::str::FromStr for RecoverMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "inplace" => Ok(RecoverMode::Inplace),
            "shrink" => Ok(RecoverMode::Shrink),
            "restart" => Ok(RecoverMode::Restart),
            other => Err(format!(
                "--recover {other:?}: expected inplace, shrink or restart"
            )),
        }
    }
}

/// What one run of a job needs to recover from a rank's failure: the job,
/// the mode, the replacements still allowed and the job key that signs
/// the records.
#[derive(Clone)]
pub struct RecoveryPlan {
    /// The job.
    pub job_id: JobId,
    /// The incarnation of every rank at this run's set-up.
    pub start_incarnation: u32,
    /// Replace or shrink.
    pub mode: Mode,
    /// The restarts `--restart-max` still allows (each replacement is one).
    pub replacements: u32,
    /// The job's CompositeSig secret key (signs the records).
    pub job_key: SecretKey,
}

impl std::fmt::Debug for RecoveryPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecoveryPlan")
            .field("job_id", &self.job_id)
            .field("start_incarnation", &self.start_incarnation)
            .field("mode", &self.mode)
            .field("replacements", &self.replacements)
            .finish_non_exhaustive()
    }
}

/// What the supervisor must do for the recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL this rank's process group (a fence, protocol §18.6).
    Kill(u32),
    /// Write this signed record (encoded) to each rank's control channel.
    Write {
        /// The record's bytes.
        record: Vec<u8>,
        /// The ranks.
        to: Vec<u32>,
    },
    /// Print this line on the launcher's stderr.
    Say(String),
    /// End every rank and start the job again (protocol §10.1): these
    /// failures, held back while the Decider ran, are the job's now; none
    /// when the failed ranks were fenced without ending on their own.
    FullRestart(Vec<(Failure, Instant)>),
}

/// Why a rank of the current epoch was lost (for the recovery's line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loss {
    Exited(RankExit),
    Refused,
}

/// The supervisor's side of the Decider for one run of a job.
pub struct Recovery {
    plan: RecoveryPlan,
    decider: Decider,
    clock: Instant,
    size: u32,
    members: u32,
    fenced: BTreeSet<u32>,
    pending: VecDeque<DeciderOutput>,
    held: Vec<(Failure, Instant)>,
    lost: BTreeMap<u32, Loss>,
    suspected_by: BTreeMap<u32, u32>,
    restarting: bool,
}

impl Recovery {
    /// The recovery of a run of `size` ranks, in epoch 1.
    pub fn new(plan: RecoveryPlan, size: u32) -> Self {
        Self {
            decider: Decider::new(
                plan.job_id,
                size,
                plan.start_incarnation,
                plan.mode,
                plan.replacements,
            ),
            plan,
            clock: Instant::now(),
            size,
            members: size,
            fenced: BTreeSet::new(),
            pending: VecDeque::new(),
            held: Vec::new(),
            lost: BTreeMap::new(),
            suspected_by: BTreeMap::new(),
            restarting: false,
        }
    }

    fn now(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// Whether the Decider still handles failures (not after it chose a
    /// full restart: then the supervisor's usual path does).
    pub fn active(&self) -> bool {
        !self.restarting
    }

    /// Whether `rank` was fenced: its end is the launcher's doing.
    pub fn fenced(&self, rank: u32) -> bool {
        self.fenced.contains(&rank)
    }

    /// A rank's process ended abnormally (a non-zero status or a signal).
    pub fn on_exit(&mut self, failure: Failure) {
        let now = self.now();
        self.lost
            .entry(failure.rank)
            .or_insert(Loss::Exited(failure.exit));
        let rank = failure.rank;
        self.held.push((failure, Instant::now()));
        self.decider
            .handle_exit(rank, self.plan.start_incarnation, now);
    }

    /// A line from `rank`'s control channel (protocol §18.4): a REPORT
    /// that names another rank, or a suspect outside the job, is refused
    /// like one that does not decode, and a refused REPORT is a failure of
    /// its rank.
    pub fn on_line(&mut self, rank: u32, line: ChannelLine) {
        let now = self.now();
        match line {
            ChannelLine::Report(r) if self.fits(rank, &r) => {
                for s in &r.suspects {
                    self.suspected_by.entry(*s).or_insert(rank);
                }
                self.decider.handle_report(r, now);
            }
            ChannelLine::Report(_) | ChannelLine::Refused(_) => {
                self.lost.entry(rank).or_insert(Loss::Refused);
                self.decider
                    .handle_exit(rank, self.plan.start_incarnation, now);
            }
        }
    }

    fn fits(&self, rank: u32, r: &Report) -> bool {
        r.rank == rank && r.suspects.iter().all(|s| *s < self.size)
    }

    /// Runs the Decider's timers and turns its outputs into actions;
    /// `ended(rank)`: whether the rank's process has ended (a record that
    /// removes a fenced rank waits for that).
    pub fn step(&mut self, ended: impl Fn(u32) -> bool) -> Vec<Action> {
        let mut out = Vec::new();
        if self.restarting {
            return out;
        }
        self.decider.poll_timers(self.now());
        while let Some(o) = self.decider.poll_output() {
            self.pending.push_back(o);
        }
        if self
            .pending
            .iter()
            .any(|o| matches!(o, DeciderOutput::FullRestart(_)))
        {
            // The usual path ends every rank: no fence first.
            self.pending.clear();
            self.restarting = true;
            out.push(Action::FullRestart(std::mem::take(&mut self.held)));
            return out;
        }
        while let Some(o) = self.pending.pop_front() {
            match o {
                DeciderOutput::Fence { rank } => {
                    if self.fenced.insert(rank) && !ended(rank) {
                        out.push(Action::Kill(rank));
                    }
                }
                DeciderOutput::Issue { record, to } => {
                    if record.changes.iter().any(|c| !ended(c.rank)) {
                        self.pending.push_front(DeciderOutput::Issue { record, to });
                        break;
                    }
                    self.issue(record, to, &mut out);
                    if self.restarting {
                        break;
                    }
                }
                DeciderOutput::FullRestart(RestartCause::NoSurvivor)
                | DeciderOutput::FullRestart(RestartCause::ReplacementsUsedUp) => {}
            }
        }
        out
    }

    fn issue(&mut self, mut record: MembershipRecord, to: Vec<u32>, out: &mut Vec<Action>) {
        let lost = self.lost_text(&record);
        let epoch = record.epoch;
        if record.mode == Mode::Replace {
            // protocol §18.7: a replacement cannot join yet.
            out.push(Action::Say(format!(
                "sperli: epoch {epoch}: {lost}; a replacement cannot join yet: restarting the job in full"
            )));
            self.restarting = true;
            out.push(Action::FullRestart(std::mem::take(&mut self.held)));
            return;
        }
        match sign(&self.plan.job_key, &mut record) {
            Ok(()) => {
                self.members = record.incarnations.iter().filter(|i| **i != 0).count() as u32;
                out.push(Action::Say(format!(
                    "sperli: epoch {epoch}: {lost}; shrunk to {} ranks",
                    self.members
                )));
                out.push(Action::Write {
                    record: record.encode(),
                    to,
                });
                let gone: BTreeSet<u32> = record.changes.iter().map(|c| c.rank).collect();
                self.held.retain(|(f, _)| !gone.contains(&f.rank));
                self.lost.clear();
                self.suspected_by.clear();
            }
            Err(e) => {
                out.push(Action::Say(format!(
                    "sperli: epoch {epoch}: {lost}; the record cannot be signed ({e}): restarting the job in full"
                )));
                self.restarting = true;
                out.push(Action::FullRestart(std::mem::take(&mut self.held)));
            }
        }
    }

    /// `rank 3 lost (killed by signal 9 (SIGKILL))`, or `ranks 1, 3 lost
    /// (rank 1: exit code 3; rank 3: lost by rank 0)`.
    fn lost_text(&self, record: &MembershipRecord) -> String {
        let why = |r: u32| match (self.lost.get(&r), self.suspected_by.get(&r)) {
            (Some(Loss::Exited(RankExit::Signal(s))), _) => {
                format!("killed by {}", RankExit::Signal(*s))
            }
            (Some(Loss::Exited(e)), _) => e.to_string(),
            (Some(Loss::Refused), _) => {
                "its control channel sent a line that is not a REPORT of this job".into()
            }
            (None, Some(by)) => format!("lost by rank {by}, fenced"),
            (None, None) => format!("sent no REPORT within {REPORT_WAIT_MS} ms, fenced"),
        };
        let ranks: Vec<u32> = record.changes.iter().map(|c| c.rank).collect();
        match ranks.as_slice() {
            [r] => format!("rank {r} lost ({})", why(*r)),
            _ => {
                let names: Vec<String> = ranks.iter().map(u32::to_string).collect();
                let whys: Vec<String> = ranks
                    .iter()
                    .map(|r| format!("rank {r}: {}", why(*r)))
                    .collect();
                format!("ranks {} lost ({})", names.join(", "), whys.join("; "))
            }
        }
    }
}

/// Signs `record` with the job key, context `SPERLI-MEMBER-1` (protocol
/// §18.3), over its signed bytes.
pub fn sign(
    key: &SecretKey,
    record: &mut MembershipRecord,
) -> Result<(), composite_sig::CompositeSigError> {
    let sig = composite_sig::sign(key, &record.signed_bytes(), CONTEXT_MEMBER)?;
    record.signature = sig.0.to_vec();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::LineError;
    use sperli_wire::recovery::NO_ROLLBACK;

    fn plan(mode: Mode, replacements: u32) -> RecoveryPlan {
        RecoveryPlan {
            job_id: JobId([3; 16]),
            start_incarnation: 2,
            mode,
            replacements,
            job_key: composite_sig::generate().unwrap(),
        }
    }

    fn report(rank: u32, suspects: Vec<u32>) -> ChannelLine {
        ChannelLine::Report(Report {
            flag: rank != 2,
            job_id: JobId([3; 16]),
            rank,
            incarnation: 2,
            epoch: 1,
            best_commit: 0,
            suspects,
        })
    }

    fn failure(rank: u32, exit: RankExit) -> Failure {
        Failure {
            rank,
            exit,
            record: None,
        }
    }

    #[test]
    fn modes_parse() {
        assert_eq!("inplace".parse(), Ok(RecoverMode::Inplace));
        assert_eq!("shrink".parse(), Ok(RecoverMode::Shrink));
        assert_eq!("restart".parse(), Ok(RecoverMode::Restart));
        assert!("replace".parse::<RecoverMode>().is_err());
        assert_eq!(RecoverMode::default(), RecoverMode::Inplace);
        assert_eq!(RecoverMode::Inplace.protocol_mode(), Some(Mode::Replace));
        assert_eq!(RecoverMode::Shrink.protocol_mode(), Some(Mode::Shrink));
        assert_eq!(RecoverMode::Restart.protocol_mode(), None);
    }

    #[test]
    fn a_killed_rank_and_its_peers_reports_make_one_signed_record() {
        let p = plan(Mode::Shrink, 0);
        let public = p.job_key.public_key().clone();
        let mut rec = Recovery::new(p, 4);
        rec.on_exit(failure(3, RankExit::Signal(9)));
        assert_eq!(rec.step(|_| true), []);
        rec.on_line(0, report(0, vec![3]));
        rec.on_line(1, report(1, vec![3]));
        assert_eq!(rec.step(|_| true), []);
        rec.on_line(2, report(2, vec![3]));
        let acts = rec.step(|_| true);
        assert_eq!(
            acts[0],
            Action::Say(
                "sperli: epoch 2: rank 3 lost (killed by signal 9 (SIGKILL)); shrunk to 3 ranks"
                    .into()
            )
        );
        let Action::Write { record, to } = &acts[1] else {
            panic!("{acts:?}")
        };
        assert_eq!(to, &[0, 1, 2]);
        let r = MembershipRecord::decode(record).unwrap();
        assert_eq!(
            (r.epoch, r.mode, r.agreed, r.rollback),
            (2, Mode::Shrink, false, NO_ROLLBACK)
        );
        assert_eq!(r.incarnations, [2, 2, 2, 0]);
        assert!(composite_sig::verify_bytes(
            public.as_bytes(),
            &r.signed_bytes(),
            CONTEXT_MEMBER,
            &r.signature
        ));
        // Not with another context: a record is not a join token or a COMMIT.
        assert!(!composite_sig::verify_bytes(
            public.as_bytes(),
            &r.signed_bytes(),
            b"SPERLI-COMMIT-1",
            &r.signature
        ));
        assert_eq!(acts.len(), 2);
        // The failure was the recovery's: nothing is held for a restart.
        assert!(rec.held.is_empty());
    }

    #[test]
    fn a_suspected_rank_is_fenced_and_the_record_waits_for_its_end() {
        let mut rec = Recovery::new(plan(Mode::Shrink, 0), 3);
        rec.on_line(0, report(0, vec![1]));
        rec.on_line(2, report(2, vec![1]));
        let acts = rec.step(|_| false);
        assert_eq!(acts, [Action::Kill(1)]);
        assert!(rec.fenced(1));
        // Still running: no record yet, and no second kill.
        assert_eq!(rec.step(|_| false), []);
        let acts = rec.step(|r| r == 1);
        assert_eq!(
            acts[0],
            Action::Say(
                "sperli: epoch 2: rank 1 lost (lost by rank 0, fenced); shrunk to 2 ranks".into()
            )
        );
        assert!(matches!(&acts[1], Action::Write { to, .. } if to == &[0, 2]));
    }

    #[test]
    fn a_refused_line_or_a_report_for_another_rank_is_its_ranks_failure() {
        let mut rec = Recovery::new(plan(Mode::Shrink, 0), 3);
        rec.on_line(1, ChannelLine::Refused(LineError::TooLong));
        // Rank 2 writes a report in rank 0's name.
        rec.on_line(2, report(0, vec![]));
        rec.on_line(0, report(0, vec![1, 2]));
        let acts = rec.step(|_| true);
        assert!(
            matches!(&acts[0], Action::Say(s) if s.starts_with("sperli: epoch 2: ranks 1, 2 lost (rank 1: its control channel sent a line that is not a REPORT of this job; rank 2: its control channel")),
            "{acts:?}"
        );
        assert!(matches!(&acts[1], Action::Write { to, .. } if to == &[0]));
        // A suspect outside the job is refused too.
        let mut rec = Recovery::new(plan(Mode::Shrink, 0), 3);
        rec.on_line(1, report(1, vec![7]));
        rec.on_line(0, report(0, vec![]));
        rec.on_line(2, report(2, vec![]));
        let acts = rec.step(|_| true);
        assert!(matches!(&acts[1], Action::Write { to, .. } if to == &[0, 2]));
    }

    #[test]
    fn no_survivor_restarts_in_full_with_the_held_failures() {
        let mut rec = Recovery::new(plan(Mode::Shrink, 0), 2);
        rec.on_exit(failure(1, RankExit::Code(3)));
        assert_eq!(rec.step(|_| true), []);
        rec.on_exit(failure(0, RankExit::Code(1)));
        let acts = rec.step(|_| true);
        match acts.as_slice() {
            [Action::FullRestart(held)] => {
                let ranks: Vec<u32> = held.iter().map(|(f, _)| f.rank).collect();
                assert_eq!(ranks, [1, 0]);
            }
            other => panic!("{other:?}"),
        }
        assert!(!rec.active());
        assert_eq!(rec.step(|_| true), []);
    }

    #[test]
    fn replace_mode_restarts_in_full_until_a_replacement_can_join() {
        let mut rec = Recovery::new(plan(Mode::Replace, 1), 2);
        rec.on_exit(failure(1, RankExit::Signal(9)));
        rec.on_line(0, report(0, vec![1]));
        let acts = rec.step(|_| true);
        assert_eq!(
            acts[0],
            Action::Say("sperli: epoch 2: rank 1 lost (killed by signal 9 (SIGKILL)); a replacement cannot join yet: restarting the job in full".into())
        );
        assert!(matches!(&acts[1], Action::FullRestart(h) if h.len() == 1));
        // Without a replacement left, the Decider restarts in full itself.
        let mut rec = Recovery::new(plan(Mode::Replace, 0), 2);
        rec.on_exit(failure(1, RankExit::Signal(9)));
        rec.on_line(0, report(0, vec![1]));
        assert!(matches!(
            rec.step(|_| true).as_slice(),
            [Action::FullRestart(h)] if h.len() == 1
        ));
    }
}
