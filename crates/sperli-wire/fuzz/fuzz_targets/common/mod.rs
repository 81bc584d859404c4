//! Helpers shared by the sperli-wire fuzz targets (`mod common;` in each).
#![allow(dead_code)]

use sperli_wire::header::Receiver;
use sperli_wire::JobId;

/// Bytes a receiver takes: job id (16), own rank, peer rank, incarnation,
/// size (4 each, little-endian). The size's low 13 bits are the size; bits
/// 1 and 2 of its top byte are the job's HELLO features 1 and 2 (bit 0 is
/// always set), so a v1 receiver has a top byte of 0.
pub const RECEIVER_LEN: usize = 32;

/// Lowercase hex, for panic messages.
pub fn hex(bytes: &[u8]) -> String {
    sperli_wire::hex::encode(bytes)
}

/// A receiver read from up to [`RECEIVER_LEN`] bytes; missing bytes are 0.
pub fn receiver(bytes: &[u8]) -> Receiver {
    let mut b = [0u8; RECEIVER_LEN];
    let n = bytes.len().min(RECEIVER_LEN);
    b[..n].copy_from_slice(&bytes[..n]);
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let mut job = [0u8; 16];
    job.copy_from_slice(&b[..16]);
    Receiver {
        job_id: JobId(job),
        own_rank: u32_at(16),
        peer_rank: u32_at(20),
        incarnation: u32_at(24),
        size: u32_at(28) & 0x1fff,
        // Bits 1, 2 and 5 (protocol §18.2: type 12 and the epoch checks).
        features: 1 | (u64::from(b[31]) & 0b10_0110),
        membership_epoch: u32::from(b[31] >> 6),
    }
}

/// Panics unless `encoded == input`, naming `what` and both byte strings.
pub fn assert_same(what: &str, input: &[u8], encoded: &[u8]) {
    if input != encoded {
        let first = input
            .iter()
            .zip(encoded)
            .position(|(a, b)| a != b)
            .unwrap_or(input.len().min(encoded.len()));
        panic!(
            "{what}: decode/encode mismatch (first difference at byte {first}; \
             input {} bytes, re-encoding {} bytes)\n input:     {}\n re-encoded: {}",
            input.len(),
            encoded.len(),
            hex(input),
            hex(encoded)
        );
    }
}

/// Splits `data` into records of `u16 len` (LE) + `len` bytes; a short last
/// record takes what is left.
pub fn records(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        rest = &rest[2..];
        let n = len.min(rest.len());
        out.push(&rest[..n]);
        rest = &rest[n..];
    }
    out
}

/// Formats an error (Display and Debug) so a panic in either is found.
pub fn touch<E: std::fmt::Display + std::fmt::Debug>(e: &E) {
    let _ = format!("{e} {e:?}");
}

/// Formats an [`sperli_wire::Error`] and asks for its H-code.
pub fn touch_error(e: &sperli_wire::Error) {
    touch(e);
    if let Some(code) = e.h_code() {
        let _ = format!("{code}");
    }
}
