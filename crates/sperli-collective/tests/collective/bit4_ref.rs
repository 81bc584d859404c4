//! The reference of HELLO feature bit 4's folds (protocol §17.2, §17.3),
//! written apart from `sperli_wire::reduce`: for each new Rust element
//! type, its allowed reductions (the table of §17.2 written out), one
//! `combine` per element pair, deterministic data with the awkward
//! values (NaN, ±0, infinities, ties of MINLOC/MAXLOC), the serial left
//! fold over ranks, and the bit comparison.

use std::fmt::Debug;

use sperli_collective::{Complex128, Complex64, Element, ValueIndex};
use sperli_wire::element::Reduction;

use crate::common::xorshift;

/// A new element type with its independent reference.
pub trait Ref4: Element + Debug {
    /// The reductions §17.2 allows on this type (user aside).
    fn reductions() -> Vec<Reduction>;
    /// `combine(a, b)`, `a` the left operand (protocol §17.3).
    fn apply(a: Self, b: Self, r: Reduction) -> Self;
    /// A deterministic element.
    fn gen(seed: &mut u64) -> Self;
    /// Whether `got` is the reference's `want`: the same bits, but any NaN
    /// for a NaN component of a complex sum or product (protocol §17.3).
    fn same(got: Self, want: Self) -> bool {
        Self::to_le_vec(&[got]) == Self::to_le_vec(&[want])
    }
}

impl Ref4 for bool {
    fn reductions() -> Vec<Reduction> {
        vec![Reduction::Land, Reduction::Lor, Reduction::Lxor]
    }
    fn apply(a: Self, b: Self, r: Reduction) -> Self {
        match r {
            Reduction::Land => a && b,
            Reduction::Lor => a || b,
            Reduction::Lxor => a != b,
            _ => unreachable!("refused for bool"),
        }
    }
    fn gen(seed: &mut u64) -> Self {
        xorshift(seed) % 3 != 0
    }
}

macro_rules! small_int_ref {
    ($($t:ty),*) => {$(
        impl Ref4 for $t {
            fn reductions() -> Vec<Reduction> {
                Reduction::V1.to_vec()
            }
            fn apply(a: Self, b: Self, r: Reduction) -> Self {
                match r {
                    Reduction::Sum => a.wrapping_add(b),
                    Reduction::Prod => a.wrapping_mul(b),
                    Reduction::Min => a.min(b),
                    Reduction::Max => a.max(b),
                    Reduction::Land => <$t>::from((a != 0) && (b != 0)),
                    Reduction::Lor => <$t>::from((a != 0) || (b != 0)),
                    Reduction::Lxor => <$t>::from((a != 0) != (b != 0)),
                    Reduction::Band => a & b,
                    Reduction::Bor => a | b,
                    Reduction::Bxor => a ^ b,
                    _ => unreachable!("refused for integers"),
                }
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
small_int_ref!(i8, i16, u16);

/// A float component with the awkward values.
macro_rules! float_gen {
    ($t:ty, $seed:expr) => {{
        let x = xorshift($seed);
        match x % 12 {
            0 => -0.0,
            1 => 0.0,
            2 => <$t>::INFINITY,
            3 => <$t>::NEG_INFINITY,
            4 => <$t>::MIN_POSITIVE / 4.0,
            5 => <$t>::from_bits(<$t>::NAN.to_bits() | 5),
            6 => <$t>::MAX / 3.0,
            _ => ((x >> 11) % 2001) as $t / 7.0 - 140.0,
        }
    }};
}

macro_rules! complex_ref {
    ($($c:ty => $f:ty),*) => {$(
        impl Ref4 for $c {
            fn reductions() -> Vec<Reduction> {
                vec![Reduction::Sum, Reduction::Prod]
            }
            fn apply(a: Self, b: Self, r: Reduction) -> Self {
                match r {
                    Reduction::Sum => Self { re: a.re + b.re, im: a.im + b.im },
                    // Protocol §17.3: four rounded products, then one
                    // subtraction and one addition.
                    Reduction::Prod => {
                        let (rr, ii) = (a.re * b.re, a.im * b.im);
                        let (ri, ir) = (a.re * b.im, a.im * b.re);
                        Self { re: rr - ii, im: ri + ir }
                    }
                    _ => unreachable!("refused for complex"),
                }
            }
            fn gen(seed: &mut u64) -> Self {
                Self { re: float_gen!($f, seed), im: float_gen!($f, seed) }
            }
            fn same(got: Self, want: Self) -> bool {
                let one = |g: $f, w: $f| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
                one(got.re, want.re) && one(got.im, want.im)
            }
        }
    )*};
}
complex_ref!(Complex64 => f32, Complex128 => f64);

/// The value order of MINLOC and MAXLOC (protocol §17.3).
pub trait LocValue: Copy + PartialOrd + Debug {
    /// NaN (floats only).
    fn nan(self) -> bool;
    /// `self` below `other`: −0 below +0 for floats.
    fn lt(self, other: Self) -> bool;
    /// A value, with many ties.
    fn gen(seed: &mut u64) -> Self;
}

macro_rules! int_loc {
    ($($t:ty),*) => {$(
        impl LocValue for $t {
            fn nan(self) -> bool {
                false
            }
            fn lt(self, other: Self) -> bool {
                self < other
            }
            fn gen(seed: &mut u64) -> Self {
                let x = xorshift(seed);
                match x % 6 {
                    0 => <$t>::MIN,
                    1 => <$t>::MAX,
                    _ => (x >> 20) as $t % 4,
                }
            }
        }
    )*};
}
int_loc!(i16, i32, i64);

macro_rules! float_loc {
    ($($t:ty),*) => {$(
        impl LocValue for $t {
            fn nan(self) -> bool {
                self.is_nan()
            }
            fn lt(self, other: Self) -> bool {
                self < other || (self == other && self.is_sign_negative() && other.is_sign_positive())
            }
            fn gen(seed: &mut u64) -> Self {
                let x = xorshift(seed);
                match x % 10 {
                    0 => -0.0,
                    1 => 0.0,
                    2 => <$t>::from_bits(<$t>::NAN.to_bits() | 3),
                    3 => <$t>::NEG_INFINITY,
                    _ => ((x >> 20) % 4) as $t,
                }
            }
        }
    )*};
}
float_loc!(f32, f64);

impl<V: LocValue> Ref4 for ValueIndex<V>
where
    ValueIndex<V>: Element,
{
    fn reductions() -> Vec<Reduction> {
        vec![Reduction::Minloc, Reduction::Maxloc]
    }
    fn apply(a: Self, b: Self, r: Reduction) -> Self {
        let max = match r {
            Reduction::Minloc => false,
            Reduction::Maxloc => true,
            _ => unreachable!("refused for pairs"),
        };
        // The left NaN wins, then the right NaN (protocol §17.3 step 1).
        if a.value.nan() {
            return a;
        }
        if b.value.nan() {
            return b;
        }
        let (a_first, b_first) = if max {
            (b.value.lt(a.value), a.value.lt(b.value))
        } else {
            (a.value.lt(b.value), b.value.lt(a.value))
        };
        if a_first {
            a
        } else if b_first {
            b
        } else {
            // Equal values: the smaller index (MINLOC and MAXLOC alike).
            ValueIndex {
                value: a.value,
                index: a.index.min(b.index),
            }
        }
    }
    fn gen(seed: &mut u64) -> Self {
        let value = V::gen(seed);
        let index = match xorshift(seed) % 5 {
            0 => -1,
            1 => i32::MAX,
            x => x as i32,
        };
        ValueIndex { value, index }
    }
}

/// Rank `rank`'s `len` elements for a call salted `salt`.
pub fn data4<T: Ref4>(rank: u32, salt: u64, len: usize) -> Vec<T> {
    let mut s = 0x9e37_79b9_7f4a_7c15 ^ (u64::from(rank) + 1).wrapping_mul(0x2545_f491) ^ salt;
    (0..len).map(|_| T::gen(&mut s)).collect()
}

/// The serial left folds of ranks `0..=i` for i = 0 .. n-1 (protocol
/// §17.3): `acc = c_0`, `acc = combine(acc, c_i)`, each prefix kept.
pub fn prefixes<T: Ref4>(n: u32, salt: u64, len: usize, r: Reduction) -> Vec<Vec<T>> {
    let mut acc = data4::<T>(0, salt, len);
    let mut out = vec![acc.clone()];
    for rank in 1..n {
        for (a, b) in acc.iter_mut().zip(data4::<T>(rank, salt, len)) {
            *a = T::apply(*a, b, r);
        }
        out.push(acc.clone());
    }
    out
}

/// Asserts that `got` is `want` element by element ([`Ref4::same`]).
pub fn same4<T: Ref4>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(T::same(*g, *w), "{what}[{i}]: got {g:?}, want {w:?}");
    }
}
