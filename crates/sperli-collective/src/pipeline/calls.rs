//! The entry points the public calls use when protocol §14.5 says a call
//! runs pipelined: the sequence number and every before-send argument check
//! of protocol §8.4 first, as for the star, then the shape.

use sperli_wire::collective::Operation;
use sperli_wire::error::ArgumentError;
use sperli_wire::limits::MAX_COLLECTIVE_DATA;
use sperli_wire::{ElementType, Error, Reduction};

use super::chain::ChainOp;
use super::Sink;
use crate::comm::{Call, Comm, Src};
use crate::peers::Peers;

impl<L: Peers> Comm<L> {
    /// A pipelined reduce (`root`), allreduce or reduce_scatter of `data`
    /// with wire codes `element_type` and `reduction` into `out` (see
    /// [`Comm::chain`]). Takes the call's sequence number, then refuses with
    /// H1618 on every rank before anything is sent (protocol §8.4) for a
    /// root >= size, a refused pair, data that is not whole elements, or,
    /// unless `large`, data longer than 16777200 bytes. Returns whether this
    /// rank has a result.
    pub(crate) fn chain_call<D: Src + ?Sized>(
        &self,
        kind: ChainOp,
        data: &D,
        element_type: u8,
        reduction: u8,
        large: bool,
        out: &mut dyn Sink,
    ) -> Result<bool, Error> {
        let seq = self.begin()?;
        let (op, root) = match kind {
            ChainOp::Reduce { root } => (Operation::Reduce, root),
            ChainOp::Allreduce => (Operation::Allreduce, 0),
            ChainOp::ReduceScatter => (Operation::ReduceScatter, 0),
        };
        let len = data.byte_len();
        self.check_root(root)?;
        let t = ElementType::from_code(element_type)?;
        let r = Reduction::from_code(reduction)?;
        // Protocol §8.4, with §17.1-§17.2 for the codes of bit 4.
        self.check_reduction(len, t, r)?;
        if !large && len > MAX_COLLECTIVE_DATA {
            return Err(ArgumentError::TooLong {
                len,
                max: MAX_COLLECTIVE_DATA,
            }
            .into());
        }
        let call = Call {
            op,
            element_type,
            reduction,
            root,
            seq,
            len,
        };
        if kind == ChainOp::Allreduce && self.runs_owner_fold(len) {
            // Protocol §20: with bit 7 the owner fold, not the chain.
            self.owner_fold(&call, data, t, r, out)?;
            return Ok(true);
        }
        self.chain(&call, kind, data, t, r, out)
    }

    /// A pipelined allgather (operation 7) of this rank's block `data` into
    /// `out` (every block in rank order). The caller has made the
    /// before-send checks (protocol §8.4).
    pub(crate) fn allgather_call<D: Src + ?Sized>(
        &self,
        data: &D,
        out: &mut dyn Sink,
    ) -> Result<(), Error> {
        let seq = self.begin()?;
        let call = Call {
            op: Operation::Allgather,
            element_type: 0,
            reduction: 0,
            root: 0,
            seq,
            len: data.byte_len(),
        };
        self.allgather_ring(&call, data, out)
    }
}
