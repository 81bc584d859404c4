//! docs/reliability.md: a hostile rank inside a checkpoint and a
//! resume, and the checkpoint directory full or read-only.
//!
//! The hostile rank is an `Endpoint` with a valid certificate and token
//! (its HELLO is the real one) whose program forges the checkpoint frames
//! with `Endpoint::send_frame`; the other ranks run the real
//! `Checkpointer`. Every test runs under a watchdog.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use sperli_ckpt::{Checkpointer, JobKeys};
use sperli_collective::{Comm, Reduction};
use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, ErrorMode, Settings};
use sperli_wire::ckpt_ack::CkptAck;
use sperli_wire::ckpt_begin::CkptBegin;
use sperli_wire::ckpt_chunks::{chunks, ChunkError};
use sperli_wire::ckpt_data::{CkptData, CkptDataKind};
use sperli_wire::ckpt_path::{buddy_file_name, rank_file_name};
use sperli_wire::codec::Codec;
use sperli_wire::commit_file::{assemble, signed_message};
use sperli_wire::error::FrameError;
use sperli_wire::ids::Sha256Digest;
use sperli_wire::payload::Payload;
use sperli_wire::resume::{Resume, ResumeStatus};
use sperli_wire::{Error, FrameType, HCode};

use super::{edir, first_run, rank_dir, restart, scratch, state, State};

/// Runs `f` on a thread and returns what it returns (re-raising its
/// panic). If it takes longer than `limit`, the whole test process ends
/// (status 101, like a failed test): a hung rank thread cannot be stopped,
/// and left running it would hold its ports and sockets into the tests
/// that follow.
fn with_deadline<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            let _ = h.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!(),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            eprintln!(
                "test {:?} did not finish within {limit:?}: ending the test process",
                std::thread::current().name()
            );
            std::process::exit(101);
        }
    }
}

fn settings() -> Settings {
    Settings {
        silence: Duration::from_secs(3),
        setup_window: Duration::from_secs(10),
        // The ranks are threads of this test process: errors are returned.
        errors: ErrorMode::Return,
        ..Settings::default()
    }
}

/// Runs the real ranks (every rank but `hostile`) with a Checkpointer and
/// `real`, and rank `hostile` as a bare Endpoint running `bad`. Returns the
/// real ranks' results (index = rank; the hostile rank's slot is None) and
/// what `bad` returned. The hostile rank's endpoint lives until every real
/// rank has its result, so its close never overtakes the ABORTs the real
/// ranks exchange (an event, not a sleep).
fn mixed<R: Send, H: Send>(
    plan: &JobPlan,
    root: &Path,
    hostile: u32,
    real: impl Fn(u32, &mut Checkpointer<&Endpoint>) -> R + Sync,
    bad: impl FnOnce(&Endpoint) -> H + Send,
) -> (Vec<Option<R>>, H) {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..plan.size())
            .filter(|r| *r != hostile)
            .map(|r| {
                let desc = plan.description(r);
                let real = &real;
                let dir = rank_dir(root, r);
                let done = done_tx.clone();
                let listener = plan.take_listener(r);
                s.spawn(move || {
                    let s = Settings {
                        listener,
                        ..settings()
                    };
                    let ep = Endpoint::start(&desc, s).expect("start");
                    let keys = JobKeys::from_description(&desc).unwrap();
                    let mut ck = Checkpointer::new(Comm::new(&ep), dir, keys).unwrap();
                    let out = real(r, &mut ck);
                    let _ = done.send(());
                    drop(ck);
                    let _ = ep.finish();
                    (r, out)
                })
            })
            .collect();
        drop(done_tx);
        let real_ranks = plan.size() - 1;
        let desc = plan.description(hostile);
        let listener = plan.take_listener(hostile);
        let h = s.spawn(move || {
            let s = Settings {
                listener,
                ..settings()
            };
            let ep = Endpoint::start(&desc, s).expect("start hostile");
            let out = bad(&ep);
            // Every real rank has its result (or its thread ended early).
            for _ in 0..real_ranks {
                if done_rx.recv().is_err() {
                    break;
                }
            }
            drop(ep);
            out
        });
        let mut res: Vec<Option<R>> = (0..plan.size()).map(|_| None).collect();
        for j in handles {
            let (r, out) = j.join().unwrap();
            res[r as usize] = Some(out);
        }
        (res, h.join().unwrap())
    })
}

fn h(r: &Result<u64, Error>) -> Option<HCode> {
    r.as_ref().err().and_then(Error::h_code)
}

/// Waits for the job to end on the hostile rank (an ABORT comes back);
/// [`mixed`] keeps its endpoint until the real ranks have their results.
fn wait_for_end(ep: &Endpoint) -> Error {
    ep.recv(1, 4242).unwrap_err()
}

/// Hostile rank 0 runs a checkpoint of epoch 1 up to the push to its
/// buddy (rank 1), which `push` forges, then `commit` (None: no COMMIT).
fn hostile_root(
    push: impl Fn(&Endpoint, &[u8]) + Send,
    commit: Option<Vec<u8>>,
) -> (Vec<Option<Result<u64, Error>>>, PathBuf, JobPlan) {
    let root = scratch("hostile-root");
    let plan = JobPlan::localhost_bound(3).unwrap();
    let (out, _) = mixed(
        &plan,
        &root,
        0,
        |r, ck| ck.checkpoint(&state(r, 1)),
        move |ep| {
            // The open-handle allreduce every checkpoint starts with.
            let mut comm = Comm::new(ep);
            comm.allreduce(&[0u64, 0], Reduction::Sum).unwrap();
            for r in 1..3 {
                ep.send_frame(r, 1, &Payload::CkptBegin(CkptBegin { size: 3 }))
                    .unwrap();
            }
            for r in 1..3 {
                let (hd, _) = ep.recv_ckpt(r).unwrap();
                assert_eq!(hd.frame_type, FrameType::CkptAck);
            }
            let file = vec![0x33u8; 3000];
            push(ep, &file);
            if let Some(c) = &commit {
                for r in 1..3 {
                    let _ = ep.send_frame(
                        r,
                        1,
                        &Payload::CkptCommit(sperli_wire::commit_file::decode_file(c).unwrap()),
                    );
                }
            }
            wait_for_end(ep)
        },
    );
    (out, root, plan)
}

/// No rank of the real ones stored a COMMIT or a buddy copy of rank 0.
fn assert_no_commit(root: &Path, plan: &JobPlan) {
    for r in 1..3 {
        let d = edir(root, plan, r, 1);
        assert!(!d.join("COMMIT").exists(), "rank {r} stored a COMMIT");
    }
    assert!(!edir(root, plan, 1, 1).join(buddy_file_name(0)).exists());
}

fn push_chunk(ep: &Endpoint, offset: u64, total: u64, chunk: &[u8]) {
    let d = CkptData {
        kind: CkptDataKind::Push,
        owner: 0,
        offset,
        total,
        chunk,
    };
    let _ = ep.send_frame(1, 1, &Payload::CkptData(d));
}

fn assert_chunk_rejected(out: &[Option<Result<u64, Error>>], want: fn(&ChunkError) -> bool) {
    let e1 = out[1].as_ref().unwrap().as_ref().unwrap_err();
    match e1 {
        Error::FrameRejected(FrameError::Chunk(c)) => assert!(want(c), "{c:?}"),
        other => panic!("rank 1: {other}"),
    }
    let c2 = h(out[2].as_ref().unwrap());
    assert!(
        c2 == Some(HCode::H1612) || c2 == Some(HCode::H1613),
        "rank 2: {:?}",
        out[2]
    );
}

/// Hostile rank 0 pushes its file to rank 1 in two chunks whose `total`
/// differs: rank 1 refuses with H1610 (ABORT reason 5), no COMMIT and no
/// buddy copy is stored, rank 2 ends with H1612.
#[test]
fn a_push_with_a_changing_total_is_h1610_and_nothing_is_committed() {
    with_deadline(Duration::from_secs(60), || {
        let (out, root, plan) = hostile_root(
            |ep, file| {
                push_chunk(ep, 0, file.len() as u64, &file[..1000]);
                push_chunk(ep, 1000, file.len() as u64 + 1, &file[1000..2000]);
            },
            None,
        );
        assert_chunk_rejected(&out, |c| {
            matches!(
                c,
                ChunkError::Total {
                    expected: 3000,
                    got: 3001
                }
            )
        });
        assert_no_commit(&root, &plan);
        let _ = std::fs::remove_dir_all(&root);
    });
}

/// The same with a gap in the offsets (0..1000, then 1500..).
#[test]
fn a_push_with_a_gap_in_offsets_is_h1610_and_nothing_is_committed() {
    with_deadline(Duration::from_secs(60), || {
        let (out, root, plan) = hostile_root(
            |ep, file| {
                push_chunk(ep, 0, file.len() as u64, &file[..1000]);
                push_chunk(ep, 1500, file.len() as u64, &file[1500..2000]);
            },
            None,
        );
        assert_chunk_rejected(&out, |c| {
            matches!(
                c,
                ChunkError::Offset {
                    expected: 1000,
                    got: 1500
                }
            )
        });
        assert_no_commit(&root, &plan);
        let _ = std::fs::remove_dir_all(&root);
    });
}

/// Hostile rank 0 runs a correct checkpoint but signs nothing: its
/// CKPT_COMMIT carries the right hashes and a signature of 0xaa bytes.
/// Ranks 1 and 2 refuse it with H1621 (or H1612 when the other's ABORT
/// came first) and store no COMMIT.
#[test]
fn a_commit_with_a_bad_signature_is_h1621_and_never_stored() {
    with_deadline(Duration::from_secs(60), || {
        let root = scratch("badsig");
        let plan = JobPlan::localhost_bound(3).unwrap();
        let job = plan.job_id;
        let (out, _) = mixed(
            &plan,
            &root,
            0,
            |r, ck| ck.checkpoint(&state(r, 1)),
            move |ep| {
                let mut comm = Comm::new(ep);
                comm.allreduce(&[0u64, 0], Reduction::Sum).unwrap();
                for r in 1..3 {
                    ep.send_frame(r, 1, &Payload::CkptBegin(CkptBegin { size: 3 }))
                        .unwrap();
                }
                let file = vec![0x33u8; 3000];
                let mut hashes = vec![Sha256Digest::of(&file)];
                for r in 1..3 {
                    let (_, b) = ep.recv_ckpt(r).unwrap();
                    hashes.push(CkptAck::decode(&b).unwrap().sha256);
                }
                for c in chunks(CkptDataKind::Push, 0, &file) {
                    ep.send_frame(1, 1, &Payload::CkptData(c)).unwrap();
                }
                let bytes = assemble(&signed_message(job, 1, &hashes), &[0xaa; 2484]);
                let cf = sperli_wire::commit_file::decode_file(&bytes).unwrap();
                // The first victim may abort before the second COMMIT goes.
                for r in 1..3 {
                    let _ = ep.send_frame(r, 1, &Payload::CkptCommit(cf.clone()));
                }
                wait_for_end(ep)
            },
        );
        let codes: Vec<_> = out[1..].iter().map(|o| h(o.as_ref().unwrap())).collect();
        assert!(codes.contains(&Some(HCode::H1621)), "{out:?}");
        // The other victim: H1621 too, or the first one's ABORT (H1612),
        // or a close it saw first (H1613, protocol §7.5 "Job-wide aborts").
        for c in &codes {
            assert!(
                matches!(c, Some(HCode::H1621 | HCode::H1612 | HCode::H1613)),
                "{out:?}"
            );
        }
        for r in 1..3 {
            assert!(!edir(&root, &plan, r, 1).join("COMMIT").exists());
        }
        let _ = std::fs::remove_dir_all(&root);
    });
}

/// Incarnation 2 of a job with one committed epoch; rank 2 is hostile and,
/// instead of its RESUME offer, sends rank 0 a CKPT_COMMIT (bad signature):
/// rank 0 refuses it as a frame that does not fit (H1610, ABORT reason 6);
/// nothing is loaded anywhere.
#[test]
fn an_unsolicited_commit_during_resume_is_h1610_reason_6() {
    with_deadline(Duration::from_secs(90), || {
        let root = scratch("resume-commit");
        let mut plan = JobPlan::localhost_bound(3).unwrap();
        first_run(&plan, &root, 1);
        restart(&mut plan);
        let job = plan.job_id;
        let (out, end) = mixed(
            &plan,
            &root,
            2,
            |_, ck| ck.resume::<State>().map(|r| r.map_or(0, |(e, _)| e)),
            move |ep| {
                let hashes = vec![Sha256Digest([1; 32]); 3];
                let bytes = assemble(&signed_message(job, 1, &hashes), &[0xaa; 2484]);
                let cf = sperli_wire::commit_file::decode_file(&bytes).unwrap();
                ep.send_frame(0, 1, &Payload::CkptCommit(cf)).unwrap();
                wait_for_end(ep)
            },
        );
        let e0 = out[0].as_ref().unwrap().as_ref().unwrap_err();
        assert!(
            matches!(
                e0,
                Error::FrameRejected(FrameError::Unexpected {
                    frame_type: FrameType::CkptCommit,
                    ..
                })
            ),
            "{e0}"
        );
        // Rank 0's ABORT, or (a third rank may see another rank's close
        // first, protocol §7.5 "Job-wide aborts") H1613.
        match &end {
            Error::AbortedByPeer { .. } => assert_eq!(
                end,
                Error::AbortedByPeer {
                    from: 0,
                    reason: 6,
                    code: 1610,
                    message: e0.to_string()
                }
            ),
            other => assert_eq!(other.h_code(), Some(HCode::H1613), "{other}"),
        }
        assert!(out[1].as_ref().unwrap().is_err());
        let _ = std::fs::remove_dir_all(&root);
    });
}

/// Incarnation 2; rank 1 lost its own file, so it asks its buddy, hostile
/// rank 2, which answers with kind 2 chunks that leave a gap. Rank 1
/// refuses the copy (H1610, ABORT reason 6) and writes no rank file.
#[test]
fn a_fetched_copy_with_a_gap_during_resume_is_h1610_reason_6() {
    with_deadline(Duration::from_secs(90), || {
        let root = scratch("resume-gap");
        let mut plan = JobPlan::localhost_bound(3).unwrap();
        first_run(&plan, &root, 1);
        let own1 = edir(&root, &plan, 1, 1).join(rank_file_name(1));
        std::fs::remove_file(&own1).unwrap();
        restart(&mut plan);
        let (out, _) = mixed(
            &plan,
            &root,
            2,
            |_, ck| ck.resume::<State>().map(|r| r.map_or(0, |(e, _)| e)),
            move |ep| {
                let offer = Resume {
                    status: ResumeStatus::Offer,
                    commit: None,
                };
                ep.send_frame(0, 0, &Payload::Resume(offer)).unwrap();
                let (hd, _) = ep.recv_ckpt(0).unwrap();
                assert_eq!(hd.frame_type, FrameType::Resume);
                let e = hd.epoch;
                ep.send_frame(0, e, &Payload::CkptData(CkptData::nothing_needed(2)))
                    .unwrap();
                let (hd, b) = ep.recv_ckpt(1).unwrap();
                assert_eq!(hd.frame_type, FrameType::CkptData);
                let d = CkptData::decode(&b).unwrap();
                assert_eq!(d.kind, CkptDataKind::Request);
                let bogus = vec![7u8; 4000];
                for (offset, range) in [(0u64, 0..1000), (2000, 2000..4000)] {
                    let d = CkptData {
                        kind: CkptDataKind::Reply,
                        owner: 1,
                        offset,
                        total: 4000,
                        chunk: &bogus[range],
                    };
                    let _ = ep.send_frame(1, e, &Payload::CkptData(d));
                }
                wait_for_end(ep)
            },
        );
        let e1 = out[1].as_ref().unwrap().as_ref().unwrap_err();
        assert_eq!(e1.h_code(), Some(HCode::H1610), "{e1}");
        assert!(out[0].as_ref().unwrap().is_err());
        assert!(!own1.exists(), "a refused copy was stored");
        let _ = std::fs::remove_dir_all(&root);
    });
}

// ---- the checkpoint directory full or read-only ---------------------

/// Mounts a tmpfs of `size` (mount options `opts`) on `dir`; false (and a
/// message) when this machine does not allow it.
fn mount_tmpfs(dir: &Path, opts: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "cannot mount a tmpfs on {} (this test needs root: run it as .ci/run does)",
        dir.display()
    );
}

fn umount(dir: &Path) {
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(dir)
        .status();
}

/// Rank 1's checkpoint directory is a 2 MiB tmpfs. Epoch 1 (small states)
/// commits; epoch 2 (3 MiB states) fills the disk on rank 1 (ENOSPC while
/// writing its file or the buddy copy): every rank fails (rank 1 with a
/// local I/O error, sent as ABORT reason 5 code 0; the others H1612), no
/// COMMIT of epoch 2 exists anywhere, and the restarted job resumes epoch
/// 1 with the right states.
#[test]
#[ignore = "needs root (mounts a tmpfs): SPERLI_SLOW_TESTS=1 cargo xtask test, or cargo test -- --ignored"]
fn a_full_checkpoint_disk_fails_the_epoch_and_the_restart_resumes_the_previous_one() {
    with_deadline(Duration::from_secs(120), || {
        let root = scratch("full");
        let d1 = rank_dir(&root, 1);
        mount_tmpfs(&d1, "size=2m");
        // Unmount even when an assertion fails.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut plan = JobPlan::localhost_bound(3).unwrap();
            let big = |r: u32| -> Vec<u8> { vec![r as u8; 3 << 20] };
            let out = super::run(&plan, &root, |r, _, ck| {
                assert_eq!(ck.checkpoint(&big(r)[..1000].to_vec()).unwrap(), 1);
                ck.checkpoint(&big(r))
            });
            let e1 = out[1].as_ref().unwrap_err();
            assert!(matches!(e1, Error::Io { .. }), "rank 1: {e1}");
            for (r, o) in out.iter().enumerate() {
                assert!(o.is_err(), "rank {r}: {o:?}");
            }
            for r in 0..3 {
                assert!(
                    !edir(&root, &plan, r, 2).join("COMMIT").exists(),
                    "rank {r}: a COMMIT of the failed epoch"
                );
            }
            restart(&mut plan);
            super::run(&plan, &root, |r, _, ck| {
                assert_eq!(
                    ck.resume::<Vec<u8>>().unwrap(),
                    Some((1, big(r)[..1000].to_vec()))
                );
            });
        }));
        umount(&d1);
        if let Err(p) = r {
            std::panic::resume_unwind(p);
        }
        let _ = std::fs::remove_dir_all(&root);
    });
}

/// Rank 1's checkpoint directory is a read-only file system (a read-only
/// tmpfs: root ignores permission bits). Its first checkpoint fails with a
/// local I/O error on rank 1 (ABORT reason 5, code 0) and H1612 on the
/// others; no COMMIT exists.
#[test]
#[ignore = "needs root (mounts a tmpfs): SPERLI_SLOW_TESTS=1 cargo xtask test, or cargo test -- --ignored"]
fn a_read_only_checkpoint_directory_fails_the_checkpoint_on_every_rank() {
    with_deadline(Duration::from_secs(60), || {
        let root = scratch("ro");
        let d1 = rank_dir(&root, 1);
        mount_tmpfs(&d1, "ro,size=1m");
        let plan = JobPlan::localhost_bound(3).unwrap();
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            super::run(&plan, &root, |r, _, ck| ck.checkpoint(&state(r, 1)))
        }));
        umount(&d1);
        let out = match out {
            Ok(o) => o,
            Err(p) => std::panic::resume_unwind(p),
        };
        let e1 = out[1].as_ref().unwrap_err();
        assert!(matches!(e1, Error::Io { .. }), "rank 1: {e1}");
        for (r, o) in out.iter().enumerate() {
            assert!(o.is_err(), "rank {r}: {o:?}");
            if r != 1 {
                // H1612 (rank 1's ABORT), or H1613 when this rank saw a
                // close first (protocol §7.5 "Job-wide aborts").
                let c = o.as_ref().unwrap_err().h_code();
                assert!(
                    c == Some(HCode::H1612) || c == Some(HCode::H1613),
                    "rank {r}: {o:?}"
                );
            }
        }
        assert!(!edir(&root, &plan, 0, 1).join("COMMIT").exists());
        let _ = std::fs::remove_dir_all(&root);
    });
}
