//! The other decoders of the mailbox: reply records (a record count from
//! the first byte), the envelope, a status block, the request split and
//! the manifest. Decoded records re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sperli_mailbox::files::Manifest;
use sperli_mailbox::layout::Opcode;
use sperli_mailbox::envelope::{Envelope, Status};
use sperli_mailbox::records::{split_request, RankReply, Target};

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    if let Ok(rs) = RankReply::decode_all(rest, u32::from(n % 8)) {
        let mut b = Vec::new();
        for r in &rs {
            r.encode_into(&mut b);
        }
        assert_eq!(b, rest);
    }
    if let Ok(e) = Envelope::decode(rest, 1 + u32::from(n)) {
        assert_eq!(&e.encode()[..], rest);
    }
    if let Some(s) = Status::decode(rest) {
        assert_eq!(&s.encode()[..], rest);
    }
    let target = match n % 3 {
        0 => Target::Group,
        1 => Target::Rank(u32::from(n >> 2)),
        _ => Target::PerRank,
    };
    let world = 1 + u32::from(n >> 4);
    if let Ok(ranges) = split_request(Opcode::Task, target, u32::from(n >> 3), rest, world) {
        for r in ranges {
            assert!(r.end <= rest.len());
        }
    }
    if let Ok(text) = std::str::from_utf8(rest) {
        if let Ok(m) = Manifest::parse(text) {
            assert_eq!(Manifest::parse(&m.to_text()), Ok(m));
        }
    }
});
