//! [`State`]: a Python checkpoint state as a `Checkpointable` value
//! (sperli-ckpt; protocol §9.2, the opaque state bytes of a rank file),
//! and its conversion from and to Python objects (ckpt.rs).
//!
//! Encoding (little-endian; the state format version is 1): one tag byte,
//! then
//!
//! | tag | value | then |
//! |---|---|---|
//! | 0 | `None` | - |
//! | 1 | `bool` | one byte 0/1 |
//! | 2 | `int` in int64 | 8 bytes |
//! | 3 | `int` beyond int64 | its decimal text (`u64` length, UTF-8) |
//! | 4 | `float` | 8 bytes (IEEE bits) |
//! | 5 | `str` | `u64` length, UTF-8 |
//! | 6 | `bytes` (`bytearray`, `memoryview`: restored as `bytes`) | `u64` length, bytes |
//! | 7 | numpy array | dtype (`dtype.str` as a `str`), shape (`u64` count, `u64` each), data (`u64` length, C order) |
//! | 8 | numpy scalar | as 7, shape empty |
//! | 9, 10 | `tuple`, `list` | `u64` count, the items |
//! | 11 | `dict` | `u64` count, key and value per item |
//!
//! Decoding never panics, never allocates more than the bytes can fill,
//! and refuses nesting deeper than [`MAX_DEPTH`].

use sperli_ckpt::{Checkpointable, DecodeError, Reader};

/// The deepest nesting of tuples, lists and dicts.
pub(crate) const MAX_DEPTH: usize = 64;

/// A checkpoint state (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    None,
    Bool(bool),
    Int(i64),
    BigInt(String),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    /// numpy array: `dtype.str`, shape, C-order bytes.
    Array {
        dtype: String,
        shape: Vec<u64>,
        data: Vec<u8>,
    },
    /// numpy scalar (a 0-d array).
    Scalar {
        dtype: String,
        data: Vec<u8>,
    },
    Tuple(Vec<State>),
    List(Vec<State>),
    Dict(Vec<(State, State)>),
}

fn count(r: &mut Reader<'_>, min_len: usize, field: &'static str) -> Result<usize, DecodeError> {
    let n = r.u64(field)?;
    let max = (r.left() / min_len.max(1)) as u64;
    if n > max {
        return Err(DecodeError::Truncated {
            field,
            needed: usize::try_from(n).unwrap_or(usize::MAX),
            left: r.left(),
        });
    }
    Ok(n as usize)
}

impl State {
    fn save_items(items: &[State], out: &mut Vec<u8>) {
        out.extend_from_slice(&(items.len() as u64).to_le_bytes());
        for i in items {
            i.save(out);
        }
    }

    fn load_items(r: &mut Reader<'_>, depth: usize) -> Result<Vec<State>, DecodeError> {
        let n = count(r, 1, "state item count")?;
        (0..n).map(|_| Self::load_at(r, depth + 1)).collect()
    }

    fn load_at(r: &mut Reader<'_>, depth: usize) -> Result<State, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::OutOfRange {
                field: "state nesting depth",
                min: 0,
                max: MAX_DEPTH as u64,
                got: depth as u64,
            });
        }
        Ok(match r.u8("state tag")? {
            0 => State::None,
            1 => State::Bool(bool::load(r)?),
            2 => State::Int(i64::load(r)?),
            3 => State::BigInt(String::load(r)?),
            4 => State::Float(f64::load(r)?),
            5 => State::Str(String::load(r)?),
            6 => State::Bytes(Vec::<u8>::load(r)?),
            7 => State::Array {
                dtype: String::load(r)?,
                shape: Vec::<u64>::load(r)?,
                data: Vec::<u8>::load(r)?,
            },
            8 => State::Scalar {
                dtype: String::load(r)?,
                data: Vec::<u8>::load(r)?,
            },
            9 => State::Tuple(Self::load_items(r, depth)?),
            10 => State::List(Self::load_items(r, depth)?),
            11 => {
                let n = count(r, 2, "state dict length")?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = Self::load_at(r, depth + 1)?;
                    let v = Self::load_at(r, depth + 1)?;
                    items.push((k, v));
                }
                State::Dict(items)
            }
            got => {
                return Err(DecodeError::OutOfRange {
                    field: "state tag",
                    min: 0,
                    max: 11,
                    got: u64::from(got),
                })
            }
        })
    }
}

impl Checkpointable for State {
    fn save(&self, out: &mut Vec<u8>) {
        match self {
            State::None => out.push(0),
            State::Bool(b) => {
                out.push(1);
                b.save(out);
            }
            State::Int(i) => {
                out.push(2);
                i.save(out);
            }
            State::BigInt(s) => {
                out.push(3);
                s.save(out);
            }
            State::Float(f) => {
                out.push(4);
                f.save(out);
            }
            State::Str(s) => {
                out.push(5);
                s.save(out);
            }
            State::Bytes(b) => {
                out.push(6);
                b.save(out);
            }
            State::Array { dtype, shape, data } => {
                out.push(7);
                dtype.save(out);
                shape.save(out);
                data.save(out);
            }
            State::Scalar { dtype, data } => {
                out.push(8);
                dtype.save(out);
                data.save(out);
            }
            State::Tuple(items) => {
                out.push(9);
                Self::save_items(items, out);
            }
            State::List(items) => {
                out.push(10);
                Self::save_items(items, out);
            }
            State::Dict(items) => {
                out.push(11);
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for (k, v) in items {
                    k.save(out);
                    v.save(out);
                }
            }
        }
    }

    fn load(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Self::load_at(r, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_ckpt::{decode_state, encode_state};

    fn sample() -> State {
        State::Dict(vec![
            (State::Str("step".into()), State::Int(-7)),
            (
                State::Str("x".into()),
                State::Array {
                    dtype: "<f8".into(),
                    shape: vec![2, 3],
                    data: (0..48).collect(),
                },
            ),
            (
                State::Int(3),
                State::Tuple(vec![
                    State::None,
                    State::Bool(true),
                    State::Float(f64::NAN),
                    State::BigInt("123456789012345678901234567890".into()),
                    State::Bytes(vec![0, 255]),
                    State::List(vec![]),
                    State::Scalar {
                        dtype: "<i4".into(),
                        data: vec![1, 0, 0, 0],
                    },
                ]),
            ),
        ])
    }

    #[test]
    fn round_trip_keeps_every_kind() {
        let s = sample();
        let back: State = decode_state(&encode_state(&s)).unwrap();
        // NaN != NaN: compare the encodings.
        assert_eq!(encode_state(&back), encode_state(&s));
    }

    #[test]
    fn every_proper_prefix_fails() {
        let bytes = encode_state(&sample());
        for n in 0..bytes.len() {
            assert!(decode_state::<State>(&bytes[..n]).is_err(), "prefix {n}");
        }
    }

    #[test]
    fn hostile_counts_and_depth_are_refused() {
        // A list claiming 2^60 items in a few bytes allocates nothing.
        let mut b = 1u32.to_le_bytes().to_vec();
        b.push(10);
        b.extend_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(decode_state::<State>(&b).is_err());
        // Lists nested past the limit.
        let mut b = 1u32.to_le_bytes().to_vec();
        for _ in 0..=MAX_DEPTH + 1 {
            b.push(10);
            b.extend_from_slice(&1u64.to_le_bytes());
        }
        b.push(0);
        assert!(decode_state::<State>(&b).is_err());
        // An unknown tag.
        let mut b = 1u32.to_le_bytes().to_vec();
        b.push(99);
        assert!(decode_state::<State>(&b).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for len in 0..600 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 13) as u8
                })
                .collect();
            let mut v = 1u32.to_le_bytes().to_vec();
            v.extend_from_slice(&bytes);
            let _ = decode_state::<State>(&v);
        }
    }
}
