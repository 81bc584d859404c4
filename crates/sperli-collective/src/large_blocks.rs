//! gather, scatter, allgather, reduce_scatter and alltoall of blocks
//! larger than one v1 call
//! (protocol §6.1: a message larger than the largest payload is split by
//! the layer above; §8.2). As for the large reductions (`large.rs`), the
//! call is a fixed series of v1 calls made in the same order on every
//! rank, each on the same chunk `[s, e)` of every rank's block, cut on
//! element boundaries; every rank knows the series from its own block's
//! length, and a second implementation sees ordinary v1 calls.
//!
//! Rank i's block of n elements is `[i·n, (i + 1)·n)` of the whole array,
//! so the chunk `[s, e)` of rank i is `[i·n + s, i·n + e)` there.

use sperli_wire::element::Reduction;
use sperli_wire::Error;

use crate::comm::{Comm, Elems};
use crate::element::Element;
use crate::large::max_chunk_elems;
use crate::peers::Peers;

/// The chunks `[s, e)` of a block of `n` elements, at most `chunk`
/// elements each (at least one element, and one empty chunk for an empty
/// block, so that every call makes at least one v1 call): how the calls of
/// this crate split a block past one v1 call, for a layer above that
/// splits what it sends the same way.
///
/// ```
/// assert_eq!(sperli_collective::chunk_ranges(5, 2), vec![(0, 2), (2, 4), (4, 5)]);
/// assert_eq!(sperli_collective::chunk_ranges(0, 2), vec![(0, 0)]);
/// ```
pub fn chunk_ranges(n: usize, chunk: usize) -> Vec<(usize, usize)> {
    if n == 0 {
        return vec![(0, 0)];
    }
    let chunk = chunk.max(1);
    (0..n)
        .step_by(chunk)
        .map(|s| (s, (s + chunk).min(n)))
        .collect()
}

impl<L: Peers> Comm<L> {
    /// gather of a block longer than one v1 call: one v1 gather per chunk
    /// of at most [`max_chunk_elems`] elements; the root reads rank i's
    /// chunk `[s, e)` straight to `out[i·n + s..i·n + e]` (`out`: `size`
    /// blocks of `data.len()` elements at the root, checked by the caller).
    /// Returns whether this rank is the root.
    pub(crate) fn gather_split_into<T: Element>(
        &self,
        root: u32,
        data: &[T],
        out: &mut [T],
    ) -> Result<bool, Error> {
        let n = data.len();
        let mut at_root = false;
        for (s, e) in chunk_ranges(n, max_chunk_elems::<T>()) {
            let mut rank = 0usize;
            at_root = self.gather_core(root, &Elems(&data[s..e]), |b| {
                // gather_core checked every block's length (protocol §8.4).
                let at = rank * n + s;
                if let Some(dst) = out.get_mut(at..at + b.len() / T::WIDTH) {
                    T::read_le(b, dst);
                }
                rank += 1;
            })?;
        }
        Ok(at_root)
    }

    /// scatter into an `out` longer than one v1 call: one v1 scatter per
    /// chunk `[s, e)` of `out`; the root sends, for each, the chunk of
    /// every rank's block (`whole`: `size` blocks of `out.len()` elements,
    /// checked by the caller).
    pub(crate) fn scatter_split_into<T: Element>(
        &self,
        root: u32,
        whole: Option<&[T]>,
        out: &mut [T],
    ) -> Result<(), Error> {
        let (n, size) = (out.len(), self.size() as usize);
        for (s, e) in chunk_ranges(n, max_chunk_elems::<T>()) {
            let part: Option<Vec<T>> = whole.map(|w| {
                (0..size)
                    .flat_map(|i| w[i * n + s..i * n + e].iter().copied())
                    .collect()
            });
            self.scatter_into(root, part.as_deref(), &mut out[s..e])?;
        }
        Ok(())
    }

    /// reduce_scatter of `size` blocks longer than one v1 call in all: one
    /// reduce_scatter per chunk `[s, e)` of at most `max_chunk_elems /
    /// size` elements of every rank's block. The call's data is that chunk
    /// of every block in rank order, so its result here is `[s, e)` of
    /// this rank's block, each element folded as in one call.
    pub(crate) fn reduce_scatter_split<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
    ) -> Result<Vec<T>, Error> {
        let size = self.size() as usize;
        let n = data.len() / size;
        let mut out = vec![T::default(); n];
        let chunk = (max_chunk_elems::<T>() / size).max(1);
        for (s, e) in chunk_ranges(n, chunk) {
            let part: Vec<T> = (0..size)
                .flat_map(|i| data[i * n + s..i * n + e].iter().copied())
                .collect();
            let got = self.reduce_scatter(&part, op)?;
            out[s..e].copy_from_slice(&got);
        }
        Ok(out)
    }

    /// allgather of `size` blocks longer than one v1 call in all: one
    /// allgather per chunk of at most `max_chunk_elems / size` elements of
    /// every rank's block, each chunk's blocks put in their places.
    pub(crate) fn allgather_split<T: Element>(&self, data: &[T]) -> Result<Vec<T>, Error> {
        let (n, size) = (data.len(), self.size() as usize);
        let mut out = vec![T::default(); n * size];
        let chunk = (max_chunk_elems::<T>() / size).max(1);
        for (s, e) in chunk_ranges(n, chunk) {
            let v = self.allgather(&data[s..e])?;
            for (i, block) in v.chunks_exact(e - s).enumerate().take(size) {
                out[i * n + s..i * n + e].copy_from_slice(block);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::chunk_ranges;
    use crate::fake;
    use crate::max_chunk_elems;
    use sperli_wire::element::Reduction;

    #[test]
    fn chunks_cover_the_block() {
        assert_eq!(chunk_ranges(0, 4), vec![(0, 0)]);
        assert_eq!(chunk_ranges(10, 4), vec![(0, 4), (4, 8), (8, 10)]);
        assert_eq!(chunk_ranges(3, 0), vec![(0, 1), (1, 2), (2, 3)]);
    }

    /// Blocks past one v1 call (16777200 bytes) at 2 and 3 ranks: gather,
    /// gather_into, scatter_into and allgather take them in one call each,
    /// as a series of v1 calls (the sequence numbers say how many).
    #[test]
    fn blocks_past_one_call_are_split_and_land_in_place() {
        let n = max_chunk_elems::<u32>() + 5;
        let block = |r: u32| -> Vec<u32> { (0..n as u32).map(|i| i ^ (r << 28)).collect() };
        // Rank k's block j of its alltoall / reduce_scatter data.
        let block_of = |k: u32, j: u32| -> Vec<u32> {
            (0..n as u32)
                .map(|i| i.wrapping_mul(2654435761) ^ (k << 28) ^ (j << 24))
                .collect()
        };
        for size in [2u32, 3] {
            let whole: Vec<u32> = (0..size).flat_map(block).collect();
            let whole_of =
                |k: u32| -> Vec<u32> { (0..size).flat_map(|j| block_of(k, j)).collect() };
            let got = fake::run(size, |c| {
                let me = c.rank();
                let g = c.gather(1, &block(me)).unwrap();
                let mut into = vec![0u32; if me == 0 { n * size as usize } else { 0 }];
                let at_root = c.gather_into(0, &block(me), &mut into).unwrap();
                let mut part = vec![0u32; n];
                let src = (me == 2 % size).then_some(&whole[..]);
                c.scatter_into(2 % size, src, &mut part).unwrap();
                let all = c.allgather(&block(me)).unwrap();
                let a2a = c.alltoall(&whole_of(me)).unwrap();
                let rs = c.reduce_scatter(&whole_of(me), Reduction::Max).unwrap();
                (me, g, at_root, into, part, all, a2a, rs, c.sequence())
            });
            for (me, g, at_root, into, part, all, a2a, rs, seq) in got {
                // alltoall: block `me` of every rank's whole, in rank order.
                let want: Vec<u32> = (0..size).flat_map(|k| block_of(k, me)).collect();
                assert!(a2a == want, "alltoall at {me}");
                // reduce_scatter (Max): block `me` folded over every rank.
                let blocks: Vec<Vec<u32>> = (0..size).map(|k| block_of(k, me)).collect();
                let folded: Vec<u32> = (0..n)
                    .map(|i| blocks.iter().map(|b| b[i]).max().unwrap_or(0))
                    .collect();
                assert!(rs == folded, "reduce_scatter at {me}");
                assert_eq!(g.as_deref(), (me == 1).then_some(&whole[..]), "gather {me}");
                assert_eq!(at_root, me == 0);
                if me == 0 {
                    assert!(into == whole, "gather_into");
                }
                assert!(part == block(me), "scatter_into at {me}");
                assert!(all == whole, "allgather at {me}");
                assert!(seq >= 2 + 2 + 2 + 2, "split into v1 calls: {seq}");
            }
        }
    }
}
