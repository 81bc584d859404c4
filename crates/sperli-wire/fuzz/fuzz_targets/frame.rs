//! frame::decode_frame: the first 32 bytes are the receiver (job id, own
//! rank, peer rank, incarnation, size), the rest is one whole frame. An
//! accepted frame must re-encode (encode_frame) to the same bytes and agree
//! with header::check.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::frame::{decode_frame, encode_frame, Received};
use sperli_wire::header::{check, Verdict};
use sperli_wire::limits::HEADER_LEN;

fuzz_target!(|data: &[u8]| {
    if data.len() < common::RECEIVER_LEN {
        return;
    }
    let (rx_bytes, frame) = data.split_at(common::RECEIVER_LEN);
    let rx = common::receiver(rx_bytes);
    let result = decode_frame(frame, &rx);
    let verdict = frame
        .split_first_chunk::<HEADER_LEN>()
        .map(|(head, _)| check(head, &rx));
    match result {
        Ok(Received::Accept(h, payload)) => {
            assert_eq!(verdict, Some(Verdict::Accept(h)), "decode_frame and check disagree");
            assert_eq!(payload.frame_type(), h.frame_type);
            assert_eq!(frame.len(), HEADER_LEN + h.length as usize);
            common::assert_same("frame", frame, &encode_frame(h, &payload));
        }
        Ok(Received::Discard) => match verdict {
            Some(Verdict::Discard { length }) => {
                assert_eq!(frame.len(), HEADER_LEN + length as usize)
            }
            other => panic!("decode_frame discarded, check said {other:?}"),
        },
        Err(e) => common::touch(&e),
    }
});
