//! payload::Payload::decode and the small fixed codecs (Data, Heartbeat,
//! Bye, CkptBegin, CkptAck): the first byte is the frame type code, the
//! rest the payload. A decoded payload must re-encode to the same bytes.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::bye::Bye;
use sperli_wire::ckpt_ack::CkptAck;
use sperli_wire::ckpt_begin::CkptBegin;
use sperli_wire::data::Data;
use sperli_wire::heartbeat::Heartbeat;
use sperli_wire::payload::Payload;
use sperli_wire::{Codec, FrameType};

fn direct<'a, T: Codec<'a>>(bytes: &'a [u8]) {
    match T::decode(bytes) {
        Ok(v) => common::assert_same(T::NAME, bytes, &v.to_vec()),
        Err(e) => common::touch(&e),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&code, bytes)) = data.split_first() else {
        return;
    };
    direct::<Data>(bytes);
    direct::<Heartbeat>(bytes);
    direct::<Bye>(bytes);
    direct::<CkptBegin>(bytes);
    direct::<CkptAck>(bytes);
    let Some(t) = FrameType::from_code(code) else {
        return;
    };
    match Payload::decode(t, bytes) {
        Ok(p) => {
            assert_eq!(p.frame_type(), t);
            let mut out = Vec::new();
            p.encode(&mut out);
            common::assert_same(t.name(), bytes, &out);
        }
        Err(e) => common::touch_error(&sperli_wire::Error::FrameRejected(e)),
    }
});
