//! The v-collectives (protocol §8.9): gatherv, scatterv, allgatherv and
//! alltoallv at 1, 2, 3 and 8 ranks on the fake link and on real TLS 1.3
//! ranks on 127.0.0.0/8; refusals (H1618 on every rank, the job going on,
//! sequence numbers aligned) and blocks that break their announced length
//! (H1617 with ABORT reason 3).

use sperli_collective::fake::{self, FakePeers};
use sperli_collective::vcoll::Blocks;
use sperli_collective::{Comm, Peers};
use sperli_wire::abort::AbortReason;
use sperli_wire::element::Reduction;
use sperli_wire::error::{ArgumentError, MismatchError};
use sperli_wire::limits::{FEATURE_V1_CORE, MAX_COLLECTIVE_DATA};
use sperli_wire::Error;

use crate::common::*;
use crate::tls::{run_job_with, settings, tls_test};

const SIZES: [u32; 4] = [1, 2, 3, 8];

/// The length of rank r's gatherv/allgatherv block (some are empty).
fn len_of(r: u32) -> usize {
    (r as usize * 7 + 3) % 5
}

/// The length of the block rank `from` sends rank `to` in alltoallv.
fn a2a_len(from: u32, to: u32) -> usize {
    (from as usize * 3 + to as usize * 5) % 4
}

fn a2a_block<T: Ref>(from: u32, to: u32, salt: u64) -> Vec<T> {
    data_of::<T>(from * 100 + to, salt, a2a_len(from, to))
}

/// Every rank's gatherv/allgatherv blocks as the result must hold them.
fn expected<T: Ref>(size: u32, salt: u64) -> Blocks<T> {
    let mut data = Vec::new();
    let mut counts = Vec::new();
    for r in 0..size {
        data.extend(data_of::<T>(r, salt, len_of(r)));
        counts.push(len_of(r));
    }
    Blocks { data, counts }
}

fn same<T: Ref>(got: &Blocks<T>, want: &Blocks<T>, what: &str) {
    assert_eq!(got.counts, want.counts, "{what}: counts");
    let g: Vec<u64> = got.data.iter().map(|x| x.bits()).collect();
    let w: Vec<u64> = want.data.iter().map(|x| x.bits()).collect();
    assert_eq!(g, w, "{what}: data");
}

/// Every v-call with every root on elements of `T`; panics on a wrong
/// result (the harness re-raises it).
fn calls_of<T: Ref, L: Peers>(c: &mut Comm<L>, salt: u64) {
    let (me, size) = (c.rank(), c.size());
    let want = expected::<T>(size, salt);
    let mine = data_of::<T>(me, salt, len_of(me));
    for root in 0..size {
        let got = c.gatherv(root, &mine).expect("gatherv");
        match got {
            Some(b) => {
                assert_eq!(me, root);
                same(&b, &want, "gatherv");
            }
            None => assert_ne!(me, root),
        }
        // scatterv: the root cuts `want.data` by `want.counts`.
        let offer = (me == root).then_some((&want.data[..], &want.counts[..]));
        let got = c.scatterv(root, offer).expect("scatterv");
        let b: Vec<u64> = got.iter().map(|x| x.bits()).collect();
        let w: Vec<u64> = want.block(me as usize).iter().map(|x| x.bits()).collect();
        assert_eq!(b, w, "scatterv from {root} at {me}");
    }
    same(
        &c.allgatherv(&mine).expect("allgatherv"),
        &want,
        "allgatherv",
    );
    let mut data = Vec::new();
    let mut counts = Vec::new();
    for to in 0..size {
        data.extend(a2a_block::<T>(me, to, salt));
        counts.push(a2a_len(me, to));
    }
    let got = c.alltoallv(&data, &counts).expect("alltoallv");
    let mut want = Blocks {
        data: Vec::new(),
        counts: Vec::new(),
    };
    for from in 0..size {
        want.data.extend(a2a_block::<T>(from, me, salt));
        want.counts.push(a2a_len(from, me));
    }
    same(&got, &want, "alltoallv");
}

/// The suite of one rank: every call on three element types, then an
/// allreduce to show the job goes on; returns the sequence number.
fn suite<L: Peers>(c: &mut Comm<L>) -> u64 {
    calls_of::<u8, L>(c, 1);
    calls_of::<i64, L>(c, 2);
    calls_of::<f64, L>(c, 3);
    let n = c.allreduce_scalar(1u32, Reduction::Sum).expect("allreduce");
    assert_eq!(n, c.size());
    c.sequence()
}

fn aligned(seqs: &[u64]) {
    assert!(seqs.windows(2).all(|w| w[0] == w[1]), "sequences {seqs:?}");
}

#[test]
fn every_v_call_on_the_fake_link_at_1_2_3_and_8_ranks() {
    for size in SIZES {
        aligned(&fake::run(size, suite));
        // A v1 job (no feature bit 1): allgatherv's bcast is the v1 star.
        let v1 = FakePeers::job_with_features(&vec![FEATURE_V1_CORE; size as usize]);
        aligned(&fake::run_links(v1, suite));
    }
}

/// allgatherv whose concatenation is longer than one frame carries: in a
/// v1 job one bcast per 16777200 bytes, with bit 1 one call.
#[test]
fn allgatherv_longer_than_a_frame_in_v1_and_bit_1_jobs() {
    let body = |c: &mut Comm<FakePeers>| {
        let n = 6_000_000 + c.rank() as usize;
        let got = c.allgatherv(&vec![c.rank() as u8 + 1; n]).unwrap();
        assert_eq!(got.counts, vec![6_000_000, 6_000_001, 6_000_002]);
        for r in 0..3 {
            assert!(got.block(r).iter().all(|&x| x == r as u8 + 1));
        }
        c.sequence()
    };
    // lengths (2 calls) + gather + bcast: one call with bit 1, two in v1.
    assert_eq!(fake::run(3, body), vec![4; 3]);
    let v1 = FakePeers::job_with_features(&[FEATURE_V1_CORE; 3]);
    assert_eq!(fake::run_links(v1, body), vec![5; 3]);
}

#[test]
fn every_v_call_on_tls_ranks_at_1_2_3_and_8_ranks() {
    for size in SIZES {
        let seqs =
            tls_test(move || run_job_with(size, |_| settings(), |ep| ep, |mut c| suite(&mut c)));
        aligned(&seqs);
    }
}

// ---- refusals: H1618 on every rank, the job goes on --------------------

fn argument(r: &Result<impl std::fmt::Debug, Error>) -> ArgumentError {
    match r {
        Err(Error::InvalidArguments(a)) => a.clone(),
        other => panic!("expected H1618, got {other:?}"),
    }
}

/// Every refusal a rank can tell alone or learns from the length
/// exchange, at rank `bad` (the last rank); returns the errors each call
/// gave and the sequence number after a closing allreduce.
fn refusals<L: Peers>(c: &mut Comm<L>) -> (Vec<ArgumentError>, u64) {
    let (me, size) = (c.rank(), c.size());
    let bad = size - 1;
    let too_long = vec![0u8; MAX_COLLECTIVE_DATA + 1];
    let ok = vec![me as u8; 2];
    let block = if me == bad { &too_long[..] } else { &ok[..] };
    let counts_ok = vec![1usize; size as usize];
    let data = vec![7u32; size as usize];
    let mut errs = vec![
        argument(&c.gatherv(size, &ok)),
        argument(&c.scatterv(size + 3, Some((&data[..], &counts_ok[..])))),
        argument(&c.gatherv(0, block)),
        argument(&c.allgatherv(block)),
        // Not one count per rank at the root (rank `bad`).
        argument(&c.scatterv(bad, Some((&data[..], &counts_ok[1..])))),
        // Counts that do not add up to the data at the root.
        argument(&c.scatterv(bad, Some((&data[1..], &counts_ok[..])))),
    ];
    // alltoallv: rank `bad` gives counts that do not add up.
    let mine = if me == bad { &data[1..] } else { &data[..] };
    errs.push(argument(&c.alltoallv(mine, &counts_ok)));
    // A block longer than a frame in alltoallv at rank `bad`.
    let mut big = counts_ok.clone();
    let mut long = vec![0u8; size as usize];
    if me == bad {
        big[0] = MAX_COLLECTIVE_DATA + 1;
        long = vec![0u8; MAX_COLLECTIVE_DATA + size as usize];
    }
    errs.push(argument(&c.alltoallv(&long, &big)));
    assert_eq!(
        c.allreduce_scalar(1u64, Reduction::Sum).unwrap(),
        u64::from(size)
    );
    (errs, c.sequence())
}

fn check_refusals(out: &[(Vec<ArgumentError>, u64)]) {
    let size = out.len() as u32;
    let bad = size - 1;
    let seqs: Vec<u64> = out.iter().map(|o| o.1).collect();
    aligned(&seqs);
    let too_long = ArgumentError::TooLong {
        len: MAX_COLLECTIVE_DATA + 1,
        max: MAX_COLLECTIVE_DATA,
    };
    for (r, (errs, _)) in out.iter().enumerate() {
        let r = r as u32;
        let from_bad = |own: ArgumentError| {
            if r == bad {
                own
            } else {
                ArgumentError::RefusedBy { rank: bad }
            }
        };
        let want = vec![
            ArgumentError::Root { root: size, size },
            ArgumentError::Root {
                root: size + 3,
                size,
            },
            from_bad(too_long.clone()),
            from_bad(too_long.clone()),
            from_bad(ArgumentError::Counts {
                got: size as usize - 1,
                size,
            }),
            from_bad(ArgumentError::CountsSum {
                sum: u64::from(size),
                len: size as usize - 1,
            }),
            from_bad(ArgumentError::CountsSum {
                sum: u64::from(size),
                len: size as usize - 1,
            }),
            from_bad(too_long.clone()),
        ];
        assert_eq!(errs, &want, "rank {r}");
    }
}

#[test]
fn refused_v_calls_are_h1618_on_every_rank_and_the_job_goes_on_fake() {
    for size in SIZES {
        check_refusals(&fake::run(size, refusals));
    }
}

#[test]
fn refused_v_calls_are_h1618_on_every_rank_and_the_job_goes_on_tls() {
    for size in [1, 3] {
        let out =
            tls_test(move || run_job_with(size, |_| settings(), |ep| ep, |mut c| refusals(&mut c)));
        check_refusals(&out);
    }
}

// ---- blocks that break their announced length: H1617 --------------------

/// Makes rank `who`'s `nth` send (counted from 1) one byte longer.
fn lengthen_nth_send(c: &Comm<FakePeers>, nth: usize) {
    let mut n = 0;
    c.link().set_send_hook(move |_to, mut p| {
        n += 1;
        if n == nth {
            p.push(0);
        }
        vec![p]
    });
}

#[test]
fn a_gatherv_block_longer_than_announced_is_h1617_at_the_root() {
    let out = fake::run(3, |c| {
        if c.rank() == 1 {
            // Send 1: its slot (the allgather's gather); send 2: its block.
            lengthen_nth_send(c, 2);
        }
        let first = c.gatherv(0, &[c.rank() as u8; 3]).map(drop);
        let later = c.barrier();
        (first, later)
    });
    match &out[0].0 {
        Err(Error::CollectiveMismatch(MismatchError::Length {
            from: 1,
            expected: 3,
            got: 4,
        })) => {}
        other => panic!("{other:?}"),
    }
    for (first, later) in &out[1..] {
        assert_job_ended(first, later, 0, AbortReason::CollectiveMismatch, 1617);
    }
}

#[test]
fn a_scatterv_block_longer_than_announced_is_h1617_at_the_receiver() {
    let out = fake::run(3, |c| {
        if c.rank() == 0 {
            // Sends 1 and 2: the slots to ranks 1 and 2; 3: block 1; 4: block 2.
            lengthen_nth_send(c, 4);
        }
        let data = [1i32, 2, 3, 4, 5, 6];
        let counts = [1usize, 2, 3];
        let first = c
            .scatterv(0, (c.rank() == 0).then_some((&data[..], &counts[..])))
            .map(drop);
        let later = c.barrier();
        (first, later)
    });
    match &out[2].0 {
        Err(Error::CollectiveMismatch(MismatchError::Length {
            from: 0,
            expected: 12,
            got: 13,
        })) => {}
        other => panic!("{other:?}"),
    }
    // Rank 1's block is right, so its scatterv succeeds, unless rank 2's
    // ABORT comes in before it has taken the block (protocol §7.5):
    // `assert_job_ended` allows both.
    for r in [0, 1] {
        let (first, later) = &out[r];
        assert_job_ended(first, later, 2, AbortReason::CollectiveMismatch, 1617);
    }
}

/// The non-blocking forms of alltoall, reduce_scatter, scan, exscan and
/// the v-calls give exactly their blocking calls' results, at 3 and 5
/// ranks, issued back to back before any is waited for.
#[test]
fn nonblocking_forms_match_their_blocking_calls() {
    use sperli_collective::prelude::*;
    for n in [3u32, 5] {
        let out = sperli_collective::fake::run(n, move |c| {
            let r = c.rank();
            let data: Vec<u64> = (0..n as u64 * 2).map(|i| i * 7 + u64::from(r)).collect();
            let counts: Vec<usize> = (0..n as usize).map(|i| i % 3).collect();
            let v: Vec<u64> = (0..(r as u64 % 3))
                .map(|i| i + u64::from(r) * 100)
                .collect();
            let scounts: Vec<usize> = (0..n as usize).map(|i| (i + 1) % 2).collect();
            let sdata: Vec<u64> = (0..scounts.iter().sum::<usize>() as u64).collect();
            let reqs = (
                c.ialltoall(&data).unwrap(),
                c.ireduce_scatter(&data, Reduction::Sum).unwrap(),
                c.iscan(&data, Reduction::Max).unwrap(),
                c.iexscan(&data, Reduction::Sum).unwrap(),
                c.igatherv(1, &v).unwrap(),
                c.iscatterv(0, (r == 0).then_some((&sdata[..], &scounts[..])))
                    .unwrap(),
                c.iallgatherv(&v).unwrap(),
            );
            let want = (
                c.alltoall(&data).unwrap(),
                c.reduce_scatter(&data, Reduction::Sum).unwrap(),
                c.scan(&data, Reduction::Max).unwrap(),
                c.exscan(&data, Reduction::Sum).unwrap(),
                c.gatherv(1, &v).unwrap(),
                c.scatterv(0, (r == 0).then_some((&sdata[..], &scounts[..])))
                    .unwrap(),
                c.allgatherv(&v).unwrap(),
            );
            let a2av = c.ialltoallv(&data[..counts.iter().sum()], &counts).unwrap();
            let a2av_want = c.alltoallv(&data[..counts.iter().sum()], &counts).unwrap();
            let got = (
                reqs.0.wait().unwrap(),
                reqs.1.wait().unwrap(),
                reqs.2.wait().unwrap(),
                reqs.3.wait().unwrap(),
                reqs.4.wait().unwrap(),
                reqs.5.wait().unwrap(),
                reqs.6.wait().unwrap(),
            );
            got == want && a2av.wait().unwrap() == a2av_want
        });
        assert_eq!(out, vec![true; n as usize], "at {n} ranks");
    }
}
