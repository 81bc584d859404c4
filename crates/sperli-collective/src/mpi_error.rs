//! [`MpiError`]: what the calls of MPI's group, topology and
//! persistent-request semantics fail with (groups, communicators made
//! from groups, Cartesian topologies, persistent requests).
//!
//! A misuse of these calls is a check every rank makes alone before
//! anything is sent, as the collective arguments of docs/error-codes.md's
//! H1618 are: the call is refused and the job goes on. A failure of the
//! communication underneath is the communicator's own [`Error`], carried
//! unchanged in [`MpiError::Comm`] (with its own H-code).

use std::fmt;

use sperli_wire::{Error, HCode};

/// The error of the group, topology and persistent-request calls: a
/// misuse (H1618, refused before anything is sent; the job goes on) or the
/// communicator's [`Error`].
///
/// ```
/// use sperli_collective::{Group, MpiError};
/// let g = Group::from_job_ranks(&[0, 1, 2], None).unwrap();
/// let e = g.incl(&[0, 5]).unwrap_err();
/// assert_eq!(e, MpiError::Rank { rank: 5, size: 3 });
/// assert_eq!(e.h_code().map(|h| h.number()), Some(1618));
/// assert!(e.to_string().starts_with("H1618 "));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MpiError {
    /// A rank of a group not below the group's size (MPI's
    /// `MPI_ERR_RANK`).
    Rank {
        /// The rank given.
        rank: u32,
        /// The group's size.
        size: u32,
    },
    /// A rank named twice where each may appear once (`incl`, `excl`, the
    /// ranges; MPI's `MPI_ERR_RANK`).
    DuplicateRank {
        /// The rank named twice.
        rank: u32,
    },
    /// A rank range (first, last, stride) with stride 0 (MPI's
    /// `MPI_Group_range_incl` and `MPI_Group_range_excl`).
    ZeroStride {
        /// The range's first rank.
        first: u32,
        /// The range's last rank.
        last: u32,
    },
    /// A group member (a job rank) that is not a member of the
    /// communicator the call was made on (`create`, `create_group`: MPI
    /// wants a subgroup of the communicator's group), or a caller of
    /// `create_group` that is not a member of the group.
    NotMember {
        /// The member's job rank.
        job_rank: u32,
    },
    /// A tag of 2147483648 or above (`create_group`; user tags are
    /// 0..=2147483647).
    Tag {
        /// The tag given.
        tag: u32,
    },
    /// A Cartesian grid with more places than the communicator has ranks
    /// (MPI's `MPI_Cart_create`), or a dimension of extent 0.
    GridSize {
        /// The product of the extents (`u64`: it may not fit a rank).
        places: u64,
        /// The communicator's size.
        size: u32,
    },
    /// Two per-dimension arguments of different lengths (extents and
    /// periods, coordinates and dimensions, `remain_dims` and dimensions).
    Dimensions {
        /// The number of dimensions of the grid.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// `dims_create`: the fixed (non-zero) extents do not divide the
    /// number of nodes.
    Indivisible {
        /// The number of nodes.
        nnodes: u32,
        /// The product of the fixed extents.
        fixed: u64,
    },
    /// A coordinate outside a non-periodic dimension (`cart_rank`).
    Coordinate {
        /// The dimension.
        dim: usize,
        /// The coordinate given.
        coord: i64,
        /// The dimension's extent.
        extent: u32,
    },
    /// A shift direction not below the number of dimensions.
    Direction {
        /// The direction given.
        direction: usize,
        /// The number of dimensions.
        ndims: usize,
    },
    /// `start` on a persistent request that is still active (started and
    /// not yet completed by a wait or test).
    Active,
    /// The communicator's own error (its H-code, if it has one).
    Comm(Error),
}

impl MpiError {
    /// The H-code: H1618 for a misuse (docs/error-codes.md: invalid
    /// arguments, refused before anything is sent), the communicator
    /// error's own code for [`MpiError::Comm`].
    pub fn h_code(&self) -> Option<HCode> {
        match self {
            MpiError::Comm(e) => e.h_code(),
            _ => Some(HCode::H1618),
        }
    }
}

impl fmt::Display for MpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let MpiError::Comm(e) = self {
            return write!(f, "{e}");
        }
        if let Some(code) = self.h_code() {
            write!(f, "{code} ")?;
        }
        match self {
            MpiError::Rank { rank, size } => {
                write!(f, "rank {rank} is not below the group's size {size}")
            }
            MpiError::DuplicateRank { rank } => write!(f, "rank {rank} is named twice"),
            MpiError::ZeroStride { first, last } => {
                write!(f, "the range {first}..={last} has stride 0")
            }
            MpiError::NotMember { job_rank } => write!(
                f,
                "job rank {job_rank} of the group is not a member of the communicator"
            ),
            MpiError::Tag { tag } => {
                write!(f, "tag {tag} is reserved (user tags are 0..=2147483647)")
            }
            MpiError::GridSize { places, size } => write!(
                f,
                "a grid of {places} places does not fit a communicator of {size} ranks (or has an extent 0)"
            ),
            MpiError::Dimensions { expected, got } => {
                write!(f, "{got} values for a grid of {expected} dimensions")
            }
            MpiError::Indivisible { nnodes, fixed } => write!(
                f,
                "{nnodes} nodes are not a multiple of the fixed extents' product {fixed}"
            ),
            MpiError::Coordinate { dim, coord, extent } => write!(
                f,
                "coordinate {coord} is outside the non-periodic dimension {dim} of extent {extent}"
            ),
            MpiError::Direction { direction, ndims } => {
                write!(f, "direction {direction} is not below the {ndims} dimensions")
            }
            MpiError::Active => write!(f, "the persistent request is still active"),
            MpiError::Comm(_) => Ok(()),
        }
    }
}

impl std::error::Error for MpiError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MpiError::Comm(e) => Some(e),
            _ => None,
        }
    }
}

impl From<Error> for MpiError {
    fn from(e: Error) -> Self {
        MpiError::Comm(e)
    }
}
