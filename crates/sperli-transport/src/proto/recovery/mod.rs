//! Recovery with HELLO feature bit 5 (protocol §18), sans I/O: a rank's
//! side ([`rank::RankRecovery`]: detection, revoke, learning and applying
//! a MEMBERSHIP record, a replacement's join, the fallback) and the
//! launcher's side ([`decider::Decider`]: reports, fencing, the decision,
//! the full-restart fallback). Both are plain structs driven by
//! `handle_*(event, now)` and `poll_*(now)`; signing and verifying
//! CompositeSig, the control channel and the sockets are the caller's.
//! Its model check (the test module `model`) explores random schedules of
//! failures and message orders.

pub mod decider;
pub mod rank;

#[cfg(test)]
mod model;

/// The launcher's wait for the reports of one epoch (protocol §18.6: the
/// silence limit plus 1000 ms).
pub const REPORT_WAIT_MS: u64 = sperli_wire::limits::DEFAULT_SILENCE_MS + 1000;
/// A survivor's wait for the replacements of an epoch, and theirs for
/// every member (protocol §18.7: the set-up window).
pub const JOIN_WINDOW_MS: u64 = sperli_wire::limits::SETUP_WINDOW_MS;
