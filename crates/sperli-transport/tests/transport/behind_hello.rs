//! A frame the text rejects, sent by an authenticated peer right behind its
//! valid HELLO, during set-up: in the same TCP segment (one TLS record) and
//! in the next one. It is the authenticated peer's frame, so the receiver
//! (rank 0) ends the job at once with H1610 naming the check and sends
//! ABORT reason 7 code 1610 (protocol §6.2, §7.5); the bystander (rank 1 of
//! 3) ends with H1612. It is never taken for a failed authentication,
//! which would only close the connection and end set-up at its deadline
//! with H1611 (protocol §5.3).
//!
//! The hostile peer is the highest rank, so every other rank dials it: it
//! finishes TLS with all of them, sends its HELLO to the bystander at once
//! and, once the bystander's set-up is done (so rank 0 has authenticated
//! the bystander, who then hears rank 0's ABORT), its HELLO and the bad
//! frame to rank 0.

use std::io::Write;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sperli_tls::job_plan::JobPlan;
use sperli_wire::frame::encode_frame_bytes;
use sperli_wire::header::{check_name, FrameHeader, RawHeader};
use sperli_wire::{Error, FrameType, JobId};

use crate::common::{code, held_listener, settings, start_rank, with_deadline};
use crate::hostile::{accept_as, hello, read_until};

/// Each way a frame is rejected (protocol §6.2 checks 1 to 13 that reject,
/// a skipped HEARTBEAT counter §7.4, a second HELLO §7.1, a frame after
/// BYE §7.6).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Length,
    Type0,
    Type12,
    Flags,
    Service,
    MembershipEpoch,
    Job,
    Source,
    Target,
    NewerIncarnation,
    Epoch,
    PayloadLength,
    DataTag,
    CollectiveTag,
    HeartbeatSkipped,
    HelloTwice,
    AfterBye,
}

impl Kind {
    /// The `check_name` of the error the receiver must report.
    fn check(self) -> &'static str {
        match self {
            Kind::Length => "length",
            Kind::Type0 | Kind::Type12 => "type",
            Kind::Flags => "flags",
            Kind::Service => "service",
            Kind::MembershipEpoch => "membership_epoch",
            Kind::Job => "job",
            Kind::Source => "source",
            Kind::Target => "target",
            Kind::NewerIncarnation => "incarnation",
            Kind::Epoch => "epoch",
            Kind::PayloadLength => "payload_length",
            Kind::DataTag | Kind::CollectiveTag => "tag",
            Kind::HeartbeatSkipped | Kind::HelloTwice | Kind::AfterBye => "payload",
        }
    }

    /// The bytes `from` sends to rank 0 right behind its HELLO.
    fn bytes(self, plan: &JobPlan, from: u32) -> Vec<u8> {
        let header = |t| FrameHeader::new(t, plan.job_id, from, 0, plan.incarnation);
        let data = header(FrameType::Data).to_raw();
        let head = |h: RawHeader| h.to_bytes().to_vec();
        match self {
            Kind::Length => head(RawHeader {
                length: (16 << 20) + 1,
                ..data
            }),
            Kind::Type0 => head(RawHeader {
                frame_type: 0,
                ..data
            }),
            Kind::Type12 => head(RawHeader {
                frame_type: 12,
                ..data
            }),
            Kind::Flags => head(RawHeader { flags: 1, ..data }),
            Kind::Service => head(RawHeader { service: 1, ..data }),
            Kind::MembershipEpoch => head(RawHeader {
                membership_epoch: 1,
                ..data
            }),
            Kind::Job => head(RawHeader {
                job_id: JobId([0x5a; 16]),
                ..data
            }),
            // Claims to come from the receiver itself.
            Kind::Source => head(RawHeader { source: 0, ..data }),
            Kind::Target => head(RawHeader {
                target: from,
                ..data
            }),
            Kind::NewerIncarnation => head(RawHeader {
                incarnation: plan.incarnation + 1,
                ..data
            }),
            Kind::Epoch => head(RawHeader { epoch: 1, ..data }),
            Kind::PayloadLength => head(RawHeader {
                length: 7,
                ..header(FrameType::Heartbeat).to_raw()
            }),
            Kind::DataTag => head(RawHeader {
                tag: 1 << 31,
                ..data
            }),
            // The hostile HELLO announces feature bit 0 only: no
            // communicators, so a COLLECTIVE tag must be 0 (check 12).
            Kind::CollectiveTag => {
                encode_frame_bytes(header(FrameType::Collective).with_tag(5), &[0; 16])
            }
            Kind::HeartbeatSkipped => {
                encode_frame_bytes(header(FrameType::Heartbeat), &2u64.to_le_bytes())
            }
            Kind::HelloTwice => hello(plan, from, 0, plan.token(from)),
            Kind::AfterBye => {
                let mut v = encode_frame_bytes(header(FrameType::Bye), &[]);
                v.extend(encode_frame_bytes(header(FrameType::Data), b"x"));
                v
            }
        }
    }
}

/// How the bad frame follows the HELLO on the wire.
#[derive(Debug, Clone, Copy)]
enum Segment {
    /// One write of both: one TLS record, one TCP segment.
    Same,
    /// The HELLO written and flushed, then the frame: two records, two
    /// segments (no Nagle delay in between).
    Next,
}

/// What the hostile peer saw: when the bad frame was on the wire, and the
/// ABORT rank 0 sent it.
struct Hostile<S> {
    sent: Instant,
    abort: Option<Vec<u8>>,
    /// Its connections to the bystanders, open until they ended: a close
    /// of its own must not reach them before rank 0's ABORT does.
    _streams: Vec<S>,
}

fn run_one(kind: Kind, size: u32, segment: Segment) {
    let plan = Arc::new(JobPlan::localhost_bound(size).unwrap());
    let me = size - 1;
    let l = held_listener(&plan, me);
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let p = plan.clone();
    let hostile = thread::spawn(move || {
        let mut streams: Vec<_> = (0..me).map(|_| accept_as(&p, me, &l)).collect();
        for (rank, s) in streams.iter_mut().filter(|(r, _)| *r != 0) {
            s.write_all(&hello(&p, me, *rank, p.token(me))).unwrap();
            s.flush().unwrap();
        }
        if size > 2 {
            // The bystander's set-up is done.
            ready_rx.recv().unwrap();
        }
        let at = streams.iter().position(|(r, _)| *r == 0).unwrap();
        let (_, mut s) = streams.swap_remove(at);
        s.sock.set_nodelay(true).unwrap();
        let hello = hello(&p, me, 0, p.token(me));
        let bad = kind.bytes(&p, me);
        match segment {
            Segment::Same => s.write_all(&[hello, bad].concat()).unwrap(),
            Segment::Next => {
                s.write_all(&hello).unwrap();
                s.flush().unwrap();
                s.write_all(&bad).unwrap();
            }
        }
        s.flush().unwrap();
        let sent = Instant::now();
        let abort = read_until(&mut s, FrameType::Abort);
        // As a rank that receives ABORT does (protocol §7.5): rank 0's
        // linger then ends at once.
        drop(s);
        Hostile {
            sent,
            abort,
            _streams: streams,
        }
    });
    let ranks: Vec<_> = (0..me)
        .map(|rank| {
            let p = plan.clone();
            let ready = ready_tx.clone();
            thread::spawn(move || {
                let ep = match start_rank(&p, rank, settings()) {
                    Ok(ep) => ep,
                    Err(e) => return (Err(e), Instant::now()),
                };
                let _ = ready.send(());
                // The receiver waits for the hostile peer, the bystander
                // for the receiver. The time is taken when the call
                // returns, before the endpoint's drop waits for its linger.
                let r = ep.recv(if rank == 0 { me } else { 0 }, 0).map(|_| ());
                (r, Instant::now())
            })
        })
        .collect();
    drop(ready_tx);
    let ended: Vec<(Result<(), Error>, Instant)> =
        ranks.into_iter().map(|h| h.join().unwrap()).collect();
    let h = hostile.join().unwrap();
    let what = format!("{kind:?} at {size} ranks, {segment:?} segment");

    let e = ended[0].0.as_ref().expect_err(&what);
    let Error::FrameRejected(f) = e else {
        panic!("{what}: rank 0: {e}")
    };
    assert_eq!(check_name(f), kind.check(), "{what}: {e}");
    assert_eq!(code(e), 1610, "{what}: {e}");
    assert!(!e.to_string().contains("first frame"), "{what}: {e}");
    let abort = h.abort.unwrap_or_else(|| panic!("{what}: no ABORT"));
    assert_eq!(
        &abort[..8],
        &[7, 0, 0, 0, 0x4a, 0x06, 0, 0],
        "{what}: reason 7, code 1610"
    );
    for (rank, (r, at)) in ended.iter().enumerate() {
        let took = at.saturating_duration_since(h.sent);
        assert!(
            took < Duration::from_secs(1),
            "{what}: rank {rank} ended after {took:?}"
        );
        if rank > 0 {
            let e = r.as_ref().expect_err(&what);
            assert_eq!(code(e), 1612, "{what}: rank {rank}: {e}");
        }
    }
}

fn run(kind: Kind, size: u32) {
    with_deadline(Duration::from_secs(60), move || {
        run_one(kind, size, Segment::Same);
        run_one(kind, size, Segment::Next);
    });
}

macro_rules! per_kind {
    ($($name:ident: $kind:ident;)*) => {$(
        mod $name {
            #[test]
            fn at_2_ranks() {
                super::run(super::Kind::$kind, 2);
            }
            #[test]
            fn at_3_ranks() {
                super::run(super::Kind::$kind, 3);
            }
        }
    )*};
}

per_kind! {
    length: Length;
    type_0: Type0;
    type_12: Type12;
    flags: Flags;
    service: Service;
    membership_epoch: MembershipEpoch;
    other_job: Job;
    wrong_source: Source;
    wrong_target: Target;
    newer_incarnation: NewerIncarnation;
    epoch: Epoch;
    payload_length: PayloadLength;
    reserved_data_tag: DataTag;
    collective_tag: CollectiveTag;
    skipped_heartbeat: HeartbeatSkipped;
    hello_twice: HelloTwice;
    frame_after_bye: AfterBye;
}
