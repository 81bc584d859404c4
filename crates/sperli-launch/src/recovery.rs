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
//! In the replace mode the launcher issues and starts a replacement of
//! each failed rank before it writes the record ([`crate::replacement`],
//! protocol §18.7).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use sperli_tls::composite_sig::{self, SecretKey};
use sperli_tls::job_plan::JobPlan;
use sperli_transport::proto::recovery::decider::{Decider, DeciderOutput, RestartCause};
use sperli_transport::proto::recovery::REPORT_WAIT_MS;
use sperli_wire::job_description::HostEntry;
use sperli_wire::recovery::{MembershipRecord, Mode, Report, CONTEXT_MEMBER};

use crate::control::ChannelLine;
use crate::rank_exit::RankExit;
use crate::replacement::{self, Replacement};
use crate::root_cause::Failure;

/// `sperli run --recover`: what the launcher does when a rank fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoverMode {
    /// A replacement of the failed rank joins the survivors, which roll
    /// back to a COMMIT (protocol §18.7), while `--restart-max` allows
    /// one. The default.
    #[default]
    Inplace,
    /// The survivors go on without the failed ranks (protocol §18.8).
    Shrink,
    /// Every rank is ended and the job starts again (protocol §10.1): no
    /// control channel, so the ranks run without feature bit 5, byte for
    /// byte as v1.
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

/// A `--recover` value that is none of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--recover {0:?}: expected inplace, shrink or restart")]
pub struct UnknownRecoverMode(pub String);

impl std::str::FromStr for RecoverMode {
    type Err = UnknownRecoverMode;
    fn from_str(s: &str) -> Result<Self, UnknownRecoverMode> {
        match s {
            "inplace" => Ok(RecoverMode::Inplace),
            "shrink" => Ok(RecoverMode::Shrink),
            "restart" => Ok(RecoverMode::Restart),
            other => Err(UnknownRecoverMode(other.to_owned())),
        }
    }
}

/// What one run of a job needs to recover from a rank's failure: the
/// job's plan (its id, this run's incarnation, host list, CA and the job
/// key that signs the records), the mode and the replacements still
/// allowed.
#[derive(Debug, Clone, Copy)]
pub struct RecoveryPlan<'a> {
    /// The job as this run started it.
    pub job: &'a JobPlan,
    /// Replace or shrink.
    pub mode: Mode,
    /// The restarts `--restart-max` still allows (each replacement is one).
    pub replacements: u32,
    /// Loopback hosts the placement left unused, already checked against
    /// the refused hosts: a replacement runs on the first one left, else on
    /// its rank's host (as a restart moves a rank, docs/launcher.md).
    pub spares: &'a [String],
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
    /// Start this replacement (protocol §18.7) with `record` (encoded) as
    /// the first line on its control channel.
    Start {
        /// What it was issued.
        replacement: Box<Replacement>,
        /// The signed record.
        record: Vec<u8>,
    },
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
pub struct Recovery<'a> {
    plan: RecoveryPlan<'a>,
    decider: Decider,
    clock: Instant,
    size: u32,
    /// `inc[n]` of the current epoch (0: not a member).
    incarnations: Vec<u32>,
    /// Every rank's current endpoint.
    hosts: Vec<HostEntry>,
    /// The spare hosts not taken by a replacement yet.
    spares: VecDeque<String>,
    /// (rank, incarnation) of every fenced process.
    fenced: BTreeSet<(u32, u32)>,
    pending: VecDeque<DeciderOutput>,
    held: Vec<(Failure, Instant)>,
    /// The failures the last record answered with replacements, until a
    /// replacement of it cannot start.
    replaced: Vec<(Failure, Instant)>,
    lost: BTreeMap<u32, Loss>,
    suspected_by: BTreeMap<u32, u32>,
    restarting: bool,
    /// The Decider's forecast, signed while the reports came in (shrink
    /// mode, [`Recovery::presign`]).
    presigned: Option<MembershipRecord>,
}

impl<'a> Recovery<'a> {
    /// The recovery of a run of the job's ranks, in epoch 1.
    pub fn new(plan: RecoveryPlan<'a>) -> Self {
        let job = plan.job;
        let size = job.size();
        Self {
            decider: Decider::new(
                job.job_id,
                size,
                job.incarnation,
                plan.mode,
                plan.replacements,
            ),
            plan,
            clock: Instant::now(),
            size,
            incarnations: vec![job.incarnation; size as usize],
            hosts: job.hosts.clone(),
            spares: plan.spares.iter().cloned().collect(),
            fenced: BTreeSet::new(),
            pending: VecDeque::new(),
            held: Vec::new(),
            replaced: Vec::new(),
            lost: BTreeMap::new(),
            suspected_by: BTreeMap::new(),
            restarting: false,
            presigned: None,
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

    /// Whether the process of `rank` at `incarnation` was fenced: its end
    /// is the launcher's doing.
    pub fn fenced(&self, rank: u32, incarnation: u32) -> bool {
        self.fenced.contains(&(rank, incarnation))
    }

    /// A replacement could not be started (protocol §18.6: a full
    /// restart): the failures it answered and those held since are the
    /// job's.
    pub fn replacement_failed(&mut self) -> Vec<(Failure, Instant)> {
        self.restarting = true;
        let mut all = std::mem::take(&mut self.replaced);
        all.append(&mut self.held);
        all
    }

    /// Whether the process of `rank` at `incarnation` is of the current
    /// membership (not an older incarnation, not a rank removed).
    fn current(&self, rank: u32, incarnation: u32) -> bool {
        self.incarnations.get(rank as usize) == Some(&incarnation) && incarnation != 0
    }

    /// The process of a rank at `incarnation` ended abnormally (a non-zero
    /// status or a signal).
    pub fn on_exit(&mut self, failure: Failure, incarnation: u32) {
        let now = self.now();
        let rank = failure.rank;
        if !self.current(rank, incarnation) {
            return;
        }
        self.lost.entry(rank).or_insert(Loss::Exited(failure.exit));
        self.held.push((failure, Instant::now()));
        self.decider.handle_exit(rank, incarnation, now);
        self.presign();
    }

    /// A line from the control channel of `rank` at `incarnation`
    /// (protocol §18.4): a REPORT that names another rank, or a suspect
    /// outside the job, is refused like one that does not decode, and a
    /// refused REPORT is a failure of its rank.
    pub fn on_line(&mut self, rank: u32, incarnation: u32, line: ChannelLine) {
        if !self.current(rank, incarnation) {
            return;
        }
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
                self.decider.handle_exit(rank, incarnation, now);
            }
        }
        self.presign();
    }

    /// Signs the record the Decider expects to issue, while the survivors'
    /// reports come in (protocol §18.6, "This implementation"): the
    /// signature (0.2 to 2 ms of one core for ML-DSA-44) is then off the
    /// path from the last report to the record's write. Nothing leaves
    /// the launcher before the Decider issues the same signed bytes, after
    /// its fences; a forecast that changed is signed again.
    fn presign(&mut self) {
        let Some(mut next) = self.decider.forecast() else {
            return;
        };
        let bytes = next.signed_bytes();
        if self
            .presigned
            .as_ref()
            .is_some_and(|p| p.signed_bytes() == bytes)
        {
            return;
        }
        self.presigned = sign(&self.plan.job.job_key, &mut next)
            .is_ok()
            .then_some(next);
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
                    let inc = self.incarnations.get(rank as usize).copied().unwrap_or(0);
                    if self.fenced.insert((rank, inc)) && !ended(rank) {
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
        let restart = |why: String, this: &mut Self, out: &mut Vec<Action>| {
            out.push(Action::Say(format!(
                "sperli: epoch {epoch}: {lost}; {why}: restarting the job in full"
            )));
            this.restarting = true;
            out.push(Action::FullRestart(std::mem::take(&mut this.held)));
        };
        let mut started = Vec::new();
        if record.mode == Mode::Replace {
            match self.replacements(&record) {
                Ok(reps) => {
                    replacement::fill_changes(&mut record, &reps);
                    started = reps;
                }
                Err(e) => {
                    return restart(format!("no replacement can be issued ({e})"), self, out);
                }
            }
        }
        let bytes = record.signed_bytes();
        match self.presigned.take().filter(|p| p.signed_bytes() == bytes) {
            Some(p) => record.signature = p.signature,
            None => {
                if let Err(e) = sign(&self.plan.job.job_key, &mut record) {
                    return restart(format!("the record cannot be signed ({e})"), self, out);
                }
            }
        }
        let members = record.incarnations.iter().filter(|i| **i != 0).count();
        let what = match record.mode {
            Mode::Shrink => format!("shrunk to {members} ranks"),
            Mode::Replace => {
                let runs: Vec<String> = started
                    .iter()
                    .map(|r| {
                        format!(
                            "replacement of rank {} runs on {}:{} (incarnation {})",
                            r.rank, r.endpoint.host, r.endpoint.port, r.incarnation
                        )
                    })
                    .collect();
                format!(
                    "{}, rolling back to checkpoint epoch {}",
                    runs.join(", "),
                    record.rollback
                )
            }
        };
        out.push(Action::Say(format!(
            "sperli: epoch {epoch}: {lost}; {what}"
        )));
        let bytes = record.encode();
        for r in started {
            self.hosts[r.rank as usize] = r.endpoint.clone();
            out.push(Action::Start {
                replacement: Box::new(r),
                record: bytes.clone(),
            });
        }
        out.push(Action::Write { record: bytes, to });
        self.incarnations = record.incarnations.clone();
        let gone: BTreeSet<u32> = record.changes.iter().map(|c| c.rank).collect();
        let (answered, held) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(f, _)| gone.contains(&f.rank));
        self.held = held;
        self.replaced = if record.mode == Mode::Replace {
            answered
        } else {
            Vec::new()
        };
        self.lost.clear();
        self.suspected_by.clear();
    }

    /// Issues the replacement of each changed rank of `record` on the
    /// first spare host left, else on its rank's host, with a free port
    /// (protocol §18.7); the spares it takes are used up once all are
    /// issued.
    fn replacements(
        &mut self,
        record: &MembershipRecord,
    ) -> Result<Vec<Replacement>, replacement::ReplacementError> {
        let mut hosts = self.hosts.clone();
        let mut spares = self.spares.clone();
        for c in &record.changes {
            let entry = &mut hosts[c.rank as usize];
            if let Some(spare) = spares.pop_front() {
                entry.host = spare;
            }
            entry.port = sperli_tls::job_plan::free_port(&entry.host)
                .map_err(replacement::ReplacementError::Port)?;
        }
        let issued = record
            .changes
            .iter()
            .map(|c| {
                let inc = record.incarnations[c.rank as usize];
                replacement::issue(self.plan.job, &hosts, c.rank, inc)
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.spares = spares;
        Ok(issued)
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
mod tests;
