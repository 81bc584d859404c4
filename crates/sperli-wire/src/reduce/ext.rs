//! The folds of HELLO feature bit 4 (protocol §17.3) over flat
//! little-endian byte arrays, for every element type and reduction of
//! [`element_ext`](crate::element_ext): the v1 pairs run the loops of
//! [`reduce`](super) (the same bits), the new ones their own:
//!
//! * `bool`: a byte is true when not 0; land, lor, lxor give 1 or 0.
//! * `i8`, `i16`, `u16`: as the v1 integers (wrapping sum and prod, signed
//!   or unsigned min and max, logical 1/0 of the width, bitwise).
//! * complex sum `(ar + br, ai + bi)`; complex prod `re = ar·br − ai·bi`,
//!   `im = ar·bi + ai·br`, each product and each sum one IEEE operation of
//!   the component format (plain `*`, `+`, `-`: no fused multiply-add, no
//!   wider format, no recovery of infinities).
//! * minloc, maxloc on (value, i32 index): the left NaN wins, then the
//!   smaller (larger) value, −0 below +0; equal values take the smaller
//!   index.
//!
//! The left operand is always the lower ranks' partial; [`fold_ext`] folds
//! in the order given (ascending rank order). A user-defined reduction
//! (code 13) has no built-in combine: [`fold_user`] folds it with the
//! program's function in the same order.

use super::{bitwise, zip_with, Elem};
use crate::element::Reduction;
use crate::element_ext::{ExtElementType, ExtReduction};
use crate::error::ArgumentError;

/// Checks a reduction call with bit 4 before any data moves (protocol
/// §17.2, §8.4): the pair must be allowed and `len` bytes a whole number
/// of elements. Every failure is H1618. A user-defined reduction passes
/// with every element type.
///
/// ```
/// use sperli_wire::element_ext::{ExtElementType as T, ExtReduction as R};
/// use sperli_wire::reduce::ext::check_args_ext;
/// assert!(check_args_ext(24, T::F64I32, R::Minloc).is_ok());
/// assert!(check_args_ext(18, T::F64I32, R::Minloc).is_err()); // 1.5 pairs
/// assert!(check_args_ext(8, T::F64, R::Maxloc).is_err()); // refused pair
/// ```
pub fn check_args_ext(len: usize, t: ExtElementType, r: ExtReduction) -> Result<(), ArgumentError> {
    r.check(t)?;
    let width = t.width();
    if len % width != 0 {
        return Err(ArgumentError::NotWholeElements { len, width });
    }
    Ok(())
}

/// Combines in place: `acc = acc ⊕ right`, `acc` the LEFT operand
/// (protocol §17.3). H1618, `acc` untouched, for a refused pair, lengths
/// that are not whole elements or that differ, and for [`ExtReduction::User`]
/// (`ArgumentError::Reduction`: a user-defined reduction has no built-in
/// combine; fold it with [`fold_user`]).
///
/// ```
/// use sperli_wire::element_ext::{ExtElementType as T, ExtReduction as R};
/// use sperli_wire::reduce::ext::combine_into_ext;
/// // (1+2i)(3+4i) = -5+10i
/// let mut acc: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
/// let right: Vec<u8> = [3.0f32, 4.0].iter().flat_map(|x| x.to_le_bytes()).collect();
/// combine_into_ext(&mut acc, &right, T::Complex64, R::V1(sperli_wire::Reduction::Prod)).unwrap();
/// assert_eq!(&acc[..4], &(-5.0f32).to_le_bytes());
/// assert_eq!(&acc[4..], &10.0f32.to_le_bytes());
/// ```
pub fn combine_into_ext(
    acc: &mut [u8],
    right: &[u8],
    t: ExtElementType,
    r: ExtReduction,
) -> Result<(), ArgumentError> {
    check_args_ext(acc.len(), t, r)?;
    if right.len() != acc.len() {
        return Err(ArgumentError::LengthMismatch {
            left: acc.len(),
            right: right.len(),
        });
    }
    if let (Some(v1), ExtReduction::V1(red)) = (t.v1(), r) {
        return super::combine_into(acc, right, v1, red);
    }
    use ExtElementType as T;
    match (t, r) {
        (_, ExtReduction::User) => return Err(ArgumentError::Reduction { got: r.code() }),
        (T::Bool, ExtReduction::V1(red)) => zip_with::<u8>(acc, right, |a, b| {
            let (a, b) = (a != 0, b != 0);
            u8::from(match red {
                Reduction::Land => a & b,
                Reduction::Lor => a | b,
                _ => a ^ b, // lxor; the rest are refused
            })
        }),
        (T::I8, ExtReduction::V1(red)) => int_ops!(i8, acc, right, red),
        (T::I16, ExtReduction::V1(red)) => int_ops!(i16, acc, right, red),
        (T::U16, ExtReduction::V1(red)) => int_ops!(u16, acc, right, red),
        (T::Complex64, ExtReduction::V1(red)) => complex::<f32>(acc, right, red),
        (T::Complex128, ExtReduction::V1(red)) => complex::<f64>(acc, right, red),
        (T::F32I32, _) => loc::<f32>(acc, right, r),
        (T::F64I32, _) => loc::<f64>(acc, right, r),
        (T::I64I32, _) => loc::<i64>(acc, right, r),
        (T::I32I32, _) => loc::<i32>(acc, right, r),
        (T::I16I32, _) => loc::<i16>(acc, right, r),
        _ => unreachable!("refused by check_args_ext"),
    }
    Ok(())
}

/// `left ⊕ right` into a new array (protocol §17.3); errors as
/// [`combine_into_ext`].
pub fn combine_ext(
    left: &[u8],
    right: &[u8],
    t: ExtElementType,
    r: ExtReduction,
) -> Result<Vec<u8>, ArgumentError> {
    let mut acc = left.to_vec();
    combine_into_ext(&mut acc, right, t, r)?;
    Ok(acc)
}

/// The ascending left fold `((c0 ⊕ c1) ⊕ c2) ⊕ ...` (protocol §8.2,
/// §17.3); `None` for no contributions; errors as [`combine_into_ext`]
/// (checked even for one contribution).
///
/// ```
/// use sperli_wire::element_ext::{ExtElementType as T, ExtReduction as R};
/// use sperli_wire::reduce::ext::fold_ext;
/// let pair = |v: i32, i: i32| [v.to_le_bytes(), i.to_le_bytes()].concat();
/// let parts = [pair(5, 0), pair(2, 1), pair(2, 2)];
/// let out = fold_ext(parts.iter().map(|p| &p[..]), T::I32I32, R::Minloc).unwrap();
/// assert_eq!(out, Some(pair(2, 1))); // equal values: the smaller index
/// ```
pub fn fold_ext<'a>(
    contributions: impl IntoIterator<Item = &'a [u8]>,
    t: ExtElementType,
    r: ExtReduction,
) -> Result<Option<Vec<u8>>, ArgumentError> {
    if r == ExtReduction::User {
        return Err(ArgumentError::Reduction { got: r.code() });
    }
    let mut it = contributions.into_iter();
    let Some(first) = it.next() else {
        r.check(t)?;
        return Ok(None);
    };
    check_args_ext(first.len(), t, r)?;
    let mut acc = first.to_vec();
    for c in it {
        combine_into_ext(&mut acc, c, t, r)?;
    }
    Ok(Some(acc))
}

/// The ascending left fold of a user-defined reduction (protocol §17.4):
/// `f(acc, c_i)` for i = 1, 2, ..., `acc` starting as `c_0` and always the
/// left operand, whatever the function's commutative flag. Every
/// contribution must be whole elements of `t` and as long as the first
/// (H1618).
///
/// ```
/// use sperli_wire::element_ext::ExtElementType as T;
/// use sperli_wire::reduce::ext::fold_user;
/// // A non-commutative function: "keep the left, add 1".
/// let parts: [&[u8]; 3] = [&[7], &[0], &[0]];
/// let out = fold_user(parts, T::U8, |acc, _right| acc[0] += 1).unwrap();
/// assert_eq!(out, Some(vec![9]));
/// ```
pub fn fold_user<'a>(
    contributions: impl IntoIterator<Item = &'a [u8]>,
    t: ExtElementType,
    mut f: impl FnMut(&mut [u8], &[u8]),
) -> Result<Option<Vec<u8>>, ArgumentError> {
    let mut it = contributions.into_iter();
    let Some(first) = it.next() else {
        return Ok(None);
    };
    check_args_ext(first.len(), t, ExtReduction::User)?;
    let mut acc = first.to_vec();
    for c in it {
        if c.len() != acc.len() {
            return Err(ArgumentError::LengthMismatch {
                left: acc.len(),
                right: c.len(),
            });
        }
        f(&mut acc, c);
    }
    Ok(Some(acc))
}

elem!(i8, i16, u16);

/// A complex component type: f32 or f64 with plain IEEE operations.
trait Component:
    Elem + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self>
{
}
impl Component for f32 {}
impl Component for f64 {}

/// Complex sum and product (protocol §17.3), element = (re, im) of `C`.
fn complex<C: Component>(acc: &mut [u8], right: &[u8], r: Reduction) {
    let w = C::W;
    for (a, b) in acc.chunks_exact_mut(2 * w).zip(right.chunks_exact(2 * w)) {
        let (ar, ai) = (C::load(&a[..w]), C::load(&a[w..]));
        let (br, bi) = (C::load(&b[..w]), C::load(&b[w..]));
        let (re, im) = match r {
            Reduction::Sum => (ar + br, ai + bi),
            // Protocol §17.3: re = (ar·br) − (ai·bi), im = (ar·bi) + (ai·br).
            _ => (ar * br - ai * bi, ar * bi + ai * br),
        };
        re.store(&mut a[..w]);
        im.store(&mut a[w..]);
    }
}

/// The value of a value-index pair and its order (protocol §17.3).
trait LocValue: Elem + PartialOrd {
    /// Whether the value is a NaN (floats only).
    fn nan(self) -> bool {
        false
    }
    /// The order of §17.3: −0 below +0 for floats.
    fn below(self, other: Self) -> bool {
        self < other
    }
}
impl LocValue for i16 {}
impl LocValue for i32 {}
impl LocValue for i64 {}
macro_rules! float_loc {
    ($($t:ty),*) => {$(
        impl LocValue for $t {
            fn nan(self) -> bool {
                self.is_nan()
            }
            fn below(self, other: Self) -> bool {
                self < other
                    || (self == other && self.is_sign_negative() && !other.is_sign_negative())
            }
        }
    )*};
}
float_loc!(f32, f64);

/// minloc / maxloc on packed (value V, index i32) pairs.
fn loc<V: LocValue>(acc: &mut [u8], right: &[u8], r: ExtReduction) {
    let w = V::W + 4;
    let max = r == ExtReduction::Maxloc;
    for (a, b) in acc.chunks_exact_mut(w).zip(right.chunks_exact(w)) {
        let (u, i) = (V::load(&a[..V::W]), i32::load(&a[V::W..]));
        let (v, j) = (V::load(&b[..V::W]), i32::load(&b[V::W..]));
        let take_right = if u.nan() {
            false
        } else if v.nan() {
            true
        } else if max {
            u.below(v)
        } else {
            v.below(u)
        };
        if take_right {
            a.copy_from_slice(b);
        } else if !u.nan() && !u.below(v) && !v.below(u) && j < i {
            // Equal values (the same bits): the smaller index.
            j.store(&mut a[V::W..]);
        }
    }
}

#[cfg(test)]
mod tests;
