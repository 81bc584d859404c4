//! How a job run ended: each rank's exit, the root cause with its host
//! and the message the launcher prints, and the launcher's exit status
//! (docs/launcher.md, "Exit status", "Which rank failed").

use crate::root_cause::{Cause, Verdict};
use crate::spawn::{SpawnFailure, StartError};

/// Exit code of the launcher when `--timeout` ends a job (as `timeout(1)`).
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code of the launcher for a usage or set-up error before any rank
/// ran, and for a rank that could not be started for another reason than
/// the two below.
pub const EXIT_USAGE: i32 = 2;
/// Exit code of the launcher when a rank's program is not found (as the
/// shell's, `env`'s and `timeout`'s).
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit code of the launcher when a rank's program is found but cannot be
/// executed (as the shell's, `env`'s and `timeout`'s).
pub const EXIT_NOT_EXECUTABLE: i32 = 126;

/// A failed job's root cause with the host it ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blame {
    /// The verdict (docs/launcher.md, "Which rank failed").
    pub verdict: Verdict,
    /// The root-cause rank's host.
    pub host: String,
}

impl std::fmt::Display for Blame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = &self.verdict;
        write!(f, "rank {} on {} ", v.rank, self.host)?;
        match &v.cause {
            Cause::Exited(e, Some(code)) if *code != 0 => write!(f, "failed ({e}, H{code})")?,
            Cause::Exited(e, _) => write!(f, "failed ({e})")?,
            Cause::Stopped => f.write_str("failed: it is stopped (SIGSTOP or a debugger) and its peers lost it")?,
            Cause::Unresponsive => {
                f.write_str("failed: its peers lost it, but it did not exit (hung, or its host is unreachable)")?
            }
            Cause::NeverJoined => write!(
                f,
                "never joined the job: its peers' set-up ended without it ({})",
                sperli_wire::HCode::H1616
            )?,
            Cause::NotStarted => write!(
                f,
                "never started within the set-up window ({} s): the remote shell or srun did not run it",
                sperli_wire::limits::SETUP_WINDOW_MS / 1000
            )?,
            Cause::StartFailed(e) => write!(
                f,
                "was not started: the remote shell or srun ended ({e}) before the rank ran (its message is above)"
            )?,
        }
        if !v.also.is_empty() {
            let also: Vec<String> = v.also.iter().map(u32::to_string).collect();
            write!(f, " (so did ranks {})", also.join(", "))?;
        }
        if let Some((from, a)) = &v.abort {
            let reason = sperli_wire::abort::AbortReason::from_code(a.reason);
            write!(
                f,
                "; the job was aborted by rank {from}: reason {reason}, code {}",
                a.code
            )?;
            if !a.message.is_empty() {
                write!(f, ": {}", a.message)?;
            }
        }
        Ok(())
    }
}

/// How a job run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every rank exited 0.
    Success,
    /// A rank failed; the root cause (docs/launcher.md, "Which rank
    /// failed").
    Failed(Blame),
    /// `--timeout` passed.
    TimedOut,
    /// The launcher got SIGINT or SIGTERM (the signal number).
    Interrupted(i32),
    /// A rank could not be started.
    SpawnFailed(SpawnFailure),
}

impl Outcome {
    /// The launcher's exit status for this outcome.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Success => 0,
            Outcome::Failed(b) => b.verdict.exit_code,
            Outcome::TimedOut => EXIT_TIMEOUT,
            Outcome::Interrupted(sig) => 128 + sig,
            Outcome::SpawnFailed(f) => match f.error {
                StartError::NotFound => EXIT_NOT_FOUND,
                StartError::NotExecutable => EXIT_NOT_EXECUTABLE,
                StartError::Other => EXIT_USAGE,
            },
        }
    }

    /// Whether a restart may help (a rank failed; not a timeout or Ctrl-C).
    pub fn restartable(&self) -> bool {
        matches!(self, Outcome::Failed(_))
    }

    /// The root-cause rank, if a rank failed.
    pub fn failed_rank(&self) -> Option<u32> {
        match self {
            Outcome::Failed(b) => Some(b.verdict.rank),
            _ => None,
        }
    }
}
