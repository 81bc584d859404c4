//! Pipelined collectives (HELLO feature bit 1, protocol §14) over the
//! in-memory fake link: results bit-identical to the v1 star for every
//! element type and allowed reduction at 1, 2, 3, 5 and 8 ranks and every
//! edge size (0, 1 element, the chunk edges, 16 MiB + 1 element,
//! 64 MiB), ranks entering late, a job with a v1-only rank, hostile frames,
//! a relay lost mid-call.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sperli_collective::fake::{self, FakePeers};
use sperli_collective::{Comm, Peers};
use sperli_wire::abort::AbortReason;
use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_V1_CORE};
use sperli_wire::pipeline::{encode_chunk, encode_open, ChunkHeader, Open, PIPELINE_MIN_BYTES};
use sperli_wire::Error;

use crate::common::*;

pub(crate) const T: usize = PIPELINE_MIN_BYTES as usize;
const RANKS: [u32; 5] = [1, 2, 3, 5, 8];

/// The frames a job sent: (from, to, operation, phase) of every payload.
type Trace = Arc<Mutex<Vec<(u32, u32, u8, u8)>>>;

/// A job of `size` ranks, v1-only or with bit 1, whose sends are traced.
fn job(size: u32, v1: bool) -> (Vec<FakePeers>, Trace) {
    let f = if v1 {
        FEATURE_V1_CORE
    } else {
        FEATURES_IMPLEMENTED
    };
    traced(FakePeers::job_with_features(&vec![f; size as usize]))
}

fn traced(links: Vec<FakePeers>) -> (Vec<FakePeers>, Trace) {
    let trace: Trace = Arc::default();
    for l in &links {
        let (t, me) = (trace.clone(), l.rank());
        l.set_send_hook(move |to, p| {
            t.lock().unwrap().push((me, to, p[0], p[3]));
            vec![p]
        });
    }
    (links, trace)
}

/// The links of a job, each [`Watched`] by `turns`.
fn watched(links: Vec<FakePeers>, turns: &Arc<Turns>) -> Vec<Watched<FakePeers>> {
    links
        .into_iter()
        .map(|l| Watched::new(l, turns.clone()))
        .collect()
}

fn pipelined_frames(t: &Trace) -> usize {
    t.lock().unwrap().iter().filter(|f| f.3 >= 2).count()
}

/// The (element type, reduction) pairs protocol §8.3 allows: 51.
pub(crate) fn allowed() -> Vec<(ElementType, Reduction)> {
    let mut v = Vec::new();
    for t in 0..=6 {
        for r in 1..=10 {
            let (t, r) = (
                ElementType::from_code(t).unwrap(),
                Reduction::from_code(r).unwrap(),
            );
            if sperli_wire::reduce::check_args(0, t, r).is_ok() {
                v.push((t, r));
            }
        }
    }
    assert_eq!(v.len(), 51);
    v
}

/// allreduce, reduce to the last rank and to rank 1 % size, and
/// reduce_scatter of `len` elements of `T` (salted by `salt`), the streams
/// this rank starts cut into `chunk` bytes (None: the default rule).
pub(crate) fn reducing<T: Ref, L: Peers>(
    c: &mut Comm<L>,
    salt: u64,
    len: usize,
    r: Reduction,
    chunk: Option<usize>,
) -> Vec<Option<Vec<T>>> {
    c.set_pipeline_chunk(chunk);
    let (me, n) = (c.rank(), c.size());
    let mine = data_of::<T>(me, salt, len);
    let a = c.allreduce(&mine, r).unwrap();
    let mut b = vec![T::default(); if me == n - 1 { len } else { 0 }];
    let at = c.reduce_into(n - 1, &mine, &mut b, r).unwrap();
    let d = c.reduce(1 % n, &mine, r).unwrap();
    let e = c.reduce_scatter(&mine, r).unwrap();
    vec![Some(a), at.then_some(b), d, Some(e)]
}

/// The results of [`reducing`] on every rank of a pipelined and a star
/// job: both must be the reference fold's bits (NaN payloads of sum and
/// prod aside), so they are the same bits.
pub(crate) fn check_reducing<T: Ref>(
    n: u32,
    salt: u64,
    len: usize,
    r: Reduction,
    pipe: &[Vec<Option<Vec<T>>>],
    star: &[Vec<Option<Vec<T>>>],
) {
    let want = reference::<T>(n, salt, len, r);
    let what = format!("{:?} {r:?} n={n} len={len}", T::ELEMENT_TYPE);
    let block = len / n as usize;
    for rank in 0..n as usize {
        let (p, s) = (&pipe[rank], &star[rank]);
        for (k, (pv, sv)) in p.iter().zip(s).enumerate() {
            assert_eq!(
                pv.is_some(),
                sv.is_some(),
                "{what}: result {k} at rank {rank}"
            );
            let (Some(pv), Some(sv)) = (pv, sv) else {
                continue;
            };
            let want_k: &[T] = if k == 3 {
                &want[rank * block..(rank + 1) * block]
            } else {
                &want
            };
            same_bits(pv, want_k, r, &format!("{what}: pipelined result {k}"));
            same_bits(sv, want_k, r, &format!("{what}: star result {k}"));
        }
    }
}

/// Runs [`reducing`] in a job with bit 1 and in a v1 job and checks them
/// ([`check_reducing`]); returns how many pipelined frames the bit-1 job
/// sent.
fn pipe_vs_star<T: Ref>(
    n: u32,
    salt: u64,
    len: usize,
    r: Reduction,
    chunk: Option<usize>,
) -> usize {
    let mut pipelined = 0;
    let mut runs = Vec::new();
    for v1 in [false, true] {
        let (links, trace) = job(n, v1);
        runs.push(fake::run_links(links, |c| {
            reducing::<T, _>(c, salt, len, r, chunk)
        }));
        let p = pipelined_frames(&trace);
        if v1 {
            assert_eq!(p, 0, "a v1 job sent pipelined frames");
        } else {
            pipelined = p;
        }
    }
    check_reducing(n, salt, len, r, &runs[0], &runs[1]);
    pipelined
}

fn each_pair(n: u32, bytes: usize, salt: u64) {
    for (t, r) in allowed() {
        macro_rules! go {
            ($ty:ty) => {{
                let w = std::mem::size_of::<$ty>();
                // Whole elements, divisible by n (reduce_scatter).
                let len = (bytes / w).div_ceil(n as usize) * n as usize;
                let p = pipe_vs_star::<$ty>(n, salt, len, r, None);
                if n >= 2 && len * w >= T {
                    assert!(p > 0, "{t:?} {r:?} n={n}: nothing was pipelined");
                }
            }};
        }
        match t {
            ElementType::U8 => go!(u8),
            ElementType::I32 => go!(i32),
            ElementType::U32 => go!(u32),
            ElementType::I64 => go!(i64),
            ElementType::U64 => go!(u64),
            ElementType::F32 => go!(f32),
            ElementType::F64 => go!(f64),
            // `allowed` gives the v1 pairs; bit 4's are in `bit4`.
            _ => unreachable!("a v1 element type"),
        }
    }
}

#[test]
fn every_type_and_reduction_pipelined_is_bit_identical_to_the_star() {
    // Just above T: four 64 KiB chunks and a short last one.
    for n in RANKS {
        each_pair(n, T + 8, 1000 + u64::from(n));
    }
}

/// bcast and allgather of `len` elements, pipelined and star.
fn movement<T: Ref>(n: u32, salt: u64, len: usize, chunk: Option<usize>) {
    let mut runs = Vec::new();
    for v1 in [false, true] {
        let (links, _) = job(n, v1);
        runs.push(fake::run_links(links, |c| {
            c.set_pipeline_chunk(chunk);
            let me = c.rank();
            let root = n / 2;
            let mut v = if me == root {
                data_of::<T>(root, salt, len)
            } else {
                Vec::new()
            };
            c.bcast_counted(root, &mut v).unwrap();
            let mut w = vec![T::default(); len];
            if me == root {
                w.copy_from_slice(&v);
            }
            c.bcast_into(root, &mut w).unwrap();
            let g = c
                .allgather(&data_of::<T>(me, salt + 1, len / n as usize))
                .unwrap();
            (v, w, g)
        }));
    }
    let block = len / n as usize;
    let gathered: Vec<T> = (0..n)
        .flat_map(|r| data_of::<T>(r, salt + 1, block))
        .collect();
    let sent = data_of::<T>(n / 2, salt, len);
    for rank in 0..n as usize {
        for run in &runs {
            let (v, w, g) = &run[rank];
            let bits = |x: &[T]| x.iter().map(|e| e.bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(v),
                bits(&sent),
                "bcast_counted n={n} len={len} rank {rank}"
            );
            assert_eq!(bits(w), bits(&sent), "bcast_into n={n} len={len}");
            assert_eq!(bits(g), bits(&gathered), "allgather n={n} len={len}");
        }
    }
}

#[test]
fn chunk_edges_at_every_rank_count() {
    // 0 and 1 element stay on the star; with a chunk of L = 2T bytes the
    // calls of L - 1 element, L and L + 1 element are pipelined as one
    // short chunk, one whole chunk, and a whole chunk plus one element;
    // with the default rule T - 1 element (the star), T and T + 1 element.
    let l = 2 * T;
    for n in RANKS {
        for (bytes, chunk) in [
            (0, None),
            (8, None),
            (l - 8, Some(l)),
            (l, Some(l)),
            (l + 8, Some(l)),
            (T - 8, None),
            (T, None),
            (T + 8, None),
        ] {
            let salt = 77 + bytes as u64;
            for (r, is_float) in [(Reduction::Sum, true), (Reduction::Prod, false)] {
                // Elements divisible by n where reduce_scatter needs it.
                let elems = (bytes / 8).div_ceil(n as usize) * n as usize;
                let p = if is_float {
                    pipe_vs_star::<f64>(n, salt, elems, r, chunk)
                } else {
                    pipe_vs_star::<i64>(n, salt, elems, r, chunk)
                };
                assert_eq!(p > 0, n >= 2 && elems * 8 >= T, "n={n} {bytes} bytes");
            }
            movement::<f64>(n, salt, (bytes / 8) / n as usize * n as usize, chunk);
        }
    }
}

// ---- the large sizes: 16 MiB + 1 element and 64 MiB ------------------------

/// f64 values whose sums depend on the fold order (magnitudes 1e-3 .. 1e6).
pub(crate) fn big_value(rank: u32, i: usize) -> f64 {
    let scale = [1e-3, 1.0, 1e3, 1e6][rank as usize % 4];
    ((i * 7919 + rank as usize * 104_729) % 1_000_003) as f64 * scale / 7.0
}

/// allreduce, reduce to the last rank and bcast_counted of
/// `len` f64 in a bit-1 and a v1 job: the same bits; the bit-1 job makes
/// one call each.
fn large_calls(n: u32, len: usize) {
    let mut runs = Vec::new();
    for v1 in [false, true] {
        let (links, trace) = job(n, v1);
        let out = fake::run_links(links, move |c| {
            let me = c.rank();
            let mine: Vec<f64> = (0..len).map(|i| big_value(me, i)).collect();
            let seq0 = c.sequence();
            let a = c.allreduce(&mine, Reduction::Sum).unwrap();
            let b = c.reduce(n - 1, &mine, Reduction::Sum).unwrap();
            let mut v = if me == 0 { mine.clone() } else { Vec::new() };
            c.bcast_counted(0, &mut v).unwrap();
            let calls = c.sequence() - seq0;
            let bits = |x: &[f64]| x.iter().map(|e| e.to_bits()).collect::<Vec<_>>();
            (bits(&a), b.map(|x| bits(&x)), bits(&v), calls)
        });
        let p = pipelined_frames(&trace);
        assert_eq!(p > 0, !v1 && n >= 2, "n={n} v1={v1}: {p} pipelined frames");
        runs.push(out);
    }
    let want: Vec<u64> = (0..len)
        .map(|i| {
            (1..n)
                .fold(big_value(0, i), |acc, r| acc + big_value(r, i))
                .to_bits()
        })
        .collect();
    let sent: Vec<u64> = (0..len).map(|i| big_value(0, i).to_bits()).collect();
    // The v1 split: k calls each, and bcast_counted's 16-byte head.
    let k = len.div_ceil(sperli_collective::max_chunk_elems::<f64>()) as u64;
    let v1_calls = 3 * k + 1;
    for (rank, (pipe, star)) in runs[0].iter().zip(&runs[1]).enumerate() {
        assert!(
            pipe.0 == want && star.0 == want,
            "allreduce n={n} len={len} rank {rank}"
        );
        assert_eq!(pipe.1.is_some(), rank == n as usize - 1);
        if let (Some(p), Some(s)) = (&pipe.1, &star.1) {
            assert!(*p == want && *s == want, "reduce n={n} len={len}");
        }
        assert!(pipe.2 == sent && star.2 == sent, "bcast n={n} len={len}");
        // One call each with bit 1 (n >= 2); at size 1 the reductions stay
        // the v1 split (protocol §14.5) and bcast_counted is one local call.
        let pipe_calls = if n >= 2 { 3 } else { 2 * k + 1 };
        assert_eq!((pipe.3, star.3), (pipe_calls, v1_calls), "n={n} len={len}");
    }
}

#[test]
fn sixteen_mib_plus_one_element_at_every_rank_count() {
    for n in RANKS {
        large_calls(n, (16 << 20) / 8 + 1);
    }
}

#[test]
fn sixty_four_mib_at_every_rank_count() {
    for n in RANKS {
        large_calls(n, (64 << 20) / 8);
    }
}

// ---- ranks that enter late, in different orders ----------------------------

#[test]
fn ranks_enter_late_in_different_orders() {
    let n = 5u32;
    let len = T / 8 * 3 + 5; // pipelined, 13 chunks

    // Each rank enters every call once the rank before it in the order
    // waits in that call (or is done with it).
    let orders: [fn(u32) -> u64; 3] = [
        |r| u64::from(r),
        |r| u64::from(4 - r),
        |r| [2, 0, 4, 1, 3][r as usize],
    ];
    for key in orders {
        let order = order_by(0..n, key);
        let (links, trace) = job(n, false);
        let turns = Turns::new();
        let out = fake::run_links(watched(links, &turns), |c| {
            let me = c.rank();
            let mine = data_of::<f64>(me, 5, len);
            let late = |point: u64, call: &mut dyn FnMut()| {
                turns.take(point, &order, me);
                call();
                turns.done(point, me);
            };
            let (mut a, mut r, mut v, mut g, mut s) = Default::default();
            late(0, &mut || a = c.allreduce(&mine, Reduction::Sum).unwrap());
            late(1, &mut || r = c.reduce(2, &mine, Reduction::Max).unwrap());
            late(2, &mut || {
                v = if me == 3 { mine.clone() } else { Vec::new() };
                c.bcast(3, &mut v).unwrap();
            });
            late(3, &mut || g = c.allgather(&mine[..len / 5]).unwrap());
            late(4, &mut || {
                s = c
                    .reduce_scatter(&mine[..len / 5 * 5], Reduction::Min)
                    .unwrap();
            });
            (a, r, v, g, s)
        });
        assert!(pipelined_frames(&trace) > 0);
        let sum = reference::<f64>(n, 5, len, Reduction::Sum);
        let max = reference::<f64>(n, 5, len, Reduction::Max);
        let min = reference::<f64>(n, 5, len / 5 * 5, Reduction::Min);
        let gathered: Vec<f64> = (0..n)
            .flat_map(|r| data_of::<f64>(r, 5, len)[..len / 5].to_vec())
            .collect();
        for (rank, (a, r, v, g, s)) in out.iter().enumerate() {
            same_bits(a, &sum, Reduction::Sum, "late allreduce");
            if rank == 2 {
                same_bits(r.as_ref().unwrap(), &max, Reduction::Max, "late reduce");
            }
            same_bits(v, &data_of::<f64>(3, 5, len), Reduction::Max, "late bcast");
            same_bits(g, &gathered, Reduction::Max, "late allgather");
            let b = len / 5;
            same_bits(
                s,
                &min[rank * b..(rank + 1) * b],
                Reduction::Min,
                "late reduce_scatter",
            );
        }
    }
}

// ---- a job with a v1-only rank uses the star -------------------------------

#[test]
fn a_job_with_a_rank_that_clears_bit_1_uses_the_star() {
    for (n, v1_rank) in [(2u32, 0u32), (3, 2), (5, 1), (8, 7)] {
        let mut f = vec![FEATURES_IMPLEMENTED; n as usize];
        f[v1_rank as usize] = FEATURE_V1_CORE;
        let (links, trace) = traced(FakePeers::job_with_features(&f));
        assert!(links.iter().all(|l| l.features() == FEATURE_V1_CORE));
        let len = (T / 8 + 1) * n as usize;
        let out = fake::run_links(links, |c| {
            let mine = data_of::<f64>(c.rank(), 9, len);
            let a = c.allreduce(&mine, Reduction::Sum).unwrap();
            let mut v = if c.rank() == 0 { mine } else { Vec::new() };
            c.bcast_counted(0, &mut v).unwrap();
            (a, v, c.sequence())
        });
        assert_eq!(pipelined_frames(&trace), 0, "n={n}: the star only");
        let want = reference::<f64>(n, 9, len, Reduction::Sum);
        for (a, v, seq) in &out {
            same_bits(a, &want, Reduction::Sum, "mixed-job allreduce");
            same_bits(
                v,
                &data_of::<f64>(0, 9, len),
                Reduction::Sum,
                "mixed-job bcast",
            );
            // v1 calls: one allreduce, and bcast_counted's head and one chunk.
            assert_eq!(*seq, 3);
        }
    }
}

// ---- hostile peers ---------------------------------------------------------

/// The error every rank other than `victim` must end with once `victim`
/// ended the job: H1612 with the victim's reason and code, or (3 ranks or
/// more) a survivor's close without BYE (H1613).
fn ended_by(e: &Error, victim: u32, reason: AbortReason, h: u32) {
    match e {
        Error::AbortedByPeer {
            from,
            reason: r,
            code: c,
            ..
        } => assert_eq!((*from, *r, *c), (victim, reason.code(), h), "{e}"),
        Error::PeerLost { .. } => {}
        other => panic!("expected H1612 from {victim}, got {other}"),
    }
}

/// A 3-rank allreduce of 4 chunks per stream (L = 256 KiB) in which rank
/// 0's PARTIAL chunks to rank 1 go through `hook` (the index of the chunk,
/// its payload) -> what to deliver. Rank 1 must end the job with `h` and
/// `reason`; the others end with its ABORT (H1612) or a close (H1613).
fn hostile_partials(
    hook: impl FnMut(usize, Vec<u8>) -> Vec<Vec<u8>> + Send + 'static,
    h: u32,
    reason: AbortReason,
) {
    let links = FakePeers::job(3);
    let hook = Mutex::new(hook);
    let mut k = 0usize;
    links[0].set_send_hook(move |to, p| {
        if to == 1 && p[3] == Phase::Partial as u8 {
            k += 1;
            (hook.lock().unwrap())(k - 1, p)
        } else {
            vec![p]
        }
    });
    let len = (3 * T + T / 2) / 8;
    let out = fake::run_links(links, move |c| {
        c.set_pipeline_chunk(Some(T));
        let mine = data_of::<f64>(c.rank(), 3, len);
        let first = c.allreduce(&mine, Reduction::Sum).map(drop);
        let later = c.barrier();
        (first, later)
    });
    let e1 = out[1].0.as_ref().expect_err("rank 1 rejects the frame");
    assert_eq!(code(e1), h, "{e1}");
    for (rank, (first, later)) in out.iter().enumerate() {
        if rank != 1 {
            ended_by(later.as_ref().unwrap_err(), 1, reason, h);
            if let Err(e) = first {
                ended_by(e, 1, reason, h);
            }
        }
    }
}

fn rewrite_chunk(mut p: Vec<u8>, offset: Option<u64>, total: Option<u64>) -> Vec<u8> {
    if let Some(o) = offset {
        p[16..24].copy_from_slice(&o.to_le_bytes());
    }
    if let Some(t) = total {
        p[24..32].copy_from_slice(&t.to_le_bytes());
    }
    p
}

fn chunk_total(p: &[u8]) -> u64 {
    u64::from_le_bytes(p[24..32].try_into().unwrap())
}

#[test]
fn a_chunk_out_of_order_is_h1617() {
    // Chunks 0 and 1 swapped: the first one taken starts at L, not 0.
    let mut held = None;
    hostile_partials(
        move |k, p| match k {
            0 => {
                held = Some(p);
                vec![]
            }
            1 => vec![p, held.take().unwrap()],
            _ => vec![p],
        },
        1617,
        AbortReason::CollectiveMismatch,
    );
    // A chunk repeated.
    hostile_partials(
        |k, p| if k == 1 { vec![p.clone(), p] } else { vec![p] },
        1617,
        AbortReason::CollectiveMismatch,
    );
}

#[test]
fn a_chunk_past_the_end_is_h1610() {
    hostile_partials(
        |k, p| {
            if k == 1 {
                // Chunk 1 moved so that it ends 8 bytes past the total.
                let len = (p.len() - 32) as u64;
                let total = chunk_total(&p);
                vec![rewrite_chunk(p, Some(total - len + 8), None)]
            } else {
                vec![p]
            }
        },
        1610,
        AbortReason::RejectedFrame,
    );
}

#[test]
fn a_changed_total_is_h1617_and_another_first_total_h1618() {
    hostile_partials(
        |k, p| {
            if k == 1 {
                let t = chunk_total(&p);
                vec![rewrite_chunk(p, None, Some(t + 8))]
            } else {
                vec![p]
            }
        },
        1617,
        AbortReason::CollectiveMismatch,
    );
    // The first chunk already says another total: the contributions differ.
    hostile_partials(
        |k, p| {
            if k == 0 {
                let t = chunk_total(&p);
                vec![rewrite_chunk(p, None, Some(t + 8))]
            } else {
                vec![p]
            }
        },
        1618,
        AbortReason::CollectiveMismatch,
    );
}

/// A COLLECTIVE payload of the pipelined kind for `h`'s call: an OPEN, or a
/// chunk of 8 bytes at offset 0 of a stream of 8.
fn pipelined_payload(h: CollectiveHeader) -> Vec<u8> {
    let mut p = Vec::new();
    match h.phase {
        Phase::Open => encode_open(
            &h,
            Open {
                total: 8,
                fanout: 1,
            },
            &mut p,
        ),
        _ => encode_chunk(
            &h,
            ChunkHeader {
                offset: 0,
                total: 8,
            },
            &[0; 8],
            &mut p,
        ),
    }
    p
}

#[test]
fn a_pipelined_frame_without_negotiation_is_h1610() {
    // A v1 job: rank 1 sends, as its reduce contribution to the root, a
    // well-formed frame of bit 1. The root takes it by the v1 rules: H1610,
    // ABORT reason 7; the others end with H1612.
    for (op, phase) in [
        (Operation::Reduce, Phase::Open),
        (Operation::Reduce, Phase::Partial),
        (Operation::Reduce, Phase::Final),
        (Operation::ReduceScatter, Phase::Partial),
        (Operation::Allgather, Phase::Final),
    ] {
        let links = FakePeers::job_with_features(&[FEATURE_V1_CORE; 3]);
        let (et, red) = if op.reduces() { (6, 1) } else { (0, 0) };
        let forged = pipelined_payload(CollectiveHeader {
            operation: op,
            element_type: et,
            reduction: red,
            phase,
            root: 0,
            sequence: 1,
        });
        links[1].set_send_hook(move |_, _| vec![forged.clone()]);
        let out = fake::run_links(links, |c| {
            let first = c.reduce(0, &[1.0f64], Reduction::Sum).map(drop);
            (first, c.barrier())
        });
        let e0 = out[0].0.as_ref().unwrap_err();
        assert_eq!(code(e0), 1610, "{op:?} {phase:?}: {e0}");
        assert!(matches!(e0, Error::FrameRejected(_)), "{e0}");
        ended_by(
            out[2].1.as_ref().unwrap_err(),
            0,
            AbortReason::RejectedFrame,
            1610,
        );
    }
}

#[test]
fn a_pipelined_frame_where_a_star_frame_is_due_is_h1617_with_bit_1() {
    // With bit 1 negotiated the same frame decodes; it does not fit the
    // star call it answers (phase): H1617, ABORT reason 3. An OPEN that
    // says another length is the other shape: the lengths differ, H1618.
    for (phase, h) in [
        (Phase::Partial, 1617),
        (Phase::Final, 1617),
        (Phase::Open, 1618),
    ] {
        let links = FakePeers::job(3);
        let forged = pipelined_payload(CollectiveHeader {
            operation: Operation::Reduce,
            element_type: 6,
            reduction: 1,
            phase,
            root: 0,
            sequence: 1,
        });
        links[1].set_send_hook(move |_, _| vec![forged.clone()]);
        let out = fake::run_links(links, |c| {
            let first = c.reduce(0, &[1.0f64, 2.0], Reduction::Sum).map(drop);
            (first, c.barrier())
        });
        let e0 = out[0].0.as_ref().unwrap_err();
        assert_eq!(code(e0), h, "{phase:?}: {e0}");
        let reason = AbortReason::CollectiveMismatch;
        ended_by(out[2].1.as_ref().unwrap_err(), 0, reason, h);
    }
}

#[test]
fn ranks_whose_lengths_differ_across_the_threshold_end_with_h1618() {
    // Rank 2 has a contribution below T (the star), the others above (the
    // pipeline): the collector sees the other shape and ends the job with
    // H1618, reason 3; nobody waits forever (protocol §14.3).
    for (n, odd) in [(3u32, 2u32), (4, 0), (5, 3)] {
        let started = Instant::now();
        let out = fake::run(n, move |c| {
            let len = if c.rank() == odd { 8 } else { T / 8 + 1 };
            let first = c.allreduce(&vec![1.0f64; len], Reduction::Sum).map(drop);
            (first, c.barrier())
        });
        assert!(started.elapsed() < Duration::from_secs(20));
        let e0 = out[0].0.as_ref().err().or(out[0].1.as_ref().err()).unwrap();
        if code(e0) != 1612 && code(e0) != 1613 {
            assert_eq!(code(e0), 1618, "{e0}");
        }
        let codes: Vec<u32> = out
            .iter()
            .map(|(a, b)| code(a.as_ref().err().or(b.as_ref().err()).unwrap()))
            .collect();
        assert!(codes.contains(&1618), "n={n}: {codes:?}");
        for (a, b) in &out {
            let e = a.as_ref().err().or(b.as_ref().err()).unwrap();
            if let Error::AbortedByPeer {
                code: c, reason, ..
            } = e
            {
                assert_eq!(
                    (*c, *reason),
                    (1618, AbortReason::CollectiveMismatch.code())
                );
            }
        }
    }
}

// ---- a relay lost mid-pipeline -----------------------------------------------

#[test]
fn a_relay_lost_mid_pipeline_ends_every_rank() {
    // Rank 2 of 4 takes two chunks and leaves without a word (its link is
    // dropped: a close without BYE); every other rank's call fails with
    // H1613 or H1612 at once, none waits for the silence limit.
    let n = 4;
    let mut links = FakePeers::job(n);
    for l in &mut links {
        l.set_silence(Duration::from_secs(30));
    }
    let started = Instant::now();
    let len = (4 << 20) / 8;
    let out = fake::run_links(links, move |c| {
        if c.rank() == 2 {
            c.link().recv_collective(1).unwrap();
            c.link().recv_collective(1).unwrap();
            return None;
        }
        let mine = vec![1.0f64; len];
        Some(c.allreduce(&mine, Reduction::Sum).map(drop))
    });
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    for (rank, r) in out.iter().enumerate() {
        if let Some(r) = r {
            let e = r.as_ref().expect_err("the job cannot complete");
            assert!(matches!(code(e), 1612 | 1613), "rank {rank}: {e}");
        }
    }
}
