//! Communicators (HELLO feature bit 2, protocol §15): split into uneven
//! groups with collectives on each group at once (v1 star and pipelined),
//! dup, nested splits, a job without bit 2, and the H1617 checks of
//! protocol §15.4 (a frame of another communicator, a sequence that does
//! not fit), on the fake link and on real TLS ranks.

use std::time::Duration;

use sperli_collective::fake::{self, FakePeers};
use sperli_collective::prelude::*;
use sperli_transport::Settings;
use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
use sperli_wire::limits::{FEATURE_COMMUNICATORS, FEATURE_PIPELINED, FEATURE_V1_CORE};

use crate::common::assert_aborted_by;
use crate::tls::{run_job, run_job_with, settings, tls_test_within};

/// Splits `c` by `rank % 3` (uneven groups: 8 ranks give 3, 3 and 2), the
/// last rank without a color, and runs collectives on every group at once
/// interleaved with the parent's; returns what this rank saw.
fn uneven_groups<L: Peers + Send + Sync + 'static>(c: &Comm<L>) -> Vec<u64> {
    let (me, n) = (c.rank(), c.size());
    let color = (me != n - 1 || n == 1).then_some(me % 3);
    let sub = c.split(color, -(me as i32)).unwrap();
    let mut seen = Vec::new();
    let total = c.allreduce_scalar(1u64, Reduction::Sum).unwrap();
    assert_eq!(total, u64::from(n));
    if let Some(s) = &sub {
        assert!(s.id() > 0);
        // Ordered by key = -rank: the highest job rank is rank 0.
        let members: Vec<u32> = (0..n)
            .filter(|&r| (r != n - 1 || n == 1) && r % 3 == me % 3)
            .rev()
            .collect();
        assert_eq!(s.size() as usize, members.len());
        assert_eq!(s.job_rank(s.rank()), me);
        assert_eq!(members[s.rank() as usize], me);
        let sum = s.allreduce_scalar(u64::from(me), Reduction::Sum).unwrap();
        assert_eq!(sum, members.iter().map(|&r| u64::from(r)).sum::<u64>());
        s.barrier().unwrap();
        let mut b = if s.rank() == 0 {
            vec![me; 4]
        } else {
            Vec::new()
        };
        s.bcast(0, &mut b).unwrap();
        assert_eq!(b, vec![members[0]; 4]);
        let g = s.gather(0, &[me]).unwrap();
        if s.rank() == 0 {
            assert_eq!(g.unwrap(), members);
        }
        // Large enough for the pipelined calls with bit 1 (protocol §14.5).
        let big: Vec<f64> = (0..200_000).map(|i| f64::from(me) + i as f64).collect();
        let r = s.allreduce(&big, Reduction::Sum).unwrap();
        let k = members.len() as f64;
        let base: f64 = members.iter().map(|&r| f64::from(r)).sum();
        assert_eq!(r[7], base + 7.0 * k);
        // Non-blocking on the group, then a blocking call on the parent.
        let nb = s.iallreduce(&[1u32], Reduction::Sum).unwrap();
        seen.push(u64::from(nb.wait().unwrap()[0]));
        // A dup of the group and a nested split of it.
        let d = s.dup().unwrap();
        assert_eq!((d.rank(), d.size()), (s.rank(), s.size()));
        assert_ne!(d.id(), s.id());
        seen.push(d.allreduce_scalar(2u64, Reduction::Sum).unwrap());
        let halves = s.split(Some(s.rank() % 2), 0).unwrap().unwrap();
        seen.push(halves.allreduce_scalar(1u64, Reduction::Sum).unwrap());
        seen.push(s.sequence());
    } else {
        // A rank without a color still takes part in the parent's calls
        // that make communicators (protocol §15.3): the group's dup and
        // nested split are made on the group, not here.
    }
    seen.push(c.allreduce_scalar(u64::from(me), Reduction::Max).unwrap());
    seen
}

#[test]
fn uneven_groups_run_collectives_at_once_on_fake_ranks() {
    for size in [1, 2, 3, 8] {
        let out = fake::run(size, |c| uneven_groups(c));
        for (r, seen) in out.iter().enumerate() {
            assert_eq!(*seen.last().unwrap(), u64::from(size - 1), "rank {r}");
        }
    }
}

#[test]
fn uneven_groups_run_collectives_at_once_on_tls_ranks() {
    for size in [1, 2, 3, 8] {
        tls_test_within(Duration::from_secs(120), move || {
            let out = run_job(size, |ep| ep, |c: Comm<Endpoint>| uneven_groups(&c));
            for seen in out {
                assert_eq!(*seen.last().unwrap(), u64::from(size - 1));
            }
        });
    }
}

#[test]
fn without_bit_2_split_and_dup_fail_on_every_rank_and_the_job_goes_on() {
    let v1 = FEATURE_V1_CORE | FEATURE_PIPELINED;
    let out = fake::run_links(FakePeers::job_with_features(&[v1; 3]), |c| {
        let e = c.split(Some(0), 0).unwrap_err();
        assert_eq!(e, Error::Usage(UsageError::NoCommunicators));
        assert!(matches!(
            c.dup(),
            Err(Error::Usage(UsageError::NoCommunicators))
        ));
        c.allreduce_scalar(1u32, Reduction::Sum).unwrap()
    });
    assert_eq!(out, vec![3; 3]);
    tls_test_within(Duration::from_secs(60), move || {
        let out = run_job_with(
            3,
            |r| Settings {
                // Rank 2 does not announce bit 2: the job has no communicators.
                features: if r == 2 {
                    v1
                } else {
                    v1 | FEATURE_COMMUNICATORS
                },
                ..settings()
            },
            |ep| ep,
            |c: Comm<Endpoint>| {
                assert_eq!(c.features() & FEATURE_COMMUNICATORS, 0);
                let e = c.split(Some(1), 0).unwrap_err();
                assert_eq!(e, Error::Usage(UsageError::NoCommunicators));
                c.allreduce_scalar(1u32, Reduction::Sum).unwrap()
            },
        );
        assert_eq!(out, vec![3; 3]);
    });
}

fn barrier_frame(seq: u64) -> Vec<u8> {
    CollectiveHeader {
        operation: Operation::Barrier,
        element_type: 0,
        reduction: 0,
        phase: Phase::ToRoot,
        root: 0,
        sequence: seq,
    }
    .to_bytes()
    .to_vec()
}

/// A frame carrying a communicator id the receiver does not hold: H1617
/// with ABORT reason 3 at the receiver (protocol §15.4), on the fake link.
#[test]
fn a_frame_of_another_communicator_is_h1617_reason_3() {
    let out = fake::run(3, |c| {
        if c.rank() == 1 {
            // Communicator 77 was never made.
            c.link().inject_tagged(0, 77, barrier_frame(1));
        }
        (c.barrier(), c.barrier())
    });
    let e0 = out[0].0.as_ref().unwrap_err();
    assert!(
        matches!(
            e0,
            Error::CollectiveMismatch(MismatchError::Communicator {
                from: 1,
                expected: 0,
                got: 77
            })
        ),
        "{e0}"
    );
    assert_eq!(e0.h_code(), Some(HCode::H1617));
    for r in [1, 2] {
        let e = out[r].1.as_ref().unwrap_err();
        assert_aborted_by(e, 0, AbortReason::CollectiveMismatch, 1617);
    }
}

/// On a communicator a frame whose sequence does not fit the
/// communicator's count is H1617 reason 3 (protocol §15.4), over TLS: a
/// member forges a frame of the group with the job's sequence.
#[test]
fn a_sequence_that_does_not_fit_the_communicator_is_h1617_reason_3_over_tls() {
    tls_test_within(Duration::from_secs(60), || {
        let out = run_job(
            3,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let s = c.dup().unwrap();
                for _ in 0..3 {
                    // Rank 2 may not have taken the last release yet when
                    // rank 0's ABORT comes in behind it: its barrier then
                    // fails with that ABORT (protocol §7.5).
                    if let Err(e) = c.barrier() {
                        return (Err(e.clone()), Err(e));
                    }
                }
                if c.rank() == 1 {
                    // The job's count is 4 now, the group's 0: sequence 5 fits
                    // neither the group's next call (1) nor anything else.
                    c.link()
                        .send_collective_tagged(s.job_rank(0), s.id(), &barrier_frame(5))
                        .unwrap();
                    return (Ok(()), s.barrier());
                }
                (s.barrier(), s.barrier())
            },
        );
        let e0 = out[0].0.as_ref().unwrap_err();
        assert_eq!(e0.h_code(), Some(HCode::H1617), "{e0}");
        assert!(
            matches!(
                e0,
                Error::CollectiveMismatch(MismatchError::Header {
                    field: "sequence",
                    ..
                })
            ),
            "{e0}"
        );
        let e2 = out[2].1.as_ref().unwrap_err();
        if let Error::AbortedByPeer { from, reason, .. } = e2 {
            assert_eq!((*from, *reason), (0, 3));
        }
    });
}

/// Point-to-point on a communicator uses its ranks (translated to job
/// ranks underneath); with feature bit 3 a receive from any source works
/// on it too (protocol §16.3).
#[test]
fn point_to_point_on_a_communicator_uses_its_ranks() {
    tls_test_within(Duration::from_secs(60), || {
        run_job(
            5,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let me = c.rank();
                let s = c.split(Some(me % 2), me as i32).unwrap().unwrap();
                let (r, n) = (s.rank(), s.size());
                let (right, left) = ((r + 1) % n, (r + n - 1) % n);
                let (st, got) = s
                    .sendrecv::<u32, u32>(right, 3, &[me], Some(left), Some(3))
                    .unwrap();
                assert_eq!(st.source, left);
                assert_eq!(got, vec![s.job_rank(left)]);
                s.send(right, 4, &[me]).unwrap();
                let (st, v) = s.recv_match::<u32>(None, Some(4)).unwrap();
                assert_eq!((st.source, v), (left, vec![s.job_rank(left)]));
                assert_eq!(
                    s.send(n, 3, &[1u8]).unwrap_err().h_code(),
                    Some(HCode::H1618)
                );
                c.barrier().unwrap();
            },
        );
    });
}

/// A communicator made by split shares the link: the parent gives the
/// link back only once it is gone.
#[test]
fn the_link_comes_back_once_the_made_communicators_are_gone() {
    let links = FakePeers::job(2);
    std::thread::scope(|s| {
        for link in links {
            s.spawn(move || {
                let c = Comm::new(link);
                let sub = c.dup().unwrap();
                sub.barrier().unwrap();
                let c = c
                    .try_into_link()
                    .expect_err("the dup still shares the link");
                drop(sub);
                let link = c.try_into_link().expect("the dup is gone");
                assert!(link.rank() < 2);
            });
        }
    });
}
