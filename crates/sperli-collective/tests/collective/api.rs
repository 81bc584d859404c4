//! The program-facing calls (protocol §7.2, §8.9): typed point-to-point,
//! any-source receives, probes, waits over several requests, messages
//! larger than a frame, non-blocking collectives and `abort`, at 1, 2, 3
//! and 8 real TLS ranks on 127.0.0.0/8 and, where no point-to-point is
//! involved, on the fake link.
//!
//! The order differs per rank on purpose (ranks take [`Turns`] in orders
//! that change which message or call comes first); no assertion depends on
//! a duration.

use std::collections::BTreeSet;
use std::time::Duration;

use sperli_collective::fake;
use sperli_collective::prelude::*;
use sperli_wire::limits::MAX_PAYLOAD;

use crate::common::{order_by, Turns};
use crate::tls::{run_job, tls_test, tls_test_within};

const SIZES: [u32; 4] = [1, 2, 3, 8];

/// Every point-to-point call once on a job of `comm.size()` ranks; panics
/// on a wrong result.
fn point_to_point(c: &Comm<Endpoint>) {
    let (me, n) = (c.rank(), c.size());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    // send / recv, typed, around the ring (to itself at size 1).
    let mine: Vec<f64> = (0..100)
        .map(|i| f64::from(me) * 1000.0 + f64::from(i))
        .collect();
    let r = c.irecv::<f64>(Some(left), Some(1)).unwrap();
    c.send(right, 1, &mine).unwrap();
    let (st, got) = r.wait().unwrap();
    assert_eq!((st.source, st.tag, st.len), (left, 1, 800));
    assert_eq!(got[0], f64::from(left) * 1000.0);
    // usize is u64 on the wire.
    let (st, got) = c
        .sendrecv::<usize, usize>(right, 2, &[me as usize; 3], Some(left), Some(2))
        .unwrap();
    assert_eq!((st.source, got), (left, vec![left as usize; 3]));
    // recv_into a larger buffer: the status says how much came.
    c.send_bytes(right, 3, b"abc").unwrap();
    let mut buf = [0u8; 8];
    let st = c.recv_into(left, 3, &mut buf).unwrap();
    assert_eq!((st.len, &buf[..3]), (3, &b"abc"[..]));
    // sendrecv_into.
    let mut one = [0i32; 1];
    let st = c
        .sendrecv_into(right, 4, &[-(me as i32)], Some(left), Some(4), &mut one)
        .unwrap();
    assert_eq!((st.source, one[0]), (left, -(left as i32)));
    // probe, then a receive of exactly what it reported.
    c.send::<u32>(right, 5, &[me; 7]).unwrap();
    let st = c.probe(Some(left), Some(5)).unwrap();
    assert_eq!((st.source, st.len), (left, 28));
    assert_eq!(c.recv::<u32>(left, 5).unwrap(), vec![left; 7]);
    assert_eq!(c.iprobe(Some(left), Some(5)).unwrap(), None);
    // isend + wait_all over receives; a receive open across a collective.
    let mut reqs = vec![c.irecv::<u64>(Some(left), Some(6)).unwrap()];
    let sum = c.allreduce_scalar(1u64, Reduction::Sum).unwrap();
    assert_eq!(sum, u64::from(n));
    let s = c.isend::<u64>(right, 6, &[u64::from(me)]).unwrap();
    let all = c.wait_all(&mut reqs).unwrap();
    s.wait().unwrap();
    assert_eq!(all[0].as_ref().unwrap().1, vec![u64::from(left)]);
    // test_all: false until the message is there, then every message.
    let mut reqs = vec![c.irecv::<u8>(Some(left), Some(7)).unwrap()];
    c.barrier().unwrap();
    if n > 1 {
        assert_eq!(c.test_all(&mut reqs).unwrap(), None, "nothing sent yet");
    }
    c.barrier().unwrap();
    c.send_bytes(right, 7, &[9]).unwrap();
    let got = loop {
        if let Some(v) = c.test_all(&mut reqs).unwrap() {
            break v;
        }
    };
    assert_eq!(got[0].as_ref().unwrap().1, vec![9]);
    // A typed receive of a message that is not whole elements: H1618, and
    // the job goes on.
    c.send_bytes(right, 8, &[1, 2, 3]).unwrap();
    let e = c.recv::<u32>(left, 8).unwrap_err();
    assert_eq!(e.h_code(), Some(HCode::H1618), "{e}");
    c.barrier().unwrap();
}

/// The non-blocking collectives, each checked against its blocking twin,
/// interleaved with DATA and with blocking collectives, each rank with its
/// own order (the ranks pass points k = 1, 2, 3 in an order that changes
/// with k).
fn nonblocking<L: Peers + Send + Sync + 'static>(
    c: &Comm<L>,
    data: Option<&Comm<Endpoint>>,
    turns: &Turns,
) {
    // (`data` is the same communicator over TLS; `None` on the fake link.)
    let (me, n) = (c.rank(), c.size());
    let delay = |k: u32| {
        let order = order_by(0..n, |r| u64::from((r * 7 + k) % 5));
        turns.pass(u64::from(k), &order, me);
    };
    let v: Vec<i64> = (0..50).map(|i| i64::from(me) * 100 + i).collect();
    let barrier = c.ibarrier().unwrap();
    delay(1);
    let ar = c.iallreduce(&v, Reduction::Sum).unwrap();
    let bc = c
        .ibcast(
            n - 1,
            if me == n - 1 {
                vec![7u32, 8, 9]
            } else {
                Vec::new()
            },
        )
        .unwrap();
    delay(2);
    // DATA between non-blocking calls.
    if let Some(p) = data {
        let r = p.irecv::<i64>(Some((me + n - 1) % n), Some(11)).unwrap();
        p.send((me + 1) % n, 11, &v).unwrap();
        assert_eq!(r.wait().unwrap().1[0], i64::from((me + n - 1) % n) * 100);
    }
    let red = c.ireduce(0, &v, Reduction::Max).unwrap();
    let ga = c.igather(n / 2, &[me]).unwrap();
    // A blocking collective after open non-blocking ones: it goes on the
    // wire after them.
    let blocking = c.allreduce_scalar(i64::from(me), Reduction::Sum).unwrap();
    let blocks: Vec<u64> = (0..u64::from(n) * 2).collect();
    let sc = c.iscatter(0, (me == 0).then_some(&blocks[..])).unwrap();
    let ag = c.iallgather(&[u64::from(me) + 1]).unwrap();
    delay(3);
    let want_sum: Vec<i64> = (0..50)
        .map(|i| (0..i64::from(n)).map(|r| r * 100 + i).sum())
        .collect();
    // Completed in another order than issued.
    assert_eq!(ag.wait().unwrap(), (1..=u64::from(n)).collect::<Vec<_>>());
    assert_eq!(ar.wait().unwrap(), want_sum);
    barrier.wait().unwrap();
    assert_eq!(bc.wait().unwrap(), vec![7, 8, 9]);
    let r = red.wait().unwrap();
    if me == 0 {
        let want: Vec<i64> = (0..50).map(|i| i64::from(n - 1) * 100 + i).collect();
        assert_eq!(r.unwrap(), want);
    } else {
        assert!(r.is_none());
    }
    let g = ga.wait().unwrap();
    assert_eq!(g.is_some(), me == n / 2);
    if let Some(g) = g {
        assert_eq!(g, (0..n).collect::<Vec<_>>());
    }
    assert_eq!(blocking, i64::from(n * (n - 1) / 2));
    let mut sc = sc;
    let got = loop {
        if let Some(v) = sc.test().unwrap() {
            break v;
        }
    };
    assert_eq!(got, vec![u64::from(me) * 2, u64::from(me) * 2 + 1]);
    assert_eq!(
        sc.test().unwrap(),
        None,
        "a completed request stays completed"
    );
    assert_eq!(c.open_requests(), 0);
    // Sequence numbers counted every call in issue order: 7 non-blocking
    // calls (allgather is 2 v1 calls without bit 1 at this size, 1 with
    // it) and 1 blocking; every rank agrees, which the next call checks.
    c.barrier().unwrap();
}

#[test]
fn point_to_point_and_nonblocking_collectives_at_1_2_3_and_8_tls_ranks() {
    for size in SIZES {
        tls_test_within(Duration::from_secs(120), move || {
            let turns = Turns::new();
            run_job(
                size,
                |ep| ep,
                move |c: Comm<Endpoint>| {
                    point_to_point(&c);
                    // One communicator for both: DATA while non-blocking
                    // collectives are open.
                    nonblocking(&c, Some(&c), &turns);
                    // The progress thread ends; the endpoint comes back.
                    c.into_link().finish().unwrap();
                },
            );
        });
    }
}

#[test]
fn nonblocking_collectives_at_1_2_3_and_8_fake_ranks() {
    for size in SIZES {
        let turns = Turns::new();
        fake::run(size, |c| nonblocking(c, None, &turns));
    }
}

#[test]
fn any_source_with_three_senders_takes_each_message_once() {
    tls_test(|| {
        let turns = Turns::new();
        let out = run_job(
            4,
            |ep| ep,
            move |c: Comm<Endpoint>| {
                let me = c.rank();
                let mut sources = Vec::new();
                for round in 0..5u32 {
                    if me == 0 {
                        for _ in 0..3 {
                            let (st, v) = c.recv_match::<u32>(None, Some(9)).unwrap();
                            assert_eq!(v, vec![st.source * 10 + round], "round {round}");
                            sources.push(st.source);
                        }
                    } else {
                        // A different sender is last in each round.
                        let order = order_by(1..4, |r| u64::from((r + round) % 3));
                        turns.take(u64::from(round), &order, me);
                        c.send(0, 9, &[me * 10 + round]).unwrap();
                        turns.done(u64::from(round), me);
                    }
                    c.barrier().unwrap();
                }
                sources
            },
        );
        for round in out[0].chunks(3) {
            let set: BTreeSet<u32> = round.iter().copied().collect();
            assert_eq!(set, BTreeSet::from([1, 2, 3]));
        }
    });
}

#[test]
fn wait_any_under_a_racing_arrival_order() {
    tls_test(|| {
        let turns = Turns::new();
        run_job(
            4,
            |ep| ep,
            move |c: Comm<Endpoint>| {
                let me = c.rank();
                for round in 0..6u32 {
                    if me == 0 {
                        let mut reqs: Vec<RecvRequest<'_, u64>> = (1..4)
                            .map(|s| c.irecv(Some(s), Some(round)).unwrap())
                            .collect();
                        let mut seen = BTreeSet::new();
                        while let Some((i, st, v)) = c.wait_any(&mut reqs).unwrap() {
                            assert_eq!(st.source, i as u32 + 1);
                            assert_eq!(v, vec![u64::from(st.source + round)]);
                            assert!(seen.insert(i), "index {i} twice");
                        }
                        assert_eq!(seen.len(), 3);
                        assert!(c.wait_any(&mut reqs).unwrap().is_none());
                    } else {
                        let order = order_by(1..4, |r| u64::from((r * 3 + round) % 4));
                        turns.take(u64::from(round), &order, me);
                        c.send(0, round, &[u64::from(me + round)]).unwrap();
                        turns.done(u64::from(round), me);
                    }
                }
                c.barrier().unwrap();
            },
        );
    });
}

#[test]
fn messages_larger_than_a_frame_are_split_and_joined() {
    tls_test_within(Duration::from_secs(120), || {
        run_job(
            2,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let m = MAX_PAYLOAD as usize;
                for len in [m - 1, m, m + 4] {
                    let words = len / 4;
                    if c.rank() == 0 {
                        let v: Vec<u32> = (0..words as u32).collect();
                        c.send(1, 1, &v).unwrap();
                        c.send_bytes(1, 2, &vec![5u8; len]).unwrap();
                    } else {
                        let st = c.probe(Some(0), Some(1)).unwrap();
                        assert_eq!(st.len, words * 4);
                        let v = c.recv::<u32>(0, 1).unwrap();
                        assert_eq!(v.len(), words);
                        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
                        let r = c.irecv::<u8>(Some(0), Some(2)).unwrap();
                        let (st, b) = r.wait().unwrap();
                        assert_eq!((st.len, b.len()), (len, len));
                    }
                }
                c.barrier().unwrap();
            },
        );
    });
}

#[test]
fn abort_sends_reason_2_with_the_code_to_every_peer() {
    tls_test(|| {
        let out = run_job(
            3,
            |ep| ep,
            |c: Comm<Endpoint>| {
                // Every rank's set-up is done once rank 1 passed a barrier
                // (an ABORT during another rank's set-up would fail that
                // set-up instead); the others' barrier may already see the
                // ABORT.
                let _ = c.barrier();
                if c.rank() == 1 {
                    c.abort(42, "the input is empty");
                }
                c.barrier()
            },
        );
        for (r, e) in out.iter().enumerate() {
            match e {
                Err(Error::AbortedByPeer {
                    from, reason, code, ..
                }) => assert_eq!((*from, *reason, *code), (1, 2, 42), "rank {r}"),
                // A survivor may see the other survivor close first.
                Err(Error::PeerLost { .. }) if r != 1 => {}
                other => panic!("rank {r}: {other:?}"),
            }
        }
    });
}

/// Background progress without a clock: the root (rank 0, which folds)
/// issues `iallreduce` and then blocks outside the library until every
/// other rank has its result; only the root's progress thread can have
/// made those results, so without background progress this never ends
/// (and the watchdog fails the test).
#[test]
fn nonblocking_collectives_progress_while_the_program_makes_no_call() {
    use std::sync::{Arc, Barrier};
    for size in [2, 3, 8] {
        let gate = Arc::new(Barrier::new(size as usize));
        let g = gate.clone();
        fake::run(size, move |c| {
            let r = c
                .iallreduce(&[u64::from(c.rank())], Reduction::Sum)
                .unwrap();
            let want = u64::from(size * (size - 1) / 2);
            if c.rank() == 0 {
                g.wait(); // no library call until the others are through
                assert_eq!(r.wait().unwrap(), vec![want]);
            } else {
                assert_eq!(r.wait().unwrap(), vec![want]);
                g.wait();
            }
        });
        tls_test(move || {
            run_job(
                size,
                |ep| ep,
                move |c: Comm<Endpoint>| {
                    let big: Vec<f64> = vec![1.0; 1 << 18];
                    let r = c.iallreduce(&big, Reduction::Sum).unwrap();
                    if c.rank() == 0 {
                        gate.wait();
                        assert_eq!(r.wait().unwrap()[5], f64::from(size));
                    } else {
                        assert_eq!(r.wait().unwrap()[5], f64::from(size));
                        gate.wait();
                    }
                    c.barrier().unwrap();
                },
            );
        });
    }
}
