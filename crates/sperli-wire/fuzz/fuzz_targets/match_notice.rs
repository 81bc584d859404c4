//! match_notice::MatchNotice::decode (HELLO feature bit 3, protocol
//! §16.5): the input is one DATA payload. A notice is a DATA payload of
//! exactly 24 bytes with kind 2: it must decode exactly when
//! `DataFrame::decode` gives a frame of kind 2, with the same fields, and
//! re-encode to the same bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::data_header::{DataFrame, DataKind};
use sperli_wire::error::FrameError;
use sperli_wire::limits::DATA_HEADER_LEN;
use sperli_wire::match_notice::MatchNotice;
use sperli_wire::{Codec, Error, FrameType};

fuzz_target!(|data: &[u8]| {
    let frame = DataFrame::decode(data).ok();
    match MatchNotice::decode(data) {
        Ok(n) => {
            common::assert_same("match notice", data, &n.to_vec());
            assert_eq!(data.len(), DATA_HEADER_LEN);
            let f = frame.expect("a notice is a DATA payload");
            assert_eq!(f.header, n.header());
            assert!(f.data.is_empty());
        }
        Err(e) => {
            if let Some(f) = frame {
                assert_ne!(
                    f.header.kind,
                    DataKind::Notice,
                    "a notice payload refused: {e:?}"
                );
            }
            common::touch_error(&Error::FrameRejected(FrameError::Payload {
                frame_type: FrameType::Data,
                error: e,
            }));
        }
    }
});
