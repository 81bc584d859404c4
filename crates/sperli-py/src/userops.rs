//! User-defined reductions on buffers (mpi4py's `Op.Create` in `Reduce`,
//! `Allreduce`, `Scan`, `Exscan`), a local reduction with a built-in one
//! (`Op.Reduce_local`), and reductions of any picklable objects with a
//! Python function (mpi4py's lowercase `reduce`, `allreduce`, `scan`,
//! `exscan` with `MAXLOC`, `MINLOC`, `REPLACE`, `NO_OP` or a user op).
//!
//! A user reduction runs the Rust API's `*_bytes_with` calls (protocol
//! §17.4: reduction code 13, the star, the fold in ascending rank order);
//! the Python function is called inside the Rust fold, with the GIL taken
//! for each call, as `fold(acc, right)`: `acc` a `bytearray` of the left
//! operand (the lower ranks' partial), which the function leaves the
//! result in; `right` the next rank's `bytes`. The package's `MPI.Op`
//! turns mpi4py's `function(inbuf, inoutbuf, datatype)` into such a
//! fold.
//!
//! An exception in the function ends the job, as in mpi4py (where it is
//! fatal): the folding rank stops calling the function, finishes the
//! call, sends ABORT (reason 2, application, code 1) to every rank and
//! raises the exception; the other ranks' result of that call is not
//! defined, and their next call raises `JobError` (H1612).

use std::sync::{Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};
use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::reduce::combine_into;

use crate::buffer::Buf;
use crate::comm::{rank_arg, Comm};
use crate::errors::{BindingError, Fail};
use crate::objects::{gather_bytes, pickle, scatter_bytes, unpickle};
use crate::ops::op_arg;
use crate::rank::Coll;

/// The ABORT message of a job ended by an exception in a user function.
const USER_ERROR: &str = "exception in a user-defined reduction operation";

/// A Python `fold(acc, right)` as the Rust API's user fold; keeps the
/// first exception and calls nothing after it.
struct PyFold {
    fold: Py<PyAny>,
    err: Mutex<Option<PyErr>>,
}

impl PyFold {
    fn new(fold: &Bound<'_, PyAny>) -> Self {
        Self {
            fold: fold.clone().unbind(),
            err: Mutex::new(None),
        }
    }

    /// `acc = fold(acc, right)`, the GIL taken for the call.
    fn call(&self, acc: &mut [u8], right: &[u8]) {
        let mut err = self.err.lock().unwrap_or_else(PoisonError::into_inner);
        if err.is_some() {
            return;
        }
        let done = Python::attach(|py| -> PyResult<()> {
            let a = PyByteArray::new(py, acc);
            self.fold.call1(py, (&a, PyBytes::new(py, right)))?;
            let out = a.to_vec();
            if out.len() != acc.len() {
                return Err(PyValueError::new_err(format!(
                    "a user-defined reduction changed its operand from {} to {} bytes",
                    acc.len(),
                    out.len()
                )));
            }
            acc.copy_from_slice(&out);
            Ok(())
        });
        if let Err(e) = done {
            *err = Some(e);
        }
    }

    /// The exception the function raised, if any.
    fn take_error(self) -> Option<PyErr> {
        self.err
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Which call a user reduction makes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum UserCall {
    Reduce,
    Allreduce,
    Scan,
    Exscan,
}

impl UserCall {
    fn parse(call: &str) -> PyResult<Self> {
        match call {
            "reduce" => Ok(Self::Reduce),
            "allreduce" => Ok(Self::Allreduce),
            "scan" => Ok(Self::Scan),
            "exscan" => Ok(Self::Exscan),
            _ => Err(PyValueError::new_err(format!(
                "call {call:?}: \"reduce\", \"allreduce\", \"scan\" or \"exscan\""
            ))),
        }
    }
}

impl Comm {
    /// Ends the job after an exception in a user function (ABORT reason
    /// 2, code 1) and returns the exception to raise.
    fn end_for_user_error(&self, py: Python<'_>, e: PyErr) -> PyErr {
        e.display(py);
        let _ = self.call(py, |r| {
            let text = Abort::truncate_message(USER_ERROR);
            r.ep().abort(AbortReason::Application, 1, text);
            Ok(())
        });
        e
    }

    /// The result of a call whose fold was `pf`: its exception ends the
    /// job.
    fn after_fold<R>(&self, py: Python<'_>, pf: PyFold, out: PyResult<R>) -> PyResult<R> {
        match pf.take_error() {
            Some(e) => Err(self.end_for_user_error(py, e)),
            None => out,
        }
    }
}

#[pymethods]
impl Comm {
    /// A reduction of buffers with a user function `fold(acc, right)`
    /// (the module's doc): `call` is `"reduce"` (the result into the
    /// root's `recvbuf`), `"allreduce"`, `"scan"` or `"exscan"` (into
    /// every rank's `recvbuf`; exscan leaves rank 0's as it is).
    /// `sendbuf` `None` is `IN_PLACE` (the data is `recvbuf`'s). Both
    /// buffers of one dtype and length (H1618 before anything is sent;
    /// a wrong `recvbuf` at a reduce's root ends the job, ABORT reason 3).
    #[pyo3(name = "_user_reduce", signature = (sendbuf, recvbuf, fold, call, root = 0))]
    fn user_reduce(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        fold: &Bound<'_, PyAny>,
        call: &str,
        root: i64,
    ) -> PyResult<()> {
        let call = UserCall::parse(call)?;
        let root = rank_arg("root", root)?;
        let send = sendbuf.map(|b| Buf::send(b, "sendbuf")).transpose()?;
        let mut recv = recvbuf.map(|b| Buf::recv(b, "recvbuf")).transpose()?;
        let at_root = call != UserCall::Reduce || root == self.rank_u32();
        let (data, dtype) = match (&send, &recv) {
            (Some(s), _) => (s.region.bytes().to_vec(), s.dtype),
            (None, Some(r)) => (r.region.bytes().to_vec(), r.dtype),
            (None, None) => return Err(BindingError::InPlace { arg: "sendbuf" }.into()),
        };
        // The rank's own checks (a reduce's root: only it can see them).
        let own = match (&send, &recv) {
            (Some(s), Some(r)) if at_root => s.same_dtype(r).and_then(|()| r.expect_len(s.len())),
            (_, None) if at_root => Err(BindingError::NoBuffer {
                arg: "recvbuf",
                type_name: "NoneType".into(),
            }),
            _ => Ok(()),
        };
        if call != UserCall::Reduce {
            own.clone()?;
        }
        let et = dtype.element_type().code();
        let pf = PyFold::new(fold);
        let mut f = |a: &mut [u8], b: &[u8]| pf.call(a, b);
        let out = self.call(py, |r| {
            if let Err(e) = own {
                return Err(r.end_job(AbortReason::CollectiveMismatch, e));
            }
            let mut c = r.comm();
            Ok(match call {
                UserCall::Reduce => c.reduce_bytes_with(root, &data, et, &mut f)?,
                UserCall::Allreduce => Some(c.allreduce_bytes_with(&data, et, &mut f)?),
                UserCall::Scan => Some(c.scan_bytes_with(&data, et, false, &mut f)?),
                UserCall::Exscan => {
                    let v = c.scan_bytes_with(&data, et, true, &mut f)?;
                    (c.rank() != 0).then_some(v)
                }
            })
        });
        let out = self.after_fold(py, pf, out)?;
        if let (Some(v), Some(r)) = (out, recv.as_mut()) {
            if let Some(dst) = r.region.bytes_mut() {
                dst.copy_from_slice(&v);
            }
        }
        Ok(())
    }

    /// mpi4py's lowercase `reduce` (`call` `"reduce"`: the result at
    /// `root`, `None` elsewhere), `allreduce`, `scan` or `exscan` (`None`
    /// at rank 0) of any picklable objects with `op(x, y)`, a Python
    /// callable (an `MPI.Op`): every rank's object is pickled and gathered
    /// to the root (rank 0 but for reduce), which folds them in ascending
    /// rank order, `acc = op(acc, x_i)`, and sends the result (allreduce)
    /// or each rank's prefix (scan, exscan) back pickled. An exception in
    /// `op` ends the job as one in a user function does.
    #[pyo3(name = "_fold_objects", signature = (sendobj, op, call, root = 0))]
    fn fold_objects(
        &self,
        py: Python<'_>,
        sendobj: &Bound<'_, PyAny>,
        op: &Bound<'_, PyAny>,
        call: &str,
        root: i64,
    ) -> PyResult<Py<PyAny>> {
        let call = UserCall::parse(call)?;
        let root = if call == UserCall::Reduce {
            rank_arg("root", root)?
        } else {
            0
        };
        let data = pickle(sendobj)?;
        let bytes = data.as_bytes();
        let all = self.call(py, |r| Ok(gather_bytes(&mut r.comm(), root, bytes)?))?;
        // At the root: the fold (scan, exscan: every prefix), pickled.
        let folded: Option<PyResult<Vec<Vec<u8>>>> = all.map(|all| {
            let mut acc: Option<Py<PyAny>> = None;
            let mut prefixes = Vec::with_capacity(all.len());
            for item in &all {
                if call == UserCall::Exscan {
                    let before = acc.as_ref().map_or_else(|| py.None(), |a| a.clone_ref(py));
                    prefixes.push(pickle(before.bind(py))?.as_bytes().to_vec());
                }
                let x = unpickle(py, item)?;
                acc = Some(match acc {
                    None => x,
                    Some(a) => op.call1((a, x))?.unbind(),
                });
                if call == UserCall::Scan {
                    let a = acc.as_ref().expect("set above");
                    prefixes.push(pickle(a.bind(py))?.as_bytes().to_vec());
                }
            }
            if matches!(call, UserCall::Reduce | UserCall::Allreduce) {
                let a = acc.unwrap_or_else(|| py.None());
                prefixes.push(pickle(a.bind(py))?.as_bytes().to_vec());
            }
            Ok(prefixes)
        });
        let folded = match folded {
            Some(Err(e)) => return Err(self.end_for_user_error(py, e)),
            Some(Ok(v)) => Some(v),
            None => None,
        };
        let mine = self.call(py, |r| {
            let mut c = r.comm();
            Ok(match call {
                UserCall::Reduce => folded.and_then(|mut v| v.pop()),
                UserCall::Allreduce => {
                    let mut v = folded.and_then(|mut v| v.pop()).unwrap_or_default();
                    c.bcast_counted(root, &mut v)?;
                    Some(v)
                }
                UserCall::Scan | UserCall::Exscan => {
                    Some(scatter_bytes(&mut c, root, folded.as_deref())?)
                }
            })
        })?;
        match mine {
            Some(b) => unpickle(py, &b),
            None => Ok(py.None()),
        }
    }
}

/// `Reduce_local` with a built-in reduction: `inoutbuf = inbuf op
/// inoutbuf`, element by element, `inbuf` the left operand (protocol
/// §8.3, §17.3). Both buffers of one dtype and length, and a reduction
/// the dtype takes (H1618, `ArgumentError`).
#[pyfunction]
#[pyo3(name = "_reduce_local")]
pub(crate) fn reduce_local(
    py: Python<'_>,
    inbuf: &Bound<'_, PyAny>,
    inoutbuf: &Bound<'_, PyAny>,
    op: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let red = op_arg(op)?;
    let a = Buf::send(inbuf, "inbuf")?;
    let mut b = Buf::recv(inoutbuf, "inoutbuf")?;
    a.same_dtype(&b)?;
    b.expect_len(a.len())?;
    let mut acc = a.region.bytes().to_vec();
    let t = a.dtype.element_type();
    if let Some(dst) = b.region.bytes_mut() {
        combine_into(&mut acc, dst, t, red)
            .map_err(|e| Fail::from(sperli_wire::Error::from(e)).into_pyerr(py))?;
        dst.copy_from_slice(&acc);
    }
    Ok(())
}

/// Adds `_reduce_local` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(reduce_local, m)?)
}
