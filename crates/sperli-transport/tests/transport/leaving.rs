//! A peer that leaves: its BYE, a frame after it, a receive that waits
//! for it.

use std::io::Write;
use std::thread;
use std::time::Duration;

use sperli_tls::job_plan::JobPlan;
use sperli_transport::Endpoint;
use sperli_wire::error::{FrameError, LossCause};
use sperli_wire::frame::encode_frame_bytes;
use sperli_wire::header::FrameHeader;
use sperli_wire::{Error, FrameType};

use crate::common::{code, held_listener, run_ranks, settings, with_deadline};
use crate::hostile::{accept_as, hello, read_until};

/// A raw rank 1 says BYE and then sends a frame (COLLECTIVE or DATA, in
/// one write or two), while rank 0 waits in `recv_collective` from it, as
/// in a barrier. Rank 0's program must see H1610 ("after BYE"), as the
/// ABORT on the wire says (reason 7, code 1610), every time: the BYE
/// alone never reaches the program as the peer's departure.
#[test]
fn a_frame_after_bye_reaches_the_program_as_h1610() {
    with_deadline(Duration::from_secs(120), || {
        for round in 0..6u32 {
            let plan = std::sync::Arc::new(JobPlan::localhost_bound(2).unwrap());
            let l = held_listener(&plan, 1);
            let p = plan.clone();
            let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
            let raw = thread::spawn(move || {
                let (rank, mut s) = accept_as(&p, 1, &l);
                assert_eq!(rank, 0);
                s.write_all(&hello(&p, 1, 0, p.token(1))).unwrap();
                s.flush().unwrap();
                // Rank 0 is set up and waits in its call.
                up_rx.recv().unwrap();
                let bye = FrameHeader::new(FrameType::Bye, p.job_id, 1, 0, p.incarnation);
                let after = if round % 2 == 0 {
                    let bcast = [2u8, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
                    let h = FrameHeader::new(FrameType::Collective, p.job_id, 1, 0, p.incarnation);
                    encode_frame_bytes(h, &bcast)
                } else {
                    let h = FrameHeader::new(FrameType::Data, p.job_id, 1, 0, p.incarnation);
                    encode_frame_bytes(h, b"late")
                };
                if round < 4 {
                    let mut both = bye.to_bytes().to_vec();
                    both.extend_from_slice(&after);
                    s.write_all(&both).unwrap();
                    s.flush().unwrap();
                } else {
                    // BYE and the frame in TCP segments of their own.
                    s.sock.set_nodelay(true).unwrap();
                    s.write_all(&bye.to_bytes()).unwrap();
                    s.flush().unwrap();
                    s.write_all(&after).unwrap();
                    s.flush().unwrap();
                }
                let _ = s.sock.set_read_timeout(Some(Duration::from_secs(5)));
                read_until(&mut s, FrameType::Abort)
            });
            let res = run_ranks(&plan, &[0], settings(), move |ep: Endpoint| {
                let _ = up_tx.send(());
                Ok(ep.recv_collective(1))
            });
            let abort = raw.join().unwrap().expect("an ABORT from rank 0");
            let e = res[0]
                .as_ref()
                .expect("set-up")
                .as_ref()
                .expect_err("the frame after BYE");
            assert!(
                matches!(
                    e,
                    Error::FrameRejected(FrameError::Unexpected {
                        when: "after BYE",
                        ..
                    })
                ),
                "round {round}: {e}"
            );
            assert_eq!(
                &abort[..8],
                &[7, 0, 0, 0, 0x4a, 0x06, 0, 0],
                "reason 7, 1610"
            );
        }
    });
}

/// A peer that ended normally (BYE, close) while a receive waited for it:
/// the receive fails with H1613 and the cause `Departed`, "peer rank 1
/// left (BYE)"; so does a send to it; what it sent before it left is still
/// received; the job itself goes on (this rank finishes normally).
#[test]
fn a_peer_that_left_is_reported_as_departed() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(2).unwrap();
        let res = run_ranks(&plan, &[0, 1], settings(), |ep: Endpoint| {
            if ep.rank() == 1 {
                ep.send(0, 4, b"last words")?;
                return ep.finish().map(|()| None);
            }
            let e = ep.recv(1, 5).unwrap_err();
            assert_eq!(ep.recv(1, 4)?, b"last words");
            let s = ep.send(1, 5, b"too late").unwrap_err();
            assert_eq!(s, e);
            assert_eq!(ep.error(), None, "the job did not fail");
            ep.finish()?;
            Ok(Some(e))
        });
        let e = res[0].as_ref().unwrap().clone().unwrap();
        assert_eq!(
            e,
            Error::PeerLost {
                peer: 1,
                cause: LossCause::Departed
            }
        );
        assert_eq!(e.to_string(), "H1613 peer rank 1 left (BYE)");
        assert_eq!(code(&e), 1613);
        assert!(res[1].is_ok());
    });
}
