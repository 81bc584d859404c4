//! The policy of the end of a job step, sans I/O: which ABORT goes out for
//! a failure (protocol §7.5), how long a failing or finishing rank keeps
//! its connections (linger), which errors no longer count once the step is
//! ending, and whether the failure ends the process (errors are fatal by
//! default, like `MPI_ERRORS_ARE_FATAL`; crate docs, "Errors").
//!
//! Driven by [`Ending::handle_failure`] and [`Ending::handle_finish`],
//! polled with [`Ending::poll`].

use std::time::{Duration, Instant};

use sperli_wire::abort::AbortReason;
use sperli_wire::error::HCode;
use sperli_wire::Error;

use crate::ErrorMode;

/// An ABORT to send: reason, code (an H number or 0) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortFrame {
    /// The reason (protocol §7.5 table).
    pub reason: AbortReason,
    /// The H number, or 0.
    pub code: u32,
    /// The message (cut to 1024 bytes when encoded).
    pub message: String,
}

/// The ABORT a rank sends when `error` ends its job step here: reason 7
/// with code 1610 for a rejected frame; none after an ABORT received ("A
/// rank that receives ABORT forwards nothing", protocol §7.5); else reason
/// 1 with the error's code (a lost peer, 1613; a failed set-up, 1611 or
/// 1616: "A rank that fails set-up sends ABORT reason 1 with that code to
/// every peer that has already authenticated", protocol §5.3).
pub fn abort_for(error: &Error) -> Option<AbortFrame> {
    match error {
        Error::AbortedByPeer { .. } => None,
        Error::FrameRejected(_) => Some(AbortFrame {
            reason: AbortReason::RejectedFrame,
            code: HCode::H1610.number(),
            message: error.to_string(),
        }),
        e => Some(AbortFrame {
            reason: AbortReason::PeerLost,
            code: e.h_code().map_or(0, |c| c.number()),
            message: e.to_string(),
        }),
    }
}

/// The exit status of a rank whose job step a fatal error ended: the
/// error's H number minus 1600 (10 for H1610 ... 24 for H1624), or 1 for
/// an error without one (a local I/O failure).
pub fn fatal_status(error: &Error) -> i32 {
    error.h_code().map_or(1, |c| c.number() as i32 - 1600)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Running,
    /// A failure: `local` when the program called `abort` itself.
    Failing {
        until: Instant,
        local: bool,
    },
    /// The normal end (BYE sent).
    Finishing {
        until: Instant,
    },
    Ended,
}

/// The end of one rank's job step (see the module docs).
#[derive(Debug)]
pub struct Ending {
    linger: Duration,
    silence: Duration,
    phase: Phase,
    failed: bool,
    local: bool,
}

/// What a failure asks of the connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailAction {
    /// The ABORT to queue on every open, authenticated connection (after
    /// what is partly written, before anything queued).
    pub abort: Option<AbortFrame>,
}

impl Ending {
    /// A running step: a failing rank lingers `linger` to flush its ABORT
    /// and read its peers' close; a finishing one waits up to `silence`
    /// for its peers' close.
    pub fn new(linger: Duration, silence: Duration) -> Self {
        Self {
            linger,
            silence,
            phase: Phase::Running,
            failed: false,
            local: false,
        }
    }

    /// The step fails with `error` at `now`; `local` is the ABORT of the
    /// program's own `abort` call. The first failure counts; a failure
    /// while finishing does not (the peers are leaving too). `None` when
    /// nothing is to be done.
    pub fn handle_failure(
        &mut self,
        error: &Error,
        local: Option<AbortFrame>,
        now: Instant,
    ) -> Option<FailAction> {
        if self.phase != Phase::Running {
            return None;
        }
        self.failed = true;
        self.local = local.is_some();
        self.phase = Phase::Failing {
            until: now + self.linger,
            local: self.local,
        };
        Some(FailAction {
            abort: local.or_else(|| abort_for(error)),
        })
    }

    /// The program finishes at `now`: true when BYE is to go to every
    /// open peer (the step was running).
    pub fn handle_finish(&mut self, now: Instant) -> bool {
        if self.phase != Phase::Running {
            return false;
        }
        self.phase = Phase::Finishing {
            until: now + self.silence,
        };
        true
    }

    /// True once the step is failing, finishing or over: errors of single
    /// connections no longer end it (every peer is leaving too), except
    /// an ABORT received, which still fails a finishing step.
    pub fn is_ending(&self) -> bool {
        self.phase != Phase::Running
    }

    /// True once a failure ended (or ends) the step.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Whether an error on one connection still ends the step.
    pub fn counts(&self, error: &Error) -> bool {
        match self.phase {
            Phase::Running => true,
            Phase::Finishing { .. } => matches!(error, Error::AbortedByPeer { .. }),
            _ => false,
        }
    }

    /// Whether the step is over at `now` with `open` connections left:
    /// when none is left, or the linger (failing) or the silence limit
    /// (finishing) passed.
    pub fn poll(&mut self, now: Instant, open: usize) -> bool {
        let until = match self.phase {
            Phase::Running => return false,
            Phase::Ended => return true,
            Phase::Failing { until, .. } | Phase::Finishing { until } => until,
        };
        if open == 0 || now >= until {
            self.phase = Phase::Ended;
            return true;
        }
        false
    }

    /// The linger or finish deadline.
    pub fn deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Failing { until, .. } | Phase::Finishing { until } => Some(until),
            _ => None,
        }
    }

    /// The exit status when the ended step's failure ends the process:
    /// `mode` is fatal, set-up had completed, and the failure is not the
    /// program's own `abort` (the program goes on after that and decides).
    pub fn fatal_exit(&self, mode: ErrorMode, setup_done: bool, error: &Error) -> Option<i32> {
        (self.failed && !self.local && setup_done && mode == ErrorMode::Fatal)
            .then(|| fatal_status(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_wire::error::{FrameError, LossCause};

    fn lost() -> Error {
        Error::PeerLost {
            peer: 2,
            cause: LossCause::ClosedWithoutBye,
        }
    }

    #[test]
    fn the_abort_that_goes_out_for_each_failure() {
        let rejected: Error = FrameError::ReservedField {
            field: "flags",
            got: 1,
        }
        .into();
        let a = abort_for(&rejected).unwrap();
        assert_eq!((a.reason, a.code), (AbortReason::RejectedFrame, 1610));
        let a = abort_for(&lost()).unwrap();
        assert_eq!((a.reason, a.code), (AbortReason::PeerLost, 1613));
        assert_eq!(
            a.message,
            "H1613 peer rank 2 lost: closed the connection without BYE"
        );
        let setup = Error::SetupTimeout {
            after_ms: 30_000,
            missing: vec![3],
        };
        assert_eq!(abort_for(&setup).unwrap().code, 1616);
        let received = Error::AbortedByPeer {
            from: 1,
            reason: 2,
            code: 0,
            message: String::new(),
        };
        assert_eq!(abort_for(&received), None, "forwards nothing");
    }

    #[test]
    fn the_first_failure_counts_and_lingers() {
        let t0 = Instant::now();
        let mut e = Ending::new(Duration::from_millis(1000), Duration::from_secs(5));
        assert!(e.counts(&lost()));
        let act = e.handle_failure(&lost(), None, t0).unwrap();
        assert_eq!(act.abort.unwrap().code, 1613);
        assert!(e.handle_failure(&lost(), None, t0).is_none(), "once");
        assert!(!e.counts(&lost()));
        assert!(!e.handle_finish(t0), "no BYE after a failure");
        assert!(!e.poll(t0 + Duration::from_millis(999), 1));
        assert!(e.poll(t0 + Duration::from_millis(1000), 1));
        assert!(e.poll(t0 + Duration::from_millis(1001), 1));
        // Every connection closed: over at once.
        let mut e = Ending::new(Duration::from_millis(1000), Duration::from_secs(5));
        e.handle_failure(&lost(), None, t0);
        assert!(e.poll(t0, 0));
    }

    #[test]
    fn finishing_waits_for_the_peers_close_and_only_an_abort_still_counts() {
        let t0 = Instant::now();
        let mut e = Ending::new(Duration::from_millis(1000), Duration::from_secs(5));
        assert!(e.handle_finish(t0));
        assert!(!e.handle_finish(t0));
        assert!(!e.counts(&lost()), "a peer closing meanwhile is normal");
        let abort = Error::AbortedByPeer {
            from: 1,
            reason: 1,
            code: 1613,
            message: String::new(),
        };
        assert!(e.counts(&abort));
        assert!(!e.poll(t0 + Duration::from_millis(4999), 2));
        assert!(e.poll(t0 + Duration::from_millis(5000), 2));
        assert!(!e.failed());
        assert_eq!(e.fatal_exit(ErrorMode::Fatal, true, &lost()), None);
    }

    #[test]
    fn which_failures_end_the_process() {
        let t0 = Instant::now();
        let fail = |local: bool| {
            let mut e = Ending::new(Duration::from_millis(1000), Duration::from_secs(5));
            let l = local.then(|| AbortFrame {
                reason: AbortReason::Application,
                code: 0,
                message: "stop".into(),
            });
            let act = e.handle_failure(&lost(), l, t0).unwrap();
            if local {
                assert_eq!(act.abort.unwrap().reason, AbortReason::Application);
            }
            e
        };
        assert_eq!(
            fail(false).fatal_exit(ErrorMode::Fatal, true, &lost()),
            Some(13)
        );
        assert_eq!(
            fail(false).fatal_exit(ErrorMode::Return, true, &lost()),
            None
        );
        assert_eq!(
            fail(false).fatal_exit(ErrorMode::Fatal, false, &lost()),
            None
        );
        assert_eq!(fail(true).fatal_exit(ErrorMode::Fatal, true, &lost()), None);
        let io = Error::Io {
            op: "polling sockets",
            kind: std::io::ErrorKind::Other,
        };
        assert_eq!(fatal_status(&io), 1);
        let rejected: Error = FrameError::ReservedField {
            field: "flags",
            got: 1,
        }
        .into();
        assert_eq!(fatal_status(&rejected), 10);
    }
}
