//! The reductions over flat little-endian byte arrays (protocol §8.3,
//! with its exact float rules; protocol §17.3 for the element types and
//! reductions of feature bit 4, whose loops are in [`ext`]).
//!
//! An operand is a byte array of whole elements of one [`ElementType`],
//! little-endian, with no alignment requirement. Reductions work element by
//! element; the first array is the left operand, which is the lower rank's
//! partial when a reduce folds contributions in ascending rank order:
//!
//! * `sum`, `prod`: wrapping two's complement for integers; IEEE 754 binary
//!   arithmetic, round to nearest even, for floats (plain `+` and `*`: no
//!   fused operations, no reassociation). The NaN bits of a float sum or
//!   product are not fixed (protocol §8.3, "Exact float rules").
//! * `min`, `max`: signed order for `i32`/`i64`, unsigned for `u32`/`u64`;
//!   for floats IEEE 754-2019 `minimum`/`maximum`: -0 < +0, and if either
//!   operand is NaN the result is the left operand if it is NaN, else the
//!   right, with the NaN's bits unchanged.
//! * `land`, `lor`, `lxor` (integers but `u8`): 1 or 0 of the element width
//!   from `(a != 0) op (b != 0)`.
//! * `band`, `bor`, `bxor` (`u8` and integers): bitwise.
//!
//! The types and reductions of bit 4 are in [`ext`]'s summary. A
//! user-defined reduction ([`Reduction::User`]) has no built-in combine:
//! [`combine_into`] and [`fold`] refuse it (H1618) and [`ext::fold_user`]
//! folds it with the program's function.
//!
//! Refused pairs ([`Reduction::check`]), lengths that are not whole elements
//! and operands of different lengths are [`ArgumentError`]s (H1618).
//!
//! Speed: each (type, reduction) pair runs its own monomorphized loop over
//! `chunks_exact` with `from_le_bytes`/`to_le_bytes`, which the compiler
//! turns into SIMD code; the bitwise reductions run byte-wise whatever the
//! element width (the result is the same). `docs/performance.md` has the
//! figures against `memcpy`.

use crate::element::{ElementType, Reduction};
use crate::error::ArgumentError;

/// Checks a reduction call before any data moves (protocol §8.4): the pair must
/// be allowed ([`Reduction::check`]) and `len` bytes must be a whole number of
/// elements of `t`. Every failure is H1618.
///
/// ```
/// use sperli_wire::element::{ElementType, Reduction};
/// use sperli_wire::reduce::check_args;
/// assert!(check_args(16, ElementType::F64, Reduction::Sum).is_ok());
/// assert!(check_args(12, ElementType::F64, Reduction::Sum).is_err()); // 1.5 elements
/// assert!(check_args(0, ElementType::U8, Reduction::Bxor).is_ok());
/// assert!(check_args(8, ElementType::F64, Reduction::Bxor).is_err()); // refused pair
/// ```
pub fn check_args(len: usize, t: ElementType, r: Reduction) -> Result<(), ArgumentError> {
    r.check(t)?;
    let width = t.width();
    if len % width != 0 {
        return Err(ArgumentError::NotWholeElements { len, width });
    }
    Ok(())
}

/// Combines in place: `acc = acc ⊕ right`, element by element, with `acc` the
/// LEFT operand (protocol §8.3). A fold in ascending rank order starts `acc` as
/// rank 0's contribution and combines rank 1, 2, ... into it.
///
/// Fails with H1618, leaving `acc` untouched, if the pair is refused, `acc`
/// is not a whole number of elements, or `right` has another length.
///
/// ```
/// use sperli_wire::element::{ElementType, Reduction};
/// use sperli_wire::reduce::combine_into;
/// let mut acc: Vec<u8> = [1.5f64, -2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
/// let right: Vec<u8> = [0.25f64, 8.0].iter().flat_map(|x| x.to_le_bytes()).collect();
/// combine_into(&mut acc, &right, ElementType::F64, Reduction::Sum).unwrap();
/// assert_eq!(&acc[..8], &1.75f64.to_le_bytes());
/// assert_eq!(&acc[8..], &6.0f64.to_le_bytes());
/// assert!(combine_into(&mut acc, &right[..8], ElementType::F64, Reduction::Sum).is_err());
/// ```
pub fn combine_into(
    acc: &mut [u8],
    right: &[u8],
    t: ElementType,
    r: Reduction,
) -> Result<(), ArgumentError> {
    check_args(acc.len(), t, r)?;
    if right.len() != acc.len() {
        return Err(ArgumentError::LengthMismatch {
            left: acc.len(),
            right: right.len(),
        });
    }
    if r == Reduction::User {
        // Protocol §17.4: the program's function, not a built-in one.
        return Err(ArgumentError::Reduction { got: r.code() });
    }
    dispatch(acc, right, t, r);
    Ok(())
}

/// Combines two arrays into a new one: `left ⊕ right`, element by element
/// (protocol §8.3). Same checks and errors (H1618) as [`combine_into`].
///
/// ```
/// use sperli_wire::element::{ElementType, Reduction};
/// use sperli_wire::reduce::combine;
/// let l = i32::MAX.to_le_bytes();
/// let r = 1i32.to_le_bytes();
/// let out = combine(&l, &r, ElementType::I32, Reduction::Sum).unwrap();
/// assert_eq!(out, i32::MIN.to_le_bytes()); // wrapping
/// let out = combine(&l, &r, ElementType::U32, Reduction::Max).unwrap();
/// assert_eq!(out, i32::MAX.to_le_bytes()); // unsigned order: 0x7fffffff > 1
/// assert!(combine(&[1], &[2], ElementType::U8, Reduction::Sum).is_err()); // refused
/// ```
pub fn combine(
    left: &[u8],
    right: &[u8],
    t: ElementType,
    r: Reduction,
) -> Result<Vec<u8>, ArgumentError> {
    let mut acc = left.to_vec();
    combine_into(&mut acc, right, t, r)?;
    Ok(acc)
}

/// Folds contributions in the order given (ascending rank order for a
/// reduce, protocol §8.2): `((c0 ⊕ c1) ⊕ c2) ⊕ ...`. `None` if there are no
/// contributions; H1618 as for [`combine_into`] (the pair is checked even for
/// a single contribution).
///
/// ```
/// use sperli_wire::element::{ElementType, Reduction};
/// use sperli_wire::reduce::fold;
/// let parts = [[1u8, 0, 0, 0], [2, 0, 0, 0], [4, 0, 0, 0]];
/// let out = fold(parts.iter().map(|p| &p[..]), ElementType::U32, Reduction::Bor).unwrap();
/// assert_eq!(out, Some(vec![7, 0, 0, 0]));
/// assert_eq!(fold([], ElementType::U32, Reduction::Bor).unwrap(), None);
/// ```
pub fn fold<'a>(
    contributions: impl IntoIterator<Item = &'a [u8]>,
    t: ElementType,
    r: Reduction,
) -> Result<Option<Vec<u8>>, ArgumentError> {
    if r == Reduction::User {
        return Err(ArgumentError::Reduction { got: r.code() });
    }
    let mut it = contributions.into_iter();
    let Some(first) = it.next() else {
        r.check(t)?;
        return Ok(None);
    };
    check_args(first.len(), t, r)?;
    let mut acc = first.to_vec();
    for c in it {
        combine_into(&mut acc, c, t, r)?;
    }
    Ok(Some(acc))
}

/// A fixed-width little-endian element.
trait Elem: Copy {
    /// Width in bytes.
    const W: usize;
    /// Reads one element from exactly `W` bytes.
    fn load(b: &[u8]) -> Self;
    /// Writes one element into exactly `W` bytes.
    fn store(self, b: &mut [u8]);
}

macro_rules! elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const W: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
elem!(u8, i32, u32, i64, u64, f32, f64);

/// The one inner loop: `acc[i] = f(acc[i], right[i])`, monomorphized per
/// element type and operation. Lengths are checked by the caller.
#[inline(always)]
fn zip_with<T: Elem>(acc: &mut [u8], right: &[u8], f: impl Fn(T, T) -> T) {
    for (a, b) in acc.chunks_exact_mut(T::W).zip(right.chunks_exact(T::W)) {
        f(T::load(a), T::load(b)).store(a);
    }
}

/// Integer ops of one type, each its own monomorphized loop.
macro_rules! int_ops {
    ($t:ty, $acc:expr, $right:expr, $r:expr) => {
        match $r {
            Reduction::Sum => zip_with::<$t>($acc, $right, |a, b| a.wrapping_add(b)),
            Reduction::Prod => zip_with::<$t>($acc, $right, |a, b| a.wrapping_mul(b)),
            Reduction::Min => zip_with::<$t>($acc, $right, |a, b| if b < a { b } else { a }),
            Reduction::Max => zip_with::<$t>($acc, $right, |a, b| if b > a { b } else { a }),
            Reduction::Land => zip_with::<$t>($acc, $right, |a, b| <$t>::from((a != 0) & (b != 0))),
            Reduction::Lor => zip_with::<$t>($acc, $right, |a, b| <$t>::from((a != 0) | (b != 0))),
            Reduction::Lxor => zip_with::<$t>($acc, $right, |a, b| <$t>::from((a != 0) ^ (b != 0))),
            Reduction::Band | Reduction::Bor | Reduction::Bxor => bitwise($acc, $right, $r),
            _ => unreachable!("refused by check_args"),
        }
    };
}

/// Float ops of one type (sum, prod, min, max; the rest are refused before).
macro_rules! float_ops {
    ($t:ty, $acc:expr, $right:expr, $r:expr) => {
        match $r {
            Reduction::Sum => zip_with::<$t>($acc, $right, |a, b| a + b),
            Reduction::Prod => zip_with::<$t>($acc, $right, |a, b| a * b),
            // IEEE 754-2019 minimum. A NaN left wins; otherwise a NaN right
            // is taken because `a < b` and `a == b` are false against NaN.
            // Equal operands are either the same bits or -0 and +0, and
            // OR-ing their bits gives -0 for the latter.
            Reduction::Min => zip_with::<$t>($acc, $right, |a, b| {
                if a.is_nan() || a < b {
                    a
                } else if a == b {
                    <$t>::from_bits(a.to_bits() | b.to_bits())
                } else {
                    b
                }
            }),
            // maximum: the same with the order reversed; AND-ing the bits
            // of -0 and +0 gives +0.
            Reduction::Max => zip_with::<$t>($acc, $right, |a, b| {
                if a.is_nan() || a > b {
                    a
                } else if a == b {
                    <$t>::from_bits(a.to_bits() & b.to_bits())
                } else {
                    b
                }
            }),
            _ => unreachable!("refused by check_args"),
        }
    };
}

/// Bitwise ops are width-independent: run them over the bytes.
#[inline(always)]
fn bitwise(acc: &mut [u8], right: &[u8], r: Reduction) {
    match r {
        Reduction::Band => zip_with::<u8>(acc, right, |a, b| a & b),
        Reduction::Bor => zip_with::<u8>(acc, right, |a, b| a | b),
        Reduction::Bxor => zip_with::<u8>(acc, right, |a, b| a ^ b),
        _ => unreachable!("only called for bitwise reductions"),
    }
}

/// Runs the loop for a checked pair on operands of equal, whole length.
fn dispatch(acc: &mut [u8], right: &[u8], t: ElementType, r: Reduction) {
    match t {
        ElementType::U8 => bitwise(acc, right, r),
        ElementType::I32 => int_ops!(i32, acc, right, r),
        ElementType::U32 => int_ops!(u32, acc, right, r),
        ElementType::I64 => int_ops!(i64, acc, right, r),
        ElementType::U64 => int_ops!(u64, acc, right, r),
        ElementType::F32 => float_ops!(f32, acc, right, r),
        ElementType::F64 => float_ops!(f64, acc, right, r),
        _ => ext::dispatch_bit4(acc, right, t, r),
    }
}

pub mod ext;

#[cfg(test)]
mod tests;
