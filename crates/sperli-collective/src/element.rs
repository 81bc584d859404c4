//! The seven element types as Rust types, and the one audited place where
//! slices become little-endian bytes and back (layouts §5 "Element types";
//! protocol §8.3).
//!
//! No `unsafe`: every conversion is a `to_le_bytes` / `from_le_bytes` copy,
//! so the wire is little-endian on every host.

use sperli_wire::element::ElementType;

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is one of the seven v1 element types (layouts §5):
/// `u8, i32, u32, i64, u64, f32, f64`. Sealed: no other type can be an
/// element.
///
/// ```
/// use sperli_collective::Element;
/// use sperli_wire::element::ElementType;
/// assert_eq!(<f64 as Element>::ELEMENT_TYPE, ElementType::F64);
/// let mut bytes = Vec::new();
/// i32::extend_le(&[1, -2], &mut bytes);
/// assert_eq!(bytes, [1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]);
/// let mut back = vec![0i32; 2];
/// i32::read_le(&bytes, &mut back);
/// assert_eq!(back, [1, -2]);
/// ```
pub trait Element: sealed::Sealed + Copy + Default + PartialEq + Send + Sync + 'static {
    /// The element type code of this type (layouts §5).
    const ELEMENT_TYPE: ElementType;
    /// Bytes per element: 1, 4 or 8.
    const WIDTH: usize;

    /// Appends `src` as little-endian bytes to `out`.
    fn extend_le(src: &[Self], out: &mut Vec<u8>);

    /// Fills `out` from `bytes`, which must hold exactly `out.len()`
    /// elements (panics otherwise; callers check lengths first).
    fn read_le(bytes: &[u8], out: &mut [Self]);

    /// Appends the elements in `bytes` (a whole number of elements; panics
    /// otherwise) to `out`.
    fn extend_from_le(bytes: &[u8], out: &mut Vec<Self>);

    /// The elements in `bytes` (a whole number of elements) as a new vector.
    fn vec_from_le(bytes: &[u8]) -> Vec<Self> {
        let mut v = Vec::with_capacity(bytes.len() / Self::WIDTH);
        Self::extend_from_le(bytes, &mut v);
        v
    }

    /// `src` as little-endian bytes in a new vector.
    fn to_le_vec(src: &[Self]) -> Vec<u8> {
        let mut v = Vec::with_capacity(src.len() * Self::WIDTH);
        Self::extend_le(src, &mut v);
        v
    }
}

macro_rules! element {
    ($($t:ty => $code:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const ELEMENT_TYPE: ElementType = ElementType::$code;
            const WIDTH: usize = std::mem::size_of::<$t>();

            fn extend_le(src: &[Self], out: &mut Vec<u8>) {
                out.reserve(src.len() * Self::WIDTH);
                for x in src {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }

            fn read_le(bytes: &[u8], out: &mut [Self]) {
                assert_eq!(bytes.len(), out.len() * Self::WIDTH, "element byte length");
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(Self::WIDTH)) {
                    let mut a = [0u8; std::mem::size_of::<$t>()];
                    a.copy_from_slice(c);
                    *o = <$t>::from_le_bytes(a);
                }
            }

            fn extend_from_le(bytes: &[u8], out: &mut Vec<Self>) {
                assert!(bytes.chunks_exact(Self::WIDTH).remainder().is_empty(), "whole elements");
                out.reserve(bytes.len() / Self::WIDTH);
                out.extend(bytes.chunks_exact(Self::WIDTH).map(|c| {
                    let mut a = [0u8; std::mem::size_of::<$t>()];
                    a.copy_from_slice(c);
                    <$t>::from_le_bytes(a)
                }));
            }
        }
    )*};
}

element!(u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_match_codes() {
        assert_eq!(u8::WIDTH, ElementType::U8.width());
        assert_eq!(i32::WIDTH, ElementType::I32.width());
        assert_eq!(u32::WIDTH, ElementType::U32.width());
        assert_eq!(i64::WIDTH, ElementType::I64.width());
        assert_eq!(u64::WIDTH, ElementType::U64.width());
        assert_eq!(f32::WIDTH, ElementType::F32.width());
        assert_eq!(f64::WIDTH, ElementType::F64.width());
    }

    #[test]
    fn round_trip_keeps_bits() {
        let xs = [f64::NAN, -0.0, 1.5, f64::from_bits(0x7ff0_0000_0000_0001)];
        let b = f64::to_le_vec(&xs);
        let back = f64::vec_from_le(&b);
        for (x, y) in xs.iter().zip(&back) {
            assert_eq!(x.to_bits(), y.to_bits());
        }
        assert_eq!(
            u64::to_le_vec(&[0x0102030405060708]),
            [8, 7, 6, 5, 4, 3, 2, 1]
        );
    }
}
