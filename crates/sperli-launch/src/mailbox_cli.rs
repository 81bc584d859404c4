//! `sperli run --mailbox NAME` and `sperli submit` (docs/mailbox.md §7).
//!
//! With `--mailbox NAME` the launcher creates the mailbox (a 0600 file in
//! `/dev/shm` named after this user) and its manifest before any rank
//! starts, hands the name to rank 0 in `SPERLI_MAILBOX` (not a secret),
//! and removes both when the job ends. `sperli submit` is a small client
//! for shell use.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sperli_mailbox::files::{self, Manifest};
use sperli_mailbox::{Mailbox, MailboxError, Replies, Target, MAILBOX_ENV};

use crate::supervise::{is_local, EXIT_USAGE};
use crate::watchdog::PipeShell;

/// The mailbox options of `sperli run`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MailboxArgs {
    /// Serve tasks from the mailbox NAME (docs/mailbox.md): the rank
    /// program runs `MailboxServer`; submit with `sperli submit --mailbox
    /// NAME` or the `sperli_mailbox::Mailbox` client.
    #[arg(long, value_name = "NAME")]
    pub mailbox: Option<String>,
    /// End the job when the launcher's stdin reaches end of file (a client
    /// that started the launcher holds the pipe's write end).
    #[arg(long, requires = "mailbox")]
    pub exit_on_stdin_eof: bool,
}

/// The mailbox of a running job; removes the mailbox and its manifest
/// when dropped, and, through its cleaner, when the launcher dies
/// without dropping it (SIGKILL, a crash).
#[derive(Debug)]
pub struct MailboxJob {
    name: String,
    /// A small `sh` that outlives the launcher and removes the mailbox
    /// and manifest when the launcher dies however it dies
    /// (docs/mailbox.md §1.1), as the job's watchdog does for the ranks.
    cleaner: Option<PipeShell>,
}

/// The cleaner's script: `$1` the mailbox, `$2` the manifest, `$3` the
/// launcher's pid. It waits on its stdin, a pipe only the launcher
/// writes: `end` (the launcher removed the files itself) ends it; end of
/// file (the launcher died) removes both files, unless the manifest names
/// another launcher by then (a new job took the stale name).
const CLEANER: &str = r#"trap '' INT TERM HUP
IFS= read -r l
[ "$l" = end ] && exit 0
grep -qx "launcher_pid $3" "$2" 2>/dev/null || exit 0
rm -f "$1" "$2"
"#;

/// The signal number the stdin watch reports as the launcher's interrupt
/// (the job ends as on SIGHUP: SIGTERM to every rank, SIGKILL after the
/// grace).
pub const STDIN_EOF_SIGNAL: i32 = 1;

impl MailboxJob {
    /// Creates the mailbox and writes the manifest (before any rank
    /// starts), and starts the stdin watch when asked. `None` without
    /// `--mailbox`. Rank 0 must run on this machine (it maps the file).
    pub fn prepare(
        args: &MailboxArgs,
        ranks: u32,
        rank0_host: &str,
        restart_max: u32,
        interrupt: &Arc<AtomicI32>,
    ) -> Result<Option<MailboxJob>, String> {
        let Some(name) = &args.mailbox else {
            return Ok(None);
        };
        if restart_max > 0 {
            return Err("--mailbox does not restart a job (a TERMINAL mailbox group stays TERMINAL): drop --restart-max".into());
        }
        if !is_local(rank0_host) {
            return Err(format!(
                "--mailbox: rank 0 must run on this machine (it maps the mailbox), not on {rank0_host}"
            ));
        }
        let created = match Mailbox::create(name, ranks) {
            Err(MailboxError::Exists { .. }) if stale(name) => {
                files::remove(name);
                Mailbox::create(name, ranks)
            }
            r => r,
        };
        drop(created.map_err(|e| format!("--mailbox {name}: {e}"))?);
        let mut job = MailboxJob {
            name: name.clone(),
            cleaner: None,
        };
        Manifest::new(name, ranks)
            .write()
            .map_err(|e| format!("--mailbox {name}: {e}"))?;
        // `None` when `sh` cannot be started: the files are then removed
        // only by a launcher that ends normally, or by the client that
        // started it.
        job.cleaner = PipeShell::start(
            CLEANER,
            "sperli-mailbox-cleaner",
            &[
                files::mailbox_path(name).into_os_string(),
                files::manifest_path(name).into_os_string(),
                std::process::id().to_string().into(),
            ],
        );
        if args.exit_on_stdin_eof {
            let flag = interrupt.clone();
            std::thread::spawn(move || {
                let mut sink = [0u8; 256];
                let mut stdin = std::io::stdin();
                while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
                eprintln!("sperli: stdin closed (--exit-on-stdin-eof): ending the job");
                flag.store(STDIN_EOF_SIGNAL, Ordering::Relaxed);
            });
        }
        Ok(Some(job))
    }

    /// The environment entry of `rank`: the mailbox name, for rank 0 only.
    pub fn env(&self, rank: u32) -> Option<(String, String)> {
        (rank == 0).then(|| (MAILBOX_ENV.to_string(), self.name.clone()))
    }
}

impl Drop for MailboxJob {
    fn drop(&mut self) {
        files::remove(&self.name);
        if let Some(c) = self.cleaner.take() {
            c.end();
        }
    }
}

/// Whether an existing mailbox of `name` was left by a launcher that is
/// gone (its manifest names a pid that no longer exists).
fn stale(name: &str) -> bool {
    match Manifest::read(name) {
        Ok(Some(m)) => i32::try_from(m.launcher_pid).is_ok_and(|pid| {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                == Err(nix::errno::Errno::ESRCH)
        }),
        _ => false,
    }
}

/// What `sperli submit` sends: exactly one of these.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
pub struct SubmitOp {
    /// A TASK for the handler NAME (or `#ID` for a numeric id).
    #[arg(long, value_name = "NAME")]
    task: Option<String>,
    /// A CONTROL for the handler NAME (or `#ID`).
    #[arg(long, value_name = "NAME")]
    control: Option<String>,
    /// PING: every rank answers.
    #[arg(long)]
    ping: bool,
    /// SHUTDOWN: every rank ends normally, the launcher exits.
    #[arg(long)]
    shutdown: bool,
}

/// `sperli submit`: one request to a running job's mailbox.
#[derive(clap::Args, Debug)]
pub struct SubmitArgs {
    /// The mailbox name given to `sperli run --mailbox`.
    #[arg(long, value_name = "NAME")]
    mailbox: String,
    #[command(flatten)]
    op: SubmitOp,
    /// Only this rank runs the task (default: every rank, one payload).
    #[arg(long, conflicts_with = "per_rank")]
    rank: Option<u32>,
    /// Rank i gets the i-th payload (give one per rank).
    #[arg(long)]
    per_rank: bool,
    /// A payload as text; repeat for --per-rank.
    #[arg(long, value_name = "TEXT", conflicts_with = "data_file")]
    data: Vec<String>,
    /// A payload from a file (`-`: stdin); repeat for --per-rank.
    #[arg(long, value_name = "FILE")]
    data_file: Vec<PathBuf>,
    /// Seconds to wait for the reply; a request that passes it makes the
    /// group TERMINAL (the job ends).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// Write the replies' bytes to stdout as they are, in rank order.
    #[arg(long)]
    raw: bool,
}

fn handler(s: &str) -> Result<sperli_mailbox::HandlerId, String> {
    match s.strip_prefix('#') {
        Some(n) => n
            .parse::<u32>()
            .map(sperli_mailbox::HandlerId)
            .map_err(|_| format!("handler id {s:?} is not #0..#4294967295")),
        None => Ok(sperli_mailbox::HandlerId::from(s)),
    }
}

fn payloads(args: &SubmitArgs) -> Result<Vec<Vec<u8>>, String> {
    if !args.data.is_empty() {
        return Ok(args.data.iter().map(|d| d.as_bytes().to_vec()).collect());
    }
    args.data_file
        .iter()
        .map(|p| {
            let mut v = Vec::new();
            let r = if p.as_os_str() == "-" {
                std::io::stdin().read_to_end(&mut v)
            } else {
                std::fs::File::open(p).and_then(|mut f| f.read_to_end(&mut v))
            };
            r.map(|_| v)
                .map_err(|e| format!("cannot read --data-file {}: {e}", p.display()))
        })
        .collect()
}

fn show(replies: &Replies, raw: bool) {
    let mut out = std::io::stdout().lock();
    for r in &replies.replies {
        match &r.outcome {
            Ok(bytes) if raw => {
                let _ = out.write_all(bytes);
            }
            Ok(bytes) => {
                let text = match std::str::from_utf8(bytes) {
                    Ok(t) => t.trim_end_matches('\n').to_string(),
                    Err(_) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
                };
                let _ = writeln!(out, "rank {}: ok ({} bytes): {text}", r.rank, bytes.len());
            }
            Err(e) => eprintln!("sperli submit: {e}"),
        }
    }
}

/// Exit status of `sperli submit` when a target rank failed (H1642).
pub const EXIT_TASK_FAILED: u8 = 1;
/// Exit status for every other failure (refused, terminal, timeout, I/O).
pub const EXIT_FAILED: u8 = 3;

/// Runs `sperli submit`; returns its exit status: 0 done, 1 a target rank
/// failed, 2 usage, 3 any other failure.
pub fn submit(args: &SubmitArgs) -> ExitCode {
    let usage = |m: String| {
        eprintln!("sperli submit: {m}");
        ExitCode::from(EXIT_USAGE as u8)
    };
    let data = match payloads(args) {
        Ok(d) => d,
        Err(e) => return usage(e),
    };
    let target = match (args.rank, args.per_rank) {
        (Some(r), _) => Target::Rank(r),
        (None, true) => Target::PerRank,
        (None, false) => Target::Group,
    };
    let op = &args.op;
    let handler = match op.task.as_deref().or(op.control.as_deref()).map(handler) {
        Some(Err(e)) => return usage(e),
        Some(Ok(h)) => Some(h),
        None => None,
    };
    let timeout = Duration::from_secs(args.timeout);
    let run = || -> Result<Option<Replies>, MailboxError> {
        let mut mb = Mailbox::attach(&args.mailbox)?;
        mb.set_timeout(timeout);
        mb.wait_ready(timeout)?;
        let mut one: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        if one.is_empty() && target != Target::PerRank {
            one.push(&[]);
        }
        match handler {
            _ if op.ping => mb.ping().map(Some),
            _ if op.shutdown => mb.shutdown().map(|()| None),
            Some(h) if op.task.is_some() => mb.submit(h, target, &one).map(Some),
            Some(h) => mb.control(h, target, &one).map(Some),
            None => unreachable!("clap requires exactly one operation"),
        }
    };
    match run() {
        Ok(Some(r)) => {
            show(&r, args.raw);
            ExitCode::SUCCESS
        }
        Ok(None) => {
            if !args.raw {
                println!("shut down: every rank ended normally");
            }
            ExitCode::SUCCESS
        }
        Err(e @ MailboxError::TaskFailed(_)) => {
            if let MailboxError::TaskFailed(r) = &e {
                show(r, args.raw);
                let code = e.code().map(|c| format!("{c} ")).unwrap_or_default();
                eprintln!(
                    "sperli submit: {code}task {} failed on some rank",
                    r.sequence
                );
            }
            ExitCode::from(EXIT_TASK_FAILED)
        }
        Err(e) => {
            eprintln!("sperli submit: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}
