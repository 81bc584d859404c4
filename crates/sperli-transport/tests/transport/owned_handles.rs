//! Owned request handles (`isend_owned`, `irecv_owned`, ...) over real
//! TLS: they hold the endpoint's `Arc` instead of a borrow, move to other
//! threads, and keep the borrowed handles' semantics: completion by
//! `test`/`wait`/`wait_any`, the open-handle count, a dropped send still
//! delivered, a dropped receive cancelled.

use std::sync::Arc;
use std::time::Duration;

use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, OwnedRecvHandle, OwnedSendHandle};
use sperli_wire::Error;

use crate::common::{run_ranks, settings, with_deadline};

fn assert_send_static<T: Send + 'static>() {}

#[test]
fn owned_handles_borrow_nothing() {
    assert_send_static::<OwnedSendHandle>();
    assert_send_static::<OwnedRecvHandle>();
}

/// Rank 1 posts an owned receive and drops it unfinished (cancelled: the
/// message of that tag goes to the next receive), then receives with owned
/// handles on another thread; rank 0 drops an owned send unfinished (the
/// message still arrives) and completes others by `test` and `wait`.
/// Every handle keeps its endpoint's `Arc` while it lives, and the open
/// counts are back at zero once every handle is gone.
#[test]
fn an_owned_isend_irecv_pair_with_early_drops() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(2).unwrap();
        let res = run_ranks(&plan, &[0, 1], settings(), |ep: Endpoint| {
            let ep = Arc::new(ep);
            if ep.rank() == 0 {
                ep.recv(1, 6)?; // rank 1 dropped its first receive
                let early = ep.isend_owned(1, 5, b"first")?;
                assert_eq!(Arc::strong_count(&ep), 2);
                assert_eq!(ep.open_handles().0, 1);
                drop(early);
                assert_eq!((Arc::strong_count(&ep), ep.open_handles().0), (1, 0));
                let mut tested = ep.isend_owned(1, 5, b"second")?;
                while !tested.test()? {
                    std::thread::yield_now();
                }
                let big = vec![7u8; 200_000];
                let waited = ep.isend_owned(1, 8, &big)?;
                std::thread::spawn(move || waited.wait()).join().unwrap()?;
                drop(tested);
                assert_eq!(ep.open_handles(), (0, 0));
                ep.recv(1, 9)?;
            } else {
                let cancelled = ep.irecv_owned(0, Some(5))?;
                assert_eq!(ep.open_handles().1, 1);
                drop(cancelled);
                assert_eq!((Arc::strong_count(&ep), ep.open_handles().1), (1, 0));
                ep.send(0, 6, b"go")?;
                let mut hs = vec![
                    ep.irecv_owned(0, Some(5))?,
                    ep.irecv_match_owned(Some(0), Some(5))?,
                ];
                let big = ep.irecv_owned(0, Some(8))?;
                assert_eq!((Arc::strong_count(&ep), ep.open_handles().1), (4, 3));
                let waiter = Arc::clone(&ep);
                let (first, second) = std::thread::spawn(move || {
                    let a = wait_any(&waiter, &mut hs);
                    let b = wait_any(&waiter, &mut hs);
                    (a, b)
                })
                .join()
                .unwrap();
                assert_eq!(first?, (0, b"first".to_vec()));
                assert_eq!(second?, (1, b"second".to_vec()));
                let (st, m) = big.wait()?;
                assert_eq!((st.source, st.tag, m.len()), (0, 8, 200_000));
                assert!(m.iter().all(|&b| b == 7));
                assert_eq!((Arc::strong_count(&ep), ep.open_handles()), (1, (0, 0)));
                ep.send(0, 9, b"done")?;
            }
            Arc::try_unwrap(ep).expect("no handle left").finish()
        });
        for r in res {
            r.unwrap();
        }
    });
}

/// `wait_any` over owned handles: the index and message of the next one.
fn wait_any(ep: &Endpoint, hs: &mut [OwnedRecvHandle]) -> Result<(usize, Vec<u8>), Error> {
    let (i, (_, m)) = ep.wait_any(hs)?.expect("a handle is open");
    Ok((i, m))
}
