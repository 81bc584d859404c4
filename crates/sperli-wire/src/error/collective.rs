//! Collective errors: a frame that does not match its call (H1617,
//! [`MismatchError`]) and invalid arguments (H1618, [`ArgumentError`]);
//! protocol §8.4, §14.4.

use crate::frame_type::FrameType;

/// How a collective frame fails to match its call (H1617).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MismatchError {
    /// A collective-header field differs from the call, or a field of the
    /// descriptor of a scan or exscan (protocol §8.9).
    #[error("from rank {from}: {field} is {got}, the call has {expected}")]
    Header {
        /// The sender.
        from: u32,
        /// The field (operation, element_type, reduction, phase, root,
        /// sequence; for a scan descriptor also `scan kind`, `reserved`).
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
    /// A COLLECTIVE frame of a communicator that is not one of both
    /// ranks' (feature bit 2, protocol §15.4), found while a call on
    /// communicator `expected` took frames from `from` (a job rank).
    #[error("from rank {from}: a frame of communicator {got}, which this rank does not share with it (a call on communicator {expected} took frames)")]
    Communicator {
        /// The sender (job rank).
        from: u32,
        /// The communicator of the call that took frames.
        expected: u32,
        /// The frame's communicator id (its header tag).
        got: u32,
    },
    /// A record of a split's exchange that breaks its rule (feature bit 2,
    /// protocol §15.3).
    #[error("split exchange: rank {from}'s {field} is {got}")]
    Exchange {
        /// The parent rank whose record it is.
        from: u32,
        /// `color`, `key` or `highest`.
        field: &'static str,
        /// The value.
        got: u64,
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
    /// Element type code above 17 (protocol §8.3, §17.2).
    #[error("element type {got} is not 0..=17")]
    ElementType {
        /// The code.
        got: u8,
    },
    /// Reduction code 0 or above 13 (protocol §8.3, §17.2); also a
    /// user-defined reduction (13) given to a built-in fold.
    #[error("reduction {got} is not 1..=13 (or is user-defined, 13, where a built-in one is due)")]
    Reduction {
        /// The code.
        got: u8,
    },
    /// An element type of code 7..=17 or a reduction of code 11..=13 in a
    /// job where not every rank announced HELLO feature bit 4 (protocol
    /// §17.1): refused on every rank before anything is sent.
    #[error("{element_type} with {reduction} needs HELLO feature bit 4 on every rank")]
    WithoutBit4 {
        /// The element type's name.
        element_type: &'static str,
        /// The reduction's name.
        reduction: &'static str,
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
    /// No communicator id is left: the next one would be above
    /// 2147483647 (feature bit 2, protocol §15.3).
    #[error("no communicator id is left above {highest}")]
    CommunicatorIds {
        /// The largest id in use.
        highest: u64,
    },
    /// A v-call refused on every rank because rank `rank` refused it
    /// (its own counts or block did not fit: protocol §8.9).
    #[error("rank {rank} refused the call: its counts or its block are not valid")]
    RefusedBy {
        /// The rank that refused (communicator rank).
        rank: u32,
    },
    /// One count per rank is needed (v-calls, protocol §8.9).
    #[error("{got} counts for {size} ranks")]
    Counts {
        /// Counts given.
        got: usize,
        /// The communicator's size.
        size: u32,
    },
    /// Counts that do not add up to the data (v-calls).
    #[error("counts add up to {sum} elements, the data has {len}")]
    CountsSum {
        /// The sum of the counts.
        sum: u64,
        /// The data's elements.
        len: usize,
    },
    /// A message longer than the buffer given to receive it (MPI's
    /// `MPI_ERR_TRUNCATE`); the message is dropped.
    #[error("a message of {len} bytes does not fit a buffer of {room} bytes")]
    Truncated {
        /// The message's bytes.
        len: usize,
        /// The buffer's bytes.
        room: usize,
    },
}
