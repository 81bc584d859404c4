//! State-machine fuzzing of the sans-I/O `Connection` (docs/reliability.md,
//! section 4): the input is a program of operations (frames, raw
//! bytes cut anywhere, an orderly close, a reset, clock ticks with `poll`,
//! BYE queued, output drained) run against one connection of rank 1 to its
//! peer rank 2 of a 3-rank job. A valid HELLO (signed once per process with
//! a real job key) is one of the operations, so the fuzzer reaches the open
//! state. Invariants checked after every operation:
//!
//! - no panic;
//! - after an error, every further `handle_bytes` fails with no event,
//!   `handle_close`/`handle_reset`/`poll` report nothing new, and the state
//!   stays `Closed`;
//! - nothing (DATA, COLLECTIVE, checkpoint, HELLO) is delivered after BYE,
//!   and nothing is delivered before `Authenticated`;
//! - the HEARTBEAT frames this side writes carry counters 1, 2, 3, ... and
//!   nothing is written after our BYE.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use sperli_transport::proto::connection::{ConnState, Connection, Incoming, JobContext, JobKey};
use sperli_tls::job_plan::JobPlan;
use sperli_wire::codec::Codec;
use sperli_wire::frame::{encode_frame, encode_frame_bytes};
use sperli_wire::header::FrameHeader;
use sperli_wire::hello::Hello;
use sperli_wire::join_token::JoinToken;
use sperli_wire::limits::HEADER_LEN;
use sperli_wire::payload::Payload;
use sperli_wire::FrameType;

struct Fixture {
    ctx: Arc<JobContext>,
    /// Rank 2's valid HELLO to rank 1.
    hello: Vec<u8>,
    /// Rank 1's own token (for `queue_hello`).
    own_token: Vec<u8>,
    now_ms: u64,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let plan = JobPlan::localhost(3).expect("job plan");
        let desc = plan.description(1);
        let ctx = JobContext {
            job_id: plan.job_id,
            size: 3,
            rank: 1,
            incarnation: plan.incarnation,
            hosts: plan.hosts.clone(),
            job_public_key: JobKey::new(desc.job_public_key.clone()),
            refused: sperli_wire::refused_hosts::RefusedHosts::builtin(),
            features: sperli_wire::limits::FEATURE_V1_CORE,
            membership: Default::default(),
        };
        let h = FrameHeader::new(FrameType::Hello, plan.job_id, 2, 1, plan.incarnation);
        let hello = Hello {
            features: 1,
            token: JoinToken::decode(plan.token(2)).expect("token"),
        };
        Fixture {
            ctx: Arc::new(ctx),
            hello: encode_frame(h, &Payload::Hello(hello)),
            own_token: plan.token(1).to_vec(),
            now_ms: sperli_transport::job::unix_ms(std::time::SystemTime::now()),
        }
    })
}

/// Parses the frames this side wrote; checks heartbeat counters and that
/// nothing follows BYE.
#[derive(Default)]
struct Written {
    buf: Vec<u8>,
    next_hb: u64,
    bye: bool,
}

impl Written {
    fn check(&mut self) {
        loop {
            if self.buf.len() < HEADER_LEN {
                return;
            }
            let len = u32::from_le_bytes(self.buf[..4].try_into().unwrap()) as usize;
            if self.buf.len() < HEADER_LEN + len {
                return;
            }
            let t = self.buf[4];
            assert!(!self.bye, "a frame of type {t} written after our BYE");
            if t == FrameType::Heartbeat.code() {
                assert_eq!(len, 8);
                let c = u64::from_le_bytes(self.buf[HEADER_LEN..HEADER_LEN + 8].try_into().unwrap());
                self.next_hb += 1;
                assert_eq!(c, self.next_hb, "heartbeat counters not consecutive");
            }
            if t == FrameType::Bye.code() {
                self.bye = true;
            }
            self.buf.drain(..HEADER_LEN + len);
        }
    }
}

/// A writer that takes at most `cap` bytes per call (partial writes).
struct Limited<'a> {
    out: &'a mut Vec<u8>,
    cap: usize,
}

impl std::io::Write for Limited<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = b.len().min(self.cap);
        self.out.extend_from_slice(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const TYPES: [FrameType; 11] = FrameType::ALL;

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let t0 = Instant::now();
    let mut now = t0;
    let mut conn = Connection::new(f.ctx.clone(), 2, Duration::from_millis(5000), now);
    let _ = conn.queue_hello(&f.own_token, now);
    let mut written = Written::default();
    let mut failed = false;
    let mut authenticated = false;
    let mut bye_seen = false;
    let mut hb_counter = 0u64;
    let mut input = data;
    let mut take = |n: usize| -> Vec<u8> {
        let n = n.min(input.len());
        let (a, b) = input.split_at(n);
        input = b;
        a.to_vec()
    };
    loop {
        let op = take(1);
        let Some(&op) = op.first() else { break };
        let mut events = Vec::new();
        let result = match op % 10 {
            // The valid HELLO, cut in two at a fuzzed point.
            0 => {
                let cut = take(1).first().copied().unwrap_or(0) as usize % (f.hello.len() + 1);
                let a = conn.handle_bytes(&f.hello[..cut], now, f.now_ms, &mut events);
                a.and_then(|()| conn.handle_bytes(&f.hello[cut..], now, f.now_ms, &mut events))
            }
            // A frame with a header that passes the checks for its type
            // (tag, epoch and payload fuzzed).
            1 => {
                let b = take(4);
                let t = TYPES[b.first().copied().unwrap_or(0) as usize % TYPES.len()];
                let len = b.get(1).copied().unwrap_or(0) as usize;
                let tag = u32::from(b.get(2).copied().unwrap_or(0) & 3);
                let epoch = u64::from(b.get(3).copied().unwrap_or(0) & 3);
                let payload = take(len);
                let h = FrameHeader::new(t, f.ctx.job_id, 2, 1, f.ctx.incarnation)
                    .with_tag(tag)
                    .with_epoch(epoch);
                conn.handle_bytes(&encode_frame_bytes(h, &payload), now, f.now_ms, &mut events)
            }
            // Raw bytes.
            2 => {
                let n = take(1).first().copied().unwrap_or(0) as usize;
                let raw = take(n);
                conn.handle_bytes(&raw, now, f.now_ms, &mut events)
            }
            3 => conn.handle_close(),
            4 => conn.handle_reset(sperli_wire::error::LossCause::Reset),
            // Clock: up to 2.55 s, then poll.
            5 => {
                let ms = take(1).first().copied().unwrap_or(0) as u64 * 10;
                now += Duration::from_millis(ms);
                conn.poll(now)
            }
            6 => {
                conn.queue_bye(now);
                Ok(())
            }
            // A heartbeat, in sequence or not.
            7 => {
                let skip = take(1).first().copied().unwrap_or(0);
                let c = if skip < 200 { hb_counter + 1 } else { u64::from(skip) };
                let h = FrameHeader::new(FrameType::Heartbeat, f.ctx.job_id, 2, 1, f.ctx.incarnation);
                let r = conn.handle_bytes(&encode_frame_bytes(h, &c.to_le_bytes()), now, f.now_ms, &mut events);
                if r.is_ok() && authenticated && !bye_seen {
                    hb_counter = c;
                }
                r
            }
            // Drain the output through partial writes.
            8 => {
                let cap = take(1).first().copied().unwrap_or(0) as usize + 1;
                let mut out = std::mem::take(&mut written.buf);
                let r = conn.write_to(&mut Limited { out: &mut out, cap: cap * 7 }, &mut |_| {});
                written.buf = out;
                written.check();
                r.map(|_| ()).map_err(|_| unreachable!())
            }
            // A queued DATA frame of ours.
            _ => {
                let n = take(1).first().copied().unwrap_or(0) as usize;
                conn.queue(FrameType::Data, vec![0x5a; n], now);
                Ok(())
            }
        };
        for e in &events {
            match e {
                Incoming::Authenticated { .. } => {
                    assert!(!authenticated, "authenticated twice");
                    authenticated = true;
                }
                Incoming::Bye => {
                    assert!(authenticated && !bye_seen, "BYE out of order");
                    bye_seen = true;
                }
                _ => {
                    assert!(authenticated, "delivered before HELLO: {e:?}");
                    assert!(!bye_seen, "delivered after BYE: {e:?}");
                }
            }
        }
        if failed {
            assert!(events.is_empty(), "events after an error: {events:?}");
            if matches!(op % 10, 0 | 1 | 2 | 7) {
                assert!(result.is_err(), "bytes accepted after an error");
            }
            if matches!(op % 10, 3 | 4 | 5) {
                assert!(result.is_ok(), "a second failure reported after the first");
            }
            assert_eq!(conn.state(), ConnState::Closed);
        }
        if result.is_err() {
            failed = true;
            assert_eq!(conn.state(), ConnState::Closed, "state after an error");
        }
        // After a close without error (after BYE) the connection is closed too.
        if matches!(op % 10, 3 | 4) && result.is_ok() {
            assert_eq!(conn.state(), ConnState::Closed);
            failed = true; // Closed: no more input is accepted.
        }
    }
    // Drain whatever is left and check it.
    let mut out = std::mem::take(&mut written.buf);
    let _ = conn.write_to(&mut out, &mut |_| {});
    written.buf = out;
    written.check();
});
