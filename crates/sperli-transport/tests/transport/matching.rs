//! Matching over real TLS: any source, probes, waits over several
//! handles, an endpoint shared by threads, large messages.

use std::sync::Arc;
use std::time::Duration;

use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, Status};

use crate::common::{run_ranks, settings, with_deadline};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn an_endpoint_is_send_and_sync() {
    assert_send_sync::<Endpoint>();
}

/// Three senders, one any-source receiver: every message arrives once,
/// each sender's in its order, each with the right status; `probe` and
/// `iprobe` see a message without taking it.
#[test]
fn any_source_with_three_senders() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(4).unwrap();
        let res = run_ranks(&plan, &[0, 1, 2, 3], settings(), |ep: Endpoint| {
            let me = ep.rank();
            if me > 0 {
                for i in 0..20u32 {
                    ep.send(0, 7, &[me as u8, i as u8])?;
                }
                ep.recv(0, 9)?;
                return ep.finish().map(|()| Vec::new());
            }
            let st = ep.probe(None, Some(7))?;
            assert_eq!((st.tag, st.len), (7, 2));
            assert_eq!(ep.iprobe(Some(st.source), Some(7))?.map(|s| s.len), Some(2));
            assert_eq!(ep.iprobe(None, Some(8))?, None);
            let mut got = Vec::new();
            for _ in 0..60 {
                let (Status { source, tag, len }, m) = ep.recv_match(None, Some(7))?;
                assert_eq!((tag, len, m[0] as u32), (7, 2, source));
                got.push((source, m[1]));
            }
            for r in 1..4 {
                ep.send(r, 9, b"done")?;
            }
            ep.finish()?;
            Ok(got)
        });
        let got = res[0].as_ref().unwrap();
        for r in 1..4u32 {
            let order: Vec<u8> = got.iter().filter(|g| g.0 == r).map(|g| g.1).collect();
            assert_eq!(order, (0..20).collect::<Vec<u8>>(), "sender {r}");
        }
        for r in &res[1..] {
            r.as_ref().unwrap();
        }
    });
}

/// `wait_any` over receives from three peers that answer in an order each
/// picks at random: every handle completes exactly once, with its own
/// peer's message; `wait_any` then says none is left.
#[test]
fn wait_any_under_a_racing_arrival_order() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(4).unwrap();
        let res = run_ranks(&plan, &[0, 1, 2, 3], settings(), |ep: Endpoint| {
            let me = ep.rank();
            if me > 0 {
                for round in 0..10u32 {
                    ep.recv(0, 1)?;
                    // A racing arrival order: each peer yields a different
                    // number of times before it answers.
                    for _ in 0..(me * 7 + round * 13) % 5 * 100 {
                        std::thread::yield_now();
                    }
                    ep.send(0, 2, &[me as u8, round as u8])?;
                }
                return ep.finish().map(|()| 0);
            }
            let mut done = 0;
            for round in 0..10u8 {
                let mut hs: Vec<_> = (1..4)
                    .map(|r| ep.irecv(r, Some(2)))
                    .collect::<Result<_, _>>()?;
                for r in 1..4 {
                    ep.send(r, 1, b"go")?;
                }
                let mut seen = [false; 4];
                while let Some((i, (st, m))) = ep.wait_any(&mut hs)? {
                    assert_eq!(st.source, i as u32 + 1);
                    assert_eq!(m, vec![st.source as u8, round]);
                    assert!(!seen[i]);
                    seen[i] = true;
                    done += 1;
                }
                assert!(hs.iter().all(|h| h.is_done()));
                assert_eq!(ep.test_any(&mut hs)?, None);
            }
            assert_eq!(ep.open_handles(), (0, 0));
            ep.finish()?;
            Ok(done)
        });
        assert_eq!(*res[0].as_ref().unwrap(), 30);
    });
}

/// One endpoint, two threads: one waits in a receive the whole time while
/// the other ping-pongs; both get their messages, and a receive posted on
/// one thread stays open while the other thread sends and receives.
#[test]
fn an_endpoint_shared_by_two_threads() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(2).unwrap();
        let res = run_ranks(&plan, &[0, 1], settings(), |ep: Endpoint| {
            let ep = Arc::new(ep);
            let other = 1 - ep.rank();
            let waiter = {
                let ep = ep.clone();
                std::thread::spawn(move || ep.recv(other, 99))
            };
            let open = ep.irecv(other, Some(98))?;
            for i in 0..200u32 {
                if ep.rank() == 0 {
                    ep.send(other, 1, &i.to_le_bytes())?;
                    assert_eq!(ep.recv(other, 1)?, i.to_le_bytes());
                } else {
                    let m = ep.recv(other, 1)?;
                    ep.send(other, 1, &m)?;
                }
            }
            ep.send(other, 98, b"open")?;
            ep.send(other, 99, b"waited")?;
            assert_eq!(waiter.join().unwrap()?, b"waited");
            assert_eq!(open.wait()?.1, b"open");
            match Arc::try_unwrap(ep) {
                Ok(ep) => ep.finish(),
                Err(_) => panic!("the waiter still holds the endpoint"),
            }
        });
        for r in res {
            r.unwrap();
        }
    });
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
}

/// Large messages, received while they stream in (the receive posted
/// first) and after they arrived (queued first), at the sizes around a
/// frame's edge.
#[test]
fn large_messages_stream_into_the_receive() {
    with_deadline(Duration::from_secs(120), || {
        const MAX: usize = 16 << 20;
        let sizes = [0usize, 1, MAX - 8, MAX - 7, 2 * MAX + 3];
        let plan = JobPlan::localhost_bound(2).unwrap();
        let res = run_ranks(&plan, &[0, 1], settings(), move |ep: Endpoint| {
            for (i, &n) in sizes.iter().enumerate() {
                let seed = i as u8;
                if ep.rank() == 0 {
                    // Posted first: rank 1 waits in recv_large already.
                    ep.recv(1, 50)?;
                    ep.send_large(1, 5, &pattern(seed, n))?;
                    // Queued first: rank 1 receives after it all came.
                    ep.send_large(1, 6, &pattern(seed ^ 0x55, n))?;
                    ep.send(1, 51, b"sent")?;
                } else {
                    ep.send(0, 50, b"ready")?;
                    assert!(ep.recv_large(0, 5)? == pattern(seed, n), "posted {n}");
                    ep.recv(0, 51)?;
                    assert!(
                        ep.recv_large(0, 6)? == pattern(seed ^ 0x55, n),
                        "queued {n}"
                    );
                }
            }
            ep.finish()
        });
        for r in res {
            r.unwrap();
        }
    });
}
