//! The job's watchdog: a small `sh` process, in a process group of its
//! own, that outlives the launcher and ends every rank's process group
//! when the launcher dies without ending them itself (SIGKILL, a crash).
//!
//! `PR_SET_PDEATHSIG` ends a rank's first process when the launcher dies,
//! but not what that process started (`sh -c 'prog; echo rc=$?'` leaves
//! `prog` running). The watchdog reads the process groups of the ranks,
//! one `+PGID` line each, from a pipe only the launcher writes; `-PGID`
//! takes a group off the list once it is empty, and `end` stops the
//! watchdog without killing. At end of file without `end` (the launcher
//! died) it sends SIGKILL to every group on its list, then exits.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};

const SCRIPT: &str = r#"trap '' INT TERM HUP
g=
while IFS= read -r l; do
  case $l in
  end) exit 0 ;;
  +*) g="$g ${l#+}" ;;
  -*) n=; for x in $g; do [ "$x" = "${l#-}" ] || n="$n $x"; done; g=$n ;;
  esac
done
for x in $g; do kill -9 -"$x" 2>/dev/null; done
"#;

/// A small `sh` script in a process group of its own, fed by a pipe only
/// the launcher writes: it outlives the launcher, and acts when the pipe
/// ends without an `end` line (the launcher died however it died). The
/// watchdog below and the mailbox's cleaner are two such scripts.
#[derive(Debug)]
pub(crate) struct PipeShell {
    child: Child,
    pipe: Option<ChildStdin>,
}

impl PipeShell {
    /// Starts `sh -c script name args...`; `None` when `sh` cannot be
    /// started.
    pub(crate) fn start(script: &str, name: &str, args: &[OsString]) -> Option<Self> {
        let mut child = Command::new("sh")
            .args(["-c", script, name])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok()?;
        let pipe = child.stdin.take();
        Some(Self { child, pipe })
    }

    /// Writes one line (with its newline) to the script.
    pub(crate) fn say(&mut self, line: &str) {
        if let Some(p) = &mut self.pipe {
            let _ = p.write_all(line.as_bytes());
        }
    }

    /// Says `end` (the script then exits without acting) and waits for it.
    pub(crate) fn end(mut self) {
        self.say("end\n");
        self.pipe = None;
        let _ = self.child.wait();
    }
}

/// The watchdog of one run of a job.
#[derive(Debug)]
pub struct Watchdog {
    shell: PipeShell,
}

impl Watchdog {
    /// Starts it; `None` when `sh` cannot be started (the ranks' own
    /// death signal still ends their first processes).
    pub fn start() -> Option<Self> {
        PipeShell::start(SCRIPT, "sperli-watchdog", &[]).map(|shell| Self { shell })
    }

    /// Adds a rank's process group.
    pub fn watch(&mut self, pgid: u32) {
        self.shell.say(&format!("+{pgid}\n"));
    }

    /// Takes an empty process group off the list.
    pub fn forget(&mut self, pgid: u32) {
        self.shell.say(&format!("-{pgid}\n"));
    }

    /// The watchdog's pid (tests).
    #[cfg(test)]
    pub fn pid(&self) -> u32 {
        self.shell.child.id()
    }

    /// Stops the watchdog without killing anything.
    pub fn end(self) {
        self.shell.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::{proc_state, ProcState};

    fn wait_gone(pid: u32) {
        crate::procfs::wait_until(&format!("{pid} still there"), || {
            proc_state(pid) == ProcState::Gone
        });
    }

    fn group() -> Child {
        Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap()
    }

    #[test]
    fn end_of_file_kills_the_groups_it_watches_and_only_those() {
        let mut w = Watchdog::start().unwrap();
        let (mut a, mut b, mut c) = (group(), group(), group());
        w.watch(a.id());
        w.watch(b.id());
        w.watch(c.id());
        w.forget(b.id());
        let pid = w.pid();
        // The launcher "dies": the pipe closes without `end`.
        drop(w.shell.pipe.take());
        let _ = a.wait();
        let _ = c.wait();
        wait_gone(a.id());
        wait_gone(c.id());
        let _ = w.shell.child.wait();
        wait_gone(pid);
        assert_eq!(proc_state(b.id()), ProcState::Alive);
        let _ = b.kill();
        let _ = b.wait();
    }

    #[test]
    fn end_kills_nothing() {
        let mut w = Watchdog::start().unwrap();
        let mut a = group();
        w.watch(a.id());
        w.end();
        assert_eq!(proc_state(a.id()), ProcState::Alive);
        let _ = a.kill();
        let _ = a.wait();
    }
}
