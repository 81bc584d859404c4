//! Going on after a lost rank (feature bit 5, protocol §18.8): once a
//! call returned `RecoveryError::Revoked`, [`Comm::recover`] waits for the
//! membership the launcher decides and gives the job's communicator over
//! its members.

use std::sync::Arc;

use sperli_transport::Recovered;
use sperli_wire::recovery::RecoveryError;
use sperli_wire::Error;

use crate::comm::Comm;
use crate::communicators::Group;
use crate::peers::Peers;
use crate::state::State;

impl<L: Peers> Comm<L> {
    /// After a call returned `RecoveryError::Revoked` (a rank was lost,
    /// protocol §18.6): waits until the launcher's MEMBERSHIP record is
    /// applied, then returns the job's communicator over the members of
    /// the new epoch and what the record says ([`Recovered`]: epoch, mode,
    /// the failed ranks). In the shrink mode (`sperli run --recover
    /// shrink`) the members are the survivors, ranked in their job order
    /// (protocol §18.8, ULFM's `MPIX_Comm_shrink` of the world); its
    /// collectives start new sequence numbers and fold in ascending rank
    /// order over the members, so they stay bit-identical to the star over
    /// them. Communicators made before the failure are void: make new
    /// ones from the returned communicator. Without a revoke it returns at
    /// once, with the membership in force.
    ///
    /// ```
    /// use sperli_collective::fake::FakePeers;
    /// use sperli_collective::Comm;
    /// // Peers without recovery: every rank is a member, epoch 0.
    /// let comm = Comm::new(FakePeers::job(1).remove(0));
    /// let (world, m) = comm.recover().unwrap();
    /// assert_eq!((world.size(), m.members), (1, vec![0]));
    /// ```
    pub fn recover(&self) -> Result<(Comm<L>, Recovered), Error> {
        let m = self.link.recover()?;
        let me = self.link.rank();
        let Some(rank) = m.members.iter().position(|r| *r == me) else {
            // A rank that is no member was fenced (protocol §18.3 check 18).
            return Err(RecoveryError::Fenced { epoch: m.epoch }.into());
        };
        let members: Arc<[u32]> = m.members.iter().copied().collect();
        let group = Group::unregistered(0, members);
        let world = Comm::with_group(
            self.link.clone(),
            Arc::new(State::default()),
            false,
            group,
            self.registry.clone(),
            rank as u32,
        );
        Ok((world, m))
    }
}
