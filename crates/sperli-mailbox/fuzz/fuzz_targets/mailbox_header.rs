//! Header::decode: a decoded header re-encodes to the same 256 bytes; the
//! attach checks never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sperli_mailbox::layout::{Header, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    match Header::decode(data) {
        Ok(h) => {
            assert_eq!(&h.encode()[..], &data[..HEADER_LEN]);
            let _ = h.check_fresh(h.world_size);
            let _ = h.check_world(4);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
