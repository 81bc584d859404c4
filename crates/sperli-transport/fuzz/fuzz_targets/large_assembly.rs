//! Fuzzing of `LargeAssembly`, the receiver of the `send_large`
//! convention: the input is a program of frames, each cut into pieces
//! anywhere (the length prefix too). Invariants: no panic, never more
//! bytes than the announced total, and once complete exactly that many;
//! after an error the assembly is dropped (as the receive fails with it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sperli_transport::proto::large::LargeAssembly;

fuzz_target!(|data: &[u8]| {
    let mut a = LargeAssembly::new();
    // Each frame: one byte giving the piece size, then the frame's bytes
    // up to the next 0xff marker.
    for frame in data.split(|b| *b == 0xff) {
        let Some((&piece, bytes)) = frame.split_first() else {
            continue;
        };
        let piece = usize::from(piece).max(1);
        for p in bytes.chunks(piece) {
            if a.push(p).is_err() {
                return;
            }
            if let Some(total) = a.total() {
                assert!(a.received() <= total);
            }
        }
        match a.end_frame() {
            Ok(true) => {
                assert_eq!(Some(a.received()), a.total());
                return;
            }
            Ok(false) => {}
            Err(_) => return,
        }
    }
});
