//! Starting ranks and watching them: stdin hand-over of the job
//! description, `[rank]`-prefixed output, exit status, timeouts, signals.
//!
//! A rank's job description goes only to its stdin (never an argument, an
//! environment variable, a file or a log). Each output line of a rank is
//! written whole under one lock, so lines of different ranks never tear.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use sperli_transport::failure_record;

use crate::root_cause::{root_cause, Failure, RecordDir};

/// Exit code of the launcher when `--timeout` ends a job (as `timeout(1)`).
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code of the launcher for a usage or set-up error before any rank ran.
pub const EXIT_USAGE: i32 = 2;

/// How to start one rank.
pub struct RankLaunch {
    /// The rank.
    pub rank: u32,
    /// Its host (loopback hosts are spawned as children).
    pub host: String,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// Extra environment (never secrets).
    pub env: Vec<(String, String)>,
    /// The job description line for stdin (secret).
    pub stdin_line: String,
}

impl std::fmt::Debug for RankLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankLaunch")
            .field("rank", &self.rank)
            .field("host", &self.host)
            .field("argv", &self.argv)
            .finish_non_exhaustive()
    }
}

/// Supervision settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Remote-shell template for non-local hosts; `{host}` is replaced.
    pub rsh: String,
    /// Write rank output without the `[rank]` prefix.
    pub raw_output: bool,
    /// After the first failure, how long the other ranks get to stop on
    /// their own (they notice within the silence limit) before SIGTERM.
    pub wait_after_failure: Duration,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// End the job after this long.
    pub timeout: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            rsh: "ssh -o BatchMode=yes {host}".into(),
            raw_output: false,
            wait_after_failure: Duration::from_secs(7),
            grace: Duration::from_secs(3),
            timeout: None,
        }
    }
}

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
            RankExit::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

/// How a job run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every rank exited 0.
    Success,
    /// A rank failed; `rank` is the root cause
    /// ([`crate::root_cause::root_cause`] of the failures seen within 150
    /// ms of the first, or longer while every failed rank blames another).
    Failed {
        /// The root-cause rank.
        rank: u32,
        /// How it ended.
        exit: RankExit,
    },
    /// `--timeout` passed.
    TimedOut,
    /// The launcher got SIGINT or SIGTERM (the signal number).
    Interrupted(i32),
    /// A rank could not be started.
    SpawnFailed {
        /// The rank.
        rank: u32,
        /// The OS error kind.
        kind: std::io::ErrorKind,
    },
}

impl Outcome {
    /// The launcher's exit status for this outcome.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Success => 0,
            Outcome::Failed { exit, .. } => exit.exit_code(),
            Outcome::TimedOut => EXIT_TIMEOUT,
            Outcome::Interrupted(sig) => 128 + sig,
            Outcome::SpawnFailed { .. } => EXIT_USAGE,
        }
    }

    /// Whether a restart may help (a rank failed; not a timeout or Ctrl-C).
    pub fn restartable(&self) -> bool {
        matches!(self, Outcome::Failed { .. })
    }
}

/// Whether `host` is this machine (spawned as a child process).
pub fn is_local(host: &str) -> bool {
    sperli_wire::host::is_loopback(host)
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn command_for(r: &RankLaunch, opts: &Options) -> Option<Command> {
    let (program, rest) = r.argv.split_first()?;
    if is_local(&r.host) {
        let mut c = Command::new(program);
        c.args(rest).envs(r.env.iter().map(|(k, v)| (k, v)));
        Some(c)
    } else {
        let mut words = opts
            .rsh
            .split_whitespace()
            .map(|w| w.replace("{host}", &r.host));
        let mut c = Command::new(words.next()?);
        c.args(words);
        let mut remote: Vec<String> = vec!["env".into()];
        remote.extend(r.env.iter().map(|(k, v)| shell_quote(&format!("{k}={v}"))));
        remote.extend(r.argv.iter().map(|a| shell_quote(a)));
        c.arg(remote.join(" "));
        Some(c)
    }
}

type Sink = Arc<Mutex<()>>;

/// Waits for one child by pid (the `Child` stays with the supervisor for
/// signalling; this thread only reaps).
fn wait_pid(pid: u32) -> Option<RankExit> {
    use nix::sys::wait::{waitpid, WaitStatus};
    let pid = Pid::from_raw(i32::try_from(pid).ok()?);
    loop {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => return Some(RankExit::Code(code)),
            Ok(WaitStatus::Signaled(_, sig, _)) => return Some(RankExit::Signal(sig as i32)),
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        }
    }
}

fn pump(src: impl Read + Send + 'static, prefix: Option<String>, to_stderr: bool, lock: Sink) {
    thread::spawn(move || {
        let mut reader = BufReader::new(src);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            let mut out = Vec::with_capacity(line.len() + 8);
            if let Some(p) = &prefix {
                out.extend_from_slice(p.as_bytes());
            }
            out.extend_from_slice(&line);
            let _guard = lock.lock();
            let _ = if to_stderr {
                std::io::stderr().lock().write_all(&out)
            } else {
                std::io::stdout().lock().write_all(&out)
            };
        }
    });
}

fn signal_all(children: &mut [(u32, Child, Option<RankExit>)], sig: Signal) {
    for (_, child, done) in children.iter_mut() {
        if done.is_none() {
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = kill(Pid::from_raw(pid), sig);
            }
        }
    }
}

/// Collects the exits as the waiting threads (one per rank) report them:
/// roughly in the order they happen, not exactly (see
/// [`crate::root_cause`]).
fn reap(
    children: &mut [(u32, Child, Option<RankExit>)],
    exits: &crossbeam_channel::Receiver<(u32, RankExit)>,
) -> Vec<(u32, RankExit)> {
    let mut newly = Vec::new();
    if let Ok(first) = exits.recv_timeout(Duration::from_millis(20)) {
        newly.push(first);
        newly.extend(exits.try_iter());
    }
    for (rank, e) in &newly {
        if let Some(c) = children.iter_mut().find(|c| c.0 == *rank) {
            c.2 = Some(*e);
        }
    }
    newly
}

/// How long after the first failure other failures still count when the
/// root cause is chosen.
const ROOT_CAUSE_WINDOW: Duration = Duration::from_millis(150);

/// Starts every rank, streams output, and waits for the job to end.
/// `interrupt` holds the number of a SIGINT/SIGTERM the launcher received
/// (0: none); it ends the job: SIGTERM to every rank, SIGKILL after the grace.
pub fn run_job(
    ranks: Vec<RankLaunch>,
    opts: &Options,
    interrupt: &std::sync::atomic::AtomicI32,
) -> Outcome {
    let lock: Sink = Arc::new(Mutex::new(()));
    let records = RecordDir::create();
    let mut children = Vec::new();
    let mut outcome = None;
    for r in ranks {
        let Some(mut cmd) = command_for(&r, opts) else {
            outcome = Some(Outcome::SpawnFailed {
                rank: r.rank,
                kind: std::io::ErrorKind::InvalidInput,
            });
            break;
        };
        if let (Some(d), true) = (&records, is_local(&r.host)) {
            cmd.env(failure_record::ENV_VAR, d.file(r.rank));
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match cmd.spawn() {
            Ok(mut child) => {
                let prefix = (!opts.raw_output).then(|| format!("[{}] ", r.rank));
                if let Some(out) = child.stdout.take() {
                    pump(out, prefix.clone(), false, lock.clone());
                }
                if let Some(err) = child.stderr.take() {
                    pump(err, prefix, true, lock.clone());
                }
                if let Some(mut stdin) = child.stdin.take() {
                    let line = r.stdin_line;
                    // A separate thread: a description larger than the pipe
                    // buffer must not block the launcher.
                    thread::spawn(move || {
                        let _ = stdin.write_all(line.as_bytes());
                    });
                }
                children.push((r.rank, child, None));
            }
            Err(e) => {
                outcome = Some(Outcome::SpawnFailed {
                    rank: r.rank,
                    kind: e.kind(),
                });
                break;
            }
        }
    }
    let (exit_tx, exits) = crossbeam_channel::unbounded();
    for (rank, child, _) in &children {
        let (rank, pid) = (*rank, child.id());
        let tx = exit_tx.clone();
        thread::spawn(move || {
            if let Some(e) = wait_pid(pid) {
                let _ = tx.send((rank, e));
            }
        });
    }
    let start = Instant::now();
    let mut failed_at: Option<Instant> = None;
    let mut failures: Vec<Failure> = Vec::new();
    let mut termed_at: Option<Instant> = None;
    let killed = AtomicBool::new(false);
    if outcome.is_some() {
        signal_all(&mut children, Signal::SIGKILL);
        killed.store(true, Ordering::Relaxed);
    }
    loop {
        let newly = reap(&mut children, &exits);
        if outcome.is_none() {
            // A rank writes its record before it can exit: it is there now.
            failures.extend(
                newly
                    .iter()
                    .filter(|(_, e)| !e.success())
                    .map(|&(rank, exit)| Failure {
                        rank,
                        exit,
                        record: records.as_ref().and_then(|d| d.read(rank)),
                    }),
            );
            if failed_at.is_none() && !failures.is_empty() {
                failed_at = Some(Instant::now());
            }
        }
        let all_done = children.iter().all(|(_, _, d)| d.is_some());
        // The root cause is decided once the failures of a short window
        // after the first are in: exits that race each other (a rank dies,
        // its peers notice within milliseconds) may be reported out of order
        // on a loaded machine. While every failed rank blames another, the
        // one they blame is still to come: wait for it, up to the moment
        // the survivors are terminated.
        let waited = failed_at.map_or(Duration::ZERO, |f| f.elapsed());
        if outcome.is_none()
            && !failures.is_empty()
            && (all_done
                || (waited >= ROOT_CAUSE_WINDOW && failures.iter().any(Failure::is_primary))
                || waited >= opts.wait_after_failure)
        {
            if let Some(f) = root_cause(&failures) {
                outcome = Some(Outcome::Failed {
                    rank: f.rank,
                    exit: f.exit,
                });
            }
        }
        if all_done {
            break;
        }
        let now = Instant::now();
        let sig = interrupt.load(Ordering::Relaxed);
        if outcome.is_none() && sig != 0 {
            outcome = Some(Outcome::Interrupted(sig));
            failed_at = Some(now - opts.wait_after_failure);
        }
        if outcome.is_none() && opts.timeout.is_some_and(|t| now - start >= t) {
            outcome = Some(Outcome::TimedOut);
            failed_at = Some(now - opts.wait_after_failure);
        }
        if let Some(f) = failed_at {
            if termed_at.is_none() && now - f >= opts.wait_after_failure {
                signal_all(&mut children, Signal::SIGTERM);
                termed_at = Some(now);
            }
        }
        if let Some(t) = termed_at {
            if !killed.load(Ordering::Relaxed) && now - t >= opts.grace {
                signal_all(&mut children, Signal::SIGKILL);
                killed.store(true, Ordering::Relaxed);
            }
        }
    }
    for (_, child, _) in &mut children {
        // Already reaped by the waiting threads; this only releases handles.
        let _ = child.try_wait();
    }
    // Let the output pumps drain what the ranks wrote last.
    thread::sleep(Duration::from_millis(50));
    let _guard = lock.lock();
    outcome.unwrap_or(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI32;

    fn sh(rank: u32, script: &str) -> RankLaunch {
        RankLaunch {
            rank,
            host: "127.0.0.1".into(),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![("SPERLI_RANK".into(), rank.to_string())],
            stdin_line: "00ff\n".into(),
        }
    }

    fn quick() -> Options {
        Options {
            wait_after_failure: Duration::from_millis(300),
            grace: Duration::from_millis(300),
            ..Options::default()
        }
    }

    #[test]
    fn success_and_stdin() {
        let none = AtomicI32::new(0);
        let ranks = (0..3)
            .map(|r| sh(r, "read line; [ \"$line\" = 00ff ] || exit 9"))
            .collect();
        assert_eq!(run_job(ranks, &quick(), &none), Outcome::Success);
    }

    #[test]
    fn first_failure_is_reported() {
        let none = AtomicI32::new(0);
        let ranks = vec![
            sh(0, "sleep 0.5; exit 1"),
            sh(1, "exit 3"),
            sh(2, "sleep 30"),
        ];
        let o = run_job(ranks, &quick(), &none);
        assert_eq!(
            o,
            Outcome::Failed {
                rank: 1,
                exit: RankExit::Code(3)
            }
        );
        assert_eq!(o.exit_code(), 3);
    }

    #[test]
    fn signal_exit_is_128_plus() {
        let none = AtomicI32::new(0);
        let o = run_job(vec![sh(0, "kill -9 $$")], &quick(), &none);
        assert_eq!(o.exit_code(), 137);
    }

    #[test]
    fn timeout_ends_everything() {
        let none = AtomicI32::new(0);
        let opts = Options {
            timeout: Some(Duration::from_millis(300)),
            ..quick()
        };
        let t = Instant::now();
        let o = run_job(
            vec![sh(0, "sleep 30"), sh(1, "trap '' TERM; sleep 30")],
            &opts,
            &none,
        );
        assert_eq!(o, Outcome::TimedOut);
        assert_eq!(o.exit_code(), EXIT_TIMEOUT);
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn remote_command_quotes() {
        let r = RankLaunch {
            host: "node-b.example".into(),
            argv: vec!["prog".into(), "a b".into()],
            ..sh(1, "")
        };
        let c = command_for(&r, &Options::default()).unwrap();
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(c.get_program(), "ssh");
        assert_eq!(args[..3], ["-o", "BatchMode=yes", "node-b.example"]);
        assert_eq!(args[3], "env SPERLI_RANK=1 prog 'a b'");
    }
}
