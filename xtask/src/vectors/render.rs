//! Field lists in the notation of the vectors file header.

use sperli_wire::ckpt_data::CkptData;
use sperli_wire::collective::CollectiveHeader;
use sperli_wire::commit_file::CommitFile;
use sperli_wire::header::FrameHeader;
use sperli_wire::hex;
use sperli_wire::job_description::JobDescription;
use sperli_wire::join_token::{JoinToken, JoinTokenMessage};
use sperli_wire::payload::Payload;
use sperli_wire::rank_file::RankFileHeader;

pub fn header(h: &FrameHeader) -> String {
    format!(
        "length={} type={} flags=0 service=0 membership_epoch=0 job={} source={} target={} incarnation={} tag={} epoch={}",
        h.length, h.frame_type, h.job_id, h.source, h.target, h.incarnation, h.tag, h.epoch
    )
}

pub fn token_message(m: &JoinTokenMessage<'_>, prefix: &str) -> Vec<String> {
    vec![
        format!("{prefix}job={}", m.job_id),
        format!("{prefix}rank={}", m.rank),
        format!("{prefix}size={}", m.size),
        format!("{prefix}incarnation={}", m.incarnation),
        format!("{prefix}expires_at={}", m.expires_at_ms),
        format!("{prefix}host_len={}", m.host.len()),
        format!("{prefix}host={}", m.host),
    ]
}

pub fn token(t: &JoinToken<'_>, prefix: &str) -> Vec<String> {
    let mut v = token_message(&t.message, prefix);
    v.push(format!("{prefix}sig_len={}", t.signature.len()));
    v.push(format!("{prefix}signature={}", hex::encode(t.signature)));
    v
}

pub fn commit(c: &CommitFile<'_>, prefix: &str) -> Vec<String> {
    let hashes: Vec<String> = c.hashes.iter().map(|h| h.to_string()).collect();
    vec![
        format!("{prefix}magic=SPCM"),
        format!("{prefix}version=1"),
        format!("{prefix}job={}", c.job_id),
        format!("{prefix}epoch={}", c.epoch),
        format!("{prefix}size={}", c.size),
        format!("{prefix}reserved=0"),
        format!("{prefix}hashes={}", hashes.join(",")),
        format!("{prefix}sig_len={}", c.signature.len()),
        format!("{prefix}signature={}", hex::encode(c.signature)),
    ]
}

fn ckpt_data(d: &CkptData<'_>) -> Vec<String> {
    vec![
        format!("kind={}", d.kind.code()),
        "reserved=000000".into(),
        format!("owner={}", d.owner),
        format!("offset={}", d.offset),
        format!("total={}", d.total),
        format!("chunk={}", hex::encode(d.chunk)),
    ]
}

/// The six fields of a collective header (protocol §7.3).
pub fn collective_header(h: &CollectiveHeader) -> Vec<String> {
    vec![
        format!("operation={}", h.operation.code()),
        format!("element_type={}", h.element_type),
        format!("reduction={}", h.reduction),
        format!("phase={}", h.phase as u8),
        format!("root={}", h.root),
        format!("sequence={}", h.sequence),
    ]
}

pub fn payload(p: &Payload<'_>) -> String {
    let v: Vec<String> = match p {
        Payload::Hello(h) => {
            let t = h.token.message_bytes.len() + 2 + h.token.signature.len();
            let mut v = vec![
                "protocol_version=1".into(),
                "reserved=0".into(),
                format!("features={}", h.features),
                format!("token_len={t}"),
            ];
            v.extend(token(&h.token, "token."));
            v
        }
        Payload::Data(d) => vec![format!("message={}", hex::encode(d.0))],
        Payload::Collective(c) => {
            let mut v = collective_header(&c.header);
            v.push(format!("data={}", hex::encode(c.data)));
            v
        }
        Payload::Heartbeat(h) => vec![format!("counter={}", h.counter)],
        Payload::Abort(a) => vec![
            format!("reason={}", a.reason.code()),
            "reserved=0".into(),
            format!("code={}", a.code),
            format!("message={}", hex::encode(a.message)),
        ],
        Payload::CkptBegin(b) => vec!["version=1".into(), format!("size={}", b.size)],
        Payload::CkptData(d) => ckpt_data(d),
        Payload::CkptAck(a) => vec![format!("sha256={}", a.sha256)],
        Payload::CkptCommit(c) => commit(c, "commit."),
        Payload::Resume(r) => {
            let mut v = vec![
                format!("status={}", r.status.code()),
                "reserved=00000000000000".into(),
            ];
            if let Some(c) = &r.commit {
                v.extend(commit(c, "commit."));
            }
            v
        }
        Payload::Bye(_) => vec![],
        // Rendered by the recover-payload entries (protocol §18.10).
        Payload::Recover(bytes) => vec![format!("payload={}", hex::encode(bytes))],
    };
    v.join(" ")
}

pub fn rank_file_header(h: &RankFileHeader) -> String {
    format!(
        "magic=SPCK version=1 job={} epoch={} rank={} size={} payload_length={} payload_sha256={}",
        h.job_id, h.epoch, h.rank, h.size, h.payload_length, h.payload_sha256
    )
}

pub fn job_description(d: &JobDescription) -> String {
    let hosts: Vec<String> = d
        .hosts
        .iter()
        .map(|e| format!("{}:{}", e.host, e.port))
        .collect();
    format!(
        "version=1 job={} size={} rank={} incarnation={} hosts={} job_public_key={} join_token={} ca_cert_pem={} rank_cert_pem={} job_secret_key={} rank_key_pem={}",
        d.job_id,
        d.size,
        d.rank,
        d.incarnation,
        hosts.join(","),
        hex::encode(&d.job_public_key),
        hex::encode(&d.join_token),
        hex::encode(&d.ca_cert_pem),
        hex::encode(&d.rank_cert_pem),
        hex::encode(&d.job_secret_key),
        hex::encode(&d.rank_key_pem),
    )
}

/// A `signed:` value.
pub fn signed(start: usize, end: usize, context: &[u8]) -> String {
    format!("{start}..{end} {}", String::from_utf8_lossy(context))
}
