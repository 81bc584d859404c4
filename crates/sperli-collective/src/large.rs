//! Arrays larger than one frame (protocol text "Frame": "Eine größere
//! Nachricht teilt die Schicht darüber auf"; protocol §8.1, layouts §5).
//!
//! A large call is a fixed series of v1 calls, made in the same order on
//! every rank; each chunk is one v1 call with its own sequence number and
//! at most 16777200 bytes of data, cut on element boundaries. Nothing on
//! the wire changes: a second implementation sees ordinary v1 calls.

use sperli_wire::element::Reduction;
use sperli_wire::error::MismatchError;
use sperli_wire::limits::{COLLECTIVE_HEADER_LEN as H, MAX_COLLECTIVE_DATA};
use sperli_wire::Error;

use crate::comm::{Comm, Elems};
use crate::element::Element;
use crate::link::Link;

/// The most elements of `T` one v1 call carries: 16777200 / width.
///
/// ```
/// assert_eq!(sperli_collective::max_chunk_elems::<f64>(), 2_097_150);
/// ```
pub fn max_chunk_elems<T: Element>() -> usize {
    MAX_COLLECTIVE_DATA / T::WIDTH
}

fn clamp<T: Element>(chunk_elems: usize) -> usize {
    chunk_elems.clamp(1, max_chunk_elems::<T>())
}

impl<L: Link> Comm<L> {
    /// allreduce of an array of any length: `ceil(len / chunk)` v1
    /// allreduce calls (at least one) on consecutive chunks of at most
    /// 16777200 bytes each, results concatenated. Every rank must pass the
    /// same length, as for [`Comm::allreduce`]; each chunk is folded in
    /// rank order, so the result is the elementwise fold of the whole
    /// arrays. Errors as [`Comm::allreduce`], from the chunk that failed.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// // 64 MiB of u64 on each of 2 ranks: 5 v1 calls.
    /// let n = 64 << 20 >> 3;
    /// let got = fake::run(2, |c| {
    ///     let r = c.allreduce_large(&vec![1u64; n], Reduction::Sum).unwrap();
    ///     (r.len(), r.iter().all(|&x| x == 2), c.sequence())
    /// });
    /// assert_eq!(got, vec![(n, true, 5); 2]);
    /// ```
    pub fn allreduce_large<T: Element>(
        &mut self,
        data: &[T],
        op: Reduction,
    ) -> Result<Vec<T>, Error> {
        self.allreduce_chunked(data, op, max_chunk_elems::<T>())
    }

    /// As [`Comm::allreduce_large`] with chunks of at most `chunk_elems`
    /// elements (clamped to `1..=max_chunk_elems::<T>()`); every rank must
    /// pass the same `chunk_elems`.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(3, |c| {
    ///     let r = c.allreduce_chunked(&[1i32, 2, 3, 4, 5], Reduction::Sum, 2).unwrap();
    ///     (r, c.sequence())
    /// });
    /// assert_eq!(got, vec![(vec![3, 6, 9, 12, 15], 3); 3]);
    /// ```
    pub fn allreduce_chunked<T: Element>(
        &mut self,
        data: &[T],
        op: Reduction,
        chunk_elems: usize,
    ) -> Result<Vec<T>, Error> {
        let chunk = clamp::<T>(chunk_elems);
        let mut out = Vec::with_capacity(data.len());
        for c in chunks(data, chunk) {
            let p = self
                .reduce_core(true, 0, &Elems(c), T::ELEMENT_TYPE.code(), op.code())?
                .expect("allreduce has a result on every rank");
            T::extend_from_le(&p[H..], &mut out);
            self.recycle(p);
        }
        Ok(out)
    }

    /// reduce of an array of any length to `root`, in chunks of at most
    /// 16777200 bytes (one v1 reduce each, at least one). `Some` at the root.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(2, |c| c.reduce_large(1, &[c.rank() as f32; 3], Reduction::Sum).unwrap());
    /// assert_eq!(got, vec![None, Some(vec![1.0; 3])]);
    /// ```
    pub fn reduce_large<T: Element>(
        &mut self,
        root: u32,
        data: &[T],
        op: Reduction,
    ) -> Result<Option<Vec<T>>, Error> {
        self.reduce_chunked(root, data, op, max_chunk_elems::<T>())
    }

    /// As [`Comm::reduce_large`] with chunks of at most `chunk_elems`
    /// elements (same value on every rank).
    pub fn reduce_chunked<T: Element>(
        &mut self,
        root: u32,
        data: &[T],
        op: Reduction,
        chunk_elems: usize,
    ) -> Result<Option<Vec<T>>, Error> {
        let chunk = clamp::<T>(chunk_elems);
        let mut out = Vec::new();
        let mut at_root = false;
        for c in chunks(data, chunk) {
            if let Some(p) =
                self.reduce_core(false, root, &Elems(c), T::ELEMENT_TYPE.code(), op.code())?
            {
                at_root = true;
                T::extend_from_le(&p[H..], &mut out);
                self.recycle(p);
            }
        }
        Ok(at_root.then_some(out))
    }

    /// bcast of an array of any length. The receivers do not know the
    /// length, so the first v1 bcast carries 16 bytes from the root: the
    /// element count and the chunk length in elements (`u64` each,
    /// little-endian); then one v1 bcast per chunk (none for an empty
    /// array). Receivers check every chunk's length (H1617 otherwise).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let mut v = if c.rank() == 0 { vec![7u8; 40_000_000] } else { vec![] };
    ///     c.bcast_large(0, &mut v).unwrap();
    ///     (v.len(), v.iter().all(|&x| x == 7), c.sequence())
    /// });
    /// assert_eq!(got, vec![(40_000_000, true, 4); 3]);
    /// ```
    pub fn bcast_large<T: Element>(&mut self, root: u32, buf: &mut Vec<T>) -> Result<(), Error> {
        self.bcast_chunked(root, buf, max_chunk_elems::<T>())
    }

    /// As [`Comm::bcast_large`] with chunks of at most `chunk_elems`
    /// elements; only the root's `chunk_elems` counts (it is sent).
    pub fn bcast_chunked<T: Element>(
        &mut self,
        root: u32,
        buf: &mut Vec<T>,
        chunk_elems: usize,
    ) -> Result<(), Error> {
        let is_root = self.rank() == root;
        let mut head = Vec::with_capacity(16);
        if is_root {
            head.extend_from_slice(&(buf.len() as u64).to_le_bytes());
            head.extend_from_slice(&(clamp::<T>(chunk_elems) as u64).to_le_bytes());
        }
        let (count, chunk) = match self.bcast_core(root, &head[..], 1, Some(16))? {
            None => (buf.len(), clamp::<T>(chunk_elems)),
            Some(p) => {
                let count = u64::from_le_bytes(p[H..H + 8].try_into().expect("8 bytes"));
                let chunk = u64::from_le_bytes(p[H + 8..H + 16].try_into().expect("8 bytes"));
                if chunk == 0 || chunk > max_chunk_elems::<T>() as u64 {
                    return self.fail_job(
                        sperli_wire::abort::AbortReason::CollectiveMismatch,
                        Error::CollectiveMismatch(MismatchError::Header {
                            from: root,
                            field: "bcast_large chunk length",
                            expected: max_chunk_elems::<T>() as u64,
                            got: chunk,
                        }),
                    );
                }
                (usize::try_from(count).unwrap_or(usize::MAX), chunk as usize)
            }
        };
        if !is_root {
            buf.clear();
        }
        let mut done = 0usize;
        while done < count {
            let n = chunk.min(count - done);
            if is_root {
                self.bcast_core(root, &Elems(&buf[done..done + n]), T::WIDTH, None)?;
            } else if let Some(p) = self.bcast_core(root, &[][..], T::WIDTH, Some(n * T::WIDTH))? {
                T::extend_from_le(&p[H..], buf);
                self.recycle(p);
            }
            done += n;
        }
        Ok(())
    }
}

/// Consecutive chunks of at most `chunk` elements; one empty chunk for an
/// empty array, so every large call makes at least one v1 call.
fn chunks<T>(data: &[T], chunk: usize) -> impl Iterator<Item = &[T]> {
    let empty = data.is_empty().then_some(&data[..0]);
    empty.into_iter().chain(data.chunks(chunk))
}
