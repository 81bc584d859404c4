//! Communicators (HELLO feature bit 2, protocol §15): [`Comm::split`] and
//! [`Comm::dup`] make a communicator whose collectives run over its
//! members, with its id in every COLLECTIVE frame's tag and its own
//! sequence numbers.
//!
//! A communicator made here is a [`Comm`] of the same link type: every
//! collective (v1 star, pipelined with bit 1, the calls of protocol §8.9,
//! the non-blocking calls) runs on it unchanged, with its ranks and size;
//! the frames go to and come from the members' job ranks. What this rank
//! knows of its communicators (the ids it holds and their members, its
//! `highest`, whether it is inside a split or dup) is one [`Registry`]
//! shared by all its communicators: a call taking frames judges every frame
//! of another communicator it passes over by it (protocol §15.4, H1617 with
//! ABORT reason 3 for a frame of a communicator this rank does not share
//! with the sender).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sperli_wire::abort::AbortReason;
use sperli_wire::communicator::{
    next_id, passed_over, split, KnownCommunicators as Known, SplitError, SplitRecord,
    SPLIT_RECORD_LEN,
};
use sperli_wire::element::Reduction;
use sperli_wire::error::{MismatchError, UsageError};
use sperli_wire::limits::FEATURE_COMMUNICATORS;
use sperli_wire::Error;

use crate::comm::Comm;
use crate::peers::Peers;
use crate::state::{lock, State};

/// The communicators of one rank, shared by all of them.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    known: Mutex<Known>,
    /// One split or dup at a time on this rank (protocol §15.3).
    one_at_a_time: Mutex<()>,
    /// The ids of the communicators this rank revoked itself, for good
    /// (protocol §18.8.1; the notices of other members, early ones
    /// included, are the transport's: `is_communicator_revoked`).
    revoked: Mutex<BTreeSet<u32>>,
    /// Whether `revoked` holds an id (the calls' check reads only this
    /// until a communicator is revoked).
    any_revoked: AtomicBool,
}

impl Registry {
    /// Protocol §15.4: whether a frame of job rank `from` with `tag`, passed
    /// over by a call on `taking`, is kept; else H1617.
    pub(crate) fn judge(&self, tag: u32, from: u32, taking: u32) -> Result<(), Error> {
        passed_over(tag, from, taking, &*lock(&self.known)).map_err(Error::CollectiveMismatch)
    }

    fn set_making(&self, on: bool) {
        lock(&self.known).making = on;
    }

    fn highest(&self) -> u32 {
        lock(&self.known).highest
    }

    /// The split or dup that made `id` is through on this rank: `members`
    /// (job ranks) is this rank's new communicator, if it has one.
    fn made(&self, id: u32, members: Option<Arc<[u32]>>) {
        lock(&self.known).made(id, members);
    }

    /// Revokes communicator `id` of this rank for good; whether it was
    /// not revoked before.
    pub(crate) fn revoke(&self, id: u32) -> bool {
        let fresh = lock(&self.revoked).insert(id);
        self.any_revoked.store(true, Ordering::SeqCst);
        fresh
    }

    /// Whether communicator `id` of this rank is revoked.
    pub(crate) fn is_revoked(&self, id: u32) -> bool {
        self.any_revoked.load(Ordering::SeqCst) && lock(&self.revoked).contains(&id)
    }

    /// Forgets communicator `id` (freed: its id is never made again).
    fn forget(&self, id: u32) {
        lock(&self.revoked).remove(&id);
    }
}

/// Removes a communicator from its rank's registry when the last view of
/// it goes: a later frame with its id is one of an id this rank has left
/// behind (protocol §15.4).
struct Membership {
    registry: Arc<Registry>,
    id: u32,
    /// Tells the link (point-to-point messages of protocol §16.4).
    freer: Option<crate::peers::Freer>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership").field("id", &self.id).finish()
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        lock(&self.registry.known).comms.remove(&self.id);
        self.registry.forget(self.id);
        if let Some(f) = &self.freer {
            f(self.id);
        }
    }
}

/// Which communicator a [`Comm`] is: its id (the tag of its COLLECTIVE
/// frames) and its members' job ranks (`None`: the job's communicator,
/// whose rank r is job rank r).
#[derive(Debug, Clone, Default)]
pub(crate) struct Group {
    pub(crate) id: u32,
    pub(crate) members: Option<Arc<[u32]>>,
    _membership: Option<Arc<Membership>>,
}

impl Group {
    /// A communicator no split or dup made and no frame names (COMM_SELF:
    /// `crate::self_comm`), kept out of the registry.
    pub(crate) fn unregistered(id: u32, members: Arc<[u32]>) -> Group {
        Group {
            id,
            members: Some(members),
            _membership: None,
        }
    }
}

impl<L: Peers> Comm<L> {
    /// This communicator's id: 0 for the job's, 1..=2147483647 for one made
    /// by [`Comm::split`] or [`Comm::dup`] (protocol §15.2), 4294967295 for
    /// [`Comm::comm_self`] (never on the wire: its calls are local).
    pub fn id(&self) -> u32 {
        self.group.id
    }

    /// The job rank of this communicator's rank `r` (the same number on the
    /// job's communicator).
    pub fn job_rank(&self, r: u32) -> u32 {
        match &self.group.members {
            Some(m) => m.get(r as usize).copied().unwrap_or(u32::MAX),
            None => r,
        }
    }

    /// This communicator's rank of job rank `job`, if it is a member.
    pub fn rank_of_job_rank(&self, job: u32) -> Option<u32> {
        match &self.group.members {
            Some(m) => m.iter().position(|&j| j == job).map(|i| i as u32),
            None => (job < self.size()).then_some(job),
        }
    }

    /// Splits this communicator (protocol §15.3, MPI's `MPI_Comm_split`):
    /// every rank of it calls `split`; the ranks with the same `color` form
    /// one new communicator, ordered by `key` (then by their rank here),
    /// and a rank with `color: None` joins none (`Ok(None)`). One allgather
    /// of 24 bytes per rank on this communicator, which counts it.
    ///
    /// Errors: without HELLO feature bit 2 on every rank of the job
    /// ([`UsageError::NoCommunicators`], no H-code, protocol §15.1) on
    /// every rank before anything is sent; the job goes on. No id left
    /// (H1618, the job goes on). A record that breaks its rule (H1617,
    /// ABORT reason 3).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_collective::prelude::*;
    /// let got = fake::run(5, |c| {
    ///     // Evens and odds, each ordered by descending job rank.
    ///     let sub = c.split(Some(c.rank() % 2), -(c.rank() as i32)).unwrap().unwrap();
    ///     (sub.rank(), sub.size(), sub.allreduce_scalar(c.rank(), Reduction::Sum).unwrap())
    /// });
    /// assert_eq!(got[0], (2, 3, 6));
    /// assert_eq!(got[1], (1, 2, 4));
    /// ```
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Comm<L>>, Error> {
        self.needs_communicators()?;
        let _one = lock(&self.registry.one_at_a_time);
        self.registry.set_making(true);
        let mut record = Vec::with_capacity(SPLIT_RECORD_LEN);
        SplitRecord {
            color,
            key,
            highest: self.registry.highest(),
        }
        .encode(&mut record);
        let exchange = match self.allgather::<u8>(&record) {
            Ok(x) => x,
            Err(e) => {
                self.registry.set_making(false);
                return Err(e);
            }
        };
        let made = match split(&exchange, self.size(), self.rank()) {
            Ok(s) => s,
            Err(e) => {
                self.registry.set_making(false);
                return match e {
                    SplitError::Ids(a) => Err(a.into()),
                    SplitError::Exchange(m) => self.fail_job(
                        AbortReason::CollectiveMismatch,
                        Error::CollectiveMismatch(m),
                    ),
                    SplitError::Truncated(_) => self.fail_job(
                        AbortReason::CollectiveMismatch,
                        Error::CollectiveMismatch(MismatchError::Length {
                            from: 0,
                            expected: (SPLIT_RECORD_LEN * self.size() as usize) as u64,
                            got: exchange.len() as u64,
                        }),
                    ),
                };
            }
        };
        let members: Option<Arc<[u32]>> = made
            .members
            .map(|m| m.iter().map(|&r| self.job_rank(r)).collect());
        self.registry.made(made.id, members.clone());
        self.made_for_messages(made.id, members.clone())?;
        Ok(match (members, made.rank) {
            (Some(m), Some(rank)) => Some(self.child(made.id, m, rank)),
            _ => None,
        })
    }

    /// A new communicator with the same members and ranks (protocol §15.3,
    /// MPI's `MPI_Comm_dup`): its collectives never mix with this one's. One
    /// allreduce (u64, max) on this communicator. Errors as
    /// [`Comm::split`].
    pub fn dup(&self) -> Result<Comm<L>, Error> {
        self.needs_communicators()?;
        let _one = lock(&self.registry.one_at_a_time);
        self.registry.set_making(true);
        let highest = self
            .allreduce_scalar(u64::from(self.registry.highest()), Reduction::Max)
            .and_then(|h| next_id(h).map_err(Error::from));
        let id = match highest {
            Ok(id) => id,
            Err(e) => {
                self.registry.set_making(false);
                return Err(e);
            }
        };
        let members: Arc<[u32]> = (0..self.size()).map(|r| self.job_rank(r)).collect();
        self.registry.made(id, Some(members.clone()));
        self.made_for_messages(id, Some(members.clone()))?;
        Ok(self.child(id, members, self.rank()))
    }

    /// Tells the link the communicator a call made (for the messages of
    /// protocol §16.4 that came early).
    fn made_for_messages(&self, id: u32, members: Option<Arc<[u32]>>) -> Result<(), Error> {
        match self.link.communicator_made(id, members) {
            Ok(()) => Ok(()),
            Err(e) => self.link_failed(e),
        }
    }

    /// Makes the communicator of `members` (job ranks; this rank is its
    /// rank `rank`) with protocol §15.3's id: 1 + the largest `highest`
    /// of the ranks that make it. `exchange` gets this rank's highest and
    /// returns the largest of the members' (its own included), while this
    /// rank is inside the making (protocol §15.4 keeps frames of the new
    /// id that come meanwhile). The calls of `Comm::create_group`.
    pub(crate) fn make_from(
        &self,
        members: Arc<[u32]>,
        rank: u32,
        exchange: impl FnOnce(u32) -> Result<u64, Error>,
    ) -> Result<Comm<L>, Error> {
        self.needs_communicators()?;
        let _one = lock(&self.registry.one_at_a_time);
        self.registry.set_making(true);
        let id =
            match exchange(self.registry.highest()).and_then(|h| next_id(h).map_err(Error::from)) {
                Ok(id) => id,
                Err(e) => {
                    self.registry.set_making(false);
                    return Err(e);
                }
            };
        self.registry.made(id, Some(members.clone()));
        self.made_for_messages(id, Some(members.clone()))?;
        Ok(self.child(id, members, rank))
    }

    /// The largest communicator id this rank has made (protocol §15.3).
    pub(crate) fn highest_id(&self) -> u32 {
        self.registry.highest()
    }

    fn needs_communicators(&self) -> Result<(), Error> {
        if self.features & FEATURE_COMMUNICATORS == 0 {
            return Err(UsageError::NoCommunicators.into());
        }
        Ok(())
    }

    /// The communicator `id` of `members` (job ranks) in which this rank is
    /// `rank`.
    fn child(&self, id: u32, members: Arc<[u32]>, rank: u32) -> Comm<L> {
        let group = Group {
            id,
            members: Some(members),
            _membership: Some(Arc::new(Membership {
                registry: self.registry.clone(),
                id,
                freer: self.link.communicator_freer(),
            })),
        };
        Comm::with_group(
            self.link.clone(),
            Arc::new(State::default()),
            false,
            group,
            self.registry.clone(),
            rank,
        )
    }
}
