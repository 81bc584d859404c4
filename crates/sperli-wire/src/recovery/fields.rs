//! Reading the records of feature bit 5 field by field, each field
//! checked as it is read (protocol §18.3 checks 1-13, §18.4, §18.5): a
//! field that does not fit is `truncated`, one outside its rule names its
//! check.

use super::error::{malformed, RecordCheck, RecoveryError};
use crate::codec::Reader;
use crate::error::DecodeError;

/// A [`Reader`] over one record that reports [`RecoveryError::Malformed`].
pub(crate) struct Fields<'a> {
    /// The reader (for the fields with rules of their own).
    pub r: Reader<'a>,
    what: &'static str,
}

impl<'a> Fields<'a> {
    /// Reads `bytes` as the record `what`.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Fields {
            r: Reader::new(bytes),
            what,
        }
    }

    /// The error of `check` with `error`.
    pub fn fail(&self, check: RecordCheck, error: DecodeError) -> RecoveryError {
        malformed(self.what, check, error)
    }

    /// A reader result, its failure named `check` (or `truncated`).
    pub fn get<T>(
        &self,
        res: Result<T, DecodeError>,
        check: RecordCheck,
    ) -> Result<T, RecoveryError> {
        res.map_err(|e| self.fail(check, e))
    }

    /// The magic (`name` its ASCII) and `u16 version` = 1.
    pub fn head(&mut self, magic: [u8; 4], name: &'static str) -> Result<(), RecoveryError> {
        let got: [u8; 4] = self
            .r
            .array("magic")
            .map_err(|e| self.fail(RecordCheck::Magic, e))?;
        if got != magic {
            return Err(self.fail(
                RecordCheck::Magic,
                DecodeError::BadMagic {
                    expected: name,
                    got,
                },
            ));
        }
        self.u16_in("version", RecordCheck::Version, 1, 1)
            .map(|_| ())
    }

    fn range(
        &self,
        field: &'static str,
        check: RecordCheck,
        min: u64,
        max: u64,
        got: u64,
    ) -> Result<u64, RecoveryError> {
        if (min..=max).contains(&got) {
            Ok(got)
        } else if min == max {
            Err(self.fail(
                check,
                DecodeError::Mismatch {
                    field,
                    expected: min,
                    got,
                },
            ))
        } else {
            Err(self.fail(
                check,
                DecodeError::OutOfRange {
                    field,
                    min,
                    max,
                    got,
                },
            ))
        }
    }

    /// A `u8` in `min..=max`.
    pub fn u8_in(
        &mut self,
        field: &'static str,
        check: RecordCheck,
        min: u8,
        max: u8,
    ) -> Result<u8, RecoveryError> {
        let res = self.r.u8(field);
        let v = self.get(res, check)?;
        self.range(field, check, min.into(), max.into(), v.into())
            .map(|_| v)
    }

    /// A `u16` in `min..=max`.
    pub fn u16_in(
        &mut self,
        field: &'static str,
        check: RecordCheck,
        min: u16,
        max: u16,
    ) -> Result<u16, RecoveryError> {
        let res = self.r.u16(field);
        let v = self.get(res, check)?;
        self.range(field, check, min.into(), max.into(), v.into())
            .map(|_| v)
    }

    /// A `u32` in `min..=max`.
    pub fn u32_in(
        &mut self,
        field: &'static str,
        check: RecordCheck,
        min: u32,
        max: u32,
    ) -> Result<u32, RecoveryError> {
        let res = self.r.u32(field);
        let v = self.get(res, check)?;
        self.range(field, check, min.into(), max.into(), v.into())
            .map(|_| v)
    }

    /// A `u8` that is 0 or 1.
    pub fn flag(&mut self, field: &'static str, check: RecordCheck) -> Result<bool, RecoveryError> {
        self.u8_in(field, check, 0, 1).map(|v| v == 1)
    }

    /// Any `u32`.
    pub fn u32(&mut self, field: &'static str, check: RecordCheck) -> Result<u32, RecoveryError> {
        let res = self.r.u32(field);
        self.get(res, check)
    }

    /// Any `u64`.
    pub fn u64(&mut self, field: &'static str, check: RecordCheck) -> Result<u64, RecoveryError> {
        let res = self.r.u64(field);
        self.get(res, check)
    }

    /// `N` bytes.
    pub fn array<const N: usize>(
        &mut self,
        field: &'static str,
        check: RecordCheck,
    ) -> Result<[u8; N], RecoveryError> {
        let res = self.r.array(field);
        self.get(res, check)
    }

    /// `n` bytes.
    pub fn take(
        &mut self,
        n: usize,
        field: &'static str,
        check: RecordCheck,
    ) -> Result<&'a [u8], RecoveryError> {
        let res = self.r.take(n, field);
        self.get(res, check)
    }

    /// Fails with `trailing` unless every byte was read.
    pub fn end(&self) -> Result<(), RecoveryError> {
        self.get(self.r.expect_end(self.what), RecordCheck::Trailing)
    }
}
