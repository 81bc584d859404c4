//! rank_file::verify_rank_file and RankFileHeader::decode.
//!
//! The expectation is derived from the header bytes themselves (job id,
//! epoch, rank, size at offsets 8..40, read raw), so the job/epoch/rank/size
//! checks pass and the length and SHA-256 checks are reached; a second call
//! uses an expectation from the last 32 bytes of the input. A verified file
//! must be exactly build_rank_file(header fields, state).
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::ids::{JobId, Sha256Digest};
use sperli_wire::limits::RANK_FILE_HEADER_LEN;
use sperli_wire::rank_file::{
    build_rank_file, verify_rank_file, whole_file_hash, RankFileExpect, RankFileHeader,
};
use sperli_wire::Codec;

fn expect_from(b: &[u8]) -> RankFileExpect {
    let mut x = [0u8; 32];
    let n = b.len().min(32);
    x[..n].copy_from_slice(&b[..n]);
    let mut job = [0u8; 16];
    job.copy_from_slice(&x[..16]);
    RankFileExpect {
        job_id: JobId(job),
        epoch: u64::from_le_bytes(x[16..24].try_into().unwrap()),
        rank: u32::from_le_bytes(x[24..28].try_into().unwrap()),
        size: u32::from_le_bytes(x[28..32].try_into().unwrap()),
    }
}

fn verify(data: &[u8], expect: &RankFileExpect) {
    let state = match verify_rank_file(data, expect) {
        Ok(state) => state,
        Err(e) => return common::touch_error(&e),
    };
    assert_eq!(state, &data[RANK_FILE_HEADER_LEN..]);
    let h = RankFileHeader::decode(&data[..RANK_FILE_HEADER_LEN]).expect("verified header decodes");
    assert_eq!(
        (h.job_id, h.epoch, h.rank, h.size),
        (expect.job_id, expect.epoch, expect.rank, expect.size),
        "verified a file for another expectation"
    );
    assert_eq!(h.payload_length, state.len() as u64);
    assert_eq!(h.payload_sha256, Sha256Digest::of(state));
    let rebuilt = build_rank_file(h.job_id, h.epoch, h.rank, h.size, state);
    common::assert_same("rank file", data, &rebuilt);
    assert_eq!(whole_file_hash(&rebuilt), Sha256Digest::of(data));
}

fuzz_target!(|data: &[u8]| {
    if let Some(head) = data.get(..RANK_FILE_HEADER_LEN) {
        if let Ok(h) = RankFileHeader::decode(head) {
            common::assert_same("rank file header", head, &h.to_vec());
        }
    }
    // Header bytes 8..40 are job id (16), epoch (8), rank (4), size (4).
    let derived = expect_from(data.get(8..40).unwrap_or(&[]));
    verify(data, &derived);
    let tail = &data[data.len().saturating_sub(32)..];
    verify(data, &expect_from(tail));
});
