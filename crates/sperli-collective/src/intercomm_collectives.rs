//! Collectives across the two groups of an [`Intercomm`] (MPI's
//! intercommunicator collectives; protocol §15.6): built from ordinary
//! calls, no new frame. Messages between the groups are point-to-point
//! messages of protocol §16 on the intercommunicator's id with the
//! reserved tag [`COLL_TAG`]; what moves inside a group runs as the
//! collectives of the group's local communicator (a dup of the one the
//! intercommunicator was made from, protocol §15.3).
//!
//! | call | messages |
//! |---|---|
//! | `barrier` | local barrier; the leaders (rank 0 of each group) swap an empty message; local bcast from the leader |
//! | `bcast`, `scatter(v)` | the root sends to every remote rank, in rank order |
//! | `gather(v)` | every remote rank sends to the root, which takes them in rank order |
//! | `allgather(v)` | local gatherv to the leader; the leaders swap the counts, then the blocks; local bcasts of both |
//! | `alltoall(v)` | every rank sends block j to remote rank j, then takes one block from each remote rank in rank order |
//! | `reduce` | the contributing group reduces to its leader (local reduce), which sends the result to the root |
//! | `allreduce` | local reduce to the leader; the leaders swap; local bcast |
//! | `reduce_scatter(_block)` | local reduce to the leader; the leaders swap; local scatter(v) of the other group's result |
//!
//! Every reduction is the local communicator's (protocol §8): the fold
//! runs over the contributing group in ascending rank order, left operand
//! first, so a result is the same bits as the serial left fold.
//!
//! A root is given as an [`InterRoot`] (MPI's `MPI_ROOT`, `MPI_PROC_NULL`
//! or the root's rank in the remote group).

use sperli_wire::abort::AbortReason;
use sperli_wire::error::{ArgumentError, MismatchError};
use sperli_wire::limits::MAX_USER_TAG;
use sperli_wire::{Error, Reduction};

use crate::element::Element;
use crate::intercomm::Intercomm;
use crate::p2p::HasEndpoint;
use crate::vcoll::Blocks;

/// The tag of every message between the groups of an intercommunicator
/// collective, on the intercommunicator (protocol §15.6; the top of the
/// user tag range, below [`MERGE_TAG`](crate::intercomm::MERGE_TAG)).
pub const COLL_TAG: u32 = MAX_USER_TAG - 1;

/// The root of a rooted intercommunicator collective, as each rank names
/// it (MPI's conventions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterRoot {
    /// This rank is the root (MPI's `MPI_ROOT`).
    Here,
    /// Another rank of this rank's group is the root: this rank takes no
    /// part (MPI's `MPI_PROC_NULL`).
    Null,
    /// The root is this rank of the remote group.
    Remote(u32),
}

impl<L: HasEndpoint> Intercomm<L> {
    /// H1618 (refused before anything is sent) for a remote root not
    /// below the remote group's size.
    fn check_inter_root(&self, root: InterRoot) -> Result<(), Error> {
        match root {
            InterRoot::Remote(r) if r >= self.remote_size() => Err(ArgumentError::Root {
                root: r,
                size: self.remote_size(),
            }
            .into()),
            _ => Ok(()),
        }
    }

    /// A check only this rank can make failed: the job ends (ABORT with
    /// `reason`, protocol §8.4), as a root's own check of the local
    /// collectives does.
    fn end_job<X>(&self, reason: AbortReason, e: ArgumentError) -> Result<X, Error> {
        self.local().fail_job(reason, e.into())
    }

    /// H1617 (ABORT reason 3) for a block from remote rank `from` of
    /// another length than the call needs.
    fn block_len(&self, from: u32, expected: usize, got: usize) -> Result<(), Error> {
        if expected == got {
            return Ok(());
        }
        self.local().mismatch(MismatchError::Length {
            from: self.remote().job_rank(from),
            expected: expected as u64,
            got: got as u64,
        })
    }

    /// `len` elements as `size` equal blocks' counts; the job ends (H1618,
    /// ABORT reason 4: only this rank sees it) when they are not.
    fn equal_counts<T: Element>(&self, len: usize, size: u32) -> Result<Vec<usize>, Error> {
        if len % size as usize != 0 {
            let e = ArgumentError::ScatterBlocks {
                len: len * T::WIDTH,
                size,
            };
            return self.end_job(AbortReason::InvalidScatter, e);
        }
        Ok(vec![len / size as usize; size as usize])
    }

    /// The blocks of the remote ranks, which must have one length (H1617,
    /// ABORT reason 3 for the first that differs from remote rank 0's).
    fn equal_blocks<T>(&self, b: Blocks<T>) -> Result<Vec<T>, Error> {
        let first = b.counts.first().copied().unwrap_or(0);
        for (r, &c) in b.counts.iter().enumerate() {
            self.block_len(r as u32, first, c)?;
        }
        Ok(b.data)
    }

    /// The leaders swap `mine` on the intercommunicator (tag
    /// [`COLL_TAG`], the receive posted first); every rank of the group
    /// gets what its leader received (a local bcast). `mine` matters at
    /// the leader only.
    fn swap_share<T: Element>(&self, mine: &[T]) -> Result<Vec<T>, Error> {
        let mut theirs = Vec::new();
        if self.rank() == 0 {
            let (_, got) =
                self.remote()
                    .sendrecv::<T, T>(0, COLL_TAG, mine, Some(0), Some(COLL_TAG))?;
            theirs = got;
        }
        self.local().bcast_counted(0, &mut theirs)?;
        Ok(theirs)
    }

    /// The reduction of the local group's `data` (ascending local rank
    /// order), swapped for the remote group's: at the leader only (`None`
    /// elsewhere).
    fn leaders_reduce_swap<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
    ) -> Result<Option<Vec<T>>, Error> {
        let mine = self.local().reduce(0, data, op)?;
        match mine {
            Some(v) => {
                let (_, got) =
                    self.remote()
                        .sendrecv::<T, T>(0, COLL_TAG, &v, Some(0), Some(COLL_TAG))?;
                self.block_len(0, v.len(), got.len())?;
                Ok(Some(got))
            }
            None => Ok(None),
        }
    }

    /// MPI's intercommunicator `MPI_Barrier`: returns once every rank of
    /// both groups has entered it.
    pub fn barrier(&self) -> Result<(), Error> {
        self.local().barrier()?;
        self.swap_share::<u8>(&[])?;
        Ok(())
    }

    /// MPI's intercommunicator `MPI_Bcast`: the root's `buf` into `buf` of
    /// every rank of the remote group; the root's own group
    /// ([`InterRoot::Null`]) takes no part. A remote root not below the
    /// remote size: H1618 before anything is sent.
    pub fn bcast<T: Element>(&self, root: InterRoot, buf: &mut Vec<T>) -> Result<(), Error> {
        self.check_inter_root(root)?;
        match root {
            InterRoot::Here => {
                for r in 0..self.remote_size() {
                    self.remote().send(r, COLL_TAG, buf)?;
                }
            }
            InterRoot::Null => {}
            InterRoot::Remote(r) => *buf = self.remote().recv(r, COLL_TAG)?,
        }
        Ok(())
    }

    /// MPI's intercommunicator `MPI_Gather`: every rank of the remote
    /// group sends `data` (one length for all); the root gets them in
    /// remote rank order (`Some`), every other rank `None`. A block of
    /// another length than remote rank 0's: H1617, ABORT reason 3.
    pub fn gather<T: Element>(&self, root: InterRoot, data: &[T]) -> Result<Option<Vec<T>>, Error> {
        match self.gatherv(root, data)? {
            Some(b) => Ok(Some(self.equal_blocks(b)?)),
            None => Ok(None),
        }
    }

    /// MPI's intercommunicator `MPI_Gatherv`: as [`Intercomm::gather`],
    /// blocks of any length.
    pub fn gatherv<T: Element>(
        &self,
        root: InterRoot,
        data: &[T],
    ) -> Result<Option<Blocks<T>>, Error> {
        self.check_inter_root(root)?;
        match root {
            InterRoot::Here => {
                let mut out = Blocks {
                    data: Vec::new(),
                    counts: Vec::with_capacity(self.remote_size() as usize),
                };
                for r in 0..self.remote_size() {
                    let v: Vec<T> = self.remote().recv(r, COLL_TAG)?;
                    out.counts.push(v.len());
                    out.data.extend_from_slice(&v);
                }
                Ok(Some(out))
            }
            InterRoot::Null => Ok(None),
            InterRoot::Remote(r) => {
                self.remote().send(r, COLL_TAG, data)?;
                Ok(None)
            }
        }
    }

    /// MPI's intercommunicator `MPI_Scatter`: the root's `data`, remote
    /// size equal blocks, block i to remote rank i (the others pass
    /// `None`; the root and its group get an empty vector). Root data that
    /// is not remote size equal blocks ends the job (H1618, ABORT reason
    /// 4: only the root sees it).
    pub fn scatter<T: Element>(
        &self,
        root: InterRoot,
        data: Option<&[T]>,
    ) -> Result<Vec<T>, Error> {
        self.check_inter_root(root)?;
        if root != InterRoot::Here {
            return self.scatterv(root, None);
        }
        let d = data.unwrap_or(&[]);
        let counts = self.equal_counts::<T>(d.len(), self.remote_size())?;
        self.scatterv(root, Some((d, &counts)))
    }

    /// MPI's intercommunicator `MPI_Scatterv`: as [`Intercomm::scatter`],
    /// block i of `counts[i]` elements (the root's `data` and counts). Not
    /// one count per remote rank, or counts that do not add up to the
    /// data, end the job (H1618, ABORT reason 4).
    pub fn scatterv<T: Element>(
        &self,
        root: InterRoot,
        data: Option<(&[T], &[usize])>,
    ) -> Result<Vec<T>, Error> {
        self.check_inter_root(root)?;
        match root {
            InterRoot::Here => {
                let (d, counts) = data.unwrap_or((&[], &[]));
                self.check_counts(d.len(), counts, self.remote_size())?;
                let mut at = 0;
                for (r, &c) in counts.iter().enumerate() {
                    self.remote().send(r as u32, COLL_TAG, &d[at..at + c])?;
                    at += c;
                }
                Ok(Vec::new())
            }
            InterRoot::Null => Ok(Vec::new()),
            InterRoot::Remote(r) => self.remote().recv(r, COLL_TAG),
        }
    }

    /// Ends the job (H1618, ABORT reason 4) unless `counts` has one count
    /// per rank of a group of `size` adding up to `len`.
    fn check_counts(&self, len: usize, counts: &[usize], size: u32) -> Result<(), Error> {
        if counts.len() != size as usize {
            let e = ArgumentError::Counts {
                got: counts.len(),
                size,
            };
            return self.end_job(AbortReason::InvalidScatter, e);
        }
        let sum: u64 = counts.iter().map(|&c| c as u64).sum();
        if sum != len as u64 {
            return self.end_job(
                AbortReason::InvalidScatter,
                ArgumentError::CountsSum { sum, len },
            );
        }
        Ok(())
    }

    /// MPI's intercommunicator `MPI_Allgather`: every rank gets the remote
    /// group's `data` (one length within a group), in remote rank order.
    /// Blocks of different lengths within the remote group: H1617, ABORT
    /// reason 3.
    pub fn allgather<T: Element>(&self, data: &[T]) -> Result<Vec<T>, Error> {
        let b = self.allgatherv(data)?;
        self.equal_blocks(b)
    }

    /// MPI's intercommunicator `MPI_Allgatherv`: as
    /// [`Intercomm::allgather`], blocks of any length (the counts travel
    /// with them). A record from the other leader whose counts do not
    /// fit its blocks: H1617, ABORT reason 3.
    pub fn allgatherv<T: Element>(&self, data: &[T]) -> Result<Blocks<T>, Error> {
        let mine = self.local().gatherv(0, data)?;
        let (counts, blocks): (Vec<u64>, &[T]) = match &mine {
            Some(b) => (b.counts.iter().map(|&c| c as u64).collect(), &b.data),
            None => (Vec::new(), &[]),
        };
        let counts = self.swap_share(&counts)?;
        let data = self.swap_share(blocks)?;
        let sum: u64 = counts.iter().sum();
        if counts.len() != self.remote_size() as usize || sum != data.len() as u64 {
            return self.local().mismatch(MismatchError::Length {
                from: self.remote().job_rank(0),
                expected: sum,
                got: data.len() as u64,
            });
        }
        Ok(Blocks {
            data,
            counts: counts.iter().map(|&c| c as usize).collect(),
        })
    }

    /// MPI's intercommunicator `MPI_Alltoall`: `data` is remote size equal
    /// blocks, block j to remote rank j; the result holds one block from
    /// each remote rank, in remote rank order. `data` that is not remote
    /// size equal blocks ends the job (H1618, ABORT reason 4); blocks of
    /// different lengths from the remote ranks: H1617, ABORT reason 3.
    pub fn alltoall<T: Element>(&self, data: &[T]) -> Result<Vec<T>, Error> {
        let counts = self.equal_counts::<T>(data.len(), self.remote_size())?;
        let b = self.alltoallv(data, &counts)?;
        self.equal_blocks(b)
    }

    /// MPI's intercommunicator `MPI_Alltoallv`: `data` is the blocks one
    /// after the other, block j of `counts[j]` elements to remote rank j;
    /// the result holds the block from each remote rank, in remote rank
    /// order. Not one count per remote rank, or counts that do not add up
    /// to `data`, end the job (H1618, ABORT reason 4).
    pub fn alltoallv<T: Element>(&self, data: &[T], counts: &[usize]) -> Result<Blocks<T>, Error> {
        self.check_counts(data.len(), counts, self.remote_size())?;
        let mut sends = Vec::with_capacity(counts.len());
        let mut at = 0;
        for (r, &c) in counts.iter().enumerate() {
            sends.push(self.remote().isend(r as u32, COLL_TAG, &data[at..at + c])?);
            at += c;
        }
        let mut out = Blocks {
            data: Vec::new(),
            counts: Vec::with_capacity(counts.len()),
        };
        for r in 0..self.remote_size() {
            let v: Vec<T> = self.remote().recv(r, COLL_TAG)?;
            out.counts.push(v.len());
            out.data.extend_from_slice(&v);
        }
        self.remote().wait_all_sends(sends)?;
        Ok(out)
    }

    /// MPI's intercommunicator `MPI_Reduce`: the remote group's `data`
    /// (every rank of it passes [`InterRoot::Remote`]) reduced with `op`
    /// in ascending remote rank order, left operand first, at the root
    /// (`Some`); `None` everywhere else. The contributing group's lengths
    /// are checked as the local reduce checks them.
    pub fn reduce<T: Element>(
        &self,
        root: InterRoot,
        data: &[T],
        op: Reduction,
    ) -> Result<Option<Vec<T>>, Error> {
        self.check_inter_root(root)?;
        match root {
            InterRoot::Here => Ok(Some(self.remote().recv(0, COLL_TAG)?)),
            InterRoot::Null => Ok(None),
            InterRoot::Remote(r) => {
                if let Some(v) = self.local().reduce(0, data, op)? {
                    self.remote().send(r, COLL_TAG, &v)?;
                }
                Ok(None)
            }
        }
    }

    /// MPI's intercommunicator `MPI_Allreduce`: every rank gets the
    /// remote group's `data` reduced with `op` in ascending remote rank
    /// order, left operand first. Groups of different lengths: H1617,
    /// ABORT reason 3 at the leaders.
    pub fn allreduce<T: Element>(&self, data: &[T], op: Reduction) -> Result<Vec<T>, Error> {
        let theirs = self.leaders_reduce_swap(data, op)?.unwrap_or_default();
        let mut out = theirs;
        self.local().bcast_counted(0, &mut out)?;
        Ok(out)
    }

    /// MPI's intercommunicator `MPI_Reduce_scatter_block`: the remote
    /// group's `data` reduced with `op` (ascending remote rank order),
    /// scattered over this group in local size equal blocks (rank i gets
    /// block i). Both groups pass data of one length. Data that is not
    /// local size equal blocks ends the job (H1618, ABORT reason 4); a
    /// remote length of another total: H1617, ABORT reason 3.
    pub fn reduce_scatter_block<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
    ) -> Result<Vec<T>, Error> {
        let counts = self.equal_counts::<T>(data.len(), self.size())?;
        self.reduce_scatter(data, &counts, op)
    }

    /// MPI's intercommunicator `MPI_Reduce_scatter`: as
    /// [`Intercomm::reduce_scatter_block`], block i of `counts[i]`
    /// elements (one count per local rank, adding up to `data`'s length,
    /// the same on every rank of the group; else the job ends: H1618,
    /// ABORT reason 4).
    pub fn reduce_scatter<T: Element>(
        &self,
        data: &[T],
        counts: &[usize],
        op: Reduction,
    ) -> Result<Vec<T>, Error> {
        self.check_counts(data.len(), counts, self.size())?;
        let theirs = self.leaders_reduce_swap(data, op)?;
        self.local()
            .scatterv(0, theirs.as_deref().map(|v| (v, counts)))
    }
}
