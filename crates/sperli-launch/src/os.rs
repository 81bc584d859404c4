//! What the launcher needs from the OS that `std` does not offer: a child
//! that dies with the launcher (`PR_SET_PDEATHSIG`), the launcher as the
//! reaper of its ranks' orphans (`PR_SET_CHILD_SUBREAPER`), and signals to
//! a process group. (What `/proc` says about a process: [`crate::procfs`].)
//!
//! The crate's `unsafe` blocks are here: `Command::pre_exec` runs a
//! closure in the forked child before `exec`, where only async-signal-safe
//! calls are allowed. nix's `prctl`, `getppid`, `dup2` and `fcntl`
//! wrappers are single system calls without allocation, so they qualify.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::{getppid, Pid};

/// Makes `cmd`'s child the leader of a process group of its own (so a
/// signal to the group reaches every process the rank starts), and has
/// the kernel send it SIGKILL when the thread that spawns it ends (the
/// launcher's main thread: the launcher died, however it died).
pub fn rank_group_dying_with_launcher(cmd: &mut Command) {
    cmd.process_group(0);
    let parent = Pid::this();
    // SAFETY: the closure runs in the child between fork and exec. It only
    // makes two system calls (prctl, getppid) through nix's thin wrappers,
    // which neither allocate nor take locks, so it is async-signal-safe;
    // it touches no memory shared with the parent except the copied pid.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The launcher may have died between fork and prctl: then no
            // signal comes, so do not start at all.
            if getppid() != parent {
                return Err(nix::errno::Errno::ESRCH.into());
            }
            Ok(())
        });
    }
}

/// A duplicate of `fd` at a descriptor number `min` or above, close-on-exec
/// (`fcntl(F_DUPFD_CLOEXEC)`): a descriptor to hand a child that moving
/// another one to a low number cannot overwrite first.
pub fn dup_at_least(fd: &impl AsRawFd, min: RawFd) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{fcntl, FcntlArg};
    // SAFETY: `fd` is open for the duration of the call (borrowed).
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd.as_raw_fd()) };
    let new = fcntl(borrowed, FcntlArg::F_DUPFD_CLOEXEC(min))?;
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) returned a new open descriptor of this
    // process that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Hands `fd` to `cmd`'s child at descriptor number `target`, open across
/// `exec` (the rank's end of its control channel, protocol §18.1). The
/// parent's copy is closed when `cmd` is dropped.
pub fn inherit_fd_at(cmd: &mut Command, fd: OwnedFd, target: RawFd) {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    // SAFETY: the closure runs in the child between fork and exec. It makes
    // two system calls (dup2, fcntl) through nix's thin wrappers, which
    // neither allocate nor take locks. `target` is a descriptor number the
    // child owns from here on; the `OwnedFd` made for it is never dropped
    // (no close), and `fd` stays open in the closure until exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut at = std::mem::ManuallyDrop::new(OwnedFd::from_raw_fd(target));
            if fd.as_raw_fd() != target {
                nix::unistd::dup2(&fd, &mut at)?;
            }
            // dup2 clears close-on-exec; a descriptor already at `target`
            // (the pair's own) keeps it unless cleared here.
            fcntl(
                BorrowedFd::borrow_raw(target),
                FcntlArg::F_SETFD(FdFlag::empty()),
            )?;
            Ok(())
        });
    }
}

/// Makes this process the reaper of its descendants' orphans: a rank's
/// grandchild whose parent exits becomes the launcher's child, so the
/// launcher can wait for it and knows when a rank's process group is
/// empty. Best effort (false where the kernel refuses).
pub fn become_subreaper() -> bool {
    nix::sys::prctl::set_child_subreaper(true).is_ok()
}

/// Sends `sig` to the process group `pgid`; false when the group has no
/// process left.
pub fn signal_group(pgid: u32, sig: Signal) -> bool {
    match i32::try_from(pgid) {
        Ok(p) if p > 1 => killpg(Pid::from_raw(p), sig).is_ok(),
        _ => false,
    }
}

/// Whether this process is the reaper of its descendants' orphans.
pub fn is_subreaper() -> bool {
    nix::sys::prctl::get_child_subreaper().unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_leads_its_own_group() {
        use crate::procfs::{group_members, proc_state, ProcState};
        let mut c = Command::new("sleep");
        c.arg("30");
        rank_group_dying_with_launcher(&mut c);
        let mut child = c.spawn().unwrap();
        let pid = child.id();
        assert!(signal_group(pid, Signal::SIGSTOP));
        crate::procfs::wait_until("the group is not stopped", || {
            proc_state(pid) == ProcState::Stopped
        });
        assert_eq!(group_members(pid), vec![pid]);
        assert!(signal_group(pid, Signal::SIGKILL));
        let _ = child.wait();
        assert!(!signal_group(pid, Signal::SIGKILL));
    }
}
