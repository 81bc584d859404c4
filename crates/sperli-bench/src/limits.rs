//! The machine's limits, measured in one process: memcpy, the reduction
//! loop, AES-GCM (ring's aead), a bare TCP stream and a bare rustls stream
//! over loopback (one blocking thread per side, same provider and TLS 1.3
//! configuration as SPERLI), the TLS 1.3 mutual handshake and CompositeSig.

use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Instant;

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM};
use sperli_tls::composite_sig::{generate, sign, verify};
use sperli_tls::config::{accept, client_config_from_pem, connect, server_config_from_pem};
use sperli_tls::job_plan::JobPlan;
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::limits::CONTEXT_JOIN;
use sperli_wire::reduce::combine_into;

use crate::{iters, result};

const MIB: usize = 1 << 20;
/// Round-trip sizes (ping-pong latency) and streaming sizes (bandwidth).
pub const LAT_SIZES: [usize; 3] = [8, 1024, 64 * 1024];
/// Streaming sizes.
pub const BW_SIZES: [usize; 3] = [MIB, 16 * MIB, 64 * MIB];
/// The largest TLS 1.3 record's plaintext.
const RECORD: usize = 16 * 1024;

/// Round trips per latency run (full, quick).
pub fn lat_count(size: usize, quick: bool) -> usize {
    if size >= 64 * 1024 {
        iters(quick, 500, 100)
    } else {
        iters(quick, 4000, 1000)
    }
}

/// Messages per bandwidth run (full, quick).
pub fn bw_count(size: usize, quick: bool) -> usize {
    match size {
        s if s <= MIB => iters(quick, 128, 32),
        s if s <= 16 * MIB => iters(quick, 16, 4),
        _ => iters(quick, 4, 2),
    }
}

fn gbs(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}

pub fn run(quick: bool) {
    memory(quick);
    aes_gcm(quick);
    let plan = JobPlan::localhost(2).expect("a 2-rank job plan");
    streams("tcp", quick, || {
        let (a, b) = tcp_pair();
        (Box::new(a), Box::new(b))
    });
    streams("tls", quick, || {
        let (a, b) = tls_pair(&plan);
        (a, b)
    });
    handshake(&plan, quick);
    composite_sig(quick);
}

fn memory(quick: bool) {
    let n = 16 * MIB;
    let reps = iters(quick, 20, 5);
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    for _ in 0..2 {
        dst.copy_from_slice(black_box(&src));
    }
    let t = Instant::now();
    for _ in 0..reps {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    }
    result("memcpy", n, gbs(n * reps, t.elapsed().as_secs_f64()));
    let right: Vec<u8> = (0..n / 8).flat_map(|i| (i as f64).to_le_bytes()).collect();
    let mut acc = right.clone();
    for _ in 0..2 {
        combine_into(&mut acc, &right, ElementType::F64, Reduction::Sum).expect("combine");
    }
    let t = Instant::now();
    for _ in 0..reps {
        combine_into(
            black_box(&mut acc),
            black_box(&right),
            ElementType::F64,
            Reduction::Sum,
        )
        .expect("combine");
    }
    result(
        "combine_f64_sum",
        n,
        gbs(n * reps, t.elapsed().as_secs_f64()),
    );
}

/// Seal and open 16 KiB records (TLS 1.3's largest) over 16 MiB, in place.
fn aes_gcm(quick: bool) {
    let reps = iters(quick, 8, 2);
    let n = 16 * MIB;
    let records = n / RECORD;
    for (name, alg, klen) in [
        ("aes128gcm", &AES_128_GCM, 16),
        ("aes256gcm", &AES_256_GCM, 32),
    ] {
        let key = LessSafeKey::new(UnboundKey::new(alg, &vec![7u8; klen]).expect("key"));
        let mut buf = vec![5u8; records * (RECORD + 16)];
        let nonce = |i: usize| {
            let mut b = [0u8; 12];
            b[4..].copy_from_slice(&(i as u64).to_be_bytes());
            Nonce::assume_unique_for_key(b)
        };
        let mut seal_t = 0.0;
        let mut open_t = 0.0;
        for rep in 0..reps + 1 {
            let t = Instant::now();
            for (i, rec) in buf.chunks_exact_mut(RECORD + 16).enumerate() {
                let tag = key
                    .seal_in_place_separate_tag(nonce(i), Aad::empty(), &mut rec[..RECORD])
                    .expect("seal");
                rec[RECORD..].copy_from_slice(tag.as_ref());
            }
            let s = t.elapsed().as_secs_f64();
            let t = Instant::now();
            for (i, rec) in buf.chunks_exact_mut(RECORD + 16).enumerate() {
                key.open_in_place(nonce(i), Aad::empty(), rec)
                    .expect("open");
            }
            let o = t.elapsed().as_secs_f64();
            if rep > 0 {
                seal_t += s;
                open_t += o;
            }
        }
        result(&format!("{name}_seal"), n, gbs(n * reps, seal_t));
        result(&format!("{name}_open"), n, gbs(n * reps, open_t));
    }
}

trait Duplex: Read + Write + Send {}
impl<T: Read + Write + Send> Duplex for T {}

type Pair = (Box<dyn Duplex>, Box<dyn Duplex>);

fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    let (b, _) = l.accept().expect("accept");
    a.set_nodelay(true).expect("nodelay");
    b.set_nodelay(true).expect("nodelay");
    (a, b)
}

/// Rank 0's client and rank 1's server configuration of `plan`.
fn configs(
    plan: &JobPlan,
) -> (
    std::sync::Arc<rustls::ClientConfig>,
    std::sync::Arc<rustls::ServerConfig>,
) {
    let (i0, i1) = (plan.identity(0), plan.identity(1));
    let client = client_config_from_pem(
        i0.ca_cert_pem.as_bytes(),
        i0.cert_pem.as_bytes(),
        i0.key_pem().as_bytes(),
    )
    .expect("client config");
    let server = server_config_from_pem(
        i1.ca_cert_pem.as_bytes(),
        i1.cert_pem.as_bytes(),
        i1.key_pem().as_bytes(),
    )
    .expect("server config");
    (client, server)
}

fn tls_pair(plan: &JobPlan) -> Pair {
    let (a, b) = tcp_pair();
    let (client, server) = configs(plan);
    let job = plan.job_id;
    let srv = thread::spawn(move || accept(server, b, &job, 0).expect("accept"));
    let c = connect(client, a, &plan.hosts[1].host, &job, 1).expect("connect");
    let s = srv.join().expect("server thread");
    if let Some(suite) = c.conn.negotiated_cipher_suite() {
        println!("INFO cipher {:?}", suite.suite());
    }
    if let Some(kx) = c.conn.negotiated_key_exchange_group() {
        println!("INFO kx {:?}", kx.name());
    }
    (Box::new(c), Box::new(s))
}

/// What one side does; the other mirrors it.
#[derive(Clone, Copy)]
enum Phase {
    /// `n` round trips of `size` bytes each way; `timed` = report it.
    RoundTrips { size: usize, n: usize, timed: bool },
    /// `n` one-way messages of `size` bytes then a 1-byte ack.
    Stream { size: usize, n: usize, timed: bool },
}

fn phases(quick: bool) -> Vec<Phase> {
    let mut v = Vec::new();
    for size in LAT_SIZES {
        let n = lat_count(size, quick);
        v.push(Phase::RoundTrips {
            size,
            n: n / 10,
            timed: false,
        });
        v.push(Phase::RoundTrips {
            size,
            n,
            timed: true,
        });
    }
    for size in BW_SIZES {
        v.push(Phase::Stream {
            size,
            n: 1,
            timed: false,
        });
        v.push(Phase::Stream {
            size,
            n: bw_count(size, quick),
            timed: true,
        });
    }
    v
}

/// Round trips (half round trip in µs) and streams (GB/s) over a bare pair.
fn streams(name: &str, quick: bool, make: impl Fn() -> Pair) {
    let (mut a, b) = make();
    let plan = phases(quick);
    let srv_plan = plan.clone();
    let srv = thread::spawn(move || {
        let mut b = b;
        let mut buf = vec![0u8; 64 * MIB];
        for p in srv_plan {
            match p {
                Phase::RoundTrips { size, n, .. } => {
                    for _ in 0..n {
                        b.read_exact(&mut buf[..size]).expect("read");
                        b.write_all(&buf[..size]).expect("write");
                        b.flush().expect("flush");
                    }
                }
                Phase::Stream { size, n, .. } => {
                    for _ in 0..n {
                        b.read_exact(&mut buf[..size]).expect("read");
                    }
                    b.write_all(&[1]).expect("ack");
                    b.flush().expect("flush");
                }
            }
        }
    });
    let mut buf = vec![3u8; 64 * MIB];
    for p in plan {
        match p {
            Phase::RoundTrips { size, n, timed } => {
                let t = Instant::now();
                for _ in 0..n {
                    a.write_all(&buf[..size]).expect("write");
                    a.flush().expect("flush");
                    a.read_exact(&mut buf[..size]).expect("read");
                }
                if timed {
                    let us = t.elapsed().as_secs_f64() * 1e6 / (2 * n) as f64;
                    result(&format!("{name}_lat"), size, us);
                }
            }
            Phase::Stream { size, n, timed } => {
                let t = Instant::now();
                for _ in 0..n {
                    a.write_all(&buf[..size]).expect("write");
                }
                a.flush().expect("flush");
                let mut ack = [0u8; 1];
                a.read_exact(&mut ack).expect("ack");
                if timed {
                    result(
                        &format!("{name}_bw"),
                        size,
                        gbs(size * n, t.elapsed().as_secs_f64()),
                    );
                }
            }
        }
    }
    srv.join().expect("server thread");
}

/// TCP connect + accept, and TCP connect + full TLS 1.3 mutual handshake
/// with SPERLI's checks (as `crates/sperli-tls/benches/tls.rs`).
fn handshake(plan: &JobPlan, quick: bool) {
    let n = iters(quick, 60, 12);
    let (client, server) = configs(plan);
    let job = plan.job_id;
    let host = plan.hosts[1].host.clone();
    let l = TcpListener::bind((host.as_str(), 0)).expect("bind");
    let addr = l.local_addr().expect("addr");
    let warm = n / 6;
    let srv = thread::spawn(move || {
        for _ in 0..warm + n {
            drop(l.accept().expect("accept"));
        }
        for _ in 0..warm + n {
            let (sock, _) = l.accept().expect("accept");
            let s = accept(server.clone(), sock, &job, 0).expect("server handshake");
            drop(s);
        }
    });
    let mut t = Instant::now();
    for i in 0..warm + n {
        if i == warm {
            t = Instant::now();
        }
        drop(TcpStream::connect(addr).expect("connect"));
    }
    result("tcp_connect", 0, t.elapsed().as_secs_f64() * 1e6 / n as f64);
    let mut t = Instant::now();
    for i in 0..warm + n {
        if i == warm {
            t = Instant::now();
        }
        let sock = TcpStream::connect(addr).expect("connect");
        let mut c = connect(client.clone(), sock, &host, &job, 1).expect("client handshake");
        // The server's checks are done once it reads our close: wait for EOF.
        c.conn.send_close_notify();
        let _ = c.flush();
        let mut rest = Vec::new();
        let _ = c.sock.read_to_end(&mut rest);
    }
    result(
        "tls_handshake",
        0,
        t.elapsed().as_secs_f64() * 1e6 / n as f64,
    );
    srv.join().expect("server thread");
}

fn composite_sig(quick: bool) {
    let n = iters(quick, 60, 10);
    let msg = [0x5au8; 46];
    let t = Instant::now();
    let mut sk = generate().expect("keygen");
    for _ in 1..n {
        sk = black_box(generate().expect("keygen"));
    }
    result("sig_keygen", 0, t.elapsed().as_secs_f64() * 1e6 / n as f64);
    let t = Instant::now();
    for _ in 0..n {
        black_box(sign(&sk, &msg, CONTEXT_JOIN).expect("sign"));
    }
    result("sig_sign", 0, t.elapsed().as_secs_f64() * 1e6 / n as f64);
    let sig = sign(&sk, &msg, CONTEXT_JOIN).expect("sign");
    let t = Instant::now();
    for _ in 0..n {
        assert!(verify(sk.public_key(), &msg, CONTEXT_JOIN, &sig));
    }
    result("sig_verify", 0, t.elapsed().as_secs_f64() * 1e6 / n as f64);
}
