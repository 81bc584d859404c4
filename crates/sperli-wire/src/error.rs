//! The project's one error type and its mapping to the H-codes
//! (docs/error-codes.md; protocol §13).
//!
//! Every variant carries what was expected and what came. [`Error::h_code`]
//! is the single place where errors map to H-codes.

use std::fmt;

use crate::ckpt_chunks::ChunkError;
use crate::frame_type::FrameType;
use crate::ids::{JobId, Sha256Digest};

/// The documented H-codes (protocol §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HCode {
    /// Frame rejected.
    H1610 = 1610,
    /// Authentication failed (TLS, certificate subject, HELLO or token).
    H1611 = 1611,
    /// Job aborted by a peer (ABORT received).
    H1612 = 1612,
    /// Peer lost (silence limit passed, or a close without BYE).
    H1613 = 1613,
    /// Host refused.
    H1614 = 1614,
    /// Invalid job description.
    H1615 = 1615,
    /// Connection set-up timed out.
    H1616 = 1616,
    /// Collective frame that does not match its call or is truncated.
    H1617 = 1617,
    /// Invalid collective arguments.
    H1618 = 1618,
    /// Not the expected file.
    H1619 = 1619,
    /// SHA-256 mismatch.
    H1620 = 1620,
    /// Malformed COMMIT or bad signature.
    H1621 = 1621,
    /// No epoch can be resumed.
    H1622 = 1622,
    /// Signed COMMIT with another size.
    H1623 = 1623,
    /// Checkpoint with an open send or receive handle.
    H1624 = 1624,
}

impl HCode {
    /// Every code, ascending.
    pub const ALL: [HCode; 15] = [
        HCode::H1610,
        HCode::H1611,
        HCode::H1612,
        HCode::H1613,
        HCode::H1614,
        HCode::H1615,
        HCode::H1616,
        HCode::H1617,
        HCode::H1618,
        HCode::H1619,
        HCode::H1620,
        HCode::H1621,
        HCode::H1622,
        HCode::H1623,
        HCode::H1624,
    ];

    /// The number, e.g. 1617 (as carried in ABORT's `code`).
    pub fn number(self) -> u32 {
        self as u32
    }

    /// The code for a number, if it is one of ours.
    pub fn from_number(n: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.number() == n)
    }

    /// One-line meaning, as in docs/error-codes.md.
    pub fn meaning(self) -> &'static str {
        match self {
            HCode::H1610 => "frame rejected",
            HCode::H1611 => "authentication failed",
            HCode::H1612 => "job aborted by a peer",
            HCode::H1613 => "peer lost",
            HCode::H1614 => "host refused",
            HCode::H1615 => "invalid job description",
            HCode::H1616 => "connection set-up timed out",
            HCode::H1617 => "collective frame does not match its call",
            HCode::H1618 => "invalid collective arguments",
            HCode::H1619 => "not the expected file",
            HCode::H1620 => "SHA-256 mismatch",
            HCode::H1621 => "malformed COMMIT or bad signature",
            HCode::H1622 => "no epoch can be resumed",
            HCode::H1623 => "signed COMMIT with another size",
            HCode::H1624 => "checkpoint with an open send or receive handle",
        }
    }
}

impl fmt::Display for HCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "H{}", self.number())
    }
}

/// Why a sequence of bytes does not decode. Context (frame, file,
/// description) is added by the [`Error`] variant that wraps it.
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

/// Why a frame is rejected (H1610; protocol §6.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// `length` above 16777216.
    #[error("length {got} exceeds the maximum {max}")]
    TooLong {
        /// The maximum payload length.
        max: u32,
        /// The length in the header.
        got: u32,
    },
    /// `type` 0 or above 11.
    #[error("frame type {got} is not 1..=11")]
    UnknownType {
        /// The type byte.
        got: u8,
    },
    /// `flags`, `service` or `membership_epoch` not 0.
    #[error("{field} must be 0 in v1, got {got}")]
    ReservedField {
        /// The header field.
        field: &'static str,
        /// Its value.
        got: u64,
    },
    /// Another job's id.
    #[error("job id {got} is not this job's {expected}")]
    WrongJob {
        /// This job.
        expected: JobId,
        /// The frame's job id.
        got: JobId,
    },
    /// A source rank other than the authenticated peer's.
    #[error("source rank {got} on the connection of authenticated rank {expected}")]
    WrongSource {
        /// The authenticated peer.
        expected: u32,
        /// The frame's source rank.
        got: u32,
    },
    /// A target rank other than our own.
    #[error("target rank {got} is not this rank {expected}")]
    WrongTarget {
        /// Our rank.
        expected: u32,
        /// The frame's target rank.
        got: u32,
    },
    /// An incarnation above ours.
    #[error("incarnation {got} is newer than this rank's {own}")]
    NewerIncarnation {
        /// Our incarnation.
        own: u32,
        /// The frame's incarnation.
        got: u32,
    },
    /// The epoch field breaks the epoch rule of its type.
    #[error(
        "{frame_type} frame with epoch {got} (checkpoint frames need >= 1, RESUME any, others 0)"
    )]
    Epoch {
        /// The frame's type.
        frame_type: FrameType,
        /// The epoch field.
        got: u64,
    },
    /// A payload length outside its type's rule.
    #[error("{frame_type} payload of {got} bytes, allowed {min}..={max}")]
    PayloadLength {
        /// The frame's type.
        frame_type: FrameType,
        /// Shortest allowed.
        min: u32,
        /// Longest allowed.
        max: u32,
        /// The header's length.
        got: u32,
    },
    /// A DATA tag of 2147483648 or above.
    #[error("DATA tag {got} is reserved (user tags are 0..=2147483647)")]
    ReservedTag {
        /// The tag.
        got: u32,
    },
    /// A non-DATA frame with a tag other than 0.
    #[error("{frame_type} frame with tag {got} (must be 0)")]
    NonZeroTag {
        /// The frame's type.
        frame_type: FrameType,
        /// The tag.
        got: u32,
    },
    /// The payload does not decode.
    #[error("{frame_type} payload: {error}")]
    Payload {
        /// The frame's type.
        frame_type: FrameType,
        /// What is wrong with it.
        error: DecodeError,
    },
    /// A frame that is valid alone but not allowed now.
    #[error("{frame_type} frame not allowed {when}")]
    Unexpected {
        /// The frame's type.
        frame_type: FrameType,
        /// When it came, e.g. "before HELLO", "after BYE", "twice".
        when: &'static str,
    },
    /// A HEARTBEAT counter that is not the previous plus one.
    #[error("HEARTBEAT counter {got}, expected {expected}")]
    HeartbeatCounter {
        /// The counter due.
        expected: u64,
        /// The counter that came.
        got: u64,
    },
    /// The connection closed in the middle of a frame.
    #[error("connection closed {read} bytes into a frame of {total}")]
    CutShort {
        /// Bytes of the frame read.
        read: usize,
        /// Bytes the frame has (header + payload).
        total: usize,
    },
    /// A CKPT_DATA frame that does not continue the file being received
    /// (protocol §7.8: chunks in order, the total never changes).
    #[error("CKPT_DATA chunk: {0}")]
    Chunk(ChunkError),
}

/// What failed when a peer authenticated (H1611).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The TLS handshake failed (certificate chain, version, alert).
    #[error("TLS handshake: {0}")]
    Tls(TlsFailure),
    /// The peer certificate's subject is not the expected rank of this job.
    #[error("certificate subject {got:?}, expected {expected:?}")]
    Subject {
        /// The CN we expected.
        expected: String,
        /// The CN that came.
        got: String,
    },
    /// The HELLO payload does not decode or breaks a HELLO rule.
    #[error("HELLO: {0}")]
    Hello(DecodeError),
    /// The join token fails one check.
    #[error("join token: {0}")]
    Token(TokenError),
    /// The first frame on the connection is not a HELLO (protocol §7.1:
    /// nothing may come before HELLO).
    #[error("first frame is {got}, not HELLO")]
    NotHello {
        /// The type of the frame that came first.
        got: FrameType,
    },
    /// The first frame's header is rejected (protocol §6.2) before any
    /// HELLO was accepted.
    #[error("first frame rejected: {0}")]
    BadFirstFrame(FrameError),
}

/// Why a TLS handshake failed, in our words (the TLS crate maps its errors here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The peer offered no TLS 1.3.
    #[error("peer does not speak TLS 1.3")]
    ProtocolVersion,
    /// The peer sent no certificate.
    #[error("peer sent no certificate")]
    NoCertificate,
    /// The certificate is not signed by this job's CA.
    #[error("certificate not issued by this job's CA")]
    UnknownIssuer,
    /// The certificate does not name the host that was dialled.
    #[error("certificate does not name the dialled host")]
    NameMismatch,
    /// The certificate is expired or not yet valid.
    #[error("certificate expired or not yet valid")]
    Expired,
    /// The certificate or handshake is otherwise invalid.
    #[error("invalid certificate or handshake")]
    Invalid,
    /// The peer sent a fatal alert.
    #[error("peer sent a fatal alert")]
    PeerAlert,
    /// The peer closed or sent garbage during the handshake.
    #[error("handshake broken off or not TLS")]
    Broken,
}

/// Why a join token is refused (H1611; protocol §7.1.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token does not parse.
    #[error("malformed: {0}")]
    Malformed(DecodeError),
    /// The signature does not verify under the job public key.
    #[error("signature does not verify with the job public key")]
    BadSignature,
    /// Another job's id.
    #[error("job id {got}, expected {expected}")]
    Job {
        /// Our job.
        expected: JobId,
        /// The token's.
        got: JobId,
    },
    /// The rank differs from the frame header's or the certificate's.
    #[error("rank {got}, expected {expected}")]
    Rank {
        /// The rank of the header and certificate.
        expected: u32,
        /// The token's.
        got: u32,
    },
    /// The size differs from the job's.
    #[error("size {got}, expected {expected}")]
    Size {
        /// The job's size.
        expected: u32,
        /// The token's.
        got: u32,
    },
    /// The incarnation differs from the job's.
    #[error("incarnation {got}, expected {expected}")]
    Incarnation {
        /// Our incarnation.
        expected: u32,
        /// The token's.
        got: u32,
    },
    /// The host differs from that rank's host-list entry.
    #[error("host {got:?}, host list says {expected:?}")]
    Host {
        /// The host-list entry.
        expected: String,
        /// The token's host.
        got: String,
    },
    /// Expired: `expires_at` is not after the receiver's clock.
    #[error("expired at {expires_at_ms} ms, receiver's clock {now_ms} ms")]
    Expired {
        /// The token's expiry (Unix ms).
        expires_at_ms: u64,
        /// The receiver's clock (Unix ms).
        now_ms: u64,
    },
}

/// How a peer was lost (H1613).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LossCause {
    /// No byte for longer than the silence limit.
    #[error("silent for {silent_ms} ms (limit {limit_ms} ms)")]
    Silence {
        /// How long it was silent.
        silent_ms: u64,
        /// The silence limit.
        limit_ms: u64,
    },
    /// An orderly close (FIN or close_notify) without BYE.
    #[error("closed the connection without BYE")]
    ClosedWithoutBye,
    /// The connection was reset.
    #[error("connection reset")]
    Reset,
    /// The peer ended its job step normally: it sent BYE and closed
    /// (protocol §7.6). Not a failure of the job; a send to it, or a
    /// receive that nothing queued from it can satisfy, cannot complete.
    #[error("left the job (BYE)")]
    Departed,
    /// Another socket error.
    #[error("socket error {kind:?}")]
    Socket {
        /// The OS error kind.
        kind: std::io::ErrorKind,
    },
}

/// What a rank's stdin was when it held no job description at all (H1615,
/// [`Error::NotLaunched`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchStdin {
    /// A terminal: the program was started by hand.
    #[error("stdin is a terminal")]
    Terminal,
    /// Empty (end of file at once, e.g. `/dev/null`).
    #[error("stdin is empty")]
    Empty,
}

/// Why a host is refused (H1614; protocol §2.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RefusalRule {
    /// One of the built-in reserved names (or below it).
    #[error("matches the reserved name {name:?}")]
    Reserved {
        /// The reserved name.
        name: &'static str,
    },
    /// A name from `SPERLI_REFUSED_HOSTS` (or below it).
    #[error("matches {name:?} from SPERLI_REFUSED_HOSTS")]
    Variable {
        /// The refused name.
        name: String,
    },
    /// A name from the `--deny-hosts` file (or below it).
    #[error("matches {name:?} from the deny-hosts file")]
    DenyFile {
        /// The refused name.
        name: String,
    },
}

/// How a collective frame fails to match its call (H1617).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MismatchError {
    /// A collective-header field differs from the call.
    #[error("from rank {from}: {field} is {got}, the call has {expected}")]
    Header {
        /// The sender.
        from: u32,
        /// The field (operation, element_type, reduction, phase, root, sequence).
        field: &'static str,
        /// The call's value.
        expected: u64,
        /// The frame's value.
        got: u64,
    },
    /// Data of the wrong length for the call.
    #[error("from rank {from}: {got} data bytes, the call needs {expected}")]
    Length {
        /// The sender.
        from: u32,
        /// Bytes the call needs.
        expected: u64,
        /// Bytes that came.
        got: u64,
    },
    /// A pipelined chunk that does not continue its stream (feature bit 1,
    /// protocol §14.4): `field` is `total` (the stream's length changed),
    /// `offset` (out of order, repeated or after the end) or `length` (the
    /// chunk-length rule).
    #[error("from rank {from}: chunk {field} is {got}, the stream needs {expected}")]
    Chunk {
        /// The sender.
        from: u32,
        /// `total`, `offset` or `length`.
        field: &'static str,
        /// What the stream needs.
        expected: u64,
        /// What came.
        got: u64,
    },
    /// A frame of another type where a collective frame was due.
    #[error("from rank {from}: {got} frame where a COLLECTIVE frame was due")]
    FrameType {
        /// The sender.
        from: u32,
        /// The type that came.
        got: FrameType,
    },
}

/// Why collective arguments are invalid (H1618).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentError {
    /// Root not below size.
    #[error("root {root} is not below size {size}")]
    Root {
        /// The root given.
        root: u32,
        /// The job size.
        size: u32,
    },
    /// Element type code above 6.
    #[error("element type {got} is not 0..=6")]
    ElementType {
        /// The code.
        got: u8,
    },
    /// Reduction code 0 or above 10.
    #[error("reduction {got} is not 1..=10")]
    Reduction {
        /// The code.
        got: u8,
    },
    /// A reduction refused for the element type.
    #[error("reduction {reduction} is not allowed on {element_type}")]
    Refused {
        /// The element type's name.
        element_type: &'static str,
        /// The reduction's name.
        reduction: &'static str,
    },
    /// A byte length that is not a whole number of elements.
    #[error("{len} bytes is not a whole number of {width}-byte elements")]
    NotWholeElements {
        /// The length in bytes.
        len: usize,
        /// The element width.
        width: usize,
    },
    /// Two operands of different lengths (reduce contributions).
    #[error("operands of {left} and {right} bytes")]
    LengthMismatch {
        /// Left operand bytes.
        left: usize,
        /// Right operand bytes.
        right: usize,
    },
    /// Scatter data at the root not a whole number of blocks of at most 16777200 bytes.
    #[error("scatter of {len} bytes to {size} ranks is not {size} equal blocks of at most 16777200 bytes")]
    ScatterBlocks {
        /// Root data bytes.
        len: usize,
        /// Job size.
        size: u32,
    },
    /// A peer rank that is not below the job size (point-to-point calls).
    #[error("rank {rank} is not below size {size}")]
    Rank {
        /// The rank given.
        rank: u32,
        /// The job size.
        size: u32,
    },
    /// A user tag of 2147483648 or above (those tags are reserved).
    #[error("tag {tag} is reserved (user tags are 0..=2147483647)")]
    Tag {
        /// The tag given.
        tag: u32,
    },
    /// Data longer than one collective frame carries.
    #[error("{len} bytes exceed the {max} a collective frame carries")]
    TooLong {
        /// The length.
        len: usize,
        /// The maximum.
        max: usize,
    },
}

/// What a SHA-256 was computed over (H1620).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HashSubject {
    /// The payload against the rank file header.
    RankFilePayload,
    /// The whole rank file against the COMMIT entry.
    CommitEntry,
    /// A rank file against the hash in CKPT_ACK.
    Ack,
}

impl fmt::Display for HashSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashSubject::RankFilePayload => "rank file payload vs its header",
            HashSubject::CommitEntry => "rank file vs its COMMIT entry",
            HashSubject::Ack => "rank file vs CKPT_ACK",
        })
    }
}

/// What the project's operations can fail with. Each variant maps to one
/// H-code in [`Error::h_code`]; failures of the local machine and misuse of
/// the API carry none. `Display` writes the H-code (from `h_code`, the one
/// place it is written) and then what happened: `H1610 frame rejected: ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// H1610.
    FrameRejected(FrameError),
    /// H1611.
    Authentication {
        /// The rank the peer claimed or was expected to be, if known.
        peer: Option<u32>,
        /// What failed.
        error: AuthError,
    },
    /// H1612.
    AbortedByPeer {
        /// The rank that sent ABORT.
        from: u32,
        /// Its reason code (protocol §7.5).
        reason: u16,
        /// Its H number, or 0.
        code: u32,
        /// Its message (lossy UTF-8).
        message: String,
    },
    /// H1613.
    PeerLost {
        /// The lost rank.
        peer: u32,
        /// How it was noticed.
        cause: LossCause,
    },
    /// H1614.
    HostRefused {
        /// The host as given.
        host: String,
        /// The rule that refuses it.
        rule: RefusalRule,
    },
    /// H1615.
    JobDescription(DecodeError),
    /// H1615: no job description at all: the program was not started by
    /// the launcher. Its message is one line that says how to start it.
    NotLaunched {
        /// What stdin was.
        stdin: LaunchStdin,
        /// The program as it was started (`argv[0]`).
        program: String,
    },
    /// H1616.
    SetupTimeout {
        /// The set-up window.
        after_ms: u64,
        /// Ranks not connected.
        missing: Vec<u32>,
    },
    /// H1617.
    CollectiveMismatch(MismatchError),
    /// H1618.
    InvalidArguments(ArgumentError),
    /// H1619.
    UnexpectedFile {
        /// "rank file", "buddy copy", ...
        what: &'static str,
        /// What differs.
        error: DecodeError,
    },
    /// H1620.
    HashMismatch {
        /// What was hashed.
        what: HashSubject,
        /// The recorded hash.
        expected: Sha256Digest,
        /// The computed hash.
        got: Sha256Digest,
    },
    /// H1621.
    BadCommit(CommitError),
    /// H1622.
    NoResumableEpoch {
        /// Why: the first failure of the resume exchange this rank knows
        /// of (protocol §10.2).
        reason: Box<ResumeFailure>,
    },
    /// H1623.
    CommitSizeMismatch {
        /// The job's size.
        expected: u32,
        /// The COMMIT's size.
        got: u32,
    },
    /// H1624.
    OpenHandles {
        /// Open send handles (on this rank, or summed).
        sends: u64,
        /// Open receive handles.
        recvs: u64,
    },
    /// The program used the API in a way it does not allow (no H-code:
    /// not bad input from a peer, and nothing was sent).
    Usage(UsageError),
    /// The open-file limit is too low for the job size (no H-code: a local
    /// setting). Raise it with `ulimit -n` (and the hard limit if needed).
    FdLimit {
        /// Descriptors the rank needs.
        needed: u64,
        /// The soft limit.
        soft: u64,
        /// The hard limit.
        hard: u64,
    },
    /// A failure of this machine that is neither bad input nor file or
    /// socket I/O (no H-code; ABORT code 0).
    Local(LocalError),
    /// A local I/O failure (no H-code: not bad input).
    Io {
        /// What was being done.
        op: &'static str,
        /// The OS error kind.
        kind: std::io::ErrorKind,
    },
}

/// Why no epoch can be resumed (H1622, [`Error::NoResumableEpoch`];
/// protocol §10.2): the first failure a rank knows of.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeFailure {
    /// This rank's own failure: its rank file, the copy its buddy sent, or
    /// a COMMIT (an error with its own code, e.g. H1620).
    #[error("{0}")]
    Own(Error),
    /// This rank's own file is missing and its buddy answered that it has
    /// no valid copy (CKPT_DATA kind 3).
    #[error(
        "epoch {epoch}: the own rank file is missing and rank {buddy} has no valid copy of it"
    )]
    NoBuddyCopy {
        /// The buddy, (rank + 1) mod size.
        buddy: u32,
        /// The epoch being loaded.
        epoch: u64,
    },
    /// Rank 0's view: rank `rank` answered RESUME status 2 for `epoch`.
    #[error("rank {rank} cannot load its state of epoch {epoch} (RESUME status 2)")]
    CannotLoad {
        /// The rank that cannot load.
        rank: u32,
        /// The epoch it was asked to load.
        epoch: u64,
    },
    /// The view of a rank that loaded: rank 0 ended the exchange with
    /// RESUME status 2 after `epoch`, the last epoch it chose.
    #[error("rank 0 ended the resume with RESUME status 2 after epoch {epoch}")]
    Abandoned {
        /// The last epoch rank 0 chose.
        epoch: u64,
    },
}

/// A local failure that is neither bad input nor I/O ([`Error::Local`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The system random number generator failed (signing needs fresh
    /// randomness: ML-DSA signs hedged).
    #[error("the system random number generator failed while {op}")]
    Random {
        /// What needed it, e.g. "signing the COMMIT file".
        op: &'static str,
    },
    /// A helper thread of this rank panicked.
    #[error("a helper thread panicked while {op}")]
    ThreadPanicked {
        /// What it was doing.
        op: &'static str,
    },
    /// Memory for a message could not be had.
    #[error("out of memory while {op} ({bytes} bytes)")]
    OutOfMemory {
        /// What needed it, e.g. "growing a recv_large message".
        op: &'static str,
        /// How many bytes were asked for.
        bytes: usize,
    },
    /// The rank's own TLS identity (the PEM texts of its job description)
    /// cannot be used to build its TLS configuration.
    #[error("the {what} of the job description cannot be used: {problem}")]
    Identity {
        /// Which item: "CA certificate", "rank certificate", "rank key".
        what: &'static str,
        /// What is wrong with it.
        problem: IdentityProblem,
    },
    /// An invariant of this library did not hold: a bug, to be reported.
    #[error("internal error: {what}")]
    Internal {
        /// The invariant that did not hold.
        what: &'static str,
    },
}

/// What is wrong with an item of the rank's own TLS identity
/// ([`LocalError::Identity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityProblem {
    /// The bytes are not UTF-8 text.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// The text holds no PEM item of the right kind.
    #[error("not valid PEM")]
    NotPem,
    /// The TLS library refused the certificate, key or CA.
    #[error("refused by the TLS library")]
    Refused,
    /// The CA cannot serve as the root that client certificates are
    /// checked against.
    #[error("not usable as the client-certificate root")]
    NoClientRoot,
}

/// Why a COMMIT file is refused (H1621).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// It does not decode.
    #[error("malformed: {0}")]
    Malformed(DecodeError),
    /// Another job's COMMIT.
    #[error("job id {got}, expected {expected}")]
    Job {
        /// Our job.
        expected: JobId,
        /// The file's.
        got: JobId,
    },
    /// Another epoch's COMMIT.
    #[error("epoch {got}, expected {expected}")]
    Epoch {
        /// The epoch asked for.
        expected: u64,
        /// The file's.
        got: u64,
    },
    /// The signature does not verify.
    #[error("signature does not verify with the job public key")]
    BadSignature,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(code) = self.h_code() {
            write!(f, "{code} ")?;
        }
        match self {
            Error::FrameRejected(e) => write!(f, "frame rejected: {e}"),
            Error::Authentication {
                peer: Some(peer),
                error,
            } => write!(f, "authentication of rank {peer} failed: {error}"),
            Error::Authentication { peer: None, error } => {
                write!(f, "authentication of a peer failed: {error}")
            }
            Error::AbortedByPeer {
                from,
                reason,
                code,
                message,
            } => write!(
                f,
                "job aborted by rank {from}: reason {reason}, code {code}: {message}"
            ),
            Error::PeerLost {
                peer,
                cause: LossCause::Departed,
            } => write!(f, "peer rank {peer} left (BYE)"),
            Error::PeerLost { peer, cause } => write!(f, "peer rank {peer} lost: {cause}"),
            Error::HostRefused { host, rule } => write!(f, "host {host:?} refused: {rule}"),
            Error::JobDescription(e) => write!(f, "invalid job description: {e}"),
            Error::NotLaunched { stdin, program } => write!(
                f,
                "no job description ({stdin}): {program} is a SPERLI rank program; start it with `sperli run -n N -- {program}`"
            ),
            Error::SetupTimeout { after_ms, missing } => write!(
                f,
                "connection set-up timed out after {after_ms} ms; missing ranks {missing:?}"
            ),
            Error::CollectiveMismatch(e) => write!(f, "collective mismatch: {e}"),
            Error::InvalidArguments(e) => write!(f, "invalid collective arguments: {e}"),
            Error::UnexpectedFile { what, error } => write!(f, "not the expected {what}: {error}"),
            Error::HashMismatch {
                what,
                expected,
                got,
            } => write!(f, "SHA-256 mismatch ({what}): expected {expected}, got {got}"),
            Error::BadCommit(e) => write!(f, "bad COMMIT: {e}"),
            Error::NoResumableEpoch { reason } => write!(f, "no epoch can be resumed: {reason}"),
            Error::CommitSizeMismatch { expected, got } => write!(
                f,
                "signed COMMIT for size {got}, this job has size {expected}"
            ),
            Error::OpenHandles { sends, recvs } => write!(
                f,
                "checkpoint with {sends} open send and {recvs} open receive handles"
            ),
            Error::Usage(e) => write!(f, "{e}"),
            Error::Local(e) => write!(f, "{e}"),
            Error::FdLimit { needed, soft, hard } => write!(
                f,
                "the open-file limit (soft {soft}, hard {hard}) is below the {needed} this job needs; raise it with `ulimit -n {needed}`"
            ),
            Error::Io { op, kind } => write!(f, "I/O error during {op}: {kind:?}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::FrameRejected(e) => Some(e),
            Error::Authentication { error, .. } => Some(error),
            Error::PeerLost { cause, .. } => Some(cause),
            Error::HostRefused { rule, .. } => Some(rule),
            Error::JobDescription(e) | Error::UnexpectedFile { error: e, .. } => Some(e),
            Error::CollectiveMismatch(e) => Some(e),
            Error::InvalidArguments(e) => Some(e),
            Error::BadCommit(e) => Some(e),
            Error::NoResumableEpoch { reason } => Some(reason.as_ref()),
            Error::Usage(e) => Some(e),
            Error::Local(e) => Some(e),
            _ => None,
        }
    }
}

impl From<FrameError> for Error {
    fn from(e: FrameError) -> Self {
        Error::FrameRejected(e)
    }
}

impl From<ArgumentError> for Error {
    fn from(e: ArgumentError) -> Self {
        Error::InvalidArguments(e)
    }
}

impl From<UsageError> for Error {
    fn from(e: UsageError) -> Self {
        Error::Usage(e)
    }
}

/// A use of the API the library does not allow ([`Error::Usage`], no
/// H-code): the program's mistake, found before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// A call on an endpoint whose job step already ended normally.
    #[error("the endpoint was used after its job step finished")]
    AfterFinish,
    /// Checkpoint frames through a link that does not carry them.
    #[error("this link carries no checkpoint or RESUME frames")]
    NoCheckpointFrames,
    /// A checkpoint after epoch `u64::MAX`: the epoch counter is used up.
    #[error("no checkpoint epoch is left after {}", u64::MAX)]
    EpochsExhausted,
    /// A variable the launcher sets is missing from the environment.
    #[error("{var} is not set: {hint}")]
    MissingEnv {
        /// The variable, e.g. `SPERLI_CHECKPOINT_DIR`.
        var: &'static str,
        /// How to get it set, e.g. "run with sperli run --checkpoint-dir DIR".
        hint: &'static str,
    },
}

impl Error {
    /// The H-code of this error, or `None` for failures of the local
    /// machine and misuse of the API.
    /// This is the one place errors map to codes.
    pub fn h_code(&self) -> Option<HCode> {
        Some(match self {
            Error::FrameRejected(_) => HCode::H1610,
            Error::Authentication { .. } => HCode::H1611,
            Error::AbortedByPeer { .. } => HCode::H1612,
            Error::PeerLost { .. } => HCode::H1613,
            Error::HostRefused { .. } => HCode::H1614,
            Error::JobDescription(_) | Error::NotLaunched { .. } => HCode::H1615,
            Error::SetupTimeout { .. } => HCode::H1616,
            Error::CollectiveMismatch(_) => HCode::H1617,
            Error::InvalidArguments(_) => HCode::H1618,
            Error::UnexpectedFile { .. } => HCode::H1619,
            Error::HashMismatch { .. } => HCode::H1620,
            Error::BadCommit(_) => HCode::H1621,
            Error::NoResumableEpoch { .. } => HCode::H1622,
            Error::CommitSizeMismatch { .. } => HCode::H1623,
            Error::OpenHandles { .. } => HCode::H1624,
            Error::Io { .. } | Error::FdLimit { .. } | Error::Usage(_) | Error::Local(_) => {
                return None
            }
        })
    }

    /// A local I/O failure during `op`.
    pub fn io(op: &'static str, e: &std::io::Error) -> Self {
        Error::Io { op, kind: e.kind() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for c in HCode::ALL {
            assert_eq!(HCode::from_number(c.number()), Some(c));
            assert!(c.to_string().starts_with('H'));
        }
        assert_eq!(HCode::from_number(1609), None);
    }

    #[test]
    fn display_writes_the_code_once_from_h_code() {
        let samples = [
            Error::FrameRejected(FrameError::ReservedTag { got: 1 << 31 }),
            Error::PeerLost {
                peer: 1,
                cause: LossCause::Departed,
            },
            Error::Authentication {
                peer: None,
                error: AuthError::NotHello {
                    got: FrameType::Data,
                },
            },
            Error::InvalidArguments(ArgumentError::Tag { tag: 1 << 31 }),
        ];
        for e in samples {
            let text = e.to_string();
            let code = e.h_code().unwrap().to_string();
            assert!(text.starts_with(&format!("{code} ")), "{text}");
            assert_eq!(text.matches("H16").count(), 1, "{text}");
        }
        let left = Error::PeerLost {
            peer: 1,
            cause: LossCause::Departed,
        };
        assert_eq!(left.to_string(), "H1613 peer rank 1 left (BYE)");
        let usage = Error::Usage(UsageError::AfterFinish);
        assert_eq!(usage.h_code(), None);
        assert!(!usage.to_string().starts_with('H'));
    }

    #[test]
    fn display_starts_with_code() {
        let e = Error::FrameRejected(FrameError::ReservedTag { got: 1 << 31 });
        assert_eq!(e.h_code(), Some(HCode::H1610));
        assert!(e.to_string().starts_with("H1610 "), "{e}");
    }
}
