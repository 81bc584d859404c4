//! Element types and reductions: the seven types and ten reductions of v1
//! (protocol §8.3) and those of HELLO feature bit 4 (protocol §17.2),
//! one enum each, by wire code. A code of bit 4 ([`ElementType::needs_bit4`],
//! [`Reduction::needs_bit4`]) is used only when every rank announced the
//! bit (protocol §17.1).

use std::fmt;

use crate::error::ArgumentError;

/// Every element type of protocol §8.3 (codes 0..=6) and §17.2 (7..=17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ElementType {
    /// 0: unsigned byte.
    U8 = 0,
    /// 1: signed 32-bit.
    I32 = 1,
    /// 2: unsigned 32-bit.
    U32 = 2,
    /// 3: signed 64-bit.
    I64 = 3,
    /// 4: unsigned 64-bit.
    U64 = 4,
    /// 5: IEEE 754 binary32.
    F32 = 5,
    /// 6: IEEE 754 binary64.
    F64 = 6,
    /// 7: one byte, 0 false, anything else true (bit 4, protocol §17.2).
    Bool = 7,
    /// 8: signed 8-bit (bit 4).
    I8 = 8,
    /// 9: signed 16-bit (bit 4).
    I16 = 9,
    /// 10: unsigned 16-bit (bit 4).
    U16 = 10,
    /// 11: two f32, real then imaginary (bit 4).
    Complex64 = 11,
    /// 12: two f64, real then imaginary (bit 4).
    Complex128 = 12,
    /// 13: f32 value, i32 index (MPI_FLOAT_INT), 8 bytes (bit 4).
    F32I32 = 13,
    /// 14: f64 value, i32 index (MPI_DOUBLE_INT), 12 bytes (bit 4).
    F64I32 = 14,
    /// 15: i64 value, i32 index (MPI_LONG_INT), 12 bytes (bit 4).
    I64I32 = 15,
    /// 16: i32 value, i32 index (MPI_2INT), 8 bytes (bit 4).
    I32I32 = 16,
    /// 17: i16 value, i32 index (MPI_SHORT_INT), 6 bytes (bit 4).
    I16I32 = 17,
}

impl ElementType {
    /// Every type in code order.
    pub const ALL: [ElementType; 18] = [
        ElementType::U8,
        ElementType::I32,
        ElementType::U32,
        ElementType::I64,
        ElementType::U64,
        ElementType::F32,
        ElementType::F64,
        ElementType::Bool,
        ElementType::I8,
        ElementType::I16,
        ElementType::U16,
        ElementType::Complex64,
        ElementType::Complex128,
        ElementType::F32I32,
        ElementType::F64I32,
        ElementType::I64I32,
        ElementType::I32I32,
        ElementType::I16I32,
    ];

    /// The seven v1 types (protocol §8.3), in code order.
    pub const V1: [ElementType; 7] = [
        ElementType::U8,
        ElementType::I32,
        ElementType::U32,
        ElementType::I64,
        ElementType::U64,
        ElementType::F32,
        ElementType::F64,
    ];

    /// The type for a code 0..=17, or H1618 for a code above 17. Whether
    /// a code above 6 may be used depends on feature bit 4
    /// ([`needs_bit4`](Self::needs_bit4), protocol §17.1).
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

    /// Whether this type exists only with feature bit 4 (codes 7..=17,
    /// protocol §17.1).
    pub fn needs_bit4(self) -> bool {
        self.code() > 6
    }

    /// Bytes per element (protocol §8.3, §17.2): 1, 2, 4, 6, 8, 12 or 16.
    pub fn width(self) -> usize {
        use ElementType::*;
        match self {
            U8 | Bool | I8 => 1,
            I16 | U16 => 2,
            I32 | U32 | F32 => 4,
            I16I32 => 6,
            I64 | U64 | F64 | Complex64 | F32I32 | I32I32 => 8,
            F64I32 | I64I32 => 12,
            Complex128 => 16,
        }
    }

    /// The name used in the vectors file and errors (`u8`, `i32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ElementType::U8 => "u8",
            ElementType::I32 => "i32",
            ElementType::U32 => "u32",
            ElementType::I64 => "i64",
            ElementType::U64 => "u64",
            ElementType::F32 => "f32",
            ElementType::F64 => "f64",
            ElementType::Bool => "bool",
            ElementType::I8 => "i8",
            ElementType::I16 => "i16",
            ElementType::U16 => "u16",
            ElementType::Complex64 => "complex64",
            ElementType::Complex128 => "complex128",
            ElementType::F32I32 => "f32_i32",
            ElementType::F64I32 => "f64_i32",
            ElementType::I64I32 => "i64_i32",
            ElementType::I32I32 => "i32_i32",
            ElementType::I16I32 => "i16_i32",
        }
    }

    /// The type with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether this is a (real) floating-point type: f32 or f64.
    pub fn is_float(self) -> bool {
        matches!(self, ElementType::F32 | ElementType::F64)
    }

    /// Whether this is one of the five value-index pairs (codes 13..=17).
    pub fn is_pair(self) -> bool {
        self.code() >= 13
    }

    /// Whether this is complex64 or complex128.
    pub fn is_complex(self) -> bool {
        matches!(self, ElementType::Complex64 | ElementType::Complex128)
    }

    /// The chunk alignment of a pipelined stream of this type with feature
    /// bit 4 (protocol §17.3): lcm(8, width).
    ///
    /// ```
    /// use sperli_wire::element::ElementType as T;
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

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every reduction of protocol §8.3 (codes 1..=10) and §17.2 (11..=13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Reduction {
    /// 1: sum (wrapping for integers).
    Sum = 1,
    /// 2: product (wrapping for integers).
    Prod = 2,
    /// 3: minimum.
    Min = 3,
    /// 4: maximum.
    Max = 4,
    /// 5: logical and.
    Land = 5,
    /// 6: logical or.
    Lor = 6,
    /// 7: logical exclusive or.
    Lxor = 7,
    /// 8: bitwise and.
    Band = 8,
    /// 9: bitwise or.
    Bor = 9,
    /// 10: bitwise exclusive or.
    Bxor = 10,
    /// 11: minloc on value-index pairs (bit 4, protocol §17.3).
    Minloc = 11,
    /// 12: maxloc on value-index pairs (bit 4, protocol §17.3).
    Maxloc = 12,
    /// 13: a user-defined reduction, opaque to the wire (bit 4, protocol
    /// §17.4): the program's function folds it.
    User = 13,
}

impl Reduction {
    /// Every reduction in code order.
    pub const ALL: [Reduction; 13] = [
        Reduction::Sum,
        Reduction::Prod,
        Reduction::Min,
        Reduction::Max,
        Reduction::Land,
        Reduction::Lor,
        Reduction::Lxor,
        Reduction::Band,
        Reduction::Bor,
        Reduction::Bxor,
        Reduction::Minloc,
        Reduction::Maxloc,
        Reduction::User,
    ];

    /// The ten v1 reductions (protocol §8.3), in code order.
    pub const V1: [Reduction; 10] = [
        Reduction::Sum,
        Reduction::Prod,
        Reduction::Min,
        Reduction::Max,
        Reduction::Land,
        Reduction::Lor,
        Reduction::Lxor,
        Reduction::Band,
        Reduction::Bor,
        Reduction::Bxor,
    ];

    /// The reduction for a code 1..=13, or H1618 for 0 or a code above 13.
    /// Whether a code above 10 may be used depends on feature bit 4
    /// ([`needs_bit4`](Self::needs_bit4), protocol §17.1).
    pub fn from_code(code: u8) -> Result<Self, ArgumentError> {
        usize::from(code)
            .checked_sub(1)
            .and_then(|i| Self::ALL.get(i))
            .copied()
            .ok_or(ArgumentError::Reduction { got: code })
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Whether this reduction exists only with feature bit 4 (codes
    /// 11..=13, protocol §17.1).
    pub fn needs_bit4(self) -> bool {
        self.code() > 10
    }

    /// The name used in the vectors file and errors (`sum`, `land`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Prod => "prod",
            Reduction::Min => "min",
            Reduction::Max => "max",
            Reduction::Land => "land",
            Reduction::Lor => "lor",
            Reduction::Lxor => "lxor",
            Reduction::Band => "band",
            Reduction::Bor => "bor",
            Reduction::Bxor => "bxor",
            Reduction::Minloc => "minloc",
            Reduction::Maxloc => "maxloc",
            Reduction::User => "user",
        }
    }

    /// The reduction with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether this pair is allowed (protocol §8.3's table for the v1
    /// types, §17.2's for the others; minloc and maxloc only on the pairs,
    /// user on every type); H1618 if not. Feature bit 4 is judged apart
    /// ([`needs_bit4`](Self::needs_bit4)).
    ///
    /// ```
    /// use sperli_wire::element::{ElementType as T, Reduction as R};
    /// assert!(R::Sum.check(T::F64).is_ok());
    /// assert!(R::Sum.check(T::U8).is_err());
    /// assert!(R::Bxor.check(T::F32).is_err());
    /// assert!(R::Prod.check(T::Complex64).is_ok());
    /// assert!(R::Min.check(T::Complex64).is_err());
    /// assert!(R::Minloc.check(T::F64I32).is_ok());
    /// assert!(R::Minloc.check(T::F64).is_err());
    /// assert!(R::Lxor.check(T::Bool).is_ok());
    /// assert!(R::Bor.check(T::Bool).is_err());
    /// assert!(R::User.check(T::I16I32).is_ok());
    /// ```
    pub fn check(self, t: ElementType) -> Result<(), ArgumentError> {
        use ElementType as T;
        use Reduction::*;
        let allowed = match self {
            User => true,
            Minloc | Maxloc => t.is_pair(),
            _ if t.is_pair() => false,
            Sum | Prod => t != T::U8 && t != T::Bool,
            Min | Max => !matches!(t, T::U8 | T::Bool) && !t.is_complex(),
            Land | Lor | Lxor => t != T::U8 && !t.is_float() && !t.is_complex(),
            Band | Bor | Bxor => !t.is_float() && !t.is_complex() && t != T::Bool,
        };
        allowed_or_refused(allowed, t.name(), self.name())
    }
}

/// `Ok` when `allowed`, else the refused pair (H1618): the one place the
/// tables of protocol §8.3 and §17.2 turn into an error.
pub(crate) fn allowed_or_refused(
    allowed: bool,
    element_type: &'static str,
    reduction: &'static str,
) -> Result<(), ArgumentError> {
    if allowed {
        Ok(())
    } else {
        Err(ArgumentError::Refused {
            element_type,
            reduction,
        })
    }
}

impl fmt::Display for Reduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_refusals() {
        for t in ElementType::ALL {
            assert_eq!(ElementType::from_code(t.code()), Ok(t));
            assert_eq!(ElementType::from_name(t.name()), Some(t));
            assert_eq!(t.needs_bit4(), !ElementType::V1.contains(&t));
        }
        for r in Reduction::ALL {
            assert_eq!(Reduction::from_code(r.code()), Ok(r));
            assert_eq!(Reduction::from_name(r.name()), Some(r));
            assert_eq!(r.needs_bit4(), !Reduction::V1.contains(&r));
        }
        assert!(ElementType::from_code(18).is_err());
        assert!(Reduction::from_code(0).is_err());
        assert!(Reduction::from_code(14).is_err());
        let widths: Vec<usize> = ElementType::ALL.iter().map(|t| t.width()).collect();
        assert_eq!(
            widths,
            [1, 4, 4, 8, 8, 4, 8, 1, 1, 2, 2, 8, 16, 8, 12, 12, 8, 6]
        );
        let allowed = |ts: &[ElementType], rs: &[Reduction]| {
            ts.iter()
                .flat_map(|t| rs.iter().map(move |r| (*t, *r)))
                .filter(|(t, r)| r.check(*t).is_ok())
                .count()
        };
        // v1 (protocol §8.3): u8: 3 bitwise; 4 ints: 10 each; 2 floats: 4 each.
        assert_eq!(
            allowed(&ElementType::V1, &Reduction::V1),
            3 + 4 * 10 + 2 * 4
        );
        // All (§17.2): v1 (51) and user on each of the 7; bool 3 + user;
        // i8, i16, u16 10 + user each; complex 2 + user each; pairs 2 +
        // user each.
        assert_eq!(
            allowed(&ElementType::ALL, &Reduction::ALL),
            51 + 7 + 4 + 3 * 11 + 2 * 3 + 5 * 3
        );
    }
}
