//! Unit tests of the supervisor's driver of the Decider.
use super::*;
use crate::control::LineError;
use sperli_wire::recovery::NO_ROLLBACK;

fn plan(job: &JobPlan, mode: Mode, replacements: u32) -> RecoveryPlan<'_> {
    RecoveryPlan {
        job,
        mode,
        replacements,
        spares: &[],
    }
}

fn report(job: &JobPlan, rank: u32, suspects: Vec<u32>) -> ChannelLine {
    ChannelLine::Report(Report {
        flag: rank != 2,
        job_id: job.job_id,
        rank,
        incarnation: 1,
        epoch: 1,
        best_commit: 4,
        suspects,
    })
}

fn failure(rank: u32, exit: RankExit) -> Failure {
    Failure {
        rank,
        exit,
        record: None,
    }
}

/// The record of a `Write`, decoded, after checking its signature.
fn written(job: &JobPlan, action: &Action) -> (MembershipRecord, Vec<u32>) {
    let Action::Write { record, to } = action else {
        panic!("{action:?}")
    };
    let r = MembershipRecord::decode(record).unwrap();
    assert!(composite_sig::verify_bytes(
        job.job_key.public_key().as_bytes(),
        &r.signed_bytes(),
        CONTEXT_MEMBER,
        &r.signature
    ));
    // Not with another context: a record is not a join token or a COMMIT.
    assert!(!composite_sig::verify_bytes(
        job.job_key.public_key().as_bytes(),
        &r.signed_bytes(),
        b"SPERLI-JOIN-1",
        &r.signature
    ));
    (r, to.clone())
}

#[test]
fn modes_parse() {
    assert_eq!("inplace".parse(), Ok(RecoverMode::Inplace));
    assert_eq!("shrink".parse(), Ok(RecoverMode::Shrink));
    assert_eq!("restart".parse(), Ok(RecoverMode::Restart));
    assert_eq!(
        "replace".parse::<RecoverMode>(),
        Err(UnknownRecoverMode("replace".into()))
    );
    // In place by default (docs/launcher.md, "Recovery").
    assert_eq!(RecoverMode::default(), RecoverMode::Inplace);
    assert_eq!(RecoverMode::Inplace.protocol_mode(), Some(Mode::Replace));
    assert_eq!(RecoverMode::Shrink.protocol_mode(), Some(Mode::Shrink));
    assert_eq!(RecoverMode::Restart.protocol_mode(), None);
}

#[test]
fn a_killed_rank_and_its_peers_reports_make_one_signed_record() {
    let job = JobPlan::localhost(4).unwrap();
    let mut rec = Recovery::new(plan(&job, Mode::Shrink, 0));
    rec.on_exit(failure(3, RankExit::Signal(9)), 1);
    assert_eq!(rec.step(|_| true), []);
    rec.on_line(0, 1, report(&job, 0, vec![3]));
    rec.on_line(1, 1, report(&job, 1, vec![3]));
    assert_eq!(rec.step(|_| true), []);
    rec.on_line(2, 1, report(&job, 2, vec![3]));
    let acts = rec.step(|_| true);
    assert_eq!(acts.len(), 2, "{acts:?}");
    assert_eq!(
        acts[0],
        Action::Say(
            "sperli: epoch 2: rank 3 lost (killed by signal 9 (SIGKILL)); shrunk to 3 ranks".into()
        )
    );
    let (r, to) = written(&job, &acts[1]);
    assert_eq!(to, [0, 1, 2]);
    assert_eq!(
        (r.epoch, r.mode, r.agreed, r.rollback),
        (2, Mode::Shrink, false, NO_ROLLBACK)
    );
    assert_eq!(r.incarnations, [1, 1, 1, 0]);
    // The failure was the recovery's: nothing is held for a restart, and
    // the removed rank's later lines and exits change nothing.
    assert!(rec.held.is_empty());
    rec.on_line(3, 1, ChannelLine::Refused(LineError::TooLong));
    rec.on_exit(failure(3, RankExit::Code(1)), 1);
    assert_eq!(rec.step(|_| true), []);
    // A survivor's failure is one of epoch 2.
    rec.on_exit(failure(1, RankExit::Code(3)), 1);
    rec.on_line(0, 1, {
        let ChannelLine::Report(mut r) = report(&job, 0, vec![1]) else {
            unreachable!()
        };
        r.epoch = 2;
        ChannelLine::Report(r)
    });
    rec.on_line(2, 1, {
        let ChannelLine::Report(mut r) = report(&job, 2, vec![1]) else {
            unreachable!()
        };
        r.epoch = 2;
        ChannelLine::Report(r)
    });
    let acts = rec.step(|_| true);
    assert_eq!(
        acts[0],
        Action::Say("sperli: epoch 3: rank 1 lost (exit code 3); shrunk to 2 ranks".into())
    );
    let (r, to) = written(&job, &acts[1]);
    assert_eq!((r.epoch, to), (3, vec![0, 2]));
}

/// Protocol §18.6, "This implementation": the record is signed at the
/// exit, while the reports come in, and written once they are in.
#[test]
fn the_record_signed_while_the_reports_came_in_is_the_one_written() {
    let job = JobPlan::localhost(4).unwrap();
    let mut rec = Recovery::new(plan(&job, Mode::Shrink, 0));
    rec.on_exit(failure(3, RankExit::Signal(9)), 1);
    let early = rec.presigned.clone().expect("signed at the exit");
    assert_eq!((early.epoch, early.agreed), (2, true));
    let flagged = |rank| {
        let ChannelLine::Report(mut r) = report(&job, rank, vec![3]) else {
            unreachable!()
        };
        r.flag = true;
        ChannelLine::Report(r)
    };
    for rank in 0..3 {
        rec.on_line(rank, 1, flagged(rank));
    }
    let acts = rec.step(|_| true);
    let (r, to) = written(&job, &acts[1]);
    assert_eq!(to, [0, 1, 2]);
    assert_eq!(r.signature, early.signature, "not signed again");
    assert_eq!(r.signed_bytes(), early.signed_bytes());
    assert!(rec.presigned.is_none());
}

#[test]
fn a_suspected_rank_is_fenced_and_the_record_waits_for_its_end() {
    let job = JobPlan::localhost(3).unwrap();
    let mut rec = Recovery::new(plan(&job, Mode::Shrink, 0));
    rec.on_line(0, 1, report(&job, 0, vec![1]));
    rec.on_line(2, 1, report(&job, 2, vec![1]));
    let acts = rec.step(|_| false);
    assert_eq!(acts, [Action::Kill(1)]);
    assert!(rec.fenced(1, 1));
    // Still running: no record yet, and no second kill.
    assert_eq!(rec.step(|_| false), []);
    let acts = rec.step(|r| r == 1);
    assert_eq!(
        acts[0],
        Action::Say(
            "sperli: epoch 2: rank 1 lost (lost by rank 0, fenced); shrunk to 2 ranks".into()
        )
    );
    assert_eq!(written(&job, &acts[1]).1, [0, 2]);
}

#[test]
fn a_refused_line_or_a_report_for_another_rank_is_its_ranks_failure() {
    let job = JobPlan::localhost(3).unwrap();
    let mut rec = Recovery::new(plan(&job, Mode::Shrink, 0));
    rec.on_line(1, 1, ChannelLine::Refused(LineError::TooLong));
    // Rank 2 writes a report in rank 0's name.
    rec.on_line(2, 1, report(&job, 0, vec![]));
    rec.on_line(0, 1, report(&job, 0, vec![1, 2]));
    let acts = rec.step(|_| true);
    assert!(
        matches!(&acts[0], Action::Say(s) if s.starts_with("sperli: epoch 2: ranks 1, 2 lost (rank 1: its control channel sent a line that is not a REPORT of this job; rank 2: its control channel")),
        "{acts:?}"
    );
    assert_eq!(written(&job, &acts[1]).1, [0]);
    // A suspect outside the job is refused too.
    let mut rec = Recovery::new(plan(&job, Mode::Shrink, 0));
    rec.on_line(1, 1, report(&job, 1, vec![7]));
    rec.on_line(0, 1, report(&job, 0, vec![]));
    rec.on_line(2, 1, report(&job, 2, vec![]));
    let acts = rec.step(|_| true);
    assert_eq!(written(&job, &acts[1]).1, [0, 2]);
}

#[test]
fn no_survivor_restarts_in_full_with_the_held_failures() {
    let job = JobPlan::localhost(2).unwrap();
    let mut rec = Recovery::new(plan(&job, Mode::Shrink, 0));
    rec.on_exit(failure(1, RankExit::Code(3)), 1);
    assert_eq!(rec.step(|_| true), []);
    rec.on_exit(failure(0, RankExit::Code(1)), 1);
    let acts = rec.step(|_| true);
    match acts.as_slice() {
        [Action::FullRestart(held)] => {
            let ranks: Vec<u32> = held.iter().map(|(f, _)| f.rank).collect();
            assert_eq!(ranks, [1, 0]);
        }
        other => panic!("{other:?}"),
    }
    assert!(!rec.active());
    assert_eq!(rec.step(|_| true), []);
}

#[test]
fn replace_mode_restarts_in_full_without_a_replacement_left() {
    let job = JobPlan::localhost(2).unwrap();
    // Without a replacement left, the Decider restarts in full itself.
    let mut rec = Recovery::new(plan(&job, Mode::Replace, 0));
    rec.on_exit(failure(1, RankExit::Signal(9)), 1);
    rec.on_line(0, 1, report(&job, 0, vec![1]));
    assert!(matches!(
        rec.step(|_| true).as_slice(),
        [Action::FullRestart(h)] if h.len() == 1
    ));
}

#[test]
fn replace_mode_starts_a_replacement_named_by_the_signed_record() {
    let job = JobPlan::localhost(3).unwrap();
    let mut rec = Recovery::new(plan(&job, Mode::Replace, 2));
    rec.on_exit(failure(1, RankExit::Signal(9)), 1);
    rec.on_line(0, 1, report(&job, 0, vec![1]));
    rec.on_line(2, 1, report(&job, 2, vec![1]));
    let acts = rec.step(|_| true);
    assert_eq!(acts.len(), 3, "{acts:?}");
    let Action::Start {
        replacement,
        record,
    } = &acts[1]
    else {
        panic!("{acts:?}")
    };
    let (r, to) = written(&job, &acts[2]);
    assert_eq!(&r.encode(), record);
    assert_eq!(to, [0, 2]);
    assert_eq!((r.mode, r.epoch, r.rollback), (Mode::Replace, 2, 4));
    assert_eq!(r.incarnations, [1, 2, 1]);
    assert_eq!((replacement.rank, replacement.incarnation), (1, 2));
    assert_eq!(replacement.endpoint.host, job.hosts[1].host);
    assert_eq!(replacement.description.incarnation, 2);
    assert_eq!(replacement.description.hosts[1], replacement.endpoint);
    assert_eq!(r.changes[0].cert_sha256, replacement.cert_sha256);
    assert_eq!(
        r.changes[0].endpoint,
        Some((replacement.endpoint.port, replacement.endpoint.host.clone()))
    );
    assert_eq!(
        acts[0],
        Action::Say(format!(
            "sperli: epoch 2: rank 1 lost (killed by signal 9 (SIGKILL)); replacement of rank 1 runs on {}:{} (incarnation 2), rolling back to checkpoint epoch 4",
            replacement.endpoint.host, replacement.endpoint.port
        ))
    );
    // The old process's end changes nothing; the replacement's is a
    // failure of epoch 2, and its own replacement gets incarnation 3.
    rec.on_exit(failure(1, RankExit::Code(1)), 1);
    assert_eq!(rec.step(|_| true), []);
    rec.on_exit(failure(1, RankExit::Code(1)), 2);
    for s in [0, 2] {
        let ChannelLine::Report(mut r) = report(&job, s, vec![1]) else {
            unreachable!()
        };
        r.epoch = 2;
        rec.on_line(s, 1, ChannelLine::Report(r));
    }
    let acts = rec.step(|_| true);
    let (r, _) = written(&job, &acts[2]);
    assert_eq!((r.epoch, r.incarnations), (3, vec![1, 3, 1]));
}

#[test]
fn a_replacement_takes_the_first_spare_host_then_its_own() {
    let job = JobPlan::localhost(3).unwrap();
    let spares = ["127.0.0.9".to_string()];
    let mut rec = Recovery::new(RecoveryPlan {
        spares: &spares,
        ..plan(&job, Mode::Replace, 2)
    });
    for (epoch, victim, host) in [(1, 1, "127.0.0.9"), (2, 2, job.hosts[2].host.as_str())] {
        rec.on_exit(failure(victim, RankExit::Code(1)), 1);
        for s in (0..3).filter(|s| *s != victim) {
            let ChannelLine::Report(mut r) = report(&job, s, vec![victim]) else {
                unreachable!()
            };
            r.epoch = epoch;
            r.incarnation = rec.incarnations[s as usize];
            rec.on_line(s, r.incarnation, ChannelLine::Report(r));
        }
        let acts = rec.step(|_| true);
        let Action::Start { replacement, .. } = &acts[1] else {
            panic!("{acts:?}")
        };
        assert_eq!(replacement.endpoint.host, host);
        // The host list of the description has every changed endpoint.
        assert_eq!(replacement.description.hosts, rec.hosts);
    }
    assert_eq!(rec.hosts[1].host, "127.0.0.9");
}

#[test]
fn a_replacement_that_cannot_start_restarts_in_full_for_the_failure_it_answered() {
    let job = JobPlan::localhost(2).unwrap();
    let mut rec = Recovery::new(plan(&job, Mode::Replace, 1));
    rec.on_exit(failure(1, RankExit::Signal(9)), 1);
    rec.on_line(0, 1, report(&job, 0, vec![1]));
    assert!(matches!(rec.step(|_| true)[1], Action::Start { .. }));
    let held = rec.replacement_failed();
    let ranks: Vec<(u32, RankExit)> = held.iter().map(|(f, _)| (f.rank, f.exit)).collect();
    assert_eq!(ranks, [(1, RankExit::Signal(9))]);
    assert!(!rec.active());
    assert_eq!(rec.step(|_| true), []);
}
