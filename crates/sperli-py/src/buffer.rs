//! The one place a Python object becomes a buffer of a call: [`Buf::send`]
//! and [`Buf::recv`] check the buffer protocol, the dtype (one of the
//! element types of protocol §8.3 and §17.2 that numpy has, little-endian), C-contiguity, alignment and, for a
//! receive buffer, that it is writable, and [`with_dtype!`] runs a generic
//! Rust call for the buffer's element type. Every buffer call of the
//! package (and every one added later) goes through them.
//!
//! Non-contiguous arrays are refused, not copied, as mpi4py refuses them
//! for its uppercase calls; read-only receive buffers are refused.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use sperli_collective::Element;
use sperli_wire::element::ElementType;

use crate::errors::BindingError;
use crate::raw::Region;

/// The element types of a buffer (protocol §8.3; with HELLO feature bit
/// 4, §17.2: bool, int8, int16, uint16, complex64, complex128), named as
/// numpy names them. The codes of bit 4 are refused with H1618 in a job
/// where a rank lacks the bit (§17.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Dtype {
    U8,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    Bool,
    I8,
    I16,
    U16,
    C64,
    C128,
    /// The value-index pairs of MINLOC and MAXLOC (protocol §17.2): a
    /// packed structured dtype of the value then an int32 index.
    F32I32,
    F64I32,
    I64I32,
    I32I32,
    I16I32,
}

/// How many of [`DTYPE_NAMES`] are numpy's own names (`sperli.DTYPES`):
/// the value-index pairs after them are packed structured dtypes,
/// `[("v", value), ("i", "<i4")]`.
pub(crate) const NUMPY_DTYPES: usize = 13;

/// The names of the dtypes, in code order.
pub(crate) const DTYPE_NAMES: [&str; 18] = [
    "uint8",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float32",
    "float64",
    "bool",
    "int8",
    "int16",
    "uint16",
    "complex64",
    "complex128",
    "float32_int32",
    "float64_int32",
    "int64_int32",
    "int32_int32",
    "int16_int32",
];

impl Dtype {
    /// numpy's name.
    pub(crate) fn name(self) -> &'static str {
        DTYPE_NAMES[self.element_type().code() as usize]
    }

    /// The element type.
    pub(crate) fn element_type(self) -> ElementType {
        match self {
            Dtype::U8 => ElementType::U8,
            Dtype::I32 => ElementType::I32,
            Dtype::U32 => ElementType::U32,
            Dtype::I64 => ElementType::I64,
            Dtype::U64 => ElementType::U64,
            Dtype::F32 => ElementType::F32,
            Dtype::F64 => ElementType::F64,
            Dtype::Bool => ElementType::Bool,
            Dtype::I8 => ElementType::I8,
            Dtype::I16 => ElementType::I16,
            Dtype::U16 => ElementType::U16,
            Dtype::C64 => ElementType::Complex64,
            Dtype::C128 => ElementType::Complex128,
            Dtype::F32I32 => ElementType::F32I32,
            Dtype::F64I32 => ElementType::F64I32,
            Dtype::I64I32 => ElementType::I64I32,
            Dtype::I32I32 => ElementType::I32I32,
            Dtype::I16I32 => ElementType::I16I32,
        }
    }

    /// Bytes per element.
    pub(crate) fn width(self) -> usize {
        self.element_type().width()
    }

    /// The dtype of a buffer with struct-module `format` and `itemsize`
    /// (PEP 3118; what numpy, `bytes`, `array.array` and `memoryview`
    /// export), or the name of what it is instead.
    pub(crate) fn from_format(format: &str, itemsize: usize) -> Result<Dtype, String> {
        if let Some(fields) = format.strip_prefix("T{").and_then(|f| f.strip_suffix('}')) {
            return Self::pair(fields, itemsize).ok_or_else(|| format!("with format {format:?}"));
        }
        let (order, rest) = match format.as_bytes() {
            [o @ (b'@' | b'=' | b'<' | b'>' | b'!'), rest @ ..] => (*o, rest),
            rest => (b'@', rest),
        };
        let kind = match rest {
            [] => 'u',
            [b'Z', b'e' | b'f' | b'd'] => 'c',
            [b'b' | b'h' | b'i' | b'l' | b'q' | b'n'] => 'i',
            [b'B' | b'H' | b'I' | b'L' | b'Q' | b'N'] => 'u',
            [b'e' | b'f' | b'd'] => 'f',
            [b'?'] => 'b',
            _ => return Err(format!("with format {format:?}")),
        };
        let big = matches!(order, b'>' | b'!') || (order != b'<' && cfg!(target_endian = "big"));
        let name = || {
            let base = match kind {
                'i' => "int",
                'u' => "uint",
                'c' => "complex",
                'b' => "bool",
                _ => "float",
            };
            format!("{}{base}{}", if big { ">" } else { "" }, itemsize * 8)
        };
        // A complex number's byte order is its components'.
        let component = if kind == 'c' { itemsize / 2 } else { itemsize };
        if big && component > 1 {
            return Err(name());
        }
        match (kind, itemsize) {
            ('u', 1) => Ok(Dtype::U8),
            ('b', 1) => Ok(Dtype::Bool),
            ('i', 1) => Ok(Dtype::I8),
            ('i', 2) => Ok(Dtype::I16),
            ('u', 2) => Ok(Dtype::U16),
            ('c', 8) => Ok(Dtype::C64),
            ('c', 16) => Ok(Dtype::C128),
            ('i', 4) => Ok(Dtype::I32),
            ('u', 4) => Ok(Dtype::U32),
            ('i', 8) => Ok(Dtype::I64),
            ('u', 8) => Ok(Dtype::U64),
            ('f', 4) => Ok(Dtype::F32),
            ('f', 8) => Ok(Dtype::F64),
            _ => Err(name()),
        }
    }
}

impl Dtype {
    /// The value-index pair of a packed struct format's `fields` (numpy's
    /// `[("v", "<f8"), ("i", "<i4")]` exports `T{<d:v:<i:i:}`): exactly a
    /// little-endian value of f32, f64, i64, i32 or i16 then an int32,
    /// `itemsize` their sum (no padding).
    fn pair(fields: &str, itemsize: usize) -> Option<Dtype> {
        let parts: Vec<&str> = fields.split(':').collect();
        let [value, _, index, _, ""] = parts[..] else {
            return None;
        };
        let le = |t: &str| -> Option<u8> {
            match t.as_bytes() {
                [b'<', c] => Some(*c),
                [c] | [b'=' | b'@', c] if cfg!(target_endian = "little") => Some(*c),
                _ => None,
            }
        };
        if !matches!(le(index)?, b'i' | b'l') {
            return None;
        }
        let (d, w) = match le(value)? {
            b'f' => (Dtype::F32I32, 4),
            b'd' => (Dtype::F64I32, 8),
            b'q' => (Dtype::I64I32, 8),
            b'i' => (Dtype::I32I32, 4),
            b'h' => (Dtype::I16I32, 2),
            _ => return None,
        };
        (itemsize == w + 4).then_some(d)
    }
}

/// Runs `$body` with `$T` the Rust type of dtype `$d`.
macro_rules! with_dtype {
    ($d:expr, $T:ident => $body:expr) => {
        match $d {
            $crate::buffer::Dtype::U8 => {
                type $T = u8;
                $body
            }
            $crate::buffer::Dtype::I32 => {
                type $T = i32;
                $body
            }
            $crate::buffer::Dtype::U32 => {
                type $T = u32;
                $body
            }
            $crate::buffer::Dtype::I64 => {
                type $T = i64;
                $body
            }
            $crate::buffer::Dtype::U64 => {
                type $T = u64;
                $body
            }
            $crate::buffer::Dtype::F32 => {
                type $T = f32;
                $body
            }
            $crate::buffer::Dtype::F64 => {
                type $T = f64;
                $body
            }
            // bool as its byte: numpy's bool memory may hold any byte.
            $crate::buffer::Dtype::Bool => {
                type $T = sperli_collective::Bool8;
                $body
            }
            $crate::buffer::Dtype::I8 => {
                type $T = i8;
                $body
            }
            $crate::buffer::Dtype::I16 => {
                type $T = i16;
                $body
            }
            $crate::buffer::Dtype::U16 => {
                type $T = u16;
                $body
            }
            $crate::buffer::Dtype::C64 => {
                type $T = sperli_collective::Complex64;
                $body
            }
            $crate::buffer::Dtype::C128 => {
                type $T = sperli_collective::Complex128;
                $body
            }
            // The packed value-index pairs (`repr(C, packed)`).
            $crate::buffer::Dtype::F32I32 => {
                type $T = sperli_collective::ValueIndex<f32>;
                $body
            }
            $crate::buffer::Dtype::F64I32 => {
                type $T = sperli_collective::ValueIndex<f64>;
                $body
            }
            $crate::buffer::Dtype::I64I32 => {
                type $T = sperli_collective::ValueIndex<i64>;
                $body
            }
            $crate::buffer::Dtype::I32I32 => {
                type $T = sperli_collective::ValueIndex<i32>;
                $body
            }
            $crate::buffer::Dtype::I16I32 => {
                type $T = sperli_collective::ValueIndex<i16>;
                $body
            }
        }
    };
}
pub(crate) use with_dtype;

/// A checked buffer of one call.
pub(crate) struct Buf {
    /// Its memory.
    pub(crate) region: Region,
    /// Its element type.
    pub(crate) dtype: Dtype,
    /// The argument's name, for errors.
    pub(crate) arg: &'static str,
}

impl Buf {
    fn get(obj: &Bound<'_, PyAny>, arg: &'static str) -> Result<Self, BindingError> {
        let no_buffer = || BindingError::NoBuffer {
            arg,
            type_name: type_name(obj),
        };
        let buf = PyUntypedBuffer::get(obj).or_else(|_| {
            // A 0-d numpy array exports no shape, which PyO3 refuses: its
            // one-element view (same memory) does.
            match obj.getattr("ndim").and_then(|d| d.extract::<usize>()) {
                Ok(0) => obj
                    .call_method1("reshape", (1,))
                    .and_then(|v| PyUntypedBuffer::get(&v))
                    .map_err(|_| no_buffer()),
                _ => Err(no_buffer()),
            }
        })?;
        let format = buf.format().to_string_lossy().into_owned();
        let dtype = Dtype::from_format(&format, buf.item_size())
            .map_err(|got| BindingError::Dtype { arg, got })?;
        let region = Region::new(buf).ok_or(BindingError::NotContiguous { arg })?;
        let ok = with_dtype!(dtype, T => region.aligned::<T>());
        if !ok {
            return Err(BindingError::Misaligned { arg, dtype });
        }
        Ok(Self { region, dtype, arg })
    }

    /// A buffer the call reads.
    pub(crate) fn send(obj: &Bound<'_, PyAny>, arg: &'static str) -> Result<Self, BindingError> {
        Self::get(obj, arg)
    }

    /// A buffer the call writes: also writable.
    pub(crate) fn recv(obj: &Bound<'_, PyAny>, arg: &'static str) -> Result<Self, BindingError> {
        let b = Self::get(obj, arg)?;
        if b.region.readonly() {
            return Err(BindingError::ReadOnly { arg });
        }
        Ok(b)
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.region.len_bytes() / self.dtype.width()
    }

    /// H1618 unless `other` has this buffer's dtype.
    pub(crate) fn same_dtype(&self, other: &Buf) -> Result<(), BindingError> {
        if self.dtype == other.dtype {
            Ok(())
        } else {
            Err(BindingError::DtypeMismatch {
                left: self.arg,
                left_dtype: self.dtype,
                right: other.arg,
                right_dtype: other.dtype,
            })
        }
    }

    /// H1618 unless this buffer has `expected` elements.
    pub(crate) fn expect_len(&self, expected: usize) -> Result<(), BindingError> {
        if self.len() == expected {
            Ok(())
        } else {
            Err(BindingError::Length {
                arg: self.arg,
                expected,
                got: self.len(),
            })
        }
    }

    /// The elements as `T` (the caller dispatched on [`Buf::dtype`]).
    pub(crate) fn elems<T: Element>(&self) -> &[T] {
        self.region
            .elems::<T>()
            .expect("checked in Buf::get: whole, aligned elements")
    }

    /// The elements as `T` for writing (a buffer from [`Buf::recv`]).
    pub(crate) fn elems_mut<T: Element>(&mut self) -> &mut [T] {
        self.region
            .elems_mut::<T>()
            .expect("checked in Buf::recv: writable, whole, aligned elements")
    }
}

/// The Python type name of `obj`, for errors.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numpy_and_the_struct_module_export() {
        let cases: [(&str, usize, Result<Dtype, &str>); 21] = [
            ("B", 1, Ok(Dtype::U8)),
            ("", 1, Ok(Dtype::U8)),
            ("i", 4, Ok(Dtype::I32)),
            ("<i", 4, Ok(Dtype::I32)),
            ("I", 4, Ok(Dtype::U32)),
            ("l", 8, Ok(Dtype::I64)),
            ("q", 8, Ok(Dtype::I64)),
            ("=l", 4, Ok(Dtype::I32)),
            ("L", 8, Ok(Dtype::U64)),
            ("Q", 8, Ok(Dtype::U64)),
            ("f", 4, Ok(Dtype::F32)),
            ("d", 8, Ok(Dtype::F64)),
            ("h", 2, Ok(Dtype::I16)),
            ("H", 2, Ok(Dtype::U16)),
            ("b", 1, Ok(Dtype::I8)),
            ("?", 1, Ok(Dtype::Bool)),
            ("Zf", 8, Ok(Dtype::C64)),
            ("<Zd", 16, Ok(Dtype::C128)),
            (">Zd", 16, Err(">complex128")),
            ("e", 2, Err("float16")),
            (">d", 8, Err(">float64")),
        ];
        for (fmt, size, want) in cases {
            assert_eq!(
                Dtype::from_format(fmt, size),
                want.map_err(String::from),
                "{fmt}"
            );
        }
        assert!(Dtype::from_format("Zq", 16).unwrap_err().contains("Zq"));
        assert!(Dtype::from_format("T{d:x:}", 8).is_err());
        assert_eq!(Dtype::from_format("T{<d:v:<i:i:}", 12), Ok(Dtype::F64I32));
        assert_eq!(Dtype::from_format("T{h:v:i:i:}", 6), Ok(Dtype::I16I32));
        assert!(Dtype::from_format("T{<d:v:<i:i:}", 16).is_err()); // padded
        assert!(Dtype::from_format("T{>d:v:>i:i:}", 12).is_err());
        // A big-endian byte is still a byte.
        assert_eq!(Dtype::from_format(">B", 1), Ok(Dtype::U8));
    }

    #[test]
    fn names_follow_the_code_order() {
        let all = [
            Dtype::U8,
            Dtype::I32,
            Dtype::U32,
            Dtype::I64,
            Dtype::U64,
            Dtype::F32,
            Dtype::F64,
            Dtype::Bool,
            Dtype::I8,
            Dtype::I16,
            Dtype::U16,
            Dtype::C64,
            Dtype::C128,
            Dtype::F32I32,
            Dtype::F64I32,
            Dtype::I64I32,
            Dtype::I32I32,
            Dtype::I16I32,
        ];
        for (d, name) in all.iter().zip(DTYPE_NAMES) {
            assert_eq!(d.name(), name);
        }
        assert_eq!(Dtype::F64.width(), 8);
    }
}
