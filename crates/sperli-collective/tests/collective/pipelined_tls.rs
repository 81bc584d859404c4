//! Pipelined collectives (HELLO feature bit 1, protocol §14) between real
//! ranks: every rank an [`Endpoint`] of a TLS 1.3 mesh on 127.0.0.0/8, one
//! thread each (the harness of [`crate::tls`]). A "star" job is the same
//! job with every rank announcing only bit 0 (`Settings::features`).
//! `SPERLI_SLOW_TESTS=1` adds 64 MiB at 5 and 8 ranks.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use sperli_collective::{Comm, Endpoint, Peers};
use sperli_transport::Settings;
use sperli_wire::abort::AbortReason;
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_PIPELINED, FEATURE_V1_CORE};
use sperli_wire::Error;

use crate::common::*;
use crate::pipelined_fake::{allowed, big_value, check_reducing, reducing, T};
use crate::tls::{finish, run_job_with, settings, tls_test, tls_test_within};

/// A test [`Peers`] implementation over a real [`Endpoint`]: counts the
/// pipelined frames (phase 2..=4) it sends, may claim other features than
/// the job negotiated (a rank that sends pipelined frames in a v1 job),
/// and may rewrite every chunk it sends (`hook(to, payload)` -> what to send).
struct Forger {
    ep: Endpoint,
    features: Option<u64>,
    pipelined: Cell<u64>,
    hook: RefCell<Option<Hook>>,
}

type Hook = Box<dyn FnMut(u32, Vec<u8>) -> Vec<Vec<u8>>>;

impl Forger {
    fn new(ep: Endpoint) -> Self {
        Self {
            ep,
            features: None,
            pipelined: Cell::new(0),
            hook: RefCell::new(None),
        }
    }

    fn forge(&self, hook: impl FnMut(u32, Vec<u8>) -> Vec<Vec<u8>> + 'static) {
        *self.hook.borrow_mut() = Some(Box::new(hook));
    }

    fn finish(self) {
        self.ep.finish().expect("finish");
    }
}

impl Peers for Forger {
    fn rank(&self) -> u32 {
        self.ep.rank()
    }
    fn size(&self) -> u32 {
        self.ep.size()
    }
    fn features(&self) -> u64 {
        self.features.unwrap_or_else(|| self.ep.features())
    }
    fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        self.send_collective_vec(to, payload.to_vec())
    }
    fn send_collective_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        if payload[3] >= 2 {
            self.pipelined.set(self.pipelined.get() + 1);
        }
        let out = match self.hook.borrow_mut().as_mut() {
            Some(h) => h(to, payload),
            None => vec![payload],
        };
        for p in out {
            self.ep.send_collective_vec(to, p)?;
        }
        Ok(())
    }
    fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
        self.ep.recv_collective(from)
    }
    fn abort(&self, reason: AbortReason, code: u32, message: &str) {
        self.ep.abort(reason, code, message)
    }
    fn take_buffer(&self, len: usize) -> Vec<u8> {
        self.ep.take_buffer(len)
    }
    fn recycle(&self, buf: Vec<u8>) {
        self.ep.recycle(buf)
    }
}

/// Settings of a rank that announces `features`.
fn announcing(features: u64) -> Settings {
    Settings {
        features,
        ..settings()
    }
}

/// Elements of `w` bytes for a call of at least `bytes`, divisible by `n`.
fn elems(bytes: usize, w: usize, n: u32) -> usize {
    (bytes / w).div_ceil(n as usize) * n as usize
}

/// Every allowed (type, reduction) pair through allreduce, reduce (twice)
/// and reduce_scatter, `bytes` per rank; one boxed result list per pair.
fn every_pair<L: Peers>(c: &mut Comm<L>, bytes: usize, salt: u64) -> Vec<Box<dyn Any + Send>> {
    let n = c.size();
    let mut out: Vec<Box<dyn Any + Send>> = Vec::new();
    for (t, r) in allowed() {
        macro_rules! go {
            ($ty:ty) => {{
                let len = elems(bytes, std::mem::size_of::<$ty>(), n);
                out.push(Box::new(reducing::<$ty, _>(c, salt, len, r, None)));
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
    out
}

type RankResults = (Vec<Box<dyn Any + Send>>, u64);

/// [`every_pair`] in a TLS job of `n` ranks where rank r announces
/// `features(r)`; returns each rank's results and pipelined frame count.
fn tls_every_pair(n: u32, bytes: usize, salt: u64, features: fn(u32) -> u64) -> Vec<RankResults> {
    run_job_with(
        n,
        move |r| announcing(features(r)),
        Forger::new,
        move |mut c| {
            let got = every_pair(&mut c, bytes, salt);
            let p = c.link().pipelined.get();
            c.into_link().finish();
            (got, p)
        },
    )
}

fn check_every_pair(n: u32, bytes: usize, salt: u64, pipe: &[RankResults], star: &[RankResults]) {
    for (i, (t, r)) in allowed().into_iter().enumerate() {
        macro_rules! go {
            ($ty:ty) => {{
                let len = elems(bytes, std::mem::size_of::<$ty>(), n);
                let pick = |runs: &[RankResults]| -> Vec<Vec<Option<Vec<$ty>>>> {
                    runs.iter()
                        .map(|(res, _)| {
                            res[i]
                                .downcast_ref::<Vec<Option<Vec<$ty>>>>()
                                .expect("the pair's type")
                                .clone()
                        })
                        .collect()
                };
                check_reducing::<$ty>(n, salt, len, r, &pick(pipe), &pick(star));
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

fn every_pair_over_tls(n: u32) {
    tls_test_within(Duration::from_secs(240), move || {
        let (bytes, salt) = (T + 8, 500 + u64::from(n));
        let pipe = tls_every_pair(n, bytes, salt, |_| FEATURES_IMPLEMENTED);
        let star = tls_every_pair(n, bytes, salt, |_| FEATURE_V1_CORE);
        check_every_pair(n, bytes, salt, &pipe, &star);
        let sent: u64 = pipe.iter().map(|r| r.1).sum();
        assert_eq!(sent > 0, n >= 2, "n={n}: {sent} pipelined frames");
        assert!(
            star.iter().all(|r| r.1 == 0),
            "the v1 job sent pipelined frames"
        );
    });
}

#[test]
fn every_type_and_reduction_over_tls_at_1_rank() {
    every_pair_over_tls(1);
}

#[test]
fn every_type_and_reduction_over_tls_at_2_ranks() {
    every_pair_over_tls(2);
}

#[test]
fn every_type_and_reduction_over_tls_at_3_ranks() {
    every_pair_over_tls(3);
}

#[test]
fn every_type_and_reduction_over_tls_at_5_ranks() {
    every_pair_over_tls(5);
}

#[test]
fn every_type_and_reduction_over_tls_at_8_ranks() {
    every_pair_over_tls(8);
}

/// allreduce, reduce (to the last rank) and bcast_counted of
/// `len` f64 at `n` ranks, pipelined and star: the same bits.
fn large_over_tls(n: u32, len: usize) {
    let job = |features: u64| {
        run_job_with(
            n,
            move |_| announcing(features),
            |ep| ep,
            move |c| {
                let me = c.rank();
                let mine: Vec<f64> = (0..len).map(|i| big_value(me, i)).collect();
                let mut out = vec![0f64; len];
                c.allreduce_into(&mine, &mut out, Reduction::Sum).unwrap();
                let b = c.reduce(n - 1, &mine, Reduction::Sum).unwrap();
                let mut v = if me == 0 { mine } else { vec![0.0; len] };
                c.bcast_into(0, &mut v).unwrap();
                let bits = |x: &[f64]| x.iter().map(|e| e.to_bits()).collect::<Vec<_>>();
                let r = (bits(&out), b.map(|x| bits(&x)), bits(&v), c.sequence());
                finish(c);
                r
            },
        )
    };
    let pipe = job(FEATURES_IMPLEMENTED);
    let star = job(FEATURE_V1_CORE);
    let want: Vec<u64> = (0..len)
        .map(|i| {
            (1..n)
                .fold(big_value(0, i), |acc, r| acc + big_value(r, i))
                .to_bits()
        })
        .collect();
    let sent: Vec<u64> = (0..len).map(|i| big_value(0, i).to_bits()).collect();
    for (rank, (p, s)) in pipe.iter().zip(&star).enumerate() {
        assert!(p.0 == want && s.0 == want, "allreduce n={n} rank {rank}");
        if rank == n as usize - 1 {
            assert!(
                p.1.as_ref() == Some(&want) && s.1.as_ref() == Some(&want),
                "reduce"
            );
        }
        assert!(p.2 == sent && s.2 == sent, "bcast n={n} rank {rank}");
        if n >= 2 {
            assert_eq!(p.3, 3, "one call each with bit 1");
        }
    }
}

#[test]
fn sixteen_mib_plus_one_element_over_tls_at_2_and_3_ranks() {
    tls_test_within(Duration::from_secs(240), || {
        for n in [2, 3] {
            large_over_tls(n, (16 << 20) / 8 + 1);
        }
    });
}

#[test]
fn sixty_four_mib_over_tls_at_3_ranks() {
    tls_test_within(Duration::from_secs(300), || {
        large_over_tls(3, (64 << 20) / 8)
    });
}

#[test]
fn sixty_four_mib_over_tls_at_5_and_8_ranks_slow() {
    if std::env::var(sperli_wire::env::SLOW_TESTS).as_deref() != Ok("1") {
        eprintln!("skipped: set SPERLI_SLOW_TESTS=1");
        return;
    }
    tls_test_within(Duration::from_secs(900), || {
        for n in [5, 8] {
            large_over_tls(n, (64 << 20) / 8);
            large_over_tls(n, (16 << 20) / 8 + 1);
        }
    });
}

#[test]
fn chunk_edges_over_tls_at_every_rank_count() {
    tls_test_within(Duration::from_secs(240), || {
        let l = 2 * T;
        for n in [1u32, 2, 3, 5, 8] {
            let cases = [
                (0usize, None),
                (8, None),
                (l - 8, Some(l)),
                (l, Some(l)),
                (l + 8, Some(l)),
                (T - 8, None),
                (T, None),
                (T + 8, None),
            ];
            let job = |features: u64| {
                run_job_with(
                    n,
                    move |_| announcing(features),
                    Forger::new,
                    move |mut c| {
                        let r: Vec<_> = cases
                            .iter()
                            .map(|&(bytes, chunk)| {
                                let len = elems(bytes, 8, n);
                                reducing::<f64, _>(&mut c, bytes as u64, len, Reduction::Sum, chunk)
                            })
                            .collect();
                        let p = c.link().pipelined.get();
                        c.into_link().finish();
                        (r, p)
                    },
                )
            };
            let pipe = job(FEATURES_IMPLEMENTED);
            let star = job(FEATURE_V1_CORE);
            for (k, &(bytes, _)) in cases.iter().enumerate() {
                let p: Vec<_> = pipe.iter().map(|r| r.0[k].clone()).collect();
                let s: Vec<_> = star.iter().map(|r| r.0[k].clone()).collect();
                check_reducing::<f64>(n, bytes as u64, elems(bytes, 8, n), Reduction::Sum, &p, &s);
            }
            assert_eq!(pipe.iter().any(|r| r.1 > 0), n >= 2);
        }
    });
}

// ---- a rank that clears bit 1: the star ------------------------------------

#[test]
fn a_tls_job_with_a_rank_that_clears_bit_1_uses_the_star() {
    tls_test(|| {
        for (n, odd) in [(2u32, 1u32), (4, 0), (5, 3)] {
            let len = (T / 8 + 1) * n as usize;
            let out = run_job_with(
                n,
                move |r| {
                    announcing(if r == odd {
                        FEATURE_V1_CORE
                    } else {
                        FEATURES_IMPLEMENTED
                    })
                },
                Forger::new,
                move |c| {
                    assert_eq!(c.features() & FEATURE_PIPELINED, 0);
                    let mine = data_of::<f64>(c.rank(), 21, len);
                    let a = c.allreduce(&mine, Reduction::Sum).unwrap();
                    let mut v = if c.rank() == 0 { mine } else { Vec::new() };
                    c.bcast_counted(0, &mut v).unwrap();
                    let g = c.allgather(&v[..len / n as usize]).unwrap();
                    let p = c.link().pipelined.get();
                    c.into_link().finish();
                    (a, v, g, p)
                },
            );
            let want = reference::<f64>(n, 21, len, Reduction::Sum);
            for (a, v, g, p) in &out {
                assert_eq!(
                    *p, 0,
                    "n={n}: a pipelined frame in a job with a v1-only rank"
                );
                same_bits(a, &want, Reduction::Sum, "allreduce");
                same_bits(v, &data_of::<f64>(0, 21, len), Reduction::Sum, "bcast");
                assert_eq!(g.len(), len);
            }
        }
    });
}

// ---- ranks that enter late -------------------------------------------------

#[test]
fn tls_ranks_enter_late_in_different_orders() {
    tls_test(|| {
        let n = 4u32;
        let len = T / 8 * 3 + 1;
        // Each rank enters every call once the rank before it in the
        // order waits in that call (or is done with it); the bcast in the
        // reverse order.
        for key in [|r: u32| u64::from(r), |r: u32| u64::from(3 - r)] {
            let (order, reverse) = (order_by(0..n, key), order_by(0..n, |r| key(n - 1 - r)));
            let turns = Turns::new();
            let watch = turns.clone();
            let out = run_job_with(
                n,
                |_| settings(),
                move |ep| Watched::new(Forger::new(ep), watch.clone()),
                move |c| {
                    let me = c.rank();
                    let mine = data_of::<f64>(me, 31, len);
                    turns.take(0, &order, me);
                    let a = c.allreduce(&mine, Reduction::Sum).unwrap();
                    turns.done(0, me);
                    turns.take(1, &reverse, me);
                    let mut v = if me == 1 { mine.clone() } else { Vec::new() };
                    c.bcast(1, &mut v).unwrap();
                    turns.done(1, me);
                    turns.take(2, &order, me);
                    let r = c.reduce(2, &mine, Reduction::Prod).unwrap();
                    turns.done(2, me);
                    let p = c.link().inner.pipelined.get();
                    c.into_link().inner.finish();
                    (a, v, r, p)
                },
            );
            let sum = reference::<f64>(n, 31, len, Reduction::Sum);
            let prod = reference::<f64>(n, 31, len, Reduction::Prod);
            for (rank, (a, v, r, p)) in out.iter().enumerate() {
                assert!(*p > 0 || rank == n as usize - 1);
                same_bits(a, &sum, Reduction::Sum, "late allreduce");
                same_bits(v, &data_of::<f64>(1, 31, len), Reduction::Sum, "late bcast");
                if rank == 2 {
                    same_bits(r.as_ref().unwrap(), &prod, Reduction::Prod, "late reduce");
                }
            }
        }
    });
}

// ---- hostile peers ---------------------------------------------------------

/// What a hostile rank does with its k-th PARTIAL chunk to rank 1 (with a
/// slot to hold one back): the payloads to send instead.
type ChunkForgery = fn(usize, Vec<u8>, &mut Option<Vec<u8>>) -> Vec<Vec<u8>>;

/// A 3-rank job in which rank 0's PARTIAL chunks to rank 1 go through
/// `hook(k, payload)` (k counts them from 0); rank 1 must end the job with
/// `h` and `reason`, the others with its ABORT or a close, all promptly.
fn hostile_over_tls(hook: ChunkForgery, h: u32, reason: AbortReason) {
    tls_test(move || {
        let started = Instant::now();
        let out = run_job_with(
            3,
            |_| settings(),
            Forger::new,
            move |c| {
                // Every rank is set up before the first forged frame: a
                // frame that breaks a rule of every feature set is rejected
                // by the transport as it arrives (H1610 too), which must
                // not hit a rank still in set-up. (It may hit rank 1 while
                // it still takes this barrier's frame.)
                let pre = c.barrier();
                if c.rank() == 0 {
                    let (mut k, mut held) = (0usize, None);
                    c.link().forge(move |to, p| {
                        if to == 1 && p[3] == 3 {
                            k += 1;
                            hook(k - 1, p, &mut held)
                        } else {
                            vec![p]
                        }
                    });
                }
                c.set_pipeline_chunk(Some(T));
                let mine = vec![1.5f64; (3 * T + T / 2) / 8];
                let first = pre.and_then(|()| c.allreduce(&mine, Reduction::Sum).map(drop));
                let later = c.barrier();
                (first, later)
            },
        );
        assert!(started.elapsed() < Duration::from_secs(30));
        let e1 = out[1].0.as_ref().expect_err("rank 1 rejects the frame");
        assert_eq!(code(e1), h, "{e1}");
        let own = matches!(e1, Error::FrameRejected(_) | Error::CollectiveMismatch(_));
        assert!(own, "rank 1 detects it itself: {e1}");
        for (rank, (first, later)) in out.iter().enumerate() {
            if rank == 1 {
                continue;
            }
            for e in [first.as_ref().err(), later.as_ref().err()]
                .into_iter()
                .flatten()
            {
                match e {
                    Error::AbortedByPeer {
                        from,
                        reason: r,
                        code: c,
                        ..
                    } => {
                        assert_eq!((*from, *r, *c), (1, reason.code(), h), "{e}")
                    }
                    Error::PeerLost { .. } => {}
                    other => panic!("rank {rank}: {other}"),
                }
            }
            assert!(later.is_err(), "rank {rank}: the job went on");
        }
    });
}

fn set_u64(p: &mut [u8], at: usize, v: u64) {
    p[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get_u64(p: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(p[at..at + 8].try_into().unwrap())
}

#[test]
fn tls_a_chunk_out_of_order_is_h1617() {
    hostile_over_tls(
        |k, p, held| match k {
            0 => {
                *held = Some(p);
                vec![]
            }
            1 => vec![p, held.take().unwrap()],
            _ => vec![p],
        },
        1617,
        AbortReason::CollectiveMismatch,
    );
}

#[test]
fn tls_a_chunk_past_the_end_is_h1610() {
    hostile_over_tls(
        |k, mut p, _| {
            if k == 1 {
                let len = (p.len() - 32) as u64;
                let total = get_u64(&p, 24);
                set_u64(&mut p, 16, total - len + 8);
            }
            vec![p]
        },
        1610,
        AbortReason::RejectedFrame,
    );
}

#[test]
fn tls_a_changed_total_is_h1617() {
    hostile_over_tls(
        |k, mut p, _| {
            if k == 2 {
                let total = get_u64(&p, 24);
                set_u64(&mut p, 24, total + 8);
            }
            vec![p]
        },
        1617,
        AbortReason::CollectiveMismatch,
    );
}

#[test]
fn tls_a_pipelined_frame_without_negotiation_is_h1610() {
    // A v1 job (every rank announces bit 0 only) in which rank 1 believes
    // bit 1 was negotiated: it starts the pipelined allreduce with an OPEN
    // to rank 0, which takes it by the v1 rules: H1610, ABORT reason 7.
    // Rank 1 believes bits 0 and 1 only: with bit 7 too it would send a
    // PARTIAL chunk to rank 2 (the owner fold, protocol §20.3), which may
    // reject it and end the job before rank 0 takes the OPEN.
    tls_test(|| {
        let out = run_job_with(
            3,
            |_| announcing(FEATURE_V1_CORE),
            |ep| {
                let mut f = Forger::new(ep);
                if f.ep.rank() == 1 {
                    f.features = Some(FEATURE_V1_CORE | FEATURE_PIPELINED);
                }
                f
            },
            |c| {
                // Frames are judged on arrival (protocol §6.2 checks 12 and
                // 13): a barrier first, so the OPEN reaches rank 0 after its
                // set-up ended and fails its call, not its set-up.
                // (The barrier itself may already see the ABORT that follows
                // it on a rank other than 1.)
                let first = c
                    .barrier()
                    .and_then(|()| c.allreduce(&vec![2.0f64; T / 8], Reduction::Sum).map(drop));
                (first, c.barrier())
            },
        );
        let e0 = out[0].0.as_ref().expect_err("rank 0 rejects the OPEN");
        assert_eq!(code(e0), 1610, "{e0}");
        assert!(matches!(e0, Error::FrameRejected(_)), "{e0}");
        for e in [out[2].0.as_ref().err(), out[2].1.as_ref().err()]
            .into_iter()
            .flatten()
        {
            if let Error::AbortedByPeer {
                from, reason, code, ..
            } = e
            {
                assert_eq!((*from, *reason, *code), (0, 7, 1610));
            }
        }
        assert!(out[2].1.is_err());
    });
}
