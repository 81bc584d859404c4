//! The six v1 collectives at byte level: the star of protocol §8 around
//! the root (barrier and allreduce: rank 0), which every call of a job
//! without feature bit 1, and every small call of one with it, runs
//! (protocol §14.5).
//!
//! Payload buffers come from the link (`Peers::take_buffer`, a pool on the
//! real transport) and received ones go back (`Peers::recycle`) once read,
//! so steady traffic of large calls reuses buffers that are already
//! faulted in. Results are returned as the payload buffer
//! (data at `[16..]`); the caller reads it and recycles it.

use sperli_wire::abort::AbortReason;
use sperli_wire::collective::{Operation, Phase};
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::error::ArgumentError;
use sperli_wire::limits::MAX_COLLECTIVE_DATA;
use sperli_wire::reduce::combine_into;
use sperli_wire::Error;

use crate::comm::{Call, Comm, Src};
use crate::peers::Peers;
use crate::user::UserFold;

const H: usize = sperli_wire::limits::COLLECTIVE_HEADER_LEN;

impl<L: Peers> Comm<L> {
    /// barrier: empty phase 0 to rank 0, then empty phase 1 from rank 0.
    pub(crate) fn barrier_core(&self) -> Result<(), Error> {
        let seq = self.begin()?;
        if self.size == 1 {
            return Ok(());
        }
        let call = Call {
            op: Operation::Barrier,
            element_type: 0,
            reduction: 0,
            root: 0,
            seq,
            len: 0,
        };
        if self.rank == 0 && self.pair_exchange() {
            // Protocol §19.2: two ranks, rank 0 releases as it enters.
            return self.barrier_pair_root(&call);
        }
        if self.rank == 0 {
            for r in 1..self.size {
                let p = self.recv_coll(&call, Phase::ToRoot, r)?;
                self.expect_len(r, 0, p.len() - H)?;
            }
            let p = call.header(Phase::FromRoot);
            for r in 1..self.size {
                self.send_coll(r, &p)?;
            }
        } else {
            self.send_coll(0, &call.header(Phase::ToRoot))?;
            let p = self.recv_coll(&call, Phase::FromRoot, 0)?;
            self.expect_len(0, 0, p.len() - H)?;
        }
        Ok(())
    }

    /// bcast. At the root returns `None` (its data is the result); at
    /// other ranks the received payload (data at `[16..]`), checked to be
    /// whole `width`-byte elements and, if `expect` is given, that long.
    pub(crate) fn bcast_core<D: Src + ?Sized>(
        &self,
        root: u32,
        root_data: &D,
        width: usize,
        expect: Option<usize>,
    ) -> Result<Option<Vec<u8>>, Error> {
        let seq = self.begin()?;
        self.check_root(root)?;
        let call = Call {
            op: Operation::Bcast,
            element_type: 0,
            reduction: 0,
            root,
            seq,
            len: root_data.byte_len(),
        };
        if self.rank == root {
            let len = root_data.byte_len();
            if len > MAX_COLLECTIVE_DATA {
                return self.root_data_too_long(len);
            }
            if self.size == 1 {
                return Ok(None);
            }
            // Protocol §8.2; with bit 8 to the root's binomial children
            // (§21.2).
            let to = self.first_frame_targets(root);
            let head = call.header(Phase::FromRoot);
            self.send_headed_each(&to, &head, root_data, 0..len)?;
            Ok(None)
        } else {
            let from = self.first_frame_source(root);
            let p = self.recv_coll(&call, Phase::FromRoot, from)?;
            let got = p.len() - H;
            match expect {
                Some(n) => self.expect_len(from, n, got)?,
                None => self.expect_whole(from, width, got)?,
            }
            // Protocol §21.2: a checked frame goes on unchanged to this
            // rank's children (none without bit 8).
            self.send_each(&self.first_frame_targets(root), &p)?;
            Ok(Some(p))
        }
    }

    /// Argument checks of reduce/allreduce (protocol §8.4), H1618; with
    /// `user` those of a user-defined reduction (code 13, protocol §17.4,
    /// which needs feature bit 4 on every rank, §17.1).
    pub(crate) fn reduce_args(
        &self,
        root: u32,
        len: usize,
        element_type: u8,
        reduction: u8,
        user: bool,
    ) -> Result<(ElementType, Reduction), Error> {
        self.check_root(root)?;
        let t = ElementType::from_code(element_type)?;
        // Protocol §8.4, with §17.1-§17.2 for the codes of bit 4.
        let r = if user {
            self.check_user_reduction(len, t)?;
            Reduction::User
        } else {
            let r = Reduction::from_code(reduction)?;
            self.check_reduction(len, t, r)?;
            r
        };
        if len > MAX_COLLECTIVE_DATA {
            return Err(ArgumentError::TooLong {
                len,
                max: MAX_COLLECTIVE_DATA,
            }
            .into());
        }
        Ok((t, r))
    }

    /// reduce (`allreduce == false`) or allreduce. Returns the payload
    /// buffer holding the result at `[16..]` where the rank has a result
    /// (the root; every rank for allreduce), else `None`. The root folds in
    /// place into the first operand's buffer (rank 0's payload, or its own
    /// data), then recycles every other received buffer. `user` folds a
    /// user-defined reduction (code 13, protocol §17.4) as
    /// `user(acc, c_i)`; `None` is the built-in fold of `reduction`.
    pub(crate) fn reduce_core<D: Src + ?Sized>(
        &self,
        allreduce: bool,
        root: u32,
        data: &D,
        element_type: u8,
        reduction: u8,
        mut user: Option<UserFold<'_>>,
    ) -> Result<Option<Vec<u8>>, Error> {
        let seq = self.begin()?;
        let root = if allreduce { 0 } else { root };
        let len = data.byte_len();
        let (t, red) = self.reduce_args(root, len, element_type, reduction, user.is_some())?;
        let call = Call {
            op: if allreduce {
                Operation::Allreduce
            } else {
                Operation::Reduce
            },
            element_type,
            reduction,
            root,
            seq,
            len,
        };
        if self.size == 1 {
            return Ok(Some(self.payload(&call, Phase::FromRoot, data, 0..len)));
        }
        if allreduce && user.is_none() && self.pair_exchange() {
            // Protocol §19.3: both ranks fold combine(c_0, c_1), rank 1 in
            // place into rank 0's payload, rank 0 into a copy of its own.
            return self.allreduce_pair(&call, data, |c, theirs| {
                let folded = if c.rank == 1 {
                    let mut acc = theirs;
                    c.with_bytes(data, 0..len, |o| combine_into(&mut acc[H..], o, t, red))
                        .map(|()| acc)
                } else {
                    let mut acc = c.payload(&call, Phase::FromRoot, data, 0..len);
                    let r = combine_into(&mut acc[H..], &theirs[H..], t, red);
                    c.recycle(theirs);
                    r.map(|()| acc)
                };
                match folded {
                    Ok(acc) => Ok(Some(acc)),
                    Err(e) => c.fail_job(AbortReason::CollectiveMismatch, e.into()),
                }
            });
        }
        if self.rank != root {
            self.send_data(root, &call, Phase::ToRoot, data, 0..len)?;
            if !allreduce {
                return Ok(None);
            }
            let p = self.recv_coll(&call, Phase::FromRoot, root)?;
            self.expect_len(root, len, p.len() - H)?;
            return Ok(Some(p));
        }
        // The root: fold in ascending rank order, left operand = lower ranks.
        let mut acc: Option<Vec<u8>> = None;
        for r in 0..self.size {
            let contribution = if r == root {
                if acc.is_none() {
                    acc = Some(self.payload(&call, Phase::FromRoot, data, 0..len));
                    continue;
                }
                self.bytes(data, 0..len)
            } else {
                let p = self.recv_coll(&call, Phase::ToRoot, r)?;
                self.expect_contribution(len, &p)?;
                if acc.is_none() {
                    acc = Some(p);
                    continue;
                }
                p
            };
            let off = if r == root { 0 } else { H };
            let a = acc.as_mut().expect("set above");
            match user.as_mut() {
                Some(f) => f(&mut a[H..], &contribution[off..]),
                None => {
                    if let Err(e) = combine_into(&mut a[H..], &contribution[off..], t, red) {
                        return self.fail_job(AbortReason::CollectiveMismatch, e.into());
                    }
                }
            }
            self.recycle(contribution);
        }
        let mut acc = acc.expect("size >= 1");
        acc[..H].copy_from_slice(&call.header(Phase::FromRoot));
        if allreduce {
            let to: Vec<u32> = (1..self.size).collect();
            self.send_each(&to, &acc)?;
        }
        Ok(Some(acc))
    }

    /// A contribution of another length than the root's own ends the job:
    /// the lengths are data of a call, H1618 (protocol §8.4).
    pub(crate) fn expect_contribution(&self, len: usize, payload: &[u8]) -> Result<(), Error> {
        if payload.len() - H == len {
            return Ok(());
        }
        let e = ArgumentError::LengthMismatch {
            left: len,
            right: payload.len() - H,
        };
        self.fail_job(AbortReason::CollectiveMismatch, e.into())
    }

    /// The root of a v1 reduce of a built-in reduction, folding straight
    /// into `out` (the caller's buffer as little-endian bytes, as long as
    /// `data`): the first contribution in rank order is copied there and
    /// every later one folded into it, the lower ranks' partial the left
    /// operand (protocol §8.2). The same frames, checks and operations in
    /// the same order as [`Comm::reduce_core`] at the root, without its
    /// payload buffer and the copy out of it. On one rank it is also what
    /// an allreduce is: the checks, then the one contribution copied
    /// (protocol §8.7).
    pub(crate) fn reduce_root_into<D: Src + ?Sized>(
        &self,
        root: u32,
        data: &D,
        element_type: u8,
        reduction: u8,
        out: &mut [u8],
    ) -> Result<(), Error> {
        let (call, t, red) =
            self.reduce_call_for(Operation::Reduce, root, data, element_type, reduction, out)?;
        let len = call.len;
        for r in 0..self.size {
            let received = if r == root {
                None
            } else {
                let p = self.recv_coll(&call, Phase::ToRoot, r)?;
                self.expect_contribution(len, &p)?;
                Some(p)
            };
            let fold = |out: &mut [u8], c: &[u8]| {
                if r == 0 {
                    out.copy_from_slice(c);
                    return Ok(());
                }
                combine_into(out, c, t, red)
            };
            let folded = match received {
                Some(p) => {
                    let f = fold(out, &p[H..]);
                    self.recycle(p);
                    f
                }
                None => self.with_bytes(data, 0..len, |own| fold(out, own)),
            };
            if let Err(e) = folded {
                return self.fail_job(AbortReason::CollectiveMismatch, e.into());
            }
        }
        Ok(())
    }

    /// The start of a built-in reduction into the caller's `out`: the
    /// call's sequence number, the argument checks of protocol §8.4 (H1618)
    /// and the call's header values.
    pub(crate) fn reduce_call_for<D: Src + ?Sized>(
        &self,
        op: Operation,
        root: u32,
        data: &D,
        element_type: u8,
        reduction: u8,
        out: &[u8],
    ) -> Result<(Call, ElementType, Reduction), Error> {
        let seq = self.begin()?;
        let len = data.byte_len();
        let (t, red) = self.reduce_args(root, len, element_type, reduction, false)?;
        debug_assert_eq!(out.len(), len, "the caller checked the lengths");
        let call = Call {
            op,
            element_type,
            reduction,
            root,
            seq,
            len,
        };
        Ok((call, t, red))
    }

    /// gather: calls `sink` at the root with every block in rank order.
    pub(crate) fn gather_core<D: Src + ?Sized>(
        &self,
        root: u32,
        data: &D,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<bool, Error> {
        let seq = self.begin()?;
        self.check_root(root)?;
        let len = data.byte_len();
        if len > MAX_COLLECTIVE_DATA {
            return Err(ArgumentError::TooLong {
                len,
                max: MAX_COLLECTIVE_DATA,
            }
            .into());
        }
        let call = Call {
            op: Operation::Gather,
            element_type: 0,
            reduction: 0,
            root,
            seq,
            len: data.byte_len(),
        };
        if self.rank != root {
            self.send_data(root, &call, Phase::ToRoot, data, 0..len)?;
            return Ok(false);
        }
        for r in 0..self.size {
            if r == root {
                self.with_bytes(data, 0..len, &mut sink);
            } else {
                let p = self.recv_coll(&call, Phase::ToRoot, r)?;
                // Protocol §8.4: gather blocks of different lengths: H1617.
                self.expect_len(r, len, p.len() - H)?;
                sink(&p[H..]);
                self.recycle(p);
            }
        }
        Ok(true)
    }

    /// scatter: the root's `data` is `size` blocks of `width`-byte
    /// elements; returns this rank's block (at the root a copy, elsewhere
    /// the payload's `[16..]` — see the `usize` offset returned).
    pub(crate) fn scatter_core<D: Src + ?Sized>(
        &self,
        root: u32,
        data: &D,
        width: usize,
        expect: Option<usize>,
    ) -> Result<(Vec<u8>, usize), Error> {
        let seq = self.begin()?;
        self.check_root(root)?;
        let call = Call {
            op: Operation::Scatter,
            element_type: 0,
            reduction: 0,
            root,
            seq,
            len: 0,
        };
        let size = self.size as usize;
        if self.rank == root {
            let len = data.byte_len();
            let elems = len / width;
            let block = (elems / size) * width;
            if len % width != 0 || elems % size != 0 || block > MAX_COLLECTIVE_DATA {
                return self.fail_job(
                    AbortReason::InvalidScatter,
                    ArgumentError::ScatterBlocks {
                        len,
                        size: self.size,
                    }
                    .into(),
                );
            }
            for r in (0..self.size).filter(|&r| r != root) {
                let i = r as usize;
                self.send_data(r, &call, Phase::FromRoot, data, i * block..(i + 1) * block)?;
            }
            let i = root as usize;
            Ok((self.bytes(data, i * block..(i + 1) * block), 0))
        } else {
            let p = self.recv_coll(&call, Phase::FromRoot, root)?;
            let got = p.len() - H;
            match expect {
                Some(n) => self.expect_len(root, n, got)?,
                None => self.expect_whole(root, width, got)?,
            }
            Ok((p, H))
        }
    }
}
