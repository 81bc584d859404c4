//! JoinToken::decode and JoinTokenMessage::decode: a decoded token or
//! message must re-encode to the same bytes; a token's message_bytes must
//! decode to its message.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::host;
use sperli_wire::join_token::{JoinToken, JoinTokenMessage};
use sperli_wire::Codec;

fn check_message(bytes: &[u8], m: &JoinTokenMessage<'_>) {
    assert!(host::validate(m.host).is_ok(), "decoded an invalid host {:?}", m.host);
    common::assert_same("join-token message", bytes, &m.to_vec());
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = JoinTokenMessage::decode(data) {
        check_message(data, &m);
    }
    let t = JoinToken::decode(data);
    if let Err(e) = &t {
        common::touch(e);
    }
    if let Ok(t) = t {
        let m = JoinTokenMessage::decode(t.message_bytes).expect("message_bytes decode");
        assert_eq!(m, t.message);
        check_message(t.message_bytes, &m);
        common::assert_same("join token", data, &t.to_vec());
        common::assert_same(
            "join token assemble",
            data,
            &JoinToken::assemble(t.message_bytes, t.signature),
        );
    }
});
