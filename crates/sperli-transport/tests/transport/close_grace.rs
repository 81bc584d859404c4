//! A close without BYE waits for the ABORT that explains it (protocol §7.5,
//! "This implementation"). Rank 2 is a raw peer that aborts the job: its
//! ABORT goes to rank 0 first, to rank 1 only later (or never); rank 0
//! closes every connection on it, so rank 1 sees rank 0's close before the
//! ABORT that caused it.

use std::io::Write;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use sperli_tls::job_plan::JobPlan;
use sperli_transport::Endpoint;
use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::error::LossCause;
use sperli_wire::frame::encode_frame;
use sperli_wire::header::FrameHeader;
use sperli_wire::payload::Payload;
use sperli_wire::{Error, FrameType};

use crate::common::{held_listener, run_ranks, settings, with_deadline};
use crate::hostile::accept_both;

fn abort_frame(plan: &JobPlan, to: u32) -> Vec<u8> {
    let h = FrameHeader::new(FrameType::Abort, plan.job_id, 2, to, plan.incarnation);
    let a = Abort {
        reason: AbortReason::Application,
        code: 0,
        message: b"stop here",
    };
    encode_frame(h, &Payload::Abort(a))
}

/// Ranks 0 and 1 wait in `recv(2, 1)`; rank 2 sends ABORT to rank 0, then
/// after `late` to rank 1 (`None`: never, it only keeps the connection
/// open a while). Returns ranks 0 and 1's errors.
fn job(late: Option<Duration>) -> (Error, Error) {
    let plan = Arc::new(JobPlan::localhost_bound(3).unwrap());
    let l = held_listener(&plan, 2);
    let p = plan.clone();
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let originator = thread::spawn(move || {
        let mut streams = accept_both(&p, &l);
        for _ in 0..2 {
            up_rx.recv().unwrap();
        }
        // Both are in their receive calls.
        thread::sleep(Duration::from_millis(50));
        streams[0].1.write_all(&abort_frame(&p, 0)).unwrap();
        streams[0].1.flush().unwrap();
        match late {
            Some(d) => {
                thread::sleep(d);
                let _ = streams[1].1.write_all(&abort_frame(&p, 1));
                let _ = streams[1].1.flush();
            }
            None => thread::sleep(Duration::from_secs(1)),
        }
        streams
    });
    let res = run_ranks(&plan, &[0, 1], settings(), move |ep: Endpoint| {
        let _ = up_tx.send(());
        ep.recv(2, 1)
    });
    drop(originator.join().unwrap());
    let mut res = res.into_iter().map(|r| r.unwrap_err());
    (res.next().unwrap(), res.next().unwrap())
}

fn assert_aborted_by_2(e: &Error, who: &str) {
    match e {
        Error::AbortedByPeer {
            from: 2,
            reason: 2,
            code: 0,
            message,
        } => assert_eq!(message, "stop here", "{who}"),
        e => panic!("{who}: {e}"),
    }
}

#[test]
fn an_abort_that_comes_after_the_close_it_caused_names_the_originator() {
    with_deadline(Duration::from_secs(60), || {
        let (e0, e1) = job(Some(Duration::from_millis(100)));
        assert_aborted_by_2(&e0, "rank 0");
        // Rank 0's close came 100 ms before rank 2's ABORT: held, then
        // explained (H1612, not H1613 naming the messenger).
        assert_aborted_by_2(&e1, "rank 1");
    });
}

#[test]
fn a_close_that_nothing_explains_is_a_lost_peer_after_the_grace() {
    with_deadline(Duration::from_secs(60), || {
        let (e0, e1) = job(None);
        assert_aborted_by_2(&e0, "rank 0");
        match e1 {
            Error::PeerLost {
                peer: 0,
                cause: LossCause::ClosedWithoutBye,
            } => {}
            e => panic!("rank 1: {e}"),
        }
    });
}
