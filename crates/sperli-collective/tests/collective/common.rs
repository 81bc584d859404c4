//! Helpers shared by the fake-link and the real-TLS tests: H numbers, ABORT
//! checks, the reference fold of the table of protocol §8.3 (written apart from
//! `sperli_wire::reduce`), deterministic data, bit comparisons, and
//! [`Turns`]: ranks that act in a given order, waiting for each other's
//! events instead of sleeping.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sperli_collective::fake::FakePeers;
use sperli_collective::{CkptFrame, Element, Peers};
use sperli_wire::abort::AbortReason;
use sperli_wire::element::Reduction;
use sperli_wire::error::LossCause;
use sperli_wire::Error;

pub fn code(e: &Error) -> u32 {
    e.h_code().expect("an H-code").number()
}

/// A rank other than the detecting one: its first call may have completed
/// (then the next one sees the ABORT) or may itself have failed with the
/// ABORT (a send or receive after the originator aborted); either way the
/// later call fails with H1612 from `from`. Or, with three ranks or more,
/// with H1613 "closed without BYE" from another survivor: a rank that
/// receives ABORT forwards nothing and closes every connection (protocol
/// §7.5), and that close may arrive before the originator's ABORT.
pub fn assert_job_ended<T: Debug>(
    first: &Result<T, Error>,
    later: &Result<(), Error>,
    from: u32,
    reason: AbortReason,
    h: u32,
) {
    let e = later.as_ref().unwrap_err();
    match e {
        Error::PeerLost {
            peer,
            cause: LossCause::ClosedWithoutBye,
        } if *peer != from => {}
        e => assert_aborted_by(e, from, reason, h),
    }
    if let Err(f) = first {
        assert_eq!(f, e);
    }
}

/// H1612 from `from` with the originator's `reason` and `code`.
pub fn assert_aborted_by(e: &Error, from: u32, reason: AbortReason, h: u32) {
    match e {
        Error::AbortedByPeer {
            from: f,
            reason: r,
            code: c,
            ..
        } => {
            assert_eq!((*f, *r, *c), (from, reason.code(), h), "{e}");
        }
        other => panic!("expected H1612 from rank {from}, got {other}"),
    }
}

pub fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// A reference implementation of the table of protocol §8.3, written apart from
/// `sperli_wire::reduce`.
pub trait Ref: Element + Debug {
    fn apply(a: Self, b: Self, r: Reduction) -> Self;
    fn bits(self) -> u64;
    fn gen(seed: &mut u64) -> Self;
    fn is_nan(self) -> bool {
        false
    }
}

macro_rules! int_ref {
    ($($t:ty),*) => {$(
        impl Ref for $t {
            fn apply(a: Self, b: Self, r: Reduction) -> Self {
                match r {
                    Reduction::Sum => a.wrapping_add(b),
                    Reduction::Prod => a.wrapping_mul(b),
                    Reduction::Min => a.min(b),
                    Reduction::Max => a.max(b),
                    Reduction::Land => ((a != 0) && (b != 0)) as $t,
                    Reduction::Lor => ((a != 0) || (b != 0)) as $t,
                    Reduction::Lxor => ((a != 0) != (b != 0)) as $t,
                    Reduction::Band => a & b,
                    Reduction::Bor => a | b,
                    Reduction::Bxor => a ^ b,
                    // The reductions of bit 4 are refused on the v1 types.
                    Reduction::Minloc | Reduction::Maxloc | Reduction::User => {
                        unreachable!("refused for v1 integers")
                    }
                }
            }
            fn bits(self) -> u64 {
                self as u64
            }
            fn gen(seed: &mut u64) -> Self {
                let x = xorshift(seed);
                match x % 8 {
                    0 => <$t>::MAX,
                    1 => <$t>::MIN,
                    2 => 0,
                    3 => 1,
                    4 => (x >> 40) as $t & 3,
                    _ => (x >> 3) as $t,
                }
            }
        }
    )*};
}
int_ref!(u8, i32, u32, i64, u64);

macro_rules! float_ref {
    ($($t:ty),*) => {$(
        impl Ref for $t {
            fn apply(a: Self, b: Self, r: Reduction) -> Self {
                match r {
                    Reduction::Sum => a + b,
                    Reduction::Prod => a * b,
                    // IEEE 754-2019 minimum/maximum with -0 < +0; a NaN in:
                    // the left operand if it is NaN, else the right.
                    Reduction::Min | Reduction::Max => {
                        if a.is_nan() {
                            a
                        } else if b.is_nan() {
                            b
                        } else if a == b {
                            let neg = a.is_sign_negative() || b.is_sign_negative();
                            let pos = a.is_sign_positive() || b.is_sign_positive();
                            let want_neg = r == Reduction::Min;
                            if (want_neg && neg) || (!want_neg && !pos) {
                                if a.is_sign_negative() { a } else { b }
                            } else if a.is_sign_positive() {
                                a
                            } else {
                                b
                            }
                        } else if (a < b) == (r == Reduction::Min) {
                            a
                        } else {
                            b
                        }
                    }
                    _ => unreachable!("refused for floats"),
                }
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            fn gen(seed: &mut u64) -> Self {
                let x = xorshift(seed);
                match x % 10 {
                    0 => -0.0,
                    1 => 0.0,
                    2 => <$t>::INFINITY,
                    3 => <$t>::NEG_INFINITY,
                    4 => <$t>::MIN_POSITIVE / 4.0,
                    5 => <$t>::from_bits(<$t>::NAN.to_bits() | 5),
                    _ => ((x >> 11) % 2001) as $t / 7.0 - 140.0,
                }
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    )*};
}
float_ref!(f32, f64);

pub fn data_of<T: Ref>(rank: u32, salt: u64, len: usize) -> Vec<T> {
    let mut s = 0x9e37_79b9_7f4a_7c15 ^ (u64::from(rank) + 1).wrapping_mul(0x2545_f491) ^ salt;
    (0..len).map(|_| T::gen(&mut s)).collect()
}

pub fn reference<T: Ref>(size: u32, salt: u64, len: usize, r: Reduction) -> Vec<T> {
    let mut acc = data_of::<T>(0, salt, len);
    for rank in 1..size {
        let next = data_of::<T>(rank, salt, len);
        for (a, b) in acc.iter_mut().zip(next) {
            *a = T::apply(*a, b, r);
        }
    }
    acc
}

pub fn same_bits<T: Ref>(got: &[T], want: &[T], r: Reduction, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        // protocol §8.3: the NaN bits of float sum and prod are not fixed.
        let nan_ok = matches!(r, Reduction::Sum | Reduction::Prod) && g.is_nan() && w.is_nan();
        assert!(
            nan_ok || g.bits() == w.bits(),
            "{what}[{i}]: got {g:?}, want {w:?}"
        );
    }
}

// ---- ranks taking turns: order by events, not by sleeps ---------------------

/// How long a rank waits for its turn before the test fails (a hang
/// becomes a failure that names the point and the rank).
pub const TURN_LIMIT: Duration = Duration::from_secs(60);

/// Ranks (threads of one test process) that must do something in a given
/// order: a message or a call of one rank after another's, a rank that
/// enters a call while its peers already wait in it (the early frames of
/// protocol §8.8). Each rank [`Turns::take`]s its turn at a numbered point
/// and says when it is [`Turns::done`] there; a rank whose receives go
/// through [`Watched`] also counts as far enough once it waits in a
/// receive after its turn.
#[derive(Default)]
pub struct Turns {
    state: Mutex<TurnState>,
    cv: Condvar,
}

#[derive(Default)]
struct TurnState {
    /// Per point: the ranks that took their turn there, in order, each
    /// with the number of receives it had entered by then.
    taken: HashMap<u64, Vec<(u32, u64)>>,
    /// Per point: the ranks done there.
    done: HashMap<u64, BTreeSet<u32>>,
    /// The receives each rank entered (counted by [`Watched`]).
    receives: HashMap<u32, u64>,
}

impl Turns {
    /// A fresh set of turns, shared by the ranks of one job.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn lock(&self) -> MutexGuard<'_, TurnState> {
        // A failing rank must not poison the others' turns.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the rank before `me` in `order` took its turn at
    /// `point` and then either entered a receive or was done there, then
    /// takes `me`'s turn. The first rank of `order` goes at once.
    pub fn take(&self, point: u64, order: &[u32], me: u32) {
        let pos = order
            .iter()
            .position(|&r| r == me)
            .unwrap_or_else(|| panic!("rank {me} is not in the order {order:?}"));
        let deadline = Instant::now() + TURN_LIMIT;
        let mut st = self.lock();
        loop {
            let taken = st.taken.get(&point).map_or(&[][..], Vec::as_slice);
            let ready = match pos.checked_sub(1) {
                None => true,
                Some(_) if taken.len() < pos => false,
                Some(p) => {
                    let (prev, base) = taken[p];
                    st.receives.get(&prev).copied().unwrap_or(0) > base
                        || st.done.get(&point).is_some_and(|d| d.contains(&prev))
                }
            };
            if ready {
                let base = st.receives.get(&me).copied().unwrap_or(0);
                st.taken.entry(point).or_default().push((me, base));
                self.cv.notify_all();
                return;
            }
            let now = Instant::now();
            assert!(
                now < deadline,
                "rank {me}: no turn at point {point} within {TURN_LIMIT:?} (order {order:?})"
            );
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Marks `me` done at `point` (what it did there returned).
    pub fn done(&self, point: u64, me: u32) {
        self.lock().done.entry(point).or_default().insert(me);
        self.cv.notify_all();
    }

    /// [`Turns::take`], then [`Turns::done`]: `me` passes `point` after the
    /// ranks before it in `order` passed it.
    pub fn pass(&self, point: u64, order: &[u32], me: u32) {
        self.take(point, order, me);
        self.done(point, me);
    }

    /// Counts a receive `rank` entered.
    fn received(&self, rank: u32) {
        *self.lock().receives.entry(rank).or_default() += 1;
        self.cv.notify_all();
    }
}

/// `ranks` sorted by `key` (ties in rank order): the order in which they
/// take their turns.
pub fn order_by(ranks: impl IntoIterator<Item = u32>, key: impl Fn(u32) -> u64) -> Vec<u32> {
    let mut order: Vec<u32> = ranks.into_iter().collect();
    order.sort_by_key(|&r| (key(r), r));
    order
}

/// A [`Peers`] implementation that forwards everything to `inner` and tells
/// its [`Turns`] each time the rank enters a COLLECTIVE receive (so a rank
/// after it in an order may go once it waits there).
pub struct Watched<L> {
    /// The wrapped peers.
    pub inner: L,
    turns: Arc<Turns>,
}

impl<L: Peers> Watched<L> {
    /// `inner`, watched by `turns`.
    pub fn new(inner: L, turns: Arc<Turns>) -> Self {
        Self { inner, turns }
    }
}

impl<L: Peers> Peers for Watched<L> {
    fn rank(&self) -> u32 {
        self.inner.rank()
    }
    fn size(&self) -> u32 {
        self.inner.size()
    }
    fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        self.inner.send_collective(to, payload)
    }
    fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
        self.turns.received(self.inner.rank());
        self.inner.recv_collective(from)
    }
    fn abort(&self, reason: AbortReason, code: u32, message: &str) {
        self.inner.abort(reason, code, message)
    }
    fn take_buffer(&self, len: usize) -> Vec<u8> {
        self.inner.take_buffer(len)
    }
    fn send_collective_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        self.inner.send_collective_vec(to, payload)
    }
    fn recycle(&self, buf: Vec<u8>) {
        self.inner.recycle(buf)
    }
    fn send_collective_each(&self, to: &[u32], payload: &[u8]) -> Result<(), Error> {
        self.inner.send_collective_each(to, payload)
    }
    fn send_collective_tagged(&self, to: u32, tag: u32, payload: &[u8]) -> Result<(), Error> {
        self.inner.send_collective_tagged(to, tag, payload)
    }
    fn recv_collective_where(
        &self,
        from: u32,
        tag: u32,
        pass: &dyn Fn(u32) -> Result<(), Error>,
    ) -> Result<Vec<u8>, Error> {
        self.turns.received(self.inner.rank());
        self.inner.recv_collective_where(from, tag, pass)
    }
    fn features(&self) -> u64 {
        self.inner.features()
    }
    fn send_ckpt(
        &self,
        to: u32,
        epoch: u64,
        payload: &sperli_wire::payload::Payload<'_>,
    ) -> Result<(), Error> {
        self.inner.send_ckpt(to, epoch, payload)
    }
    fn recv_ckpt(&self, from: u32) -> Result<CkptFrame, Error> {
        self.inner.recv_ckpt(from)
    }
    fn open_handles(&self) -> (u64, u64) {
        self.inner.open_handles()
    }
    fn job_error(&self) -> Option<Error> {
        self.inner.job_error()
    }
}

/// Whether two f64 arrays hold the same bits, element by element.
pub fn f64_bits_equal(got: &[f64], want: &[f64]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(a, b)| a.to_bits() == b.to_bits())
}

/// The per-rank `(extension on, results right)` of a TLS job: every
/// rank's results right, the extension on at every rank unless the job is
/// `mixed` (a rank did not announce it), then off at every rank.
pub fn assert_on_unless_mixed(out: &[(bool, bool)], mixed: bool, what: &str) {
    for (r, &(on, ok)) in out.iter().enumerate() {
        assert_eq!(on, !mixed, "rank {r}: extension on");
        assert!(ok, "rank {r}: {what}");
    }
}

/// (sender, receiver, phase, root field) of every COLLECTIVE payload sent.
pub type Sent = Arc<Mutex<Vec<(u32, u32, u8, u32)>>>;

/// A job whose ranks announce `announced`, every payload sent recorded.
pub fn recorded(announced: &[u64]) -> (Vec<FakePeers>, Sent) {
    let links = FakePeers::job_with_features(announced);
    let sent: Sent = Arc::default();
    for l in &links {
        let (me, log) = (l.rank(), Arc::clone(&sent));
        l.set_send_hook(move |to, p| {
            let root = u32::from_le_bytes(p[4..8].try_into().unwrap());
            log.lock().unwrap().push((me, to, p[3], root));
            vec![p]
        });
    }
    (links, sent)
}
