//! One call for any length: `allreduce`, `reduce` and `bcast` (and their
//! `_into` forms) of 100 MiB through the plain calls over TLS at 2 and 3
//! ranks, in a job with HELLO feature bit 1 (one pipelined call each,
//! protocol §14.1) and in a v1 job (the v1 split of protocol §8.1, one v1
//! call per 16777200 bytes), each checked against the serial left fold.

use sperli_collective::Comm;
use sperli_transport::Endpoint;
use sperli_transport::Settings;
use sperli_wire::element::Reduction;
use sperli_wire::limits::{FEATURE_V1_CORE, MAX_COLLECTIVE_DATA};

use crate::tls::{finish, run_job_with, settings, tls_test_within};

/// 100 MiB of u64 per rank.
const LEN: usize = (100 << 20) / 8;

/// Rank r's element i: distinct per rank and index (sums wrap, as the
/// fold does).
fn value(rank: u32, i: usize) -> u64 {
    (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8 ^ u64::from(rank) << 56
}

/// What every rank checks and reports: (allreduce right, allreduce_into
/// right, reduce right at the root / None elsewhere, bcast_into right,
/// bcast right (bit 1 only), calls made).
type Outcome = (bool, bool, Option<bool>, bool, Option<bool>, u64);

fn calls(c: Comm<Endpoint>, bit1: bool) -> Outcome {
    let me = c.rank();
    let n = c.size();
    let mine: Vec<u64> = (0..LEN).map(|i| value(me, i)).collect();
    // The serial left fold of every rank's contribution, ascending.
    let sum = |i: usize| (0..n).fold(0u64, |acc, r| acc.wrapping_add(value(r, i)));

    let all = c.allreduce(&mine, Reduction::Sum).expect("allreduce");
    let all_ok = all.len() == LEN && all.iter().enumerate().all(|(i, &x)| x == sum(i));
    drop(all);

    let mut out = vec![0u64; LEN];
    c.allreduce_into(&mine, &mut out, Reduction::Bxor)
        .expect("allreduce_into");
    let xor = |i: usize| (0..n).fold(0u64, |acc, r| acc ^ value(r, i));
    let into_ok = out.iter().enumerate().all(|(i, &x)| x == xor(i));

    let root = n - 1;
    let red = c.reduce(root, &mine, Reduction::Sum).expect("reduce");
    let red_ok = red.map(|v| v.len() == LEN && v.iter().enumerate().all(|(i, &x)| x == sum(i)));

    let mut buf = if me == 0 {
        mine.clone()
    } else {
        vec![1u64; LEN]
    };
    c.bcast_into(0, &mut buf).expect("bcast_into");
    let bcast_into_ok = buf.iter().enumerate().all(|(i, &x)| x == value(0, i));
    drop(buf);

    // bcast to receivers that do not know the length: any length with
    // bit 1; in a v1 job one v1 call (protocol §8.5), so not tried there.
    let bcast_ok = bit1.then(|| {
        let mut v = if me == 1 { mine.clone() } else { Vec::new() };
        c.bcast(1, &mut v).expect("bcast");
        v.len() == LEN && v.iter().enumerate().all(|(i, &x)| x == value(1, i))
    });
    let seq = c.sequence();
    finish(c);
    (all_ok, into_ok, red_ok, bcast_into_ok, bcast_ok, seq)
}

/// The settings of every rank: HELLO feature bit 1 on, or a v1 job.
fn features(bit1: bool) -> impl Fn(u32) -> Settings + Clone + Send + Sync + 'static {
    move |_| {
        if bit1 {
            settings()
        } else {
            Settings {
                features: FEATURE_V1_CORE,
                ..settings()
            }
        }
    }
}

fn job(n: u32, bit1: bool) -> Vec<Outcome> {
    let features_of = features(bit1);
    // 5 calls of 100 MiB per rank in a debug build: more than the usual
    // watchdog.
    tls_test_within(std::time::Duration::from_secs(300), move || {
        run_job_with(n, features_of, |ep| ep, move |c| calls(c, bit1))
    })
}

fn check(n: u32, bit1: bool) {
    let out = job(n, bit1);
    // One call each with bit 1 (4 or 5 calls); in a v1 job the split:
    // ceil(100 MiB / 16777200 bytes) = 7 v1 calls each, 4 calls.
    let split = (LEN * 8).div_ceil(MAX_COLLECTIVE_DATA) as u64;
    let want_seq = if bit1 { 5 } else { 4 * split };
    for (r, o) in out.iter().enumerate() {
        let (all, into, red, bin, b, seq) = *o;
        assert!(all && into && bin, "rank {r} of {n} (bit 1: {bit1}): {o:?}");
        assert_eq!(red, (r as u32 == n - 1).then_some(true), "rank {r}: reduce");
        assert_eq!(b, bit1.then_some(true), "rank {r}: bcast");
        assert_eq!(seq, want_seq, "rank {r}: calls");
    }
}

#[test]
fn plain_calls_of_100_mib_at_2_ranks_with_bit_1() {
    check(2, true);
}

#[test]
fn plain_calls_of_100_mib_at_3_ranks_with_bit_1() {
    check(3, true);
}

#[test]
fn plain_calls_of_100_mib_at_2_ranks_in_a_v1_job() {
    check(2, false);
}

#[test]
fn plain_calls_of_100_mib_at_3_ranks_in_a_v1_job() {
    check(3, false);
}

/// Rank k's block j of its alltoall and reduce_scatter data: one element
/// past one v1 call (16777200 bytes of u32).
fn block_of(k: u32, j: u32) -> Vec<u32> {
    let n = MAX_COLLECTIVE_DATA / 4 + 1;
    (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ k << 28 ^ j << 24)
        .collect()
}

/// alltoall and reduce_scatter whose blocks are past one v1 call, at 3
/// ranks over TLS: one call each (the series of protocol §8.9, "Blocks
/// past one call"), checked against the blocks sent and the serial fold.
fn blocks_past_one_call(bit1: bool) {
    let features_of = features(bit1);
    let out = tls_test_within(std::time::Duration::from_secs(300), move || {
        run_job_with(
            3,
            features_of,
            |ep| ep,
            move |c: Comm<Endpoint>| {
                let me = c.rank();
                let whole: Vec<u32> = (0..3).flat_map(|j| block_of(me, j)).collect();
                let a2a = c.alltoall(&whole).expect("alltoall");
                let want: Vec<u32> = (0..3).flat_map(|k| block_of(k, me)).collect();
                let a2a_ok = a2a == want;
                let rs = c
                    .reduce_scatter(&whole, Reduction::Sum)
                    .expect("reduce_scatter");
                let blocks: Vec<Vec<u32>> = (0..3).map(|k| block_of(k, me)).collect();
                let rs_ok = rs.len() == blocks[0].len()
                    && rs.iter().enumerate().all(|(i, &x)| {
                        x == blocks.iter().fold(0u32, |acc, b| acc.wrapping_add(b[i]))
                    });
                finish(c);
                (a2a_ok, rs_ok)
            },
        )
    });
    for (r, o) in out.iter().enumerate() {
        assert_eq!(*o, (true, true), "rank {r} (bit 1: {bit1})");
    }
}

#[test]
fn alltoall_and_reduce_scatter_past_one_call_with_bit_1() {
    blocks_past_one_call(true);
}

#[test]
fn alltoall_and_reduce_scatter_past_one_call_in_a_v1_job() {
    blocks_past_one_call(false);
}
