//! Helpers: the `sperli` binary, unique names, jobs, process scans.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

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

/// Waits up to `limit` until no process carries `needle`; returns the
/// time it took, or the pids still there.
pub fn gone_within(needle: &str, limit: Duration) -> Result<Duration, Vec<u32>> {
    let t = Instant::now();
    loop {
        let left = processes_with(needle);
        if left.is_empty() {
            return Ok(t.elapsed());
        }
        if t.elapsed() > limit {
            return Err(left);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `pid` is gone (not a zombie of ours: the caller reaped it
/// or it is not our child).
pub fn pid_gone_within(pid: u32, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next());
        if stat.is_empty() || state == Some("Z") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
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

/// Waits for `name`'s manifest.
pub fn wait_manifest(name: &str, limit: Duration) -> sperli_mailbox::files::Manifest {
    let t = Instant::now();
    loop {
        if let Some(m) = sperli_mailbox::files::Manifest::read(name).unwrap() {
            return m;
        }
        assert!(t.elapsed() < limit, "no manifest of {name}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for the child to exit, at most `limit` after `since`.
pub fn wait_exit(
    child: &mut std::process::Child,
    since: Instant,
    limit: Duration,
) -> std::process::ExitStatus {
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
        std::thread::sleep(Duration::from_millis(10));
    }
}
