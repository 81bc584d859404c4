//! One round of the resume exchange on every rank (protocol §10.2 steps
//! 3-5): verify the chosen COMMIT, load the own file and check it twice,
//! and the buddy fetch (CKPT_DATA kinds 1-4, §7.8). The exchange around
//! the rounds (offers, choices, reports, the fallback) is
//! [`crate::resume`].

use sperli_collective::Peers;
use sperli_wire::ckpt_chunks::{chunks, ChunkAssembler};
use sperli_wire::ckpt_data::{CkptData, CkptDataKind};
use sperli_wire::codec::Codec;
use sperli_wire::commit_file::CommitFile;
use sperli_wire::error::{Error, FrameError, ResumeFailure};
use sperli_wire::frame_type::FrameType;
use sperli_wire::limits::RANK_FILE_HEADER_LEN;
use sperli_wire::payload::Payload;
use sperli_wire::rank_file::verify_rank_file;

use crate::checkpointer::{field_mismatch, payload_error, Checkpointer};
use crate::fault::kill_point;
use crate::state::{decode_state, Checkpointable};

/// What a rank that cannot load its own file got from its buddy (§10.2
/// step 5).
enum Fetched {
    /// Kind 2 chunks of a file that passed the checks of §9.2.
    File(Vec<u8>),
    /// Kind 3: the buddy has no valid copy.
    NoCopy,
    /// Kind 2 chunks of a file that failed the checks.
    Bad(Error),
}

/// A loaded state, and whether it came from the buddy's copy.
pub(crate) type Loaded<T> = Result<(T, bool), ResumeFailure>;

/// Decodes the state of a checked rank file (H1619 when it does not decode
/// as `T`).
fn state_of<T: Checkpointable>(file: &[u8]) -> Result<T, Error> {
    decode_state(file.get(RANK_FILE_HEADER_LEN..).unwrap_or_default())
}

impl<L: Peers> Checkpointer<L> {
    /// Steps 3-5 for `epoch`: verify the COMMIT, load the own file, the
    /// buddy fetch. The outer error is a frame that does not fit (or a
    /// transport error); the inner one says why this rank cannot load.
    pub(crate) fn load_round<T: Checkpointable>(
        &self,
        epoch: u64,
        commit_bytes: &[u8],
    ) -> Result<Loaded<T>, Error> {
        let (rank, size) = (self.rank(), self.size());
        // Step 3: "Each rank verifies the COMMIT as in 9.3 (a failure makes
        // it answer status 2)."
        let commit = self.verify_commit(commit_bytes, epoch);
        kill_point("resume", rank, self.keys.incarnation(), epoch);
        // Step 4: the own file, "the SHA-256 twice: against the file's
        // header and against the COMMIT entry n".
        let own = match &commit {
            Ok(c) => self
                .store
                .read_own(epoch, rank)
                .and_then(|f| self.check_file(&f, epoch, rank, c).map(|()| f)),
            Err(e) => Err(e.clone()),
        };
        // Step 5: "every rank then sends exactly one CKPT_DATA frame".
        let mut fetched = None;
        if size > 1 {
            let succ = (rank + 1) % size;
            let need = own.is_err() && commit.is_ok();
            let signal = if need {
                CkptData::request(rank)
            } else {
                CkptData::nothing_needed(rank)
            };
            self.link()
                .send_ckpt(succ, epoch, &Payload::CkptData(signal))?;
            self.serve(epoch, commit.as_ref().ok())?;
            if let (true, Ok(c)) = (need, &commit) {
                fetched = Some(self.fetch(epoch, c)?);
            }
        }
        if commit.is_ok() {
            // Keep a copy of the COMMIT if this rank had none (best effort).
            let _ = self.store.keep_commit(epoch, commit_bytes);
        }
        Ok(match own {
            Ok(file) => state_of::<T>(&file)
                .map(|s| (s, false))
                .map_err(ResumeFailure::Own),
            Err(own_err) => match fetched {
                Some(Fetched::File(file)) => {
                    // "a rank should store a valid fetched file as its
                    // rank-<n>.ckpt" (best effort).
                    let _ = self.store.restore_own(epoch, rank, &file);
                    state_of::<T>(&file)
                        .map(|s| (s, true))
                        .map_err(ResumeFailure::Own)
                }
                other => Err(cannot_load(own_err, other, (rank + 1) % size, epoch)),
            },
        })
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

    /// Step 5, the buddy's side: the predecessor's kind 4 or kind 1; a
    /// request is answered with kind 2 chunks of its copy, or kind 3 when
    /// this rank has no copy that passes §9.2 against the COMMIT.
    fn serve(&self, epoch: u64, commit: Option<&CommitFile<'_>>) -> Result<(), Error> {
        let (rank, size) = (self.rank(), self.size());
        let pred = (rank + size - 1) % size;
        let b = self.recv_frame(
            pred,
            FrameType::CkptData,
            epoch,
            "during resume (CKPT_DATA kind 1 or 4 expected)",
        )?;
        let d = CkptData::decode(&b).map_err(payload_error(FrameType::CkptData))?;
        // §7.8: the owner of kinds 1 and 4 is the sender, r.
        if d.owner != pred {
            return Err(field_mismatch(
                FrameType::CkptData,
                "owner",
                u64::from(pred),
                u64::from(d.owner),
            ));
        }
        match d.kind {
            CkptDataKind::NothingNeeded => Ok(()),
            CkptDataKind::Request => {
                let copy = commit.and_then(|c| {
                    let f = self.store.read_buddy_copy(epoch, pred).ok()?;
                    self.check_file(&f, epoch, pred, c).ok().map(|()| f)
                });
                match copy {
                    Some(file) => {
                        for c in chunks(CkptDataKind::Reply, pred, &file) {
                            self.link().send_ckpt(pred, epoch, &Payload::CkptData(c))?;
                        }
                        Ok(())
                    }
                    None => self.link().send_ckpt(
                        pred,
                        epoch,
                        &Payload::CkptData(CkptData::no_valid_copy(pred)),
                    ),
                }
            }
            other => Err(field_mismatch(
                FrameType::CkptData,
                "kind",
                u64::from(CkptDataKind::Request.code()),
                u64::from(other.code()),
            )),
        }
    }

    /// Step 5, the asking side: kind 2 chunks (checked as the own file
    /// would be) or kind 3.
    fn fetch(&self, epoch: u64, commit: &CommitFile<'_>) -> Result<Fetched, Error> {
        let (rank, size) = (self.rank(), self.size());
        let succ = (rank + 1) % size;
        let mut asm = ChunkAssembler::new(CkptDataKind::Reply, rank);
        loop {
            let b = self.recv_frame(
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
                return Ok(Fetched::NoCopy);
            }
            asm.push(&d)
                .map_err(|e| Error::FrameRejected(FrameError::Chunk(e)))?;
            if asm.is_complete() {
                break;
            }
        }
        let file = asm.into_bytes();
        Ok(match self.check_file(&file, epoch, rank, commit) {
            Ok(()) => Fetched::File(file),
            Err(e) => Fetched::Bad(e),
        })
    }
}

/// Why a rank cannot load (protocol §10.2 step 7: the message names "the
/// first failure that rank knows of"): the own file's error when it has a
/// code (or the COMMIT's), else the fetched copy's, else "missing, and the
/// buddy has none".
fn cannot_load(own: Error, fetched: Option<Fetched>, buddy: u32, epoch: u64) -> ResumeFailure {
    if own.h_code().is_some() {
        return ResumeFailure::Own(own);
    }
    match fetched {
        Some(Fetched::Bad(e)) if e.h_code().is_some() => ResumeFailure::Own(e),
        Some(Fetched::NoCopy) => ResumeFailure::NoBuddyCopy { buddy, epoch },
        _ => ResumeFailure::Own(own),
    }
}
