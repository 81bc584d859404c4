//! Multi-process tests: each rank is a `sperli-test-rank` process (this
//! crate's test rank program) fed its job description on stdin as the
//! launcher does, on 127.0.0.x. They show what only a process can: a
//! fatal error ending it, a panic leaving with ABORT reason 2.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use sperli_tls::job_plan::JobPlan;
use sperli_transport::failure_record::FailureRecord;

use crate::common::with_deadline;

const BIN: &str = env!("CARGO_BIN_EXE_sperli-test-rank");

/// What a rank process reported.
enum Report {
    Line(String),
    Exited(Instant, ExitStatus, String),
}

/// One rank process.
struct Rank {
    pid: u32,
    reports: mpsc::Receiver<Report>,
    error_file: PathBuf,
}

impl Rank {
    /// Waits (up to `limit`) for a line starting with `prefix`; `None`
    /// when the process ended first (its exit is reported again).
    fn line(&self, prefix: &str, limit: Duration) -> Result<String, String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.reports.recv_timeout(left) {
                Ok(Report::Line(l)) if l.starts_with(prefix) => return Ok(l),
                Ok(Report::Line(_)) => {}
                Ok(Report::Exited(_, st, err)) => return Err(format!("exited {st}: {err}")),
                Err(_) => return Err(format!("no {prefix:?} within {limit:?}")),
            }
        }
    }

    /// Waits (up to `limit`) for the process to end: when, and how.
    fn exit(&self, limit: Duration) -> (Instant, ExitStatus, String) {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.reports.recv_timeout(left) {
                Ok(Report::Exited(at, st, err)) => return (at, st, err),
                Ok(Report::Line(_)) => {}
                Err(_) => panic!("rank pid {} did not exit within {limit:?}", self.pid),
            }
        }
    }

    fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }

    fn record(&self) -> Option<FailureRecord> {
        sperli_transport::failure_record::read(&self.error_file)
    }
}

impl Drop for Rank {
    fn drop(&mut self) {
        self.signal("-CONT");
        self.signal("-KILL");
        let _ = std::fs::remove_file(&self.error_file);
    }
}

/// Starts rank `r` of `plan` with `args`; a thread reports its stdout
/// lines and, when it ends, its exit.
fn spawn(plan: &JobPlan, r: u32, args: &[&str]) -> Rank {
    let error_file = std::env::temp_dir().join(format!(
        "sperli-transport-test-{}-{}-{r}.err",
        std::process::id(),
        plan.job_id.to_hex()
    ));
    let _ = std::fs::remove_file(&error_file);
    let mut child: Child = Command::new(BIN)
        .arg("--error-file")
        .arg(&error_file)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sperli-test-rank");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(plan.description(r).to_line().as_bytes())
        .expect("write the job description");
    drop(stdin);
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let lines = tx.clone();
    let reader = thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = lines.send(Report::Line(l));
        }
    });
    let stderr = thread::spawn(move || {
        let mut e = String::new();
        let _ = err.read_to_string(&mut e);
        e
    });
    thread::spawn(move || {
        let st = child.wait().expect("wait");
        let at = Instant::now();
        // Every line first, then the exit.
        let _ = reader.join();
        let e = stderr.join().unwrap_or_default();
        let _ = tx.send(Report::Exited(at, st, e));
    });
    Rank {
        pid,
        reports: rx,
        error_file,
    }
}

/// Starts a job whose rank `r` runs with `args(r)` and waits until every
/// rank said `up`. A rank that could not bind its port (another test took
/// it between the plan's probe and the bind) starts the job again.
fn job(size: u32, args: impl Fn(u32) -> Vec<&'static str>) -> Vec<Rank> {
    for _ in 0..3 {
        let plan = JobPlan::localhost(size).expect("plan");
        let ranks: Vec<Rank> = (0..size).map(|r| spawn(&plan, r, &args(r))).collect();
        let ups: Vec<Result<String, String>> = ranks
            .iter()
            .map(|k| k.line("up", Duration::from_secs(30)))
            .collect();
        if ups.iter().all(Result::is_ok) {
            return ranks;
        }
        let why: Vec<String> = ups.into_iter().filter_map(Result::err).collect();
        if !why.iter().any(|w| w.contains("AddrInUse")) {
            panic!("the job did not come up: {why:?}");
        }
    }
    panic!("the job did not come up in three tries");
}

/// The acceptance test of the fatal default: a rank whose program sleeps
/// 30 s in user code ends its process within 6.5 s of its peer being
/// stopped (silence limit 5 s plus the linger, 1 s), with status 13
/// (H1613) and its failure record written.
#[test]
fn a_sleeping_rank_exits_within_6_5_s_of_its_peer_being_stopped() {
    with_deadline(Duration::from_secs(90), || {
        let ranks = job(2, |_| vec!["sleep", "30000"]);
        let stopped = Instant::now();
        ranks[1].signal("-STOP");
        let (at, status, stderr) = ranks[0].exit(Duration::from_secs(20));
        let after = at.duration_since(stopped);
        println!("rank 0 ended {after:?} after its peer was stopped");
        assert!(
            after <= Duration::from_millis(6500),
            "rank 0 ended {after:?} after the stop"
        );
        assert_eq!(status.code(), Some(13), "{stderr}");
        assert!(
            stderr.contains("H1613 peer rank 1 lost: silent for"),
            "{stderr}"
        );
        let record = ranks[0].record().expect("the failure record");
        assert_eq!((record.code, record.blame), (1613, Some(1)));
    });
}

/// With `ErrorMode::Return` the same failure is the next call's error: the
/// program sleeps on past the detection and gets H1613 from its receive.
#[test]
fn with_errors_return_the_next_call_returns_the_error() {
    with_deadline(Duration::from_secs(90), || {
        let ranks = job(2, |r| match r {
            0 => vec![
                "--errors",
                "return",
                "--silence-ms",
                "1500",
                "sleep",
                "4000",
            ],
            _ => vec!["sleep", "60000"],
        });
        let stopped = Instant::now();
        ranks[1].signal("-STOP");
        let line = ranks[0]
            .line("next-call", Duration::from_secs(30))
            .expect("the next call's outcome");
        let (at, status, stderr) = ranks[0].exit(Duration::from_secs(10));
        assert!(
            line.starts_with("next-call-error: H1613 peer rank 1 lost: silent for"),
            "{line}"
        );
        assert_eq!(status.code(), Some(3), "the program's own status: {stderr}");
        assert!(
            at.duration_since(stopped) >= Duration::from_millis(3500),
            "it slept on past the detection"
        );
        assert_eq!(ranks[0].record().map(|r| r.code), Some(1613));
    });
}

/// A rank whose program panics leaves with ABORT reason 2 and the panic's
/// message, never BYE: a peer in a receive (errors returned) gets H1612
/// naming it; a peer that computes (fatal default) ends with status 12.
///
/// Two jobs of two ranks: with a third rank, rank 0 may see that rank's
/// close before the panicking rank's ABORT and report H1613 (protocol
/// §7.5), so each job has the panicking rank as the only peer.
#[test]
fn a_panicking_rank_leaves_with_abort_reason_2() {
    with_deadline(Duration::from_secs(90), || {
        let ranks = job(2, |r| match r {
            0 => vec!["--errors", "return", "recv"],
            _ => vec!["panic"],
        });
        let line = ranks[0]
            .line("next-call", Duration::from_secs(30))
            .expect("rank 0's receive returns");
        assert!(
            line.starts_with("next-call-error: H1612 job aborted by rank 1: reason 2, code 0: rank 1 panicked at"),
            "{line}"
        );
        assert!(line.contains("deliberate panic in rank 1"), "{line}");
        let (_, st1, _) = ranks[1].exit(Duration::from_secs(10));
        assert_eq!(st1.code(), Some(101), "a panic's status");

        let ranks = job(2, |r| match r {
            0 => vec!["sleep", "30000"],
            _ => vec!["panic"],
        });
        let (_, st0, err0) = ranks[0].exit(Duration::from_secs(10));
        assert_eq!(st0.code(), Some(12), "rank 0 (fatal default): {st0} {err0}");
        let (_, st1, _) = ranks[1].exit(Duration::from_secs(10));
        assert_eq!(st1.code(), Some(101), "a panic's status");
    });
}
