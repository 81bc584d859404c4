//! failure_record::FailureRecord::parse: the launcher reads a rank's
//! record file (at most MAX_RECORD_BYTES of it, as UTF-8: anything else is
//! no record) and parses it. The input is the file. A record read must
//! write back as one line that reads as the same record, no longer than
//! the file (plus its newline), with no control character in the ABORT's
//! message. The input as an ABORT message and as missing ranks (u32 LE)
//! must also go through `FailureRecord::of`, `to_line` and `parse`
//! unchanged (the rank's side of the file).
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::failure_record::{FailureRecord, MAX_RECORD_BYTES};
use sperli_wire::limits::MAX_ABORT_MESSAGE;
use sperli_wire::Error;

/// `r` written and read back.
fn round_trip(r: &FailureRecord) -> String {
    let line = r.to_line();
    assert!(
        line.ends_with('\n') && line.matches('\n').count() == 1,
        "{line:?}"
    );
    assert_eq!(FailureRecord::parse(&line).as_ref(), Some(r), "{line:?}");
    if let Some(a) = &r.abort {
        assert!(a.message.len() <= MAX_ABORT_MESSAGE);
        assert!(!a.message.chars().any(char::is_control), "{:?}", a.message);
    }
    line
}

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(MAX_RECORD_BYTES as usize)];
    let text = String::from_utf8_lossy(data);
    if let Ok(file) = std::str::from_utf8(data) {
        if let Some(r) = FailureRecord::parse(file) {
            let line = round_trip(&r);
            // Unknown fields go, numbers lose their spelling ("H01" is
            // H1), control characters become spaces: never longer.
            assert!(
                line.len() <= file.len() + 1,
                "the record grew: {file:?} -> {line:?}"
            );
        }
    }

    let [a, b, c, d, e, f, g, ..] = *data else {
        return;
    };
    let aborted = Error::AbortedByPeer {
        from: u32::from_le_bytes([a, b, c, d]),
        reason: u16::from_le_bytes([e, f]),
        code: u32::from(g),
        message: text.into_owned(),
    };
    let r = FailureRecord::of(&aborted);
    assert_eq!(r.code, 1612);
    round_trip(&r);
    let missing = data
        .chunks_exact(4)
        .map(|x| u32::from_le_bytes(x.try_into().unwrap()));
    let timeout = Error::SetupTimeout {
        after_ms: 30_000,
        missing: missing.collect(),
    };
    let r = FailureRecord::of(&timeout);
    assert!(
        r.missing.windows(2).all(|w| w[0] < w[1]),
        "missing ranks not ascending"
    );
    round_trip(&r);
});
