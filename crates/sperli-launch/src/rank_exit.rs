//! How one rank's process ended, as the launcher saw it (the input of
//! [`crate::root_cause`] and part of the launcher's exit status).

use nix::sys::signal::Signal;

/// How a rank ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankExit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl RankExit {
    /// Whether this is a clean exit.
    pub fn success(self) -> bool {
        self == RankExit::Code(0)
    }

    /// The launcher's exit code for it: the code, or 128 + signal.
    pub fn exit_code(self) -> i32 {
        match self {
            RankExit::Code(c) => c,
            RankExit::Signal(s) => 128 + s,
        }
    }
}

impl std::fmt::Display for RankExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RankExit::Code(c) => write!(f, "exit code {c}"),
            RankExit::Signal(s) => match Signal::try_from(*s) {
                Ok(sig) => write!(f, "signal {s} ({})", sig.as_str()),
                Err(_) => write!(f, "signal {s}"),
            },
        }
    }
}
