//! The example client of a mailbox job (docs/mailbox.md §9):
//!
//! ```text
//! sperli-mailbox-client demo [--tasks N] [--ranks N] [--hosts H] [--sperli P] [--server P]
//! sperli-mailbox-client bench [--quick] [--sperli P] [--server P]
//! ```
//!
//! `demo` starts a warm job (`sperli run --mailbox`) with the example
//! server, submits N tasks (alternately `sum` to the GROUP and `poly` PER
//! RANK, random inputs), checks every answer, and shuts the job down.
//! `bench` prints `RESULT name size value` lines for `cargo xtask bench`.
//! `sperli` and `sperli-mailbox-server` default to the files next to this
//! program.
#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use sperli_mailbox::{JobSpec, Mailbox, MailboxError, Target};

struct Opts {
    tasks: u64,
    ranks: u32,
    hosts: Option<String>,
    sperli: PathBuf,
    server: PathBuf,
    quick: bool,
    name: String,
}

fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

fn spread(n: u32) -> String {
    (1..=n)
        .map(|i| format!("127.0.0.{i}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        tasks: 1000,
        ranks: 4,
        hosts: None,
        sperli: sibling("sperli"),
        server: sibling("sperli-mailbox-server"),
        quick: false,
        name: format!("client-{}", std::process::id()),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--tasks" => o.tasks = val()?.parse().map_err(|_| "--tasks N")?,
            "--ranks" => o.ranks = val()?.parse().map_err(|_| "--ranks N")?,
            "--hosts" => o.hosts = Some(val()?),
            "--sperli" => o.sperli = val()?.into(),
            "--server" => o.server = val()?.into(),
            "--name" => o.name = val()?,
            "--quick" => o.quick = true,
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    Ok(o)
}

/// xorshift64*: reproducible inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn le(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn start(o: &Opts, ranks: u32, hosts: Option<String>) -> Result<Mailbox, MailboxError> {
    let name = format!("{}-{ranks}", o.name);
    // The label names the job's rank processes (ps, tests).
    let mut spec = JobSpec::new(
        &o.sperli,
        ranks,
        vec![
            o.server.display().to_string(),
            "--label".into(),
            name.clone(),
        ],
    );
    spec.hosts = hosts;
    spec.inherit_output = true;
    Mailbox::start_job(&name, &spec)
}

fn demo(o: &Opts) -> Result<(), String> {
    let n = o.ranks;
    let hosts = o.hosts.clone().or_else(|| Some(spread(n)));
    println!(
        "Starting a warm {n}-rank job: sperli run -n {n} -H {} --mailbox ... -- {}",
        hosts.as_deref().unwrap_or("localhost"),
        o.server.display()
    );
    let t0 = Instant::now();
    let mut mb = start(o, n, hosts).map_err(|e| e.to_string())?;
    let ready = t0.elapsed();
    println!(
        "READY after {:.0} ms (mailbox {}); submitting {} tasks",
        ready.as_secs_f64() * 1e3,
        mb.path().display(),
        o.tasks
    );
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let t = Instant::now();
    let (mut sums, mut polys) = (0u64, 0u64);
    for k in 0..o.tasks {
        if k % 2 == 0 {
            let len = 1 + (rng.next() % 512) as usize;
            let v: Vec<u64> = (0..len).map(|_| rng.next() >> 8).collect();
            let want = v.iter().fold(0u64, |a, &x| a.wrapping_add(x));
            let r = mb
                .submit("sum", Target::Group, &[&le(&v)])
                .map_err(|e| format!("task {k} (sum): {e}"))?;
            for rank in 0..n {
                if r.ok(rank) != Some(&want.to_le_bytes()[..]) {
                    return Err(format!(
                        "task {k} (sum): rank {rank} answered {:?}, expected {want}",
                        r.get(rank)
                    ));
                }
            }
            sums += 1;
        } else {
            let xs: Vec<u64> = (0..n).map(|_| rng.next() >> 1).collect();
            let payloads: Vec<Vec<u8>> = xs.iter().map(|x| x.to_le_bytes().to_vec()).collect();
            let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            let r = mb
                .submit("poly", Target::PerRank, &refs)
                .map_err(|e| format!("task {k} (poly): {e}"))?;
            for (rank, &x) in xs.iter().enumerate() {
                let want = x
                    .wrapping_mul(x)
                    .wrapping_add(x.wrapping_mul(3))
                    .wrapping_add(rank as u64);
                if r.ok(rank as u32) != Some(&want.to_le_bytes()[..]) {
                    return Err(format!(
                        "task {k} (poly): rank {rank} answered {:?}, expected {want}",
                        r.get(rank as u32)
                    ));
                }
            }
            polys += 1;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    mb.shutdown().map_err(|e| e.to_string())?;
    println!(
        "{} tasks checked in {secs:.2} s ({:.0} tasks/s, {:.0} us each): {sums} sum (GROUP, one allreduce each), \
         {polys} poly (PER_RANK); every answer correct. SHUTDOWN: every rank ended normally.",
        o.tasks,
        o.tasks as f64 / secs,
        secs * 1e6 / o.tasks.max(1) as f64
    );
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn futex_rtt(o: &Opts, rounds: u32) -> Result<f64, String> {
    let name = format!("{}-futex", o.name);
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let v = sperli_mailbox::futex_bench::measure(&name, rounds, || {
        Command::new(&me).args(["futex-peer", &name]).spawn()
    })
    .map_err(|e| e.to_string())?;
    Ok(median(v.into_iter().map(us).collect()))
}

fn tcp_rtt(rounds: u32) -> Result<f64, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut peer = Command::new(me)
        .arg("tcp-peer")
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(peer.stdout.take().ok_or("no stdout")?)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let port: u16 = line
        .trim()
        .parse()
        .map_err(|_| format!("bad port {line:?}"))?;
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut buf = [0u8; 8];
    for k in 0..=rounds {
        let t = Instant::now();
        s.write_all(&u64::from(k).to_le_bytes())
            .map_err(|e| e.to_string())?;
        s.read_exact(&mut buf).map_err(|e| e.to_string())?;
        if k > 0 {
            out.push(us(t.elapsed()));
        }
    }
    drop(s);
    let _ = peer.wait();
    Ok(median(out))
}

fn tcp_peer() -> Result<(), String> {
    let l = TcpListener::bind(("127.0.0.1", 0)).map_err(|e| e.to_string())?;
    println!("{}", l.local_addr().map_err(|e| e.to_string())?.port());
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let (mut s, _) = l.accept().map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut buf = [0u8; 8];
    while s.read_exact(&mut buf).is_ok() {
        if s.write_all(&buf).is_err() {
            break;
        }
    }
    Ok(())
}

fn ping_rtt(mb: &mut Mailbox, rounds: u32) -> Result<f64, String> {
    let mut v = Vec::new();
    for k in 0..rounds + 10 {
        let t = Instant::now();
        mb.ping().map_err(|e| e.to_string())?;
        if k >= 10 {
            v.push(us(t.elapsed()));
        }
    }
    Ok(median(v))
}

fn throughput(
    mb: &mut Mailbox,
    size: usize,
    min_tasks: u32,
    min_time: Duration,
) -> Result<f64, String> {
    let v: Vec<u64> = (0..size as u64 / 8).collect();
    let want = v.iter().fold(0u64, |a, &x| a.wrapping_add(x)).to_le_bytes();
    let payload = le(&v);
    for _ in 0..3 {
        mb.submit("sum", Target::Group, &[&payload])
            .map_err(|e| e.to_string())?;
    }
    let t = Instant::now();
    let mut n = 0u32;
    while n < min_tasks || t.elapsed() < min_time {
        let r = mb
            .submit("sum", Target::Group, &[&payload])
            .map_err(|e| e.to_string())?;
        if r.ok(0) != Some(&want[..]) {
            return Err("wrong sum in the throughput run".into());
        }
        n += 1;
    }
    Ok(f64::from(n) / t.elapsed().as_secs_f64())
}

fn new_run_ms(o: &Opts, runs: u32) -> Result<f64, String> {
    let mut v = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new(&o.sperli)
            .args(["run", "-n", "4", "-H", &spread(4), "--timeout", "120", "--"])
            .arg(&o.server)
            .arg("--oneshot")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "sperli run --oneshot failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(v))
}

fn bench(o: &Opts) -> Result<(), String> {
    let q = o.quick;
    let r = |name: &str, size: u64, v: f64| println!("RESULT {name} {size} {v:.3}");
    r("futex_rtt_us", 0, futex_rtt(o, if q { 500 } else { 5000 })?);
    r("tcp_rtt_us", 0, tcp_rtt(if q { 500 } else { 5000 })?);
    for n in [1u32, 4] {
        let hosts = (n > 1).then(|| spread(n));
        let mut mb = start(o, n, hosts).map_err(|e| e.to_string())?;
        r(
            "ping_rtt_us",
            u64::from(n),
            ping_rtt(&mut mb, if q { 100 } else { 1000 })?,
        );
        if n == 4 {
            // The same work as one `--oneshot` job, through the mailbox.
            let v: Vec<u64> = (1..=1000).collect();
            let payload = le(&v);
            let mut t = Vec::new();
            for _ in 0..if q { 20 } else { 200 } {
                let s = Instant::now();
                mb.submit("sum", Target::Group, &[&payload])
                    .map_err(|e| e.to_string())?;
                t.push(us(s.elapsed()));
            }
            r("mailbox_task_us", 4, median(t));
            for size in [1024usize, 1 << 20] {
                let (min_tasks, min_time) = if q {
                    (20, Duration::from_millis(500))
                } else {
                    (100, Duration::from_secs(3))
                };
                let per_s = throughput(&mut mb, size, min_tasks, min_time)?;
                r("task_per_s", size as u64, per_s);
                r("task_mb_s", size as u64, per_s * size as f64 / 1e6);
            }
        }
        mb.shutdown().map_err(|e| e.to_string())?;
        drop(mb);
    }
    r("new_run_ms", 4, new_run_ms(o, if q { 3 } else { 7 })?);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => parse(&args[1..]).and_then(|o| demo(&o)),
        Some("bench") => parse(&args[1..]).and_then(|o| bench(&o)),
        Some("futex-peer") if args.len() == 2 => {
            sperli_mailbox::futex_bench::futex_peer(&args[1]).map_err(|e| e.to_string())
        }
        Some("tcp-peer") => tcp_peer(),
        _ => Err("usage: sperli-mailbox-client demo [--tasks N] [--ranks N] [--hosts H] [--sperli P] [--server P]\n       sperli-mailbox-client bench [--quick]".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sperli-mailbox-client: {e}");
            ExitCode::from(1)
        }
    }
}
