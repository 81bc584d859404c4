//! # sperli-collective
//!
//! The SPERLI collectives (docs/sperli-protocol.md §8): barrier, bcast,
//! reduce, allreduce, gather and scatter on flat slices of the element
//! types, as a star around the root, over any transport that implements
//! [`Link`]; typed point-to-point on the real transport; non-blocking
//! collectives.
//!
//! - [`prelude`]: one `use` for a program.
//! - [`Comm`]: the v1 calls, one COLLECTIVE exchange each, plus
//!   - chunked calls for arrays larger than one frame
//!     ([`Comm::allreduce_large`], [`Comm::bcast_large`], ...), and
//!   - the calls users of MPI bindings expect, built from v1 calls without
//!     changing the wire (protocol §8.9: [`Comm::allgather`],
//!     [`Comm::reduce_scatter`], [`Comm::alltoall`],
//!     [`Comm::allreduce_scalar`], `_into` variants);
//!   - point-to-point ([`Comm::send`], [`Comm::recv`], [`Comm::irecv`],
//!     [`Comm::recv_match`] from any source, [`Comm::probe`],
//!     [`Comm::wait_any`], ...: protocol §7.2) where the link is an
//!     [`Endpoint`] ([`HasEndpoint`]);
//!   - non-blocking collectives ([`Comm::iallreduce`], ...: [`nonblocking`]);
//!   - [`Comm::abort`].
//! - [`Element`]: the sealed map from `u8, i32, u32, i64, u64, f32, f64`
//!   (and `usize`/`isize` on 64-bit little-endian hosts) to their element
//!   type codes and little-endian bytes.
//! - [`pipeline`]: with HELLO feature bit 1 on every rank, large calls
//!   run as pipelined chains, rings and trees in chunks (protocol §14),
//!   bit-identical to the star; small calls and v1 jobs keep the v1 star.
//! - [`fake`]: an in-memory [`Link`] for N ranks in one process (tests).
//!
//! # Threading rules
//!
//! - Every call of [`Comm`] takes `&self`, so requests that borrow the
//!   communicator (a posted receive, a started send) stay open while other
//!   calls run, collectives included.
//! - A `Comm` is [`Send`] (when its link is `Send + Sync`) but not
//!   [`Sync`]: its calls are made by one thread at a time, which the
//!   compiler enforces. Collectives must be called in the same order on
//!   every rank (protocol §8.1); a second thread making collectives on the
//!   same communicator could not keep that order, so it cannot share it.
//! - Another thread may make point-to-point calls at the same time on the
//!   [`Endpoint`] itself (it is `Sync`; [`Comm::link`] or an
//!   `Arc<Endpoint>` shared by two `Comm`s), e.g. a receiver thread beside
//!   the computing one. The frames of one message larger than a frame must
//!   not be interleaved with another message of the same tag to the same
//!   rank.
//!   ```compile_fail
//!   // A `Comm` cannot be shared between threads:
//!   fn shared<T: Sync>(_: &T) {}
//!   let links = sperli_collective::fake::FakeLink::job(1);
//!   let comm = sperli_collective::Comm::new(links.into_iter().next().unwrap());
//!   shared(&comm);
//!   ```
//! - Non-blocking collectives run on the communicator's own progress thread
//!   (see [`nonblocking`]); the calls that need that thread exist where the
//!   link is `Send + Sync + 'static` (an owned [`Endpoint`], an
//!   `Arc<Endpoint>`, a [`fake::FakeLink`]).
//!
//! ```
//! use sperli_collective::fake;
//! use sperli_collective::prelude::*;
//! let out = fake::run(2, |comm| {
//!     comm.barrier().unwrap();
//!     comm.allreduce_scalar(comm.rank() + 1, Reduction::Sum).unwrap()
//! });
//! assert_eq!(out, vec![3u32, 3]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod abort;
mod comm;
mod communicators;
mod element;
mod endpoint_link;
mod extra;
mod large;
mod link;
pub mod nonblocking;
mod p2p;
pub mod pipeline;
mod state;
pub mod vcoll;

pub mod fake;

pub use comm::Comm;
pub use element::Element;
pub use large::max_chunk_elems;
pub use link::{CkptFrame, Link};
pub use nonblocking::Request;
pub use p2p::{HasEndpoint, RecvRequest, SendRequest};
pub use sperli_transport::Endpoint;
pub use sperli_transport::Status;
pub use sperli_wire::abort::AbortReason;
pub use sperli_wire::{Error, HCode, Reduction};

/// Everything a program needs, in one `use sperli_collective::prelude::*;`:
/// the communicator, reductions, element types, requests, statuses and
/// errors.
///
/// ```
/// use sperli_collective::prelude::*;
/// let out = sperli_collective::fake::run(2, |c: &mut Comm<_>| {
///     c.allreduce_scalar(c.rank() as usize + 1, Reduction::Sum).unwrap()
/// });
/// assert_eq!(out, vec![3, 3]);
/// ```
pub mod prelude {
    pub use crate::nonblocking::{wait_all, Request};
    pub use crate::p2p::{HasEndpoint, RecvRequest, SendRequest};
    pub use crate::{Comm, Element, Link};
    pub use sperli_transport::{Endpoint, Status};
    pub use sperli_wire::abort::AbortReason;
    pub use sperli_wire::error::{ArgumentError, LocalError, MismatchError, UsageError};
    pub use sperli_wire::{Error, HCode, Reduction};
}
