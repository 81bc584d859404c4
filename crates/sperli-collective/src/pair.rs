//! The pair exchange of HELLO feature bit 6 (protocol §19): on a
//! communicator of two ranks, barrier and the star's allreduce exchange
//! one frame each way instead of meeting at rank 0, so they take one
//! one-way latency instead of two. The frames and the checks of a taken
//! frame are those of the v1 star (protocol §8.4, §8.6).

use sperli_wire::abort::AbortReason;
use sperli_wire::collective::{Operation, Phase};
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::reduce::combine_into;
use sperli_wire::Error;

use crate::comm::{Call, Comm, Src};
use crate::peers::Peers;

const H: usize = sperli_wire::limits::COLLECTIVE_HEADER_LEN;

impl<L: Peers> Comm<L> {
    /// Whether barrier and the star's allreduce run the pair exchange
    /// (protocol §19.1): bit 6 on every rank and two ranks.
    pub(crate) fn pair_exchange(&self) -> bool {
        sperli_wire::pair::pair_exchange(self.size, self.features)
    }

    /// Rank 0's part of a two-rank barrier (protocol §19.2): its phase-1
    /// frame goes out when it enters, then it takes rank 1's phase-0 frame.
    pub(crate) fn barrier_pair_root(&self, call: &Call) -> Result<(), Error> {
        self.send_coll(1, &call.header(Phase::FromRoot))?;
        let p = self.recv_coll(call, Phase::ToRoot, 1)?;
        self.expect_len(1, 0, p.len() - H)
    }

    /// A two-rank allreduce (protocol §19.3): this rank's contribution
    /// goes to the other in a phase-0 frame, the other's is taken (the
    /// checks of a root taking a contribution, protocol §8.4: H1618 for
    /// another length), and `fold(c_0, c_1)` is what both ranks compute,
    /// rank 0's contribution the left operand (§8.2). Returns the other's
    /// payload (data at `[16..]`) for `fold`.
    pub(crate) fn allreduce_pair<D: Src + ?Sized, R>(
        &self,
        call: &Call,
        data: &D,
        fold: impl FnOnce(&Self, Vec<u8>) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let other = 1 - self.rank;
        self.send_data(other, call, Phase::ToRoot, data, 0..call.len)?;
        let p = self.recv_coll(call, Phase::ToRoot, other)?;
        self.expect_contribution(call.len, &p)?;
        fold(self, p)
    }

    /// A two-rank allreduce of a built-in reduction straight into `out`
    /// (the caller's buffer as little-endian bytes, as long as `data`):
    /// the checks of protocol §8.4, then [`Comm::allreduce_pair`] with
    /// one copy and one fold into `out`.
    pub(crate) fn allreduce_pair_into<D: Src + ?Sized>(
        &self,
        data: &D,
        element_type: u8,
        reduction: u8,
        out: &mut [u8],
    ) -> Result<(), Error> {
        let (call, t, red) =
            self.reduce_call_for(Operation::Allreduce, 0, data, element_type, reduction, out)?;
        self.allreduce_pair(&call, data, |c, p| {
            let r = c.pair_fold_into(data, &p[H..], t, red, out);
            c.recycle(p);
            r
        })
    }

    /// The fold of a two-rank allreduce into `out` (as long as `own`):
    /// `combine(c_0, c_1)` with `theirs` the other rank's data.
    pub(crate) fn pair_fold_into<D: Src + ?Sized>(
        &self,
        own: &D,
        theirs: &[u8],
        t: ElementType,
        red: Reduction,
        out: &mut [u8],
    ) -> Result<(), Error> {
        let folded = if self.rank == 0 {
            self.with_bytes(own, 0..out.len(), |o| out.copy_from_slice(o));
            combine_into(out, theirs, t, red)
        } else {
            out.copy_from_slice(theirs);
            self.with_bytes(own, 0..out.len(), |o| combine_into(out, o, t, red))
        };
        match folded {
            Ok(()) => Ok(()),
            Err(e) => self.fail_job(AbortReason::CollectiveMismatch, e.into()),
        }
    }
}
