//! The checkpoint benchmarks: the time of one
//! `Checkpointer::checkpoint(&state)` (protocol §9.4) with N bytes of
//! `Vec<u8>` state per rank, next to its baseline measured in the same job
//! on the same ranks, and the time of a resume (§10.2).
//!
//! - `sperli-bench rank ckpt` is one rank of a job that `sperli run
//!   --checkpoint-dir DIR` started (what `cargo xtask bench` runs);
//! - `sperli-bench ckpt-threads [--quick] [MIB...]` runs the same
//!   measurement with 4 ranks as threads of one process (each its own TLS
//!   1.3 Endpoint on 127.0.0.(r+1), its own directory under the temp dir
//!   or `SPERLI_CKPT_BENCH_DIR`): quicker to iterate on;
//! - `sperli-bench rank resume` is one rank of a later run of the same job
//!   (`sperli run --job-key FILE --checkpoint-dir DIR`): it resumes the
//!   last checkpoint of the `ckpt` job.
//!
//! What is measured next to the checkpoint, on every rank at once:
//!
//! - write+fsync: the same bytes plus the 92 bytes a checkpoint adds (the
//!   80-byte rank file header, the state's format version and length) to a
//!   file of its own in its checkpoint directory, then fsync;
//! - transfer: the same bytes once to rank (r+1) mod size, and its
//!   predecessor's received (`send_large` / `recv_large`), the pattern of
//!   the buddy push.
//!
//! Each measurement is rank 0's wall clock between two barriers; after
//! two untimed rounds of all three, rank 0 prints the median of the
//! repetitions (ms) as `ckpt_ms`,
//! `ckpt_write_fsync_ms` and `ckpt_transfer_ms`, with the state bytes per
//! rank as the size. The resume prints `resume_ms` (from the rank's start
//! to every rank loaded, rank 0's clock), `resume_exchange_ms` (the
//! exchange alone) and `resume_loaded_unix_ns` (when every rank had
//! loaded, for the xtask to subtract the launcher's start).

use std::borrow::Borrow;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sperli_ckpt::{encode_state, Checkpointer, JobKeys};
use sperli_collective::{Comm, Peers};
use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, Settings};
use sperli_wire::limits::RANK_FILE_HEADER_LEN;
use sperli_wire::Error;

use crate::result;

const MIB: usize = 1 << 20;
/// The tag of the transfer's messages.
const TAG: u32 = 1;
/// Ranks of `ckpt-threads`.
const THREAD_RANKS: u32 = 4;
/// Untimed rounds before the repetitions of each size: a job checkpoints
/// the same state again and again, and the first checkpoints of a size
/// write into new files (later ones write over the files recycled from
/// epoch e - 2).
const WARM_UP: usize = 2;

/// (state bytes per rank, repetitions) of one job: 1 and 64 MiB, or with
/// `--quick` 1 and 16 MiB with fewer repetitions. The last size is the
/// state the `resume` mode finds.
pub fn sizes(quick: bool) -> [(usize, usize); 2] {
    if quick {
        [(MIB, 5), (16 * MIB, 3)]
    } else {
        [(MIB, 9), (64 * MIB, 3)]
    }
}

/// The median of `v` (not empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Ends the benchmark with `why` (a wrong result or an impossible setup:
/// no figure would mean anything).
fn refuse(why: &str) -> ! {
    eprintln!("sperli-bench: {why}");
    std::process::exit(1)
}

fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// One measurement on every rank: barrier, `f`, barrier; this rank's wall
/// time in ms (rank 0's is the one printed).
fn timed<L: Peers>(
    ck: &mut Checkpointer<L>,
    f: impl FnOnce(&mut Checkpointer<L>) -> Result<(), Error>,
) -> Result<f64, Error> {
    ck.comm().barrier()?;
    let t = Instant::now();
    f(ck)?;
    ck.comm().barrier()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// The baseline's write: `parts` to `path` (created or truncated, mode
/// 0600), then fsync.
fn write_fsync(path: &Path, parts: &[&[u8]]) -> Result<(), Error> {
    let op = "writing and fsyncing the benchmark's baseline file";
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(op, &e))?;
    for p in parts {
        f.write_all(p).map_err(|e| Error::io(op, &e))?;
    }
    f.sync_all().map_err(|e| Error::io(op, &e))
}

/// The state of `rank` with `bytes` bytes (not all alike, so nothing
/// compresses).
fn state(rank: u32, bytes: usize) -> Vec<u8> {
    (0..bytes)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(rank) as u8)
        .collect()
}

/// Medians (ms) of one size: checkpoint, write+fsync, transfer.
struct Figures {
    bytes: usize,
    ckpt: f64,
    write_fsync: f64,
    transfer: f64,
}

/// The measurement of every size on this rank (see the module docs).
fn measure<L: Peers + Borrow<Endpoint>>(
    ck: &mut Checkpointer<L>,
    sizes: &[(usize, usize)],
) -> Result<Vec<Figures>, Error> {
    let rank = ck.comm().rank();
    let size = ck.comm().size();
    if size < 2 {
        refuse("the checkpoint benchmark needs at least 2 ranks (a buddy)");
    }
    let succ = (rank + 1) % size;
    let pred = (rank + size - 1) % size;
    let raw = ck.dir().join("baseline.bin");
    // What a checkpoint writes beside the state: the rank file header and
    // the state's prefix (format version, length of the Vec).
    let header = vec![0u8; RANK_FILE_HEADER_LEN + encode_state(&Vec::<u8>::new()).len()];
    let mut out = Vec::new();
    for &(bytes, reps) in sizes {
        let state = state(rank, bytes);
        let (mut c, mut w, mut t) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..WARM_UP + reps {
            if i == WARM_UP {
                (c, w, t) = (Vec::new(), Vec::new(), Vec::new());
            }
            c.push(timed(ck, |ck| ck.checkpoint(&state).map(drop))?);
            w.push(timed(ck, |_| write_fsync(&raw, &[&header, &state]))?);
            t.push(timed(ck, |ck| {
                let ep = ck.endpoint();
                ep.send_large(succ, TAG, &state)?;
                let got = ep.recv_large(pred, TAG)?;
                if got.len() != state.len() {
                    refuse("the transfer received a message of the wrong length");
                }
                Ok(())
            })?);
        }
        out.push(Figures {
            bytes,
            ckpt: median(c),
            write_fsync: median(w),
            transfer: median(t),
        });
    }
    let _ = std::fs::remove_file(&raw);
    Ok(out)
}

fn print(figures: &[Figures]) {
    for f in figures {
        result("ckpt_ms", f.bytes, f.ckpt);
        result("ckpt_write_fsync_ms", f.bytes, f.write_fsync);
        result("ckpt_transfer_ms", f.bytes, f.transfer);
    }
}

/// `sperli-bench rank ckpt`: joins the job with a checkpointer
/// (`SPERLI_CHECKPOINT_DIR`, set by `sperli run --checkpoint-dir`) and
/// measures every size of [`sizes`].
pub fn run(quick: bool) -> Result<(), Error> {
    let mut ck = Checkpointer::join()?;
    let figures = measure(&mut ck, &sizes(quick))?;
    if ck.comm().rank() == 0 {
        print(&figures);
    }
    ck.into_comm().into_link().finish()
}

/// `sperli-bench rank resume`: a later run of the `ckpt` job resumes its
/// last checkpoint (the last size of [`sizes`]) and checks this rank's
/// state.
pub fn resume(quick: bool) -> Result<(), Error> {
    let started = Instant::now();
    let mut ck = Checkpointer::join()?;
    let rank = ck.comm().rank();
    let joined = Instant::now();
    let got = ck.resume::<Vec<u8>>()?;
    ck.comm().barrier()?;
    let loaded = unix_ns();
    let (since_start, since_join) = (started.elapsed(), joined.elapsed());
    let (bytes, _) = sizes(quick)[1];
    let ok = matches!(&got, Some((_, s)) if *s == state(rank, bytes));
    if !ok {
        refuse("the resumed state is not the checkpointed one");
    }
    if rank == 0 {
        result("resume_ms", bytes, since_start.as_secs_f64() * 1e3);
        result("resume_exchange_ms", bytes, since_join.as_secs_f64() * 1e3);
        println!("RESULT resume_loaded_unix_ns {bytes} {loaded}");
    }
    ck.into_comm().into_link().finish()
}

/// `sperli-bench ckpt-threads [--quick] [MIB...]`: the measurement of
/// [`run`] with 4 ranks as threads of this process, for the sizes given
/// (MiB; default those of [`sizes`]).
pub fn threads(quick: bool, mib: &[usize]) -> Result<(), Error> {
    let sizes: Vec<(usize, usize)> = if mib.is_empty() {
        sizes(quick).to_vec()
    } else {
        mib.iter()
            .map(|&m| (m * MIB, if m <= 8 { 9 } else { 3 }))
            .collect()
    };
    let base: PathBuf = std::env::var_os("SPERLI_CKPT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("sperli-ckpt-threads-{}", std::process::id()));
    let plan = JobPlan::localhost(THREAD_RANKS)
        .unwrap_or_else(|e| refuse(&format!("cannot plan the job: {e}")));
    println!(
        "# ckpt-threads: {THREAD_RANKS} ranks as threads, TLS 1.3 on 127.0.0.x, directory {}",
        base.display()
    );
    let out: Vec<Result<Option<Vec<Figures>>, Error>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREAD_RANKS)
            .map(|r| {
                let desc = plan.description(r);
                let dir = base.join(format!("rank-{r}"));
                let sizes = &sizes;
                s.spawn(move || {
                    let settings = Settings {
                        silence: Duration::from_secs(60),
                        ..Settings::default()
                    };
                    let ep = Endpoint::start(&desc, settings)?;
                    let keys = JobKeys::from_description(&desc)?;
                    let mut ck = Checkpointer::new(Comm::new(&ep), &dir, keys)?;
                    let figures = measure(&mut ck, sizes)?;
                    drop(ck);
                    ep.finish()?;
                    Ok((r == 0).then_some(figures))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| refuse("a benchmark rank thread panicked"))
            })
            .collect()
    });
    let _ = std::fs::remove_dir_all(&base);
    let mut figures = None;
    for o in out {
        if let Some(f) = o? {
            figures = Some(f);
        }
    }
    let figures = figures.unwrap_or_default();
    print(&figures);
    println!("# state/rank | checkpoint | write+fsync | transfer | ratio");
    for f in &figures {
        println!(
            "# {} MiB | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} x",
            f.bytes / MIB,
            f.ckpt,
            f.write_fsync,
            f.transfer,
            f.ckpt / (f.write_fsync + f.transfer)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn the_last_size_is_the_goal_size() {
        assert_eq!(sizes(false)[1].0, 64 * MIB);
        assert_eq!(sizes(true)[1].0, 16 * MIB);
    }
}
