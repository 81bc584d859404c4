//! The vectors of HELLO feature bit 3 (protocol §16): DATA frames whose
//! payload starts with the DATA header, for receivers with and without
//! the bit, and `message-stream` entries (the DATA frames one receiver
//! takes from one peer, described by their fields, with what the receiver
//! holds, judged by the checks of §16.4), derived with
//! `sperli_wire::data_header` and `sperli_wire::message_stream`.

use sperli_wire::codec::Codec;
use sperli_wire::data_header::{DataFrame, DataHeader, DataKind};
use sperli_wire::error::DecodeError;
use sperli_wire::frame::encode_frame_bytes;
use sperli_wire::header::FrameHeader;
use sperli_wire::hex;
use sperli_wire::limits::{
    FEATURE_COMMUNICATORS, FEATURE_P2P_COMMUNICATORS, FEATURE_V1_CORE, MAX_COMMUNICATOR_ID,
};
use sperli_wire::match_notice::MatchNotice;
use sperli_wire::message_stream::{Arrival, MessageStream, Route};
use sperli_wire::{FrameType, JobId};

use super::communicators::{derived, parse_communicators, Known};
use super::verify::{derive, num};
use super::Entry;

/// Bits 0 and 3.
const P2P: u64 = FEATURE_V1_CORE | FEATURE_P2P_COMMUNICATORS;
/// Bits 0, 2 and 3.
const P2P_COMMS: u64 = P2P | FEATURE_COMMUNICATORS;

const JOB: JobId = JobId([
    0x5b, 0x1e, 0x4c, 0x0d, 0x2a, 0x77, 0x40, 0x19, 0x8e, 0x3f, 0x61, 0xd2, 0x09, 0xa4, 0xc3, 0x5e,
]);
const SIZE: u32 = 3;
const INC: u32 = 2;

// ---- frames -------------------------------------------------------------------

/// A DATA payload of a job with bit 3 in the vectors' field-list notation,
/// or why it does not decode (protocol §16.2).
pub fn frame_payload(payload: &[u8]) -> Result<String, DecodeError> {
    let f = DataFrame::decode(payload)?;
    Ok(format!(
        "communicator={} kind={} reserved=000000 message={} total={} data={}",
        f.header.communicator,
        f.header.kind.code(),
        f.header.message,
        f.header.total,
        hex::encode(f.data)
    ))
}

fn data_frame(name: &str, features: Option<u64>, tag: u32, payload: &[u8], verdict: &str) -> Entry {
    let mut rx = format!("job={JOB} rank=1 peer=2 incarnation={INC} size={SIZE}");
    if let Some(f) = features {
        rx.push_str(&format!(" features={f}"));
    }
    let h = FrameHeader::new(FrameType::Data, JOB, 2, 1, INC).with_tag(tag);
    let e = Entry::new(name, "frame")
        .with("receiver", rx)
        .with("bytes", hex::encode(&encode_frame_bytes(h, payload)));
    let e = derive(e).unwrap_or_else(|why| panic!("{name}: {why}"));
    assert_eq!(e.get("verdict"), Some(verdict), "{name}");
    e
}

fn message(communicator: u32, kind: DataKind, number: u64, total: u64, data: &[u8]) -> Vec<u8> {
    DataFrame {
        header: DataHeader {
            communicator,
            kind,
            message: number,
            total,
        },
        data,
    }
    .to_vec()
}

fn frames() -> Vec<Entry> {
    use DataKind::*;
    let sync = message(3, Synchronous, 1, 5, b"hello");
    let notice = MatchNotice {
        communicator: 3,
        message: 4,
    }
    .to_vec();
    let mut v = vec![
        data_frame(
            "frame-data-standard-on-the-job",
            Some(P2P),
            7,
            &message(0, Standard, 1, 3, b"abc"),
            "accept",
        ),
        data_frame(
            "frame-data-synchronous-on-communicator-3",
            Some(P2P_COMMS),
            7,
            &sync,
            "accept",
        ),
        data_frame(
            "frame-data-empty-message",
            Some(P2P),
            0,
            &message(0, Standard, 9, 0, b""),
            "accept",
        ),
        data_frame(
            "frame-data-first-of-several-frames",
            Some(P2P_COMMS),
            7,
            &message(5, Standard, 2, 1 << 30, b"xyz"),
            "accept",
        ),
        data_frame(
            "frame-data-largest-communicator-id",
            Some(P2P_COMMS),
            7,
            &message(MAX_COMMUNICATOR_ID, Standard, 1, 1, b"z"),
            "accept",
        ),
        data_frame(
            "frame-data-match-notice",
            Some(P2P_COMMS),
            7,
            &notice,
            "accept",
        ),
        // A frame of bit 3 at a v1 receiver is a valid v1 message (16.1).
        data_frame(
            "frame-data-bit-3-form-in-a-v1-job-is-a-message",
            None,
            7,
            &sync,
            "accept",
        ),
        data_frame(
            "reject-data-v1-payload-with-bit-3",
            Some(P2P),
            7,
            b"v1 message",
            "reject H1610 payload",
        ),
    ];
    let bad = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = sync.clone();
        f(&mut b);
        b
    };
    let cases: [(&str, Vec<u8>); 8] = [
        ("reject-data-header-truncated", sync[..23].to_vec()),
        (
            "reject-data-communicator-id-reserved",
            bad(&|b| b[3] = 0x80),
        ),
        ("reject-data-kind-3", bad(&|b| b[4] = 3)),
        ("reject-data-reserved-byte", bad(&|b| b[6] = 1)),
        ("reject-data-message-number-0", bad(&|b| b[8] = 0)),
        ("reject-data-more-data-than-total", bad(&|b| b[16] = 4)),
        ("reject-data-notice-with-a-total", {
            let mut b = notice.clone();
            b[16] = 1;
            b
        }),
        ("reject-data-notice-with-data", {
            let mut b = notice.clone();
            b.push(0);
            b
        }),
    ];
    for (name, p) in cases {
        v.push(data_frame(
            name,
            Some(P2P_COMMS),
            7,
            &p,
            "reject H1610 payload",
        ));
    }
    v
}

// ---- message-stream -------------------------------------------------------------

fn nums(item: &str, n: usize) -> Result<Vec<u64>, String> {
    let v: Vec<u64> = item
        .split('/')
        .map(|x| x.parse().map_err(|_| format!("{item}: not numbers")))
        .collect::<Result<_, _>>()?;
    if v.len() != n {
        return Err(format!("{item}: {n} numbers separated by /"));
    }
    Ok(v)
}

fn items(s: &str) -> impl Iterator<Item = &str> {
    s.split(' ').filter(|x| !x.is_empty() && *x != "none")
}

/// Fills in `outcomes`, `verdict` and (reject only) `at` of a
/// `message-stream` entry.
pub fn derive_stream(e: Entry) -> Result<Entry, String> {
    let rx = e.get("receiver").unwrap_or("");
    let me: u32 = num(rx, "rank")?;
    let peer: u32 = num(rx, "peer")?;
    let features: u64 = num(rx, "features")?;
    if features & FEATURE_P2P_COMMUNICATORS == 0 {
        return Err("a message stream needs feature bit 3".into());
    }
    let frame_data: u64 = num(rx, "frame_data")?;
    if frame_data == 0 {
        return Err("frame_data is at least 1".into());
    }
    let comms = parse_communicators(e.get("communicators").unwrap_or(""), me)?;
    let known = Known {
        comms,
        highest: num(rx, "highest")?,
        making: false,
    };
    let mut s = MessageStream::with_frame_data(frame_data);
    for item in items(e.get("sent").unwrap_or("")) {
        let v = nums(item, 3)?;
        let comm = u32::try_from(v[1]).map_err(|_| "sent communicator")?;
        let tag = u32::try_from(v[2]).map_err(|_| "sent tag")?;
        s.sent_synchronous(v[0], comm, tag);
    }
    let can_make = features & FEATURE_COMMUNICATORS != 0;
    let mut outcomes = Vec::new();
    let frames = e.get("frames").unwrap_or("").to_string();
    for (i, item) in items(&frames).enumerate() {
        let v = nums(item, 6)?;
        let tag = u32::try_from(v[0])
            .ok()
            .filter(|t| *t <= 0x7fff_ffff)
            .ok_or("frame tag")?;
        let communicator = u32::try_from(v[1])
            .ok()
            .filter(|c| *c <= MAX_COMMUNICATOR_ID)
            .ok_or("frame communicator")?;
        let kind = u8::try_from(v[2])
            .ok()
            .and_then(DataKind::from_code)
            .ok_or("frame kind")?;
        let h = DataHeader {
            communicator,
            kind,
            message: v[3],
            total: v[4],
        };
        let len = v[5];
        // Only frames that pass the decode rules of §16.2 are described.
        let decodes = h.message >= 1
            && if kind.is_message() {
                len <= h.total && len <= sperli_wire::limits::MAX_MESSAGE_FRAME_DATA as u64
            } else {
                h.total == 0 && len == 0
            };
        if !decodes {
            return Err(format!("frame {i} does not decode by protocol §16.2"));
        }
        match s.arrive(tag, &h, len as usize, peer, &known, can_make) {
            Ok(Arrival::Message {
                message,
                last,
                route,
                ..
            }) => outcomes.push(match (last, route) {
                (false, _) => format!("part:{message}"),
                (true, Route::Keep) => format!("keep:{message}"),
                (true, Route::Pending) => format!("pending:{message}"),
            }),
            Ok(Arrival::Notice { message }) => outcomes.push(format!("notice:{message}")),
            Err(err) => {
                return Ok(e
                    .with("outcomes", outcome_line(&outcomes))
                    .with("verdict", format!("reject H1610 {}", err.check()))
                    .with("at", i.to_string()));
            }
        }
    }
    Ok(e.with("outcomes", outcome_line(&outcomes))
        .with("verdict", "accept"))
}

fn outcome_line(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(" ")
    }
}

fn stream(name: &str, rx: &str, comms: &str, sent: &str, frames: &str, verdict: &str) -> Entry {
    derived(
        name,
        "message-stream",
        &[
            ("receiver", rx),
            ("communicators", comms),
            ("sent", sent),
            ("frames", frames),
        ],
        verdict,
    )
}

fn streams() -> Vec<Entry> {
    // Rank 1 of 4, peer 2; communicators 0, 3 = {1, 2}, 5 = {0, 1}; frames
    // of 4 data bytes stand for frames of 16777192.
    let comms = "0:0,1,2,3 3:1,2 5:0,1";
    let rx = "rank=1 peer=2 features=13 highest=5 frame_data=4";
    let no_bit_2 = "rank=1 peer=2 features=9 highest=0 frame_data=4";
    let job = "0:0,1,2,3";
    let ok = "accept";
    let s = |name, rx, comms, sent, frames, verdict| stream(name, rx, comms, sent, frames, verdict);
    vec![
        s(
            "stream-messages-in-order",
            rx,
            comms,
            "none",
            "7/0/0/1/3/3 7/3/1/2/0/0 9/0/0/3/4/4",
            ok,
        ),
        s(
            "stream-message-of-three-frames",
            rx,
            comms,
            "none",
            "7/3/0/1/10/4 7/3/0/1/10/4 7/3/0/1/10/2 7/3/0/2/1/1",
            ok,
        ),
        s(
            "stream-notice-between-frames-of-a-message",
            rx,
            comms,
            "4/3/9",
            "7/3/1/1/8/4 9/3/2/4/0/0 7/3/1/1/8/4",
            ok,
        ),
        s(
            "stream-other-frame-types-do-not-count",
            rx,
            comms,
            "none",
            "7/0/0/1/0/0",
            ok,
        ),
        s(
            "stream-pending-communicator-being-made",
            rx,
            comms,
            "none",
            "7/6/1/1/5/4 7/6/1/1/5/1 7/9/0/2/0/0",
            ok,
        ),
        s(
            "stream-pending-judged-again-kept",
            "rank=1 peer=2 features=13 highest=6 frame_data=4",
            "0:0,1,2,3 3:1,2 5:0,1 6:1,2",
            "none",
            "7/6/1/1/5/4 7/6/1/1/5/1",
            ok,
        ),
        s(
            "stream-pending-judged-again-not-a-member",
            "rank=1 peer=2 features=13 highest=6 frame_data=4",
            "0:0,1,2,3 6:0,1",
            "none",
            "7/6/1/1/5/4",
            "reject H1610 communicator",
        ),
        s(
            "stream-pending-judged-again-no-color",
            "rank=1 peer=2 features=13 highest=6 frame_data=4",
            comms,
            "none",
            "7/6/1/1/5/4",
            "reject H1610 communicator",
        ),
        s(
            "stream-first-number-not-1",
            rx,
            comms,
            "none",
            "7/0/0/2/1/1",
            "reject H1610 message_number",
        ),
        s(
            "stream-number-skipped",
            rx,
            comms,
            "none",
            "7/0/0/1/1/1 7/0/0/3/1/1",
            "reject H1610 message_number",
        ),
        s(
            "stream-number-repeated",
            rx,
            comms,
            "none",
            "7/0/0/1/1/1 7/0/0/1/1/1",
            "reject H1610 message_number",
        ),
        s(
            "stream-another-message-between-frames",
            rx,
            comms,
            "none",
            "7/0/0/1/10/4 7/0/0/2/1/1",
            "reject H1610 continuation",
        ),
        s(
            "stream-continuation-other-tag",
            rx,
            comms,
            "none",
            "7/0/0/1/10/4 8/0/0/1/10/4",
            "reject H1610 continuation",
        ),
        s(
            "stream-continuation-other-communicator",
            rx,
            comms,
            "none",
            "7/0/0/1/10/4 7/3/0/1/10/4",
            "reject H1610 continuation",
        ),
        s(
            "stream-continuation-other-kind",
            rx,
            comms,
            "none",
            "7/0/0/1/10/4 7/0/1/1/10/4",
            "reject H1610 continuation",
        ),
        s(
            "stream-continuation-other-total",
            rx,
            comms,
            "none",
            "7/0/0/1/10/4 7/0/0/1/11/4",
            "reject H1610 continuation",
        ),
        s(
            "stream-frame-not-full",
            rx,
            comms,
            "none",
            "7/0/0/1/10/3",
            "reject H1610 length",
        ),
        s(
            "stream-last-frame-short",
            rx,
            comms,
            "none",
            "7/0/0/1/10/4 7/0/0/1/10/4 7/0/0/1/10/1",
            "reject H1610 length",
        ),
        s(
            "stream-empty-frame-of-a-message-with-bytes",
            rx,
            comms,
            "none",
            "7/0/0/1/2/0",
            "reject H1610 length",
        ),
        s(
            "stream-sender-not-a-member",
            rx,
            comms,
            "none",
            "7/5/0/1/1/1",
            "reject H1610 communicator",
        ),
        s(
            "stream-id-left-behind",
            rx,
            comms,
            "none",
            "7/4/0/1/1/1",
            "reject H1610 communicator",
        ),
        s(
            "stream-communicator-without-bit-2",
            no_bit_2,
            job,
            "none",
            "7/1/0/1/1/1",
            "reject H1610 communicator",
        ),
        s(
            "stream-job-communicator-without-bit-2",
            no_bit_2,
            job,
            "none",
            "7/0/1/1/1/1",
            ok,
        ),
        s(
            "stream-notice-for-a-standard-message",
            rx,
            comms,
            "none",
            "7/0/2/1/0/0",
            "reject H1610 notice",
        ),
        s(
            "stream-notice-twice",
            rx,
            comms,
            "2/0/7",
            "7/0/2/2/0/0 7/0/2/2/0/0",
            "reject H1610 notice",
        ),
        s(
            "stream-notice-other-communicator",
            rx,
            comms,
            "2/3/7",
            "7/0/2/2/0/0",
            "reject H1610 notice_fields",
        ),
        s(
            "stream-notice-other-tag",
            rx,
            comms,
            "2/3/7",
            "8/3/2/2/0/0",
            "reject H1610 notice_fields",
        ),
        s(
            "stream-notices-in-any-order",
            rx,
            comms,
            "2/3/7 5/0/1",
            "1/0/2/5/0/0 7/3/2/2/0/0",
            ok,
        ),
    ]
}

/// Every bit-3 entry.
pub fn entries() -> Vec<Entry> {
    let mut v = frames();
    v.extend(streams());
    v
}
