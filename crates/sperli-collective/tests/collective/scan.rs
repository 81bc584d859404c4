//! scan and exscan (protocol §8.9): every rank's prefix bit for bit as a
//! serial left fold of ranks 0 ..= i (0 .. i), for every reduction of i64,
//! f64 and u8 at 1, 2, 3 and 5 ranks; refusals every rank makes alone
//! (H1618, both calls counted); descriptors that differ (H1617 at rank 0);
//! one scan over TLS.

use std::time::Duration;

use sperli_collective::fake;
use sperli_collective::prelude::*;
use sperli_wire::error::MismatchError;

use crate::common::{assert_aborted_by, data_of, reference, same_bits, Ref};
use crate::tls::{run_job, tls_test_within};

/// Every rank's scan and exscan of `len` elements against the reference
/// fold of the ranks before it.
fn prefixes_match<T: Ref + Send + Sync + 'static>(size: u32, r: Reduction, len: usize) {
    let salt = 0x5ca7 ^ r.code() as u64;
    let out = fake::run(size, move |c| {
        let mine = data_of::<T>(c.rank(), salt, len);
        let s = c.scan(&mine, r).unwrap();
        let e = c.exscan(&mine, r).unwrap();
        (s, e)
    });
    for (i, (s, e)) in out.iter().enumerate() {
        let i = i as u32;
        let what = format!("{r:?} at rank {i} of {size}");
        same_bits(
            s,
            &reference::<T>(i + 1, salt, len, r),
            r,
            &format!("scan {what}"),
        );
        match (i, e) {
            (0, None) => {}
            (0, Some(_)) => panic!("exscan gave rank 0 a result"),
            (_, Some(e)) => same_bits(
                e,
                &reference::<T>(i, salt, len, r),
                r,
                &format!("exscan {what}"),
            ),
            (_, None) => panic!("exscan {what}: no result"),
        }
    }
}

#[test]
fn prefixes_are_left_folds_in_rank_order_for_every_reduction() {
    for size in [1, 2, 3, 5] {
        for r in Reduction::V1 {
            prefixes_match::<i64>(size, r, 7);
        }
        for r in [
            Reduction::Sum,
            Reduction::Prod,
            Reduction::Min,
            Reduction::Max,
        ] {
            prefixes_match::<f64>(size, r, 9);
        }
        for r in [Reduction::Band, Reduction::Bor, Reduction::Bxor] {
            prefixes_match::<u8>(size, r, 5);
        }
    }
    // No elements: every rank gets an empty prefix.
    prefixes_match::<i64>(3, Reduction::Sum, 0);
}

#[test]
fn a_reduction_the_type_refuses_is_h1618_on_every_rank_and_counts_both_calls() {
    let out = fake::run(3, |c| {
        let e = c.scan(&[1.5f64], Reduction::Band).unwrap_err();
        let x = c.exscan(&[1.5f64], Reduction::Lor).unwrap_err();
        // The sequence went on by two calls each: the ranks still agree.
        let after = c.allreduce_scalar(1u32, Reduction::Sum).unwrap();
        (e.h_code(), x.h_code(), after)
    });
    for (e, x, after) in out {
        assert_eq!(e, Some(HCode::H1618));
        assert_eq!(x, Some(HCode::H1618));
        assert_eq!(after, 3);
    }
}

#[test]
fn another_reduction_on_one_rank_is_h1617_at_rank_0() {
    let out = fake::run(3, |c| {
        let r = if c.rank() == 2 {
            Reduction::Max
        } else {
            Reduction::Sum
        };
        let first = c.scan(&[1i64, 2], r).map(drop);
        (first, c.barrier())
    });
    match &out[0].0 {
        Err(Error::CollectiveMismatch(MismatchError::Header {
            from: 2,
            field: "reduction",
            expected,
            got,
        })) => {
            assert_eq!(*expected, u64::from(Reduction::Sum.code()));
            assert_eq!(*got, u64::from(Reduction::Max.code()));
        }
        other => panic!("{other:?}"),
    }
    for (first, later) in &out[1..] {
        assert_aborted_by(
            later.as_ref().unwrap_err(),
            0,
            AbortReason::CollectiveMismatch,
            1617,
        );
        if let Err(e) = first {
            assert_aborted_by(e, 0, AbortReason::CollectiveMismatch, 1617);
        }
    }
}

#[test]
fn scan_on_one_rank_and_exscan_on_another_is_h1617_at_rank_0() {
    let out = fake::run(2, |c| {
        let first = if c.rank() == 0 {
            c.scan(&[1u32], Reduction::Sum).map(drop)
        } else {
            c.exscan(&[1u32], Reduction::Sum).map(drop)
        };
        (first, c.barrier())
    });
    match &out[0].0 {
        Err(Error::CollectiveMismatch(MismatchError::Header {
            from: 1,
            field: "scan kind",
            expected: 1,
            got: 2,
        })) => {}
        other => panic!("{other:?}"),
    }
    assert_aborted_by(
        out[1].1.as_ref().unwrap_err(),
        0,
        AbortReason::CollectiveMismatch,
        1617,
    );
}

#[test]
fn a_scan_over_tls_between_real_ranks() {
    tls_test_within(Duration::from_secs(60), || {
        let out = run_job(
            4,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let r = c.rank() as f64;
                let s = c.scan(&[r + 0.5, -r], Reduction::Sum).unwrap();
                let e = c.exscan(&[c.rank() + 1], Reduction::Prod).unwrap();
                (s, e)
            },
        );
        let mut acc = [0.0f64, 0.0];
        let mut prod = 1u32;
        for (i, (s, e)) in out.iter().enumerate() {
            acc[0] += i as f64 + 0.5;
            acc[1] += -(i as f64);
            assert_eq!(s, &acc.to_vec(), "rank {i}");
            assert_eq!(e, &(i > 0).then(|| vec![prod]), "rank {i}");
            prod *= i as u32 + 1;
        }
    });
}
