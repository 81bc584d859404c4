//! Connection state machine without sockets.

use std::time::{Duration, Instant};

use sperli_wire::data::Data;
use sperli_wire::error::{AuthError, FrameError, LossCause, TokenError};
use sperli_wire::frame::encode_frame;
use sperli_wire::header::{check_name, FrameHeader, RawHeader};
use sperli_wire::job_description::HostEntry;
use sperli_wire::payload::Payload;
use sperli_wire::{Error, FrameType, JobId};

use super::*;
use crate::job::unix_ms;
use sperli_tls::job_plan::JobPlan;
use sperli_wire::refused_hosts::RefusedHosts;

fn plan() -> JobPlan {
    let hosts = (0..3)
        .map(|r| HostEntry {
            host: format!("127.0.0.{}", r + 1),
            port: 40000 + r as u16,
        })
        .collect();
    JobPlan::new(hosts, 1, Duration::from_secs(600)).unwrap()
}

fn ctx_of(plan: &JobPlan, rank: u32) -> Arc<JobContext> {
    let d = plan.description(rank);
    Arc::new(JobContext {
        job_id: d.job_id,
        size: d.size,
        rank: d.rank,
        incarnation: d.incarnation,
        hosts: d.hosts,
        job_public_key: JobKey::new(d.job_public_key),
        refused: RefusedHosts::builtin(),
        features: sperli_wire::limits::FEATURE_V1_CORE,
        membership: Arc::default(),
    })
}

/// Encodes the HELLO `from` sends to `to` with `token`.
fn hello_frame(plan: &JobPlan, from: u32, to: u32, token: &[u8]) -> Vec<u8> {
    let mut c = Connection::new(
        ctx_of(plan, from),
        to,
        Duration::from_secs(5),
        Instant::now(),
    );
    c.queue_hello(token, Instant::now()).unwrap();
    let mut out = Vec::new();
    c.write_to(&mut out, &mut |_| {}).unwrap();
    out
}

fn data_frame(plan: &JobPlan, from: u32, to: u32, tag: u32, msg: &[u8]) -> Vec<u8> {
    let h =
        FrameHeader::new(FrameType::Data, plan.job_id, from, to, plan.incarnation).with_tag(tag);
    encode_frame(h, &Payload::Data(Data(msg)))
}

fn frame(plan: &JobPlan, t: FrameType, from: u32, to: u32, payload: &[u8]) -> Vec<u8> {
    let mut h = FrameHeader::new(t, plan.job_id, from, to, plan.incarnation);
    h.length = payload.len() as u32;
    let mut v = h.to_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

/// Feeds one byte at a time.
fn feed(c: &mut Connection, bytes: &[u8], events: &mut Vec<Incoming>) -> Result<(), Error> {
    let now = Instant::now();
    let now_ms = unix_ms(std::time::SystemTime::now());
    for b in bytes {
        c.handle_bytes(std::slice::from_ref(b), now, now_ms, events)?;
    }
    Ok(())
}

/// Rank 1's connection to rank 0, after rank 0's valid HELLO.
fn open_conn(plan: &JobPlan) -> Connection {
    let mut c = Connection::new(ctx_of(plan, 1), 0, Duration::from_secs(5), Instant::now());
    let mut ev = Vec::new();
    feed(&mut c, &hello_frame(plan, 0, 1, plan.token(0)), &mut ev).unwrap();
    assert_eq!(
        ev,
        vec![Incoming::Authenticated {
            features: sperli_wire::limits::FEATURE_V1_CORE
        }]
    );
    assert_eq!(c.state(), ConnState::Open);
    c
}

#[test]
fn hello_then_data_one_byte_at_a_time() {
    let plan = plan();
    let mut c = open_conn(&plan);
    let mut ev = Vec::new();
    let mut bytes = data_frame(&plan, 0, 1, 4, b"abc");
    bytes.extend(data_frame(&plan, 0, 1, 5, b""));
    feed(&mut c, &bytes, &mut ev).unwrap();
    assert_eq!(
        ev,
        vec![
            Incoming::Data {
                tag: 4,
                payload: b"abc".to_vec()
            },
            Incoming::Data {
                tag: 5,
                payload: vec![]
            }
        ]
    );
}

#[test]
fn hello_twice_is_rejected() {
    let plan = plan();
    let mut c = open_conn(&plan);
    let e = feed(
        &mut c,
        &hello_frame(&plan, 0, 1, plan.token(0)),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(
        e,
        Error::FrameRejected(FrameError::Unexpected {
            frame_type: FrameType::Hello,
            when: "twice"
        })
    ));
}

/// Frames the text rejects, each as rank 0 sends it to rank 1 right behind
/// its HELLO, with the check it fails (`check_name`): every check of
/// protocol §6.2 that rejects, a skipped HEARTBEAT counter (§7.4), a second
/// HELLO (§7.1) and a frame after BYE (§7.6).
fn rejected_behind_hello(plan: &JobPlan) -> Vec<(&'static str, Vec<u8>)> {
    let raw = |t: FrameType| FrameHeader::new(t, plan.job_id, 0, 1, plan.incarnation).to_raw();
    let data = raw(FrameType::Data);
    let head = |h: RawHeader| h.to_bytes().to_vec();
    let with_payload = |h: RawHeader, p: &[u8]| {
        let mut v = RawHeader {
            length: p.len() as u32,
            ..h
        }
        .to_bytes()
        .to_vec();
        v.extend_from_slice(p);
        v
    };
    let mut bye_then_data = frame(plan, FrameType::Bye, 0, 1, &[]);
    bye_then_data.extend(data_frame(plan, 0, 1, 1, b"x"));
    vec![
        (
            "length",
            head(RawHeader {
                length: (16 << 20) + 1,
                ..data
            }),
        ),
        (
            "type",
            head(RawHeader {
                frame_type: 0,
                ..data
            }),
        ),
        (
            "type",
            head(RawHeader {
                frame_type: 12,
                ..data
            }),
        ),
        ("flags", head(RawHeader { flags: 1, ..data })),
        ("service", head(RawHeader { service: 1, ..data })),
        (
            "membership_epoch",
            head(RawHeader {
                membership_epoch: 1,
                ..data
            }),
        ),
        (
            "job",
            head(RawHeader {
                job_id: JobId([0x5a; 16]),
                ..data
            }),
        ),
        ("source", head(RawHeader { source: 2, ..data })),
        ("target", head(RawHeader { target: 2, ..data })),
        (
            "incarnation",
            head(RawHeader {
                incarnation: plan.incarnation + 1,
                ..data
            }),
        ),
        ("epoch", head(RawHeader { epoch: 1, ..data })),
        (
            "payload_length",
            head(RawHeader {
                length: 7,
                ..raw(FrameType::Heartbeat)
            }),
        ),
        (
            "tag",
            head(RawHeader {
                tag: 1 << 31,
                ..data
            }),
        ),
        (
            "tag",
            with_payload(
                RawHeader {
                    tag: 5,
                    ..raw(FrameType::Collective)
                },
                &[0; 16],
            ),
        ),
        (
            "payload",
            frame(plan, FrameType::Heartbeat, 0, 1, &2u64.to_le_bytes()),
        ),
        ("payload", hello_frame(plan, 0, 1, plan.token(0))),
        ("payload", bye_then_data),
    ]
}

/// A rejected frame in the same read as the HELLO is the authenticated
/// peer's: the feed stops right after the HELLO verifies (so the caller
/// counts the peer first), and the frame then fails as an open
/// connection's frame, H1610 (protocol §5.3, §6.2), never as a failed
/// authentication of a "first frame".
#[test]
fn a_rejected_frame_right_behind_hello_fails_the_open_connection() {
    let plan = plan();
    let hello = hello_frame(&plan, 0, 1, plan.token(0));
    let now = Instant::now();
    let now_ms = unix_ms(std::time::SystemTime::now());
    let authenticated = Incoming::Authenticated {
        features: sperli_wire::limits::FEATURE_V1_CORE,
    };
    for (check, bad) in rejected_behind_hello(&plan) {
        let mut bytes = hello.clone();
        bytes.extend_from_slice(&bad);
        let fresh = || Connection::new(ctx_of(&plan, 1), 0, Duration::from_secs(5), now);
        let mut c = fresh();
        let mut ev = Vec::new();
        let fed = c
            .handle_bytes_pausing(&bytes, now, now_ms, &mut ev)
            .unwrap();
        let n = fed.taken;
        assert_eq!(n, hello.len(), "{check}: the feed stops behind HELLO");
        assert!(fed.stopped, "{check}");
        assert_eq!(ev, vec![authenticated.clone()], "{check}");
        assert_eq!(c.state(), ConnState::Open, "{check}");
        let e = c
            .handle_bytes(&bytes[n..], now, now_ms, &mut ev)
            .unwrap_err();
        let Error::FrameRejected(f) = &e else {
            panic!("{check}: {e}")
        };
        assert_eq!(check_name(f), check, "{e}");
        assert_eq!(e.h_code().map(|c| c.number()), Some(1610), "{e}");
        assert!(!e.to_string().contains("first frame"), "{e}");
        assert_eq!(c.state(), ConnState::Closed, "{check}");
        // Fed whole, the same error after the same authentication.
        let mut c = fresh();
        let mut ev = Vec::new();
        assert_eq!(c.handle_bytes(&bytes, now, now_ms, &mut ev), Err(e));
        assert_eq!(ev.first(), Some(&authenticated), "{check}");
    }
}

/// The feed stops once, after the HELLO; the frames of an open connection
/// then flow without a stop.
#[test]
fn the_feed_stops_only_behind_the_hello() {
    let plan = plan();
    let hello = hello_frame(&plan, 0, 1, plan.token(0));
    let mut bytes = hello.clone();
    bytes.extend(data_frame(&plan, 0, 1, 4, b"abc"));
    bytes.extend(data_frame(&plan, 0, 1, 5, b"de"));
    let now = Instant::now();
    let now_ms = unix_ms(std::time::SystemTime::now());
    let mut c = Connection::new(ctx_of(&plan, 1), 0, Duration::from_secs(5), now);
    let mut ev = Vec::new();
    let n = hello.len();
    assert_eq!(
        c.handle_bytes_pausing(&bytes, now, now_ms, &mut ev),
        Ok(Fed {
            taken: n,
            stopped: true
        })
    );
    assert_eq!(
        c.handle_bytes_pausing(&bytes[n..], now, now_ms, &mut ev),
        Ok(Fed {
            taken: bytes.len() - n,
            stopped: false
        })
    );
    assert_eq!(ev.len(), 3, "{ev:?}");
    // A HELLO that ends the bytes given (its TLS record ended there) stops
    // the feed all the same: the caller must not feed the next record.
    let mut c = Connection::new(ctx_of(&plan, 1), 0, Duration::from_secs(5), now);
    assert_eq!(
        c.handle_bytes_pausing(&hello, now, now_ms, &mut Vec::new()),
        Ok(Fed {
            taken: n,
            stopped: true
        })
    );
}

#[test]
fn data_before_hello_is_rejected() {
    let plan = plan();
    let mut c = Connection::new(ctx_of(&plan, 1), 0, Duration::from_secs(5), Instant::now());
    let e = feed(&mut c, &data_frame(&plan, 0, 1, 1, b"x"), &mut Vec::new()).unwrap_err();
    assert!(matches!(
        e,
        Error::FrameRejected(FrameError::Unexpected {
            frame_type: FrameType::Data,
            when: "before HELLO"
        })
    ));
    assert_eq!(c.state(), ConnState::Closed);
}

#[test]
fn frame_after_bye_is_rejected_and_close_after_bye_is_normal() {
    let plan = plan();
    let mut c = open_conn(&plan);
    let mut ev = Vec::new();
    feed(&mut c, &frame(&plan, FrameType::Bye, 0, 1, &[]), &mut ev).unwrap();
    assert_eq!(ev, vec![Incoming::Bye]);
    let e = feed(&mut c, &data_frame(&plan, 0, 1, 1, b"x"), &mut ev).unwrap_err();
    assert!(matches!(
        e,
        Error::FrameRejected(FrameError::Unexpected {
            when: "after BYE",
            ..
        })
    ));
    let mut c = open_conn(&plan);
    feed(&mut c, &frame(&plan, FrameType::Bye, 0, 1, &[]), &mut ev).unwrap();
    assert_eq!(c.handle_close(), Ok(()));
}

#[test]
fn close_or_reset_without_bye_is_peer_lost() {
    let plan = plan();
    let mut c = open_conn(&plan);
    assert_eq!(
        c.handle_close(),
        Err(Error::PeerLost {
            peer: 0,
            cause: LossCause::ClosedWithoutBye
        })
    );
    let mut c = open_conn(&plan);
    assert_eq!(
        c.handle_reset(LossCause::Reset),
        Err(Error::PeerLost {
            peer: 0,
            cause: LossCause::Reset
        })
    );
}

#[test]
fn abort_ends_with_h1612() {
    let plan = plan();
    let mut c = open_conn(&plan);
    let a = Abort {
        reason: AbortReason::CollectiveMismatch,
        code: 1617,
        message: b"mismatch",
    };
    let e = feed(
        &mut c,
        &frame(&plan, FrameType::Abort, 0, 1, &a.to_vec()),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert_eq!(
        e,
        Error::AbortedByPeer {
            from: 0,
            reason: 3,
            code: 1617,
            message: "mismatch".into()
        }
    );
}

#[test]
fn heartbeat_counter_must_count_from_one() {
    let plan = plan();
    let mut c = open_conn(&plan);
    let hb = |n: u64| frame(&plan, FrameType::Heartbeat, 0, 1, &n.to_le_bytes());
    feed(&mut c, &hb(1), &mut Vec::new()).unwrap();
    feed(&mut c, &hb(2), &mut Vec::new()).unwrap();
    let e = feed(&mut c, &hb(4), &mut Vec::new()).unwrap_err();
    assert_eq!(
        e,
        Error::FrameRejected(FrameError::HeartbeatCounter {
            expected: 3,
            got: 4
        })
    );
    let mut c = open_conn(&plan);
    assert!(feed(&mut c, &hb(0), &mut Vec::new()).is_err());
}

#[test]
fn write_whole_only_when_nothing_is_queued_ahead() {
    let plan = plan();
    let t0 = Instant::now();
    let mut c = Connection::new(ctx_of(&plan, 1), 0, Duration::from_secs(5), t0);
    c.state = ConnState::Open;
    let h = c.ctx.header(FrameType::Data, 0).with_tag(9);
    let payload = vec![5u8; 1000];
    // Queued frames go first: nothing is written.
    c.queue(FrameType::Data, vec![1], t0);
    let mut out = Vec::new();
    assert!(!c.write_whole(&mut out, h, &payload, t0).unwrap());
    assert!(out.is_empty());
    c.write_to(&mut out, &mut |_| {}).unwrap();
    out.clear();
    // Then the frame goes out whole, header with its length, and counts
    // as sent for the heartbeat clock.
    let later = t0 + Duration::from_millis(900);
    assert!(c.write_whole(&mut out, h, &payload, later).unwrap());
    let mut want = h;
    want.length = 1000;
    assert_eq!(&out[..52], &want.to_bytes());
    assert_eq!(&out[52..], &payload[..]);
    c.poll(t0 + Duration::from_millis(1500)).unwrap();
    assert!(!c.has_output(), "no heartbeat 600 ms after a frame");
    // Nothing after BYE.
    c.queue_bye(later);
    c.write_to(&mut Vec::new(), &mut |_| {}).unwrap();
    out.clear();
    assert!(!c.write_whole(&mut out, h, &payload, later).unwrap());
    assert!(out.is_empty());
}

#[test]
fn heartbeat_due_after_one_second_of_send_silence() {
    let plan = plan();
    let t0 = Instant::now();
    let mut c = Connection::new(ctx_of(&plan, 1), 0, Duration::from_secs(5), t0);
    c.state = ConnState::Open;
    c.poll(t0 + Duration::from_millis(999)).unwrap();
    assert!(!c.has_output());
    c.poll(t0 + Duration::from_millis(1000)).unwrap();
    assert!(c.has_output());
    let mut out = Vec::new();
    c.write_to(&mut out, &mut |_| {}).unwrap();
    assert_eq!(out.len(), 60);
    assert_eq!(out[4], FrameType::Heartbeat.code());
    assert_eq!(&out[52..], &1u64.to_le_bytes());
    // Sending anything else postpones the next heartbeat.
    c.queue(FrameType::Data, vec![1], t0 + Duration::from_millis(1500));
    c.poll(t0 + Duration::from_millis(2400)).unwrap();
    c.write_to(&mut out, &mut |_| {}).unwrap();
    assert_eq!(out.len(), 60 + 53);
    c.touch(t0 + Duration::from_millis(2400));
    c.poll(t0 + Duration::from_millis(2500)).unwrap();
    out.clear();
    c.write_to(&mut out, &mut |_| {}).unwrap();
    assert_eq!(&out[52..], &2u64.to_le_bytes());
}

#[test]
fn silence_limit_is_peer_lost() {
    let plan = plan();
    let t0 = Instant::now();
    let mut c = Connection::new(ctx_of(&plan, 1), 0, Duration::from_millis(5000), t0);
    c.state = ConnState::Open;
    c.touch(t0 + Duration::from_millis(1000));
    c.poll(t0 + Duration::from_millis(6000)).unwrap();
    let e = c.poll(t0 + Duration::from_millis(6002)).unwrap_err();
    assert!(matches!(
        e,
        Error::PeerLost {
            peer: 0,
            cause: LossCause::Silence { limit_ms: 5000, .. }
        }
    ));
}

#[test]
fn is_silent_agrees_with_poll() {
    let plan = plan();
    let t0 = Instant::now();
    let mut c = Connection::new(ctx_of(&plan, 1), 0, Duration::from_millis(5000), t0);
    let at = |ms| t0 + Duration::from_millis(ms);
    // Awaiting HELLO counts, as open does.
    assert!(!c.is_silent(at(5000)));
    assert!(c.is_silent(at(5001)));
    c.state = ConnState::Open;
    c.touch(at(4000));
    assert!(!c.is_silent(at(9000)));
    assert!(c.is_silent(at(9001)));
    assert!(c.poll(at(9001)).is_err());
    // Closed connections are never silent.
    assert!(!c.is_silent(at(20_000)));
}

#[test]
fn token_checks() {
    let plan = plan();
    let now_ms = unix_ms(std::time::SystemTime::now());
    let reject = |token: Vec<u8>, from: u32| {
        let mut c = Connection::new(
            ctx_of(&plan, 1),
            from,
            Duration::from_secs(5),
            Instant::now(),
        );
        match feed(
            &mut c,
            &hello_frame(&plan, from, 1, &token),
            &mut Vec::new(),
        ) {
            Err(Error::Authentication {
                error: AuthError::Token(e),
                ..
            }) => e,
            other => panic!("{other:?}"),
        }
    };
    // Rank 2's token presented by the certificate of rank 0.
    assert!(matches!(
        reject(plan.token(2).to_vec(), 0),
        TokenError::Rank {
            expected: 0,
            got: 2
        }
    ));
    assert!(matches!(
        reject(plan.sign_token(0, "127.0.0.1", now_ms - 1).unwrap(), 0),
        TokenError::Expired { .. }
    ));
    assert!(matches!(
        reject(plan.sign_token(0, "127.0.0.9", now_ms + 60_000).unwrap(), 0),
        TokenError::Host { .. }
    ));
    let mut forged = plan.token(0).to_vec();
    let n = forged.len();
    forged[n - 1] ^= 1;
    assert!(matches!(reject(forged, 0), TokenError::BadSignature));
    let other = JobPlan::with_job_id(
        JobId([1; 16]),
        plan.hosts.clone(),
        1,
        Duration::from_secs(60),
    )
    .unwrap();
    assert!(matches!(
        reject(other.token(0).to_vec(), 0),
        TokenError::BadSignature
    ));
}

/// Every `frame` entry of docs/sperli-vectors.txt, fed one byte at a time
/// to an open connection: rejects end with H1610 at the named check,
/// discards deliver nothing, accepts deliver (HELLO: rejected as a second
/// HELLO; ABORT: H1612).
#[test]
fn vectors_file_frames() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/sperli-vectors.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let mut seen = 0;
    for entry in text.split("\n\n") {
        let fields: std::collections::HashMap<&str, &str> = entry
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                l.split_once(": ")
                    .or_else(|| l.strip_suffix(':').map(|k| (k, "")))
            })
            .collect();
        if fields.get("kind") != Some(&"frame") {
            continue;
        }
        let name = fields["name"];
        let rx: std::collections::HashMap<&str, &str> = fields["receiver"]
            .split(' ')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let mut job = [0u8; 16];
        for (i, b) in job.iter_mut().enumerate() {
            *b = u8::from_str_radix(&rx["job"][2 * i..2 * i + 2], 16).unwrap();
        }
        let size: u32 = rx["size"].parse().unwrap();
        let features: u64 = rx.get("features").map_or(1, |f| f.parse().unwrap());
        // A frame of a job that negotiated a feature this transport does
        // not implement yet (protocol §16, §17) is judged by the codecs'
        // vectors check and the independent checker, not here.
        if features & !sperli_wire::limits::FEATURES_IMPLEMENTED != 0 {
            continue;
        }
        let ctx = Arc::new(JobContext {
            job_id: JobId(job),
            size,
            rank: rx["rank"].parse().unwrap(),
            incarnation: rx["incarnation"].parse().unwrap(),
            hosts: Vec::new(),
            job_public_key: JobKey::new(Vec::new()),
            refused: RefusedHosts::builtin(),
            // The job's negotiated features (protocol §6.2 checks 12, 13).
            features,
            membership: Arc::default(),
        });
        let bytes: Vec<u8> = (0..fields["bytes"].len() / 2)
            .map(|i| u8::from_str_radix(&fields["bytes"][2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let mut c = Connection::new(
            ctx,
            rx["peer"].parse().unwrap(),
            Duration::from_secs(5),
            Instant::now(),
        );
        c.state = ConnState::Open;
        if bytes.len() >= 60 && bytes[4] == FrameType::Heartbeat.code() {
            c.hb_recv = u64::from_le_bytes(bytes[52..60].try_into().unwrap()).wrapping_sub(1);
        }
        let mut ev = Vec::new();
        let mut r = feed(&mut c, &bytes, &mut ev);
        // With feature bit 3 a DATA payload is judged by the receive
        // state the connection delivers to: here its decode rules
        // (protocol §16.2; the checks of §16.4 are the message-stream
        // vectors').
        if features & sperli_wire::limits::FEATURE_P2P_COMMUNICATORS != 0 && r.is_ok() {
            if let Some(Incoming::Data { payload, .. }) = ev.first() {
                use sperli_wire::codec::Codec;
                r = sperli_wire::data_header::DataFrame::decode(payload)
                    .map(|_| ())
                    .map_err(|error| {
                        Error::FrameRejected(FrameError::Payload {
                            frame_type: FrameType::Data,
                            error,
                        })
                    });
            }
        }
        let verdict = fields["verdict"];
        if let Some(check) = verdict.strip_prefix("reject H1610 ") {
            match r {
                Err(Error::FrameRejected(e)) => assert_eq!(check_name(&e), check, "{name}: {e}"),
                other => panic!("{name}: expected reject at {check}, got {other:?}"),
            }
            assert_eq!(c.reader.payload_capacity(), 0, "{name}");
        } else if verdict == "discard" {
            assert_eq!(r, Ok(()), "{name}");
            assert!(ev.is_empty(), "{name}");
        } else {
            assert_eq!(verdict, "accept", "{name}");
            match bytes[4] {
                1 => assert!(matches!(
                    r,
                    Err(Error::FrameRejected(FrameError::Unexpected {
                        when: "twice",
                        ..
                    }))
                )),
                5 => assert!(matches!(r, Err(Error::AbortedByPeer { .. })), "{name}"),
                4 => assert_eq!(r, Ok(()), "{name}"),
                _ => {
                    assert_eq!(r, Ok(()), "{name}");
                    assert_eq!(ev.len(), 1, "{name}");
                }
            }
        }
        seen += 1;
    }
    assert!(seen >= 40, "only {seen} frame vectors");
}

#[test]
fn a_frame_after_bye_is_rejected_on_its_header_before_its_payload() {
    let plan = plan();
    let mut c = open_conn(&plan);
    let mut ev = Vec::new();
    feed(&mut c, &frame(&plan, FrameType::Bye, 0, 1, &[]), &mut ev).unwrap();
    // The header of a 1 MiB DATA frame, no payload yet: rejected now.
    let big = data_frame(&plan, 0, 1, 3, &vec![0u8; 1 << 20]);
    let e = feed(&mut c, &big[..52], &mut ev).unwrap_err();
    assert!(matches!(
        e,
        Error::FrameRejected(FrameError::Unexpected {
            frame_type: FrameType::Data,
            when: "after BYE"
        })
    ));
    assert_eq!(c.reader.payload_capacity(), 0, "nothing allocated");
    assert_eq!(ev, vec![Incoming::Bye]);
}

/// A writer with room for `room` more bytes, like rustls's writer under
/// its buffer limit (0 once full).
struct Narrow {
    out: Vec<u8>,
    room: usize,
}

impl Write for Narrow {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = b.len().min(self.room);
        self.room -= n;
        self.out.extend_from_slice(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_direct_frame_is_written_piece_by_piece_and_queued_frames_wait_behind_it() {
    let plan = plan();
    let t0 = Instant::now();
    let mut c = Connection::new(ctx_of(&plan, 1), 0, Duration::from_secs(5), t0);
    c.state = ConnState::Open;
    let h = c.ctx.header(FrameType::Data, 0).with_tag(9);
    let payload: Vec<u8> = (0..1000).map(|i| i as u8).collect();
    assert!(c.open_direct(h, payload.len(), t0));
    assert!(!c.open_direct(h, 1, t0), "one direct frame at a time");
    let mut w = Narrow {
        out: Vec::new(),
        room: 30,
    };
    // Room for part of the header only: no payload byte yet.
    assert_eq!(c.write_direct(&mut w, &payload).unwrap(), 0);
    // A frame queued meanwhile (a heartbeat, another thread's send)
    // waits behind the open frame.
    c.queue(FrameType::Data, b"behind".to_vec(), t0);
    w.room = 100;
    assert_eq!(c.write_to(&mut w, &mut |_| {}).unwrap(), 0);
    let mut at = 0;
    while c.direct_open() {
        w.room = 100;
        at += c.write_direct(&mut w, &payload[at..]).unwrap();
    }
    assert_eq!(at, 1000);
    assert!(c.has_output(), "the queued frame");
    w.room = usize::MAX;
    c.write_to(&mut w, &mut |_| {}).unwrap();
    let mut want = h;
    want.length = 1000;
    let mut expected = want.to_bytes().to_vec();
    expected.extend_from_slice(&payload);
    expected.extend_from_slice(&data_frame(&plan, 1, 0, 0, b"behind"));
    assert_eq!(w.out, expected);
}

/// Delivers DATA of one tag by streaming, counting what it got.
#[derive(Default)]
struct Streams {
    events: Vec<Incoming>,
    chunks: Vec<usize>,
    bytes: Vec<u8>,
    ended: Vec<u32>,
}

impl Deliver for Streams {
    fn incoming(&mut self, inc: Incoming) {
        self.events.push(inc);
    }
    fn stream(&mut self, tag: u32, _len: usize) -> bool {
        tag == 8
    }
    fn chunk(&mut self, bytes: &[u8]) {
        self.chunks.push(bytes.len());
        self.bytes.extend_from_slice(bytes);
    }
    fn end_stream(&mut self, tag: u32) {
        self.ended.push(tag);
    }
}

#[test]
fn a_data_payload_streams_when_the_receiver_asks() {
    let plan = plan();
    let mut c = open_conn(&plan);
    let msg: Vec<u8> = (0..5000).map(|i| (i % 7) as u8).collect();
    let mut bytes = data_frame(&plan, 0, 1, 8, &msg);
    bytes.extend(data_frame(&plan, 0, 1, 2, b"whole"));
    let mut d = Streams::default();
    let now_ms = unix_ms(std::time::SystemTime::now());
    for piece in bytes.chunks(1000) {
        c.handle_bytes(piece, Instant::now(), now_ms, &mut d)
            .unwrap();
    }
    assert_eq!(d.bytes, msg);
    assert!(d.chunks.len() > 1, "piece by piece");
    assert_eq!(d.ended, vec![8]);
    assert_eq!(
        d.events,
        vec![Incoming::Data {
            tag: 2,
            payload: b"whole".to_vec()
        }]
    );
}

/// Rank 1's connection to rank 0 when rank 1 announces `own` and rank 0
/// `peer` in their HELLOs.
fn open_with(plan: &JobPlan, own: u64, peer: u64) -> Connection {
    let mut ctx = (*ctx_of(plan, 1)).clone();
    ctx.features = own;
    let mut c = Connection::new(Arc::new(ctx), 0, Duration::from_secs(5), Instant::now());
    let mut them = (*ctx_of(plan, 0)).clone();
    them.features = peer;
    let mut h = Connection::new(Arc::new(them), 1, Duration::from_secs(5), Instant::now());
    h.queue_hello(plan.token(0), Instant::now()).unwrap();
    let mut hello = Vec::new();
    h.write_to(&mut hello, &mut |_| {}).unwrap();
    let mut ev = Vec::new();
    feed(&mut c, &hello, &mut ev).unwrap();
    c
}

fn collective_frame(plan: &JobPlan, tag: u32, payload: &[u8]) -> Vec<u8> {
    let mut h =
        FrameHeader::new(FrameType::Collective, plan.job_id, 0, 1, plan.incarnation).with_tag(tag);
    h.length = payload.len() as u32;
    let mut v = h.to_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

/// Protocol §6.2 checks 12 and 13 on arrival with the features of both
/// HELLOs (then the job's): a communicator id in a COLLECTIVE tag only
/// with bit 2, a pipelined payload only with bit 1.
#[test]
fn collective_tags_and_pipelined_payloads_are_judged_on_arrival() {
    use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
    use sperli_wire::limits::{FEATURE_COMMUNICATORS, FEATURE_PIPELINED};
    // Bit 5 (membership epochs) is not the point here: the headers carry none.
    const FEATURES_IMPLEMENTED: u64 =
        sperli_wire::limits::FEATURES_IMPLEMENTED & !sperli_wire::recovery::FEATURE_MEMBERSHIP;
    use sperli_wire::pipeline::{encode_open, Open};
    let plan = plan();
    let star = CollectiveHeader {
        operation: Operation::Barrier,
        element_type: 0,
        reduction: 0,
        phase: Phase::ToRoot,
        root: 0,
        sequence: 1,
    }
    .to_bytes();
    let mut open = Vec::new();
    let h = CollectiveHeader {
        operation: Operation::Allreduce,
        element_type: 4,
        reduction: 1,
        phase: Phase::Open,
        root: 0,
        sequence: 1,
    };
    encode_open(
        &h,
        Open {
            total: 8,
            fanout: 1,
        },
        &mut open,
    );
    // Both announce every bit: a tagged frame and an OPEN are accepted.
    let mut c = open_with(&plan, FEATURES_IMPLEMENTED, FEATURES_IMPLEMENTED);
    assert_eq!(c.features(), FEATURES_IMPLEMENTED);
    let mut ev = Vec::new();
    feed(&mut c, &collective_frame(&plan, 3, &star), &mut ev).unwrap();
    feed(&mut c, &collective_frame(&plan, 0, &open), &mut ev).unwrap();
    assert_eq!(
        ev,
        vec![
            Incoming::Collective {
                tag: 3,
                payload: star.to_vec()
            },
            Incoming::Collective {
                tag: 0,
                payload: open.clone()
            }
        ]
    );
    // The peer lacks bit 2: a tag is a rejected header, before its payload.
    let mut c = open_with(
        &plan,
        FEATURES_IMPLEMENTED,
        FEATURE_V1_CORE | FEATURE_PIPELINED,
    );
    let e = feed(&mut c, &collective_frame(&plan, 3, &star), &mut ev).unwrap_err();
    let Error::FrameRejected(fe) = &e else {
        panic!("{e}")
    };
    assert_eq!(check_name(fe), "tag");
    // The peer lacks bit 1: an OPEN is a payload that does not decode.
    let mut c = open_with(
        &plan,
        FEATURES_IMPLEMENTED,
        FEATURE_V1_CORE | FEATURE_COMMUNICATORS,
    );
    let e = feed(&mut c, &collective_frame(&plan, 0, &open), &mut ev).unwrap_err();
    assert!(
        matches!(e, Error::FrameRejected(FrameError::Payload { .. })),
        "{e}"
    );
    // Set-up ends with a job that lacks bit 1 (a third rank): from then on
    // the connection judges with the job's features.
    let mut c = open_with(&plan, FEATURES_IMPLEMENTED, FEATURES_IMPLEMENTED);
    c.set_job_features(FEATURE_V1_CORE | FEATURE_COMMUNICATORS);
    let e = feed(&mut c, &collective_frame(&plan, 0, &open), &mut ev).unwrap_err();
    assert!(
        matches!(e, Error::FrameRejected(FrameError::Payload { .. })),
        "{e}"
    );
}

/// The wire as (type, tag or heartbeat counter) per frame.
fn wire(bytes: &[u8]) -> Vec<(u8, u64)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 52 <= bytes.len() {
        let h = sperli_wire::header::RawHeader::from_bytes(bytes[at..at + 52].try_into().unwrap());
        let body = &bytes[at + 52..at + 52 + h.length as usize];
        let v = if h.frame_type == FrameType::Heartbeat.code() {
            u64::from_le_bytes(body.try_into().unwrap())
        } else {
            u64::from(h.tag)
        };
        out.push((h.frame_type, v));
        at += 52 + h.length as usize;
    }
    out
}

/// Protocol §7.4 ("a HEARTBEAT on every connection on which it has sent
/// nothing for 1000 ms") with a backlog the socket does not take: a
/// heartbeat that falls due queues behind the frames already queued, a
/// later one leaves alone when nothing is queued, and the counters run
/// 1, 2, ... in wire order. (Without a socket or a sleep: the clock is
/// passed in.)
#[test]
fn heartbeats_queue_behind_a_backlog_with_consecutive_counters() {
    let plan = plan();
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let mut c = Connection::new(ctx_of(&plan, 1), 0, Duration::from_secs(30), t0);
    c.state = ConnState::Open;
    let data = FrameType::Data.code();
    let hb = FrameType::Heartbeat.code();
    // A large frame the socket takes only in part, and small ones behind it.
    let h = c.ctx.header(FrameType::Data, 0).with_tag(1);
    c.queue_frame(Outgoing::new(h, vec![7u8; 100_000], 0), t0);
    for tag in 100..120u32 {
        let h = c.ctx.header(FrameType::Data, 0).with_tag(tag);
        c.queue_frame(Outgoing::new(h, vec![1], 0), t0);
    }
    let mut w = Narrow {
        out: Vec::new(),
        room: 4096,
    };
    c.write_to(&mut w, &mut |_| {}).unwrap();
    // Idle with a backlog: after 1000 ms a heartbeat queues behind it.
    c.touch(ms(999));
    c.poll(ms(999)).unwrap();
    c.touch(ms(1000));
    c.poll(ms(1000)).unwrap();
    for tag in 120..140u32 {
        let h = c.ctx.header(FrameType::Data, 0).with_tag(tag);
        c.queue_frame(Outgoing::new(h, vec![1], 0), ms(1100));
    }
    w.room = usize::MAX;
    c.write_to(&mut w, &mut |_| {}).unwrap();
    // Idle with nothing queued: the next heartbeat leaves alone.
    c.touch(ms(2100));
    c.poll(ms(2100)).unwrap();
    c.write_to(&mut w, &mut |_| {}).unwrap();
    let h = c.ctx.header(FrameType::Data, 0).with_tag(140);
    c.queue_frame(Outgoing::new(h, vec![1], 0), ms(2200));
    c.write_to(&mut w, &mut |_| {}).unwrap();

    let mut want = vec![(data, 1)];
    want.extend((100..120).map(|t| (data, t)));
    want.push((hb, 1));
    want.extend((120..140).map(|t| (data, t)));
    want.push((hb, 2));
    want.push((data, 140));
    assert_eq!(wire(&w.out), want);
}

/// The headers of the frames in `bytes` (whole frames, one after another).
fn headers(mut bytes: &[u8]) -> Vec<FrameHeader> {
    let mut out = Vec::new();
    while bytes.len() >= sperli_wire::limits::HEADER_LEN {
        let mut h = [0u8; sperli_wire::limits::HEADER_LEN];
        h.copy_from_slice(&bytes[..sperli_wire::limits::HEADER_LEN]);
        let raw = RawHeader::from_bytes(&h);
        bytes = &bytes[sperli_wire::limits::HEADER_LEN + raw.length as usize..];
        out.push(FrameHeader {
            frame_type: FrameType::from_code_with(raw.frame_type, u64::MAX).unwrap(),
            ..FrameHeader::new(
                FrameType::Data,
                raw.job_id,
                raw.source,
                raw.target,
                raw.incarnation,
            )
            .with_membership_epoch(raw.membership_epoch)
        });
    }
    out
}

/// Protocol §18.6, "Learning it": a connection sends the record of a new
/// epoch ahead of its first frame of that epoch (RECOVER, header epoch the
/// one the peer is known to hold), once; not when the peer showed it holds
/// it (a frame of that epoch came from it).
#[test]
fn the_record_goes_ahead_of_the_first_frame_of_its_epoch() {
    let p = plan();
    let ctx = ctx_of(&p, 0);
    ctx.membership.start_carrying();
    let mut c = Connection::new(ctx.clone(), 1, Duration::from_secs(5), Instant::now());
    let mut quiet = Connection::new(ctx.clone(), 2, Duration::from_secs(5), Instant::now());
    let record = Arc::new(vec![7u8; 40]);
    ctx.membership.apply(2, &[1, 1, 1], &[], record.clone());
    // Rank 2 sent a frame of epoch 2 first: it holds the record.
    quiet.peer_holds(2);
    let now = Instant::now();
    for conn in [&mut c, &mut quiet] {
        for _ in 0..2 {
            let h = ctx.header(FrameType::Data, conn.peer());
            conn.queue_frame(Outgoing::new(h, vec![1, 2, 3], 0), now);
        }
    }
    let mut out = Vec::new();
    c.write_to(&mut out, &mut |_| {}).unwrap();
    let hs = headers(&out);
    let kinds: Vec<(u8, u32)> = hs
        .iter()
        .map(|h| (h.frame_type.code(), h.membership_epoch))
        .collect();
    assert_eq!(kinds, [(12, 1), (2, 2), (2, 2)]);
    let len = u32::from_le_bytes([out[0], out[1], out[2], out[3]]) as usize;
    let payload = &out[sperli_wire::limits::HEADER_LEN..][..len];
    // Kind 2 MEMBERSHIP, three reserved bytes, the record (protocol §18.5).
    assert_eq!(payload[..4], [2, 0, 0, 0]);
    assert_eq!(payload[4..], record[..]);
    let mut out = Vec::new();
    quiet.write_to(&mut out, &mut |_| {}).unwrap();
    let kinds: Vec<u8> = headers(&out).iter().map(|h| h.frame_type.code()).collect();
    assert_eq!(kinds, [2, 2]);
}
