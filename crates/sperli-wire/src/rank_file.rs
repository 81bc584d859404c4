//! The rank file `rank-<n>.ckpt`: an 80-byte header, then the state
//! (protocol §9.2; written in §9.4 step 2, read in §10.2 steps 4-5). A
//! buddy copy `rank-<r>.ckpt.buddy` holds the same bytes.
//!
//! | off | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `SPCK` |
//! | 4 | 4 | version 1 |
//! | 8 | 16 | job_id |
//! | 24 | 8 | epoch |
//! | 32 | 4 | rank |
//! | 36 | 4 | size |
//! | 40 | 8 | payload_length (file length must be 80 + this) |
//! | 48 | 32 | SHA-256 of the payload |
//!
//! [`verify_rank_file`] is the reader's check of protocol §9.2: wrong magic, version,
//! job id, epoch, rank, size or length is H1619; a payload that does not match
//! the header's SHA-256 is H1620. The second hash check, against the COMMIT
//! entry, is [`crate::commit_file::CommitFile::check_entry`] over
//! [`whole_file_hash`].

use crate::codec::{Codec, PutLe, Reader};
use crate::error::{DecodeError, Error, HashSubject};
use crate::ids::{JobId, Sha256Digest};
use crate::limits::RANK_FILE_HEADER_LEN;

/// The rank file magic (protocol §9.2).
pub const RANK_FILE_MAGIC: [u8; 4] = *b"SPCK";
/// The rank file version (protocol §9.2).
pub const RANK_FILE_VERSION: u32 = 1;

/// What [`Error::UnexpectedFile`] calls a rank file.
const WHAT: &str = "rank file";

/// The 80-byte rank file header (protocol §9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankFileHeader {
    /// The job.
    pub job_id: JobId,
    /// The checkpoint epoch.
    pub epoch: u64,
    /// The rank whose state this is.
    pub rank: u32,
    /// The job size.
    pub size: u32,
    /// Bytes of state after the header.
    pub payload_length: u64,
    /// SHA-256 of the state.
    pub payload_sha256: Sha256Digest,
}

/// What a reader expects of a rank file (protocol §9.2: job id,
/// epoch, rank and size must be the expected ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankFileExpect {
    /// The job.
    pub job_id: JobId,
    /// The epoch being read.
    pub epoch: u64,
    /// The rank whose file it is (for a buddy copy: the owner, not the holder).
    pub rank: u32,
    /// The job size.
    pub size: u32,
}

impl<'a> Codec<'a> for RankFileHeader {
    const NAME: &'static str = "rank file header";

    /// Writes the 80-byte header (protocol §9.2).
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&RANK_FILE_MAGIC);
        out.put_u32(RANK_FILE_VERSION);
        out.extend_from_slice(&self.job_id.0);
        out.put_u64(self.epoch);
        out.put_u32(self.rank);
        out.put_u32(self.size);
        out.put_u64(self.payload_length);
        out.extend_from_slice(&self.payload_sha256.0);
    }

    /// Reads the 80-byte header (protocol §9.2), checking magic (`BadMagic`) and
    /// version (`Mismatch` on `version`); the other fields are compared with
    /// what the reader expects by [`verify_rank_file`].
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let magic: [u8; 4] = r.array("magic")?;
        if magic != RANK_FILE_MAGIC {
            return Err(DecodeError::BadMagic {
                expected: "SPCK",
                got: magic,
            });
        }
        let version = r.u32("version")?;
        if version != RANK_FILE_VERSION {
            return Err(DecodeError::Mismatch {
                field: "version",
                expected: u64::from(RANK_FILE_VERSION),
                got: u64::from(version),
            });
        }
        Ok(RankFileHeader {
            job_id: JobId(r.array("job_id")?),
            epoch: r.u64("epoch")?,
            rank: r.u32("rank")?,
            size: r.u32("size")?,
            payload_length: r.u64("payload_length")?,
            payload_sha256: Sha256Digest(r.array("payload_sha256")?),
        })
    }
}

/// A whole rank file (protocol §9.2): the header for `state`, with its length and
/// SHA-256, then `state`.
pub fn build_rank_file(job_id: JobId, epoch: u64, rank: u32, size: u32, state: &[u8]) -> Vec<u8> {
    let header = RankFileHeader {
        job_id,
        epoch,
        rank,
        size,
        payload_length: state.len() as u64,
        payload_sha256: Sha256Digest::of(state),
    };
    let mut out = Vec::with_capacity(RANK_FILE_HEADER_LEN + state.len());
    header.encode(&mut out);
    out.extend_from_slice(state);
    out
}

/// SHA-256 of a whole rank file, header included: the COMMIT entry
/// (protocol §9.2) and the CKPT_ACK payload (protocol §7.9).
pub fn whole_file_hash(rank_file: &[u8]) -> Sha256Digest {
    Sha256Digest::of(rank_file)
}

fn unexpected(error: DecodeError) -> Error {
    Error::UnexpectedFile { what: WHAT, error }
}

fn mismatch(field: &'static str, expected: u64, got: u64) -> Result<(), Error> {
    if expected == got {
        Ok(())
    } else {
        Err(unexpected(DecodeError::Mismatch {
            field,
            expected,
            got,
        }))
    }
}

/// Checks a whole rank file against what the reader expects and returns the
/// state (protocol §9.2). Checks, in order, all
/// H1619 ([`Error::UnexpectedFile`]) but the last:
///
/// 1. shorter than 80 bytes: `Truncated` on `rank file header`;
/// 2. magic `SPCK`: `BadMagic`;
/// 3. version 1: `Mismatch` on `version`;
/// 4. job id: `Mismatch` on `job_id[0..8]` or `job_id[8..16]` (the first half
///    that differs, each as a little-endian `u64`);
/// 5. epoch, 6. rank, 7. size: `Mismatch` on that field;
/// 8. length: `Mismatch` on `payload_length` (expected = the bytes after the
///    header);
/// 9. SHA-256 of the state against the header: H1620
///    ([`Error::HashMismatch`], [`HashSubject::RankFilePayload`]).
pub fn verify_rank_file<'a>(bytes: &'a [u8], expect: &RankFileExpect) -> Result<&'a [u8], Error> {
    let mut r = Reader::new(bytes);
    let head = r
        .take(RANK_FILE_HEADER_LEN, "rank file header")
        .map_err(unexpected)?;
    let header = RankFileHeader::decode(head).map_err(unexpected)?;
    if header.job_id != expect.job_id {
        let (want, got) = (expect.job_id.0, header.job_id.0);
        let half = |id: [u8; 16], i: usize| {
            let mut h = [0u8; 8];
            h.copy_from_slice(&id[8 * i..8 * i + 8]);
            u64::from_le_bytes(h)
        };
        let (field, i) = if half(want, 0) != half(got, 0) {
            ("job_id[0..8]", 0)
        } else {
            ("job_id[8..16]", 1)
        };
        mismatch(field, half(want, i), half(got, i))?;
    }
    mismatch("epoch", expect.epoch, header.epoch)?;
    mismatch("rank", u64::from(expect.rank), u64::from(header.rank))?;
    mismatch("size", u64::from(expect.size), u64::from(header.size))?;
    let state = r.rest();
    mismatch("payload_length", state.len() as u64, header.payload_length)?;
    let got = Sha256Digest::of(state);
    if got != header.payload_sha256 {
        return Err(Error::HashMismatch {
            what: HashSubject::RankFilePayload,
            expected: header.payload_sha256,
            got,
        });
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::HCode;
    use proptest::prelude::*;

    const EXPECT: RankFileExpect = RankFileExpect {
        job_id: JobId([0x5a; 16]),
        epoch: 3,
        rank: 1,
        size: 4,
    };

    fn good(state: &[u8]) -> Vec<u8> {
        build_rank_file(EXPECT.job_id, EXPECT.epoch, EXPECT.rank, EXPECT.size, state)
    }

    fn h1619(bytes: &[u8]) -> DecodeError {
        match verify_rank_file(bytes, &EXPECT) {
            Err(e @ Error::UnexpectedFile { .. }) => {
                assert_eq!(e.h_code(), Some(HCode::H1619));
                match e {
                    Error::UnexpectedFile { what, error } => {
                        assert_eq!(what, "rank file");
                        error
                    }
                    _ => unreachable!(),
                }
            }
            other => panic!("expected H1619, got {other:?}"),
        }
    }

    #[test]
    fn round_trip() {
        let bytes = good(b"state");
        assert_eq!(bytes.len(), 85);
        assert_eq!(&bytes[..8], b"SPCK\x01\x00\x00\x00");
        assert_eq!(verify_rank_file(&bytes, &EXPECT), Ok(&b"state"[..]));
        let h = RankFileHeader::decode(&bytes[..80]).unwrap();
        assert_eq!(h.payload_length, 5);
        assert_eq!(h.payload_sha256, Sha256Digest::of(b"state"));
        assert_eq!(h.to_vec(), &bytes[..80]);
        assert_eq!(whole_file_hash(&bytes), Sha256Digest::of(&bytes));
        let empty = good(b"");
        assert_eq!(verify_rank_file(&empty, &EXPECT), Ok(&b""[..]));
    }

    #[test]
    fn every_proper_prefix_fails() {
        let bytes = good(b"abc");
        for n in 0..80 {
            assert_eq!(
                h1619(&bytes[..n]),
                DecodeError::Truncated {
                    field: "rank file header",
                    needed: 80,
                    left: n
                }
            );
            assert!(matches!(
                RankFileHeader::decode(&bytes[..n]),
                Err(DecodeError::Truncated { .. })
            ));
        }
        for n in 80..bytes.len() {
            assert_eq!(
                h1619(&bytes[..n]),
                DecodeError::Mismatch {
                    field: "payload_length",
                    expected: (n - 80) as u64,
                    got: 3
                }
            );
        }
    }

    #[test]
    fn truncated_comes_before_magic() {
        assert!(matches!(
            h1619(b"XXXX"),
            DecodeError::Truncated { left: 4, .. }
        ));
    }

    #[test]
    fn each_field_h1619() {
        let base = good(b"s");
        let set = |off: usize, v: &[u8]| {
            let mut b = base.clone();
            b[off..off + v.len()].copy_from_slice(v);
            b
        };
        let cases = [
            (
                set(0, b"SPCM"),
                DecodeError::BadMagic {
                    expected: "SPCK",
                    got: *b"SPCM",
                },
            ),
            (
                set(4, &2u32.to_le_bytes()),
                DecodeError::Mismatch {
                    field: "version",
                    expected: 1,
                    got: 2,
                },
            ),
            (
                set(8, &[0x5b]),
                DecodeError::Mismatch {
                    field: "job_id[0..8]",
                    expected: 0x5a5a_5a5a_5a5a_5a5a,
                    got: 0x5a5a_5a5a_5a5a_5a5b,
                },
            ),
            (
                set(23, &[0]),
                DecodeError::Mismatch {
                    field: "job_id[8..16]",
                    expected: 0x5a5a_5a5a_5a5a_5a5a,
                    got: 0x005a_5a5a_5a5a_5a5a,
                },
            ),
            (
                set(24, &4u64.to_le_bytes()),
                DecodeError::Mismatch {
                    field: "epoch",
                    expected: 3,
                    got: 4,
                },
            ),
            (
                set(32, &2u32.to_le_bytes()),
                DecodeError::Mismatch {
                    field: "rank",
                    expected: 1,
                    got: 2,
                },
            ),
            (
                set(36, &5u32.to_le_bytes()),
                DecodeError::Mismatch {
                    field: "size",
                    expected: 4,
                    got: 5,
                },
            ),
            (
                set(40, &u64::MAX.to_le_bytes()),
                DecodeError::Mismatch {
                    field: "payload_length",
                    expected: 1,
                    got: u64::MAX,
                },
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(h1619(&bytes), want);
        }
        // A longer file is a length error too.
        let mut long = base.clone();
        long.push(0);
        assert_eq!(
            h1619(&long),
            DecodeError::Mismatch {
                field: "payload_length",
                expected: 2,
                got: 1
            }
        );
    }

    #[test]
    fn check_order_magic_before_job() {
        let mut b = good(b"s");
        b[0] = 0;
        b[8] = 0;
        b[24] = 0;
        assert!(matches!(h1619(&b), DecodeError::BadMagic { .. }));
        let mut b = good(b"s");
        b[24] = 9;
        b[32] = 9;
        assert!(matches!(
            h1619(&b),
            DecodeError::Mismatch { field: "epoch", .. }
        ));
    }

    #[test]
    fn payload_hash_h1620() {
        let mut b = good(b"state");
        b[80] ^= 1;
        let err = verify_rank_file(&b, &EXPECT).unwrap_err();
        assert_eq!(err.h_code(), Some(HCode::H1620));
        assert_eq!(
            err,
            Error::HashMismatch {
                what: HashSubject::RankFilePayload,
                expected: Sha256Digest::of(b"state"),
                got: Sha256Digest::of(&b[80..]),
            }
        );
        let mut b = good(b"state");
        b[79] ^= 1;
        assert_eq!(
            verify_rank_file(&b, &EXPECT).unwrap_err().h_code(),
            Some(HCode::H1620)
        );
    }

    proptest! {
        #[test]
        fn prop_round_trip(
            job in any::<[u8; 16]>(),
            epoch in any::<u64>(),
            rank in any::<u32>(),
            size in any::<u32>(),
            state in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let bytes = build_rank_file(JobId(job), epoch, rank, size, &state);
            let expect = RankFileExpect { job_id: JobId(job), epoch, rank, size };
            prop_assert_eq!(verify_rank_file(&bytes, &expect), Ok(state.as_slice()));
            let h = RankFileHeader::decode(&bytes[..80]).unwrap();
            prop_assert_eq!(h.to_vec(), &bytes[..80]);
        }

        #[test]
        fn prop_arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = RankFileHeader::decode(&bytes);
            let r = verify_rank_file(&bytes, &EXPECT);
            if let Err(e) = r {
                prop_assert!(matches!(e.h_code(), Some(HCode::H1619 | HCode::H1620)));
            }
        }

        #[test]
        fn prop_mutation_is_caught(pos in 0usize..90, flip in 1u8..) {
            let mut bytes = good(b"0123456789");
            bytes[pos] ^= flip;
            prop_assert!(verify_rank_file(&bytes, &EXPECT).is_err());
        }
    }
}
