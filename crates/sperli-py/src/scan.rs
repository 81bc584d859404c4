//! Prefix reductions on buffers (mpi4py's `Scan` and `Exscan`) and on
//! numbers (`scan`, `exscan`): the Rust API's `scan` and `exscan`, two v1
//! calls each (protocol §8.9), so at most 16777192 bytes per rank. The
//! errors are those of `Allreduce` (module `collectives`): the rank's own
//! checks raise `ArgumentError` (H1618) before anything is sent; another
//! rank with another dtype, op, length or call ends the job (H1617 at rank
//! 0).

use pyo3::prelude::*;
use sperli_collective::{Element, Reduction};

use crate::buffer::{type_name, with_dtype, Buf};
use crate::collectives::copy_result;
use crate::comm::Comm;
use crate::errors::BindingError;
use crate::objects::{number, Number};
use crate::ops::{is_in_place, op_arg};
use crate::rank::{Coll, Rank};

/// Inclusive (`Scan`) or exclusive (`Exscan`).
#[derive(Clone, Copy)]
enum Prefix {
    Inclusive,
    Exclusive,
}

/// This rank's prefix of `data`: `None` for an exclusive one at rank 0.
fn prefix<T: Element>(
    r: &mut Rank,
    data: &[T],
    op: Reduction,
    p: Prefix,
) -> Result<Option<Vec<T>>, sperli_wire::Error> {
    match p {
        Prefix::Inclusive => r.comm().scan(data, op).map(Some),
        Prefix::Exclusive => r.comm().exscan(data, op),
    }
}

impl Comm {
    /// `Scan` / `Exscan` on buffers.
    fn prefix_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        p: Prefix,
    ) -> PyResult<()> {
        let op = op.map(op_arg).transpose()?.unwrap_or(Reduction::Sum);
        let send = if is_in_place(sendbuf) {
            None
        } else {
            Some(Buf::send(sendbuf, "sendbuf")?)
        };
        let mut recv = Buf::recv(recvbuf, "recvbuf")?;
        if let Some(s) = &send {
            s.same_dtype(&recv)?;
            recv.expect_len(s.len())?;
        }
        self.call(py, |r| {
            with_dtype!(recv.dtype, T => {
                // The call reads its data before it writes the result, so
                // the data may be `recvbuf` itself (IN_PLACE) or overlap it:
                // it is taken as a copy then.
                let own;
                let data: &[T] = match &send {
                    Some(s) if !s.region.overlaps(&recv.region) => s.elems::<T>(),
                    Some(s) => {
                        own = s.elems::<T>().to_vec();
                        &own
                    }
                    None => {
                        own = recv.elems::<T>().to_vec();
                        &own
                    }
                };
                if let Some(v) = prefix(r, data, op, p)? {
                    copy_result(&mut recv, &v)?;
                }
            });
            Ok(())
        })
    }

    /// `scan` / `exscan` on a Python number (bool, int as int64, float as
    /// float64); `None` for `exscan` at rank 0.
    fn prefix_object(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        p: Prefix,
    ) -> PyResult<Py<PyAny>> {
        let op = op.map(op_arg).transpose()?.unwrap_or(Reduction::Sum);
        let n = number(obj).ok_or_else(|| BindingError::Scalar {
            type_name: type_name(obj),
        })?;
        let got = self.call(py, |r| {
            let one = |v: Option<Vec<i64>>| v.map(|v| v[0]);
            Ok(match n {
                Number::Bool(b) => {
                    one(prefix(r, &[i64::from(b)], op, p)?).map(|v| Number::Bool(v != 0))
                }
                Number::Int(i) => one(prefix(r, &[i], op, p)?).map(Number::Int),
                Number::Float(f) => prefix(r, &[f], op, p)?.map(|v| Number::Float(v[0])),
            })
        })?;
        Ok(match got {
            None => py.None(),
            Some(Number::Bool(b)) => pyo3::types::PyBool::new(py, b)
                .to_owned()
                .into_any()
                .unbind(),
            Some(Number::Int(i)) => i.into_pyobject(py)?.into_any().unbind(),
            Some(Number::Float(f)) => f.into_pyobject(py)?.into_any().unbind(),
        })
    }
}

#[pymethods]
impl Comm {
    /// Inclusive prefix reduction (`MPI_Scan`): rank i's `recvbuf` gets
    /// the elementwise fold with `op` of the `sendbuf` of ranks 0 ..= i,
    /// in rank order with the lower ranks on the left (the bits of a
    /// `Reduce` of those ranks). Same dtype and length on every rank;
    /// `sendbuf=IN_PLACE`: the data is in `recvbuf`.
    #[pyo3(name = "Scan", signature = (sendbuf, recvbuf, op = None))]
    fn scan_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.prefix_buf(py, sendbuf, recvbuf, op, Prefix::Inclusive)
    }

    /// Exclusive prefix reduction (`MPI_Exscan`): as `Scan` over ranks
    /// 0 .. i; rank 0's `recvbuf` is left as it is.
    #[pyo3(name = "Exscan", signature = (sendbuf, recvbuf, op = None))]
    fn exscan_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.prefix_buf(py, sendbuf, recvbuf, op, Prefix::Exclusive)
    }

    /// `Scan` of one number (bool, int as int64, float as float64): the
    /// fold of ranks 0 ..= i.
    #[pyo3(signature = (sendobj, op = None))]
    fn scan(
        &self,
        py: Python<'_>,
        sendobj: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.prefix_object(py, sendobj, op, Prefix::Inclusive)
    }

    /// `Exscan` of one number: the fold of ranks 0 .. i; `None` at rank 0.
    #[pyo3(signature = (sendobj, op = None))]
    fn exscan(
        &self,
        py: Python<'_>,
        sendobj: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.prefix_object(py, sendobj, op, Prefix::Exclusive)
    }
}
