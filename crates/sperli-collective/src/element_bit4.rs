//! The Rust element types of HELLO feature bit 4 (protocol §17.2) whose
//! memory is not their wire form: `bool` and [`Bool8`] (any byte but 0
//! is true),
//! [`Complex64`] and [`Complex128`] (real then imaginary part), and the
//! five value-index pairs [`ValueIndex`] of MINLOC and MAXLOC (value then
//! i32 index, packed: no padding on the wire, whatever the Rust layout).
//! Each element goes through its own little-endian codec; no `unsafe`.
//! (`i8`, `i16` and `u16` are plain integers, in [`crate::element`].)

use sperli_wire::element::ElementType;

use crate::element::{sealed, Element};

/// bool (element type 7, protocol §17.2) as its one byte: 0 is false,
/// every other byte true (§17.3), so that any byte is a valid value (a
/// buffer whose memory Rust does not control, such as a numpy `bool`
/// array, can be one). The folds give 0 or 1. The Rust `bool` is the same
/// element type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Bool8(pub u8);

impl Bool8 {
    /// Whether the byte is true (not 0).
    pub fn get(self) -> bool {
        self.0 != 0
    }
}

/// complex64 (element type 11, protocol §17.2): two f32, real part then
/// imaginary part, numpy's `complex64` and C's `float complex` (the same
/// memory layout: `repr(C)`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C)]
pub struct Complex64 {
    /// The real part.
    pub re: f32,
    /// The imaginary part.
    pub im: f32,
}

/// complex128 (element type 12, protocol §17.2): two f64, real part then
/// imaginary part, numpy's `complex128` and C's `double complex` (the
/// same memory layout: `repr(C)`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C)]
pub struct Complex128 {
    /// The real part.
    pub re: f64,
    /// The imaginary part.
    pub im: f64,
}

/// A value-index pair for MINLOC and MAXLOC (protocol §17.2, §17.3):
/// `ValueIndex<f32>` is MPI's `MPI_FLOAT_INT` (element type 13),
/// `<f64>` `MPI_DOUBLE_INT` (14), `<i64>` `MPI_LONG_INT` (15), `<i32>`
/// `MPI_2INT` (16), `<i16>` `MPI_SHORT_INT` (17). On the wire the value
/// then the index, little-endian, packed.
///
/// ```
/// use sperli_collective::fake::{run_links, FakePeers};
/// use sperli_collective::{prelude::*, ValueIndex};
/// use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_ELEMENT_TYPES};
/// // Every rank's value and its rank: the smallest value and where it is.
/// let links = FakePeers::job_with_features(&[FEATURES_IMPLEMENTED | FEATURE_ELEMENT_TYPES; 3]);
/// let got = run_links(links, |c| {
///     let v = ValueIndex { value: [5.0, 1.0, 1.0][c.rank() as usize], index: c.rank() as i32 };
///     c.allreduce(&[v], Reduction::Minloc).unwrap()
/// });
/// assert_eq!(got[0], vec![ValueIndex { value: 1.0f64, index: 1 }]);
/// ```
///
/// `repr(C, packed)`: the memory is the wire form on a little-endian host
/// (12 bytes for `<f64>`, not C's 16), so a packed buffer of pairs, such
/// as a numpy structured array, can be one. Read the fields by value
/// (`p.value`), not by reference.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C, packed)]
pub struct ValueIndex<V> {
    /// The value.
    pub value: V,
    /// Its index (MPI's `int`), usually a rank.
    pub index: i32,
}

/// One element's little-endian wire form, element by element.
trait Codec: Copy {
    /// Bytes per element on the wire.
    const W: usize;
    /// Writes the element into exactly `W` bytes.
    fn put(self, out: &mut [u8]);
    /// Reads the element from exactly `W` bytes.
    fn get(b: &[u8]) -> Self;
}

/// Reads a fixed-width little-endian value from `b` (exactly its width).
macro_rules! le_get {
    ($t:ty, $b:expr) => {{
        let mut a = [0u8; std::mem::size_of::<$t>()];
        a.copy_from_slice($b);
        <$t>::from_le_bytes(a)
    }};
}

impl Codec for bool {
    const W: usize = 1;
    fn put(self, out: &mut [u8]) {
        out[0] = u8::from(self);
    }
    /// Protocol §17.3: a byte that is not 0 is true (never an error).
    fn get(b: &[u8]) -> Self {
        b[0] != 0
    }
}

impl Codec for Bool8 {
    const W: usize = 1;
    fn put(self, out: &mut [u8]) {
        out[0] = self.0;
    }
    fn get(b: &[u8]) -> Self {
        Bool8(b[0])
    }
}

macro_rules! complex_codec {
    ($($c:ty => $f:ty),*) => {$(
        impl Codec for $c {
            const W: usize = 2 * std::mem::size_of::<$f>();
            fn put(self, out: &mut [u8]) {
                let w = std::mem::size_of::<$f>();
                out[..w].copy_from_slice(&self.re.to_le_bytes());
                out[w..].copy_from_slice(&self.im.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                let w = std::mem::size_of::<$f>();
                Self { re: le_get!($f, &b[..w]), im: le_get!($f, &b[w..]) }
            }
        }
    )*};
}
complex_codec!(Complex64 => f32, Complex128 => f64);

macro_rules! pair_codec {
    ($($v:ty),*) => {$(
        impl Codec for ValueIndex<$v> {
            const W: usize = std::mem::size_of::<$v>() + 4;
            fn put(self, out: &mut [u8]) {
                let w = std::mem::size_of::<$v>();
                out[..w].copy_from_slice(&self.value.to_le_bytes());
                out[w..].copy_from_slice(&self.index.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                let w = std::mem::size_of::<$v>();
                Self { value: le_get!($v, &b[..w]), index: le_get!(i32, &b[w..]) }
            }
        }
    )*};
}
pair_codec!(f32, f64, i64, i32, i16);

macro_rules! element_by_codec {
    ($($t:ty => $code:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const ELEMENT_TYPE: ElementType = ElementType::$code;
            const WIDTH: usize = <$t as Codec>::W;

            fn extend_le(src: &[Self], out: &mut Vec<u8>) {
                let start = out.len();
                out.resize(start + src.len() * Self::WIDTH, 0);
                for (x, o) in src.iter().zip(out[start..].chunks_exact_mut(Self::WIDTH)) {
                    x.put(o);
                }
            }

            fn le_bytes(_src: &[Self]) -> Option<&[u8]> {
                None
            }

            fn read_le(bytes: &[u8], out: &mut [Self]) {
                assert_eq!(bytes.len(), out.len() * Self::WIDTH, "element byte length");
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(Self::WIDTH)) {
                    *o = <$t as Codec>::get(c);
                }
            }

            fn extend_from_le(bytes: &[u8], out: &mut Vec<Self>) {
                let chunks = bytes.chunks_exact(Self::WIDTH);
                assert!(chunks.remainder().is_empty(), "whole elements");
                out.extend(chunks.map(<$t as Codec>::get));
            }
        }
    )*};
}

element_by_codec!(
    bool => Bool,
    Bool8 => Bool,
    Complex64 => Complex64,
    Complex128 => Complex128,
    ValueIndex<f32> => F32I32,
    ValueIndex<f64> => F64I32,
    ValueIndex<i64> => I64I32,
    ValueIndex<i32> => I32I32,
    ValueIndex<i16> => I16I32,
);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Element + std::fmt::Debug>(xs: &[T], want: &[u8]) {
        let bytes = T::to_le_vec(xs);
        assert_eq!(bytes, want);
        assert_eq!(T::WIDTH, T::ELEMENT_TYPE.width());
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        assert_eq!(T::vec_from_le(&shifted[1..]), xs);
    }

    #[test]
    fn wire_forms_of_protocol_17_2() {
        round_trip(&[true, false], &[1, 0]);
        assert_eq!(bool::vec_from_le(&[0, 2, 0xff]), [false, true, true]);
        round_trip(&[Bool8(0), Bool8(2)], &[0, 2]);
        assert!(Bool8(0x80).get());
        round_trip(&[-2i8], &[0xfe]);
        round_trip(&[-2i16], &[0xfe, 0xff]);
        round_trip(&[0x1234u16], &[0x34, 0x12]);
        let c = Complex64 { re: 1.0, im: -2.0 };
        round_trip(
            &[c],
            &[1.0f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat(),
        );
        let c = Complex128 { re: 1.5, im: 0.0 };
        round_trip(&[c], &[1.5f64.to_le_bytes(), 0.0f64.to_le_bytes()].concat());
        let p = ValueIndex {
            value: 2.5f64,
            index: -3,
        };
        round_trip(
            &[p],
            &[&2.5f64.to_le_bytes()[..], &(-3i32).to_le_bytes()].concat(),
        );
        assert_eq!(<ValueIndex<f64>>::WIDTH, 12); // packed, not 16
        let p = ValueIndex {
            value: 7i16,
            index: 9,
        };
        round_trip(&[p], &[7, 0, 9, 0, 0, 0]);
        let p = ValueIndex {
            value: 7i64,
            index: 1,
        };
        round_trip(
            &[p],
            &[&7i64.to_le_bytes()[..], &1i32.to_le_bytes()].concat(),
        );
        let p = ValueIndex {
            value: 7i32,
            index: 1,
        };
        round_trip(&[p], &[7, 0, 0, 0, 1, 0, 0, 0]);
        let p = ValueIndex {
            value: -0.0f32,
            index: 1,
        };
        round_trip(&[p], &[0, 0, 0, 0x80, 1, 0, 0, 0]);
    }
}
