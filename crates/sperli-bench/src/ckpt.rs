//! The `ckpt` rank mode (issue 7): the time of one
//! `Checkpointer::checkpoint(&state)` (docs/sperli-protocol.md §9.4) with
//! N bytes of `Vec<u8>` state per rank, next to its baseline measured in the
//! same job on the same ranks, as `crates/sperli-ckpt/benches/ckpt.rs` does
//! with threads, here with rank processes started by `sperli run
//! --checkpoint-dir DIR`:
//!
//! - write+fsync: every rank writes the same bytes plus the 92 bytes a
//!   checkpoint adds (the 80-byte rank file header, the state's format
//!   version and length) to a file of its own in its checkpoint directory
//!   and calls fsync (all ranks at once);
//! - transfer: every rank sends the same bytes once to rank (r+1) mod size
//!   and receives its predecessor's (`send_large` / `recv_large`, all ranks
//!   at once), the pattern of the buddy push.
//!
//! Each measurement is rank 0's wall clock between two barriers; rank 0
//! prints the median of the repetitions (ms) as `ckpt_ms`,
//! `ckpt_write_fsync_ms` and `ckpt_transfer_ms`, with the state bytes per
//! rank as the size.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

use sperli_ckpt::{encode_state, Checkpointer};
use sperli_wire::limits::RANK_FILE_HEADER_LEN;
use sperli_wire::Error;

use crate::result;

const MIB: usize = 1 << 20;
/// The tag of the transfer's messages.
const TAG: u32 = 1;

/// (state bytes per rank, repetitions) of one job: 1 and 64 MiB, or with
/// `--quick` 1 and 16 MiB with fewer repetitions.
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

/// One measurement on every rank: barrier, `f`, barrier; this rank's wall
/// time in ms (rank 0's is the one printed).
fn timed(
    ck: &mut Checkpointer,
    f: impl FnOnce(&mut Checkpointer) -> Result<(), Error>,
) -> Result<f64, Error> {
    ck.comm().barrier()?;
    let t = Instant::now();
    f(ck)?;
    ck.comm().barrier()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// Writes `parts` to `path` (created or truncated, mode 0600) and fsyncs it.
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

/// Joins the job with a checkpointer (`SPERLI_CHECKPOINT_DIR`, set by
/// `sperli run --checkpoint-dir`) and measures every size of [`sizes`].
pub fn run(quick: bool) -> Result<(), Error> {
    let mut ck = Checkpointer::join()?;
    let rank = ck.comm().rank();
    let size = ck.comm().size();
    if size < 2 {
        return Err(Error::Io {
            op: "the ckpt benchmark needs at least 2 ranks (a buddy)",
            kind: std::io::ErrorKind::InvalidInput,
        });
    }
    let succ = (rank + 1) % size;
    let pred = (rank + size - 1) % size;
    let raw = ck.dir().join("baseline.bin");
    // What a checkpoint writes beside the state: the rank file header and
    // the state's prefix (format version, length of the Vec).
    let header = vec![0u8; RANK_FILE_HEADER_LEN + encode_state(&Vec::<u8>::new()).len()];
    for (bytes, reps) in sizes(quick) {
        let state: Vec<u8> = (0..bytes)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(rank) as u8)
            .collect();
        let (mut c, mut w, mut t) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..reps {
            c.push(timed(&mut ck, |ck| ck.checkpoint(&state).map(drop))?);
            w.push(timed(&mut ck, |_| write_fsync(&raw, &[&header, &state]))?);
            t.push(timed(&mut ck, |ck| {
                let ep = ck.endpoint();
                ep.send_large(succ, TAG, &state)?;
                let got = ep.recv_large(pred, TAG)?;
                if got.len() != state.len() {
                    return Err(Error::Io {
                        op: "the ckpt benchmark's transfer: a message of the wrong length",
                        kind: std::io::ErrorKind::InvalidData,
                    });
                }
                Ok(())
            })?);
        }
        if rank == 0 {
            result("ckpt_ms", bytes, median(c));
            result("ckpt_write_fsync_ms", bytes, median(w));
            result("ckpt_transfer_ms", bytes, median(t));
        }
    }
    let _ = std::fs::remove_file(&raw);
    ck.into_comm().into_link().finish()
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
