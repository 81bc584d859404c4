//! The COMMIT file: the epoch's list of rank file hashes, signed by rank 0 with
//! the job key (protocol §9.3; written in §9.4 step 4, checked in §10.2).
//! Its bytes are also the
//! CKPT_COMMIT payload (protocol §7.10) and the tail of a RESUME payload.
//!
//! | off | size | field | rule |
//! |---|---|---|---|
//! | 0 | 4 | magic | `SPCM` |
//! | 4 | 4 | version | 1 |
//! | 8 | 16 | job_id | |
//! | 24 | 8 | epoch | >= 1 |
//! | 32 | 4 | size | 1..=4096 |
//! | 36 | 4 | reserved | 0 |
//! | 40 | 32 x size | hashes | SHA-256 of each whole file `rank-<n>.ckpt`, n = 0..size-1 |
//! | 40+32·size | 2 | sig_len | 2484 |
//! | 42+32·size | 2484 | signature | CompositeSig over bytes [0, 40+32·size) with context `SPERLI-COMMIT-1` |
//!
//! The file is exactly `40 + 32·size + 2 + 2484` bytes.
//!
//! # Check order for a reader (protocol §9.3)
//!
//! 1. [`decode_file`]: anything malformed is H1621
//!    ([`CommitError::Malformed`]).
//! 2. The caller verifies [`CommitFile::signature`] over
//!    [`CommitFile::signed`] with the job public key and context
//!    [`crate::limits::CONTEXT_COMMIT`] (this crate has no signature code):
//!    failure is H1621 ([`CommitError::BadSignature`]).
//! 3. [`CommitFile::check_expected`]: another job or epoch is H1621; another
//!    size is H1623. Because the signature was checked first, H1623 always
//!    means "a correctly signed COMMIT for another size".
//! 4. [`CommitFile::check_entry`] per rank file: a whole-file SHA-256 that
//!    differs from the entry is H1620 ([`HashSubject::CommitEntry`]).

use crate::codec::{Codec, PutLe, Reader};
use crate::error::{CommitError, DecodeError, Error, HashSubject};
use crate::ids::{JobId, Sha256Digest};
use crate::limits::{COMMIT_FIXED_LEN, MAX_SIZE, SIGNATURE_LEN};

/// The COMMIT file magic (protocol §9.3).
pub const COMMIT_MAGIC: [u8; 4] = *b"SPCM";
/// The COMMIT file version (protocol §9.3).
pub const COMMIT_VERSION: u32 = 1;

/// A decoded COMMIT file (protocol §9.3), borrowing from its bytes.
///
/// Decoding checks the layout only; the signature is the caller's (see the
/// module's check order). [`Codec::encode`] writes the fields (`signed` is
/// not consulted), so a decoded value encodes to the bytes it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitFile<'a> {
    /// The job.
    pub job_id: JobId,
    /// The epoch, >= 1.
    pub epoch: u64,
    /// The job size, 1..=4096; equals `hashes.len()`.
    pub size: u32,
    /// Entry n: SHA-256 of the whole file `rank-<n>.ckpt`.
    pub hashes: Vec<Sha256Digest>,
    /// The signed bytes [0, 40 + 32·size) of the file.
    pub signed: &'a [u8],
    /// The CompositeSig signature, 2484 bytes.
    pub signature: &'a [u8],
}

/// The signed part of a COMMIT file (protocol §9.3: bytes [0, 40 + 32·size)),
/// for rank 0 to sign with context [`crate::limits::CONTEXT_COMMIT`].
/// `size` is `hashes.len()`, which must be 1..=4096 for the result to decode;
/// `epoch` must be >= 1.
pub fn signed_message(job_id: JobId, epoch: u64, hashes: &[Sha256Digest]) -> Vec<u8> {
    let mut out = Vec::with_capacity(COMMIT_FIXED_LEN + 32 * hashes.len());
    out.extend_from_slice(&COMMIT_MAGIC);
    out.put_u32(COMMIT_VERSION);
    out.extend_from_slice(&job_id.0);
    out.put_u64(epoch);
    out.put_u32(u32::try_from(hashes.len()).unwrap_or(u32::MAX));
    out.put_u32(0);
    for h in hashes {
        out.extend_from_slice(&h.0);
    }
    out
}

/// The whole COMMIT file (protocol §9.3): the signed message from
/// [`signed_message`], `u16 sig_len` (2484), then the signature.
pub fn assemble(signed_message: &[u8], signature: &[u8; SIGNATURE_LEN]) -> Vec<u8> {
    let mut out = Vec::with_capacity(signed_message.len() + 2 + SIGNATURE_LEN);
    out.extend_from_slice(signed_message);
    out.put_u16(SIGNATURE_LEN as u16);
    out.extend_from_slice(signature);
    out
}

/// Decodes a whole COMMIT file (protocol §9.3). Any failure, including a wrong
/// length, is H1621: [`Error::BadCommit`] with [`CommitError::Malformed`]
/// carrying the [`DecodeError`]. The signature is not checked here.
pub fn decode_file(bytes: &[u8]) -> Result<CommitFile<'_>, Error> {
    CommitFile::decode(bytes).map_err(|e| Error::BadCommit(CommitError::Malformed(e)))
}

impl CommitFile<'_> {
    /// Checks the job, epoch and size a reader expects (protocol §9.3): another
    /// job is H1621 [`CommitError::Job`], another epoch H1621
    /// [`CommitError::Epoch`], another size H1623
    /// [`Error::CommitSizeMismatch`]. Call it after the signature check (see
    /// the module's check order), so H1623 is only given for a correctly
    /// signed COMMIT.
    pub fn check_expected(&self, job_id: JobId, epoch: u64, size: u32) -> Result<(), Error> {
        if self.job_id != job_id {
            return Err(Error::BadCommit(CommitError::Job {
                expected: job_id,
                got: self.job_id,
            }));
        }
        if self.epoch != epoch {
            return Err(Error::BadCommit(CommitError::Epoch {
                expected: epoch,
                got: self.epoch,
            }));
        }
        if self.size != size {
            return Err(Error::CommitSizeMismatch {
                expected: size,
                got: self.size,
            });
        }
        Ok(())
    }

    /// The entry for `rank`'s file, if `rank < size`.
    pub fn hash_of(&self, rank: u32) -> Option<&Sha256Digest> {
        self.hashes.get(usize::try_from(rank).ok()?)
    }

    /// Checks a whole rank file (`rank-<n>.ckpt` or its buddy copy) against
    /// the entry of `rank` (protocol §10.2 step 4: the
    /// second of the two hash checks). A different SHA-256 is H1620
    /// ([`HashSubject::CommitEntry`]); a rank without an entry is H1619
    /// (`OutOfRange` on `rank`).
    pub fn check_entry(&self, rank: u32, rank_file: &[u8]) -> Result<(), Error> {
        let expected = *self.hash_of(rank).ok_or(Error::UnexpectedFile {
            what: "rank file",
            error: DecodeError::OutOfRange {
                field: "rank",
                min: 0,
                max: (self.hashes.len() as u64).saturating_sub(1),
                got: u64::from(rank),
            },
        })?;
        let got = Sha256Digest::of(rank_file);
        if got == expected {
            Ok(())
        } else {
            Err(Error::HashMismatch {
                what: HashSubject::CommitEntry,
                expected,
                got,
            })
        }
    }
}

impl<'a> Codec<'a> for CommitFile<'a> {
    const NAME: &'static str = "COMMIT file";

    /// Writes the layout of protocol §9.3 from the fields: `size` as given, the hashes,
    /// `sig_len` = `signature.len()` (2484 for a valid file), the signature.
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&COMMIT_MAGIC);
        out.put_u32(COMMIT_VERSION);
        out.extend_from_slice(&self.job_id.0);
        out.put_u64(self.epoch);
        out.put_u32(self.size);
        out.put_u32(0);
        for h in &self.hashes {
            out.extend_from_slice(&h.0);
        }
        out.put_u16(u16::try_from(self.signature.len()).unwrap_or(u16::MAX));
        out.extend_from_slice(self.signature);
    }

    /// Reads one COMMIT file (protocol §9.3). Errors: `BadMagic` (`SPCM`);
    /// `Mismatch` on `version` (1) and `sig_len` (2484); `OutOfRange` on
    /// `epoch` (>= 1) and `size` (1..=4096); `NotZero` on `reserved`;
    /// `Truncated` naming the field that does not fit.
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let start = r.clone();
        let magic: [u8; 4] = r.array("magic")?;
        if magic != COMMIT_MAGIC {
            return Err(DecodeError::BadMagic {
                expected: "SPCM",
                got: magic,
            });
        }
        let version = r.u32("version")?;
        if version != COMMIT_VERSION {
            return Err(DecodeError::Mismatch {
                field: "version",
                expected: u64::from(COMMIT_VERSION),
                got: u64::from(version),
            });
        }
        let job_id = JobId(r.array("job_id")?);
        let epoch = r.u64("epoch")?;
        if epoch == 0 {
            return Err(DecodeError::OutOfRange {
                field: "epoch",
                min: 1,
                max: u64::MAX,
                got: 0,
            });
        }
        let size = r.u32("size")?;
        if !(1..=MAX_SIZE).contains(&size) {
            return Err(DecodeError::OutOfRange {
                field: "size",
                min: 1,
                max: u64::from(MAX_SIZE),
                got: u64::from(size),
            });
        }
        r.zeros(4, "reserved")?;
        // size <= 4096, so 32·size cannot overflow.
        let raw = r.take(32 * size as usize, "hashes")?;
        let mut hr = Reader::new(raw);
        let hashes = (0..size)
            .map(|_| hr.array("hashes").map(Sha256Digest))
            .collect::<Result<Vec<_>, _>>()?;
        let signed = start.clone().take(r.used() - start.used(), "signed")?;
        let signature = r.signature()?;
        Ok(CommitFile {
            job_id,
            epoch,
            size,
            hashes,
            signed,
            signature,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::HCode;
    use crate::limits::commit_file_len;
    use proptest::prelude::*;

    const JOB: JobId = JobId([0x11; 16]);
    const SIG: [u8; SIGNATURE_LEN] = [0xaa; SIGNATURE_LEN];

    fn hashes(n: u32) -> Vec<Sha256Digest> {
        (0..n).map(|i| Sha256Digest::of(&i.to_le_bytes())).collect()
    }

    fn file(epoch: u64, size: u32) -> Vec<u8> {
        assemble(&signed_message(JOB, epoch, &hashes(size)), &SIG)
    }

    fn malformed(bytes: &[u8]) -> DecodeError {
        match decode_file(bytes) {
            Err(Error::BadCommit(CommitError::Malformed(e))) => e,
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    #[test]
    fn round_trip() {
        let bytes = file(7, 3);
        assert_eq!(bytes.len(), commit_file_len(3));
        let c = decode_file(&bytes).unwrap();
        assert_eq!(c.job_id, JOB);
        assert_eq!(c.epoch, 7);
        assert_eq!(c.size, 3);
        assert_eq!(c.hashes, hashes(3));
        assert_eq!(c.signed, &bytes[..40 + 96]);
        assert_eq!(c.signed, signed_message(JOB, 7, &hashes(3)).as_slice());
        assert_eq!(c.signature, &SIG[..]);
        assert_eq!(c.to_vec(), bytes);
        assert_eq!(c.hash_of(2), Some(&hashes(3)[2]));
        assert_eq!(c.hash_of(3), None);
        assert_eq!(&bytes[..8], b"SPCM\x01\x00\x00\x00");
    }

    #[test]
    fn every_proper_prefix_fails() {
        let bytes = file(1, 2);
        for n in 0..bytes.len() {
            let e = malformed(&bytes[..n]);
            assert!(
                matches!(e, DecodeError::Truncated { .. }),
                "prefix {n}: {e:?}"
            );
            assert_eq!(
                decode_file(&bytes[..n]).unwrap_err().h_code(),
                Some(HCode::H1621)
            );
        }
    }

    #[test]
    fn trailing_byte_fails() {
        let mut bytes = file(1, 1);
        bytes.push(0);
        assert_eq!(
            malformed(&bytes),
            DecodeError::TrailingBytes {
                item: "COMMIT file",
                extra: 1
            }
        );
    }

    #[test]
    fn size_limit() {
        let ok = file(1, 4096);
        assert_eq!(ok.len(), commit_file_len(4096));
        assert_eq!(decode_file(&ok).map(|c| c.hashes.len()), Ok(4096));
        let bad = file(1, 4097);
        assert_eq!(
            malformed(&bad),
            DecodeError::OutOfRange {
                field: "size",
                min: 1,
                max: 4096,
                got: 4097
            }
        );
        assert_eq!(
            malformed(&file(1, 0)),
            DecodeError::OutOfRange {
                field: "size",
                min: 1,
                max: 4096,
                got: 0
            }
        );
    }

    #[test]
    fn field_errors_are_h1621() {
        let good = file(3, 2);
        let mut cases: Vec<(Vec<u8>, DecodeError)> = Vec::new();
        let mut b = good.clone();
        b[0] = b'X';
        cases.push((
            b,
            DecodeError::BadMagic {
                expected: "SPCM",
                got: *b"XPCM",
            },
        ));
        let mut b = good.clone();
        b[4] = 2;
        cases.push((
            b,
            DecodeError::Mismatch {
                field: "version",
                expected: 1,
                got: 2,
            },
        ));
        cases.push((
            file(0, 2),
            DecodeError::OutOfRange {
                field: "epoch",
                min: 1,
                max: u64::MAX,
                got: 0,
            },
        ));
        for i in 36..40 {
            let mut b = good.clone();
            b[i] = 1;
            cases.push((
                b,
                DecodeError::NotZero {
                    field: "reserved",
                    got: 1,
                },
            ));
        }
        let mut b = good.clone();
        b[40 + 64] = 0xb5; // sig_len 2485
        cases.push((
            b,
            DecodeError::Mismatch {
                field: "sig_len",
                expected: 2484,
                got: 2485,
            },
        ));
        for (bytes, want) in cases {
            let err = decode_file(&bytes).unwrap_err();
            assert_eq!(err.h_code(), Some(HCode::H1621));
            assert_eq!(err, Error::BadCommit(CommitError::Malformed(want)));
        }
    }

    #[test]
    fn check_expected_codes() {
        let bytes = file(5, 2);
        let c = decode_file(&bytes).unwrap();
        assert_eq!(c.check_expected(JOB, 5, 2), Ok(()));
        let other = JobId([0x22; 16]);
        let e = c.check_expected(other, 5, 2).unwrap_err();
        assert_eq!(e.h_code(), Some(HCode::H1621));
        assert_eq!(
            e,
            Error::BadCommit(CommitError::Job {
                expected: other,
                got: JOB
            })
        );
        let e = c.check_expected(JOB, 6, 2).unwrap_err();
        assert_eq!(e.h_code(), Some(HCode::H1621));
        assert_eq!(
            e,
            Error::BadCommit(CommitError::Epoch {
                expected: 6,
                got: 5
            })
        );
        let e = c.check_expected(JOB, 5, 3).unwrap_err();
        assert_eq!(e.h_code(), Some(HCode::H1623));
        assert_eq!(
            e,
            Error::CommitSizeMismatch {
                expected: 3,
                got: 2
            }
        );
    }

    #[test]
    fn check_entry_codes() {
        let files = [b"rank0".to_vec(), b"rank1".to_vec()];
        let hs: Vec<_> = files.iter().map(|f| Sha256Digest::of(f)).collect();
        let bytes = assemble(&signed_message(JOB, 1, &hs), &SIG);
        let c = decode_file(&bytes).unwrap();
        assert_eq!(c.check_entry(0, &files[0]), Ok(()));
        assert_eq!(c.check_entry(1, &files[1]), Ok(()));
        let e = c.check_entry(0, &files[1]).unwrap_err();
        assert_eq!(e.h_code(), Some(HCode::H1620));
        assert_eq!(
            e,
            Error::HashMismatch {
                what: HashSubject::CommitEntry,
                expected: hs[0],
                got: hs[1]
            }
        );
        assert_eq!(
            c.check_entry(2, &files[0]).unwrap_err().h_code(),
            Some(HCode::H1619)
        );
    }

    proptest! {
        #[test]
        fn prop_round_trip(
            job in any::<[u8; 16]>(),
            epoch in 1u64..,
            hs in proptest::collection::vec(any::<[u8; 32]>(), 1..40),
            sig_byte in any::<u8>(),
        ) {
            let hs: Vec<_> = hs.into_iter().map(Sha256Digest).collect();
            let signed = signed_message(JobId(job), epoch, &hs);
            let bytes = assemble(&signed, &[sig_byte; SIGNATURE_LEN]);
            let c = decode_file(&bytes).unwrap();
            prop_assert_eq!(c.job_id, JobId(job));
            prop_assert_eq!(c.epoch, epoch);
            prop_assert_eq!(c.size as usize, hs.len());
            prop_assert_eq!(&c.hashes, &hs);
            prop_assert_eq!(c.signed, signed.as_slice());
            prop_assert_eq!(c.to_vec(), bytes);
        }

        #[test]
        fn prop_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let _ = decode_file(&bytes);
        }

        #[test]
        fn prop_mutated_header_never_panics(pos in 0usize..80, byte in any::<u8>()) {
            let mut bytes = file(2, 1);
            bytes[pos] = byte;
            if let Ok(c) = decode_file(&bytes) {
                prop_assert_eq!(c.to_vec(), bytes);
            }
        }
    }
}
