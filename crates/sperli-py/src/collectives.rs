//! Collectives on buffers (mpi4py's uppercase calls): `Barrier`, `Bcast`,
//! `Reduce`, `Allreduce`, `Gather`, `Scatter`, `Allgather`, `Alltoall`,
//! `Reduce_scatter_block`.
//!
//! Every rank makes the same calls in the same order with buffers of the
//! same dtype (protocol §8). Each buffer goes through [`Buf`]; the typed
//! call runs with [`with_dtype!`] straight on the numpy memory where the
//! Rust API has an `_into` form (`Bcast`, `Reduce`, `Allreduce`,
//! `Scatter`), else the result is copied into the receive buffer once.
//! `Bcast`, `Reduce`, `Allreduce`, `Gather`, `Scatter` and `Allgather` take
//! any length in one call of the Rust API (one pipelined call with HELLO
//! feature bit 1 where protocol §14.5 says so, else the v1 split of
//! protocol §6.1 that the Rust call makes itself).
//!
//! Errors follow protocol §8.4, as the Rust API does:
//! - a check every rank makes on its own arguments (dtype, layout, a
//!   read-only receive buffer, the lengths of its own two buffers) raises
//!   `ArgumentError` (H1618) before anything is sent, and the job goes on
//!   when every rank is refused alike;
//! - a check only the root can make (the root's buffers of `Reduce`,
//!   `Gather`, `Scatter`) ends the job: the root raises `JobError` H1618
//!   and sends ABORT (reason 3; 4 for `Scatter`), the others raise
//!   `JobError` H1612;
//! - what the Rust API finds (a contribution of another length or type on
//!   another rank: H1617/H1618) is raised as it reports it.

use pyo3::prelude::*;
use sperli_collective::{Element, Reduction};
use sperli_wire::abort::AbortReason;

use crate::buffer::{with_dtype, Buf};
use crate::comm::{rank_arg, Comm};
use crate::errors::{BindingError, Fail};
use crate::ops::{is_in_place, op_arg};
use crate::rank::Coll;
use crate::raw::{pair, PairError};

/// A root's own buffer: either checked, or the check's error, which ends
/// the job when the call runs (only the root can see it).
pub(crate) type RootBuf = Result<Buf, BindingError>;

/// Runs `f` with the send elements and the receive elements: the send
/// buffer itself, or a copy when it shares memory with the receive buffer
/// or is `IN_PLACE` (`send == None`: a copy of `in_place` of the receive
/// buffer).
fn send_recv<T: Element, R>(
    send: Option<&Buf>,
    recv: &mut Buf,
    in_place: std::ops::Range<usize>,
    f: impl FnOnce(&[T], &mut [T]) -> R,
) -> R {
    match send {
        None => {
            let copy = recv.elems::<T>()[in_place].to_vec();
            f(&copy, recv.elems_mut::<T>())
        }
        Some(s) => match pair::<T, T>(&s.region, &mut recv.region) {
            Ok((a, b)) => f(a, b),
            Err(PairError::Overlap) => {
                let copy = s.elems::<T>().to_vec();
                f(&copy, recv.elems_mut::<T>())
            }
            Err(PairError::Layout | PairError::ReadOnly) => {
                unreachable!("checked by Buf::send and Buf::recv")
            }
        },
    }
}

/// This rank's block of `recv` (`IN_PLACE` of Gather and Allgather: a
/// copy, since `recv` is written while it is sent).
pub(crate) fn own_block<T: Element>(recv: &[T], me: usize, size: usize) -> Vec<T> {
    let n = recv.len() / size;
    recv[me * n..(me + 1) * n].to_vec()
}

impl Comm {
    /// The root argument, and whether this rank is the root.
    pub(crate) fn root(&self, root: i64) -> Result<(u32, bool), BindingError> {
        let r = rank_arg("root", root)?;
        Ok((r, r == self.rank_u32()))
    }

    /// Checks a root's receive buffer `obj`: writable, the dtype of
    /// `dtype_of` (if given), and the length `len` asks for (if any).
    pub(crate) fn root_recv(
        obj: Option<&Bound<'_, PyAny>>,
        dtype_of: Option<&Buf>,
        len: impl FnOnce(&Buf) -> Option<usize>,
    ) -> RootBuf {
        let obj = obj.ok_or(BindingError::NoBuffer {
            arg: "recvbuf",
            type_name: "NoneType".into(),
        })?;
        let d = Buf::recv(obj, "recvbuf")?;
        if let Some(s) = dtype_of {
            s.same_dtype(&d)?;
        }
        if let Some(want) = len(&d) {
            d.expect_len(want)?;
        }
        Ok(d)
    }
}

#[pymethods]
impl Comm {
    /// Returns once every rank has entered the barrier.
    #[pyo3(name = "Barrier")]
    fn barrier_buf(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, |r| r.comm().barrier().map_err(Fail::from))
    }

    /// Broadcasts the root's `buf` into every other rank's `buf` (same
    /// dtype and length on every rank; a receiver of another length is
    /// H1617). The root's buffer may be read-only.
    #[pyo3(name = "Bcast", signature = (buf, root = 0))]
    fn bcast_buf(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, root: i64) -> PyResult<()> {
        let (root, at_root) = self.root(root)?;
        let mut b = if at_root {
            Buf::send(buf, "buf")?
        } else {
            Buf::recv(buf, "buf")?
        };
        let writable = !b.region.readonly();
        self.call(py, |r| {
            with_dtype!(b.dtype, T => {
                let mut copy;
                let data: &mut [T] = if writable {
                    b.elems_mut::<T>()
                } else {
                    copy = b.elems::<T>().to_vec();
                    &mut copy
                };
                r.comm().bcast_into(root, data)?;
            });
            Ok(())
        })
    }

    /// Reduces every rank's `sendbuf` elementwise with `op` (folded in
    /// ascending rank order: bit-identical run after run) into the root's
    /// `recvbuf`; `recvbuf` is ignored elsewhere. `sendbuf=IN_PLACE` at
    /// the root: its data is in `recvbuf`.
    #[pyo3(name = "Reduce", signature = (sendbuf, recvbuf = None, op = None, root = 0))]
    pub(crate) fn reduce_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        op: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let op = op.map(op_arg).transpose()?.unwrap_or(Reduction::Sum);
        let (root, at_root) = self.root(root)?;
        let send = if is_in_place(sendbuf) {
            if !at_root {
                return Err(BindingError::InPlace { arg: "sendbuf" }.into());
            }
            None
        } else {
            Some(Buf::send(sendbuf, "sendbuf")?)
        };
        // The lengths are the Rust API's own root check (reduce_into).
        let recv: Option<RootBuf> =
            at_root.then(|| Self::root_recv(recvbuf, send.as_ref(), |_| None));
        self.call(py, |r| {
            let mut recv = match recv {
                Some(Err(e)) => return Err(r.end_job(AbortReason::CollectiveMismatch, e)),
                Some(Ok(d)) => Some(d),
                None => None,
            };
            let dtype = send.as_ref().or(recv.as_ref()).expect("one buffer").dtype;
            with_dtype!(dtype, T => {
                match &mut recv {
                    Some(d) => {
                        let all = 0..d.len();
                        send_recv::<T, _>(send.as_ref(), d, all, |a, b| {
                            r.comm().reduce_into(root, a, b, op)
                        })?;
                    }
                    None => {
                        let a = send.as_ref().expect("not IN_PLACE off the root").elems::<T>();
                        r.comm().reduce_into(root, a, &mut [], op)?;
                    }
                }
            });
            Ok(())
        })
    }

    /// Reduces every rank's `sendbuf` elementwise with `op` into every
    /// rank's `recvbuf` (same dtype and length; `sendbuf=IN_PLACE`: the
    /// data is in `recvbuf`).
    #[pyo3(name = "Allreduce", signature = (sendbuf, recvbuf, op = None))]
    pub(crate) fn allreduce_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
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
        }
        self.call(py, |r| {
            let all = 0..recv.len();
            with_dtype!(recv.dtype, T => {
                send_recv::<T, _>(send.as_ref(), &mut recv, all, |a, b| {
                    r.comm().allreduce_into(a, b, op)
                })?;
            });
            Ok(())
        })
    }

    /// Gathers every rank's `sendbuf` (same length everywhere) into the
    /// root's `recvbuf`, rank by rank (`size` times as long).
    /// `sendbuf=IN_PLACE` at the root: its block is in `recvbuf` already.
    #[pyo3(name = "Gather", signature = (sendbuf, recvbuf = None, root = 0))]
    fn gather_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let (root, at_root) = self.root(root)?;
        let size = self.size_u32() as usize;
        let me = self.rank_u32() as usize;
        let send = if is_in_place(sendbuf) {
            if !at_root {
                return Err(BindingError::InPlace { arg: "sendbuf" }.into());
            }
            None
        } else {
            Some(Buf::send(sendbuf, "sendbuf")?)
        };
        let recv: Option<RootBuf> = at_root.then(|| match &send {
            Some(s) => Self::root_recv(recvbuf, Some(s), |_| Some(s.len() * size)),
            None => Self::root_recv(recvbuf, None, |d| Some(d.len() - d.len() % size)),
        });
        self.call(py, |r| {
            let mut recv = match recv {
                Some(Err(e)) => return Err(r.end_job(AbortReason::CollectiveMismatch, e)),
                Some(Ok(d)) => Some(d),
                None => None,
            };
            let dtype = send.as_ref().or(recv.as_ref()).expect("one buffer").dtype;
            with_dtype!(dtype, T => {
                let own;
                let a: &[T] = match &send {
                    Some(s) => s.elems::<T>(),
                    None => {
                        let d = recv.as_ref().expect("IN_PLACE at the root");
                        own = own_block(d.elems::<T>(), me, size);
                        &own
                    }
                };
                // Any length: the Rust call splits a block past one v1
                // call itself (protocol §6.1).
                let mut none: [T; 0] = [];
                let out: &mut [T] = match recv.as_mut() {
                    Some(d) => d.elems_mut::<T>(),
                    None => &mut none,
                };
                r.comm().gather_into(root, a, out)?;
            });
            Ok(())
        })
    }

    /// Scatters the root's `sendbuf` (`size` equal blocks) to every
    /// rank's `recvbuf` (one block; rank i gets block i). `sendbuf` is
    /// ignored off the root; `recvbuf=IN_PLACE` at the root keeps its
    /// block in `sendbuf`.
    #[pyo3(name = "Scatter", signature = (sendbuf, recvbuf, root = 0))]
    fn scatter_buf(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i64,
    ) -> PyResult<()> {
        let (root, at_root) = self.root(root)?;
        let size = self.size_u32() as usize;
        let mut recv = scatter_recv(recvbuf, at_root)?;
        let send: Option<RootBuf> = at_root.then(|| {
            let s = Buf::send(root_send(sendbuf)?, "sendbuf")?;
            if let Some(d) = &recv {
                d.same_dtype(&s)?;
                s.expect_len(d.len() * size)?;
            }
            Ok(s)
        });
        self.call(py, |r| {
            let send = match send {
                Some(Err(e)) => return Err(r.end_job(AbortReason::InvalidScatter, e)),
                Some(Ok(s)) => Some(s),
                None => None,
            };
            let dtype = send.as_ref().or(recv.as_ref()).expect("one buffer").dtype;
            let overlap = match (&send, &recv) {
                (Some(s), Some(d)) => s.region.overlaps(&d.region),
                _ => false,
            };
            with_dtype!(dtype, T => {
                // A root whose block lies inside its sendbuf scatters from
                // a copy (the two slices may not alias).
                let copy: Option<Vec<T>> = if overlap {
                    send.as_ref().map(|s| s.elems::<T>().to_vec())
                } else {
                    None
                };
                let whole: Option<&[T]> = match &copy {
                    Some(c) => Some(c),
                    None => send.as_ref().map(|s| s.elems::<T>()),
                };
                let mut own = Vec::new();
                let d: &mut [T] = match recv.as_mut() {
                    Some(d) => d.elems_mut::<T>(),
                    None => {
                        let n = whole.map_or(0, <[T]>::len) / size;
                        own.resize(n, T::default());
                        &mut own
                    }
                };
                // Any length (protocol §6.1: the Rust call splits it).
                r.comm().scatter_into(root, whole, d)?;
            });
            Ok(())
        })
    }

    /// Every rank's `sendbuf` (same length everywhere), rank by rank, into
    /// every rank's `recvbuf` (`size` times as long). `sendbuf=IN_PLACE`:
    /// this rank's block is in `recvbuf` already.
    #[pyo3(name = "Allgather", signature = (sendbuf, recvbuf))]
    fn allgather_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let size = self.size_u32() as usize;
        let me = self.rank_u32() as usize;
        let mut recv = Buf::recv(recvbuf, "recvbuf")?;
        let send = if is_in_place(sendbuf) {
            None
        } else {
            let s = Buf::send(sendbuf, "sendbuf")?;
            s.same_dtype(&recv)?;
            recv.expect_len(s.len() * size)?;
            Some(s)
        };
        self.call(py, |r| {
            with_dtype!(recv.dtype, T => {
                let own;
                let a: &[T] = match &send {
                    Some(s) if !s.region.overlaps(&recv.region) => s.elems::<T>(),
                    Some(s) => {
                        own = s.elems::<T>().to_vec();
                        &own
                    }
                    None => {
                        own = own_block(recv.elems::<T>(), me, size);
                        &own
                    }
                };
                // Any length (protocol §6.1: the Rust call splits it).
                let v = r.comm().allgather(a)?;
                recv.elems_mut::<T>().copy_from_slice(&v);
            });
            Ok(())
        })
    }

    /// `sendbuf` is `size` equal blocks, block j going to rank j;
    /// `recvbuf` (as long) gets the blocks every rank sent here, in rank
    /// order. A `sendbuf` that is not `size` blocks ends the job (the
    /// Rust API's rule: H1618, ABORT reason 4).
    #[pyo3(name = "Alltoall", signature = (sendbuf, recvbuf))]
    fn alltoall_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let send = Buf::send(sendbuf, "sendbuf")?;
        let mut recv = Buf::recv(recvbuf, "recvbuf")?;
        send.same_dtype(&recv)?;
        recv.expect_len(send.len())?;
        self.call(py, |r| {
            with_dtype!(send.dtype, T => {
                let v = r.comm().alltoall(send.elems::<T>())?;
                copy_result(&mut recv, &v)?;
            });
            Ok(())
        })
    }

    /// Reduces every rank's `sendbuf` (`size` equal blocks) elementwise
    /// with `op` and gives rank i block i of the result in `recvbuf`
    /// (MPI's `Reduce_scatter_block`).
    #[pyo3(name = "Reduce_scatter_block", signature = (sendbuf, recvbuf, op = None))]
    fn reduce_scatter_block_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let op = op.map(op_arg).transpose()?.unwrap_or(Reduction::Sum);
        let size = self.size_u32() as usize;
        let send = Buf::send(sendbuf, "sendbuf")?;
        let mut recv = Buf::recv(recvbuf, "recvbuf")?;
        send.same_dtype(&recv)?;
        if send.len() % size == 0 {
            recv.expect_len(send.len() / size)?;
        }
        self.call(py, |r| {
            with_dtype!(send.dtype, T => {
                let v = r.comm().reduce_scatter(send.elems::<T>(), op)?;
                copy_result(&mut recv, &v)?;
            });
            Ok(())
        })
    }
}

/// The receive buffer of a scatter: `None` for `IN_PLACE` at the root
/// (refused elsewhere).
pub(crate) fn scatter_recv(
    recvbuf: &Bound<'_, PyAny>,
    at_root: bool,
) -> Result<Option<Buf>, BindingError> {
    if !is_in_place(recvbuf) {
        return Buf::recv(recvbuf, "recvbuf").map(Some);
    }
    if !at_root {
        return Err(BindingError::InPlace { arg: "recvbuf" });
    }
    Ok(None)
}

/// The root's send buffer object of a scatter (`None` is no buffer).
pub(crate) fn root_send<'a, 'py>(
    sendbuf: Option<&'a Bound<'py, PyAny>>,
) -> Result<&'a Bound<'py, PyAny>, BindingError> {
    sendbuf.ok_or(BindingError::NoBuffer {
        arg: "sendbuf",
        type_name: "NoneType".into(),
    })
}

/// Copies a result vector into a receive buffer of the same length.
pub(crate) fn copy_result<T: Element>(recv: &mut Buf, v: &[T]) -> Result<(), BindingError> {
    recv.expect_len(v.len())?;
    recv.elems_mut::<T>().copy_from_slice(v);
    Ok(())
}
