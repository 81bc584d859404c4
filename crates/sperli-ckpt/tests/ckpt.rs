//! Multi-rank checkpoint and resume tests: real TLS 1.3 endpoints on
//! 127.0.0.x, one thread per rank, a JobPlan as the launcher makes it
//! (protocol §9, §10). One integration test binary.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use sperli_ckpt::{Checkpointer, JobKeys};
use sperli_collective::Comm;
use sperli_tls::job_plan::{local_hosts, JobPlan};
use sperli_transport::{Endpoint, ErrorMode, Settings};
use sperli_wire::ckpt_path::{buddy_file_name, epoch_dir, rank_file_name, temp_name};
use sperli_wire::error::ResumeFailure;
use sperli_wire::rank_file::{verify_rank_file, RankFileExpect};
use sperli_wire::{Error, HCode};

mod bcast_state;
mod reliability;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A scratch directory on the real disk, one per test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "sperli-ckpt-test-{}-{}-{name}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rank_dir(root: &Path, r: u32) -> PathBuf {
    root.join(format!("rank-{r}"))
}

/// Runs `f` on every rank of the plan's current incarnation, each rank in
/// its own thread with its own Endpoint and checkpoint directory.
fn run<R: Send>(
    plan: &JobPlan,
    root: &Path,
    f: impl Fn(u32, &Endpoint, &mut Checkpointer<&Endpoint>) -> R + Sync,
) -> Vec<R> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..plan.size())
            .map(|r| {
                let desc = plan.description(r);
                let f = &f;
                let dir = rank_dir(root, r);
                let listener = plan.take_listener(r);
                s.spawn(move || {
                    // Ranks are threads of this process: errors returned.
                    let s = Settings {
                        errors: ErrorMode::Return,
                        listener,
                        ..Settings::default()
                    };
                    let ep = Endpoint::start(&desc, s).expect("start");
                    let keys = JobKeys::from_description(&desc).unwrap();
                    let mut ck = Checkpointer::new(Comm::new(&ep), dir, keys).unwrap();
                    let out = f(r, &ep, &mut ck);
                    drop(ck);
                    let _ = ep.finish();
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The state of rank `r` after step `i`.
fn state(r: u32, i: u64) -> (u64, Vec<f64>, String) {
    (
        i,
        (0..100)
            .map(|k| f64::from(r) * 1000.0 + (i * k) as f64)
            .collect(),
        format!("rank {r} step {i}"),
    )
}

type State = (u64, Vec<f64>, String);

/// Incarnation 1: `epochs` checkpoints of `state(r, i)` (i = 1..=epochs).
fn first_run(plan: &JobPlan, root: &Path, epochs: u64) {
    let out = run(plan, root, |r, _, ck| {
        assert!(ck.resume::<State>().unwrap().is_none());
        for i in 1..=epochs {
            assert_eq!(ck.checkpoint(&state(r, i)).unwrap(), i);
        }
    });
    assert_eq!(out.len(), plan.size() as usize);
}

fn restart(plan: &mut JobPlan) {
    let hosts = local_hosts(plan.size()).unwrap();
    plan.next_incarnation(hosts).unwrap();
}

fn edir(root: &Path, plan: &JobPlan, r: u32, epoch: u64) -> PathBuf {
    epoch_dir(rank_dir(root, r), plan.job_id, epoch)
}

fn code(r: &Result<Option<(u64, State)>, Error>) -> Option<HCode> {
    r.as_ref().err().and_then(Error::h_code)
}

/// The reason of an H1622.
fn reason(r: &Result<Option<(u64, State)>, Error>) -> Option<&ResumeFailure> {
    match r {
        Err(Error::NoResumableEpoch { reason }) => Some(reason),
        _ => None,
    }
}

#[test]
fn checkpoints_keep_two_epochs_and_resume_restores_every_rank() {
    let root = scratch("roundtrip");
    let mut plan = JobPlan::localhost_bound(3).unwrap();
    first_run(&plan, &root, 3);
    for r in 0..3 {
        let job = sperli_wire::ckpt_path::job_dir(rank_dir(&root, r), plan.job_id);
        let mut epochs: Vec<String> = std::fs::read_dir(&job)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        epochs.sort();
        // Epochs 2 and 3 are kept; epoch 4 holds only the temporary files
        // recycled from epoch 1 for the next checkpoint to write over.
        assert_eq!(epochs, ["2", "3", "4"], "rank {r}");
        let mut next: Vec<String> = std::fs::read_dir(job.join("4"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        next.sort();
        let mut want = vec![
            temp_name(&rank_file_name(r)),
            temp_name(&buddy_file_name((r + 2) % 3)),
        ];
        want.sort();
        assert_eq!(next, want, "rank {r}");
        for e in [2, 3] {
            let d = edir(&root, &plan, r, e);
            assert!(d.join("COMMIT").is_file());
            assert!(d.join(rank_file_name(r)).is_file());
            assert!(d.join(buddy_file_name((r + 2) % 3)).is_file());
        }
    }
    restart(&mut plan);
    let out = run(&plan, &root, |r, _, ck| {
        let got = ck.resume::<State>().unwrap();
        assert_eq!(got, Some((3, state(r, 3))));
        // The next checkpoint is epoch 4.
        assert_eq!(ck.checkpoint(&state(r, 4)).unwrap(), 4);
    });
    assert_eq!(out.len(), 3);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn size_one_job_checkpoints_without_buddy() {
    let root = scratch("size1");
    let mut plan = JobPlan::localhost_bound(1).unwrap();
    first_run(&plan, &root, 2);
    let d = edir(&root, &plan, 0, 2);
    assert!(d.join("COMMIT").is_file());
    assert!(!d.join(buddy_file_name(0)).exists());
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<State>().unwrap(), Some((2, state(r, 2))));
    });
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn no_commit_anywhere_starts_from_the_beginning() {
    let root = scratch("fresh");
    let mut plan = JobPlan::localhost_bound(2).unwrap();
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<State>().unwrap(), None);
        assert_eq!(ck.epoch(), 0);
        assert_eq!(ck.checkpoint(&state(r, 1)).unwrap(), 1);
    });
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_deleted_own_file_is_fetched_from_the_buddy() {
    let root = scratch("deleted");
    let mut plan = JobPlan::localhost_bound(3).unwrap();
    first_run(&plan, &root, 2);
    let own = edir(&root, &plan, 1, 2).join(rank_file_name(1));
    std::fs::remove_file(&own).unwrap();
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<State>().unwrap(), Some((2, state(r, 2))));
    });
    // The fetched copy was stored as rank 1's own file again.
    assert_eq!(
        std::fs::read(&own).unwrap(),
        std::fs::read(edir(&root, &plan, 2, 2).join(buddy_file_name(1))).unwrap()
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_flipped_byte_is_refused_with_h1620_and_the_buddy_copy_is_used() {
    let root = scratch("flipped");
    let mut plan = JobPlan::localhost_bound(3).unwrap();
    first_run(&plan, &root, 2);
    let own = edir(&root, &plan, 2, 2).join(rank_file_name(2));
    let mut bytes = std::fs::read(&own).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&own, &bytes).unwrap();
    let expect = RankFileExpect {
        job_id: plan.job_id,
        epoch: 2,
        rank: 2,
        size: 3,
    };
    assert_eq!(
        verify_rank_file(&bytes, &expect).unwrap_err().h_code(),
        Some(HCode::H1620)
    );
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<State>().unwrap(), Some((2, state(r, 2))));
    });
    let repaired = std::fs::read(&own).unwrap();
    assert!(verify_rank_file(&repaired, &expect).is_ok());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_commit_with_a_flipped_signature_byte_makes_the_job_take_the_previous_epoch() {
    let root = scratch("badsig");
    let mut plan = JobPlan::localhost_bound(3).unwrap();
    first_run(&plan, &root, 2);
    for r in 0..3 {
        let c = edir(&root, &plan, r, 2).join("COMMIT");
        let mut bytes = std::fs::read(&c).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x80;
        std::fs::write(&c, &bytes).unwrap();
    }
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<State>().unwrap(), Some((1, state(r, 1))));
        // Epoch 2 is written again; its old COMMIT is replaced.
        assert_eq!(ck.checkpoint(&state(r, 20)).unwrap(), 2);
    });
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<State>().unwrap(), Some((2, state(r, 20))));
    });
    let _ = std::fs::remove_dir_all(&root);
}

/// Over the real transport: rank 1's file of epoch 2 and its buddy copy
/// are both damaged, so every rank resumes epoch 1 (protocol §10.2 step 7)
/// and the next checkpoint writes epoch 2 again.
#[test]
fn a_rank_that_cannot_load_the_newest_epoch_makes_every_rank_resume_the_one_before() {
    let root = scratch("fallback");
    let mut plan = JobPlan::localhost_bound(3).unwrap();
    first_run(&plan, &root, 2);
    for (holder, name) in [(1, rank_file_name(1)), (2, buddy_file_name(1))] {
        let p = edir(&root, &plan, holder, 2).join(name);
        let mut b = std::fs::read(&p).unwrap();
        b[90] ^= 0x10;
        std::fs::write(&p, b).unwrap();
    }
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<State>().unwrap(), Some((1, state(r, 1))));
        assert_eq!(ck.checkpoint(&state(r, 2)).unwrap(), 2);
    });
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<State>().unwrap(), Some((2, state(r, 2))));
    });
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_signed_commit_for_another_size_gives_h1623() {
    let root = scratch("size");
    let mut plan = JobPlan::localhost_bound(2).unwrap();
    first_run(&plan, &root, 1);
    // The same job (id and key) restarted with 3 ranks.
    let hosts = local_hosts(3).unwrap();
    plan.next_incarnation(hosts).unwrap();
    let out = run(&plan, &root, |_, _, ck| ck.resume::<State>());
    assert_eq!(code(&out[0]), Some(HCode::H1623), "{:?}", out[0]);
    assert!(matches!(
        out[0],
        Err(Error::CommitSizeMismatch {
            expected: 3,
            got: 2
        })
    ));
    for o in &out[1..] {
        assert!(o.is_err(), "{o:?}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_rank_file_and_its_buddy_copy_both_lost_gives_h1622() {
    let root = scratch("lost");
    let mut plan = JobPlan::localhost_bound(3).unwrap();
    first_run(&plan, &root, 1);
    std::fs::remove_file(edir(&root, &plan, 1, 1).join(rank_file_name(1))).unwrap();
    std::fs::remove_file(edir(&root, &plan, 2, 1).join(buddy_file_name(1))).unwrap();
    restart(&mut plan);
    let out = run(&plan, &root, |_, _, ck| ck.resume::<State>());
    for (r, o) in out.iter().enumerate() {
        assert_eq!(code(o), Some(HCode::H1622), "rank {r}: {o:?}");
    }
    // Epoch 1 had no older epoch to fall back to; each rank says what it
    // knows first.
    assert_eq!(
        reason(&out[0]),
        Some(&ResumeFailure::CannotLoad { rank: 1, epoch: 1 })
    );
    assert_eq!(
        reason(&out[1]),
        Some(&ResumeFailure::NoBuddyCopy { buddy: 2, epoch: 1 })
    );
    assert_eq!(
        reason(&out[2]),
        Some(&ResumeFailure::Abandoned { epoch: 1 })
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_corrupt_own_file_without_a_buddy_copy_ends_with_h1622_naming_its_code() {
    let root = scratch("corrupt-nobuddy");
    let mut plan = JobPlan::localhost_bound(3).unwrap();
    first_run(&plan, &root, 1);
    let own = edir(&root, &plan, 2, 1).join(rank_file_name(2));
    let mut bytes = std::fs::read(&own).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&own, &bytes).unwrap();
    std::fs::remove_file(edir(&root, &plan, 0, 1).join(buddy_file_name(2))).unwrap();
    restart(&mut plan);
    let out = run(&plan, &root, |_, _, ck| ck.resume::<State>());
    for (r, o) in out.iter().enumerate() {
        assert_eq!(code(o), Some(HCode::H1622), "rank {r}: {o:?}");
    }
    // Rank 2's reason is its own file's H1620, and the message says so.
    match reason(&out[2]) {
        Some(ResumeFailure::Own(e)) => assert_eq!(e.h_code(), Some(HCode::H1620), "{e}"),
        other => panic!("rank 2: {other:?}"),
    }
    let text = out[2].as_ref().unwrap_err().to_string();
    assert!(
        text.starts_with("H1622 ") && text.contains("H1620"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn crash_leftovers_never_count() {
    let root = scratch("crash");
    let mut plan = JobPlan::localhost_bound(3).unwrap();
    first_run(&plan, &root, 1);
    // A crash during epoch 2: rank 0 wrote its file, rank 1 only a temp
    // file, nobody a COMMIT.
    let e2 = edir(&root, &plan, 0, 2);
    std::fs::create_dir_all(&e2).unwrap();
    std::fs::write(e2.join(rank_file_name(0)), b"SPCK half").unwrap();
    let e2b = edir(&root, &plan, 1, 2);
    std::fs::create_dir_all(&e2b).unwrap();
    std::fs::write(e2b.join(temp_name(&rank_file_name(1))), b"garbage").unwrap();
    // In epoch 1: a leftover temp file beside rank 0's good file, a
    // truncated own file on rank 2 (its buddy, rank 0, has the copy), and
    // a temp COMMIT on rank 1.
    let e1 = edir(&root, &plan, 0, 1);
    std::fs::write(e1.join(temp_name(&rank_file_name(0))), b"partial").unwrap();
    let own2 = edir(&root, &plan, 2, 1).join(rank_file_name(2));
    let full = std::fs::read(&own2).unwrap();
    std::fs::write(&own2, &full[..full.len() / 2]).unwrap();
    std::fs::write(edir(&root, &plan, 1, 1).join(temp_name("COMMIT")), b"x").unwrap();
    let expect = RankFileExpect {
        job_id: plan.job_id,
        epoch: 1,
        rank: 2,
        size: 3,
    };
    assert_eq!(
        verify_rank_file(&full[..full.len() / 2], &expect)
            .unwrap_err()
            .h_code(),
        Some(HCode::H1619)
    );
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<State>().unwrap(), Some((1, state(r, 1))));
        assert_eq!(ck.checkpoint(&state(r, 2)).unwrap(), 2);
    });
    assert_eq!(std::fs::read(&own2).unwrap(), full);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn an_open_irecv_handle_on_one_rank_fails_the_checkpoint_on_every_rank_with_h1624() {
    let root = scratch("h1624");
    let plan = JobPlan::localhost_bound(3).unwrap();
    let out = run(&plan, &root, |r, ep, ck| {
        let handle = if r == 1 {
            Some(ep.irecv(0, Some(5)).unwrap())
        } else {
            None
        };
        let first = ck.checkpoint(&state(r, 1));
        // Nothing was aborted: the job goes on, the handle completes and the
        // next checkpoint works.
        if r == 0 {
            ep.send(1, 5, b"hi").unwrap();
        }
        if let Some(h) = handle {
            assert_eq!(h.wait().unwrap().1, b"hi");
        }
        let second = ck.checkpoint(&state(r, 1));
        (first, second)
    });
    for (r, (first, second)) in out.iter().enumerate() {
        assert_eq!(
            first,
            &Err(Error::OpenHandles { sends: 0, recvs: 1 }),
            "rank {r}"
        );
        assert_eq!(second, &Ok(1), "rank {r}");
    }
    // No file of the refused checkpoint's attempt counts: epoch 1 is the
    // second call's.
    assert!(edir(&root, &plan, 0, 1).join("COMMIT").is_file());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_struct_state_round_trips_through_the_macro() {
    #[derive(Debug, PartialEq)]
    struct Sim {
        step: u64,
        field: Vec<f32>,
        flags: [bool; 3],
        note: Option<String>,
    }
    sperli_ckpt::checkpointable!(Sim { step, field, flags, note } version 7);
    let root = scratch("struct");
    let mut plan = JobPlan::localhost_bound(2).unwrap();
    let mk = |r: u32| Sim {
        step: 9,
        field: vec![r as f32; 10],
        flags: [true, false, r == 1],
        note: Some(format!("r{r}")),
    };
    run(&plan, &root, |r, _, ck| {
        ck.checkpoint(&mk(r)).unwrap();
    });
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<Sim>().unwrap(), Some((1, mk(r))));
    });
    // Loading with another type (another format version) is H1619 on
    // every rank that tries.
    restart(&mut plan);
    let out = run(&plan, &root, |_, _, ck| ck.resume::<State>());
    assert!(out.iter().all(|o| code(o).is_some()), "{out:?}");
    assert!(out
        .iter()
        .any(|o| code(o) == Some(HCode::H1619) || code(o) == Some(HCode::H1622)));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn large_state_uses_many_chunks() {
    let root = scratch("large");
    let mut plan = JobPlan::localhost_bound(2).unwrap();
    let big = |r: u32| -> Vec<u8> { (0..3_500_000u32).map(|i| (i ^ r) as u8).collect() };
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.checkpoint(&big(r)).unwrap(), 1);
    });
    std::fs::remove_file(edir(&root, &plan, 0, 1).join(rank_file_name(0))).unwrap();
    restart(&mut plan);
    run(&plan, &root, |r, _, ck| {
        assert_eq!(ck.resume::<Vec<u8>>().unwrap(), Some((1, big(r))));
    });
    let _ = std::fs::remove_dir_all(&root);
}

/// A file, a connection or a handle has no `Checkpointable`, so
/// checkpointing one does not compile (protocol §9.4).
#[test]
fn states_holding_files_connections_or_handles_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile_fail/*.rs");
}
