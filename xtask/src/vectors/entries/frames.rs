//! Frame entries: one accepted frame of every type, then the negative
//! cases of the header check (protocol §6.2) and of each payload (§7).

use super::*;

pub(super) fn frames() -> Vec<Entry> {
    let mut v = Vec::new();
    let tok = token_bytes(0, "127.0.0.1");
    let token = JoinToken::decode(&tok).expect("token");
    v.push(positive(
        "frame-hello",
        1,
        0,
        hdr(FrameType::Hello, 0, 1),
        Payload::Hello(Hello {
            features: 1,
            token: token.clone(),
        }),
    ));
    v.push(positive(
        "frame-data",
        1,
        0,
        hdr(FrameType::Data, 0, 1).with_tag(42),
        Payload::Data(Data(b"hello, rank 1")),
    ));
    v.push(positive(
        "frame-data-empty",
        1,
        0,
        hdr(FrameType::Data, 0, 1).with_tag(2147483647),
        Payload::Data(Data(b"")),
    ));
    let two = [1.5f64.to_le_bytes(), (-0.0f64).to_le_bytes()].concat();
    v.push(positive(
        "frame-collective-allreduce",
        0,
        1,
        hdr(FrameType::Collective, 1, 0),
        Payload::Collective(Collective {
            header: CollectiveHeader {
                operation: Operation::Allreduce,
                element_type: ElementType::F64.code(),
                reduction: Reduction::Sum.code(),
                phase: Phase::ToRoot,
                root: 0,
                sequence: 3,
            },
            data: &two,
        }),
    ));
    v.push(positive(
        "frame-collective-barrier",
        1,
        0,
        hdr(FrameType::Collective, 0, 1),
        Payload::Collective(Collective {
            header: CollectiveHeader {
                operation: Operation::Barrier,
                element_type: 0,
                reduction: 0,
                phase: Phase::FromRoot,
                root: 0,
                sequence: 1,
            },
            data: &[],
        }),
    ));
    v.push(positive(
        "frame-heartbeat",
        1,
        0,
        hdr(FrameType::Heartbeat, 0, 1),
        Payload::Heartbeat(Heartbeat { counter: 1 }),
    ));
    v.push(positive(
        "frame-abort",
        1,
        0,
        hdr(FrameType::Abort, 0, 1),
        Payload::Abort(Abort {
            reason: AbortReason::CollectiveMismatch,
            code: 1617,
            message: "bcast sequence 4, expected 3".as_bytes(),
        }),
    ));
    v.push(positive(
        "frame-ckpt-begin",
        1,
        0,
        hdr(FrameType::CkptBegin, 0, 1).with_epoch(EPOCH),
        Payload::CkptBegin(CkptBegin { size: SIZE }),
    ));
    let file0 = rank_file(0);
    v.push(positive(
        "frame-ckpt-data-push",
        1,
        0,
        hdr(FrameType::CkptData, 0, 1).with_epoch(EPOCH),
        Payload::CkptData(CkptData {
            kind: CkptDataKind::Push,
            owner: 0,
            offset: 0,
            total: file0.len() as u64,
            chunk: &file0,
        }),
    ));
    v.push(positive(
        "frame-ckpt-data-request",
        1,
        0,
        hdr(FrameType::CkptData, 0, 1).with_epoch(EPOCH),
        Payload::CkptData(CkptData::request(0)),
    ));
    v.push(positive(
        "frame-ckpt-ack",
        0,
        1,
        hdr(FrameType::CkptAck, 1, 0).with_epoch(EPOCH),
        Payload::CkptAck(CkptAck::for_file(&rank_file(1))),
    ));
    let commit = commit_bytes(JOB, EPOCH, SIZE);
    let c = decode_file(&commit).expect("commit");
    v.push(positive(
        "frame-ckpt-commit",
        1,
        0,
        hdr(FrameType::CkptCommit, 0, 1).with_epoch(EPOCH),
        Payload::CkptCommit(c.clone()),
    ));
    v.push(positive(
        "frame-resume-offer",
        0,
        1,
        hdr(FrameType::Resume, 1, 0).with_epoch(EPOCH),
        Payload::Resume(Resume {
            status: ResumeStatus::Offer,
            commit: Some(c.clone()),
        }),
    ));
    v.push(positive(
        "frame-resume-offer-none",
        0,
        1,
        hdr(FrameType::Resume, 1, 0),
        Payload::Resume(Resume {
            status: ResumeStatus::Offer,
            commit: None,
        }),
    ));
    v.push(positive(
        "frame-resume-loaded-buddy",
        0,
        2,
        hdr(FrameType::Resume, 2, 0).with_epoch(EPOCH),
        Payload::Resume(Resume {
            status: ResumeStatus::LoadedBuddy,
            commit: None,
        }),
    ));
    v.push(positive(
        "frame-bye",
        1,
        0,
        hdr(FrameType::Bye, 0, 1),
        Payload::Bye(Bye),
    ));

    // Older incarnation: discarded, whatever comes after the incarnation.
    let mut old = hdr(FrameType::Collective, 0, 1).to_raw();
    old.incarnation = INC - 1;
    old.tag = 5;
    old.length = 3;
    let mut bytes = old.to_bytes().to_vec();
    bytes.extend_from_slice(&[1, 2, 3]);
    v.push(frame("frame-discard-older-incarnation", 1, 0, bytes));

    // Header rejections, one per check.
    v.push(raw_header("reject-length-16777217", 1, 0, |h| {
        h.length = 16_777_217
    }));
    v.push(raw_header("reject-type-0", 1, 0, |h| h.frame_type = 0));
    v.push(raw_header("reject-type-12", 1, 0, |h| h.frame_type = 12));
    v.push(raw_header("reject-flags", 1, 0, |h| h.flags = 1));
    v.push(raw_header("reject-service", 1, 0, |h| h.service = 1));
    v.push(raw_header("reject-membership-epoch", 1, 0, |h| {
        h.membership_epoch = 1
    }));
    v.push(raw_header("reject-other-job", 1, 0, |h| {
        h.job_id = OTHER_JOB
    }));
    v.push(raw_header("reject-wrong-source", 1, 0, |h| h.source = 2));
    v.push(raw_header("reject-wrong-target", 1, 0, |h| h.target = 2));
    v.push(raw_header("reject-newer-incarnation", 1, 0, |h| {
        h.incarnation = INC + 1
    }));
    v.push(raw_header("reject-epoch-on-data", 1, 0, |h| h.epoch = 1));
    v.push(raw_header("reject-ckpt-begin-epoch-0", 1, 0, |h| {
        h.frame_type = FrameType::CkptBegin.code();
        h.tag = 0;
        h.length = 8;
    }));
    v.push(raw_header("reject-reserved-tag-on-data", 1, 0, |h| {
        h.tag = 0x8000_0000
    }));
    v.push(raw_header("reject-tag-on-collective", 1, 0, |h| {
        h.frame_type = FrameType::Collective.code();
        h.length = 16;
        h.tag = 1;
    }));
    v.push(raw_header(
        "reject-collective-shorter-than-header",
        1,
        0,
        |h| {
            h.frame_type = FrameType::Collective.code();
            h.tag = 0;
            h.length = 15;
        },
    ));
    // Each fixed-length payload one byte short and one long.
    let commit_len = commit_file_len(SIZE) as u32;
    for (t, len, epoch) in [
        (FrameType::Heartbeat, 8, 0),
        (FrameType::CkptBegin, 8, EPOCH),
        (FrameType::CkptAck, 32, EPOCH),
        (FrameType::CkptCommit, commit_len, EPOCH),
        (FrameType::Bye, 0, 0),
    ] {
        let lname = t.name().to_ascii_lowercase().replace('_', "-");
        let mut cases = vec![("long", len + 1)];
        if len > 0 {
            cases.insert(0, ("short", len - 1));
        }
        for (what, l) in cases {
            v.push(raw_header(&format!("reject-{lname}-{what}"), 1, 0, |h| {
                h.frame_type = t.code();
                h.tag = 0;
                h.epoch = epoch;
                h.length = l;
            }));
        }
    }
    v.push(raw_header("reject-abort-long", 1, 0, |h| {
        h.frame_type = FrameType::Abort.code();
        h.tag = 0;
        h.length = 1033;
    }));
    v.push(raw_header(
        "reject-ckpt-data-chunk-1mib-plus-1",
        1,
        0,
        |h| {
            h.frame_type = FrameType::CkptData.code();
            h.tag = 0;
            h.epoch = EPOCH;
            h.length = 24 + 1_048_577;
        },
    ));

    // Payload rejections (the header passes).
    let mut hello = Hello {
        features: 1,
        token: token.clone(),
    }
    .to_vec();
    hello[0] = 2;
    v.push(frame(
        "reject-hello-version-2",
        1,
        0,
        encode_frame_bytes(hdr(FrameType::Hello, 0, 1), &hello),
    ));
    let mut abort = Abort {
        reason: AbortReason::PeerLost,
        code: 0,
        message: b"",
    }
    .to_vec();
    abort[2] = 1;
    v.push(frame(
        "reject-abort-reserved",
        1,
        0,
        encode_frame_bytes(hdr(FrameType::Abort, 0, 1), &abort),
    ));
    let mut commit_wrong_magic = commit.clone();
    commit_wrong_magic[0] = b'X';
    v.push(frame(
        "reject-ckpt-commit-magic",
        1,
        0,
        encode_frame_bytes(
            hdr(FrameType::CkptCommit, 0, 1).with_epoch(EPOCH),
            &commit_wrong_magic,
        ),
    ));
    v.push(frame(
        "reject-resume-status-4",
        0,
        1,
        encode_frame_bytes(hdr(FrameType::Resume, 1, 0), &[4, 0, 0, 0, 0, 0, 0, 0]),
    ));
    v
}
