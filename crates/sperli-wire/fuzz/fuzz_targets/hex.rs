//! hex::decode: decoded text must re-encode to the same (lowercase) text;
//! hex::encode of the input must decode back to it.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::hex;

fuzz_target!(|data: &[u8]| {
    if let Ok(bytes) = hex::decode(data) {
        assert_eq!(bytes.len() * 2, data.len());
        common::assert_same("hex", data, hex::encode(&bytes).as_bytes());
    }
    let text = hex::encode(data);
    assert_eq!(hex::decode(text.as_bytes()).as_deref(), Ok(data));
});
