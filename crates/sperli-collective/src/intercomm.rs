//! Intercommunicators (MPI's `MPI_Intercomm_create`,
//! `MPI_Intercomm_merge`; protocol §15.6): two disjoint groups joined by
//! one communicator id, whose point-to-point ranks are the other group's,
//! and the intracommunicator of both made by merge.
//!
//! An intercommunicator is made with ordinary calls (no new frame): an
//! allreduce and a bcast in each group and one exchange between the two
//! leaders over a peer communicator. Its id follows the rule of protocol
//! §15.3 over both groups (above the highest of every member of either),
//! so with HELLO feature bit 3 its messages are matched as every
//! communicator's (protocol §16.3: a message's source is its sender's rank
//! in the remote group). Collectives across the two groups are not
//! offered; [`Intercomm::merge`] gives the one communicator of both.

use std::sync::Arc;

use sperli_wire::element::Reduction;
use sperli_wire::error::{MismatchError, UsageError};
use sperli_wire::limits::{FEATURE_P2P_COMMUNICATORS, MAX_COMMUNICATOR_ID, MAX_USER_TAG};
use sperli_wire::Error;

use crate::comm::Comm;
use crate::mpi_error::MpiError;
use crate::p2p::HasEndpoint;

/// The tag of the leaders' exchange of [`Intercomm::merge`] on the
/// intercommunicator itself (protocol §15.6).
pub const MERGE_TAG: u32 = MAX_USER_TAG;

/// An intercommunicator (MPI's intercomm): this rank's group (the local
/// one) and the other (the remote one). Point-to-point calls name the
/// remote group's ranks: [`Intercomm::remote`] is a [`Comm`] whose ranks
/// and size are the remote group's (a receive from any source takes a
/// message of any remote member; a status names the sender's remote
/// rank). Its collectives (MPI's intercommunicator collectives) are in
/// [`crate::intercomm_collectives`].
#[derive(Debug)]
pub struct Intercomm<L: HasEndpoint> {
    /// The point-to-point view: id, remote members.
    remote: Comm<L>,
    /// The local group's own communicator (a dup of the one it was made
    /// from): merge's exchanges within the group.
    local: Comm<L>,
}

/// What a leader sends the other in [`Comm::create_intercomm`] (protocol
/// §15.6): its group's highest, then its members' job ranks, as u64.
fn leader_record(highest: u64, members: &[u32]) -> Vec<u64> {
    let mut v = Vec::with_capacity(2 + members.len());
    v.push(highest);
    v.push(members.len() as u64);
    v.extend(members.iter().map(|&m| u64::from(m)));
    v
}

impl<L: HasEndpoint> Comm<L> {
    /// A record of an intercommunicator's exchange that breaks its rule
    /// (protocol §15.6): H1617, ABORT reason 3, the job ends.
    fn broken_exchange(&self, field: &'static str, got: u64) -> Error {
        match self.mismatch::<()>(MismatchError::Exchange {
            from: self.job_rank(0),
            field,
            got,
        }) {
            Err(e) => e,
            Ok(()) => Error::CollectiveMismatch(MismatchError::Exchange {
                from: self.job_rank(0),
                field,
                got,
            }),
        }
    }

    /// MPI's `MPI_Intercomm_create`: this communicator's ranks (every one
    /// calls, with the same `local_leader`) and another group's, disjoint
    /// from them, whose leader is `remote_leader` of `peer` (a
    /// communicator both leaders belong to; `peer` and `remote_leader`
    /// matter at the local leader only), join in one intercommunicator.
    /// The leaders exchange their groups over `peer` with `tag`. Needs
    /// HELLO feature bit 3 (its messages name it). Errors: a leader or
    /// tag out of range (H1618 before anything is sent); a group that is
    /// not disjoint or a broken record from the other leader (H1617,
    /// ABORT reason 3).
    pub fn create_intercomm(
        &self,
        local_leader: u32,
        peer: &Comm<L>,
        remote_leader: u32,
        tag: u32,
    ) -> Result<Intercomm<L>, MpiError> {
        if self.link().endpoint().features() & FEATURE_P2P_COMMUNICATORS == 0 {
            return Err(MpiError::Comm(
                UsageError::NoP2pCommunicators {
                    what: "an intercommunicator",
                }
                .into(),
            ));
        }
        if local_leader >= self.size() {
            return Err(MpiError::Rank {
                rank: local_leader,
                size: self.size(),
            });
        }
        if tag > MAX_USER_TAG {
            return Err(MpiError::Tag { tag });
        }
        let local_comm = self.dup()?;
        let local: Arc<[u32]> = (0..self.size()).map(|r| self.job_rank(r)).collect();
        let highest = self.allreduce_scalar(u64::from(self.highest_id()), Reduction::Max)?;
        let mut theirs = Vec::new();
        if self.rank() == local_leader {
            if remote_leader >= peer.size() {
                return Err(MpiError::Rank {
                    rank: remote_leader,
                    size: peer.size(),
                });
            }
            let mine = leader_record(highest, &local);
            let (_, got) = peer.sendrecv::<u64, u64>(
                remote_leader,
                tag,
                &mine,
                Some(remote_leader),
                Some(tag),
            )?;
            theirs = got;
        }
        self.bcast(local_leader, &mut theirs)?;
        let (their_highest, remote) = self.remote_record(&theirs, &local)?;
        let most = highest.max(their_highest);
        let rank = self.rank();
        let remote_view = self.make_from(remote, rank, |_| Ok(most))?;
        Ok(Intercomm {
            remote: remote_view,
            local: local_comm,
        })
    }

    /// Reads the other leader's record (protocol §15.6): H1617 when it
    /// breaks a rule (a highest above 2147483647, a length that does not
    /// fit, a rank outside the job, twice, or of this group).
    fn remote_record(&self, rec: &[u64], local: &[u32]) -> Result<(u64, Arc<[u32]>), Error> {
        let broken = |field: &'static str, got: u64| -> Result<(u64, Arc<[u32]>), Error> {
            Err(self.broken_exchange(field, got))
        };
        let (Some(&h), Some(&n)) = (rec.first(), rec.get(1)) else {
            return broken("length", rec.len() as u64);
        };
        if h > u64::from(MAX_COMMUNICATOR_ID) {
            return broken("highest", h);
        }
        if n == 0 || n != (rec.len() - 2) as u64 {
            return broken("members", n);
        }
        let size = u64::from(self.link().endpoint().size());
        let mut seen = std::collections::HashSet::new();
        let mut members = Vec::with_capacity(rec.len() - 2);
        for &m in &rec[2..] {
            if m >= size || !seen.insert(m) || local.contains(&(m as u32)) {
                return broken("member", m);
            }
            members.push(m as u32);
        }
        Ok((h, members.into()))
    }
}

impl<L: HasEndpoint> Intercomm<L> {
    /// The intercommunicator of the point-to-point view `remote` and the
    /// local group's communicator `local`.
    pub(crate) fn from_parts(remote: Comm<L>, local: Comm<L>) -> Self {
        Intercomm { remote, local }
    }

    /// This rank's rank in its own (local) group.
    pub fn rank(&self) -> u32 {
        self.local.rank()
    }

    /// The size of the local group.
    pub fn size(&self) -> u32 {
        self.local.size()
    }

    /// The size of the remote group (MPI's `MPI_Comm_remote_size`).
    pub fn remote_size(&self) -> u32 {
        self.remote.size()
    }

    /// The intercommunicator's id (protocol §15.2).
    pub fn id(&self) -> u32 {
        self.remote.id()
    }

    /// The local group's job ranks, in rank order.
    pub fn local_job_ranks(&self) -> Vec<u32> {
        (0..self.size()).map(|r| self.local.job_rank(r)).collect()
    }

    /// The remote group's job ranks, in rank order.
    pub fn remote_job_ranks(&self) -> Vec<u32> {
        (0..self.remote_size())
            .map(|r| self.remote.job_rank(r))
            .collect()
    }

    /// The point-to-point view: a [`Comm`] whose ranks are the remote
    /// group's (`remote().send(r, ...)` sends to remote rank `r`, a
    /// receive's status names the sender's remote rank).
    pub fn remote(&self) -> &Comm<L> {
        &self.remote
    }

    /// The local group's own communicator (MPI's local intracommunicator).
    pub fn local(&self) -> &Comm<L> {
        &self.local
    }

    /// [`Intercomm::remote`], mutable (for callers that hold their
    /// communicators as `&mut`).
    pub fn remote_mut(&mut self) -> &mut Comm<L> {
        &mut self.remote
    }

    /// [`Intercomm::local`], mutable.
    pub fn local_mut(&mut self) -> &mut Comm<L> {
        &mut self.local
    }

    /// MPI's `MPI_Intercomm_merge`: one communicator of both groups; the
    /// group whose ranks all pass `high = false` comes first, and when
    /// both pass the same, the group whose first member has the lower job
    /// rank. Every rank of both groups calls it, with the same `high`
    /// within a group. The leaders swap their flags and their groups'
    /// highest on this intercommunicator (tag [`MERGE_TAG`]); the new id
    /// follows protocol §15.3 over both groups (protocol §15.6).
    pub fn merge(&self, high: bool) -> Result<Comm<L>, MpiError> {
        let local = self.local_job_ranks();
        let remote = self.remote_job_ranks();
        let highest = self
            .local
            .allreduce_scalar(u64::from(self.local.highest_id()), Reduction::Max)?;
        let theirs = self.leaders_swap(&[u64::from(high), highest])?;
        let (Some(&their_high), Some(&their_highest)) = (theirs.first(), theirs.get(1)) else {
            return Err(self
                .local
                .broken_exchange("length", theirs.len() as u64)
                .into());
        };
        if their_high > 1 || their_highest > u64::from(MAX_COMMUNICATOR_ID) {
            return Err(self.local.broken_exchange("merge", their_highest).into());
        }
        let their_high = their_high == 1;
        let local_first = if high != their_high {
            !high
        } else {
            local[0] < remote[0]
        };
        let members: Arc<[u32]> = if local_first {
            local.iter().chain(remote.iter()).copied().collect()
        } else {
            remote.iter().chain(local.iter()).copied().collect()
        };
        let me = local[self.rank() as usize];
        let rank = members.iter().position(|&j| j == me).unwrap_or(0) as u32;
        let most = highest.max(their_highest);
        Ok(self.local.make_from(members, rank, |_| Ok(most))?)
    }

    /// MPI's `MPI_Comm_dup` of an intercommunicator: the same two groups
    /// under a new id (every rank of both groups calls it). On each side:
    /// a dup of the local communicator, then the exchange of merge (an
    /// allreduce of the highest, the leaders' swap on tag [`MERGE_TAG`], a
    /// bcast) with one element, the group's highest; the new id is 1 +
    /// the larger (protocol §15.6).
    pub fn dup(&self) -> Result<Intercomm<L>, MpiError> {
        let local = self.local.dup()?;
        let most = self.both_highest()?;
        let remote: Arc<[u32]> = self.remote_job_ranks().into();
        let view = self.local.make_from(remote, self.rank(), |_| Ok(most))?;
        Ok(Intercomm {
            remote: view,
            local,
        })
    }

    /// MPI's `MPI_Comm_split` of an intercommunicator: the ranks of each
    /// group with one `color` form the local group of a new
    /// intercommunicator (ordered by `key`, then by rank), whose remote
    /// group is the other group's ranks with that color (in their order);
    /// `None` where the color is `None` or the other group has no rank of
    /// it. Every rank of both groups calls it. On each side: a split of
    /// the local communicator, an allgather over it of every rank's
    /// [color, key] (u64, no color as 2^64-1, key as a two's-complement
    /// i64), then the exchange of merge with the group's highest followed
    /// by that allgather's result (protocol §15.6).
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Intercomm<L>>, MpiError> {
        let local = self.local.split(color, key)?;
        let mine = [color.map_or(u64::MAX, u64::from), i64::from(key) as u64];
        let all = self.local.allgather(&mine)?;
        let highest = self
            .local
            .allreduce_scalar(u64::from(self.local.highest_id()), Reduction::Max)?;
        let mut rec = vec![highest];
        rec.extend_from_slice(&all);
        let theirs = self.leaders_swap(&rec)?;
        let remote = self.remote_job_ranks();
        if theirs.len() != 1 + 2 * remote.len() {
            return Err(self
                .local
                .broken_exchange("length", theirs.len() as u64)
                .into());
        }
        let their_highest = theirs[0];
        if their_highest > u64::from(MAX_COMMUNICATOR_ID) {
            return Err(self.local.broken_exchange("highest", their_highest).into());
        }
        let most = highest.max(their_highest);
        let mut members: Vec<(i64, usize)> = Vec::new();
        for (r, pair) in theirs[1..].chunks_exact(2).enumerate() {
            if color.is_some_and(|c| pair[0] == u64::from(c)) {
                members.push((pair[1] as i64, r));
            }
        }
        members.sort_unstable();
        let members: Arc<[u32]> = members.iter().map(|&(_, r)| remote[r]).collect();
        // Every rank takes part in making the id (protocol §15.3: it sets
        // its highest), also one that gets no intercommunicator.
        let rank = local.as_ref().map_or(0, Comm::rank);
        let view = self.local.make_from(members.clone(), rank, |_| Ok(most))?;
        match local {
            Some(local) if !members.is_empty() => Ok(Some(Intercomm {
                remote: view,
                local,
            })),
            _ => Ok(None),
        }
    }

    /// The larger of both groups' highest (protocol §15.3): an allreduce
    /// over the local communicator, the leaders' swap, a bcast.
    fn both_highest(&self) -> Result<u64, MpiError> {
        let highest = self
            .local
            .allreduce_scalar(u64::from(self.local.highest_id()), Reduction::Max)?;
        let theirs = self.leaders_swap(&[highest])?;
        match theirs.first() {
            Some(&h) if theirs.len() == 1 && h <= u64::from(MAX_COMMUNICATOR_ID) => {
                Ok(highest.max(h))
            }
            _ => Err(self
                .local
                .broken_exchange("highest", theirs.first().copied().unwrap_or(0))
                .into()),
        }
    }

    /// The leaders (rank 0 of each group) swap `mine` on this
    /// intercommunicator; the local leader bcasts what came to its group.
    pub(crate) fn leaders_swap(&self, mine: &[u64]) -> Result<Vec<u64>, Error> {
        let mut theirs = Vec::new();
        if self.rank() == 0 {
            let (_, got) =
                self.remote
                    .sendrecv::<u64, u64>(0, MERGE_TAG, mine, Some(0), Some(MERGE_TAG))?;
            theirs = got;
        }
        self.local.bcast(0, &mut theirs)?;
        Ok(theirs)
    }
}
