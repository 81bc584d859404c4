//! MPI's special rank and tag values: [`PROC_NULL`], [`UNDEFINED`] and
//! [`ANY_TAG`] as they appear in ranks, statuses and translated ranks.
//!
//! Ranks are `u32` (a communicator rank, `0..size`) and sources and tags
//! of a receive are `Option<u32>` (`None`: MPI's `ANY_SOURCE` /
//! `ANY_TAG`); these constants are the values MPI gives a name to where a
//! plain number is wanted. They lie above every rank (a job has at most
//! 4096 ranks) and every user tag (0..=2147483647), so they never name a
//! real rank or tag.

use sperli_transport::{Message, Status};
use sperli_wire::error::ArgumentError;
use sperli_wire::limits::MAX_USER_TAG;
use sperli_wire::Error;

/// MPI's `MPI_PROC_NULL`: a rank that names no process. A send to it, a
/// receive or probe from it, and their non-blocking forms complete at once
/// without any traffic; a receive from it gets no data and the status
/// [`null_status`] (source `PROC_NULL`, tag [`ANY_TAG`], length 0), as MPI
/// says. [`Cartcomm::shift`](crate::Cartcomm::shift) gives it at the
/// edges of a non-periodic dimension.
pub const PROC_NULL: u32 = u32::MAX - 1;

/// MPI's `MPI_UNDEFINED` as a rank: what
/// [`Group::translate_ranks`](crate::Group::translate_ranks) gives for a
/// rank absent from the other group.
pub const UNDEFINED: u32 = u32::MAX;

/// MPI's `MPI_ANY_TAG` as the tag of a [`Status`]: the tag of the status
/// of a receive from [`PROC_NULL`] (and of the empty status of a wait on
/// an inactive persistent request). A receive names any tag with `None`.
pub const ANY_TAG: u32 = u32::MAX;

/// MPI's `MPI_ANY_SOURCE` as the source of a [`Status`]: the source of the
/// empty status of a wait on an inactive persistent request. A receive
/// names any source with `None`.
pub const ANY_SOURCE: u32 = u32::MAX - 2;

/// The status of a receive from [`PROC_NULL`]: source `PROC_NULL`, tag
/// [`ANY_TAG`], length 0, as MPI gives it.
///
/// ```
/// use sperli_collective::{null_status, ANY_TAG, PROC_NULL};
/// let st = null_status();
/// assert_eq!((st.source, st.tag, st.len), (PROC_NULL, ANY_TAG, 0));
/// ```
pub fn null_status() -> Status {
    Status {
        source: PROC_NULL,
        tag: ANY_TAG,
        len: 0,
    }
}

/// MPI's empty status (of a wait or test on an inactive request): source
/// [`ANY_SOURCE`], tag [`ANY_TAG`], length 0.
pub fn empty_status() -> Status {
    Status {
        source: ANY_SOURCE,
        tag: ANY_TAG,
        len: 0,
    }
}

/// The message a receive from [`PROC_NULL`] completes with.
pub(crate) fn null_message() -> Message {
    (null_status(), Vec::new())
}

/// H1618 for a reserved tag, checked before a call with [`PROC_NULL`]
/// completes (the same check a call with a real rank makes).
pub(crate) fn check_tag(tag: Option<u32>) -> Result<(), Error> {
    match tag {
        Some(t) if t > MAX_USER_TAG => Err(ArgumentError::Tag { tag: t }.into()),
        _ => Ok(()),
    }
}
