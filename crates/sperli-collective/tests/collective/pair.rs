//! HELLO feature bit 6, the pair exchange (protocol §19): on two ranks
//! barrier and the star's allreduce exchange one frame each way. The
//! results are the star's bits (checked against the serial left fold and
//! against a job without the bit), the frames are v1 frames (a phase-0
//! allreduce frame each way; rank 0's barrier release sent on entry), the
//! checks of a taken frame are the root's, and a job where one rank lacks
//! the bit runs v1 byte for byte. With bit 9 (protocol §22) the exchange
//! also from T up to the frame limit. Over the fake link and over TLS.

use std::sync::{Arc, Mutex};

use sperli_collective::fake::{self, run_links, FakePeers};
use sperli_collective::{Comm, Peers};
use sperli_wire::abort::AbortReason;
use sperli_wire::element::Reduction;
use sperli_wire::limits::{
    FEATURES_IMPLEMENTED, FEATURE_LARGE_PAIR_EXCHANGE, FEATURE_OWNER_FOLD, FEATURE_PAIR_EXCHANGE,
    FEATURE_PIPELINED, MAX_COLLECTIVE_DATA,
};
use sperli_wire::pair::PAIR_EXCHANGE_BELOW;
use sperli_wire::pipeline::PIPELINE_MIN_BYTES;
use sperli_wire::Error;

use crate::common::*;
use crate::tls::{run_job_announcing, tls_test};

/// Every feature but bit 6.
const WITHOUT: u64 = FEATURES_IMPLEMENTED & !FEATURE_PAIR_EXCHANGE;

/// (sender, receiver, operation, phase) of every COLLECTIVE payload sent.
type Sent = Arc<Mutex<Vec<(u32, u32, u8, u8)>>>;

/// A two-rank job whose ranks announce `announced`, every payload sent
/// recorded.
fn recorded(announced: [u64; 2]) -> (Vec<FakePeers>, Sent) {
    let links = FakePeers::job_with_features(&announced);
    let sent: Sent = Arc::default();
    for l in &links {
        let (me, log) = (l.rank(), Arc::clone(&sent));
        l.set_send_hook(move |to, p| {
            log.lock().unwrap().push((me, to, p[0], p[3]));
            vec![p]
        });
    }
    (links, sent)
}

fn sorted(sent: &Sent) -> Vec<(u32, u32, u8, u8)> {
    let mut v = sent.lock().unwrap().clone();
    v.sort_unstable();
    v
}

/// Every form of allreduce on this rank's data of `T`, each checked
/// against the serial left fold.
fn allreduce_forms<T: Ref>(c: &Comm<FakePeers>, r: Reduction, len: usize) {
    let (me, n) = (c.rank(), c.size());
    let data = data_of::<T>(me, 7, len);
    let want = reference::<T>(n, 7, len, r);
    same_bits(&c.allreduce(&data, r).unwrap(), &want, r, "allreduce");
    let mut out = data.clone();
    c.allreduce_into(&data, &mut out, r).unwrap();
    same_bits(&out, &want, r, "allreduce_into");
}

#[test]
fn two_ranks_exchange_the_allreduce_and_get_the_stars_bits() {
    for announced in [[FEATURES_IMPLEMENTED; 2], [FEATURES_IMPLEMENTED, WITHOUT]] {
        let bit6 = announced[1] & FEATURE_PAIR_EXCHANGE != 0;
        let (links, sent) = recorded(announced);
        run_links(links, |c| {
            for r in [
                Reduction::Sum,
                Reduction::Prod,
                Reduction::Min,
                Reduction::Max,
            ] {
                allreduce_forms::<f64>(c, r, 37);
                allreduce_forms::<f32>(c, r, 5);
                allreduce_forms::<i64>(c, r, 9);
            }
            allreduce_forms::<u32>(c, Reduction::Bxor, 3);
            allreduce_forms::<i32>(c, Reduction::Lxor, 4);
        });
        // 2 forms x (3 types x 4 reductions + 2) calls, one frame each way.
        let calls = 2 * (3 * 4 + 2);
        let due = if bit6 { 0 } else { 1 };
        let mut want = vec![(0, 1, 4, due); calls];
        want.extend(vec![(1, 0, 4, 0); calls]);
        assert_eq!(sorted(&sent), want, "bit 6: {bit6}");
    }
}

#[test]
fn with_bit_9_an_allreduce_from_t_up_to_1_mib_exchanges() {
    // Protocol §22.1: one phase-0 frame each way and the star's bits from
    // T up to 1 MiB; from 1 MiB, without bit 9, or where the owner fold
    // runs (bit 7), the frames of a pipeline.
    let on = FEATURES_IMPLEMENTED & !FEATURE_OWNER_FOLD;
    let t = PIPELINE_MIN_BYTES as usize / 8;
    let below = PAIR_EXCHANGE_BELOW as usize / 8;
    for (announced, len, exchange) in [
        ([on; 2], t, true),
        ([on; 2], below - 1, true),
        ([on; 2], below, false),
        ([on, on & !FEATURE_LARGE_PAIR_EXCHANGE], t, false),
        ([FEATURES_IMPLEMENTED; 2], t, false),
    ] {
        let (links, sent) = recorded(announced);
        run_links(links, |c| allreduce_forms::<f64>(c, Reduction::Sum, len));
        let phases: Vec<u8> = sorted(&sent).iter().map(|s| s.3).collect();
        if exchange {
            assert_eq!(phases, vec![0; 4], "len {len}");
        } else {
            assert!(phases.contains(&3), "len {len}: {phases:?}");
        }
    }
}

#[test]
fn a_user_reduction_and_three_ranks_stay_on_the_star() {
    let (links, sent) = recorded([FEATURES_IMPLEMENTED; 2]);
    let got = run_links(links, |c| {
        let x = [c.rank() as u64 + 3];
        c.allreduce_with(&x, |a, b| a[0] = a[0] * 10 + b[0])
            .unwrap()
    });
    assert_eq!(got, vec![vec![34]; 2]);
    assert_eq!(sorted(&sent), vec![(0, 1, 4, 1), (1, 0, 4, 0)]);

    let got = fake::run(3, |c| c.allreduce(&[c.rank()], Reduction::Sum).unwrap());
    assert_eq!(got, vec![vec![3]; 3]);
}

#[test]
fn contributions_of_different_lengths_end_the_job_with_h1618() {
    let out = fake::run(2, |c| {
        let len = 2 + c.rank() as usize;
        c.allreduce(&vec![1.0f64; len], Reduction::Sum).map(|_| ())
    });
    // Both ranks take the other's contribution and see the lengths differ
    // (protocol §19.3); one may see the other's ABORT first.
    for (me, o) in out.iter().enumerate() {
        match o.as_ref().unwrap_err() {
            e @ Error::AbortedByPeer { .. } => {
                assert_aborted_by(e, 1 - me as u32, AbortReason::CollectiveMismatch, 1618)
            }
            e => assert_eq!(code(e), 1618, "{e}"),
        }
    }
}

/// The 16-byte collective header of barrier call `seq` in `phase`.
fn barrier_header(phase: u8, seq: u64) -> Vec<u8> {
    let mut h = vec![1, 0, 0, phase, 0, 0, 0, 0];
    h.extend_from_slice(&seq.to_le_bytes());
    h
}

#[test]
fn rank_0_releases_a_two_rank_barrier_as_it_enters() {
    let got = fake::run(2, |c| {
        if c.rank() == 0 {
            return c.barrier().map(|()| Vec::new());
        }
        // Rank 1 takes the release before it has sent anything (protocol
        // §19.2), then arrives: rank 0's barrier returns.
        let release = c.link().recv_collective(0)?;
        c.link().send_collective(0, &barrier_header(0, 1))?;
        Ok(release)
    });
    assert_eq!(got[0], Ok(Vec::new()));
    assert_eq!(got[1], Ok(barrier_header(1, 1)));
}

#[test]
fn a_non_empty_arrival_at_a_two_rank_barrier_is_h1617() {
    let out = fake::run(2, |c| {
        if c.rank() == 1 {
            c.link().set_send_hook(|_, mut p| {
                p.push(0);
                vec![p]
            });
        }
        let first = c.barrier();
        c.link().clear_send_hook();
        (first, c.barrier())
    });
    assert_eq!(code(out[0].0.as_ref().unwrap_err()), 1617);
    // Rank 1 had its release: its next call sees rank 0's ABORT.
    assert!(out[1].0.is_ok());
    assert_job_ended(
        &out[1].0,
        &out[1].1,
        0,
        AbortReason::CollectiveMismatch,
        1617,
    );
}

#[test]
fn tls_two_ranks_exchange_up_to_the_frame_limit_and_mixed_jobs_run_v1() {
    tls_test(|| {
        // Without bit 1 every allreduce up to the frame limit is one
        // exchange: both ranks send 16777200 bytes at once; with bits 1 and
        // 9 (protocol §22) an allreduce of T bytes is one too.
        for (announced, bit6) in [
            (
                [(WITHOUT & !FEATURE_PIPELINED) | FEATURE_PAIR_EXCHANGE; 2],
                true,
            ),
            ([FEATURES_IMPLEMENTED & !FEATURE_OWNER_FOLD; 2], true),
            ([FEATURES_IMPLEMENTED, WITHOUT], false),
        ] {
            let out = run_job_announcing(&announced, |c| {
                let on = c.link().features() & FEATURE_PAIR_EXCHANGE != 0;
                let me = c.rank() as u64;
                let n = MAX_COLLECTIVE_DATA / 8;
                let big: Vec<u64> = (0..n as u64).map(|i| i * 3 + me).collect();
                let sum = c.allreduce(&big, Reduction::Sum).unwrap();
                let ok = sum.iter().enumerate().all(|(i, &s)| s == 6 * i as u64 + 1);
                let small = c.allreduce(&[0.1f64 + me as f64], Reduction::Sum).unwrap();
                let t = PIPELINE_MIN_BYTES as usize / 8;
                let mid = c.allreduce(&vec![me + 1; t], Reduction::Sum).unwrap();
                let ok = ok && mid == vec![3; t];
                c.barrier().unwrap();
                (on, ok, small[0].to_bits())
            });
            let want = (bit6, true, (0.1f64 + 1.1).to_bits());
            assert_eq!(out, vec![want; 2]);
        }
    });
}
