//! The send fast path (the user's thread writes into TLS and the socket
//! itself): order behind frames the I/O thread still holds, heartbeats in
//! between, and refusal after a failure.

use std::io::{Read, Write};
use std::thread;
use std::time::Duration;

use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, Settings};
use sperli_wire::ckpt_begin::CkptBegin;
use sperli_wire::header::RawHeader;
use sperli_wire::payload::Payload;
use sperli_wire::{Error, FrameType};

use crate::common::{code, held_listener, run_ranks, settings, start_rank, with_deadline};
use crate::hostile::{accept_as, hello, read_until};

/// A bcast phase-1 collective payload (root 0, sequence 1) with 4 data bytes.
const BCAST: [u8; 20] = [2, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 8, 7, 6];
const BIG: usize = 16 * 1024 * 1024;

fn big(seed: u8) -> Vec<u8> {
    (0..BIG).map(|i| (i % 253) as u8 ^ seed).collect()
}

/// What the raw peer saw: frame type, tag, payload.
type Seen = Vec<(u8, u32, Vec<u8>)>;

/// Rank 0 is an Endpoint; rank 1 a raw TLS peer that reads nothing until
/// rank 0 has idled with its backlog, so rank 0's 16 MiB `isend` stays queued on the I/O thread
/// (socket full) while small sends take the fast path: they must queue
/// behind it, and HEARTBEATs the I/O thread adds while the user's thread
/// is idle must keep consecutive counters without disturbing the order.
/// The raw peer records the exact wire order.
#[test]
fn fast_path_sends_keep_wire_order_behind_queued_frames_and_heartbeats() {
    with_deadline(Duration::from_secs(90), || {
        let plan = std::sync::Arc::new(JobPlan::localhost_bound(2).unwrap());
        let l = held_listener(&plan, 1);
        let p = plan.clone();
        let (idle_tx, idle_rx) = std::sync::mpsc::channel::<()>();
        let raw = thread::spawn(move || -> Seen {
            let (rank, mut s) = accept_as(&p, 1, &l);
            assert_eq!(rank, 0);
            s.write_all(&hello(&p, 1, 0, p.token(1))).unwrap();
            s.flush().unwrap();
            // Reads nothing until rank 0 has idled with its backlog.
            idle_rx.recv().unwrap();
            s.sock
                .set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let mut seen = Vec::new();
            loop {
                let mut head = [0u8; 52];
                s.read_exact(&mut head).unwrap();
                let h = RawHeader::from_bytes(&head);
                let mut payload = vec![0u8; h.length as usize];
                s.read_exact(&mut payload).unwrap();
                let bye = h.frame_type == FrameType::Bye.code();
                seen.push((h.frame_type, h.tag, payload));
                if bye {
                    break;
                }
            }
            s.conn.send_close_notify();
            let _ = s.flush();
            seen
        });
        let s = Settings {
            silence: Duration::from_secs(30), // the raw peer sends no heartbeats
            ..settings()
        };
        let ep = start_rank(&plan, 0, s).unwrap();
        let first = big(1);
        let h1 = ep.isend(1, 1, &first).unwrap();
        for i in 0..20u32 {
            ep.send(1, 100 + i, &i.to_le_bytes()).unwrap();
        }
        // Idle with a backlog: the I/O thread queues HEARTBEAT 1 behind it
        // (protocol §7.4: one after 1000 ms without a frame sent).
        thread::sleep(Duration::from_millis(1800));
        for i in 20..40u32 {
            ep.send(1, 100 + i, &i.to_le_bytes()).unwrap();
        }
        ep.send_collective(1, &BCAST).unwrap();
        idle_tx.send(()).unwrap();
        h1.wait().unwrap();
        // Idle with nothing queued: the next HEARTBEAT leaves alone
        // (protocol §7.4: 1000 ms without a frame sent).
        thread::sleep(Duration::from_millis(1500));
        for i in 40..60u32 {
            ep.send(1, 100 + i, &i.to_le_bytes()).unwrap();
        }
        let second = big(2);
        ep.send(1, 2, &second).unwrap(); // > 64 KiB: waits until written
        for i in 60..80u32 {
            ep.send(1, 100 + i, &i.to_le_bytes()).unwrap();
        }
        ep.finish().unwrap();
        let seen = raw.join().unwrap();

        let data = FrameType::Data.code();
        let hb = FrameType::Heartbeat.code();
        // Heartbeat counters: 1, 2, 3, ... in wire order.
        let counters: Vec<u64> = seen
            .iter()
            .filter(|f| f.0 == hb)
            .map(|f| u64::from_le_bytes(f.2[..8].try_into().unwrap()))
            .collect();
        assert_eq!(counters, (1..=counters.len() as u64).collect::<Vec<_>>());
        // Everything but heartbeats, in send order.
        let mut want: Vec<(u8, u32, Vec<u8>)> = vec![(data, 1, first)];
        assert_eq!(seen[0].0, FrameType::Hello.code());
        want.extend((0..40u32).map(|i| (data, 100 + i, i.to_le_bytes().to_vec())));
        want.push((FrameType::Collective.code(), 0, BCAST.to_vec()));
        want.extend((40..60u32).map(|i| (data, 100 + i, i.to_le_bytes().to_vec())));
        want.push((data, 2, second));
        want.extend((60..80u32).map(|i| (data, 100 + i, i.to_le_bytes().to_vec())));
        want.push((FrameType::Bye.code(), 0, Vec::new()));
        let got: Vec<&(u8, u32, Vec<u8>)> = seen[1..].iter().filter(|f| f.0 != hb).collect();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.0 == w.0 && g.1 == w.1 && g.2 == w.2,
                "frame {i}: got type {} tag {} ({} bytes), want type {} tag {} ({} bytes)",
                g.0,
                g.1,
                g.2.len(),
                w.0,
                w.1,
                w.2.len()
            );
        }
        // Where a heartbeat falls (behind the backlog, or alone when nothing
        // is queued) is a rule of the clock, not of this machine's load:
        // the sans-I/O unit test
        // `heartbeats_queue_behind_a_backlog_with_consecutive_counters`
        // judges it with a fake clock. Here the idle pauses only give the
        // I/O thread time to add heartbeats among real writes, whose
        // counters and order are checked above.
    });
}

/// After a failure (rank 2 aborts) every send path refuses at once with
/// the job's error, while the failed ranks still linger on their sockets;
/// a 16 MiB send in progress when the failure comes does not hang.
#[test]
fn fast_path_send_after_failure_returns_the_job_error() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(3).unwrap();
        let res = run_ranks(&plan, &[0, 1, 2], settings(), |ep: Endpoint| {
            let me = ep.rank();
            if me == 2 {
                // Only once both others are up (on a loaded machine their
                // set-up may end long after this rank's), then while they
                // are busy.
                ep.recv(0, 9)?;
                ep.recv(1, 9)?;
                // Rank 0 has a big message through and sends the next.
                ep.recv(0, 10)?;
                ep.abort(sperli_wire::abort::AbortReason::Application, 0, "stop");
                return Ok(None);
            }
            ep.send(2, 9, b"up")?;
            let other = 1 - me;
            let e = if me == 0 {
                // Sending big messages when the failure comes: returns.
                let m = vec![5u8; BIG];
                let mut busy = false;
                loop {
                    if let Err(e) = ep.send(other, 1, &m) {
                        break e;
                    }
                    if !std::mem::replace(&mut busy, true) {
                        ep.send(2, 10, b"busy")?;
                    }
                }
            } else {
                // Takes the big messages until the failure comes.
                loop {
                    if let Err(e) = ep.recv(other, 1) {
                        break e;
                    }
                }
            };
            assert!(code(&e) == 1612 || code(&e) == 1613, "rank {me}: {e}");
            // Every send path now refuses with the same error.
            assert_eq!(ep.send(other, 1, b"small").unwrap_err(), e);
            assert_eq!(ep.send(other, 1, &vec![1u8; 100_000]).unwrap_err(), e);
            assert_eq!(ep.isend(other, 1, b"x").unwrap_err(), e);
            assert_eq!(ep.send_collective(other, &BCAST).unwrap_err(), e);
            let begin = Payload::CkptBegin(CkptBegin { size: 3 });
            assert_eq!(ep.send_frame(other, 1, &begin).unwrap_err(), e);
            assert_eq!(ep.error(), Some(e.clone()));
            Ok(Some(e))
        });
        let all = format!("{res:?}");
        for (r, x) in res.into_iter().enumerate() {
            let x = x.unwrap_or_else(|e| panic!("rank {r}: {e}; all: {all}"));
            if r == 2 {
                continue;
            }
            let e = x.unwrap();
            // Both survivors name rank 2's abort unless a close came first.
            if code(&e) == 1612 {
                assert!(matches!(e, Error::AbortedByPeer { .. }), "{e}");
            }
        }
    });
}

/// A 16 MiB `isend` still queued (the raw peer reads only its header) when
/// the peer says BYE and closes: waiting on the handle returns H1613 (the
/// peer left) instead of blocking forever, and the job itself goes on. The
/// peer leaves once the frame's header came (an event, not a sleep).
#[test]
fn a_send_queued_to_a_peer_that_leaves_returns_instead_of_hanging() {
    with_deadline(Duration::from_secs(60), || {
        let plan = std::sync::Arc::new(JobPlan::localhost_bound(2).unwrap());
        let l = held_listener(&plan, 1);
        let p = plan.clone();
        let raw = thread::spawn(move || {
            let (rank, mut s) = accept_as(&p, 1, &l);
            assert_eq!(rank, 0);
            s.write_all(&hello(&p, 1, 0, p.token(1))).unwrap();
            s.flush().unwrap();
            // Rank 0's HELLO, then the header of its 16 MiB DATA frame.
            assert!(read_until(&mut s, FrameType::Hello).is_some());
            let mut head = [0u8; 52];
            s.read_exact(&mut head).unwrap();
            assert_eq!(head[4], FrameType::Data.code());
            // BYE without reading the rest, then close.
            let bye = sperli_wire::header::FrameHeader::new(
                FrameType::Bye,
                p.job_id,
                1,
                0,
                p.incarnation,
            );
            s.write_all(&bye.to_bytes()).unwrap();
            s.conn.send_close_notify();
            s.flush().unwrap();
            let _ = s.sock.shutdown(std::net::Shutdown::Both);
        });
        let data = std::sync::Arc::new(big(3));
        let res = run_ranks(&plan, &[0], settings(), move |ep: Endpoint| {
            // The peer may be gone before isend has written all it can.
            Ok(ep.isend(1, 4, &data).and_then(|h| h.wait()))
        });
        raw.join().unwrap();
        let waited = res.into_iter().next().unwrap().expect("set-up");
        let e = waited.expect_err("the send cannot have been written whole");
        assert_eq!(code(&e), 1613, "{e}");
    });
}
