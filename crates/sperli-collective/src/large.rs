//! Arrays larger than one frame (protocol §6.1: a message larger than the
//! largest payload is split by the layer above; protocol §8.1, §8.3;
//! protocol §14.1 with feature bit 1).
//!
//! In a v1 job a large call is a fixed series of v1 calls, made in the same
//! order on every rank; each chunk is one v1 call with its own sequence
//! number and at most 16777200 bytes of data, cut on element boundaries.
//! Nothing on the wire changes: a second implementation sees ordinary v1
//! calls.
//!
//! In a job with feature bit 1 the `_large` calls are **one** call each
//! (one sequence number) wherever protocol §14.5 pipelines them, with no cut
//! at 16 MiB; the results are the same bits as the v1 split's (protocol
//! §14.6). The `_chunked` calls stay a series of calls of the size asked
//! for, each of which follows the rules of its size.

use sperli_wire::collective::Operation;
use sperli_wire::element::Reduction;
use sperli_wire::error::MismatchError;
use sperli_wire::limits::{COLLECTIVE_HEADER_LEN as H, MAX_COLLECTIVE_DATA};
use sperli_wire::Error;

use crate::comm::{Comm, Elems};
use crate::element::Element;
use crate::peers::Peers;
use crate::pipeline::chain::ChainOp;
use crate::pipeline::ElemsMut;

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

impl<L: Peers> Comm<L> {
    /// allreduce of an array of any length. Every rank must pass the same
    /// length, as for [`Comm::allreduce`]; the result is the elementwise
    /// fold of the whole arrays in rank order. In a v1 job it is
    /// `ceil(len / chunk)` v1 allreduce calls (at least one) on consecutive
    /// chunks of at most 16777200 bytes; with feature bit 1 it is one
    /// pipelined call where protocol §14.5 says so (from 256 KiB at 2 ranks
    /// or more), with the same bits. Errors as [`Comm::allreduce`], from the
    /// call that failed.
    ///
    /// ```
    /// use sperli_collective::fake::{self, FakePeers};
    /// use sperli_wire::element::Reduction;
    /// use sperli_wire::limits::FEATURE_V1_CORE;
    /// // 64 MiB of u64 on each of 2 ranks: one pipelined call...
    /// let n = 64 << 20 >> 3;
    /// let body = |c: &mut sperli_collective::Comm<FakePeers>| {
    ///     let r = c.allreduce_large(&vec![1u64; n], Reduction::Sum).unwrap();
    ///     (r.len(), r.iter().all(|&x| x == 2), c.sequence())
    /// };
    /// assert_eq!(fake::run(2, body), vec![(n, true, 1); 2]);
    /// // ...or, in a v1 job, 5 v1 calls.
    /// let v1 = FakePeers::job_with_features(&[FEATURE_V1_CORE; 2]);
    /// assert_eq!(fake::run_links(v1, body), vec![(n, true, 5); 2]);
    /// ```
    pub fn allreduce_large<T: Element>(&self, data: &[T], op: Reduction) -> Result<Vec<T>, Error> {
        if self.runs_pipelined(Operation::Allreduce, data.len() * T::WIDTH) {
            let mut out = vec![T::default(); data.len()];
            self.allreduce_pipelined(data, op, true, &mut out)?;
            return Ok(out);
        }
        self.allreduce_chunked(data, op, max_chunk_elems::<T>())
    }

    /// [`Comm::allreduce_large`] into `out`, which must have `data.len()`
    /// elements (else H1618 before anything is sent, counting one call).
    /// Allocates no result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(2, |c| {
    ///     let mut out = vec![0u32; 100_000];
    ///     c.allreduce_large_into(&vec![c.rank() + 1; 100_000], &mut out, Reduction::Sum).unwrap();
    ///     out.iter().all(|&x| x == 3)
    /// });
    /// assert_eq!(got, vec![true; 2]);
    /// ```
    pub fn allreduce_large_into<T: Element>(
        &self,
        data: &[T],
        out: &mut [T],
        op: Reduction,
    ) -> Result<(), Error> {
        if out.len() != data.len() {
            self.begin()?;
            return Err(sperli_wire::error::ArgumentError::LengthMismatch {
                left: data.len() * T::WIDTH,
                right: out.len() * T::WIDTH,
            }
            .into());
        }
        if self.runs_pipelined(Operation::Allreduce, data.len() * T::WIDTH) {
            return self.allreduce_pipelined(data, op, true, out);
        }
        let chunk = max_chunk_elems::<T>();
        for (i, c) in chunks(data, chunk).enumerate() {
            let at = i * chunk;
            self.allreduce_into(c, &mut out[at..at + c.len()], op)?;
        }
        Ok(())
    }

    /// allreduce as `ceil(len / chunk_elems)` calls (at least one) on
    /// consecutive chunks of at most `chunk_elems` elements (clamped to
    /// `1..=max_chunk_elems::<T>()`), results concatenated; every rank must
    /// pass the same `chunk_elems`. Each chunk is an [`Comm::allreduce`] of
    /// its own (pipelined with feature bit 1 when it is large enough).
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
        &self,
        data: &[T],
        op: Reduction,
        chunk_elems: usize,
    ) -> Result<Vec<T>, Error> {
        let chunk = clamp::<T>(chunk_elems);
        let mut out = vec![T::default(); data.len()];
        for (i, c) in chunks(data, chunk).enumerate() {
            let at = i * chunk;
            self.allreduce_into(c, &mut out[at..at + c.len()], op)?;
        }
        Ok(out)
    }

    /// reduce of an array of any length to `root`; `Some` at the root. In a
    /// v1 job chunks of at most 16777200 bytes (one v1 reduce each, at least
    /// one); with feature bit 1 one pipelined call where protocol §14.5 says
    /// so (from 256 KiB at 3 ranks or more, beyond 16777200 bytes at 2).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(2, |c| c.reduce_large(1, &[c.rank() as f32; 3], Reduction::Sum).unwrap());
    /// assert_eq!(got, vec![None, Some(vec![1.0; 3])]);
    /// ```
    pub fn reduce_large<T: Element>(
        &self,
        root: u32,
        data: &[T],
        op: Reduction,
    ) -> Result<Option<Vec<T>>, Error> {
        if self.runs_pipelined(Operation::Reduce, data.len() * T::WIDTH) {
            let mut out = vec![T::default(); if self.rank() == root { data.len() } else { 0 }];
            let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
            let kind = ChainOp::Reduce { root };
            let at = self.chain_call(kind, &Elems(data), et, red, true, &mut ElemsMut(&mut out))?;
            return Ok(at.then_some(out));
        }
        self.reduce_chunked(root, data, op, max_chunk_elems::<T>())
    }

    /// As [`Comm::reduce_large`] in calls of at most `chunk_elems` elements
    /// (same value on every rank), each a [`Comm::reduce_into`] of its own.
    pub fn reduce_chunked<T: Element>(
        &self,
        root: u32,
        data: &[T],
        op: Reduction,
        chunk_elems: usize,
    ) -> Result<Option<Vec<T>>, Error> {
        let chunk = clamp::<T>(chunk_elems);
        let is_root = self.rank() == root;
        let mut out = vec![T::default(); if is_root { data.len() } else { 0 }];
        let mut at_root = false;
        for (i, c) in chunks(data, chunk).enumerate() {
            let at = i * chunk;
            let o = if is_root {
                &mut out[at..at + c.len()]
            } else {
                &mut [][..]
            };
            at_root = self.reduce_into(root, c, o, op)?;
        }
        Ok(at_root.then_some(out))
    }

    /// bcast of an array of any length. With feature bit 1 it is one call:
    /// the v1 star when it fits a frame and is small (protocol §14.5), else
    /// pipelined; receivers learn the length from the first frame. In a v1
    /// job the receivers do not know the length, so the first v1 bcast
    /// carries 16 bytes from the root: the element count and the chunk
    /// length in elements (`u64` each, little-endian); then one v1 bcast per
    /// chunk (none for an empty array). Receivers check every chunk's length
    /// (H1617 otherwise).
    ///
    /// ```
    /// use sperli_collective::fake::{self, FakePeers};
    /// use sperli_wire::limits::FEATURE_V1_CORE;
    /// let body = |c: &mut sperli_collective::Comm<FakePeers>| {
    ///     let mut v = if c.rank() == 0 { vec![7u8; 40_000_000] } else { vec![] };
    ///     c.bcast_large(0, &mut v).unwrap();
    ///     (v.len(), v.iter().all(|&x| x == 7), c.sequence())
    /// };
    /// assert_eq!(fake::run(3, body), vec![(40_000_000, true, 1); 3]);
    /// let v1 = FakePeers::job_with_features(&[FEATURE_V1_CORE; 3]);
    /// assert_eq!(fake::run_links(v1, body), vec![(40_000_000, true, 4); 3]);
    /// ```
    pub fn bcast_large<T: Element>(&self, root: u32, buf: &mut Vec<T>) -> Result<(), Error> {
        if self.bit1() {
            return self.bcast_grow(root, buf, true);
        }
        self.bcast_chunked(root, buf, max_chunk_elems::<T>())
    }

    /// bcast of an array of any length into a buffer of known length
    /// (every rank passes a buffer of the root's length, as for
    /// [`Comm::bcast_into`]): with feature bit 1 one call (pipelined where
    /// protocol §14.5 says so), in a v1 job one [`Comm::bcast_into`] per
    /// chunk of at most 16777200 bytes (at least one). Data of another
    /// length at a receiver is H1617. Allocates no result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let mut v = vec![c.rank() as u16 as f32; 3_000_000];
    ///     c.bcast_large_into(1, &mut v).unwrap();
    ///     v.iter().all(|&x| x == 1.0)
    /// });
    /// assert_eq!(got, vec![true; 3]);
    /// ```
    pub fn bcast_large_into<T: Element>(&self, root: u32, buf: &mut [T]) -> Result<(), Error> {
        if self.bit1() {
            let want = buf.len() * T::WIDTH;
            if self.rank() == root {
                let mut none = crate::pipeline::NoResult;
                return self.bcast_bit1(root, &Elems(&buf[..]), T::WIDTH, None, true, &mut none);
            }
            return self.bcast_bit1(
                root,
                &[][..],
                T::WIDTH,
                Some(want),
                true,
                &mut ElemsMut(buf),
            );
        }
        let chunk = max_chunk_elems::<T>();
        if buf.is_empty() {
            return self.bcast_into(root, buf);
        }
        for c in buf.chunks_mut(chunk) {
            self.bcast_into(root, c)?;
        }
        Ok(())
    }

    /// As the v1 form of [`Comm::bcast_large`] with chunks of at most
    /// `chunk_elems` elements, whatever the features; only the root's
    /// `chunk_elems` counts (it is sent). With feature bit 1 each part is a
    /// bcast of its own (the root may pipeline the large ones).
    pub fn bcast_chunked<T: Element>(
        &self,
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
        let (count, chunk) = match self.bcast_part(root, &head[..], 1, Some(16))? {
            None => (buf.len(), clamp::<T>(chunk_elems)),
            Some((p, at)) => {
                let count = u64::from_le_bytes(p[at..at + 8].try_into().expect("8 bytes"));
                let chunk = u64::from_le_bytes(p[at + 8..at + 16].try_into().expect("8 bytes"));
                self.recycle(p);
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
                self.bcast_part(root, &Elems(&buf[done..done + n]), T::WIDTH, None)?;
            } else if let Some((p, at)) =
                self.bcast_part(root, &[][..], T::WIDTH, Some(n * T::WIDTH))?
            {
                T::extend_from_le(&p[at..], buf);
                self.recycle(p);
            }
            done += n;
        }
        Ok(())
    }

    /// One bcast of `bcast_chunked`: `None` at the root, elsewhere a buffer
    /// and where the data starts in it (checked to be `expect` bytes, or
    /// whole `width`-byte elements).
    fn bcast_part<D: crate::comm::Src + ?Sized>(
        &self,
        root: u32,
        data: &D,
        width: usize,
        expect: Option<usize>,
    ) -> Result<Option<(Vec<u8>, usize)>, Error> {
        if self.bit1() {
            if self.rank() == root {
                let mut none = crate::pipeline::NoResult;
                self.bcast_bit1(root, data, width, expect, false, &mut none)?;
                return Ok(None);
            }
            let mut got = vec![0u8; expect.unwrap_or(0)];
            self.bcast_bit1(
                root,
                data,
                width,
                expect,
                false,
                &mut ElemsMut(&mut got[..]),
            )?;
            return Ok(Some((got, 0)));
        }
        Ok(self.bcast_core(root, data, width, expect)?.map(|p| (p, H)))
    }
}

/// Consecutive chunks of at most `chunk` elements; one empty chunk for an
/// empty array, so every large call makes at least one call.
fn chunks<T>(data: &[T], chunk: usize) -> impl Iterator<Item = &[T]> {
    let empty = data.is_empty().then_some(&data[..0]);
    empty.into_iter().chain(data.chunks(chunk))
}
