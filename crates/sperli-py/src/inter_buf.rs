//! The buffer collectives of an intercommunicator (mpi4py's uppercase
//! calls on an `Intercomm`; the Rust `Intercomm`'s calls, protocol §15.6):
//! `Inter_Barrier`, `Inter_Bcast`, `Inter_Gather(v)`, `Inter_Scatter(v)`,
//! `Inter_Allgather(v)`, `Inter_Alltoall(v)`, `Inter_Reduce`,
//! `Inter_Allreduce`, `Inter_Reduce_scatter_block`, `Inter_Reduce_scatter`.
//!
//! A rooted call takes mpi4py's root: `ROOT` (-3) at the root, `PROC_NULL`
//! (-2) at the other ranks of its group (their buffers are ignored), the
//! root's remote rank in the other group. Buffers are checked as
//! collectives.rs and vcoll.rs check them (`ArgumentError` H1618 before
//! anything is sent); a result of another length than the receive buffer
//! is refused the same way after the call, and a v receive spec whose
//! counts differ from what came ends the job (as vcoll.rs). The data
//! travels through the Rust call; nothing here reduces or moves data
//! between ranks.

use pyo3::prelude::*;
use sperli_collective::{InterRoot, Reduction};

use crate::buffer::{with_dtype, Buf};
use crate::collectives::copy_result;
use crate::comm::Comm;
use crate::errors::BindingError;
use crate::ops::op_arg;
use crate::vcoll::{place_or_end, VBuf};

/// mpi4py's `MPI.ROOT`.
pub(crate) const ROOT: i64 = -3;
/// mpi4py's `MPI.PROC_NULL`.
pub(crate) const PROC_NULL: i64 = -2;

/// The root argument of an intercommunicator call.
pub(crate) fn inter_root(root: i64) -> Result<InterRoot, BindingError> {
    match root {
        ROOT => Ok(InterRoot::Here),
        PROC_NULL => Ok(InterRoot::Null),
        r => u32::try_from(r)
            .map(InterRoot::Remote)
            .map_err(|_| BindingError::Rank {
                arg: "root",
                got: r,
            }),
    }
}

/// The buffer a rank of `role` gives: the send buffer where it sends
/// (the remote group), the receive buffer at the root, none elsewhere.
fn role_buf(
    role: InterRoot,
    send: Option<&Bound<'_, PyAny>>,
    recv: Option<&Bound<'_, PyAny>>,
    root_receives: bool,
) -> Result<Option<Buf>, BindingError> {
    let none = || BindingError::NoBuffer {
        arg: "buf",
        type_name: "NoneType".into(),
    };
    match (role, root_receives) {
        (InterRoot::Null, _) => Ok(None),
        (InterRoot::Here, true) | (InterRoot::Remote(_), false) => {
            Buf::recv(recv.ok_or_else(none)?, "recvbuf").map(Some)
        }
        _ => Buf::send(send.ok_or_else(none)?, "sendbuf").map(Some),
    }
}

/// The root's v spec of a rooted v call (one block per remote rank).
fn root_vbuf(
    obj: Option<&Bound<'_, PyAny>>,
    arg: &'static str,
    size: u32,
    recv: bool,
) -> Result<VBuf, BindingError> {
    let spec = obj.ok_or(BindingError::NoBuffer {
        arg,
        type_name: "NoneType".into(),
    })?;
    VBuf::parse(spec, arg, size as usize, recv)
}

/// The two buffers of an unrooted call: the same dtype.
fn both(send: &Bound<'_, PyAny>, recv: &Bound<'_, PyAny>) -> Result<(Buf, Buf), BindingError> {
    let s = Buf::send(send, "sendbuf")?;
    let d = Buf::recv(recv, "recvbuf")?;
    s.same_dtype(&d)?;
    Ok((s, d))
}

/// The reduction argument (SUM when `None`).
fn op_of(op: Option<&Bound<'_, PyAny>>) -> PyResult<Reduction> {
    Ok(op.map(op_arg).transpose()?.unwrap_or(Reduction::Sum))
}

/// The body of an unrooted call: `sendbuf` and `recvbuf` of one dtype;
/// `$call` (a Rust `Intercomm` call on `$ic` with the send elements
/// `$data`) gives what goes into `recvbuf` (of its length).
macro_rules! unrooted {
    ($self:ident, $py:ident, $sendbuf:ident, $recvbuf:ident, |$ic:ident, $data:ident| $call:expr) => {{
        let (s, mut d) = both($sendbuf, $recvbuf)?;
        $self.call($py, |r| {
            with_dtype!(s.dtype, T => {
                let $ic = r.inter()?;
                let $data = s.elems::<T>();
                let v = $call?;
                copy_result(&mut d, &v)?;
            });
            Ok(())
        })
    }};
}

#[pymethods]
impl Comm {
    /// Returns once every rank of both groups has entered the barrier.
    #[pyo3(name = "Inter_Barrier")]
    fn inter_barrier(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, |r| Ok(r.inter()?.barrier()?))
    }

    /// The root's `buf` into `buf` of every rank of the other group.
    #[pyo3(name = "Inter_Bcast", signature = (buf, root))]
    fn inter_bcast(
        &self,
        py: Python<'_>,
        buf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let role = inter_root(root)?;
        let mut b = role_buf(role, buf, buf, false)?;
        self.call(py, |r| {
            let ic = r.inter()?;
            match b.as_mut() {
                None => ic.bcast::<u8>(role, &mut Vec::new())?,
                Some(b) => with_dtype!(b.dtype, T => {
                    let mut v: Vec<T> = if role == InterRoot::Here { b.elems::<T>().to_vec() } else { Vec::new() };
                    ic.bcast(role, &mut v)?;
                    if role != InterRoot::Here {
                        copy_result(b, &v)?;
                    }
                }),
            }
            Ok(())
        })
    }

    /// The other group's `sendbuf`s, in its rank order, into the root's
    /// `recvbuf`.
    #[pyo3(name = "Inter_Gather", signature = (sendbuf, recvbuf, root))]
    fn inter_gather(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let role = inter_root(root)?;
        let mut b = role_buf(role, sendbuf, recvbuf, true)?;
        self.call(py, |r| {
            let ic = r.inter()?;
            match b.as_mut() {
                None => drop(ic.gather::<u8>(role, &[])?),
                Some(b) => with_dtype!(b.dtype, T => {
                    let mine: &[T] = if role == InterRoot::Here { &[] } else { b.elems::<T>() };
                    if let Some(v) = ic.gather(role, mine)? {
                        copy_result(b, &v)?;
                    }
                }),
            }
            Ok(())
        })
    }

    /// As `Inter_Gather`, blocks of any length: the root's `recvbuf` is a
    /// v spec (`[buf, counts(, displs)]`) of one block per remote rank.
    #[pyo3(name = "Inter_Gatherv", signature = (sendbuf, recvbuf, root))]
    fn inter_gatherv(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let role = inter_root(root)?;
        if role != InterRoot::Here {
            return self.inter_gather(py, sendbuf, None, root);
        }
        let mut v = root_vbuf(recvbuf, "recvbuf", self.size_u32(), true)?;
        self.call(py, |r| {
            with_dtype!(v.buf.dtype, T => {
                let got = r.inter()?.gatherv::<T>(role, &[])?;
                if let Some(b) = got {
                    place_or_end(r, &mut v, &b)?;
                }
            });
            Ok(())
        })
    }

    /// Block i of the root's `sendbuf` (remote size equal blocks) into
    /// `recvbuf` of remote rank i.
    #[pyo3(name = "Inter_Scatter", signature = (sendbuf, recvbuf, root))]
    fn inter_scatter(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let role = inter_root(root)?;
        let mut b = role_buf(role, sendbuf, recvbuf, false)?;
        self.call(py, |r| {
            let ic = r.inter()?;
            match b.as_mut() {
                None => drop(ic.scatter::<u8>(role, None)?),
                Some(b) => with_dtype!(b.dtype, T => {
                    let here = role == InterRoot::Here;
                    let v = ic.scatter(role, here.then(|| b.elems::<T>()))?;
                    if !here {
                        copy_result(b, &v)?;
                    }
                }),
            }
            Ok(())
        })
    }

    /// As `Inter_Scatter`, blocks of any length: the root's `sendbuf` is a
    /// v spec of one block per remote rank.
    #[pyo3(name = "Inter_Scatterv", signature = (sendbuf, recvbuf, root))]
    fn inter_scatterv(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let role = inter_root(root)?;
        if role != InterRoot::Here {
            return self.inter_scatter(py, None, recvbuf, root);
        }
        let v = root_vbuf(sendbuf, "sendbuf", self.size_u32(), false)?;
        self.call(py, |r| {
            with_dtype!(v.buf.dtype, T => {
                let data = v.packed::<T>();
                r.inter()?.scatterv(role, Some((&data, &v.counts)))?;
            });
            Ok(())
        })
    }

    /// The other group's `sendbuf`s, in its rank order, into `recvbuf`.
    #[pyo3(name = "Inter_Allgather", signature = (sendbuf, recvbuf))]
    fn inter_allgather(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        unrooted!(self, py, sendbuf, recvbuf, |ic, data| ic.allgather(data))
    }

    /// As `Inter_Allgather`, blocks of any length: `recvbuf` is a v spec
    /// of one block per remote rank.
    #[pyo3(name = "Inter_Allgatherv", signature = (sendbuf, recvbuf))]
    fn inter_allgatherv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let s = Buf::send(sendbuf, "sendbuf")?;
        let mut v = VBuf::parse(recvbuf, "recvbuf", self.size_u32() as usize, true)?;
        s.same_dtype(&v.buf)?;
        self.call(py, |r| {
            with_dtype!(s.dtype, T => {
                let b = r.inter()?.allgatherv(s.elems::<T>())?;
                place_or_end(r, &mut v, &b)?;
            });
            Ok(())
        })
    }

    /// Block j of `sendbuf` (remote size equal blocks) to remote rank j;
    /// `recvbuf` gets one block from each remote rank, in rank order.
    #[pyo3(name = "Inter_Alltoall", signature = (sendbuf, recvbuf))]
    fn inter_alltoall(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        unrooted!(self, py, sendbuf, recvbuf, |ic, data| ic.alltoall(data))
    }

    /// As `Inter_Alltoall`, blocks of any length: both buffers are v specs
    /// of one block per remote rank.
    #[pyo3(name = "Inter_Alltoallv", signature = (sendbuf, recvbuf))]
    fn inter_alltoallv(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let rs = self.size_u32() as usize;
        let s = VBuf::parse(sendbuf, "sendbuf", rs, false)?;
        let mut v = VBuf::parse(recvbuf, "recvbuf", rs, true)?;
        s.buf.same_dtype(&v.buf)?;
        self.call(py, |r| {
            with_dtype!(s.buf.dtype, T => {
                let data = s.packed::<T>();
                let b = r.inter()?.alltoallv(&data, &s.counts)?;
                place_or_end(r, &mut v, &b)?;
            });
            Ok(())
        })
    }

    /// The other group's `sendbuf`s reduced with `op` (in its rank order,
    /// left operand first) into the root's `recvbuf`.
    #[pyo3(name = "Inter_Reduce", signature = (sendbuf, recvbuf, op, root))]
    fn inter_reduce(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        op: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let red = op_of(op)?;
        let role = inter_root(root)?;
        let mut b = role_buf(role, sendbuf, recvbuf, true)?;
        self.call(py, |r| {
            let ic = r.inter()?;
            match b.as_mut() {
                None => drop(ic.reduce::<u8>(role, &[], red)?),
                Some(b) => with_dtype!(b.dtype, T => {
                    let mine: &[T] = if role == InterRoot::Here { &[] } else { b.elems::<T>() };
                    if let Some(v) = ic.reduce(role, mine, red)? {
                        copy_result(b, &v)?;
                    }
                }),
            }
            Ok(())
        })
    }

    /// The other group's `sendbuf`s reduced with `op` (in its rank order,
    /// left operand first) into `recvbuf` of every rank.
    #[pyo3(name = "Inter_Allreduce", signature = (sendbuf, recvbuf, op = None))]
    fn inter_allreduce(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let red = op_of(op)?;
        unrooted!(self, py, sendbuf, recvbuf, |ic, data| ic
            .allreduce(data, red))
    }

    /// The other group's `sendbuf`s reduced with `op`, scattered over this
    /// group in equal blocks: block i into `recvbuf` of local rank i.
    #[pyo3(name = "Inter_Reduce_scatter_block", signature = (sendbuf, recvbuf, op = None))]
    fn inter_reduce_scatter_block(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let red = op_of(op)?;
        unrooted!(self, py, sendbuf, recvbuf, |ic, data| ic
            .reduce_scatter_block(data, red))
    }

    /// As `Inter_Reduce_scatter_block`, block i of `recvcounts[i]`
    /// elements (one count per local rank).
    #[pyo3(name = "Inter_Reduce_scatter", signature = (sendbuf, recvbuf, recvcounts, op = None))]
    fn inter_reduce_scatter(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        recvcounts: Vec<usize>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let red = op_of(op)?;
        let (s, mut d) = both(sendbuf, recvbuf)?;
        self.call(py, |r| {
            with_dtype!(s.dtype, T => {
                let v = r.inter()?.reduce_scatter(s.elems::<T>(), &recvcounts, red)?;
                let n = v.len().min(d.len());
                d.elems_mut::<T>()[..n].copy_from_slice(&v[..n]);
                if v.len() > d.len() {
                    copy_result(&mut d, &v)?;
                }
            });
            Ok(())
        })
    }
}
