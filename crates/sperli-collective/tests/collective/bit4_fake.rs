//! HELLO feature bit 4 (protocol §17) on the fake link: every new element
//! type with each of its reductions, MINLOC and MAXLOC among them, through
//! every call that folds (reduce, allreduce, reduce_scatter, scan, exscan;
//! the star and, above the pipelining threshold, the chains of bit 1) at
//! 3 and 5 ranks, checked against the serial left fold of `bit4_ref`; the
//! frames carry the new codes. A job where one rank lacks bit 4 refuses
//! them with H1618 before anything is sent and runs v1 calls with the same
//! bytes as ever.

use std::sync::{Arc, Mutex};

use sperli_collective::fake::{run_links, FakePeers};
use sperli_collective::{Comm, Complex128, Complex64, Peers, ValueIndex};
use sperli_wire::element::Reduction;
use sperli_wire::error::ArgumentError;
use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_ELEMENT_TYPES, FEATURE_V1_CORE};
use sperli_wire::pipeline::PIPELINE_MIN_BYTES;
use sperli_wire::Error;

use crate::bit4_ref::*;
use crate::common::code;

/// Every feature this implementation has, and bit 4.
pub(crate) const WITH_BIT4: u64 = FEATURES_IMPLEMENTED | FEATURE_ELEMENT_TYPES;

/// Elements per rank, a multiple of `n` (reduce_scatter): a few, or just
/// above the pipelining threshold (protocol §14.5) and not a whole number
/// of 64 KiB chunks.
pub(crate) fn lens<T: Ref4>(n: u32) -> [usize; 2] {
    let n = n as usize;
    let big = (PIPELINE_MIN_BYTES as usize / T::WIDTH).div_ceil(n) * n + 3 * n;
    [5 * n, big]
}

/// Every folding call of `T` with each of its reductions on this rank,
/// each result checked against the serial left fold (protocol §17.3).
pub(crate) fn every_call<T: Ref4, L: Peers>(c: &Comm<L>, salt: u64, len: usize) {
    let (me, n) = (c.rank(), c.size());
    let what = |call: &str, r: Reduction| format!("{} {call} {r} n={n} len={len}", T::ELEMENT_TYPE);
    for (k, r) in T::reductions().into_iter().enumerate() {
        let salt = salt ^ (k as u64) << 32;
        let data = data4::<T>(me, salt, len);
        // prefix[i]: the serial left fold of ranks 0..=i.
        let prefix = prefixes::<T>(n, salt, len, r);
        let all = &prefix[n as usize - 1];
        same4(&c.allreduce(&data, r).unwrap(), all, &what("allreduce", r));
        let root = n - 1;
        match c.reduce(root, &data, r).unwrap() {
            Some(got) => same4(&got, all, &what("reduce", r)),
            None => assert_ne!(me, root),
        }
        let b = len / n as usize;
        let block = &all[me as usize * b..(me as usize + 1) * b];
        same4(
            &c.reduce_scatter(&data, r).unwrap(),
            block,
            &what("reduce_scatter", r),
        );
        same4(
            &c.scan(&data, r).unwrap(),
            &prefix[me as usize],
            &what("scan", r),
        );
        match c.exscan(&data, r).unwrap() {
            Some(got) => same4(&got, &prefix[me as usize - 1], &what("exscan", r)),
            None => assert_eq!(me, 0),
        }
    }
}

/// The header bytes (operation, element type, reduction, phase) and the
/// whole payload of every COLLECTIVE frame a job sent, by sender and
/// receiver.
type Trace = Arc<Mutex<Vec<(u32, u32, Vec<u8>)>>>;

fn traced(links: Vec<FakePeers>) -> (Vec<FakePeers>, Trace) {
    let trace: Trace = Arc::default();
    for l in &links {
        let (t, me) = (trace.clone(), l.rank());
        l.set_send_hook(move |to, p| {
            t.lock().unwrap().push((me, to, p.clone()));
            vec![p]
        });
    }
    (links, trace)
}

/// Runs [`every_call`] for `T` at `n` ranks with bit 4; checks the frames.
fn fake_type<T: Ref4>(n: u32, salt: u64) {
    for (i, len) in lens::<T>(n).into_iter().enumerate() {
        let (links, trace) = traced(FakePeers::job_with_features(&vec![WITH_BIT4; n as usize]));
        run_links(links, |c| every_call::<T, _>(c, salt + i as u64, len));
        let trace = trace.lock().unwrap();
        // The reducing frames (reduce 3, allreduce 4, reduce_scatter 8)
        // carry the new codes (protocol §17.1).
        let reducing: Vec<_> = trace
            .iter()
            .filter(|f| matches!(f.2[0], 3 | 4 | 8))
            .collect();
        assert!(!reducing.is_empty());
        for (_, _, p) in &reducing {
            assert_eq!(
                p[1],
                T::ELEMENT_TYPE.code(),
                "element_type of {:?}",
                &p[..4]
            );
            assert!(T::reductions().iter().any(|r| r.code() == p[2]));
        }
        let pipelined = trace.iter().filter(|f| f.2[3] >= 2).count();
        if i == 1 {
            assert!(
                pipelined > 0,
                "{} n={n}: nothing was pipelined",
                T::ELEMENT_TYPE
            );
        } else {
            assert_eq!(pipelined, 0);
        }
    }
}

fn fake_all_types(n: u32) {
    fake_type::<bool>(n, 1);
    fake_type::<i8>(n, 2);
    fake_type::<i16>(n, 3);
    fake_type::<u16>(n, 4);
    fake_type::<Complex64>(n, 5);
    fake_type::<Complex128>(n, 6);
    fake_type::<ValueIndex<f32>>(n, 7);
    fake_type::<ValueIndex<f64>>(n, 8);
    fake_type::<ValueIndex<i64>>(n, 9);
    fake_type::<ValueIndex<i32>>(n, 10);
    fake_type::<ValueIndex<i16>>(n, 11);
}

#[test]
fn every_new_type_and_minloc_maxloc_at_3_ranks() {
    fake_all_types(3);
}

#[test]
fn every_new_type_and_minloc_maxloc_at_5_ranks() {
    fake_all_types(5);
}

/// The calls with a code of bit 4 that `refuses_without_bit4` makes.
pub(crate) fn refused_calls<L: Peers>(c: &Comm<L>) -> Vec<Result<(), Error>> {
    let n = c.size() as usize;
    let p = [ValueIndex {
        value: 1.0f64,
        index: 0,
    }];
    vec![
        c.allreduce(&[true], Reduction::Land).map(drop),
        c.allreduce(&p, Reduction::Minloc).map(drop),
        c.reduce(0, &[Complex128::default()], Reduction::Prod)
            .map(drop),
        c.reduce_scatter(&vec![1i8; n], Reduction::Sum).map(drop),
        c.scan(&[1u16], Reduction::Max).map(drop),
        c.exscan(
            &[ValueIndex {
                value: 2i32,
                index: 1,
            }],
            Reduction::Maxloc,
        )
        .map(drop),
        c.allreduce(&[1i16], Reduction::Bxor).map(drop),
    ]
}

/// Every refused call is H1618, [`ArgumentError::WithoutBit4`].
pub(crate) fn assert_refused(results: &[Result<(), Error>]) {
    for r in results {
        let e = r.as_ref().expect_err("refused without bit 4");
        assert_eq!(code(e), 1618, "{e}");
        assert!(
            matches!(
                e,
                Error::InvalidArguments(ArgumentError::WithoutBit4 { .. })
            ),
            "{e:?}"
        );
    }
}

/// The v1 calls of the job, whose frames must not change with bit 4.
fn v1_calls<L: Peers>(c: &Comm<L>) -> Vec<u64> {
    let n = u64::from(c.size());
    let me = u64::from(c.rank());
    let a = c.allreduce(&[me, 1], Reduction::Sum).unwrap();
    assert_eq!(a, [n * (n - 1) / 2, n]);
    let s = c.scan(&[me as i32], Reduction::Max).unwrap();
    assert_eq!(s, [me as i32]);
    c.reduce(0, &[1.5f64], Reduction::Prod).unwrap();
    a
}

#[test]
fn one_rank_without_bit_4_refuses_the_new_codes_before_sending_and_runs_as_before() {
    for n in [3u32, 5] {
        let mut announced = vec![WITH_BIT4; n as usize];
        announced[1] = FEATURES_IMPLEMENTED & !FEATURE_ELEMENT_TYPES;
        let (links, trace) = traced(FakePeers::job_with_features(&announced));
        assert!(links
            .iter()
            .all(|l| l.features() & FEATURE_ELEMENT_TYPES == 0));
        run_links(links, |c| {
            assert_refused(&refused_calls(c));
            // A user-defined reduction has no built-in fold either way.
            let e = c.allreduce(&[1u32], Reduction::User).unwrap_err();
            assert_eq!(code(&e), 1618);
            v1_calls(c);
        });
        // Nothing of the refused calls was sent: every frame is a v1 call's.
        let without: Vec<_> = trace.lock().unwrap().clone();
        assert!(without.iter().all(|(_, _, p)| p[1] <= 6 && p[2] <= 10));
        // The same v1 calls in a fresh job without bit 4 and in one with
        // it: the same bytes, frame by frame (protocol §17: bit 4 changes
        // no v1 frame). Fresh jobs, as the refused calls above counted
        // (protocol §8.1) and moved the sequence numbers.
        let (links, t_v1) = traced(FakePeers::job_with_features(&announced));
        run_links(links, |c| {
            v1_calls(c);
        });
        let (links, t_b4) = traced(FakePeers::job_with_features(&vec![WITH_BIT4; n as usize]));
        run_links(links, |c| {
            v1_calls(c);
        });
        let mut a = t_v1.lock().unwrap().clone();
        let mut b = t_b4.lock().unwrap().clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "v1 frames differ with bit 4 at n={n}");
    }
}

#[test]
fn a_v1_only_job_refuses_every_new_code() {
    let links = FakePeers::job_with_features(&[FEATURE_V1_CORE; 3]);
    run_links(links, |c| {
        assert_refused(&refused_calls(c));
        v1_calls(c);
    });
}

/// The other forms of the folding calls (non-blocking, scalar, large, on a
/// split communicator) with the new types, against the serial fold.
#[test]
fn nonblocking_scalar_large_and_split_forms_take_the_new_types() {
    let n = 5u32;
    run_links(
        FakePeers::job_with_features(&vec![WITH_BIT4; n as usize]),
        |c| {
            let me = c.rank();
            let r = Reduction::Maxloc;
            let prefix = prefixes::<ValueIndex<f64>>(n, 77, 9, r);
            let data = data4::<ValueIndex<f64>>(me, 77, 9);
            let req = c.iallreduce(&data, r).unwrap();
            same4(
                &req.wait().unwrap(),
                &prefix[n as usize - 1],
                "iallreduce maxloc",
            );
            same4(
                &c.allreduce(&data, r).unwrap(),
                &prefix[n as usize - 1],
                "allreduce",
            );
            let x = ValueIndex {
                value: (me % 2) as i16,
                index: me as i32,
            };
            let got = c.allreduce_scalar(x, Reduction::Minloc).unwrap();
            assert_eq!(got, ValueIndex { value: 0, index: 0 });
            let p = Reduction::Prod;
            let cx = prefixes::<Complex64>(n, 78, 4, p);
            let req = c.iallreduce(&data4::<Complex64>(me, 78, 4), p).unwrap();
            same4(
                &req.wait().unwrap(),
                &cx[n as usize - 1],
                "iallreduce complex64 prod",
            );
            // A split communicator of the odd and the even ranks folds its
            // members in ascending order too.
            let sub = c.split(Some(me % 2), me as i32).unwrap().expect("a member");
            let got = sub.allreduce(&[x], Reduction::Maxloc).unwrap();
            let want = if me % 2 == 0 { (0, 0) } else { (1, 1) };
            assert_eq!(
                got,
                [ValueIndex {
                    value: want.0,
                    index: want.1
                }]
            );
        },
    );
}
