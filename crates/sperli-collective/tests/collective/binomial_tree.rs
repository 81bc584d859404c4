//! HELLO feature bit 8, the binomial bcast (protocol §21): the first frame
//! of a bcast (the v1 data frame, or the OPEN of a pipelined bcast) goes
//! from every rank to its children in the binomial tree of the root, in
//! the order §21.2 gives, each exactly once, and nowhere else; a job where
//! one rank lacks the bit sends it from the root to every rank; results are
//! the root's bytes at every size and root, on communicators too; a rank
//! that finds the wrong length ends the job and nobody waits forever. Over
//! the fake link and over TLS.

use std::time::{Duration, Instant};

use sperli_collective::fake::{run_links, FakePeers};
use sperli_wire::abort::AbortReason;
use sperli_wire::binomial_tree::{binomial_children, binomial_parent};
use sperli_wire::element::Reduction;
use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_BINOMIAL_BCAST};
use sperli_wire::pipeline::PIPELINE_MIN_BYTES;

use crate::common::*;
use crate::tls::{run_job_announcing, tls_test};

/// Every feature but bit 8.
const WITHOUT: u64 = FEATURES_IMPLEMENTED & !FEATURE_BINOMIAL_BCAST;
/// T of protocol §14.5 in f64 elements.
const T: usize = PIPELINE_MIN_BYTES as usize / 8;
/// The phases of a bcast's first frame: 1 (v1 data) and 2 (OPEN).
const FIRST: [u8; 2] = [1, 2];

/// A bcast of `len` f64 from `root` on a job announcing `announced`, the
/// result checked at every rank; returns the first frames sent.
fn first_frames(announced: &[u64], root: u32, len: usize) -> Vec<(u32, u32, u8)> {
    let (links, sent) = recorded(announced);
    run_links(links, move |c| {
        let want = data_of::<f64>(root, 5, len);
        let mut buf = match c.rank() == root {
            true => want.clone(),
            false => vec![0.0; len],
        };
        c.bcast_into(root, &mut buf).unwrap();
        same_bits(
            &buf,
            &want,
            Reduction::Sum,
            &format!("root {root} len {len}"),
        );
        // The growing form, which does not know the length.
        let mut grown = match c.rank() == root {
            true => want.clone(),
            false => Vec::new(),
        };
        c.bcast(root, &mut grown).unwrap();
        same_bits(&grown, &want, Reduction::Sum, "bcast (growing)");
    });
    // Only bcasts ran: every payload is one of theirs.
    let all = sent.lock().unwrap().clone();
    all.into_iter()
        .filter(|s| FIRST.contains(&s.2))
        .map(|(from, to, phase, _)| (from, to, phase))
        .collect()
}

#[test]
fn the_first_frame_goes_down_the_binomial_tree_in_order() {
    // 8 B and 32000 B: v1 data frames; T: the OPEN of a pipelined bcast
    // (from 3 ranks on).
    for n in [2u32, 3, 5, 8, 9] {
        for root in [0, n / 2, n - 1] {
            for len in [1, 4000, T] {
                let frames = first_frames(&vec![FEATURES_IMPLEMENTED; n as usize], root, len);
                // Twice each (bcast_into, then bcast): per call once.
                assert_eq!(frames.len(), 2 * (n as usize - 1), "n={n} root={root}");
                for r in 0..n {
                    let to: Vec<u32> = frames.iter().filter(|s| s.0 == r).map(|s| s.1).collect();
                    let mut want = binomial_children(r, root, n);
                    want.extend(binomial_children(r, root, n));
                    assert_eq!(to, want, "n={n} root={root} len={len} rank={r}");
                    for s in frames.iter().filter(|s| s.1 == r) {
                        assert_eq!(binomial_parent(r, root, n), Some(s.0));
                    }
                }
                // A bcast of T on 2 ranks stays the star (protocol §14.5).
                let phase = if len == T && n >= 3 { 2 } else { 1 };
                assert!(frames.iter().all(|s| s.2 == phase), "n={n} len={len}");
            }
        }
    }
}

#[test]
fn a_job_with_a_rank_that_clears_bit_8_sends_from_the_root() {
    for len in [1, T] {
        let mut announced = vec![FEATURES_IMPLEMENTED; 6];
        announced[3] = WITHOUT;
        let frames = first_frames(&announced, 2, len);
        assert_eq!(frames.len(), 2 * 5);
        assert!(frames.iter().all(|s| s.0 == 2), "{frames:?}");
        let to: Vec<u32> = frames.iter().map(|s| s.1).take(5).collect();
        assert_eq!(to, vec![0, 1, 3, 4, 5]);
    }
}

#[test]
fn bcasts_on_communicators_follow_the_tree_of_their_own_ranks() {
    // Split 7 ranks by parity: bcasts from each communicator's last rank,
    // small and pipelined, and an allgather (whose v1 form ends with a
    // bcast from 0) on both halves.
    let links = FakePeers::job_with_features(&[FEATURES_IMPLEMENTED; 7]);
    run_links(links, |c| {
        let me = c.rank();
        let sub = c.split(Some(me % 2), me as i32).unwrap().unwrap();
        let root = sub.size() - 1;
        for len in [3, T + 1] {
            let want = data_of::<f64>(root + 10 * (me % 2), 9, len);
            let mut buf = match sub.rank() == root {
                true => want.clone(),
                false => vec![0.0; len],
            };
            sub.bcast_into(root, &mut buf).unwrap();
            same_bits(&buf, &want, Reduction::Sum, "bcast on a communicator");
        }
        let all = sub.allgather(&[me as u64]).unwrap();
        let want: Vec<u64> = (0..7u64).filter(|r| r % 2 == u64::from(me % 2)).collect();
        assert_eq!(all, want);
    });
}

#[test]
fn a_relay_that_finds_another_length_ends_the_job() {
    // Rank 4 of 8 (children 6 and 5 in the tree of root 0) expects 2
    // elements, the root sends 1: rank 4 ends the job with H1617, ABORT
    // reason 3, and its children hear of it instead of waiting.
    let started = Instant::now();
    let links = FakePeers::job_with_features(&[FEATURES_IMPLEMENTED; 8]);
    let out = run_links(links, |c| {
        let mut buf = vec![1.0f64; if c.rank() == 4 { 2 } else { 1 }];
        let first = c.bcast_into(0, &mut buf);
        (first, c.barrier())
    });
    assert!(started.elapsed() < Duration::from_secs(20));
    let e4 = out[4].0.as_ref().unwrap_err();
    assert_eq!(code(e4), 1617, "{e4}");
    let (reason, h) = (AbortReason::CollectiveMismatch, 1617);
    for (first, later) in &out[5..=6] {
        assert_job_ended(first, later, 4, reason, h);
    }
}

#[test]
fn tls_binomial_tree_at_every_size_class_and_a_mixed_job() {
    tls_test(|| {
        for announced in [[FEATURES_IMPLEMENTED; 5], {
            let mut a = [FEATURES_IMPLEMENTED; 5];
            a[1] = WITHOUT;
            a
        }] {
            let out = run_job_announcing(&announced, |c| {
                let on = c.link().features() & FEATURE_BINOMIAL_BCAST != 0;
                let mut ok = true;
                // 8 B and 32000 B (v1 frames), 64 KiB (with bit 7 a chain
                // from T7, protocol §20.1), T (pipelined), past one frame.
                for (root, len) in [
                    (0, 1),
                    (3, 4000),
                    (1, 8192),
                    (4, T),
                    (2, (16 << 20) / 8 + 1),
                ] {
                    let want = data_of::<f64>(root, 17, len);
                    let mut buf = match c.rank() == root {
                        true => want.clone(),
                        false => vec![0.0; len],
                    };
                    c.bcast_into(root, &mut buf).unwrap();
                    ok &= f64_bits_equal(&buf, &want);
                }
                c.barrier().unwrap();
                (on, ok)
            });
            let mixed = announced[1] == WITHOUT;
            assert_on_unless_mixed(&out, mixed, "a rank's buffer differs from the root's");
        }
    });
}
