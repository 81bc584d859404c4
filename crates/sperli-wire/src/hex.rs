//! Strict lowercase hex, as the job description line uses (protocol §4.1).

use crate::error::HexError;

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of `bytes`.
///
/// ```
/// assert_eq!(sperli_wire::hex::encode(&[0x0a, 0xff]), "0aff");
/// ```
pub fn encode(bytes: &[u8]) -> String {
    let mut s = Vec::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)]);
        s.push(DIGITS[usize::from(b & 15)]);
    }
    // Every byte pushed is an ASCII digit.
    String::from_utf8(s).unwrap_or_default()
}

/// Each byte's value as a hex digit, `INVALID` where it is none (only
/// lowercase digits count).
const VALUES: [u8; 256] = {
    let mut t = [INVALID; 256];
    let mut i = 0;
    while i < 16 {
        t[DIGITS[i] as usize] = i as u8;
        i += 1;
    }
    t
};
const INVALID: u8 = 0xff;

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
        let (hi, lo) = (VALUES[usize::from(pair[0])], VALUES[usize::from(pair[1])]);
        if (hi | lo) & 0xf0 != 0 {
            let (offset, byte) = if hi == INVALID {
                (2 * i, pair[0])
            } else {
                (2 * i + 1, pair[1])
            };
            return Err(HexError::BadDigit { offset, byte });
        }
        out.push(hi << 4 | lo);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip_and_uppercase_refused(bytes: Vec<u8>) {
            let text = encode(&bytes);
            prop_assert_eq!(decode(text.as_bytes()).unwrap(), bytes.clone());
            let upper = text.to_ascii_uppercase();
            prop_assert_eq!(decode(upper.as_bytes()).is_ok(), upper == text);
        }
    }

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
        assert_eq!(
            decode(b"00G0"),
            Err(HexError::BadDigit {
                offset: 2,
                byte: b'G'
            })
        );
        // Every byte that is not a lowercase digit is refused.
        for b in 0..=255u8 {
            let ok = b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
            assert_eq!(decode(&[b'0', b]).is_ok(), ok, "{b}");
        }
    }
}
