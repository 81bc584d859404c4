//! Non-blocking collectives on buffers (mpi4py's `Ibarrier`, `Ibcast`,
//! `Ireduce`, `Iallreduce`, `Igather`, `Iscatter`, `Iallgather`) over the
//! Rust `Comm::ibarrier` ... `Comm::iallgather` (protocol §8.9): each
//! returns a `sperli.Request` at once; `Wait`/`Test` (and
//! `Request.Waitall`/`Waitany`/`Testall`) complete it.
//!
//! The call runs on the communicator's progress thread while the program
//! goes on. The send data is **copied at the call** (the send buffer is
//! free at once); the receive buffer is kept by the request and **filled
//! at `Wait`** (or at the `Test` that completes it), as MPI allows: its
//! contents are undefined until the request completes. The arguments are
//! checked as the blocking call's are, before anything is issued; a check
//! only the root can make ends the job as there (protocol §8.4). The
//! calls of one communicator reach the wire in issue order, blocking ones
//! after the non-blocking ones issued before them.

use pyo3::prelude::*;
use sperli_collective::{Element, Reduction};
use sperli_wire::abort::AbortReason;

use crate::buffer::{with_dtype, Buf};
use crate::collectives::{copy_result, own_block, root_send, scatter_recv, RootBuf};
use crate::comm::Comm;
use crate::errors::{BindingError, Fail};
use crate::ops::{is_in_place, op_arg};
use crate::p2p::{Kind, Request};
use crate::rank::Issued;

/// Writes a result into the request's receive buffer (its length must be
/// the result's; H1618 otherwise, the result dropped).
fn put<T: Element>(v: &[T], out: Option<&mut Buf>) -> Result<(), Fail> {
    match out {
        Some(b) => Ok(copy_result(b, v)?),
        None => Ok(()),
    }
}

/// [`put`] of a root's result (`None` elsewhere: nothing to write).
fn put_root<T: Element>(v: Option<Vec<T>>, out: Option<&mut Buf>) -> Result<(), Fail> {
    match v {
        Some(v) => put(&v, out),
        None => Ok(()),
    }
}

/// A root's checked buffer (`None` off the root) as the buffer and the
/// failed check, which ends the job when the call is made (protocol §8.4:
/// only the root makes it).
fn root_checked(
    b: Option<RootBuf>,
    reason: AbortReason,
) -> (Option<Buf>, Option<(AbortReason, BindingError)>) {
    match b {
        Some(Ok(d)) => (Some(d), None),
        Some(Err(e)) => (None, Some((reason, e))),
        None => (None, None),
    }
}

/// `sendbuf`, or `None` for `IN_PLACE`.
fn send_or_in_place(sendbuf: &Bound<'_, PyAny>) -> Result<Option<Buf>, BindingError> {
    if is_in_place(sendbuf) {
        Ok(None)
    } else {
        Buf::send(sendbuf, "sendbuf").map(Some)
    }
}

impl Comm {
    /// Issues one non-blocking call on this communicator's rank and files
    /// its request; `recv` is the buffer its result goes to at `Wait`.
    /// With `refused` (a root's check) the job ends instead.
    pub(crate) fn issue(
        &self,
        py: Python<'_>,
        recv: Option<Buf>,
        refused: Option<(AbortReason, BindingError)>,
        start: impl FnOnce(&mut crate::rank::Rank, Option<&Buf>) -> Result<crate::rank::Open, Fail>
            + Send,
    ) -> PyResult<Request> {
        let recv_ref = recv.as_ref();
        let id = self.call(py, move |r| {
            if let Some((reason, e)) = refused {
                return Err(r.end_job(reason, e));
            }
            let open = start(r, recv_ref)?;
            Ok(r.add_open(open))
        })?;
        let kind = match recv {
            Some(b) => Kind::RecvBuf(b),
            None => Kind::Send,
        };
        Ok(self.request(id, kind))
    }
}

#[pymethods]
impl Comm {
    /// Starts a barrier; the request completes once every rank has
    /// entered it.
    #[pyo3(name = "Ibarrier")]
    fn ibarrier_buf(&self, py: Python<'_>) -> PyResult<Request> {
        self.issue(py, None, None, |r, _| {
            let req = r.comm().ibarrier()?;
            Ok(Issued::open(req, |(), _| Ok(())))
        })
    }

    /// Starts a broadcast of the root's `buf` (copied at the call) into
    /// every other rank's `buf`, written at `Wait`: it must have the
    /// root's length (else H1618 at `Wait` on that rank, the data
    /// dropped). The root's buffer may be read-only.
    #[pyo3(name = "Ibcast", signature = (buf, root = 0))]
    fn ibcast_buf(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, root: i64) -> PyResult<Request> {
        let (root, at_root) = self.root(root)?;
        let (send, recv) = if at_root {
            (Some(Buf::send(buf, "buf")?), None)
        } else {
            (None, Some(Buf::recv(buf, "buf")?))
        };
        let dtype = send.as_ref().or(recv.as_ref()).expect("one buffer").dtype;
        self.issue(py, recv, None, move |r, _| {
            with_dtype!(dtype, T => {
                let data: Vec<T> = send.as_ref().map_or_else(Vec::new, |s| s.elems::<T>().to_vec());
                let req = r.comm().ibcast(root, data)?;
                Ok(Issued::open(req, move |v: Vec<T>, out| {
                    if at_root { Ok(()) } else { put(&v, out) }
                }))
            })
        })
    }

    /// Starts a reduction of every rank's `sendbuf` (copied at the call)
    /// with `op` into the root's `recvbuf` (written at `Wait`); `IN_PLACE`
    /// at the root reduces its `recvbuf`. Elsewhere `recvbuf` is ignored.
    #[pyo3(name = "Ireduce", signature = (sendbuf, recvbuf = None, op = None, root = 0))]
    fn ireduce_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        op: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<Request> {
        let op = op.map(op_arg).transpose()?.unwrap_or(Reduction::Sum);
        let (root, at_root) = self.root(root)?;
        let send = send_or_in_place(sendbuf)?;
        if send.is_none() && !at_root {
            return Err(BindingError::InPlace { arg: "sendbuf" }.into());
        }
        let recv: Option<RootBuf> = at_root.then(|| {
            Self::root_recv(recvbuf, send.as_ref(), |d| {
                Some(send.as_ref().map_or(d.len(), Buf::len))
            })
        });
        let (recv, bad) = root_checked(recv, AbortReason::CollectiveMismatch);
        self.issue(py, recv, bad, move |r, recv| {
            let dtype = send.as_ref().or(recv).expect("one buffer").dtype;
            with_dtype!(dtype, T => {
                let data: &[T] = match (&send, recv) {
                    (Some(s), _) => s.elems::<T>(),
                    (None, Some(d)) => d.elems::<T>(),
                    (None, None) => &[],
                };
                let req = r.comm().ireduce(root, data, op)?;
                Ok(Issued::open(req, put_root::<T>))
            })
        })
    }

    /// Starts an allreduce of every rank's `sendbuf` (copied at the call;
    /// `IN_PLACE`: `recvbuf`'s contents) with `op` into `recvbuf` (same
    /// dtype and length, written at `Wait`).
    #[pyo3(name = "Iallreduce", signature = (sendbuf, recvbuf, op = None))]
    fn iallreduce_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Request> {
        let op = op.map(op_arg).transpose()?.unwrap_or(Reduction::Sum);
        let send = send_or_in_place(sendbuf)?;
        let recv = Buf::recv(recvbuf, "recvbuf")?;
        if let Some(s) = &send {
            s.same_dtype(&recv)?;
            recv.expect_len(s.len())?;
        }
        self.issue(py, Some(recv), None, move |r, recv| {
            let recv = recv.expect("a receive buffer");
            with_dtype!(recv.dtype, T => {
                let data: &[T] = match &send {
                    Some(s) => s.elems::<T>(),
                    None => recv.elems::<T>(),
                };
                let req = r.comm().iallreduce(data, op)?;
                Ok(Issued::open(req, |v: Vec<T>, out| put(&v, out)))
            })
        })
    }

    /// Starts a gather of every rank's `sendbuf` (copied at the call) into
    /// the root's `recvbuf` in rank order (`size` times as long, written
    /// at `Wait`); `IN_PLACE` at the root: its block is already in place.
    #[pyo3(name = "Igather", signature = (sendbuf, recvbuf = None, root = 0))]
    fn igather_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<Request> {
        let (root, at_root) = self.root(root)?;
        let size = self.size_u32() as usize;
        let me = self.rank_u32() as usize;
        let send = send_or_in_place(sendbuf)?;
        if send.is_none() && !at_root {
            return Err(BindingError::InPlace { arg: "sendbuf" }.into());
        }
        let recv: Option<RootBuf> = at_root.then(|| match &send {
            Some(s) => Self::root_recv(recvbuf, Some(s), |_| Some(s.len() * size)),
            None => Self::root_recv(recvbuf, None, |d| Some(d.len() - d.len() % size)),
        });
        let (recv, bad) = root_checked(recv, AbortReason::CollectiveMismatch);
        self.issue(py, recv, bad, move |r, recv| {
            let dtype = send.as_ref().or(recv).expect("one buffer").dtype;
            with_dtype!(dtype, T => {
                let own;
                let data: &[T] = match (&send, recv) {
                    (Some(s), _) => s.elems::<T>(),
                    (None, Some(d)) => {
                        own = own_block(d.elems::<T>(), me, size);
                        &own
                    }
                    (None, None) => &[],
                };
                let req = r.comm().igather(root, data)?;
                Ok(Issued::open(req, put_root::<T>))
            })
        })
    }

    /// Starts a scatter of the root's `sendbuf` (`size` equal blocks,
    /// copied at the call) into every rank's `recvbuf` (written at
    /// `Wait`); `IN_PLACE` as `recvbuf` at the root keeps its block where
    /// it is.
    #[pyo3(name = "Iscatter", signature = (sendbuf, recvbuf, root = 0))]
    fn iscatter_buf(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i64,
    ) -> PyResult<Request> {
        let (root, at_root) = self.root(root)?;
        let size = self.size_u32() as usize;
        let recv = scatter_recv(recvbuf, at_root)?;
        let send: Option<RootBuf> = at_root.then(|| {
            let s = Buf::send(root_send(sendbuf)?, "sendbuf")?;
            if let Some(d) = &recv {
                d.same_dtype(&s)?;
                s.expect_len(d.len() * size)?;
            }
            Ok(s)
        });
        let (send, bad) = root_checked(send, AbortReason::InvalidScatter);
        // Without a receive buffer (IN_PLACE at the root) nothing is written.
        self.issue(py, recv, bad, move |r, recv| {
            let dtype = send.as_ref().or(recv).expect("one buffer").dtype;
            with_dtype!(dtype, T => {
                let data: Option<&[T]> = send.as_ref().map(|s| s.elems::<T>());
                let req = r.comm().iscatter(root, data)?;
                Ok(Issued::open(req, |v: Vec<T>, out| put(&v, out)))
            })
        })
    }

    /// Starts an allgather of every rank's `sendbuf` (copied at the call)
    /// into every rank's `recvbuf` in rank order (`size` times as long,
    /// written at `Wait`); `IN_PLACE`: this rank's block of `recvbuf`.
    #[pyo3(name = "Iallgather", signature = (sendbuf, recvbuf))]
    fn iallgather_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        let size = self.size_u32() as usize;
        let me = self.rank_u32() as usize;
        let send = send_or_in_place(sendbuf)?;
        let recv = Buf::recv(recvbuf, "recvbuf")?;
        match &send {
            Some(s) => {
                s.same_dtype(&recv)?;
                recv.expect_len(s.len() * size)?;
            }
            None => recv.expect_len(recv.len() - recv.len() % size)?,
        }
        self.issue(py, Some(recv), None, move |r, recv| {
            let recv = recv.expect("a receive buffer");
            with_dtype!(recv.dtype, T => {
                let own;
                let data: &[T] = match &send {
                    Some(s) => s.elems::<T>(),
                    None => {
                        own = own_block(recv.elems::<T>(), me, size);
                        &own
                    }
                };
                let req = r.comm().iallgather(data)?;
                Ok(Issued::open(req, |v: Vec<T>, out| put(&v, out)))
            })
        })
    }
}
