//! The RECOVER frame's payload (frame type 12, protocol §18.5): REVOKE
//! (the sender stops the header's epoch and names the ranks it saw fail),
//! MEMBERSHIP (a launcher-signed record, forwarded, §18.6) or REVOKE
//! COMMUNICATOR (the sender revokes one communicator, §18.8.1).

use super::error::{RecordCheck, RecoveryError};
use super::fields::Fields;
use super::membership::MembershipRecord;
use super::report::read_suspects;
use crate::codec::PutLe;
use crate::error::DecodeError;
use crate::limits::MAX_COMMUNICATOR_ID;

const WHAT: &str = "RECOVER payload";
/// The smallest RECOVER payload (protocol §18.2: length ≥ 8).
pub const MIN_LEN: usize = 8;

/// A decoded RECOVER payload (protocol §18.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoverPayload {
    /// Kind 1: the sender revokes the header's epoch; its suspects,
    /// strictly ascending.
    Revoke {
        /// The ranks the sender saw fail.
        suspects: Vec<u32>,
    },
    /// Kind 2: a MEMBERSHIP record's bytes (judged by protocol §18.3).
    Membership {
        /// The record as received (checked by [`MembershipRecord::decode`]).
        record: Vec<u8>,
    },
    /// Kind 3: the sender revokes one communicator (protocol §18.8.1).
    RevokeCommunicator {
        /// The communicator id (protocol §15.2: 0 the job's communicator,
        /// 1..=2147483647 a made one).
        comm: u32,
    },
}

impl RecoverPayload {
    /// Writes the payload (protocol §18.5).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            RecoverPayload::Revoke { suspects } => {
                out.extend_from_slice(&[1, 0, 0, 0]);
                out.put_u32(suspects.len() as u32);
                for s in suspects {
                    out.put_u32(*s);
                }
            }
            RecoverPayload::Membership { record } => {
                out.extend_from_slice(&[2, 0, 0, 0]);
                out.extend_from_slice(record);
            }
            RecoverPayload::RevokeCommunicator { comm } => {
                out.extend_from_slice(&[3, 0, 0, 0]);
                out.put_u32(*comm);
            }
        }
        out
    }

    /// Reads a payload of a frame from `sender` in a job of `size` ranks
    /// (protocol §18.5, in order: truncated, kind, reserved, then count,
    /// suspects, trailing for REVOKE, comm, trailing for REVOKE
    /// COMMUNICATOR). A MEMBERSHIP body is decoded too (§18.3 checks 1-13),
    /// so a malformed record fails here with its own check.
    pub fn decode(bytes: &[u8], size: u32, sender: u32) -> Result<Self, RecoveryError> {
        use RecordCheck as C;
        let mut f = Fields::new(bytes, WHAT);
        let kind = f.u8_in("kind", C::Kind, 1, 3)?;
        let reserved: [u8; 3] = f.array("reserved", C::Truncated)?;
        if let Some(b) = reserved.iter().find(|b| **b != 0) {
            let error = DecodeError::NotZero {
                field: "reserved",
                got: (*b).into(),
            };
            return Err(f.fail(C::Reserved, error));
        }
        if kind == 2 {
            let record = f.r.rest().to_vec();
            MembershipRecord::decode(&record)?;
            return Ok(RecoverPayload::Membership { record });
        }
        if kind == 3 {
            // protocol §18.5: a communicator id as §15.2 names it.
            let comm = f.u32_in("comm", C::Comm, 0, MAX_COMMUNICATOR_ID)?;
            f.end()?;
            return Ok(RecoverPayload::RevokeCommunicator { comm });
        }
        let count = f.u32_in("count", C::Count, 1, size.saturating_sub(1))?;
        let suspects =
            read_suspects(&mut f.r, count, size, sender).map_err(|(c, e)| f.fail(c, e))?;
        f.end()?;
        Ok(RecoverPayload::Revoke { suspects })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every proper prefix of `b` fails as `truncated` (protocol §18.5).
    fn prefixes_are_truncated(b: &[u8], size: u32, sender: u32) {
        for n in 0..b.len() {
            let e = RecoverPayload::decode(&b[..n], size, sender).unwrap_err();
            assert_eq!(e.check_name(), "truncated", "prefix {n}");
        }
    }

    #[test]
    fn revoke_round_trip_and_prefixes() {
        let p = RecoverPayload::Revoke {
            suspects: vec![1, 4],
        };
        let b = p.encode();
        assert_eq!(b.len(), 16);
        assert_eq!(RecoverPayload::decode(&b, 6, 0), Ok(p));
        prefixes_are_truncated(&b, 6, 0);
    }

    #[test]
    fn checks() {
        let name = |b: &[u8], size, sender| {
            RecoverPayload::decode(b, size, sender)
                .unwrap_err()
                .check_name()
        };
        assert_eq!(name(&[4, 0, 0, 0, 0, 0, 0, 0], 4, 0), "kind");
        assert_eq!(name(&[0, 0, 0, 0, 0, 0, 0, 0], 4, 0), "kind");
        assert_eq!(name(&[1, 0, 1, 0, 0, 0, 0, 0], 4, 0), "reserved");
        assert_eq!(name(&[1, 0, 0, 0, 0, 0, 0, 0], 4, 0), "count");
        assert_eq!(
            name(
                &RecoverPayload::Revoke {
                    suspects: vec![1, 2, 3, 0]
                }
                .encode(),
                4,
                0
            ),
            "count"
        );
        assert_eq!(
            name(
                &RecoverPayload::Revoke {
                    suspects: vec![2, 1]
                }
                .encode(),
                4,
                0
            ),
            "suspects"
        );
        assert_eq!(
            name(&RecoverPayload::Revoke { suspects: vec![0] }.encode(), 4, 0),
            "suspects"
        );
        assert_eq!(
            name(&RecoverPayload::Revoke { suspects: vec![4] }.encode(), 4, 0),
            "suspects"
        );
        let mut b = RecoverPayload::Revoke { suspects: vec![1] }.encode();
        b.push(0);
        assert_eq!(name(&b, 4, 0), "trailing");
        assert_eq!(name(&[2, 0, 0, 0, b'S'], 4, 0), "truncated");
        assert_eq!(name(&[2, 0, 0, 0, b'X', b'P', b'M', b'B'], 4, 0), "magic");
    }

    #[test]
    fn revoke_communicator_round_trip_prefixes_and_checks() {
        for comm in [0, 1, 7, MAX_COMMUNICATOR_ID] {
            let p = RecoverPayload::RevokeCommunicator { comm };
            let b = p.encode();
            assert_eq!(b.len(), 8);
            assert_eq!(&b[..4], &[3, 0, 0, 0]);
            assert_eq!(RecoverPayload::decode(&b, 4, 1), Ok(p));
            prefixes_are_truncated(&b, 4, 1);
        }
        let name = |b: &[u8]| RecoverPayload::decode(b, 4, 0).unwrap_err().check_name();
        let too_big = RecoverPayload::RevokeCommunicator {
            comm: MAX_COMMUNICATOR_ID + 1,
        }
        .encode();
        assert_eq!(name(&too_big), "comm");
        assert_eq!(name(&[3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]), "comm");
        assert_eq!(name(&[3, 1, 0, 0, 1, 0, 0, 0]), "reserved");
        let mut trailing = RecoverPayload::RevokeCommunicator { comm: 2 }.encode();
        trailing.push(0);
        assert_eq!(name(&trailing), "trailing");
        // The size and the sender do not bound a communicator id.
        assert_eq!(
            RecoverPayload::decode(&[3, 0, 0, 0, 9, 0, 0, 0], 1, 0),
            Ok(RecoverPayload::RevokeCommunicator { comm: 9 })
        );
    }

    proptest! {
        #[test]
        fn revoke_communicator_round_trips(comm in 0u32..=MAX_COMMUNICATOR_ID,
                                           size in 1u32..=4096, sender_seed: u32) {
            let p = RecoverPayload::RevokeCommunicator { comm };
            prop_assert_eq!(RecoverPayload::decode(&p.encode(), size, sender_seed % size), Ok(p));
        }

        #[test]
        fn revoke_communicator_refuses_every_id_above(comm in (MAX_COMMUNICATOR_ID + 1)..=u32::MAX) {
            let b = RecoverPayload::RevokeCommunicator { comm }.encode();
            prop_assert_eq!(RecoverPayload::decode(&b, 4, 0).unwrap_err().check_name(), "comm");
        }

        #[test]
        fn revoke_round_trips(size in 2u32..=4096, sender_seed: u32,
                              set in proptest::collection::btree_set(0u32..4096, 1..16)) {
            let sender = sender_seed % size;
            let suspects: Vec<u32> = set.into_iter().filter(|s| *s < size && *s != sender).collect();
            prop_assume!(!suspects.is_empty() && suspects.len() < size as usize);
            let p = RecoverPayload::Revoke { suspects };
            prop_assert_eq!(RecoverPayload::decode(&p.encode(), size, sender), Ok(p));
        }
    }
}
