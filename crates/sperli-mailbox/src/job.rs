//! A job the client starts and watches (docs/mailbox.md §7.3): `sperli
//! run --mailbox NAME --exit-on-stdin-eof ...` in a process group of its
//! own, the launcher's stdin a pipe only this client holds. The launcher's
//! exit makes the group TERMINAL; the client's end (however it ends)
//! closes the pipe, and the launcher ends the job.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{kill_process_group, Pid, Signal};

use crate::client::Mailbox;
use crate::error::MailboxError;
use crate::files::{self, MailboxFile, Manifest};

/// How to start the job.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The `sperli` launcher.
    pub sperli: PathBuf,
    /// Number of ranks.
    pub ranks: u32,
    /// `-H` host list (default: the launcher's, localhost).
    pub hosts: Option<String>,
    /// More launcher arguments (e.g. `--silence-ms 2000`).
    pub launcher_args: Vec<String>,
    /// The rank program and its arguments.
    pub program: Vec<String>,
    /// How long the job may take to become READY.
    pub setup_timeout: Duration,
    /// Where the launcher's (and so the ranks') output goes: inherited
    /// (`true`) or discarded.
    pub inherit_output: bool,
}

impl JobSpec {
    /// A spec with the defaults: localhost, 60 s set-up, output inherited.
    pub fn new(sperli: impl Into<PathBuf>, ranks: u32, program: Vec<String>) -> Self {
        Self {
            sperli: sperli.into(),
            ranks,
            hosts: None,
            launcher_args: Vec::new(),
            program,
            setup_timeout: Duration::from_secs(60),
            inherit_output: true,
        }
    }
}

/// The launcher child of a client.
#[derive(Debug)]
pub struct JobWatch {
    child: Child,
    stdin: Option<ChildStdin>,
    status: Option<std::process::ExitStatus>,
}

/// How long the launcher gets to end the job after its stdin closed
/// before its process group gets SIGTERM, then SIGKILL after as long again.
const END_GRACE: Duration = Duration::from_secs(5);

impl JobWatch {
    /// The launcher's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the launcher has exited (reaps it).
    pub fn exited(&mut self) -> bool {
        if self.status.is_none() {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.status = Some(s);
            }
        }
        self.status.is_some()
    }

    /// Its exit status, once it exited.
    pub fn exit_status(&mut self) -> Option<String> {
        self.exited().then(|| {
            self.status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "unknown status".into())
        })
    }

    /// Waits up to `limit` for the launcher to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.exited() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    fn signal_group(&self, sig: Signal) {
        if let Some(pid) = i32::try_from(self.child.id()).ok().and_then(Pid::from_raw) {
            let _ = kill_process_group(pid, sig);
        }
    }

    /// Ends the job: closes the launcher's stdin (it ends every rank), then
    /// SIGTERM and SIGKILL to its process group if it is still there after
    /// 5 s each. Returns once the launcher is reaped.
    pub fn end(&mut self) {
        self.stdin = None;
        if self.wait_exit(END_GRACE) {
            return;
        }
        self.signal_group(Signal::TERM);
        if self.wait_exit(END_GRACE) {
            return;
        }
        self.signal_group(Signal::KILL);
        let _ = self.child.kill();
        if let Ok(s) = self.child.wait() {
            self.status = Some(s);
        }
    }
}

impl Mailbox {
    /// Starts `sperli run -n N --mailbox NAME --exit-on-stdin-eof ... --
    /// PROGRAM` in a new process group, waits for its manifest and for
    /// READY, and returns the attached client. The client watches the
    /// launcher (its exit makes the group TERMINAL); dropping the client
    /// shuts the group down, ends the launcher and removes the mailbox
    /// and manifest (docs/mailbox.md §7.3).
    pub fn start_job(name: &str, spec: &JobSpec) -> Result<Mailbox, MailboxError> {
        files::check_name(name)?;
        let mut cmd = Command::new(&spec.sperli);
        cmd.arg("run").arg("-n").arg(spec.ranks.to_string());
        if let Some(h) = &spec.hosts {
            cmd.arg("-H").arg(h);
        }
        cmd.args(["--mailbox", name, "--exit-on-stdin-eof"])
            .args(&spec.launcher_args)
            .arg("--")
            .args(&spec.program)
            .stdin(Stdio::piped())
            .process_group(0);
        if !spec.inherit_output {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
        let mut child = cmd.spawn().map_err(|e| MailboxError::Launch {
            program: spec.sperli.clone(),
            kind: e.kind(),
        })?;
        let stdin = child.stdin.take();
        let mut watch = JobWatch {
            child,
            stdin,
            status: None,
        };
        let deadline = Instant::now() + spec.setup_timeout;
        // The launcher writes the manifest after the mailbox, before it
        // starts any rank: wait for it (set-up only; a short sleep, not a
        // wait on the request word).
        let manifest = loop {
            if let Some(status) = watch.exit_status() {
                return Err(MailboxError::LauncherEnded { status });
            }
            match Manifest::read(name) {
                Ok(Some(m)) if m.launcher_pid == watch.pid() => break m,
                Ok(_) => {}
                Err(e) => {
                    watch.end();
                    return Err(e);
                }
            }
            if Instant::now() >= deadline {
                watch.end();
                return Err(MailboxError::Timeout {
                    what: "waiting for the launcher's manifest",
                    after_ms: spec.setup_timeout.as_millis() as u64,
                    state: crate::layout::RequestState::Idle,
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let attached = (|| {
            let file = MailboxFile::open(name)?;
            let h = file.header()?;
            h.check_world(spec.ranks)?;
            h.check_world(manifest.world_size)?;
            Mailbox::attach(name)
        })();
        let mut mb = match attached {
            Ok(mb) => mb,
            Err(e) => {
                watch.end();
                files::remove(name);
                return Err(e);
            }
        };
        mb.job = Some(watch);
        let left = deadline.saturating_duration_since(Instant::now());
        mb.wait_ready(left)?;
        Ok(mb)
    }
}
