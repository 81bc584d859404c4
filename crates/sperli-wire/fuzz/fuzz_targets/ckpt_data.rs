//! CkptData::decode (protocol §7.8): the whole input as one CKPT_DATA
//! payload. A decoded payload must re-encode to the same bytes and obey
//! the payload rules. The chunk rules across frames are the `ckpt_chunks`
//! target.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::ckpt_data::CkptData;
use sperli_wire::limits::MAX_CKPT_CHUNK;
use sperli_wire::Codec;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = CkptData::decode(data) {
        assert!(d.chunk.len() <= MAX_CKPT_CHUNK);
        if d.kind.carries_chunks() {
            assert!(d.offset.checked_add(d.chunk.len() as u64).is_some_and(|e| e <= d.total));
        } else {
            assert_eq!((d.offset, d.total, d.chunk.len()), (0, 0, 0));
        }
        common::assert_same("CKPT_DATA", data, &d.to_vec());
    }
});
