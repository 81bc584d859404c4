//! Why a frame is rejected (H1610): [`FrameError`], by the checks of
//! protocol §6.2 and the connection's rules (protocol §5, §7).

use super::{DecodeError, MessageError};
use crate::ckpt_chunks::ChunkError;
use crate::frame_type::FrameType;
use crate::ids::JobId;

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
    /// With feature bit 5: a `membership_epoch` newer than the receiver's
    /// current one, or 0 on a frame that must carry one (protocol §18.2
    /// check 5).
    #[error("membership_epoch {got} does not fit the receiver's current epoch {current}")]
    MembershipEpoch {
        /// The receiver's current epoch.
        current: u32,
        /// The frame's.
        got: u32,
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
    /// With feature bit 3: a DATA frame that breaks a rule of the
    /// receiver's connection state (protocol §16.4).
    #[error("DATA frame: {0}")]
    Message(MessageError),
}
