//! Resume::decode and Resume::decode_payload: both must agree, and a
//! decoded RESUME must re-encode to the same bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::limits::commit_file_len;
use sperli_wire::resume::{Resume, RESUME_FIXED_LEN};
use sperli_wire::Codec;

fuzz_target!(|data: &[u8]| {
    let a = Resume::decode(data);
    let b = Resume::decode_payload(data);
    assert_eq!(a.is_ok(), b.is_ok(), "decode and decode_payload disagree");
    if let Err(e) = &b {
        common::touch_error(e);
    }
    if let (Ok(a), Ok(b)) = (a, b) {
        assert_eq!(a, b);
        match &a.commit {
            Some(c) => {
                assert!(a.status.may_carry_commit());
                assert_eq!(data.len(), RESUME_FIXED_LEN + commit_file_len(c.size));
                assert!(a.check_header_epoch(c.epoch).is_ok());
            }
            None => assert_eq!(data.len(), RESUME_FIXED_LEN),
        }
        for epoch in [0, 1, u64::MAX] {
            if let Err(e) = a.check_header_epoch(epoch) {
                common::touch(&e);
            }
        }
        common::assert_same("RESUME", data, &a.to_vec());
    }
});
