//! The public blocking collectives of [`Comm`] over typed elements and
//! bytes (protocol §8), each choosing the v1 star ([`crate::star`]'s
//! cores) or, with HELLO feature bit 1, a pipelined call (protocol §14.5).

use sperli_wire::abort::AbortReason;
use sperli_wire::collective::Operation;
use sperli_wire::element::Reduction;
use sperli_wire::error::ArgumentError;
use sperli_wire::Error;

use crate::comm::{Comm, Elems, Src};
use crate::element::Element;
use crate::large::max_chunk_elems;
use crate::peers::Peers;
use crate::pipeline::chain::ChainOp;
use crate::pipeline::{ElemsMut, Grow, NoResult};

const H: usize = sperli_wire::limits::COLLECTIVE_HEADER_LEN;

impl<L: Peers> Comm<L> {
    // ---- feature bit 1 (protocol §14) ------------------------------------

    /// The HELLO feature bits of the job (protocol §7.1.1): bit 1
    /// ([`FEATURE_PIPELINED`](sperli_wire::limits::FEATURE_PIPELINED)) set
    /// means large calls run pipelined (protocol §14).
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Sets the chunk length of the pipelined streams this rank starts
    /// (protocol §14.5; a multiple of 8 bytes, rounded down), or back to the
    /// default rule with `None`. Any value gives the same results; it only
    /// changes how the bytes are cut. A tuning knob for benchmarks.
    pub fn set_pipeline_chunk(&self, bytes: Option<usize>) {
        self.state.set_chunk(bytes);
    }

    /// allreduce of `data` into `out` (same length) as a pipelined call.
    pub(crate) fn allreduce_pipelined<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
        large: bool,
        out: &mut [T],
    ) -> Result<(), Error> {
        let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
        let kind = ChainOp::Allreduce;
        self.chain_call(kind, &Elems(data), et, red, large, &mut ElemsMut(out))?;
        Ok(())
    }

    /// bcast of a `Vec` whose receivers do not know the length, with
    /// feature bit 1 (protocol §14.3); `large`: of any length.
    pub(crate) fn bcast_grow<T: Element>(
        &self,
        root: u32,
        buf: &mut Vec<T>,
        large: bool,
    ) -> Result<(), Error> {
        if self.rank == root {
            return self.bcast_bit1(root, &Elems(&buf[..]), T::WIDTH, None, large, &mut NoResult);
        }
        buf.clear();
        self.bcast_bit1(root, &[][..], T::WIDTH, None, large, &mut Grow(buf))
    }

    // ---- the public v1 collectives -------------------------------------

    /// barrier (protocol §8.2, operation 1): returns when every rank has
    /// entered it. Size 1 returns at once.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let ok = fake::run(4, |c| c.barrier().is_ok());
    /// assert!(ok.iter().all(|&b| b));
    /// ```
    pub fn barrier(&self) -> Result<(), Error> {
        self.barrier_core()
    }

    /// bcast (protocol §8.2, operation 2; §8.5 "Lengths the receiver does
    /// not know": receivers of bcast and scatter): at the root `buf` is sent
    /// and left as it is; at every other rank `buf` is replaced by the
    /// root's data, whatever its length (H1617 if it is not a whole number
    /// of `T`). With feature bit 1 (protocol §14.3) any length is one call,
    /// pipelined where protocol §14.5 says so. In a v1 job it is one v1
    /// call, so at most 16777200 bytes: receivers that do not know the
    /// length cannot tell a split from a call (use [`Comm::bcast_into`],
    /// whose receivers know it, for more).
    ///
    /// Errors: H1618 for `root >= size` on every rank; in a v1 job root
    /// data longer than 16777200 bytes ends the job (root H1618, others
    /// H1612).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let mut v: Vec<f32> = if c.rank() == 1 { vec![1.5, 2.5] } else { Vec::new() };
    ///     c.bcast(1, &mut v).unwrap();
    ///     v
    /// });
    /// assert_eq!(got, vec![vec![1.5, 2.5]; 3]);
    /// ```
    pub fn bcast<T: Element>(&self, root: u32, buf: &mut Vec<T>) -> Result<(), Error> {
        if self.bit1() {
            return self.bcast_grow(root, buf, true);
        }
        let src = Elems(if self.rank == root { &buf[..] } else { &[] });
        if let Some(p) = self.bcast_core(root, &src, T::WIDTH, None)? {
            buf.clear();
            T::extend_from_le(&p[H..], buf);
            self.recycle(p);
        }
        Ok(())
    }

    /// One bcast into a buffer of known length, at most one frame in a v1
    /// job: [`Comm::bcast_into`] of one chunk.
    pub(crate) fn bcast_one_into<T: Element>(&self, root: u32, buf: &mut [T]) -> Result<(), Error> {
        let want = buf.len() * T::WIDTH;
        if self.bit1() {
            if self.rank == root {
                return self.bcast_bit1(
                    root,
                    &Elems(&buf[..]),
                    T::WIDTH,
                    None,
                    false,
                    &mut NoResult,
                );
            }
            return self.bcast_bit1(
                root,
                &[][..],
                T::WIDTH,
                Some(want),
                false,
                &mut ElemsMut(buf),
            );
        }
        let src = Elems(if self.rank == root { &buf[..] } else { &[] });
        if let Some(p) = self.bcast_core(root, &src, T::WIDTH, Some(want))? {
            T::read_le(&p[H..], buf);
            self.recycle(p);
        }
        Ok(())
    }

    /// The star reduce or allreduce of `data` with a built-in reduction
    /// ([`Comm::reduce_core`]).
    fn reduce_elems<T: Element>(
        &self,
        allreduce: bool,
        root: u32,
        data: &[T],
        op: Reduction,
    ) -> Result<Option<Vec<u8>>, Error> {
        let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
        self.reduce_core(allreduce, root, &Elems(data), et, red, None)
    }

    /// One reduce into the root's `out` ([`Comm::reduce_into`] of one chunk:
    /// one v1 call, or one pipelined call where protocol §14.5 says so).
    pub(crate) fn reduce_one_into<T: Element>(
        &self,
        root: u32,
        data: &[T],
        out: &mut [T],
        op: Reduction,
    ) -> Result<bool, Error> {
        if self.rank == root && out.len() != data.len() {
            // Only the root can see this: it ends the job (protocol §8.4).
            self.begin()?;
            return self.fail_job(
                AbortReason::CollectiveMismatch,
                ArgumentError::LengthMismatch {
                    left: data.len() * T::WIDTH,
                    right: out.len() * T::WIDTH,
                }
                .into(),
            );
        }
        if self.runs_pipelined(Operation::Reduce, data.len() * T::WIDTH) {
            let out = if self.rank == root { out } else { &mut [] };
            let kind = ChainOp::Reduce { root };
            let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
            return self.chain_call(kind, &Elems(data), et, red, false, &mut ElemsMut(out));
        }
        if self.rank == root {
            if let Some(o) = T::le_bytes_mut(out) {
                let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
                self.reduce_root_into(root, &Elems(data), et, red, o)?;
                return Ok(true);
            }
        }
        match self.reduce_elems(false, root, data, op)? {
            Some(p) => {
                T::read_le(&p[H..], out);
                self.recycle(p);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// One allreduce into `out` ([`Comm::allreduce_into`] of one chunk).
    pub(crate) fn allreduce_one_into<T: Element>(
        &self,
        data: &[T],
        out: &mut [T],
        op: Reduction,
    ) -> Result<(), Error> {
        if out.len() != data.len() {
            self.begin()?;
            return Err(ArgumentError::LengthMismatch {
                left: data.len() * T::WIDTH,
                right: out.len() * T::WIDTH,
            }
            .into());
        }
        if self.runs_pipelined(Operation::Allreduce, data.len() * T::WIDTH) {
            return self.allreduce_pipelined(data, op, false, out);
        }
        if self.size() == 1 || self.pair_exchange() {
            if let Some(o) = T::le_bytes_mut(out) {
                let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
                if self.size() == 2 {
                    // Two ranks with bit 6: the pair exchange (protocol
                    // §19.3), folded straight into the caller's buffer.
                    return self.allreduce_pair_into(&Elems(data), et, red, o);
                }
                // One rank: the root's fold of its own contribution
                // (protocol §8.7), copied once into the caller's buffer.
                return self.reduce_root_into(0, &Elems(data), et, red, o);
            }
        }
        let p = self
            .reduce_elems(true, 0, data, op)?
            .expect("allreduce has a result on every rank");
        T::read_le(&p[H..], out);
        self.recycle(p);
        Ok(())
    }

    /// reduce on raw little-endian bytes with wire codes (protocol §8.3,
    /// §8.4), one call (for tests of the codes' checks; programs call the
    /// typed [`Comm::reduce`]): `element_type` 0..=6, `reduction` 1..=10. Codes out of range,
    /// a refused pair, data that is not a whole number of elements or
    /// longer than 16777200 bytes, or `root >= size`: H1618 on every rank
    /// before anything is sent.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     // u32 (type 2) bor (reduction 9).
    ///     let ok = c.reduce_bytes(0, &(1u32 << c.rank()).to_le_bytes(), 2, 9).unwrap();
    ///     let refused = c.reduce_bytes(0, &[0; 3], 2, 9).unwrap_err(); // 3 bytes of u32
    ///     (ok, refused.h_code().unwrap().number())
    /// });
    /// assert_eq!(got[0], (Some(3u32.to_le_bytes().to_vec()), 1618));
    /// assert_eq!(got[1], (None, 1618));
    /// ```
    #[doc(hidden)]
    pub fn reduce_bytes(
        &self,
        root: u32,
        data: &[u8],
        element_type: u8,
        reduction: u8,
    ) -> Result<Option<Vec<u8>>, Error> {
        if self.runs_pipelined(Operation::Reduce, data.len()) {
            let mut out = vec![0u8; if self.rank == root { data.len() } else { 0 }];
            let kind = ChainOp::Reduce { root };
            let at_root = self.chain_call(
                kind,
                data,
                element_type,
                reduction,
                false,
                &mut ElemsMut(&mut out[..]),
            )?;
            return Ok(at_root.then_some(out));
        }
        Ok(self
            .reduce_core(false, root, data, element_type, reduction, None)?
            .map(|p| {
                let v = p[H..].to_vec();
                self.recycle(p);
                v
            }))
    }

    /// allreduce on raw little-endian bytes with wire codes; checks as
    /// [`Comm::reduce_bytes`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| c.allreduce_bytes(&[0b01 << c.rank()], 0, 10).unwrap());
    /// assert_eq!(got, vec![vec![0b11]; 2]);
    /// ```
    #[doc(hidden)]
    pub fn allreduce_bytes(
        &self,
        data: &[u8],
        element_type: u8,
        reduction: u8,
    ) -> Result<Vec<u8>, Error> {
        if self.runs_pipelined(Operation::Allreduce, data.len()) {
            let mut out = vec![0u8; data.len()];
            let kind = ChainOp::Allreduce;
            self.chain_call(
                kind,
                data,
                element_type,
                reduction,
                false,
                &mut ElemsMut(&mut out[..]),
            )?;
            return Ok(out);
        }
        let p = self
            .reduce_core(true, 0, data, element_type, reduction, None)?
            .expect("allreduce has a result on every rank");
        let v = p[H..].to_vec();
        self.recycle(p);
        Ok(v)
    }

    /// gather (protocol §8.2, operation 5): at the root, every rank's block
    /// concatenated in rank order (its own at its rank's place); `None`
    /// elsewhere. Blocks of any length: one longer than one v1 call
    /// (16777200 bytes) is a series of v1 gathers, one per chunk of every
    /// block (protocol §6.1). H1618 on every rank for `root >= size`; a
    /// block whose length differs from the root's own ends the job (root
    /// H1617 with ABORT reason 3, others H1612).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| c.gather(0, &[c.rank() as u8; 2]).unwrap());
    /// assert_eq!(got, vec![Some(vec![0, 0, 1, 1, 2, 2]), None, None]);
    /// ```
    pub fn gather<T: Element>(&self, root: u32, data: &[T]) -> Result<Option<Vec<T>>, Error> {
        if data.len() > max_chunk_elems::<T>() && root < self.size {
            // Protocol §6.1: one v1 gather per chunk of every block.
            let whole = if self.rank == root {
                data.len() * self.size as usize
            } else {
                0
            };
            let mut out = vec![T::default(); whole];
            let at_root = self.gather_split_into(root, data, &mut out)?;
            return Ok(at_root.then_some(out));
        }
        let mut out = Vec::new();
        if self.rank == root {
            out.reserve(data.len() * self.size as usize);
        }
        let at_root = self.gather_core(root, &Elems(data), |b| T::extend_from_le(b, &mut out))?;
        Ok(at_root.then_some(out))
    }

    /// gather into the root's `out`, which must hold `size` blocks of
    /// `data.len()` elements there (other ranks may pass an empty slice):
    /// each block is read from its payload straight to its place in `out`.
    /// A wrong `out` at the root is a check only the root can make, so it
    /// ends the job before anything is sent (root H1618 with ABORT reason
    /// 3, others H1612); other errors as [`Comm::gather`]. Returns `true`
    /// at the root. Allocates no result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let mut out = [0u16; 6];
    ///     let at_root = c.gather_into(2, &[c.rank() as u16; 2], &mut out).unwrap();
    ///     (at_root, out)
    /// });
    /// assert_eq!(got[2], (true, [0, 0, 1, 1, 2, 2]));
    /// assert_eq!(got[0], (false, [0; 6]));
    /// ```
    pub fn gather_into<T: Element>(
        &self,
        root: u32,
        data: &[T],
        out: &mut [T],
    ) -> Result<bool, Error> {
        let whole = data.len() * self.size as usize;
        if self.rank == root && out.len() != whole {
            // Only the root can see this: it ends the job (protocol §8.4).
            self.begin()?;
            return self.fail_job(
                AbortReason::CollectiveMismatch,
                ArgumentError::LengthMismatch {
                    left: whole * T::WIDTH,
                    right: out.len() * T::WIDTH,
                }
                .into(),
            );
        }
        if data.len() > max_chunk_elems::<T>() && root < self.size {
            return self.gather_split_into(root, data, out);
        }
        let mut at = 0;
        self.gather_core(root, &Elems(data), |b| {
            // gather_core checked every block's length (protocol §8.4).
            let k = b.len() / T::WIDTH;
            if let Some(dst) = out.get_mut(at..at + k) {
                T::read_le(b, dst);
            }
            at += k;
        })
    }

    /// scatter (protocol §8.2, operation 6; §8.5): the root's data is
    /// `size` equal blocks; rank i gets block i. Non-roots pass `None` (a
    /// `Some` there is ignored); `None` at the root is an empty array.
    /// Receivers take whatever arrives (a whole number of `T`, else H1617).
    ///
    /// Errors: H1618 on every rank for `root >= size`; root data that is not
    /// `size` blocks of at most 16777200 bytes ends the job (root H1618 with
    /// ABORT reason 4, others H1612).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let data = [10i32, 11, 20, 21, 30, 31];
    ///     c.scatter(1, (c.rank() == 1).then_some(&data[..])).unwrap()
    /// });
    /// assert_eq!(got, vec![vec![10, 11], vec![20, 21], vec![30, 31]]);
    /// ```
    pub fn scatter<T: Element>(&self, root: u32, data: Option<&[T]>) -> Result<Vec<T>, Error> {
        let src = Elems(match (self.rank == root, data) {
            (true, Some(d)) => d,
            _ => &[],
        });
        let (p, off) = self.scatter_core(root, &src, T::WIDTH, None)?;
        let v = T::vec_from_le(&p[off..]);
        self.recycle(p);
        Ok(v)
    }

    /// scatter into `out`, which must have exactly the block's length on
    /// every rank: at the root a wrong `out` length ends the job like an
    /// invalid scatter (H1618, ABORT reason 4), at a receiver data of
    /// another length is H1617. Blocks of any length: one longer than one
    /// v1 call (16777200 bytes) is a series of v1 scatters, one per chunk
    /// of every block (protocol §6.1; every rank knows the series from its
    /// `out`). Allocates no result vector at the receivers.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     let mut out = [0u64; 2];
    ///     c.scatter_into(0, (c.rank() == 0).then_some(&[1, 2, 3, 4][..]), &mut out).unwrap();
    ///     out
    /// });
    /// assert_eq!(got, vec![[1, 2], [3, 4]]);
    /// ```
    pub fn scatter_into<T: Element>(
        &self,
        root: u32,
        data: Option<&[T]>,
        out: &mut [T],
    ) -> Result<(), Error> {
        let src = Elems(match (self.rank == root, data) {
            (true, Some(d)) => d,
            _ => &[],
        });
        let want = out.len() * T::WIDTH;
        if self.rank == root && root < self.size && src.byte_len() != want * self.size as usize {
            self.begin()?;
            return self.fail_job(
                AbortReason::InvalidScatter,
                ArgumentError::ScatterBlocks {
                    len: src.byte_len(),
                    size: self.size,
                }
                .into(),
            );
        }
        if out.len() > max_chunk_elems::<T>() && root < self.size {
            // Protocol §6.1: one v1 scatter per chunk of every block.
            return self.scatter_split_into(root, (self.rank == root).then_some(src.0), out);
        }
        let (p, off) = self.scatter_core(root, &src, T::WIDTH, Some(want))?;
        T::read_le(&p[off..], out);
        self.recycle(p);
        Ok(())
    }
}

#[cfg(test)]
mod buffer_tests {
    //! The collectives take their payload buffers from the link
    //! and give every received payload back.

    use std::sync::atomic::{AtomicUsize, Ordering};

    use sperli_wire::element::Reduction;
    use sperli_wire::Error;

    use crate::fake::FakePeers;
    use crate::{Comm, Peers};

    /// A fake link that counts buffers taken, received and given back.
    struct Counting {
        inner: FakePeers,
        taken: AtomicUsize,
        received: AtomicUsize,
        recycled: AtomicUsize,
    }

    impl Peers for Counting {
        fn rank(&self) -> u32 {
            self.inner.rank()
        }
        fn size(&self) -> u32 {
            self.inner.size()
        }
        fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
            self.inner.send_collective(to, payload)
        }
        fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
            self.received.fetch_add(1, Ordering::Relaxed);
            self.inner.recv_collective(from)
        }
        fn abort(&self, reason: sperli_wire::abort::AbortReason, code: u32, message: &str) {
            self.inner.abort(reason, code, message)
        }
        fn take_buffer(&self, len: usize) -> Vec<u8> {
            self.taken.fetch_add(1, Ordering::Relaxed);
            Vec::with_capacity(len)
        }
        fn recycle(&self, buf: Vec<u8>) {
            self.recycled.fetch_add(1, Ordering::Relaxed);
            drop(buf);
        }
    }

    #[test]
    fn into_calls_recycle_every_received_payload_and_fold_correctly() {
        let links = FakePeers::job(3);
        let out: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = links
                .into_iter()
                .map(|inner| {
                    s.spawn(move || {
                        let c = Comm::new(Counting {
                            inner,
                            taken: AtomicUsize::new(0),
                            received: AtomicUsize::new(0),
                            recycled: AtomicUsize::new(0),
                        });
                        let me = c.rank() as f64;
                        let data: Vec<f64> = (0..1000).map(|i| i as f64 + me).collect();
                        let mut out = vec![0f64; 1000];
                        c.allreduce_into(&data, &mut out, Reduction::Sum).unwrap();
                        let want: Vec<f64> = (0..1000).map(|i| 3.0 * i as f64 + 3.0).collect();
                        assert_eq!(out, want);
                        // Root 1: its own data is folded in the middle.
                        let mut r = vec![0f64; 1000];
                        let at = c.reduce_into(1, &data, &mut r, Reduction::Max).unwrap();
                        if at {
                            assert_eq!(r, (0..1000).map(|i| i as f64 + 2.0).collect::<Vec<_>>());
                        }
                        let mut b = data.clone();
                        c.bcast_into(2, &mut b).unwrap();
                        assert_eq!(b, (0..1000).map(|i| i as f64 + 2.0).collect::<Vec<_>>());
                        let blocks: Vec<u64> = (0..30).collect();
                        let mut mine = [0u64; 10];
                        let d = (c.rank() == 0).then_some(&blocks[..]);
                        c.scatter_into(0, d, &mut mine).unwrap();
                        let k = c.rank() as u64 * 10;
                        assert_eq!(mine.to_vec(), (k..k + 10).collect::<Vec<_>>());
                        let g = c.gather(0, &[c.rank() as i32; 2]).unwrap();
                        if c.rank() == 0 {
                            assert_eq!(g.unwrap(), vec![0, 0, 1, 1, 2, 2]);
                        }
                        let l = c.link();
                        (
                            l.taken.load(Ordering::Relaxed),
                            l.received.load(Ordering::Relaxed),
                            l.recycled.load(Ordering::Relaxed),
                        )
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (rank, (taken, received, recycled)) in out.into_iter().enumerate() {
            assert!(taken > 0, "rank {rank} took buffers from the link");
            // Every received payload goes back; buffers taken for the
            // root's own contributions go back too.
            assert!(recycled >= received, "rank {rank}: {recycled} < {received}");
        }
    }
}
