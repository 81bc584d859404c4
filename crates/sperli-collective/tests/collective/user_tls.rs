//! User-defined reductions (protocol §17.4) between real ranks over TLS
//! 1.3 on 127.0.0.0/8, at 3 and 5 ranks: every call that takes the
//! program's function against a serial left fold of every rank's data,
//! with functions that are not commutative (so any other order gives other
//! bits), the function running at the folding rank only; a rank with a
//! built-in reduction where the others have a user one (H1617); and a job
//! without feature bit 4 (H1618 on every rank, the job goes on).

use std::cell::Cell;

use sperli_collective::{AbortReason, Comm, Endpoint};
use sperli_transport::Settings;
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_ELEMENT_TYPES};

use crate::common::{assert_job_ended, code, xorshift};
use crate::tls::{run_job, run_job_with, settings, tls_test};

/// "31 · left + right", wrapping: not commutative, and the order of a
/// fold shows in every bit.
fn horner(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.wrapping_mul(31).wrapping_add(*y);
    }
}

/// "1.5 · left − right" in f64: not commutative, and rounded at each
/// step, so a fold in another order or shape differs in the low bits.
fn damp(a: &mut [f64], b: &[f64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = 1.5 * *x - *y;
    }
}

fn data_u64(rank: u32, len: usize) -> Vec<u64> {
    let mut s = 0x9e37_79b9_7f4a_7c15 ^ ((u64::from(rank) + 1) * 0x1000_0001);
    (0..len).map(|_| xorshift(&mut s)).collect()
}

fn data_f64(rank: u32, len: usize) -> Vec<f64> {
    data_u64(rank, len)
        .into_iter()
        .map(|x| (x >> 11) as f64 / (1u64 << 40) as f64 - 2048.0)
        .collect()
}

/// The serial left fold of ranks `0 ..= last`.
fn left_fold<T: Clone>(parts: &[Vec<T>], last: usize, f: impl Fn(&mut [T], &[T])) -> Vec<T> {
    let mut acc = parts[0].clone();
    for p in &parts[1..=last] {
        f(&mut acc, p);
    }
    acc
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every call with a user function on `c`, checked against the serial
/// fold; counts the function's calls on each rank.
fn every_user_call(c: &Comm<Endpoint>) {
    let (me, n) = (c.rank(), c.size());
    let len = 3 * n as usize;
    let all_u: Vec<Vec<u64>> = (0..n).map(|r| data_u64(r, len)).collect();
    let all_f: Vec<Vec<f64>> = (0..n).map(|r| data_f64(r, len)).collect();
    let full_u = left_fold(&all_u, n as usize - 1, horner);
    let full_f = left_fold(&all_f, n as usize - 1, damp);
    let mine_u = &all_u[me as usize];
    let mine_f = &all_f[me as usize];

    for root in 0..n {
        let calls = Cell::new(0u32);
        let got = c
            .reduce_with(root, mine_u, |a, b| {
                calls.set(calls.get() + 1);
                horner(a, b)
            })
            .unwrap();
        if me == root {
            assert_eq!(got.as_deref(), Some(&full_u[..]), "reduce_with root {root}");
            assert_eq!(calls.get(), n - 1, "the root folds n - 1 times");
        } else {
            assert_eq!(got, None);
            assert_eq!(calls.get(), 0, "only the root folds");
        }
        let got = c.reduce_with(root, mine_f, damp).unwrap();
        if me == root {
            assert_eq!(
                bits(&got.unwrap()),
                bits(&full_f),
                "reduce_with f64 root {root}"
            );
        }
    }
    assert_eq!(c.allreduce_with(mine_u, horner).unwrap(), full_u);
    assert_eq!(
        bits(&c.allreduce_with(mine_f, damp).unwrap()),
        bits(&full_f)
    );

    let block = len / n as usize;
    let mine_block = &full_u[me as usize * block..(me as usize + 1) * block];
    assert_eq!(c.reduce_scatter_with(mine_u, horner).unwrap(), mine_block);

    let prefix = left_fold(&all_f, me as usize, damp);
    assert_eq!(bits(&c.scan_with(mine_f, damp).unwrap()), bits(&prefix));
    let ex = c.exscan_with(mine_u, horner).unwrap();
    if me == 0 {
        assert_eq!(ex, None);
    } else {
        assert_eq!(ex.unwrap(), left_fold(&all_u, me as usize - 1, horner));
    }

    // The byte forms: the function sees little-endian u64 elements.
    let on_bytes = |a: &mut [u8], b: &[u8]| {
        for (x, y) in a.chunks_exact_mut(8).zip(b.chunks_exact(8)) {
            let mut v = [u64::from_le_bytes(x.try_into().unwrap())];
            horner(&mut v, &[u64::from_le_bytes(y.try_into().unwrap())]);
            x.copy_from_slice(&v[0].to_le_bytes());
        }
    };
    let le = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let t = ElementType::U64.code();
    let root = n - 1;
    let got = c.reduce_bytes_with(root, &le(mine_u), t, on_bytes).unwrap();
    assert_eq!(got, (me == root).then(|| le(&full_u)));
    assert_eq!(
        c.allreduce_bytes_with(&le(mine_u), t, on_bytes).unwrap(),
        le(&full_u)
    );
    let got = c.scan_bytes_with(&le(mine_u), t, false, on_bytes).unwrap();
    assert_eq!(got, le(&left_fold(&all_u, me as usize, horner)));
    let got = c.scan_bytes_with(&le(mine_u), t, true, on_bytes).unwrap();
    if me > 0 {
        assert_eq!(got, le(&left_fold(&all_u, me as usize - 1, horner)));
    }
    // Data that is not whole elements: H1618 on every rank, nothing sent.
    let e = c.allreduce_bytes_with(&[0; 7], t, on_bytes).unwrap_err();
    assert_eq!(code(&e), 1618);
    // The job goes on.
    assert_eq!(c.allreduce(&[1u32], Reduction::Sum).unwrap(), [n]);
}

#[test]
fn tls_user_reductions_fold_ascending_at_3_ranks() {
    tls_test(|| run_job(3, |ep| ep, |c| every_user_call(&c)));
}

#[test]
fn tls_user_reductions_fold_ascending_at_5_ranks() {
    tls_test(|| run_job(5, |ep| ep, |c| every_user_call(&c)));
}

#[test]
fn tls_a_builtin_reduction_against_a_user_one_ends_the_job() {
    tls_test(|| {
        let out = run_job(
            3,
            |ep| ep,
            |c| {
                // Every rank is set up before rank 0's ABORT can come (a rank
                // still verifying a HELLO would end its set-up with it), and
                // has its barrier: the mismatch is the last rank's, so rank 0
                // sees it only after every rank sent its allreduce frame,
                // after its barrier returned (a barrier still waiting for
                // rank 0's release when the ABORT is read fails with it).
                c.barrier().unwrap();
                let first = if c.rank() == 2 {
                    c.allreduce(&[1u64], Reduction::Sum).map(drop)
                } else {
                    c.allreduce_with(&[1u64], horner).map(drop)
                };
                let later = c.barrier();
                (c.rank(), first, later)
            },
        );
        for (rank, first, later) in out {
            if rank == 0 {
                // Rank 0 folds: rank 2's header says reduction 1, not 13.
                assert_eq!(code(first.as_ref().unwrap_err()), 1617);
            } else {
                assert_job_ended(&first, &later, 0, AbortReason::CollectiveMismatch, 1617);
            }
        }
    });
}

#[test]
fn tls_without_bit_4_a_user_reduction_is_refused_on_every_rank() {
    tls_test(|| {
        let out = run_job_with(
            3,
            |r| Settings {
                features: if r == 1 {
                    FEATURES_IMPLEMENTED & !FEATURE_ELEMENT_TYPES
                } else {
                    FEATURES_IMPLEMENTED
                },
                ..settings()
            },
            |ep| ep,
            |c| {
                let a = c.allreduce_with(&[1u64], horner).unwrap_err();
                let s = c.scan_with(&[1u64], horner).unwrap_err();
                let r = c.reduce_scatter_with(&[1u64; 3], horner).unwrap_err();
                let after = c.allreduce(&[2u64], Reduction::Sum).unwrap();
                (code(&a), code(&s), code(&r), after)
            },
        );
        assert!(
            out.iter().all(|o| *o == (1618, 1618, 1618, vec![6])),
            "{out:?}"
        );
    });
}
