//! The supervisor's side of a recovery (protocol §18.6): it carries out
//! what [`crate::recovery::Recovery`] decides: fences, records written to
//! the survivors' control channels, replacements started, the line on
//! stderr, or the full restart.

use std::time::Instant;

use nix::sys::signal::Signal;

use super::{attach_rank, spawn_rank, Job};
use crate::os::signal_group;
use crate::outcome::{Blame, Outcome};
use crate::recovery::Action;
use crate::replacement::Replacement;
use crate::root_cause::{Cause, Failure, Verdict};
use crate::spawn::RankLaunch;

impl Job<'_> {
    /// Runs the recovery's decisions.
    pub(super) fn recover(&mut self) {
        if self.outcome.is_some() {
            // A full restart the recovery chose ends every rank once the
            // root cause is known (protocol §18.6).
            if self.recovery.as_ref().is_some_and(|r| !r.active()) {
                self.end_now = true;
            }
            return;
        }
        let Some(rec) = &mut self.recovery else {
            return;
        };
        let slots = &self.slots;
        let ended = |rank: u32| {
            slots
                .iter()
                .rev()
                .find(|s| s.rank == rank)
                .is_none_or(|s| s.exit.is_some())
        };
        for action in rec.step(ended) {
            // A replacement that could not start made it a full restart:
            // no more replacements, no record for the survivors.
            let restarting = self.recovery.as_ref().is_some_and(|r| !r.active());
            match action {
                Action::Start { .. } | Action::Write { .. } if restarting => {}
                Action::Kill(rank) => {
                    if let Some(s) = self.slot_of(rank) {
                        signal_group(s.pgid, Signal::SIGKILL);
                    }
                }
                Action::Write { record, to } => {
                    let line = crate::control::record_line(&record);
                    for rank in to {
                        if let Some(c) = self.slot_of(rank).and_then(|s| s.control.as_ref()) {
                            // A survivor that ended meanwhile is a failure
                            // of the new epoch: its exit tells.
                            let _ = crate::control::write_line(c, &line);
                        }
                    }
                }
                Action::Say(line) => {
                    let _g = self.lock.lock();
                    eprintln!("{line}");
                }
                Action::Start {
                    replacement,
                    record,
                } => self.start_replacement(*replacement, &record),
                Action::FullRestart(held) => self.full_restart(held),
            }
        }
    }

    /// Starts the replacement of a rank (protocol §18.7): the rank's
    /// program and environment with its new incarnation, its description
    /// on stdin, the record as the first line on its control channel. A
    /// replacement that cannot be started ends the run, as a full restart
    /// for the failure it answered (protocol §18.6).
    fn start_replacement(&mut self, rep: Replacement, record: &[u8]) {
        let Some(template) = self.launches.get(rep.rank as usize) else {
            return;
        };
        let mut env = template.env.clone();
        for (k, v) in &mut env {
            if k == sperli_wire::env::INCARNATION {
                *v = rep.incarnation.to_string();
            }
        }
        // Protocol §18.7: the first line on its channel is the record.
        env.push((
            sperli_transport::control_channel::REPLACEMENT_ENV.to_owned(),
            "1".to_owned(),
        ));
        let launch = RankLaunch {
            host: rep.endpoint.host.clone(),
            env,
            stdin_line: rep.description.to_line(),
            port: template.port.map(|_| rep.endpoint.port),
            ..template.clone()
        };
        let listener = launch
            .port
            .and_then(|p| crate::listen_ahead::bind(&launch.host, p));
        let spawned = match spawn_rank(launch, self.opts, self.records.as_ref(), true, listener) {
            Ok(s) => s,
            Err(f) => {
                {
                    let _g = self.lock.lock();
                    eprintln!("sperli: {f} (its replacement): restarting the job in full");
                }
                let held = self
                    .recovery
                    .as_mut()
                    .map(|r| r.replacement_failed())
                    .unwrap_or_default();
                return self.full_restart(held);
            }
        };
        if let Some(c) = &spawned.control {
            let _ = crate::control::write_record(c, record);
        }
        if let Some(w) = &mut self.watchdog {
            w.watch(spawned.child.id());
        }
        let idx = self.slots.len();
        let mut slot = attach_rank(idx, spawned, self.opts, &self.lock, &self.tx);
        slot.incarnation = rep.incarnation;
        self.slots.push(slot);
    }

    /// The recovery chose a full restart: its held failures are the
    /// job's, for the root cause (every rank is ended once it is known);
    /// when none ended on its own (every failed rank was fenced), the
    /// lowest fenced rank is blamed as unresponsive.
    fn full_restart(&mut self, held: Vec<(Failure, Instant)>) {
        if let Some(first) = held.iter().map(|(_, at)| *at).min() {
            self.first_failure = Some(first);
            self.failures.extend(held.into_iter().map(|(f, _)| f));
            return;
        }
        let fenced: Vec<u32> = self
            .slots
            .iter()
            .filter(|s| {
                self.recovery
                    .as_ref()
                    .is_some_and(|r| r.fenced(s.rank, s.incarnation))
            })
            .map(|s| s.rank)
            .collect();
        let Some((&rank, also)) = fenced.split_first() else {
            return;
        };
        let host = self
            .slot_of(rank)
            .map_or_else(String::new, |s| s.host.clone());
        let verdict = Verdict {
            rank,
            cause: Cause::Unresponsive,
            also: also.to_vec(),
            exit_code: 1,
            abort: None,
        };
        self.outcome = Some(Outcome::Failed(Blame { verdict, host }));
        self.end_now = true;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use sperli_tls::job_plan::JobPlan;
    use sperli_wire::recovery::{MembershipRecord, Mode, Report, CONTEXT_MEMBER};

    use crate::recovery::RecoveryPlan;
    use crate::spawn::{RankLaunch, Via};
    use crate::supervise::{run_job_recovering, Options};
    use crate::Outcome;

    /// Runs the job's ranks as `sh -c script` with a recovery. Rank r gets
    /// `00ff` on stdin, `SPERLI_RANK`, `SPERLI_INCARNATION=1`, its REPORT
    /// of epoch 1 naming `victim` (best COMMIT 5) as hex in `REPORT_HEX`,
    /// and a file `OUT`; returns the outcome and what each rank wrote to
    /// its file, with the record in it checked (decodes, signed with the
    /// job key and `SPERLI-MEMBER-1`).
    pub(crate) fn run_sh_ranks(
        plan: RecoveryPlan<'_>,
        script: &str,
        victim: u32,
    ) -> (Outcome, Vec<Option<MembershipRecord>>) {
        let job = plan.job;
        let dir = std::env::temp_dir().join(format!(
            "sperli-recover-{}-{}",
            std::process::id(),
            job.job_id
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ranks = (0..job.size())
            .map(|r| {
                let report = Report {
                    flag: true,
                    job_id: job.job_id,
                    rank: r,
                    incarnation: 1,
                    epoch: 1,
                    best_commit: 5,
                    suspects: vec![victim],
                };
                RankLaunch {
                    rank: r,
                    host: job.hosts[r as usize].host.clone(),
                    via: Via::Direct,
                    argv: vec!["sh".into(), "-c".into(), script.into()],
                    env: vec![
                        ("SPERLI_RANK".into(), r.to_string()),
                        (sperli_wire::env::INCARNATION.into(), "1".into()),
                        (
                            "REPORT_HEX".into(),
                            sperli_wire::hex::encode(&report.encode()),
                        ),
                        (
                            "OUT".into(),
                            dir.join(r.to_string()).to_string_lossy().into_owned(),
                        ),
                    ],
                    stdin_line: "00ff\n".into(),
                    port: None,
                }
            })
            .collect();
        let opts = Options {
            wait_after_failure: Duration::from_millis(300),
            grace: Duration::from_millis(300),
            timeout: Some(Duration::from_secs(60)),
            ..Options::default()
        };
        let none = std::sync::atomic::AtomicI32::new(0);
        let outcome = run_job_recovering(ranks, &opts, &none, Some(plan));
        let lines: Vec<Option<String>> = (0..job.size())
            .map(|r| std::fs::read_to_string(dir.join(r.to_string())).ok())
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        let records = lines
            .into_iter()
            .map(|line| {
                let line = line?;
                let bytes = sperli_wire::hex::decode(line.trim_end().as_bytes()).unwrap();
                let rec = MembershipRecord::decode(&bytes).unwrap();
                assert!(sperli_tls::composite_sig::verify_bytes(
                    job.job_key.public_key().as_bytes(),
                    &rec.signed_bytes(),
                    CONTEXT_MEMBER,
                    &rec.signature
                ));
                Some(rec)
            })
            .collect();
        (outcome, records)
    }

    /// Rank 1 is killed; ranks 0 and 2 report it and keep the record they
    /// read; the replacement keeps the first line of its channel.
    #[test]
    fn a_replacement_starts_with_its_description_and_the_record_first_on_its_channel() {
        let job = JobPlan::localhost(3).unwrap();
        let script = r#"IFS= read -r d
if [ "$SPERLI_INCARNATION" = 2 ]; then
  [ ${#d} -gt 1000 ] || exit 7
  IFS= read -r rec <&3 || exit 8
  printf '%s\n' "$rec" > "$OUT"; exit 0
fi
[ "$d" = 00ff ] || exit 9
if [ "$SPERLI_RANK" = 1 ]; then kill -9 $$; fi
printf '%s\n' "$REPORT_HEX" >&3
IFS= read -r rec <&3 || exit 10
printf '%s\n' "$rec" > "$OUT""#;
        let plan = RecoveryPlan {
            job: &job,
            mode: Mode::Replace,
            replacements: 1,
            spares: &[],
        };
        let (outcome, records) = run_sh_ranks(plan, script, 1);
        assert_eq!(outcome, Outcome::Success, "{records:?}");
        let rec = records[0].clone().unwrap();
        assert!(records.iter().all(|r| r.as_ref() == Some(&rec)));
        assert_eq!(
            (rec.mode, rec.epoch, rec.rollback, rec.incarnations),
            (Mode::Replace, 2, 5, vec![1, 2, 1])
        );
        let (port, host) = rec.changes[0].endpoint.clone().unwrap();
        assert_eq!(host, job.hosts[1].host);
        assert_ne!(port, 0);
    }
}
