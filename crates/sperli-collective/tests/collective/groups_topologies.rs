//! Groups, communicators from groups, COMM_SELF and Cartesian topologies
//! (MPI's semantics over split, protocol §15.3) at 1 to 5 ranks on the fake
//! link: MPI's ordering rules on known cases, the ranks of the
//! communicators made, bit-exact folds on them, the H1618 refusals, that
//! COMM_SELF sends nothing, and a job without HELLO feature bit 2.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sperli_collective::fake;
use sperli_collective::prelude::*;

fn g(ranks: &[u32]) -> Group {
    Group::from_job_ranks(ranks, None).unwrap()
}

#[test]
fn group_algebra_follows_mpi_ordering_rules() {
    // The MPI standard's rules with small known cases.
    let a = g(&[5, 1, 3, 7]);
    let b = g(&[7, 2, 1, 6]);
    assert_eq!(a.union(&b).job_ranks(), &[5, 1, 3, 7, 2, 6]);
    assert_eq!(b.union(&a).job_ranks(), &[7, 2, 1, 6, 5, 3]);
    assert_eq!(a.intersection(&b).job_ranks(), &[1, 7]);
    assert_eq!(b.intersection(&a).job_ranks(), &[7, 1]);
    assert_eq!(a.difference(&b).job_ranks(), &[5, 3]);
    assert_eq!(b.difference(&a).job_ranks(), &[2, 6]);
    // With the empty group.
    assert_eq!(a.union(&GROUP_EMPTY), a);
    assert_eq!(GROUP_EMPTY.union(&a).job_ranks(), a.job_ranks());
    assert_eq!(a.intersection(&GROUP_EMPTY).size(), 0);
    assert_eq!(a.difference(&GROUP_EMPTY).job_ranks(), a.job_ranks());
    assert_eq!(GROUP_EMPTY.size(), 0);
    assert_eq!(GROUP_EMPTY.rank(), None);
    // incl keeps the order given, excl the group's.
    assert_eq!(a.incl(&[3, 0]).unwrap().job_ranks(), &[7, 5]);
    assert_eq!(a.excl(&[2, 0]).unwrap().job_ranks(), &[1, 7]);
    assert_eq!(a.incl(&[]).unwrap().size(), 0);
    // Ranges (MPI_Group_range_incl / _excl), strides both ways.
    let w = g(&(0..10).collect::<Vec<_>>());
    assert_eq!(w.range_incl(&[(1, 9, 3)]).unwrap().job_ranks(), &[1, 4, 7]);
    assert_eq!(
        w.range_incl(&[(9, 0, -4), (2, 2, 1)]).unwrap().job_ranks(),
        &[9, 5, 1, 2]
    );
    assert_eq!(w.range_incl(&[(3, 1, 1)]).unwrap().size(), 0);
    assert_eq!(
        w.range_excl(&[(0, 9, 2), (1, 5, 4)]).unwrap().job_ranks(),
        &[3, 7, 9]
    );
    // translate_ranks: UNDEFINED for absent members, PROC_NULL kept.
    assert_eq!(
        a.translate_ranks(&[0, 1, 2, 3, PROC_NULL], &b).unwrap(),
        vec![UNDEFINED, 2, UNDEFINED, 0, PROC_NULL]
    );
    // compare.
    assert_eq!(a.compare(&a.clone()), Comparison::Ident);
    assert_eq!(a.compare(&g(&[7, 5, 3, 1])), Comparison::Similar);
    assert_eq!(a.compare(&b), Comparison::Unequal);
    assert_eq!(a.compare(&g(&[5, 1, 3])), Comparison::Unequal);
    assert_eq!(
        GROUP_EMPTY.compare(&a.incl(&[]).unwrap()),
        Comparison::Ident
    );
}

#[test]
fn group_misuse_is_h1618_with_its_data() {
    let a = g(&[4, 2, 0]);
    let cases = [
        (
            a.incl(&[0, 3]).unwrap_err(),
            MpiError::Rank { rank: 3, size: 3 },
        ),
        (
            a.incl(&[1, 1]).unwrap_err(),
            MpiError::DuplicateRank { rank: 1 },
        ),
        (
            a.excl(&[2, 2]).unwrap_err(),
            MpiError::DuplicateRank { rank: 2 },
        ),
        (
            a.excl(&[7]).unwrap_err(),
            MpiError::Rank { rank: 7, size: 3 },
        ),
        (
            a.range_incl(&[(0, 2, 0)]).unwrap_err(),
            MpiError::ZeroStride { first: 0, last: 2 },
        ),
        (
            a.range_incl(&[(0, 3, 1)]).unwrap_err(),
            MpiError::Rank { rank: 3, size: 3 },
        ),
        (
            a.range_incl(&[(0, 2, 1), (1, 1, 1)]).unwrap_err(),
            MpiError::DuplicateRank { rank: 1 },
        ),
        (
            a.translate_ranks(&[3], &a).unwrap_err(),
            MpiError::Rank { rank: 3, size: 3 },
        ),
        (
            Group::from_job_ranks(&[1, 1], None).unwrap_err(),
            MpiError::DuplicateRank { rank: 1 },
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
        assert_eq!(got.h_code().map(|h| h.number()), Some(1618), "{got}");
    }
}

#[test]
fn comm_group_and_create_at_1_to_5_ranks() {
    for n in 1..=5u32 {
        let out = fake::run(n, |c| {
            let world = c.group();
            assert_eq!(world.job_ranks(), (0..n).collect::<Vec<_>>());
            assert_eq!((world.size(), world.rank()), (n, Some(c.rank())));
            // The even ranks, highest first.
            let evens: Vec<u32> = (0..n).filter(|r| r % 2 == 0).rev().collect();
            let eg = world.incl(&evens).unwrap();
            let sub = c.create(&eg).unwrap();
            let x = f64::from(c.rank()) * 0.1 + 1.0 / 3.0;
            let folded = sub.as_ref().map(|s| {
                assert_eq!(s.rank(), eg.rank().unwrap());
                assert_eq!(s.size(), eg.size());
                assert_eq!(s.group().job_ranks(), eg.job_ranks());
                // Comparisons of communicators.
                assert_eq!(s.compare(s), Comparison::Ident);
                assert_eq!(s.group().compare(&eg), Comparison::Ident);
                s.allreduce(&[x], Reduction::Sum).unwrap()[0].to_bits()
            });
            // The empty group: no rank gets a communicator.
            assert!(c.create(&GROUP_EMPTY).unwrap().is_none());
            // The whole group: congruent with the job's; reversed: similar.
            let all = c.create(&world).unwrap().unwrap();
            assert_eq!(c.compare(&all), Comparison::Congruent);
            assert_eq!(c.compare(c), Comparison::Ident);
            let rev: Vec<u32> = (0..n).rev().collect();
            let back = c.create(&world.incl(&rev).unwrap()).unwrap().unwrap();
            assert_eq!(back.rank(), n - 1 - c.rank());
            let expect_cmp = if n == 1 {
                Comparison::Congruent
            } else {
                Comparison::Similar
            };
            assert_eq!(c.compare(&back), expect_cmp);
            (folded, eg.rank(), c.rank())
        });
        // The fold runs in the new communicator's rank order, left first:
        // highest even job rank first.
        let evens: Vec<u32> = (0..n).filter(|r| r % 2 == 0).rev().collect();
        let want = evens
            .iter()
            .map(|&r| f64::from(r) * 0.1 + 1.0 / 3.0)
            .reduce(|a, b| a + b)
            .unwrap();
        for (folded, pos, r) in out {
            match pos {
                Some(_) => assert_eq!(folded, Some(want.to_bits()), "n={n} rank {r}"),
                None => assert_eq!(folded, None),
            }
        }
    }
}

#[test]
fn create_with_a_group_of_another_communicator_is_refused_on_every_rank() {
    let out = fake::run(4, |c| {
        let half = c.split(Some(c.rank() / 2), 0).unwrap().unwrap();
        // Job ranks {0, 1} or {2, 3}; the other half's group is not in it.
        let other = Group::from_job_ranks(&[(c.rank() / 2 * 2 + 2) % 4], None).unwrap();
        let e = half.create(&other).unwrap_err();
        let seq = half.sequence();
        // The job goes on, on both communicators.
        let s = half.allreduce_scalar(1u32, Reduction::Sum).unwrap();
        let t = c.allreduce_scalar(1u32, Reduction::Sum).unwrap();
        (e, seq, s, t)
    });
    for (r, (e, seq, s, t)) in out.into_iter().enumerate() {
        let other = (r as u32 / 2 * 2 + 2) % 4;
        assert_eq!(e, MpiError::NotMember { job_rank: other });
        assert_eq!(e.h_code().map(|h| h.number()), Some(1618));
        assert_eq!((seq, s, t), (0, 2, 4));
    }
}

#[test]
fn comm_self_completes_every_collective_locally_at_1_to_5_ranks() {
    for n in 1..=5u32 {
        let links = fake::FakePeers::job(n);
        let sent = Arc::new(AtomicUsize::new(0));
        for l in &links {
            let sent = sent.clone();
            l.set_send_hook(move |_, p| {
                sent.fetch_add(1, Ordering::SeqCst);
                vec![p]
            });
        }
        let out = fake::run_links(links, |c| {
            let me = c.comm_self();
            assert_eq!((me.rank(), me.size(), me.job_rank(0)), (0, 1, c.rank()));
            assert_eq!(me.group().job_ranks(), &[c.rank()]);
            let x = [f64::from(c.rank()) / 7.0, -0.0, f64::MIN_POSITIVE];
            let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            me.barrier().unwrap();
            assert_eq!(bits(&me.allreduce(&x, Reduction::Sum).unwrap()), bits(&x));
            assert_eq!(
                bits(&me.reduce(0, &x, Reduction::Max).unwrap().unwrap()),
                bits(&x)
            );
            let mut b = x.to_vec();
            me.bcast(0, &mut b).unwrap();
            assert_eq!(bits(&b), bits(&x));
            assert_eq!(bits(&me.gather(0, &x).unwrap().unwrap()), bits(&x));
            assert_eq!(bits(&me.scatter(0, Some(&x[..])).unwrap()), bits(&x));
            assert_eq!(bits(&me.allgather(&x).unwrap()), bits(&x));
            assert_eq!(bits(&me.scan(&x, Reduction::Sum).unwrap()), bits(&x));
            assert_eq!(
                me.iallreduce(&[c.rank()], Reduction::Sum)
                    .unwrap()
                    .wait()
                    .unwrap(),
                vec![c.rank()]
            );
            assert!(me.sequence() >= 8);
            assert_eq!(c.sequence(), 0);
            // The job's communicator is untouched: one allreduce to end.
            c.barrier().unwrap();
            c.allreduce_scalar(1u32, Reduction::Sum).unwrap()
        });
        assert_eq!(out, vec![n; n as usize]);
        // Only the job's two calls sent frames: 2 (n - 1) each for the star.
        assert_eq!(sent.load(Ordering::SeqCst), 4 * (n as usize - 1), "n={n}");
    }
}

#[test]
fn cartesian_grids_at_1_to_5_ranks() {
    for n in 1..=5u32 {
        let out = fake::run(n, |c| {
            let mut dims = [0, 0];
            dims_create(n, &mut dims).unwrap();
            let grid = c.cart_create(&dims, &[true, false], true).unwrap().unwrap();
            assert_eq!((grid.dims(), grid.ndims()), (&dims[..], 2));
            let me = grid.coords(grid.rank()).unwrap();
            assert_eq!(
                grid.cart_rank(&[i64::from(me[0]), i64::from(me[1])])
                    .unwrap(),
                grid.rank()
            );
            // Row-major: rank = c0 * dims[1] + c1.
            assert_eq!(me[0] * dims[1] + me[1], grid.rank());
            let (src0, dst0) = grid.shift(0, 1).unwrap(); // periodic
            let (src1, dst1) = grid.shift(1, -1).unwrap(); // not periodic
            let wrap = |k: u32| (me[0] + k) % dims[0] * dims[1] + me[1];
            assert_eq!((src0, dst0), (wrap(dims[0] - 1), wrap(1)));
            let at = |c1: i64| {
                if (0..i64::from(dims[1])).contains(&c1) {
                    me[0] * dims[1] + c1 as u32
                } else {
                    PROC_NULL
                }
            };
            assert_eq!(
                (src1, dst1),
                (at(i64::from(me[1]) + 1), at(i64::from(me[1]) - 1))
            );
            // Rows (keep dim 1) and columns (keep dim 0).
            let row = grid.sub(&[false, true]).unwrap();
            let col = grid.sub(&[true, false]).unwrap();
            assert_eq!((row.dims(), row.periods()), (&dims[1..], &[false][..]));
            assert_eq!((col.dims(), col.periods()), (&dims[..1], &[true][..]));
            assert_eq!((row.rank(), col.rank()), (me[1], me[0]));
            let point = grid.sub(&[false, false]).unwrap();
            assert_eq!((point.size(), point.ndims()), (1, 0));
            let rs = row
                .allreduce_scalar(u64::from(grid.rank()), Reduction::Sum)
                .unwrap();
            let cs = col
                .allreduce_scalar(u64::from(grid.rank()), Reduction::Sum)
                .unwrap();
            (dims, rs, cs)
        });
        for (r, (dims, rs, cs)) in out.into_iter().enumerate() {
            let r = r as u32;
            let (c0, c1) = (r / dims[1], r % dims[1]);
            let row: u64 = (0..dims[1]).map(|j| u64::from(c0 * dims[1] + j)).sum();
            let col: u64 = (0..dims[0]).map(|i| u64::from(i * dims[1] + c1)).sum();
            assert_eq!((rs, cs), (row, col), "n={n} rank {r}");
        }
    }
}

#[test]
fn ranks_beyond_the_grid_get_none_and_misuse_is_refused() {
    let out = fake::run(5, |c| {
        let e1 = c.cart_create(&[2, 3], &[false, false], false).unwrap_err();
        let e2 = c.cart_create(&[2, 2], &[false], false).unwrap_err();
        let e3 = c.cart_create(&[0, 2], &[false, false], false).unwrap_err();
        let grid = c.cart_create(&[2, 2], &[false, true], false).unwrap();
        let errs = grid.as_ref().map(|g| {
            (
                g.shift(2, 1).unwrap_err(),
                g.cart_rank(&[2, 0]).unwrap_err(),
                g.cart_rank(&[0]).unwrap_err(),
                g.coords(4).unwrap_err(),
                g.sub(&[true]).unwrap_err(),
                g.cart_rank(&[1, -5]).unwrap(),
            )
        });
        // The job goes on.
        let total = c.allreduce_scalar(1u32, Reduction::Sum).unwrap();
        (e1, e2, e3, errs, total)
    });
    for (r, (e1, e2, e3, errs, total)) in out.into_iter().enumerate() {
        assert_eq!(e1, MpiError::GridSize { places: 6, size: 5 });
        assert_eq!(
            e2,
            MpiError::Dimensions {
                expected: 2,
                got: 1
            }
        );
        assert_eq!(e3, MpiError::GridSize { places: 0, size: 5 });
        assert_eq!(total, 5);
        if r == 4 {
            assert!(errs.is_none());
            continue;
        }
        let (shift, coord, short, coords, sub, wrapped) = errs.unwrap();
        assert_eq!(
            shift,
            MpiError::Direction {
                direction: 2,
                ndims: 2
            }
        );
        assert_eq!(
            coord,
            MpiError::Coordinate {
                dim: 0,
                coord: 2,
                extent: 2
            }
        );
        assert_eq!(
            short,
            MpiError::Dimensions {
                expected: 2,
                got: 1
            }
        );
        assert_eq!(coords, MpiError::Rank { rank: 4, size: 4 });
        assert_eq!(
            sub,
            MpiError::Dimensions {
                expected: 2,
                got: 1
            }
        );
        assert_eq!(wrapped, 3); // (1, -5 mod 2 = 1)
        for e in [shift, coord, short, coords, sub, e1.clone()] {
            assert_eq!(e.h_code().map(|h| h.number()), Some(1618));
        }
    }
}

#[test]
fn without_feature_bit_2_only_the_local_calls_and_comm_self_work() {
    use sperli_wire::error::UsageError;
    use sperli_wire::limits::FEATURE_V1_CORE;
    let links = fake::FakePeers::job_with_features(&[FEATURE_V1_CORE; 3]);
    let out = fake::run_links(links, |c| {
        let no = MpiError::Comm(Error::Usage(UsageError::NoCommunicators));
        assert_eq!(c.create(&c.group()).unwrap_err(), no);
        assert_eq!(c.cart_create(&[3], &[true], false).unwrap_err(), no);
        assert_eq!(no.h_code(), None);
        // Local calls and COMM_SELF need no bit.
        let g = c.group().excl(&[1]).unwrap();
        assert_eq!(g.job_ranks(), &[0, 2]);
        let me = c.comm_self();
        assert_eq!(
            me.allreduce_scalar(c.rank(), Reduction::Max).unwrap(),
            c.rank()
        );
        c.allreduce_scalar(1u32, Reduction::Sum).unwrap()
    });
    assert_eq!(out, vec![3; 3]);
}
