//! CkptData::decode and ChunkAssembler.
//!
//! 1. The whole input as one CKPT_DATA payload: a decoded payload must
//!    re-encode to the same bytes and obey the payload rules.
//! 2. The input as records (`u16 len` LE + payload): every record that
//!    decodes is pushed to one assembler (kind and owner of the first
//!    decoded chunk-carrying record). A refused push must leave the
//!    assembler unchanged; an accepted one must append exactly its chunk,
//!    never pass the total, and nothing may follow completion.
//! 3. The input as a file: chunks() must split it into payloads that decode
//!    and that an assembler joins back into the same bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::ckpt_data::{chunks, ChunkAssembler, CkptData, CkptDataKind};
use sperli_wire::limits::MAX_CKPT_CHUNK;
use sperli_wire::Codec;

fn decode_checked(bytes: &[u8]) -> Option<CkptData<'_>> {
    let d = CkptData::decode(bytes).ok()?;
    assert!(d.chunk.len() <= MAX_CKPT_CHUNK);
    if d.kind.carries_chunks() {
        assert!(d.offset.checked_add(d.chunk.len() as u64).is_some_and(|e| e <= d.total));
    } else {
        assert_eq!((d.offset, d.total, d.chunk.len()), (0, 0, 0));
    }
    common::assert_same("CKPT_DATA", bytes, &d.to_vec());
    Some(d)
}

fuzz_target!(|data: &[u8]| {
    decode_checked(data);

    let mut asm: Option<ChunkAssembler> = None;
    let mut joined: Vec<u8> = Vec::new();
    for rec in common::records(data) {
        let Some(d) = decode_checked(rec) else {
            continue;
        };
        let a = asm.get_or_insert_with(|| ChunkAssembler::new(d.kind, d.owner));
        let before = a.clone();
        let was_complete = a.is_complete();
        match a.push(&d) {
            Ok(()) => {
                assert!(!was_complete, "chunk accepted after completion");
                assert_eq!(d.kind, a.kind());
                assert_eq!(d.owner, a.owner());
                assert_eq!(d.offset, before.received());
                assert_eq!(a.total(), Some(d.total));
                if let Some(t) = before.total() {
                    assert_eq!(t, d.total, "total changed");
                }
                joined.extend_from_slice(d.chunk);
                assert_eq!(a.received(), joined.len() as u64);
                assert!(a.received() <= d.total, "assembled past the total");
                assert_eq!(a.is_complete(), a.received() == d.total);
            }
            Err(e) => {
                assert_eq!(*a, before, "refused push changed the assembler: {e}");
                let _ = sperli_wire::error::DecodeError::from(e);
            }
        }
    }
    if let Some(a) = asm {
        assert_eq!(a.into_bytes(), joined);
    }

    for kind in [CkptDataKind::Push, CkptDataKind::Reply] {
        let mut a = ChunkAssembler::new(kind, 7);
        for c in chunks(kind, 7, data) {
            let enc = c.to_vec();
            assert_eq!(CkptData::decode(&enc).as_ref(), Ok(&c), "chunks() made a bad payload");
            a.push(&c).expect("assembler refused a chunk from chunks()");
        }
        assert!(a.is_complete());
        assert_eq!(a.into_bytes(), data);
    }
});
