//! The element types and reductions of HELLO feature bit 4 (protocol
//! §17.2), together with those of v1 (§8.3): element types 0..=17,
//! reductions 1..=13, and which pairs are allowed.
//!
//! [`ExtElementType`] and [`ExtReduction`] hold every code; the v1 ones
//! map to [`ElementType`] and [`Reduction`] (whose loops fold them, with
//! the same bits). The folds are in [`reduce::ext`](crate::reduce::ext).

use std::fmt;

use crate::element::{ElementType, Reduction};
use crate::error::ArgumentError;

/// Every element type of protocol §8.3 and §17.2, by code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ExtElementType {
    /// 0: unsigned byte (v1).
    U8 = 0,
    /// 1: signed 32-bit (v1).
    I32 = 1,
    /// 2: unsigned 32-bit (v1).
    U32 = 2,
    /// 3: signed 64-bit (v1).
    I64 = 3,
    /// 4: unsigned 64-bit (v1).
    U64 = 4,
    /// 5: IEEE 754 binary32 (v1).
    F32 = 5,
    /// 6: IEEE 754 binary64 (v1).
    F64 = 6,
    /// 7: one byte, 0 false, anything else true.
    Bool = 7,
    /// 8: signed 8-bit.
    I8 = 8,
    /// 9: signed 16-bit.
    I16 = 9,
    /// 10: unsigned 16-bit.
    U16 = 10,
    /// 11: two f32, real then imaginary.
    Complex64 = 11,
    /// 12: two f64, real then imaginary.
    Complex128 = 12,
    /// 13: f32 value, i32 index (MPI_FLOAT_INT), 8 bytes.
    F32I32 = 13,
    /// 14: f64 value, i32 index (MPI_DOUBLE_INT), 12 bytes.
    F64I32 = 14,
    /// 15: i64 value, i32 index (MPI_LONG_INT), 12 bytes.
    I64I32 = 15,
    /// 16: i32 value, i32 index (MPI_2INT), 8 bytes.
    I32I32 = 16,
    /// 17: i16 value, i32 index (MPI_SHORT_INT), 6 bytes.
    I16I32 = 17,
}

impl ExtElementType {
    /// Every type in code order.
    pub const ALL: [ExtElementType; 18] = [
        Self::U8,
        Self::I32,
        Self::U32,
        Self::I64,
        Self::U64,
        Self::F32,
        Self::F64,
        Self::Bool,
        Self::I8,
        Self::I16,
        Self::U16,
        Self::Complex64,
        Self::Complex128,
        Self::F32I32,
        Self::F64I32,
        Self::I64I32,
        Self::I32I32,
        Self::I16I32,
    ];

    /// The type for a code 0..=17, or H1618.
    pub fn from_code(code: u8) -> Result<Self, ArgumentError> {
        Self::ALL
            .get(usize::from(code))
            .copied()
            .ok_or(ArgumentError::ElementType { got: code })
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The v1 type of the same code (codes 0..=6).
    pub fn v1(self) -> Option<ElementType> {
        ElementType::from_code(self.code()).ok()
    }

    /// Bytes per element (protocol §17.2).
    pub fn width(self) -> usize {
        match self.v1() {
            Some(t) => t.width(),
            None => match self {
                Self::Bool | Self::I8 => 1,
                Self::I16 | Self::U16 => 2,
                Self::Complex64 | Self::F32I32 | Self::I32I32 => 8,
                Self::Complex128 => 16,
                Self::F64I32 | Self::I64I32 => 12,
                _ => 6, // I16I32
            },
        }
    }

    /// The name used in the vectors file and errors.
    pub fn name(self) -> &'static str {
        match self.v1() {
            Some(t) => t.name(),
            None => match self {
                Self::Bool => "bool",
                Self::I8 => "i8",
                Self::I16 => "i16",
                Self::U16 => "u16",
                Self::Complex64 => "complex64",
                Self::Complex128 => "complex128",
                Self::F32I32 => "f32_i32",
                Self::F64I32 => "f64_i32",
                Self::I64I32 => "i64_i32",
                Self::I32I32 => "i32_i32",
                _ => "i16_i32",
            },
        }
    }

    /// The type with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether this is one of the five value-index pairs (codes 13..=17).
    pub fn is_pair(self) -> bool {
        self.code() >= 13
    }

    /// Whether this is complex64 or complex128.
    pub fn is_complex(self) -> bool {
        matches!(self, Self::Complex64 | Self::Complex128)
    }

    /// The chunk alignment of a pipelined stream of this type (protocol
    /// §17.3): lcm(8, width).
    ///
    /// ```
    /// use sperli_wire::element_ext::ExtElementType as T;
    /// assert_eq!(T::F64.chunk_align(), 8);
    /// assert_eq!(T::Complex128.chunk_align(), 16);
    /// assert_eq!(T::F64I32.chunk_align(), 24);
    /// assert_eq!(T::I16I32.chunk_align(), 24);
    /// ```
    pub fn chunk_align(self) -> usize {
        let w = self.width();
        let gcd = |mut a: usize, mut b: usize| {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        8 * w / gcd(8, w)
    }
}

impl From<ElementType> for ExtElementType {
    fn from(t: ElementType) -> Self {
        Self::ALL[usize::from(t.code())]
    }
}

impl fmt::Display for ExtElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every reduction of protocol §8.3 and §17.2, by code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtReduction {
    /// 1..=10: a v1 reduction.
    V1(Reduction),
    /// 11: minloc (value-index pairs).
    Minloc,
    /// 12: maxloc (value-index pairs).
    Maxloc,
    /// 13: a user-defined reduction, opaque to the wire (protocol §17.4).
    User,
}

impl ExtReduction {
    /// Every reduction in code order.
    pub fn all() -> impl Iterator<Item = ExtReduction> {
        Reduction::ALL.into_iter().map(ExtReduction::V1).chain([
            Self::Minloc,
            Self::Maxloc,
            Self::User,
        ])
    }

    /// The reduction for a code 1..=13, or H1618.
    pub fn from_code(code: u8) -> Result<Self, ArgumentError> {
        match code {
            11 => Ok(Self::Minloc),
            12 => Ok(Self::Maxloc),
            13 => Ok(Self::User),
            c => Reduction::from_code(c).map(Self::V1),
        }
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        match self {
            Self::V1(r) => r.code(),
            Self::Minloc => 11,
            Self::Maxloc => 12,
            Self::User => 13,
        }
    }

    /// The name used in the vectors file and errors.
    pub fn name(self) -> &'static str {
        match self {
            Self::V1(r) => r.name(),
            Self::Minloc => "minloc",
            Self::Maxloc => "maxloc",
            Self::User => "user",
        }
    }

    /// The reduction with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::all().find(|r| r.name() == name)
    }

    /// Whether this pair is allowed (protocol §17.2, with §8.3 for the v1
    /// types); H1618 if not.
    ///
    /// ```
    /// use sperli_wire::element::Reduction;
    /// use sperli_wire::element_ext::{ExtElementType as T, ExtReduction as R};
    /// assert!(R::V1(Reduction::Prod).check(T::Complex64).is_ok());
    /// assert!(R::V1(Reduction::Min).check(T::Complex64).is_err());
    /// assert!(R::Minloc.check(T::F64I32).is_ok());
    /// assert!(R::Minloc.check(T::F64).is_err());
    /// assert!(R::V1(Reduction::Lxor).check(T::Bool).is_ok());
    /// assert!(R::V1(Reduction::Bor).check(T::Bool).is_err());
    /// assert!(R::User.check(T::I16I32).is_ok());
    /// ```
    pub fn check(self, t: ExtElementType) -> Result<(), ArgumentError> {
        use ExtElementType as T;
        use Reduction::*;
        let allowed = match (self, t.v1()) {
            (Self::User, _) => true,
            (Self::V1(r), Some(v1)) => return r.check(v1),
            (Self::Minloc | Self::Maxloc, _) => t.is_pair(),
            (Self::V1(r), None) => match t {
                T::Bool => matches!(r, Land | Lor | Lxor),
                T::I8 | T::I16 | T::U16 => true,
                T::Complex64 | T::Complex128 => matches!(r, Sum | Prod),
                _ => false, // the pairs take only minloc and maxloc
            },
        };
        crate::element::allowed_or_refused(allowed, t.name(), self.name())
    }
}

impl fmt::Display for ExtReduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_names_and_the_table() {
        for t in ExtElementType::ALL {
            assert_eq!(ExtElementType::from_code(t.code()), Ok(t));
            assert_eq!(ExtElementType::from_name(t.name()), Some(t));
        }
        assert!(ExtElementType::from_code(18).is_err());
        for r in ExtReduction::all() {
            assert_eq!(ExtReduction::from_code(r.code()), Ok(r));
            assert_eq!(ExtReduction::from_name(r.name()), Some(r));
        }
        assert!(ExtReduction::from_code(0).is_err());
        assert!(ExtReduction::from_code(14).is_err());
        let widths: Vec<usize> = ExtElementType::ALL.iter().map(|t| t.width()).collect();
        assert_eq!(
            widths,
            [1, 4, 4, 8, 8, 4, 8, 1, 1, 2, 2, 8, 16, 8, 12, 12, 8, 6]
        );
        let allowed = ExtElementType::ALL
            .iter()
            .flat_map(|t| ExtReduction::all().map(move |r| (*t, r)))
            .filter(|(t, r)| r.check(*t).is_ok())
            .count();
        // v1 (51) and user on each of the 7; bool 3 + user; i8, i16, u16
        // 10 + user each; complex 2 + user each; pairs 2 + user each.
        assert_eq!(allowed, 51 + 7 + 4 + 3 * 11 + 2 * 3 + 5 * 3);
    }
}
