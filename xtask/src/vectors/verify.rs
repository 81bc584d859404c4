//! Derives every stated line of an entry from its input lines with the
//! sperli-wire decoders. The generator writes what this derives; `--check`
//! re-derives and compares, so an entry whose bytes do not decode to what it
//! states fails.

use sperli_wire::codec::Codec;
use sperli_wire::commit_file::decode_file;
use sperli_wire::error::Error;
use sperli_wire::frame::{decode_frame, Received};
use sperli_wire::header::{check_name, Receiver};
use sperli_wire::hex;
use sperli_wire::job_description::{self, JobDescription};
use sperli_wire::join_token::{JoinToken, JoinTokenMessage};
use sperli_wire::limits::{CONTEXT_COMMIT, CONTEXT_JOIN, HEADER_LEN};
use sperli_wire::payload::Payload;
use sperli_wire::rank_file::{verify_rank_file, RankFileExpect, RankFileHeader};
use sperli_wire::refused_hosts::RefusedHosts;
use sperli_wire::{FrameType, JobId};

use super::{render, Entry};

/// The input keys of each kind, in order; every other line is derived.
pub fn inputs(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "frame" => &["receiver", "bytes"],
        "rank-file" | "commit-file" => &["expect", "bytes"],
        "job-description" => &["line"],
        "join-token-message" | "join-token" => &["bytes"],
        "reduce" => &["type", "reduction", "left", "right"],
        "collective-stream" => &["receiver", "call", "due", "frames"],
        "communicator-split" => &["parent", "exchange"],
        "communicator-take" => &["receiver", "communicators", "take", "frames"],
        "message-stream" => &["receiver", "communicators", "sent", "frames"],
        "fold" => &["type", "reduction", "ranks"],
        "membership-record" | "recover-payload" => &["receiver", "bytes"],
        "recovery-report" => &["bytes"],
        "membership-header" => &["receiver", "header"],
        "binomial-tree" => &["tree"],
        _ => return None,
    })
}

/// Checks that `e` states exactly what its inputs derive.
pub fn entry(e: &Entry) -> Result<(), String> {
    let kind = e.get("kind").ok_or("no kind")?;
    let keys = inputs(kind).ok_or_else(|| format!("unknown kind {kind}"))?;
    let mut input = Entry::new(e.name(), kind);
    for k in keys {
        input = input.with(k, e.get(k).ok_or_else(|| format!("missing {k}"))?);
    }
    let derived = derive(input)?;
    if derived.lines != e.lines {
        let diff = derived
            .lines
            .iter()
            .zip(&e.lines)
            .find(|(a, b)| a != b)
            .map(|(a, b)| format!("{} is {:?}, decodes as {:?}", b.0, short(&b.1), short(&a.1)))
            .unwrap_or_else(|| "a different set of lines".into());
        return Err(diff);
    }
    Ok(())
}

fn short(s: &str) -> String {
    if s.len() > 80 {
        format!("{}...", &s[..80])
    } else {
        s.to_string()
    }
}

pub(super) fn field<'a>(list: &'a str, key: &str) -> Result<&'a str, String> {
    list.split(' ')
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .ok_or_else(|| format!("no {key}= in {list:?}"))
}

pub(super) fn num<T: std::str::FromStr>(list: &str, key: &str) -> Result<T, String> {
    field(list, key)?
        .parse()
        .map_err(|_| format!("{key} is not a number"))
}

fn job(list: &str) -> Result<JobId, String> {
    let b = hex::decode(field(list, "job")?.as_bytes()).map_err(|e| e.to_string())?;
    Ok(JobId(b.try_into().map_err(|_| "job is not 16 bytes")?))
}

fn bytes_of(e: &Entry, key: &str) -> Result<Vec<u8>, String> {
    hex::decode(e.get(key).unwrap_or("").as_bytes()).map_err(|x| format!("{key}: {x}"))
}

/// Offset of `inner` within `outer` (both borrowed from one buffer).
fn offset(outer: &[u8], inner: &[u8]) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

fn signed_range(outer: &[u8], inner: &[u8], context: &[u8]) -> String {
    let start = offset(outer, inner);
    render::signed(start, start + inner.len(), context)
}

fn verdict_of(e: &Error) -> String {
    let code = e.h_code().map(|c| c.to_string()).unwrap_or_default();
    let check = match e {
        Error::UnexpectedFile { error, .. } => file_check(error),
        Error::HashMismatch { .. } => "sha256",
        Error::BadCommit(c) => match c {
            sperli_wire::error::CommitError::Malformed(d) => file_check(d),
            sperli_wire::error::CommitError::Job { .. } => "job",
            sperli_wire::error::CommitError::Epoch { .. } => "epoch",
            _ => "signature",
        },
        Error::CommitSizeMismatch { .. } => "size",
        Error::JobDescription(d) => job_description::check_name(d),
        Error::HostRefused { .. } => "host",
        _ => "other",
    };
    format!("reject {code} {check}")
}

fn file_check(d: &sperli_wire::error::DecodeError) -> &'static str {
    use sperli_wire::error::DecodeError as D;
    match d {
        D::Truncated { .. } => "truncated",
        D::TrailingBytes { .. } => "trailing",
        D::BadMagic { .. } => "magic",
        D::NotZero { .. } => "reserved",
        D::Mismatch { field, .. } | D::OutOfRange { field, .. } => match *field {
            "job_id" | "job_id[0..8]" | "job_id[8..16]" => "job",
            "file length" | "payload_length" => "length",
            f => f,
        },
        _ => "other",
    }
}

/// Fills in every derived line of an entry that holds only its inputs.
pub fn derive(e: Entry) -> Result<Entry, String> {
    match e.get("kind").unwrap_or("") {
        "frame" => frame(e),
        "rank-file" => rank_file(e),
        "commit-file" => commit_file(e),
        "job-description" => job_desc(e),
        "join-token-message" => {
            let b = bytes_of(&e, "bytes")?;
            let m = JoinTokenMessage::decode(&b).map_err(|x| x.to_string())?;
            Ok(e.clone()
                .with("fields", render::token_message(&m, "").join(" ")))
        }
        "join-token" => {
            let b = bytes_of(&e, "bytes")?;
            let t = JoinToken::decode(&b).map_err(|x| x.to_string())?;
            Ok(e.clone()
                .with("fields", render::token(&t, "").join(" "))
                .with("signed", signed_range(&b, t.message_bytes, CONTEXT_JOIN)))
        }
        "reduce" => reduce_entry(e),
        "collective-stream" => super::pipelined::derive_stream(e),
        "communicator-split" => super::communicators::derive_split(e),
        "communicator-take" => super::communicators::derive_take(e),
        "message-stream" => super::p2p::derive_stream(e),
        "fold" => super::element_types::derive_fold(e),
        "membership-record" => super::membership::derive_record(e),
        "recover-payload" => super::membership::derive_payload(e),
        "recovery-report" => super::membership::derive_report(e),
        "membership-header" => super::membership::derive_header(e),
        "binomial-tree" => super::binomial_tree::derive_tree(e),
        k => Err(format!("unknown kind {k}")),
    }
}

fn frame(e: Entry) -> Result<Entry, String> {
    let rx_line = e.get("receiver").unwrap_or("");
    // Protocol §12, §14.8, §15.5: a receiver judges the tag (check 12) and
    // a COLLECTIVE payload (check 13) with the job's features, `features=`
    // (absent: 1, v1 only).
    let features = match field(rx_line, "features") {
        Ok(_) => num(rx_line, "features")?,
        Err(_) => sperli_wire::limits::FEATURE_V1_CORE,
    };
    let rx = Receiver {
        job_id: job(rx_line)?,
        own_rank: num(rx_line, "rank")?,
        peer_rank: num(rx_line, "peer")?,
        incarnation: num(rx_line, "incarnation")?,
        size: num(rx_line, "size")?,
        features,
        membership_epoch: 0,
    };
    let b = bytes_of(&e, "bytes")?;
    if b.len() < HEADER_LEN {
        return Err("bytes shorter than a header".into());
    }
    let head: &[u8; HEADER_LEN] = b[..HEADER_LEN].try_into().map_err(|_| "header")?;
    if let sperli_wire::header::Verdict::Reject(err) = sperli_wire::header::check(head, &rx) {
        if b.len() != HEADER_LEN {
            return Err("a header-rejected frame carries no payload bytes".into());
        }
        return Ok(e.with("verdict", format!("reject H1610 {}", check_name(&err))));
    }
    // Protocol §16.2: with feature bit 3 every DATA payload starts with
    // the DATA header (check 13).
    if head[4] == FrameType::Data.code()
        && features & sperli_wire::limits::FEATURE_P2P_COMMUNICATORS != 0
    {
        if let sperli_wire::header::Verdict::Accept(h) = sperli_wire::header::check(head, &rx) {
            if b.len() != HEADER_LEN + h.length as usize {
                return Err("bytes do not hold the header's length of payload".into());
            }
            return Ok(match super::p2p::frame_payload(&b[HEADER_LEN..]) {
                Ok(p) => e
                    .with("verdict", "accept")
                    .with("header", render::header(&h))
                    .with("payload", p),
                Err(_) => e.with("verdict", "reject H1610 payload"),
            });
        }
    }
    if head[4] == FrameType::Collective.code() {
        if let sperli_wire::header::Verdict::Accept(h) = sperli_wire::header::check(head, &rx) {
            if b.len() != HEADER_LEN + h.length as usize {
                return Err("bytes do not hold the header's length of payload".into());
            }
            return Ok(
                match super::pipelined::frame_payload(&b[HEADER_LEN..], features) {
                    Ok(p) => e
                        .with("verdict", "accept")
                        .with("header", render::header(&h))
                        .with("payload", p),
                    Err(_) => e.with("verdict", "reject H1610 payload"),
                },
            );
        }
    }
    match decode_frame(&b, &rx) {
        Ok(Received::Discard) => Ok(e.with("verdict", "discard")),
        Ok(Received::Accept(h, p)) => {
            let signed = match &p {
                Payload::Hello(hello) => {
                    Some(signed_range(&b, hello.token.message_bytes, CONTEXT_JOIN))
                }
                Payload::CkptCommit(c) => Some(signed_range(&b, c.signed, CONTEXT_COMMIT)),
                Payload::Resume(r) => r
                    .commit
                    .as_ref()
                    .map(|c| signed_range(&b, c.signed, CONTEXT_COMMIT)),
                _ => None,
            };
            let mut out = e
                .clone()
                .with("verdict", "accept")
                .with("header", render::header(&h))
                .with("payload", render::payload(&p));
            if let Some(s) = signed {
                out = out.with("signed", s);
            }
            Ok(out)
        }
        Err(sperli_wire::error::FrameError::CutShort { .. }) => {
            Err("bytes do not hold the header's length of payload".into())
        }
        Err(err) => Ok(e.with("verdict", format!("reject H1610 {}", check_name(&err)))),
    }
}

fn rank_file(e: Entry) -> Result<Entry, String> {
    let x = e.get("expect").unwrap_or("");
    let expect = RankFileExpect {
        job_id: job(x)?,
        epoch: num(x, "epoch")?,
        rank: num(x, "rank")?,
        size: num(x, "size")?,
    };
    let b = bytes_of(&e, "bytes")?;
    match verify_rank_file(&b, &expect) {
        Ok(state) => {
            let h = RankFileHeader::decode(&b[..80]).map_err(|x| x.to_string())?;
            Ok(e.with("verdict", "accept")
                .with("header", render::rank_file_header(&h))
                .with("state", hex::encode(state)))
        }
        Err(err) => Ok(e.with("verdict", verdict_of(&err))),
    }
}

fn commit_file(e: Entry) -> Result<Entry, String> {
    let x = e.get("expect").unwrap_or("");
    let (j, epoch, size) = (job(x)?, num(x, "epoch")?, num(x, "size")?);
    let b = bytes_of(&e, "bytes")?;
    let c = match decode_file(&b) {
        Ok(c) => c,
        Err(err) => return Ok(e.with("verdict", verdict_of(&err))),
    };
    if let Err(err) = c.check_expected(j, epoch, size) {
        return Ok(e.with("verdict", verdict_of(&err)));
    }
    Ok(e.clone()
        .with("verdict", "accept")
        .with("fields", render::commit(&c, "").join(" "))
        .with("signed", signed_range(&b, c.signed, CONTEXT_COMMIT)))
}

fn job_desc(e: Entry) -> Result<Entry, String> {
    let mut line = e.get("line").unwrap_or("").as_bytes().to_vec();
    line.push(b'\n');
    match JobDescription::from_line(&line, &RefusedHosts::builtin()) {
        Err(err) => Ok(e.with("verdict", verdict_of(&err))),
        Ok(d) => {
            let t = JoinToken::decode(&d.join_token).map_err(|x| x.to_string())?;
            let start = token_offset(&d);
            Ok(e.clone()
                .with("verdict", "accept")
                .with("fields", render::job_description(&d))
                .with(
                    "signed",
                    render::signed(start, start + t.message_bytes.len(), CONTEXT_JOIN),
                ))
        }
    }
}

/// Offset of the join token's first byte in an encoded description.
fn token_offset(d: &JobDescription) -> usize {
    30 + d.hosts.iter().map(|h| 3 + h.host.len()).sum::<usize>()
        + sperli_wire::limits::PUBLIC_KEY_LEN
        + 2
}

fn reduce_entry(e: Entry) -> Result<Entry, String> {
    let (t, r) = super::element_types::type_and_reduction(&e)?;
    let left = parse_elements(e.get("left").unwrap_or(""), t.width())?;
    let right = parse_elements(e.get("right").unwrap_or(""), t.width())?;
    let result =
        super::element_types::result_line(sperli_wire::reduce::combine(&left, &right, t, r), t, r);
    Ok(e.with("result", result))
}

pub(super) fn parse_elements(s: &str, width: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for el in s.split(' ').filter(|x| !x.is_empty()) {
        let b = hex::decode(el.as_bytes()).map_err(|x| x.to_string())?;
        if b.len() != width {
            return Err(format!("element {el} is not {width} bytes"));
        }
        out.extend(b);
    }
    Ok(out)
}
