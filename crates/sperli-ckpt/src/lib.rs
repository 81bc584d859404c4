//! # sperli-ckpt
//!
//! Signed, buddy-replicated checkpoints for SPERLI v1 and the resume
//! exchange that restarts a job from the last valid COMMIT (protocol
//! §7.7-§7.11, §9, §10; "protocol" is docs/sperli-protocol.md).
//!
//! - [`Checkpointable`]: state to bytes and back, with a format version;
//!   implemented for `u8, i32, u32, i64, u64, f32, f64, bool`, `Vec<T>`,
//!   `String`, `Option<T>`, arrays and tuples up to 4, and for your structs
//!   with [`checkpointable!`]. Files, connections and handles have no
//!   implementation, so checkpointing them does not compile.
//! - [`Checkpointer`]: owns the rank's [`Comm`](sperli_collective::Comm);
//!   [`Checkpointer::checkpoint`] is the collective `checkpoint(state)` of
//!   §9.4 and [`Checkpointer::resume`] the exchange of §10.2.
//!   [`Checkpointer::run`] runs the program's body and, after a rank was
//!   lost in a job run with `sperli run --recover inplace` (feature bit 5),
//!   runs it again in the new membership epoch: its resume then rolls every
//!   rank back to the launcher's rollback epoch (§18.7), survivors in their
//!   processes and the replacement alike
//!   ([`Checkpointer::rolled_back`] says so).
//! - [`BcastState`]: `comm.bcast_state(root, &mut params)` sends a
//!   `Checkpointable` struct of parameters from one rank to all in one
//!   call (an extension trait on `Comm`, since `Checkpointable` lives here).
//! - [`JobKeys`]: the job id, incarnation and job key pair from the job
//!   description.
//!
//! Inside: `checkpointer.rs` (the type), `checkpoint.rs` (§9.4),
//! `resume.rs` (§10.2, with the fallback to E − 1; rank 0's side in
//! `resume_lead.rs`) with `load.rs` (one
//! round: the own file and the buddy fetch), `rollback.rs` (§18.7: `run`,
//! `recover`, `rolled_back`), `store.rs` and
//! `fsio.rs` (the tree on disk), `fault.rs` (the crash tests' SIGKILL
//! hook, compiled only with the `fault-injection` feature). The checkpoint
//! and the resume run over any [`Peers`](sperli_collective::Peers) that
//! carries checkpoint frames: the transport's endpoint, or
//! [`FakePeers`](sperli_collective::fake::FakePeers) in unit tests.
//!
//! A rank program (run with `sperli run --restart-max K --checkpoint-dir DIR`):
//!
//! ```no_run
//! use sperli_ckpt::Checkpointer;
//! use sperli_collective::Reduction;
//!
//! let mut ck = Checkpointer::join()?;
//! // The body runs again after a recovery in place (`--recover inplace`).
//! let x = ck.run(|ck| {
//!     let (mut step, mut x): (u64, f64) = match ck.resume::<(u64, f64)>()? {
//!         Some((_epoch, state)) => state,
//!         None => (0, 1.0),
//!     };
//!     while step < 100 {
//!         x = ck.comm().allreduce(&[x * 0.5], Reduction::Sum)?[0];
//!         step += 1;
//!         if step % 10 == 0 {
//!             ck.checkpoint(&(step, x))?;
//!         }
//!     }
//!     Ok(x)
//! })?;
//! println!("{x}");
//! ck.into_comm().into_link().finish()?;
//! # Ok::<(), sperli_wire::Error>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bcast_state;
mod checkpoint;
mod checkpointer;
mod fault;
mod fsio;
mod keys;
mod load;
mod resume;
mod resume_lead;
mod rollback;
mod state;
mod store;
#[cfg(test)]
mod test_job;

pub use bcast_state::{BcastState, BCAST_STATE};
pub use checkpointer::{Checkpointer, ENV_CHECKPOINT_DIR};
pub use keys::JobKeys;
pub use sperli_wire::codec::Reader;
pub use sperli_wire::error::DecodeError;
pub use sperli_wire::Error;
pub use state::{decode_state, encode_state, encode_state_into, Checkpointable, STATE};
