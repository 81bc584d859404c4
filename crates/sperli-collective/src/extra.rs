//! What users of MPI bindings expect, built from v1 calls without changing
//! the wire (protocol §8; each part below is an ordinary v1 call with its
//! own sequence number, made in the same order on every rank).
//!
//! | call | v1 calls |
//! |---|---|
//! | `allgather` | gather to 0, then bcast from 0 (2 calls); with feature bit 1 from 256 KiB in all: one pipelined ring call (protocol §14.3) |
//! | `reduce_scatter` | reduce to 0, then scatter from 0 (2 calls); with feature bit 1 from 256 KiB: one pipelined call (protocol §14.3); past 16777200 bytes in all, one such call per chunk of every block |
//! | `alltoall` | `size` scatters, the k-th rooted at rank k with rank k's data; a block past one v1 call is one scatter per chunk of it |
//! | `allreduce_scalar` / `reduce_scalar` / `bcast_scalar` | one call on a 1-element array |
//! | `scan` / `exscan` (in `scan.rs`) | gather to 0 of a descriptor and the data, then scatter from 0 of the prefixes (2 calls) |
//!
//! A composite refused with H1618 by a check every rank makes alone still
//! counts all its parts, so sequence numbers stay aligned.

use sperli_wire::abort::AbortReason;
use sperli_wire::element::Reduction;
use sperli_wire::error::ArgumentError;
use sperli_wire::limits::{COLLECTIVE_HEADER_LEN as H, MAX_COLLECTIVE_DATA};
use sperli_wire::Error;

use crate::comm::{Comm, Elems};
use crate::element::Element;
use crate::large::max_chunk_elems;
use crate::peers::Peers;
use crate::pipeline::chain::ChainOp;
use crate::pipeline::ElemsMut;
use sperli_wire::collective::Operation;

impl<L: Peers> Comm<L> {
    /// Counts `calls` v1 calls that were not made and refuses with H1618
    /// (or the job's failure, if it already failed).
    pub(crate) fn refuse<X>(&self, calls: u64, e: ArgumentError) -> Result<X, Error> {
        self.skip_calls(calls - 1);
        self.begin()?;
        Err(e.into())
    }

    /// allgather: every rank gets every rank's block, concatenated in rank
    /// order. Two v1 calls: gather to 0, then bcast from 0 (receivers check
    /// the length is `size` times their own block, else H1617). Blocks of
    /// any length: when `size` of them exceed 16777200 bytes, one such pair
    /// (or pipelined call) per chunk of every block (protocol §6.1).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| c.allgather(&[c.rank() as i64 * 10]).unwrap());
    /// assert_eq!(got, vec![vec![0, 10, 20]; 3]);
    /// ```
    pub fn allgather<T: Element>(&self, data: &[T]) -> Result<Vec<T>, Error> {
        let total = data.len() * T::WIDTH * self.size() as usize;
        let pipelined = self.runs_pipelined(Operation::Allgather, total);
        if total > MAX_COLLECTIVE_DATA {
            // Protocol §6.1: one allgather per chunk of every block.
            return self.allgather_split(data);
        }
        if pipelined {
            let mut out = vec![T::default(); data.len() * self.size() as usize];
            self.allgather_call(&Elems(data), &mut ElemsMut(&mut out))?;
            return Ok(out);
        }
        let bytes = T::to_le_vec(data);
        let mut all = Vec::new();
        if self.rank() == 0 {
            all.reserve(total);
        }
        self.gather_core(0, &bytes[..], |b| all.extend_from_slice(b))?;
        match self.bcast_core(0, &all[..], T::WIDTH, Some(total))? {
            None => Ok(T::vec_from_le(&all)),
            Some(p) => Ok(T::vec_from_le(&p[H..])),
        }
    }

    /// reduce_scatter (MPI's reduce_scatter_block): the elementwise fold of
    /// every rank's `data` (fold order as [`Comm::reduce`]), cut into `size`
    /// equal blocks; rank i gets block i. Two v1 calls: reduce to 0, then
    /// scatter from 0. `data.len()` must be a multiple of `size` on every
    /// rank (H1618 on every rank otherwise, counting both calls). Any
    /// length: past 16777200 bytes in all, one such call per chunk of
    /// every block (protocol §6.1), each element folded as in one call.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(2, |c| c.reduce_scatter(&[1u32, 2, 3, 4], Reduction::Sum).unwrap());
    /// assert_eq!(got, vec![vec![2, 4], vec![6, 8]]);
    /// ```
    pub fn reduce_scatter<T: Element>(&self, data: &[T], op: Reduction) -> Result<Vec<T>, Error> {
        let size = self.size() as usize;
        let pipelined = self.runs_pipelined(Operation::ReduceScatter, data.len() * T::WIDTH);
        if data.len() % size != 0 {
            return self.refuse(
                if pipelined { 1 } else { 2 },
                ArgumentError::ScatterBlocks {
                    len: data.len() * T::WIDTH,
                    size: self.size(),
                },
            );
        }
        if data.len() * T::WIDTH > MAX_COLLECTIVE_DATA {
            // Protocol §6.1: one reduce_scatter per chunk of every block.
            return self.reduce_scatter_split(data, op);
        }
        let block = data.len() / size * T::WIDTH;
        if pipelined {
            let mut out = vec![T::default(); data.len() / size];
            let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
            let kind = ChainOp::ReduceScatter;
            self.chain_call(kind, &Elems(data), et, red, false, &mut ElemsMut(&mut out))?;
            return Ok(out);
        }
        let bytes = T::to_le_vec(data);
        let reduced = match self.reduce_core(
            false,
            0,
            &bytes[..],
            T::ELEMENT_TYPE.code(),
            op.code(),
            None,
        ) {
            Ok(r) => r,
            Err(e) => {
                self.skip_calls(1);
                return Err(e);
            }
        };
        let root_data = reduced.as_deref().map_or(&[][..], |p| &p[H..]);
        let (p, off) = self.scatter_core(0, root_data, T::WIDTH, Some(block))?;
        Ok(T::vec_from_le(&p[off..]))
    }

    /// alltoall: `data` is `size` equal blocks; block j goes to rank j, and
    /// the result is the blocks every rank sent to this one, in rank order.
    /// Built as `size` v1 scatters, the k-th rooted at rank k with rank k's
    /// `data` (so every rank is root once and no rank holds more than its
    /// own data). A rank whose `data.len()` is not a multiple of `size`
    /// ends the job at once like an invalid scatter at the root (H1618,
    /// ABORT reason 4; others H1612); a block of another length than this
    /// rank's own is H1617 (ABORT reason 3). Blocks of any length: a block
    /// past one v1 call is one scatter per chunk of it (protocol §6.1).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let r = c.rank() as u64;
    ///     c.alltoall(&[r * 10, r * 10 + 1, r * 10 + 2]).unwrap()
    /// });
    /// assert_eq!(got, vec![vec![0, 10, 20], vec![1, 11, 21], vec![2, 12, 22]]);
    /// ```
    pub fn alltoall<T: Element>(&self, data: &[T]) -> Result<Vec<T>, Error> {
        let size = self.size();
        if data.len() % size as usize != 0 {
            self.begin()?;
            return self.fail_job(
                AbortReason::InvalidScatter,
                ArgumentError::ScatterBlocks {
                    len: data.len() * T::WIDTH,
                    size,
                }
                .into(),
            );
        }
        let n = data.len() / size as usize;
        let mut out = vec![T::default(); data.len()];
        for k in 0..size {
            let dst = &mut out[k as usize * n..(k as usize + 1) * n];
            if n > max_chunk_elems::<T>() {
                // Protocol §6.1: one v1 scatter per chunk of every block.
                self.scatter_split_into(k, (k == self.rank()).then_some(data), dst)?;
                continue;
            }
            let (p, off) = self.scatter_core(k, &Elems(data), T::WIDTH, Some(n * T::WIDTH))?;
            T::read_le(&p[off..], dst);
            self.recycle(p);
        }
        Ok(out)
    }

    /// allreduce of one value (one v1 allreduce of a 1-element array).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(4, |c| c.allreduce_scalar(c.rank() as f64, Reduction::Sum).unwrap());
    /// assert_eq!(got, vec![6.0; 4]);
    /// ```
    pub fn allreduce_scalar<T: Element>(&self, x: T, op: Reduction) -> Result<T, Error> {
        let mut out = [T::default()];
        self.allreduce_into(&[x], &mut out, op)?;
        Ok(out[0])
    }

    /// reduce of one value to `root` (`Some` at the root).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(2, |c| c.reduce_scalar(0, c.rank() as i32 + 2, Reduction::Prod).unwrap());
    /// assert_eq!(got, vec![Some(6), None]);
    /// ```
    pub fn reduce_scalar<T: Element>(
        &self,
        root: u32,
        x: T,
        op: Reduction,
    ) -> Result<Option<T>, Error> {
        let mut out = [T::default()];
        Ok(self
            .reduce_into(root, &[x], &mut out, op)?
            .then_some(out[0]))
    }

    /// bcast of one value from `root` (receivers check it is one element, H1617).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| c.bcast_scalar(2, c.rank() as u64 * 5).unwrap());
    /// assert_eq!(got, vec![10; 3]);
    /// ```
    pub fn bcast_scalar<T: Element>(&self, root: u32, x: T) -> Result<T, Error> {
        let mut buf = [x];
        self.bcast_into(root, &mut buf)?;
        Ok(buf[0])
    }
}
