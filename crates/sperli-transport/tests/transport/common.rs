//! Helpers: run ranks in threads under a deadline.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, ErrorMode, Settings};
use sperli_wire::Error;

/// Settings for tests: short set-up window so a failure cannot take 30 s,
/// and errors returned (the ranks are threads of this test process: a
/// fatal error would end it).
pub fn settings() -> Settings {
    Settings {
        setup_window: Duration::from_secs(10),
        errors: ErrorMode::Return,
        ..Settings::default()
    }
}

/// Runs `f` on a thread and returns what it returns (re-raising its
/// panic). If it takes longer than `limit`, the whole test process ends
/// (status 101, like a failed test): a hung rank thread cannot be stopped,
/// and left running it would hold its ports and sockets into the tests
/// that follow.
pub fn with_deadline<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            let _ = h.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The closure panicked: re-raise it.
            match h.join() {
                Err(p) => std::panic::resume_unwind(p),
                Ok(()) => unreachable!(),
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            eprintln!(
                "test {:?} did not finish within {limit:?}: ending the test process",
                thread::current().name()
            );
            std::process::exit(101);
        }
    }
}

/// Starts every rank in `ranks` of `plan` on its own thread and runs
/// `body(endpoint)` there; returns each rank's result in rank order.
pub fn run_ranks<T: Send + 'static>(
    plan: &JobPlan,
    ranks: &[u32],
    settings: Settings,
    body: impl Fn(Endpoint) -> Result<T, Error> + Send + Sync + 'static,
) -> Vec<Result<T, Error>> {
    let body = std::sync::Arc::new(body);
    let handles: Vec<_> = ranks
        .iter()
        .map(|&r| {
            let desc = plan.description(r);
            let body = body.clone();
            let mut settings = settings.clone();
            if settings.listener.is_none() {
                settings.listener = plan.take_listener(r);
            }
            thread::Builder::new()
                .name(format!("rank-{r}"))
                .spawn(move || Endpoint::start(&desc, settings).and_then(|ep| body(ep)))
                .unwrap()
        })
        .collect();
    handles
        .into_iter()
        .map(|h| match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        })
        .collect()
}

/// Starts rank `rank` of `plan` on the calling thread, on the listener
/// the plan holds for it (`JobPlan::localhost_bound`) where it holds one.
pub fn start_rank(plan: &JobPlan, rank: u32, mut settings: Settings) -> Result<Endpoint, Error> {
    if settings.listener.is_none() {
        settings.listener = plan.take_listener(rank);
    }
    Endpoint::start(&plan.description(rank), settings)
}

/// The listener `plan` holds for `rank` (a test's hand-written peer
/// accepts on it): a plain `TcpListener` on the same socket.
pub fn held_listener(plan: &JobPlan, rank: u32) -> std::net::TcpListener {
    plan.take_listener(rank)
        .expect("a JobPlan::localhost_bound plan holds each rank's listener once")
        .try_clone()
        .expect("a second handle to the held listener")
}

/// The H number of an error.
pub fn code(e: &Error) -> u32 {
    e.h_code().map_or(0, |c| c.number())
}
