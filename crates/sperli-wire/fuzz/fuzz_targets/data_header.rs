//! data_header::DataFrame::decode (HELLO feature bit 3, protocol §16.2):
//! the input is one DATA payload. A decoded payload must re-encode to the
//! same bytes (the header has one encoding: reserved bytes 0, the data is
//! the rest), its fields must keep the decode rules, and a failure must
//! name one of the rules of §16.2. A whole message in one payload
//! (total = data length) is split again by `split_message` into frames of
//! 1..=16 data bytes (from the first data byte), which must decode, carry
//! the same header and join to the same data.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::data_header::{rule_name, split_message, DataFrame, DataHeader, DataKind};
use sperli_wire::error::FrameError;
use sperli_wire::limits::{DATA_HEADER_LEN, MAX_COMMUNICATOR_ID};
use sperli_wire::match_notice::MatchNotice;
use sperli_wire::{Codec, Error, FrameType, HCode};

/// The decode rules of protocol §16.2.
const RULES: [&str; 7] = [
    "data_header",
    "communicator_id",
    "kind",
    "reserved",
    "message_zero",
    "data_length",
    "notice_body",
];

fuzz_target!(|data: &[u8]| {
    let f = match DataFrame::decode(data) {
        Ok(f) => f,
        Err(e) => {
            let rule = rule_name(&e);
            assert!(
                RULES.contains(&rule),
                "{e:?} names no rule of §16.2: {rule}"
            );
            if data.len() < DATA_HEADER_LEN {
                assert_eq!(rule, "data_header", "short payload");
            }
            let e = Error::FrameRejected(FrameError::Payload {
                frame_type: FrameType::Data,
                error: e,
            });
            assert_eq!(e.h_code(), Some(HCode::H1610));
            return common::touch_error(&e);
        }
    };
    common::assert_same("DATA payload", data, &f.to_vec());
    let h = f.header;
    assert_eq!(&h.to_bytes()[..], &data[..DATA_HEADER_LEN]);
    assert!(h.communicator <= MAX_COMMUNICATOR_ID && h.message >= 1);
    assert_eq!(DataKind::from_code(h.kind.code()), Some(h.kind));
    if h.kind.is_message() {
        assert!(f.data.len() as u64 <= h.total, "more data than the total");
        assert!(
            MatchNotice::decode(data).is_err(),
            "a message frame read as a notice"
        );
    } else {
        assert!(h.total == 0 && f.data.is_empty(), "a notice with a body");
        let n = MatchNotice::decode(data).expect("a notice payload is a match notice");
        assert_eq!(n.header(), h);
    }

    let max = usize::from(f.data.first().copied().unwrap_or(0) % 16) + 1;
    let frames = DataHeader::frames_of_with(h.total, max as u64);
    // ⌈total / max⌉ frames, at least one: the last holds 1..=max bytes (0
    // for an empty message).
    let (n, m, total) = (u128::from(frames), max as u128, u128::from(h.total));
    assert!(n >= 1 && (n - 1) * m <= total.saturating_sub(1) && total <= n * m);
    if !h.kind.is_message() || h.total != f.data.len() as u64 {
        return;
    }
    let mut parts = Vec::new();
    split_message(h, f.data, max, |p| parts.push(p));
    assert_eq!(
        parts.len() as u64,
        frames,
        "frames of {} bytes by {max}",
        h.total
    );
    let mut joined = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let g = DataFrame::decode(p).expect("a frame of split_message decodes");
        assert_eq!(g.header, h);
        if i + 1 < parts.len() {
            assert_eq!(g.data.len(), max, "frame {i} is not full");
        }
        joined.extend_from_slice(g.data);
    }
    assert_eq!(joined, f.data);
});
