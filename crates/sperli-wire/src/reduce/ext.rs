//! The folds of HELLO feature bit 4 (protocol §17.3) over flat
//! little-endian byte arrays, for every element type and reduction of
//! [`ElementType`] of codes 7..=17 and [`Reduction`] 11..=12, called by
//! [`reduce`](super)'s functions (the v1 pairs run the loops there):
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
//! The left operand is always the lower ranks' partial;
//! [`fold`](super::fold) folds in the order given (ascending rank order). A user-defined reduction
//! (code 13) has no built-in combine: [`fold_user`] folds it with the
//! program's function in the same order.

use super::{bitwise, check_args, zip_with, Elem};
use crate::element::{ElementType, Reduction};
use crate::error::ArgumentError;

/// Runs the loop of a checked pair of bit 4 (protocol §17.3) on operands
/// of equal, whole length: a type of code 7..=17, any built-in reduction
/// the table of §17.2 allows for it.
pub(super) fn dispatch_bit4(acc: &mut [u8], right: &[u8], t: ElementType, r: Reduction) {
    use ElementType as T;
    match t {
        T::Bool => zip_with::<u8>(acc, right, |a, b| {
            let (a, b) = (a != 0, b != 0);
            u8::from(match r {
                Reduction::Land => a & b,
                Reduction::Lor => a | b,
                _ => a ^ b, // lxor; the rest are refused
            })
        }),
        T::I8 => int_ops!(i8, acc, right, r),
        T::I16 => int_ops!(i16, acc, right, r),
        T::U16 => int_ops!(u16, acc, right, r),
        T::Complex64 => complex::<f32>(acc, right, r),
        T::Complex128 => complex::<f64>(acc, right, r),
        T::F32I32 => loc::<f32>(acc, right, r),
        T::F64I32 => loc::<f64>(acc, right, r),
        T::I64I32 => loc::<i64>(acc, right, r),
        T::I32I32 => loc::<i32>(acc, right, r),
        T::I16I32 => loc::<i16>(acc, right, r),
        _ => unreachable!("v1 types run the loops of reduce"),
    }
}

/// The ascending left fold of a user-defined reduction (protocol §17.4):
/// `f(acc, c_i)` for i = 1, 2, ..., `acc` starting as `c_0` and always the
/// left operand, whatever the function's commutative flag. Every
/// contribution must be whole elements of `t` and as long as the first
/// (H1618).
///
/// ```
/// use sperli_wire::element::ElementType as T;
/// use sperli_wire::reduce::ext::fold_user;
/// // A non-commutative function: "keep the left, add 1".
/// let parts: [&[u8]; 3] = [&[7], &[0], &[0]];
/// let out = fold_user(parts, T::U8, |acc, _right| acc[0] += 1).unwrap();
/// assert_eq!(out, Some(vec![9]));
/// ```
pub fn fold_user<'a>(
    contributions: impl IntoIterator<Item = &'a [u8]>,
    t: ElementType,
    mut f: impl FnMut(&mut [u8], &[u8]),
) -> Result<Option<Vec<u8>>, ArgumentError> {
    let mut it = contributions.into_iter();
    let Some(first) = it.next() else {
        return Ok(None);
    };
    check_args(first.len(), t, Reduction::User)?;
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
fn loc<V: LocValue>(acc: &mut [u8], right: &[u8], r: Reduction) {
    let w = V::W + 4;
    let max = r == Reduction::Maxloc;
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
