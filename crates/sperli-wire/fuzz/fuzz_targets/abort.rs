//! Abort::decode: a decoded ABORT must re-encode to the same bytes; the
//! message is at most 1024 bytes. truncate_message must cut on a char
//! boundary.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::limits::MAX_ABORT_MESSAGE;
use sperli_wire::Codec;

fuzz_target!(|data: &[u8]| {
    let a = Abort::decode(data);
    if let Err(e) = &a {
        common::touch(e);
    }
    if let Ok(a) = a {
        assert!(a.message.len() <= MAX_ABORT_MESSAGE);
        assert_eq!(AbortReason::from_code(a.reason.code()), a.reason);
        let _ = a.message_lossy();
        let _ = a.reason.to_string();
        common::assert_same("ABORT", data, &a.to_vec());
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let t = Abort::truncate_message(s);
        assert!(t.len() <= MAX_ABORT_MESSAGE && s.starts_with(t));
    }
});
