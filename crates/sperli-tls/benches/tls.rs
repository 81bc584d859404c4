//! Timing of CompositeSig keygen/sign/verify and a full TLS 1.3 mutual
//! handshake over 127.0.0.1 (docs/performance.md, section "sperli-tls").
//! Hand-written loop, no criterion: each figure is the per-operation time of
//! several runs; we print the median run and the spread (min..max).
//!
//! Run: `cargo bench -p sperli-tls`

use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use sperli_tls::composite_sig::{generate, sign, verify};
use sperli_tls::config;
use sperli_tls::pki::JobCa;
use sperli_wire::limits::CONTEXT_JOIN;
use sperli_wire::JobId;

const RUNS: usize = 7;

fn report(name: &str, iters: usize, mut f: impl FnMut()) {
    // Warm-up.
    for _ in 0..iters.div_ceil(10) {
        f();
    }
    let mut per_op: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() * 1e6 / iters as f64
        })
        .collect();
    per_op.sort_by(f64::total_cmp);
    println!(
        "| {name} | {:.1} | {:.1} .. {:.1} | {RUNS} x {iters} |",
        per_op[RUNS / 2],
        per_op[0],
        per_op[RUNS - 1]
    );
}

fn main() {
    println!("| operation | median µs/op | spread (min .. max of runs) | runs x iterations |");
    println!("|---|---|---|---|");

    report("CompositeSig keygen", 200, || {
        std::hint::black_box(generate().expect("keygen"));
    });
    let sk = generate().expect("keygen");
    let msg = [0x42u8; 46]; // a join-token message with a 9-byte host
    report("CompositeSig sign (46-byte message)", 200, || {
        std::hint::black_box(sign(&sk, &msg, CONTEXT_JOIN).expect("sign"));
    });
    let sig = sign(&sk, &msg, CONTEXT_JOIN).expect("sign");
    report("CompositeSig verify", 200, || {
        assert!(verify(sk.public_key(), &msg, CONTEXT_JOIN, &sig));
    });

    // Baseline in the same run: Ed25519 alone (the classical half).
    let ed = ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]);
    let ed_sig = ed25519_dalek::Signer::sign(&ed, &msg);
    report("baseline: Ed25519 sign alone (ed25519-dalek)", 200, || {
        std::hint::black_box(ed25519_dalek::Signer::sign(&ed, &msg));
    });
    report("baseline: Ed25519 verify_strict alone", 200, || {
        assert!(ed.verifying_key().verify_strict(&msg, &ed_sig).is_ok());
    });

    // Baseline: a bare TCP connect + accept on 127.0.0.1 (no bytes sent).
    {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let a = l.local_addr().expect("addr");
        let acceptor = thread::spawn(move || {
            for _ in 0..(50 / 10 + RUNS * 50) {
                drop(l.accept().expect("accept"));
            }
        });
        report("baseline: TCP connect + accept, 127.0.0.1", 50, || {
            drop(TcpStream::connect(a).expect("connect"));
        });
        acceptor.join().expect("acceptor");
    }

    let job = JobId([7; 16]);
    let ca = JobCa::generate(job, SystemTime::now() + Duration::from_secs(3600)).expect("CA");
    let r0 = ca.issue_rank(0, "127.0.0.1").expect("rank 0");
    let r1 = ca.issue_rank(1, "127.0.0.1").expect("rank 1");
    let client_cfg = config::client_config_from_pem(
        r0.ca_cert_pem.as_bytes(),
        r0.cert_pem.as_bytes(),
        r0.key_pem().as_bytes(),
    )
    .expect("client config");
    let server_cfg = config::server_config_from_pem(
        r1.ca_cert_pem.as_bytes(),
        r1.cert_pem.as_bytes(),
        r1.key_pem().as_bytes(),
    )
    .expect("server config");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (done_tx, done_rx) = mpsc::channel::<bool>();
    let total = 50 / 10 + RUNS * 50;
    let server = thread::spawn(move || {
        for _ in 0..total {
            let (sock, _) = listener.accept().expect("accept");
            sock.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let ok = config::accept(server_cfg.clone(), sock, &job, 0).is_ok();
            done_tx.send(ok).expect("send");
        }
    });
    report(
        "TLS 1.3 mutual handshake, 127.0.0.1 (TCP connect + both sides done + subject checks)",
        50,
        || {
            let sock = TcpStream::connect(addr).expect("connect");
            sock.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let s =
                config::connect(client_cfg.clone(), sock, "127.0.0.1", &job, 1).expect("handshake");
            assert!(done_rx.recv().expect("server result"));
            drop(s);
        },
    );
    server.join().expect("server thread");
}
