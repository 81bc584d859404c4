//! The resume exchange (protocol §10.2, frames §7.8 and §7.11), with the
//! fallback to the older epoch: when a rank cannot load the chosen epoch
//! E, rank 0 chooses E − 1 (if it holds a COMMIT of it that verifies) and
//! every rank loads that one; when no epoch is left, rank 0 sends RESUME
//! status 2 and every rank ends with H1622.
//!
//! ```text
//! rank 0                         rank n != 0
//!   |<-- RESUME st=3 (offer) -------|
//!   |--- RESUME st=0 (E, COMMIT) -->|   a round: verify, load, buddy fetch
//!   |<-- RESUME st=0|1|2 (E) -------|
//!   |--- RESUME st=0 (E-1, COMMIT)->|   only after a status 2: the second round
//!   |<-- RESUME st=0|1|2 (E-1) -----|
//!   |--- RESUME st=0 "go on" ------>|   or st=2: no epoch left, abort
//! ```
//!
//! Here: the entry point [`Checkpointer::resume`] and the side of the ranks
//! other than 0; rank 0's side is [`crate::resume_lead`]. With a rollback
//! in place (protocol §18.7) the exchange is the same, E being the
//! record's rollback epoch.

use sperli_collective::Peers;
use sperli_wire::abort::AbortReason;
use sperli_wire::commit_file::decode_file;
use sperli_wire::error::{Error, ResumeFailure};
use sperli_wire::frame_type::FrameType;
use sperli_wire::payload::Payload;
use sperli_wire::resume::{Resume, ResumeStatus};
use sperli_wire::HCode;

use crate::checkpointer::{field_mismatch, misfit, payload_error, Checkpointer};
use crate::state::Checkpointable;

/// How the resume exchange failed: with or without sending ABORT reason 6.
pub(crate) enum Fail {
    /// A frame that does not fit, a transport or local error: ABORT reason
    /// 6 (unless the job already failed).
    Abort(Error),
    /// Already handled (rank 0's RESUME status 2 and its ABORT).
    Quiet(Error),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Abort(e)
    }
}

/// What rank 0 sent to a rank other than 0 (§7.11 table).
enum FromRank0 {
    /// Status 0 with a COMMIT: "resume this epoch" (the COMMIT may fail to
    /// decode: then this rank cannot load it).
    Choice { epoch: u64, commit: Vec<u8> },
    /// Status 0 without a COMMIT: epoch 0 first, later "go on".
    Go { epoch: u64 },
    /// Status 2: the resume failed.
    Abort { epoch: u64 },
}

/// H1622 with `reason`.
pub(crate) fn no_epoch(reason: ResumeFailure) -> Error {
    Error::NoResumableEpoch {
        reason: Box::new(reason),
    }
}

impl<L: Peers> Checkpointer<L> {
    /// The resume exchange (protocol §10.2). Call it once, first thing
    /// after joining, on every rank.
    ///
    /// Returns `Ok(None)` when the program starts from the beginning: at
    /// incarnation 1 (no frame is sent), or when no COMMIT exists anywhere
    /// (epoch 0 announced). Returns `Ok(Some((epoch, state)))` with this
    /// rank's state of the resumed epoch otherwise; the next checkpoint is
    /// then `epoch + 1`. The epoch is the newest whose COMMIT verifies, or
    /// the one before it when some rank cannot load the newest.
    ///
    /// With a rollback pending (protocol §18.7: a replacement from its
    /// start, a survivor after [`Checkpointer::recover`] in the replace
    /// mode) the exchange runs at any incarnation and the epoch is the
    /// record's rollback epoch E (or E − 1); E = 0 is `Ok(None)` on every
    /// rank, by the exchange's epoch 0. [`Checkpointer::rolled_back`] then
    /// says `Some(epoch)`.
    ///
    /// Errors (every rank returns one and the job ends): H1621 or H1623 on
    /// rank 0 when the only COMMIT fails (H1622 when several do); H1622 on
    /// every rank when no epoch can be loaded, its reason the first failure
    /// the rank knows of ([`ResumeFailure`]: its own file's error, e.g.
    /// H1620, or which rank could not load); H1610 for a frame that does
    /// not fit (ABORT reason 6); H1612 when another rank aborted.
    pub fn resume<T: Checkpointable>(&mut self) -> Result<Option<(u64, T)>, Error> {
        let rollback = self.rollback;
        if rollback.is_none() && self.keys.incarnation() < 2 {
            self.rolled_back = None;
            return Ok(None);
        }
        let r = if self.rank() == 0 {
            self.lead::<T>(rollback)
        } else {
            self.follow::<T>(rollback)
        };
        match r {
            Ok(r) => {
                let epoch = r.as_ref().map_or(0, |(e, _)| *e);
                self.epoch = epoch;
                self.rollback = None;
                self.rolled_back = rollback.map(|_| epoch);
                // A checkpoint that was under way is void (§18.7): no COMMIT
                // above the resumed epoch stays in this rank's tree, and the
                // REPORT names the resumed epoch (§18.4).
                self.store.void_above(epoch);
                self.link().set_best_commit(epoch);
                Ok(r)
            }
            Err(Fail::Quiet(e)) => Err(e),
            Err(Fail::Abort(e)) => {
                self.abort(AbortReason::ResumeFailed, &e);
                Err(e)
            }
        }
    }

    // ---- ranks other than 0 ---------------------------------------------

    /// A rank other than 0: offer, then every round rank 0 starts, until
    /// "go on" or status 2. With a rollback E (§18.7) a first choice above
    /// E does not fit (H1610): rank 0 holds the same record.
    fn follow<T: Checkpointable>(&self, rollback: Option<u64>) -> Result<Option<(u64, T)>, Fail> {
        self.offer(rollback)?;
        let fits = |epoch: u64| rollback.is_none_or(|e| epoch <= e);
        // Before its report, an ABORT of rank 0 is what it is (H1612): rank
        // 0 chose nothing (§10.2 step 2).
        let (mut epoch, mut commit) = match self.next_from_rank0(None)? {
            FromRank0::Choice { epoch, commit } if epoch != 0 && fits(epoch) => (epoch, commit),
            FromRank0::Go { epoch: 0 } => {
                // E = 0: nothing to load, report "ready".
                self.report(0, ResumeStatus::Go)?;
                return match self.next_from_rank0(Some(0))? {
                    FromRank0::Go { epoch: 0 } => Ok(None),
                    FromRank0::Abort { epoch } => {
                        Err(Fail::Quiet(no_epoch(ResumeFailure::Abandoned { epoch })))
                    }
                    _ => Err(misfit(FrameType::Resume, "during resume (go on expected)").into()),
                };
            }
            _ => {
                return Err(misfit(
                    FrameType::Resume,
                    "during resume (RESUME status 0 with a COMMIT, or epoch 0 without, expected)",
                )
                .into())
            }
        };
        let mut first_failure: Option<ResumeFailure> = None;
        let mut rounds = 0;
        loop {
            rounds += 1;
            let loaded = self.load_round::<T>(epoch, &commit)?;
            let status = match &loaded {
                Ok((_, false)) => ResumeStatus::Go,
                Ok((_, true)) => ResumeStatus::LoadedBuddy,
                Err(f) => {
                    first_failure.get_or_insert_with(|| f.clone());
                    ResumeStatus::CannotLoad
                }
            };
            // §10.2 step 7: for a second choice "every rank verifies it,
            // loads its file of E − 1, ... and answers".
            self.report(epoch, status)?;
            match self.next_from_rank0(Some(epoch))? {
                FromRank0::Go { epoch: e } if e == epoch => {
                    return match loaded {
                        Ok((state, _)) => Ok(Some((epoch, state))),
                        // Rank 0 said go on although this rank cannot
                        // load: it does not go on.
                        Err(f) => Err(Fail::Abort(no_epoch(f))),
                    };
                }
                FromRank0::Choice {
                    epoch: older,
                    commit: c,
                } if rounds == 1 && older >= 1 && older < epoch => {
                    epoch = older;
                    commit = c;
                }
                FromRank0::Abort { epoch: e } if e == epoch => {
                    let reason = first_failure.unwrap_or(ResumeFailure::Abandoned { epoch });
                    return Err(Fail::Quiet(no_epoch(reason)));
                }
                _ => {
                    return Err(misfit(
                        FrameType::Resume,
                        "during resume (go on, status 2 or one older epoch expected)",
                    )
                    .into())
                }
            }
        }
    }

    /// Step 1: RESUME status 3 with the best COMMIT this rank has (the
    /// highest epoch whose signature, job id and epoch check out; the size
    /// is rank 0's to judge), or empty with epoch 0. With a rollback epoch
    /// E (§18.7) the best is the highest at or below E: rank 0 chooses E,
    /// and a replacement rank 0 may hold no COMMIT of its own.
    fn offer(&self, rollback: Option<u64>) -> Result<(), Error> {
        let best = self.store.commits().into_iter().find(|(epoch, bytes)| {
            rollback.is_none_or(|e| *epoch <= e)
                && matches!(
                    self.verify_commit(bytes, *epoch),
                    Ok(_) | Err(Error::CommitSizeMismatch { .. })
                )
        });
        let (epoch, commit) = match &best {
            Some((e, b)) => (*e, Some(decode_file(b)?)),
            None => (0, None),
        };
        self.link().send_ckpt(
            0,
            epoch,
            &Payload::Resume(Resume {
                status: ResumeStatus::Offer,
                commit,
            }),
        )
    }

    /// Step 6: this rank's report for `epoch`.
    fn report(&self, epoch: u64, status: ResumeStatus) -> Result<(), Error> {
        self.link().send_ckpt(
            0,
            epoch,
            &Payload::Resume(Resume {
                status,
                commit: None,
            }),
        )
    }

    /// The next RESUME frame from rank 0. After this rank's report for
    /// `reported`, rank 0's ABORT reason 6 code 1622 (it may overtake the
    /// RESUME status 2 it follows) counts as status 2 for that epoch;
    /// before any report (`None`) it is the error it is.
    fn next_from_rank0(&self, reported: Option<u64>) -> Result<FromRank0, Error> {
        let f = match (self.link().recv_ckpt(0), reported) {
            (Ok(f), _) => f,
            (
                Err(Error::AbortedByPeer {
                    from: 0,
                    reason,
                    code,
                    ..
                }),
                Some(epoch),
            ) if reason == AbortReason::ResumeFailed.code() && code == HCode::H1622.number() => {
                return Ok(FromRank0::Abort { epoch });
            }
            (Err(e), _) => return Err(e),
        };
        if f.frame_type != FrameType::Resume {
            return Err(misfit(f.frame_type, "during resume (RESUME expected)"));
        }
        let b = f.payload;
        match Resume::decode_payload(&b) {
            Ok(res) => {
                res.check_header_epoch(f.epoch)
                    .map_err(payload_error(FrameType::Resume))?;
                match (res.status, res.commit) {
                    (ResumeStatus::Go, Some(_)) => Ok(FromRank0::Choice {
                        epoch: f.epoch,
                        commit: b.get(8..).unwrap_or_default().to_vec(),
                    }),
                    (ResumeStatus::Go, None) => Ok(FromRank0::Go { epoch: f.epoch }),
                    (ResumeStatus::CannotLoad, None) => Ok(FromRank0::Abort { epoch: f.epoch }),
                    (s, _) => Err(field_mismatch(
                        FrameType::Resume,
                        "status",
                        0,
                        u64::from(s.code()),
                    )),
                }
            }
            // A chosen COMMIT that does not decode: this rank cannot load
            // it (H1621, reported with status 2).
            Err(e)
                if b.first() == Some(&ResumeStatus::Go.code())
                    && f.epoch != 0
                    && e.h_code() == Some(HCode::H1621) =>
            {
                Ok(FromRank0::Choice {
                    epoch: f.epoch,
                    commit: b.get(8..).unwrap_or_default().to_vec(),
                })
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_job::{flip_byte, state, TestJob, S};
    use sperli_tls::composite_sig;
    use sperli_wire::ckpt_data::CkptData;
    use sperli_wire::ckpt_path::{buddy_file_name, rank_file_name, COMMIT_FILE_NAME};
    use sperli_wire::commit_file::{assemble, signed_message};
    use sperli_wire::limits::CONTEXT_COMMIT;
    use sperli_wire::Sha256Digest;

    /// Incarnation `inc` must resume `want` on every rank, then
    /// checkpoints epoch `want + 1`.
    fn resumes(job: &TestJob, inc: u32, want: u64) {
        job.run(inc, |r, ck| {
            assert_eq!(
                ck.resume::<S>().unwrap(),
                Some((want, state(r, want))),
                "rank {r}"
            );
            assert_eq!(ck.checkpoint(&state(r, want + 1)).unwrap(), want + 1);
        });
    }

    #[test]
    fn the_newest_epoch_is_resumed() {
        let job = TestJob::new("newest", 3);
        job.epochs(2);
        resumes(&job, 2, 2);
    }

    #[test]
    fn own_file_and_buddy_copy_both_bad_fall_back_to_the_older_epoch() {
        let job = TestJob::new("both-bad", 3);
        job.epochs(2);
        flip_byte(&job.edir(1, 2).join(rank_file_name(1)), 200);
        flip_byte(&job.edir(2, 2).join(buddy_file_name(1)), 300);
        resumes(&job, 2, 1);
        // The checkpoint after the fallback wrote epoch 2 again, which the
        // next incarnation resumes.
        resumes(&job, 3, 2);
    }

    #[test]
    fn own_file_and_buddy_copy_both_deleted_fall_back_to_the_older_epoch() {
        let job = TestJob::new("both-deleted", 4);
        job.epochs(3);
        std::fs::remove_file(job.edir(3, 3).join(rank_file_name(3))).unwrap();
        std::fs::remove_file(job.edir(0, 3).join(buddy_file_name(3))).unwrap();
        resumes(&job, 2, 2);
    }

    #[test]
    fn a_signed_commit_with_a_wrong_hash_for_one_rank_falls_back_to_the_older_epoch() {
        let job = TestJob::new("wrong-hash", 3);
        job.epochs(2);
        // A correctly signed COMMIT of epoch 2 whose entry for rank 2 does
        // not match rank 2's file (nor its buddy copy), on every rank.
        let mut hashes: Vec<Sha256Digest> = (0..3)
            .map(|r| {
                Sha256Digest::of(&std::fs::read(job.edir(r, 2).join(rank_file_name(r))).unwrap())
            })
            .collect();
        hashes[2].0[0] ^= 1;
        let msg = signed_message(job.job, 2, &hashes);
        let sig = composite_sig::sign(&job.key, &msg, CONTEXT_COMMIT).unwrap();
        let forged = assemble(&msg, &sig.0);
        for r in 0..3 {
            std::fs::write(job.edir(r, 2).join(COMMIT_FILE_NAME), &forged).unwrap();
        }
        resumes(&job, 2, 1);
    }

    #[test]
    fn no_epoch_left_is_h1622_everywhere_with_the_first_failure() {
        let job = TestJob::new("none-left", 3);
        job.epochs(2);
        for e in [1, 2] {
            flip_byte(&job.edir(1, e).join(rank_file_name(1)), 100);
            std::fs::remove_file(job.edir(2, e).join(buddy_file_name(1))).unwrap();
        }
        let out = job.run(2, |_, ck| ck.resume::<S>());
        for (r, o) in out.iter().enumerate() {
            assert_eq!(
                o.as_ref().err().and_then(Error::h_code),
                Some(HCode::H1622),
                "rank {r}: {o:?}"
            );
        }
        let reason = |o: &Result<Option<(u64, S)>, Error>| match o {
            Err(Error::NoResumableEpoch { reason }) => (**reason).clone(),
            other => panic!("{other:?}"),
        };
        // Rank 0 names the first refusal (epoch 2), rank 1 its own file's
        // code, rank 2 rank 0's status 2 after the last choice (epoch 1).
        assert_eq!(
            reason(&out[0]),
            ResumeFailure::CannotLoad { rank: 1, epoch: 2 }
        );
        match reason(&out[1]) {
            ResumeFailure::Own(e) => assert_eq!(e.h_code(), Some(HCode::H1620), "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(reason(&out[2]), ResumeFailure::Abandoned { epoch: 1 });
    }

    #[test]
    fn a_choice_newer_than_the_first_is_refused_with_h1610() {
        let job = TestJob::new("newer-choice", 2);
        job.epochs(2);
        flip_byte(&job.edir(1, 2).join(rank_file_name(1)), 100);
        flip_byte(&job.edir(0, 2).join(buddy_file_name(1)), 100);
        let commit2 = std::fs::read(job.edir(0, 2).join(COMMIT_FILE_NAME)).unwrap();
        let out = job.run(2, |r, ck| {
            if r == 1 {
                return ck.resume::<S>().map(drop);
            }
            // A hostile rank 0: announces epoch 2, takes the refusal and
            // "falls back" to epoch 2 again.
            let link = ck.comm().link();
            let c = decode_file(&commit2).unwrap();
            let choice = Payload::Resume(Resume {
                status: ResumeStatus::Go,
                commit: Some(c),
            });
            assert_eq!(link.recv_ckpt(1).unwrap().frame_type, FrameType::Resume);
            link.send_ckpt(1, 2, &choice).unwrap();
            link.send_ckpt(1, 2, &Payload::CkptData(CkptData::nothing_needed(0)))
                .unwrap();
            // Rank 1's request (kind 1), which rank 0 answers with kind 3.
            let f = link.recv_ckpt(1).unwrap();
            assert_eq!(f.frame_type, FrameType::CkptData);
            link.send_ckpt(1, 2, &Payload::CkptData(CkptData::no_valid_copy(1)))
                .unwrap();
            let report = link.recv_ckpt(1).unwrap();
            assert_eq!(report.payload[0], ResumeStatus::CannotLoad.code());
            link.send_ckpt(1, 2, &choice).unwrap();
            Ok(())
        });
        let e = out[1].as_ref().unwrap_err();
        assert_eq!(e.h_code(), Some(HCode::H1610), "{e}");
    }
}
