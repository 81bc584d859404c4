//! The grace a close without BYE gets before it ends the job step, sans
//! I/O (protocol §7.5, "This implementation").
//!
//! A rank that receives ABORT closes all its connections without BYE and
//! forwards nothing, so a third rank may see that close before the
//! originator's ABORT, which is on its way on another connection. Ended at
//! once, that rank would report the messenger (H1613, "peer rank 2 lost")
//! instead of the cause (H1612, "rank 0 aborted"). So the first close (FIN
//! or reset) without BYE is held for [`CLOSE_GRACE`] while the rank reads
//! its other connections: an ABORT that arrives meanwhile ends the step
//! with H1612; else the held loss ends it with H1613 at the deadline.
//! Silence is not held (it is already seconds late), nor a second close
//! while one is held (the first counts), nor anything once the grace was
//! spent.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use sperli_transport::proto::close_grace::{CloseGrace, CLOSE_GRACE};
//! use sperli_wire::error::LossCause;
//! use sperli_wire::Error;
//!
//! let t0 = Instant::now();
//! let mut g = CloseGrace::default();
//! let closed = Error::PeerLost { peer: 2, cause: LossCause::ClosedWithoutBye };
//! assert_eq!(g.handle_loss(&closed, t0), Some(t0 + CLOSE_GRACE));
//! assert_eq!(g.poll(t0 + Duration::from_millis(1)), None);
//! assert_eq!(g.poll(t0 + CLOSE_GRACE), Some(closed.clone()));
//! assert_eq!(g.handle_loss(&closed, t0 + CLOSE_GRACE), None, "spent");
//! ```

use std::time::{Duration, Instant};

use sperli_wire::error::LossCause;
use sperli_wire::Error;

/// How long the first close without BYE waits for an ABORT that explains
/// it (protocol §7.5): 250 ms, a fraction of the silence limit, and far
/// longer than the few microseconds between an originator's ABORTs.
pub const CLOSE_GRACE: Duration = Duration::from_millis(250);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Phase {
    /// No close without BYE was seen yet.
    #[default]
    Idle,
    /// This loss waits until `until`.
    Holding { loss: Error, until: Instant },
    /// The grace was given (and ended); later losses count at once.
    Spent,
}

/// One rank's grace for a close without BYE (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CloseGrace {
    phase: Phase,
}

/// Whether `error` is a loss the grace holds: a close (FIN, close_notify
/// or reset) without BYE.
pub fn is_close_loss(error: &Error) -> bool {
    matches!(
        error,
        Error::PeerLost {
            cause: LossCause::ClosedWithoutBye | LossCause::Reset,
            ..
        }
    )
}

impl CloseGrace {
    /// `error` would end the step at `now`. `Some(deadline)` when the
    /// grace holds it back (the first close without BYE; or a later one
    /// while that one is held, which is then dropped: the first counts);
    /// `None` when it counts now.
    pub fn handle_loss(&mut self, error: &Error, now: Instant) -> Option<Instant> {
        if !is_close_loss(error) {
            return None;
        }
        match &self.phase {
            Phase::Idle => {
                let until = now + CLOSE_GRACE;
                self.phase = Phase::Holding {
                    loss: error.clone(),
                    until,
                };
                Some(until)
            }
            Phase::Holding { until, .. } => Some(*until),
            Phase::Spent => None,
        }
    }

    /// The held loss once its deadline passed at `now`: it ends the step
    /// unless something else (an ABORT) already did. The grace is spent.
    pub fn poll(&mut self, now: Instant) -> Option<Error> {
        match &self.phase {
            Phase::Holding { until, .. } if now >= *until => {
                match std::mem::replace(&mut self.phase, Phase::Spent) {
                    Phase::Holding { loss, .. } => Some(loss),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// When the held loss falls due, while one is held.
    pub fn deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Holding { until, .. } => Some(*until),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(peer: u32) -> Error {
        Error::PeerLost {
            peer,
            cause: LossCause::ClosedWithoutBye,
        }
    }

    #[test]
    fn the_first_close_is_held_and_counts_at_its_deadline() {
        let t0 = Instant::now();
        let mut g = CloseGrace::default();
        assert_eq!(g.deadline(), None);
        let until = g.handle_loss(&closed(2), t0).unwrap();
        assert_eq!(until, t0 + CLOSE_GRACE);
        assert_eq!(g.deadline(), Some(until));
        // A second close while the first is held: dropped, the first counts.
        let later = t0 + Duration::from_millis(10);
        assert_eq!(g.handle_loss(&closed(3), later), Some(until));
        assert_eq!(g.poll(until - Duration::from_millis(1)), None);
        assert_eq!(g.poll(until), Some(closed(2)));
        assert_eq!(g.poll(until), None, "given once");
        assert_eq!(g.deadline(), None);
    }

    #[test]
    fn a_spent_grace_holds_nothing() {
        let t0 = Instant::now();
        let mut g = CloseGrace::default();
        g.handle_loss(&closed(1), t0);
        g.poll(t0 + CLOSE_GRACE);
        assert_eq!(g.handle_loss(&closed(1), t0 + CLOSE_GRACE), None);
        assert_eq!(g.handle_loss(&closed(2), t0 + 2 * CLOSE_GRACE), None);
    }

    #[test]
    fn only_a_close_without_bye_is_held() {
        let t0 = Instant::now();
        let mut g = CloseGrace::default();
        let reset = Error::PeerLost {
            peer: 1,
            cause: LossCause::Reset,
        };
        assert!(is_close_loss(&reset));
        let silent = Error::PeerLost {
            peer: 1,
            cause: LossCause::Silence {
                silent_ms: 5000,
                limit_ms: 5000,
            },
        };
        let aborted = Error::AbortedByPeer {
            from: 0,
            reason: 2,
            code: 0,
            message: String::new(),
        };
        let departed = Error::PeerLost {
            peer: 1,
            cause: LossCause::Departed,
        };
        for e in [&silent, &aborted, &departed] {
            assert!(!is_close_loss(e), "{e}");
            assert_eq!(g.handle_loss(e, t0), None, "{e}");
        }
        assert_eq!(g.deadline(), None);
        assert!(g.handle_loss(&reset, t0).is_some());
    }
}
