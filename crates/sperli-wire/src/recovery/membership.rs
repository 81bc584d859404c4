//! The MEMBERSHIP record (protocol §18.3): the next membership of a job,
//! decided and signed by the launcher alone (§18.1), context
//! `SPERLI-MEMBER-1`. [`MembershipRecord::decode`] makes checks 1-13 in
//! reading order; [`MembershipRecord::precheck`] checks 14 and 15,
//! the caller verifies the signature (check 16, with the job public key),
//! and [`MembershipRecord::check_history`] makes checks 17 and 18.

use super::error::{RecordCheck, RecoveryError};
use super::fields::Fields;
use super::NO_ROLLBACK;
use crate::codec::PutLe;
use crate::error::DecodeError;
use crate::ids::{JobId, Sha256Digest};
use crate::limits::{MAX_HOST_LEN, MAX_SIZE, SIGNATURE_LEN};

const WHAT: &str = "MEMBERSHIP record";
/// The record's magic (protocol §18.3).
pub const MAGIC: [u8; 4] = *b"SPMB";
/// Length of the fixed part before the incarnation table (protocol §18.3).
pub const FIXED_LEN: usize = 48;

/// How the job goes on after a failure (protocol §18.3 `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// 1: a replacement of each failed rank joins; every rank rolls back (§18.7).
    Replace,
    /// 2: the survivors go on without the failed ranks (§18.8).
    Shrink,
}

impl Mode {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Mode::Replace => 1,
            Mode::Shrink => 2,
        }
    }
}

/// One change entry: a rank that failed in the epoch the record ends
/// (protocol §18.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The failed rank.
    pub rank: u32,
    /// Replace: SHA-256 of the replacement's certificate (DER); shrink: zeros.
    pub cert_sha256: Sha256Digest,
    /// Replace: the replacement's port and host; shrink: `None`.
    pub endpoint: Option<(u16, String)>,
}

/// A decoded MEMBERSHIP record (protocol §18.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipRecord {
    /// Replace or shrink.
    pub mode: Mode,
    /// The AND of the members' flags (§18.8).
    pub agreed: bool,
    /// The job.
    pub job_id: JobId,
    /// The incarnation every rank had at this run's set-up.
    pub start_incarnation: u32,
    /// The new epoch, ≥ 2.
    pub epoch: u32,
    /// The job's size at set-up.
    pub size: u32,
    /// Replace: the COMMIT epoch to resume; shrink: [`NO_ROLLBACK`].
    pub rollback: u64,
    /// `inc[n]` for every rank; 0 = not a member.
    pub incarnations: Vec<u32>,
    /// The change entries, ranks strictly ascending.
    pub changes: Vec<Change>,
    /// The 2484 signature bytes.
    pub signature: Vec<u8>,
}

/// What the receiver knows when it judges a record (protocol §18.3
/// checks 14-18).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipView {
    /// The receiver's job.
    pub job_id: JobId,
    /// The job's size.
    pub size: u32,
    /// The run's start incarnation.
    pub start_incarnation: u32,
    /// The receiver's current epoch (1 after set-up).
    pub epoch: u32,
    /// `inc[n]` of the current membership; 0 = not a member.
    pub incarnations: Vec<u32>,
    /// The bytes of the record of the current epoch (empty in epoch 1).
    pub current_record: Vec<u8>,
}

/// The outcome of checks 14 and 15 (protocol §18.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precheck {
    /// Discard: an epoch already passed, or the record already held.
    Discard,
    /// Go on: verify the signature (check 16), then [`MembershipRecord::check_history`].
    Verify,
}

/// One change entry after its rank (protocol §18.3, check 10 `entry`):
/// the fields against the mode's column, and `inc[rank]` (`inc`).
fn read_change(
    f: &mut Fields<'_>,
    mode: Mode,
    rank: u32,
    inc: u32,
) -> Result<Change, RecoveryError> {
    use RecordCheck as C;
    let cert = Sha256Digest(f.array("cert_sha256", C::Entry)?);
    match mode {
        Mode::Replace => {
            let port = f.u16_in("port", C::Entry, 1, u16::MAX)?;
            let host_len = f.u8_in("host_len", C::Entry, 1, MAX_HOST_LEN as u8)?;
            let raw = f.take(host_len.into(), "host", C::Entry)?;
            let host = std::str::from_utf8(raw).map_err(|_| {
                f.fail(
                    C::Entry,
                    DecodeError::NotZero {
                        field: "host (not ASCII)",
                        got: 1,
                    },
                )
            })?;
            crate::host::validate(host).map_err(|e| f.fail(C::Entry, DecodeError::Host(e)))?;
            if inc == 0 {
                return Err(f.fail(
                    C::Entry,
                    range("incarnation of a replaced rank", 1, u32::MAX.into(), 0),
                ));
            }
            Ok(Change {
                rank,
                cert_sha256: cert,
                endpoint: Some((port, host.to_string())),
            })
        }
        Mode::Shrink => {
            if let Some(b) = cert.0.iter().find(|b| **b != 0) {
                return Err(f.fail(
                    C::Entry,
                    DecodeError::NotZero {
                        field: "cert_sha256",
                        got: (*b).into(),
                    },
                ));
            }
            f.u16_in("port", C::Entry, 0, 0)?;
            f.u8_in("host_len", C::Entry, 0, 0)?;
            if inc != 0 {
                let error = DecodeError::Mismatch {
                    field: "incarnation of a removed rank",
                    expected: 0,
                    got: inc.into(),
                };
                return Err(f.fail(C::Entry, error));
            }
            Ok(Change {
                rank,
                cert_sha256: cert,
                endpoint: None,
            })
        }
    }
}

fn range(field: &'static str, min: u64, max: u64, got: u64) -> DecodeError {
    DecodeError::OutOfRange {
        field,
        min,
        max,
        got,
    }
}

impl MembershipRecord {
    /// The offset S of `sig_len`: the signed bytes are `[0, S)` (protocol §18.3).
    pub fn signed_len(&self) -> usize {
        self.encode_unsigned().len()
    }

    fn encode_unsigned(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(FIXED_LEN + 4 * self.incarnations.len() + 40 * self.changes.len());
        out.extend_from_slice(&MAGIC);
        out.put_u16(1);
        out.push(self.mode.code());
        out.push(u8::from(self.agreed));
        out.extend_from_slice(&self.job_id.0);
        out.put_u32(self.start_incarnation);
        out.put_u32(self.epoch);
        out.put_u32(self.size);
        out.put_u32(self.changes.len() as u32);
        out.put_u64(self.rollback);
        for inc in &self.incarnations {
            out.put_u32(*inc);
        }
        for c in &self.changes {
            out.put_u32(c.rank);
            out.extend_from_slice(&c.cert_sha256.0);
            match &c.endpoint {
                Some((port, host)) => {
                    out.put_u16(*port);
                    out.push(host.len() as u8);
                    out.extend_from_slice(host.as_bytes());
                }
                None => {
                    out.put_u16(0);
                    out.push(0);
                }
            }
        }
        out
    }

    /// The signed bytes `[0, S)` (protocol §18.3), to sign or verify with
    /// context [`super::CONTEXT_MEMBER`].
    pub fn signed_bytes(&self) -> Vec<u8> {
        self.encode_unsigned()
    }

    /// Writes the whole record: the signed bytes, `sig_len` = 2484 and the
    /// signature (protocol §18.3).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.encode_unsigned();
        out.put_u16(SIGNATURE_LEN as u16);
        out.extend_from_slice(&self.signature);
        out
    }

    /// Reads a record, checks 1-13 of protocol §18.3 in reading order
    /// (a field that does not fit: `truncated`).
    pub fn decode(bytes: &[u8]) -> Result<Self, RecoveryError> {
        use RecordCheck as C;
        let mut f = Fields::new(bytes, WHAT);
        f.head(MAGIC, "SPMB")?;
        let mode = match f.u8_in("mode", C::Mode, 1, 2)? {
            1 => Mode::Replace,
            _ => Mode::Shrink,
        };
        let agreed = f.flag("agreed", C::Agreed)?;
        let job_id = JobId(f.array("job_id", C::Truncated)?);
        let start_incarnation = f.u32_in("start_incarnation", C::Epoch, 1, u32::MAX)?;
        let epoch = f.u32_in("epoch", C::Epoch, 2, u32::MAX)?;
        let size = f.u32_in("size", C::Size, 1, MAX_SIZE)?;
        let changed = f.u32_in("changed", C::Changed, 1, size - 1)?;
        let rollback = f.u64("rollback", C::Rollback)?;
        if (mode == Mode::Shrink) != (rollback == NO_ROLLBACK) {
            let error = match mode {
                Mode::Shrink => DecodeError::Mismatch {
                    field: "rollback",
                    expected: NO_ROLLBACK,
                    got: rollback,
                },
                Mode::Replace => range("rollback", 0, NO_ROLLBACK - 1, rollback),
            };
            return Err(f.fail(C::Rollback, error));
        }
        // Length cap: size ≤ 4096 was checked, so the table is at most 16 KiB.
        let mut incarnations = Vec::with_capacity(size as usize);
        for _ in 0..size {
            incarnations.push(f.u32("incarnations", C::Truncated)?);
        }
        let mut changes: Vec<Change> = Vec::with_capacity(changed as usize);
        for _ in 0..changed {
            let min = changes.last().map_or(0, |l| l.rank + 1);
            let rank = f.u32_in("rank", C::Entry, min, size - 1)?;
            let change = read_change(&mut f, mode, rank, incarnations[rank as usize])?;
            changes.push(change);
        }
        if incarnations.iter().all(|i| *i == 0) {
            return Err(f.fail(C::Members, range("members", 1, size.into(), 0)));
        }
        f.u16_in(
            "sig_len",
            C::SigLen,
            SIGNATURE_LEN as u16,
            SIGNATURE_LEN as u16,
        )?;
        let signature = f.take(SIGNATURE_LEN, "signature", C::Truncated)?.to_vec();
        f.end()?;
        Ok(MembershipRecord {
            mode,
            agreed,
            job_id,
            start_incarnation,
            epoch,
            size,
            rollback,
            incarnations,
            changes,
            signature,
        })
    }

    /// Checks 14 (job) and 15 (stale, equivocation) of protocol §18.3;
    /// `bytes` is the record as received.
    pub fn precheck(&self, bytes: &[u8], view: &MembershipView) -> Result<Precheck, RecoveryError> {
        let job = |field, expected: u64, got: u64| RecoveryError::Job {
            field,
            expected,
            got,
        };
        if self.job_id != view.job_id {
            let head = |j: &JobId| u64::from_le_bytes(j.0[..8].try_into().unwrap_or([0; 8]));
            return Err(job("job_id", head(&view.job_id), head(&self.job_id)));
        }
        if self.size != view.size {
            return Err(job("size", view.size.into(), self.size.into()));
        }
        if self.start_incarnation != view.start_incarnation {
            return Err(job(
                "start_incarnation",
                view.start_incarnation.into(),
                self.start_incarnation.into(),
            ));
        }
        if self.epoch < view.epoch {
            return Ok(Precheck::Discard);
        }
        if self.epoch == view.epoch {
            return if bytes == view.current_record.as_slice() {
                Ok(Precheck::Discard)
            } else {
                Err(RecoveryError::Equivocation { epoch: self.epoch })
            };
        }
        Ok(Precheck::Verify)
    }

    /// Checks 17 (history) and 18 (fenced) of protocol §18.3, after the
    /// signature verified; `refused` says whether a host is refused
    /// (protocol §2.3). `own` is the receiver's (rank, incarnation).
    pub fn check_history(
        &self,
        view: &MembershipView,
        own: (u32, u32),
        refused: impl Fn(&str) -> bool,
    ) -> Result<(), RecoveryError> {
        // A record that skips epochs carries the whole table (§18.3): an
        // incarnation may then have grown, or a rank been removed, in between.
        let skipped = self.epoch > view.epoch.saturating_add(1);
        for (n, (&new, &cur)) in self.incarnations.iter().zip(&view.incarnations).enumerate() {
            let rank = n as u32;
            let changed = self.changes.iter().find(|c| c.rank == rank);
            let hist = |field, expected: u64| RecoveryError::History {
                rank,
                field,
                expected,
                got: new.into(),
            };
            if cur == 0 && new != 0 {
                return Err(hist("member", 0));
            }
            match (changed, self.mode) {
                (Some(_), Mode::Replace) if new <= cur => {
                    return Err(hist("incarnation", u64::from(cur) + 1))
                }
                (None, _) if !skipped && new != cur => return Err(hist("incarnation", cur.into())),
                (None, _) if skipped && new != 0 && new < cur => {
                    return Err(hist("incarnation", cur.into()))
                }
                _ => {}
            }
            if let Some(Change {
                endpoint: Some((_, host)),
                ..
            }) = changed
            {
                if refused(host) {
                    return Err(RecoveryError::HostRefused { rank });
                }
            }
        }
        let (rank, inc) = own;
        if self.incarnations.get(rank as usize).copied() != Some(inc) {
            return Err(RecoveryError::Fenced { epoch: self.epoch });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
