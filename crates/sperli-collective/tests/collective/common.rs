//! Helpers shared by the fake-link and the real-TLS tests: H numbers, ABORT
//! checks, the reference fold of the table of protocol §8.3 (written apart from
//! `sperli_wire::reduce`), deterministic data, bit comparisons.

use std::fmt::Debug;

use sperli_collective::Element;
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
