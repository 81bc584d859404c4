//! `sperli.Checkpointer`: signed, buddy-replicated checkpoints of a Python
//! state (sperli-ckpt's `Checkpointer`; protocol §9, §10), with resume
//! after `sperli run --restart-max K --checkpoint-dir DIR` restarted the
//! job.
//!
//! ```python
//! ck = sperli.Checkpointer(comm)           # SPERLI_CHECKPOINT_DIR
//! state = ck.resume()                      # None in a new job
//! step, x = state if state else (0, np.zeros(n))
//! ...
//! ck.checkpoint((step, x))                 # collective: every rank
//! ```
//!
//! A state is bytes, a numpy array, str, int, float, bool, None, or
//! tuples, lists and dicts of them (state.rs has the encoding); `resume`
//! gives back equal objects (arrays with their dtype and shape, writable).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple,
};
use sperli_ckpt::Checkpointer as RustCheckpointer;
use sperli_wire::Error;

use crate::buffer::type_name;
use crate::comm::{or_world, run, Comm};
use crate::errors::{BindingError, Fail};
use crate::raw::{Gone, Region, Slot};
use crate::state::{State, MAX_DEPTH};

/// The bytes of a C-contiguous buffer, copied once.
fn buffer_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let region = Region::new(PyUntypedBuffer::get(obj)?)
        .ok_or(BindingError::NotContiguous { arg: "state" })?;
    Ok(region.bytes().to_vec())
}

/// A Python object as a checkpoint state.
fn to_state(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<State> {
    if depth > MAX_DEPTH {
        return Err(BindingError::StateDepth { max: MAX_DEPTH }.into());
    }
    let py = obj.py();
    if obj.is_none() {
        return Ok(State::None);
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(State::Bool(obj.extract()?));
    }
    if obj.is_instance_of::<PyInt>() {
        return Ok(match obj.extract::<i64>() {
            Ok(i) => State::Int(i),
            Err(_) => State::BigInt(obj.str()?.to_string()),
        });
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(State::Float(obj.extract()?));
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(State::Str(obj.extract()?));
    }
    if obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyByteArray>()
        || obj.is_instance_of::<PyMemoryView>()
    {
        let bytes = PyMemoryView::from(obj)?.call_method0("tobytes")?;
        return Ok(State::Bytes(bytes.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return Ok(State::Tuple(
            t.iter()
                .map(|o| to_state(&o, depth + 1))
                .collect::<PyResult<_>>()?,
        ));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return Ok(State::List(
            l.iter()
                .map(|o| to_state(&o, depth + 1))
                .collect::<PyResult<_>>()?,
        ));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut items = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            items.push((to_state(&k, depth + 1)?, to_state(&v, depth + 1)?));
        }
        return Ok(State::Dict(items));
    }
    if let Ok(np) = py.import("numpy") {
        let is_array = obj.is_instance(&np.getattr("ndarray")?)?;
        let is_scalar = obj.is_instance(&np.getattr("generic")?)?;
        if is_array || is_scalar {
            let dt = obj.getattr("dtype")?;
            if dt.getattr("hasobject")?.extract::<bool>()? || !dt.getattr("fields")?.is_none() {
                return Err(BindingError::StateType {
                    type_name: format!("numpy array of dtype {}", dt.str()?),
                }
                .into());
            }
            let dtype: String = dt.getattr("str")?.extract()?;
            let arr = np.call_method1("ascontiguousarray", (obj,))?;
            let data = buffer_bytes(&arr)?;
            if is_scalar {
                return Ok(State::Scalar { dtype, data });
            }
            let shape: Vec<u64> = obj.getattr("shape")?.extract()?;
            return Ok(State::Array { dtype, shape, data });
        }
    }
    Err(BindingError::StateType {
        type_name: type_name(obj),
    }
    .into())
}

fn decode_err(what: impl std::fmt::Display) -> PyErr {
    BindingError::StateDecode {
        what: what.to_string(),
    }
    .into()
}

/// A checkpoint state as a Python object.
fn to_python(py: Python<'_>, s: &State) -> PyResult<Py<PyAny>> {
    let array = |dtype: &str, shape: &[u64], data: &[u8]| -> PyResult<Bound<'_, PyAny>> {
        let np = py.import("numpy")?;
        let dt = np.call_method1("dtype", (dtype,)).map_err(decode_err)?;
        let buf = PyByteArray::new(py, data);
        let flat = np
            .call_method1("frombuffer", (buf, dt))
            .map_err(decode_err)?;
        flat.call_method1("reshape", (PyTuple::new(py, shape)?,))
            .map_err(decode_err)
    };
    Ok(match s {
        State::None => py.None(),
        State::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        State::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        State::BigInt(t) => py
            .get_type::<PyInt>()
            .call1((t.as_str(),))
            .map_err(decode_err)?
            .unbind(),
        State::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        State::Str(t) => PyString::new(py, t).into_any().unbind(),
        State::Bytes(b) => PyBytes::new(py, b).into_any().unbind(),
        State::Array { dtype, shape, data } => array(dtype, shape, data)?.unbind(),
        State::Scalar { dtype, data } => array(dtype, &[], data)?.get_item(())?.unbind(),
        State::Tuple(items) => {
            let v: Vec<Py<PyAny>> = items
                .iter()
                .map(|i| to_python(py, i))
                .collect::<PyResult<_>>()?;
            PyTuple::new(py, v)?.into_any().unbind()
        }
        State::List(items) => {
            let v: Vec<Py<PyAny>> = items
                .iter()
                .map(|i| to_python(py, i))
                .collect::<PyResult<_>>()?;
            PyList::new(py, v)?.into_any().unbind()
        }
        State::Dict(items) => {
            let d = PyDict::new(py);
            for (k, v) in items {
                d.set_item(to_python(py, k)?, to_python(py, v)?)?;
            }
            d.into_any().unbind()
        }
    })
}

/// Checkpoints and resume for a communicator (module docs). Making one
/// hands the communicator's collectives to it: the communicator's calls
/// go on working, in one order with the checkpoints (protocol §9.4).
#[pyclass(module = "sperli", frozen)]
pub struct Checkpointer {
    slot: Arc<Slot>,
    incarnation: u32,
}

fn no_dir() -> Error {
    Error::Io {
        op:
            "reading SPERLI_CHECKPOINT_DIR (run with sperli run --checkpoint-dir DIR, or pass dir=)",
        kind: std::io::ErrorKind::NotFound,
    }
}

#[pymethods]
impl Checkpointer {
    /// A checkpointer for `comm` (default: `sperli.COMM_WORLD`), keeping files under `dir` (default: the directory
    /// `sperli run --checkpoint-dir` gives this rank). A second
    /// checkpointer on one communicator shares the first one's state.
    #[new]
    #[pyo3(signature = (comm = None, dir = None))]
    fn new(py: Python<'_>, comm: Option<Bound<'_, Comm>>, dir: Option<PathBuf>) -> PyResult<Self> {
        let comm = or_world(py, comm)?;
        let comm = comm.get();
        let dir =
            dir.or_else(|| std::env::var_os(sperli_ckpt::ENV_CHECKPOINT_DIR).map(PathBuf::from));
        comm.call(py, move |r| {
            if r.on_sub() {
                return Err(BindingError::SubCheckpointer.into());
            }
            if r.checkpointer().is_some() {
                return Ok(());
            }
            let dir = dir.ok_or_else(no_dir)?;
            let keys = r.keys.clone().map_err(Fail::from)?;
            r.install_checkpointer(|c| RustCheckpointer::new(c, dir, keys))?;
            Ok(())
        })?;
        Ok(Self {
            slot: comm.slot.clone(),
            incarnation: comm.incarnation_u32(),
        })
    }

    /// In a restarted job (incarnation >= 2), the state of the last epoch
    /// every rank can load (the resume exchange, protocol §10.2; every
    /// rank calls it first thing); `None` in a new job.
    fn resume(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let got = run(py, &self.slot, |r| {
            let ck = r.checkpointer().ok_or(Gone::Finalized)?;
            Ok(ck.resume::<State>()?)
        })?;
        match got {
            None => Ok(py.None()),
            Some((_, state)) => to_python(py, &state),
        }
    }

    /// Writes `state` as the next epoch on every rank (collective: every
    /// rank calls it with its own state); returns the epoch once this
    /// rank holds the signed COMMIT. H1624 (job goes on) while an
    /// `Isend`/`Irecv` request is open on any rank.
    fn checkpoint(&self, py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<u64> {
        let s = to_state(state, 0)?;
        run(py, &self.slot, move |r| {
            let ck = r.checkpointer().ok_or(Gone::Finalized)?;
            Ok(ck.checkpoint(&s)?)
        })
    }

    /// The last committed or resumed epoch (0: none yet).
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        run(py, &self.slot, |r| {
            Ok(r.checkpointer().map_or(0, |c| c.epoch()))
        })
    }

    /// The job's incarnation (1 for a new job).
    #[getter]
    fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// This rank's checkpoint directory.
    #[getter]
    fn dir(&self, py: Python<'_>) -> PyResult<PathBuf> {
        run(py, &self.slot, |r| {
            Ok(r.checkpointer()
                .map(|c| c.dir().to_path_buf())
                .unwrap_or_default())
        })
    }
}
