//! Faults (docs/mailbox.md §3.4, §7.4): a rank SIGKILLed mid-task and
//! while idle, a client killed mid-request (shell and library), and no
//! process left afterwards.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sperli_mailbox::files::{self, MailboxFile};
use sperli_mailbox::layout::off;
use sperli_mailbox::{GroupState, MailboxError, RequestState, Target, TerminalReason};

use crate::common::*;

/// The silence limit of the fault jobs.
const SILENCE_MS: u64 = 2000;

/// docs/mailbox.md §7.4: a rank lost mid-task reaches the client within
/// the silence limit plus 2 s (the launcher ends the survivors) plus the
/// ticks; the margin covers a loaded 2-core machine.
const LOST_RANK_BOUND: Duration = Duration::from_millis(SILENCE_MS + 4000);

/// docs/mailbox.md §3.2: TASK_ACCEPTED is stored without a wake; a
/// client that waits for it looks every 1 ms.
const ACCEPTED_LOOK: Duration = Duration::from_millis(1);

/// Whether `pid`'s main thread sleeps in a nanosleep (the `sleep` handler).
fn sleeps_in_handler(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/wchan")).is_ok_and(|w| w.contains("nanosleep"))
}

fn pid(j: &mut TestJob, rank: u32) -> u32 {
    let r = j.mb.submit("pid", Target::Rank(rank), &[b""]).unwrap();
    u32::from_le_bytes(r.ok(rank).unwrap().try_into().unwrap())
}

#[test]
fn a_rank_sigkilled_mid_task_fails_the_request_within_the_bound_and_leaves_no_process() {
    let mut j = job("kill-mid", 4, Some(SILENCE_MS));
    let victim = pid(&mut j, 2);
    let name = j.mb.name().to_string();
    let killed_at = std::thread::spawn(move || {
        // The kill comes once rank 0 accepted the request and the victim
        // sleeps in its handler (its main thread in a nanosleep).
        let f = MailboxFile::open(&name).unwrap();
        let accepted = RequestState::TaskAccepted.code();
        assert!(
            wait_word(
                &f,
                off::REQUEST_STATE,
                Duration::from_secs(30),
                Some(ACCEPTED_LOOK),
                |v| v == accepted && sleeps_in_handler(victim),
            ),
            "rank 2 never slept in its handler"
        );
        kill9(victim);
        Instant::now()
    });
    // Every rank sleeps 20 s in its handler: no collective notices the
    // loss before the launcher does.
    let r = j.mb.submit("sleep", Target::Group, &[&le64(20_000)]);
    let got_at = Instant::now();
    let killed_at = killed_at.join().unwrap();
    let e = r.unwrap_err();
    let took = got_at - killed_at;
    assert!(
        matches!(e, MailboxError::Terminal { .. }),
        "expected TERMINAL, got {e}"
    );
    eprintln!("rank killed mid-task: the client got {e} after {took:?}");
    assert!(took <= LOST_RANK_BOUND, "error after {took:?}: {e}");
    assert!(matches!(j.mb.ping(), Err(MailboxError::Terminal { .. })));
    let label = j.label.clone();
    let name = j.mb.name().to_string();
    drop(j);
    let left = gone_within(&label, Duration::from_secs(10));
    assert!(left.is_ok(), "processes left: {left:?}");
    assert!(!files::mailbox_path(&name).exists());
    assert!(!files::manifest_path(&name).exists());
}

#[test]
fn a_rank_sigkilled_between_requests_is_seen_by_rank_0s_timed_wake() {
    let mut j = job("kill-idle", 4, Some(SILENCE_MS));
    let victim = pid(&mut j, 2);
    kill9(victim);
    let t = Instant::now();
    // No request in flight: rank 0's timed wake (100 ms) sees the lost
    // rank (the kernel closed its sockets) and makes the group TERMINAL.
    let f = MailboxFile::open(j.mb.name()).unwrap();
    let terminal = GroupState::Terminal.code();
    assert!(
        wait_word(&f, off::GROUP_STATE, Duration::from_secs(3), None, |v| v
            == terminal),
        "still READY"
    );
    let noticed = t.elapsed();
    assert_eq!(
        f.header().unwrap().terminal,
        Some(TerminalReason::Collective)
    );
    assert!(noticed < Duration::from_millis(1500), "{noticed:?}");
    let e = j.mb.ping().unwrap_err();
    assert!(
        matches!(
            e,
            MailboxError::Terminal {
                reason: TerminalReason::Collective,
                ..
            }
        ),
        "{e}"
    );
    let h = j.mb.header().unwrap();
    assert_eq!(h.group, GroupState::Terminal);
    let label = j.label.clone();
    drop(j);
    assert!(gone_within(&label, Duration::from_secs(10)).is_ok());
}

fn wait_accepted(name: &str, limit: Duration) {
    let f = MailboxFile::open(name).unwrap();
    let accepted = RequestState::TaskAccepted.code();
    assert!(
        wait_word(&f, off::REQUEST_STATE, limit, Some(ACCEPTED_LOOK), |v| v
            == accepted),
        "never TASK_ACCEPTED"
    );
}

/// docs/mailbox.md §7.4: a client lost with a request in flight ends the
/// job within the rest of the task + rank 0's tick (100 ms) + ABORT and
/// the launcher's end (about 1 s); the margin covers a loaded machine.
const CLIENT_LOST_BOUND: Duration = Duration::from_secs(5);

#[test]
fn a_shell_client_killed_mid_request_ends_the_job_within_the_bound() {
    let (mut job, _, mb) = ready_shell_job("client-kill");
    let name = job.name.clone();
    drop(mb);
    // The client is `sperli submit`; the test only owns the job.
    let payload = std::env::temp_dir().join(format!("{name}.payload"));
    std::fs::write(&payload, le64(1000)).unwrap();
    let mut client = Command::new(sperli())
        .args([
            "submit",
            "--mailbox",
            &name,
            "--task",
            "sleep",
            "--data-file",
        ])
        .arg(&payload)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_accepted(&name, Duration::from_secs(10));
    client.kill().unwrap();
    let killed = Instant::now();
    let _ = client.wait();
    let _ = std::fs::remove_file(&payload);
    let st = wait_exit(&mut job.run, killed, CLIENT_LOST_BOUND);
    assert!(!st.success(), "a job that lost its client fails: {st}");
    assert!(gone_within(&job.label, Duration::from_secs(2)).is_ok());
    assert!(
        !files::mailbox_path(&name).exists(),
        "the launcher removed the mailbox"
    );
}

#[test]
fn a_client_that_started_the_job_and_is_killed_takes_the_job_with_it() {
    let name = unique("owner-kill");
    let job_name = format!("{name}-4");
    let mut client = Command::new(client())
        .args(["demo", "--tasks", "100000000", "--sperli"])
        .arg(sperli())
        .args(["--server", server(), "--name", &name])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(child_stderr())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let launcher = wait_manifest(&job_name, Duration::from_secs(30)).launcher_pid;
    let f = MailboxFile::open(&job_name).unwrap();
    // Every request changes the request word with a wake (publish,
    // TASK_DONE).
    let limit = Duration::from_secs(60).saturating_sub(t.elapsed());
    assert!(
        wait_word(&f, off::REQUEST_STATE, limit, None, |_| {
            f.header().unwrap().sequence >= 20
        }),
        "the demo does not run"
    );
    client.kill().unwrap();
    let killed = Instant::now();
    let _ = client.wait();
    // The launcher's stdin (held by the client alone) closed: it ends
    // every rank at once (docs/mailbox.md §7.3).
    assert!(
        pid_gone_within(launcher, CLIENT_LOST_BOUND),
        "launcher {launcher} still there {:?} after its client died",
        killed.elapsed()
    );
    let left = gone_within(&job_name, Duration::from_secs(5));
    assert!(left.is_ok(), "processes left: {left:?}");
    assert!(!files::mailbox_path(&job_name).exists());
}

#[test]
fn a_killed_launcher_makes_the_group_terminal_for_a_shell_client() {
    let (mut job, m, mut mb) = ready_shell_job("launcher-kill");
    let name = job.name.clone();
    mb.ping().unwrap();
    kill9(m.launcher_pid);
    let _ = job.run.wait();
    let t = Instant::now();
    let e = mb.ping().unwrap_err();
    assert!(
        matches!(
            e,
            MailboxError::Terminal {
                reason: TerminalReason::LauncherExit,
                ..
            }
        ),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    // The ranks died with their launcher (its death signal and watchdog).
    let left = gone_within(&job.label, Duration::from_secs(5));
    assert!(left.is_ok(), "ranks left: {left:?}");
    // docs/mailbox.md §1.1: the files go however the job ends.
    assert!(
        wait_shm(Duration::from_secs(2), || files_gone(&name)),
        "a killed launcher left its mailbox or manifest"
    );
}

#[test]
fn a_sigkilled_launcher_leaves_no_file_in_dev_shm() {
    let (mut job, m, mb) = ready_shell_job("launcher-kill-files");
    let name = job.name.clone();
    drop(mb);
    kill9(m.launcher_pid);
    let killed = Instant::now();
    let _ = job.run.wait();
    // docs/mailbox.md §1.1: removed however the job ends; the launcher's
    // cleaner sees its pipe end at the launcher's death.
    assert!(
        wait_shm(Duration::from_secs(2), || files_gone(&name)),
        "{:?} after the kill: mailbox {} manifest {}",
        killed.elapsed(),
        files::mailbox_path(&name).exists(),
        files::manifest_path(&name).exists()
    );
    assert!(gone_within(&job.label, Duration::from_secs(5)).is_ok());
    assert!(
        gone_within(
            &files::manifest_path(&name).display().to_string(),
            Duration::from_secs(2)
        )
        .is_ok(),
        "the cleaner ended"
    );
}

#[test]
fn a_request_past_its_timeout_makes_the_group_terminal_and_ends_the_job() {
    let mut j = job("timeout", 4, None);
    j.mb.set_timeout(Duration::from_millis(500));
    let t = Instant::now();
    let e =
        j.mb.submit("sleep", Target::Group, &[&le64(30_000)])
            .unwrap_err();
    assert!(matches!(e, MailboxError::Timeout { .. }), "{e}");
    assert_eq!(e.code().map(|c| c.number()), Some(1644));
    // The client ended the job it started: no rank sleeps on.
    assert!(gone_within(&j.label, Duration::from_secs(2)).is_ok());
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(matches!(
        j.mb.ping(),
        Err(MailboxError::Terminal {
            reason: TerminalReason::Timeout,
            ..
        })
    ));
}
