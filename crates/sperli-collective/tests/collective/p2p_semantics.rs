//! MPI's point-to-point semantics without a wire change, between real TLS
//! ranks on 127.0.0.0/8 (protocol §7.2 DATA only): PROC_NULL in every
//! call, persistent requests started many times, point-to-point on
//! COMM_SELF (this rank to itself), a halo exchange along a
//! non-periodic Cartesian grid whose edges are PROC_NULL, and
//! `create_group` made by a group's members alone.

use sperli_collective::prelude::*;
use sperli_collective::{empty_status, null_status, ANY_SOURCE};

use crate::tls::{run_job, tls_test};

fn h(e: &MpiError) -> Option<u32> {
    e.h_code().map(|c| c.number())
}

/// Every call with PROC_NULL completes at once with MPI's results.
fn proc_null(c: &Comm<Endpoint>) {
    let null = null_status();
    assert_eq!((null.source, null.tag, null.len), (PROC_NULL, ANY_TAG, 0));
    c.send(PROC_NULL, 1, &[1.5f64, 2.5]).unwrap();
    c.send_bytes(PROC_NULL, 1, b"abc").unwrap();
    assert_eq!(c.recv::<f64>(PROC_NULL, 1).unwrap(), Vec::<f64>::new());
    assert_eq!(c.recv_bytes(PROC_NULL, 1).unwrap(), Vec::<u8>::new());
    let mut buf = [7u32; 2];
    assert_eq!(c.recv_into(PROC_NULL, 1, &mut buf).unwrap(), null);
    assert_eq!(buf, [7, 7]);
    assert_eq!(
        c.recv_match::<u32>(Some(PROC_NULL), None).unwrap(),
        (null, vec![])
    );
    assert_eq!(c.probe(Some(PROC_NULL), Some(3)).unwrap(), null);
    assert_eq!(c.iprobe(Some(PROC_NULL), None).unwrap(), Some(null));
    let mut s = c.isend(PROC_NULL, 2, &[1u64]).unwrap();
    assert!(s.test().unwrap());
    c.isend(PROC_NULL, 2, &[1u64]).unwrap().wait().unwrap();
    let mut r = c.irecv::<u64>(Some(PROC_NULL), Some(2)).unwrap();
    assert!(!r.is_done());
    assert_eq!(r.test().unwrap(), Some((null, vec![])));
    assert!(r.is_done());
    assert_eq!(
        c.irecv::<u64>(Some(PROC_NULL), None)
            .unwrap()
            .wait()
            .unwrap(),
        (null, vec![])
    );
    assert_eq!(
        c.sendrecv::<u8, i32>(PROC_NULL, 4, b"x", Some(PROC_NULL), Some(4))
            .unwrap(),
        (null, vec![])
    );
    let mut one = [9i64];
    assert_eq!(
        c.sendrecv_into(PROC_NULL, 4, &[1u8], Some(PROC_NULL), None, &mut one)
            .unwrap(),
        null
    );
    // A reserved tag is refused as with a real rank.
    let e = c.send(PROC_NULL, 1 << 31, &[0u8]).unwrap_err();
    assert_eq!(e.h_code().map(|h| h.number()), Some(1618));
    assert!(c.irecv::<u8>(Some(PROC_NULL), Some(u32::MAX)).is_err());
    // A wait over receives where one is from PROC_NULL: it comes first,
    // then the real one (a message to this rank itself).
    let me = c.rank();
    let mut reqs = vec![
        c.irecv::<u32>(Some(me), Some(5)).unwrap(),
        c.irecv::<u32>(Some(PROC_NULL), Some(5)).unwrap(),
    ];
    c.send(me, 5, &[42u32]).unwrap();
    let (i, st, v) = c.wait_any(&mut reqs).unwrap().unwrap();
    assert_eq!((i, st, v), (1, null, vec![]));
    let (i, st, v) = c.wait_any(&mut reqs).unwrap().unwrap();
    assert_eq!((i, st.source, v), (0, me, vec![42]));
    assert!(c.wait_any(&mut reqs).unwrap().is_none());
    let mut reqs = vec![
        c.irecv::<u32>(Some(PROC_NULL), None).unwrap(),
        c.irecv::<u32>(Some(me), Some(6)).unwrap(),
    ];
    c.send(me, 6, &[6u32]).unwrap();
    let all = c.wait_all(&mut reqs).unwrap();
    assert_eq!(all[0], Some((null, vec![])));
    assert_eq!(
        all[1].as_ref().map(|(s, v)| (s.source, v.clone())),
        Some((me, vec![6]))
    );
}

/// A halo exchange along a 1-D non-periodic grid: the edges send to and
/// receive from PROC_NULL, so every rank makes the same two calls.
fn chain(c: &Comm<Endpoint>) {
    let n = c.size();
    let grid = c.cart_create(&[n], &[false], false).unwrap().unwrap();
    let (left, right) = grid.shift(0, 1).unwrap();
    let me = grid.rank();
    assert_eq!(left, if me == 0 { PROC_NULL } else { me - 1 });
    assert_eq!(right, if me + 1 == n { PROC_NULL } else { me + 1 });
    let mine = [f64::from(me) + 0.25, -f64::from(me)];
    // Send right, receive from the left; then the other way.
    let (st, from_left) = grid
        .sendrecv::<f64, f64>(right, 1, &mine, Some(left), Some(1))
        .unwrap();
    let (st2, from_right) = grid
        .sendrecv::<f64, f64>(left, 2, &mine, Some(right), Some(2))
        .unwrap();
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let of = |r: u32| [f64::from(r) + 0.25, -f64::from(r)];
    if left == PROC_NULL {
        assert_eq!((st, from_left.len()), (null_status(), 0));
    } else {
        assert_eq!((st.source, bits(&from_left)), (left, bits(&of(left))));
    }
    if right == PROC_NULL {
        assert_eq!((st2, from_right.len()), (null_status(), 0));
    } else {
        assert_eq!((st2.source, bits(&from_right)), (right, bits(&of(right))));
    }
}

/// Persistent requests around the ring: bound once, started five times
/// with new data, completed by wait and by test.
fn persistent(c: &Comm<Endpoint>) {
    let (me, n) = (c.rank(), c.size());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let mut out = c.send_init(right, 7, vec![0u64; 3]).unwrap();
    let mut inn = c.recv_init::<u64>(Some(left), Some(7)).unwrap();
    // Inactive: a wait returns at once with MPI's empty status.
    let empty = empty_status();
    assert_eq!(
        (empty.source, empty.tag, empty.len),
        (ANY_SOURCE, ANY_TAG, 0)
    );
    assert_eq!(inn.wait().unwrap(), (empty, vec![]));
    assert_eq!(inn.test().unwrap(), Some((empty, vec![])));
    out.wait().unwrap();
    assert!(out.test().unwrap());
    for step in 0..5u64 {
        out.data_mut()
            .copy_from_slice(&[u64::from(me), step, step * 1000 + 7]);
        assert!(!inn.is_active());
        start_all(&mut [&mut inn, &mut out]).unwrap();
        assert!(inn.is_active() && out.is_active());
        // A second start of an active request is refused, nothing sent.
        assert_eq!(inn.start().unwrap_err(), MpiError::Active);
        assert_eq!(h(&start_all(&mut [&mut out]).unwrap_err()), Some(1618));
        let (st, v) = if step % 2 == 0 {
            inn.wait().unwrap()
        } else {
            loop {
                if let Some(got) = inn.test().unwrap() {
                    break got;
                }
            }
        };
        assert_eq!((st.source, st.tag, st.len), (left, 7, 24));
        assert_eq!(v, vec![u64::from(left), step, step * 1000 + 7]);
        out.wait().unwrap();
        assert!(!inn.is_active() && !out.is_active());
    }
    // A start on one side only, freed after it completes.
    out.start().unwrap();
    inn.start().unwrap();
    out.free().unwrap();
    inn.free().unwrap();
    // PROC_NULL persistent requests complete at once.
    let mut pn = c.recv_init::<f32>(Some(PROC_NULL), None).unwrap();
    pn.start().unwrap();
    assert_eq!(pn.wait().unwrap(), (null_status(), vec![]));
    let mut ps = c.send_init(PROC_NULL, 1, vec![1f32]).unwrap();
    ps.start().unwrap();
    assert!(ps.test().unwrap());
    // Misuse before anything is sent.
    let e = c.send_init(n, 1, vec![1u8]).unwrap_err();
    assert!(matches!(e, MpiError::Comm(_)) && h(&e) == Some(1618), "{e}");
    let e = c.recv_init::<u8>(Some(0), Some(1 << 31)).unwrap_err();
    assert_eq!(h(&e), Some(1618));
}

/// COMM_SELF: this rank to itself, and its collectives.
fn comm_self(c: &Comm<Endpoint>) {
    let me = c.comm_self();
    assert_eq!((me.rank(), me.size()), (0, 1));
    me.send(0, 11, &[1.25f64, -0.0]).unwrap();
    let st = me.probe(Some(0), Some(11)).unwrap();
    assert_eq!((st.source, st.len), (0, 16));
    let v = me.recv::<f64>(0, 11).unwrap();
    assert_eq!(
        v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        [1.25f64, -0.0].map(f64::to_bits)
    );
    let r = me.irecv::<u32>(Some(0), Some(12)).unwrap();
    me.isend(0, 12, &[5u32, 6]).unwrap().wait().unwrap();
    assert_eq!(r.wait().unwrap().1, vec![5, 6]);
    let (st, v) = me
        .sendrecv::<i64, i64>(0, 13, &[-3], Some(0), Some(13))
        .unwrap();
    assert_eq!((st.source, v), (0, vec![-3]));
    let mut p = me.send_init(0, 14, vec![9u8]).unwrap();
    let mut q = me.recv_init::<u8>(Some(0), Some(14)).unwrap();
    start_all(&mut [&mut q, &mut p]).unwrap();
    assert_eq!(q.wait().unwrap().1, vec![9]);
    p.wait().unwrap();
    assert_eq!(
        me.allreduce_scalar(c.rank() + 1, Reduction::Sum).unwrap(),
        c.rank() + 1
    );
    me.barrier().unwrap();
    assert_eq!(c.sequence(), 0, "COMM_SELF's calls are not the job's");
}

#[test]
fn proc_null_persistent_requests_comm_self_and_a_grid_at_1_2_3_and_5_tls_ranks() {
    for n in [1, 2, 3, 5] {
        tls_test(move || {
            run_job(
                n,
                |ep| ep,
                |c: Comm<Endpoint>| {
                    proc_null(&c);
                    comm_self(&c);
                    persistent(&c);
                    chain(&c);
                    c.barrier().unwrap();
                },
            );
        });
    }
}

#[test]
fn create_group_is_made_by_the_members_alone_at_5_tls_ranks() {
    tls_test(|| {
        let out = run_job(
            5,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let me = c.rank();
                let world = c.group();
                let trio = world.incl(&[3, 1, 4]).unwrap();
                // Misuse, refused before anything is sent.
                let stranger = Group::from_job_ranks(&[7], None).unwrap();
                assert_eq!(
                    c.create_group(&stranger, 1).unwrap_err(),
                    MpiError::NotMember { job_rank: 7 }
                );
                let x = f64::from(me) / 3.0 + 0.1;
                let made = if trio.rank().is_some() {
                    assert_eq!(
                        c.create_group(&trio, 1 << 31).unwrap_err(),
                        MpiError::Tag { tag: 1 << 31 }
                    );
                    let t = c.create_group(&trio, 50).unwrap();
                    assert_eq!(t.rank(), trio.rank().unwrap());
                    assert_eq!(t.group().job_ranks(), &[3, 1, 4]);
                    let s = t.allreduce(&[x], Reduction::Sum).unwrap()[0].to_bits();
                    Some((t.id(), s))
                } else {
                    // The others take no part, and exchange meanwhile.
                    assert_eq!(
                        c.create_group(&trio, 50).unwrap_err(),
                        MpiError::NotMember { job_rank: me }
                    );
                    let other = if me == 0 { 2 } else { 0 };
                    let (_, v) = c
                        .sendrecv::<u32, u32>(other, 60, &[me], Some(other), Some(60))
                        .unwrap();
                    assert_eq!(v, vec![other]);
                    let pair = c.create_group(&world.incl(&[0, 2]).unwrap(), 61).unwrap();
                    assert_eq!(pair.allreduce_scalar(1u32, Reduction::Sum).unwrap(), 2);
                    None
                };
                // A split of the whole job afterwards gets an id above both.
                let all = c.split(Some(0), 0).unwrap().unwrap();
                assert_eq!(all.allreduce_scalar(1u32, Reduction::Sum).unwrap(), 5);
                (made, all.id())
            },
        );
        let want = [3u32, 1, 4]
            .iter()
            .map(|&r| f64::from(r) / 3.0 + 0.1)
            .reduce(|a, b| a + b)
            .unwrap()
            .to_bits();
        let split_id = out[0].1;
        for (r, (made, id)) in out.iter().enumerate() {
            assert_eq!(*id, split_id);
            if let Some((tid, bits)) = made {
                assert_eq!(*bits, want, "rank {r}");
                assert!(*tid < split_id);
            }
        }
    });
}
