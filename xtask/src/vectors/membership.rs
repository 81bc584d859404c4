//! The vectors of HELLO feature bit 5 (protocol §18.10): MEMBERSHIP
//! records with a receiver's membership (§18.3: the checks that decode,
//! then job, stale, equivocation, history and fenced; the signature is not
//! judged, as everywhere in the file), RECOVER payloads (§18.5) and REPORT
//! records (§18.4), derived with `sperli_wire::recovery`.

use sperli_wire::hex;
use sperli_wire::limits::{MAX_COMMUNICATOR_ID, SIGNATURE_LEN};
use sperli_wire::recovery::header::{check_type_and_epoch, EpochVerdict};
use sperli_wire::recovery::{
    Change, MembershipRecord, MembershipView, Mode, Precheck, RecoverPayload, RecoveryError,
    Report, CONTEXT_MEMBER, NO_ROLLBACK,
};
use sperli_wire::{JobId, Sha256Digest};

use super::verify::{field, num};
use super::Entry;

const JOB: JobId = JobId([0x5b; 16]);
const SIZE: u32 = 4;

fn verdict(e: &RecoveryError) -> String {
    format!("reject {} {}", e.h_code(), e.check_name())
}

fn list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn parse_list(s: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(|x| x.parse().map_err(|_| format!("{x:?} is not a number")))
        .collect()
}

fn bytes_of(e: &Entry) -> Result<Vec<u8>, String> {
    hex::decode(e.get("bytes").unwrap_or("").as_bytes()).map_err(|x| x.to_string())
}

fn record_fields(r: &MembershipRecord) -> String {
    let changes: Vec<String> = r
        .changes
        .iter()
        .map(|c| match &c.endpoint {
            Some((port, host)) => {
                format!("{}:{}:{port}:{host}", c.rank, hex::encode(&c.cert_sha256.0))
            }
            None => format!("{}:none", c.rank),
        })
        .collect();
    let mode = match r.mode {
        Mode::Replace => "replace",
        Mode::Shrink => "shrink",
    };
    format!(
        "magic=SPMB version=1 mode={mode} agreed={} job={} start_incarnation={} epoch={} size={} changed={} rollback={} incarnations={} changes={} sig_len={} signature={}",
        u8::from(r.agreed),
        r.job_id,
        r.start_incarnation,
        r.epoch,
        r.size,
        r.changes.len(),
        r.rollback,
        list(&r.incarnations),
        changes.join(","),
        r.signature.len(),
        hex::encode(&r.signature)
    )
}

/// The receiver's membership: `job= size= start_incarnation= epoch=
/// incarnations= held=none|same|other rank= incarnation=`.
fn view_of(rx: &str, bytes: &[u8]) -> Result<(MembershipView, u32, u32), String> {
    let job = hex::decode(field(rx, "job")?.as_bytes()).map_err(|x| x.to_string())?;
    let job_id = JobId(job.try_into().map_err(|_| "job is not 16 bytes")?);
    let current_record = match field(rx, "held")? {
        "none" => vec![],
        "same" => bytes.to_vec(),
        "other" => b"another record".to_vec(),
        h => return Err(format!("held={h}")),
    };
    let view = MembershipView {
        job_id,
        size: num(rx, "size")?,
        start_incarnation: num(rx, "start_incarnation")?,
        epoch: num(rx, "epoch")?,
        incarnations: parse_list(field(rx, "incarnations")?)?,
        current_record,
    };
    if view.incarnations.len() != view.size as usize {
        return Err("incarnations not size entries".into());
    }
    Ok((view, num(rx, "rank")?, num(rx, "incarnation")?))
}

/// Fills in `fields`, `signed` and `verdict` of a `membership-record` entry.
pub fn derive_record(e: Entry) -> Result<Entry, String> {
    let b = bytes_of(&e)?;
    let (view, rank, inc) = view_of(e.get("receiver").unwrap_or(""), &b)?;
    let rec = match MembershipRecord::decode(&b) {
        Ok(r) => r,
        Err(x) => return Ok(e.with("verdict", verdict(&x))),
    };
    let s = rec.signed_len();
    let e = e
        .with("fields", record_fields(&rec))
        .with("signed", super::render::signed(0, s, CONTEXT_MEMBER));
    // protocol §18.3: 14-15, (16 the signature, not judged here), 17-18.
    let v = match rec.precheck(&b, &view) {
        Err(x) => verdict(&x),
        Ok(Precheck::Discard) => "discard".into(),
        Ok(Precheck::Verify) => {
            match rec.check_history(&view, (rank, inc), |h| h.ends_with(".invalid")) {
                Ok(()) => "accept".into(),
                Err(x) => verdict(&x),
            }
        }
    };
    Ok(e.with("verdict", v))
}

/// Fills in `fields` and `verdict` of a `recover-payload` entry
/// (receiver `size= sender=`).
pub fn derive_payload(e: Entry) -> Result<Entry, String> {
    let rx = e.get("receiver").unwrap_or("").to_string();
    let b = bytes_of(&e)?;
    match RecoverPayload::decode(&b, num(&rx, "size")?, num(&rx, "sender")?) {
        Ok(RecoverPayload::Revoke { suspects }) => Ok(e
            .with(
                "fields",
                format!(
                    "kind=revoke count={} suspects={}",
                    suspects.len(),
                    list(&suspects)
                ),
            )
            .with("verdict", "accept")),
        Ok(RecoverPayload::Membership { record }) => {
            let rec = MembershipRecord::decode(&record).map_err(|x| x.to_string())?;
            let inner: Vec<String> = record_fields(&rec)
                .split(' ')
                .map(|kv| format!("record.{kv}"))
                .collect();
            let fields = format!(
                "kind=membership record_len={} {}",
                record.len(),
                inner.join(" ")
            );
            Ok(e.with("fields", fields).with("verdict", "accept"))
        }
        Ok(RecoverPayload::RevokeCommunicator { comm }) => Ok(e
            .with("fields", format!("kind=revoke_communicator comm={comm}"))
            .with("verdict", "accept")),
        Err(x) => Ok(e.with("verdict", verdict(&x))),
    }
}

/// Fills in `fields` and `verdict` of a `recovery-report` entry.
pub fn derive_report(e: Entry) -> Result<Entry, String> {
    let b = bytes_of(&e)?;
    match Report::decode(&b) {
        Ok(r) => Ok(e
            .with(
                "fields",
                format!(
                    "magic=SPRP version=1 flag={} job={} rank={} incarnation={} epoch={} count={} best_commit={} suspects={}",
                    u8::from(r.flag),
                    r.job_id,
                    r.rank,
                    r.incarnation,
                    r.epoch,
                    r.suspects.len(),
                    r.best_commit,
                    list(&r.suspects)
                ),
            )
            .with("verdict", "accept")),
        Err(x) => Ok(e.with("verdict", verdict(&x))),
    }
}

// ---- the entries ----------------------------------------------------------------

fn replace() -> MembershipRecord {
    MembershipRecord {
        mode: Mode::Replace,
        agreed: true,
        job_id: JOB,
        start_incarnation: 1,
        epoch: 2,
        size: SIZE,
        rollback: 3,
        incarnations: vec![1, 1, 2, 1],
        changes: vec![Change {
            rank: 2,
            cert_sha256: Sha256Digest([0x2c; 32]),
            endpoint: Some((7002, "127.0.0.3".into())),
        }],
        signature: vec![0xaa; SIGNATURE_LEN],
    }
}

fn shrink() -> MembershipRecord {
    let gone = |rank| Change {
        rank,
        cert_sha256: Sha256Digest([0; 32]),
        endpoint: None,
    };
    MembershipRecord {
        mode: Mode::Shrink,
        agreed: false,
        job_id: JOB,
        start_incarnation: 1,
        epoch: 2,
        size: SIZE,
        rollback: NO_ROLLBACK,
        incarnations: vec![1, 0, 1, 0],
        changes: vec![gone(1), gone(3)],
        signature: vec![0xaa; SIGNATURE_LEN],
    }
}

fn rx(epoch: u32, incs: &str, held: &str, rank: u32, inc: u32) -> String {
    format!("job={JOB} size={SIZE} start_incarnation=1 epoch={epoch} incarnations={incs} held={held} rank={rank} incarnation={inc}")
}

fn start() -> String {
    rx(1, "1,1,1,1", "none", 0, 1)
}

/// An entry name without spaces (the file's rule): `a (b) = c` → `a-b-eq-c`.
fn slug(name: &str) -> String {
    name.replace(['(', ')'], "")
        .replace(" = ", " eq ")
        .replace(' ', "-")
}

fn record_entry(name: &str, receiver: String, bytes: Vec<u8>, want: &str) -> Entry {
    let name = &slug(name);
    let e = Entry::new(name, "membership-record")
        .with("receiver", receiver)
        .with("bytes", hex::encode(&bytes));
    let e = derive_record(e).unwrap_or_else(|why| panic!("{name}: {why}"));
    assert_eq!(e.get("verdict"), Some(want), "{name}");
    e
}

fn with_bytes(mut b: Vec<u8>, off: usize, v: &[u8]) -> Vec<u8> {
    b[off..off + v.len()].copy_from_slice(v);
    b
}

fn records() -> Vec<Entry> {
    let r = replace().encode();
    let s = shrink().encode();
    let sig = replace().signed_len();
    let mut v = vec![
        record_entry("membership replace", start(), r.clone(), "accept"),
        record_entry("membership shrink", start(), s.clone(), "accept"),
        record_entry(
            "membership truncated in the table",
            start(),
            r[..50].to_vec(),
            "reject H1610 truncated",
        ),
        record_entry(
            "membership truncated in the signature",
            start(),
            r[..r.len() - 1].to_vec(),
            "reject H1610 truncated",
        ),
        record_entry(
            "membership magic",
            start(),
            with_bytes(r.clone(), 0, b"SPMC"),
            "reject H1610 magic",
        ),
        record_entry(
            "membership version",
            start(),
            with_bytes(r.clone(), 4, &[2, 0]),
            "reject H1610 version",
        ),
        record_entry(
            "membership mode 3",
            start(),
            with_bytes(r.clone(), 6, &[3]),
            "reject H1610 mode",
        ),
        record_entry(
            "membership agreed 2",
            start(),
            with_bytes(r.clone(), 7, &[2]),
            "reject H1610 agreed",
        ),
        record_entry(
            "membership start incarnation 0",
            start(),
            with_bytes(r.clone(), 24, &[0; 4]),
            "reject H1610 epoch",
        ),
        record_entry(
            "membership epoch 1",
            start(),
            with_bytes(r.clone(), 28, &[1, 0, 0, 0]),
            "reject H1610 epoch",
        ),
        record_entry(
            "membership size 0",
            start(),
            with_bytes(r.clone(), 32, &[0; 4]),
            "reject H1610 size",
        ),
        record_entry(
            "membership size 4097",
            start(),
            with_bytes(r.clone(), 32, &4097u32.to_le_bytes()),
            "reject H1610 size",
        ),
        record_entry(
            "membership changed 0",
            start(),
            with_bytes(r.clone(), 36, &[0; 4]),
            "reject H1610 changed",
        ),
        record_entry(
            "membership changed = size",
            start(),
            with_bytes(r.clone(), 36, &[4, 0, 0, 0]),
            "reject H1610 changed",
        ),
        record_entry(
            "membership replace without rollback",
            start(),
            with_bytes(r.clone(), 40, &[0xff; 8]),
            "reject H1610 rollback",
        ),
        record_entry(
            "membership shrink with rollback 0",
            start(),
            with_bytes(s.clone(), 40, &[0; 8]),
            "reject H1610 rollback",
        ),
        record_entry(
            "membership entry rank = size",
            start(),
            with_bytes(r.clone(), 64, &[4, 0, 0, 0]),
            "reject H1610 entry",
        ),
        record_entry(
            "membership entry port 0",
            start(),
            with_bytes(r.clone(), 100, &[0, 0]),
            "reject H1610 entry",
        ),
        record_entry(
            "membership entry host_len 0",
            start(),
            with_bytes(r.clone(), 102, &[0]),
            "reject H1610 entry",
        ),
        record_entry(
            "membership entry replaced rank with incarnation 0",
            start(),
            with_bytes(r.clone(), 56, &[0; 4]),
            "reject H1610 entry",
        ),
        record_entry(
            "membership entry removed rank with an incarnation",
            start(),
            with_bytes(s.clone(), 52, &[1, 0, 0, 0]),
            "reject H1610 entry",
        ),
        record_entry(
            "membership entry shrink with a certificate",
            start(),
            with_bytes(s.clone(), 68, &[1]),
            "reject H1610 entry",
        ),
        record_entry(
            "membership sig_len",
            start(),
            with_bytes(r.clone(), sig, &[0xb3, 0x09]),
            "reject H1610 sig_len",
        ),
        record_entry(
            "membership trailing byte",
            start(),
            [r.clone(), vec![0]].concat(),
            "reject H1610 trailing",
        ),
        record_entry(
            "membership another job",
            rx(1, "1,1,1,1", "none", 0, 1)
                .replace(&JOB.to_string(), &JobId([0x11; 16]).to_string()),
            r.clone(),
            "reject H1610 job",
        ),
        record_entry(
            "membership another start incarnation",
            start().replace("start_incarnation=1", "start_incarnation=2"),
            r.clone(),
            "reject H1610 job",
        ),
        record_entry(
            "membership stale epoch",
            rx(3, "1,1,2,1", "other", 0, 1),
            r.clone(),
            "discard",
        ),
        record_entry(
            "membership the record held",
            rx(2, "1,1,2,1", "same", 0, 1),
            r.clone(),
            "discard",
        ),
        record_entry(
            "membership equivocation",
            rx(2, "1,1,2,1", "other", 0, 1),
            r.clone(),
            "reject H1610 equivocation",
        ),
        record_entry(
            "membership replaced incarnation not above",
            rx(1, "1,1,2,1", "none", 0, 1),
            r.clone(),
            "reject H1610 history",
        ),
        record_entry(
            "membership unchanged incarnation differs",
            rx(1, "1,2,1,1", "none", 0, 1),
            r.clone(),
            "reject H1610 history",
        ),
        record_entry(
            "membership fenced (replace)",
            rx(1, "1,1,1,1", "none", 2, 1),
            r.clone(),
            "reject H1613 fenced",
        ),
        record_entry(
            "membership fenced (shrink)",
            rx(1, "1,1,1,1", "none", 3, 1),
            s.clone(),
            "reject H1613 fenced",
        ),
    ];
    let mut bad = shrink();
    bad.incarnations = vec![0; 4];
    bad.changes.truncate(1);
    bad.changes[0].rank = 0;
    v.push(record_entry(
        "membership no member left",
        start(),
        bad.encode(),
        "reject H1610 members",
    ));
    let mut bad = replace();
    bad.changes[0].endpoint = Some((7002, "host_3".into()));
    v.push(record_entry(
        "membership entry invalid host",
        start(),
        bad.encode(),
        "reject H1610 entry",
    ));
    let mut refused = replace();
    refused.changes[0].endpoint = Some((7002, "host-a.invalid".into()));
    v.push(record_entry(
        "membership refused host",
        start(),
        refused.encode(),
        "reject H1614 history",
    ));
    let mut two = replace();
    two.changes.insert(
        0,
        Change {
            rank: 1,
            cert_sha256: Sha256Digest([0x1c; 32]),
            endpoint: Some((7001, "127.0.0.2".into())),
        },
    );
    two.incarnations = vec![1, 2, 2, 1];
    let mut b = two.encode();
    v.push(record_entry(
        "membership two ranks at once",
        start(),
        b.clone(),
        "accept",
    ));
    b[48 + 16..48 + 20].copy_from_slice(&3u32.to_le_bytes());
    v.push(record_entry(
        "membership entries not ascending",
        start(),
        b,
        "reject H1610 entry",
    ));
    let mut skip = replace();
    skip.epoch = 4;
    skip.incarnations = vec![1, 3, 2, 1];
    v.push(record_entry(
        "membership skips epochs",
        rx(2, "1,2,1,1", "other", 0, 1),
        skip.encode(),
        "accept",
    ));
    v
}

fn payload_entry(name: &str, size: u32, sender: u32, bytes: Vec<u8>, want: &str) -> Entry {
    let name = &slug(name);
    let e = Entry::new(name, "recover-payload")
        .with("receiver", format!("size={size} sender={sender}"))
        .with("bytes", hex::encode(&bytes));
    let e = derive_payload(e).unwrap_or_else(|why| panic!("{name}: {why}"));
    assert_eq!(e.get("verdict"), Some(want), "{name}");
    e
}

fn payloads() -> Vec<Entry> {
    let revoke = |s: Vec<u32>| RecoverPayload::Revoke { suspects: s }.encode();
    let mut trailing = revoke(vec![2]);
    trailing.push(0);
    let revoke_comm = |comm: u32| RecoverPayload::RevokeCommunicator { comm }.encode();
    let mut comm_trailing = revoke_comm(5);
    comm_trailing.push(0);
    let mut bad_record = replace().encode();
    bad_record[0] = b'X';
    vec![
        payload_entry("recover revoke", SIZE, 0, revoke(vec![1, 3]), "accept"),
        payload_entry(
            "recover membership",
            SIZE,
            1,
            RecoverPayload::Membership {
                record: replace().encode(),
            }
            .encode(),
            "accept",
        ),
        payload_entry("recover empty", SIZE, 0, vec![], "reject H1610 truncated"),
        payload_entry(
            "recover revoke truncated",
            SIZE,
            0,
            revoke(vec![1, 3])[..11].to_vec(),
            "reject H1610 truncated",
        ),
        payload_entry(
            "recover kind 0",
            SIZE,
            0,
            vec![0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0],
            "reject H1610 kind",
        ),
        payload_entry(
            "recover kind 4",
            SIZE,
            0,
            vec![4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0],
            "reject H1610 kind",
        ),
        payload_entry(
            "recover revoke communicator",
            SIZE,
            2,
            revoke_comm(5),
            "accept",
        ),
        payload_entry(
            "recover revoke communicator 0",
            SIZE,
            0,
            revoke_comm(0),
            "accept",
        ),
        payload_entry(
            "recover revoke communicator highest id",
            SIZE,
            3,
            revoke_comm(MAX_COMMUNICATOR_ID),
            "accept",
        ),
        payload_entry(
            "recover revoke communicator id above",
            SIZE,
            0,
            revoke_comm(MAX_COMMUNICATOR_ID + 1),
            "reject H1610 comm",
        ),
        payload_entry(
            "recover revoke communicator truncated",
            SIZE,
            0,
            revoke_comm(5)[..7].to_vec(),
            "reject H1610 truncated",
        ),
        payload_entry(
            "recover revoke communicator reserved",
            SIZE,
            0,
            vec![3, 0, 0, 1, 5, 0, 0, 0],
            "reject H1610 reserved",
        ),
        payload_entry(
            "recover revoke communicator trailing byte",
            SIZE,
            0,
            comm_trailing,
            "reject H1610 trailing",
        ),
        payload_entry(
            "recover reserved",
            SIZE,
            0,
            vec![1, 0, 7, 0, 1, 0, 0, 0, 1, 0, 0, 0],
            "reject H1610 reserved",
        ),
        payload_entry(
            "recover revoke count 0",
            SIZE,
            0,
            revoke(vec![]),
            "reject H1610 count",
        ),
        payload_entry(
            "recover revoke count = size",
            SIZE,
            0,
            revoke(vec![0, 1, 2, 3]),
            "reject H1610 count",
        ),
        payload_entry(
            "recover revoke out of order",
            SIZE,
            0,
            revoke(vec![3, 1]),
            "reject H1610 suspects",
        ),
        payload_entry(
            "recover revoke names the sender",
            SIZE,
            1,
            revoke(vec![1]),
            "reject H1610 suspects",
        ),
        payload_entry(
            "recover revoke suspect = size",
            SIZE,
            0,
            revoke(vec![4]),
            "reject H1610 suspects",
        ),
        payload_entry(
            "recover revoke trailing byte",
            SIZE,
            0,
            trailing,
            "reject H1610 trailing",
        ),
        payload_entry(
            "recover membership with a bad record",
            SIZE,
            1,
            RecoverPayload::Membership { record: bad_record }.encode(),
            "reject H1610 magic",
        ),
    ]
}

fn report_entry(name: &str, bytes: Vec<u8>, want: &str) -> Entry {
    let name = &slug(name);
    let e = Entry::new(name, "recovery-report").with("bytes", hex::encode(&bytes));
    let e = derive_report(e).unwrap_or_else(|why| panic!("{name}: {why}"));
    assert_eq!(e.get("verdict"), Some(want), "{name}");
    e
}

fn reports() -> Vec<Entry> {
    let rep = Report {
        flag: true,
        job_id: JOB,
        rank: 1,
        incarnation: 1,
        epoch: 1,
        best_commit: 3,
        suspects: vec![2],
    };
    let b = rep.encode();
    let with = |off, v: &[u8]| with_bytes(b.clone(), off, v);
    vec![
        report_entry("report", b.clone(), "accept"),
        report_entry(
            "report truncated",
            b[..b.len() - 1].to_vec(),
            "reject H1610 truncated",
        ),
        report_entry("report magic", with(0, b"SPRQ"), "reject H1610 magic"),
        report_entry("report version", with(4, &[0, 0]), "reject H1610 version"),
        report_entry("report flag 2", with(6, &[2]), "reject H1610 flag"),
        report_entry("report reserved", with(7, &[1]), "reject H1610 reserved"),
        report_entry(
            "report rank 4096",
            with(24, &4096u32.to_le_bytes()),
            "reject H1610 rank",
        ),
        report_entry("report epoch 0", with(32, &[0; 4]), "reject H1610 epoch"),
        report_entry(
            "report count 4096",
            with(36, &4096u32.to_le_bytes()),
            "reject H1610 count",
        ),
        report_entry(
            "report suspects itself",
            with(48, &[1, 0, 0, 0]),
            "reject H1610 suspects",
        ),
        report_entry(
            "report trailing byte",
            [b.clone(), vec![0]].concat(),
            "reject H1610 trailing",
        ),
    ]
}

/// Fills in `verdict` of a `membership-header` entry (receiver
/// `features= epoch=`, header `type= membership_epoch=`): checks 2 and 5
/// of protocol §6.2 and §18.2.
pub fn derive_header(e: Entry) -> Result<Entry, String> {
    let rx = e.get("receiver").unwrap_or("").to_string();
    let h = e.get("header").unwrap_or("").to_string();
    let v = match check_type_and_epoch(
        num(&rx, "features")?,
        num(&h, "type")?,
        num(&h, "membership_epoch")?,
        num(&rx, "epoch")?,
    ) {
        Ok(EpochVerdict::Pass) => "accept".to_string(),
        Ok(EpochVerdict::Discard) => "discard".to_string(),
        Ok(EpochVerdict::Older) => "read".to_string(),
        Err(x) => verdict(&x),
    };
    Ok(e.with("verdict", v))
}

fn header_entry(name: &str, features: u64, current: u32, t: u8, got: u32, want: &str) -> Entry {
    let name = &slug(name);
    let e = Entry::new(name, "membership-header")
        .with("receiver", format!("features={features} epoch={current}"))
        .with("header", format!("type={t} membership_epoch={got}"));
    let e = derive_header(e).unwrap_or_else(|why| panic!("{name}: {why}"));
    assert_eq!(e.get("verdict"), Some(want), "{name}");
    e
}

fn headers() -> Vec<Entry> {
    let bit5 = 1 | sperli_wire::recovery::FEATURE_MEMBERSHIP;
    vec![
        header_entry("header v1 data", 1, 0, 2, 0, "accept"),
        header_entry(
            "header v1 data with an epoch",
            1,
            0,
            2,
            1,
            "reject H1610 membership_epoch",
        ),
        header_entry("header v1 recover", 1, 0, 12, 0, "reject H1610 type"),
        header_entry("header bit 5 hello", bit5, 3, 1, 0, "accept"),
        header_entry(
            "header bit 5 hello with an epoch",
            bit5,
            3,
            1,
            3,
            "reject H1610 membership_epoch",
        ),
        header_entry(
            "header bit 5 data epoch 0",
            bit5,
            3,
            2,
            0,
            "reject H1610 membership_epoch",
        ),
        header_entry("header bit 5 data older epoch", bit5, 3, 2, 2, "discard"),
        header_entry("header bit 5 data current epoch", bit5, 3, 2, 3, "accept"),
        header_entry(
            "header bit 5 data newer epoch",
            bit5,
            3,
            2,
            4,
            "reject H1610 membership_epoch",
        ),
        header_entry(
            "header bit 5 heartbeat older epoch",
            bit5,
            3,
            4,
            1,
            "accept",
        ),
        header_entry("header bit 5 heartbeat epoch 0", bit5, 3, 4, 0, "accept"),
        header_entry(
            "header bit 5 heartbeat newer epoch",
            bit5,
            3,
            4,
            4,
            "reject H1610 membership_epoch",
        ),
        header_entry("header bit 5 abort epoch 0", bit5, 3, 5, 0, "accept"),
        header_entry("header bit 5 bye older epoch", bit5, 3, 11, 2, "accept"),
        header_entry("header bit 5 recover older epoch", bit5, 3, 12, 2, "read"),
        header_entry(
            "header bit 5 recover current epoch",
            bit5,
            3,
            12,
            3,
            "accept",
        ),
        header_entry(
            "header bit 5 recover newer epoch",
            bit5,
            3,
            12,
            4,
            "reject H1610 membership_epoch",
        ),
        header_entry("header bit 5 type 13", bit5, 3, 13, 3, "reject H1610 type"),
        header_entry("header bit 5 type 0", bit5, 3, 0, 3, "reject H1610 type"),
    ]
}

/// The entries of feature bit 5, in file order.
pub fn entries() -> Vec<Entry> {
    let mut v = headers();
    v.extend(records());
    v.extend(payloads());
    v.extend(reports());
    v
}
