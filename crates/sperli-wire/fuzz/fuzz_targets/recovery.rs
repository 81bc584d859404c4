//! The decoders of HELLO feature bit 5 (protocol §18): the MEMBERSHIP
//! record, the REPORT record and the RECOVER payload. The first byte picks
//! the decoder (mod 3); for RECOVER the next 8 bytes are the job size and
//! the sender (little-endian), the rest the payload. No input panics; an
//! accepted input re-encodes to the same bytes; every refusal has its
//! H-code and a readable message.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::recovery::{MembershipRecord, RecoverPayload, RecoveryError, Report};

fn refused(e: &RecoveryError) {
    common::touch(e);
    let _ = format!("{}", e.h_code());
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    match pick % 3 {
        0 => match MembershipRecord::decode(rest) {
            Ok(r) => {
                common::assert_same("MEMBERSHIP", rest, &r.encode());
                let signed = r.signed_bytes();
                assert!(rest.starts_with(&signed), "signed bytes are a prefix");
            }
            Err(e) => refused(&e),
        },
        1 => match Report::decode(rest) {
            Ok(r) => common::assert_same("REPORT", rest, &r.encode()),
            Err(e) => refused(&e),
        },
        _ => {
            if rest.len() < 8 {
                return;
            }
            let size = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let sender = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
            let payload = &rest[8..];
            match RecoverPayload::decode(payload, size, sender) {
                Ok(p) => {
                    common::assert_same("RECOVER", payload, &p.encode());
                    if let RecoverPayload::Revoke { suspects } = &p {
                        assert!(suspects.windows(2).all(|w| w[0] < w[1]));
                        assert!(suspects.iter().all(|s| *s < size && *s != sender));
                    }
                }
                Err(e) => refused(&e),
            }
        }
    }
});
