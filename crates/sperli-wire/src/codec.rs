//! The one `Codec` trait and the bounded [`Reader`] every decoder uses.
//!
//! Decoders never index past the input: every read goes through [`Reader`],
//! which knows how many bytes are left and answers
//! [`DecodeError::Truncated`] naming the field that did not fit.

use crate::error::DecodeError;
use crate::limits::SIGNATURE_LEN;

/// A cursor over borrowed input that knows how many bytes are left.
///
/// ```
/// use sperli_wire::codec::Reader;
/// let mut r = Reader::new(&[1, 0, 2, 0, 0, 0]);
/// assert_eq!(r.u16("a").unwrap(), 1);
/// assert_eq!(r.left(), 4);
/// assert_eq!(r.u32("b").unwrap(), 2);
/// assert!(r.expect_end("example").is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Bytes read so far.
    pub fn used(&self) -> usize {
        self.pos
    }

    /// Takes exactly `n` bytes, or fails naming `field`.
    pub fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.left() < n {
            return Err(DecodeError::Truncated {
                field,
                needed: n,
                left: self.left(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Takes a fixed-size array.
    pub fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    /// Reads one byte.
    pub fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    /// Reads a little-endian `u16`.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    /// Reads a little-endian `u32`.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    /// Reads a little-endian `u64`.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// Reads a reserved field of `n` bytes that must be all zero.
    pub fn zeros(&mut self, n: usize, field: &'static str) -> Result<(), DecodeError> {
        let bytes = self.take(n, field)?;
        if let Some(pos) = bytes.iter().position(|b| *b != 0) {
            return Err(DecodeError::NotZero {
                field,
                got: u64::from(bytes[pos]),
            });
        }
        Ok(())
    }

    /// Takes everything that is left.
    pub fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    /// Fails with [`DecodeError::TrailingBytes`] unless the input is used up.
    pub fn expect_end(&self, item: &'static str) -> Result<(), DecodeError> {
        match self.left() {
            0 => Ok(()),
            extra => Err(DecodeError::TrailingBytes { item, extra }),
        }
    }

    /// A CompositeSig signature as join tokens and COMMIT files carry it:
    /// `u16 sig_len`, which must be 2484 ("sig_len = 2484", protocol
    /// §7.1.2, §9.3), then the 2484 signature bytes.
    pub fn signature(&mut self) -> Result<&'a [u8], DecodeError> {
        let sig_len = self.u16("sig_len")?;
        if usize::from(sig_len) != SIGNATURE_LEN {
            return Err(DecodeError::Mismatch {
                field: "sig_len",
                expected: SIGNATURE_LEN as u64,
                got: u64::from(sig_len),
            });
        }
        self.take(SIGNATURE_LEN, "signature")
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary (an ABORT
/// message, protocol §7.5, or any bounded UTF-8 field).
///
/// ```
/// assert_eq!(sperli_wire::codec::truncate_utf8("aé", 2), "a");
/// ```
pub fn truncate_utf8(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Encode and decode of one wire item (a frame payload, a file, a message).
///
/// `decode` reads the whole input and rejects trailing bytes; `read` reads
/// one item from a longer input.
pub trait Codec<'a>: Sized {
    /// A short name used in errors ("HELLO payload", "COMMIT file", ...).
    const NAME: &'static str;

    /// Appends the encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>);

    /// Reads one item from `r`.
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError>;

    /// Decodes `bytes`, which must hold exactly one item.
    fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let v = Self::read(&mut r)?;
        r.expect_end(Self::NAME)?;
        Ok(v)
    }

    /// The encoding as a fresh vector.
    fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

/// Little-endian writers on `Vec<u8>`, used by every encoder.
pub trait PutLe {
    /// Appends a `u16`, little-endian.
    fn put_u16(&mut self, v: u16);
    /// Appends a `u32`, little-endian.
    fn put_u32(&mut self, v: u32);
    /// Appends a `u64`, little-endian.
    fn put_u64(&mut self, v: u64);
}

impl PutLe for Vec<u8> {
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_names_field() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(
            r.u32("size"),
            Err(DecodeError::Truncated {
                field: "size",
                needed: 4,
                left: 3
            })
        );
    }

    #[test]
    fn zeros_rejects_nonzero() {
        let mut r = Reader::new(&[0, 0, 5]);
        assert_eq!(
            r.zeros(3, "reserved"),
            Err(DecodeError::NotZero {
                field: "reserved",
                got: 5
            })
        );
    }
}
