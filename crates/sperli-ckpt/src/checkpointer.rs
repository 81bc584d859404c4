//! [`Checkpointer`]: a rank's checkpoint and resume engine (protocol §9,
//! §10): the type, how it is built, and what checkpoint
//! ([`crate::checkpoint`]) and resume ([`crate::resume`]) share.

use std::borrow::Borrow;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use sperli_collective::{Comm, Peers, Recovered};
use sperli_tls::composite_sig::{self, Signature};
use sperli_transport::Endpoint;
use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::commit_file::{decode_file, CommitFile};
use sperli_wire::error::{CommitError, DecodeError, Error, FrameError, UsageError};
use sperli_wire::frame_type::FrameType;
use sperli_wire::job_description::JobDescription;
use sperli_wire::limits::CONTEXT_COMMIT;
use sperli_wire::rank_file::RankFileExpect;
use sperli_wire::recovery::{Mode, RecoveryError};
use sperli_wire::HCode;

use crate::keys::JobKeys;
use crate::store::Store;

/// The environment variable in which the launcher names the rank's own
/// checkpoint directory (`sperli run --checkpoint-dir DIR` passes
/// `DIR/rank-<r>`; protocol §9.1: "`<dir>` is the rank's own checkpoint
/// directory").
pub const ENV_CHECKPOINT_DIR: &str = sperli_wire::env::CHECKPOINT_DIR;

/// A rank's checkpoint and resume engine (protocol §9.4, §10.2). It owns
/// the rank's [`Comm`] (reach it with [`Checkpointer::comm`]) so that the
/// collective calls, checkpoints and resume run on one thread in one
/// order, as the protocol requires.
///
/// - [`Checkpointer::resume`] runs the resume exchange of §10.2 at the start
///   of an incarnation >= 2 and returns the state of the resumed epoch (at
///   incarnation 1 it returns `Ok(None)` without any frame: a new job has
///   no checkpoint).
/// - [`Checkpointer::checkpoint`] is the collective `checkpoint(state)` of
///   §9.4: every rank calls it with its own state.
/// - [`Checkpointer::run`] runs the program's body and runs it again after
///   a recovery in place (feature bit 5, §18.7): the body's `resume` then
///   rolls back to the launcher's rollback epoch, on every incarnation.
///
/// Decisions this crate makes where the text leaves room:
///
/// - **H1624 is decided collectively.** Before step 1, every rank
///   contributes its open send and receive handle counts to one `u64` sum
///   allreduce (a v1 COLLECTIVE call, so it counts in the collective
///   sequence). If the sum is not zero, every rank returns
///   [`Error::OpenHandles`] with the job-wide sums and nothing else
///   happens: no ABORT, no file, the job goes on. Every other failure of a
///   checkpoint sends ABORT reason 5 with the error's H number (0 for a
///   local error).
/// - **Size 1** has no buddy: no CKPT_DATA, no `.buddy` file; a resume
///   whose own file is missing or invalid cannot be helped (H1622).
/// - **Overlap.** Every rank but the last pushes its file to its buddy
///   while the file is written and fsynced (the last rank's buddy is rank
///   0, which gets its CKPT_ACK first on that connection), and hashes the
///   copy it receives as the chunks arrive (§9.4, "Overlap").
/// - The epoch directory cleanup of step 5 is best effort: the COMMIT is
///   already in place when it runs, so a failing removal does not fail the
///   checkpoint (the next checkpoint removes it).
/// - **Resume falls back** once, to epoch E − 1, when a rank cannot load
///   the chosen epoch E (§10.2). When no epoch is left, every rank ends
///   with H1622 whose reason is the first failure it knows of.
/// - **A rollback in place** (§18.7) is the same exchange with E the
///   record's rollback epoch: every rank offers its best COMMIT at or
///   below E (a replacement rank 0 may have none of its own), rank 0
///   chooses the highest of those, and a rank refuses a choice above E
///   (H1610). No COMMIT at or below E anywhere is H1622
///   ([`NoRollbackCommit`](sperli_wire::error::ResumeFailure::NoRollbackCommit)).
/// - **After a resume of E** no COMMIT above E stays in the rank's tree (a
///   checkpoint under way at the failure is void, §18.7; the next
///   checkpoint, E + 1, writes over its files), and the link is told that
///   E is this rank's best COMMIT, as it is after each checkpoint
///   ([`Peers::set_best_commit`], the REPORT's `best_commit`, §18.4).
/// - **A revoke is no verdict**: a checkpoint or resume that fails with
///   the revoked error sends no ABORT (the recovery goes on, §18.6).
///
/// The link type `L` is any [`Peers`] that carries checkpoint frames: the
/// [`Endpoint`] itself (what [`Checkpointer::join`] gives), a `&Endpoint`
/// (with `Comm::new(&endpoint)` the program keeps the endpoint for its own
/// `isend`/`irecv` handles while the checkpointer holds the communicator;
/// that is how a handle can be open when `checkpoint` is called, which
/// then fails with H1624), or an in-memory
/// [`FakePeers`](sperli_collective::fake::FakePeers) in tests.
#[derive(Debug)]
pub struct Checkpointer<L: Peers = Endpoint> {
    pub(crate) comm: Comm<L>,
    pub(crate) store: Store,
    pub(crate) keys: JobKeys,
    pub(crate) epoch: u64,
    /// The rank file of the last checkpoint, kept so that the next one
    /// builds its file in memory that is already there (§9.4 step 2).
    pub(crate) file_buf: Vec<u8>,
    /// The COMMIT epoch the next [`Checkpointer::resume`] rolls back to
    /// (a replace-mode MEMBERSHIP record's `rollback`, protocol §18.7).
    pub(crate) rollback: Option<u64>,
    /// The epoch the last resume rolled back to in place (see
    /// [`Checkpointer::rolled_back`]).
    pub(crate) rolled_back: Option<u64>,
    /// SHA-256 of (signed bytes, signature) of the COMMIT signatures that
    /// verified lately: a resume meets the same COMMIT in its offer, in
    /// every rank's offer (rank 0) and in the choice, and verifying it once
    /// is enough (the check is a pure function of those bytes).
    pub(crate) verified: std::sync::Mutex<Vec<[u8; 32]>>,
}

impl Checkpointer<Endpoint> {
    /// Like [`Checkpointer::new`] with the keys of `desc` (protocol §4) and
    /// the directory in [`ENV_CHECKPOINT_DIR`] (set by `sperli run
    /// --checkpoint-dir`). Without the variable: [`Error::Usage`]
    /// ([`UsageError::MissingEnv`]).
    pub fn from_env(comm: Comm<Endpoint>, desc: &JobDescription) -> Result<Self, Error> {
        let dir = std::env::var_os(ENV_CHECKPOINT_DIR).ok_or(UsageError::MissingEnv {
            var: ENV_CHECKPOINT_DIR,
            hint: "run with sperli run --checkpoint-dir DIR",
        })?;
        Self::new(comm, PathBuf::from(dir), JobKeys::from_description(desc)?)
    }

    /// Joins the job on stdin as the launcher starts a rank
    /// ([`Comm::from_stdin_with_description`]) and builds the checkpointer
    /// with [`Checkpointer::from_env`]. The description's secrets are
    /// zeroed before it is dropped.
    pub fn join() -> Result<Self, Error> {
        let (comm, mut desc) = Comm::from_stdin_with_description()?;
        let r = Self::from_env(comm, &desc);
        desc.job_secret_key.fill(0);
        r
    }
}

impl<L: Peers + Borrow<Endpoint>> Checkpointer<L> {
    /// The transport endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        self.comm.link().borrow()
    }
}

impl<L: Peers> Checkpointer<L> {
    /// A checkpointer for the rank behind `comm`, keeping its files under
    /// `dir` (the rank's own directory, protocol §9.1: files go to
    /// `dir/<job hex>/<epoch>/`). `dir` is created if needed. Rank 0 needs
    /// the job secret key in `keys` (H1615 without it).
    pub fn new(comm: Comm<L>, dir: impl Into<PathBuf>, keys: JobKeys) -> Result<Self, Error> {
        if comm.rank() == 0 && keys.secret_key().is_none() {
            return Err(Error::JobDescription(DecodeError::Mismatch {
                field: "job_secret_key length (rank 0)",
                expected: sperli_wire::limits::SECRET_KEY_LEN as u64,
                got: 0,
            }));
        }
        let store = Store::new(dir.into(), keys.job_id())?;
        // A replacement (protocol §18.7) joins an epoch of a replace-mode
        // record: its first resume rolls back with the survivors.
        let rollback = replace_rollback(&comm.link().membership());
        Ok(Self {
            comm,
            store,
            keys,
            epoch: 0,
            file_buf: Vec::new(),
            rollback,
            rolled_back: None,
            verified: Default::default(),
        })
    }

    /// The communicator, for the program's own collective and point-to-point
    /// calls (`comm().link()` is the link, e.g. the [`Endpoint`]).
    pub fn comm(&mut self) -> &mut Comm<L> {
        &mut self.comm
    }

    /// Gives the communicator back (e.g. to `finish` the endpoint).
    pub fn into_comm(self) -> Comm<L> {
        self.comm
    }

    /// The last committed or resumed epoch (0: none yet). The next
    /// checkpoint writes epoch `epoch() + 1` (protocol §1.4, §9.4).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The keys in use.
    pub fn keys(&self) -> &JobKeys {
        &self.keys
    }

    /// The rank's checkpoint directory.
    pub fn dir(&self) -> &Path {
        self.store.dir()
    }

    /// `dir/<job hex>` (protocol §9.1).
    pub fn job_dir(&self) -> PathBuf {
        self.store.job_dir()
    }

    /// `dir/<job hex>/<epoch>` (protocol §9.1).
    pub fn epoch_dir(&self, epoch: u64) -> PathBuf {
        self.store.epoch_dir(epoch)
    }

    /// Gives back the memory of the last rank file, which the checkpointer
    /// keeps for the next checkpoint (about the size of the state).
    pub fn release_buffer(&mut self) {
        self.file_buf = Vec::new();
    }

    pub(crate) fn rank(&self) -> u32 {
        self.comm.rank()
    }

    pub(crate) fn size(&self) -> u32 {
        self.comm.size()
    }

    pub(crate) fn link(&self) -> &L {
        self.comm.link()
    }

    /// What a rank file of `epoch` and `rank` must say (§9.2).
    pub(crate) fn expect(&self, epoch: u64, rank: u32) -> RankFileExpect {
        RankFileExpect {
            job_id: self.keys.job_id(),
            epoch,
            rank,
            size: self.size(),
        }
    }

    /// Sends ABORT with `reason` and the error's code, unless the job
    /// already failed (then it was sent or received already, and a
    /// receiver of ABORT forwards nothing: protocol §7.5).
    /// A revoke is no verdict on the job (protocol §18.6: the call fails on
    /// the rank that made it, and the recovery goes on): no ABORT for it.
    pub(crate) fn abort(&self, reason: AbortReason, e: &Error) {
        let link = self.link();
        let revoked = matches!(
            e,
            Error::Recovery(
                RecoveryError::Revoked { .. } | RecoveryError::CommunicatorRevoked { .. }
            )
        );
        if link.job_error().is_none() && !revoked {
            let message = e.to_string();
            link.abort(reason, code_of(e), Abort::truncate_message(&message));
        }
    }

    /// Checks a COMMIT file as protocol §9.3 steps 1-4: structure (H1621),
    /// signature with the job public key (H1621), job id and `epoch`
    /// (H1621), size (H1623).
    pub fn verify_commit<'a>(&self, bytes: &'a [u8], epoch: u64) -> Result<CommitFile<'a>, Error> {
        let c = decode_file(bytes)?;
        let sig = Signature::from_slice(c.signature)
            .map_err(|_| Error::BadCommit(CommitError::BadSignature))?;
        let digest: [u8; 32] = Sha256::new()
            .chain_update(c.signed)
            .chain_update(c.signature)
            .finalize()
            .into();
        let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if !verified.contains(&digest) {
            if !composite_sig::verify(self.keys.public_key(), c.signed, CONTEXT_COMMIT, &sig) {
                return Err(Error::BadCommit(CommitError::BadSignature));
            }
            // A few recent ones: a tree holds epochs e and e - 1 (§9.4).
            if verified.len() >= 4 {
                verified.remove(0);
            }
            verified.push(digest);
        }
        drop(verified);
        c.check_expected(self.keys.job_id(), epoch, self.size())?;
        Ok(c)
    }

    /// The next checkpoint or RESUME frame from `from`, which must be of
    /// type `want` with header epoch `epoch` (§6.2 as this exchange
    /// applies it; a frame that does not fit is H1610).
    pub(crate) fn recv_frame(
        &self,
        from: u32,
        want: FrameType,
        epoch: u64,
        when: &'static str,
    ) -> Result<Vec<u8>, Error> {
        let f = self.link().recv_ckpt(from)?;
        if f.frame_type != want {
            return Err(misfit(f.frame_type, when));
        }
        if f.epoch != epoch {
            return Err(field_mismatch(want, "epoch", epoch, f.epoch));
        }
        Ok(f.payload)
    }
}

/// The rollback epoch of a replace-mode membership of epoch >= 2 (protocol
/// §18.3 `rollback`, §18.7), if `m` is one.
pub(crate) fn replace_rollback(m: &Recovered) -> Option<u64> {
    match m.mode {
        Some(Mode::Replace) if m.epoch >= 2 => m.rollback,
        _ => None,
    }
}

/// The H number of `e` for ABORT's `code` (0 for a local error).
pub(crate) fn code_of(e: &Error) -> u32 {
    e.h_code().map_or(0, HCode::number)
}

/// A checkpoint or resume frame of a type that does not fit the exchange
/// (protocol §7: "Frames that arrive early" are kept until the call they
/// answer; one that does not fit is H1610).
pub(crate) fn misfit(frame_type: FrameType, when: &'static str) -> Error {
    Error::FrameRejected(FrameError::Unexpected { frame_type, when })
}

/// A payload fault of a checkpoint or resume frame (H1610).
pub(crate) fn payload_error(frame_type: FrameType) -> impl Fn(DecodeError) -> Error {
    move |error| Error::FrameRejected(FrameError::Payload { frame_type, error })
}

/// A payload field of a checkpoint or resume frame that does not fit the
/// exchange (H1610).
pub(crate) fn field_mismatch(
    frame_type: FrameType,
    field: &'static str,
    expected: u64,
    got: u64,
) -> Error {
    payload_error(frame_type)(DecodeError::Mismatch {
        field,
        expected,
        got,
    })
}

#[cfg(test)]
mod tests {
    use crate::test_job::TestJob;
    use sperli_wire::ckpt_path::COMMIT_FILE_NAME;
    use sperli_wire::error::{CommitError, Error};

    /// A COMMIT that verified once is not verified again, and a changed
    /// one (signature, signed bytes) is judged afresh: still H1621.
    #[test]
    fn a_verified_commit_is_remembered_and_a_changed_one_is_not() {
        let job = TestJob::new("verified", 1);
        job.epochs(1);
        let good = std::fs::read(job.edir(0, 1).join(COMMIT_FILE_NAME)).unwrap();
        job.run(2, |_, ck| {
            assert!(ck.verify_commit(&good, 1).is_ok());
            assert!(ck.verify_commit(&good, 1).is_ok());
            assert_eq!(ck.verified.lock().unwrap().len(), 1, "verified once");
            for at in [good.len() - 1, good.len() / 2] {
                let mut bad = good.clone();
                bad[at] ^= 1;
                assert!(
                    matches!(
                        ck.verify_commit(&bad, 1),
                        Err(Error::BadCommit(CommitError::BadSignature))
                    ),
                    "byte {at}"
                );
            }
            assert!(ck.verify_commit(&good, 1).is_ok());
            // The epoch is checked every time (§9.3 step 3).
            assert!(ck.verify_commit(&good, 2).is_err());
        });
    }
}
