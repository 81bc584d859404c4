//! The v-collectives on buffers, as mpi4py spells them: `Gatherv`,
//! `Scatterv`, `Allgatherv`, `Alltoallv` (the Rust API's `gatherv`,
//! `scatterv`, `allgatherv`, `alltoallv`, protocol §8.9).
//!
//! A v-buffer is given as mpi4py allows: `[buf, counts]`,
//! `[buf, counts, displs]`, `[buf, (counts, displs)]`, with an optional
//! last item naming the dtype (`"float64"`, `numpy.float64`, a numpy
//! dtype; it must be the buffer's), or the bare buffer (`size` equal
//! blocks). `counts` and `displs` are in elements, one per rank; `displs`
//! default to the blocks one after the other.
//!
//! Checks:
//! - a spec this rank gives for itself (its shape, counts, displacements
//!   inside the buffer, dtype) raises `ArgumentError` (H1618) before
//!   anything is sent, like every own-argument check of collectives.rs;
//! - the root's spec of `Gatherv` is a check only the root makes: it ends
//!   the job (root `JobError` H1618, ABORT reason 3; the others H1612);
//! - the root's spec of `Scatterv` is refused on every rank through the
//!   Rust call's own refusal (the lengths go first, protocol §8.9): the
//!   root raises its reason, the others `ArgumentError` H1618 naming the
//!   root, and the job goes on;
//! - counts at a receiver that differ from what the ranks sent (the
//!   lengths travel with the call, so the Rust API needs no counts) end
//!   the job from the rank that sees it (H1618, ABORT reason 3).

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use sperli_collective::vcoll::Blocks;
use sperli_collective::Element;
use sperli_wire::abort::AbortReason;
use sperli_wire::Error;

use crate::buffer::{type_name, with_dtype, Buf, Dtype};
use crate::collectives::{root_send, scatter_recv};
use crate::comm::Comm;
use crate::errors::{BindingError, Fail};
use crate::ops::is_in_place;
use crate::rank::{Coll, Rank};

/// A v-buffer: the buffer and one block per rank, in elements.
pub(crate) struct VBuf {
    /// The buffer.
    pub(crate) buf: Buf,
    /// Block i's length.
    pub(crate) counts: Vec<usize>,
    /// Where block i starts.
    pub(crate) displs: Vec<usize>,
}

impl VBuf {
    /// Parses `obj` (the forms in the module docs) for `size` ranks; a
    /// receive buffer (`recv`) must be writable.
    pub(crate) fn parse(
        obj: &Bound<'_, PyAny>,
        arg: &'static str,
        size: usize,
        recv: bool,
    ) -> Result<VBuf, BindingError> {
        let take = |o: &Bound<'_, PyAny>| {
            if recv {
                Buf::recv(o, arg)
            } else {
                Buf::send(o, arg)
            }
        };
        let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = obj.cast::<PyList>() {
            l.iter().collect()
        } else if let Ok(t) = obj.cast::<PyTuple>() {
            t.iter().collect()
        } else {
            let buf = take(obj)?;
            let n = buf.len();
            if n % size != 0 {
                return Err(BindingError::NotBlocks { arg, len: n, size });
            }
            return Ok(VBuf {
                counts: vec![n / size; size],
                displs: (0..size).map(|i| i * (n / size)).collect(),
                buf,
            });
        };
        let Some(first) = items.first() else {
            return Err(BindingError::Spec { arg, got: 0 });
        };
        let buf = take(first)?;
        // [buf, (counts, displs), type?] or [buf, counts, displs?, type?].
        let pair = items.get(1).and_then(|i| {
            let t = i.cast::<PyTuple>().ok()?;
            let both = t.len() == 2 && t.iter().all(|x| is_sequence(&x));
            both.then(|| (t.get_item(0).ok(), t.get_item(1).ok()))
        });
        let (counts, displs, ty) = match (pair, items.len()) {
            (Some((c, d)), 2 | 3) => (c, d, items.get(2).cloned()),
            (None, 2..=4) => (
                items.get(1).cloned(),
                items.get(2).cloned(),
                items.get(3).cloned(),
            ),
            (_, 1) => (None, None, None),
            (_, got) => return Err(BindingError::Spec { arg, got }),
        };
        if let Some(t) = ty.filter(|t| !t.is_none()) {
            check_type(&t, arg, buf.dtype)?;
        }
        let n = buf.len();
        let counts = match counts.filter(|c| !c.is_none()) {
            Some(c) => numbers(&c, arg, size)?,
            None if n % size == 0 => vec![n / size; size],
            None => return Err(BindingError::NotBlocks { arg, len: n, size }),
        };
        let displs = match displs.filter(|d| !d.is_none()) {
            Some(d) => numbers(&d, arg, size)?,
            None => packed(&counts),
        };
        for (rank, (&count, &start)) in counts.iter().zip(&displs).enumerate() {
            if start.checked_add(count).is_none_or(|end| end > n) {
                return Err(BindingError::Block {
                    arg,
                    rank,
                    start,
                    count,
                    len: n,
                });
            }
        }
        Ok(VBuf {
            buf,
            counts,
            displs,
        })
    }

    /// The blocks one after the other (no copy when they already are).
    pub(crate) fn packed<T: Element>(&self) -> std::borrow::Cow<'_, [T]> {
        let all = self.buf.elems::<T>();
        if self.displs == packed(&self.counts) {
            let total: usize = self.counts.iter().sum();
            return std::borrow::Cow::Borrowed(&all[..total]);
        }
        let mut v = Vec::with_capacity(self.counts.iter().sum());
        for (&c, &d) in self.counts.iter().zip(&self.displs) {
            v.extend_from_slice(&all[d..d + c]);
        }
        std::borrow::Cow::Owned(v)
    }

    /// Block `i` of the buffer.
    fn block<T: Element>(&self, i: usize) -> &[T] {
        &self.buf.elems::<T>()[self.displs[i]..self.displs[i] + self.counts[i]]
    }

    /// Puts `blocks` (each rank's block, with its length) in place; a
    /// length other than this spec's count for that rank is the rank's
    /// error ([`BindingError::Received`]), and nothing is written.
    pub(crate) fn place<T: Element>(
        &mut self,
        data: &[T],
        counts: &[usize],
    ) -> Result<(), BindingError> {
        for (rank, (&got, &want)) in counts.iter().zip(&self.counts).enumerate() {
            if got != want {
                return Err(BindingError::Received {
                    arg: self.buf.arg,
                    rank,
                    expected: want,
                    got,
                });
            }
        }
        let out = self.buf.elems_mut::<T>();
        let mut at = 0;
        for (&c, &d) in self.counts.iter().zip(&self.displs) {
            out[d..d + c].copy_from_slice(&data[at..at + c]);
            at += c;
        }
        Ok(())
    }
}

/// Puts a v-call's result into `v`; counts that differ from what the
/// ranks sent are a check only this rank makes: it ends the job (H1618,
/// ABORT reason 3).
pub(crate) fn place_or_end<T: Element>(
    r: &mut Rank,
    v: &mut VBuf,
    b: &Blocks<T>,
) -> Result<(), Fail> {
    v.place(&b.data, &b.counts)
        .map_err(|e| r.end_job(AbortReason::CollectiveMismatch, e))
}

/// Whether `o` is a list, a tuple or an array (not a number or a string).
fn is_sequence(o: &Bound<'_, PyAny>) -> bool {
    o.cast::<PyList>().is_ok()
        || o.cast::<PyTuple>().is_ok()
        || o.hasattr("__array__").unwrap_or(false)
}

/// Offsets of blocks of `counts` one after the other.
fn packed(counts: &[usize]) -> Vec<usize> {
    let mut at = 0;
    counts
        .iter()
        .map(|&c| {
            let d = at;
            at += c;
            d
        })
        .collect()
}

/// `size` non-negative integers from a list, tuple or array.
fn numbers(
    o: &Bound<'_, PyAny>,
    arg: &'static str,
    size: usize,
) -> Result<Vec<usize>, BindingError> {
    let v: Vec<i64> = o.extract().map_err(|_| BindingError::CountsType {
        arg,
        type_name: type_name(o),
    })?;
    if v.len() != size {
        return Err(BindingError::Counts {
            arg,
            got: v.len(),
            size,
        });
    }
    v.into_iter()
        .map(|x| usize::try_from(x).map_err(|_| BindingError::Count { arg, got: x }))
        .collect()
}

/// The spec's type item must name the buffer's dtype: its `str()` (a
/// string, a numpy dtype) or its `__name__` (`numpy.float64`).
fn check_type(t: &Bound<'_, PyAny>, arg: &'static str, dtype: Dtype) -> Result<(), BindingError> {
    let name = |a: &str| t.getattr(a).ok().and_then(|n| n.extract::<String>().ok());
    let s = t.str().ok().map(|s| s.to_string());
    if s.as_deref() == Some(dtype.name()) || name("__name__").as_deref() == Some(dtype.name()) {
        return Ok(());
    }
    Err(BindingError::SpecType {
        arg,
        got: s.unwrap_or_else(|| type_name(t)),
        dtype,
    })
}

#[pymethods]
impl Comm {
    /// Gathers every rank's `sendbuf` (of any length) into the root's
    /// `recvbuf = [buf, counts(, displs)]`: block i (rank i's data) at
    /// `displs[i]`. Off the root `recvbuf` is ignored. `sendbuf=IN_PLACE`
    /// at the root: its block is in `recvbuf` already.
    #[pyo3(name = "Gatherv", signature = (sendbuf, recvbuf = None, root = 0))]
    fn gatherv_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        let (root, at_root) = self.root(root)?;
        let size = self.size_u32() as usize;
        let send = if is_in_place(sendbuf) {
            if !at_root {
                return Err(BindingError::InPlace { arg: "sendbuf" }.into());
            }
            None
        } else {
            Some(Buf::send(sendbuf, "sendbuf")?)
        };
        let recv: Option<Result<VBuf, BindingError>> = at_root.then(|| {
            let obj = recvbuf.ok_or(BindingError::NoBuffer {
                arg: "recvbuf",
                type_name: "NoneType".into(),
            })?;
            let v = VBuf::parse(obj, "recvbuf", size, true)?;
            if let Some(s) = &send {
                s.same_dtype(&v.buf)?;
            }
            Ok(v)
        });
        let me = self.rank_u32() as usize;
        self.call(py, |r| {
            let mut recv = match recv {
                Some(Err(e)) => return Err(r.end_job(AbortReason::CollectiveMismatch, e)),
                Some(Ok(v)) => Some(v),
                None => None,
            };
            let dtype = send.as_ref().map_or_else(
                || recv.as_ref().expect("at the root").buf.dtype,
                |s| s.dtype,
            );
            with_dtype!(dtype, T => {
                let own;
                let a: &[T] = match &send {
                    Some(s) => s.elems::<T>(),
                    None => {
                        own = recv.as_ref().expect("IN_PLACE at the root").block::<T>(me).to_vec();
                        &own
                    }
                };
                if let (Some(b), Some(v)) = (r.comm().gatherv(root, a)?, recv.as_mut()) {
                    place_or_end(r, v, &b)?;
                }
            });
            Ok(())
        })
    }

    /// Scatters the root's `sendbuf = [buf, counts(, displs)]`: rank i
    /// gets block i in its `recvbuf`, which must have exactly `counts[i]`
    /// elements. `sendbuf` is ignored off the root; `recvbuf=IN_PLACE` at
    /// the root leaves its block in `sendbuf`.
    #[pyo3(name = "Scatterv", signature = (sendbuf, recvbuf, root = 0))]
    fn scatterv_buf(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i64,
    ) -> PyResult<()> {
        let (root, at_root) = self.root(root)?;
        let size = self.size_u32() as usize;
        let mut recv = scatter_recv(recvbuf, at_root)?;
        let send: Option<Result<VBuf, BindingError>> = at_root.then(|| {
            let v = VBuf::parse(root_send(sendbuf)?, "sendbuf", size, false)?;
            if let Some(d) = &recv {
                d.same_dtype(&v.buf)?;
            }
            Ok(v)
        });
        let (send, refused) = match send {
            Some(Ok(v)) => (Some(v), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        self.call(py, |r| {
            // An IN_PLACE root whose spec is refused: any type refuses.
            let dtype = send.as_ref().map(|v| v.buf.dtype).or(recv.as_ref().map(|d| d.dtype));
            with_dtype!(dtype.unwrap_or(Dtype::U8), T => {
                let data;
                let offer: Option<(&[T], &[usize])> = match (&send, &refused) {
                    (Some(v), _) => {
                        data = v.packed::<T>();
                        Some((&data[..], &v.counts[..]))
                    }
                    // The root's own spec is refused on every rank: the
                    // Rust call refuses counts that are not one per rank.
                    (None, Some(_)) => Some((&[], &[])),
                    (None, None) => None,
                };
                let got = r.comm().scatterv(root, offer);
                if let Some(e) = refused {
                    return Err(match got {
                        Err(Error::InvalidArguments(_)) | Ok(_) => Fail::from(e),
                        Err(other) => Fail::from(other),
                    });
                }
                let got = got?;
                if let Some(d) = recv.as_mut() {
                    if d.len() != got.len() {
                        let e = BindingError::Length { arg: "recvbuf", expected: got.len(), got: d.len() };
                        return Err(r.end_job(AbortReason::CollectiveMismatch, e));
                    }
                    d.elems_mut::<T>().copy_from_slice(&got);
                }
            });
            Ok(())
        })
    }

    /// Every rank's `sendbuf` (of any length) into every rank's
    /// `recvbuf = [buf, counts(, displs)]`: block i (rank i's data) at
    /// `displs[i]`. `sendbuf=IN_PLACE`: this rank's block is in `recvbuf`.
    #[pyo3(name = "Allgatherv", signature = (sendbuf, recvbuf))]
    fn allgatherv_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let size = self.size_u32() as usize;
        let me = self.rank_u32() as usize;
        let mut recv = VBuf::parse(recvbuf, "recvbuf", size, true)?;
        let send = if is_in_place(sendbuf) {
            None
        } else {
            let s = Buf::send(sendbuf, "sendbuf")?;
            s.same_dtype(&recv.buf)?;
            Some(s)
        };
        self.call(py, |r| {
            with_dtype!(recv.buf.dtype, T => {
                let own;
                let a: &[T] = match &send {
                    Some(s) if !s.region.overlaps(&recv.buf.region) => s.elems::<T>(),
                    Some(s) => {
                        own = s.elems::<T>().to_vec();
                        &own
                    }
                    None => {
                        own = recv.block::<T>(me).to_vec();
                        &own
                    }
                };
                let b = r.comm().allgatherv(a)?;
                place_or_end(r, &mut recv, &b)?;
            });
            Ok(())
        })
    }

    /// `sendbuf = [buf, counts(, displs)]`: block j goes to rank j;
    /// `recvbuf = [buf, counts(, displs)]` gets the block rank i sent here
    /// at `displs[i]`.
    #[pyo3(name = "Alltoallv", signature = (sendbuf, recvbuf))]
    fn alltoallv_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let size = self.size_u32() as usize;
        let send = VBuf::parse(sendbuf, "sendbuf", size, false)?;
        let mut recv = VBuf::parse(recvbuf, "recvbuf", size, true)?;
        send.buf.same_dtype(&recv.buf)?;
        self.call(py, |r| {
            with_dtype!(send.buf.dtype, T => {
                // A copy when the blocks are not packed or share memory
                // with the receive buffer (written while this is read).
                let data = if send.buf.region.overlaps(&recv.buf.region) {
                    std::borrow::Cow::Owned(send.packed::<T>().into_owned())
                } else {
                    send.packed::<T>()
                };
                let b = r.comm().alltoallv(&data, &send.counts)?;
                place_or_end(r, &mut recv, &b)?;
            });
            Ok(())
        })
    }
}
