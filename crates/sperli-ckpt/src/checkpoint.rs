//! The collective `checkpoint(state)` (protocol §9.4, frames §7.7-§7.10).
//!
//! Each rank builds its rank file once, in one buffer ([`build_file`]);
//! that buffer is what is written, hashed and pushed. The steps overlap
//! where the order rules allow it:
//!
//! - the own file is written, fsynced and renamed on one helper thread
//!   while another computes its SHA-256 for CKPT_ACK;
//! - meanwhile the rank pushes the file to its buddy (every rank but the
//!   last, whose buddy is rank 0: on that connection the CKPT_ACK comes
//!   first, protocol §9.4 step 2 before step 3);
//! - the CKPT_ACK goes out as soon as the own file is renamed into place;
//! - the predecessor's copy is written and hashed chunk by chunk as it is
//!   taken from the transport, never read back.

use std::fs::File;
use std::thread::{self, ScopedJoinHandle};

use sperli_collective::Peers;
use sperli_tls::composite_sig;
use sperli_wire::abort::AbortReason;
use sperli_wire::ckpt_ack::CkptAck;
use sperli_wire::ckpt_begin::CkptBegin;
use sperli_wire::ckpt_chunks::chunks;
use sperli_wire::ckpt_data::{CkptData, CkptDataKind};
use sperli_wire::codec::Codec;
use sperli_wire::commit_file::{assemble, decode_file, signed_message, CommitFile};
use sperli_wire::error::{DecodeError, Error, HashSubject, LocalError, UsageError};
use sperli_wire::frame_type::FrameType;
use sperli_wire::limits::{CONTEXT_COMMIT, RANK_FILE_HEADER_LEN, SECRET_KEY_LEN};
use sperli_wire::payload::Payload;
use sperli_wire::rank_file::RankFileHeader;
use sperli_wire::{JobId, Reduction, Sha256Digest};

use crate::checkpointer::{payload_error, Checkpointer};
use crate::fault::kill_point;
use crate::fsio::Durable;
use crate::keys::JobKeys;
use crate::state::{encode_state_into, Checkpointable};
use crate::store::{IncomingCopy, Store};

/// Builds the rank file of `state` in `buf` (protocol §9.2): the 80-byte
/// header, then the state bytes; the header's SHA-256 is the state's.
/// `buf` keeps its memory between checkpoints.
pub(crate) fn build_file<T: Checkpointable>(
    buf: &mut Vec<u8>,
    job_id: JobId,
    epoch: u64,
    rank: u32,
    size: u32,
    state: &T,
) {
    buf.clear();
    buf.resize(RANK_FILE_HEADER_LEN, 0);
    encode_state_into(state, buf);
    let (head, body) = buf.split_at_mut(RANK_FILE_HEADER_LEN);
    let header = RankFileHeader {
        job_id,
        epoch,
        rank,
        size,
        payload_length: body.len() as u64,
        payload_sha256: Sha256Digest::of(body),
    };
    head.copy_from_slice(&header.to_vec());
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

/// The COMMIT writer was neither taken nor left: cannot happen; an error
/// rather than a panic all the same.
fn unreachable_commit() -> Result<Vec<u8>, Error> {
    Err(Error::Local(LocalError::ThreadPanicked {
        op: "writing the COMMIT",
    }))
}

/// Step 4 on rank 0: the COMMIT of `hashes` (rank order), signed with
/// the job key and written "the same way (temporary name, fsync,
/// rename)"; the directory is fsynced at the end.
fn write_commit(
    store: &Store,
    keys: &JobKeys,
    e: u64,
    hashes: &[Sha256Digest],
) -> Result<Vec<u8>, Error> {
    let msg = signed_message(keys.job_id(), e, hashes);
    let sk = keys
        .secret_key()
        .ok_or(Error::JobDescription(DecodeError::Mismatch {
            field: "job_secret_key length (rank 0)",
            expected: SECRET_KEY_LEN as u64,
            got: 0,
        }))?;
    let sig = composite_sig::sign(sk, &msg, CONTEXT_COMMIT).map_err(|_| {
        Error::Local(LocalError::Random {
            op: "signing the COMMIT file",
        })
    })?;
    let commit = assemble(&msg, &sig.0);
    store.write_commit(e, &commit, Durable::WithDir)?;
    Ok(commit)
}

/// The result of a helper thread, or [`LocalError::ThreadPanicked`].
fn joined<T>(h: ScopedJoinHandle<'_, T>, op: &'static str) -> Result<T, Error> {
    h.join()
        .map_err(|_| Error::Local(LocalError::ThreadPanicked { op }))
}

/// The own file of this checkpoint while its helper threads run: the
/// write (temporary name, fsync, rename) and the whole-file SHA-256 for
/// CKPT_ACK.
struct OwnFile<'s> {
    written: Option<ScopedJoinHandle<'s, Result<(), Error>>>,
    hashed: Option<ScopedJoinHandle<'s, Sha256Digest>>,
}

impl OwnFile<'_> {
    /// Waits for both helpers: the file is in place and durable; returns
    /// its SHA-256. Called once.
    fn wait(&mut self) -> Result<Sha256Digest, Error> {
        const OP: &str = "writing and hashing the own rank file";
        let (Some(written), Some(hashed)) = (self.written.take(), self.hashed.take()) else {
            return Err(Error::Local(LocalError::ThreadPanicked { op: OP }));
        };
        let hash = joined(hashed, OP)?;
        joined(written, OP)??;
        Ok(hash)
    }
}

impl<L: Peers> Checkpointer<L> {
    /// The collective `checkpoint(state)` (protocol §9.4). Every rank calls
    /// it with its own state; it returns the new epoch once this rank has
    /// the verified COMMIT of it.
    ///
    /// Errors: [`Error::OpenHandles`] (H1624) on every rank, without ABORT,
    /// when any rank has an open send or receive handle or an open
    /// non-blocking collective request (counted with the sends: it sends
    /// and receives; checked together, see the type's docs). Any other failure (a frame that does not fit:
    /// H1610; a COMMIT that fails: H1621/H1623; a hash that does not match:
    /// H1620; a local error) sends ABORT reason 5 and ends the job; no
    /// COMMIT of an epoch whose rank files are incomplete is ever written.
    pub fn checkpoint<T: Checkpointable>(&mut self, state: &T) -> Result<u64, Error> {
        // "before step 1 every rank contributes its number of open send and
        // receive handles to an allreduce (element type u64, sum)" (§9.4)
        let (sends, recvs) = self.link().open_handles();
        // A non-blocking collective request is an open send (and receive):
        // counted once, with the sends.
        let sends = sends + self.comm.open_requests();
        let sum = self.comm.allreduce(&[sends, recvs], Reduction::Sum)?;
        let (s, r) = (
            sum.first().copied().unwrap_or(0),
            sum.get(1).copied().unwrap_or(0),
        );
        if s != 0 || r != 0 {
            return Err(Error::OpenHandles { sends: s, recvs: r });
        }
        // "The new epoch e is the last committed or resumed epoch + 1"
        let e = self
            .epoch
            .checked_add(1)
            .ok_or(UsageError::EpochsExhausted)?;
        match self.checkpoint_steps(e, state) {
            Ok(()) => {
                self.epoch = e;
                // This rank holds the verified COMMIT of e: its REPORT names
                // it (feature bit 5, protocol §18.4).
                self.link().set_best_commit(e);
                Ok(e)
            }
            Err(err) => {
                // "Any other failure of a checkpoint ... makes the rank send
                // ABORT reason 5 with the error's code"
                self.abort(AbortReason::CheckpointFailed, &err);
                Err(err)
            }
        }
    }

    fn checkpoint_steps<T: Checkpointable>(&mut self, e: u64, state: &T) -> Result<(), Error> {
        let (rank, size) = (self.rank(), self.size());
        let inc = self.keys.incarnation();
        let kill = |point| kill_point(point, rank, inc, e);
        // Steps 0 and 1.
        if rank == 0 {
            // "Before step 1, rank 0 removes an old COMMIT of epoch e"
            self.store.begin_epoch(e)?;
            kill("step0");
            for r in 1..size {
                self.link()
                    .send_ckpt(r, e, &Payload::CkptBegin(CkptBegin { size }))?;
                kill("step1");
            }
        } else {
            let b = self.recv_frame(
                0,
                FrameType::CkptBegin,
                e,
                "during checkpoint (CKPT_BEGIN expected)",
            )?;
            let begin = CkptBegin::decode(&b).map_err(payload_error(FrameType::CkptBegin))?;
            // "a receiver rejects a size other than its own" (§7.7)
            begin
                .check_size(size)
                .map_err(payload_error(FrameType::CkptBegin))?;
            kill("step1");
            // "Other ranks should likewise remove their COMMIT copy of
            // epoch e when they receive CKPT_BEGIN"
            self.store.begin_epoch(e)?;
        }
        // Step 2: the rank file, built once in the kept buffer.
        let mut file = std::mem::take(&mut self.file_buf);
        build_file(&mut file, self.keys.job_id(), e, rank, size, state);
        let r = self.exchange(e, &file);
        self.file_buf = file;
        r
    }

    /// Steps 2-5 with the file built: write, ACK, push, receive the
    /// predecessor's copy, COMMIT, the removal of old epochs.
    fn exchange(&self, e: u64, file: &[u8]) -> Result<(), Error> {
        let (rank, size) = (self.rank(), self.size());
        let store = &self.store;
        thread::scope(|s| {
            let mut own = OwnFile {
                written: Some(s.spawn(move || store.write_own(e, rank, file))),
                hashed: Some(s.spawn(move || Sha256Digest::of(file))),
            };
            let commit_copy = if rank == 0 {
                self.steps_rank0(s, e, file, &mut own)?;
                None
            } else {
                Some(self.steps_other(s, e, file, &mut own)?)
            };
            // Step 5: "every rank deletes every older epoch directory of
            // the job"; later ones are left untouched. It runs while the
            // epoch's files become durable, all at once (the journal
            // commits them together): every rename into the epoch
            // directory (own file, buddy copy, rank 0's COMMIT) and the
            // COMMIT copy's entry by one fsync of the directory, the COMMIT
            // copy's bytes by its own fsync, the epoch directory's entry by
            // an fsync of the job directory. None of them runs beside the
            // own file's fsync, which the CKPT_ACK waits for.
            kill_point("step5", rank, self.keys.incarnation(), e);
            let pred = (size > 1).then(|| (rank + size - 1) % size);
            let cleanup = s.spawn(move || store.remove_below(e, rank, pred));
            let copy_synced = commit_copy.map(|f| {
                s.spawn(move || {
                    f.sync_all()
                        .map_err(|e| Error::io("fsync of a COMMIT copy", &e))
                })
            });
            let tree = s.spawn(move || store.sync_tree());
            store.sync_epoch(e)?;
            joined(tree, "fsync of the checkpoint directories")??;
            if let Some(h) = copy_synced {
                joined(h, "fsync of a COMMIT copy")??;
            }
            joined(cleanup, "removing old epochs")
        })
    }

    /// Step 3, the sending side: `file` as kind 0 chunks to the buddy.
    fn push(&self, e: u64, file: &[u8]) -> Result<(), Error> {
        let (rank, size) = (self.rank(), self.size());
        let inc = self.keys.incarnation();
        let buddy = (rank + 1) % size;
        for c in chunks(CkptDataKind::Push, rank, file) {
            self.link().send_ckpt(buddy, e, &Payload::CkptData(c))?;
            kill_point("step3", rank, inc, e);
        }
        Ok(())
    }

    /// The next push chunk of the predecessor's copy, written and hashed
    /// (§9.4 step 3, the buddy's side); true once the copy is complete.
    fn receive_chunk(&self, e: u64, pred: u32, copy: &mut IncomingCopy) -> Result<bool, Error> {
        let b = self.recv_frame(
            pred,
            FrameType::CkptData,
            e,
            "during checkpoint (CKPT_DATA kind 0 expected)",
        )?;
        let d = CkptData::decode(&b).map_err(payload_error(FrameType::CkptData))?;
        copy.push(&d)
    }

    /// Rank 0: push, every ACK, the signed COMMIT, and the copy of the last
    /// rank's file (which comes after that rank's ACK). The COMMIT is
    /// signed, written and fsynced on a helper thread while the copy's
    /// first chunks are taken; it goes out as soon as it is in place.
    fn steps_rank0<'s>(
        &'s self,
        s: &'s thread::Scope<'s, '_>,
        e: u64,
        file: &'s [u8],
        own: &mut OwnFile<'s>,
    ) -> Result<(), Error> {
        let size = self.size();
        if size > 1 {
            self.push(e, file)?;
        }
        // Step 4: "When rank 0 has every ACK, it writes COMMIT".
        let mut hashes = Vec::with_capacity(size as usize);
        hashes.push(Sha256Digest([0; 32]));
        for r in 1..size {
            let b = self.recv_frame(
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
        // "rank 0 records its own hash directly"
        hashes[0] = own.wait()?;
        kill_point("step2", 0, self.keys.incarnation(), e);
        let (store, keys) = (&self.store, &self.keys);
        let mut writing = Some(s.spawn(move || write_commit(store, keys, e, &hashes)));
        let mut sent: Option<Vec<u8>> = None;
        if size > 1 {
            let pred = size - 1;
            let mut copy = IncomingCopy::create(&self.store.epoch_dir(e), pred)?;
            loop {
                let complete = self.receive_chunk(e, pred, &mut copy)?;
                if let Some(h) = writing.take_if(|h| h.is_finished()) {
                    sent = Some(self.send_commit(e, joined(h, "writing the COMMIT")??)?);
                }
                if complete {
                    break;
                }
            }
            let got = copy.digest();
            let stored = s.spawn(move || copy.finish());
            let commit = match (sent, writing) {
                (Some(c), _) => c,
                (None, Some(h)) => self.send_commit(e, joined(h, "writing the COMMIT")??)?,
                (None, None) => unreachable_commit()?,
            };
            check_entry_hash(&decode_file(&commit)?, pred, got)?;
            joined(stored, "storing a buddy copy")??;
        } else if let Some(h) = writing {
            self.send_commit(e, joined(h, "writing the COMMIT")??)?;
        }
        Ok(())
    }

    /// Step 4 on rank 0: CKPT_COMMIT to every other rank; returns the
    /// COMMIT.
    fn send_commit(&self, e: u64, commit: Vec<u8>) -> Result<Vec<u8>, Error> {
        kill_point("step4-commit-written", 0, self.keys.incarnation(), e);
        let cf = decode_file(&commit)?;
        for r in 1..self.size() {
            self.link()
                .send_ckpt(r, e, &Payload::CkptCommit(cf.clone()))?;
        }
        Ok(commit)
    }

    /// A rank other than 0: push (unless it is the last rank), the
    /// CKPT_ACK once the own file is in place (then the last rank's push),
    /// the predecessor's copy, the COMMIT. Returns the COMMIT copy, written
    /// but not yet fsynced.
    fn steps_other<'s>(
        &'s self,
        s: &'s thread::Scope<'s, '_>,
        e: u64,
        file: &'s [u8],
        own: &mut OwnFile<'s>,
    ) -> Result<File, Error> {
        let (rank, size) = (self.rank(), self.size());
        let inc = self.keys.incarnation();
        let last = rank == size - 1;
        let pred = rank - 1;
        // The push overlaps the own file's write and fsync: allowed on
        // every connection but the last rank's to rank 0, where the order
        // of §9.4 (ACK in step 2, push in step 3) is kept.
        if !last {
            self.push(e, file)?;
        }
        // "renames it to rank-<n>.ckpt and sends CKPT_ACK with the file's
        // SHA-256 to rank 0": never later than that, whatever the
        // predecessor does (rank 0 may wait for every ACK before it pushes).
        let own_hash = own.wait()?;
        kill_point("step2", rank, inc, e);
        self.link()
            .send_ckpt(0, e, &Payload::CkptAck(CkptAck { sha256: own_hash }))?;
        if last {
            self.push(e, file)?;
        }
        // The predecessor's copy: its chunks wait in the transport until
        // now, then each is written and hashed as it is taken. Its fsync
        // and rename run while this rank waits for the COMMIT.
        let mut copy = IncomingCopy::create(&self.store.epoch_dir(e), pred)?;
        while !self.receive_chunk(e, pred, &mut copy)? {}
        let got = copy.digest();
        let stored = s.spawn(move || copy.finish());
        let b = self.recv_frame(
            0,
            FrameType::CkptCommit,
            e,
            "during checkpoint (CKPT_COMMIT expected)",
        )?;
        kill_point("step4", rank, inc, e);
        // "Every rank verifies the COMMIT (9.3), checks that it lists the
        // SHA-256 of its own file and of the buddy copy it holds (waiting
        // for the copy to be complete if needed), and stores a copy as
        // COMMIT."
        let cf = self.verify_commit(&b, e)?;
        check_entry_hash(&cf, rank, own_hash)?;
        check_entry_hash(&cf, pred, got)?;
        joined(stored, "storing a buddy copy")??;
        self.store.create_commit_copy(e, &b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_job::TestJob;
    use sperli_collective::fake::FakePeers;
    use sperli_wire::ckpt_chunks::ChunkError;
    use sperli_wire::ckpt_path::{buddy_file_name, rank_file_name, COMMIT_FILE_NAME};
    use sperli_wire::error::FrameError;
    use sperli_wire::rank_file::{build_rank_file, verify_rank_file, RankFileExpect};
    use sperli_wire::HCode;

    fn state(r: u32, e: u64) -> Vec<u64> {
        (0..2000)
            .map(|i| u64::from(r) << 32 | e << 16 | i)
            .collect()
    }

    /// An open non-blocking collective request fails a checkpoint with
    /// H1624 on every rank, like an open send (protocol §9.4); once the
    /// requests are waited for, the next checkpoint works.
    #[test]
    fn an_open_collective_request_fails_the_checkpoint_with_h1624() {
        for size in [1, 3] {
            let job = TestJob::new("h1624-coll", size);
            job.run(1, |r, ck| {
                let req = ck
                    .comm()
                    .iallreduce(&[u64::from(r)], Reduction::Sum)
                    .unwrap();
                let first = ck.checkpoint(&state(r, 1));
                assert_eq!(
                    first,
                    Err(Error::OpenHandles {
                        sends: u64::from(size),
                        recvs: 0
                    })
                );
                let want = u64::from(size * (size - 1) / 2);
                assert_eq!(req.wait().unwrap(), vec![want]);
                assert_eq!(ck.checkpoint(&state(r, 1)).unwrap(), 1);
            });
        }
    }

    #[test]
    fn the_built_file_verifies_and_the_buffer_is_reused() {
        let job = JobId([7; 16]);
        let mut buf = Vec::new();
        build_file(&mut buf, job, 3, 1, 4, &vec![1u8, 2, 3]);
        let expect = RankFileExpect {
            job_id: job,
            epoch: 3,
            rank: 1,
            size: 4,
        };
        assert!(verify_rank_file(&buf, &expect).is_ok());
        let cap = buf.capacity();
        build_file(&mut buf, job, 3, 1, 4, &vec![9u8]);
        assert!(verify_rank_file(&buf, &expect).is_ok());
        assert_eq!(buf.capacity(), cap, "the buffer keeps its memory");
    }

    /// Every rank's own file, the copy its buddy holds and the COMMIT every
    /// rank stored agree, for sizes 1 to 4 and three epochs (only the last
    /// two are kept).
    #[test]
    fn files_copies_and_commits_agree_at_every_size() {
        for size in 1..=4 {
            let job = TestJob::new("agree", size);
            job.run(1, |r, ck| {
                for e in 1..=3 {
                    assert_eq!(ck.checkpoint(&state(r, e)).unwrap(), e);
                }
            });
            for r in 0..size {
                for e in [2, 3] {
                    let d = job.edir(r, e);
                    let own = std::fs::read(d.join(rank_file_name(r))).unwrap();
                    let expect = RankFileExpect {
                        job_id: job.job,
                        epoch: e,
                        rank: r,
                        size,
                    };
                    verify_rank_file(&own, &expect).unwrap();
                    let commit = std::fs::read(d.join(COMMIT_FILE_NAME)).unwrap();
                    let c = decode_file(&commit).unwrap();
                    assert_eq!(c.hash_of(r), Some(&Sha256Digest::of(&own)));
                    let buddy = job.edir((r + 1) % size, e).join(buddy_file_name(r));
                    if size > 1 {
                        assert_eq!(std::fs::read(buddy).unwrap(), own, "size {size} rank {r}");
                    } else {
                        assert!(!buddy.exists());
                    }
                }
                assert!(!job.edir(r, 1).exists(), "epoch 1 was removed");
            }
        }
    }

    /// The files recycled from epoch e - 2 are written over by epoch e + 1,
    /// whether the new state is shorter or longer than the old one.
    #[test]
    fn recycled_files_are_written_over_at_any_length() {
        let job = TestJob::new("recycle", 3);
        let lens = [3000usize, 3000, 3000, 10, 5000, 7];
        job.run(1, |r, ck| {
            for (i, &n) in lens.iter().enumerate() {
                let e = i as u64 + 1;
                let st = vec![u64::from(r) + e; n];
                assert_eq!(ck.checkpoint(&st).unwrap(), e);
                let own = std::fs::read(ck.epoch_dir(e).join(rank_file_name(r))).unwrap();
                let expect = RankFileExpect {
                    job_id: ck.keys().job_id(),
                    epoch: e,
                    rank: r,
                    size: 3,
                };
                let state = verify_rank_file(&own, &expect).unwrap();
                assert_eq!(crate::decode_state::<Vec<u64>>(state).unwrap(), st);
            }
        });
        for r in 0..3 {
            let pred = (r + 2) % 3;
            for e in [5, 6] {
                let copy = std::fs::read(job.edir(r, e).join(buddy_file_name(pred))).unwrap();
                let own = std::fs::read(job.edir(pred, e).join(rank_file_name(pred))).unwrap();
                assert_eq!(copy, own);
            }
        }
    }

    /// A rank 0 that follows §9.4 to the letter (every ACK first, then its
    /// push, then the COMMIT) still gets a committed epoch: no rank waits
    /// for its predecessor's push before it sends its ACK.
    #[test]
    fn a_rank_0_that_pushes_after_every_ack_still_commits() {
        let job = TestJob::new("late-push", 3);
        let key = job.key.clone();
        let id = job.job;
        let out = job.run(1, |r, ck| {
            if r != 0 {
                return ck.checkpoint(&state(r, 1));
            }
            ck.comm().allreduce(&[0u64, 0], Reduction::Sum).unwrap();
            let link: &FakePeers = ck.comm().link();
            for r in 1..3 {
                link.send_ckpt(r, 1, &Payload::CkptBegin(CkptBegin { size: 3 }))
                    .unwrap();
            }
            let mut hashes = vec![Sha256Digest([0; 32]); 3];
            for r in 1..3 {
                let f = link.recv_ckpt(r).unwrap();
                hashes[r as usize] = CkptAck::decode(&f.payload).unwrap().sha256;
            }
            let file = build_rank_file(id, 1, 0, 3, &crate::encode_state(&state(0, 1)));
            hashes[0] = Sha256Digest::of(&file);
            for c in chunks(CkptDataKind::Push, 0, &file) {
                link.send_ckpt(1, 1, &Payload::CkptData(c)).unwrap();
            }
            let msg = signed_message(id, 1, &hashes);
            let sig = composite_sig::sign(&key, &msg, CONTEXT_COMMIT).unwrap();
            let commit = assemble(&msg, &sig.0);
            for r in 1..3 {
                link.send_ckpt(r, 1, &Payload::CkptCommit(decode_file(&commit).unwrap()))
                    .unwrap();
            }
            // Rank 2's push, after its ACK.
            let mut got = 0;
            while got < file.len() {
                let f = link.recv_ckpt(2).unwrap();
                got += CkptData::decode(&f.payload).unwrap().chunk.len();
            }
            Ok(1)
        });
        assert_eq!(out, vec![Ok(1), Ok(1), Ok(1)]);
    }

    /// A reply chunk (kind 2) where the predecessor's push is due is
    /// rejected as a chunk of the wrong kind (H1610, ABORT reason 5) and
    /// nothing is committed.
    #[test]
    fn a_chunk_of_the_wrong_kind_is_rejected_and_nothing_commits() {
        let job = TestJob::new("wrong-kind", 2);
        let out = job.run(1, |r, ck| {
            if r == 1 {
                return ck.checkpoint(&state(r, 1));
            }
            ck.comm().allreduce(&[0u64, 0], Reduction::Sum).unwrap();
            let link: &FakePeers = ck.comm().link();
            link.send_ckpt(1, 1, &Payload::CkptBegin(CkptBegin { size: 2 }))
                .unwrap();
            let forged = CkptData {
                kind: CkptDataKind::Reply,
                owner: 0,
                offset: 0,
                total: 10,
                chunk: &[0; 10],
            };
            link.send_ckpt(1, 1, &Payload::CkptData(forged)).unwrap();
            // Rank 1's ACK and push, then its ABORT.
            loop {
                link.recv_ckpt(1)?;
            }
        });
        match &out[1] {
            Err(Error::FrameRejected(FrameError::Chunk(ChunkError::Kind { expected, got }))) => {
                assert_eq!((*expected, *got), (CkptDataKind::Push, CkptDataKind::Reply));
            }
            other => panic!("rank 1: {other:?}"),
        }
        match &out[0] {
            Err(Error::AbortedByPeer {
                from: 1,
                reason,
                code,
                ..
            }) => {
                assert_eq!(*reason, AbortReason::CheckpointFailed.code());
                assert_eq!(*code, HCode::H1610.number());
            }
            other => panic!("rank 0: {other:?}"),
        }
        assert!(!job.edir(1, 1).join(COMMIT_FILE_NAME).exists());
        assert!(!job.edir(1, 1).join(buddy_file_name(0)).exists());
    }
}
