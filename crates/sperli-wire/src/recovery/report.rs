//! The REPORT record (protocol §18.4): what a rank tells the launcher on
//! its control channel when it revokes an epoch: its suspects, its
//! agreement flag and its best COMMIT epoch. Not signed.

use super::error::{RecordCheck, RecoveryError};
use super::fields::Fields;
use crate::codec::{PutLe, Reader};
use crate::error::DecodeError;
use crate::ids::JobId;
use crate::limits::MAX_SIZE;

const WHAT: &str = "REPORT record";
/// The record's magic (protocol §18.4).
pub const MAGIC: [u8; 4] = *b"SPRP";
/// Length of the fixed part before the suspects (protocol §18.4).
pub const FIXED_LEN: usize = 48;

/// A decoded REPORT record (protocol §18.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The rank's agreement flag (§18.8).
    pub flag: bool,
    /// The job.
    pub job_id: JobId,
    /// The reporting rank.
    pub rank: u32,
    /// Its own incarnation.
    pub incarnation: u32,
    /// The epoch it revoked, ≥ 1.
    pub epoch: u32,
    /// The highest epoch of a COMMIT it holds whose signature verifies; 0 none.
    pub best_commit: u64,
    /// The ranks it saw fail, strictly ascending, not its own.
    pub suspects: Vec<u32>,
}

impl Report {
    /// Writes the record (protocol §18.4).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIXED_LEN + 4 * self.suspects.len());
        out.extend_from_slice(&MAGIC);
        out.put_u16(1);
        out.push(u8::from(self.flag));
        out.push(0);
        out.extend_from_slice(&self.job_id.0);
        out.put_u32(self.rank);
        out.put_u32(self.incarnation);
        out.put_u32(self.epoch);
        out.put_u32(self.suspects.len() as u32);
        out.put_u64(self.best_commit);
        for s in &self.suspects {
            out.put_u32(*s);
        }
        out
    }

    /// Reads a record with the checks of protocol §18.4 that need no state,
    /// in reading order; a rank or suspect must be below 4096 (the largest
    /// size), at most 4095 suspects.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecoveryError> {
        use RecordCheck as C;
        let mut f = Fields::new(bytes, WHAT);
        f.head(MAGIC, "SPRP")?;
        let flag = f.flag("flag", C::Flag)?;
        f.u8_in("reserved", C::Reserved, 0, 0)?;
        let job_id = JobId(f.array("job_id", C::Truncated)?);
        let rank = f.u32_in("rank", C::Rank, 0, MAX_SIZE - 1)?;
        let incarnation = f.u32("incarnation", C::Truncated)?;
        let epoch = f.u32_in("epoch", C::Epoch, 1, u32::MAX)?;
        let count = f.u32_in("suspects", C::Count, 0, MAX_SIZE - 1)?;
        let best_commit = f.u64("best_commit", C::Truncated)?;
        let suspects =
            read_suspects(&mut f.r, count, MAX_SIZE, rank).map_err(|(c, e)| f.fail(c, e))?;
        f.end()?;
        Ok(Report {
            flag,
            job_id,
            rank,
            incarnation,
            epoch,
            best_commit,
            suspects,
        })
    }
}

/// Reads `count` suspects: strictly ascending, each below `size`, none
/// `own` (protocol §18.4, §18.5).
pub(crate) fn read_suspects(
    r: &mut Reader<'_>,
    count: u32,
    size: u32,
    own: u32,
) -> Result<Vec<u32>, (RecordCheck, DecodeError)> {
    let mut out = Vec::with_capacity(count.min(MAX_SIZE) as usize);
    for _ in 0..count {
        let s = r.u32("suspect").map_err(|e| (RecordCheck::Truncated, e))?;
        let min = out.last().map_or(0, |l: &u32| u64::from(*l) + 1);
        if s >= size || u64::from(s) < min {
            return Err((
                RecordCheck::Suspects,
                DecodeError::OutOfRange {
                    field: "suspect",
                    min,
                    max: u64::from(size).saturating_sub(1),
                    got: s.into(),
                },
            ));
        }
        if s == own {
            return Err((
                RecordCheck::Suspects,
                DecodeError::Mismatch {
                    field: "suspect (the sender itself)",
                    expected: u64::MAX,
                    got: s.into(),
                },
            ));
        }
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Report {
        Report {
            flag: true,
            job_id: JobId([7; 16]),
            rank: 2,
            incarnation: 1,
            epoch: 1,
            best_commit: 4,
            suspects: vec![0, 3],
        }
    }

    #[test]
    fn round_trip_and_length() {
        let r = sample();
        let b = r.encode();
        assert_eq!(b.len(), FIXED_LEN + 8);
        assert_eq!(Report::decode(&b), Ok(r));
    }

    #[test]
    fn every_proper_prefix_fails() {
        let b = sample().encode();
        for n in 0..b.len() {
            let e = Report::decode(&b[..n]).unwrap_err();
            assert_eq!(e.check_name(), "truncated", "prefix {n}");
        }
    }

    #[test]
    fn checks() {
        let mut b = sample().encode();
        b[7] = 1;
        assert_eq!(Report::decode(&b).unwrap_err().check_name(), "reserved");
        let mut b = sample().encode();
        b[6] = 2;
        assert_eq!(Report::decode(&b).unwrap_err().check_name(), "flag");
        let mut r = sample();
        r.suspects = vec![3, 0];
        assert_eq!(
            Report::decode(&r.encode()).unwrap_err().check_name(),
            "suspects"
        );
        r.suspects = vec![2];
        assert_eq!(
            Report::decode(&r.encode()).unwrap_err().check_name(),
            "suspects"
        );
        let mut b = sample().encode();
        b.push(0);
        assert_eq!(Report::decode(&b).unwrap_err().check_name(), "trailing");
        assert_eq!(
            Report::decode(&b).unwrap_err().h_code(),
            crate::error::HCode::H1610
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120),
                                       size in 0u32..5000, sender: u32) {
            let _ = Report::decode(&bytes);
            let _ = crate::recovery::RecoverPayload::decode(&bytes, size, sender);
            let _ = read_suspects(&mut crate::codec::Reader::new(&bytes), 3, size, sender);
        }

        #[test]
        fn round_trips(flag: bool, rank in 0u32..4096, inc in 1u32.., epoch in 1u32.., best: u64,
                       set in proptest::collection::btree_set(0u32..4096, 0..20)) {
            let suspects: Vec<u32> = set.into_iter().filter(|s| *s != rank).collect();
            let r = Report { flag, job_id: JobId([1; 16]), rank, incarnation: inc, epoch, best_commit: best, suspects };
            prop_assert_eq!(Report::decode(&r.encode()), Ok(r));
        }
    }
}
