//! The element types as Rust types, and the one audited place where
//! slices become little-endian bytes and back (protocol §8.3 "Element
//! types and reductions"; protocol §17.2 for the types of feature bit 4,
//! whose Rust types without a plain little-endian memory form are in
//! [`crate::element_bit4`]).
//!
//! No `unsafe`: on a little-endian host the bytes of a slice are already
//! its wire form, so a conversion is one copy through `bytemuck`'s checked
//! casts (the seven types are plain old data); on a big-endian host every
//! element goes through `to_le_bytes` / `from_le_bytes`. Either way the
//! wire is little-endian.

use sperli_wire::element::ElementType;

pub(crate) mod sealed {
    /// Only this crate's types are elements.
    pub trait Sealed {}
}

/// A Rust type that is one of the element types of protocol §8.3 (`u8,
/// i32, u32, i64, u64, f32, f64`) or, with HELLO feature bit 4, of
/// §17.2 (`bool, i8, i16, u16`, [`Complex64`](crate::Complex64),
/// [`Complex128`](crate::Complex128) and the value-index pairs
/// [`ValueIndex`](crate::ValueIndex)). Sealed: no other type can be an
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
    /// The element type code of this type (protocol §8.3).
    const ELEMENT_TYPE: ElementType;
    /// Bytes per element on the wire (protocol §8.3, §17.2).
    const WIDTH: usize;

    /// Appends `src` as little-endian bytes to `out`.
    fn extend_le(src: &[Self], out: &mut Vec<u8>);

    /// `src` as its little-endian bytes without a copy, where the host's
    /// memory already is that (little-endian hosts); `None` elsewhere.
    fn le_bytes(src: &[Self]) -> Option<&[u8]>;

    /// `out` as its little-endian bytes, writable in place, where the
    /// host's memory already is that; `None` elsewhere (the default).
    fn le_bytes_mut(out: &mut [Self]) -> Option<&mut [u8]> {
        let _ = out;
        None
    }

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
                if cfg!(target_endian = "little") {
                    out.extend_from_slice(bytemuck::cast_slice(src));
                } else {
                    out.reserve(src.len() * Self::WIDTH);
                    for x in src {
                        out.extend_from_slice(&x.to_le_bytes());
                    }
                }
            }

            fn le_bytes(src: &[Self]) -> Option<&[u8]> {
                cfg!(target_endian = "little").then(|| bytemuck::cast_slice(src))
            }

            fn le_bytes_mut(out: &mut [Self]) -> Option<&mut [u8]> {
                cfg!(target_endian = "little").then(|| bytemuck::cast_slice_mut(out))
            }

            fn read_le(bytes: &[u8], out: &mut [Self]) {
                assert_eq!(bytes.len(), out.len() * Self::WIDTH, "element byte length");
                if cfg!(target_endian = "little") {
                    // `out` is aligned; `bytes` need not be.
                    bytemuck::cast_slice_mut::<Self, u8>(out).copy_from_slice(bytes);
                } else {
                    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(Self::WIDTH)) {
                        let mut a = [0u8; std::mem::size_of::<$t>()];
                        a.copy_from_slice(c);
                        *o = <$t>::from_le_bytes(a);
                    }
                }
            }

            fn extend_from_le(bytes: &[u8], out: &mut Vec<Self>) {
                let elems = bytes.chunks_exact(Self::WIDTH);
                assert!(elems.remainder().is_empty(), "whole elements");
                // One pass, each element written once (no zero fill first).
                out.extend(elems.map(|c| {
                    let mut a = [0u8; std::mem::size_of::<$t>()];
                    a.copy_from_slice(c);
                    <$t>::from_le_bytes(a)
                }));
            }
        }
    )*};
}

element!(u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);
// The plain integers of feature bit 4 (protocol §17.2).
element!(i8 => I8, i16 => I16, u16 => U16);

// `usize` and `isize` are u64 and i64 on the wire (element types 5 and 4,
// protocol §8.3) where they are those types in memory: on 64-bit
// little-endian hosts. Elsewhere they are not elements (a program that uses
// them does not compile there, rather than send a different width).
#[cfg(all(target_pointer_width = "64", target_endian = "little"))]
element!(usize => U64, isize => I64);

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

    fn per_element<T: Element>(xs: &[T], le: impl Fn(&T) -> Vec<u8>) {
        let mut bytes = Vec::new();
        T::extend_le(xs, &mut bytes);
        let want: Vec<u8> = xs.iter().flat_map(le).collect();
        assert_eq!(bytes, want);
        // Back from an unaligned copy of the bytes.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&want);
        let mut back = vec![T::default(); xs.len()];
        T::read_le(&shifted[1..], &mut back);
        assert!(back == xs);
        let mut ext = vec![T::default()];
        T::extend_from_le(&shifted[1..], &mut ext);
        assert!(ext[1..] == *xs);
    }

    #[test]
    fn bulk_conversions_equal_the_per_element_wire_form() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let v: Vec<u64> = (0..1001).map(|_| next()).collect();
        per_element(&v, |x| x.to_le_bytes().to_vec());
        let v: Vec<i64> = v.iter().map(|&x| x as i64).collect();
        per_element(&v, |x| x.to_le_bytes().to_vec());
        let v: Vec<u32> = v.iter().map(|&x| x as u32).collect();
        per_element(&v, |x| x.to_le_bytes().to_vec());
        let v: Vec<i32> = v.iter().map(|&x| x as i32).collect();
        per_element(&v, |x| x.to_le_bytes().to_vec());
        let v: Vec<u8> = v.iter().map(|&x| x as u8).collect();
        per_element(&v, |x| vec![*x]);
        let v: Vec<f32> = (0..1001)
            .map(|_| f32::from_bits(next() as u32 & 0x7f7f_ffff))
            .collect();
        per_element(&v, |x| x.to_le_bytes().to_vec());
        let v: Vec<f64> = (0..1001)
            .map(|_| f64::from_bits(next() & 0x7fef_ffff_ffff_ffff))
            .collect();
        per_element(&v, |x| x.to_le_bytes().to_vec());
    }

    #[cfg(all(target_pointer_width = "64", target_endian = "little"))]
    #[test]
    fn usize_and_isize_are_u64_and_i64_on_the_wire() {
        assert_eq!(usize::ELEMENT_TYPE, ElementType::U64);
        assert_eq!(isize::ELEMENT_TYPE, ElementType::I64);
        assert_eq!(
            usize::to_le_vec(&[7, usize::MAX]),
            u64::to_le_vec(&[7, u64::MAX])
        );
        assert_eq!(isize::to_le_vec(&[-2]), i64::to_le_vec(&[-2]));
        assert_eq!(isize::vec_from_le(&i64::to_le_vec(&[-5, 9])), vec![-5, 9]);
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
