//! # sperli-collective
//!
//! The SPERLI collectives (docs/sperli-protocol.md §8): barrier, bcast,
//! reduce, allreduce, gather and scatter on flat slices of the element
//! types, as a star around the root, over any transport that implements
//! [`Peers`]; typed point-to-point on the real transport; non-blocking
//! collectives.
//!
//! - [`prelude`]: one `use` for a program.
//! - [`Comm`]: the v1 calls, one COLLECTIVE exchange each, plus
//!   - any length in one call where the wire allows it ([`Comm::allreduce`],
//!     [`Comm::reduce`], [`Comm::bcast_into`]; [`Comm::bcast`] with feature
//!     bit 1, [`Comm::bcast_counted`] in v1 jobs), and
//!   - the calls users of MPI bindings expect, built from v1 calls without
//!     changing the wire (protocol §8.9: [`Comm::allgather`],
//!     [`Comm::reduce_scatter`], [`Comm::alltoall`],
//!     [`Comm::allreduce_scalar`], `_into` variants);
//!   - point-to-point ([`Comm::send`], [`Comm::recv`], [`Comm::irecv`],
//!     [`Comm::recv_match`] from any source, [`Comm::probe`],
//!     [`Comm::wait_any`], ...: protocol §7.2) where the link is an
//!     [`Endpoint`] ([`HasEndpoint`]);
//!   - non-blocking collectives ([`Comm::iallreduce`], ...: [`nonblocking`]);
//!   - MPI's semantics that need no wire change: [`PROC_NULL`], persistent
//!     requests ([`persistent`]), groups ([`Group`], [`Comm::create`],
//!     [`Comm::create_group`]), [`Comm::comm_self`] and Cartesian grids
//!     ([`cart`]), whose misuse is [`MpiError`];
//!   - [`Comm::abort`].
//! - [`Element`]: the sealed map from `u8, i32, u32, i64, u64, f32, f64`
//!   (and `usize`/`isize` on 64-bit little-endian hosts) to their element
//!   type codes and little-endian bytes.
//! - [`pipeline`]: with HELLO feature bit 1 on every rank, large calls
//!   run as pipelined chains, rings and trees in chunks (protocol §14),
//!   bit-identical to the star; small calls and v1 jobs keep the v1 star.
//! - [`fake`]: an in-memory [`Peers`] implementation for N ranks in one
//!   process (tests).
//!
//! # A tour
//!
//! A rank program is started by `sperli run -n N -- PROGRAM`; it joins
//! its job with [`Comm::from_stdin`] and ends it with a goodbye (BYE) to
//! every peer. `use sperli_collective::prelude::*;` brings in what it
//! needs. How each MPI, rsmpi and mpi4py call is spelled here:
//! docs/collective-api.md.
//!
//! ## Point-to-point
//!
//! Typed sends and receives on the communicator, tagged as in MPI; a
//! source or tag of `None` is MPI's `ANY_SOURCE` / `ANY_TAG`, and the
//! [`Status`] says who sent what. Messages of any length go through the
//! same calls (protocol §7.2).
//!
//! ```no_run
//! use sperli_collective::prelude::*;
//!
//! let comm = Comm::from_stdin()?;
//! let (rank, size) = (comm.rank(), comm.size());
//! let right = (rank + 1) % size;
//! let left = (rank + size - 1) % size;
//! // A ring shift without deadlock: the receive is posted first.
//! let (_st, from_left): (Status, Vec<f64>) =
//!     comm.sendrecv(right, 7, &[f64::from(rank)], Some(left), Some(7))?;
//! // A receive stays open across a collective (every call takes &self).
//! let pending = comm.irecv::<u64>(None, Some(8))?; // any source
//! comm.send(left, 8, &[u64::from(rank)])?;
//! let total = comm.allreduce_scalar(from_left[0], Reduction::Sum)?;
//! let (status, v) = pending.wait()?;
//! assert_eq!(status.source, right);
//! # let _ = (total, v);
//! comm.into_link().finish()?;
//! # Ok::<(), Error>(())
//! ```
//!
//! ## Collectives
//!
//! Every rank calls the same collectives in the same order (protocol
//! §8.1). Reductions fold in ascending rank order, left operand first,
//! whatever the shape, so a float sum is the same bits in every run and
//! on every rank. [`fake::run`] runs N ranks as threads of one process
//! over an in-memory link, as the examples here do.
//!
//! ```
//! use sperli_collective::prelude::*;
//! let out = sperli_collective::fake::run(3, |c| {
//!     let r = c.rank();
//!     let mut cfg = if r == 0 { vec![1.5f64, 2.5] } else { Vec::new() };
//!     c.bcast(0, &mut cfg).unwrap();
//!     let sum = c.allreduce(&[f64::from(r), 1.0], Reduction::Sum).unwrap();
//!     let rows = c.gatherv(0, &vec![r; r as usize + 1]).unwrap(); // blocks of 1, 2, 3
//!     (cfg, sum, rows.map(|b| b.counts))
//! });
//! assert_eq!(out[2].0, vec![1.5, 2.5]);
//! assert_eq!(out[1].1, vec![3.0, 3.0]);
//! assert_eq!(out[0].2, Some(vec![1, 2, 3]));
//! ```
//!
//! ## Non-blocking collectives
//!
//! `ibarrier`, `ibcast`, `ireduce`, `iallreduce`, `igather`, `iscatter`
//! and `iallgather` return a [`Request`] at once and go on while the
//! program computes ([`nonblocking`]); they send the frames of the
//! blocking calls in issue order.
//!
//! ```
//! use sperli_collective::prelude::*;
//! let out = sperli_collective::fake::run(4, |c| {
//!     let req = c.iallreduce(&[c.rank() as u64], Reduction::Sum).unwrap();
//!     let local: u64 = (0..1000u64).sum(); // computation overlapped with the call
//!     (req.wait().unwrap()[0], local)
//! });
//! assert!(out.iter().all(|&(s, _)| s == 6));
//! ```
//!
//! ## Communicators
//!
//! [`Comm::split`] and [`Comm::dup`] (HELLO feature bit 2 on every rank,
//! protocol §15) make communicators whose collectives run over their
//! members only; without the bit `split` is refused with
//! [`UsageError::NoCommunicators`](sperli_wire::error::UsageError::NoCommunicators)
//! and the job goes on.
//!
//! ```
//! use sperli_collective::prelude::*;
//! let out = sperli_collective::fake::run(5, |c| {
//!     let row = c.split(Some(c.rank() / 3), 0).unwrap().unwrap(); // ranks 0-2 and 3-4
//!     (row.size(), row.allreduce_scalar(1u32, Reduction::Sum).unwrap())
//! });
//! assert_eq!(out[0], (3, 3));
//! assert_eq!(out[4], (2, 2));
//! ```
//!
//! ## Groups, grids and PROC_NULL
//!
//! A [`Group`] is an ordered set of job ranks, combined with MPI's rules;
//! [`Comm::create`] makes the communicator of one, [`Comm::cart_create`]
//! lays a grid on the ranks, whose [`Cartcomm::shift`] gives
//! [`PROC_NULL`] past a non-periodic edge, and every point-to-point call
//! with `PROC_NULL` completes at once. [`Comm::comm_self`] is the
//! communicator of this rank alone.
//!
//! ```
//! use sperli_collective::prelude::*;
//! let out = sperli_collective::fake::run(6, |c| {
//!     let mut dims = [0, 0];
//!     dims_create(c.size(), &mut dims).unwrap(); // [3, 2]
//!     let grid = c.cart_create(&dims, &[false, true], false).unwrap().unwrap();
//!     let (up, down) = grid.shift(0, 1).unwrap(); // PROC_NULL at the edges
//!     let firsts = c.create(&c.group().range_incl(&[(0, 4, 2)]).unwrap()).unwrap();
//!     (up, down, firsts.map(|f| f.size()))
//! });
//! assert_eq!(out[0], (PROC_NULL, 2, Some(3)));
//! assert_eq!(out[5], (3, PROC_NULL, None));
//! ```
//!
//! ## Errors
//!
//! Every call returns [`Error`]; an error the protocol gives a code has
//! it in [`Error::h_code`] (docs/error-codes.md). A mistake a rank can
//! see alone (a bad root, lengths that do not fit) is refused before
//! anything is sent and the job goes on; a job-ending error (a lost peer,
//! an ABORT) fails every later call the same way. Under `sperli run` a
//! job-ending error ends the process with exit status H-code − 1600
//! unless the program asked for errors to be returned (the transport's
//! `ErrorMode`). [`Comm::abort`] ends the job from the program, as
//! `MPI_Abort` does.
//!
//! ```
//! use sperli_collective::prelude::*;
//! let out = sperli_collective::fake::run(2, |c| {
//!     let bad = c.bcast(7, &mut vec![0u8]).unwrap_err(); // no rank 7
//!     let ok = c.allreduce_scalar(1u32, Reduction::Sum); // the job goes on
//!     (bad.h_code().map(|h| h.number()), ok.is_ok())
//! });
//! assert_eq!(out[0], (Some(1618), true));
//! ```
//!
//! ## Checkpoints
//!
//! `sperli_ckpt::Checkpointer` (crate sperli-ckpt) wraps a `Comm`: a
//! `checkpoint(&state)` is signed and copied to a buddy rank, and after a
//! lost rank `sperli run --restart-max K` restarts the job, whose ranks
//! `resume()` from the newest checkpoint every rank holds (protocol §9,
//! §10). `sperli_ckpt::BcastState::bcast_state` broadcasts a struct of
//! parameters in one call. A checkpoint with an open request (a receive,
//! a send, a non-blocking collective) fails with H1624.
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
//!   let links = sperli_collective::fake::FakePeers::job(1);
//!   let comm = sperli_collective::Comm::new(links.into_iter().next().unwrap());
//!   shared(&comm);
//!   ```
//! - Non-blocking collectives run on the communicator's own progress thread
//!   (see [`nonblocking`]); the calls that need that thread exist where the
//!   link is `Send + Sync + 'static` (an owned [`Endpoint`], an
//!   `Arc<Endpoint>`, a [`fake::FakePeers`]).
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
pub mod agreement;
mod binomial_tree;
mod bit4;
pub mod cart;
mod collectives;
mod comm;
mod communicators;
mod element;
mod element_bit4;
mod endpoint_peers;
mod extra;
mod group;
pub mod intercomm;
pub mod intercomm_collectives;
mod large;
mod large_blocks;
mod mpi_error;
pub mod nonblocking;
mod nonblocking_more;
mod p2p;
mod pair;
mod peers;
pub mod persistent;
pub mod pipeline;
mod recovery;
mod scan;
mod self_comm;
mod special;
mod star;
mod state;
mod ulfm;
mod user;
pub mod vcoll;

pub mod fake;

pub use cart::{dims_create, Cartcomm, Grid};
pub use comm::Comm;
pub use element::Element;
pub use element_bit4::{Bool8, Complex128, Complex64, ValueIndex};
pub use group::{Comparison, Group, GROUP_EMPTY};
pub use intercomm::Intercomm;
pub use intercomm_collectives::InterRoot;
pub use large::max_chunk_elems;
pub use large_blocks::chunk_ranges;
pub use mpi_error::MpiError;
pub use nonblocking::Request;
pub use p2p::{HasEndpoint, RecvRequest, SendRequest};
pub use peers::{CkptFrame, Freer, Peers};
pub use special::{empty_status, null_status, ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED};
pub use sperli_transport::Status;
pub use sperli_transport::{Endpoint, ErrorMode, Recovered};
pub use sperli_wire::abort::AbortReason;
pub use sperli_wire::{Error, HCode, Reduction};
pub use ulfm::OwnsEndpoint;
pub use user::UserFold;

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
    pub use crate::persistent::{start_all, Persistent, PersistentRecv, PersistentSend};
    pub use crate::{dims_create, Cartcomm, InterRoot, Intercomm};
    pub use crate::{Comm, Element, Peers};
    pub use crate::{Comparison, Group, MpiError, ANY_TAG, GROUP_EMPTY, PROC_NULL, UNDEFINED};
    pub use sperli_transport::{Endpoint, Status};
    pub use sperli_wire::abort::AbortReason;
    pub use sperli_wire::error::{ArgumentError, LocalError, MismatchError, UsageError};
    pub use sperli_wire::{Error, HCode, Reduction};
}
