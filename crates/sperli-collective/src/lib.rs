//! # sperli-collective
//!
//! The SPERLI v1 collectives (protocol text "COLLECTIVE (3)";
//! docs/sperli-protocol.md §8; layouts §5 and §10): barrier, bcast, reduce,
//! allreduce, gather and scatter on flat slices of the seven element types,
//! as a star around the root, over any transport that implements [`Link`].
//!
//! - [`Comm`]: the v1 calls, one COLLECTIVE exchange each, plus
//!   - chunked calls for arrays larger than one frame
//!     ([`Comm::allreduce_large`], [`Comm::bcast_large`], ...), and
//!   - the calls users of MPI bindings expect, built from v1 calls without
//!     changing the wire ([`Comm::allgather`], [`Comm::reduce_scatter`],
//!     [`Comm::alltoall`], [`Comm::allreduce_scalar`], `_into` variants).
//! - [`Element`]: the sealed map from `u8, i32, u32, i64, u64, f32, f64` to
//!   their element type codes and little-endian bytes.
//! - [`pipeline`]: with HELLO feature bit 1 on every rank, large calls
//!   run as pipelined chains, rings and trees in chunks (protocol §14),
//!   bit-identical to the star; small calls and v1 jobs keep the v1 star.
//! - [`fake`]: an in-memory [`Link`] for N ranks in one process (tests).
//!
//! ```
//! use sperli_collective::fake;
//! use sperli_wire::element::Reduction;
//! let out = fake::run(2, |comm| {
//!     comm.barrier().unwrap();
//!     comm.allreduce_scalar(comm.rank() + 1, Reduction::Sum).unwrap()
//! });
//! assert_eq!(out, vec![3u32, 3]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod comm;
mod element;
mod endpoint_link;
mod extra;
mod large;
mod link;
pub mod pipeline;
pub mod vcoll;

pub mod fake;

pub use comm::Comm;
pub use element::Element;
pub use large::max_chunk_elems;
pub use link::{CkptFrame, Link};
pub use sperli_transport::Endpoint;
pub use sperli_wire::{Error, HCode, Reduction};
