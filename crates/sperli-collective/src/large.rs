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
//! The plain calls take any length: [`Comm::allreduce`], [`Comm::reduce`],
//! [`Comm::bcast_into`] and their `_into` / `Vec` forms, and
//! [`Comm::bcast`] with feature bit 1. In a job with feature bit 1 each is
//! **one** call (one sequence number) wherever protocol §14.5 pipelines
//! it, with no cut at 16 MiB; the results are the same bits as the v1
//! split's (protocol §14.6). [`Comm::bcast_counted`] is the bcast of a
//! length the receivers do not know in a v1 job. The hidden `_chunked`
//! calls (for tests of the split) stay a series of calls of the size
//! asked for, each of which follows the rules of its size.

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
    /// allreduce (protocol §8.2, operation 4) of an array of any length:
    /// the elementwise fold of every rank's `data` in ascending rank order
    /// (left operand = lower ranks), on every rank, bit-identical run after
    /// run. Every rank passes the same length. With feature bit 1 it is one
    /// call, pipelined where protocol §14.5 says so (from 256 KiB at 2 ranks
    /// or more); in a v1 job it is `ceil(bytes / 16777200)` v1 calls (at
    /// least one) on consecutive chunks cut on element boundaries, with the
    /// same bits (protocol §14.6).
    ///
    /// Errors (protocol §8.4): H1618 on every rank before anything is sent
    /// for a refused type/reduction pair (the table of protocol §8.3);
    /// contributions of different lengths end the job (H1617 / H1618 with
    /// ABORT reason 3, others H1612).
    ///
    /// ```
    /// use sperli_collective::fake::{self, FakePeers};
    /// use sperli_wire::element::Reduction;
    /// use sperli_wire::limits::FEATURE_V1_CORE;
    /// let got = fake::run(4, |c| c.allreduce(&[1.0f64, c.rank() as f64], Reduction::Max).unwrap());
    /// assert_eq!(got, vec![vec![1.0, 3.0]; 4]);
    /// // 64 MiB of u64 on each of 2 ranks: one pipelined call...
    /// let n = 64 << 20 >> 3;
    /// let body = |c: &mut sperli_collective::Comm<FakePeers>| {
    ///     let r = c.allreduce(&vec![1u64; n], Reduction::Sum).unwrap();
    ///     (r.len(), r.iter().all(|&x| x == 2), c.sequence())
    /// };
    /// assert_eq!(fake::run(2, body), vec![(n, true, 1); 2]);
    /// // ...or, in a v1 job, 5 v1 calls.
    /// let v1 = FakePeers::job_with_features(&[FEATURE_V1_CORE; 2]);
    /// assert_eq!(fake::run_links(v1, body), vec![(n, true, 5); 2]);
    /// ```
    pub fn allreduce<T: Element>(&self, data: &[T], op: Reduction) -> Result<Vec<T>, Error> {
        let mut out = vec![T::default(); data.len()];
        self.allreduce_into(data, &mut out, op)?;
        Ok(out)
    }

    /// [`Comm::allreduce`] into `out`, which must have `data.len()`
    /// elements (else H1618 before anything is sent, counting one call).
    /// Allocates no result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(3, |c| {
    ///     let mut out = [0i64; 2];
    ///     c.allreduce_into(&[1, -1], &mut out, Reduction::Sum).unwrap();
    ///     out
    /// });
    /// assert_eq!(got, vec![[3, -3]; 3]);
    /// ```
    pub fn allreduce_into<T: Element>(
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
        self.allreduce_split_into(data, out, op, max_chunk_elems::<T>())
    }

    /// allreduce as one call per chunk of `chunk` elements (at least one).
    fn allreduce_split_into<T: Element>(
        &self,
        data: &[T],
        out: &mut [T],
        op: Reduction,
        chunk: usize,
    ) -> Result<(), Error> {
        for (i, c) in chunks(data, chunk).enumerate() {
            let at = i * chunk;
            self.allreduce_one_into(c, &mut out[at..at + c.len()], op)?;
        }
        Ok(())
    }

    /// allreduce as `ceil(len / chunk_elems)` calls (at least one) on
    /// consecutive chunks of at most `chunk_elems` elements (clamped to
    /// `1..=max_chunk_elems::<T>()`), results concatenated; every rank must
    /// pass the same `chunk_elems`. Each chunk is an allreduce of its own
    /// (pipelined with feature bit 1 when it is large enough). For tests
    /// of the v1 split (feature `test-hooks`, which only this crate's own
    /// tests turn on); programs call [`Comm::allreduce`].
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn allreduce_chunked<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
        chunk_elems: usize,
    ) -> Result<Vec<T>, Error> {
        let mut out = vec![T::default(); data.len()];
        self.allreduce_split_into(data, &mut out, op, clamp::<T>(chunk_elems))?;
        Ok(out)
    }

    /// reduce (protocol §8.2, operation 3) of an array of any length to
    /// `root`: the fold of every rank's `data` in ascending rank order
    /// (left operand = lower ranks), `Some` at the root, `None` elsewhere;
    /// bit-identical run after run. With feature bit 1 one call, pipelined
    /// where protocol §14.5 says so (from 256 KiB at 3 ranks or more,
    /// beyond 16777200 bytes at 2); in a v1 job one v1 reduce per chunk of
    /// at most 16777200 bytes (at least one).
    ///
    /// Errors (protocol §8.4): H1618 on every rank before anything is sent
    /// for `root >= size` or a refused type/reduction pair (the table of
    /// protocol §8.3); contributions of different lengths end the job
    /// (root H1618 with ABORT reason 3, others H1612).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(3, |c| c.reduce(2, &[c.rank() as i32 - 1], Reduction::Min).unwrap());
    /// assert_eq!(got, vec![None, None, Some(vec![-1])]);
    /// ```
    pub fn reduce<T: Element>(
        &self,
        root: u32,
        data: &[T],
        op: Reduction,
    ) -> Result<Option<Vec<T>>, Error> {
        let mut out = vec![T::default(); if self.rank() == root { data.len() } else { 0 }];
        let at_root = self.reduce_into(root, data, &mut out, op)?;
        Ok(at_root.then_some(out))
    }

    /// [`Comm::reduce`] into the root's `out`, which must have `data.len()`
    /// elements at the root; other ranks may pass an empty slice. A wrong
    /// `out` at the root is a check only the root can make, so it ends the
    /// job before anything is sent (root H1618 with ABORT reason 3, others
    /// H1612). Returns `true` at the root. Allocates no result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(3, |c| {
    ///     let mut out = [0u32; 2];
    ///     let at_root = c.reduce_into(0, &[c.rank(), 1], &mut out, Reduction::Sum).unwrap();
    ///     (at_root, out)
    /// });
    /// assert_eq!(got, vec![(true, [3, 3]), (false, [0, 0]), (false, [0, 0])]);
    /// ```
    pub fn reduce_into<T: Element>(
        &self,
        root: u32,
        data: &[T],
        out: &mut [T],
        op: Reduction,
    ) -> Result<bool, Error> {
        let is_root = self.rank() == root;
        if is_root && out.len() != data.len() {
            // The one-call form ends the job (protocol §8.4).
            return self.reduce_one_into(root, data, out, op);
        }
        if self.runs_pipelined(Operation::Reduce, data.len() * T::WIDTH) {
            let out = if is_root { out } else { &mut [] };
            let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
            let kind = ChainOp::Reduce { root };
            return self.chain_call(kind, &Elems(data), et, red, true, &mut ElemsMut(out));
        }
        self.reduce_split_into(root, data, out, op, max_chunk_elems::<T>())
    }

    /// reduce as one call per chunk of `chunk` elements (at least one);
    /// `out` has the root's length at the root.
    fn reduce_split_into<T: Element>(
        &self,
        root: u32,
        data: &[T],
        out: &mut [T],
        op: Reduction,
        chunk: usize,
    ) -> Result<bool, Error> {
        let is_root = self.rank() == root;
        let mut at_root = false;
        for (i, c) in chunks(data, chunk).enumerate() {
            let at = i * chunk;
            let o = if is_root {
                &mut out[at..at + c.len()]
            } else {
                &mut [][..]
            };
            at_root = self.reduce_one_into(root, c, o, op)?;
        }
        Ok(at_root)
    }

    /// As [`Comm::reduce`] in calls of at most `chunk_elems` elements
    /// (same value on every rank), each a reduce of its own. For tests of
    /// the v1 split (feature `test-hooks`); programs call [`Comm::reduce`].
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn reduce_chunked<T: Element>(
        &self,
        root: u32,
        data: &[T],
        op: Reduction,
        chunk_elems: usize,
    ) -> Result<Option<Vec<T>>, Error> {
        let chunk = clamp::<T>(chunk_elems);
        let mut out = vec![T::default(); if self.rank() == root { data.len() } else { 0 }];
        let at_root = self.reduce_split_into(root, data, &mut out, op, chunk)?;
        Ok(at_root.then_some(out))
    }

    /// bcast of an array of any length whose receivers do not know it, in
    /// every job. With feature bit 1 it is [`Comm::bcast`]: one call, the
    /// v1 star when it fits a frame and is small (protocol §14.5), else
    /// pipelined; receivers learn the length from the first frame. In a v1
    /// job, where [`Comm::bcast`] is one v1 call of at most 16777200 bytes,
    /// the receivers do not know the length, so the first v1 bcast
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
    ///     c.bcast_counted(0, &mut v).unwrap();
    ///     (v.len(), v.iter().all(|&x| x == 7), c.sequence())
    /// };
    /// assert_eq!(fake::run(3, body), vec![(40_000_000, true, 1); 3]);
    /// let v1 = FakePeers::job_with_features(&[FEATURE_V1_CORE; 3]);
    /// assert_eq!(fake::run_links(v1, body), vec![(40_000_000, true, 4); 3]);
    /// ```
    pub fn bcast_counted<T: Element>(&self, root: u32, buf: &mut Vec<T>) -> Result<(), Error> {
        if self.bit1() {
            return self.bcast_grow(root, buf, true);
        }
        self.bcast_in_chunks(root, buf, max_chunk_elems::<T>())
    }

    /// bcast (protocol §8.2) of an array of any length into a buffer of
    /// known length: every rank passes a buffer of the root's length; the
    /// root's is sent, the others are overwritten. With feature bit 1 one
    /// call (pipelined where protocol §14.5 says so), in a v1 job one v1
    /// bcast per chunk of at most 16777200 bytes (at least one). Data of
    /// another length at a receiver is H1617 (ABORT reason 3). Allocates no
    /// result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let mut v = vec![c.rank() as u16 as f32; 3_000_000];
    ///     c.bcast_into(1, &mut v).unwrap();
    ///     v.iter().all(|&x| x == 1.0)
    /// });
    /// assert_eq!(got, vec![true; 3]);
    /// ```
    pub fn bcast_into<T: Element>(&self, root: u32, buf: &mut [T]) -> Result<(), Error> {
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
            return self.bcast_one_into(root, buf);
        }
        for c in buf.chunks_mut(chunk) {
            self.bcast_one_into(root, c)?;
        }
        Ok(())
    }

    /// As the v1 form of [`Comm::bcast_counted`] with chunks of at most
    /// `chunk_elems` elements, whatever the features; only the root's
    /// `chunk_elems` counts (it is sent). With feature bit 1 each part is a
    /// bcast of its own (the root may pipeline the large ones). For tests
    /// of the v1 split (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn bcast_chunked<T: Element>(
        &self,
        root: u32,
        buf: &mut Vec<T>,
        chunk_elems: usize,
    ) -> Result<(), Error> {
        self.bcast_in_chunks(root, buf, chunk_elems)
    }

    /// [`Comm::bcast_counted`]'s v1 form with chunks of at most
    /// `chunk_elems` elements; only the root's `chunk_elems` counts (it is
    /// sent).
    fn bcast_in_chunks<T: Element>(
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
                            field: "bcast_counted chunk length",
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

    /// One bcast of `bcast_in_chunks`: `None` at the root, elsewhere a buffer
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
