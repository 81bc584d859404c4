//! `pipeline::CollectivePayload::decode` (feature bit 1, protocol §14.2)
//! and `ChunkStream` (protocol §14.4).
//!
//! Input: one byte of features (bit 1 of it is the job's bit 1; bit 0 is
//! always set), then records of `u16 len` (little-endian) + a COLLECTIVE
//! payload, taken in order from one sender. A payload that decodes must
//! re-encode to the same bytes and follow the §14.2 rules; its chunks go
//! through one `ChunkStream` whose total is the first chunk's: the ranges
//! it hands out are contiguous from 0 and never pass the total.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::collective::Phase;
use sperli_wire::limits::{FEATURE_PIPELINED, FEATURE_V1_CORE};
use sperli_wire::pipeline::{
    encode_chunk, encode_open, Body, ChunkStream, CollectivePayload, CHUNK_ALIGN,
};

fuzz_target!(|data: &[u8]| {
    let Some((&f, mut rest)) = data.split_first() else {
        return;
    };
    let features = FEATURE_V1_CORE | (u64::from(f) & FEATURE_PIPELINED);
    let mut stream: Option<ChunkStream> = None;
    let mut end = 0u64;
    while let Some((len, tail)) = rest.split_first_chunk::<2>() {
        let n = usize::from(u16::from_le_bytes(*len)).min(tail.len());
        let (p, next) = tail.split_at(n);
        rest = next;
        let c = match CollectivePayload::decode(p, features) {
            Ok(c) => c,
            Err(e) => {
                common::touch(&e);
                continue;
            }
        };
        if features & FEATURE_PIPELINED == 0 {
            assert!(!c.header.phase.pipelined(), "a pipelined phase without bit 1");
            assert!(!c.header.operation.pipelined_only(), "operation 7/8 without bit 1");
        }
        let mut out = Vec::new();
        match c.body {
            Body::Star(d) => {
                assert!(matches!(c.header.phase, Phase::ToRoot | Phase::FromRoot));
                out.extend_from_slice(&c.header.to_bytes());
                out.extend_from_slice(d);
            }
            Body::Open(o) => {
                assert!(o.total >= 1 && o.fanout >= 1);
                encode_open(&c.header, o, &mut out);
            }
            Body::Chunk(h, d) => {
                assert!(!d.is_empty());
                let stop = h.offset.checked_add(d.len() as u64).expect("no overflow");
                assert!(stop <= h.total, "a chunk past the end decoded");
                assert!(stop == h.total || d.len() % CHUNK_ALIGN == 0);
                let s = stream.get_or_insert_with(|| ChunkStream::new(h.total));
                if let Ok(r) = s.take(&h, d.len()) {
                    assert_eq!(r.start, end, "ranges are contiguous");
                    assert!(r.end <= s.total());
                    end = r.end;
                }
                encode_chunk(&c.header, h, d, &mut out);
            }
        }
        common::assert_same("pipelined COLLECTIVE payload", p, &out);
    }
});
