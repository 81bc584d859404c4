//! Helpers: a launcher started with a marker in its environment (every
//! process of its job inherits it), its output as events, and the job's
//! processes found by the marker in `/proc/PID/environ`, alive or not by
//! `/proc/PID/status` (zombies linger under this machine's init: they
//! count as gone).

use std::io::BufRead;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

/// The environment variable that marks a test's job.
pub const MARK: &str = sperli_wire::env::TEST_JOB;

/// A unique marker for one launcher run.
pub fn marker(name: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// One process as `/proc` shows it.
#[derive(Debug, Clone)]
pub struct Proc {
    /// Its pid.
    pub pid: u32,
    /// Its parent.
    pub ppid: u32,
    /// Its state letter (`R`, `S`, `T`, `Z`, ...).
    pub state: String,
    /// Its argv.
    pub argv: Vec<String>,
    /// Its environment.
    pub env: Vec<(String, String)>,
}

impl Proc {
    /// A variable of its environment.
    pub fn var(&self, k: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }

    /// Whether it is the example rank program (not a shell around it).
    pub fn is_example(&self) -> bool {
        std::fs::read_link(format!("/proc/{}/exe", self.pid))
            .is_ok_and(|p| p.to_string_lossy().contains("sperli-example"))
    }
}

fn read_proc(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let mut f = after.split_whitespace();
    let state = f.next()?.to_owned();
    let ppid = f.next()?.parse().ok()?;
    let split = |b: Vec<u8>| -> Vec<String> {
        b.split(|c| *c == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    };
    let argv = split(std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default());
    let env = split(std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default())
        .into_iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect();
    Some(Proc {
        pid,
        ppid,
        state,
        argv,
        env,
    })
}

/// The processes of the job marked `mark` that have not exited.
pub fn job(mark: &str) -> Vec<Proc> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Some(p) = read_proc(pid) else {
            continue;
        };
        if p.state != "Z" && p.state != "X" && p.var(MARK) == Some(mark) {
            out.push(p);
        }
    }
    out
}

/// The example rank process of `rank` in `incarnation` of the job.
pub fn rank_process(mark: &str, rank: u32, incarnation: u32) -> Option<Proc> {
    job(mark).into_iter().find(|p| {
        p.is_example()
            && p.var(sperli_wire::env::RANK) == Some(&rank.to_string())
            && p.var(sperli_wire::env::INCARNATION) == Some(&incarnation.to_string())
    })
}

/// Waits (at most `limit`) until no process of the job is left; the
/// time it took, or the processes still there.
pub fn wait_none_left(mark: &str, limit: Duration) -> Result<Duration, Vec<Proc>> {
    let t = Instant::now();
    let mut left = Vec::new();
    if crate::until_exits(
        limit,
        || {
            left = job(mark);
            left.iter().map(|p| p.pid).collect()
        },
        |pids| pids.is_empty(),
    ) {
        Ok(t.elapsed())
    } else {
        Err(left)
    }
}

/// Sends `sig` (a `kill` signal name) to `pid`.
pub fn kill(sig: &str, pid: u32) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status();
}

/// A running launcher (or a command that runs one, as `salloc`).
pub struct Launched {
    /// The process.
    pub child: Child,
    /// Its job's marker.
    pub mark: String,
    lines: Receiver<(bool, String)>,
    /// Its stdout so far.
    pub out: String,
    /// Its stderr so far.
    pub err: String,
}

/// Replaces the word `EXAMPLE` by the example program's path, and
/// `EXAMPLE` inside a longer word (a `sh -c` script) too.
pub fn with_example(words: &[&str]) -> Vec<String> {
    let example = crate::example();
    words
        .iter()
        .map(|w| w.replace("EXAMPLE", example))
        .collect()
}

impl Launched {
    /// Starts `sperli ARGS` (`EXAMPLE` replaced) with the marker `mark`.
    pub fn sperli(args: &[&str], mark: &str) -> Self {
        Self::command(env!("CARGO_BIN_EXE_sperli"), args, mark, &[])
    }

    /// Starts `program ARGS` (`EXAMPLE` replaced, and the word `SPERLI`
    /// by the launcher) with the marker and `env`.
    pub fn command(program: &str, args: &[&str], mark: &str, env: &[(&str, &str)]) -> Self {
        Self::start(program, args, mark, env, Stdio::null())
    }

    /// Starts `sperli ARGS` (`EXAMPLE` replaced) with the marker `mark`
    /// and a pipe as its stdin, whose writing end it returns.
    pub fn sperli_fed(args: &[&str], mark: &str) -> (Self, std::process::ChildStdin) {
        let mut l = Self::start(
            env!("CARGO_BIN_EXE_sperli"),
            args,
            mark,
            &[],
            Stdio::piped(),
        );
        let stdin = l.child.stdin.take().expect("the launcher's stdin is piped");
        (l, stdin)
    }

    fn start(program: &str, args: &[&str], mark: &str, env: &[(&str, &str)], stdin: Stdio) -> Self {
        let args: Vec<String> = with_example(args)
            .into_iter()
            .map(|a| {
                if a == "SPERLI" {
                    env!("CARGO_BIN_EXE_sperli").to_owned()
                } else {
                    a
                }
            })
            .collect();
        let mut c = Command::new(program);
        c.args(&args)
            .env(MARK, mark)
            .env_remove("SPERLI_REFUSED_HOSTS")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("start the launcher");
        let (tx, lines) = crossbeam_channel::unbounded();
        for (is_err, src) in [
            (
                false,
                Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            ),
            (true, Box::new(child.stderr.take().unwrap())),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for l in std::io::BufReader::new(src).lines().map_while(Result::ok) {
                    let _ = tx.send((is_err, l));
                }
            });
        }
        Self {
            child,
            mark: mark.to_owned(),
            lines,
            out: String::new(),
            err: String::new(),
        }
    }

    fn take(&mut self, (is_err, l): (bool, String)) -> String {
        let s = if is_err { &mut self.err } else { &mut self.out };
        s.push_str(&l);
        s.push('\n');
        l
    }

    /// Waits (at most 60 s, else fails the test) until ranks `0..n` of the
    /// `sleep` example said `rank R joined`.
    pub fn wait_joined(&mut self, n: u32) {
        let want: Vec<String> = (0..n).map(|r| format!("[{r}] rank {r} joined")).collect();
        assert!(
            self.wait_lines(&want, Duration::from_secs(60)),
            "the ranks did not join:\n{}\n{}",
            self.out,
            self.err
        );
    }

    /// Waits for every line in `want` (in any order), at most `limit`.
    pub fn wait_lines(&mut self, want: &[String], limit: Duration) -> bool {
        let mut missing: Vec<&String> = want.iter().collect();
        let t = Instant::now();
        while !missing.is_empty() {
            let Some(left) = limit.checked_sub(t.elapsed()) else {
                return false;
            };
            let Ok(l) = self.lines.recv_timeout(left) else {
                return false;
            };
            let l = self.take(l);
            missing.retain(|w| **w != l);
        }
        true
    }

    /// Waits for a line (stdout or stderr: the flag) that `pred` accepts,
    /// at most `limit`.
    pub fn wait_until(&mut self, limit: Duration, pred: impl Fn(bool, &str) -> bool) -> bool {
        let t = Instant::now();
        loop {
            let Some(left) = limit.checked_sub(t.elapsed()) else {
                return false;
            };
            let Ok((is_err, l)) = self.lines.recv_timeout(left) else {
                return false;
            };
            let l = self.take((is_err, l));
            if pred(is_err, &l) {
                return true;
            }
        }
    }

    /// Waits (at most `limit`, else kills the job and fails the test) for
    /// the end; its status, with all output in `out` and `err`.
    pub fn finish(&mut self, limit: Duration) -> ExitStatus {
        let t = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() >= limit {
                let _ = self.child.kill();
                for p in job(&self.mark) {
                    kill("KILL", p.pid);
                }
                let _ = self.child.wait();
                self.drain();
                panic!(
                    "the launcher did not end within {limit:?}:\n{}\n{}",
                    self.out, self.err
                );
            }
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(20)) {
                self.take(l);
            }
        };
        self.drain();
        status
    }

    fn drain(&mut self) {
        // The readers end when every holder of the pipes has closed them.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.take(l);
        }
    }
}

/// A shell script in a private directory, made executable. Each name is
/// written once per test binary: rewriting a script that a concurrent
/// test is starting fails that start with "text file busy".
pub fn script(name: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    static WRITTEN: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    let dir = std::env::temp_dir().join(format!("sperli-test-scripts-{}", std::process::id()));
    let p = dir.join(name);
    let mut written = WRITTEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match written.iter().find(|(n, _)| n == name) {
        Some((_, b)) => assert_eq!(b, body, "two scripts named {name}"),
        None => {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            written.push((name.to_owned(), body.to_owned()));
        }
    }
    p
}

/// A stand-in for `ssh HOST COMMAND` that stays on this machine: it runs
/// COMMAND in a session of its own, as sshd would, and waits for it; the
/// remote side's stdin is this process's stdin.
pub fn fake_ssh() -> String {
    script("fake-ssh", "shift\nexec setsid -w sh -c \"$1\"")
        .to_string_lossy()
        .into_owned()
}
