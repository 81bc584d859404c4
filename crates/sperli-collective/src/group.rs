//! Groups (MPI's `MPI_Group`): an ordered list of distinct job ranks, made
//! from a communicator ([`Comm::group`]) and combined with MPI's rules
//! ([`Group::incl`], [`Group::union`], ...), and the communicators made
//! from them ([`Comm::create`], and [`Comm::create_group`] where the link
//! is the real transport).
//!
//! A group's rank `i` is its `i`-th member; a member is named by its job
//! rank, so groups of different communicators compare and combine
//! directly. Every call on a group is local: no traffic.

use std::collections::HashSet;
use std::sync::Arc;

use sperli_wire::error::MismatchError;
use sperli_wire::limits::{MAX_COMMUNICATOR_ID, MAX_USER_TAG};
use sperli_wire::Error;

use crate::comm::Comm;
use crate::mpi_error::MpiError;
use crate::p2p::HasEndpoint;
use crate::peers::Peers;
use crate::special::{PROC_NULL, UNDEFINED};

/// How two groups or two communicators compare (MPI's `MPI_IDENT`,
/// `MPI_CONGRUENT`, `MPI_SIMILAR`, `MPI_UNEQUAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// The same members in the same order (groups); the same communicator
    /// (communicators).
    Ident,
    /// Communicators only: two communicators whose groups are
    /// [`Comparison::Ident`] (e.g. one and its dup).
    Congruent,
    /// The same members in another order.
    Similar,
    /// Not the same members.
    Unequal,
}

/// An ordered set of job ranks (MPI's group), as seen from this rank.
///
/// ```
/// use sperli_collective::fake;
/// use sperli_collective::prelude::*;
/// let out = fake::run(4, |c| {
///     let world = c.group();
///     let odd = world.incl(&[3, 1]).unwrap(); // order of the list given
///     (odd.job_ranks().to_vec(), odd.rank())
/// });
/// assert_eq!(out[1], (vec![3, 1], Some(1)));
/// assert_eq!(out[0], (vec![3, 1], None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Group {
    /// The members' job ranks, in group rank order.
    ranks: Vec<u32>,
    /// This rank's job rank, when known (not for [`GROUP_EMPTY`]).
    me: Option<u32>,
}

/// The group without members (MPI's `MPI_GROUP_EMPTY`).
pub const GROUP_EMPTY: Group = Group {
    ranks: Vec::new(),
    me: None,
};

/// H1618 unless every rank of `ranks` is below `size` and named once.
fn check_ranks(ranks: &[u32], size: u32) -> Result<(), MpiError> {
    let mut seen = HashSet::with_capacity(ranks.len());
    for &r in ranks {
        if r >= size {
            return Err(MpiError::Rank { rank: r, size });
        }
        if !seen.insert(r) {
            return Err(MpiError::DuplicateRank { rank: r });
        }
    }
    Ok(())
}

impl Group {
    /// A group of `job_ranks` (in this order) as seen by job rank `me`
    /// (`None`: a rank that is not known). A job rank named twice is
    /// [`MpiError::DuplicateRank`].
    pub fn from_job_ranks(job_ranks: &[u32], me: Option<u32>) -> Result<Group, MpiError> {
        check_ranks(job_ranks, u32::MAX)?;
        Ok(Group {
            ranks: job_ranks.to_vec(),
            me,
        })
    }

    /// Its members' job ranks, in group rank order.
    pub fn job_ranks(&self) -> &[u32] {
        &self.ranks
    }

    /// The number of members (MPI's `MPI_Group_size`).
    pub fn size(&self) -> u32 {
        self.ranks.len() as u32
    }

    /// This rank's rank in the group, `None` (MPI's `MPI_UNDEFINED`) when
    /// it is not a member (MPI's `MPI_Group_rank`).
    pub fn rank(&self) -> Option<u32> {
        let me = self.me?;
        self.position(me)
    }

    /// The group rank of job rank `job`, if it is a member.
    pub fn position(&self, job: u32) -> Option<u32> {
        self.ranks.iter().position(|&j| j == job).map(|i| i as u32)
    }

    fn with(&self, ranks: Vec<u32>, other: Option<&Group>) -> Group {
        Group {
            ranks,
            me: self.me.or(other.and_then(|o| o.me)),
        }
    }

    /// The members of group ranks `ranks`, in the order given (MPI's
    /// `MPI_Group_incl`). A rank not below the size is
    /// [`MpiError::Rank`], one named twice [`MpiError::DuplicateRank`].
    pub fn incl(&self, ranks: &[u32]) -> Result<Group, MpiError> {
        check_ranks(ranks, self.size())?;
        Ok(self.with(
            ranks.iter().map(|&r| self.ranks[r as usize]).collect(),
            None,
        ))
    }

    /// The members except those of group ranks `ranks`, in this group's
    /// order (MPI's `MPI_Group_excl`). Errors as [`Group::incl`].
    pub fn excl(&self, ranks: &[u32]) -> Result<Group, MpiError> {
        check_ranks(ranks, self.size())?;
        let out: HashSet<u32> = ranks.iter().copied().collect();
        Ok(self.with(
            (0..self.size())
                .filter(|r| !out.contains(r))
                .map(|r| self.ranks[r as usize])
                .collect(),
            None,
        ))
    }

    /// The group ranks of MPI's triplets (first, last, stride): first,
    /// first + stride, ... as far as last (never past it), triplet after
    /// triplet. A triplet whose stride leads away from last gives no rank
    /// (first alone when first = last).
    fn ranges(&self, triplets: &[(u32, u32, i32)]) -> Result<Vec<u32>, MpiError> {
        let size = self.size();
        let mut out = Vec::new();
        for &(first, last, stride) in triplets {
            for r in [first, last] {
                if r >= size {
                    return Err(MpiError::Rank { rank: r, size });
                }
            }
            if stride == 0 {
                return Err(MpiError::ZeroStride { first, last });
            }
            let (mut r, last, stride) = (i64::from(first), i64::from(last), i64::from(stride));
            while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
                out.push(r as u32);
                r += stride;
            }
        }
        Ok(out)
    }

    /// [`Group::incl`] of the ranks of (first, last, stride) triplets
    /// (MPI's `MPI_Group_range_incl`): first, first + stride, ..., not
    /// past last; a stride may be negative. A first or last not below the
    /// size is [`MpiError::Rank`], stride 0 [`MpiError::ZeroStride`], a
    /// rank reached twice [`MpiError::DuplicateRank`].
    ///
    /// ```
    /// use sperli_collective::Group;
    /// let g = Group::from_job_ranks(&[10, 11, 12, 13, 14, 15, 16], None).unwrap();
    /// let h = g.range_incl(&[(6, 0, -3), (1, 2, 1)]).unwrap();
    /// assert_eq!(h.job_ranks(), &[16, 13, 10, 11, 12]);
    /// let k = g.range_excl(&[(0, 6, 2)]).unwrap();
    /// assert_eq!(k.job_ranks(), &[11, 13, 15]);
    /// ```
    pub fn range_incl(&self, triplets: &[(u32, u32, i32)]) -> Result<Group, MpiError> {
        self.incl(&self.ranges(triplets)?)
    }

    /// [`Group::excl`] of the ranks of (first, last, stride) triplets
    /// (MPI's `MPI_Group_range_excl`). Errors as [`Group::range_incl`].
    pub fn range_excl(&self, triplets: &[(u32, u32, i32)]) -> Result<Group, MpiError> {
        self.excl(&self.ranges(triplets)?)
    }

    /// Every member of this group, then the members of `other` that are
    /// not in it, in `other`'s order (MPI's `MPI_Group_union`).
    ///
    /// ```
    /// use sperli_collective::Group;
    /// let a = Group::from_job_ranks(&[5, 1, 3], None).unwrap();
    /// let b = Group::from_job_ranks(&[4, 3, 2, 1], None).unwrap();
    /// assert_eq!(a.union(&b).job_ranks(), &[5, 1, 3, 4, 2]);
    /// assert_eq!(a.intersection(&b).job_ranks(), &[1, 3]);
    /// assert_eq!(a.difference(&b).job_ranks(), &[5]);
    /// ```
    pub fn union(&self, other: &Group) -> Group {
        let mine: HashSet<u32> = self.ranks.iter().copied().collect();
        let mut ranks = self.ranks.clone();
        ranks.extend(other.ranks.iter().filter(|j| !mine.contains(j)));
        self.with(ranks, Some(other))
    }

    /// The members of this group that are also in `other`, in this
    /// group's order (MPI's `MPI_Group_intersection`).
    pub fn intersection(&self, other: &Group) -> Group {
        let theirs: HashSet<u32> = other.ranks.iter().copied().collect();
        self.with(
            self.ranks
                .iter()
                .copied()
                .filter(|j| theirs.contains(j))
                .collect(),
            Some(other),
        )
    }

    /// The members of this group that are not in `other`, in this group's
    /// order (MPI's `MPI_Group_difference`).
    pub fn difference(&self, other: &Group) -> Group {
        let theirs: HashSet<u32> = other.ranks.iter().copied().collect();
        self.with(
            self.ranks
                .iter()
                .copied()
                .filter(|j| !theirs.contains(j))
                .collect(),
            Some(other),
        )
    }

    /// The ranks in `other` of this group's ranks `ranks` (MPI's
    /// `MPI_Group_translate_ranks`): [`UNDEFINED`] for a member absent
    /// from `other`, [`PROC_NULL`] for `PROC_NULL`. A rank not below this
    /// group's size is [`MpiError::Rank`].
    ///
    /// ```
    /// use sperli_collective::{Group, PROC_NULL, UNDEFINED};
    /// let a = Group::from_job_ranks(&[0, 1, 2, 3], None).unwrap();
    /// let b = Group::from_job_ranks(&[3, 1], None).unwrap();
    /// assert_eq!(a.translate_ranks(&[1, 2, 3, PROC_NULL], &b).unwrap(),
    ///            vec![1, UNDEFINED, 0, PROC_NULL]);
    /// ```
    pub fn translate_ranks(&self, ranks: &[u32], other: &Group) -> Result<Vec<u32>, MpiError> {
        ranks
            .iter()
            .map(|&r| {
                if r == PROC_NULL {
                    Ok(PROC_NULL)
                } else if r >= self.size() {
                    Err(MpiError::Rank {
                        rank: r,
                        size: self.size(),
                    })
                } else {
                    Ok(other.position(self.ranks[r as usize]).unwrap_or(UNDEFINED))
                }
            })
            .collect()
    }

    /// [`Comparison::Ident`] for the same members in the same order,
    /// [`Comparison::Similar`] in another order, else
    /// [`Comparison::Unequal`] (MPI's `MPI_Group_compare`).
    pub fn compare(&self, other: &Group) -> Comparison {
        if self.ranks == other.ranks {
            Comparison::Ident
        } else if self.size() == other.size()
            && self.ranks.iter().collect::<HashSet<_>>() == other.ranks.iter().collect()
        {
            Comparison::Similar
        } else {
            Comparison::Unequal
        }
    }
}

impl<L: Peers> Comm<L> {
    /// This communicator's group (MPI's `MPI_Comm_group`): its members'
    /// job ranks in its rank order. Local.
    pub fn group(&self) -> Group {
        Group {
            ranks: (0..self.size()).map(|r| self.job_rank(r)).collect(),
            me: Some(self.job_rank(self.rank())),
        }
    }

    /// How this communicator compares with `other` (MPI's
    /// `MPI_Comm_compare`): [`Comparison::Ident`] for the same
    /// communicator (the same id and members), [`Comparison::Congruent`]
    /// for another with the same members in the same order (a dup),
    /// [`Comparison::Similar`] and [`Comparison::Unequal`] as for groups.
    /// Local.
    pub fn compare(&self, other: &Comm<L>) -> Comparison {
        match self.group().compare(&other.group()) {
            Comparison::Ident if self.id() == other.id() => Comparison::Ident,
            Comparison::Ident => Comparison::Congruent,
            c => c,
        }
    }

    /// H1618 unless every member of `group` is a member of this
    /// communicator.
    fn check_subgroup(&self, group: &Group) -> Result<(), MpiError> {
        match group
            .ranks
            .iter()
            .find(|&&j| self.rank_of_job_rank(j).is_none())
        {
            Some(&job_rank) => Err(MpiError::NotMember { job_rank }),
            None => Ok(()),
        }
    }

    /// The communicator of `group`'s members, ranked in the group's order
    /// (MPI's `MPI_Comm_create`): a collective over this communicator
    /// (every rank of it calls `create` with the same group); `Ok(None)` on
    /// a rank outside the group. It is a [`Comm::split`] (color 0 for the
    /// members, none for the others, key the group rank), with its one
    /// allgather and its errors (HELLO feature bit 2, protocol §15.3). A
    /// group member that is not a member of this communicator is
    /// [`MpiError::NotMember`] on every rank before anything is sent.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_collective::prelude::*;
    /// let out = fake::run(5, |c| {
    ///     let g = c.group().incl(&[4, 0, 2]).unwrap();
    ///     let sub = c.create(&g).unwrap();
    ///     sub.map(|s| (s.rank(), s.size(), s.allreduce_scalar(c.rank(), Reduction::Sum).unwrap()))
    /// });
    /// assert_eq!(out[4], Some((0, 3, 6)));
    /// assert_eq!(out[2], Some((2, 3, 6)));
    /// assert_eq!(out[1], None);
    /// ```
    pub fn create(&self, group: &Group) -> Result<Option<Comm<L>>, MpiError> {
        self.check_subgroup(group)?;
        let me = self.job_rank(self.rank());
        let pos = group.position(me);
        Ok(self.split(pos.map(|_| 0), pos.map_or(0, |p| p as i32))?)
    }
}

impl<L: HasEndpoint> Comm<L> {
    /// The communicator of `group`'s members, ranked in the group's order,
    /// made by the members alone (MPI's `MPI_Comm_create_group`): every
    /// member calls it with the same group and `tag`, the other ranks of
    /// this communicator take no part. Needs HELLO feature bit 2 on every
    /// rank ([`UsageError::NoCommunicators`](sperli_wire::error::UsageError::NoCommunicators)
    /// otherwise, nothing sent).
    ///
    /// The id is protocol §15.3's (1 + the largest `highest` of the
    /// members), agreed by point-to-point messages (DATA, protocol §7.2)
    /// with user tag `tag` between the members: each member sends its
    /// highest (8 bytes, little-endian) to the group's rank 0, which sends
    /// back the largest. So it is for the real transport only, it does not
    /// count as a collective call on this communicator, and, as DATA
    /// carries no communicator (protocol §15.2), a receive with any tag
    /// posted from a member while the call runs may take one of its
    /// messages: keep `tag` free and such receives closed meanwhile. A
    /// member's highest goes up to the id; a non-member's stays, which
    /// protocol §15.3's id rule allows (a later call that makes a
    /// communicator with it takes its own highest into account).
    ///
    /// Errors, before anything is sent: a group member not in this
    /// communicator, or a caller not in the group ([`MpiError::NotMember`]),
    /// a reserved tag ([`MpiError::Tag`]). A member's message that is not 8
    /// bytes or holds a highest above 2147483647, or a largest below this
    /// rank's own, ends the job (H1617, ABORT reason 3); no id left is
    /// H1618 on every member.
    ///
    /// ```no_run
    /// use sperli_collective::prelude::*;
    /// # fn f(comm: &Comm<Endpoint>) -> Result<(), MpiError> {
    /// // Ranks 0 and 1 make a communicator; the others go on meanwhile.
    /// let pair = comm.group().incl(&[0, 1])?;
    /// if pair.rank().is_some() {
    ///     let c2 = comm.create_group(&pair, 99)?;
    ///     c2.barrier()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn create_group(&self, group: &Group, tag: u32) -> Result<Comm<L>, MpiError> {
        self.check_subgroup(group)?;
        let me = self.job_rank(self.rank());
        let Some(pos) = group.position(me) else {
            return Err(MpiError::NotMember { job_rank: me });
        };
        if tag > MAX_USER_TAG {
            return Err(MpiError::Tag { tag });
        }
        // Ranks of this communicator (members were checked above).
        let ranks: Vec<u32> = group
            .ranks
            .iter()
            .filter_map(|&j| self.rank_of_job_rank(j))
            .collect();
        let members: Arc<[u32]> = group.ranks.iter().copied().collect();
        let leader = ranks[0];
        Ok(self.make_from(members, pos, |mine| {
            let mine = u64::from(mine);
            if pos == 0 {
                let mut most = mine;
                for &r in &ranks[1..] {
                    let h = self.highest_from(r, tag)?;
                    if h > u64::from(MAX_COMMUNICATOR_ID) {
                        return self.exchange_broken(r, h);
                    }
                    most = most.max(h);
                }
                for &r in &ranks[1..] {
                    self.send(r, tag, &[most])?;
                }
                Ok(most)
            } else {
                self.send(leader, tag, &[mine])?;
                let most = self.highest_from(leader, tag)?;
                if most < mine || most > u64::from(MAX_COMMUNICATOR_ID) {
                    return self.exchange_broken(leader, most);
                }
                Ok(most)
            }
        })?)
    }

    /// One member's 8-byte highest (or the leader's largest) from rank `r`
    /// with `tag`; another length ends the job (H1617, ABORT reason 3).
    fn highest_from(&self, r: u32, tag: u32) -> Result<u64, Error> {
        let b = self.recv_bytes(r, tag)?;
        match <[u8; 8]>::try_from(b.as_slice()) {
            Ok(x) => Ok(u64::from_le_bytes(x)),
            Err(_) => self.mismatch(MismatchError::Length {
                from: self.job_rank(r),
                expected: 8,
                got: b.len() as u64,
            }),
        }
    }

    /// A highest that breaks its rule (protocol §15.3): H1617, ABORT
    /// reason 3.
    fn exchange_broken<X>(&self, r: u32, got: u64) -> Result<X, Error> {
        self.mismatch(MismatchError::Exchange {
            from: self.job_rank(r),
            field: "highest",
            got,
        })
    }
}
