//! Ranks that all run an Endpoint.

use std::time::Duration;

use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, Settings};
use sperli_wire::abort::AbortReason;
use sperli_wire::error::UsageError;
use sperli_wire::Error;

use crate::common::{code, run_ranks, settings, with_deadline};

fn all_to_all(size: u32) {
    with_deadline(Duration::from_secs(60), move || {
        let plan = JobPlan::localhost_bound(size).unwrap();
        let ranks: Vec<u32> = (0..size).collect();
        let res = run_ranks(&plan, &ranks, settings(), move |ep: Endpoint| {
            let me = ep.rank();
            assert_eq!(ep.size(), size);
            // Send to everyone (self included): tag 1 then tag 2, plus an empty message.
            for to in 0..size {
                ep.send(to, 2, format!("two {me}->{to}").as_bytes())?;
                ep.send(to, 1, format!("one {me}->{to}").as_bytes())?;
                ep.send(to, 7, b"")?;
            }
            for from in 0..size {
                // Out of order: tag 1 first although tag 2 came first.
                assert_eq!(ep.recv(from, 1)?, format!("one {from}->{me}").into_bytes());
                assert_eq!(ep.recv(from, 7)?, b"");
                assert_eq!(ep.recv(from, 2)?, format!("two {from}->{me}").into_bytes());
            }
            assert_eq!(ep.open_handles(), (0, 0));
            ep.finish()
        });
        for (r, x) in res.into_iter().enumerate() {
            x.unwrap_or_else(|e| panic!("rank {r}: {e}"));
        }
    });
}

#[test]
fn two_ranks_exchange() {
    all_to_all(2);
}

#[test]
fn three_ranks_exchange() {
    all_to_all(3);
}

#[test]
fn four_ranks_exchange() {
    all_to_all(4);
}

/// A bcast phase-1 collective payload (root 0, sequence 1) with 4 data bytes.
const BCAST: [u8; 20] = [2, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 8, 7, 6];

#[test]
fn nonblocking_large_and_collective_seam() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(2).unwrap();
        let res = run_ranks(&plan, &[0, 1], settings(), |ep: Endpoint| {
            let me = ep.rank();
            let other = 1 - me;
            let big: Vec<u8> = (0..(16 * 1024 * 1024 + 1000))
                .map(|i| (i % 251) as u8)
                .collect();
            if me == 0 {
                let h = ep.isend(other, 5, b"first")?;
                assert_eq!(ep.open_handles().0, 1);
                h.wait()?;
                ep.send_collective(other, &BCAST)?;
                ep.send(other, 6, b"after-collective")?;
                ep.send_large(other, 9, &big)?;
                ep.send(other, 0x7fff_ffff, b"max tag")?;
                assert!(matches!(
                    ep.send(other, 0x8000_0000, b"x"),
                    Err(Error::InvalidArguments(_))
                ));
                assert_eq!(ep.recv(other, 1)?, b"done");
            } else {
                let mut r2 = ep.irecv(other, Some(6))?;
                let r1 = ep.irecv(other, None)?;
                assert_eq!(ep.open_handles().1, 2);
                let (st, m) = r1.wait()?;
                assert_eq!((st.source, st.tag, m.as_slice()), (0, 5, &b"first"[..]));
                // The collective frame is kept for recv_collective.
                assert_eq!(ep.recv_collective(other)?, BCAST.to_vec());
                loop {
                    if let Some((_, m)) = r2.test()? {
                        assert_eq!(m, b"after-collective");
                        break;
                    }
                    std::thread::yield_now();
                }
                drop(r2);
                assert_eq!(ep.recv_large(other, 9)?, big);
                assert_eq!(ep.recv(other, 0x7fff_ffff)?, b"max tag");
                assert_eq!(ep.open_handles(), (0, 0));
                ep.send(other, 1, b"done")?;
            }
            ep.finish()
        });
        let errs: Vec<String> = res
            .iter()
            .enumerate()
            .filter_map(|(r, x)| x.as_ref().err().map(|e| format!("rank {r}: {e}")))
            .collect();
        assert!(errs.is_empty(), "{errs:?}");
    });
}

#[test]
fn abort_reaches_peer_as_h1612() {
    abort_test(2);
}

#[test]
fn abort_in_three_ranks() {
    abort_test(3);
}

fn abort_test(size: u32) {
    with_deadline(Duration::from_secs(60), move || {
        let plan = JobPlan::localhost_bound(size).unwrap();
        let ranks: Vec<u32> = (0..size).collect();
        let res = run_ranks(&plan, &ranks, settings(), |ep: Endpoint| {
            if ep.rank() == 0 {
                ep.abort(AbortReason::Application, 0, "stop here");
                let e = ep.send(1, 1, b"x").unwrap_err();
                assert_eq!(code(&e), 1612);
                return Err::<(), Error>(e);
            }
            // Blocked in recv: must return the job's error.
            let e = ep.recv(0, 1).unwrap_err();
            Err(e)
        });
        // A rank that sees another's close before rank 0's ABORT waits
        // for the ABORT (protocol §7.5): every rank names rank 0.
        for (r, res) in res.iter().enumerate().skip(1) {
            match res.as_ref().unwrap_err() {
                Error::AbortedByPeer {
                    from: 0,
                    reason: 2,
                    code: 0,
                    message,
                } => assert_eq!(message, "stop here"),
                e => panic!("rank {r}: {e}"),
            }
        }
    });
}

#[test]
fn heartbeats_keep_a_computing_rank_alive() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(2).unwrap();
        let s = Settings {
            silence: Duration::from_millis(1500),
            ..settings()
        };
        // Computing (not in a call) for twice the silence limit: the I/O
        // thread has the sockets back and sends the heartbeats. (When they
        // are due is the connection's unit test.)
        let res = run_ranks(&plan, &[0, 1], s, |ep: Endpoint| {
            let other = 1 - ep.rank();
            for i in 0..2u8 {
                ep.send(other, 3, &[i])?;
                assert_eq!(ep.recv(other, 3)?, vec![i]);
                // protocol §7.4: computing for twice the 1500 ms silence
                // limit; only the heartbeats keep the peer alive.
                std::thread::sleep(Duration::from_millis(3000));
            }
            ep.finish()
        });
        for x in res {
            x.unwrap();
        }
    });
}

#[test]
fn setup_times_out_with_h1616() {
    with_deadline(Duration::from_secs(30), || {
        let plan = JobPlan::localhost_bound(2).unwrap();
        let s = Settings {
            setup_window: Duration::from_millis(1500),
            ..settings()
        };
        // Rank 1 never starts.
        let res = run_ranks(&plan, &[0], s, |ep: Endpoint| ep.finish());
        let e = res[0].as_ref().unwrap_err();
        assert_eq!(code(e), 1616, "{e}");
    });
}

#[test]
fn single_rank_job_talks_to_itself() {
    with_deadline(Duration::from_secs(30), || {
        let plan = JobPlan::localhost_bound(1).unwrap();
        let res = run_ranks(&plan, &[0], settings(), |ep: Endpoint| {
            ep.send(0, 4, b"self")?;
            ep.send(0, 3, b"")?;
            assert_eq!(ep.recv(0, 3)?, b"");
            assert_eq!(ep.recv_any_tag(0)?.1, b"self");
            ep.send_collective(0, &BCAST)?;
            assert_eq!(ep.recv_collective(0)?, BCAST.to_vec());
            ep.finish()
        });
        res.into_iter().for_each(|r| r.unwrap());
    });
}

/// Runs a `size`-rank job where rank `r` announces `features(r)`; returns
/// what each rank's endpoint says the job's features are.
fn negotiated(size: u32, features: fn(u32) -> u64) -> Vec<u64> {
    with_deadline(Duration::from_secs(60), move || {
        let plan = JobPlan::localhost_bound(size).unwrap();
        let handles: Vec<_> = (0..size)
            .map(|r| {
                let desc = plan.description(r);
                let s = Settings {
                    features: features(r),
                    listener: plan.take_listener(r),
                    ..settings()
                };
                std::thread::spawn(move || {
                    let ep = Endpoint::start(&desc, s)?;
                    let f = ep.features();
                    ep.finish()?;
                    Ok::<u64, Error>(f)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    })
}

#[test]
fn an_extension_is_used_only_when_every_rank_announces_it() {
    use sperli_wire::limits::{FEATURE_COMMUNICATORS, FEATURE_PIPELINED, FEATURE_V1_CORE};
    const ALL: u64 = FEATURE_V1_CORE | FEATURE_PIPELINED | FEATURE_COMMUNICATORS;
    let all = ALL;
    assert_eq!(negotiated(3, |_| ALL), vec![all; 3]);
    // Rank 2 clears bit 1: no rank uses it; bit 2 stays. Bit 0 is always sent.
    let mixed = negotiated(3, |r| if r == 2 { FEATURE_COMMUNICATORS } else { ALL });
    assert_eq!(mixed, vec![FEATURE_V1_CORE | FEATURE_COMMUNICATORS; 3]);
    assert_eq!(negotiated(1, |_| ALL), vec![all]);
}

#[test]
fn a_handed_listener_bound_elsewhere_is_a_usage_error() {
    with_deadline(Duration::from_secs(30), || {
        let plan = JobPlan::localhost_bound(1).unwrap();
        // Rank 0's own port stays held; hand it a listener on another port.
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let got = other.local_addr().unwrap();
        let s = Settings {
            listener: Some(std::sync::Arc::new(other)),
            ..settings()
        };
        match Endpoint::start(&plan.description(0), s) {
            Err(Error::Usage(UsageError::ListenerAddress { expected, got: g })) => {
                assert_eq!(g, got);
                assert_eq!(expected.port(), plan.hosts[0].port);
            }
            other => panic!("expected ListenerAddress, got {:?}", other.err()),
        }
    });
}

#[test]
fn a_rank_listens_before_it_reads_its_identity() {
    // Protocol §5.1 step 1: the rank listens "before anything else". Its
    // port is held (by the plan) and its key is not PEM: the bind fails
    // first, so the listener comes before the TLS configurations, which
    // take a while; peers that dial meanwhile are queued, not refused.
    with_deadline(Duration::from_secs(30), || {
        let plan = JobPlan::localhost_bound(1).unwrap();
        let mut desc = plan.description(0);
        desc.rank_key_pem = b"not a key".to_vec();
        match Endpoint::start(&desc, settings()) {
            Err(Error::Io { op, kind }) => {
                assert_eq!(op, "binding own host:port");
                assert_eq!(kind, std::io::ErrorKind::AddrInUse);
            }
            other => panic!("expected the bind to fail first, got {:?}", other.err()),
        }
    });
}
