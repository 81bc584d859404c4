//! Raw peers: a hostile rank with a valid certificate and token, strangers,
//! a peer that closes without BYE.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use rustls::{ServerConnection, StreamOwned};
use sperli_tls::config::{client_config_from_pem, server_config_from_pem};
use sperli_tls::job_plan::JobPlan;
use sperli_tls::pki::peer_identity;
use sperli_transport::{Endpoint, Settings};
use sperli_wire::codec::Codec;
use sperli_wire::error::LossCause;
use sperli_wire::frame::encode_frame;
use sperli_wire::header::{FrameHeader, RawHeader};
use sperli_wire::hello::Hello;
use sperli_wire::join_token::JoinToken;
use sperli_wire::payload::Payload;
use sperli_wire::{Error, FrameType};

use crate::common::{code, held_listener, run_ranks, settings, start_rank, with_deadline};

pub(crate) fn hello(plan: &JobPlan, from: u32, to: u32, token: &[u8]) -> Vec<u8> {
    hello_with(plan, from, to, token, 1)
}

/// A HELLO announcing `features`.
pub(crate) fn hello_with(
    plan: &JobPlan,
    from: u32,
    to: u32,
    token: &[u8],
    features: u64,
) -> Vec<u8> {
    let h = FrameHeader::new(FrameType::Hello, plan.job_id, from, to, plan.incarnation);
    let hello = Hello {
        features,
        token: JoinToken::decode(token).unwrap(),
    };
    encode_frame(h, &Payload::Hello(hello))
}

/// Reads frames (type, payload) until `want` comes or the stream ends.
pub(crate) fn read_until<S: Read>(s: &mut S, want: FrameType) -> Option<Vec<u8>> {
    loop {
        let mut head = [0u8; 52];
        s.read_exact(&mut head).ok()?;
        let len = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
        let mut p = vec![0u8; len];
        s.read_exact(&mut p).ok()?;
        if head[4] == want.code() {
            return Some(p);
        }
    }
}

/// Accepts one TLS connection as rank `me` of `plan`; returns the peer's
/// rank (from its certificate) and the stream.
pub(crate) fn accept_as(
    plan: &JobPlan,
    me: u32,
    l: &TcpListener,
) -> (u32, StreamOwned<ServerConnection, TcpStream>) {
    let id = plan.identity(me);
    let cfg = server_config_from_pem(
        id.ca_cert_pem.as_bytes(),
        id.cert_pem.as_bytes(),
        id.key_pem().as_bytes(),
    )
    .unwrap();
    let (mut sock, _) = l.accept().unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut conn = ServerConnection::new(cfg).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).unwrap();
    }
    let cn = peer_identity(&conn.peer_certificates().unwrap()[0])
        .unwrap()
        .common_name;
    let rank = cn.rsplit('-').next().unwrap().parse().unwrap();
    (rank, StreamOwned::new(conn, sock))
}

/// Accepts the connections of ranks 0 and 1 as a raw rank 2 of `plan` and
/// sends each a correct HELLO; the streams in rank order.
pub(crate) fn accept_both(
    plan: &JobPlan,
    l: &TcpListener,
) -> Vec<(u32, StreamOwned<ServerConnection, TcpStream>)> {
    let mut streams = Vec::new();
    for _ in 0..2 {
        let (rank, mut s) = accept_as(plan, 2, l);
        s.write_all(&hello(plan, 2, rank, plan.token(2))).unwrap();
        s.flush().unwrap();
        streams.push((rank, s));
    }
    streams.sort_by_key(|(r, _)| *r);
    streams
}

/// Rank 2 is hostile: valid certificate and token, correct HELLO, then a
/// header with flags = 1 (a negative vector) to rank 1. Rank 1 returns
/// H1610 and sends ABORT reason 7 (code 1610); rank 0 gets H1612 or H1613.
#[test]
fn hostile_peer_frame_is_rejected_with_h1610() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(3).unwrap();
        let l = held_listener(&plan, 2);
        let plan = std::sync::Arc::new(plan);
        let p2 = plan.clone();
        let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
        let hostile = thread::spawn(move || {
            let mut streams = accept_both(&p2, &l);
            // Both ranks are set up: the frame comes after set-up.
            for _ in 0..2 {
                up_rx.recv().unwrap();
            }
            let (_, victim) = streams.iter_mut().find(|(r, _)| *r == 1).unwrap();
            let bad = RawHeader {
                frame_type: FrameType::Data.code(),
                flags: 1,
                job_id: p2.job_id,
                source: 2,
                target: 1,
                incarnation: p2.incarnation,
                ..RawHeader::default()
            };
            victim.write_all(&bad.to_bytes()).unwrap();
            victim.flush().unwrap();
            let abort = read_until(victim, FrameType::Abort).expect("ABORT from the victim");
            // The connections stay open until the ranks ended: a close of
            // ours must not reach rank 0 before the victim's ABORT.
            (abort, streams)
        });
        let res = run_ranks(&plan, &[0, 1], settings(), move |ep: Endpoint| {
            let _ = up_tx.send(());
            let e = ep.recv(if ep.rank() == 0 { 1 } else { 2 }, 0).unwrap_err();
            // Every later call fails with the same error.
            assert_eq!(ep.send(0, 0, b"x").unwrap_err(), e);
            Err::<(), Error>(e)
        });
        let (abort, _streams) = hostile.join().unwrap();
        assert_eq!(
            &abort[..8],
            &[7, 0, 0, 0, 0x4a, 0x06, 0, 0],
            "reason 7, code 1610"
        );
        let e1 = res[1].as_ref().unwrap_err();
        assert!(
            matches!(
                e1,
                Error::FrameRejected(sperli_wire::error::FrameError::ReservedField {
                    field: "flags",
                    ..
                })
            ),
            "{e1}"
        );
        let c0 = code(res[0].as_ref().unwrap_err());
        assert!(c0 == 1612 || c0 == 1613, "rank 0: {c0}");
    });
}

/// Strangers during set-up: a plain TCP client sending garbage, a TLS
/// client with another job's certificate, and a holder of rank 0's real
/// certificate whose token has expired. None aborts the job; the real
/// rank 0 then connects and the job runs.
#[test]
fn strangers_during_setup_do_not_abort() {
    with_deadline(Duration::from_secs(60), || {
        let plan = std::sync::Arc::new(JobPlan::localhost_bound(2).unwrap());
        let other = JobPlan::localhost_bound(2).unwrap();
        let p = plan.clone();
        let rank1 = thread::spawn(move || {
            let ep = start_rank(&p, 1, settings())?;
            let m = ep.recv(0, 1)?;
            ep.send(0, 1, &m)?;
            ep.finish()
        });
        // Rank 1's listener is bound already (the plan holds it): a
        // connection queues until rank 1 accepts it.
        let h1 = &plan.hosts[1];
        // 1. Garbage.
        let mut s = TcpStream::connect((h1.host.as_str(), h1.port)).unwrap();
        let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
        // 2. Another job's CA.
        let id = other.identity(0);
        let cfg = client_config_from_pem(
            id.ca_cert_pem.as_bytes(),
            id.cert_pem.as_bytes(),
            id.key_pem().as_bytes(),
        )
        .unwrap();
        let sock = TcpStream::connect((h1.host.as_str(), h1.port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(sperli_tls::config::connect(cfg, sock, &h1.host, &other.job_id, 1).is_err());
        // 3. Rank 0's certificate with an expired token.
        let id = plan.identity(0);
        let cfg = client_config_from_pem(
            id.ca_cert_pem.as_bytes(),
            id.cert_pem.as_bytes(),
            id.key_pem().as_bytes(),
        )
        .unwrap();
        let sock = TcpStream::connect((h1.host.as_str(), h1.port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut tls = sperli_tls::config::connect(cfg, sock, &h1.host, &plan.job_id, 1).unwrap();
        let expired = plan.sign_token(0, &plan.hosts[0].host, 1).unwrap();
        tls.write_all(&hello(&plan, 0, 1, &expired)).unwrap();
        tls.flush().unwrap();
        // Rank 1 drops the connection: EOF or an error, never data after HELLO.
        let mut buf = Vec::new();
        let _ = tls.read_to_end(&mut buf);
        drop(tls);
        // The garbage client is dropped too (EOF or an error) before the
        // real rank 0 comes, so every stranger met a rank in set-up.
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.read_to_end(&mut buf);
        drop(s);
        // The real rank 0.
        let ep0 = start_rank(&plan, 0, settings()).unwrap();
        ep0.send(1, 1, b"ping").unwrap();
        assert_eq!(ep0.recv(1, 1).unwrap(), b"ping");
        ep0.finish().unwrap();
        rank1.join().unwrap().unwrap();
    });
}

/// Only a peer that fails authentication ever came: H1611 at the deadline.
#[test]
fn setup_with_only_a_bad_token_fails_with_h1611() {
    with_deadline(Duration::from_secs(60), || {
        let plan = std::sync::Arc::new(JobPlan::localhost_bound(2).unwrap());
        let p = plan.clone();
        let rank1 = thread::spawn(move || {
            let s = Settings {
                setup_window: Duration::from_secs(2),
                ..settings()
            };
            start_rank(&p, 1, s).map(|_| ())
        });
        // Rank 1's listener is bound already (the plan holds it).
        let h1 = &plan.hosts[1];
        let id = plan.identity(0);
        let cfg = client_config_from_pem(
            id.ca_cert_pem.as_bytes(),
            id.cert_pem.as_bytes(),
            id.key_pem().as_bytes(),
        )
        .unwrap();
        let sock = TcpStream::connect((h1.host.as_str(), h1.port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut tls = sperli_tls::config::connect(cfg, sock, &h1.host, &plan.job_id, 1).unwrap();
        // Rank 1's token under rank 0's certificate.
        tls.write_all(&hello(&plan, 0, 1, plan.token(1))).unwrap();
        tls.flush().unwrap();
        let e = rank1.join().unwrap().unwrap_err();
        assert_eq!(code(&e), 1611, "{e}");
    });
}

/// How the raw rank 0 leaves after its HELLO.
enum Leave {
    /// close_notify, then FIN, no BYE.
    Close,
    /// RST (SO_LINGER 0), no BYE.
    Reset,
    /// Stays connected and sends nothing (no heartbeats).
    Silent,
}

/// A raw rank 0 dials rank 1 (an Endpoint blocked in recv), authenticates,
/// then leaves as `how` says; returns rank 1's error.
fn raw_rank0_leaves(how: Leave, silence: Duration) -> Error {
    let plan = std::sync::Arc::new(JobPlan::localhost_bound(2).unwrap());
    let p = plan.clone();
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    let rank1 = thread::spawn(move || {
        let s = Settings {
            silence,
            ..settings()
        };
        let ep = start_rank(&p, 1, s)?;
        let _ = up_tx.send(());
        ep.recv(0, 0).map(|_| ())
    });
    let h1 = &plan.hosts[1];
    let id = plan.identity(0);
    let cfg = client_config_from_pem(
        id.ca_cert_pem.as_bytes(),
        id.cert_pem.as_bytes(),
        id.key_pem().as_bytes(),
    )
    .unwrap();
    // Rank 1's listener is bound already (the plan holds it).
    let sock = TcpStream::connect((h1.host.as_str(), h1.port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let raw = sock.try_clone().unwrap();
    let mut tls = sperli_tls::config::connect(cfg, sock, &h1.host, &plan.job_id, 1).unwrap();
    tls.write_all(&hello(&plan, 0, 1, plan.token(0))).unwrap();
    tls.flush().unwrap();
    assert!(read_until(&mut tls, FrameType::Hello).is_some());
    // Rank 1 counted us (its set-up is done): what follows is an
    // authenticated peer's.
    up_rx.recv().unwrap();
    match how {
        Leave::Close => {
            tls.conn.send_close_notify();
            tls.flush().unwrap();
            drop(tls);
        }
        Leave::Reset => {
            socket2::SockRef::from(&raw)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
            drop(tls);
            drop(raw);
        }
        Leave::Silent => {
            let e = rank1.join().unwrap().unwrap_err();
            drop(tls);
            return e;
        }
    }
    rank1.join().unwrap().unwrap_err()
}

/// A peer that authenticates, then closes (close_notify, FIN) without BYE:
/// H1613 with the cause "closed without BYE".
#[test]
fn close_without_bye_is_h1613() {
    with_deadline(Duration::from_secs(60), || {
        let e = raw_rank0_leaves(Leave::Close, Duration::from_secs(5));
        assert_eq!(
            e,
            Error::PeerLost {
                peer: 0,
                cause: LossCause::ClosedWithoutBye
            }
        );
    });
}

/// A reset without BYE: H1613 with the cause "reset".
#[test]
fn reset_is_h1613() {
    with_deadline(Duration::from_secs(60), || {
        let e = raw_rank0_leaves(Leave::Reset, Duration::from_secs(5));
        assert_eq!(
            e,
            Error::PeerLost {
                peer: 0,
                cause: LossCause::Reset
            }
        );
    });
}

/// A peer that stays connected but sends nothing (no heartbeats): H1613
/// with the cause "silence" after the silence limit (1500 ms here).
#[test]
fn silent_peer_is_h1613() {
    with_deadline(Duration::from_secs(60), || {
        let t = std::time::Instant::now();
        let e = raw_rank0_leaves(Leave::Silent, Duration::from_millis(1500));
        assert!(
            matches!(
                e,
                Error::PeerLost {
                    peer: 0,
                    cause: LossCause::Silence { limit_ms: 1500, .. }
                }
            ),
            "{e}"
        );
        assert!(t.elapsed() < Duration::from_secs(10));
    });
}
