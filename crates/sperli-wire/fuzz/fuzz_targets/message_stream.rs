//! message_stream::MessageStream (HELLO feature bit 3, protocol §16.4):
//! state-machine fuzzing of one connection's stream of DATA frames from
//! its peer, as the receiver judges them.
//!
//! Input: 8 config bytes, then `u16 len` records (common::records).
//!
//! - byte 0: bits 0..=3 the frame data length - 1 (frames of 1..=16 data
//!   bytes), bit 4 whether the job can make communicators (feature bit 2),
//!   bits 5..=7 the peer's job rank (0..=7);
//! - byte 1: the receiver's highest communicator id (at least the largest
//!   id below);
//! - bytes 2..=4: up to three communicator ids this rank holds besides 0
//!   (0: none), bytes 5..=7 their member masks (bit r: job rank r is in it);
//!   communicator 0 holds every rank.
//!
//! A record whose first byte is 0 is this rank sending a synchronous
//! message to the peer (`sent_synchronous`): message u64, communicator
//! u32, tag u32 (missing bytes 0). Any other record is a DATA frame from
//! the peer: tag u32, then the DATA payload, decoded with `DataFrame` (a
//! failure there is only touched) and judged by `arrive`.
//!
//! A model of the connection checks each answer: a failure leaves the
//! state unchanged, names its check word and is H1610; the first frame of
//! a message has the next number, its continuations repeat its header and
//! tag, every frame but the last carries the frame data length and the
//! last the rest, a message ends in max(1, ⌈total / length⌉) frames, the
//! route is `message_stream::route` judged at the first frame, and a
//! notice is accepted exactly when it answers a waiting synchronous
//! message with its communicator and tag, which it then removes.
#![no_main]

mod common;

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use sperli_wire::communicator::Communicators;
use sperli_wire::data_header::{DataFrame, DataHeader, DataKind};
use sperli_wire::error::{FrameError, MessageError};
use sperli_wire::message_stream::{route, Arrival, MessageStream, Route};
use sperli_wire::{Codec, Error, FrameType, HCode};

const CONFIG_LEN: usize = 8;
const CHECKS: [&str; 6] = [
    "continuation",
    "message_number",
    "length",
    "communicator",
    "notice",
    "notice_fields",
];

/// The receiver's communicators: 0 (every rank) and up to three more.
struct Known {
    held: Vec<(u32, u8)>,
    highest: u32,
}

impl Communicators for Known {
    fn has_member(&self, id: u32, rank: u32) -> Option<bool> {
        if id == 0 {
            return Some(true);
        }
        let &(_, mask) = self.held.iter().find(|(i, _)| *i == id)?;
        Some(rank < 8 && mask >> rank & 1 == 1)
    }
    fn highest(&self) -> u32 {
        self.highest
    }
    fn making(&self) -> bool {
        false
    }
}

fn le(bytes: &[u8], at: usize, n: usize) -> u64 {
    (0..n).fold(0, |v, i| {
        v | u64::from(bytes.get(at + i).copied().unwrap_or(0)) << (8 * i)
    })
}

/// The message still coming, as the model sees it.
#[derive(Clone, Copy)]
struct Coming {
    tag: u32,
    header: DataHeader,
    received: u64,
    frames: u64,
    route: Route,
}

#[derive(Default)]
struct Model {
    last: u64,
    coming: Option<Coming>,
    waiting: BTreeMap<u64, (u32, u32)>,
}

fuzz_target!(|data: &[u8]| {
    if data.len() < CONFIG_LEN {
        return;
    }
    let (config, program) = data.split_at(CONFIG_LEN);
    let max = u64::from(config[0] & 0x0f) + 1;
    let can_make = config[0] & 0x10 != 0;
    let from = u32::from(config[0] >> 5);
    let held: Vec<(u32, u8)> = (0..3)
        .filter(|&i| config[2 + i] != 0)
        .map(|i| (u32::from(config[2 + i]), config[5 + i]))
        .collect();
    let highest = held
        .iter()
        .map(|h| h.0)
        .fold(u32::from(config[1]), u32::max);
    let known = Known { held, highest };

    let mut s = MessageStream::with_frame_data(max);
    let mut m = Model::default();
    for rec in common::records(program) {
        let Some((&op, rest)) = rec.split_first() else {
            continue;
        };
        if op == 0 {
            let (message, communicator, tag) = (le(rest, 0, 8), le(rest, 8, 4), le(rest, 12, 4));
            s.sent_synchronous(message, communicator as u32, tag as u32);
            m.waiting.insert(message, (communicator as u32, tag as u32));
        } else {
            let tag = le(rest, 0, 4) as u32;
            match DataFrame::decode(rest.get(4..).unwrap_or(&[])) {
                Ok(f) => judge(
                    &mut s,
                    &mut m,
                    tag,
                    &f.header,
                    f.data.len(),
                    from,
                    &known,
                    can_make,
                    max,
                ),
                Err(e) => common::touch_error(&Error::FrameRejected(FrameError::Payload {
                    frame_type: FrameType::Data,
                    error: e,
                })),
            }
        }
        assert!(
            s.waiting().eq(m.waiting.keys().copied()),
            "waiting notices differ from the model"
        );
    }
});

#[allow(clippy::too_many_arguments)]
fn judge(
    s: &mut MessageStream,
    m: &mut Model,
    tag: u32,
    h: &DataHeader,
    len: usize,
    from: u32,
    known: &Known,
    can_make: bool,
    max: u64,
) {
    let before = s.clone();
    let got = s.arrive(tag, h, len, from, known, can_make);
    let e = match got {
        Ok(a) => return accepted(m, a, tag, h, len as u64, from, known, can_make, max),
        Err(e) => e,
    };
    assert_eq!(*s, before, "a refused frame changed the state: {e:?}");
    assert!(CHECKS.contains(&e.check()));
    let word = e.check();
    // What the model says about a refused frame (the checks of §16.4 in
    // their order; the ones the model can tell alone).
    if h.kind == DataKind::Notice {
        let expect = match m.waiting.get(&h.message) {
            None => "notice",
            Some(_) => "notice_fields",
        };
        assert_eq!(word, expect, "{e:?}");
    } else if let Some(c) = m.coming {
        let same = (c.tag, c.header) == (tag, *h);
        assert_eq!(word == "continuation", !same, "{e:?}");
    } else {
        assert_eq!(word == "message_number", h.message != m.last + 1, "{e:?}");
    }
    if let MessageError::Communicator { highest, .. } = e {
        assert_eq!(highest, known.highest);
    }
    let e = Error::from(e);
    assert_eq!(e.h_code(), Some(HCode::H1610));
    common::touch_error(&e);
}

#[allow(clippy::too_many_arguments)]
fn accepted(
    m: &mut Model,
    a: Arrival,
    tag: u32,
    h: &DataHeader,
    len: u64,
    from: u32,
    known: &Known,
    can_make: bool,
    max: u64,
) {
    let (message, first, last, got_route) = match a {
        Arrival::Notice { message } => {
            assert_eq!(h.kind, DataKind::Notice, "{a:?} of a message frame");
            assert_eq!(message, h.message);
            let due = m.waiting.remove(&message);
            assert_eq!(
                due,
                Some((h.communicator, tag)),
                "notice of a message not waiting so"
            );
            return;
        }
        Arrival::Message {
            message,
            first,
            last,
            route,
        } => (message, first, last, route),
    };
    assert!(h.kind.is_message(), "{a:?} of a notice");
    assert_eq!(message, h.message);
    let mut c = match m.coming {
        Some(c) => {
            assert!(
                !first,
                "a first frame while message {} is coming",
                c.header.message
            );
            assert_eq!((c.tag, c.header), (tag, *h), "a continuation that differs");
            assert_eq!(got_route, c.route, "the route changed within a message");
            c
        }
        None => {
            assert!(first, "a continuation with no message coming");
            assert_eq!(
                message,
                m.last + 1,
                "message numbers must count 1, 2, 3, ..."
            );
            let r = route(h.communicator, from, message, known, can_make);
            assert_eq!(r, Ok(got_route), "the route of a first frame");
            if got_route == Route::Pending {
                assert!(can_make && h.communicator > known.highest);
            }
            m.last = message;
            Coming {
                tag,
                header: *h,
                received: 0,
                frames: 0,
                route: got_route,
            }
        }
    };
    assert_eq!(
        len,
        max.min(h.total - c.received),
        "a frame of the wrong length"
    );
    c.received += len;
    c.frames += 1;
    assert_eq!(last, c.received == h.total);
    if last {
        assert_eq!(c.frames, DataHeader::frames_of_with(h.total, max));
        m.coming = None;
    } else {
        m.coming = Some(c);
    }
}
