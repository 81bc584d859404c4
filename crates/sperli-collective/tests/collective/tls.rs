//! The collectives between real ranks: every rank is an
//! [`Endpoint`] of a mutually authenticated TLS 1.3 mesh on 127.0.0.1,
//! 127.0.0.2, ... (`JobPlan::localhost_bound`, nothing outside 127.0.0.0/8), one
//! thread per rank in this process.
//!
//! Every test runs under a watchdog ([`tls_test`]): it fails after 60 s
//! instead of hanging. A job is set up once per test and reused for many
//! calls. Misbehaving ranks wrap their endpoint in [`Rogue`], a test
//! [`Peers`] implementation that forges, truncates or lengthens COLLECTIVE
//! payloads before they are encrypted and sent.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use sperli_collective::{Comm, Endpoint, Peers};
use sperli_tls::job_plan::JobPlan;
use sperli_transport::{ErrorMode, Settings};
use sperli_wire::abort::AbortReason;
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::error::{ArgumentError, FrameError, MismatchError};
use sperli_wire::limits::MAX_COLLECTIVE_DATA;
use sperli_wire::Error;

use crate::common::*;

const SIZES: [u32; 4] = [1, 2, 3, 8];

/// No test may take longer than this.
const WATCHDOG: Duration = Duration::from_secs(60);

/// After a failure every further call must return within this.
const PROMPT: Duration = Duration::from_secs(3);

// ---- harness ---------------------------------------------------------------

pub(crate) fn settings() -> Settings {
    Settings {
        // A set-up failure must not eat the watchdog's budget.
        setup_window: Duration::from_secs(20),
        // The ranks are threads of this test process: errors are returned.
        errors: ErrorMode::Return,
        ..Settings::default()
    }
}

/// Runs `f` on its own thread; fails the test if it takes longer than
/// [`WATCHDOG`] (the rank threads of a hung job are left behind).
pub(crate) fn tls_test<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tls_test_within(WATCHDOG, f)
}

/// As [`tls_test`] with another watchdog limit (the 64 MiB runs).
pub(crate) fn tls_test_within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let h = thread::Builder::new()
        .name("tls-test".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("spawn the test thread");
    match rx.recv_timeout(limit) {
        Ok(v) => {
            let _ = h.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!("the test thread ended without a result"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("watchdog: the test did not finish within {limit:?}")
        }
    }
}

/// Plans a job of `size` ranks on loopback, starts every rank's
/// [`Endpoint`] on its own thread, wraps it with `wrap` and runs `body` on
/// its communicator; returns the results in rank order. A panic on any
/// rank is re-raised (after every rank thread ended).
pub(crate) fn run_job<L: Peers, T: Send + 'static>(
    size: u32,
    wrap: impl Fn(Endpoint) -> L + Send + Sync + 'static,
    body: impl Fn(Comm<L>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    run_job_with(size, |_| settings(), wrap, body)
}

/// As [`run_job`] with rank r's transport settings from `settings_of(r)`
/// (e.g. a rank that clears HELLO feature bit 1).
pub(crate) fn run_job_with<L: Peers, T: Send + 'static>(
    size: u32,
    settings_of: impl Fn(u32) -> Settings,
    wrap: impl Fn(Endpoint) -> L + Send + Sync + 'static,
    body: impl Fn(Comm<L>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let plan = JobPlan::localhost_bound(size).expect("plan a loopback job");
    for h in &plan.hosts {
        let ip: Ipv4Addr = h.host.parse().expect("an IPv4 literal");
        assert!(ip.is_loopback(), "{ip} is outside 127.0.0.0/8");
    }
    let wrap = Arc::new(wrap);
    let body = Arc::new(body);
    let handles: Vec<_> = (0..size)
        .map(|r| {
            let desc = plan.description(r);
            let (wrap, body) = (wrap.clone(), body.clone());
            let mut settings = settings_of(r);
            // The port stays bound from the plan to the rank's start.
            settings.listener = plan.take_listener(r);
            thread::Builder::new()
                .name(format!("tls-rank-{r}"))
                .spawn(move || {
                    let ep = Endpoint::start(&desc, settings)
                        .unwrap_or_else(|e| panic!("rank {r}: set-up failed: {e}"));
                    body(Comm::new(wrap(ep)))
                })
                .expect("spawn a rank thread")
        })
        .collect();
    let mut panic = None;
    let out: Vec<Option<T>> = handles
        .into_iter()
        .map(|h| match h.join() {
            Ok(v) => Some(v),
            Err(p) => {
                panic.get_or_insert(p);
                None
            }
        })
        .collect();
    if let Some(p) = panic {
        std::panic::resume_unwind(p);
    }
    out.into_iter().map(|v| v.expect("no panic")).collect()
}

/// A TLS job of `announced.len()` ranks in which rank r announces the
/// HELLO feature bits `announced[r]` (with the [`settings`] of every test
/// job); returns `body`'s value of each rank, in rank order.
pub(crate) fn run_job_announcing<T: Send + 'static>(
    announced: &[u64],
    body: impl Fn(Comm<Endpoint>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let announced = announced.to_vec();
    let size = announced.len() as u32;
    let settings_of = move |r: u32| Settings {
        features: announced[r as usize],
        ..settings()
    };
    run_job_with(size, settings_of, |ep| ep, body)
}

/// The normal end of a rank: BYE to every peer; must succeed.
pub(crate) fn finish(c: Comm<Endpoint>) {
    let r = c.rank();
    c.into_link()
        .finish()
        .unwrap_or_else(|e| panic!("rank {r}: finish: {e}"));
}

type Hook = Box<dyn FnMut(u32, Vec<u8>) -> Vec<u8>>;

/// A test [`Peers`] implementation over a real [`Endpoint`]: forwards
/// everything, counts the COLLECTIVE payloads it sends and takes, and, once
/// [`Rogue::forge`] set a hook, lets the hook rewrite every payload (header
/// and data) before the endpoint encrypts and sends it.
struct Rogue {
    ep: Endpoint,
    hook: RefCell<Option<Hook>>,
    sent: Cell<u64>,
    taken: Cell<u64>,
}

impl Rogue {
    fn new(ep: Endpoint) -> Self {
        Self {
            ep,
            hook: RefCell::new(None),
            sent: Cell::new(0),
            taken: Cell::new(0),
        }
    }

    /// From now on every payload goes through `hook(to, payload)`.
    fn forge(&self, hook: impl FnMut(u32, Vec<u8>) -> Vec<u8> + 'static) {
        *self.hook.borrow_mut() = Some(Box::new(hook));
    }

    /// COLLECTIVE payloads sent and taken so far.
    fn traffic(&self) -> (u64, u64) {
        (self.sent.get(), self.taken.get())
    }
}

impl Peers for Rogue {
    fn rank(&self) -> u32 {
        self.ep.rank()
    }
    fn size(&self) -> u32 {
        self.ep.size()
    }
    fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        self.sent.set(self.sent.get() + 1);
        match self.hook.borrow_mut().as_mut() {
            Some(h) => {
                let p = h(to, payload.to_vec());
                self.ep.send_collective(to, &p)
            }
            None => self.ep.send_collective(to, payload),
        }
    }
    fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
        self.taken.set(self.taken.get() + 1);
        self.ep.recv_collective(from)
    }
    fn abort(&self, reason: AbortReason, code: u32, message: &str) {
        self.ep.abort(reason, code, message)
    }
    // `features()` stays the trait's default, v1 only: every call is the
    // v1 star whose frames these tests forge (the pipelined frames are
    // forged in pipelined_tls.rs).
}

/// Overwrites bytes `at..` of every payload with `value`.
fn overwrite(at: usize, value: &'static [u8]) -> impl FnMut(u32, Vec<u8>) -> Vec<u8> {
    move |_, mut p| {
        p[at..at + value.len()].copy_from_slice(value);
        p
    }
}

/// Bit patterns of a result, for comparing runs.
fn bits<T: Ref>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.bits()).collect()
}

/// Exactly the same bits (data movement: no NaN freedom).
fn exact<T: Ref>(got: &[T], want: &[T], what: &str) {
    assert_eq!(bits(got), bits(want), "{what}: got {got:?}, want {want:?}");
}

// ---- 1. every collective at 1, 2, 3 and 8 ranks ----------------------------

/// What one run of [`suite`] returns on one rank: the bits of every result
/// in call order, and apart the bits of every allreduce-family result
/// (which must be the same on every rank).
#[derive(Debug, Default, PartialEq)]
struct Transcript {
    all: Vec<Vec<u64>>,
    every: Vec<Vec<u64>>,
}

impl Transcript {
    fn rank_only<T: Ref>(&mut self, v: &[T]) {
        self.every.push(bits(v));
    }
    fn shared<T: Ref>(&mut self, v: &[T]) {
        self.every.push(bits(v));
        self.all.push(bits(v));
    }
}

/// Every allowed reduction of `T` through every reducing call, against
/// the reference fold (ascending rank order, left operand first).
fn reductions<T: Ref>(c: &mut Comm<Endpoint>, t: &mut Transcript) {
    let (me, n) = (c.rank(), c.size());
    let et = T::ELEMENT_TYPE;
    for r in Reduction::V1 {
        if r.check(et).is_err() {
            continue;
        }
        let salt = u64::from(r.code()) * 1000 + u64::from(et.code()) * 100 + u64::from(n);
        let len = 13;
        let root = (u32::from(r.code()) + u32::from(et.code())) % n;
        let is_root = me == root;
        let mine = data_of::<T>(me, salt, len);
        let want = reference::<T>(n, salt, len, r);
        let what = |call: &str| format!("{call} {et} {r} size {n} rank {me} root {root}");

        let all = c.allreduce(&mine, r).unwrap();
        same_bits(&all, &want, r, &what("allreduce"));
        t.shared(&all);

        let red = c.reduce(root, &mine, r).unwrap();
        assert_eq!(red.is_some(), is_root, "{}", what("reduce"));
        if let Some(v) = red {
            same_bits(&v, &want, r, &what("reduce"));
            t.rank_only(&v);
        }

        let mut into = vec![T::default(); len];
        c.allreduce_into(&mine, &mut into, r).unwrap();
        same_bits(&into, &want, r, &what("allreduce_into"));
        t.shared(&into);

        let mut out = vec![T::default(); if is_root { len } else { 0 }];
        let at_root = c.reduce_into(root, &mine, &mut out, r).unwrap();
        assert_eq!(at_root, is_root, "{}", what("reduce_into"));
        if is_root {
            same_bits(&out, &want, r, &what("reduce_into"));
            t.rank_only(&out);
        }

        let s = c.allreduce_scalar(mine[0], r).unwrap();
        same_bits(&[s], &want[..1], r, &what("allreduce_scalar"));
        t.shared(&[s]);

        let s = c.reduce_scalar(root, mine[1], r).unwrap();
        assert_eq!(s.is_some(), is_root, "{}", what("reduce_scalar"));
        if let Some(s) = s {
            same_bits(&[s], &want[1..2], r, &what("reduce_scalar"));
            t.rank_only(&[s]);
        }

        // The raw byte calls with wire codes.
        let bytes = T::to_le_vec(&mine);
        let all = T::vec_from_le(&c.allreduce_bytes(&bytes, et.code(), r.code()).unwrap());
        same_bits(&all, &want, r, &what("allreduce_bytes"));
        t.shared(&all);
        let red = c.reduce_bytes(root, &bytes, et.code(), r.code()).unwrap();
        assert_eq!(red.is_some(), is_root, "{}", what("reduce_bytes"));
        if let Some(v) = red {
            let v = T::vec_from_le(&v);
            same_bits(&v, &want, r, &what("reduce_bytes"));
            t.rank_only(&v);
        }

        // reduce_scatter: block `me` of the fold of 3 * size elements.
        let mine3 = data_of::<T>(me, salt + 1, 3 * n as usize);
        let want3 = reference::<T>(n, salt + 1, 3 * n as usize, r);
        let m = me as usize;
        let rs = c.reduce_scatter(&mine3, r).unwrap();
        same_bits(&rs, &want3[3 * m..3 * m + 3], r, &what("reduce_scatter"));
        t.rank_only(&rs);

        // Chunked: 13 elements in 4 (4 calls) and in 5 (3 calls).
        let ch = c.allreduce_chunked(&mine, r, 4).unwrap();
        same_bits(&ch, &want, r, &what("allreduce_chunked"));
        t.shared(&ch);
        let ch = c.reduce_chunked(root, &mine, r, 5).unwrap();
        assert_eq!(ch.is_some(), is_root, "{}", what("reduce_chunked"));
        if let Some(v) = ch {
            same_bits(&v, &want, r, &what("reduce_chunked"));
            t.rank_only(&v);
        }
    }
}

/// v1 calls of one [`reductions`] pass per allowed pair:
/// 8 single calls + reduce_scatter (2) + chunked (4 + 3).
const CALLS_PER_PAIR: u64 = 8 + 2 + 4 + 3;

/// Every data-moving call with `T`, root chosen by the type.
fn movement<T: Ref>(c: &mut Comm<Endpoint>, t: &mut Transcript) {
    let (me, n) = (c.rank(), c.size());
    let et = T::ELEMENT_TYPE;
    let salt = 77 + u64::from(et.code()) * 10;
    let root = (u32::from(et.code()) + 1) % n;
    let is_root = me == root;
    let (m, nn) = (me as usize, n as usize);
    let what = |call: &str| format!("{call} {et} size {n} rank {me} root {root}");

    // bcast: receivers start with other data of another length.
    let root_data = data_of::<T>(root, salt, 5);
    let mut v = if is_root {
        root_data.clone()
    } else {
        data_of::<T>(me, salt + 9, 2)
    };
    c.bcast(root, &mut v).unwrap();
    exact(&v, &root_data, &what("bcast"));
    t.shared(&v);
    let mut e: Vec<T> = if is_root {
        Vec::new()
    } else {
        data_of::<T>(me, salt, 1)
    };
    c.bcast(root, &mut e).unwrap();
    assert!(e.is_empty(), "{}", what("empty bcast"));
    let mut b = if is_root {
        root_data.clone()
    } else {
        vec![T::default(); 5]
    };
    c.bcast_into(root, &mut b).unwrap();
    exact(&b, &root_data, &what("bcast_into"));
    t.shared(&b);
    let x = c.bcast_scalar(root, data_of::<T>(me, salt, 1)[0]).unwrap();
    exact(&[x], &root_data[..1], &what("bcast_scalar"));
    t.shared(&[x]);
    let mut l = if is_root {
        data_of::<T>(root, salt + 1, 11)
    } else {
        Vec::new()
    };
    c.bcast_chunked(root, &mut l, 4).unwrap(); // 1 + 3 calls
    exact(
        &l,
        &data_of::<T>(root, salt + 1, 11),
        &what("bcast_chunked"),
    );
    t.shared(&l);

    // gather: blocks in rank order, the root's own at its place.
    let g = c.gather(root, &data_of::<T>(me, salt + 2, 3)).unwrap();
    assert_eq!(g.is_some(), is_root, "{}", what("gather"));
    if let Some(g) = g {
        let want: Vec<T> = (0..n).flat_map(|r| data_of::<T>(r, salt + 2, 3)).collect();
        exact(&g, &want, &what("gather"));
        t.rank_only(&g);
    }

    // scatter and scatter_into: rank i gets block i.
    let all = data_of::<T>(root, salt + 3, 2 * nn);
    let s = c.scatter(root, is_root.then_some(&all[..])).unwrap();
    exact(&s, &all[2 * m..2 * m + 2], &what("scatter"));
    t.rank_only(&s);
    let mut into = vec![T::default(); 2];
    c.scatter_into(root, is_root.then_some(&all[..]), &mut into)
        .unwrap();
    exact(&into, &all[2 * m..2 * m + 2], &what("scatter_into"));
    t.rank_only(&into);
    let s: Vec<T> = c.scatter(root, Some(&[][..])).unwrap();
    assert!(s.is_empty(), "{}", what("empty scatter"));

    // allgather (2 calls), alltoall (size calls).
    let ag = c.allgather(&data_of::<T>(me, salt + 4, 2)).unwrap();
    let want: Vec<T> = (0..n).flat_map(|r| data_of::<T>(r, salt + 4, 2)).collect();
    exact(&ag, &want, &what("allgather"));
    t.shared(&ag);
    let at = c.alltoall(&data_of::<T>(me, salt + 5, 2 * nn)).unwrap();
    let want: Vec<T> = (0..n)
        .flat_map(|k| data_of::<T>(k, salt + 5, 2 * nn)[2 * m..2 * m + 2].to_vec())
        .collect();
    exact(&at, &want, &what("alltoall"));
    t.rank_only(&at);
}

/// v1 calls of one [`movement`] pass: bcast 4 + bcast_chunked 4 + gather
/// + scatter 3 + allgather 2 + alltoall size.
fn calls_per_movement(size: u32) -> u64 {
    4 + 4 + 1 + 3 + 2 + u64::from(size)
}

/// Payloads above the transport's 64 KiB eager limit (the send waits until
/// the frame is written into TLS).
fn big(c: &mut Comm<Endpoint>, t: &mut Transcript) {
    let (me, n) = (c.rank(), c.size());
    let root = n - 1;
    let len = 20_000; // 160 KB of f64 per rank
    let mine = data_of::<f64>(me, 4242, len);
    let want = reference::<f64>(n, 4242, len, Reduction::Sum);
    let all = c.allreduce(&mine, Reduction::Sum).unwrap();
    same_bits(&all, &want, Reduction::Sum, "big allreduce");
    t.shared(&all);
    let g = c.gather(root, &data_of::<u32>(me, 99, len)).unwrap();
    if let Some(g) = g {
        let want: Vec<u32> = (0..n).flat_map(|r| data_of::<u32>(r, 99, len)).collect();
        exact(&g, &want, "big gather");
    }
    let blocks = data_of::<i64>(root, 98, len * n as usize);
    let s = c
        .scatter(root, (me == root).then_some(&blocks[..]))
        .unwrap();
    let m = me as usize;
    exact(&s, &blocks[m * len..(m + 1) * len], "big scatter");
    let mut v = if me == 0 {
        data_of::<u8>(0, 97, 100_000)
    } else {
        Vec::new()
    };
    c.bcast(0, &mut v).unwrap();
    exact(&v, &data_of::<u8>(0, 97, 100_000), "big bcast");
}

const BIG_CALLS: u64 = 4;

/// One run of every collective on one rank.
fn suite(c: &mut Comm<Endpoint>) -> Transcript {
    let mut t = Transcript::default();
    c.barrier().unwrap();
    reductions::<u8>(c, &mut t);
    reductions::<i32>(c, &mut t);
    reductions::<u32>(c, &mut t);
    reductions::<i64>(c, &mut t);
    reductions::<u64>(c, &mut t);
    reductions::<f32>(c, &mut t);
    reductions::<f64>(c, &mut t);
    movement::<u8>(c, &mut t);
    movement::<i32>(c, &mut t);
    movement::<u32>(c, &mut t);
    movement::<i64>(c, &mut t);
    movement::<u64>(c, &mut t);
    movement::<f32>(c, &mut t);
    movement::<f64>(c, &mut t);
    big(c, &mut t);
    c.barrier().unwrap();
    t
}

fn every_collective(size: u32) {
    tls_test(move || {
        let out = run_job(
            size,
            |ep| ep,
            |mut c| {
                let first = suite(&mut c);
                let second = suite(&mut c);
                let seq = c.sequence();
                finish(c);
                (first, second, seq)
            },
        );
        // 51 allowed pairs (protocol §8.3), 7 types, 2 barriers.
        let per_run = 51 * CALLS_PER_PAIR + 7 * calls_per_movement(size) + BIG_CALLS + 2;
        for (rank, (first, second, seq)) in out.iter().enumerate() {
            assert_eq!(*seq, 2 * per_run, "rank {rank}: sequence");
            assert!(first == second, "rank {rank}: the two runs differ");
            assert_eq!(first.all, out[0].0.all, "rank {rank}: allreduce bits");
        }
    });
}

#[test]
fn every_collective_type_and_reduction_at_1_rank() {
    every_collective(1);
}

#[test]
fn every_collective_type_and_reduction_at_2_ranks() {
    every_collective(2);
}

#[test]
fn every_collective_type_and_reduction_at_3_ranks() {
    every_collective(3);
}

#[test]
fn every_collective_type_and_reduction_at_8_ranks() {
    every_collective(8);
}

/// Float sums and products depend on the order; the fixed fold order
/// makes them the same bits in two separate jobs.
#[test]
fn float_folds_are_bit_identical_across_two_jobs() {
    tls_test(|| {
        let job = || {
            run_job(
                8,
                |ep| ep,
                |c| {
                    let r = f64::from(c.rank()) + 1.0;
                    let mine: Vec<f64> = (0..64)
                        .map(|i| r.powi(7) / f64::from(i + 3) * 1e-3)
                        .collect();
                    let mine32: Vec<f32> = mine.iter().map(|&x| x as f32).collect();
                    let a = c.allreduce(&mine, Reduction::Sum).unwrap();
                    let b = c.reduce(5, &mine, Reduction::Prod).unwrap();
                    let d = c.allreduce(&mine32, Reduction::Sum).unwrap();
                    let e = c.reduce_scatter(&mine32, Reduction::Prod).unwrap();
                    finish(c);
                    (bits(&a), b.map(|v| bits(&v)), bits(&d), bits(&e))
                },
            )
        };
        let first = job();
        assert!(first.iter().all(|x| x.0 == first[0].0 && x.2 == first[0].2));
        // The reference fold gives the same bits too.
        let fold = |f: fn(f64, f64) -> f64| {
            (0..64)
                .map(|i| {
                    (1..8).fold(1f64.powi(7) / f64::from(i + 3) * 1e-3, |acc, r| {
                        f(acc, (f64::from(r) + 1.0).powi(7) / f64::from(i + 3) * 1e-3)
                    })
                })
                .map(f64::to_bits)
                .collect::<Vec<_>>()
        };
        assert_eq!(first[0].0, fold(|a, b| a + b));
        assert_eq!(first[5].1.as_ref().unwrap(), &fold(|a, b| a * b));
        assert_eq!(job(), first);
    });
}

#[test]
fn allreduce_of_64_mib_at_2_ranks() {
    tls_test(|| {
        let n = (64 << 20) / 8;
        let value = |rank: u32, i: usize| ((i * 7919) % 1_000_003) as f64 / 7.0 + f64::from(rank);
        let out = run_job(
            2,
            |ep| ep,
            move |c| {
                let me = c.rank();
                let mine: Vec<f64> = (0..n).map(|i| value(me, i)).collect();
                let first = c.allreduce(&mine, Reduction::Sum).unwrap();
                let ok = first.len() == n
                    && first
                        .iter()
                        .enumerate()
                        .all(|(i, x)| x.to_bits() == (value(0, i) + value(1, i)).to_bits());
                let seq = c.sequence();
                finish(c);
                (ok, seq)
            },
        );
        // With feature bit 1 (the default): one pipelined call (protocol
        // §14.1); a v1 job cuts it into 5 v1 calls of 16777200 bytes
        // (tests/collective/pipelined_tls.rs).
        assert_eq!(out, vec![(true, 1); 2]);
    });
}

// ---- 2. refused calls: H1618 on every rank before anything is sent ---------

/// One call that every rank must refuse alone with H1618 before anything
/// is sent (no COLLECTIVE payload sent or taken), counting `calls` v1
/// calls, with the job going on; then a working allreduce.
fn refuse(
    c: &mut Comm<Rogue>,
    refused: &mut u64,
    calls: u64,
    what: &str,
    f: impl FnOnce(&mut Comm<Rogue>) -> Result<(), Error>,
) {
    let (me, n) = (c.rank(), c.size());
    let traffic = c.link().traffic();
    let e = f(c).expect_err(what);
    assert!(
        matches!(e, Error::InvalidArguments(_)),
        "rank {me}: {what}: {e}"
    );
    assert_eq!(code(&e), 1618, "rank {me}: {what}: {e}");
    assert_eq!(
        c.link().traffic(),
        traffic,
        "rank {me}: {what} sent or took a frame"
    );
    assert!(c.failure().is_none(), "rank {me}: {what} ended the job");
    *refused += calls;
    let s = c
        .allreduce_scalar(me + 1, Reduction::Sum)
        .unwrap_or_else(|e| panic!("rank {me}: the call after {what}: {e}"));
    assert_eq!(s, n * (n + 1) / 2, "after {what}");
    *refused += 1;
}

/// Every refusal of protocol §8.4 that each rank makes alone, each followed
/// by a working allreduce (a refused call that did not count, or sent
/// something, would misalign the sequence numbers: H1617). Returns the v1
/// calls counted.
fn refusals(c: &mut Comm<Rogue>) -> u64 {
    let n = c.size();
    let mut refused = 0;
    for t in ElementType::ALL {
        for r in Reduction::V1 {
            if r.check(t).is_ok() {
                continue;
            }
            let bytes = vec![0u8; t.width() * 2];
            let what = format!("refused pair {t} {r}");
            refuse(c, &mut refused, 1, &format!("allreduce {what}"), |c| {
                c.allreduce_bytes(&bytes, t.code(), r.code()).map(drop)
            });
            refuse(c, &mut refused, 1, &format!("reduce {what}"), |c| {
                c.reduce_bytes(0, &bytes, t.code(), r.code()).map(drop)
            });
        }
    }
    refuse(c, &mut refused, 1, "u8 sum", |c| {
        c.allreduce(&[1u8], Reduction::Sum).map(drop)
    });
    refuse(c, &mut refused, 1, "u8 min", |c| {
        c.reduce(0, &[1u8, 2], Reduction::Min).map(drop)
    });
    refuse(c, &mut refused, 1, "u8 land", |c| {
        c.allreduce(&[1u8], Reduction::Land).map(drop)
    });
    refuse(c, &mut refused, 1, "f32 bxor scalar", |c| {
        c.allreduce_scalar(1.0f32, Reduction::Bxor).map(drop)
    });
    refuse(c, &mut refused, 1, "f64 land", |c| {
        c.reduce(0, &[1.0f64], Reduction::Land).map(drop)
    });
    refuse(c, &mut refused, 1, "f64 lor into", |c| {
        c.reduce_into(0, &[1.0f64], &mut [0.0], Reduction::Lor)
            .map(drop)
    });
    refuse(c, &mut refused, 1, "f32 band scalar", |c| {
        c.reduce_scalar(0, 1.0f32, Reduction::Band).map(drop)
    });
    refuse(c, &mut refused, 1, "u8 prod into", |c| {
        c.allreduce_into(&[1u8], &mut [0], Reduction::Prod)
    });
    refuse(c, &mut refused, 1, "u8 max large", |c| {
        c.allreduce(&[1u8; 3], Reduction::Max).map(drop)
    });
    // Codes out of range.
    for (t, r, what) in [
        (7u8, 1u8, "type 7"),
        (6, 0, "reduction 0"),
        (6, 11, "reduction 11"),
    ] {
        refuse(c, &mut refused, 1, what, |c| {
            c.allreduce_bytes(&[0; 8], t, r).map(drop)
        });
        refuse(c, &mut refused, 1, what, |c| {
            c.reduce_bytes(0, &[0; 8], t, r).map(drop)
        });
    }
    // Not a whole number of elements.
    refuse(c, &mut refused, 1, "7 bytes of f64", |c| {
        c.allreduce_bytes(&[0; 7], 6, 1).map(drop)
    });
    refuse(c, &mut refused, 1, "3 bytes of i32", |c| {
        c.reduce_bytes(0, &[0; 3], 1, 1).map(drop)
    });
    // Root >= size.
    refuse(c, &mut refused, 1, "bcast root", |c| {
        c.bcast(n, &mut vec![1u8]).map(drop)
    });
    refuse(c, &mut refused, 1, "bcast_into root", |c| {
        c.bcast_into(n, &mut [1u8]).map(drop)
    });
    refuse(c, &mut refused, 1, "bcast_scalar root", |c| {
        c.bcast_scalar(n + 3, 1u64).map(drop)
    });
    refuse(c, &mut refused, 1, "reduce root", |c| {
        c.reduce(n, &[1i32], Reduction::Sum).map(drop)
    });
    refuse(c, &mut refused, 1, "reduce_scalar root", |c| {
        c.reduce_scalar(u32::MAX, 1i64, Reduction::Sum).map(drop)
    });
    refuse(c, &mut refused, 1, "reduce_bytes root", |c| {
        c.reduce_bytes(n, &[0; 4], 2, 9).map(drop)
    });
    refuse(c, &mut refused, 1, "gather root", |c| {
        c.gather(n + 7, &[1i32]).map(drop)
    });
    refuse(c, &mut refused, 1, "scatter root", |c| {
        c.scatter::<u8>(n, Some(&[])).map(drop)
    });
    refuse(c, &mut refused, 1, "scatter_into root", |c| {
        c.scatter_into::<u8>(n, Some(&[]), &mut []).map(drop)
    });
    // Own data longer than one frame.
    let huge = vec![0u8; MAX_COLLECTIVE_DATA + 8];
    refuse(c, &mut refused, 1, "allreduce too long", |c| {
        c.allreduce_bytes(&huge, 4, 1).map(drop)
    });
    refuse(c, &mut refused, 1, "reduce too long", |c| {
        c.reduce_bytes(0, &huge, 4, 9).map(drop)
    });
    // _into with a wrong output length.
    refuse(c, &mut refused, 1, "allreduce_into out length", |c| {
        c.allreduce_into(&[1i32, 2], &mut [0; 1], Reduction::Sum)
    });
    // Composites count all their parts (reduce then scatter; gather then bcast).
    if n > 1 {
        refuse(
            c,
            &mut refused,
            2,
            "reduce_scatter not a multiple of size",
            |c| {
                c.reduce_scatter(&vec![1i32; n as usize + 1], Reduction::Sum)
                    .map(drop)
            },
        );
    }
    refuse(c, &mut refused, 2, "reduce_scatter u8 sum", |c| {
        c.reduce_scatter(&[1u8; 4], Reduction::Sum).map(drop)
    });
    refused
}

#[test]
fn refused_calls_are_h1618_on_every_rank_before_anything_is_sent() {
    tls_test(|| {
        for size in SIZES {
            let out = run_job(size, Rogue::new, |mut c| {
                let counted = refusals(&mut c);
                let seq = c.sequence();
                // The job goes on: DATA and collectives still work.
                let me = c.rank();
                let n = c.size();
                let g = c.allgather(&[me]).unwrap();
                assert_eq!(g, (0..n).collect::<Vec<_>>());
                c.barrier().unwrap();
                c.link().ep.send((me + 1) % n, 3, b"still here").unwrap();
                let m = c.link().ep.recv((me + n - 1) % n, 3).unwrap();
                assert_eq!(m, b"still here");
                let seq_end = c.sequence();
                c.into_link().ep.finish().unwrap();
                (counted, seq, seq_end)
            });
            for (rank, (counted, seq, end)) in out.iter().enumerate() {
                assert_eq!(counted, seq, "size {size} rank {rank}");
                assert_eq!(*end, seq + 3);
                assert_eq!(*seq, out[0].1, "size {size}: sequence numbers differ");
            }
        }
    });
}

// ---- 3. abort paths, with one rank misbehaving on purpose ------------------

/// At a rank other than the detecting one: H1612 from `from` carrying the
/// originator's `reason` and code `h`; with `third_rank_may_see_close`, a
/// third rank may instead report H1613 (protocol §7.5, §8.8
/// "Job-wide aborts": it may see another rank's close before the ABORT).
fn assert_job_aborted(e: &Error, from: u32, reason: AbortReason, h: u32, third: bool, what: &str) {
    match e {
        Error::AbortedByPeer { .. } => assert_aborted_by(e, from, reason, h),
        Error::PeerLost { .. } if third => {}
        other => panic!("{what}: expected H1612 from rank {from}, got {other}"),
    }
}

/// After the job failed every further call on this rank,
/// collective or point-to-point, fails at once; the collective ones with
/// the error that ended the job here.
fn everything_fails_promptly(c: &mut Comm<Rogue>) {
    let start = Instant::now();
    let me = c.rank();
    let n = c.size();
    let failure = c.failure().expect("the job failed on this rank");
    let all_n: Vec<u32> = (0..n).collect();
    let results: Vec<(&str, Result<(), Error>)> = vec![
        ("barrier", c.barrier()),
        ("bcast", c.bcast(0, &mut vec![1u8]).map(drop)),
        ("bcast_into", c.bcast_into(0, &mut [1u8]).map(drop)),
        ("bcast_scalar", c.bcast_scalar(0, 1u8).map(drop)),
        (
            "bcast_counted",
            c.bcast_counted(0, &mut vec![1u8; 3]).map(drop),
        ),
        ("reduce", c.reduce(0, &[1i32], Reduction::Sum).map(drop)),
        (
            "reduce_into",
            c.reduce_into(0, &[1i32], &mut [0], Reduction::Sum)
                .map(drop),
        ),
        (
            "reduce_scalar",
            c.reduce_scalar(0, 1i32, Reduction::Sum).map(drop),
        ),
        (
            "reduce_bytes",
            c.reduce_bytes(0, &[1, 0, 0, 0], 1, 1).map(drop),
        ),
        ("reduce", c.reduce(0, &[1i32], Reduction::Sum).map(drop)),
        ("allreduce", c.allreduce(&[1i32], Reduction::Sum).map(drop)),
        (
            "allreduce_into",
            c.allreduce_into(&[1i32], &mut [0], Reduction::Sum),
        ),
        (
            "allreduce_scalar",
            c.allreduce_scalar(1i32, Reduction::Sum).map(drop),
        ),
        (
            "allreduce_bytes",
            c.allreduce_bytes(&[1, 0, 0, 0], 1, 1).map(drop),
        ),
        (
            "allreduce",
            c.allreduce(&[1.0f64; 3], Reduction::Sum).map(drop),
        ),
        ("gather", c.gather(0, &[1u32]).map(drop)),
        ("scatter", c.scatter(0, Some(&all_n[..])).map(drop)),
        (
            "scatter_into",
            c.scatter_into(0, Some(&all_n[..]), &mut [0]).map(drop),
        ),
        ("allgather", c.allgather(&[1u32]).map(drop)),
        (
            "reduce_scatter",
            c.reduce_scatter(&all_n, Reduction::Sum).map(drop),
        ),
        ("alltoall", c.alltoall(&all_n).map(drop)),
    ];
    for (what, r) in &results {
        let e = r.as_ref().expect_err(what);
        assert_eq!(e, &failure, "rank {me}: {what} after the failure");
    }
    // The link and the endpoint underneath fail too.
    let ep = &c.link().ep;
    for peer in (0..n).filter(|&p| p != me) {
        let errs = [
            ("recv_collective", c.link().recv_collective(peer).map(drop)),
            (
                "send_collective",
                c.link().send_collective(peer, &[1; 16]).map(drop),
            ),
            ("send", ep.send(peer, 1, b"x")),
            ("recv", ep.recv(peer, 1).map(drop)),
            ("recv_any_tag", ep.recv_any_tag(peer).map(drop)),
            ("isend", ep.isend(peer, 1, b"x").and_then(|h| h.wait())),
            (
                "irecv",
                ep.irecv(peer, None).and_then(|h| h.wait()).map(drop),
            ),
        ];
        for (what, r) in errs {
            let e = r.expect_err(what);
            assert!(
                e.h_code().is_some(),
                "rank {me}: {what} to/from {peer}: {e}"
            );
        }
    }
    assert!(
        start.elapsed() < PROMPT,
        "rank {me}: calls after the failure took {:?}",
        start.elapsed()
    );
}

/// How one rank of an abort test ended.
#[derive(Debug)]
struct Ending {
    /// The barrier before the bad call worked. (It may fail on a rank
    /// that had not yet taken the barrier's last frame when the ABORT
    /// came: after a failure no call returns queued frames.)
    before_ok: bool,
    /// The call that goes wrong (or the failed barrier before it).
    first: Result<(), Error>,
    /// The next call, a barrier.
    later: Result<(), Error>,
    /// Calls counted in all.
    seq: u64,
}

/// Runs an abort test: a barrier, then `setup` may install a hook on the
/// rank's link, then every rank runs `call` (the call that goes wrong; the
/// hook is removed after it), a barrier, and the promptness checks of [`everything_fails_promptly`].
fn abort_job(
    size: u32,
    setup: impl Fn(&Comm<Rogue>) + Send + Sync + 'static,
    call: impl Fn(&mut Comm<Rogue>) -> Result<(), Error> + Send + Sync + 'static,
) -> Vec<Ending> {
    run_job(size, Rogue::new, move |mut c| {
        let before = c.barrier();
        let before_ok = before.is_ok();
        setup(&c);
        let first = match before {
            Ok(()) => call(&mut c),
            Err(e) => Err(e),
        };
        // Only the one call misbehaves: a forged frame of a later call
        // might not decode at all (H1610 at arrival).
        c.link().hook.borrow_mut().take();
        let later = c.barrier();
        assert!(
            later.is_err(),
            "rank {}: the call after the failure succeeded",
            c.rank()
        );
        everything_fails_promptly(&mut c);
        Ending {
            before_ok,
            first,
            later,
            seq: c.sequence(),
        }
    })
}

/// Checks an abort test's outcome: `detector` failed (its first or next
/// call) with `detected`; every other rank has H1612 from it with `reason`
/// and `h` (or H1613 in a job of 3 or more), in the first call or the
/// next; a rank whose first call failed has the same error in the next.
/// (Sequence counts may differ after a failure: a composite stops at the
/// part that failed.)
fn check_abort(
    out: &[Ending],
    detector: u32,
    detected: impl Fn(&Error) -> bool,
    reason: AbortReason,
    h: u32,
    what: &str,
) {
    let d = &out[detector as usize];
    // A frame that does not decode is rejected on arrival (H1610),
    // whatever call the receiver is in; every other fault is found by the
    // call that takes the frame.
    assert!(
        d.before_ok || h == 1610,
        "{what}: the detecting rank failed before"
    );
    let e = d
        .first
        .as_ref()
        .err()
        .unwrap_or_else(|| d.later.as_ref().unwrap_err());
    assert!(detected(e), "{what}: rank {detector}: {e}");
    assert_eq!(code(e), h, "{what}");
    let third = out.len() > 2;
    for (rank, Ending { first, later, .. }) in out.iter().enumerate() {
        if let Err(f) = first {
            assert_eq!(f, later.as_ref().unwrap_err(), "{what}: rank {rank}");
        }
        if rank as u32 != detector {
            let e = later.as_ref().unwrap_err();
            assert_job_aborted(
                e,
                detector,
                reason,
                h,
                third,
                &format!("{what}: rank {rank}"),
            );
        }
    }
}

#[test]
fn forged_sequence_is_h1617_at_the_root_h1612_elsewhere() {
    tls_test(|| {
        let out = abort_job(
            3,
            |c| {
                if c.rank() == 2 {
                    c.link().forge(overwrite(8, &[99, 0, 0, 0, 0, 0, 0, 0]));
                }
            },
            |c| c.allreduce(&[1i64], Reduction::Sum).map(drop),
        );
        let forged = |e: &Error| {
            matches!(
                e,
                Error::CollectiveMismatch(MismatchError::Header {
                    from: 2,
                    field: "sequence",
                    expected: 2,
                    got: 99,
                })
            )
        };
        check_abort(
            &out,
            0,
            forged,
            AbortReason::CollectiveMismatch,
            1617,
            "sequence",
        );
        assert!(
            out[0].first.is_err(),
            "the root detects it in the allreduce"
        );
        // Failed calls count (protocol §8.1): barrier, allreduce, barrier,
        // then the 21 calls of everything_fails_promptly (reduce_scatter
        // counts both parts); no allreduce after a failed barrier.
        for (rank, x) in out.iter().enumerate() {
            let calls = if x.before_ok { 3 } else { 2 };
            assert_eq!(x.seq, calls + 22, "rank {rank}");
        }
    });
}

#[test]
fn every_forged_header_field_is_h1617_at_the_receiver() {
    tls_test(|| {
        // (offset, bytes, field) of the collective header (protocol §7.3),
        // each a value some call could have.
        let cases: [(usize, &'static [u8], &str); 6] = [
            (0, &[4], "operation"),                     // allreduce instead of reduce
            (1, &[2], "element_type"),                  // u32 instead of i32
            (2, &[4], "reduction"),                     // max instead of sum
            (3, &[1], "phase"),                         // from the root
            (4, &[1, 0, 0, 0], "root"),                 // root 1
            (8, &[1, 0, 0, 0, 0, 0, 0, 0], "sequence"), // an old call
        ];
        for (at, value, field) in cases {
            // Toward the root: rank 1's reduce contribution to root 0.
            let out = abort_job(
                3,
                move |c| {
                    if c.rank() == 1 {
                        c.link().forge(overwrite(at, value));
                    }
                },
                |c| c.reduce(0, &[7i32], Reduction::Sum).map(drop),
            );
            let is = |e: &Error| matches!(e, Error::CollectiveMismatch(MismatchError::Header { from: 1, field: f, .. }) if *f == field);
            check_abort(&out, 0, is, AbortReason::CollectiveMismatch, 1617, field);
        }
        // From the root: root 2's bcast to rank 0 claims root 0.
        let out = abort_job(
            3,
            |c| {
                if c.rank() == 2 {
                    c.link().forge(|to, mut p| {
                        if to == 0 {
                            p[4] = 0;
                        }
                        p
                    });
                }
            },
            |c| c.bcast_scalar(2, 5u64).map(drop),
        );
        let is = |e: &Error| {
            matches!(
                e,
                Error::CollectiveMismatch(MismatchError::Header {
                    from: 2,
                    field: "root",
                    expected: 2,
                    got: 0,
                })
            )
        };
        check_abort(
            &out,
            0,
            is,
            AbortReason::CollectiveMismatch,
            1617,
            "bcast root",
        );
    });
}

#[test]
fn wrong_data_lengths_are_h1617_at_the_receiver() {
    tls_test(|| {
        // Rank 0 cuts the allreduce result it sends to rank 1.
        let out = abort_job(
            3,
            |c| {
                if c.rank() == 0 {
                    c.link().forge(|to, mut p| {
                        if to == 1 {
                            p.truncate(p.len() - 4);
                        }
                        p
                    });
                }
            },
            |c| c.allreduce(&[1u32, 2], Reduction::Sum).map(drop),
        );
        let is = |e: &Error| {
            matches!(
                e,
                Error::CollectiveMismatch(MismatchError::Length {
                    from: 0,
                    expected: 8,
                    got: 4
                })
            )
        };
        check_abort(
            &out,
            1,
            is,
            AbortReason::CollectiveMismatch,
            1617,
            "truncated allreduce",
        );

        // A barrier frame with data.
        let out = abort_job(
            3,
            |c| {
                if c.rank() == 2 {
                    c.link().forge(|_, mut p| {
                        p.push(0);
                        p
                    });
                }
            },
            |c| c.barrier(),
        );
        let is = |e: &Error| {
            matches!(
                e,
                Error::CollectiveMismatch(MismatchError::Length {
                    from: 2,
                    expected: 0,
                    got: 1
                })
            )
        };
        check_abort(
            &out,
            0,
            is,
            AbortReason::CollectiveMismatch,
            1617,
            "non-empty barrier",
        );

        // A bcast of i32 that arrives at rank 2 with 7 bytes.
        let out = abort_job(
            3,
            |c| {
                if c.rank() == 0 {
                    c.link().forge(|to, mut p| {
                        if to == 2 {
                            p.pop();
                        }
                        p
                    });
                }
            },
            |c| {
                let mut v = vec![1i32, 2];
                c.bcast(0, &mut v)
            },
        );
        let is = |e: &Error| {
            matches!(
                e,
                Error::CollectiveMismatch(MismatchError::Length { from: 0, .. })
            )
        };
        check_abort(
            &out,
            2,
            is,
            AbortReason::CollectiveMismatch,
            1617,
            "ragged bcast",
        );

        // bcast_into and scatter_into: a block longer than the buffer.
        for scatter in [false, true] {
            let out = abort_job(
                3,
                |c| {
                    if c.rank() == 1 {
                        c.link().forge(|to, mut p| {
                            if to == 0 {
                                p.extend_from_slice(&[0; 8]);
                            }
                            p
                        });
                    }
                },
                move |c| {
                    let mut out = [0u64; 2];
                    if scatter {
                        let all = [1u64, 2, 3, 4, 5, 6];
                        c.scatter_into(1, (c.rank() == 1).then_some(&all[..]), &mut out)
                    } else {
                        c.bcast_into(1, &mut out)
                    }
                },
            );
            let is = |e: &Error| {
                matches!(
                    e,
                    Error::CollectiveMismatch(MismatchError::Length {
                        from: 1,
                        expected: 16,
                        got: 24
                    })
                )
            };
            check_abort(
                &out,
                0,
                is,
                AbortReason::CollectiveMismatch,
                1617,
                "long block",
            );
        }
    });
}

#[test]
fn undecodable_collective_header_is_h1610_reason_7() {
    tls_test(|| {
        let out = abort_job(
            3,
            |c| {
                if c.rank() == 1 {
                    c.link().forge(overwrite(3, &[2])); // phase 2
                }
            },
            |c| c.reduce(0, &[1i32], Reduction::Sum).map(drop),
        );
        let is = |e: &Error| matches!(e, Error::FrameRejected(FrameError::Payload { .. }));
        check_abort(&out, 0, is, AbortReason::RejectedFrame, 1610, "phase 2");
    });
}

#[test]
fn reduce_contributions_of_different_lengths_are_h1618_at_the_root() {
    tls_test(|| {
        for allreduce in [false, true] {
            let out = abort_job(
                3,
                |_| {},
                move |c| {
                    let len = if c.rank() == 2 { 3 } else { 2 };
                    let data = vec![1i64; len];
                    if allreduce {
                        c.allreduce(&data, Reduction::Sum).map(drop)
                    } else {
                        c.reduce(0, &data, Reduction::Sum).map(drop)
                    }
                },
            );
            let is = |e: &Error| {
                matches!(
                    e,
                    Error::InvalidArguments(ArgumentError::LengthMismatch {
                        left: 16,
                        right: 24
                    })
                )
            };
            check_abort(
                &out,
                0,
                is,
                AbortReason::CollectiveMismatch,
                1618,
                "reduce lengths",
            );
            if !allreduce {
                assert!(
                    out[1].first.is_ok() && out[2].first.is_ok(),
                    "non-roots return after sending"
                );
            }
        }
        // reduce_into with an output of the wrong length at the root.
        let out = abort_job(
            3,
            |_| {},
            |c| {
                let mut out = [0i32; 1];
                c.reduce_into(0, &[1, 2], &mut out, Reduction::Sum)
                    .map(drop)
            },
        );
        let is = |e: &Error| {
            matches!(
                e,
                Error::InvalidArguments(ArgumentError::LengthMismatch { .. })
            )
        };
        check_abort(
            &out,
            0,
            is,
            AbortReason::CollectiveMismatch,
            1618,
            "reduce_into out",
        );
    });
}

#[test]
fn gather_blocks_of_different_lengths_are_h1617_at_the_root() {
    tls_test(|| {
        let out = abort_job(
            3,
            |_| {},
            |c| {
                let len = if c.rank() == 0 { 3 } else { 2 };
                c.gather(1, &vec![c.rank() as u8; len]).map(drop)
            },
        );
        let is = |e: &Error| {
            matches!(
                e,
                Error::CollectiveMismatch(MismatchError::Length {
                    from: 0,
                    expected: 2,
                    got: 3
                })
            )
        };
        check_abort(
            &out,
            1,
            is,
            AbortReason::CollectiveMismatch,
            1617,
            "gather lengths",
        );
        assert!(out[0].first.is_ok(), "rank 0 sent before the root looked");
    });
}

#[test]
fn invalid_scatter_at_the_root_is_h1618_reason_4_there_h1612_elsewhere() {
    tls_test(|| {
        let is = |e: &Error| {
            matches!(
                e,
                Error::InvalidArguments(ArgumentError::ScatterBlocks { .. })
            )
        };
        // Not a multiple of size.
        let out = abort_job(
            3,
            |_| {},
            |c| c.scatter(2, Some(&[1u32, 2, 3, 4][..])).map(drop),
        );
        check_abort(&out, 2, is, AbortReason::InvalidScatter, 1618, "4 of 3");
        // Blocks longer than one frame.
        let out = abort_job(
            2,
            |_| {},
            |c| {
                let data = if c.rank() == 0 {
                    vec![0u8; 2 * (MAX_COLLECTIVE_DATA + 1)]
                } else {
                    Vec::new()
                };
                c.scatter(0, Some(&data[..])).map(drop)
            },
        );
        check_abort(
            &out,
            0,
            is,
            AbortReason::InvalidScatter,
            1618,
            "long blocks",
        );
        // scatter_into with an output that is not the block at the root.
        let out = abort_job(
            3,
            |_| {},
            |c| {
                let mut out = [0u32; 1];
                c.scatter_into(1, Some(&[1u32; 6][..]), &mut out)
            },
        );
        check_abort(
            &out,
            1,
            is,
            AbortReason::InvalidScatter,
            1618,
            "scatter_into out",
        );
        // alltoall: the rank with bad data ends the job at once.
        let out = abort_job(
            3,
            |_| {},
            |c| {
                let len = if c.rank() == 1 { 4 } else { 3 };
                c.alltoall(&vec![0i32; len]).map(drop)
            },
        );
        check_abort(&out, 1, is, AbortReason::InvalidScatter, 1618, "alltoall");
    });
}

#[test]
fn bcast_longer_than_a_frame_at_the_root_is_h1618_reason_3() {
    tls_test(|| {
        let out = abort_job(
            3,
            |_| {},
            |c| {
                let mut v = if c.rank() == 1 {
                    vec![0u8; MAX_COLLECTIVE_DATA + 1]
                } else {
                    Vec::new()
                };
                c.bcast(1, &mut v)
            },
        );
        let is = |e: &Error| matches!(e, Error::InvalidArguments(ArgumentError::TooLong { .. }));
        check_abort(
            &out,
            1,
            is,
            AbortReason::CollectiveMismatch,
            1618,
            "long bcast",
        );
    });
}

// ---- 5. nothing blocks forever after a failure -----------------------------

/// A rank blocked in a DATA receive, a posted receive, or a collective
/// that does not involve the failed exchange gets the job's error.
#[test]
fn ranks_waiting_in_recv_get_the_abort_of_a_collective_they_are_not_in() {
    tls_test(|| {
        let turns = Turns::new();
        let out = run_job(3, Rogue::new, move |c| {
            // Rank 2 may not have taken the barrier's last frame when the
            // ABORT comes; then the barrier is where it waits.
            let before = c.barrier();
            let me = c.rank();
            let r = match (before, me) {
                (Err(e), _) => Err(e),
                (Ok(()), me) => match me {
                    // Root of a reduce: rank 1's forged frame comes first.
                    0 => c.reduce(0, &[1u8], Reduction::Bor).map(drop),
                    1 => {
                        // Once rank 2's receive is posted.
                        turns.pass(0, &[2, 1], 1);
                        c.link().forge(overwrite(8, &[7, 0, 0, 0, 0, 0, 0, 0]));
                        let r = c.reduce(0, &[1u8], Reduction::Bor).map(drop);
                        assert!(r.is_ok(), "a non-root returns after sending");
                        // Then it waits for DATA that never comes.
                        c.link().ep.recv(0, 9).map(drop)
                    }
                    // Rank 2 never makes the reduce: it waits in a posted receive.
                    _ => c
                        .link()
                        .ep
                        .irecv(0, Some(9))
                        .and_then(|h| {
                            turns.pass(0, &[2, 1], 2);
                            h.wait()
                        })
                        .map(drop),
                },
            };
            let e = r.expect_err("must fail");
            // The link fails from now on, promptly.
            let t = Instant::now();
            for peer in (0..3).filter(|&p| p != me) {
                assert!(c.link().recv_collective(peer).is_err());
                assert!(c.link().ep.recv(peer, 9).is_err());
            }
            assert!(t.elapsed() < PROMPT);
            e
        });
        assert!(
            matches!(
                out[0],
                Error::CollectiveMismatch(MismatchError::Header {
                    from: 1,
                    field: "sequence",
                    ..
                })
            ),
            "{}",
            out[0]
        );
        for (r, e) in out.iter().enumerate().skip(1) {
            assert_job_aborted(
                e,
                0,
                AbortReason::CollectiveMismatch,
                1617,
                true,
                &format!("rank {r}"),
            );
        }
    });
}

/// A rank that leaves (BYE) instead of making a collective: the root
/// waiting for it gets H1613 instead of hanging; once the root leaves in
/// turn, the last rank, waiting in the next barrier, gets H1613 too.
#[test]
fn a_rank_that_leaves_mid_collective_is_h1613_not_a_hang() {
    tls_test(|| {
        let out = run_job(
            3,
            |ep| ep,
            |c| {
                c.barrier().unwrap();
                if c.rank() == 2 {
                    finish(c);
                    return None;
                }
                let g = c.gather(0, &[1u8]).map(drop);
                let t = Instant::now();
                let later = c.barrier();
                let took = t.elapsed();
                let seq = c.sequence();
                drop(c); // finish, whatever the job's state
                Some((g, later, took, seq))
            },
        );
        let (g, later, took, seq) = out[0].as_ref().unwrap();
        assert_eq!(code(g.as_ref().unwrap_err()), 1613, "{g:?}");
        assert_eq!(g, later, "the root's next call fails at once");
        assert!(*took < PROMPT);
        assert_eq!(*seq, 3);
        let (g, later, _, seq) = out[1].as_ref().unwrap();
        assert!(g.is_ok(), "a non-root returns after sending");
        assert_eq!(code(later.as_ref().unwrap_err()), 1613, "{later:?}");
        assert_eq!(*seq, 3);
    });
}

// ---- 4. DATA and COLLECTIVE frames on one connection -----------------------

/// Rank `from`'s k-th message to `to` with `tag`: its content names all
/// four, and messages with tag 3 are 100 KB (above the eager limit).
fn msg(from: u32, to: u32, tag: u32, k: u32) -> Vec<u8> {
    let mut m = format!("{from}->{to} tag {tag} #{k}").into_bytes();
    if tag == 3 {
        m.resize(100_000, (k + 3 * from + 7 * to) as u8);
    }
    m
}

/// Per (source, tag): the next k a receiver expects.
#[derive(Default)]
struct Inbox {
    next: HashMap<(u32, u32), u32>,
    sent: HashMap<(u32, u32), u32>,
}

impl Inbox {
    fn send(&mut self, ep: &Endpoint, to: u32, tag: u32) {
        let k = self.sent.entry((to, tag)).or_default();
        ep.send(to, tag, &msg(ep.rank(), to, tag, *k)).unwrap();
        *k += 1;
    }
    fn check(&mut self, me: u32, from: u32, tag: u32, m: &[u8]) {
        let k = self.next.entry((from, tag)).or_default();
        assert!(
            m == msg(from, me, tag, *k),
            "rank {me}: from {from} tag {tag}: expected #{k}, got {:?}",
            String::from_utf8_lossy(&m[..m.len().min(40)])
        );
        *k += 1;
    }
    fn recv(&mut self, ep: &Endpoint, from: u32, tag: u32) {
        let m = ep.recv(from, tag).unwrap();
        self.check(ep.rank(), from, tag, &m);
    }
}

#[test]
fn data_and_collective_frames_interleave_without_loss_or_reordering() {
    tls_test(|| {
        // Who waits where: a rank goes on once the ranks before it in an
        // order wait in a collective receive (`Watched`) or passed a point.
        let turns = Turns::new();
        let out = run_job(
            3,
            |ep| ep,
            move |c| {
                // A communicator over a borrowed endpoint, so that receive
                // handles can stay open across collective calls.
                let ep = c.into_link();
                let c = Comm::new(Watched::new(&ep, turns.clone()));
                let me = c.rank();
                let n = c.size();
                let peers: Vec<u32> = (0..n).filter(|&p| p != me).collect();
                let mut ib = Inbox::default();

                // Before: DATA with three tags (tag 3 above the eager limit).
                for &p in &peers {
                    for tag in [1, 2, 1, 3, 2] {
                        ib.send(&ep, p, tag);
                    }
                }
                c.barrier().unwrap();
                // Between: more DATA, then collectives of both sizes.
                for &p in &peers {
                    ib.send(&ep, p, 2);
                    ib.send(&ep, p, 1);
                }
                let a = c
                    .allreduce(&data_of::<f64>(me, 5, 20_000), Reduction::Sum)
                    .unwrap();
                same_bits(
                    &a,
                    &reference::<f64>(n, 5, 20_000, Reduction::Sum),
                    Reduction::Sum,
                    "allreduce",
                );
                let g = c.allgather(&[me; 3]).unwrap();
                assert_eq!(g, (0..n).flat_map(|r| [r; 3]).collect::<Vec<_>>());
                // Take everything so far, tags out of the order they were sent.
                for &p in &peers {
                    for tag in [2, 2, 2, 3, 1, 1, 1] {
                        ib.recv(&ep, p, tag);
                    }
                }

                // DATA that arrives while the receiver waits in a collective:
                // the root 0 sits in gather while ranks 1, 2 send DATA first;
                // rank 1's completes a receive posted before, rank 2's is kept.
                if me == 0 {
                    let h = ep.irecv(1, Some(4)).unwrap();
                    turns.take(1, &[0, 1, 2], me);
                    let g = c.gather(0, &[10u32 + me]).unwrap().unwrap();
                    assert_eq!(g, [10, 11, 12]);
                    let (st, m) = h.wait().unwrap();
                    assert_eq!(st.source, 1);
                    ib.check(me, 1, st.tag, &m);
                    ib.recv(&ep, 2, 4);
                } else {
                    turns.take(1, &[0, 1, 2], me); // once 0 waits in gather
                    ib.send(&ep, 0, 4);
                    c.gather(0, &[10u32 + me]).unwrap();
                    turns.done(1, me);
                }
                // ... and the other way: ranks 1, 2 sit in bcast from 0.
                if me == 0 {
                    turns.take(2, &[1, 2, 0], me); // once 1 and 2 wait in bcast
                    for &p in &peers {
                        ib.send(&ep, p, 5);
                    }
                    c.bcast_scalar(0, 55u64).unwrap();
                } else {
                    turns.take(2, &[1, 2, 0], me);
                    assert_eq!(c.bcast_scalar(0, 0u64).unwrap(), 55);
                    ib.recv(&ep, 0, 5);
                }

                // COLLECTIVE frames that arrive while the receiver waits in
                // recv: three reduces to root 0 from ranks 1, 2 (they return
                // after sending), then DATA; root 0 waits in recv meanwhile.
                if me == 0 {
                    turns.pass(3, &[0, 1, 2], me); // about to wait in recv
                    ib.recv(&ep, 1, 6);
                    ib.recv(&ep, 2, 6);
                    for i in 0..3u32 {
                        let r = c.reduce(0, &[me + i], Reduction::Sum).unwrap();
                        assert_eq!(r, Some(vec![3 + 3 * i]));
                    }
                } else {
                    turns.pass(3, &[0, 1, 2], me);
                    for i in 0..3u32 {
                        assert_eq!(c.reduce(0, &[me + i], Reduction::Sum).unwrap(), None);
                    }
                    ib.send(&ep, 0, 6);
                }
                // ... and the other way: root 0 bcasts, then sends DATA; ranks
                // 1, 2 wait in a receive (any tag) first.
                if me == 0 {
                    turns.pass(4, &[1, 2, 0], me); // once 1 and 2 wait in recv
                    let mut v = vec![7i32; 1000];
                    c.bcast(0, &mut v).unwrap();
                    for &p in &peers {
                        ib.send(&ep, p, 7);
                    }
                } else {
                    turns.pass(4, &[1, 2, 0], me);
                    let (st, m) = ep.recv_any_tag(0).unwrap();
                    assert_eq!(st.tag, 7);
                    ib.check(me, 0, 7, &m);
                    let mut v: Vec<i32> = Vec::new();
                    c.bcast(0, &mut v).unwrap();
                    assert_eq!(v, vec![7i32; 1000]);
                }

                // After: DATA both ways around a last barrier.
                for &p in &peers {
                    ib.send(&ep, p, 1);
                    ib.send(&ep, p, 3);
                }
                c.barrier().unwrap();
                for &p in &peers {
                    ib.send(&ep, p, 2);
                }
                for &p in &peers {
                    ib.recv(&ep, p, 3);
                    ib.recv(&ep, p, 2);
                    ib.recv(&ep, p, 1);
                }
                // Nothing was duplicated: nothing is left over.
                for &p in &peers {
                    let mut h = ep.irecv(p, None).unwrap();
                    assert!(
                        h.test().unwrap().is_none(),
                        "rank {me}: a message from {p} is left"
                    );
                }
                assert_eq!(ep.open_handles(), (0, 0));
                c.barrier().unwrap();
                let seq = c.sequence();
                let counts = (ib.sent.values().sum::<u32>(), ib.next.values().sum::<u32>());
                drop(c);
                ep.finish().unwrap();
                (seq, counts)
            },
        );
        for (r, (seq, (sent, got))) in out.iter().enumerate() {
            // barrier, allreduce, allgather (2), gather, bcast, 3 reduces,
            // bcast, 2 barriers.
            assert_eq!(*seq, 12, "rank {r}");
            assert_eq!(sent, got, "rank {r}: sent and received counts");
        }
        let sent: u32 = out.iter().map(|x| x.1 .0).sum();
        assert_eq!(sent, 24 + 22 + 22);
    });
}
