//! CommitFile::decode and commit_file::decode_file: both must agree; a
//! decoded file must re-encode to the same bytes, `signed` must be its
//! first 40 + 32·size bytes, and the checks on it must not panic.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::commit_file::{assemble, decode_file, signed_message, CommitFile};
use sperli_wire::limits::{commit_file_len, COMMIT_FIXED_LEN, MAX_SIZE, SIGNATURE_LEN};
use sperli_wire::Codec;

fuzz_target!(|data: &[u8]| {
    let a = CommitFile::decode(data);
    let b = decode_file(data);
    assert_eq!(a.is_ok(), b.is_ok(), "CommitFile::decode and decode_file disagree");
    if let Err(e) = &b {
        common::touch_error(e);
    }
    let (Ok(c), Ok(c2)) = (a, b) else {
        return;
    };
    assert_eq!(c, c2);
    assert!(c.epoch >= 1 && (1..=MAX_SIZE).contains(&c.size));
    assert_eq!(c.hashes.len(), c.size as usize);
    assert_eq!(data.len(), commit_file_len(c.size));
    let signed_len = COMMIT_FIXED_LEN + 32 * c.size as usize;
    assert_eq!(c.signed, &data[..signed_len]);
    assert_eq!(c.signature.len(), SIGNATURE_LEN);
    assert_eq!(signed_message(c.job_id, c.epoch, &c.hashes), c.signed);
    let sig: &[u8; SIGNATURE_LEN] = c.signature.try_into().unwrap();
    common::assert_same("COMMIT assemble", data, &assemble(c.signed, sig));
    common::assert_same("COMMIT", data, &c.to_vec());
    assert!(c.check_expected(c.job_id, c.epoch, c.size).is_ok());
    let mut errors = vec![
        c.check_expected(sperli_wire::JobId([0xee; 16]), c.epoch, c.size),
        c.check_expected(c.job_id, c.epoch.wrapping_add(1), c.size),
        c.check_expected(c.job_id, c.epoch, c.size.wrapping_add(1)),
    ];
    for rank in [0, c.size - 1, c.size, u32::MAX] {
        assert_eq!(c.hash_of(rank).is_some(), rank < c.size);
        errors.push(c.check_entry(rank, data));
    }
    for e in errors.iter().filter_map(|r| r.as_ref().err()) {
        common::touch_error(e);
    }
});
