//! ULFM's calls on a communicator (MPI 5's fault tolerance; mpi4py 4
//! spells them `Revoke`, `Is_revoked`, `Agree`, `Iagree`, `Shrink`,
//! `Ishrink`, `Get_failed`, `Ack_failed`):
//!
//! - [`Comm::revoke`] marks the communicator revoked for good on this rank
//!   (protocol §18.8.1): every later call on it fails with
//!   [`RecoveryError::CommunicatorRevoked`] (H1613, the job goes on),
//!   except agree, shrink, get_failed, ack_failed and dropping it;
//!   another member's notice (RECOVER kind 3) is taken by the transport
//!   and revokes it here as well ([`Comm::is_revoked`]);
//! - [`Comm::agree`] / [`Comm::iagree`]: the bitwise AND of the members'
//!   flags, folded in ascending rank order ([`crate::agreement`]);
//! - [`Comm::shrink`]: a communicator of the members that have not failed,
//!   in their old order;
//! - [`Comm::get_failed`], [`Comm::ack_failed`]: the members that failed,
//!   and how many of them the program acknowledged.
//!
//! Which job ranks failed is the transport's knowledge (protocol §18.6);
//! until the endpoint reports it every call here is given the empty set,
//! at the one place marked "joined to Endpoint::failed_ranks".

use std::collections::BTreeSet;
use std::sync::Arc;

use sperli_transport::Endpoint;
use sperli_wire::recovery::RecoveryError;
use sperli_wire::Error;

use crate::agreement::{Agreement, AgreementLink, Fold, Members, AGREE_TAG, SHRINK_TAG};
use crate::comm::Comm;
use crate::intercomm::Intercomm;
use crate::p2p::HasEndpoint;
use crate::peers::Peers;

/// Starts an agreement of `flag` (bitwise AND) among `who` on `ep`.
fn start_and<E: AgreementLink>(ep: E, who: Members, flag: u32) -> Result<Agreement<E>, Error> {
    Agreement::start(ep, who, AGREE_TAG, Fold::And, u64::from(flag))
}

/// The agreed flag of an agreement of 32-bit flags.
fn flag_of(v: u64) -> u32 {
    // The AND of u32 flags has no bit above 31.
    (v & u64::from(u32::MAX)) as u32
}

/// A link whose endpoint a request can own (an [`Agreement`] that outlives
/// the borrow of its communicator: [`Comm::iagree`]).
pub trait OwnsEndpoint: HasEndpoint + Sized {
    /// The endpoint of `link`, counted.
    fn owned_endpoint(link: &Arc<Self>) -> Arc<Endpoint>;
}

impl OwnsEndpoint for Endpoint {
    fn owned_endpoint(link: &Arc<Self>) -> Arc<Endpoint> {
        Arc::clone(link)
    }
}

impl OwnsEndpoint for Arc<Endpoint> {
    fn owned_endpoint(link: &Arc<Self>) -> Arc<Endpoint> {
        Arc::clone(link)
    }
}

impl<L: Peers> Comm<L> {
    /// Revokes this communicator (ULFM's `MPIX_Comm_revoke`, protocol
    /// §18.8.1): from now on every call on it on this rank fails with
    /// [`RecoveryError::CommunicatorRevoked`] (H1613; the job goes on),
    /// except [`Comm::agree`], [`Comm::iagree`], [`Comm::shrink`],
    /// [`Comm::get_failed`], [`Comm::ack_failed`] and dropping it. A
    /// revoked communicator is never usable again; its shrink is.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     c.revoke();
    ///     (c.is_revoked(), c.barrier().unwrap_err().h_code().map(|h| h.number()))
    /// });
    /// assert_eq!(got, vec![(true, Some(1613)); 2]);
    /// ```
    pub fn revoke(&self) {
        self.registry.revoke(self.group.id);
        // The notice to the other members (RECOVER kind 3, protocol
        // §18.8.1): the link sends it to every other member; a job that
        // failed meanwhile has nothing left to revoke.
        let _ = self.link.revoke_communicator(self.group.id);
    }

    /// Whether this communicator is revoked on this rank: by itself, or by
    /// another member's notice (protocol §18.8.1).
    pub fn is_revoked(&self) -> bool {
        self.registry.is_revoked(self.group.id) || self.link.is_communicator_revoked(self.group.id)
    }

    /// H1613 if this communicator is revoked (protocol §18.8.1); the start
    /// of every call but those of ULFM.
    pub(crate) fn check_revoked(&self) -> Result<(), Error> {
        if self.is_revoked() {
            return Err(RecoveryError::CommunicatorRevoked {
                comm: self.group.id,
            }
            .into());
        }
        Ok(())
    }

    /// The ranks of this communicator that failed (ULFM's
    /// `MPIX_Comm_get_failed`), ascending; empty while no member failed.
    pub fn get_failed(&self) -> Vec<u32> {
        self.failed_among(&self.failed_job_ranks())
    }

    /// The job ranks a MEMBERSHIP record removed (protocol §18.8: the
    /// failed ranks).
    fn failed_job_ranks(&self) -> BTreeSet<u32> {
        self.link.failed_ranks().into_iter().collect()
    }

    /// This communicator's ranks whose job ranks are in `failed`.
    fn failed_among(&self, failed: &BTreeSet<u32>) -> Vec<u32> {
        (0..self.size())
            .filter(|&r| failed.contains(&self.job_rank(r)))
            .collect()
    }

    /// Acknowledges the first `n` failed members of [`Comm::get_failed`]
    /// (ULFM's `MPIX_Comm_ack_failed`); returns how many are acknowledged
    /// now (it never goes down: 0 while no member failed).
    pub fn ack_failed(&self, n: u32) -> u32 {
        self.ack_among(n, &self.failed_job_ranks())
    }

    fn ack_among(&self, n: u32, failed: &BTreeSet<u32>) -> u32 {
        let known = self.failed_among(failed).len() as u32;
        self.state.acknowledge(n.min(known))
    }
}

impl<L: HasEndpoint> Comm<L> {
    /// Who takes part in this communicator's agreements.
    fn agreement_members(&self) -> Members {
        Members {
            wire: self.wire(),
            job_ranks: (0..self.size()).map(|r| self.job_rank(r)).collect(),
            rank: self.rank(),
            across: None,
        }
    }

    /// ULFM's agreement (`MPIX_Comm_agree`): the bitwise AND of every
    /// member's `flag`, folded in ascending rank order, on every member. It
    /// is no collective call ([`crate::agreement`]): it runs on a revoked
    /// communicator, and needs no order against the collectives.
    pub fn agree(&self, flag: u32) -> Result<u32, Error> {
        let mut a = start_and(self.link().endpoint(), self.agreement_members(), flag)?;
        Ok(flag_of(a.wait()?))
    }

    /// ULFM's shrink (`MPIX_Comm_shrink`): a new communicator of the
    /// members that have not failed, in their order here (every member,
    /// while none failed), whose id every survivor agrees on as a split's
    /// (protocol §15.3: 1 + the largest highest, exchanged as an agreement
    /// of their maximum, so it runs on a revoked communicator).
    pub fn shrink(&self) -> Result<Comm<L>, Error> {
        // After a lost rank: the membership the launcher decides first
        // (protocol §18.8), whose removed ranks are the failed ones.
        let m = self.link.recover()?;
        self.shrink_without(&m.failed.into_iter().collect())
    }

    fn shrink_without(&self, failed: &BTreeSet<u32>) -> Result<Comm<L>, Error> {
        let gone = self.failed_among(failed);
        let survivors: Arc<[u32]> = (0..self.size())
            .filter(|r| !gone.contains(r))
            .map(|r| self.job_rank(r))
            .collect();
        let me = self.job_rank(self.rank());
        let rank = survivors.iter().position(|&j| j == me).unwrap_or(0) as u32;
        let who = Members {
            wire: self.wire(),
            job_ranks: survivors.clone(),
            rank,
            across: None,
        };
        let ep = self.link().endpoint();
        self.make_from(survivors, rank, |highest| {
            Agreement::start(ep, who, SHRINK_TAG, Fold::Max, u64::from(highest))?.wait()
        })
    }
}

impl<L: OwnsEndpoint> Comm<L> {
    /// [`Comm::agree`] without waiting: the request completes once every
    /// member called it and the result came ([`Agreement::test`],
    /// [`Agreement::wait`]); no thread runs it.
    pub fn iagree(&self, flag: u32) -> Result<Agreement<Arc<Endpoint>>, Error> {
        start_and(
            L::owned_endpoint(&self.link),
            self.agreement_members(),
            flag,
        )
    }
}

impl<L: HasEndpoint> Intercomm<L> {
    /// Revokes the intercommunicator (its local communicator with it), as
    /// [`Comm::revoke`].
    pub fn revoke(&self) {
        self.remote().revoke();
        self.local().revoke();
    }

    /// Whether the intercommunicator is revoked on this rank.
    pub fn is_revoked(&self) -> bool {
        self.remote().is_revoked()
    }

    /// Who takes part in an agreement over both groups.
    fn agreement_members(&self) -> Members {
        let local = self.local();
        Members {
            across: Some((self.remote().wire(), self.remote().job_rank(0))),
            ..local.agreement_members()
        }
    }

    /// ULFM's agreement over both groups: the bitwise AND of the flags of
    /// every member of either group, on every member (each group's rank 0
    /// folds its group's, the two swap and fold).
    pub fn agree(&self, flag: u32) -> Result<u32, Error> {
        let mut a = start_and(
            self.local().link().endpoint(),
            self.agreement_members(),
            flag,
        )?;
        Ok(flag_of(a.wait()?))
    }

    /// The members of the remote group that failed, as its ranks.
    pub fn get_failed(&self) -> Vec<u32> {
        self.remote().get_failed()
    }

    /// As [`Comm::ack_failed`], of the remote group's failed members.
    pub fn ack_failed(&self, n: u32) -> u32 {
        self.remote().ack_failed(n)
    }

    /// ULFM's shrink of an intercommunicator: the local group shrunk
    /// ([`Comm::shrink`]), against the other group's survivors, under an id
    /// both groups agree on (1 + the largest highest of both, protocol
    /// §15.6, exchanged as an agreement of their maximum).
    pub fn shrink(&self) -> Result<Intercomm<L>, Error> {
        let local = self.local().shrink()?;
        let failed: BTreeSet<u32> = self.local().link.recover()?.failed.into_iter().collect();
        let remote: Arc<[u32]> = self
            .remote_job_ranks()
            .into_iter()
            .filter(|j| !failed.contains(j))
            .collect();
        let ep = self.local().link().endpoint();
        let who = Members {
            across: Some((
                self.remote().wire(),
                remote.first().copied().unwrap_or(u32::MAX),
            )),
            ..local.agreement_members()
        };
        let highest = u64::from(local.highest_id());
        let most = Agreement::start(ep, who, SHRINK_TAG, Fold::Max, highest)?.wait()?;
        let rank = local.rank();
        let view = local.make_from(remote, rank, |_| Ok(most))?;
        Ok(Intercomm::from_parts(view, local))
    }
}

impl<L: OwnsEndpoint> Intercomm<L> {
    /// [`Intercomm::agree`] without waiting, as [`Comm::iagree`].
    pub fn iagree(&self, flag: u32) -> Result<Agreement<Arc<Endpoint>>, Error> {
        start_and(
            L::owned_endpoint(&self.local().link),
            self.agreement_members(),
            flag,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::fake;

    #[test]
    fn failed_members_and_acknowledgements() {
        let got = fake::run(4, |c| {
            let failed = [1u32, 3].into_iter().collect();
            let none = Default::default();
            (
                c.failed_among(&failed),
                c.failed_among(&none),
                c.ack_among(1, &failed),
                c.ack_among(0, &failed),
                c.ack_among(9, &failed),
                c.ack_among(0, &none),
            )
        });
        for g in got {
            assert_eq!(g, (vec![1, 3], vec![], 1, 1, 2, 2));
        }
    }

    #[test]
    fn revoked_is_per_communicator_and_for_good() {
        let got = fake::run(3, |c| {
            let d = c.dup().unwrap();
            d.revoke();
            let e = d.allreduce_scalar(1u32, crate::Reduction::Sum).unwrap_err();
            let still = c.allreduce_scalar(1u32, crate::Reduction::Sum).unwrap();
            (
                d.is_revoked(),
                c.is_revoked(),
                e.h_code().map(|h| h.number()),
                still,
            )
        });
        assert_eq!(got, vec![(true, false, Some(1613), 3); 3]);
    }
}
