//! Checks 5 (`membership_epoch`) and 9 (`incarnation`) of the frame
//! header with feature bit 5 (protocol §18.2). The other checks of
//! protocol §6.2 are unchanged; type 12 passes check 2 only with bit 5.

use super::error::RecoveryError;
use super::RECOVER_FRAME_TYPE;
use crate::frame_type::FrameType;

/// What a header check with bit 5 decides (protocol §18.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochVerdict {
    /// Go on with the next check.
    Pass,
    /// Read `length` bytes, drop them, stop here (an older epoch or incarnation).
    Discard,
    /// A RECOVER frame of an older epoch: read its payload; a REVOKE is then
    /// discarded, a MEMBERSHIP record judged by protocol §18.3.
    Older,
}

/// Check 5 with bit 5 (protocol §18.2) for a frame of type `type_byte`:
/// HELLO carries 0; HEARTBEAT, ABORT and BYE (frames of the connection,
/// not of a membership) pass with any epoch up to `current`, 0 included
/// (sent before their sender's set-up ended); every other frame carries
/// the sender's epoch, ≥ 1: higher than `current` is rejected, lower
/// discarded, except a RECOVER frame (type 12), which goes on to be judged
/// by its payload ([`EpochVerdict::Older`]).
pub fn check_membership_epoch(
    type_byte: u8,
    got: u32,
    current: u32,
) -> Result<EpochVerdict, RecoveryError> {
    let reject = Err(RecoveryError::HeaderEpoch { current, got });
    let hello = type_byte == FrameType::Hello as u8;
    let connection = [FrameType::Heartbeat, FrameType::Abort, FrameType::Bye]
        .iter()
        .any(|t| *t as u8 == type_byte);
    match (hello, got) {
        (true, 0) => Ok(EpochVerdict::Pass),
        (false, g) if connection && g <= current => Ok(EpochVerdict::Pass),
        (true, _) | (false, 0) => reject,
        (false, g) if g > current => reject,
        (false, g) if g < current && type_byte == RECOVER_FRAME_TYPE => Ok(EpochVerdict::Older),
        (false, g) if g < current => Ok(EpochVerdict::Discard),
        _ => Ok(EpochVerdict::Pass),
    }
}

/// Checks 2 (`type`) and 5 (`membership_epoch`) for a job with the
/// negotiated `features` (protocol §6.2, and §18.2 with bit 5): without
/// bit 5 the v1 rules (type 1..=11, membership_epoch 0), with it type
/// 1..=12 and [`check_membership_epoch`].
pub fn check_type_and_epoch(
    features: u64,
    type_byte: u8,
    got: u32,
    current: u32,
) -> Result<EpochVerdict, RecoveryError> {
    let bit5 = features & super::FEATURE_MEMBERSHIP != 0;
    let last = if bit5 { RECOVER_FRAME_TYPE } else { 11 };
    if type_byte == 0 || type_byte > last {
        return Err(RecoveryError::HeaderType { got: type_byte });
    }
    if bit5 {
        check_membership_epoch(type_byte, got, current)
    } else if got != 0 {
        Err(RecoveryError::HeaderEpoch { current: 0, got })
    } else {
        Ok(EpochVerdict::Pass)
    }
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
        let (hello, data, recover) = (1, 2, RECOVER_FRAME_TYPE);
        assert_eq!(check_membership_epoch(hello, 0, 3), Ok(EpochVerdict::Pass));
        assert!(check_membership_epoch(hello, 3, 3).is_err());
        assert!(check_membership_epoch(data, 0, 3).is_err());
        assert_eq!(
            check_membership_epoch(data, 2, 3),
            Ok(EpochVerdict::Discard)
        );
        assert_eq!(
            check_membership_epoch(recover, 2, 3),
            Ok(EpochVerdict::Older)
        );
        assert_eq!(check_membership_epoch(data, 3, 3), Ok(EpochVerdict::Pass));
        let (heartbeat, abort, bye) = (4, 5, 11);
        for t in [heartbeat, abort, bye] {
            for got in [0, 2, 3] {
                assert_eq!(check_membership_epoch(t, got, 3), Ok(EpochVerdict::Pass));
            }
            assert!(check_membership_epoch(t, 4, 3).is_err());
        }
        let e = check_membership_epoch(recover, 4, 3).unwrap_err();
        assert_eq!(e.check_name(), "membership_epoch");
    }

    #[test]
    fn without_bit_5_the_v1_rules() {
        let v1 = 1;
        let bit5 = 1 | super::super::FEATURE_MEMBERSHIP;
        assert_eq!(check_type_and_epoch(v1, 2, 0, 1), Ok(EpochVerdict::Pass));
        assert_eq!(
            check_type_and_epoch(v1, 12, 0, 1).unwrap_err().check_name(),
            "type"
        );
        assert_eq!(
            check_type_and_epoch(v1, 2, 1, 1).unwrap_err().check_name(),
            "membership_epoch"
        );
        assert_eq!(check_type_and_epoch(bit5, 12, 1, 1), Ok(EpochVerdict::Pass));
        assert_eq!(
            check_type_and_epoch(bit5, 13, 1, 1)
                .unwrap_err()
                .check_name(),
            "type"
        );
        assert_eq!(
            check_type_and_epoch(bit5, 0, 1, 1)
                .unwrap_err()
                .check_name(),
            "type"
        );
    }

    #[test]
    fn incarnations() {
        assert_eq!(check_incarnation(1, 2), Ok(Some(EpochVerdict::Discard)));
        assert_eq!(check_incarnation(2, 2), Ok(None));
        assert_eq!(check_incarnation(3, 2), Err(2));
    }
}
