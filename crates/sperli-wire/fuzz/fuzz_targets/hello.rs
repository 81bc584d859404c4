//! Hello::decode: a decoded HELLO must re-encode to the same bytes, and its
//! token must be a JoinToken that re-encodes too.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::hello::Hello;
use sperli_wire::join_token::JoinToken;
use sperli_wire::limits::FEATURE_V1_CORE;
use sperli_wire::Codec;

fuzz_target!(|data: &[u8]| {
    let h = Hello::decode(data);
    if let Err(e) = &h {
        common::touch(e);
    }
    if let Ok(h) = h {
        assert!(h.features & FEATURE_V1_CORE != 0);
        let token = h.token.to_vec();
        assert_eq!(JoinToken::decode(&token).as_ref(), Ok(&h.token));
        common::assert_same("HELLO", data, &h.to_vec());
    }
});
