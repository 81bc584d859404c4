//! scan and exscan (MPI's `MPI_Scan` and `MPI_Exscan`), built from v1
//! calls without a new frame (protocol §8.9): a gather to rank 0 of every
//! rank's descriptor and data, the prefixes folded at rank 0 in ascending
//! rank order, then a scatter of the prefixes from rank 0.

use sperli_wire::abort::AbortReason;
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::error::{ArgumentError, MismatchError};
use sperli_wire::limits::MAX_COLLECTIVE_DATA;
use sperli_wire::reduce::combine_into;
use sperli_wire::Error;

use crate::comm::Comm;
use crate::element::Element;
use crate::peers::Peers;
use crate::user::UserFold;

/// The descriptor before a rank's data in the gather (protocol §8.9):
/// element type, reduction, kind, five zero bytes.
const DESCRIPTOR_LEN: usize = 8;

/// Which prefix a rank gets (the descriptor's kind byte, protocol §8.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Ranks 0 ..= i.
    Scan = 1,
    /// Ranks 0 .. i (nothing at rank 0).
    Exscan = 2,
}

impl<L: Peers> Comm<L> {
    /// scan (`MPI_Scan`): rank i gets the elementwise fold of the `data`
    /// of ranks 0 ..= i, folded in ascending rank order with the lower
    /// ranks' partial as the left operand (protocol §8.2), so the bits are
    /// those of a reduce of ranks 0 ..= i. Every rank passes the same
    /// length, element type and reduction. Two v1 calls (protocol §8.9): a
    /// gather to rank 0 and a scatter from it; a reduction the element
    /// type does not allow, or data longer than 16777192 bytes, is refused
    /// with H1618 before anything is sent, counting both calls. A rank
    /// whose length differs is H1617 at rank 0, as is one whose element
    /// type, reduction or call (scan, exscan) differs (ABORT reason 3).
    ///
    /// ```
    /// use sperli_collective::prelude::*;
    /// use sperli_collective::fake;
    /// let got = fake::run(4, |c| c.scan(&[c.rank() as i64 + 1], Reduction::Sum).unwrap());
    /// assert_eq!(got, vec![vec![1], vec![3], vec![6], vec![10]]);
    /// ```
    pub fn scan<T: Element>(&self, data: &[T], op: Reduction) -> Result<Vec<T>, Error> {
        self.prefix_call(data, op, Kind::Scan)
    }

    /// exscan (`MPI_Exscan`): rank i > 0 gets the fold of the `data` of
    /// ranks 0 .. i, as [`Comm::scan`] folds it; rank 0 gets `None`
    /// (MPI leaves its buffer undefined). The same calls, checks and
    /// errors as [`Comm::scan`].
    ///
    /// ```
    /// use sperli_collective::prelude::*;
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| c.exscan(&[2u32 << c.rank()], Reduction::Bor).unwrap());
    /// assert_eq!(got, vec![None, Some(vec![2]), Some(vec![6])]);
    /// ```
    pub fn exscan<T: Element>(&self, data: &[T], op: Reduction) -> Result<Option<Vec<T>>, Error> {
        let got = self.prefix_call(data, op, Kind::Exscan)?;
        Ok((self.rank() != 0).then_some(got))
    }

    /// The two calls of scan and exscan (protocol §8.9); returns this
    /// rank's block of the scatter.
    fn prefix_call<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
        kind: Kind,
    ) -> Result<Vec<T>, Error> {
        let len = data.len() * T::WIDTH;
        let put = |b: &mut Vec<u8>| T::extend_le(data, b);
        let (p, off) = self.prefix_core(len, T::ELEMENT_TYPE, op, put, kind, None)?;
        Ok(T::vec_from_le(&p[off..]))
    }

    /// The two calls of scan and exscan on `len` bytes of `t` that `put`
    /// appends, folded with `op`'s built-in fold or, with `user`, the
    /// program's function (`op` then [`Reduction::User`], protocol
    /// §17.4); returns the scatter's payload and the offset of this rank's
    /// prefix in it.
    pub(crate) fn prefix_core(
        &self,
        len: usize,
        t: ElementType,
        op: Reduction,
        put: impl FnOnce(&mut Vec<u8>),
        kind: Kind,
        user: Option<UserFold<'_>>,
    ) -> Result<(Vec<u8>, usize), Error> {
        // Protocol §8.4 and §8.9, with §17.1-§17.2 for the codes of bit 4
        // (the descriptor carries them as any other code).
        let checked = match user {
            None => self.check_reduction(len, t, op),
            Some(_) => self.check_user_reduction(len, t),
        };
        if let Err(e) = checked {
            return self.refuse(2, e);
        }
        if len + DESCRIPTOR_LEN > MAX_COLLECTIVE_DATA {
            return self.refuse(
                2,
                ArgumentError::TooLong {
                    len: len + DESCRIPTOR_LEN,
                    max: MAX_COLLECTIVE_DATA,
                },
            );
        }
        let mut block = Vec::with_capacity(DESCRIPTOR_LEN + len);
        block.extend_from_slice(&descriptor(t.code(), op.code(), kind));
        put(&mut block);
        let mut all = Vec::new();
        if self.rank() == 0 {
            all.reserve(self.size() as usize * block.len());
        }
        let at_root = self.gather_core(0, &block[..], |b| all.extend_from_slice(b))?;
        let prefixes = if at_root {
            self.fold_prefixes(&all, block.len(), kind, t, op, user)?
        } else {
            Vec::new()
        };
        self.scatter_core(0, &prefixes[..], t.width(), Some(len))
    }

    /// At rank 0: checks every rank's descriptor against its own (H1617,
    /// ABORT reason 3) and folds the prefixes in ascending rank order,
    /// `p_0 = c_0`, `p_i = combine(p_{i-1}, c_i)`; returns the scatter's
    /// data: block i is `p_i` (scan) or `p_{i-1}` (exscan; block 0 is
    /// `c_0`, which rank 0 does not return). `all` holds the gathered
    /// blocks of `block` bytes each, in rank order.
    fn fold_prefixes(
        &self,
        all: &[u8],
        block: usize,
        kind: Kind,
        t: ElementType,
        op: Reduction,
        mut user: Option<UserFold<'_>>,
    ) -> Result<Vec<u8>, Error> {
        let own = &all[..DESCRIPTOR_LEN];
        for (r, b) in all.chunks(block).enumerate() {
            if let Some(e) = descriptor_mismatch(r as u32, own, &b[..DESCRIPTOR_LEN]) {
                return self.fail_job(
                    AbortReason::CollectiveMismatch,
                    Error::CollectiveMismatch(e),
                );
            }
        }
        let mut acc = all[DESCRIPTOR_LEN..block].to_vec();
        let mut out = Vec::with_capacity(all.len() / block * acc.len());
        out.extend_from_slice(&acc);
        for b in all.chunks(block).skip(1) {
            if kind == Kind::Exscan {
                out.extend_from_slice(&acc);
            }
            match user.as_mut() {
                Some(f) => f(&mut acc, &b[DESCRIPTOR_LEN..]),
                None => {
                    if let Err(e) = combine_into(&mut acc, &b[DESCRIPTOR_LEN..], t, op) {
                        return self.fail_job(AbortReason::CollectiveMismatch, e.into());
                    }
                }
            }
            if kind == Kind::Scan {
                out.extend_from_slice(&acc);
            }
        }
        Ok(out)
    }
}

/// The descriptor of protocol §8.9.
fn descriptor(element_type: u8, reduction: u8, kind: Kind) -> [u8; DESCRIPTOR_LEN] {
    [element_type, reduction, kind as u8, 0, 0, 0, 0, 0]
}

/// The first field in which rank `from`'s descriptor differs from rank
/// 0's (`own`), as H1617's header mismatch.
fn descriptor_mismatch(from: u32, own: &[u8], got: &[u8]) -> Option<MismatchError> {
    const FIELDS: [&str; DESCRIPTOR_LEN] = [
        "element_type",
        "reduction",
        "scan kind",
        "reserved",
        "reserved",
        "reserved",
        "reserved",
        "reserved",
    ];
    own.iter()
        .zip(got)
        .zip(FIELDS)
        .find(|((a, b), _)| a != b)
        .map(|((a, b), field)| MismatchError::Header {
            from,
            field,
            expected: u64::from(*a),
            got: u64::from(*b),
        })
}
