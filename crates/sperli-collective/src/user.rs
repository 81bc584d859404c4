//! User-defined reductions (protocol §17.4, reduction code 13 with
//! feature bit 4): reduce, allreduce, reduce_scatter, scan and exscan
//! with the program's function in place of a built-in fold.
//!
//! The function is `f(acc, right)`: it leaves `combine(acc, right)` in
//! `acc`, where `acc` is the lower ranks' partial (the left operand) and
//! `right` the next rank's contribution. Every call folds in ascending
//! rank order, `acc = c_0; f(acc, c_1); f(acc, c_2); ...`, so a function
//! that is not commutative (a matrix product, a concatenation) gives the
//! bits of the serial left fold whatever the job's size. The calls run
//! the star of protocol §8 at every length (never a pipeline of §14: the
//! function runs at the root only, §17.4), so their data is at most
//! 16777200 bytes per rank (scan and exscan: 16777192), H1618 beyond.
//!
//! No call takes MPI's commutative flag: every shape here folds in
//! ascending order, so the flag could change nothing (§17.4 says it is not
//! sent). Every rank must pass the same function; the wire carries only the
//! code 13, so a rank with a built-in reduction where another has a user
//! one is H1617 (ABORT reason 3), as any other reduction mismatch.

use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::error::ArgumentError;
use sperli_wire::Error;

use crate::comm::{Comm, Elems};
use crate::element::Element;
use crate::peers::Peers;
use crate::scan::Kind;

const H: usize = sperli_wire::limits::COLLECTIVE_HEADER_LEN;

/// A user-defined reduction on little-endian bytes (protocol §17.4):
/// `f(acc, right)` leaves the combination in `acc`, the left operand.
/// Both slices are whole elements of the call's element type and equally
/// long.
pub type UserFold<'a> = &'a mut dyn FnMut(&mut [u8], &[u8]);

/// `f` on elements as a fold on their little-endian bytes.
fn typed<T: Element, F: FnMut(&mut [T], &[T])>(f: &mut F) -> impl FnMut(&mut [u8], &[u8]) + '_ {
    move |acc: &mut [u8], right: &[u8]| {
        let mut a = T::vec_from_le(acc);
        let b = T::vec_from_le(right);
        f(&mut a, &b);
        acc.copy_from_slice(&T::to_le_vec(&a));
    }
}

impl<L: Peers> Comm<L> {
    /// reduce with a user-defined reduction (protocol §17.4): the root
    /// gets `c_0` folded with `f` over `c_1 .. c_{n-1}` in ascending rank
    /// order, `f(acc, c_i)` with `acc` the left operand; `None`
    /// elsewhere. H1618 on every rank before anything is sent for
    /// `root >= size`, data longer than 16777200 bytes, or a job without
    /// feature bit 4 on every rank; contributions of different lengths end
    /// the job as in [`Comm::reduce`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// // "10 * left + right": not commutative, so the order shows.
    /// let got = fake::run(3, |c| {
    ///     c.reduce_with(0, &[c.rank() as u64 + 1], |a, b| a[0] = 10 * a[0] + b[0]).unwrap()
    /// });
    /// assert_eq!(got, vec![Some(vec![123]), None, None]);
    /// ```
    pub fn reduce_with<T: Element>(
        &self,
        root: u32,
        data: &[T],
        mut f: impl FnMut(&mut [T], &[T]),
    ) -> Result<Option<Vec<T>>, Error> {
        let mut g = typed(&mut f);
        let p = self.reduce_core(
            false,
            root,
            &Elems(data),
            T::ELEMENT_TYPE.code(),
            Reduction::User.code(),
            Some(&mut g),
        )?;
        Ok(p.map(|p| self.read_result(p)))
    }

    /// allreduce with a user-defined reduction: every rank gets what
    /// [`Comm::reduce_with`] gives rank 0 (rank 0 folds, then sends the
    /// result). Errors as [`Comm::reduce_with`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     c.allreduce_with(&[c.rank() as i32 + 1], |a, b| a[0] = 10 * a[0] + b[0]).unwrap()
    /// });
    /// assert_eq!(got, vec![vec![123]; 3]);
    /// ```
    pub fn allreduce_with<T: Element>(
        &self,
        data: &[T],
        mut f: impl FnMut(&mut [T], &[T]),
    ) -> Result<Vec<T>, Error> {
        let mut g = typed(&mut f);
        let p = self
            .reduce_core(
                true,
                0,
                &Elems(data),
                T::ELEMENT_TYPE.code(),
                Reduction::User.code(),
                Some(&mut g),
            )?
            .expect("allreduce has a result on every rank");
        Ok(self.read_result(p))
    }

    /// reduce on raw little-endian bytes of element type `element_type`
    /// (0..=17) with a user-defined reduction on those bytes. Checks as
    /// [`Comm::reduce_with`], and data that is not a whole number of
    /// elements or a code above 17: H1618 before anything is sent.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// // u8 (type 0): "keep the left byte, add the right one".
    /// let got = fake::run(2, |c| {
    ///     c.reduce_bytes_with(1, &[c.rank() as u8 + 5], 0, |a, b| a[0] += b[0]).unwrap()
    /// });
    /// assert_eq!(got, vec![None, Some(vec![11])]);
    /// ```
    pub fn reduce_bytes_with(
        &self,
        root: u32,
        data: &[u8],
        element_type: u8,
        mut f: impl FnMut(&mut [u8], &[u8]),
    ) -> Result<Option<Vec<u8>>, Error> {
        let code = Reduction::User.code();
        let p = self.reduce_core(false, root, data, element_type, code, Some(&mut f))?;
        Ok(p.map(|p| self.read_result::<u8>(p)))
    }

    /// allreduce on raw little-endian bytes with a user-defined reduction;
    /// checks as [`Comm::reduce_bytes_with`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     c.allreduce_bytes_with(&[c.rank() as u8], 0, |a, b| a[0] = 3 * a[0] + b[0]).unwrap()
    /// });
    /// assert_eq!(got, vec![vec![5]; 3]); // (0 * 3 + 1) * 3 + 2
    /// ```
    pub fn allreduce_bytes_with(
        &self,
        data: &[u8],
        element_type: u8,
        mut f: impl FnMut(&mut [u8], &[u8]),
    ) -> Result<Vec<u8>, Error> {
        let code = Reduction::User.code();
        let p = self
            .reduce_core(true, 0, data, element_type, code, Some(&mut f))?
            .expect("allreduce has a result on every rank");
        Ok(self.read_result(p))
    }

    /// reduce_scatter with a user-defined reduction: `data` is `size`
    /// equal blocks; rank i gets block i of the fold of every rank's
    /// `data`. The two v1 calls of [`Comm::reduce_scatter`] without a
    /// pipeline (a reduce to rank 0, a scatter from it); a length that is
    /// not a multiple of `size` elements is H1618 on every rank (counting
    /// both calls), other checks as [`Comm::reduce_with`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     let r = c.rank() as u16 + 1;
    ///     let f = |a: &mut [u16], b: &[u16]| a.iter_mut().zip(b).for_each(|(x, y)| *x = 10 * *x + y);
    ///     c.reduce_scatter_with(&[r, 2 * r], f).unwrap()
    /// });
    /// assert_eq!(got, vec![vec![12], vec![24]]);
    /// ```
    pub fn reduce_scatter_with<T: Element>(
        &self,
        data: &[T],
        mut f: impl FnMut(&mut [T], &[T]),
    ) -> Result<Vec<T>, Error> {
        let size = self.size() as usize;
        if data.len() % size != 0 {
            let e = ArgumentError::ScatterBlocks {
                len: data.len() * T::WIDTH,
                size: self.size(),
            };
            return self.refuse(2, e);
        }
        let mut g = typed(&mut f);
        let code = Reduction::User.code();
        let et = T::ELEMENT_TYPE.code();
        let reduced = match self.reduce_core(false, 0, &Elems(data), et, code, Some(&mut g)) {
            Ok(r) => r,
            Err(e) => {
                self.skip_calls(1);
                return Err(e);
            }
        };
        let root_data = reduced.as_deref().map_or(&[][..], |p| &p[H..]);
        let block = data.len() / size * T::WIDTH;
        let (p, off) = self.scatter_core(0, root_data, T::WIDTH, Some(block))?;
        Ok(T::vec_from_le(&p[off..]))
    }

    /// scan with a user-defined reduction: rank i gets the fold of the
    /// `data` of ranks 0 ..= i, `f(acc, c_j)` in ascending rank order. The
    /// two v1 calls of [`Comm::scan`] (protocol §8.9; the descriptor
    /// carries the code 13), with its checks and errors; a job without
    /// feature bit 4 on every rank is H1618.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     c.scan_with(&[c.rank() as i64 + 1], |a, b| a[0] = 10 * a[0] + b[0]).unwrap()
    /// });
    /// assert_eq!(got, vec![vec![1], vec![12], vec![123]]);
    /// ```
    pub fn scan_with<T: Element>(
        &self,
        data: &[T],
        f: impl FnMut(&mut [T], &[T]),
    ) -> Result<Vec<T>, Error> {
        self.prefix_with(data, Kind::Scan, f)
    }

    /// exscan with a user-defined reduction: rank i > 0 gets the fold of
    /// ranks 0 .. i as [`Comm::scan_with`] folds it, rank 0 `None`.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     c.exscan_with(&[c.rank() as u32 + 1], |a, b| a[0] = 10 * a[0] + b[0]).unwrap()
    /// });
    /// assert_eq!(got, vec![None, Some(vec![1]), Some(vec![12])]);
    /// ```
    pub fn exscan_with<T: Element>(
        &self,
        data: &[T],
        f: impl FnMut(&mut [T], &[T]),
    ) -> Result<Option<Vec<T>>, Error> {
        let got = self.prefix_with(data, Kind::Exscan, f)?;
        Ok((self.rank() != 0).then_some(got))
    }

    /// scan or exscan of elements with `f`: this rank's block.
    fn prefix_with<T: Element>(
        &self,
        data: &[T],
        kind: Kind,
        mut f: impl FnMut(&mut [T], &[T]),
    ) -> Result<Vec<T>, Error> {
        let mut g = typed(&mut f);
        let put = |b: &mut Vec<u8>| T::extend_le(data, b);
        let (t, user) = (T::ELEMENT_TYPE, Reduction::User);
        let len = data.len() * T::WIDTH;
        let (p, off) = self.prefix_core(len, t, user, put, kind, Some(&mut g))?;
        Ok(T::vec_from_le(&p[off..]))
    }

    /// scan (`exclusive == false`) or exscan on raw little-endian bytes of
    /// element type `element_type` with a user-defined reduction; returns
    /// this rank's prefix (exscan: rank 0 gets its own data back, which
    /// MPI leaves undefined). Checks as [`Comm::scan_with`] and
    /// [`Comm::reduce_bytes_with`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     c.scan_bytes_with(&[c.rank() as u8 + 1], 0, false, |a, b| a[0] = 2 * a[0] + b[0])
    ///         .unwrap()
    /// });
    /// assert_eq!(got, vec![vec![1], vec![4], vec![11]]);
    /// ```
    pub fn scan_bytes_with(
        &self,
        data: &[u8],
        element_type: u8,
        exclusive: bool,
        mut f: impl FnMut(&mut [u8], &[u8]),
    ) -> Result<Vec<u8>, Error> {
        let t = match ElementType::from_code(element_type) {
            Ok(t) => t,
            Err(e) => return self.refuse(2, e),
        };
        let kind = if exclusive { Kind::Exscan } else { Kind::Scan };
        let put = |b: &mut Vec<u8>| b.extend_from_slice(data);
        let (p, off) = self.prefix_core(data.len(), t, Reduction::User, put, kind, Some(&mut f))?;
        Ok(p[off..].to_vec())
    }

    /// The result elements of a reduce payload (data at `[16..]`); the
    /// buffer goes back to the link.
    fn read_result<T: Element>(&self, p: Vec<u8>) -> Vec<T> {
        let v = T::vec_from_le(&p[H..]);
        self.recycle(p);
        v
    }
}
