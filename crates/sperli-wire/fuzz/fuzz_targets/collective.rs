//! Collective::decode and CollectiveHeader::read: a decoded payload must
//! re-encode to the same bytes; the header reads exactly 16 bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::collective::{Collective, CollectiveHeader};
use sperli_wire::limits::COLLECTIVE_HEADER_LEN;
use sperli_wire::{Codec, ElementType, Reader, Reduction};

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    let header = CollectiveHeader::read(&mut r);
    if let Ok(h) = &header {
        assert_eq!(r.used(), COLLECTIVE_HEADER_LEN);
        common::assert_same("COLLECTIVE header", &data[..COLLECTIVE_HEADER_LEN], &h.to_bytes());
        if h.operation.reduces() {
            // The header's codes are in range; whether the pair is allowed
            // is the caller's check.
            assert!(ElementType::from_code(h.element_type).is_ok());
            assert!(Reduction::from_code(h.reduction).is_ok());
        } else {
            assert_eq!((h.element_type, h.reduction), (0, 0));
        }
    }
    let c = Collective::decode(data);
    if let Err(e) = &c {
        common::touch(e);
    }
    assert_eq!(c.is_ok(), header.is_ok(), "Collective::decode and the header read disagree");
    if let Ok(c) = c {
        assert_eq!(Ok(c.header), header);
        assert_eq!(c.data, &data[COLLECTIVE_HEADER_LEN..]);
        common::assert_same("COLLECTIVE", data, &c.to_vec());
    }
});
