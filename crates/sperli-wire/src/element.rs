//! Element types and reductions (protocol §8.3).

use std::fmt;

use crate::error::ArgumentError;

/// The seven element types of v1 collectives.
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
}

impl ElementType {
    /// Every type in code order.
    pub const ALL: [ElementType; 7] = [
        ElementType::U8,
        ElementType::I32,
        ElementType::U32,
        ElementType::I64,
        ElementType::U64,
        ElementType::F32,
        ElementType::F64,
    ];

    /// The type for a code, or H1618 for a code above 6.
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

    /// Bytes per element: 1, 4 or 8.
    pub fn width(self) -> usize {
        match self {
            ElementType::U8 => 1,
            ElementType::I32 | ElementType::U32 | ElementType::F32 => 4,
            ElementType::I64 | ElementType::U64 | ElementType::F64 => 8,
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
        }
    }

    /// The type with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, ElementType::F32 | ElementType::F64)
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The ten v1 reductions.
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
}

impl Reduction {
    /// Every reduction in code order.
    pub const ALL: [Reduction; 10] = [
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

    /// The reduction for a code, or H1618 for 0 or a code above 10.
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
        }
    }

    /// The reduction with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether this pair is allowed (protocol §8.3, its table); H1618 if not.
    ///
    /// ```
    /// use sperli_wire::element::{ElementType, Reduction};
    /// assert!(Reduction::Sum.check(ElementType::F64).is_ok());
    /// assert!(Reduction::Sum.check(ElementType::U8).is_err());
    /// assert!(Reduction::Bxor.check(ElementType::F32).is_err());
    /// ```
    pub fn check(self, t: ElementType) -> Result<(), ArgumentError> {
        use Reduction::*;
        let allowed = match self {
            Sum | Prod | Min | Max => t != ElementType::U8,
            Land | Lor | Lxor => t != ElementType::U8 && !t.is_float(),
            Band | Bor | Bxor => !t.is_float(),
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
        assert!(ElementType::from_code(7).is_err());
        assert!(Reduction::from_code(0).is_err());
        assert!(Reduction::from_code(11).is_err());
        let allowed = ElementType::ALL
            .iter()
            .flat_map(|t| Reduction::ALL.iter().map(move |r| (*t, *r)))
            .filter(|(t, r)| r.check(*t).is_ok())
            .count();
        // u8: 3 bitwise; 4 ints: 10 each; 2 floats: 4 each.
        assert_eq!(allowed, 3 + 4 * 10 + 2 * 4);
    }
}
