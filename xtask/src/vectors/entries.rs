//! The entries of the vectors file: inputs built with the sperli-wire
//! encoders; every derived line comes from `verify::derive`.

use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::bye::Bye;
use sperli_wire::ckpt_ack::CkptAck;
use sperli_wire::ckpt_begin::CkptBegin;
use sperli_wire::ckpt_data::{CkptData, CkptDataKind};
use sperli_wire::codec::Codec;
use sperli_wire::collective::{Collective, CollectiveHeader, Operation, Phase};
use sperli_wire::commit_file::{assemble, decode_file, signed_message};
use sperli_wire::data::Data;
use sperli_wire::frame::{encode_frame, encode_frame_bytes};
use sperli_wire::header::{FrameHeader, RawHeader};
use sperli_wire::heartbeat::Heartbeat;
use sperli_wire::hello::Hello;
use sperli_wire::hex;
use sperli_wire::job_description::{HostEntry, JobDescription};
use sperli_wire::join_token::{JoinToken, JoinTokenMessage};
use sperli_wire::limits::{commit_file_len, PUBLIC_KEY_LEN, SIGNATURE_LEN};
use sperli_wire::payload::Payload;
use sperli_wire::rank_file::{build_rank_file, whole_file_hash};
use sperli_wire::resume::{Resume, ResumeStatus};
use sperli_wire::{ElementType, FrameType, JobId, Reduction, Sha256Digest};

use super::verify::derive;
use super::Entry;

const JOB: JobId = JobId([
    0x5b, 0x1e, 0x4c, 0x0d, 0x2a, 0x77, 0x40, 0x19, 0x8e, 0x3f, 0x61, 0xd2, 0x09, 0xa4, 0xc3, 0x5e,
]);
const OTHER_JOB: JobId = JobId([0x11; 16]);
const SIZE: u32 = 3;
const INC: u32 = 2;
const EPOCH: u64 = 4;
const SIG: [u8; SIGNATURE_LEN] = [0xaa; SIGNATURE_LEN];
const EXPIRES: u64 = 1_893_456_000_000; // 2030-01-01T00:00:00Z

fn receiver(own: u32, peer: u32) -> String {
    format!("job={JOB} rank={own} peer={peer} incarnation={INC} size={SIZE}")
}

fn token_bytes(rank: u32, host: &str) -> Vec<u8> {
    let m = JoinTokenMessage {
        job_id: JOB,
        rank,
        size: SIZE,
        incarnation: INC,
        expires_at_ms: EXPIRES,
        host,
    };
    JoinToken::assemble(&m.to_vec(), &SIG)
}

fn state(rank: u32) -> Vec<u8> {
    format!("state of rank {rank} at epoch {EPOCH}").into_bytes()
}

fn rank_file(rank: u32) -> Vec<u8> {
    build_rank_file(JOB, EPOCH, rank, SIZE, &state(rank))
}

fn commit_bytes(job: JobId, epoch: u64, size: u32) -> Vec<u8> {
    let hashes: Vec<Sha256Digest> = (0..size)
        .map(|r| whole_file_hash(&build_rank_file(job, epoch, r, size, &state(r))))
        .collect();
    assemble(&signed_message(job, epoch, &hashes), &SIG)
}

fn hdr(t: FrameType, from: u32, to: u32) -> FrameHeader {
    FrameHeader::new(t, JOB, from, to, INC)
}

/// A frame entry; derived lines filled in, and for accepted frames the
/// decoded payload must re-encode to the same bytes.
fn frame(name: &str, own: u32, peer: u32, bytes: Vec<u8>) -> Entry {
    let e = Entry::new(name, "frame")
        .with("receiver", receiver(own, peer))
        .with("bytes", hex::encode(&bytes));
    derive(e).unwrap_or_else(|why| panic!("{name}: {why}"))
}

fn positive(name: &str, own: u32, peer: u32, h: FrameHeader, p: Payload<'_>) -> Entry {
    let bytes = encode_frame(h, &p);
    let e = frame(name, own, peer, bytes);
    assert_eq!(e.get("verdict"), Some("accept"), "{name}");
    e
}

fn raw_header(name: &str, own: u32, peer: u32, f: impl FnOnce(&mut RawHeader)) -> Entry {
    let mut r = hdr(FrameType::Data, peer, own).with_tag(7).to_raw();
    f(&mut r);
    frame(name, own, peer, r.to_bytes().to_vec())
}

fn frames() -> Vec<Entry> {
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

fn files() -> Vec<Entry> {
    let mut v = Vec::new();
    let expect = |rank: u32| format!("job={JOB} epoch={EPOCH} rank={rank} size={SIZE}");
    let rf = |name: &str, bytes: Vec<u8>| {
        derive(
            Entry::new(name, "rank-file")
                .with("expect", expect(1))
                .with("bytes", hex::encode(&bytes)),
        )
        .unwrap_or_else(|w| panic!("{name}: {w}"))
    };
    let good = rank_file(1);
    v.push(rf("rank-file", good.clone()));
    v.push(rf(
        "rank-file-empty-state",
        build_rank_file(JOB, EPOCH, 1, SIZE, b""),
    ));
    v.push(rf("rank-file-truncated-header", good[..79].to_vec()));
    let mut m = good.clone();
    m[0] = b'X';
    v.push(rf("rank-file-wrong-magic", m));
    let mut m = good.clone();
    m[4] = 2;
    v.push(rf("rank-file-wrong-version", m));
    v.push(rf(
        "rank-file-other-job",
        build_rank_file(OTHER_JOB, EPOCH, 1, SIZE, &state(1)),
    ));
    v.push(rf(
        "rank-file-wrong-epoch",
        build_rank_file(JOB, EPOCH + 1, 1, SIZE, &state(1)),
    ));
    v.push(rf("rank-file-wrong-rank", rank_file(2)));
    v.push(rf(
        "rank-file-wrong-size",
        build_rank_file(JOB, EPOCH, 1, SIZE + 1, &state(1)),
    ));
    let mut m = good.clone();
    m.push(0);
    v.push(rf("rank-file-trailing-byte", m));
    v.push(rf(
        "rank-file-truncated-state",
        good[..good.len() - 1].to_vec(),
    ));
    let mut m = good.clone();
    let last = m.len() - 1;
    m[last] ^= 0x20;
    v.push(rf("rank-file-wrong-sha256", m));

    let cf = |name: &str, expect: String, bytes: Vec<u8>| {
        derive(
            Entry::new(name, "commit-file")
                .with("expect", expect)
                .with("bytes", hex::encode(&bytes)),
        )
        .unwrap_or_else(|w| panic!("{name}: {w}"))
    };
    let ex = |size: u32| format!("job={JOB} epoch={EPOCH} size={size}");
    let c = commit_bytes(JOB, EPOCH, SIZE);
    v.push(cf("commit-file", ex(SIZE), c.clone()));
    let mut m = c.clone();
    m[3] = b'K';
    v.push(cf("commit-file-wrong-magic", ex(SIZE), m));
    let mut m = c.clone();
    m[4] = 2;
    v.push(cf("commit-file-wrong-version", ex(SIZE), m));
    v.push(cf(
        "commit-file-truncated",
        ex(SIZE),
        c[..c.len() - 1].to_vec(),
    ));
    let mut m = c.clone();
    m.push(0);
    v.push(cf("commit-file-trailing-byte", ex(SIZE), m));
    let mut m = c.clone();
    m[36] = 1;
    v.push(cf("commit-file-reserved", ex(SIZE), m));
    v.push(cf(
        "commit-file-other-job",
        ex(SIZE),
        commit_bytes(OTHER_JOB, EPOCH, SIZE),
    ));
    v.push(cf(
        "commit-file-other-epoch",
        ex(SIZE),
        commit_bytes(JOB, EPOCH + 1, SIZE),
    ));
    v.push(cf("commit-file-other-size", ex(SIZE + 1), c));
    v
}

fn description(rank: u32) -> JobDescription {
    let hosts = ["127.0.0.1", "node-b.example", "localhost"];
    JobDescription {
        job_id: JOB,
        size: SIZE,
        rank,
        incarnation: INC,
        hosts: hosts
            .iter()
            .enumerate()
            .map(|(i, h)| HostEntry {
                host: (*h).into(),
                port: 7100 + i as u16,
            })
            .collect(),
        job_public_key: (0..PUBLIC_KEY_LEN).map(|i| (i % 251) as u8).collect(),
        join_token: token_bytes(rank, hosts[rank as usize]),
        ca_cert_pem: b"-----BEGIN CERTIFICATE-----\n(placeholder CA)\n-----END CERTIFICATE-----\n"
            .to_vec(),
        rank_cert_pem:
            b"-----BEGIN CERTIFICATE-----\n(placeholder rank)\n-----END CERTIFICATE-----\n".to_vec(),
        job_secret_key: if rank == 0 { vec![0xcc; 64] } else { vec![] },
        rank_key_pem:
            b"-----BEGIN PRIVATE KEY-----\n(placeholder key)\n-----END PRIVATE KEY-----\n".to_vec(),
    }
}

fn descriptions() -> Vec<Entry> {
    let jd = |name: &str, line: String| {
        derive(Entry::new(name, "job-description").with("line", line))
            .unwrap_or_else(|w| panic!("{name}: {w}"))
    };
    let line = |d: &JobDescription| hex::encode(&d.to_vec());
    let mut v = vec![
        jd("job-description-rank-0", line(&description(0))),
        jd("job-description-rank-1", line(&description(1))),
    ];
    let good = line(&description(1));
    v.push(jd("job-description-trailing-byte", format!("{good}00")));
    v.push(jd(
        "job-description-truncated",
        good[..good.len() - 2].into(),
    ));
    v.push(jd(
        "job-description-odd-digits",
        good[..good.len() - 1].into(),
    ));
    v.push(jd("job-description-uppercase-hex", good.to_uppercase()));
    let mutate = |f: &dyn Fn(&mut JobDescription)| {
        let mut d = description(1);
        f(&mut d);
        line(&d)
    };
    v.push(jd("job-description-version-2", format!("02{}", &good[2..])));
    v.push(jd("job-description-size-0", mutate(&|d| d.size = 0)));
    v.push(jd("job-description-size-4097", mutate(&|d| d.size = 4097)));
    v.push(jd(
        "job-description-rank-equals-size",
        mutate(&|d| d.rank = 3),
    ));
    v.push(jd(
        "job-description-incarnation-0",
        mutate(&|d| d.incarnation = 0),
    ));
    v.push(jd(
        "job-description-port-0",
        mutate(&|d| d.hosts[2].port = 0),
    ));
    v.push(jd(
        "job-description-host-uppercase",
        mutate(&|d| d.hosts[1].host = "Node-B.example".into()),
    ));
    v.push(jd(
        "job-description-host-leading-zero-ipv4",
        mutate(&|d| d.hosts[0].host = "127.0.0.01".into()),
    ));
    v.push(jd(
        "job-description-host-refused",
        mutate(&|d| d.hosts[2].host = "host-a.invalid".into()),
    ));
    v.push(jd(
        "job-description-host-refused-subdomain",
        mutate(&|d| d.hosts[1].host = "x.host-b.invalid".into()),
    ));
    v.push(jd(
        "job-description-secret-key-on-rank-1",
        mutate(&|d| d.job_secret_key = vec![0xcc; 64]),
    ));
    v.push(jd(
        "job-description-bad-token",
        mutate(&|d| {
            d.join_token.pop();
        }),
    ));
    v
}

fn tokens() -> Vec<Entry> {
    let m = JoinTokenMessage {
        job_id: JOB,
        rank: 2,
        size: SIZE,
        incarnation: INC,
        expires_at_ms: EXPIRES,
        host: "localhost",
    };
    let mut v = Vec::new();
    for (kind, bytes) in [
        ("join-token-message", m.to_vec()),
        ("join-token", token_bytes(2, "localhost")),
    ] {
        v.push(
            derive(Entry::new(kind, kind).with("bytes", hex::encode(&bytes)))
                .unwrap_or_else(|w| panic!("{kind}: {w}")),
        );
    }
    v
}

fn el<T: Copy>(xs: &[T], f: fn(T) -> Vec<u8>) -> String {
    xs.iter()
        .map(|x| hex::encode(&f(*x)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn reduces() -> Vec<Entry> {
    let mut v = Vec::new();
    let mut add = |name: &str, t: ElementType, r: Reduction, left: String, right: String| {
        v.push(
            derive(
                Entry::new(&format!("reduce-{name}"), "reduce")
                    .with("type", t.name())
                    .with("reduction", r.name())
                    .with("left", left)
                    .with("right", right),
            )
            .unwrap_or_else(|w| panic!("{name}: {w}")),
        );
    };
    use ElementType as T;
    use Reduction as R;
    let i32s = |x: &[i32]| el(x, |v| v.to_le_bytes().to_vec());
    let u32s = |x: &[u32]| el(x, |v| v.to_le_bytes().to_vec());
    let i64s = |x: &[i64]| el(x, |v| v.to_le_bytes().to_vec());
    let u64s = |x: &[u64]| el(x, |v| v.to_le_bytes().to_vec());
    let f32s = |x: &[f32]| el(x, |v| v.to_le_bytes().to_vec());
    let f64s = |x: &[f64]| el(x, |v| v.to_le_bytes().to_vec());
    let u8s = |x: &[u8]| el(x, |v| vec![v]);

    add(
        "i32-sum-wraps",
        T::I32,
        R::Sum,
        i32s(&[i32::MAX, -1, i32::MIN]),
        i32s(&[1, 1, -1]),
    );
    add(
        "u32-sum-wraps",
        T::U32,
        R::Sum,
        u32s(&[u32::MAX, 5]),
        u32s(&[2, 7]),
    );
    add(
        "i64-prod-wraps",
        T::I64,
        R::Prod,
        i64s(&[i64::MAX, i64::MIN, -3]),
        i64s(&[2, -1, 7]),
    );
    add(
        "u64-sum-wraps",
        T::U64,
        R::Sum,
        u64s(&[u64::MAX, 1 << 63]),
        u64s(&[1, 1 << 63]),
    );
    add(
        "u32-prod-wraps",
        T::U32,
        R::Prod,
        u32s(&[0x10000, 3]),
        u32s(&[0x10000, 5]),
    );
    add(
        "i32-min-signed",
        T::I32,
        R::Min,
        i32s(&[-1, 5, i32::MIN]),
        i32s(&[1, -7, i32::MAX]),
    );
    add(
        "i32-max-signed",
        T::I32,
        R::Max,
        i32s(&[-1, 5, i32::MIN]),
        i32s(&[1, -7, i32::MAX]),
    );
    add(
        "u32-min-unsigned",
        T::U32,
        R::Min,
        u32s(&[u32::MAX, 5]),
        u32s(&[1, 0x8000_0000]),
    );
    add(
        "u32-max-unsigned",
        T::U32,
        R::Max,
        u32s(&[u32::MAX, 5]),
        u32s(&[1, 0x8000_0000]),
    );
    add(
        "i64-min-signed",
        T::I64,
        R::Min,
        i64s(&[-1, i64::MIN]),
        i64s(&[0, i64::MAX]),
    );
    add(
        "u64-max-unsigned",
        T::U64,
        R::Max,
        u64s(&[u64::MAX, 0]),
        u64s(&[1, 1 << 63]),
    );
    let qnan = f64::from_bits(0x7ff8_0000_0000_0123);
    let qnan2 = f64::from_bits(0xfff8_0000_0000_0456);
    add(
        "f64-min-zeros-and-nan",
        T::F64,
        R::Min,
        f64s(&[-0.0, 0.0, qnan, 1.0, qnan, -1.5]),
        f64s(&[0.0, -0.0, 1.0, qnan2, qnan2, 2.5]),
    );
    add(
        "f64-max-zeros-and-nan",
        T::F64,
        R::Max,
        f64s(&[-0.0, 0.0, qnan, 1.0, qnan, -1.5]),
        f64s(&[0.0, -0.0, 1.0, qnan2, qnan2, 2.5]),
    );
    let fnan = f32::from_bits(0x7fc0_0042);
    add(
        "f32-min-zeros-and-nan",
        T::F32,
        R::Min,
        f32s(&[-0.0, 0.0, fnan, 3.0, f32::NEG_INFINITY]),
        f32s(&[0.0, -0.0, 2.0, fnan, 1.0]),
    );
    add(
        "f32-max-zeros-and-nan",
        T::F32,
        R::Max,
        f32s(&[-0.0, 0.0, fnan, 3.0, f32::INFINITY]),
        f32s(&[0.0, -0.0, 2.0, fnan, 1.0]),
    );
    add(
        "f64-sum-rounding-and-nan",
        T::F64,
        R::Sum,
        f64s(&[0.1, 1e16, f64::INFINITY, -0.0, qnan, f64::MAX]),
        f64s(&[0.2, 1.0, f64::NEG_INFINITY, -0.0, 1.0, f64::MAX]),
    );
    add(
        "f32-sum-rounding",
        T::F32,
        R::Sum,
        f32s(&[16_777_216.0, 0.1, -0.0]),
        f32s(&[1.0, 0.2, 0.0]),
    );
    add(
        "f64-prod",
        T::F64,
        R::Prod,
        f64s(&[0.1, -0.0, f64::INFINITY]),
        f64s(&[3.0, 5.0, 0.0]),
    );
    add(
        "f32-prod",
        T::F32,
        R::Prod,
        f32s(&[1e30, 0.1, -2.0]),
        f32s(&[1e30, 3.0, 0.5]),
    );
    for r in [R::Land, R::Lor, R::Lxor] {
        add(
            &format!("i32-{}", r.name()),
            T::I32,
            r,
            i32s(&[0, 0, 5, -1]),
            i32s(&[0, 3, 0, 7]),
        );
        add(
            &format!("u64-{}", r.name()),
            T::U64,
            r,
            u64s(&[0, 0, 1 << 40, u64::MAX]),
            u64s(&[0, 9, 0, 2]),
        );
    }
    for r in [R::Band, R::Bor, R::Bxor] {
        add(
            &format!("u8-{}", r.name()),
            T::U8,
            r,
            u8s(&[0xf0, 0xaa, 0xff]),
            u8s(&[0x3c, 0x55, 0x0f]),
        );
        add(
            &format!("i32-{}", r.name()),
            T::I32,
            r,
            i32s(&[-1, 0x0f0f_0f0f]),
            i32s(&[0x1234_5678, 0x00ff_00ff]),
        );
        add(
            &format!("u64-{}", r.name()),
            T::U64,
            r,
            u64s(&[u64::MAX, 0xf0f0]),
            u64s(&[0x0123_4567_89ab_cdef, 0xff00]),
        );
    }
    // Every refused combination.
    for t in ElementType::ALL {
        for r in Reduction::ALL {
            if r.check(t).is_ok() {
                continue;
            }
            let one = hex::encode(&vec![1u8; t.width()]);
            add(
                &format!("refused-{}-{}", t.name(), r.name()),
                t,
                r,
                one.clone(),
                one,
            );
        }
    }
    v
}

/// Every entry, in file order.
pub fn all() -> Vec<Entry> {
    let mut v = frames();
    v.extend(files());
    v.extend(descriptions());
    v.extend(tokens());
    v.extend(reduces());
    v.extend(super::pipelined::entries());
    v
}
