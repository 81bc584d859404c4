//! COMM_SELF (MPI's `MPI_COMM_SELF`): [`Comm::comm_self`], the
//! communicator of this rank alone.
//!
//! Its size is 1 and its rank 0, so every collective on it completes
//! locally (protocol §8.7, §15.2: a communicator of size 1 completes every
//! call locally) and sends no frame; a send to its rank 0 is a send to this
//! rank itself, which the transport queues locally
//! ([`Endpoint::send`](sperli_transport::Endpoint::send)): no frame is
//! written. Its id (4294967295) names no communicator on
//! the wire, so it needs no HELLO feature bit and it is in no rank's
//! registry (protocol §15.4 never judges a frame by it).

use std::sync::Arc;

use crate::comm::Comm;
use crate::communicators::Group;
use crate::peers::Peers;
use crate::state::State;

/// The id of COMM_SELF: above every id a frame may carry (protocol §15.2
/// rejects 2147483648 and above on arrival), so none names it.
pub(crate) const SELF_ID: u32 = u32::MAX;

impl<L: Peers> Comm<L> {
    /// The communicator of this rank alone (MPI's `MPI_COMM_SELF`): size 1,
    /// rank 0, its own sequence count; local (no traffic, in any job). Its
    /// collectives return this rank's own data or fold; point-to-point on
    /// it (where the link is the real transport) sends to and receives from
    /// this rank itself, with the job's tags (a message carries no
    /// communicator, protocol §15.2: a receive on COMM_SELF also takes a
    /// message this rank sent itself on the job's communicator with the
    /// same tag). A receive from any source is refused on it as on every
    /// communicator but the job's. It shares the link, as a communicator
    /// made by split does: drop it before [`Comm::into_link`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_collective::prelude::*;
    /// let out = fake::run(3, |c| {
    ///     let me = c.comm_self();
    ///     let mut v = vec![c.rank(); 2];
    ///     me.bcast(0, &mut v).unwrap();
    ///     (me.rank(), me.size(), me.allreduce_scalar(c.rank() + 10, Reduction::Sum).unwrap(), v)
    /// });
    /// assert_eq!(out[2], (0, 1, 12, vec![2, 2]));
    /// ```
    pub fn comm_self(&self) -> Comm<L> {
        let me: Arc<[u32]> = Arc::from([self.job_rank(self.rank())]);
        Comm::with_group(
            self.link.clone(),
            Arc::new(State::default()),
            false,
            Group::unregistered(SELF_ID, me),
            self.registry.clone(),
            0,
        )
    }
}
