//! Checkpoint benchmark (not a timed test): the time of one
//! `checkpoint(state)` (docs/sperli-protocol.md §9.4) at 4 ranks for 1, 64
//! and 256 MiB of state per rank, next to the two things a checkpoint
//! cannot avoid, measured in the same run on the same ranks:
//!
//! - write: every rank writes the same number of bytes to a file of its own
//!   and calls fsync (all ranks at once);
//! - transfer: every rank sends the same bytes once over the transport to
//!   rank (r + 1) mod 4 and receives its predecessor's (`send_large` /
//!   `recv_large`, all ranks at once), the pattern of the buddy push.
//!
//! The 4 ranks are threads of this process, each with its own TLS 1.3
//! Endpoint on 127.0.0.(r+1) and its own directory. Times are wall-clock on
//! rank 0 between two barriers, the median of the repetitions.
//!
//! ```text
//! cargo bench -p sperli-ckpt --bench ckpt
//! SPERLI_CKPT_BENCH_MIB=1,64 SPERLI_CKPT_BENCH_DIR=/var/tmp cargo bench -p sperli-ckpt --bench ckpt
//! ```
//!
//! The directory (default: the system temp dir) must be on a real disk,
//! not tmpfs, or fsync measures nothing.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sperli_ckpt::{Checkpointer, JobKeys};
use sperli_collective::Comm;
use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, Settings};

const RANKS: u32 = 4;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One measurement on every rank: barrier, `f`, barrier; rank 0's wall time.
fn timed(
    ck: &mut Checkpointer<&Endpoint>,
    mut f: impl FnMut(&mut Checkpointer<&Endpoint>),
) -> Duration {
    ck.comm().barrier().unwrap();
    let t = Instant::now();
    f(ck);
    ck.comm().barrier().unwrap();
    t.elapsed()
}

fn write_fsync(path: &Path, parts: &[&[u8]]) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    for p in parts {
        f.write_all(p).unwrap();
    }
    f.sync_all().unwrap();
}

struct Row {
    mib: usize,
    ckpt: Duration,
    write: Duration,
    transfer: Duration,
}

fn bench_size(root: &Path, mib: usize, reps: usize) -> Row {
    let plan = JobPlan::localhost(RANKS).unwrap();
    let bytes = mib << 20;
    let rows: Vec<Option<Row>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..RANKS)
            .map(|r| {
                let desc = plan.description(r);
                let dir = root.join(format!("mib-{mib}")).join(format!("rank-{r}"));
                s.spawn(move || {
                    let settings = Settings {
                        silence: Duration::from_secs(60),
                        ..Settings::default()
                    };
                    let ep = Endpoint::start(&desc, settings).unwrap();
                    let keys = JobKeys::from_description(&desc).unwrap();
                    let mut ck = Checkpointer::new(Comm::new(&ep), &dir, keys).unwrap();
                    let state: Vec<u8> = (0..bytes)
                        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(r) as u8)
                        .collect();
                    let (mut c, mut w, mut t) = (Vec::new(), Vec::new(), Vec::new());
                    let raw = dir.join("raw.bin");
                    // The checkpoint writes 80 header bytes and an 12-byte
                    // state prefix (version, length) beside the state.
                    let header = [0u8; 92];
                    let succ = (r + 1) % RANKS;
                    let pred = (r + RANKS - 1) % RANKS;
                    for _ in 0..reps {
                        c.push(timed(&mut ck, |ck| {
                            ck.checkpoint(&state).unwrap();
                        }));
                        w.push(timed(&mut ck, |_| write_fsync(&raw, &[&header, &state])));
                        t.push(timed(&mut ck, |_| {
                            ep.send_large(succ, 1, &state).unwrap();
                            let got = ep.recv_large(pred, 1).unwrap();
                            assert_eq!(got.len(), state.len());
                        }));
                    }
                    drop(ck);
                    let _ = ep.finish();
                    (r == 0).then(|| Row {
                        mib,
                        ckpt: median(c),
                        write: median(w),
                        transfer: median(t),
                    })
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let _ = std::fs::remove_dir_all(root.join(format!("mib-{mib}")));
    rows.into_iter().flatten().next().unwrap()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("ckpt: bench");
        return;
    }
    let sizes: Vec<usize> = std::env::var("SPERLI_CKPT_BENCH_MIB")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 64, 256]);
    let root: PathBuf = std::env::var_os("SPERLI_CKPT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("sperli-ckpt-bench-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    println!(
        "sperli-ckpt: checkpoint of N MiB of state per rank, {RANKS} ranks (threads, TLS 1.3 on 127.0.0.x), dir {}",
        root.display()
    );
    println!("| state/rank | checkpoint | write+fsync | transfer | write+fsync+transfer | ratio |");
    println!("|---|---|---|---|---|---|");
    for mib in sizes {
        let reps = match mib {
            0..=8 => 9,
            9..=64 => 3,
            _ => 3,
        };
        let row = bench_size(&root, mib, reps);
        let sum = row.write + row.transfer;
        println!(
            "| {} MiB | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.2}x |",
            row.mib,
            row.ckpt.as_secs_f64() * 1e3,
            row.write.as_secs_f64() * 1e3,
            row.transfer.as_secs_f64() * 1e3,
            sum.as_secs_f64() * 1e3,
            row.ckpt.as_secs_f64() / sum.as_secs_f64(),
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
