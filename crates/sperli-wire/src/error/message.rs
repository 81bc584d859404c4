//! Why a DATA frame of a job with HELLO feature bit 3 is rejected on
//! arrival (H1610, ABORT reason 7): [`MessageError`], the checks of
//! protocol §16.4 that need the frames before it.

/// A DATA frame that breaks a rule of protocol §16.4 (H1610, wrapped in
/// [`FrameError::Message`](super::FrameError::Message)). Each variant
/// names its check word of the vectors in [`MessageError::check`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// Check 1: a frame while a message is still coming that is not its
    /// next frame (another communicator, kind, number, total or tag).
    #[error("{field} {got} while message {message} is still coming with {field} {expected}")]
    Continuation {
        /// The message still coming.
        message: u64,
        /// The DATA header or frame header field that differs.
        field: &'static str,
        /// That message's value.
        expected: u64,
        /// The frame's value.
        got: u64,
    },
    /// Check 2: a first frame whose message number is not the last + 1.
    #[error("message number {got}, expected {expected}")]
    MessageNumber {
        /// The number due.
        expected: u64,
        /// The frame's number.
        got: u64,
    },
    /// Check 3: a frame of the wrong data length.
    #[error("message {message}: {got} data bytes in a frame, expected {expected}")]
    Length {
        /// The message.
        message: u64,
        /// min(16777192, the bytes not yet received).
        expected: u64,
        /// The frame's data length.
        got: u64,
    },
    /// Check 4: a message for a communicator the receiver does not hold
    /// with the sender as a member, and cannot keep pending.
    #[error("message {message} for communicator {communicator}, which this rank does not share with rank {from} (highest {highest})")]
    Communicator {
        /// The message.
        message: u64,
        /// The communicator id it names.
        communicator: u32,
        /// The sender (a job rank).
        from: u32,
        /// The receiver's highest id when it judged.
        highest: u32,
    },
    /// Check 5: a match notice for no synchronous message that waits.
    #[error("match notice for message {message}, which is no synchronous message waiting for its notice")]
    Notice {
        /// The number the notice carries.
        message: u64,
    },
    /// Check 6: a match notice whose communicator or tag differs from its
    /// message's.
    #[error("match notice for message {message}: {field} {got}, the message's is {expected}")]
    NoticeFields {
        /// The message.
        message: u64,
        /// `communicator` or `tag`.
        field: &'static str,
        /// The message's value.
        expected: u32,
        /// The notice's value.
        got: u32,
    },
}

impl MessageError {
    /// The check word of protocol §16.4 (the vectors' `<check>`).
    pub fn check(&self) -> &'static str {
        match self {
            MessageError::Continuation { .. } => "continuation",
            MessageError::MessageNumber { .. } => "message_number",
            MessageError::Length { .. } => "length",
            MessageError::Communicator { .. } => "communicator",
            MessageError::Notice { .. } => "notice",
            MessageError::NoticeFields { .. } => "notice_fields",
        }
    }
}

impl From<MessageError> for super::Error {
    fn from(e: MessageError) -> Self {
        super::Error::FrameRejected(super::FrameError::Message(e))
    }
}
