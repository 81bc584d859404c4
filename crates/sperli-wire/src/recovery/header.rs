//! Checks 5 (`membership_epoch`) and 9 (`incarnation`) of the frame
//! header with feature bit 5 (protocol §18.2). The other checks of
//! protocol §6.2 are unchanged; type 12 passes check 2 only with bit 5.

use super::error::RecoveryError;
use crate::frame_type::FrameType;

/// What a header check with bit 5 decides (protocol §18.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochVerdict {
    /// Go on with the next check.
    Pass,
    /// Read `length` bytes, drop them, stop here (an older epoch or incarnation).
    Discard,
}

/// Check 5 with bit 5 (protocol §18.2): HELLO carries 0; every other frame
/// the sender's epoch, ≥ 1: lower than `current` is discarded, higher
/// rejected. `is_hello` is true for frame type 1.
pub fn check_membership_epoch(
    is_hello: bool,
    got: u32,
    current: u32,
) -> Result<EpochVerdict, RecoveryError> {
    let reject = Err(RecoveryError::HeaderEpoch { current, got });
    match (is_hello, got) {
        (true, 0) => Ok(EpochVerdict::Pass),
        (true, _) | (false, 0) => reject,
        (false, g) if g < current => Ok(EpochVerdict::Discard),
        (false, g) if g > current => reject,
        _ => Ok(EpochVerdict::Pass),
    }
}

/// Whether a frame type byte names HELLO (for [`check_membership_epoch`]).
pub fn is_hello(type_byte: u8) -> bool {
    type_byte == FrameType::Hello as u8
}

/// Check 9 with bit 5 (protocol §18.2): the frame's incarnation against
/// `inc[source_rank]` of the receiver's current membership. `Ok(None)`
/// passes, `Ok(Some(Discard))` discards; a higher one is the v1 rejection,
/// returned as `Err(expected)` for the caller's `FrameError::NewerIncarnation`.
pub fn check_incarnation(got: u32, source_inc: u32) -> Result<Option<EpochVerdict>, u32> {
    if got < source_inc {
        Ok(Some(EpochVerdict::Discard))
    } else if got > source_inc {
        Err(source_inc)
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs() {
        assert_eq!(check_membership_epoch(true, 0, 3), Ok(EpochVerdict::Pass));
        assert!(check_membership_epoch(true, 3, 3).is_err());
        assert!(check_membership_epoch(false, 0, 3).is_err());
        assert_eq!(
            check_membership_epoch(false, 2, 3),
            Ok(EpochVerdict::Discard)
        );
        assert_eq!(check_membership_epoch(false, 3, 3), Ok(EpochVerdict::Pass));
        assert_eq!(
            check_membership_epoch(false, 4, 3)
                .unwrap_err()
                .check_name(),
            "membership_epoch"
        );
        assert!(is_hello(1) && !is_hello(12));
    }

    #[test]
    fn incarnations() {
        assert_eq!(check_incarnation(1, 2), Ok(Some(EpochVerdict::Discard)));
        assert_eq!(check_incarnation(2, 2), Ok(None));
        assert_eq!(check_incarnation(3, 2), Err(2));
    }
}
