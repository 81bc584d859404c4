//! What a warm 4-rank job serves: targets, errors, payload sizes, the
//! shell client, and the demo client.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use sperli_mailbox::files;
use sperli_mailbox::layout::REGION_LEN;
use sperli_mailbox::records::RequestError;
use sperli_mailbox::{
    MailboxError, Target, INVALID_REQUEST, PANIC, REPLY_TOO_LARGE, UNKNOWN_HANDLER,
};

use crate::common::*;

fn pid_of(r: &sperli_mailbox::Replies, rank: u32) -> u32 {
    u32::from_le_bytes(r.ok(rank).expect("a pid").try_into().expect("4 bytes"))
}

#[test]
fn group_rank_and_per_rank_requests_reach_exactly_their_targets() {
    let mut j = job("targets", 4, None);
    let mb = &mut j.mb;
    // GROUP: every rank runs it; four different processes answer.
    let all = mb.submit("pid", Target::Group, &[b""]).unwrap();
    let ranks: Vec<u32> = all.replies.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [0, 1, 2, 3]);
    let pids: BTreeSet<u32> = (0..4).map(|r| pid_of(&all, r)).collect();
    assert_eq!(pids.len(), 4);
    // RANK: only the selected rank runs it.
    for r in 0..4 {
        let one = mb.submit("pid", Target::Rank(r), &[b""]).unwrap();
        assert_eq!(one.replies.len(), 1);
        assert_eq!(pid_of(&one, r), pid_of(&all, r));
        let c = mb.control("hello", Target::Rank(r), &[b""]).unwrap();
        assert_eq!(c.ok(r), Some(format!("rank {r} of 4").as_bytes()));
    }
    // PER_RANK: rank i gets payload i.
    let xs = [5u64, 0, u64::MAX, 1 << 40];
    let p: Vec<[u8; 8]> = xs.iter().map(|&x| le64(x)).collect();
    let refs: Vec<&[u8]> = p.iter().map(|x| &x[..]).collect();
    let r = mb.submit("poly", Target::PerRank, &refs).unwrap();
    for (i, &x) in xs.iter().enumerate() {
        let want = x
            .wrapping_mul(x)
            .wrapping_add(x.wrapping_mul(3))
            .wrapping_add(i as u64);
        assert_eq!(r.ok(i as u32), Some(&le64(want)[..]), "rank {i}");
    }
    // The sum handler: each rank adds its block, an allreduce adds them.
    let v: Vec<u64> = (1..=1001).collect();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let s = mb.submit("sum", Target::Group, &[&bytes]).unwrap();
    for rank in 0..4 {
        assert_eq!(s.ok(rank), Some(&le64(501_501)[..]));
    }
    // Sequence ids go up by one per request.
    let a = mb.ping().unwrap().sequence;
    let b = mb.ping().unwrap().sequence;
    assert_eq!(b, a + 1);
    j.mb.shutdown().unwrap();
    let left = gone_within(&j.label, Duration::from_secs(10));
    assert!(left.is_ok(), "{left:?}");
}

#[test]
fn task_errors_come_back_and_the_job_goes_on_serving() {
    let mut j = job("errors", 4, None);
    let mb = &mut j.mb;
    // Ranks 1 and 3 fail, 0 and 2 answer.
    let fail: Vec<u8> = [1u32, 3].iter().flat_map(|r| r.to_le_bytes()).collect();
    let e = mb.submit("fail", Target::Group, &[&fail]).unwrap_err();
    assert_eq!(e.code().map(|c| c.number()), Some(1642), "{e}");
    let MailboxError::TaskFailed(r) = e else {
        panic!("{e}")
    };
    assert_eq!(r.ok(0), Some(&b"ok"[..]));
    assert_eq!(r.ok(2), Some(&b"ok"[..]));
    let errs: Vec<_> = r.errors().collect();
    assert_eq!(errs.len(), 2);
    for (err, rank) in errs.iter().zip([1, 3]) {
        assert_eq!(err.rank, rank);
        assert_eq!(err.error_type, "ValueError");
        assert_eq!(err.message, format!("rank {rank} was told to fail"));
    }
    // A directed failure involves only its rank.
    let MailboxError::TaskFailed(r) = mb
        .submit("fail", Target::Rank(3), &[&3u32.to_le_bytes()])
        .unwrap_err()
    else {
        panic!()
    };
    assert_eq!(r.replies.len(), 1);
    // Unknown handler, panic, bad payload: ordinary errors.
    for (h, ty) in [("no-such", UNKNOWN_HANDLER), ("panic", PANIC)] {
        match mb.submit(h, Target::Group, &[b""]) {
            Err(MailboxError::TaskFailed(r)) => {
                assert!(r.errors().all(|e| e.error_type == ty), "{h}: {r:?}");
                assert_eq!(r.errors().count(), 4);
            }
            other => panic!("{h}: {other:?}"),
        }
    }
    // A reply that does not fit the reply region fails the task, not the group.
    let big = le64(REGION_LEN as u64);
    match mb.submit("big", Target::Rank(1), &[&big]) {
        Err(MailboxError::TaskFailed(r)) => {
            assert_eq!(r.errors().next().unwrap().error_type, REPLY_TOO_LARGE)
        }
        other => panic!("{other:?}"),
    }
    // Two ranks whose replies fit alone but not together.
    let half = le64(REGION_LEN as u64 / 2);
    match mb.submit("big", Target::Group, &[&half]) {
        Err(MailboxError::TaskFailed(r)) => {
            assert_eq!(r.errors().count(), 4);
            assert!(r.errors().all(|e| e.error_type == REPLY_TOO_LARGE));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(mb.ping().unwrap().replies.len(), 4);
    j.mb.shutdown().unwrap();
}

#[test]
fn payloads_of_0_bytes_16_mib_and_16_mib_plus_1() {
    let mut j = job("sizes", 4, None);
    let mb = &mut j.mb;
    let digest = |p: &[u8]| {
        let mut d = (p.len() as u64).to_le_bytes().to_vec();
        d.extend_from_slice(&Sha256::digest(p));
        d
    };
    let empty: &[u8] = &[];
    let full: Vec<u8> = (0..REGION_LEN).map(|i| (i % 251) as u8).collect();
    for (p, target) in [
        (empty, Target::Group),
        (empty, Target::Rank(2)),
        (&full[..], Target::Group),
        (&full[..], Target::Rank(2)),
    ] {
        let r = mb.submit("digest", target, &[p]).unwrap();
        for rec in &r.replies {
            assert_eq!(
                rec.outcome.as_deref(),
                Ok(&digest(p)[..]),
                "{} bytes to {target:?}, rank {}",
                p.len(),
                rec.rank
            );
        }
    }
    // PER_RANK: the table counts; empty payloads are payloads.
    let quarter = vec![7u8; (REGION_LEN - 16) / 4];
    let r = mb
        .submit(
            "digest",
            Target::PerRank,
            &[&quarter, empty, &quarter, empty],
        )
        .unwrap();
    assert_eq!(r.ok(0), Some(&digest(&quarter)[..]));
    assert_eq!(r.ok(1), Some(&digest(empty)[..]));
    // One byte more is refused before anything is published (H1641).
    let over = vec![0u8; REGION_LEN + 1];
    let quarter_plus_1 = vec![7u8; quarter.len() + 1];
    let before = mb.header().unwrap().sequence;
    for (target, payloads) in [
        (Target::Group, vec![&over[..]]),
        (Target::Rank(1), vec![&over[..]]),
        (
            Target::PerRank,
            vec![
                &quarter[..],
                &quarter[..],
                &quarter[..],
                &quarter_plus_1[..],
            ],
        ),
    ] {
        let e = mb.submit("digest", target, &payloads).unwrap_err();
        assert!(
            matches!(e, MailboxError::Request(RequestError::TooLarge { .. })),
            "{target:?}: {e}"
        );
        assert_eq!(e.code().map(|c| c.number()), Some(1641));
    }
    assert_eq!(
        mb.header().unwrap().sequence,
        before,
        "nothing was published"
    );
    // Wrong payload counts and a rank outside the job: refused too.
    assert!(matches!(
        mb.submit("digest", Target::PerRank, &[empty]),
        Err(MailboxError::Request(RequestError::PayloadCount { .. }))
    ));
    assert!(matches!(
        mb.submit("digest", Target::Rank(4), &[empty]),
        Err(MailboxError::Request(RequestError::TargetRank { .. }))
    ));
    assert_eq!(mb.ping().unwrap().replies.len(), 4);
    j.mb.shutdown().unwrap();
}

/// A request rank 0 finds malformed (written behind the client's back)
/// is refused with an `invalid-request` record; the job goes on.
#[test]
fn rank_0_refuses_a_malformed_request_without_running_it() {
    use sperli_mailbox::files::MailboxFile;
    use sperli_mailbox::lane::{self, ClientLook, Publish};
    use sperli_mailbox::layout::{off, Opcode, TargetKind};
    let mut j = job("malformed", 4, None);
    j.mb.ping().unwrap();
    let f = MailboxFile::open(j.mb.name()).unwrap();
    let seq = f.header().unwrap().sequence + 1;
    lane::client_publish(
        &f.map,
        &Publish {
            sequence: seq,
            opcode: Opcode::Task,
            target: TargetKind::PerRank,
            target_rank: 0,
            handler: 0,
            payload_count: 3, // a job of 4 ranks
            request_len: 12,
        },
    )
    .unwrap();
    f.map.wake(off::REQUEST_STATE);
    // Rank 0 wakes the request word at TASK_FAILED.
    let failed = sperli_mailbox::RequestState::TaskFailed.code();
    assert!(
        wait_word(&f, off::REQUEST_STATE, Duration::from_secs(10), None, |v| v
            == failed),
        "no answer"
    );
    assert_eq!(
        lane::client_look(&f.map),
        ClientLook::Answered { failed: true }
    );
    let h = f.header().unwrap();
    assert_eq!(h.reply_count, 1);
    let mut b = vec![0u8; h.reply_len as usize];
    f.map.read(sperli_mailbox::layout::REPLY_REGION, &mut b);
    let r = sperli_mailbox::RankReply::decode_all(&b, 1).unwrap();
    let e = r[0].outcome.as_ref().unwrap_err();
    assert_eq!(e.error_type, INVALID_REQUEST);
    assert!(
        e.message.contains("PER_RANK needs 4 payloads, got 3"),
        "{e}"
    );
    lane::client_ack(&f.map).unwrap();
    assert_eq!(j.mb.ping().unwrap().sequence, seq + 1);
    j.mb.shutdown().unwrap();
}

fn submit(args: &[&str]) -> std::process::Output {
    Command::new(sperli())
        .arg("submit")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run sperli submit")
}

#[test]
fn sperli_run_mailbox_and_sperli_submit_from_the_shell() {
    let (job, m) = shell_job("shell");
    let (mut run, name, label) = (job.run, job.name, job.label);
    assert_eq!((m.version, m.layout_size, m.world_size), (1, 33_554_688, 4));
    assert_eq!(m.launcher_pid, run.id());
    for p in [files::mailbox_path(&name), files::manifest_path(&name)] {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().mode() & 0o777,
            0o600,
            "{}",
            p.display()
        );
    }
    // Only rank 0 has the name in its environment, as SPERLI_MAILBOX.
    let out = submit(&["--mailbox", &name, "--ping"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 4);
    let ranks: Vec<u32> = processes_with(&label)
        .into_iter()
        .filter(|&p| p != run.id())
        .collect();
    assert_eq!(ranks.len(), 4, "{ranks:?}");
    let with_env: Vec<u32> = ranks
        .iter()
        .copied()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .map(|e| {
                    e.split(|&b| b == 0)
                        .any(|kv| kv == format!("SPERLI_MAILBOX={name}").as_bytes())
                })
                .unwrap_or(false)
        })
        .collect();
    assert_eq!(with_env.len(), 1, "exactly one rank has SPERLI_MAILBOX");
    let out = submit(&[
        "--mailbox",
        &name,
        "--task",
        "echo",
        "--rank",
        "2",
        "--data",
        "hi there",
    ]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "rank 2: ok (8 bytes): hi there\n"
    );
    let out = submit(&[
        "--mailbox",
        &name,
        "--task",
        "echo",
        "--raw",
        "--data",
        "ab",
    ]);
    assert_eq!(out.stdout, b"abababab");
    let out = submit(&[
        "--mailbox",
        &name,
        "--task",
        "fail",
        "--data-file",
        "/dev/null",
        "--rank",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(0), "rank 1 got no rank list: ok");
    let out = submit(&["--mailbox", &name, "--task", "sum", "--data", "abc"]);
    assert_eq!(out.status.code(), Some(1), "a task error is exit 1");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rank 0: ValueError: 3 bytes are not a whole number of u64"),
        "{err}"
    );
    assert!(err.contains("H1642"), "{err}");
    let out = submit(&[
        "--mailbox",
        &name,
        "--task",
        "echo",
        "--per-rank",
        "--data",
        "a",
    ]);
    assert_eq!(out.status.code(), Some(3), "refused request");
    assert!(String::from_utf8_lossy(&out.stderr).contains("H1641"));
    let out = submit(&["--mailbox", &unique("none"), "--ping"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("H1640 no mailbox"));
    let out = submit(&["--mailbox", &name]);
    assert_eq!(out.status.code(), Some(2), "no operation is a usage error");
    // SHUTDOWN: the launcher exits 0 and removes the mailbox and manifest.
    let out = submit(&["--mailbox", &name, "--shutdown"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = wait_exit(&mut run, Instant::now(), Duration::from_secs(20));
    assert!(st.success(), "{st}");
    assert!(!files::mailbox_path(&name).exists());
    assert!(!files::manifest_path(&name).exists());
}

#[test]
fn sperli_run_mailbox_refuses_restarts_and_taken_names() {
    let name = unique("refuse");
    let out = Command::new(sperli())
        .args([
            "run",
            "-n",
            "2",
            "--restart-max",
            "1",
            "--mailbox",
            &name,
            "--",
            server(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mailbox does not restart"));
    let out = Command::new(sperli())
        .args(["run", "-n", "2", "--mailbox", "bad/name", "--", server()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("H1640"));
    // A live job's name is taken.
    let j = job("taken", 2, None);
    let out = Command::new(sperli())
        .args(["run", "-n", "2", "--mailbox", j.mb.name(), "--", server()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists already"));
}

#[test]
fn the_demo_client_checks_every_answer_of_a_warm_job() {
    let out = Command::new(client())
        .args(["demo", "--tasks", "200", "--sperli"])
        .arg(sperli())
        .args(["--server", server(), "--name", &unique("demo")])
        .stdin(Stdio::null())
        .output()
        .expect("run the demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("200 tasks checked"), "{stdout}");
    assert!(stdout.contains("every answer correct"), "{stdout}");
}

#[test]
fn the_example_servers_help_lists_every_handler_and_its_formats() {
    let out = Command::new(server()).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for h in [
        "TASK sum",
        "TASK poly",
        "TASK echo",
        "TASK digest",
        "TASK fail",
        "TASK sleep",
        "TASK pid",
        "TASK big",
        "TASK panic",
        "CONTROL hello",
    ] {
        assert!(help.contains(h), "{h} missing from:\n{help}");
    }
    assert!(
        help.contains("payload:") && help.contains("reply:"),
        "{help}"
    );
}
