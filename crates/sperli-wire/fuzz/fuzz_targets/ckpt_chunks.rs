//! ChunkTracker, ChunkAssembler and chunks (protocol §7.8).
//!
//! 1. The input as records (`u16 len` LE + payload): every record that
//!    decodes as CKPT_DATA goes to one tracker and one assembler (kind and
//!    owner of the first decoded record). Both must agree; a refused chunk
//!    must leave them unchanged; an accepted one must append exactly its
//!    chunk, never pass the total, and nothing may follow completion.
//! 2. The input as a file: chunks() must split it into payloads that decode
//!    and that an assembler joins back into the same bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::ckpt_chunks::{chunks, ChunkAssembler, ChunkTracker};
use sperli_wire::ckpt_data::{CkptData, CkptDataKind};
use sperli_wire::Codec;

fuzz_target!(|data: &[u8]| {
    let mut asm: Option<(ChunkTracker, ChunkAssembler)> = None;
    let mut joined: Vec<u8> = Vec::new();
    for rec in common::records(data) {
        let Ok(d) = CkptData::decode(rec) else {
            continue;
        };
        let (t, a) = asm.get_or_insert_with(|| {
            (ChunkTracker::new(d.kind, d.owner), ChunkAssembler::new(d.kind, d.owner))
        });
        let before = t.clone();
        let was_complete = t.is_complete();
        let got = t.accept(&d);
        assert_eq!(got, a.push(&d), "tracker and assembler disagree");
        assert_eq!(a.tracker(), &*t);
        match got {
            Ok(()) => {
                assert!(!was_complete, "chunk accepted after completion");
                assert_eq!(d.kind, t.kind());
                assert_eq!(d.owner, t.owner());
                assert_eq!(d.offset, before.received());
                assert_eq!(t.total(), Some(d.total));
                if let Some(total) = before.total() {
                    assert_eq!(total, d.total, "total changed");
                }
                joined.extend_from_slice(d.chunk);
                assert_eq!(t.received(), joined.len() as u64);
                assert!(t.received() <= d.total, "assembled past the total");
                assert_eq!(t.is_complete(), t.received() == d.total);
            }
            Err(e) => assert_eq!(*t, before, "refused chunk changed the tracker: {e}"),
        }
    }
    if let Some((_, a)) = asm {
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
