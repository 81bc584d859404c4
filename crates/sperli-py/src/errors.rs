//! Errors as Python exceptions (docs/python.md, "Errors").
//!
//! - `sperli.SperliError`: every error of the package. Attributes: `code`
//!   (the H number, e.g. 1618, or `None` for a local failure), `hcode`
//!   (`"H1618"` or `None`), `job_ended` (whether this rank's job step is
//!   over: every later call fails too), `peer` (the rank an H1612/H1613
//!   names, else `None`), `check` (the check word of a failure of protocol
//!   §18, e.g. `"revoked"` for a call on a revoked communicator, else
//!   `None`).
//! - `sperli.JobError(SperliError)`: the job step is over (a lost peer, an
//!   ABORT, a collective mismatch, a check only one rank could make).
//! - `sperli.ArgumentError(SperliError)`: H1618, refused before anything
//!   was sent; the job goes on.
//! - `sperli.TaskFailedError(SperliError)`: a mailbox task failed on some
//!   rank (H1642); `replies` holds every rank's reply or error.
//!
//! The binding's own checks are [`BindingError`]s: one enum with data, its
//! code written once ([`BindingError::h_code`]).

use std::fmt;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyList;
use sperli_mailbox::MailboxError;
use sperli_wire::{Error, HCode};

use crate::buffer::Dtype;
use crate::raw::Gone;

pyo3::create_exception!(
    sperli,
    SperliError,
    PyException,
    "Every error of sperli. `code`: the H number (e.g. 1618) or None; `hcode`: \"H1618\" or None; `job_ended`: whether this rank's job step is over; `peer`: the rank an H1612/H1613 names, or None."
);
pyo3::create_exception!(
    sperli,
    JobError,
    SperliError,
    "The job step is over on this rank (lost peer, ABORT, collective mismatch, a check only one rank could make): every later call fails too."
);
pyo3::create_exception!(
    sperli,
    ArgumentError,
    SperliError,
    "H1618: the call was refused before anything was sent; the job goes on."
);
pyo3::create_exception!(
    sperli,
    TaskFailedError,
    SperliError,
    "H1642: a mailbox task failed on some rank; `replies` lists every rank's reply (bytes) or error; the group goes on serving."
);

/// A check of this binding that refuses a call (H1618 unless noted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BindingError {
    /// The object does not export a buffer.
    NoBuffer {
        arg: &'static str,
        type_name: String,
    },
    /// Not one of the seven element types (or not little-endian).
    Dtype { arg: &'static str, got: String },
    /// Not C-contiguous.
    NotContiguous { arg: &'static str },
    /// A receive buffer the exporter does not let us write.
    ReadOnly { arg: &'static str },
    /// Memory not aligned for its element type.
    Misaligned { arg: &'static str, dtype: Dtype },
    /// Two buffers of one call with different dtypes.
    DtypeMismatch {
        left: &'static str,
        left_dtype: Dtype,
        right: &'static str,
        right_dtype: Dtype,
    },
    /// A buffer of the wrong number of elements.
    Length {
        arg: &'static str,
        expected: usize,
        got: usize,
    },
    /// A received message longer than the receive buffer (the message is
    /// dropped, as MPI's truncation error does).
    Truncated { len: usize, capacity: usize },
    /// A received message that is not a whole number of elements.
    NotWhole { len: usize, dtype: Dtype },
    /// A rank argument that is negative or too large for a rank.
    Rank { arg: &'static str, got: i64 },
    /// `ANY_SOURCE` where a call needs one rank (a destination, a root).
    AnySource { arg: &'static str },
    /// A `Split` color that is negative (other than `UNDEFINED`).
    Color { got: i64 },
    /// A call on a communicator that `Free` (or the end of its mailbox
    /// task) dropped.
    CommFreed,
    /// A checkpointer on a communicator made by `Split`/`Dup`.
    SubCheckpointer,
    /// An intercommunicator call on a communicator that is not one, or an
    /// intercommunicator asked of a mailbox task's communicator.
    NotIntercomm,
    /// `Create_intercomm` on or with a communicator it cannot use (a
    /// mailbox task's, or the world once a checkpointer holds it).
    IntercommComm,
    /// A misuse the Rust API's MPI calls refuse (`MpiError`, H1618): a
    /// leader or tag out of range of `Create_intercomm`.
    Mpi(sperli_collective::MpiError),
    /// A mailbox server on a communicator made by `Split`/`Dup`.
    SubServer,
    /// A tag that is negative (other than `ANY_TAG` where allowed) or too large.
    Tag { got: i64 },
    /// `IN_PLACE` where the call does not take it.
    InPlace { arg: &'static str },
    /// Not a `sperli.Op`.
    Op { type_name: String },
    /// A lowercase reduction of something that is not a number or an array.
    Scalar { type_name: String },
    /// A lowercase scatter whose root object is not `size` items.
    ScatterItems { got: usize, size: u32 },
    /// A checkpoint state of a type the checkpointer does not store.
    StateType { type_name: String },
    /// A checkpoint state nested deeper than the format allows.
    StateDepth { max: usize },
    /// A checkpoint state whose bytes do not decode into Python objects.
    StateDecode { what: String },
    /// A checkpointer on a mailbox task's communicator.
    TaskCheckpointer,
    /// An `Isend`/`Irecv` on a mailbox task's communicator.
    TaskRequests,
    /// A communicator handed to a mailbox server with requests open.
    OpenRequests { count: usize },
    /// A request of a communicator that was already waited for and freed.
    RequestGone,
    /// A v-buffer spec that is not one of mpi4py's forms (a list of `got` items).
    Spec { arg: &'static str, got: usize },
    /// Counts or displacements that are not a sequence of integers.
    CountsType {
        arg: &'static str,
        type_name: String,
    },
    /// Not one count (or displacement) per rank.
    Counts {
        arg: &'static str,
        got: usize,
        size: usize,
    },
    /// A negative count or displacement.
    Count { arg: &'static str, got: i64 },
    /// A block of a v-buffer outside its buffer.
    Block {
        arg: &'static str,
        rank: usize,
        start: usize,
        count: usize,
        len: usize,
    },
    /// A bare buffer of a v-call that is not `size` equal blocks.
    NotBlocks {
        arg: &'static str,
        len: usize,
        size: usize,
    },
    /// A v-buffer spec whose type item is not the buffer's dtype.
    SpecType {
        arg: &'static str,
        got: String,
        dtype: Dtype,
    },
    /// A v-call receive count that differs from what the rank sent.
    Received {
        arg: &'static str,
        rank: usize,
        expected: usize,
        got: usize,
    },
}

impl BindingError {
    /// The code of every binding check.
    pub(crate) fn h_code(&self) -> HCode {
        HCode::H1618
    }
}

impl fmt::Display for BindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use BindingError::*;
        write!(f, "{} ", self.h_code())?;
        match self {
            NoBuffer { arg, type_name } => write!(
                f,
                "{arg}: a {type_name} object has no buffer (pass a numpy array, bytes, bytearray or memoryview)"
            ),
            Dtype { arg, got } => write!(
                f,
                "{arg}: dtype {got} is not one of the seven element types ({})",
                crate::buffer::DTYPE_NAMES.join(", ")
            ),
            NotContiguous { arg } => write!(
                f,
                "{arg} is not C-contiguous (as in mpi4py, buffers are not copied): pass numpy.ascontiguousarray(...)"
            ),
            ReadOnly { arg } => write!(f, "{arg} is read-only: a receive buffer must be writable"),
            Misaligned { arg, dtype } => write!(
                f,
                "{arg} is not aligned for {}: pass a copy (numpy.array(..., copy=True))",
                dtype.name()
            ),
            DtypeMismatch {
                left,
                left_dtype,
                right,
                right_dtype,
            } => write!(
                f,
                "{left} is {} but {right} is {}",
                left_dtype.name(),
                right_dtype.name()
            ),
            Length { arg, expected, got } => {
                write!(f, "{arg} has {got} elements, the call needs {expected}")
            }
            Truncated { len, capacity } => write!(
                f,
                "a message of {len} bytes does not fit the receive buffer of {capacity} bytes (the message is dropped)"
            ),
            NotWhole { len, dtype } => write!(
                f,
                "a message of {len} bytes is not a whole number of {} elements (the message is dropped)",
                dtype.name()
            ),
            Rank { arg, got } => write!(f, "{arg} {got} is not a rank"),
            AnySource { arg } => write!(f, "{arg} cannot be ANY_SOURCE (only a receive's source can): name the rank"),
            Color { got } => write!(f, "color {got} is not 0..=4294967295 or UNDEFINED"),
            CommFreed => write!(f, "the communicator was freed (Free)"),
            Mpi(e) => {
                let text = e.to_string();
                let prefix = format!("{} ", self.h_code());
                write!(f, "{}", text.strip_prefix(&prefix).unwrap_or(&text))
            }
            IntercommComm => write!(
                f,
                "Create_intercomm needs communicators of COMM_WORLD's ranks (not a mailbox task's, nor COMM_WORLD once a Checkpointer holds it)"
            ),
            NotIntercomm => write!(
                f,
                "an intercommunicator call needs an intercommunicator (made by Create_intercomm on COMM_WORLD's ranks)"
            ),
            SubCheckpointer => write!(
                f,
                "a checkpointer is made on COMM_WORLD, not on a communicator made by Split or Dup"
            ),
            SubServer => write!(
                f,
                "a MailboxServer serves on COMM_WORLD, not on a communicator made by Split or Dup"
            ),
            Tag { got } => write!(f, "tag {got} is not 0..=2147483647"),
            InPlace { arg } => write!(f, "{arg} cannot be IN_PLACE here"),
            Op { type_name } => write!(f, "op must be a sperli.Op (sperli.SUM, ...), not {type_name}"),
            Scalar { type_name } => write!(
                f,
                "a {type_name} cannot be reduced: pass an int, a float, a numpy scalar or array of the seven element types"
            ),
            ScatterItems { got, size } => write!(
                f,
                "scatter at the root needs one item per rank ({size}), got {got}"
            ),
            StateType { type_name } => write!(
                f,
                "a checkpoint state holds bytes, numpy arrays, str, int, float, bool, None, and tuples, lists and dicts of them, not {type_name}"
            ),
            StateDepth { max } => write!(f, "a checkpoint state nests more than {max} levels"),
            StateDecode { what } => write!(f, "the checkpoint state does not decode: {what}"),
            TaskCheckpointer => write!(
                f,
                "a mailbox task's communicator cannot checkpoint (make the checkpointer on COMM_WORLD)"
            ),
            TaskRequests => write!(
                f,
                "a mailbox task's communicator has no Isend/Irecv (blocking point-to-point and collectives only)"
            ),
            OpenRequests { count } => write!(
                f,
                "the communicator has {count} open Isend/Irecv requests: wait for them first"
            ),
            RequestGone => write!(f, "the request's communicator was finalized"),
            Spec { arg, got } => write!(
                f,
                "{arg}: a v-call buffer is a buffer, [buf, counts], [buf, counts, displs], [buf, (counts, displs)] or one of those with the dtype last, not a sequence of {got} items"
            ),
            CountsType { arg, type_name } => write!(
                f,
                "{arg}: counts and displacements are sequences of integers, not {type_name}"
            ),
            Counts { arg, got, size } => write!(f, "{arg}: {got} counts or displacements for {size} ranks"),
            Count { arg, got } => write!(f, "{arg}: count or displacement {got} is negative"),
            Block {
                arg,
                rank,
                start,
                count,
                len,
            } => write!(
                f,
                "{arg}: block {rank} ({count} elements at {start}) does not fit the buffer of {len} elements"
            ),
            NotBlocks { arg, len, size } => write!(
                f,
                "{arg} has {len} elements, not {size} equal blocks: give the counts, [buf, counts]"
            ),
            SpecType { arg, got, dtype } => write!(
                f,
                "{arg}: the type {got} is not the buffer's dtype {}",
                dtype.name()
            ),
            Received {
                arg,
                rank,
                expected,
                got,
            } => write!(
                f,
                "{arg}: counts[{rank}] is {expected} but rank {rank} sent {got} elements"
            ),
        }
    }
}

/// What went wrong in a call.
#[derive(Debug, Clone)]
pub(crate) enum Cause {
    /// An error of the Rust API.
    Wire(Error),
    /// A check of this binding.
    Binding(BindingError),
    /// A mailbox error.
    Mailbox(MailboxError),
    /// The communicator cannot run calls any more.
    Gone(Gone),
}

/// A failed call: its cause and whether the job step is over.
#[derive(Debug, Clone)]
pub(crate) struct Fail {
    pub(crate) cause: Cause,
    pub(crate) job_over: bool,
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail {
            cause: Cause::Wire(e),
            job_over: false,
        }
    }
}

impl From<sperli_collective::MpiError> for Fail {
    fn from(e: sperli_collective::MpiError) -> Self {
        match e {
            sperli_collective::MpiError::Comm(e) => e.into(),
            e => BindingError::Mpi(e).into(),
        }
    }
}

impl From<BindingError> for Fail {
    fn from(e: BindingError) -> Self {
        Fail {
            cause: Cause::Binding(e),
            job_over: false,
        }
    }
}

impl From<MailboxError> for Fail {
    fn from(e: MailboxError) -> Self {
        Fail {
            cause: Cause::Mailbox(e),
            job_over: false,
        }
    }
}

impl From<Gone> for Fail {
    fn from(g: Gone) -> Self {
        Fail {
            cause: Cause::Gone(g),
            job_over: false,
        }
    }
}

impl From<Cause> for Fail {
    fn from(cause: Cause) -> Self {
        Fail {
            cause,
            job_over: false,
        }
    }
}

impl From<BindingError> for PyErr {
    fn from(e: BindingError) -> Self {
        Python::attach(|py| Fail::from(e).into_pyerr(py))
    }
}

fn gone_text(g: Gone) -> &'static str {
    match g {
        Gone::Finalized => "the communicator was finalized (its job step ended)",
        Gone::Served => "the communicator was handed to a MailboxServer",
        Gone::TaskOver => "a mailbox task's communicator was used after its task returned",
        Gone::StillShared => {
            "the endpoint was still shared when the communicator closed (a defect of the binding)"
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Wire(e) => write!(f, "{e}"),
            Cause::Binding(e) => write!(f, "{e}"),
            Cause::Mailbox(e) => match e.code() {
                Some(c) => write!(f, "{c} {e}"),
                None => write!(f, "{e}"),
            },
            Cause::Gone(g) => write!(f, "{}", gone_text(*g)),
        }
    }
}

impl Cause {
    fn code(&self) -> Option<u32> {
        match self {
            Cause::Wire(e) => e.h_code().map(HCode::number),
            Cause::Binding(e) => Some(e.h_code().number()),
            Cause::Mailbox(MailboxError::Collective(e)) => e.h_code().map(HCode::number),
            Cause::Mailbox(e) => e.code().map(|c| c.number()),
            Cause::Gone(_) => None,
        }
    }

    /// The check word of a failure of protocol §18 (e.g. `"revoked"`: a
    /// call on a revoked communicator, §18.8.1), else `None`.
    fn check(&self) -> Option<&'static str> {
        match self {
            Cause::Wire(Error::Recovery(e)) => Some(e.check_name()),
            _ => None,
        }
    }

    fn peer(&self) -> Option<u32> {
        match self {
            Cause::Wire(Error::AbortedByPeer { from, .. })
            | Cause::Mailbox(MailboxError::Collective(Error::AbortedByPeer { from, .. })) => {
                Some(*from)
            }
            Cause::Wire(Error::PeerLost { peer, .. })
            | Cause::Mailbox(MailboxError::Collective(Error::PeerLost { peer, .. })) => Some(*peer),
            _ => None,
        }
    }
}

impl Fail {
    /// The Python exception for this failure.
    pub(crate) fn into_pyerr(self, py: Python<'_>) -> PyErr {
        let code = self.cause.code();
        let text = self.cause.to_string();
        let err = if self.job_over {
            JobError::new_err(text)
        } else if let Cause::Mailbox(MailboxError::TaskFailed(_)) = &self.cause {
            TaskFailedError::new_err(text)
        } else if code == Some(HCode::H1618.number()) {
            ArgumentError::new_err(text)
        } else {
            SperliError::new_err(text)
        };
        let value = err.value(py);
        let hcode = code.map(|c| format!("H{c}"));
        let _ = value.setattr("code", code);
        let _ = value.setattr("hcode", hcode);
        let _ = value.setattr("job_ended", self.job_over);
        let _ = value.setattr("peer", self.cause.peer());
        let _ = value.setattr("check", self.cause.check());
        if let Cause::Mailbox(MailboxError::TaskFailed(replies)) = &self.cause {
            if let Ok(list) = crate::mailbox::replies_list(py, replies) {
                let _ = value.setattr("replies", list);
            }
        } else {
            let _ = value.setattr("replies", PyList::empty(py));
        }
        err
    }
}
