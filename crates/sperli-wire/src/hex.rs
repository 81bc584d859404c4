//! Strict lowercase hex, as the job description line uses (protocol §4.1).

use crate::error::HexError;

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of `bytes`.
///
/// ```
/// assert_eq!(sperli_wire::hex::encode(&[0x0a, 0xff]), "0aff");
/// ```
pub fn encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

fn digit(offset: usize, byte: u8) -> Result<u8, HexError> {
    match byte {
        b'0'..=b'9' => Ok(byte - b'0'),
        b'a'..=b'f' => Ok(byte - b'a' + 10),
        _ => Err(HexError::BadDigit { offset, byte }),
    }
}

/// Decodes lowercase hex of even length; uppercase digits are refused.
///
/// ```
/// assert_eq!(sperli_wire::hex::decode(b"0aff").unwrap(), vec![0x0a, 0xff]);
/// assert!(sperli_wire::hex::decode(b"0AFF").is_err());
/// ```
pub fn decode(text: &[u8]) -> Result<Vec<u8>, HexError> {
    if text.len() % 2 != 0 {
        return Err(HexError::OddLength { digits: text.len() });
    }
    let mut out = Vec::with_capacity(text.len() / 2);
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out.push(digit(2 * i, pair[0])? << 4 | digit(2 * i + 1, pair[1])?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let v: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(encode(&v).as_bytes()).unwrap(), v);
        assert_eq!(decode(b"abc"), Err(HexError::OddLength { digits: 3 }));
        assert_eq!(
            decode(b"0g"),
            Err(HexError::BadDigit {
                offset: 1,
                byte: b'g'
            })
        );
    }
}
