//! Rank mode `p2p`: point-to-point through [`Comm`] between ranks 0 and 1
//! (HELLO feature bit 3, protocol §16), for the rows of
//! `xtask/src/bench/p2p.rs`:
//!
//! - synchronous against standard sends: one-way latency (half a round
//!   trip) of 8 B and 1 KiB with `Comm::ssend` both ways (rank 0 `ssend`,
//!   rank 1 `recv_into` then `ssend` back) and with `Comm::send` both ways
//!   (`RESULT p2p_ssend_lat` and `p2p_send_lat`); the OpenMPI twin is
//!   `sperli_mpi_bench ssend` (`MPI_Ssend` and `MPI_Send`);
//! - a dup against the job's communicator: the 8 B latency with `send`
//!   (`p2p_dup_lat` next to `p2p_send_lat`) and a 16 MiB stream, messages
//!   back to back then a 1-byte ack (`p2p_world_bw` and `p2p_dup_bw`, GB/s).
//!
//! The variants of one size run interleaved, in rounds whose order rotates
//! from round to round, so drift of the machine (and the transport's
//! bimodal wake-ups) hits each variant alike; each figure is the total
//! time of its rounds over its total count. A warm-up of a tenth of the
//! count runs per variant first.

use std::time::{Duration, Instant};

use sperli_collective::Comm;
use sperli_transport::Endpoint;
use sperli_wire::Error;

use crate::limits::{bw_count, lat_count};
use crate::{iters, result};

/// The stream's message size.
const STREAM: usize = 16 << 20;

/// One latency variant: which communicator, which send.
#[derive(Clone, Copy)]
enum Lat {
    /// `send` both ways on the job's communicator.
    Send,
    /// `ssend` both ways on the job's communicator.
    Ssend,
    /// `send` both ways on `comm.dup()`.
    Dup,
}

impl Lat {
    fn name(self) -> &'static str {
        match self {
            Lat::Send => "p2p_send_lat",
            Lat::Ssend => "p2p_ssend_lat",
            Lat::Dup => "p2p_dup_lat",
        }
    }
}

/// `count` round trips of `size` bytes on `c` (rank 0 sends first);
/// the time they took.
fn round_trips(
    c: &Comm<Endpoint>,
    sync: bool,
    size: usize,
    count: usize,
    buf: &mut [u8],
) -> Result<Duration, Error> {
    let me = c.rank();
    let peer = 1 - me;
    let buf = &mut buf[..size];
    let send = |b: &[u8]| {
        if sync {
            c.ssend_bytes(peer, 1, b)
        } else {
            c.send_bytes(peer, 1, b)
        }
    };
    let t = Instant::now();
    for _ in 0..count {
        if me == 0 {
            send(buf)?;
            c.recv_into(peer, 1, buf)?;
        } else {
            c.recv_into(peer, 1, buf)?;
            send(buf)?;
        }
    }
    Ok(t.elapsed())
}

/// `count` messages of [`STREAM`] bytes from rank 0 to rank 1 on `c`,
/// then a 1-byte ack; the time they took.
fn stream(c: &Comm<Endpoint>, count: usize, buf: &mut [u8]) -> Result<Duration, Error> {
    let me = c.rank();
    let peer = 1 - me;
    let t = Instant::now();
    if me == 0 {
        for _ in 0..count {
            c.send_bytes(peer, 2, &buf[..STREAM])?;
        }
        c.recv_into(peer, 3, &mut [0u8; 1])?;
    } else {
        for _ in 0..count {
            let st = c.recv_into(peer, 2, &mut buf[..STREAM])?;
            assert_eq!(st.len, STREAM);
        }
        c.send_bytes(peer, 3, &[1])?;
    }
    Ok(t.elapsed())
}

/// The order of `n` variants in round `r`: rotated by `r`.
fn rotated(n: usize, r: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| (i + r) % n)
}

/// Runs the mode on every rank of the job (the dup is collective); ranks
/// 0 and 1 measure, rank 0 prints.
pub fn run(comm: &Comm<Endpoint>, quick: bool) -> Result<(), Error> {
    let dup = comm.dup()?;
    if comm.rank() > 1 || comm.size() < 2 {
        return Ok(());
    }
    let rounds = iters(quick, 10, 4);
    let mut buf = vec![5u8; STREAM];
    for (size, variants) in [
        (8, &[Lat::Send, Lat::Ssend, Lat::Dup][..]),
        (1024, &[Lat::Send, Lat::Ssend][..]),
    ] {
        let n = lat_count(size, quick);
        let per_round = n.div_ceil(rounds);
        let on = |v: Lat| match v {
            Lat::Dup => &dup,
            _ => comm,
        };
        let sync = |v: Lat| matches!(v, Lat::Ssend);
        for &v in variants {
            round_trips(on(v), sync(v), size, n / 10, &mut buf)?;
        }
        let mut spent = vec![Duration::ZERO; variants.len()];
        for r in 0..rounds {
            for i in rotated(variants.len(), r) {
                let v = variants[i];
                spent[i] += round_trips(on(v), sync(v), size, per_round, &mut buf)?;
            }
        }
        if comm.rank() == 0 {
            for (v, t) in variants.iter().zip(&spent) {
                let us = t.as_secs_f64() * 1e6 / (2 * per_round * rounds) as f64;
                result(v.name(), size, us);
            }
        }
    }
    // The stream: at least one message per round and side.
    let count = bw_count(STREAM, quick);
    let rounds = rounds.min(count);
    let per_round = count.div_ceil(rounds);
    let sides = [comm, &dup];
    for c in sides {
        stream(c, 1, &mut buf)?;
    }
    let mut spent = [Duration::ZERO; 2];
    for r in 0..rounds {
        for i in rotated(2, r) {
            spent[i] += stream(sides[i], per_round, &mut buf)?;
        }
    }
    if comm.rank() == 0 {
        for (name, t) in ["p2p_world_bw", "p2p_dup_bw"].iter().zip(spent) {
            let gbs = (STREAM * per_round * rounds) as f64 / t.as_secs_f64() / 1e9;
            result(name, STREAM, gbs);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_rotate_the_order() {
        assert_eq!(rotated(3, 0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(rotated(3, 1).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(rotated(2, 3).collect::<Vec<_>>(), [1, 0]);
    }
}
