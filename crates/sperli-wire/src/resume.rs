//! RESUME (frame type 10) payload (protocol §6.3, §7.11, §10.2).
//!
//! | off | size | field | rule |
//! |---|---|---|---|
//! | 0 | 1 | status | 0..=3 ([`ResumeStatus`]) |
//! | 1 | 7 | reserved | 0 |
//! | 8 | var | COMMIT | nothing, or exactly one COMMIT file (protocol §9.3) |
//!
//! A COMMIT travels with status 3 (an offer; none if the rank has none) and
//! with rank 0's first status 0 ("this epoch"; none for epoch 0, protocol §7.11).
//! Statuses 1 and 2 never carry one, and decoding refuses them with one.
//! Which of "this epoch" / "go on" a status 0 is depends on the exchange's
//! state and is the caller's business.

use crate::codec::{Codec, Reader};
use crate::commit_file::CommitFile;
use crate::error::{CommitError, DecodeError, Error, FrameError};
use crate::frame_type::FrameType;

/// Length of the RESUME payload before the optional COMMIT (protocol §6.3:
/// `RESUME >= 8`).
pub const RESUME_FIXED_LEN: usize = 8;

/// The RESUME status (protocol §7.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ResumeStatus {
    /// 0: from rank 0 first "this epoch" (header epoch; 0 = start from the
    /// beginning), later "go on"; from another rank "loaded my own file".
    Go = 0,
    /// 1: from a rank other than 0, "loaded the buddy's copy".
    LoadedBuddy = 1,
    /// 2: from a rank other than 0 "cannot load"; from rank 0 "abort".
    CannotLoad = 2,
    /// 3: a rank other than 0 offers its best COMMIT (header epoch = its
    /// epoch; 0 and no COMMIT if it has none).
    Offer = 3,
}

impl ResumeStatus {
    /// Every status in code order.
    pub const ALL: [ResumeStatus; 4] = [
        ResumeStatus::Go,
        ResumeStatus::LoadedBuddy,
        ResumeStatus::CannotLoad,
        ResumeStatus::Offer,
    ];

    /// The status for a code, if it is 0..=3.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Whether a COMMIT may follow this status (0 and 3; protocol §7.11).
    pub fn may_carry_commit(self) -> bool {
        matches!(self, ResumeStatus::Go | ResumeStatus::Offer)
    }
}

/// The RESUME payload (protocol §7.11), borrowing the COMMIT from the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume<'a> {
    /// The status.
    pub status: ResumeStatus,
    /// The COMMIT file, for an offer or rank 0's "this epoch" (protocol §7.11).
    pub commit: Option<CommitFile<'a>>,
}

/// Reads status and reserved bytes; returns the status and the COMMIT bytes.
fn read_fixed<'a>(r: &mut Reader<'a>) -> Result<(ResumeStatus, &'a [u8]), DecodeError> {
    let code = r.u8("status")?;
    let status = ResumeStatus::from_code(code).ok_or(DecodeError::OutOfRange {
        field: "status",
        min: 0,
        max: 3,
        got: u64::from(code),
    })?;
    r.zeros(7, "reserved")?;
    let rest = r.rest();
    if !rest.is_empty() && !status.may_carry_commit() {
        return Err(DecodeError::TrailingBytes {
            item: "RESUME payload",
            extra: rest.len(),
        });
    }
    Ok((status, rest))
}

impl<'a> Resume<'a> {
    /// Decodes a RESUME payload with the project's error codes: a fault in
    /// status or reserved bytes (or bytes after status 1 or 2) is H1610
    /// ([`FrameError::Payload`]); a COMMIT that does not decode is H1621
    /// ([`CommitError::Malformed`], protocol §7.11). The COMMIT's signature
    /// and expected job, epoch and size are the caller's to check
    /// ([`crate::commit_file`]).
    pub fn decode_payload(bytes: &'a [u8]) -> Result<Self, Error> {
        let mut r = Reader::new(bytes);
        let (status, rest) = read_fixed(&mut r).map_err(|error| {
            Error::FrameRejected(FrameError::Payload {
                frame_type: FrameType::Resume,
                error,
            })
        })?;
        let commit = if rest.is_empty() {
            None
        } else {
            Some(
                CommitFile::decode(rest)
                    .map_err(|e| Error::BadCommit(CommitError::Malformed(e)))?,
            )
        };
        Ok(Resume { status, commit })
    }

    /// Checks the frame header's epoch against the payload (protocol §7.11):
    /// with a COMMIT, the header epoch must be the COMMIT's (`Mismatch` on
    /// `epoch`); an offer without one must have header epoch 0 (`NotZero` on
    /// `epoch`). Other combinations depend on the exchange's state.
    pub fn check_header_epoch(&self, header_epoch: u64) -> Result<(), DecodeError> {
        match (&self.commit, self.status) {
            (Some(c), _) if c.epoch != header_epoch => Err(DecodeError::Mismatch {
                field: "epoch",
                expected: c.epoch,
                got: header_epoch,
            }),
            (None, ResumeStatus::Offer) if header_epoch != 0 => Err(DecodeError::NotZero {
                field: "epoch",
                got: header_epoch,
            }),
            _ => Ok(()),
        }
    }
}

impl<'a> Codec<'a> for Resume<'a> {
    const NAME: &'static str = "RESUME payload";

    /// Writes status, 7 reserved zero bytes and the COMMIT if any (protocol §7.11).
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.status.code());
        out.extend_from_slice(&[0; 7]);
        if let Some(c) = &self.commit {
            c.encode(out);
        }
    }

    /// Reads a whole RESUME payload (protocol §7.11): status above 3 is
    /// `OutOfRange` on `status`; reserved non-zero is `NotZero` on
    /// `reserved`; bytes after status 1 or 2 are `TrailingBytes`; after
    /// status 0 or 3 they must be exactly one COMMIT file.
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let (status, rest) = read_fixed(r)?;
        let commit = if rest.is_empty() {
            None
        } else {
            Some(CommitFile::decode(rest)?)
        };
        Ok(Resume { status, commit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit_file::{assemble, signed_message};
    use crate::error::HCode;
    use crate::ids::{JobId, Sha256Digest};
    use crate::limits::SIGNATURE_LEN;
    use proptest::prelude::*;

    fn commit_bytes(epoch: u64, size: u32) -> Vec<u8> {
        let hs: Vec<_> = (0..size).map(|i| Sha256Digest::of(&[i as u8])).collect();
        assemble(
            &signed_message(JobId([3; 16]), epoch, &hs),
            &[0xaa; SIGNATURE_LEN],
        )
    }

    fn payload(status: u8, commit: &[u8]) -> Vec<u8> {
        let mut v = vec![status, 0, 0, 0, 0, 0, 0, 0];
        v.extend_from_slice(commit);
        v
    }

    #[test]
    fn round_trip() {
        let cb = commit_bytes(4, 2);
        let commit = CommitFile::decode(&cb).unwrap();
        for status in ResumeStatus::ALL {
            let v = Resume {
                status,
                commit: None,
            };
            let bytes = v.to_vec();
            assert_eq!(bytes, payload(status.code(), &[]));
            assert_eq!(Resume::decode(&bytes), Ok(v.clone()));
            assert_eq!(Resume::decode_payload(&bytes), Ok(v));
        }
        for status in [ResumeStatus::Go, ResumeStatus::Offer] {
            let v = Resume {
                status,
                commit: Some(commit.clone()),
            };
            let bytes = v.to_vec();
            assert_eq!(bytes, payload(status.code(), &cb));
            assert_eq!(Resume::decode(&bytes), Ok(v.clone()));
            assert_eq!(Resume::decode_payload(&bytes), Ok(v));
        }
    }

    #[test]
    fn every_proper_prefix_fails() {
        let cb = commit_bytes(1, 1);
        let bytes = payload(3, &cb);
        for n in 0..bytes.len() {
            if n == RESUME_FIXED_LEN {
                // Status 3 without a COMMIT is itself a valid payload.
                assert!(Resume::decode(&bytes[..n]).is_ok());
                continue;
            }
            assert!(
                matches!(
                    Resume::decode(&bytes[..n]),
                    Err(DecodeError::Truncated { .. })
                ),
                "prefix {n}"
            );
            let code = Resume::decode_payload(&bytes[..n]).unwrap_err().h_code();
            let want = if n < RESUME_FIXED_LEN {
                HCode::H1610
            } else {
                HCode::H1621
            };
            assert_eq!(code, Some(want), "prefix {n}");
        }
    }

    #[test]
    fn bad_status_and_reserved() {
        assert_eq!(
            Resume::decode(&payload(4, &[])),
            Err(DecodeError::OutOfRange {
                field: "status",
                min: 0,
                max: 3,
                got: 4
            })
        );
        for i in 1..8 {
            let mut b = payload(0, &[]);
            b[i] = 1;
            assert_eq!(
                Resume::decode(&b),
                Err(DecodeError::NotZero {
                    field: "reserved",
                    got: 1
                })
            );
            assert_eq!(
                Resume::decode_payload(&b).unwrap_err().h_code(),
                Some(HCode::H1610)
            );
        }
    }

    #[test]
    fn no_commit_after_status_1_or_2() {
        let cb = commit_bytes(1, 1);
        for status in [1u8, 2] {
            assert_eq!(
                Resume::decode(&payload(status, &cb)),
                Err(DecodeError::TrailingBytes {
                    item: "RESUME payload",
                    extra: cb.len()
                })
            );
        }
    }

    #[test]
    fn malformed_commit_is_h1621() {
        let mut cb = commit_bytes(1, 1);
        cb[0] = b'X';
        let err = Resume::decode_payload(&payload(0, &cb)).unwrap_err();
        assert_eq!(err.h_code(), Some(HCode::H1621));
        // Two COMMITs are not "exactly one".
        let one = commit_bytes(1, 1);
        let mut two = one.clone();
        two.extend_from_slice(&one);
        assert_eq!(
            Resume::decode(&payload(3, &two)),
            Err(DecodeError::TrailingBytes {
                item: "COMMIT file",
                extra: one.len()
            })
        );
    }

    #[test]
    fn header_epoch() {
        let cb = commit_bytes(5, 1);
        let bytes = payload(3, &cb);
        let with = Resume::decode(&bytes).unwrap();
        assert_eq!(with.check_header_epoch(5), Ok(()));
        assert_eq!(
            with.check_header_epoch(4),
            Err(DecodeError::Mismatch {
                field: "epoch",
                expected: 5,
                got: 4
            })
        );
        let offer = Resume {
            status: ResumeStatus::Offer,
            commit: None,
        };
        assert_eq!(offer.check_header_epoch(0), Ok(()));
        assert_eq!(
            offer.check_header_epoch(2),
            Err(DecodeError::NotZero {
                field: "epoch",
                got: 2
            })
        );
    }

    proptest! {
        #[test]
        fn prop_round_trip(status in 0u8..4, with in any::<bool>(), epoch in 1u64.., size in 1u32..6) {
            let status = ResumeStatus::from_code(status).unwrap();
            let cb = commit_bytes(epoch, size);
            let commit = if with && status.may_carry_commit() {
                Some(CommitFile::decode(&cb).unwrap())
            } else {
                None
            };
            let v = Resume { status, commit };
            let bytes = v.to_vec();
            prop_assert_eq!(Resume::decode(&bytes), Ok(v.clone()));
            prop_assert_eq!(Resume::decode_payload(&bytes), Ok(v));
        }

        #[test]
        fn prop_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let _ = Resume::decode(&bytes);
            let _ = Resume::decode_payload(&bytes);
        }
    }
}
