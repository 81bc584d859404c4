//! Rank 0's side of the resume exchange (protocol §10.2 steps 1-3, 6
//! and 7): the offers and its own COMMIT files, the choice (with a
//! rollback in place, §18.7: the rollback epoch E, not the highest), the
//! rounds, "go on", the fallback to E − 1, or RESUME status 2. The other
//! ranks' side and the entry point are [`crate::resume`].

use sperli_collective::Peers;
use sperli_wire::abort::AbortReason;
use sperli_wire::commit_file::decode_file;
use sperli_wire::error::{Error, ResumeFailure};
use sperli_wire::frame_type::FrameType;
use sperli_wire::payload::Payload;
use sperli_wire::resume::{Resume, ResumeStatus};
use sperli_wire::HCode;

use crate::checkpointer::{field_mismatch, misfit, payload_error, Checkpointer};
use crate::resume::{no_epoch, Fail};
use crate::state::Checkpointable;

/// An epoch rank 0 may choose: its COMMIT verified (§9.3 steps 1-4).
struct Choice {
    epoch: u64,
    commit: Vec<u8>,
}

impl<L: Peers> Checkpointer<L> {
    /// Rank 0: offers, choices, rounds, "go on" or status 2. With a
    /// rollback E (§18.7) it chooses E, not the highest epoch: no epoch
    /// above E counts.
    pub(crate) fn lead<T: Checkpointable>(
        &self,
        rollback: Option<u64>,
    ) -> Result<Option<(u64, T)>, Fail> {
        let choices = self.choose(rollback)?;
        if let (None, Some(epoch @ 1..)) = (choices.first(), rollback) {
            // Every member holds E (the lowest best_commit of the reports,
            // §18.6): none here is no place to start from.
            return Err(Fail::Abort(no_epoch(ResumeFailure::NoRollbackCommit {
                epoch,
            })));
        }
        let Some(first) = choices.first() else {
            // "If no COMMIT exists anywhere, E = 0: start from the
            // beginning." Every rank reports 0 ("ready").
            self.announce(0, None)?;
            self.collect_reports(0)?;
            self.announce(0, None)?;
            return Ok(None);
        };
        // "There is at most one fallback: E − 1 is the oldest epoch a tree
        // keeps" (§10.2 step 7): the second round, if any, is E - 1.
        let second = choices
            .iter()
            .find(|c| c.epoch.checked_add(1) == Some(first.epoch));
        let mut first_failure: Option<ResumeFailure> = None;
        let mut last = first.epoch;
        for choice in std::iter::once(first).chain(second) {
            last = choice.epoch;
            self.announce(choice.epoch, Some(&choice.commit))?;
            let own = self.load_round::<T>(choice.epoch, &choice.commit)?;
            let refused = self.collect_reports(choice.epoch)?;
            let failure = match (&own, refused) {
                (Err(f), _) => Some(f.clone()),
                (Ok(_), Some(f)) => Some(f),
                (Ok(_), None) => None,
            };
            match (own, failure) {
                (Ok((state, _)), None) => {
                    // "rank 0 sends RESUME status 0 ("go on", empty)"
                    self.announce(choice.epoch, None)?;
                    return Ok(Some((choice.epoch, state)));
                }
                (_, f) => {
                    if first_failure.is_none() {
                        first_failure = f;
                    }
                }
            }
        }
        // "Only when no epoch is left does rank 0 send RESUME status 2 to
        // every rank, then ABORT reason 6 with code 1622" (§10.2 step 7).
        for r in 1..self.size() {
            self.link().send_ckpt(
                r,
                last,
                &Payload::Resume(Resume {
                    status: ResumeStatus::CannotLoad,
                    commit: None,
                }),
            )?;
        }
        let e = no_epoch(first_failure.unwrap_or(ResumeFailure::Abandoned { epoch: last }));
        self.abort(AbortReason::ResumeFailed, &e);
        Err(Fail::Quiet(e))
    }

    /// Rank 0, steps 1-2: every offer and its own COMMIT files; the epochs
    /// whose COMMIT passes §9.3 steps 1-4, newest first (empty: no COMMIT
    /// anywhere). When COMMIT files exist but none passes: the code of the
    /// one failed COMMIT, or H1622 when several failed. With a rollback
    /// epoch (§18.7) only the COMMIT files of it and older epochs count.
    fn choose(&self, rollback: Option<u64>) -> Result<Vec<Choice>, Fail> {
        let mut candidates = self.store.commits();
        for r in 1..self.size() {
            let f = self.link().recv_ckpt(r)?;
            if f.frame_type != FrameType::Resume {
                return Err(misfit(f.frame_type, "during resume (RESUME offer expected)").into());
            }
            let b = f.payload;
            match Resume::decode_payload(&b) {
                Ok(res) => {
                    if res.status != ResumeStatus::Offer {
                        return Err(field_mismatch(
                            FrameType::Resume,
                            "status",
                            u64::from(ResumeStatus::Offer.code()),
                            u64::from(res.status.code()),
                        )
                        .into());
                    }
                    res.check_header_epoch(f.epoch)
                        .map_err(payload_error(FrameType::Resume))?;
                    if res.commit.is_some() {
                        candidates.push((f.epoch, b.get(8..).unwrap_or_default().to_vec()));
                    }
                }
                // An offer whose COMMIT does not decode is a failed
                // candidate (H1621), not a rejected frame.
                Err(e)
                    if e.h_code() == Some(HCode::H1621)
                        && b.first() == Some(&ResumeStatus::Offer.code()) =>
                {
                    candidates.push((f.epoch, b.get(8..).unwrap_or_default().to_vec()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(ceiling) = rollback {
            candidates.retain(|(epoch, _)| *epoch <= ceiling);
        }
        let mut valid: Vec<Choice> = Vec::new();
        let mut failures: Vec<(u64, Error)> = Vec::new();
        for (epoch, commit) in candidates {
            match self.verify_commit(&commit, epoch) {
                Ok(_) => valid.push(Choice { epoch, commit }),
                Err(e) => failures.push((epoch, e)),
            }
        }
        valid.sort_by_key(|c| std::cmp::Reverse(c.epoch));
        valid.dedup_by_key(|c| c.epoch);
        if !valid.is_empty() || failures.is_empty() {
            return Ok(valid);
        }
        // "with a single failed COMMIT, the code of that failure (H1621 or
        // H1623); with several, H1622" (the same COMMIT offered by several
        // ranks is one).
        let single = failures.iter().all(|f| f.0 == failures[0].0);
        let err = if single {
            failures.swap_remove(0).1
        } else {
            let (_, last) = failures.swap_remove(failures.len() - 1);
            no_epoch(ResumeFailure::Own(last))
        };
        Err(Fail::Abort(err))
    }

    /// Rank 0 to every other rank: RESUME status 0 with header epoch
    /// `epoch` and `commit` (a choice), or empty (epoch 0 first, later
    /// "go on").
    fn announce(&self, epoch: u64, commit: Option<&[u8]>) -> Result<(), Error> {
        let commit = commit.map(decode_file).transpose()?;
        for r in 1..self.size() {
            self.link().send_ckpt(
                r,
                epoch,
                &Payload::Resume(Resume {
                    status: ResumeStatus::Go,
                    commit: commit.clone(),
                }),
            )?;
        }
        Ok(())
    }

    /// Rank 0, step 6: one report from every other rank for `epoch`; the
    /// first rank that answered 2, if any (for epoch 0 nothing is loaded,
    /// so every report must be 0).
    fn collect_reports(&self, epoch: u64) -> Result<Option<ResumeFailure>, Error> {
        let mut refused = None;
        for r in 1..self.size() {
            let b = self.recv_frame(
                r,
                FrameType::Resume,
                epoch,
                "during resume (RESUME report expected)",
            )?;
            let res = Resume::decode_payload(&b)?;
            match (res.status, res.commit) {
                (ResumeStatus::Go | ResumeStatus::LoadedBuddy, None) => {}
                (ResumeStatus::CannotLoad, None) if epoch != 0 => {
                    refused.get_or_insert(ResumeFailure::CannotLoad { rank: r, epoch });
                }
                (s, _) => {
                    return Err(field_mismatch(
                        FrameType::Resume,
                        "status",
                        0,
                        u64::from(s.code()),
                    ))
                }
            }
        }
        Ok(refused)
    }
}
