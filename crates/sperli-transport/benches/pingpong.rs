//! Ping-pong latency (8 B) and one-way bandwidth (16 MiB messages) between
//! two ranks, next to a bare rustls stream and a bare TCP stream over
//! loopback measured by the same harness in the same run (same rustls
//! provider, ring, and the same TLS 1.3 configuration from sperli-tls).
//!
//! The two ranks are two `Endpoint`s in two threads of this process (each
//! with its own I/O thread), not two processes.
//!
//! Run: `cargo bench -p sperli-transport --bench pingpong`

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use sperli_tls::config::{accept, client_config_from_pem, connect, server_config_from_pem};
use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, Settings};

const ROUNDS: usize = 2000;
const BIG: usize = 16 * 1024 * 1024;
const BIG_COUNT: usize = 8;
const RUNS: usize = 5;

/// One side of a byte stream used by the bare baselines.
trait Duplex: Read + Write + Send {}
impl<T: Read + Write + Send> Duplex for T {}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Half round trip (µs) of 8-byte ping-pong, and bandwidth (GB/s) of
/// `BIG_COUNT` one-way 16 MiB messages then a 1-byte ack, over streams.
fn bare(make: &dyn Fn() -> (Box<dyn Duplex>, Box<dyn Duplex>)) -> (f64, f64) {
    let (mut a, b) = make();
    let srv = thread::spawn(move || {
        let mut b = b;
        let mut m = [0u8; 8];
        for _ in 0..RUNS {
            for _ in 0..ROUNDS + 200 {
                b.read_exact(&mut m).unwrap();
                b.write_all(&m).unwrap();
                b.flush().unwrap();
            }
        }
        let mut big = vec![0u8; BIG];
        for _ in 0..RUNS {
            for _ in 0..BIG_COUNT {
                b.read_exact(&mut big).unwrap();
            }
            b.write_all(&[1]).unwrap();
            b.flush().unwrap();
        }
    });
    let mut lat = Vec::new();
    let mut m = [7u8; 8];
    for _ in 0..RUNS {
        for _ in 0..200 {
            a.write_all(&m).unwrap();
            a.flush().unwrap();
            a.read_exact(&mut m).unwrap();
        }
        let t = Instant::now();
        for _ in 0..ROUNDS {
            a.write_all(&m).unwrap();
            a.flush().unwrap();
            a.read_exact(&mut m).unwrap();
        }
        lat.push(t.elapsed().as_secs_f64() * 1e6 / (2 * ROUNDS) as f64);
    }
    let big = vec![3u8; BIG];
    let mut bw = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        for _ in 0..BIG_COUNT {
            a.write_all(&big).unwrap();
        }
        a.flush().unwrap();
        let mut ack = [0u8; 1];
        a.read_exact(&mut ack).unwrap();
        bw.push((BIG * BIG_COUNT) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    srv.join().unwrap();
    (median(lat), median(bw))
}

fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    a.set_nodelay(true).unwrap();
    b.set_nodelay(true).unwrap();
    (a, b)
}

/// Settings for the two ranks; `PINGPONG_SPIN_US` sets [`Settings::spin`]
/// (unset: the default).
fn bench_settings() -> Settings {
    let spin = std::env::var("PINGPONG_SPIN_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(sperli_transport::DEFAULT_SPIN, Duration::from_micros);
    Settings {
        spin,
        ..Settings::default()
    }
}

/// `PINGPONG_ONLY=bw`: the Endpoint's bandwidth part alone (for a profiler).
fn bw_only() -> bool {
    std::env::var("PINGPONG_ONLY").is_ok_and(|v| v == "bw")
}

fn endpoints(plan: &JobPlan) -> (f64, f64) {
    let d0 = plan.description(0);
    let d1 = plan.description(1);
    let go = Arc::new(Barrier::new(2));
    let g1 = go.clone();
    let peer = thread::spawn(move || {
        let ep = Endpoint::start(&d1, bench_settings()).unwrap();
        g1.wait();
        for _ in 0..if bw_only() { 0 } else { RUNS } {
            for _ in 0..ROUNDS + 200 {
                let m = ep.recv(0, 1).unwrap();
                ep.send(0, 1, &m).unwrap();
            }
        }
        for _ in 0..RUNS {
            for _ in 0..BIG_COUNT {
                let m = ep.recv(0, 2).unwrap();
                assert_eq!(m.len(), BIG);
            }
            ep.send(0, 3, &[1]).unwrap();
        }
        ep.finish().unwrap();
    });
    let ep = Endpoint::start(&d0, bench_settings()).unwrap();
    go.wait();
    let mut lat = Vec::new();
    let m = [7u8; 8];
    for _ in 0..if bw_only() { 0 } else { RUNS } {
        for _ in 0..200 {
            ep.send(1, 1, &m).unwrap();
            ep.recv(1, 1).unwrap();
        }
        let t = Instant::now();
        for _ in 0..ROUNDS {
            ep.send(1, 1, &m).unwrap();
            ep.recv(1, 1).unwrap();
        }
        lat.push(t.elapsed().as_secs_f64() * 1e6 / (2 * ROUNDS) as f64);
    }
    let big = vec![3u8; BIG];
    let mut bw = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        for _ in 0..BIG_COUNT {
            ep.send(1, 2, &big).unwrap();
        }
        ep.recv(1, 3).unwrap();
        bw.push((BIG * BIG_COUNT) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    peer.join().unwrap();
    ep.finish().unwrap();
    (median(lat), median(bw))
}

fn main() {
    let plan = JobPlan::localhost(2).unwrap();
    if std::env::var("PINGPONG_ONLY").is_ok() {
        println!("{:?}", endpoints(&plan));
        return;
    }
    let tcp = bare(&|| {
        let (a, b) = tcp_pair();
        (Box::new(a), Box::new(b))
    });
    let tls = bare(&|| {
        let (a, b) = tcp_pair();
        let i0 = plan.identity(0);
        let i1 = plan.identity(1);
        let client = client_config_from_pem(
            i0.ca_cert_pem.as_bytes(),
            i0.cert_pem.as_bytes(),
            i0.key_pem().as_bytes(),
        )
        .unwrap();
        let server = server_config_from_pem(
            i1.ca_cert_pem.as_bytes(),
            i1.cert_pem.as_bytes(),
            i1.key_pem().as_bytes(),
        )
        .unwrap();
        let job = plan.job_id;
        let srv = thread::spawn(move || accept(server, b, &job, 0).unwrap());
        let c = connect(client, a, &plan.hosts[1].host, &job, 1);
        let s = srv.join().unwrap();
        (Box::new(c.unwrap()), Box::new(s))
    });
    let sperli = endpoints(&plan);
    println!(
        "8 B: half round trip (µs, median of {RUNS} runs of {ROUNDS} round trips); \
         16 MiB: one-way bandwidth (GB/s = 1e9 B/s, median of {RUNS} runs of {BIG_COUNT} messages + 1-byte ack)\n"
    );
    println!("| transport | 8 B half round trip (µs) | ratio to bare rustls | 16 MiB bandwidth (GB/s) | ratio to bare rustls |");
    println!("|---|---|---|---|---|");
    for (name, (l, b)) in [
        ("bare TCP (std, TCP_NODELAY)", tcp),
        ("bare rustls (TLS 1.3, ring, StreamOwned)", tls),
        (
            "sperli-transport Endpoint (2 threads + 2 I/O threads)",
            sperli,
        ),
    ] {
        println!(
            "| {name} | {l:.1} | {:.2} | {b:.2} | {:.2} |",
            l / tls.0,
            b / tls.1
        );
    }
}
