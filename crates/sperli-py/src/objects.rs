//! mpi4py's lowercase calls on Python objects: `send`, `recv`, `isend`,
//! `irecv`, `bcast`, `gather`, `scatter`, `allgather`, `barrier`, and
//! `allreduce`/`reduce` of a number or an array.
//!
//! Objects travel pickled (highest protocol), as in mpi4py; only ranks of
//! the same job, authenticated by TLS, send them.
//! - Point-to-point: one message, the pickle alone, with HELLO feature
//!   bit 3 (protocol §16: a message of any length is one message), as
//!   mpi4py sends it; without the bit `Endpoint::send_large`'s framing (a
//!   `u64` length, then the bytes, in as many DATA frames as needed). An
//!   object of any size goes through one `send`/`recv` either way.
//! - Collectives: the Rust API's collectives take blocks of one length, so
//!   the pickles' lengths go first (an allgather, or a bcast from the
//!   root), then blocks zero-padded to the longest, in calls of at most
//!   16777200 bytes per rank ([`gather_bytes`], [`scatter_bytes`],
//!   [`allgather_bytes`]). When the v-collectives come to the Rust API,
//!   these three become one call each.
//! - `allreduce`/`reduce` take an `int` (as int64), a `float` (float64),
//!   a `bool`, a numpy scalar or a numpy array of the seven element types,
//!   and return the same kind; every rank must pass the same kind.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyList};
use sperli_collective::Reduction;
use sperli_transport::{SendMode, Status as WireStatus};
use sperli_wire::abort::AbortReason;
use sperli_wire::limits::{MAX_COLLECTIVE_DATA, MAX_PAYLOAD};
use sperli_wire::Error;

use crate::buffer::type_name;
use crate::comm::{rank_arg, Comm};
use crate::errors::{BindingError, Fail};
use crate::messages::{assemble, prefixed, start_recv, start_send};
use crate::ops::op_arg;
use crate::p2p::{
    recv_frame, recv_tag, send_tag, source_arg, Kind, Peer, Request, Status, ANY_SOURCE, ANY_TAG,
};
use crate::rank::Coll;
use sperli_collective::chunk_ranges as chunks;

/// `pickle.dumps(obj, HIGHEST_PROTOCOL)`.
pub(crate) fn pickle<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let p = obj.py().import("pickle")?;
    let proto = p.getattr("HIGHEST_PROTOCOL")?;
    Ok(p.call_method1("dumps", (obj, proto))?
        .cast_into::<PyBytes>()?)
}

/// `pickle.loads(bytes)`; `None` for no bytes (an empty message, as
/// mpi4py reads one).
pub(crate) fn unpickle(py: Python<'_>, bytes: &[u8]) -> PyResult<Py<PyAny>> {
    if bytes.is_empty() {
        return Ok(py.None());
    }
    let b = PyBytes::new(py, bytes);
    Ok(py.import("pickle")?.call_method1("loads", (b,))?.unbind())
}

/// gather of byte strings of any lengths to `root`: every rank's, in rank
/// order, at the root; `None` elsewhere.
pub(crate) fn gather_bytes<C: Coll>(
    c: &mut C,
    root: u32,
    data: &[u8],
) -> Result<Option<Vec<Vec<u8>>>, Error> {
    let lens = c.allgather(&[data.len() as u64])?;
    let longest = lens.iter().copied().max().unwrap_or(0) as usize;
    let at_root = c.rank() == root;
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); if at_root { lens.len() } else { 0 }];
    for (s, e) in chunks(longest, MAX_COLLECTIVE_DATA) {
        let block = padded(data, s, e);
        if let Some(all) = c.gather(root, &block)? {
            take_blocks(&mut out, &lens, &all, e - s);
        }
    }
    Ok(at_root.then_some(out))
}

/// scatter of byte strings of any lengths from `root` (which passes one
/// per rank): this rank's.
pub(crate) fn scatter_bytes<C: Coll>(
    c: &mut C,
    root: u32,
    items: Option<&[Vec<u8>]>,
) -> Result<Vec<u8>, Error> {
    let at_root = c.rank() == root;
    let mut lens: Vec<u64> = match (at_root, items) {
        (true, Some(items)) => items.iter().map(|i| i.len() as u64).collect(),
        _ => Vec::new(),
    };
    c.bcast(root, &mut lens)?;
    let me = c.rank() as usize;
    let mine = lens.get(me).copied().unwrap_or(0) as usize;
    let longest = lens.iter().copied().max().unwrap_or(0) as usize;
    let mut out = Vec::new();
    for (s, e) in chunks(longest, MAX_COLLECTIVE_DATA) {
        let data: Option<Vec<u8>> = match (at_root, items) {
            (true, Some(items)) => Some(items.iter().flat_map(|i| padded(i, s, e)).collect()),
            _ => None,
        };
        let block = c.scatter(root, data.as_deref())?;
        let keep = mine.saturating_sub(out.len()).min(block.len());
        out.extend_from_slice(&block[..keep]);
    }
    Ok(out)
}

/// allgather of byte strings of any lengths: every rank's, in rank order.
pub(crate) fn allgather_bytes<C: Coll>(c: &mut C, data: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
    let lens = c.allgather(&[data.len() as u64])?;
    let longest = lens.iter().copied().max().unwrap_or(0) as usize;
    let chunk = (MAX_COLLECTIVE_DATA / lens.len().max(1)).max(1);
    let mut out = vec![Vec::new(); lens.len()];
    for (s, e) in chunks(longest, chunk) {
        let all = c.allgather(&padded(data, s, e))?;
        take_blocks(&mut out, &lens, &all, e - s);
    }
    Ok(out)
}

/// Bytes `s..e` of `data`, zero-padded past its end.
fn padded(data: &[u8], s: usize, e: usize) -> Vec<u8> {
    let mut block = vec![0u8; e - s];
    let end = data.len().min(e);
    if s < end {
        block[..end - s].copy_from_slice(&data[s..end]);
    }
    block
}

/// Appends to each `out[i]` what block i of `all` holds of it (up to
/// `lens[i]` bytes in all).
fn take_blocks(out: &mut [Vec<u8>], lens: &[u64], all: &[u8], block: usize) {
    if block == 0 {
        return;
    }
    for ((o, &len), b) in out.iter_mut().zip(lens).zip(all.chunks_exact(block)) {
        let keep = (len as usize).saturating_sub(o.len()).min(b.len());
        o.extend_from_slice(&b[..keep]);
    }
}

/// A number the lowercase reductions take.
#[derive(Clone, Copy)]
pub(crate) enum Number {
    Bool(bool),
    Int(i64),
    Float(f64),
}

/// `obj` as a [`Number`], if it is a bool, an int that fits int64 or a
/// float.
pub(crate) fn number(obj: &Bound<'_, PyAny>) -> Option<Number> {
    if obj.is_instance_of::<PyBool>() {
        obj.extract::<bool>().ok().map(Number::Bool)
    } else if obj.is_instance_of::<PyInt>() {
        obj.extract::<i64>().ok().map(Number::Int)
    } else if obj.is_instance_of::<PyFloat>() {
        obj.extract::<f64>().ok().map(Number::Float)
    } else {
        None
    }
}

impl Comm {
    /// The lowercase reduction of `obj` (an array or a number); `root`
    /// `None` for allreduce. `Ok(None)` off the root.
    fn reduce_object(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        root: Option<u32>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let red = op.map(op_arg).transpose()?.unwrap_or(Reduction::Sum);
        let at_root = root.is_none_or(|r| r == self.rank_u32());
        if let Some(n) = number(obj) {
            let v = self.call(py, |r| {
                let mut c = r.comm();
                let out = match (n, root) {
                    (Number::Bool(b), None) => {
                        c.allreduce_scalar(i64::from(b), red).map(Number::Int)
                    }
                    (Number::Int(i), None) => c.allreduce_scalar(i, red).map(Number::Int),
                    (Number::Float(f), None) => c.allreduce_scalar(f, red).map(Number::Float),
                    (Number::Bool(b), Some(rt)) => c
                        .reduce_scalar(rt, i64::from(b), red)
                        .map(|v| Number::Int(v.unwrap_or(0))),
                    (Number::Int(i), Some(rt)) => c
                        .reduce_scalar(rt, i, red)
                        .map(|v| Number::Int(v.unwrap_or(0))),
                    (Number::Float(f), Some(rt)) => c
                        .reduce_scalar(rt, f, red)
                        .map(|v| Number::Float(v.unwrap_or(0.0))),
                }?;
                Ok(out)
            })?;
            if !at_root {
                return Ok(None);
            }
            let out = match (n, v) {
                (Number::Bool(_), Number::Int(i)) => {
                    PyBool::new(py, i != 0).to_owned().into_any().unbind()
                }
                (_, Number::Int(i)) => i.into_pyobject(py)?.into_any().unbind(),
                (_, Number::Float(f)) => f.into_pyobject(py)?.into_any().unbind(),
                (_, Number::Bool(b)) => PyBool::new(py, b).to_owned().into_any().unbind(),
            };
            return Ok(Some(out));
        }
        // A numpy scalar or array (anything numpy.asarray takes with one
        // of the seven dtypes): reduced as a C-contiguous copy.
        let np = py.import("numpy").map_err(|_| BindingError::Scalar {
            type_name: type_name(obj),
        })?;
        let is_scalar = obj.is_instance(&np.getattr("generic")?)?;
        if !is_scalar && !obj.is_instance(&np.getattr("ndarray")?)? {
            return Err(BindingError::Scalar {
                type_name: type_name(obj),
            }
            .into());
        }
        // numpy.array keeps a scalar 0-d (ascontiguousarray makes it 1-d).
        let src = if is_scalar {
            np.call_method1("array", (obj,))?
        } else {
            np.call_method1("ascontiguousarray", (obj,))?
        };
        let out = np.call_method1("empty_like", (&src,))?;
        let opv = op.map(|o| o.clone().unbind());
        let opb = opv.as_ref().map(|o| o.bind(py));
        match root {
            None => self.allreduce_buf(py, &src, &out, opb)?,
            Some(rt) => self.reduce_buf(py, &src, Some(&out), opb, i64::from(rt))?,
        }
        if !at_root {
            return Ok(None);
        }
        Ok(Some(if is_scalar {
            out.get_item(())?.unbind()
        } else {
            out.unbind()
        }))
    }
}

impl Comm {
    /// `send` or `ssend` of an object.
    fn send_obj_mode(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
        mode: SendMode,
    ) -> PyResult<()> {
        let data = pickle(obj)?;
        let bytes = data.as_bytes();
        let (dest, tag) = (rank_arg("dest", dest)?, send_tag(tag)?);
        self.call(py, |r| {
            let dest = r.job_rank_of("dest", dest)?;
            r.send_object(dest, tag, bytes, mode)
        })
    }

    /// `isend` or `issend` of an object: one message with feature bit 3;
    /// without it an object whose pickle does not fit one frame is sent
    /// before this returns.
    fn isend_obj_mode(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
        mode: SendMode,
    ) -> PyResult<Request> {
        let data = pickle(obj)?;
        let bytes = data.as_bytes();
        let (dest, tag) = (rank_arg("dest", dest)?, send_tag(tag)?);
        let bit3 = self.call(py, |r| Ok(r.wire().is_some()))?;
        // With bit 3 the pickle alone is the message; without it v1's
        // `send_large` framing, one frame when it fits.
        let framed = if bit3 {
            bytes.to_vec()
        } else {
            prefixed(bytes)
        };
        if !bit3 && framed.len() > MAX_PAYLOAD as usize {
            self.call(py, |r| {
                let dest = r.job_rank_of("dest", dest)?;
                r.send_object(dest, tag, bytes, mode)
            })?;
            return Ok(Request::completed(self.slot.clone()));
        }
        let framed = &framed;
        self.start_request(py, Kind::Send, Peer::Dest(dest), |ep, to, w| {
            start_send(ep, w, to.unwrap_or(dest), tag, framed, mode)
        })
    }
}

#[pymethods]
impl Comm {
    /// Sends a picklable object to `dest` (any size).
    #[pyo3(signature = (obj, dest, tag = 0))]
    fn send(&self, py: Python<'_>, obj: &Bound<'_, PyAny>, dest: i64, tag: i64) -> PyResult<()> {
        self.send_obj_mode(py, obj, dest, tag, SendMode::Standard)
    }

    /// As `send`, returning once `dest` matched the message (MPI's
    /// `MPI_Ssend`, protocol §16.5; needs HELLO feature bit 3).
    #[pyo3(signature = (obj, dest, tag = 0))]
    fn ssend(&self, py: Python<'_>, obj: &Bound<'_, PyAny>, dest: i64, tag: i64) -> PyResult<()> {
        self.send_obj_mode(py, obj, dest, tag, SendMode::Synchronous)
    }

    /// As `isend`; `wait()` returns once `dest` matched the message (MPI's
    /// `MPI_Issend`; needs HELLO feature bit 3).
    #[pyo3(signature = (obj, dest, tag = 0))]
    fn issend(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<Request> {
        self.isend_obj_mode(py, obj, dest, tag, SendMode::Synchronous)
    }

    /// Receives an object from `source` with `tag` (`ANY_SOURCE`,
    /// `ANY_TAG`, the defaults: any; `ANY_SOURCE` on `COMM_WORLD` only);
    /// fills `status` (its count is the pickle's length).
    #[pyo3(signature = (buf = None, source = ANY_SOURCE, tag = ANY_TAG, status = None))]
    fn recv(
        &self,
        py: Python<'_>,
        buf: Option<&Bound<'_, PyAny>>,
        source: i64,
        tag: i64,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<Py<PyAny>> {
        let _ = buf;
        let (source, tag) = (source_arg(source)?, recv_tag(tag)?);
        let (st, bytes) = self.call(py, |r| {
            let (st, first) = recv_frame(r, source, tag)?;
            let whole = assemble(r.ep(), st, first)?;
            let st = WireStatus {
                len: whole.len(),
                ..st
            };
            Ok((r.local_status(st), whole))
        })?;
        crate::p2p::fill(status, &st);
        unpickle(py, &bytes)
    }

    /// Starts sending a picklable object; `wait()` completes it. An object
    /// whose pickle does not fit one frame is sent before this returns.
    #[pyo3(signature = (obj, dest, tag = 0))]
    fn isend(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<Request> {
        self.isend_obj_mode(py, obj, dest, tag, SendMode::Standard)
    }

    /// Posts a receive of an object; `wait()` returns it.
    #[pyo3(signature = (buf = None, source = ANY_SOURCE, tag = ANY_TAG))]
    fn irecv(
        &self,
        py: Python<'_>,
        buf: Option<&Bound<'_, PyAny>>,
        source: i64,
        tag: i64,
    ) -> PyResult<Request> {
        let _ = buf;
        let (source, tag) = (source_arg(source)?, recv_tag(tag)?);
        self.start_request(py, Kind::RecvObj, Peer::Source(source), |ep, from, w| {
            start_recv(ep, w, from, tag)
        })
    }

    /// Returns once every rank has entered the barrier.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, |r| r.comm().barrier().map_err(Fail::from))
    }

    /// The root's object on every rank (the root gets its own back).
    #[pyo3(signature = (obj = None, root = 0))]
    fn bcast(
        &self,
        py: Python<'_>,
        obj: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<Py<PyAny>> {
        let root = rank_arg("root", root)?;
        let at_root = root == self.rank_u32();
        let none = py.None();
        let obj = obj.cloned().unwrap_or_else(|| none.bind(py).clone());
        let mut data: Vec<u8> = if at_root {
            pickle(&obj)?.as_bytes().to_vec()
        } else {
            Vec::new()
        };
        let data = self.call(py, move |r| {
            r.comm().bcast_counted(root, &mut data)?;
            Ok(data)
        })?;
        if at_root {
            Ok(obj.unbind())
        } else {
            unpickle(py, &data)
        }
    }

    /// Every rank's object, in rank order, as a list at the root; `None`
    /// elsewhere.
    #[pyo3(signature = (sendobj, root = 0))]
    fn gather(&self, py: Python<'_>, sendobj: &Bound<'_, PyAny>, root: i64) -> PyResult<Py<PyAny>> {
        let root = rank_arg("root", root)?;
        let data = pickle(sendobj)?;
        let bytes = data.as_bytes();
        let all = self.call(py, |r| Ok(gather_bytes(&mut r.comm(), root, bytes)?))?;
        match all {
            None => Ok(py.None()),
            Some(all) => objects_list(py, &all),
        }
    }

    /// Item i of the root's `sendobj` (a sequence of `size` objects) on
    /// rank i. A root `sendobj` that is not `size` items ends the job
    /// (ABORT reason 4, as an invalid scatter).
    #[pyo3(signature = (sendobj = None, root = 0))]
    fn scatter(
        &self,
        py: Python<'_>,
        sendobj: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<Py<PyAny>> {
        let root = rank_arg("root", root)?;
        let size = self.size_u32();
        let items: Option<Result<Vec<Vec<u8>>, BindingError>> = if root == self.rank_u32() {
            let list: Vec<Bound<'_, PyAny>> = match sendobj {
                Some(o) => o.try_iter()?.collect::<PyResult<_>>()?,
                None => Vec::new(),
            };
            if list.len() != size as usize {
                Some(Err(BindingError::ScatterItems {
                    got: list.len(),
                    size,
                }))
            } else {
                let pickles: PyResult<Vec<Vec<u8>>> = list
                    .iter()
                    .map(|o| Ok(pickle(o)?.as_bytes().to_vec()))
                    .collect();
                Some(Ok(pickles?))
            }
        } else {
            None
        };
        let mine = self.call(py, |r| {
            let items = match items {
                Some(Err(e)) => return Err(r.end_job(AbortReason::InvalidScatter, e)),
                Some(Ok(v)) => Some(v),
                None => None,
            };
            Ok(scatter_bytes(&mut r.comm(), root, items.as_deref())?)
        })?;
        unpickle(py, &mine)
    }

    /// Every rank's object, in rank order, as a list on every rank.
    fn allgather(&self, py: Python<'_>, sendobj: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let data = pickle(sendobj)?;
        let bytes = data.as_bytes();
        let all = self.call(py, |r| Ok(allgather_bytes(&mut r.comm(), bytes)?))?;
        objects_list(py, &all)
    }

    /// The reduction of every rank's `sendobj` with `op` (default SUM) on
    /// every rank: an int (int64), float, bool, numpy scalar or numpy
    /// array of the seven element types; the same kind on every rank.
    #[pyo3(signature = (sendobj, op = None))]
    fn allreduce(
        &self,
        py: Python<'_>,
        sendobj: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        Ok(self
            .reduce_object(py, sendobj, op, None)?
            .unwrap_or_else(|| py.None()))
    }

    /// As `allreduce`, the result at the root only (`None` elsewhere).
    #[pyo3(signature = (sendobj, op = None, root = 0))]
    fn reduce(
        &self,
        py: Python<'_>,
        sendobj: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<Py<PyAny>> {
        let root = rank_arg("root", root)?;
        Ok(self
            .reduce_object(py, sendobj, op, Some(root))?
            .unwrap_or_else(|| py.None()))
    }
}

fn objects_list(py: Python<'_>, all: &[Vec<u8>]) -> PyResult<Py<PyAny>> {
    let items: Vec<Py<PyAny>> = all
        .iter()
        .map(|b| unpickle(py, b))
        .collect::<PyResult<_>>()?;
    Ok(PyList::new(py, items)?.into_any().unbind())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_collective::fake;

    fn item(rank: u32, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u32 * 7 + rank) as u8).collect()
    }

    #[test]
    fn byte_collectives_of_uneven_lengths() {
        let lens = [0usize, 5, 1, 300];
        let got = fake::run(4, |c| {
            let me = c.rank();
            let mine = item(me, lens[me as usize]);
            let g = gather_bytes(c, 1, &mine).unwrap();
            let a = allgather_bytes(c, &mine).unwrap();
            let items: Vec<Vec<u8>> = (0..4).map(|r| item(r, lens[3 - r as usize])).collect();
            let s = scatter_bytes(c, 2, (me == 2).then_some(&items[..])).unwrap();
            (g, a, s)
        });
        let all: Vec<Vec<u8>> = (0..4).map(|r| item(r, lens[r as usize])).collect();
        for (r, (g, a, s)) in got.into_iter().enumerate() {
            assert_eq!(g, (r == 1).then(|| all.clone()), "gather at rank {r}");
            assert_eq!(a, all, "allgather at rank {r}");
            assert_eq!(s, item(r as u32, lens[3 - r]), "scatter at rank {r}");
        }
    }

    #[test]
    fn byte_collectives_longer_than_one_call() {
        // 2 ranks, one string of 16777200 + 9 bytes: two v1 calls per part.
        let big = MAX_COLLECTIVE_DATA + 9;
        let all = vec![item(0, big), item(1, 3)];
        let got = fake::run(2, |c| {
            let mine = &all[c.rank() as usize];
            let g = gather_bytes(c, 0, mine).unwrap();
            let a = allgather_bytes(c, mine).unwrap();
            let s = scatter_bytes(c, 1, (c.rank() == 1).then_some(&all[..])).unwrap();
            (g, a, s, c.sequence())
        });
        assert_eq!(got[0].0.as_ref(), Some(&all));
        assert_eq!(got[1].0, None);
        for (r, g) in got.iter().enumerate() {
            assert!(g.1 == all && g.2 == all[r], "rank {r}");
        }
        assert_eq!(got[0].3, got[1].3);
    }

    #[test]
    fn empty_strings_everywhere() {
        let got = fake::run(3, |c| {
            let g = gather_bytes(c, 0, &[]).unwrap();
            let a = allgather_bytes(c, &[]).unwrap();
            let items = vec![Vec::new(); 3];
            let s = scatter_bytes(c, 0, (c.rank() == 0).then_some(&items[..])).unwrap();
            (g, a, s)
        });
        assert_eq!(got[0].0, Some(vec![Vec::new(); 3]));
        assert!(got
            .iter()
            .all(|(_, a, s)| a == &vec![Vec::<u8>::new(); 3] && s.is_empty()));
    }
}
