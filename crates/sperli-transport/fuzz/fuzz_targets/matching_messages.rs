//! State-machine fuzzing of the receive state with HELLO feature bit 3
//! (protocol §16): the input is a program of operations on one rank (rank
//! 0 of a 4-rank job) - DATA payloads from a peer, whole or handed over in
//! pieces as the transport streams them (header, data pieces, end), posted
//! receives on communicators, matched probes, cancels, communicators made
//! and freed, synchronous sends, local messages, taking the due notices.
//! Invariants checked after every operation:
//!
//! - no panic, whatever the bytes;
//! - once a frame is rejected the program stops (the connection, and the
//!   job, end there), so later operations never see a half-judged state;
//! - a completed receive's status length is the length of its message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sperli_transport::proto::matching::Matching;
use sperli_wire::limits::{FEATURE_COMMUNICATORS, FEATURE_P2P_COMMUNICATORS, FEATURE_V1_CORE};

const SIZE: u32 = 4;

/// Reads the program's bytes.
struct Ops<'a>(&'a [u8]);

impl Ops<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from(self.u8()?) | (u32::from(self.u8()?) << 8))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = (self.u8()? as usize).min(self.0.len());
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(b.to_vec())
    }
    /// A DATA payload: sometimes a well-formed DATA header (so the fuzzer
    /// reaches the checks of §16.4), else raw bytes.
    fn payload(&mut self) -> Option<Vec<u8>> {
        if self.u8()? % 2 == 0 {
            return self.bytes();
        }
        let comm = u32::from(self.u8()? % 4);
        let kind = self.u8()? % 3;
        let message = u64::from(self.u8()? % 5);
        let data = self.bytes()?;
        let total = match self.u8()? % 3 {
            0 => data.len() as u64,
            1 => data.len() as u64 + u64::from(self.u8()?),
            _ => 0,
        };
        let mut p = Vec::with_capacity(24 + data.len());
        p.extend_from_slice(&comm.to_le_bytes());
        p.push(kind);
        p.extend_from_slice(&[0; 3]);
        p.extend_from_slice(&message.to_le_bytes());
        p.extend_from_slice(&total.to_le_bytes());
        p.extend_from_slice(&data);
        Some(p)
    }
}

fn opt(v: u8, n: u32) -> Option<u32> {
    (v % 8 != 7).then_some(u32::from(v) % n)
}

fuzz_target!(|data: &[u8]| {
    let mut ops = Ops(data);
    let mut m = Matching::new(SIZE, 0);
    let bit2 = data.first().is_some_and(|b| b & 1 == 1);
    let features = FEATURE_V1_CORE
        | FEATURE_P2P_COMMUNICATORS
        | if bit2 { FEATURE_COMMUNICATORS } else { 0 };
    if m.set_features(features).is_err() {
        return;
    }
    let mut ids = Vec::new();
    while let Some(op) = ops.u8() {
        let Some(arg) = ops.u8() else { return };
        let from = 1 + u32::from(arg) % (SIZE - 1);
        let ok = match op % 10 {
            0 => {
                let Some(tag) = ops.u32() else { return };
                let Some(p) = ops.payload() else { return };
                m.handle_data(from, tag, p).is_ok()
            }
            1 => {
                // A frame as it streams: its header, its data in pieces.
                let Some(tag) = ops.u32() else { return };
                let Some(p) = ops.payload() else { return };
                let head = &p[..p.len().min(24)];
                let body = &p[head.len()..];
                if m.message_header(from, tag, head, body.len(), Vec::with_capacity).is_err() {
                    false
                } else {
                    let cut = (arg as usize).min(body.len());
                    m.message_data(from, &body[..cut]);
                    m.message_data(from, &body[cut..]);
                    m.message_end(from);
                    true
                }
            }
            2 => {
                let (Some(c), Some(s), Some(t)) = (ops.u8(), ops.u8(), ops.u8()) else { return };
                ids.push(m.post_on(u32::from(c % 4), opt(s, SIZE), opt(t, 4)));
                true
            }
            3 => {
                let (Some(c), Some(s)) = (ops.u8(), ops.u8()) else { return };
                if let Some((id, _)) = m.claim_on(u32::from(c % 4), opt(s, SIZE), None) {
                    ids.push(id);
                }
                true
            }
            4 => {
                if let Some(&id) = ids.get(arg as usize % ids.len().max(1)) {
                    m.try_cancel(id);
                    m.cancel(id);
                }
                true
            }
            5 => {
                let Some(c) = ops.u8() else { return };
                let members: Option<std::sync::Arc<[u32]>> =
                    (c % 3 != 0).then(|| (0..SIZE).filter(|r| c & (1 << r) != 0 || *r == 0).collect());
                m.communicator_made(u32::from(c % 6), members).is_ok()
            }
            6 => {
                m.communicator_freed(u32::from(arg % 6));
                true
            }
            7 => {
                let Some(t) = ops.u8() else { return };
                m.sent_synchronous(from, u64::from(arg % 5) + 1, u32::from(t % 4), u32::from(t));
                let _ = m.poll_notice(from, u64::from(arg % 5) + 1);
                true
            }
            8 => {
                let Some(p) = ops.bytes() else { return };
                m.handle_local(u32::from(arg % 4), u32::from(arg % 3), p, arg & 1 == 1);
                let _ = m.take_notices();
                true
            }
            _ => {
                for &id in &ids {
                    if let Some(Ok((st, msg))) = m.poll_recv(id) {
                        assert_eq!(st.len, msg.len(), "a status says its message's length");
                    }
                }
                let _ = m.probe_on(u32::from(arg % 4), None, None);
                true
            }
        };
        if !ok {
            // A rejected frame ends the connection and the job step.
            return;
        }
    }
});
