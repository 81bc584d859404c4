//! The fault-injection hook of the crash tests (docs/reliability.md,
//! "Crashes"): with the `fault-injection` feature, when the environment
//! variable `SPERLI_TEST_CKPT_KILL` is `POINT,RANK,INCARNATION,EPOCH` and
//! this rank, incarnation and epoch match, the rank SIGKILLs itself at
//! `POINT`:
//!
//! | point | where |
//! |---|---|
//! | `step0` | rank 0 removed the old COMMIT of the epoch |
//! | `step1` | rank 0 after a CKPT_BEGIN; another rank after receiving it |
//! | `step2` | the own file is renamed into place, no CKPT_ACK sent yet |
//! | `step3` | after a push chunk to the buddy |
//! | `step4-commit-written` | rank 0 wrote the COMMIT, sent none |
//! | `step4` | another rank received the COMMIT, stored nothing |
//! | `step5` | before older epochs are removed |
//! | `resume` | the announced COMMIT is verified, nothing loaded yet |
//!
//! Without the feature (every build but the tests' and the example
//! program's under test) [`kill_point`] is an empty inline function: the
//! hook is not in a rank binary, and the variable is never read.

/// Kills this rank at `point` when `SPERLI_TEST_CKPT_KILL` names it (see
/// the module docs); never returns then.
#[cfg(feature = "fault-injection")]
pub(crate) fn kill_point(point: &str, rank: u32, incarnation: u32, epoch: u64) {
    let Some(v) = std::env::var_os(sperli_wire::env::TEST_CKPT_KILL) else {
        return;
    };
    let want = format!("{point},{rank},{incarnation},{epoch}");
    if v.to_str() == Some(want.as_str()) {
        eprintln!("rank {rank}: test hook: SIGKILL at {point} (epoch {epoch})");
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status();
        // The signal is on its way; never go on.
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
}

/// The hook without the `fault-injection` feature: nothing.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn kill_point(_point: &str, _rank: u32, _incarnation: u32, _epoch: u64) {}
