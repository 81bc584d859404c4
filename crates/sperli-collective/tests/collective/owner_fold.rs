//! HELLO feature bit 7, the owner-fold allreduce (protocol §20): block b
//! of every rank's array goes to rank b, which folds it in ascending rank
//! order and sends the result block to every rank. The results are the
//! star's bits (checked against the serial left fold at 2, 3, 5 and 8
//! ranks, uneven blocks, several chunks per block, 16 MiB + 1 element),
//! the frames are those §20.3 names (PARTIAL chunks to the block's owner,
//! FINAL chunks from it), a job where one rank lacks the bit runs the
//! chain of §14.3 frame for frame, and the receiver's checks (§20.4) end
//! the job with the documented codes. Over the fake link and over TLS.

use std::time::{Duration, Instant};

use sperli_collective::fake::{self, run_links, FakePeers};
use sperli_wire::element::Reduction;
use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_OWNER_FOLD};
use sperli_wire::owner_fold::{block, OWNER_FOLD_CHUNK, OWNER_FOLD_MIN_BYTES};
use sperli_wire::pipeline::PIPELINE_MIN_BYTES;

use crate::common::*;
use crate::tls::{run_job_announcing, tls_test};

/// Every feature but bit 7.
const WITHOUT: u64 = FEATURES_IMPLEMENTED & !FEATURE_OWNER_FOLD;
/// T7 of protocol §20.1 in f64 elements.
const T7: usize = OWNER_FOLD_MIN_BYTES as usize / 8;

fn sorted(sent: &Sent) -> Vec<(u32, u32, u8, u32)> {
    let mut v = sent.lock().unwrap().clone();
    v.sort_unstable();
    v
}

/// allreduce and allreduce_into of `len` elements of `T` on every rank of
/// a job announcing `announced`, each checked against the serial left
/// fold; returns the frames sent.
fn checked<T: Ref>(
    announced: &[u64],
    len: usize,
    r: Reduction,
    salt: u64,
) -> Vec<(u32, u32, u8, u32)> {
    let n = announced.len() as u32;
    let (links, sent) = recorded(announced);
    run_links(links, move |c| {
        let data = data_of::<T>(c.rank(), salt, len);
        let want = reference::<T>(n, salt, len, r);
        let what = format!("{:?} {r:?} n={n} len={len}", T::ELEMENT_TYPE);
        same_bits(&c.allreduce(&data, r).unwrap(), &want, r, &what);
        let mut out = vec![T::default(); len];
        c.allreduce_into(&data, &mut out, r).unwrap();
        same_bits(&out, &want, r, &format!("{what} (into)"));
    });
    sorted(&sent)
}

#[test]
fn results_are_the_serial_left_folds_bits_at_every_rank_count() {
    // Uneven blocks (len mod n ≠ 0), one chunk per block, several chunks
    // per block with a short last one, and blocks that straddle the chunk
    // length at 3 and 5 ranks.
    for n in [2u32, 3, 5, 8] {
        let many = 5 * OWNER_FOLD_CHUNK / 8 * n as usize + 3;
        for len in [T7, T7 + 7, many] {
            let f = vec![FEATURES_IMPLEMENTED; n as usize];
            for r in [
                Reduction::Sum,
                Reduction::Prod,
                Reduction::Min,
                Reduction::Max,
            ] {
                checked::<f64>(&f, len, r, 11 + u64::from(n));
                checked::<f32>(&f, len, r, 13);
            }
            checked::<i64>(&f, len, Reduction::Sum, 17);
            checked::<u8>(&f, len, Reduction::Bxor, 19);
        }
    }
}

#[test]
fn the_frames_are_partials_to_each_owner_and_finals_from_it() {
    // 4 ranks, 64 KiB of f64: four blocks of 16 KiB, one chunk each.
    let n = 4u32;
    let f = vec![FEATURES_IMPLEMENTED; n as usize];
    let sent = checked::<f64>(&f, T7, Reduction::Sum, 5);
    let mut want = Vec::new();
    for _call in 0..2 {
        for from in 0..n {
            for to in (0..n).filter(|&t| t != from) {
                want.push((from, to, 3, to)); // PARTIAL of block `to`
                want.push((from, to, 4, from)); // FINAL of block `from`
            }
            if from != 0 {
                want.push((from, 0, 2, 0)); // OPEN
            }
        }
    }
    want.sort_unstable();
    assert_eq!(sent, want);
}

#[test]
fn a_job_with_a_rank_that_clears_bit_7_runs_the_chain_frame_for_frame() {
    for (n, lacking) in [(2u32, 0u32), (3, 2), (5, 1)] {
        let len = 3 * OWNER_FOLD_CHUNK / 8 * n as usize + 1;
        let mut mixed = vec![FEATURES_IMPLEMENTED; n as usize];
        mixed[lacking as usize] = WITHOUT;
        let a = checked::<f64>(&mixed, len, Reduction::Sum, 3);
        let b = checked::<f64>(&vec![WITHOUT; n as usize], len, Reduction::Sum, 3);
        assert_eq!(a, b, "n={n}");
        // The chain: PARTIAL chunks only from rank i to rank i + 1.
        assert!(a.iter().filter(|s| s.2 == 3).all(|s| s.1 == s.0 + 1));
    }
}

#[test]
fn below_t7_the_star_and_with_small_blocks_the_chain_stay() {
    // T7 - 8 bytes at 4 ranks: the star (no pipelined frame); T = 256 KiB
    // at 65 ranks (blocks under 4096 bytes, protocol §20.1): the chain of
    // §14.3.
    let sent = checked::<f64>(&[FEATURES_IMPLEMENTED; 4], T7 - 1, Reduction::Sum, 9);
    assert!(sent.iter().all(|s| s.2 <= 1));
    let t = PIPELINE_MIN_BYTES as usize / 8;
    let sent = checked::<f64>(&[FEATURES_IMPLEMENTED; 65], t, Reduction::Sum, 9);
    let partials: Vec<_> = sent.iter().filter(|s| s.2 == 3).collect();
    assert!(!partials.is_empty());
    assert!(partials.iter().all(|s| s.1 == s.0 + 1));
}

#[test]
fn with_bit_7_a_reduce_from_t7_on_runs_the_chain() {
    // Protocol §20.1: at 3 and 5 ranks a reduce of T7 bytes runs the chain
    // (PARTIAL chunks only from rank i to i + 1) with the serial left
    // fold's bits; without the bit, and at 2 ranks, the star.
    for (n, announced, chain) in [
        (3u32, FEATURES_IMPLEMENTED, true),
        (5, FEATURES_IMPLEMENTED, true),
        (5, WITHOUT, false),
        (2, FEATURES_IMPLEMENTED, false),
    ] {
        let (links, sent) = recorded(&vec![announced; n as usize]);
        let len = T7 + 3;
        run_links(links, move |c| {
            for root in [0, n - 1] {
                let data = data_of::<f64>(c.rank(), 29, len);
                let got = c.reduce(root, &data, Reduction::Sum).unwrap();
                if c.rank() == root {
                    let want = reference::<f64>(n, 29, len, Reduction::Sum);
                    same_bits(&got.unwrap(), &want, Reduction::Sum, "reduce");
                }
            }
        });
        let sent = sorted(&sent);
        let partials: Vec<_> = sent.iter().filter(|s| s.2 == 3).collect();
        assert_eq!(!partials.is_empty(), chain, "n={n}");
        assert!(partials.iter().all(|s| s.1 == s.0 + 1), "n={n}");
        if chain {
            // Chunks of 8 KiB: more than one per stream.
            assert!(
                partials.len() >= 2 * (n as usize - 1) * (T7 * 8 / 8192),
                "n={n}"
            );
        }
    }
}

#[test]
fn with_bit_7_the_root_of_a_bcast_from_t7_on_sends_along_a_chain() {
    // The root's choice (protocol §14.5, §20.1): at 4 ranks a bcast of T7
    // bytes goes root → root+1 → ... in chunks of 8 KiB; without the bit
    // the star.
    for (announced, chain) in [(FEATURES_IMPLEMENTED, true), (WITHOUT, false)] {
        let (links, sent) = recorded(&[announced; 4]);
        run_links(links, move |c| {
            let root = 1;
            let want = data_of::<f64>(root, 31, T7);
            let mut buf = if c.rank() == root {
                want.clone()
            } else {
                vec![0.0; T7]
            };
            c.bcast_into(root, &mut buf).unwrap();
            same_bits(&buf, &want, Reduction::Sum, "bcast");
        });
        let finals: Vec<_> = sorted(&sent).into_iter().filter(|s| s.2 == 4).collect();
        assert_eq!(!finals.is_empty(), chain);
        if chain {
            assert!(finals.iter().all(|s| s.1 == (s.0 + 1) % 4));
            assert_eq!(finals.len(), 3 * T7 * 8 / 8192);
        }
    }
}

#[test]
fn contributions_of_different_lengths_end_the_job_with_h1618() {
    // Rank 2 has a longer array (both run the owner fold), or one below T7
    // (the star): rank 0 meets another total or the other shape in the
    // OPEN step; nobody waits forever (protocol §14.3, §20.3).
    for odd_len in [2 * T7, 8] {
        let started = Instant::now();
        let out = fake::run(4, move |c| {
            let len = if c.rank() == 2 { odd_len } else { T7 };
            let first = c.allreduce(&vec![1.0f64; len], Reduction::Sum).map(drop);
            (first, c.barrier())
        });
        assert!(started.elapsed() < Duration::from_secs(20));
        let codes: Vec<u32> = out
            .iter()
            .map(|(a, b)| code(a.as_ref().err().or(b.as_ref().err()).unwrap()))
            .collect();
        assert!(codes.contains(&1618), "{odd_len}: {codes:?}");
    }
}

#[test]
fn a_chunk_cut_other_than_l_is_h1617_length() {
    // Rank 1 cuts its first PARTIAL chunk to rank 2 in two (a stream the
    // rules of §14.2 accept): §20.4 asks for L, so rank 2 ends the job.
    let n = 3u32;
    let links = FakePeers::job_with_features(&vec![FEATURES_IMPLEMENTED; n as usize]);
    links[1].set_send_hook(|to, p| {
        if to != 2 || p[3] != 3 {
            return vec![p];
        }
        let offset = u64::from_le_bytes(p[16..24].try_into().unwrap());
        if offset != 0 {
            return vec![p];
        }
        let data = &p[32..];
        let half = data.len() / 16 * 8;
        let mut a = p[..32].to_vec();
        a.extend_from_slice(&data[..half]);
        let mut b = p[..32].to_vec();
        b[16..24].copy_from_slice(&(half as u64).to_le_bytes());
        b.extend_from_slice(&data[half..]);
        vec![a, b]
    });
    let out = run_links(links, |c| {
        let len = 3 * OWNER_FOLD_CHUNK / 8 * 3;
        assert!(len * 8 >= OWNER_FOLD_MIN_BYTES as usize);
        let first = c.allreduce(&vec![1.0f64; len], Reduction::Sum).map(drop);
        (first, c.barrier())
    });
    let e = out[2].0.as_ref().unwrap_err();
    assert_eq!(code(e), 1617, "{e}");
    assert!(e.to_string().contains("length"), "{e}");
}

#[test]
fn blocks_follow_the_rule_of_section_20_2() {
    // 10 elements on 4 ranks: 3, 3, 2, 2.
    let lens: Vec<u64> = (0..4)
        .map(|b| block(80, 8, 4, b))
        .map(|r| r.end - r.start)
        .collect();
    assert_eq!(lens, vec![24, 24, 16, 16]);
}

#[test]
fn tls_owner_fold_up_to_past_the_frame_limit_and_a_mixed_job() {
    tls_test(|| {
        for announced in [
            [FEATURES_IMPLEMENTED; 3],
            [FEATURES_IMPLEMENTED, WITHOUT, FEATURES_IMPLEMENTED],
        ] {
            let out = run_job_announcing(&announced, |c| {
                let on = c.link().features() & FEATURE_OWNER_FOLD != 0;
                let me = c.rank();
                let mut ok = true;
                for len in [T7 + 5, (16 << 20) / 8 + 1] {
                    let data = data_of::<f64>(me, 23, len);
                    let want = reference::<f64>(3, 23, len, Reduction::Sum);
                    let got = c.allreduce(&data, Reduction::Sum).unwrap();
                    ok &= f64_bits_equal(&got, &want);
                }
                c.barrier().unwrap();
                (on, ok)
            });
            let mixed = announced[1] == WITHOUT;
            assert_on_unless_mixed(&out, mixed, "results differ from the serial left fold");
        }
    });
}
