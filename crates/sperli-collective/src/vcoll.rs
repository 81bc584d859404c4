//! The v-collectives (blocks of different lengths): [`Comm::gatherv`],
//! [`Comm::scatterv`], [`Comm::allgatherv`], [`Comm::alltoallv`], built from
//! v1 calls without a new frame (protocol §8.9).
//!
//! Every call first exchanges the block lengths (one `u64` per block, its
//! length in bytes, or [`REFUSED`] from a rank whose own arguments are not
//! valid), so that every rank can check them before any data moves. A
//! refusal that every rank learns in that exchange ends the call on every
//! rank with H1618 and the job goes on; nothing more is sent.
//!
//! | call | v1 calls |
//! |---|---|
//! | `gatherv(root)` | allgather of the lengths (gather to 0, bcast from 0), then one gather to the root |
//! | `scatterv(root)` | scatter of the lengths from the root, then one scatter from the root |
//! | `allgatherv` | allgather of the lengths, one gather to 0, then a bcast from 0 of the concatenation ([`Comm::bcast_into`]: with feature bit 1 one call, in a v1 job one per 16777200 bytes, at least one) |
//! | `alltoallv` | `size` scatters of the lengths (the k-th rooted at rank k), then `size` scatters of the data |
//!
//! A root of `size` or more is refused on every rank before anything is
//! sent (H1618); the call still counts every v1 call it would have made,
//! so sequence numbers stay aligned (protocol §8.1).
//!
//! The length exchanges and the sends of ranks whose block length the
//! v1 call accepts are the public v1 calls; the gather at the root and the
//! scatter at the root use the v1 frames of those calls with one length per
//! block (the v1 gather and scatter check one length for all).

use sperli_wire::collective::{Operation, Phase};
use sperli_wire::error::{ArgumentError, MismatchError};
use sperli_wire::limits::{COLLECTIVE_HEADER_LEN as H, MAX_COLLECTIVE_DATA};
use sperli_wire::Error;

use crate::comm::{Call, Comm, Elems};
use crate::element::Element;
use crate::peers::Peers;
use crate::pipeline::Taken;

/// The length slot that says "this rank refuses the call" (protocol §8.9).
pub const REFUSED: u64 = u64::MAX;

/// The result of a v-call: every block, concatenated in rank order, and
/// each block's length in elements (MPI's `recvcounts`).
///
/// ```
/// use sperli_collective::vcoll::Blocks;
/// let b = Blocks { data: vec![1u8, 2, 3], counts: vec![1, 0, 2] };
/// assert_eq!(b.block(2), &[2, 3]);
/// assert_eq!(b.displs(), vec![0, 1, 1]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Blocks<T> {
    /// The blocks, concatenated in rank order.
    pub data: Vec<T>,
    /// Block i's length in elements.
    pub counts: Vec<usize>,
}

impl<T> Blocks<T> {
    /// Where each block starts in [`Blocks::data`] (MPI's `displs`).
    pub fn displs(&self) -> Vec<usize> {
        let mut at = 0;
        self.counts
            .iter()
            .map(|&c| {
                let d = at;
                at += c;
                d
            })
            .collect()
    }

    /// Block `i` (rank i's block); empty for `i >= counts.len()`.
    pub fn block(&self, i: usize) -> &[T] {
        let start: usize = self.counts.iter().take(i).sum();
        let len = self.counts.get(i).copied().unwrap_or(0);
        self.data.get(start..start + len).unwrap_or(&[])
    }
}

/// The length slot of a block of `n` elements of `T`, or the reason this
/// rank refuses it (a block longer than one frame carries).
fn slot_of<T: Element>(n: usize) -> Result<u64, ArgumentError> {
    let len = n * T::WIDTH;
    if len > MAX_COLLECTIVE_DATA {
        return Err(ArgumentError::TooLong {
            len,
            max: MAX_COLLECTIVE_DATA,
        });
    }
    Ok(len as u64)
}

/// The slots of a sender with one block per rank (scatterv at the root,
/// alltoallv everywhere): one count per rank, adding up to the data, no
/// block longer than a frame carries; else the reason it refuses.
fn send_slots<T: Element>(
    counts: &[usize],
    len: usize,
    size: u32,
) -> Result<Vec<u64>, ArgumentError> {
    if counts.len() != size as usize {
        return Err(ArgumentError::Counts {
            got: counts.len(),
            size,
        });
    }
    let sum = counts
        .iter()
        .try_fold(0usize, |a, &c| a.checked_add(c))
        .map_or(u64::MAX, |s| s as u64);
    if sum != len as u64 {
        return Err(ArgumentError::CountsSum { sum, len });
    }
    counts.iter().map(|&c| slot_of::<T>(c)).collect()
}

/// The decision of protocol §8.9 step 2 on the slots every rank knows
/// alike: a REFUSED slot, a slot longer than one frame or a slot that is
/// not whole elements of `T` refuse the call. A rank that refused itself
/// reports its own reason (`mine`); the others name the lowest refusing
/// rank.
fn judge<T: Element>(slots: &[u64], mine: Option<&ArgumentError>) -> Result<(), Error> {
    if let Some(e) = mine {
        return Err(e.clone().into());
    }
    if let Some(i) = slots.iter().position(|&s| s == REFUSED) {
        return Err(ArgumentError::RefusedBy { rank: i as u32 }.into());
    }
    for &s in slots {
        if s > MAX_COLLECTIVE_DATA as u64 {
            let len = usize::try_from(s).unwrap_or(usize::MAX);
            return Err(ArgumentError::TooLong {
                len,
                max: MAX_COLLECTIVE_DATA,
            }
            .into());
        }
        if s % T::WIDTH as u64 != 0 {
            return Err(ArgumentError::NotWholeElements {
                len: s as usize,
                width: T::WIDTH,
            }
            .into());
        }
    }
    Ok(())
}

/// Element counts of checked slots.
fn counts_of<T: Element>(slots: &[u64]) -> Vec<usize> {
    slots.iter().map(|&s| s as usize / T::WIDTH).collect()
}

impl<L: Peers> Comm<L> {
    /// Refuses a v-call with H1618 before anything is sent, counting the
    /// `calls` v1 calls it would have made (or fails with the job's
    /// failure, if it already failed).
    fn refuse_v<X>(&self, calls: u64, e: ArgumentError) -> Result<X, Error> {
        self.skip_calls(calls - 1);
        self.begin()?;
        Err(e.into())
    }

    /// The v1 calls an allgather of one `u64` per rank makes here.
    fn slot_allgather_calls(&self) -> u64 {
        if self.runs_pipelined(Operation::Allgather, 8 * self.size() as usize) {
            1
        } else {
            2
        }
    }

    /// Steps 1 and 2 of gatherv and allgatherv (protocol §8.9): the
    /// allgather of every rank's slot, then the common decision.
    fn gather_slots<T: Element>(&self, n: usize) -> Result<Vec<u64>, Error> {
        let mine = slot_of::<T>(n);
        let slot = *mine.as_ref().unwrap_or(&REFUSED);
        let slots = self.allgather(&[slot])?;
        if slots.len() != self.size() as usize {
            // allgather checks the length; a second look costs nothing.
            return self.mismatch(MismatchError::Length {
                from: 0,
                expected: 8 * u64::from(self.size()),
                got: 8 * slots.len() as u64,
            });
        }
        judge::<T>(&slots, mine.as_ref().err())?;
        Ok(slots)
    }

    /// Step 3 of gatherv: the v1 gather in which rank i's block has the
    /// length of slot i. A non-root sends its block with
    /// [`Comm::gather`]; the root checks every block against its slot
    /// (H1617 with ABORT reason 3), not against its own.
    fn gather_slotted<T: Element>(
        &self,
        root: u32,
        data: &[T],
        slots: &[u64],
    ) -> Result<Option<Vec<T>>, Error> {
        if self.rank() != root {
            self.gather(root, data)?;
            return Ok(None);
        }
        let seq = self.begin()?;
        let call = Call {
            op: Operation::Gather,
            element_type: 0,
            reduction: 0,
            root,
            seq,
            len: data.len() * T::WIDTH,
        };
        let total: u64 = slots.iter().sum();
        let mut out = Vec::with_capacity(total as usize / T::WIDTH);
        for r in 0..self.size() {
            if r == root {
                out.extend_from_slice(data);
                continue;
            }
            let f = self.take(r)?;
            self.check_due(r, &f.header, &call, root, &[Phase::ToRoot])?;
            if !matches!(f.body, Taken::Star) {
                return self.mismatch(MismatchError::Header {
                    from: r,
                    field: "phase",
                    expected: Phase::ToRoot as u64,
                    got: f.header.phase as u64,
                });
            }
            self.expect_len(r, slots[r as usize] as usize, f.buf.len() - H)?;
            T::extend_from_le(&f.buf[H..], &mut out);
            self.recycle(f.buf);
        }
        Ok(Some(out))
    }

    /// Step 3 of scatterv and alltoallv: the v1 scatter from `root` in
    /// which block i has the length of `counts[i]` elements. At the root
    /// `counts` are its own (already checked); elsewhere `mine` is the
    /// count this rank was announced, and the block is checked against it
    /// by [`Comm::scatter_into`] (H1617 with ABORT reason 3).
    fn scatter_slotted<T: Element>(
        &self,
        root: u32,
        data: &[T],
        counts: &[usize],
        mine: usize,
        out: &mut Vec<T>,
    ) -> Result<(), Error> {
        if self.rank() != root {
            let at = out.len();
            out.resize(at + mine, T::default());
            return self.scatter_into(root, None, &mut out[at..]);
        }
        let seq = self.begin()?;
        let call = Call {
            op: Operation::Scatter,
            element_type: 0,
            reduction: 0,
            root,
            seq,
            len: 0,
        };
        let src = Elems(data);
        let mut start = 0;
        for (r, &c) in counts.iter().enumerate() {
            let range = start * T::WIDTH..(start + c) * T::WIDTH;
            if r as u32 == root {
                out.extend_from_slice(&data[start..start + c]);
            } else {
                let p = self.payload(&call, Phase::FromRoot, &src, range);
                self.send_vec(r as u32, p)?;
            }
            start += c;
        }
        Ok(())
    }

    /// The slot announced to this rank by a scatter of slots from `root`
    /// (one `u64`; H1617 at a receiver if it is not 8 bytes).
    fn scatter_slot(&self, root: u32, slots: Option<&[u64]>) -> Result<u64, Error> {
        let mut one = [0u64];
        self.scatter_into(root, slots, &mut one)?;
        Ok(one[0])
    }

    /// gatherv (MPI_Gatherv): at the root every rank's block, which may
    /// differ in length, concatenated in rank order with the lengths
    /// ([`Blocks`]); `None` elsewhere. The root needs no counts: the
    /// lengths are exchanged first (protocol §8.9).
    ///
    /// Errors: H1618 on every rank, the job going on, for `root >= size`
    /// and when any rank's block is longer than 16777200 bytes (that rank
    /// gets [`ArgumentError::TooLong`], the others
    /// [`ArgumentError::RefusedBy`]). A block whose length differs from
    /// the one its rank announced ends the job (root H1617 with ABORT
    /// reason 3, others H1612).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let mine = vec![c.rank() as i32; c.rank() as usize];
    ///     c.gatherv(1, &mine).unwrap()
    /// });
    /// let at_root = got[1].as_ref().unwrap();
    /// assert_eq!(at_root.data, vec![1, 2, 2]);
    /// assert_eq!(at_root.counts, vec![0, 1, 2]);
    /// assert!(got[0].is_none() && got[2].is_none());
    /// ```
    pub fn gatherv<T: Element>(&self, root: u32, data: &[T]) -> Result<Option<Blocks<T>>, Error> {
        if root >= self.size() {
            let calls = self.slot_allgather_calls() + 1;
            let size = self.size();
            return self.refuse_v(calls, ArgumentError::Root { root, size });
        }
        let slots = self.gather_slots::<T>(data.len())?;
        Ok(self.gather_slotted(root, data, &slots)?.map(|data| Blocks {
            data,
            counts: counts_of::<T>(&slots),
        }))
    }

    /// scatterv (MPI_Scatterv): the root's `data` is cut into blocks of
    /// `counts[i]` elements, in rank order; rank i gets block i. Non-roots
    /// pass `None` (a `Some` there is ignored) and need no counts: the
    /// lengths are sent first (protocol §8.9).
    ///
    /// Errors: H1618 on every rank, the job going on, for `root >= size`
    /// and when the root's arguments are not valid: not one count per rank
    /// ([`ArgumentError::Counts`]), counts that do not add up to the data
    /// ([`ArgumentError::CountsSum`]), a block longer than 16777200 bytes;
    /// the root gets that reason, the others [`ArgumentError::RefusedBy`].
    /// A block of another length than announced ends the job (H1617 with
    /// ABORT reason 3 at the receiver).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let data = [1u64, 2, 3, 4, 5, 6];
    ///     let counts = [3, 0, 3];
    ///     c.scatterv(0, (c.rank() == 0).then_some((&data[..], &counts[..]))).unwrap()
    /// });
    /// assert_eq!(got, vec![vec![1, 2, 3], vec![], vec![4, 5, 6]]);
    /// ```
    pub fn scatterv<T: Element>(
        &self,
        root: u32,
        data: Option<(&[T], &[usize])>,
    ) -> Result<Vec<T>, Error> {
        if root >= self.size() {
            let size = self.size();
            return self.refuse_v(2, ArgumentError::Root { root, size });
        }
        let is_root = self.rank() == root;
        let (data, counts) = match data {
            Some((d, c)) if is_root => (d, c),
            _ => (&[][..], &[][..]),
        };
        let mine = if is_root {
            Some(send_slots::<T>(counts, data.len(), self.size()))
        } else {
            None
        };
        let slots = match &mine {
            Some(Ok(s)) => s.clone(),
            Some(Err(_)) => vec![REFUSED; self.size() as usize],
            None => Vec::new(),
        };
        let slot = self.scatter_slot(root, is_root.then_some(&slots[..]))?;
        if let Some(Err(e)) = mine {
            return Err(e.into());
        }
        if slot == REFUSED {
            return Err(ArgumentError::RefusedBy { rank: root }.into());
        }
        if !is_root {
            self.check_announced::<T>(root, slot)?;
        }
        let mut out = Vec::new();
        self.scatter_slotted(root, data, counts, slot as usize / T::WIDTH, &mut out)?;
        Ok(out)
    }

    /// A receiver's check of a slot announced by `from` for a scatter
    /// step: a slot no valid block has (longer than a frame carries, not
    /// whole elements of `T`) is a mismatch only this rank sees (H1617
    /// with ABORT reason 3).
    fn check_announced<T: Element>(&self, from: u32, slot: u64) -> Result<(), Error> {
        if slot > MAX_COLLECTIVE_DATA as u64 || slot % T::WIDTH as u64 != 0 {
            let expected =
                (slot.min(MAX_COLLECTIVE_DATA as u64) / T::WIDTH as u64) * T::WIDTH as u64;
            return self.mismatch(MismatchError::Length {
                from,
                expected,
                got: slot,
            });
        }
        Ok(())
    }

    /// allgatherv (MPI_Allgatherv): every rank gets every rank's block,
    /// which may differ in length, concatenated in rank order with the
    /// lengths (protocol §8.9: the lengths by allgather, the blocks by a
    /// gather to 0, then a bcast from 0 of the concatenation, whose length
    /// every rank knows).
    ///
    /// Errors: H1618 on every rank, the job going on, when any rank's
    /// block is longer than 16777200 bytes (that rank gets
    /// [`ArgumentError::TooLong`], the others [`ArgumentError::RefusedBy`]).
    /// A block of another length than announced ends the job (rank 0
    /// H1617 with ABORT reason 3, others H1612).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| c.allgatherv(&vec![c.rank() as u8; 2 - c.rank() as usize % 2]).unwrap());
    /// for b in got {
    ///     assert_eq!(b.data, vec![0, 0, 1, 2, 2]);
    ///     assert_eq!(b.counts, vec![2, 1, 2]);
    /// }
    /// ```
    pub fn allgatherv<T: Element>(&self, data: &[T]) -> Result<Blocks<T>, Error> {
        let slots = self.gather_slots::<T>(data.len())?;
        let counts = counts_of::<T>(&slots);
        let total: usize = counts.iter().sum();
        let mut all = match self.gather_slotted(0, data, &slots)? {
            Some(all) => all,
            None => vec![T::default(); total],
        };
        self.bcast_into(0, &mut all)?;
        Ok(Blocks { data: all, counts })
    }

    /// alltoallv (MPI_Alltoallv): `data` is cut into blocks of `counts[j]`
    /// elements in rank order, block j going to rank j; the result holds
    /// the blocks every rank sent to this one, in rank order, with their
    /// lengths. Receivers need no counts: the lengths are sent first
    /// (protocol §8.9: `size` scatters of the lengths, the k-th rooted at
    /// rank k, then `size` scatters of the data).
    ///
    /// Errors: H1618 on every rank, the job going on, when any rank's
    /// arguments are not valid: not one count per rank
    /// ([`ArgumentError::Counts`]), counts that do not add up to its data
    /// ([`ArgumentError::CountsSum`]), a block longer than 16777200 bytes;
    /// that rank gets its reason, the others [`ArgumentError::RefusedBy`]
    /// naming the lowest refusing rank. A block of another length than
    /// announced ends the job (H1617 with ABORT reason 3 at the receiver).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     // rank 0 sends [] to 0 and [1, 2] to 1; rank 1 sends [3] to 0, [] to 1
    ///     let (data, counts) = if c.rank() == 0 { (vec![1u32, 2], [0, 2]) } else { (vec![3], [1, 0]) };
    ///     c.alltoallv(&data, &counts).unwrap()
    /// });
    /// assert_eq!(got[0].data, vec![3]);
    /// assert_eq!(got[1].data, vec![1, 2]);
    /// assert_eq!(got[1].counts, vec![2, 0]);
    /// ```
    pub fn alltoallv<T: Element>(&self, data: &[T], counts: &[usize]) -> Result<Blocks<T>, Error> {
        let size = self.size();
        let mine = send_slots::<T>(counts, data.len(), size);
        let sent = match &mine {
            Ok(s) => s.clone(),
            Err(_) => vec![REFUSED; size as usize],
        };
        let mut slots = Vec::with_capacity(size as usize);
        for k in 0..size {
            let offer = (k == self.rank()).then_some(&sent[..]);
            slots.push(self.scatter_slot(k, offer)?);
        }
        judge::<T>(&slots, mine.as_ref().err())?;
        let recv = counts_of::<T>(&slots);
        let mut out = Vec::with_capacity(recv.iter().sum());
        for k in 0..size {
            self.scatter_slotted(k, data, counts, recv[k as usize], &mut out)?;
        }
        Ok(Blocks {
            data: out,
            counts: recv,
        })
    }
}
