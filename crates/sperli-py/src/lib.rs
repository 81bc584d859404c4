//! # sperli-py
//!
//! The `sperli` Python package's extension module (`sperli._sperli`): the
//! calls of mpi4py over SPERLI, where every byte between ranks travels
//! over mutually authenticated TLS 1.3 (docs/python.md).
//!
//! ```python
//! import numpy as np, sperli
//! comm = sperli.COMM_WORLD                      # joins the job on stdin
//! x = np.full(4, comm.rank, dtype=np.float64)
//! comm.Allreduce(sperli.IN_PLACE, x, op=sperli.SUM)
//! ```
//!
//! One module per area, each with its own `#[pymethods] impl Comm` block
//! (PyO3's `multiple-pymethods`):
//!
//! | module | what |
//! |---|---|
//! | [`comm`] | `Comm`, joining the job, `Split`, `Dup`, `Abort`, `Comm::call` (GIL released, errors mapped) |
//! | [`p2p`] | `Send`, `Recv`, `Isend`, `Irecv`, `Sendrecv`, `Probe`, `Iprobe`, `Request`, `Status` |
//! | [`collectives`] | `Barrier`, `Bcast`, `Reduce`, `Allreduce`, `Gather`, `Scatter`, `Allgather`, `Alltoall`, `Reduce_scatter_block` |
//! | [`vcoll`] | `Gatherv`, `Scatterv`, `Allgatherv`, `Alltoallv` |
//! | [`scan`] | `Scan`, `Exscan`, `scan`, `exscan` |
//! | [`icoll`] | `Ibarrier`, `Ibcast`, `Ireduce`, `Iallreduce`, `Igather`, `Iscatter`, `Iallgather` |
//! | [`ulfm`] | ULFM: `Revoke`, `Is_revoked`, `Agree`, `Iagree`, `Shrink`, `Get_failed`, `Ack_failed` |
//! | [`objects`] | lowercase calls on picklable objects |
//! | [`inter`], [`inter_buf`] | intercommunicators: `Create_intercomm`, `Merge`, the collectives across the groups |
//! | [`ckpt`], [`state`] | `Checkpointer` and its state encoding |
//! | [`mailbox`] | `Mailbox`, `MailboxServer`, `Task`, `Reply` |
//! | [`buffer`] | the one check of buffers and dtypes (`Buf`, `with_dtype!`) |
//! | [`ops`] | `SUM` ... `BXOR`, `IN_PLACE` |
//! | [`userops`] | user-defined reductions (`Op.Create`), `Reduce_local`, reductions of objects with a Python `op` |
//! | [`errors`] | `SperliError`, `JobError`, `ArgumentError`, `TaskFailedError` |
//! | [`rank`], `raw` | what a call runs on; the crate's only `unsafe` |
//!
//! Adding a call (e.g. one the Rust API gains): write it in the area's
//! module as a method of `impl Comm`; take each buffer with
//! [`Buf::send`](buffer::Buf::send) / [`Buf::recv`](buffer::Buf::recv);
//! run the Rust call in [`Comm::call`](comm::Comm) (GIL released) with
//! `with_dtype!` picking the element type; a request-returning call files
//! its Rust handle in [`rank::Open`] and returns a `p2p::Request`; add its
//! line to `python/sperli/_sperli.pyi` and a test under `tests/`.
#![warn(missing_docs)]
// The modules are private (the Python API is the interface); their docs
// are for maintainers (`cargo doc --document-private-items`) and link the
// private items they describe.
#![allow(rustdoc::private_intra_doc_links)]

pub mod buffer;
pub mod cart;
pub mod ckpt;
pub mod collectives;
pub mod comm;
pub mod errors;
pub mod icoll;
pub mod inter;
pub mod inter_buf;
pub mod mailbox;
pub mod matched;
pub mod messages;
pub mod objects;
pub mod ops;
pub mod p2p;
pub mod rank;
#[allow(unsafe_code)]
mod raw;
pub mod scan;
pub mod state;
pub mod ulfm;
pub mod userops;
pub mod vcoll;

use pyo3::prelude::*;

/// The extension module `sperli._sperli` (the package `sperli` re-exports it).
#[pymodule]
fn _sperli(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<comm::Comm>()?;
    m.add_class::<p2p::Request>()?;
    m.add_class::<p2p::Status>()?;
    m.add_class::<ckpt::Checkpointer>()?;
    m.add_class::<mailbox::Mailbox>()?;
    m.add_class::<mailbox::MailboxServer>()?;
    m.add_class::<mailbox::Task>()?;
    m.add_class::<mailbox::Reply>()?;
    ops::register(m)?;
    userops::register(m)?;
    cart::register(m)?;
    m.add("ANY_SOURCE", p2p::ANY_SOURCE)?;
    m.add("ANY_TAG", p2p::ANY_TAG)?;
    m.add("UNDEFINED", comm::UNDEFINED)?;
    m.add("ERRORS_RETURN", comm::ERRORS_RETURN)?;
    m.add("ERRORS_ARE_FATAL", comm::ERRORS_ARE_FATAL)?;
    m.add(
        "DTYPES",
        pyo3::types::PyTuple::new(py, &buffer::DTYPE_NAMES[..buffer::NUMPY_DTYPES])?,
    )?;
    m.add("SperliError", py.get_type::<errors::SperliError>())?;
    m.add("JobError", py.get_type::<errors::JobError>())?;
    m.add("ArgumentError", py.get_type::<errors::ArgumentError>())?;
    m.add("TaskFailedError", py.get_type::<errors::TaskFailedError>())?;
    Ok(())
}
