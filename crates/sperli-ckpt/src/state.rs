//! [`Checkpointable`]: the state a rank checkpoints, as bytes (protocol
//! §9.4: "The state passes through the type class `Checkpointable`; a type
//! that holds a handle, a connection or a file has no instance, so the
//! compiler refuses the call"; §9.2, the opaque `state` bytes of a rank
//! file).
//!
//! The state bytes of a rank file are a `u32` format version
//! ([`Checkpointable::FORMAT_VERSION`] of the top-level type), then the
//! value's encoding. Encodings (all little-endian):
//!
//! | type | bytes |
//! |---|---|
//! | `u8`, `i32`, `u32`, `i64`, `u64`, `f32`, `f64` | the value, 1/4/8 bytes (floats: their IEEE bits, NaN payloads kept) |
//! | `bool` | one byte, 0 or 1 (anything else is refused) |
//! | `Vec<T>` | `u64` count, then the elements |
//! | `String` | `u64` byte length, then UTF-8 (invalid UTF-8 is refused) |
//! | `Option<T>` | one byte 0 (none) or 1, then the value |
//! | `[T; N]` | the N elements (no count) |
//! | tuples up to 4 | the fields in order |
//! | a struct through [`checkpointable!`](crate::checkpointable) | the fields in declaration order |
//!
//! Decoding never panics and never allocates more than the input can
//! fill: a count is checked against the bytes left before anything is
//! reserved. A type that holds a connection, a handle or a file
//! (`std::fs::File`, `sperli_transport::Endpoint`, a `RecvHandle`, ...)
//! has no implementation, so checkpointing it does not compile
//! (`tests/compile_fail/`).

use sperli_wire::codec::Reader;
use sperli_wire::error::{DecodeError, Error};

/// A value that can be written into a checkpoint and read back (protocol
/// §9.4, the type class `Checkpointable`; §9.2). Implement it for your own structs with
/// [`checkpointable!`](crate::checkpointable).
///
/// The trait is safe: an implementation only appends bytes and reads them
/// back through a bounds-checked [`Reader`].
pub trait Checkpointable: Sized {
    /// The format version written in front of the state when this type is
    /// the top-level state (checked on load: another version is refused
    /// with H1619, [`Error::UnexpectedFile`] on field `state format
    /// version`). Bump it when the encoding of the type changes.
    const FORMAT_VERSION: u32 = 1;

    /// Appends this value's encoding to `out`.
    fn save(&self, out: &mut Vec<u8>);

    /// Reads one value; fails (never panics) on truncated or invalid bytes.
    fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// The smallest number of bytes one encoded value takes (used to bound
    /// allocations before decoding a count of them). Default 1.
    const MIN_LEN: usize = 1;

    /// Appends the encodings of `items` (a `Vec<Self>` or `[Self; N]`
    /// body). Numeric types override it with a bulk copy.
    fn save_slice(items: &[Self], out: &mut Vec<u8>) {
        for item in items {
            item.save(out);
        }
    }

    /// Reads `n` values (the caller has checked that `n * MIN_LEN` bytes
    /// are left). Numeric types override it with a bulk copy.
    fn load_vec(r: &mut Reader<'_>, n: usize) -> Result<Vec<Self>, DecodeError> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(Self::load(r)?);
        }
        Ok(v)
    }
}

/// The state bytes of a rank file for `state` (protocol
/// §9.2): `u32` [`Checkpointable::FORMAT_VERSION`], then the encoding.
pub fn encode_state<T: Checkpointable>(state: &T) -> Vec<u8> {
    let mut out = Vec::new();
    encode_state_into(state, &mut out);
    out
}

/// Appends the state bytes of `state` to `out` (see [`encode_state`]).
pub fn encode_state_into<T: Checkpointable>(state: &T, out: &mut Vec<u8>) {
    out.extend_from_slice(&T::FORMAT_VERSION.to_le_bytes());
    state.save(out);
}

/// Reads the state bytes written by [`encode_state`] (protocol
/// §9.2, §10.2 step 4). Every failure is H1619 ([`Error::UnexpectedFile`]
/// with `what` = "checkpoint state"): a format version other than
/// `T::FORMAT_VERSION` (`Mismatch` on `state format version`), truncated or
/// invalid bytes, or bytes left over (`TrailingBytes`).
pub fn decode_state<T: Checkpointable>(bytes: &[u8]) -> Result<T, Error> {
    decode_state_raw(bytes).map_err(|error| Error::UnexpectedFile { what: STATE, error })
}

/// What a state decoding failure names in [`Error::UnexpectedFile`].
pub const STATE: &str = "checkpoint state";

pub(crate) fn decode_state_raw<T: Checkpointable>(bytes: &[u8]) -> Result<T, DecodeError> {
    let mut r = Reader::new(bytes);
    let version = r.u32("state format version")?;
    if version != T::FORMAT_VERSION {
        return Err(DecodeError::Mismatch {
            field: "state format version",
            expected: u64::from(T::FORMAT_VERSION),
            got: u64::from(version),
        });
    }
    let v = T::load(&mut r)?;
    r.expect_end(STATE)?;
    Ok(v)
}

/// Reads a `u64` count of items of at least `min_len` bytes each and checks
/// that the bytes left can hold them (so a hostile count never allocates).
fn read_count(
    r: &mut Reader<'_>,
    min_len: usize,
    field: &'static str,
) -> Result<usize, DecodeError> {
    let n = r.u64(field)?;
    let left = r.left() as u64;
    let max = left / (min_len.max(1) as u64);
    if n > max {
        return Err(DecodeError::Truncated {
            field,
            needed: usize::try_from(n.saturating_mul(min_len.max(1) as u64)).unwrap_or(usize::MAX),
            left: r.left(),
        });
    }
    usize::try_from(n).map_err(|_| DecodeError::OutOfRange {
        field,
        min: 0,
        max,
        got: n,
    })
}

macro_rules! numeric {
    ($($t:ty, $w:expr, $name:expr);* $(;)?) => {$(
        impl Checkpointable for $t {
            const MIN_LEN: usize = $w;
            fn save(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(<$t>::from_le_bytes(r.array::<$w>($name)?))
            }
            fn save_slice(items: &[Self], out: &mut Vec<u8>) {
                out.reserve(items.len() * $w);
                for x in items {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            fn load_vec(r: &mut Reader<'_>, n: usize) -> Result<Vec<Self>, DecodeError> {
                let bytes = r.take(n.saturating_mul($w), $name)?;
                Ok(bytes
                    .chunks_exact($w)
                    .map(|c| {
                        let mut a = [0u8; $w];
                        a.copy_from_slice(c);
                        <$t>::from_le_bytes(a)
                    })
                    .collect())
            }
        }
    )*};
}

numeric! {
    i32, 4, "i32";
    u32, 4, "u32";
    i64, 8, "i64";
    u64, 8, "u64";
    f32, 4, "f32";
    f64, 8, "f64";
}

impl Checkpointable for u8 {
    fn save(&self, out: &mut Vec<u8>) {
        out.push(*self);
    }
    fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u8("u8")
    }
    fn save_slice(items: &[Self], out: &mut Vec<u8>) {
        out.extend_from_slice(items);
    }
    fn load_vec(r: &mut Reader<'_>, n: usize) -> Result<Vec<Self>, DecodeError> {
        Ok(r.take(n, "u8")?.to_vec())
    }
}

impl Checkpointable for bool {
    fn save(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.u8("bool")? {
            0 => Ok(false),
            1 => Ok(true),
            got => Err(DecodeError::OutOfRange {
                field: "bool",
                min: 0,
                max: 1,
                got: u64::from(got),
            }),
        }
    }
}

impl<T: Checkpointable> Checkpointable for Vec<T> {
    const MIN_LEN: usize = 8;
    fn save(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        T::save_slice(self, out);
    }
    fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let n = read_count(r, T::MIN_LEN, "Vec length")?;
        T::load_vec(r, n)
    }
}

impl Checkpointable for String {
    const MIN_LEN: usize = 8;
    fn save(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        out.extend_from_slice(self.as_bytes());
    }
    fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let n = read_count(r, 1, "String length")?;
        let bytes = r.take(n, "String bytes")?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(DecodeError::OutOfRange {
                field: "String bytes that are valid UTF-8",
                min: n as u64,
                max: n as u64,
                got: e.valid_up_to() as u64,
            }),
        }
    }
}

impl<T: Checkpointable> Checkpointable for Option<T> {
    fn save(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                v.save(out);
            }
        }
    }
    fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.u8("Option tag")? {
            0 => Ok(None),
            1 => Ok(Some(T::load(r)?)),
            got => Err(DecodeError::OutOfRange {
                field: "Option tag",
                min: 0,
                max: 1,
                got: u64::from(got),
            }),
        }
    }
}

impl<T: Checkpointable, const N: usize> Checkpointable for [T; N] {
    const MIN_LEN: usize = T::MIN_LEN.saturating_mul(N);
    fn save(&self, out: &mut Vec<u8>) {
        T::save_slice(self, out);
    }
    fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        if r.left() < T::MIN_LEN.saturating_mul(N) {
            return Err(DecodeError::Truncated {
                field: "array",
                needed: T::MIN_LEN.saturating_mul(N),
                left: r.left(),
            });
        }
        let v = T::load_vec(r, N)?;
        let got = v.len() as u64;
        <[T; N]>::try_from(v).map_err(|_| DecodeError::Mismatch {
            field: "array length",
            expected: N as u64,
            got,
        })
    }
}

macro_rules! tuple {
    ($(($($n:tt $t:ident),+))*) => {$(
        impl<$($t: Checkpointable),+> Checkpointable for ($($t,)+) {
            const MIN_LEN: usize = 0 $(+ $t::MIN_LEN)+;
            fn save(&self, out: &mut Vec<u8>) {
                $(self.$n.save(out);)+
            }
            fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(($($t::load(r)?,)+))
            }
        }
    )*};
}

tuple! {
    (0 A)
    (0 A, 1 B)
    (0 A, 1 B, 2 C)
    (0 A, 1 B, 2 C, 3 D)
}

/// Implements [`Checkpointable`] for a struct with named fields, every one
/// of which is `Checkpointable` (protocol §9.4; §9.2 state bytes). The fields are written in the order listed; list every
/// field once. An optional `version N` sets
/// [`Checkpointable::FORMAT_VERSION`] (default 1).
///
/// A struct with a field that holds a file, a connection or a handle does
/// not compile, because that field's type has no implementation.
///
/// ```
/// use sperli_ckpt::{checkpointable, decode_state, encode_state};
///
/// #[derive(Debug, PartialEq)]
/// struct Sim {
///     step: u64,
///     x: Vec<f64>,
///     name: String,
/// }
/// checkpointable!(Sim { step, x, name } version 2);
///
/// let s = Sim { step: 3, x: vec![0.5, 1.5], name: "heat".into() };
/// let bytes = encode_state(&s);
/// assert_eq!(decode_state::<Sim>(&bytes).unwrap(), s);
/// ```
#[macro_export]
macro_rules! checkpointable {
    ($name:ident { $($field:ident),* $(,)? } version $v:expr) => {
        impl $crate::Checkpointable for $name {
            const FORMAT_VERSION: u32 = $v;
            fn save(&self, out: &mut ::std::vec::Vec<u8>) {
                $($crate::Checkpointable::save(&self.$field, out);)*
            }
            fn load(
                r: &mut $crate::Reader<'_>,
            ) -> ::std::result::Result<Self, $crate::DecodeError> {
                ::std::result::Result::Ok($name {
                    $($field: $crate::Checkpointable::load(r)?,)*
                })
            }
        }
    };
    ($name:ident { $($field:ident),* $(,)? }) => {
        $crate::checkpointable!($name { $($field),* } version 1);
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_wire::HCode;

    fn round<T: Checkpointable + PartialEq + std::fmt::Debug>(v: T) {
        let b = encode_state(&v);
        assert_eq!(decode_state::<T>(&b).unwrap(), v);
        // Every proper prefix fails, without panicking.
        for n in 0..b.len() {
            let e = decode_state::<T>(&b[..n]).unwrap_err();
            assert_eq!(e.h_code(), Some(HCode::H1619));
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(decode_state::<T>(&longer).is_err());
    }

    #[test]
    fn round_trips() {
        round(7u8);
        round(-7i32);
        round(7u32);
        round(i64::MIN);
        round(u64::MAX);
        round(1.5f32);
        round(-0.0f64);
        round(true);
        round(vec![1u8, 2, 3]);
        round(vec![1.0f64, f64::INFINITY]);
        round(vec![vec![1i32], vec![], vec![2, 3]]);
        round(String::from("grüße"));
        round((1u8, -2i64, String::from("x"), vec![true, false]));
        round([1u32, 2, 3]);
        round([[0.5f32; 2]; 3]);
        round(Some(vec![1u64]));
        round(None::<u8>);
    }

    #[test]
    fn nan_bits_are_kept() {
        let v = f64::from_bits(0x7ff8_0000_dead_beef);
        let b = encode_state(&v);
        assert_eq!(decode_state::<f64>(&b).unwrap().to_bits(), v.to_bits());
    }

    #[derive(Debug, PartialEq)]
    struct S {
        a: u64,
        b: Vec<f64>,
    }
    crate::checkpointable!(S { a, b } version 3);

    #[test]
    fn macro_and_version() {
        let s = S {
            a: 9,
            b: vec![1.0, 2.0],
        };
        let bytes = encode_state(&s);
        assert_eq!(&bytes[..4], &3u32.to_le_bytes());
        round(S {
            a: 1,
            b: vec![0.25],
        });
        let mut wrong = bytes.clone();
        wrong[0] = 4;
        assert_eq!(
            decode_state::<S>(&wrong),
            Err(Error::UnexpectedFile {
                what: STATE,
                error: DecodeError::Mismatch {
                    field: "state format version",
                    expected: 3,
                    got: 4
                }
            })
        );
    }

    #[test]
    fn hostile_counts_do_not_allocate() {
        let mut b = 1u32.to_le_bytes().to_vec();
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_state::<Vec<u64>>(&b).is_err());
        assert!(decode_state::<Vec<Vec<u8>>>(&b).is_err());
        assert!(decode_state::<String>(&b).is_err());
        let mut b = 1u32.to_le_bytes().to_vec();
        b.extend_from_slice(&2u64.to_le_bytes());
        b.extend_from_slice(&[0xff, 0xfe]);
        assert!(decode_state::<String>(&b).is_err());
        let mut b = 1u32.to_le_bytes().to_vec();
        b.push(2);
        assert!(decode_state::<bool>(&b).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic fuzz: xorshift bytes into several types.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..400usize {
            let mut b = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.push(x as u8);
            }
            if len >= 4 {
                b[..4].copy_from_slice(&1u32.to_le_bytes());
            }
            let _ = decode_state::<Vec<Vec<u8>>>(&b);
            let _ = decode_state::<(String, Vec<f64>, Option<bool>)>(&b);
            let _ = decode_state::<[Vec<i32>; 3]>(&b);
            let _ = decode_state::<S>(&b);
        }
    }
}
