//! Why a peer failed to authenticate (H1611, protocol §5.3): [`AuthError`],
//! with the TLS handshake's [`TlsFailure`] (protocol §2.2) and the join
//! token's [`TokenError`] (protocol §7.1.2).

use super::{DecodeError, FrameError};
use crate::frame_type::FrameType;
use crate::ids::JobId;

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
    /// A connection after set-up from a rank this rank does not wait for
    /// (feature bit 5: no change entry of its current epoch names it, or
    /// it already joined; protocol §18.7 check 2).
    #[error("rank {rank} is not a replacement this rank waits for")]
    NotAwaited {
        /// The rank the certificate names.
        rank: u32,
    },
    /// A replacement's certificate is not the one its change entry names
    /// (protocol §18.7 check 3: e.g. the failed rank's old certificate).
    #[error("certificate of rank {rank} is not the one its MEMBERSHIP record names")]
    NotRecorded {
        /// The rank.
        rank: u32,
    },
    /// A replacement's HELLO lacks a feature bit of the job's set
    /// (protocol §18.7 check 5).
    #[error("HELLO features {got:#x} lack the job's {job:#x}")]
    Features {
        /// The job's negotiated features.
        job: u64,
        /// The HELLO's.
        got: u64,
    },
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
