//! The checkpoint layer's half of a recovery in place (feature bit 5,
//! `sperli run --recover inplace`; protocol §18.7 "Roll back"): the
//! program's body runs inside [`Checkpointer::run`] (Reinit++'s "resilient
//! main"); when a rank is lost, every survivor's call returns the revoked
//! error, `run` waits for the launcher's replace-mode MEMBERSHIP record,
//! takes the new epoch's communicator and calls the body again, whose
//! [`Checkpointer::resume`] rolls every member back to the record's
//! `rollback` epoch E. A replacement process learns E from the membership
//! it joined ([`Checkpointer::new`]), so its first resume rolls back with
//! the survivors.
//!
//! ```text
//! survivor                                   replacement of rank r
//!   run(body) ── body: resume, steps, ...      join (record first)
//!   a call returns Revoked                     run(body) ── body: resume
//!   recover(): record of m+1, mode Replace, E         │
//!   run calls body again: resume ──── §10.2 exchange, rank 0 chooses E ────
//!   rolled_back() = Some(E)                    rolled_back() = Some(E)
//! ```

use sperli_collective::{ErrorMode, Peers, Recovered};
use sperli_wire::recovery::{RecoveryError, FEATURE_MEMBERSHIP};
use sperli_wire::Error;

use crate::checkpointer::{replace_rollback, Checkpointer};

impl<L: Peers> Checkpointer<L> {
    /// Runs `body` (the program: resume, then its steps and checkpoints)
    /// and runs it again after each recovery in place (protocol §18.7).
    ///
    /// When `body` returns the revoked error
    /// ([`RecoveryError::Revoked`]: a rank was lost), `run` calls
    /// [`Checkpointer::recover`]. In the replace mode the checkpointer now
    /// holds the new epoch's communicator over every rank (fresh
    /// collective state) and the record's rollback epoch E, and `run`
    /// calls `body` again: its [`Checkpointer::resume`] must come first,
    /// and rolls back to E. Every other outcome of `body` is returned as
    /// it is, and so is the revoked error in the shrink mode or without
    /// feature bit 5 (the program then takes the shrunk communicator from
    /// `comm().recover()`, which returns at once).
    ///
    /// In a job with feature bit 5 the link's error mode is
    /// [`ErrorMode::Return`] while `run` runs (a lost peer starts a
    /// recovery only then, protocol §18.6), and what it was before once it
    /// returns; without bit 5 it is left alone, so a v1 job's errors stay
    /// as the program chose them.
    ///
    /// ```
    /// use sperli_ckpt::{Checkpointer, JobKeys};
    /// use sperli_collective::{fake::FakePeers, Comm, Reduction};
    /// use sperli_wire::JobId;
    ///
    /// let key = sperli_tls::composite_sig::generate().unwrap();
    /// let keys = JobKeys::new(JobId([9; 16]), 1, key.public_key().clone(), Some(key));
    /// let dir = std::env::temp_dir().join(format!("sperli-ckpt-run-doc-{}", std::process::id()));
    /// let link = FakePeers::job(1).remove(0);
    /// let mut ck = Checkpointer::new(Comm::new(link), &dir, keys)?;
    /// let x = ck.run(|ck| {
    ///     let (mut step, mut x) = ck.resume::<(u64, f64)>()?.map_or((0, 1.0), |(_, s)| s);
    ///     while step < 4 {
    ///         x = ck.comm().allreduce(&[x * 0.5], Reduction::Sum)?[0];
    ///         step += 1;
    ///         ck.checkpoint(&(step, x))?;
    ///     }
    ///     Ok(x)
    /// })?;
    /// assert_eq!(x, 1.0 / 16.0);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), sperli_wire::Error>(())
    /// ```
    pub fn run<R>(
        &mut self,
        mut body: impl FnMut(&mut Checkpointer<L>) -> Result<R, Error>,
    ) -> Result<R, Error> {
        // Protocol §18.6: a lost peer revokes the epoch (instead of ending
        // the job step) while the body runs here.
        let before = (self.link().features() & FEATURE_MEMBERSHIP != 0).then(|| {
            let before = (self.link().errors(), self.link().recoverable());
            self.link().set_errors(ErrorMode::Return);
            self.link().set_recoverable(true);
            before
        });
        let out = loop {
            match body(self) {
                Err(Error::Recovery(RecoveryError::Revoked { epoch })) => {
                    match self.recover_in_place() {
                        Ok((_, true)) => {}
                        Ok((_, false)) => break Err(RecoveryError::Revoked { epoch }.into()),
                        Err(e) => break Err(e),
                    }
                }
                other => break other,
            }
        };
        if let Some((mode, recoverable)) = before {
            self.link().set_errors(mode);
            self.link().set_recoverable(recoverable);
        }
        out
    }

    /// After a call returned the revoked error: waits for the membership
    /// the launcher decides ([`Comm::recover`](sperli_collective::Comm::recover))
    /// and returns what its record says. In the replace mode (protocol
    /// §18.7: every rank is a member, with the record's rollback epoch) the
    /// checkpointer takes the new epoch's communicator over every rank and
    /// notes the rollback: the next [`Checkpointer::resume`] rolls back to
    /// it, whatever the incarnation. In the shrink mode (§18.8) it keeps
    /// its communicator: a shrunk job has no checkpoint of its size.
    /// [`Checkpointer::run`] calls it; a program that handles the revoked
    /// error itself may too.
    pub fn recover(&mut self) -> Result<Recovered, Error> {
        self.recover_in_place().map(|(m, _)| m)
    }

    /// [`Checkpointer::recover`], and whether the checkpointer took the
    /// new epoch's communicator and a rollback (the replace mode).
    fn recover_in_place(&mut self) -> Result<(Recovered, bool), Error> {
        let (world, m) = self.comm.recover()?;
        let rolled = match replace_rollback(&m) {
            // Replace keeps every rank a member (§18.7).
            Some(e) if world.size() == self.size() => {
                self.comm = world;
                self.rollback = Some(e);
                true
            }
            _ => false,
        };
        Ok((m, rolled))
    }

    /// The COMMIT epoch the last [`Checkpointer::resume`] rolled this rank
    /// back to in place (protocol §18.7), `Some(0)` when it went back to
    /// the beginning; `None` when that resume was a start or a restart's
    /// (§10.2). The epoch is the record's rollback epoch E, or E − 1 when
    /// some rank could not load E. The program's own position (its step)
    /// is in the state the resume returned.
    pub fn rolled_back(&self) -> Option<u64> {
        self.rolled_back
    }

    /// The rollback epoch the next [`Checkpointer::resume`] goes back to,
    /// if a recovery in place is pending (a replacement from its start, a
    /// survivor after [`Checkpointer::recover`] in the replace mode).
    pub fn pending_rollback(&self) -> Option<u64> {
        self.rollback
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::test_job::{replace_record, state, TestJob, S};
    use sperli_collective::Reduction;
    use sperli_wire::ckpt_path::{buddy_file_name, rank_file_name, temp_name, COMMIT_FILE_NAME};
    use sperli_wire::recovery::Mode;

    /// Whether rank `r` holds a COMMIT of `epoch`.
    fn has_commit(job: &TestJob, r: u32, epoch: u64) -> bool {
        job.edir(r, epoch).join(COMMIT_FILE_NAME).exists()
    }

    /// Every rank at `incs` joins the replace record of rollback `rollback`
    /// (what a replacement and, after `recover`, a survivor hold), must
    /// resume `want` (`None`: from the beginning) with `rolled_back() ==
    /// Some(epoch)`, then checkpoints `epoch + 1` with state `epoch + 100`.
    fn rolls_back(job: &TestJob, incs: &[u32], rollback: u64, want: Option<u64>) {
        let record = replace_record(job.size, rollback);
        job.run_as(incs, Some(&record), |r, ck| {
            assert_eq!(ck.pending_rollback(), Some(rollback), "rank {r}");
            let got = ck.resume::<S>().unwrap();
            assert_eq!(got, want.map(|e| (e, state(r, e))), "rank {r}");
            let epoch = want.unwrap_or(0);
            assert_eq!(ck.rolled_back(), Some(epoch), "rank {r}");
            assert_eq!(ck.pending_rollback(), None);
            // §18.4: the REPORT would name the epoch the rank went back to.
            assert_eq!(ck.comm().link().best_commit(), epoch);
            let next = ck.checkpoint(&state(r, epoch + 100)).unwrap();
            assert_eq!(next, epoch + 1);
            assert_eq!(ck.comm().link().best_commit(), epoch + 1);
        });
    }

    /// After a rollback to `epoch` and its next checkpoint, a restart
    /// (incarnation `inc`) resumes that checkpoint on every rank.
    fn restart_resumes_the_new_checkpoint(job: &TestJob, inc: u32, epoch: u64) {
        job.run(inc, |r, ck| {
            let got = ck.resume::<S>().unwrap();
            assert_eq!(got, Some((epoch + 1, state(r, epoch + 100))), "rank {r}");
            assert_eq!(ck.rolled_back(), None);
        });
    }

    #[test]
    fn rank_0_chooses_the_rollback_epoch_though_a_newer_one_is_committed() {
        let job = TestJob::new("rb-newer", 3);
        job.epochs(3);
        // A checkpoint of epoch 4 was under way at the failure: rank 1's
        // file is written, rank 2's is half written, no COMMIT.
        let half = |r: u32| job.edir(r, 4).join(rank_file_name(r));
        std::fs::create_dir_all(job.edir(1, 4)).unwrap();
        std::fs::write(half(1), b"an own file of an epoch never committed").unwrap();
        std::fs::create_dir_all(job.edir(2, 4)).unwrap();
        std::fs::write(half(2), [7u8; 40]).unwrap();
        // Rank 0's push to rank 1 was cut short in a temporary file longer
        // than the file the next checkpoint pushes.
        let copy = temp_name(&buddy_file_name(0));
        std::fs::write(job.edir(1, 4).join(copy), vec![9u8; 100_000]).unwrap();
        // Survivors of incarnation 1 roll back to epoch 2; epoch 3's COMMIT
        // is void afterwards, and the next checkpoint writes it again.
        let record = replace_record(3, 2);
        job.run_as(&[1, 1, 1], Some(&record), |r, ck| {
            assert_eq!(ck.resume::<S>().unwrap(), Some((2, state(r, 2))));
            assert_eq!(ck.rolled_back(), Some(2));
            assert!(!has_commit(&job, r, 3), "rank {r}: epoch 3 is void");
            assert!(has_commit(&job, r, 2), "rank {r}");
            assert_eq!(ck.checkpoint(&state(r, 102)).unwrap(), 3);
            assert_eq!(ck.checkpoint(&state(r, 103)).unwrap(), 4);
        });
        job.run(2, |r, ck| {
            assert_eq!(ck.resume::<S>().unwrap(), Some((4, state(r, 103))));
        });
        // Rank 1's copy of rank 0's file of epoch 4 is rank 0's file.
        let copy = std::fs::read(job.edir(1, 4).join(buddy_file_name(0))).unwrap();
        assert_eq!(copy, std::fs::read(half(0)).unwrap());
    }

    #[test]
    fn a_rollback_epoch_one_rank_cannot_load_falls_back_to_the_one_before() {
        let job = TestJob::new("rb-fallback", 3);
        job.epochs(2);
        std::fs::remove_file(job.edir(1, 2).join(rank_file_name(1))).unwrap();
        std::fs::remove_file(job.edir(2, 2).join(buddy_file_name(1))).unwrap();
        rolls_back(&job, &[1, 1, 1], 2, Some(1));
        restart_resumes_the_new_checkpoint(&job, 2, 1);
    }

    #[test]
    fn a_rollback_to_epoch_0_starts_every_rank_from_the_beginning() {
        let job = TestJob::new("rb-zero", 3);
        job.epochs(2);
        rolls_back(&job, &[1, 1, 1], 0, None);
        for r in 0..3 {
            assert!(!has_commit(&job, r, 2), "rank {r}: epoch 2 is void");
        }
        restart_resumes_the_new_checkpoint(&job, 2, 0);
    }

    #[test]
    fn a_replacement_with_an_empty_directory_fetches_its_file_from_its_buddy() {
        let job = TestJob::new("rb-replacement", 3);
        job.epochs(3);
        // Rank 1's replacement runs on a spare host: nothing of its own.
        std::fs::remove_dir_all(job.dir(1)).unwrap();
        rolls_back(&job, &[1, 2, 1], 2, Some(2));
        // The fetched file and the COMMIT were kept as rank 1's own.
        assert!(has_commit(&job, 1, 2));
        assert!(job.edir(1, 2).join(rank_file_name(1)).exists());
        restart_resumes_the_new_checkpoint(&job, 3, 2);
    }

    #[test]
    fn a_replacement_rank_0_with_an_empty_directory_takes_the_commit_offered() {
        let job = TestJob::new("rb-replacement-0", 3);
        job.epochs(3);
        std::fs::remove_dir_all(job.dir(0)).unwrap();
        // Ranks 1 and 2 hold epochs 2 and 3: they offer 2, the rollback.
        rolls_back(&job, &[2, 1, 1], 2, Some(2));
    }

    #[test]
    fn no_commit_of_the_rollback_epoch_anywhere_is_h1622() {
        let job = TestJob::new("rb-none", 2);
        job.epochs(1);
        for r in 0..2 {
            std::fs::remove_file(job.edir(r, 1).join(COMMIT_FILE_NAME)).unwrap();
        }
        let record = replace_record(2, 1);
        let out = job.run_as(&[1, 1], Some(&record), |_, ck| ck.resume::<S>());
        match &out[0] {
            Err(Error::NoResumableEpoch { reason }) => assert_eq!(
                **reason,
                sperli_wire::error::ResumeFailure::NoRollbackCommit { epoch: 1 }
            ),
            other => panic!("rank 0: {other:?}"),
        }
        // Rank 1 hears rank 0's ABORT reason 6 with code 1622.
        match &out[1] {
            Err(Error::AbortedByPeer { from: 0, code, .. }) => assert_eq!(*code, 1622),
            other => panic!("rank 1: {other:?}"),
        }
    }

    #[test]
    fn a_choice_above_the_rollback_epoch_is_refused_with_h1610() {
        use sperli_wire::commit_file::decode_file;
        use sperli_wire::payload::Payload;
        use sperli_wire::resume::{Resume, ResumeStatus};
        let job = TestJob::new("rb-above", 2);
        job.epochs(3);
        let commit3 = std::fs::read(job.edir(0, 3).join(COMMIT_FILE_NAME)).unwrap();
        let record = replace_record(2, 2);
        let out = job.run_as(&[1, 1], Some(&record), |r, ck| {
            if r == 1 {
                return ck.resume::<S>().map(drop);
            }
            // A rank 0 that takes the offer (epoch 2, the rollback) and
            // chooses the newest epoch all the same.
            let link = ck.comm().link();
            assert_eq!(link.recv_ckpt(1).unwrap().epoch, 2);
            let choice = Payload::Resume(Resume {
                status: ResumeStatus::Go,
                commit: Some(decode_file(&commit3).unwrap()),
            });
            link.send_ckpt(1, 3, &choice)
        });
        let e = out[1].as_ref().unwrap_err();
        assert_eq!(e.h_code(), Some(sperli_wire::HCode::H1610), "{e}");
    }

    #[test]
    fn a_revoked_checkpoint_or_resume_sends_no_abort() {
        let job = TestJob::new("rb-no-abort", 1);
        let out = job.run(1, |_, ck| {
            use sperli_wire::abort::AbortReason;
            let revoked = RecoveryError::Revoked { epoch: 1 }.into();
            ck.abort(AbortReason::CheckpointFailed, &revoked);
            ck.abort(AbortReason::ResumeFailed, &revoked);
            let quiet = ck.comm().link().job_error();
            ck.abort(
                AbortReason::CheckpointFailed,
                &Error::OpenHandles { sends: 1, recvs: 0 },
            );
            (quiet, ck.comm().link().job_error().is_some())
        });
        assert_eq!(out, vec![(None, true)]);
    }

    #[test]
    fn run_calls_the_body_again_after_a_revoke_in_replace_mode() {
        let job = TestJob::new("rb-run", 3);
        let out = job.run(1, |r, ck| {
            let passes = Cell::new(0);
            let sum = ck.run(|ck| {
                passes.set(passes.get() + 1);
                let resumed = ck.resume::<S>()?;
                if passes.get() == 1 {
                    assert_eq!(resumed, None);
                    for e in 1..=3 {
                        ck.checkpoint(&state(r, e))?;
                    }
                    // The launcher's record, as the survivors apply it.
                    ck.comm().link().set_membership(replace_record(3, 2));
                    return Err(RecoveryError::Revoked { epoch: 1 }.into());
                }
                assert_eq!(resumed, Some((2, state(r, 2))));
                assert_eq!(ck.rolled_back(), Some(2));
                assert_eq!(ck.checkpoint(&state(r, 3))?, 3);
                ck.comm().allreduce(&[u64::from(r)], Reduction::Sum)
            });
            (passes.get(), sum)
        });
        assert_eq!(out, vec![(2, Ok(vec![3])); 3]);
    }

    #[test]
    fn run_returns_a_revoke_in_shrink_mode_and_every_other_error_as_is() {
        let job = TestJob::new("rb-run-shrink", 2);
        let out = job.run(1, |_, ck| {
            let passes = Cell::new(0);
            let revoked = ck.run(|ck| -> Result<(), Error> {
                passes.set(passes.get() + 1);
                let mut m = Recovered::whole_job(2);
                (m.epoch, m.mode) = (2, Some(Mode::Shrink));
                ck.comm().link().set_membership(m);
                Err(RecoveryError::Revoked { epoch: 1 }.into())
            });
            let other = ck.run(|_| -> Result<(), Error> {
                passes.set(passes.get() + 1);
                Err(Error::OpenHandles { sends: 1, recvs: 0 })
            });
            (passes.get(), revoked, other, ck.pending_rollback())
        });
        for o in out {
            assert_eq!(
                o,
                (
                    2,
                    Err(RecoveryError::Revoked { epoch: 1 }.into()),
                    Err(Error::OpenHandles { sends: 1, recvs: 0 }),
                    None
                )
            );
        }
    }
}
