//! Buffer reuse: received payload buffers handed back with
//! `Endpoint::recycle` come back for later frames, and buffers sent with
//! `send_vec` / `send_collective_vec` arrive intact.

use std::time::Duration;

use sperli_tls::job_plan::JobPlan;
use sperli_transport::Endpoint;

use crate::common::{code, run_ranks, settings, with_deadline};

const MIB: usize = 1 << 20;
/// A valid collective header: bcast, phase 1, root 0, sequence 1.
const BCAST_HEADER: [u8; 16] = [2, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
}

/// Rank 1 receives a 1 MiB frame, hands it back, acknowledges; rank 0
/// only then sends the next one: the I/O thread reads it into the very
/// same allocation (no fresh 1 MiB buffer, no page faults).
#[test]
fn recycled_receive_buffer_is_reused_for_the_next_frame() {
    with_deadline(Duration::from_secs(60), || {
        let plan = JobPlan::localhost_bound(2).unwrap();
        let res = run_ranks(&plan, &[0, 1], settings(), |ep: Endpoint| {
            let mut same = Vec::new();
            if ep.rank() == 0 {
                for seed in 0..4u8 {
                    ep.send(1, 7, &pattern(seed, MIB))?;
                    ep.recv(1, 8)?;
                }
            } else {
                let mut last = None;
                for seed in 0..4u8 {
                    let m = ep.recv(0, 7)?;
                    assert_eq!(m, pattern(seed, MIB), "message {seed}");
                    let ptr = m.as_ptr() as usize;
                    if let Some(p) = last {
                        same.push(p == ptr);
                    }
                    last = Some(ptr);
                    ep.recycle(m);
                    ep.send(0, 8, &[1])?;
                }
            }
            ep.finish()?;
            Ok(same)
        });
        let same = res[1].as_ref().unwrap();
        assert_eq!(same, &vec![true; 3], "every later frame reused the buffer");
        assert!(res[0].is_ok());
    });
}

/// Owned sends (`take_buffer` + `send_vec`, `send_collective_vec`),
/// collective frames sent in two pieces (`send_collective_parts`) and
/// the pooled copies of borrowed sends deliver every byte, at sizes around
/// the pool's threshold and up to a full 16 MiB frame, and `send_large`
/// (pooled first frame) and `recv_large` (recycled frames) still agree.
#[test]
fn owned_and_pooled_sends_deliver_every_byte() {
    with_deadline(Duration::from_secs(120), || {
        let plan = JobPlan::localhost_bound(2).unwrap();
        let sizes = [
            0usize,
            1,
            32 * 1024 - 1,
            32 * 1024,
            64 * 1024 + 1,
            MIB,
            16 * MIB,
        ];
        let res = run_ranks(&plan, &[0, 1], settings(), move |ep: Endpoint| {
            if ep.rank() == 0 {
                for (i, &n) in sizes.iter().enumerate() {
                    let mut b = ep.take_buffer(n);
                    b.extend_from_slice(&pattern(i as u8, n));
                    ep.send_vec(1, 1, b)?;
                    ep.send(1, 2, &pattern(i as u8 + 100, n))?;
                    let mut c = ep.take_buffer(16 + n.min(MIB));
                    c.extend_from_slice(&BCAST_HEADER);
                    c.extend_from_slice(&pattern(i as u8 + 50, n.min(MIB)));
                    ep.send_collective_vec(1, c)?;
                    // Header and data in two pieces: a large frame is
                    // written from both straight into TLS.
                    let d = pattern(i as u8 + 70, n.min(16 * MIB - 16));
                    ep.send_collective_parts(1, &BCAST_HEADER, &d)?;
                }
                // The limits of one frame hold for the pieces together.
                let e = ep
                    .send_collective_parts(1, &BCAST_HEADER, &vec![0; 16 * MIB - 15])
                    .unwrap_err();
                assert_eq!(code(&e), 1618, "{e}");
                let e = ep
                    .send_collective_parts(1, &BCAST_HEADER[..15], &[])
                    .unwrap_err();
                assert_eq!(code(&e), 1617, "{e}");
                ep.send_large(1, 3, &pattern(9, 40 * MIB))?;
            } else {
                for (i, &n) in sizes.iter().enumerate() {
                    let a = ep.recv(0, 1)?;
                    assert_eq!(a, pattern(i as u8, n), "send_vec of {n}");
                    let b = ep.recv(0, 2)?;
                    assert_eq!(b, pattern(i as u8 + 100, n), "send of {n}");
                    let c = ep.recv_collective(0)?;
                    assert_eq!(&c[16..], &pattern(i as u8 + 50, n.min(MIB))[..]);
                    let d = ep.recv_collective(0)?;
                    assert_eq!(&d[..16], &BCAST_HEADER[..], "parts of {n}");
                    assert!(d[16..] == pattern(i as u8 + 70, n.min(16 * MIB - 16)));
                    ep.recycle(d);
                    ep.recycle(a);
                    ep.recycle(b);
                    ep.recycle(c);
                }
                assert!(ep.recv_large(0, 3)? == pattern(9, 40 * MIB), "send_large");
            }
            ep.finish()
        });
        for r in res {
            r.unwrap();
        }
    });
}
