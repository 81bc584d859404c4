//! [`Checkpointer`]: the collective `checkpoint(state)` and the resume
//! exchange (protocol text "CKPT_BEGIN (6)" .. "RESUME (10)", "Checkpoints",
//! "Ausfall und Wiederaufnahme"; layouts §6, §7, §10;
//! docs/sperli-protocol.md §7.7-§7.11, §9, §10).

use std::borrow::Borrow;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use sperli_collective::{Comm, Link};
use sperli_tls::composite_sig::{self, Signature};
use sperli_transport::Endpoint;
use sperli_wire::abort::AbortReason;
use sperli_wire::ckpt_ack::CkptAck;
use sperli_wire::ckpt_begin::CkptBegin;
use sperli_wire::ckpt_data::{chunks, ChunkAssembler, ChunkError, CkptData, CkptDataKind};
use sperli_wire::ckpt_path::{
    buddy_file_name, epoch_dir, job_dir, rank_file_name, temp_name, COMMIT_FILE_NAME,
};
use sperli_wire::codec::Codec;
use sperli_wire::commit_file::{assemble, decode_file, signed_message, CommitFile};
use sperli_wire::error::{CommitError, DecodeError, Error, FrameError, HashSubject};
use sperli_wire::frame_type::FrameType;
use sperli_wire::job_description::JobDescription;
use sperli_wire::limits::{commit_file_len, CONTEXT_COMMIT, MAX_SIZE, RANK_FILE_HEADER_LEN};
use sperli_wire::payload::Payload;
use sperli_wire::rank_file::{verify_rank_file, RankFileExpect, RankFileHeader};
use sperli_wire::resume::{Resume, ResumeStatus};
use sperli_wire::{HCode, Reduction, Sha256Digest};

use crate::fsio;
use crate::keys::JobKeys;
use crate::state::{decode_state, encode_state_into, Checkpointable};

/// The environment variable in which the launcher names the rank's own
/// checkpoint directory (`sperli run --checkpoint-dir DIR` passes
/// `DIR/rank-<r>`; layouts §7 "`<dir>` is the rank's own checkpoint
/// directory").
pub const ENV_CHECKPOINT_DIR: &str = sperli_wire::env::CHECKPOINT_DIR;

/// A rank's checkpoint and resume engine (docs/sperli-protocol.md §9.4,
/// §10.2). It owns the rank's [`Comm`] (reach it with [`Checkpointer::comm`])
/// so that the collective calls, checkpoints and resume run on one thread
/// in one order, as the protocol requires.
///
/// - [`Checkpointer::resume`] runs the resume exchange of §10.2 at the start
///   of an incarnation >= 2 and returns the state of the resumed epoch (at
///   incarnation 1 it returns `Ok(None)` without any frame: a new job has
///   no checkpoint).
/// - [`Checkpointer::checkpoint`] is the collective `checkpoint(state)` of
///   §9.4: every rank calls it with its own state.
///
/// Decisions this crate makes where the text leaves room:
///
/// - **H1624 is decided collectively.** Before step 1, every rank
///   contributes its open send and receive handle counts to one `u64` sum
///   allreduce (a v1 COLLECTIVE call, so it counts in the collective
///   sequence). If the sum is not zero, every rank returns
///   [`Error::OpenHandles`] with the job-wide sums and nothing else
///   happens: no ABORT, no file, the job goes on (the text: "scheitert auf
///   jedem Rang mit H1624"). Every other failure of a checkpoint sends
///   ABORT reason 5 with the error's H number (0 for a local I/O error).
/// - **Size 1** has no buddy: no CKPT_DATA, no `.buddy` file; a resume
///   whose own file is missing or invalid cannot be helped (H1622).
/// - The epoch directory cleanup of step 5 is best effort: the COMMIT is
///   already in place when it runs, so a failing removal does not fail the
///   checkpoint (the next checkpoint removes it).
/// - On resume, a rank that cannot load its state ends with its own file's
///   code (H1619, H1620, H1621, H1623) when it has one, else (file missing
///   on both sides) with H1622; rank 0 and every other rank end with H1622.
///   A rank that gets rank 0's ABORT reason 6 code 1622 instead of the
///   RESUME status 2 (the two race) also ends with H1622.
///
/// The link type `L` is the [`Endpoint`] itself (what [`Checkpointer::join`]
/// gives) or a `&Endpoint`: with `Comm::new(&endpoint)` the program keeps
/// the endpoint for its own `isend`/`irecv` handles while the checkpointer
/// holds the communicator (that is how a handle can be open when
/// `checkpoint` is called, which then fails with H1624).
#[derive(Debug)]
pub struct Checkpointer<L: Link + Borrow<Endpoint> = Endpoint> {
    comm: Comm<L>,
    dir: PathBuf,
    keys: JobKeys,
    epoch: u64,
}

/// How the resume exchange failed: with or without sending ABORT reason 6.
enum Fail {
    /// A frame that does not fit, a transport or local I/O error: ABORT
    /// reason 6 (unless the job already failed).
    Abort(Error),
    /// Already handled (rank 0's RESUME status 2 or ABORT).
    Quiet(Error),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Abort(e)
    }
}

/// A checkpoint or resume frame of the wrong type (layouts §10 "Frames that
/// arrive early": H1610).
fn misfit(frame_type: FrameType, when: &'static str) -> Error {
    Error::FrameRejected(FrameError::Unexpected { frame_type, when })
}

/// A payload fault of a checkpoint or resume frame (H1610).
fn payload_error(frame_type: FrameType) -> impl Fn(DecodeError) -> Error {
    move |error| Error::FrameRejected(FrameError::Payload { frame_type, error })
}

fn field_mismatch(frame_type: FrameType, field: &'static str, expected: u64, got: u64) -> Error {
    payload_error(frame_type)(DecodeError::Mismatch {
        field,
        expected,
        got,
    })
}

/// The next checkpoint/RESUME frame from `from`, which must be of type
/// `want` with header epoch `epoch`.
fn recv_frame(
    ep: &Endpoint,
    from: u32,
    want: FrameType,
    epoch: u64,
    when: &'static str,
) -> Result<Vec<u8>, Error> {
    let (h, bytes) = ep.recv_ckpt(from)?;
    if h.frame_type != want {
        return Err(misfit(h.frame_type, when));
    }
    if h.epoch != epoch {
        return Err(field_mismatch(want, "epoch", epoch, h.epoch));
    }
    Ok(bytes)
}

/// The chunk rules of "CKPT_DATA (7)" for a file that is streamed to disk
/// (the same checks as [`ChunkAssembler::push`], without keeping the file
/// in memory).
fn check_chunk(
    d: &CkptData<'_>,
    kind: CkptDataKind,
    owner: u32,
    total: Option<u64>,
    received: u64,
) -> Result<(), ChunkError> {
    if d.kind != kind {
        return Err(ChunkError::Kind {
            expected: kind,
            got: d.kind,
        });
    }
    if d.owner != owner {
        return Err(ChunkError::Owner {
            expected: owner,
            got: d.owner,
        });
    }
    if let Some(t) = total {
        if d.total != t {
            return Err(ChunkError::Total {
                expected: t,
                got: d.total,
            });
        }
    }
    if d.offset != received {
        return Err(ChunkError::Offset {
            expected: received,
            got: d.offset,
        });
    }
    let end = d.offset.saturating_add(d.chunk.len() as u64);
    if end > d.total {
        return Err(ChunkError::PastTotal {
            total: d.total,
            end,
        });
    }
    Ok(())
}

fn chunk_error(e: ChunkError) -> Error {
    payload_error(FrameType::CkptData)(e.into())
}

/// Test hook (docs/reliability.md, "Crashes"): when the environment
/// variable `SPERLI_TEST_CKPT_KILL` is `POINT,RANK,INCARNATION,EPOCH` and
/// this rank, incarnation and epoch match, the rank SIGKILLs itself at
/// `POINT` (`step0` .. `step5`, `step4-commit-written`, `resume`). Unset,
/// it costs one environment lookup per step; nothing else reads it.
fn test_kill_point(point: &str, rank: u32, incarnation: u32, epoch: u64) {
    let Some(v) = std::env::var_os(sperli_wire::env::TEST_CKPT_KILL) else {
        return;
    };
    let want = format!("{point},{rank},{incarnation},{epoch}");
    if v.to_str() == Some(want.as_str()) {
        eprintln!("rank {rank}: test hook: SIGKILL at {point} (epoch {epoch})");
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status();
        // The signal is on its way; never go on.
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
}

/// A message of at most 1024 bytes for ABORT (layouts §6), cut at a char
/// boundary.
fn abort_message(e: &Error) -> String {
    let mut s = e.to_string();
    if s.len() > 1024 {
        let mut cut = 1024;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

fn code_of(e: &Error) -> u32 {
    e.h_code().map_or(0, HCode::number)
}

/// The longest COMMIT file read from disk (size 4096).
fn max_commit_len() -> u64 {
    commit_file_len(MAX_SIZE) as u64
}

impl Checkpointer<Endpoint> {
    /// Like [`Checkpointer::new`] with the keys of `desc` (layouts §1) and
    /// the directory in [`ENV_CHECKPOINT_DIR`] (set by `sperli run
    /// --checkpoint-dir`). Without the variable: a local error
    /// ([`Error::Io`], `NotFound`).
    pub fn from_env(comm: Comm<Endpoint>, desc: &JobDescription) -> Result<Self, Error> {
        let dir = std::env::var_os(ENV_CHECKPOINT_DIR).ok_or(Error::Io {
            op: "reading SPERLI_CHECKPOINT_DIR (run with sperli run --checkpoint-dir DIR)",
            kind: std::io::ErrorKind::NotFound,
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

impl<L: Link + Borrow<Endpoint>> Checkpointer<L> {
    /// A checkpointer for the rank behind `comm`, keeping its files under
    /// `dir` (the rank's own directory, layouts §7: files go to
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
        let dir = dir.into();
        fsio::ensure_dir(&dir)?;
        Ok(Self {
            comm,
            dir,
            keys,
            epoch: 0,
        })
    }

    /// The communicator, for the program's own collective and point-to-point
    /// calls (`comm().link()` is the [`Endpoint`]).
    pub fn comm(&mut self) -> &mut Comm<L> {
        &mut self.comm
    }

    /// The transport endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        self.comm.link().borrow()
    }

    /// Gives the communicator back (e.g. to `finish` the endpoint).
    pub fn into_comm(self) -> Comm<L> {
        self.comm
    }

    /// The last committed or resumed epoch (0: none yet). The next
    /// checkpoint writes epoch `epoch() + 1` (docs/sperli-protocol.md §1.4, §9.4).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The keys in use.
    pub fn keys(&self) -> &JobKeys {
        &self.keys
    }

    /// The rank's checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `dir/<job hex>` (layouts §7).
    pub fn job_dir(&self) -> PathBuf {
        job_dir(&self.dir, self.keys.job_id())
    }

    /// `dir/<job hex>/<epoch>` (layouts §7).
    pub fn epoch_dir(&self, epoch: u64) -> PathBuf {
        epoch_dir(&self.dir, self.keys.job_id(), epoch)
    }

    fn rank(&self) -> u32 {
        self.comm.rank()
    }

    fn size(&self) -> u32 {
        self.comm.size()
    }

    fn expect(&self, epoch: u64, rank: u32) -> RankFileExpect {
        RankFileExpect {
            job_id: self.keys.job_id(),
            epoch,
            rank,
            size: self.size(),
        }
    }

    /// Sends ABORT with `reason` and the error's code, unless the job
    /// already failed (then the transport has done it).
    fn abort(&self, reason: AbortReason, e: &Error) {
        let ep = self.endpoint();
        if ep.error().is_none() {
            ep.abort(reason, code_of(e), &abort_message(e));
        }
    }

    /// Checks a COMMIT file as docs/sperli-protocol.md §9.3 steps 1-4:
    /// structure (H1621), signature with the job public key (H1621), job id
    /// and `epoch` (H1621), size (H1623).
    pub fn verify_commit<'a>(&self, bytes: &'a [u8], epoch: u64) -> Result<CommitFile<'a>, Error> {
        let c = decode_file(bytes)?;
        let sig = Signature::from_slice(c.signature)
            .map_err(|_| Error::BadCommit(CommitError::BadSignature))?;
        if !composite_sig::verify(self.keys.public_key(), c.signed, CONTEXT_COMMIT, &sig) {
            return Err(Error::BadCommit(CommitError::BadSignature));
        }
        c.check_expected(self.keys.job_id(), epoch, self.size())?;
        Ok(c)
    }

    // ---- checkpoint (§9.4) ---------------------------------------------

    /// The collective `checkpoint(state)` (protocol text "Checkpoints",
    /// steps 1-5; docs/sperli-protocol.md §9.4). Every rank calls it with
    /// its own state; it returns the new epoch once this rank has the
    /// verified COMMIT of it.
    ///
    /// Errors: [`Error::OpenHandles`] (H1624) on every rank, without ABORT,
    /// when any rank has an open send or receive handle (checked together,
    /// see the type's docs). Any other failure (a frame that does not fit:
    /// H1610; a COMMIT that fails: H1621/H1623; a hash that does not match:
    /// H1620; a local I/O error) sends ABORT reason 5 and ends the job; no
    /// COMMIT of an epoch whose rank files are incomplete is ever written.
    pub fn checkpoint<T: Checkpointable>(&mut self, state: &T) -> Result<u64, Error> {
        let (sends, recvs) = self.endpoint().open_handles();
        let sum = self.comm.allreduce(&[sends, recvs], Reduction::Sum)?;
        let (s, r) = (
            sum.first().copied().unwrap_or(0),
            sum.get(1).copied().unwrap_or(0),
        );
        if s != 0 || r != 0 {
            return Err(Error::OpenHandles { sends: s, recvs: r });
        }
        let e = self.epoch.checked_add(1).ok_or(Error::Io {
            op: "checkpoint epoch counter overflow",
            kind: std::io::ErrorKind::InvalidInput,
        })?;
        match self.checkpoint_steps(e, state) {
            Ok(()) => {
                self.epoch = e;
                Ok(e)
            }
            Err(err) => {
                self.abort(AbortReason::CheckpointFailed, &err);
                Err(err)
            }
        }
    }

    fn checkpoint_steps<T: Checkpointable>(&mut self, e: u64, state: &T) -> Result<(), Error> {
        let (rank, size) = (self.rank(), self.size());
        let job = self.keys.job_id();
        let edir = self.epoch_dir(e);
        let ep: &Endpoint = self.comm.link().borrow();
        let kill = |point| test_kill_point(point, rank, self.keys.incarnation(), e);
        fsio::ensure_dir(&edir)?;
        // Step 0 and 1.
        if rank == 0 {
            fsio::remove_if_present(&edir, COMMIT_FILE_NAME)?;
            kill("step0");
            for r in 1..size {
                ep.send_frame(r, e, &Payload::CkptBegin(CkptBegin { size }))?;
                kill("step1");
            }
        } else {
            let b = recv_frame(
                ep,
                0,
                FrameType::CkptBegin,
                e,
                "during checkpoint (CKPT_BEGIN expected)",
            )?;
            let begin = CkptBegin::decode(&b).map_err(payload_error(FrameType::CkptBegin))?;
            begin
                .check_size(size)
                .map_err(payload_error(FrameType::CkptBegin))?;
            kill("step1");
            fsio::remove_if_present(&edir, COMMIT_FILE_NAME)?;
        }
        // Step 2: the rank file, built in one buffer (header, then state).
        let mut file = vec![0u8; RANK_FILE_HEADER_LEN];
        encode_state_into(state, &mut file);
        let body = file.get(RANK_FILE_HEADER_LEN..).unwrap_or_default();
        let header = RankFileHeader {
            job_id: job,
            epoch: e,
            rank,
            size,
            payload_length: body.len() as u64,
            payload_sha256: Sha256Digest::of(body),
        }
        .to_vec();
        file[..RANK_FILE_HEADER_LEN].copy_from_slice(&header);
        // The whole-file hash (for CKPT_ACK) is computed on a second
        // thread while this one writes and fsyncs (I/O wait).
        let (written, own_hash) = std::thread::scope(|s| {
            let hasher = s.spawn(|| Sha256Digest::of(&file));
            let written = fsio::write_atomic(&edir, &rank_file_name(rank), &[&file]);
            let hash = hasher.join().unwrap_or_else(|_| Sha256Digest::of(&file));
            (written, hash)
        });
        written?;
        kill("step2");
        if rank != 0 {
            ep.send_frame(0, e, &Payload::CkptAck(CkptAck { sha256: own_hash }))?;
        }
        // Step 3: push to the buddy.
        let pred = (rank + size - 1) % size;
        if size > 1 {
            let buddy = (rank + 1) % size;
            for c in chunks(CkptDataKind::Push, rank, &file) {
                ep.send_frame(buddy, e, &Payload::CkptData(c))?;
                kill("step3");
            }
        }
        drop(file);
        // Step 4.
        if rank == 0 {
            let mut hashes = Vec::with_capacity(size as usize);
            hashes.push(own_hash);
            for r in 1..size {
                let b = recv_frame(
                    ep,
                    r,
                    FrameType::CkptAck,
                    e,
                    "during checkpoint (CKPT_ACK expected)",
                )?;
                hashes.push(
                    CkptAck::decode(&b)
                        .map_err(payload_error(FrameType::CkptAck))?
                        .sha256,
                );
            }
            let msg = signed_message(job, e, &hashes);
            let sk =
                self.keys
                    .secret_key()
                    .ok_or(Error::JobDescription(DecodeError::Mismatch {
                        field: "job_secret_key length (rank 0)",
                        expected: sperli_wire::limits::SECRET_KEY_LEN as u64,
                        got: 0,
                    }))?;
            let sig = composite_sig::sign(sk, &msg, CONTEXT_COMMIT).map_err(|_| Error::Io {
                op: "signing the COMMIT file",
                kind: std::io::ErrorKind::Other,
            })?;
            let commit = assemble(&msg, &sig.0);
            fsio::write_atomic(&edir, COMMIT_FILE_NAME, &[&commit])?;
            kill("step4-commit-written");
            let cf = decode_file(&commit)?;
            for r in 1..size {
                ep.send_frame(r, e, &Payload::CkptCommit(cf.clone()))?;
            }
            if size > 1 {
                let got = receive_push(ep, pred, e, &edir)?;
                check_entry_hash(&cf, pred, got)?;
            }
        } else {
            let got = receive_push(ep, pred, e, &edir)?;
            let b = recv_frame(
                ep,
                0,
                FrameType::CkptCommit,
                e,
                "during checkpoint (CKPT_COMMIT expected)",
            )?;
            kill("step4");
            let cf = self.verify_commit(&b, e)?;
            check_entry_hash(&cf, rank, own_hash)?;
            check_entry_hash(&cf, pred, got)?;
            fsio::write_atomic(&edir, COMMIT_FILE_NAME, &[&b])?;
        }
        // Step 5.
        kill("step5");
        fsio::remove_epochs_below(&self.job_dir(), e.saturating_sub(1));
        Ok(())
    }

    // ---- resume (§10.2) ------------------------------------------------

    /// The resume exchange (protocol text "RESUME (10)", "Ausfall und
    /// Wiederaufnahme"; layouts §6, §10; docs/sperli-protocol.md §10.2).
    /// Call it once, first thing after joining, on every rank.
    ///
    /// Returns `Ok(None)` when the program starts from the beginning: at
    /// incarnation 1 (no frame is sent), or when no COMMIT exists anywhere
    /// (epoch 0 announced). Returns `Ok(Some((epoch, state)))` with this
    /// rank's state of the resumed epoch otherwise; the next checkpoint is
    /// then `epoch + 1`.
    ///
    /// Errors (every rank returns one and the job ends): H1621 or H1623 on
    /// rank 0 when the only COMMIT fails (H1622 when several do), H1619 /
    /// H1620 / H1621 / H1623 on a rank that cannot load its state, H1622
    /// on the others; H1610 for a frame that does not fit (ABORT reason 6);
    /// H1612 when another rank aborted.
    pub fn resume<T: Checkpointable>(&mut self) -> Result<Option<(u64, T)>, Error> {
        if self.keys.incarnation() < 2 {
            return Ok(None);
        }
        match self.resume_exchange::<T>() {
            Ok(r) => {
                self.epoch = r.as_ref().map_or(0, |(e, _)| *e);
                Ok(r)
            }
            Err(Fail::Quiet(e)) => Err(e),
            Err(Fail::Abort(e)) => {
                self.abort(AbortReason::ResumeFailed, &e);
                Err(e)
            }
        }
    }

    /// Every COMMIT file in this rank's epoch directories, highest epoch first.
    fn own_commits(&self) -> Vec<(u64, Vec<u8>)> {
        fsio::epochs(&self.job_dir())
            .into_iter()
            .filter_map(|(epoch, path)| {
                let bytes =
                    fsio::read_limited(&path.join(COMMIT_FILE_NAME), max_commit_len()).ok()??;
                Some((epoch, bytes))
            })
            .collect()
    }

    fn resume_exchange<T: Checkpointable>(&mut self) -> Result<Option<(u64, T)>, Fail> {
        let (rank, size) = (self.rank(), self.size());
        // Steps 1-3: offers, choice, announcement.
        let (epoch, commit_bytes): (u64, Option<Vec<u8>>) = if rank == 0 {
            self.choose()?
        } else {
            self.offer_and_wait()?
        };
        let ep: &Endpoint = self.comm.link().borrow();
        if epoch == 0 {
            // Nothing to load: everyone reports "ready" (0).
            if rank == 0 {
                self.collect_reports(0, None)?;
            } else {
                self.report_and_wait(0, ResumeStatus::Go, None)?;
            }
            return Ok(None);
        }
        // Step 3: every rank verifies the announced COMMIT.
        let bytes = commit_bytes.unwrap_or_default();
        let commit = self.verify_commit(&bytes, epoch);
        test_kill_point("resume", rank, self.keys.incarnation(), epoch);
        // Step 4: own file.
        let own = match &commit {
            Ok(c) => self.load_own(epoch, c),
            Err(e) => Err(e.clone()),
        };
        // Step 5: buddy fetch.
        let mut fetched: Option<Result<Vec<u8>, Error>> = None;
        if size > 1 {
            let succ = (rank + 1) % size;
            let pred = (rank + size - 1) % size;
            let need = own.is_err() && commit.is_ok();
            let signal = if need {
                CkptData::request(rank)
            } else {
                CkptData::nothing_needed(rank)
            };
            ep.send_frame(succ, epoch, &Payload::CkptData(signal))?;
            // Serve the predecessor.
            let b = recv_frame(
                ep,
                pred,
                FrameType::CkptData,
                epoch,
                "during resume (CKPT_DATA kind 1 or 4 expected)",
            )?;
            let d = CkptData::decode(&b).map_err(payload_error(FrameType::CkptData))?;
            if d.owner != pred {
                return Err(field_mismatch(
                    FrameType::CkptData,
                    "owner",
                    u64::from(pred),
                    u64::from(d.owner),
                )
                .into());
            }
            match d.kind {
                CkptDataKind::NothingNeeded => {}
                CkptDataKind::Request => {
                    let copy = commit
                        .as_ref()
                        .ok()
                        .and_then(|c| self.load_buddy_copy(epoch, pred, c).ok());
                    match copy {
                        Some(file) => {
                            for c in chunks(CkptDataKind::Reply, pred, &file) {
                                ep.send_frame(pred, epoch, &Payload::CkptData(c))?;
                            }
                        }
                        None => ep.send_frame(
                            pred,
                            epoch,
                            &Payload::CkptData(CkptData::no_valid_copy(pred)),
                        )?,
                    }
                }
                other => {
                    return Err(field_mismatch(
                        FrameType::CkptData,
                        "kind",
                        u64::from(CkptDataKind::Request.code()),
                        u64::from(other.code()),
                    )
                    .into())
                }
            }
            if need {
                if let Ok(c) = &commit {
                    fetched = Some(self.fetch(epoch, c)?);
                }
            }
        }
        // The state, from the own file or the fetched copy.
        let loaded: Result<(T, bool), Error> = match own {
            Ok(file) => state_of::<T>(&file).map(|s| (s, false)),
            Err(own_err) => match fetched {
                Some(Ok(file)) => {
                    // §10.2 step 5: keep the valid fetched file (best effort).
                    let _ =
                        fsio::write_atomic(&self.epoch_dir(epoch), &rank_file_name(rank), &[&file]);
                    state_of::<T>(&file).map(|s| (s, true))
                }
                Some(Err(fetch_err)) => Err(worst(own_err, Some(fetch_err))),
                None => Err(worst(own_err, None)),
            },
        };
        if let Ok(c) = &commit {
            // Keep a copy of the COMMIT if this rank had none (best effort).
            let edir = self.epoch_dir(epoch);
            if fsio::read_limited(&edir.join(COMMIT_FILE_NAME), max_commit_len())
                .ok()
                .flatten()
                .as_deref()
                != Some(&bytes[..])
            {
                let _ = fsio::write_atomic(&edir, COMMIT_FILE_NAME, &[&c.to_vec()]);
            }
        }
        // Steps 6 and 7.
        if rank == 0 {
            self.collect_reports(
                epoch,
                Some(loaded.as_ref().map(|_| ()).map_err(Clone::clone)),
            )?;
            loaded
                .map(|(s, _)| Some((epoch, s)))
                .map_err(|e| Fail::Quiet(no_epoch(e)))
        } else {
            let status = match &loaded {
                Ok((_, false)) => ResumeStatus::Go,
                Ok((_, true)) => ResumeStatus::LoadedBuddy,
                Err(_) => ResumeStatus::CannotLoad,
            };
            self.report_and_wait(epoch, status, loaded.as_ref().err().cloned())?;
            match loaded {
                Ok((s, _)) => Ok(Some((epoch, s))),
                // Rank 0 said go on although this rank cannot load: it
                // does not (rank 0 sends status 2 then); keep the error.
                Err(e) => Err(Fail::Quiet(e)),
            }
        }
    }

    /// Rank 0, steps 1-3: the offers, the choice, the announcement.
    fn choose(&self) -> Result<(u64, Option<Vec<u8>>), Fail> {
        let size = self.size();
        let ep = self.endpoint();
        let mut candidates = self.own_commits();
        for r in 1..size {
            let (h, b) = ep.recv_ckpt(r)?;
            if h.frame_type != FrameType::Resume {
                return Err(misfit(h.frame_type, "during resume (RESUME offer expected)").into());
            }
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
                    res.check_header_epoch(h.epoch)
                        .map_err(payload_error(FrameType::Resume))?;
                    if res.commit.is_some() {
                        candidates.push((h.epoch, b.get(8..).unwrap_or_default().to_vec()));
                    }
                }
                // An offer whose COMMIT does not decode is a failed
                // candidate (H1621), not a rejected frame.
                Err(e)
                    if e.h_code() == Some(HCode::H1621)
                        && b.first() == Some(&ResumeStatus::Offer.code()) =>
                {
                    candidates.push((h.epoch, b.get(8..).unwrap_or_default().to_vec()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut best: Option<(u64, Vec<u8>)> = None;
        let mut failures: Vec<(u64, Error)> = Vec::new();
        for (epoch, bytes) in candidates {
            match self.verify_commit(&bytes, epoch) {
                Ok(_) => {
                    if best.as_ref().is_none_or(|(b, _)| epoch > *b) {
                        best = Some((epoch, bytes));
                    }
                }
                Err(e) => failures.push((epoch, e)),
            }
        }
        let (epoch, bytes) = match best {
            Some((e, b)) => (e, Some(b)),
            None if failures.is_empty() => (0, None),
            None => {
                let first_epoch = failures.first().map(|f| f.0);
                let single = failures.iter().all(|f| Some(f.0) == first_epoch);
                let err = if single {
                    failures.swap_remove(0).1
                } else {
                    let last = failures
                        .pop()
                        .map(|f| f.1)
                        .unwrap_or(Error::BadCommit(CommitError::BadSignature));
                    Error::NoResumableEpoch {
                        reason: Box::new(last),
                    }
                };
                return Err(Fail::Abort(err));
            }
        };
        let commit = match &bytes {
            Some(b) => Some(decode_file(b)?),
            None => None,
        };
        for r in 1..size {
            ep.send_frame(
                r,
                epoch,
                &Payload::Resume(Resume {
                    status: ResumeStatus::Go,
                    commit: commit.clone(),
                }),
            )?;
        }
        Ok((epoch, bytes))
    }

    /// A rank other than 0, steps 1 and 3: send the best COMMIT (highest
    /// epoch whose signature, job id and epoch check out; the size is rank
    /// 0's to judge), then take rank 0's announcement.
    fn offer_and_wait(&self) -> Result<(u64, Option<Vec<u8>>), Fail> {
        let ep = self.endpoint();
        let best = self.own_commits().into_iter().find(|(epoch, bytes)| {
            matches!(
                self.verify_commit(bytes, *epoch),
                Ok(_) | Err(Error::CommitSizeMismatch { .. })
            )
        });
        let (epoch, commit) = match &best {
            Some((e, b)) => (*e, Some(decode_file(b)?)),
            None => (0, None),
        };
        ep.send_frame(
            0,
            epoch,
            &Payload::Resume(Resume {
                status: ResumeStatus::Offer,
                commit,
            }),
        )?;
        let (h, b) = ep.recv_ckpt(0)?;
        if h.frame_type != FrameType::Resume {
            return Err(misfit(h.frame_type, "during resume (RESUME status 0 expected)").into());
        }
        let status_ok = b.first() == Some(&ResumeStatus::Go.code());
        match Resume::decode_payload(&b) {
            Ok(res) => {
                if res.status != ResumeStatus::Go {
                    return Err(field_mismatch(
                        FrameType::Resume,
                        "status",
                        0,
                        u64::from(res.status.code()),
                    )
                    .into());
                }
                res.check_header_epoch(h.epoch)
                    .map_err(payload_error(FrameType::Resume))?;
                match res.commit {
                    Some(_) => Ok((h.epoch, Some(b.get(8..).unwrap_or_default().to_vec()))),
                    None if h.epoch == 0 => Ok((0, None)),
                    None => Err(misfit(
                        FrameType::Resume,
                        "during resume (status 0 with an epoch but no COMMIT)",
                    )
                    .into()),
                }
            }
            // A COMMIT that does not decode: this rank cannot load (H1621,
            // reported with status 2 later).
            Err(e) if status_ok && h.epoch != 0 && e.h_code() == Some(HCode::H1621) => {
                Ok((h.epoch, Some(b.get(8..).unwrap_or_default().to_vec())))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Rank 0, steps 6-7: every report, then "go on" (status 0) or abort
    /// (status 2, then ABORT reason 6 code 1622).
    fn collect_reports(&self, epoch: u64, own: Option<Result<(), Error>>) -> Result<(), Fail> {
        let ep = self.endpoint();
        let mut failed: Option<Error> = match own {
            Some(Err(e)) => Some(e),
            _ => None,
        };
        for r in 1..self.size() {
            let b = recv_frame(
                ep,
                r,
                FrameType::Resume,
                epoch,
                "during resume (RESUME report expected)",
            )?;
            let res = Resume::decode_payload(&b)?;
            match (res.status, res.commit) {
                (ResumeStatus::Go | ResumeStatus::LoadedBuddy, None) => {}
                (ResumeStatus::CannotLoad, None) if epoch != 0 => {
                    if failed.is_none() {
                        failed = Some(Error::AbortedByPeer {
                            from: r,
                            reason: AbortReason::ResumeFailed.code(),
                            code: 0,
                            message: format!(
                                "rank {r} reported RESUME status 2 (cannot load its state of epoch {epoch})"
                            ),
                        });
                    }
                }
                (s, _) => {
                    return Err(
                        field_mismatch(FrameType::Resume, "status", 0, u64::from(s.code())).into(),
                    )
                }
            }
        }
        let status = if failed.is_some() {
            ResumeStatus::CannotLoad
        } else {
            ResumeStatus::Go
        };
        for r in 1..self.size() {
            ep.send_frame(
                r,
                epoch,
                &Payload::Resume(Resume {
                    status,
                    commit: None,
                }),
            )?;
        }
        match failed {
            None => Ok(()),
            Some(reason) => {
                let e = no_epoch(reason);
                self.abort(AbortReason::ResumeFailed, &e);
                Err(Fail::Quiet(e))
            }
        }
    }

    /// A rank other than 0, steps 6-7: report `status`, then wait for
    /// "go on" (Ok) or abort (this rank's own error, else H1622).
    fn report_and_wait(
        &self,
        epoch: u64,
        status: ResumeStatus,
        own: Option<Error>,
    ) -> Result<(), Fail> {
        let ep = self.endpoint();
        ep.send_frame(
            0,
            epoch,
            &Payload::Resume(Resume {
                status,
                commit: None,
            }),
        )?;
        let abort_of = |reason: Error| Fail::Quiet(own.clone().unwrap_or_else(|| no_epoch(reason)));
        let b = match recv_frame(
            ep,
            0,
            FrameType::Resume,
            epoch,
            "during resume (RESUME go on or abort expected)",
        ) {
            Ok(b) => b,
            Err(
                e @ Error::AbortedByPeer {
                    from: 0,
                    reason,
                    code,
                    ..
                },
            ) if reason == AbortReason::ResumeFailed.code() && code == HCode::H1622.number() => {
                return Err(abort_of(e));
            }
            Err(e) => return Err(e.into()),
        };
        let res = Resume::decode_payload(&b)?;
        match (res.status, res.commit) {
            (ResumeStatus::Go, None) => match own {
                None => Ok(()),
                Some(e) => Err(Fail::Quiet(e)),
            },
            (ResumeStatus::CannotLoad, None) => Err(abort_of(Error::AbortedByPeer {
                from: 0,
                reason: AbortReason::ResumeFailed.code(),
                code: HCode::H1622.number(),
                message: "rank 0 sent RESUME status 2: the resume failed".into(),
            })),
            (s, _) => {
                Err(field_mismatch(FrameType::Resume, "status", 0, u64::from(s.code())).into())
            }
        }
    }

    /// §10.2 step 4: this rank's own file of `epoch`, checked against its
    /// header and the COMMIT entry. A missing file is a local error
    /// ([`Error::Io`], `NotFound`).
    fn load_own(&self, epoch: u64, commit: &CommitFile<'_>) -> Result<Vec<u8>, Error> {
        let path = self.epoch_dir(epoch).join(rank_file_name(self.rank()));
        let file = std::fs::read(&path).map_err(|e| Error::io("reading the own rank file", &e))?;
        self.check_file(&file, epoch, self.rank(), commit)?;
        Ok(file)
    }

    /// The copy of `owner`'s file this rank holds for `epoch`, if it passes
    /// the checks of §9.2 against the COMMIT.
    fn load_buddy_copy(
        &self,
        epoch: u64,
        owner: u32,
        commit: &CommitFile<'_>,
    ) -> Result<Vec<u8>, Error> {
        let path = self.epoch_dir(epoch).join(buddy_file_name(owner));
        let file = std::fs::read(&path).map_err(|e| Error::io("reading a buddy copy", &e))?;
        self.check_file(&file, epoch, owner, commit)?;
        Ok(file)
    }

    /// §9.2: header checks and the state's SHA-256 (H1619, H1620), then the
    /// whole file against the COMMIT entry (H1620).
    fn check_file(
        &self,
        file: &[u8],
        epoch: u64,
        rank: u32,
        commit: &CommitFile<'_>,
    ) -> Result<(), Error> {
        verify_rank_file(file, &self.expect(epoch, rank))?;
        commit.check_entry(rank, file)
    }

    /// §10.2 step 5, the asking side: kind 2 chunks (checked as the own
    /// file would be) or kind 3. The outer error is a frame that does not
    /// fit; the inner one a copy that cannot be used.
    fn fetch(&self, epoch: u64, commit: &CommitFile<'_>) -> Result<Result<Vec<u8>, Error>, Error> {
        let (rank, size) = (self.rank(), self.size());
        let succ = (rank + 1) % size;
        let ep = self.endpoint();
        let mut asm = ChunkAssembler::new(CkptDataKind::Reply, rank);
        loop {
            let b = recv_frame(
                ep,
                succ,
                FrameType::CkptData,
                epoch,
                "during resume (CKPT_DATA kind 2 or 3 expected)",
            )?;
            let d = CkptData::decode(&b).map_err(payload_error(FrameType::CkptData))?;
            if d.kind == CkptDataKind::NoValidCopy && asm.total().is_none() {
                if d.owner != rank {
                    return Err(field_mismatch(
                        FrameType::CkptData,
                        "owner",
                        u64::from(rank),
                        u64::from(d.owner),
                    ));
                }
                return Ok(Err(Error::NoResumableEpoch {
                    reason: Box::new(Error::Io {
                        op: "fetching the rank file from the buddy (it has no valid copy)",
                        kind: std::io::ErrorKind::NotFound,
                    }),
                }));
            }
            asm.push(&d).map_err(chunk_error)?;
            if asm.is_complete() {
                break;
            }
        }
        let file = asm.into_bytes();
        Ok(self.check_file(&file, epoch, rank, commit).map(|()| file))
    }
}

/// Decodes the state of a checked rank file (H1619 when it does not decode
/// as `T`).
fn state_of<T: Checkpointable>(file: &[u8]) -> Result<T, Error> {
    decode_state(file.get(RANK_FILE_HEADER_LEN..).unwrap_or_default())
}

/// The error of a rank that cannot load: its own file's code when it has
/// one, else the fetched copy's, else H1622 (both copies missing).
fn worst(own: Error, fetched: Option<Error>) -> Error {
    if own.h_code().is_some() {
        return own;
    }
    match fetched {
        Some(f) if f.h_code().is_some() => f,
        _ => no_epoch(own),
    }
}

/// H1622 with `reason`, unless `reason` already is H1622.
fn no_epoch(reason: Error) -> Error {
    match reason {
        e @ Error::NoResumableEpoch { .. } => e,
        other => Error::NoResumableEpoch {
            reason: Box::new(other),
        },
    }
}

/// The COMMIT entry of `rank` must be `got` (H1620, §9.4 step 4).
fn check_entry_hash(c: &CommitFile<'_>, rank: u32, got: Sha256Digest) -> Result<(), Error> {
    match c.hash_of(rank) {
        Some(h) if *h == got => Ok(()),
        Some(h) => Err(Error::HashMismatch {
            what: HashSubject::CommitEntry,
            expected: *h,
            got,
        }),
        None => Err(Error::CommitSizeMismatch {
            expected: rank.saturating_add(1),
            got: c.size,
        }),
    }
}

/// §9.4 step 3, the buddy's side: `from`'s kind 0 chunks, streamed to
/// `rank-<from>.ckpt.buddy` in `edir` (temporary name, fsync, rename);
/// returns the SHA-256 of the whole copy.
fn receive_push(ep: &Endpoint, from: u32, e: u64, edir: &Path) -> Result<Sha256Digest, Error> {
    use std::io::Write;
    let name = buddy_file_name(from);
    let mut f = fsio::create(&edir.join(temp_name(&name)))?;
    let mut hasher = Sha256::new();
    let mut total: Option<u64> = None;
    let mut received = 0u64;
    loop {
        let b = recv_frame(
            ep,
            from,
            FrameType::CkptData,
            e,
            "during checkpoint (CKPT_DATA kind 0 expected)",
        )?;
        let d = CkptData::decode(&b).map_err(payload_error(FrameType::CkptData))?;
        check_chunk(&d, CkptDataKind::Push, from, total, received).map_err(chunk_error)?;
        total = Some(d.total);
        f.write_all(d.chunk)
            .map_err(|e| Error::io("writing a buddy copy", &e))?;
        hasher.update(d.chunk);
        received += d.chunk.len() as u64;
        if received == d.total {
            break;
        }
    }
    f.sync_all()
        .map_err(|e| Error::io("fsync of a buddy copy", &e))?;
    drop(f);
    fsio::commit_temp(edir, &name)?;
    Ok(Sha256Digest(hasher.finalize().into()))
}
