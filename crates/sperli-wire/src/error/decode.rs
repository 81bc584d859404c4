//! Why bytes do not decode: [`DecodeError`], with the job description's
//! hex line ([`HexError`], protocol §4.1) and host entries ([`HostError`],
//! protocol §4.3).

/// Why a sequence of bytes does not decode. Context (frame, file,
/// description) is added by the [`Error`](super::Error) variant that wraps it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A field needs more bytes than are left.
    #[error("{field}: needs {needed} bytes, {left} left")]
    Truncated {
        /// The field that did not fit.
        field: &'static str,
        /// Bytes it needs.
        needed: usize,
        /// Bytes that were left.
        left: usize,
    },
    /// Bytes after the last field.
    #[error("{extra} bytes after the end of the {item}")]
    TrailingBytes {
        /// What was decoded.
        item: &'static str,
        /// How many bytes were left over.
        extra: usize,
    },
    /// A reserved field, or one fixed to 0 in v1, is not zero.
    #[error("{field} must be 0, got {got}")]
    NotZero {
        /// The field.
        field: &'static str,
        /// The value (for a reserved byte run, the first non-zero byte).
        got: u64,
    },
    /// A field outside its allowed range.
    #[error("{field} must be in {min}..={max}, got {got}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Lowest allowed value.
        min: u64,
        /// Highest allowed value.
        max: u64,
        /// The value that came.
        got: u64,
    },
    /// A field that must equal one value.
    #[error("{field} must be {expected}, got {got}")]
    Mismatch {
        /// The field.
        field: &'static str,
        /// The value it must have.
        expected: u64,
        /// The value that came.
        got: u64,
    },
    /// Wrong magic bytes at the start of a file.
    #[error("magic must be {expected:?}, got {got:02x?}")]
    BadMagic {
        /// The magic, e.g. `SPCK`.
        expected: &'static str,
        /// The four bytes that came.
        got: [u8; 4],
    },
    /// Not lowercase hex of even length.
    #[error("not lowercase hex: {0}")]
    Hex(#[from] HexError),
    /// A host entry that is neither a DNS name nor a dotted IPv4 address.
    #[error("invalid host: {0}")]
    Host(#[from] HostError),
    /// A key field of the right length whose bytes are not a key (e.g. a
    /// CompositeSig public key whose ML-DSA-44 part does not decode).
    #[error("{field} does not decode as a key")]
    InvalidKey {
        /// The field.
        field: &'static str,
    },
    /// A secret key that does not belong to the public key beside it.
    #[error("{secret} does not belong to {public}")]
    KeysDoNotMatch {
        /// The secret key's field.
        secret: &'static str,
        /// The public key's field.
        public: &'static str,
    },
    /// An embedded item (e.g. the join token in a job description) is invalid.
    #[error("the embedded {item} is invalid: {error}")]
    Embedded {
        /// The embedded item.
        item: &'static str,
        /// What is wrong with it.
        error: Box<DecodeError>,
    },
}

/// Why a hex line does not decode (job description, protocol §4.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HexError {
    /// An odd number of hex digits.
    #[error("odd number of digits ({digits})")]
    OddLength {
        /// The number of digits.
        digits: usize,
    },
    /// A character that is not `0-9a-f`.
    #[error("byte 0x{byte:02x} at offset {offset} is not a lowercase hex digit")]
    BadDigit {
        /// Offset in the line.
        offset: usize,
        /// The byte found.
        byte: u8,
    },
    /// The line does not end with exactly one `\n`.
    #[error("the line must end with one \\n and nothing after it")]
    MissingNewline,
}

/// Why a host entry is not valid (protocol §4.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// Empty, or longer than 253 bytes.
    #[error("length must be 1..=253, got {len}")]
    Length {
        /// The length.
        len: usize,
    },
    /// A label that is empty, longer than 63, or has a hyphen at an edge.
    #[error("label {label:?} is not 1-63 characters of a-z 0-9 - without a hyphen at an edge")]
    BadLabel {
        /// The label.
        label: String,
    },
    /// A character outside `a-z 0-9 - .` (uppercase included: hosts are stored lowercase).
    #[error("character 0x{byte:02x} is not allowed in a host")]
    BadChar {
        /// The byte found.
        byte: u8,
    },
    /// Only digits and dots, but not a valid dotted IPv4 address.
    #[error("{host:?} looks numeric but is not a dotted IPv4 address")]
    BadIpv4 {
        /// The entry.
        host: String,
    },
}
