//! header::check: the first 52 bytes are the header, the next 32 the
//! receiver (job id, own rank, peer rank, incarnation, size; missing bytes 0).
//! Accept must re-encode to the same 52 bytes and satisfy every rule;
//! Discard must be an older incarnation, or with feature bit 5 an older
//! membership epoch (protocol §18.2).
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::header::{check, payload_length_rule, RawHeader, Verdict};
use sperli_wire::limits::{
    FEATURE_COMMUNICATORS, HEADER_LEN, MAX_COMMUNICATOR_ID, MAX_PAYLOAD, MAX_USER_TAG,
};
use sperli_wire::recovery::FEATURE_MEMBERSHIP;
use sperli_wire::FrameType;

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<HEADER_LEN>() else {
        return;
    };
    let rx = common::receiver(rest);
    let raw = RawHeader::from_bytes(head);
    common::assert_same("RawHeader", head, &raw.to_bytes());
    match check(head, &rx) {
        Verdict::Accept(h) => {
            common::assert_same("accepted header", head, &h.to_bytes());
            assert_eq!(h.job_id, rx.job_id, "accepted another job");
            assert_eq!(h.source, rx.peer_rank, "accepted another source");
            assert_eq!(h.target, rx.own_rank, "accepted another target");
            assert_eq!(h.incarnation, rx.incarnation, "accepted another incarnation");
            assert!(h.length <= MAX_PAYLOAD);
            let (min, max) = payload_length_rule(h.frame_type, rx.size);
            assert!(
                (min..=max).contains(&h.length),
                "accepted length {} outside {min}..={max}",
                h.length
            );
            assert!(h.frame_type.epoch_allowed(h.epoch));
            // Check 5: 0 without bit 5; with it never newer than the
            // receiver's epoch (protocol §18.2).
            if rx.features & FEATURE_MEMBERSHIP == 0 {
                assert_eq!(h.membership_epoch, 0, "a membership epoch without bit 5");
            } else {
                assert!(h.membership_epoch <= rx.membership_epoch, "a newer epoch");
            }
            // Check 12 (protocol §6.2), and protocol §15.2: with HELLO
            // feature bit 2 a COLLECTIVE tag is the communicator id.
            if h.frame_type == FrameType::Data {
                assert!(h.tag <= MAX_USER_TAG);
            } else if h.frame_type == FrameType::Collective
                && rx.features & FEATURE_COMMUNICATORS != 0
            {
                assert!(h.tag <= MAX_COMMUNICATOR_ID);
            } else {
                assert_eq!(h.tag, 0);
            }
        }
        Verdict::Discard { length } => {
            assert_eq!(length, raw.length);
            let older_epoch = rx.features & FEATURE_MEMBERSHIP != 0
                && raw.membership_epoch < rx.membership_epoch;
            assert!(
                raw.incarnation < rx.incarnation || older_epoch,
                "discarded a current frame"
            );
            assert!(length <= MAX_PAYLOAD);
        }
        Verdict::Reject(e) => common::touch(&e),
    }
});
