//! The lane on live 4-rank jobs: copy before accept, sequence ids, TERMINAL
//! is absorbing; and a bare futex wake between two processes.

use std::process::Command;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use sperli_mailbox::files::MailboxFile;
use sperli_mailbox::lane::{self, Publish};
use sperli_mailbox::layout::{off, Opcode, TargetKind};
use sperli_mailbox::{GroupState, MailboxError, Target, TerminalReason};

use crate::common::*;

fn digest_reply(payload: &[u8]) -> Vec<u8> {
    let mut want = (payload.len() as u64).to_le_bytes().to_vec();
    want.extend_from_slice(&Sha256::digest(payload));
    want
}

#[test]
fn copy_before_accept_the_client_overwrites_its_region_at_once() {
    let mut j = job("copy", 4, None);
    let payload: Vec<u8> = (0..1 << 20).map(|i| (i * 7 + 3) as u8).collect();
    let want = digest_reply(&payload);
    for target in [Target::Group, Target::Rank(3)] {
        // TASK_ACCEPTED lasts only while the ranks compute: a client that
        // is not scheduled in that time sees TASK_DONE next and its hook
        // does not run. Every answer must be right; at least one of the
        // tries must have overwritten the region while the task ran.
        let mut hooked_once = false;
        for _ in 0..50 {
            let mut hooked = false;
            let r =
                j.mb.submit_with_accept_hook("digest", target, &[&payload], &mut |mb| {
                    // TASK_ACCEPTED: the request region is the client's again.
                    hooked = mb.overwrite_request_region(payload.len(), 0xff);
                })
                .expect("digest");
            for rec in &r.replies {
                assert_eq!(rec.outcome.as_deref(), Ok(&want[..]), "rank {}", rec.rank);
            }
            if hooked {
                hooked_once = true;
                break;
            }
        }
        assert!(
            hooked_once,
            "the hook ran after TASK_ACCEPTED in none of 50 tries"
        );
    }
    j.mb.shutdown().unwrap();
}

/// Publishes a request with sequence id `seq` behind the client's back.
fn publish_raw(name: &str, seq: u64) {
    let f = MailboxFile::open(name).unwrap();
    lane::client_publish(
        &f.map,
        &Publish {
            sequence: seq,
            opcode: Opcode::Ping,
            target: TargetKind::Group,
            target_rank: 0,
            handler: 0,
            payload_count: 0,
            request_len: 0,
        },
    )
    .unwrap();
    f.map.wake(off::REQUEST_STATE);
}

fn wait_terminal(name: &str, limit: Duration) -> (GroupState, Option<TerminalReason>) {
    let f = MailboxFile::open(name).unwrap();
    let terminal = GroupState::Terminal.code();
    // Rank 0 wakes the group word at TERMINAL.
    wait_word(&f, off::GROUP_STATE, limit, None, |v| v == terminal);
    let h = f.header().unwrap();
    (h.group, h.terminal)
}

#[test]
fn a_duplicate_or_decreasing_sequence_id_makes_the_group_terminal() {
    for (case, back) in [("duplicate", 0u64), ("decreasing", 1)] {
        let mut j = job(case, 4, None);
        for _ in 0..3 {
            j.mb.ping().unwrap();
        }
        let name = j.mb.name().to_string();
        let last = j.mb.header().unwrap().sequence;
        assert_eq!(last, 3);
        publish_raw(&name, last - back);
        let (g, reason) = wait_terminal(&name, Duration::from_secs(10));
        assert_eq!(g, GroupState::Terminal, "{case}");
        assert_eq!(reason, Some(TerminalReason::Sequence), "{case}");
        let e = j.mb.ping().unwrap_err();
        assert!(
            matches!(
                e,
                MailboxError::Terminal {
                    reason: TerminalReason::Sequence,
                    ..
                }
            ),
            "{case}: {e}"
        );
        // Rank 0 ended the job with ABORT: every rank is gone.
        let left = gone_within(&j.label, Duration::from_secs(10));
        assert!(left.is_ok(), "{case}: processes left {left:?}");
    }
}

#[test]
fn terminal_is_absorbing() {
    let mut j = job("absorb", 4, None);
    j.mb.ping().unwrap();
    let name = j.mb.name().to_string();
    j.mb.make_terminal(TerminalReason::Timeout);
    let f = MailboxFile::open(&name).unwrap();
    // Neither side can leave TERMINAL: READY, CLOSED and another reason
    // are refused by the state words themselves.
    assert!(lane::publish_ready(&f.map).is_err());
    assert!(lane::set_terminal(&f.map, TerminalReason::Collective));
    let h = f.header().unwrap();
    assert_eq!(h.group, GroupState::Terminal);
    assert_eq!(
        h.terminal,
        Some(TerminalReason::Timeout),
        "the first reason stays"
    );
    // Rank 0 sees it at its next timed wake and ends the job.
    let left = gone_within(&j.label, Duration::from_secs(10));
    assert!(left.is_ok(), "processes left {left:?}");
    for r in [
        j.mb.ping().map(drop),
        j.mb.submit("echo", Target::Group, &[b"x"]).map(drop),
    ] {
        let e = r.unwrap_err();
        assert_eq!(e.code().map(|c| c.number()), Some(1643), "{e}");
    }
    assert_eq!(f.header().unwrap().group, GroupState::Terminal);
    // A new client is refused too (the launcher may have removed the
    // mailbox of the ended job already).
    let e = sperli_mailbox::Mailbox::attach(&name).unwrap_err();
    assert!(
        matches!(
            e,
            MailboxError::Terminal { .. } | MailboxError::NotFound { .. }
        ),
        "{e}"
    );
}

#[test]
fn a_two_process_futex_wake() {
    let name = unique("futex");
    let rounds = 200;
    let t = Instant::now();
    let rtts = sperli_mailbox::futex_bench::measure(&name, rounds, || {
        Command::new(client()).args(["futex-peer", &name]).spawn()
    })
    .expect("ping-pong");
    assert_eq!(rtts.len(), rounds as usize);
    // Each round is a wake, not the 100 ms timeout of the wait.
    let mut v: Vec<Duration> = rtts.clone();
    v.sort();
    assert!(
        v[v.len() / 2] < Duration::from_millis(20),
        "median round trip {:?}",
        v[v.len() / 2]
    );
    assert!(t.elapsed() < Duration::from_secs(20));
}

/// docs/mailbox.md §2.3: rank 0 re-checks the header's fixed fields at
/// every look; a reserved byte written while it serves makes the group
/// TERMINAL (reason 7) with a `layout` record in the reply region.
#[test]
fn a_reserved_byte_written_while_serving_makes_the_group_terminal_with_a_record() {
    let mut j = job("reserved-live", 4, None);
    j.mb.ping().unwrap();
    let name = j.mb.name().to_string();
    let f = MailboxFile::open(&name).unwrap();
    f.map.write(200, &[0x01]);
    let terminal = GroupState::Terminal.code();
    // Rank 0 wakes the group word at TERMINAL; its next look comes within
    // its tick (RANK0_TICK) even without a request.
    assert!(
        wait_word(&f, off::GROUP_STATE, Duration::from_secs(10), None, |v| v
            == terminal),
        "still serving"
    );
    assert_eq!(lane::terminal_reason(&f.map), TerminalReason::Protocol);
    assert_eq!(f.map.load32(off::REPLY_COUNT), 1);
    let mut b = vec![0u8; f.map.load32(off::REPLY_LEN) as usize];
    f.map.read(sperli_mailbox::layout::REPLY_REGION, &mut b);
    let r = sperli_mailbox::RankReply::decode_all(&b, 1).unwrap();
    let e = r[0].outcome.as_ref().unwrap_err();
    assert_eq!(e.rank, 0);
    assert_eq!(e.error_type, sperli_mailbox::LAYOUT);
    assert!(e.message.contains("reserved byte 200 is 0x01"), "{e}");
    let e = j.mb.ping().unwrap_err();
    assert_eq!(e.code().map(|c| c.number()), Some(1643), "{e}");
    let left = gone_within(&j.label, Duration::from_secs(10));
    assert!(left.is_ok(), "processes left {left:?}");
}
