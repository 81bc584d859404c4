//! The ranks an example program loses on purpose (the launcher's
//! recovery tests, protocol §18): `RANK:STEP` (the rank SIGKILLs itself
//! before that step), `RANK:STEP:stop` (it SIGSTOPs itself: its peers find
//! it silent and the launcher fences it) or `RANK:STEP:recovery` (it
//! SIGKILLs itself once a call of that step or a later one returned the
//! revoked error: in the first recovery it takes part in from then on).

/// One rank's loss: before `step`, job rank `rank` raises SIGKILL, or
/// SIGSTOP with `stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loss {
    /// The job rank.
    pub rank: u32,
    /// The step.
    pub step: u64,
    /// How.
    pub how: How,
}

/// How a rank is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// SIGKILL before its step.
    Kill,
    /// SIGSTOP before its step.
    Stop,
    /// SIGKILL in a recovery from its step on.
    InRecovery,
}

/// Raises `how`'s signal on this process, saying so.
pub fn lose(me: u32, step: u64, how: How) {
    use nix::sys::signal::{raise, Signal};
    let (name, sig, when) = match how {
        How::Kill => ("SIGKILL", Signal::SIGKILL, "before"),
        How::Stop => ("SIGSTOP", Signal::SIGSTOP, "before"),
        How::InRecovery => ("SIGKILL", Signal::SIGKILL, "in the recovery at"),
    };
    println!("rank {me}: raising {name} {when} step {step}");
    let _ = raise(sig);
}

/// `RANK:STEP[:stop|:recovery]`, or `None`.
pub fn parse_loss(s: &str) -> Option<Loss> {
    let mut it = s.split(':');
    let rank = it.next()?.parse().ok()?;
    let step = it.next()?.parse().ok()?;
    let how = match it.next() {
        None => How::Kill,
        Some("stop") => How::Stop,
        Some("recovery") => How::InRecovery,
        Some(_) => return None,
    };
    it.next().is_none().then_some(Loss { rank, step, how })
}
