//! What `/proc` says about a process: its run state (a stopped rank is
//! told apart from a hung one; zombies count as gone, since this machine's
//! init may leave them unreaped) and the members of a process group.

/// The run state of a process as `/proc/PID/status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcState {
    /// Running or sleeping.
    Alive,
    /// Stopped by a signal (SIGSTOP, SIGTSTP) or traced.
    Stopped,
    /// Exited (a zombie, or gone).
    Gone,
}

/// The state of process `pid` (`Gone` when it cannot be read).
pub fn proc_state(pid: u32) -> ProcState {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return ProcState::Gone;
    };
    let state = s
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .and_then(|v| v.trim_start().chars().next());
    match state {
        Some('T' | 't') => ProcState::Stopped,
        Some('Z' | 'X') | None => ProcState::Gone,
        Some(_) => ProcState::Alive,
    }
}

/// The pids of the processes in process group `pgid` that have not
/// exited (zombies left out). Only the tests need it: the launcher waits
/// for a group as a whole instead.
#[cfg(test)]
pub fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the parenthesised command: state, ppid, pgrp.
        let after = stat.rsplit_once(')').map_or("", |x| x.1);
        let mut f = after.split_whitespace();
        let state = f.next();
        let pgrp = f.nth(1).and_then(|v| v.parse::<u32>().ok());
        if pgrp == Some(pgid) && !matches!(state, Some("Z" | "X")) {
            out.push(pid);
        }
    }
    out
}

/// Waits until `done` holds, at most 10 s, else panics naming `what`
/// (tests: a process's state in /proc sends no event to block on).
#[cfg(test)]
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !done() {
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "{what}");
        // Not a delay: the interval at which /proc is read again.
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_state() {
        assert_eq!(proc_state(std::process::id()), ProcState::Alive);
        assert_eq!(proc_state(u32::MAX), ProcState::Gone);
        assert!(group_members(u32::MAX).is_empty());
    }
}
