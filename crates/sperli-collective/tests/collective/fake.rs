//! Multi-rank runs of the collectives over the in-memory fake link
//! (protocol §8, §8.3 and §8.8).

use crate::common::*;

use sperli_collective::fake::{self, FakePeers};
use sperli_collective::{Comm, Peers};
use sperli_wire::abort::AbortReason;
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::error::MismatchError;
use sperli_wire::limits::{FEATURE_V1_CORE, MAX_COLLECTIVE_DATA};
use sperli_wire::Error;

const SIZES: [u32; 4] = [1, 2, 3, 8];

// ---- every collective at 1, 2, 3 and 8 ranks ------------------------------

#[test]
fn every_collective_at_1_2_3_8_ranks() {
    for size in SIZES {
        let out = fake::run(size, |c| {
            let me = c.rank();
            let root = size - 1;
            c.barrier().unwrap();
            // bcast from the last rank; receivers start with other data.
            let mut v: Vec<i64> = if me == root {
                vec![-5, 6, i64::MIN]
            } else {
                vec![1; 9]
            };
            c.bcast(root, &mut v).unwrap();
            assert_eq!(v, [-5, 6, i64::MIN]);
            // Empty bcast.
            let mut e: Vec<u8> = if me == 0 { vec![] } else { vec![1] };
            c.bcast(0, &mut e).unwrap();
            assert!(e.is_empty());
            // reduce to the middle rank.
            let mid = size / 2;
            let r = c.reduce(mid, &[me, 1], Reduction::Sum).unwrap();
            let want = size * (size - 1) / 2;
            assert_eq!(r, (me == mid).then(|| vec![want, size]));
            // allreduce.
            let a = c.allreduce(&[me as f64], Reduction::Max).unwrap();
            assert_eq!(a, [(size - 1) as f64]);
            // gather to rank 0, blocks in rank order.
            let g = c.gather(0, &[me as u8, 0xaa]).unwrap();
            if me == 0 {
                let want: Vec<u8> = (0..size).flat_map(|r| [r as u8, 0xaa]).collect();
                assert_eq!(g.unwrap(), want);
            } else {
                assert!(g.is_none());
            }
            // scatter from rank 0.
            let all: Vec<u32> = (0..2 * size).collect();
            let s = c.scatter(0, (me == 0).then_some(&all[..])).unwrap();
            assert_eq!(s, [2 * me, 2 * me + 1]);
            // Empty scatter.
            let s: Vec<u64> = c.scatter(root, Some(&[][..])).unwrap();
            assert!(s.is_empty());
            c.barrier().unwrap();
            c.sequence()
        });
        assert_eq!(out, vec![9; size as usize], "size {size}");
    }
}

// ---- every element type and allowed reduction vs a reference fold ---------

fn reductions_for<T: Ref>() -> usize {
    let mut checked = 0;
    for size in SIZES {
        for r in Reduction::V1 {
            if r.check(T::ELEMENT_TYPE).is_err() {
                continue;
            }
            let salt = u64::from(r.code()) * 1000 + u64::from(size);
            let len = 13;
            let root = size / 2;
            let results = fake::run(size, |c| {
                let mine = data_of::<T>(c.rank(), salt, len);
                let all = c.allreduce(&mine, r).unwrap();
                let at_root = c.reduce(root, &mine, r).unwrap();
                let mut into = vec![T::default(); len];
                c.allreduce_into(&mine, &mut into, r).unwrap();
                let scalar = c.allreduce_scalar(mine[0], r).unwrap();
                (all, at_root, into, scalar)
            });
            let want = reference::<T>(size, salt, len, r);
            for (rank, (all, at_root, into, scalar)) in results.into_iter().enumerate() {
                let what = format!("{} {} size {size} rank {rank}", T::ELEMENT_TYPE, r);
                same_bits(&all, &want, r, &format!("allreduce {what}"));
                same_bits(&into, &want, r, &format!("allreduce_into {what}"));
                same_bits(&[scalar], &want[..1], r, &format!("scalar {what}"));
                if rank as u32 == root {
                    same_bits(&at_root.unwrap(), &want, r, &format!("reduce {what}"));
                } else {
                    assert!(at_root.is_none());
                }
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn every_type_and_allowed_reduction_matches_reference_fold() {
    let n = reductions_for::<u8>()
        + reductions_for::<i32>()
        + reductions_for::<u32>()
        + reductions_for::<i64>()
        + reductions_for::<u64>()
        + reductions_for::<f32>()
        + reductions_for::<f64>();
    // 51 allowed pairs (the table of protocol §8.3) at 4 sizes.
    assert_eq!(n, 51 * 4);
}

#[test]
fn results_are_bit_identical_run_after_run() {
    // Float sums depend on order; the fixed fold order makes them repeatable.
    let run = || {
        fake::run(8, |c| {
            let mine: Vec<f64> = (0..64)
                .map(|i| (f64::from(c.rank()) + 1.0).powi(7) / f64::from(i + 3) * 1e-3)
                .collect();
            let a = c.allreduce(&mine, Reduction::Sum).unwrap();
            let b = c.reduce(5, &mine, Reduction::Prod).unwrap();
            (
                a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                b.map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()),
            )
        })
    };
    let first = run();
    // Every rank has the same allreduce bits.
    assert!(first.iter().all(|(a, _)| *a == first[0].0));
    for _ in 0..5 {
        assert_eq!(run(), first);
    }
}

// ---- refused calls: H1618 on every rank, the job goes on -------------------

#[test]
fn refused_combinations_fail_on_every_rank_and_the_next_call_works() {
    for size in [1, 3] {
        let out = fake::run(size, |c| {
            let mut refused = 0u64;
            let mut expect_1618 = |r: Result<(), Error>, what: &str| {
                let e = r.expect_err(what);
                assert_eq!(code(&e), 1618, "{what}: {e}");
                refused += 1;
            };
            // Every refused (type, reduction) pair, typed and raw.
            for t in ElementType::ALL {
                for r in Reduction::V1 {
                    if r.check(t).is_ok() {
                        continue;
                    }
                    let bytes = vec![0u8; t.width() * 2];
                    expect_1618(
                        c.allreduce_bytes(&bytes, t.code(), r.code()).map(drop),
                        "allreduce refused pair",
                    );
                    expect_1618(
                        c.reduce_bytes(0, &bytes, t.code(), r.code()).map(drop),
                        "reduce refused pair",
                    );
                }
            }
            expect_1618(c.allreduce(&[1u8], Reduction::Sum).map(drop), "u8 sum");
            expect_1618(
                c.allreduce(&[1.0f32], Reduction::Bxor).map(drop),
                "f32 bxor",
            );
            expect_1618(
                c.reduce(0, &[1.0f64], Reduction::Land).map(drop),
                "f64 land",
            );
            // Codes out of range.
            expect_1618(c.allreduce_bytes(&[0; 8], 7, 1).map(drop), "type 7");
            expect_1618(c.allreduce_bytes(&[0; 8], 6, 0).map(drop), "reduction 0");
            expect_1618(c.allreduce_bytes(&[0; 8], 6, 11).map(drop), "reduction 11");
            // Not a whole number of elements.
            expect_1618(c.allreduce_bytes(&[0; 7], 6, 1).map(drop), "7 bytes of f64");
            expect_1618(c.reduce_bytes(0, &[0; 3], 1, 1).map(drop), "3 bytes of i32");
            // Root >= size.
            let s = c.size();
            expect_1618(c.bcast(s, &mut vec![1u8]).map(drop), "bcast root");
            expect_1618(
                c.reduce(s, &[1i32], Reduction::Sum).map(drop),
                "reduce root",
            );
            expect_1618(c.gather(s + 7, &[1i32]).map(drop), "gather root");
            expect_1618(c.scatter::<u8>(s, Some(&[])).map(drop), "scatter root");
            // Own data longer than one frame.
            let big = vec![0u8; MAX_COLLECTIVE_DATA + 8];
            expect_1618(
                c.allreduce_bytes(&big, 4, 1).map(drop),
                "allreduce too long",
            );
            expect_1618(c.reduce_bytes(0, &big, 4, 9).map(drop), "reduce too long");
            // (A typed gather of a longer block is a series of v1 calls.)
            // _into with a wrong output length.
            expect_1618(
                c.allreduce_into(&[1i32, 2], &mut [0; 1], Reduction::Sum),
                "allreduce_into out length",
            );
            // The job goes on, sequence numbers aligned.
            let before = c.sequence();
            assert_eq!(before, refused);
            let sum = c.allreduce(&[c.rank() as i32], Reduction::Sum).unwrap();
            c.barrier().unwrap();
            (before, c.sequence(), sum)
        });
        let n = (size * (size - 1) / 2) as i32;
        assert!(out.windows(2).all(|w| w[0] == w[1]), "{out:?}");
        assert_eq!(out[0].1, out[0].0 + 2);
        assert_eq!(out[0].2, [n]);
    }
}

/// A v1-only job (protocol §7.1.1: one rank without bit 1 is enough).
fn v1_job(size: u32) -> Vec<FakePeers> {
    FakePeers::job_with_features(&vec![sperli_wire::limits::FEATURE_V1_CORE; size as usize])
}

#[test]
fn refused_composite_counts_all_its_calls() {
    // The v1 composites count both parts.
    let out = fake::run_links(v1_job(3), |c| {
        let e = c.reduce_scatter(&[1i32; 4], Reduction::Sum).unwrap_err();
        assert_eq!(code(&e), 1618);
        assert_eq!(c.sequence(), 2);
        let e = c.reduce_scatter(&[1u8; 3], Reduction::Sum).unwrap_err();
        assert_eq!(code(&e), 1618);
        assert_eq!(c.sequence(), 4);
        c.reduce_scatter(&[1i32; 3], Reduction::Sum).unwrap()
    });
    assert_eq!(out, vec![vec![3]; 3]);
}

// ---- checks only one rank can make: the job ends ---------------------------

/// Makes `link` overwrite bytes `at..` of every payload it sends.
fn forge(link: &FakePeers, at: usize, value: &'static [u8]) {
    link.set_send_hook(move |_to, mut p| {
        p[at..at + value.len()].copy_from_slice(value);
        vec![p]
    });
}

#[test]
fn forged_sequence_ends_the_job_h1617_at_the_detecting_rank_h1612_elsewhere() {
    let out = fake::run(3, |c| {
        c.barrier().unwrap();
        if c.rank() == 2 {
            forge(c.link(), 8, &[99, 0, 0, 0, 0, 0, 0, 0]);
        }
        let first = c.allreduce(&[1i64], Reduction::Sum).map(drop);
        let later = c.barrier();
        (first, later, c.sequence())
    });
    let e = out[0].0.as_ref().unwrap_err();
    match e {
        Error::CollectiveMismatch(MismatchError::Header {
            from: 2,
            field: "sequence",
            expected: 2,
            got: 99,
        }) => {}
        other => panic!("{other}"),
    }
    assert_eq!(code(e), 1617);
    for r in [1, 2] {
        assert_aborted_by(
            out[r].0.as_ref().unwrap_err(),
            0,
            AbortReason::CollectiveMismatch,
            1617,
        );
    }
    // Every later call fails too, with the same error, and still counts.
    for (first, later, seq) in &out {
        assert_eq!(first.as_ref().unwrap_err(), later.as_ref().unwrap_err());
        assert_eq!(*seq, 3);
    }
}

#[test]
fn every_forged_header_field_is_h1617() {
    // (offset, bytes, field) of the collective header (protocol §7.3).
    let cases: [(usize, &'static [u8], &str); 5] = [
        (0, &[4], "operation"),     // allreduce instead of reduce
        (1, &[2], "element_type"),  // u32 instead of i32
        (2, &[4], "reduction"),     // max instead of sum
        (3, &[1], "phase"),         // from the root
        (4, &[1, 0, 0, 0], "root"), // root 1
    ];
    for (at, value, field) in cases {
        let out = fake::run(3, |c| {
            if c.rank() == 1 {
                forge(c.link(), at, value);
            }
            c.reduce(0, &[7i32], Reduction::Sum).map(drop)
        });
        match out[0].as_ref().unwrap_err() {
            Error::CollectiveMismatch(MismatchError::Header {
                from: 1, field: f, ..
            }) => {
                assert_eq!(*f, field)
            }
            other => panic!("{field}: {other}"),
        }
    }
}

#[test]
fn truncated_result_ends_the_job() {
    // Rank 0 cuts the allreduce result it sends to rank 1.
    let out = fake::run(3, |c| {
        if c.rank() == 0 {
            c.link().set_send_hook(|to, mut p| {
                if to == 1 {
                    p.truncate(p.len() - 4);
                }
                vec![p]
            });
        }
        let a = c.allreduce(&[1u32, 2], Reduction::Sum).map(drop);
        let b = c.barrier();
        (a, b)
    });
    let e = out[1].0.as_ref().unwrap_err();
    assert!(
        matches!(
            e,
            Error::CollectiveMismatch(MismatchError::Length {
                from: 0,
                expected: 8,
                got: 4
            })
        ),
        "{e}"
    );
    // Ranks 0 and 2 had finished the allreduce; their next call sees the ABORT.
    for r in [0, 2] {
        assert_job_ended(
            &out[r].0,
            &out[r].1,
            1,
            AbortReason::CollectiveMismatch,
            1617,
        );
    }
}

#[test]
fn non_empty_barrier_and_ragged_bcast_are_h1617() {
    // Three ranks: the others wait for rank 0's release (at two, rank 0
    // releases as it enters, protocol §19.2: tests/collective/pair.rs).
    let out = fake::run(3, |c| {
        if c.rank() == 1 {
            c.link().set_send_hook(|_, mut p| {
                p.push(0);
                vec![p]
            });
        }
        c.barrier()
    });
    assert_eq!(code(out[0].as_ref().unwrap_err()), 1617);
    for r in [1, 2] {
        assert_aborted_by(
            out[r].as_ref().unwrap_err(),
            0,
            AbortReason::CollectiveMismatch,
            1617,
        );
    }

    // A bcast of i32 that arrives with 7 bytes.
    let out = fake::run(2, |c| {
        if c.rank() == 0 {
            c.link().set_send_hook(|_, mut p| {
                p.pop();
                vec![p]
            });
        }
        let mut v = vec![1i32, 2];
        c.bcast(0, &mut v)
    });
    assert!(out[0].is_ok());
    assert_eq!(code(out[1].as_ref().unwrap_err()), 1617);
}

#[test]
fn undecodable_collective_payload_is_a_rejected_frame() {
    // docs/sperli-protocol.md §8.4: a payload shorter than 16 bytes or a
    // header no call can have does not decode: H1610, ABORT reason 7.
    for bad in [vec![3u8, 1, 1], {
        let mut p = vec![3u8, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        p[3] = 2; // phase 2
        p
    }] {
        let out = fake::run(2, move |c| {
            if c.rank() == 1 {
                let bad = bad.clone();
                c.link().set_send_hook(move |_, _| vec![bad.clone()]);
            }
            c.reduce(0, &[1i32], Reduction::Sum).map(drop)
        });
        let e = out[0].as_ref().unwrap_err();
        assert_eq!(code(e), 1610, "{e}");
        // Rank 1 (non-root reduce) returned after sending.
        assert!(out[1].is_ok());
    }
}

#[test]
fn reduce_contributions_of_different_lengths_are_h1618() {
    let out = fake::run(3, |c| {
        let len = if c.rank() == 2 { 3 } else { 2 };
        let r = c.reduce(0, &vec![1i64; len], Reduction::Sum).map(drop);
        let a = c.allreduce(&[1i64], Reduction::Sum).map(drop);
        (r, a)
    });
    let e = out[0].0.as_ref().unwrap_err();
    assert_eq!(code(e), 1618, "{e}");
    assert_eq!(out[0].1.as_ref().unwrap_err(), e);
    for r in [1, 2] {
        assert!(out[r].0.is_ok(), "non-roots return after sending");
        assert_aborted_by(
            out[r].1.as_ref().unwrap_err(),
            0,
            AbortReason::CollectiveMismatch,
            1618,
        );
    }
    // allreduce: the non-roots wait for the result and see the ABORT there.
    let out = fake::run(3, |c| {
        let len = if c.rank() == 1 { 1 } else { 2 };
        c.allreduce(&vec![1.0f32; len], Reduction::Sum).map(drop)
    });
    assert_eq!(code(out[0].as_ref().unwrap_err()), 1618);
    for r in [1, 2] {
        assert_aborted_by(
            out[r].as_ref().unwrap_err(),
            0,
            AbortReason::CollectiveMismatch,
            1618,
        );
    }
}

#[test]
fn gather_blocks_of_different_lengths_are_h1617() {
    let out = fake::run(3, |c| {
        let len = if c.rank() == 0 { 3 } else { 2 };
        let g = c.gather(1, &vec![c.rank() as u8; len]).map(drop);
        let b = c.barrier();
        (g, b)
    });
    let e = out[1].0.as_ref().unwrap_err();
    assert!(
        matches!(
            e,
            Error::CollectiveMismatch(MismatchError::Length {
                from: 0,
                expected: 2,
                got: 3
            })
        ),
        "{e}"
    );
    assert!(out[0].0.is_ok(), "rank 0 sent before the root looked");
    for r in [0, 2] {
        assert_job_ended(
            &out[r].0,
            &out[r].1,
            1,
            AbortReason::CollectiveMismatch,
            1617,
        );
    }
}

#[test]
fn invalid_scatter_at_root_is_h1618_there_and_h1612_elsewhere() {
    // Not a multiple of size.
    let out = fake::run(3, |c| c.scatter(2, Some(&[1u32, 2, 3, 4][..])).map(drop));
    assert_eq!(code(out[2].as_ref().unwrap_err()), 1618);
    for r in [0, 1] {
        assert_aborted_by(
            out[r].as_ref().unwrap_err(),
            2,
            AbortReason::InvalidScatter,
            1618,
        );
    }
    // Blocks longer than one frame.
    let out = fake::run(2, |c| {
        let data = if c.rank() == 0 {
            vec![0u8; 2 * (MAX_COLLECTIVE_DATA + 1)]
        } else {
            vec![]
        };
        c.scatter(0, Some(&data[..])).map(drop)
    });
    assert_eq!(code(out[0].as_ref().unwrap_err()), 1618);
    assert_aborted_by(
        out[1].as_ref().unwrap_err(),
        0,
        AbortReason::InvalidScatter,
        1618,
    );
    // alltoall: the rank with bad data ends the job at once.
    let out = fake::run(3, |c| {
        let len = if c.rank() == 1 { 4 } else { 3 };
        c.alltoall(&vec![0i32; len]).map(drop)
    });
    assert_eq!(code(out[1].as_ref().unwrap_err()), 1618);
    for r in [0, 2] {
        assert_aborted_by(
            out[r].as_ref().unwrap_err(),
            1,
            AbortReason::InvalidScatter,
            1618,
        );
    }
}

#[test]
fn bcast_longer_than_a_frame_is_one_call_with_bit_1() {
    let out = fake::run(3, |c| {
        let mut v = if c.rank() == 1 {
            vec![7u8; MAX_COLLECTIVE_DATA + 1]
        } else {
            vec![]
        };
        c.bcast(1, &mut v).unwrap();
        (v.len(), v.iter().all(|&x| x == 7), c.sequence())
    });
    assert_eq!(out, vec![(MAX_COLLECTIVE_DATA + 1, true, 1); 3]);
}

#[test]
fn bcast_longer_than_a_frame_at_root_ends_a_v1_job() {
    // In a v1 job the receivers of a bcast do not know the length, so it
    // is one v1 call (protocol §8.5).
    let v1 = FakePeers::job_with_features(&[FEATURE_V1_CORE; 3]);
    let out = fake::run_links(v1, |c| {
        let mut v = if c.rank() == 1 {
            vec![0u8; MAX_COLLECTIVE_DATA + 1]
        } else {
            vec![]
        };
        c.bcast(1, &mut v)
    });
    assert_eq!(code(out[1].as_ref().unwrap_err()), 1618);
    for r in [0, 2] {
        assert_aborted_by(
            out[r].as_ref().unwrap_err(),
            1,
            AbortReason::CollectiveMismatch,
            1618,
        );
    }
}

#[test]
fn a_peer_that_leaves_is_h1613_not_a_hang() {
    let out = fake::run(3, |c| {
        if c.rank() == 2 {
            return None; // leaves without a word (its link is dropped)
        }
        Some(c.gather(0, &[1u8]).map(drop))
    });
    assert_eq!(code(out[0].as_ref().unwrap().as_ref().unwrap_err()), 1613);
}

// ---- size 1: no link traffic ----------------------------------------------

/// A link of size 1 that fails the test on any traffic.
struct Silent;

impl Peers for Silent {
    fn rank(&self) -> u32 {
        0
    }
    fn size(&self) -> u32 {
        1
    }
    fn send_collective(&self, to: u32, _: &[u8]) -> Result<(), Error> {
        panic!("size 1 sent to {to}")
    }
    fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
        panic!("size 1 received from {from}")
    }
    fn abort(&self, _: AbortReason, _: u32, _: &str) {}
}

#[test]
fn size_one_completes_without_link_traffic() {
    let c = Comm::new(Silent);
    c.barrier().unwrap();
    let mut v = vec![1.5f32];
    c.bcast(0, &mut v).unwrap();
    assert_eq!(v, [1.5]);
    assert_eq!(
        c.reduce(0, &[3i32], Reduction::Prod).unwrap(),
        Some(vec![3])
    );
    assert_eq!(c.allreduce(&[4u64], Reduction::Max).unwrap(), [4]);
    assert_eq!(c.gather(0, &[9u8]).unwrap(), Some(vec![9]));
    assert_eq!(c.scatter(0, Some(&[1i64, 2][..])).unwrap(), [1, 2]);
    assert_eq!(c.allgather(&[5u32]).unwrap(), [5]);
    assert_eq!(
        c.reduce_scatter(&[5u32, 6], Reduction::Sum).unwrap(),
        [5, 6]
    );
    assert_eq!(c.alltoall(&[5u32, 6]).unwrap(), [5, 6]);
    assert_eq!(
        c.allreduce(&[1.0f64; 10], Reduction::Sum).unwrap(),
        [1.0; 10]
    );
    let mut big = vec![3u8; 20];
    c.bcast_counted(0, &mut big).unwrap();
    assert_eq!(big, [3; 20]);
    // The checks still apply (protocol §8.7).
    assert_eq!(
        code(&c.allreduce(&[1u8], Reduction::Sum).unwrap_err()),
        1618
    );
    assert_eq!(
        code(&c.reduce(1, &[1i32], Reduction::Sum).unwrap_err()),
        1618
    );
    // The `_into` forms: the contribution copied into the caller's buffer,
    // the same checks.
    let mut out = [0.0f64; 3];
    c.allreduce_into(&[1.0, -2.0, 3.5], &mut out, Reduction::Sum)
        .unwrap();
    assert_eq!(out, [1.0, -2.0, 3.5]);
    assert!(c
        .reduce_into(0, &[4.0f64, 5.0, 6.0], &mut out, Reduction::Min)
        .unwrap());
    assert_eq!(out, [4.0, 5.0, 6.0]);
    let refused = c.allreduce_into(&[1u8], &mut [0], Reduction::Sum);
    assert_eq!(code(&refused.unwrap_err()), 1618);
    assert_eq!(c.sequence(), 19);
}

// ---- large arrays ----------------------------------------------------------

#[test]
fn allreduce_of_64_mib() {
    // The v1 split; with feature bit 1 it is one call (pipelined_fake.rs).
    let n = (64 << 20) / 8;
    let out = fake::run_links(v1_job(2), |c| {
        let mine: Vec<f64> = (0..n)
            .map(|i| (i % 1000) as f64 + f64::from(c.rank()))
            .collect();
        let r = c.allreduce(&mine, Reduction::Sum).unwrap();
        let ok = r
            .iter()
            .enumerate()
            .all(|(i, x)| *x == 2.0 * (i % 1000) as f64 + 1.0);
        (r.len(), ok, c.sequence())
    });
    // 67108864 bytes in chunks of 16777200: 5 v1 calls.
    assert_eq!(out, vec![(n, true, 5); 2]);
}

#[test]
fn chunked_calls_match_single_calls() {
    for size in SIZES {
        let out = fake::run(size, |c| {
            let mine = data_of::<i32>(c.rank(), 7, 11);
            let whole = c.allreduce(&mine, Reduction::Bxor).unwrap();
            let chunked = c.allreduce_chunked(&mine, Reduction::Bxor, 3).unwrap();
            assert_eq!(whole, chunked);
            let red = c.reduce_chunked(0, &mine, Reduction::Min, 4).unwrap();
            let mut b = if c.rank() == 0 {
                mine.clone()
            } else {
                vec![9; 2]
            };
            c.bcast_chunked(0, &mut b, 5).unwrap();
            let mut empty: Vec<u64> = vec![1; usize::from(c.rank() != 0)];
            c.bcast_chunked(0, &mut empty, 5).unwrap();
            assert!(empty.is_empty());
            // 1 + 4 (11 in 3s) + 3 (11 in 4s) + 1 + 3 (11 in 5s) + 1 (empty: count only).
            (whole, red, b, c.sequence())
        });
        let want = reference::<i32>(size, 7, 11, Reduction::Bxor);
        let min = reference::<i32>(size, 7, 11, Reduction::Min);
        for (rank, (whole, red, b, seq)) in out.into_iter().enumerate() {
            assert_eq!(whole, want);
            assert_eq!(red, (rank == 0).then(|| min.clone()));
            assert_eq!(b, data_of::<i32>(0, 7, 11));
            assert_eq!(seq, 13);
        }
    }
}

// ---- what MPI users expect -------------------------------------------------

#[test]
fn composites_at_1_2_3_8_ranks() {
    for size in SIZES {
        let s = size as usize;
        let out = fake::run(size, |c| {
            let me = c.rank();
            let ag = c.allgather(&[me, me + 100]).unwrap();
            let rs = c
                .reduce_scatter(&(0..2 * size).collect::<Vec<u32>>(), Reduction::Sum)
                .unwrap();
            let mine: Vec<u64> = (0..size).map(|j| u64::from(me * 1000 + j)).collect();
            let at = c.alltoall(&mine).unwrap();
            let sc = c.allreduce_scalar(me as i64, Reduction::Max).unwrap();
            let rsc = c.reduce_scalar(0, 1.0f32, Reduction::Sum).unwrap();
            let b = c.bcast_scalar(size - 1, me as u8).unwrap();
            let mut into = vec![0u32; 2];
            c.scatter_into(
                0,
                (me == 0).then_some(&(0..2 * size).collect::<Vec<_>>()[..]),
                &mut into,
            )
            .unwrap();
            (ag, rs, at, sc, rsc, b, into, c.sequence())
        });
        let ag: Vec<u32> = (0..size).flat_map(|r| [r, r + 100]).collect();
        for (me, (g, rs, at, sc, rsc, b, into, seq)) in out.into_iter().enumerate() {
            let m = me as u32;
            assert_eq!(g, ag);
            assert_eq!(rs, [2 * m * size, (2 * m + 1) * size]);
            assert_eq!(
                at,
                (0..size)
                    .map(|k| u64::from(k * 1000 + m))
                    .collect::<Vec<_>>()
            );
            assert_eq!(sc, i64::from(size) - 1);
            assert_eq!(rsc, (me == 0).then_some(size as f32));
            assert_eq!(b, (size - 1) as u8);
            assert_eq!(into, [2 * m, 2 * m + 1]);
            // 2 + 2 + size + 1 + 1 + 1 + 1
            assert_eq!(seq, 8 + size as u64, "size {s}");
        }
    }
}

#[test]
fn reduce_into_with_a_wrong_root_buffer_ends_the_job() {
    let out = fake::run(3, |c| {
        let mut out = [0i32; 1];
        let r = c
            .reduce_into(0, &[1, 2], &mut out, Reduction::Sum)
            .map(drop);
        (r, c.barrier())
    });
    let e = out[0].0.as_ref().unwrap_err();
    assert_eq!(code(e), 1618);
    for r in [1, 2] {
        assert_job_ended(
            &out[r].0,
            &out[r].1,
            0,
            AbortReason::CollectiveMismatch,
            1618,
        );
    }
}

#[test]
fn gather_into_gives_the_root_what_gather_gives() {
    for n in 1..=5u32 {
        let out = fake::run(n, |c| {
            let mine: Vec<f64> = (0..7)
                .map(|i| f64::from(c.rank()) * 10.0 + f64::from(i))
                .collect();
            let whole = c.gather(n - 1, &mine).unwrap();
            let mut into = if c.rank() == n - 1 {
                vec![f64::NAN; 7 * n as usize]
            } else {
                Vec::new()
            };
            let at_root = c.gather_into(n - 1, &mine, &mut into).unwrap();
            (whole, at_root, into)
        });
        for (r, (whole, at_root, into)) in out.into_iter().enumerate() {
            let root = r as u32 == n - 1;
            assert_eq!(at_root, root, "n={n} rank {r}");
            if root {
                assert_eq!(whole.as_deref(), Some(&into[..]), "n={n}");
            } else {
                assert!(whole.is_none() && into.is_empty(), "n={n} rank {r}");
            }
        }
    }
}

#[test]
fn gather_into_with_a_wrong_root_buffer_ends_the_job() {
    let out = fake::run(3, |c| {
        let mut out = [0u8; 5]; // 3 blocks of 2 need 6
        let r = c.gather_into(0, &[1u8, 2], &mut out).map(drop);
        (r, c.barrier())
    });
    assert_eq!(code(out[0].0.as_ref().unwrap_err()), 1618);
    for r in [1, 2] {
        assert_job_ended(
            &out[r].0,
            &out[r].1,
            0,
            AbortReason::CollectiveMismatch,
            1618,
        );
    }
}
