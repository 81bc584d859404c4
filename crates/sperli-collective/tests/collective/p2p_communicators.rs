//! Point-to-point on communicators (HELLO feature bit 3, protocol §16)
//! between real TLS ranks on 127.0.0.0/8: a dup's messages never mix with
//! its parent's (any source too), synchronous sends complete only once
//! matched, matched probes own their message, messages longer than one
//! frame on a communicator, and a job with a rank that lacks bit 3 runs
//! as before.

use std::time::Duration;

use sperli_collective::prelude::*;
use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_P2P_COMMUNICATORS, MAX_PAYLOAD};

use crate::tls::{run_job, run_job_with, settings, tls_test, tls_test_within};

/// Every rank sends to every other rank the same tag on the job's
/// communicator and on a dup (and a dup of the dup); each receive, named or
/// any source, gets its own communicator's message, in both orders of
/// posting and sending.
fn dup_isolation(size: u32) {
    run_job(
        size,
        |ep| ep,
        move |c: Comm<Endpoint>| {
            assert!(c.link().has_p2p_communicators());
            let me = c.rank();
            let d = c.dup().unwrap();
            let dd = d.dup().unwrap();
            let comms = [&c, &d, &dd];
            // Posted before anything is sent: any source, per communicator.
            let posted: Vec<Vec<RecvRequest<'_, u32>>> = comms
                .iter()
                .map(|k| (1..size).map(|_| k.irecv(None, Some(7)).unwrap()).collect())
                .collect();
            for (i, k) in comms.iter().enumerate() {
                for to in (0..size).filter(|&r| r != me) {
                    k.send(to, 7, &[i as u32 * 100 + me]).unwrap();
                }
            }
            for (i, reqs) in posted.into_iter().enumerate() {
                let mut from: Vec<u32> = reqs
                    .into_iter()
                    .map(|r| {
                        let (st, v) = r.wait().unwrap();
                        assert_eq!(v, vec![i as u32 * 100 + st.source], "comm {i}");
                        st.source
                    })
                    .collect();
                from.sort_unstable();
                assert_eq!(from, (0..size).filter(|&r| r != me).collect::<Vec<_>>());
            }
            c.barrier().unwrap();
            // Sent before the receives are posted: the child's first, then
            // received parent first, any source.
            for to in (0..size).filter(|&r| r != me) {
                d.send(to, 8, &[2u8]).unwrap();
                c.send(to, 8, &[1u8]).unwrap();
            }
            c.barrier().unwrap();
            for _ in 1..size {
                assert_eq!(c.recv_match::<u8>(None, Some(8)).unwrap().1, [1]);
            }
            assert!(c.iprobe(None, Some(8)).unwrap().is_none());
            for _ in 1..size {
                assert_eq!(d.recv_match::<u8>(None, None).unwrap().1, [2]);
            }
            c.barrier().unwrap();
        },
    );
}

#[test]
fn a_dup_never_takes_its_parents_messages_at_2_ranks() {
    tls_test(|| dup_isolation(2));
}

#[test]
fn a_dup_never_takes_its_parents_messages_at_3_ranks() {
    tls_test(|| dup_isolation(3));
}

#[test]
fn a_dup_never_takes_its_parents_messages_at_5_ranks() {
    tls_test_within(Duration::from_secs(90), || dup_isolation(5));
}

/// An issend is not complete before its receiver matched it (the receiver
/// waits for a "go" first, so it cannot have), and completes after; ssend
/// blocks until the receive; a synchronous send to this rank completes
/// with its own receive; on a split communicator too.
#[test]
fn a_synchronous_send_completes_only_once_matched() {
    tls_test(|| {
        run_job(
            3,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let me = c.rank();
                let s = c.split(Some(me % 2), 0).unwrap().unwrap();
                if me == 0 {
                    let mut req = c.issend(1, 5, &[42u64]).unwrap();
                    for _ in 0..20 {
                        assert!(!req.test().unwrap(), "not matched yet");
                    }
                    c.send(1, 9, &[0u8]).unwrap(); // go
                    req.wait().unwrap();
                    c.ssend(2, 6, &[7u64; 1000]).unwrap();
                    // To itself: complete once its own receive took it.
                    let mut me_req = c.issend(0, 1, &[3u8]).unwrap();
                    assert!(!me_req.test().unwrap());
                    assert_eq!(c.recv::<u8>(0, 1).unwrap(), [3]);
                    assert!(me_req.test().unwrap());
                    // Rank 2 is rank 1 of the even split.
                    s.ssend(1, 4, &[5u32]).unwrap();
                } else if me == 1 {
                    c.recv::<u8>(0, 9).unwrap();
                    assert_eq!(c.recv::<u64>(0, 5).unwrap(), [42]);
                } else {
                    let (st, v) = c.recv_match::<u64>(None, Some(6)).unwrap();
                    assert_eq!((st.source, v.len()), (0, 1000));
                    let (st, v) = s.recv_match::<u32>(None, None).unwrap();
                    assert_eq!((st.source, v), (0, vec![5]));
                }
                c.barrier().unwrap();
            },
        );
    });
}

/// A matched probe takes the message for its request alone; improbe says
/// nothing before the message is there; a receive posted afterwards gets
/// the next message.
#[test]
fn a_matched_probe_owns_its_message() {
    tls_test(|| {
        run_job(
            2,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let d = c.dup().unwrap();
                if c.rank() == 0 {
                    c.recv::<u8>(1, 1).unwrap();
                    d.ssend(1, 3, &[10i32, 11]).unwrap();
                    d.send(1, 3, &[12i32]).unwrap();
                } else {
                    assert!(d.improbe::<i32>(None, Some(3)).unwrap().is_none());
                    c.send(0, 1, &[0u8]).unwrap();
                    let (st, msg) = d.mprobe::<i32>(None, Some(3)).unwrap();
                    assert_eq!((st.source, st.len), (0, 8));
                    let next = d.recv::<i32>(0, 3).unwrap();
                    assert_eq!(next, [12], "the probed message is not the next receive's");
                    assert_eq!(msg.wait().unwrap().1, [10, 11]);
                    let (st, none) = d.mprobe::<i32>(Some(PROC_NULL), None).unwrap();
                    assert_eq!((st.source, none.wait().unwrap().1), (PROC_NULL, vec![]));
                }
                c.barrier().unwrap();
            },
        );
    });
}

/// A message longer than one frame, on a dup, by any source, next to a
/// small message of the parent with the same tag.
#[test]
fn a_message_of_several_frames_on_a_dup() {
    tls_test_within(Duration::from_secs(120), || {
        run_job(
            2,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let d = c.dup().unwrap();
                let n = MAX_PAYLOAD as usize + 100;
                if c.rank() == 0 {
                    let big: Vec<u8> = (0..n).map(|i| (i % 253) as u8).collect();
                    let r = d.isend_bytes(1, 2, &big).unwrap();
                    c.send_bytes(1, 2, b"small").unwrap();
                    r.wait().unwrap();
                    d.ssend_bytes(1, 2, &big).unwrap();
                } else {
                    let st = d.probe(None, Some(2)).unwrap();
                    assert_eq!(st.len, n);
                    assert_eq!(c.recv_bytes(0, 2).unwrap(), b"small");
                    for _ in 0..2 {
                        let (st, b) = d.recv_match_bytes(None, Some(2)).unwrap();
                        assert_eq!((st.source, b.len()), (0, n));
                        assert!(b.iter().enumerate().all(|(i, &x)| x == (i % 253) as u8));
                    }
                }
                c.barrier().unwrap();
            },
        );
    });
}

/// A rank that does not announce bit 3 makes the job v1 for DATA: the
/// calls that need it fail before anything is sent, and point-to-point
/// on a communicator still works with its ranks.
#[test]
fn a_job_without_bit_3_on_one_rank_runs_as_before() {
    tls_test(|| {
        run_job_with(
            3,
            |r| {
                let mut s = settings();
                if r == 2 {
                    s.features = FEATURES_IMPLEMENTED & !FEATURE_P2P_COMMUNICATORS;
                }
                s
            },
            |ep| ep,
            |c: Comm<Endpoint>| {
                assert!(!c.link().has_p2p_communicators());
                let me = c.rank();
                let e = c.ssend(0, 1, &[1u8]).unwrap_err();
                assert!(matches!(
                    e,
                    Error::Usage(UsageError::NoP2pCommunicators { .. })
                ));
                let d = c.dup().unwrap();
                assert_eq!(
                    d.recv_match::<u8>(None, Some(3)).unwrap_err(),
                    Error::Usage(UsageError::AnySourceOnSubcommunicator)
                );
                let right = (me + 1) % 3;
                let left = (me + 2) % 3;
                let (st, v) = d
                    .sendrecv::<u32, u32>(right, 3, &[me], Some(left), Some(3))
                    .unwrap();
                assert_eq!((st.source, v), (left, vec![left]));
                let big = vec![me as u8; MAX_PAYLOAD as usize + 5];
                let (_, b) = c
                    .sendrecv::<u8, u8>(right, 4, &big, Some(left), Some(4))
                    .unwrap();
                assert_eq!(b, vec![left as u8; MAX_PAYLOAD as usize + 5]);
                c.barrier().unwrap();
            },
        );
    });
}
