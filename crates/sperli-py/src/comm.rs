//! `sperli.Comm`: a communicator, how a rank joins its job
//! ([`Comm::from_stdin`]), and [`Comm::call`], the one way every call of
//! every area (p2p.rs, collectives.rs, objects.rs, ckpt.rs) reaches the
//! Rust API: with the GIL released, under the slot's lock, its error
//! turned into the right Python exception.

use std::sync::Arc;

use pyo3::prelude::*;
use sperli_ckpt::JobKeys;
use sperli_collective::Comm as RustComm;
use sperli_transport::ErrorMode;
use sperli_wire::abort::AbortReason;
use sperli_wire::Error;

use crate::errors::{BindingError, Cause, Fail};
use crate::rank::Rank;
use crate::raw::{Gone, Slot};

/// A communicator: this rank's view of its job (rank, size, the calls).
///
/// The world communicator is `sperli.COMM_WORLD` (or `sperli.init()`):
/// it joins the job on first use, reading the job description the
/// `sperli` launcher writes on stdin (`sperli run -n 4 -- python3
/// script.py`). Calls on one communicator run one at a time (MPI's
/// `THREAD_SERIALIZED`): a call from a second thread waits until the
/// first returns. Every call releases the GIL while it waits.
#[pyclass(module = "sperli", frozen)]
pub struct Comm {
    pub(crate) slot: Arc<Slot>,
    /// `None` for the rank's own communicator (the world, or a mailbox
    /// task's), else the id of a sub-communicator of the same slot
    /// (`Split`/`Dup`).
    pub(crate) sub: Option<u32>,
    rank: u32,
    size: u32,
    incarnation: u32,
}

/// Runs `f` on the rank of `slot` with the GIL released; an error becomes
/// its exception (job-ending or not, as the rank's state says after the
/// call). [`Comm::call`] and the requests use it.
pub(crate) fn run<R: Send>(
    py: Python<'_>,
    slot: &Slot,
    f: impl FnOnce(&mut Rank) -> Result<R, Fail> + Send,
) -> PyResult<R> {
    run_on(py, slot, None, f)
}

/// [`run`] on communicator `sub` of the slot (`None`: its own; else a
/// sub-communicator's id): the rank's collectives and ranks are that
/// communicator's for the call ([`Rank::select`]).
pub(crate) fn run_on<R: Send>(
    py: Python<'_>,
    slot: &Slot,
    sub: Option<u32>,
    f: impl FnOnce(&mut Rank) -> Result<R, Fail> + Send,
) -> PyResult<R> {
    let out = py.detach(move || {
        let ran = slot.with(|r| {
            let out = match r.select(sub) {
                Ok(()) => f(r).map_err(|e| r.fail(e)),
                Err(e) => Err(Fail::from(e)),
            };
            let _ = r.select(None);
            out
        });
        match ran {
            Ok(r) => r,
            Err(gone) => Err(Fail::from(gone)),
        }
    });
    out.map_err(|f| f.into_pyerr(py))
}

/// `sperli.UNDEFINED` (mpi4py's `MPI.UNDEFINED`): a `Split` color that
/// joins no communicator; what `Waitany` returns when no request is open.
pub(crate) const UNDEFINED: i64 = -32766;

/// `sperli.ERRORS_RETURN`: failures of the job step are raised.
pub(crate) const ERRORS_RETURN: &str = "exception";
/// `sperli.ERRORS_ARE_FATAL`: a failure of the job step ends the process.
pub(crate) const ERRORS_ARE_FATAL: &str = "fatal";

fn error_mode(errors: &str) -> PyResult<ErrorMode> {
    match errors {
        ERRORS_RETURN => Ok(ErrorMode::Return),
        ERRORS_ARE_FATAL => Ok(ErrorMode::Fatal),
        _ => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "errors={errors:?}: \"exception\" (sperli.ERRORS_RETURN) or \"fatal\" (sperli.ERRORS_ARE_FATAL)"
        ))),
    }
}

/// `comm`, or the world communicator (`sperli.init()`) when `None`.
pub(crate) fn or_world<'py>(
    py: Python<'py>,
    comm: Option<Bound<'py, Comm>>,
) -> PyResult<Bound<'py, Comm>> {
    match comm {
        Some(c) => Ok(c),
        None => Ok(py
            .import("sperli")?
            .call_method0("init")?
            .cast_into::<Comm>()?),
    }
}

/// Converts a Python rank argument.
pub(crate) fn rank_arg(arg: &'static str, v: i64) -> Result<u32, BindingError> {
    if v == crate::p2p::ANY_SOURCE {
        return Err(BindingError::AnySource { arg });
    }
    u32::try_from(v).map_err(|_| BindingError::Rank { arg, got: v })
}

impl Comm {
    /// A communicator over `slot`.
    pub(crate) fn over(slot: Arc<Slot>, rank: u32, size: u32, incarnation: u32) -> Self {
        Self {
            slot,
            sub: None,
            rank,
            size,
            incarnation,
        }
    }

    /// Sub-communicator `id` of this communicator's slot.
    pub(crate) fn child(&self, id: u32, rank: u32, size: u32) -> Comm {
        Comm {
            slot: self.slot.clone(),
            sub: Some(id),
            rank,
            size,
            incarnation: self.incarnation,
        }
    }

    /// This rank.
    pub(crate) fn rank_u32(&self) -> u32 {
        self.rank
    }

    /// The job size.
    pub(crate) fn size_u32(&self) -> u32 {
        self.size
    }

    /// The job's incarnation (0 for a mailbox task's communicator).
    pub(crate) fn incarnation_u32(&self) -> u32 {
        self.incarnation
    }

    /// Runs `f` on this communicator's rank with the GIL released; an
    /// error becomes its exception (job-ending or not, as the rank's
    /// state says after the call).
    pub(crate) fn call<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Rank) -> Result<R, Fail> + Send,
    ) -> PyResult<R> {
        run_on(py, &self.slot, self.sub, f)
    }

    /// Joins the job on stdin (no GIL needed), errors handled by `mode`.
    fn join(mode: ErrorMode) -> Result<(Slot, u32, u32, u32), Error> {
        let (comm, mut desc) = RustComm::from_stdin_with_description()?;
        comm.link().set_errors(mode);
        let keys = JobKeys::from_description(&desc).map_err(Cause::Wire);
        desc.job_secret_key.fill(0);
        drop(desc);
        let (rank, size) = (comm.rank(), comm.size());
        let ep = comm.into_link();
        let incarnation = keys.as_ref().map_or(0, JobKeys::incarnation);
        Ok((
            Slot::owned(ep, |shared| Rank::new(shared, keys)),
            rank,
            size,
            incarnation,
        ))
    }
}

#[pymethods]
impl Comm {
    /// Joins the job this process was started in by `sperli run`: reads
    /// the job description on stdin (it never reaches Python), sets up
    /// the TLS 1.3 mesh and returns the world communicator. Call it once
    /// per process; `sperli.init()` and `sperli.COMM_WORLD` do.
    ///
    /// `errors`: `"exception"` (`sperli.ERRORS_RETURN`, the default, as
    /// mpi4py): a failure of the job step is raised as `JobError` by the
    /// pending and every later call; `"fatal"` (`sperli.ERRORS_ARE_FATAL`):
    /// the rank sends ABORT and its process ends at once with status
    /// H-code - 1600 (the Rust default, `MPI_ERRORS_ARE_FATAL`).
    ///
    /// Raises `SperliError` H1615 when the process was not started by
    /// `sperli run`, H1611/H1616 when set-up fails.
    #[staticmethod]
    #[pyo3(signature = (errors = ERRORS_RETURN))]
    fn from_stdin(py: Python<'_>, errors: &str) -> PyResult<Comm> {
        let mode = error_mode(errors)?;
        match py.detach(move || Comm::join(mode)) {
            Ok((slot, rank, size, incarnation)) => {
                Ok(Comm::over(Arc::new(slot), rank, size, incarnation))
            }
            Err(Error::NotLaunched { stdin, .. }) => {
                let script = py
                    .import("sys")
                    .and_then(|s| s.getattr("argv"))
                    .and_then(|a| a.get_item(0))
                    .and_then(|a| a.extract::<String>())
                    .unwrap_or_else(|_| "script.py".into());
                let e = Error::NotLaunched {
                    stdin,
                    program: format!("python3 {script}"),
                };
                Err(Fail::from(e).into_pyerr(py))
            }
            Err(e) => Err(Fail::from(e).into_pyerr(py)),
        }
    }

    /// This rank, `0..size`.
    #[getter]
    fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks.
    #[getter]
    fn size(&self) -> u32 {
        self.size
    }

    /// This rank (mpi4py's spelling).
    #[pyo3(name = "Get_rank")]
    fn get_rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks (mpi4py's spelling).
    #[pyo3(name = "Get_size")]
    fn get_size(&self) -> u32 {
        self.size
    }

    /// The communicator's id (protocol §15.2): 0 for the job's (and a
    /// mailbox task's), 1..=2147483647 for one made by `Split` or `Dup`,
    /// the same number on every member.
    #[getter]
    fn comm_id(&self) -> u32 {
        self.sub.unwrap_or(0)
    }

    /// Whether point-to-point messages name their communicator in this
    /// job (HELLO feature bit 3 on every rank, protocol §16): then every
    /// communicator has its own messages and the whole tag range, a
    /// receive from any source works on every communicator, and
    /// `Ssend`/`Issend` exist.
    #[getter]
    fn p2p_communicators(&self, py: Python<'_>) -> PyResult<bool> {
        self.call(py, |r| Ok(r.ep().has_p2p_communicators()))
    }

    /// The job's incarnation: 1 for a new job, 2, 3, ... after each
    /// restart by `sperli run --restart-max` (0 on a mailbox task's
    /// communicator).
    #[getter]
    fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// The number of collective calls made so far on this rank
    /// (protocol §8.1; failed calls count).
    #[getter]
    fn sequence(&self, py: Python<'_>) -> PyResult<u64> {
        self.call(py, |r| Ok(r.sequence()))
    }

    /// Ends the job: ABORT (reason 2, application, with `errorcode` and
    /// `message`, cut to 1024 bytes) to every rank of the job (on any
    /// communicator, as `MPI_Abort` may), then this process exits with
    /// `errorcode`. Never returns. The Rust `Comm::abort`.
    #[pyo3(name = "Abort", signature = (errorcode = 1, message = None))]
    fn abort(&self, py: Python<'_>, errorcode: i32, message: Option<String>) -> PyResult<()> {
        let text = message.unwrap_or_else(|| format!("Abort({errorcode}) called"));
        let code = u32::try_from(errorcode).unwrap_or(0);
        let _ = self.call(py, |r| {
            r.comm().abort(code, &text);
            Ok(())
        });
        py.import("os")?.call_method1("_exit", (errorcode,))?;
        Ok(())
    }

    /// How a failure of the job step reaches the program from now on:
    /// `"exception"` (`sperli.ERRORS_RETURN`) or `"fatal"`
    /// (`sperli.ERRORS_ARE_FATAL`); see `Comm.from_stdin`.
    #[pyo3(name = "Set_errhandler")]
    fn set_errhandler(&self, py: Python<'_>, errors: &str) -> PyResult<()> {
        let mode = error_mode(errors)?;
        self.call(py, |r| {
            r.ep().set_errors(mode);
            Ok(())
        })
    }

    /// Sends ABORT (reason 2, application) with `errorcode` and `message`
    /// to every rank and returns; every later call fails. For the exit
    /// hook of an uncaught exception.
    #[pyo3(name = "_abort_job")]
    fn abort_job(&self, py: Python<'_>, errorcode: u32, message: String) -> PyResult<()> {
        self.call(py, |r| {
            r.ep().abort(
                AbortReason::Application,
                errorcode,
                sperli_wire::abort::Abort::truncate_message(&message),
            );
            Ok(())
        })
    }

    /// Ends this rank's job step normally: open requests are cancelled,
    /// BYE goes to every peer, every connection closes. Later calls
    /// raise. Raises the job's error if the job failed. Called at exit
    /// for `COMM_WORLD` when the program did not.
    #[pyo3(name = "Finalize")]
    fn finalize(&self, py: Python<'_>) -> PyResult<()> {
        let slot = &self.slot;
        let r = py.detach(move || match slot.close(Gone::Finalized) {
            Ok(Some((ep, _))) => ep.finish().map_err(Fail::from),
            Ok(None) | Err(_) => Ok(()),
        });
        r.map_err(|f| f.into_pyerr(py))
    }

    /// Whether `Finalize` ran (or the communicator is otherwise closed).
    #[pyo3(name = "Is_finalized")]
    fn is_finalized(&self, py: Python<'_>) -> bool {
        let slot = &self.slot;
        py.detach(move || slot.with(|_| ()).is_err())
    }

    /// Splits this communicator (`MPI_Comm_split`; collective over its
    /// ranks): the ranks with the same `color` (an int >= 0) form one new
    /// communicator, ranked by `key` and then by their rank here; a rank
    /// with `color=sperli.UNDEFINED` joins none and gets `None`. The new
    /// communicator's collectives run over its members only; its
    /// point-to-point ranks are its own ranks (no `ANY_SOURCE` receive on
    /// it, as in the Rust API); it shares this rank's endpoint and lock.
    ///
    /// Needs HELLO feature bit 2 on every rank (protocol §15.1): without
    /// it every rank raises `SperliError` (no H-code) before anything is
    /// sent and the job goes on.
    #[pyo3(name = "Split", signature = (color = 0, key = 0))]
    fn split(&self, py: Python<'_>, color: i64, key: i32) -> PyResult<Option<Comm>> {
        let color = match color {
            UNDEFINED => None,
            c => Some(u32::try_from(c).map_err(|_| BindingError::Color { got: c })?),
        };
        let made = self.call(py, |r| {
            let sub = r.comm().split(color, key)?;
            Ok(sub.map(|s| r.add_sub(s)))
        })?;
        Ok(made.map(|(id, rank, size)| self.child(id, rank, size)))
    }

    /// A new communicator with the same ranks whose collectives never mix
    /// with this one's (`MPI_Comm_dup`; collective). Needs HELLO feature
    /// bit 2, as `Split`.
    #[pyo3(name = "Dup")]
    fn dup(&self, py: Python<'_>) -> PyResult<Comm> {
        let (id, rank, size) = self.call(py, |r| {
            let sub = r.comm().dup()?;
            Ok(r.add_sub(sub))
        })?;
        Ok(self.child(id, rank, size))
    }

    /// Frees a communicator made by `Split`/`Dup` (`MPI_Comm_free`): later
    /// calls on it raise. Pending non-blocking calls on it run to their
    /// end first. On `COMM_WORLD` nothing happens (use `Finalize`).
    #[pyo3(name = "Free")]
    fn free(&self, py: Python<'_>) -> PyResult<()> {
        let Some(id) = self.sub else {
            return Ok(());
        };
        run(py, &self.slot, move |r| {
            r.free_sub(id);
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        match self.sub {
            None => format!("<sperli.Comm rank {} of {}>", self.rank, self.size),
            Some(id) => format!("<sperli.Comm {id} rank {} of {}>", self.rank, self.size),
        }
    }
}
