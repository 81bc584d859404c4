//! Helpers: the `sperli` binary, unique names, jobs, process scans.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use sperli_mailbox::{JobSpec, Mailbox, MailboxError};

/// The `sperli` launcher of this workspace, built once per test run with
/// the profile of this test binary (a no-op when it is up to date).
pub fn sperli() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        // .../target/<profile>/deps/mailbox-HASH
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>")
            .to_path_buf();
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let cargo = option_env!("CARGO").unwrap_or("cargo");
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let mut c = Command::new(cargo);
        c.args(["build", "--quiet", "-p", "sperli-launch", "--bin", "sperli"])
            .arg("--manifest-path")
            .arg(&manifest);
        if release {
            c.arg("--release");
        }
        let st = c.status().expect("run cargo build for sperli");
        assert!(st.success(), "cargo build -p sperli-launch failed");
        let bin = profile_dir.join("sperli");
        assert!(bin.is_file(), "{} missing", bin.display());
        bin
    })
}

/// The example rank program.
pub fn server() -> &'static str {
    env!("CARGO_BIN_EXE_sperli-mailbox-server")
}

/// The example client program.
pub fn client() -> &'static str {
    env!("CARGO_BIN_EXE_sperli-mailbox-client")
}

/// A name no other test (or test run) uses.
pub fn unique(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `127.0.0.1,...,127.0.0.n`.
pub fn spread(n: u32) -> String {
    (1..=n)
        .map(|i| format!("127.0.0.{i}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether the launchers' and ranks' output is shown.
pub fn verbose() -> bool {
    std::env::var_os("SPERLI_TEST_VERBOSE").is_some()
}

/// A job under test: its client and the label its rank programs carry
/// on their command line.
pub struct TestJob {
    pub mb: Mailbox,
    pub label: String,
}

/// Starts a warm job of `ranks` ranks (127.0.0.1..) with the example
/// server; `silence_ms` for the fault tests. Starts again (twice at most)
/// when the launcher's free-port race lost a port.
pub fn job(tag: &str, ranks: u32, silence_ms: Option<u64>) -> TestJob {
    let mut last = None;
    for _ in 0..3 {
        let name = unique(tag);
        let label = format!("label-{name}");
        let mut spec = JobSpec::new(
            sperli(),
            ranks,
            vec![server().into(), "--label".into(), label.clone()],
        );
        spec.hosts = Some(spread(ranks));
        spec.launcher_args = vec!["--timeout".into(), "300".into()];
        if let Some(ms) = silence_ms {
            spec.launcher_args
                .extend(["--silence-ms".into(), ms.to_string()]);
        }
        spec.inherit_output = verbose();
        match Mailbox::start_job(&name, &spec) {
            Ok(mb) => return TestJob { mb, label },
            Err(e @ MailboxError::LauncherEnded { .. }) => last = Some(e),
            Err(e) => panic!("cannot start the job: {e}"),
        }
    }
    panic!("cannot start the job three times: {last:?}")
}

/// The pids of processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            // A zombie has an empty command line; this one runs.
            out.push(pid);
        }
    }
    out
}

/// Waits, at most `left`, until one of `fds` is readable: a pidfd when
/// its process exits, an inotify descriptor when an event is queued.
fn poll_readable(fds: &[OwnedFd], left: Duration) {
    let mut p: Vec<PollFd<'_>> = fds.iter().map(|f| PollFd::new(f, PollFlags::IN)).collect();
    let ts = Timespec {
        tv_sec: left.as_secs() as i64,
        tv_nsec: i64::from(left.subsec_nanos()),
    };
    let _ = rustix::event::poll(&mut p, Some(&ts));
}

/// A pidfd of `pid` (`None`: it is gone, or reaped).
fn pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Waits up to `limit` until no process carries `needle`; returns the
/// time it took, or the pids still there. Woken by each exit (pidfd).
pub fn gone_within(needle: &str, limit: Duration) -> Result<Duration, Vec<u32>> {
    let t = Instant::now();
    loop {
        let left = processes_with(needle);
        if left.is_empty() {
            return Ok(t.elapsed());
        }
        let rest = limit.saturating_sub(t.elapsed());
        if rest.is_zero() {
            return Err(left);
        }
        let fds: Vec<OwnedFd> = left.iter().filter_map(|&p| pidfd(p)).collect();
        if !fds.is_empty() {
            poll_readable(&fds, rest);
        }
    }
}

/// Waits until `pid` has exited (a zombie counts: the caller reaps it or
/// it is not our child), at most `limit`. Woken by its exit (pidfd).
pub fn pid_gone_within(pid: u32, limit: Duration) -> bool {
    let Some(fd) = pidfd(pid) else {
        return true;
    };
    poll_readable(std::slice::from_ref(&fd), limit);
    let mut p = [PollFd::new(&fd, PollFlags::IN)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    rustix::event::poll(&mut p, Some(&zero)).is_ok_and(|n| n > 0)
}

/// Waits at most `limit` until `cond()` holds, looking again at each
/// change of a name in /dev/shm (inotify: created, renamed, removed,
/// written). Returns whether it holds.
pub fn wait_shm(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
    let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).expect("inotify");
    inotify::add_watch(
        &fd,
        sperli_mailbox::files::SHM_DIR,
        WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::CLOSE_WRITE,
    )
    .expect("watch /dev/shm");
    let t = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        if cond() {
            return true;
        }
        let rest = limit.saturating_sub(t.elapsed());
        if rest.is_zero() {
            return false;
        }
        poll_readable(std::slice::from_ref(&fd), rest);
        while rustix::io::read(&fd, &mut buf).is_ok_and(|n| n > 0) {}
    }
}

/// Whether neither `name`'s mailbox nor its manifest is in /dev/shm.
pub fn files_gone(name: &str) -> bool {
    !sperli_mailbox::files::mailbox_path(name).exists()
        && !sperli_mailbox::files::manifest_path(name).exists()
}

/// SIGKILL to `pid`.
pub fn kill9(pid: u32) {
    let st = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -KILL {pid}");
}

/// Little-endian u64 bytes.
pub fn le64(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// `stderr` for a child: inherited with `SPERLI_TEST_VERBOSE`, else discarded.
pub fn child_stderr() -> std::process::Stdio {
    if verbose() {
        std::process::Stdio::inherit()
    } else {
        std::process::Stdio::null()
    }
}

/// A job started from "the shell": `sperli run -n 4 --mailbox NAME --
/// sperli-mailbox-server --label LABEL`, the test as its owner.
pub struct ShellJob {
    pub run: std::process::Child,
    pub name: String,
    pub label: String,
}

/// Starts a [`ShellJob`] and waits for its manifest.
pub fn shell_job(tag: &str) -> (ShellJob, sperli_mailbox::files::Manifest) {
    let name = unique(tag);
    let label = format!("label-{name}");
    let run = Command::new(sperli())
        .args(["run", "-n", "4", "-H", &spread(4), "--timeout", "120"])
        .args(["--mailbox", &name, "--", server(), "--label", &label])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(child_stderr())
        .spawn()
        .expect("sperli run");
    let m = wait_manifest(&name, Duration::from_secs(30));
    (ShellJob { run, name, label }, m)
}

/// A [`shell_job`] that is READY, and a client attached to it.
pub fn ready_shell_job(tag: &str) -> (ShellJob, sperli_mailbox::files::Manifest, Mailbox) {
    let (job, m) = shell_job(tag);
    let mut mb = Mailbox::attach(&job.name).unwrap();
    mb.wait_ready(Duration::from_secs(30)).unwrap();
    (job, m, mb)
}

/// Waits for `name`'s manifest (the launcher renames it into place).
pub fn wait_manifest(name: &str, limit: Duration) -> sperli_mailbox::files::Manifest {
    let mut found = None;
    wait_shm(limit, || {
        found = sperli_mailbox::files::Manifest::read(name).unwrap();
        found.is_some()
    });
    found.unwrap_or_else(|| panic!("no manifest of {name}"))
}

/// Waits for the child to exit, at most `limit` after `since` (woken by
/// its exit: a pidfd).
pub fn wait_exit(
    child: &mut std::process::Child,
    since: Instant,
    limit: Duration,
) -> std::process::ExitStatus {
    let fd = pidfd(child.id());
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(
            since.elapsed() < limit,
            "{} still running {:?} later",
            child.id(),
            since.elapsed()
        );
        if let Some(fd) = &fd {
            poll_readable(
                std::slice::from_ref(fd),
                limit.saturating_sub(since.elapsed()),
            );
        }
    }
}

/// Waits at most `limit` until `cond` holds of the header word at
/// `word` (a futex word: 24 group state, 28 request state), woken by each
/// wake of it. `poll`: look at least this often, for a change stored
/// without a wake (TASK_ACCEPTED: docs/mailbox.md §3.2, a client looks
/// every 1 ms). Returns whether it holds.
pub fn wait_word(
    f: &sperli_mailbox::files::MailboxFile,
    word: usize,
    limit: Duration,
    poll: Option<Duration>,
    mut cond: impl FnMut(u32) -> bool,
) -> bool {
    let t = Instant::now();
    loop {
        let v = f.map.load32(word);
        if cond(v) {
            return true;
        }
        let rest = limit.saturating_sub(t.elapsed());
        if rest.is_zero() {
            return false;
        }
        f.map.wait(word, v, poll.map_or(rest, |p| p.min(rest)));
    }
}
