//! Point-to-point on buffers (mpi4py's uppercase calls): `Send`, `Recv`,
//! `Isend`, `Irecv`, `Sendrecv`, `Probe`, `Iprobe`, and what they return:
//! `sperli.Request` (`Wait`, `Test`, `Waitall`, `Waitany`, `Testall`;
//! lowercase `wait`/`test` for the object forms of objects.rs; also the
//! requests of the non-blocking collectives, icoll.rs) and `sperli.Status`.
//!
//! A message is a buffer's bytes as they are in memory (little-endian).
//! Messages from one rank with one tag arrive in order; a receive takes
//! the first that matches (`ANY_TAG` matches every tag; `ANY_SOURCE` takes
//! the first matching message to arrive from any rank, as MPI's). On a
//! communicator made by `Split`/`Dup` ranks are its ranks (translated to
//! job ranks: [`Rank::job_rank_of`]). With HELLO feature bit 3 (protocol
//! §16, the default) a message names its communicator and may have any
//! length, `ANY_SOURCE` works on every communicator and `Ssend`/`Issend`
//! complete once the receiver matched; without it one message is one DATA
//! frame of at most 16777216 bytes (protocol §7.2) and `ANY_SOURCE` is
//! offered on `COMM_WORLD` only ([`crate::messages`]).

use std::sync::Arc;

use pyo3::prelude::*;
use sperli_collective::Endpoint;
use sperli_transport::Status as WireStatus;
use sperli_wire::Error;

use crate::buffer::Buf;
use crate::comm::{rank_arg, run_on, Comm, UNDEFINED};
use crate::errors::{BindingError, Fail};
use crate::messages::{start_recv, start_send, Wire};
use crate::rank::{Open, Rank};
use crate::raw::Slot;
use sperli_transport::SendMode;

/// `sperli.ANY_SOURCE`: a receive (or probe) that matches every source.
pub(crate) const ANY_SOURCE: i64 = -1;
/// `sperli.ANY_TAG`: a receive that matches every tag.
pub(crate) const ANY_TAG: i64 = -1;

/// A send tag: `0..=2147483647` (the Rust API refuses the reserved half
/// above with H1618).
pub(crate) fn send_tag(tag: i64) -> Result<u32, BindingError> {
    u32::try_from(tag).map_err(|_| BindingError::Tag { got: tag })
}

/// A receive's source: `ANY_SOURCE` is `None`.
pub(crate) fn source_arg(source: i64) -> Result<Option<u32>, BindingError> {
    if source == ANY_SOURCE {
        Ok(None)
    } else {
        rank_arg("source", source).map(Some)
    }
}

/// Receives the first message (without feature bit 3: one frame)
/// matching `source` and `tag` (`None`: any) on the running call's
/// communicator; its status names the sender's job rank
/// ([`Rank::local_status`] turns it into the communicator's).
pub(crate) fn recv_frame(
    r: &mut Rank,
    source: Option<u32>,
    tag: Option<u32>,
) -> Result<(WireStatus, Vec<u8>), Fail> {
    let src = r.source_to_job(source)?;
    r.recv_message(src, tag)
}

/// Who a request's peer is, in the communicator's ranks.
pub(crate) enum Peer {
    /// A send's destination.
    Dest(u32),
    /// A receive's source (`None`: any).
    Source(Option<u32>),
}

/// A receive tag: `ANY_TAG` is `None`.
pub(crate) fn recv_tag(tag: i64) -> Result<Option<u32>, BindingError> {
    if tag == ANY_TAG {
        Ok(None)
    } else {
        send_tag(tag).map(Some)
    }
}

/// What a completed receive reports (mpi4py's `MPI.Status`).
#[pyclass(module = "sperli")]
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// The sender's rank.
    #[pyo3(get)]
    pub(crate) source: i64,
    /// The message's tag.
    #[pyo3(get)]
    pub(crate) tag: i64,
    /// The message length in bytes.
    #[pyo3(get)]
    pub(crate) count: usize,
}

impl Status {
    pub(crate) fn set(&mut self, st: &WireStatus) {
        self.source = i64::from(st.source);
        self.tag = i64::from(st.tag);
        self.count = st.len;
    }
}

/// Fills `status`, if given, from `st`.
pub(crate) fn fill(status: Option<&Bound<'_, Status>>, st: &WireStatus) {
    if let Some(s) = status {
        s.borrow_mut().set(st);
    }
}

#[pymethods]
impl Status {
    #[new]
    fn new() -> Self {
        Self {
            source: ANY_SOURCE,
            tag: ANY_TAG,
            count: 0,
        }
    }

    /// The sender's rank.
    #[pyo3(name = "Get_source")]
    fn get_source(&self) -> i64 {
        self.source
    }

    /// The message's tag.
    #[pyo3(name = "Get_tag")]
    fn get_tag(&self) -> i64 {
        self.tag
    }

    /// The message length in elements of `datatype` (a numpy dtype or
    /// anything `numpy.dtype()` takes); in bytes without one.
    #[pyo3(name = "Get_count", signature = (datatype = None))]
    fn get_count(&self, py: Python<'_>, datatype: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        let Some(d) = datatype else {
            return Ok(self.count);
        };
        let size: usize = py
            .import("numpy")?
            .call_method1("dtype", (d,))?
            .getattr("itemsize")?
            .extract()?;
        Ok(self.count / size.max(1))
    }

    fn __repr__(&self) -> String {
        format!(
            "<sperli.Status source={} tag={} count={}>",
            self.source, self.tag, self.count
        )
    }
}

/// Copies a received message into `buf`: it must fit and be a whole
/// number of elements (else H1618; the message is dropped, as MPI drops a
/// truncated one).
pub(crate) fn deliver(buf: &mut Buf, msg: &[u8]) -> Result<(), BindingError> {
    let capacity = buf.region.len_bytes();
    if msg.len() > capacity {
        return Err(BindingError::Truncated {
            len: msg.len(),
            capacity,
        });
    }
    if msg.len() % buf.dtype.width() != 0 {
        return Err(BindingError::NotWhole {
            len: msg.len(),
            dtype: buf.dtype,
        });
    }
    let out = buf
        .region
        .bytes_mut()
        .expect("a receive buffer is writable (Buf::recv)");
    out[..msg.len()].copy_from_slice(msg);
    Ok(())
}

/// What a request is for.
pub(crate) enum Kind {
    /// Nothing to deliver: `Isend`/`isend`, or a non-blocking collective
    /// without a receive buffer here.
    Send,
    /// `Irecv` into this buffer.
    RecvBuf(Buf),
    /// `irecv` of an object (objects.rs assembles and unpickles it).
    RecvObj,
}

/// A started `Isend`/`Irecv` (or `isend`/`irecv`): `Wait()`/`Test()`
/// complete it. A request dropped before it completed cancels its
/// receive (a send still goes out).
#[pyclass(module = "sperli")]
pub struct Request {
    slot: Arc<Slot>,
    /// The communicator of the slot it belongs to (`Comm::sub`).
    sub: Option<u32>,
    /// The open request's id; `None` once it completed.
    id: Option<u64>,
    kind: Kind,
    status: Option<WireStatus>,
    /// The object an `irecv` received.
    object: Option<Py<PyAny>>,
}

impl Request {
    pub(crate) fn new(slot: Arc<Slot>, sub: Option<u32>, id: u64, kind: Kind) -> Self {
        Self {
            slot,
            sub,
            id: Some(id),
            kind,
            status: None,
            object: None,
        }
    }

    /// A request that is already complete (an object `isend` too large
    /// for one frame is sent at once).
    pub(crate) fn completed(slot: Arc<Slot>) -> Self {
        Self {
            slot,
            sub: None,
            id: None,
            kind: Kind::Send,
            status: None,
            object: None,
        }
    }

    /// Completes the request (waiting when `block`); `true` once done.
    fn progress(&mut self, py: Python<'_>, block: bool) -> PyResult<bool> {
        let Some(id) = self.id else {
            return Ok(true);
        };
        let kind = &mut self.kind;
        let done = run_on(py, &self.slot, self.sub, move |r| {
            let mut got = None;
            let ready = match r.open.get_mut(&id) {
                None => return Err(BindingError::RequestGone.into()),
                Some(Open::Coll(p)) => {
                    let out = match kind {
                        Kind::RecvBuf(b) => Some(b),
                        _ => None,
                    };
                    let res = p.poll(block, out);
                    if !matches!(res, Ok(false)) {
                        r.open.remove(&id);
                    }
                    return Ok(res?.then(|| (None, Vec::new())));
                }
                Some(Open::Send(h)) => block || h.test()?,
                Some(Open::Taken(_)) => true,
                Some(Open::Recv(_)) if block => true,
                Some(Open::Recv(h)) => {
                    got = h.test()?;
                    got.is_some()
                }
            };
            if !ready {
                return Ok(None);
            }
            let received = match r.open.remove(&id) {
                None | Some(Open::Coll(_)) => return Err(BindingError::RequestGone.into()),
                Some(Open::Taken(m)) => Some(m),
                Some(Open::Send(h)) => {
                    h.wait()?;
                    None
                }
                Some(Open::Recv(h)) => match got {
                    Some(x) => Some(x),
                    None => Some(h.wait()?),
                },
            };
            let Some((st, m)) = received else {
                return Ok(Some((None, Vec::new())));
            };
            match kind {
                Kind::RecvBuf(buf) => {
                    let res = deliver(buf, &m);
                    r.ep().recycle(m);
                    res?;
                    Ok(Some((Some(r.local_status(st)), Vec::new())))
                }
                Kind::RecvObj => {
                    let whole = crate::messages::assemble(r.ep(), st, m)?;
                    let st = WireStatus {
                        len: whole.len(),
                        ..st
                    };
                    Ok(Some((Some(r.local_status(st)), whole)))
                }
                Kind::Send => Ok(Some((Some(r.local_status(st)), Vec::new()))),
            }
        })?;
        let Some((st, bytes)) = done else {
            return Ok(false);
        };
        self.id = None;
        self.status = st;
        if matches!(self.kind, Kind::RecvObj) {
            self.object = Some(crate::objects::unpickle(py, &bytes)?);
        }
        if let Kind::RecvBuf(_) = self.kind {
            // The buffer export is released once the data is in.
            self.kind = Kind::Send;
        }
        Ok(true)
    }

    /// Whether the request can complete without waiting (nothing is
    /// delivered: [`Open::ready`]).
    fn ready(&self, py: Python<'_>) -> PyResult<bool> {
        let Some(id) = self.id else {
            return Ok(true);
        };
        run_on(py, &self.slot, self.sub, move |r| {
            match r.open.get_mut(&id) {
                None => Err(BindingError::RequestGone.into()),
                Some(o) => Ok(o.ready()?),
            }
        })
    }

    /// `Waitany`'s wait in the transport: when every open request of
    /// `requests` is a posted receive of one slot and communicator, waits
    /// for the first message (the request keeps it, [`Open::Taken`]) and
    /// returns its index; `None` when they are not all such receives (or
    /// none is open).
    fn wait_any_recv(py: Python<'_>, requests: &[Bound<'_, Request>]) -> PyResult<Option<usize>> {
        let open: Vec<(usize, u64)> = requests
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.borrow().id.map(|id| (i, id)))
            .collect();
        let Some(&(first, _)) = open.first() else {
            return Ok(None);
        };
        let (slot, sub) = {
            let f = requests[first].borrow();
            (f.slot.clone(), f.sub)
        };
        let same = open.iter().all(|&(i, _)| {
            let r = requests[i].borrow();
            Arc::ptr_eq(&r.slot, &slot) && r.sub == sub
        });
        if !same {
            return Ok(None);
        }
        let ids: Vec<u64> = open.iter().map(|&(_, id)| id).collect();
        let got = run_on(py, &slot, sub, move |r| {
            let ep = r.handles_ep()?.clone();
            let mut handles = Vec::with_capacity(ids.len());
            for (id, o) in r.open.iter_mut() {
                if let Some(k) = ids.iter().position(|x| x == id) {
                    match o {
                        Open::Recv(h) => handles.push((k, h)),
                        // Another kind, or a message already taken: the
                        // polling path completes it.
                        _ => return Ok(None),
                    }
                }
            }
            if handles.len() != ids.len() {
                return Err(BindingError::RequestGone.into());
            }
            handles.sort_by_key(|(k, _)| *k);
            let mut hs: Vec<&mut sperli_transport::OwnedRecvHandle> =
                handles.into_iter().map(|(_, h)| h).collect();
            let Some((j, m)) = ep.wait_any(&mut hs)? else {
                return Ok(None);
            };
            drop(hs);
            r.open.insert(ids[j], Open::Taken(m));
            Ok(Some(j))
        })?;
        Ok(got.map(|j| open[j].0))
    }

    fn fill(&self, status: Option<&Bound<'_, Status>>) {
        if let Some(st) = &self.status {
            fill(status, st);
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            // A receive nobody waits for is cancelled; a send goes on.
            self.slot.cancel(id);
        }
    }
}

#[pymethods]
impl Request {
    /// MPI's `MPI_Cancel`: a receive that has not matched a message is
    /// cancelled (the request is complete, with nothing received): `True`.
    /// A send, a collective, or a receive that matched cannot be: `False`,
    /// and the request completes as usual.
    /// Whether the request can complete now without waiting, leaving it
    /// open (MPI's `MPI_Request_get_status`); makes progress.
    #[pyo3(name = "Get_status_ready")]
    fn get_status_ready(&self, py: Python<'_>) -> PyResult<bool> {
        self.ready(py)
    }

    #[pyo3(name = "Cancel")]
    fn cancel(&mut self, py: Python<'_>) -> PyResult<bool> {
        let Some(id) = self.id else {
            return Ok(false);
        };
        let gone = run_on(py, &self.slot, self.sub, move |r| {
            let gone = match r.open.get_mut(&id) {
                Some(Open::Recv(h)) => h.cancel(),
                _ => false,
            };
            if gone {
                r.open.remove(&id);
            }
            Ok(gone)
        })?;
        if gone {
            self.id = None;
            self.kind = Kind::Send;
        }
        Ok(gone)
    }

    /// Waits until the request is complete; fills `status` for a receive.
    #[pyo3(name = "Wait", signature = (status = None))]
    fn wait_buf(&mut self, py: Python<'_>, status: Option<&Bound<'_, Status>>) -> PyResult<()> {
        self.progress(py, true)?;
        self.fill(status);
        Ok(())
    }

    /// Whether the request is complete (completing it if it can without
    /// waiting); fills `status` for a completed receive.
    #[pyo3(name = "Test", signature = (status = None))]
    fn test_buf(&mut self, py: Python<'_>, status: Option<&Bound<'_, Status>>) -> PyResult<bool> {
        let done = self.progress(py, false)?;
        if done {
            self.fill(status);
        }
        Ok(done)
    }

    /// Waits; returns the received object (`irecv`), else `None`.
    #[pyo3(signature = (status = None))]
    fn wait(&mut self, py: Python<'_>, status: Option<&Bound<'_, Status>>) -> PyResult<Py<PyAny>> {
        self.progress(py, true)?;
        self.fill(status);
        Ok(self
            .object
            .as_ref()
            .map_or_else(|| py.None(), |o| o.clone_ref(py)))
    }

    /// `(done, object)`: whether the request is complete, and the received
    /// object of a completed `irecv` (else `None`).
    #[pyo3(signature = (status = None))]
    fn test(
        &mut self,
        py: Python<'_>,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<(bool, Py<PyAny>)> {
        let done = self.progress(py, false)?;
        if done {
            self.fill(status);
        }
        let obj = match (&self.object, done) {
            (Some(o), true) => o.clone_ref(py),
            _ => py.None(),
        };
        Ok((done, obj))
    }

    /// Waits for every request, in order; fills `statuses[i]` if given.
    /// Returns the received objects (`None` for buffer requests).
    #[staticmethod]
    #[pyo3(name = "Waitall", signature = (requests, statuses = None))]
    fn waitall(
        py: Python<'_>,
        requests: Vec<Bound<'_, Request>>,
        statuses: Option<Vec<Bound<'_, Status>>>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let mut out = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            let st = statuses.as_ref().and_then(|s| s.get(i));
            out.push(r.borrow_mut().wait(py, st)?);
        }
        Ok(out)
    }

    /// Waits until one of `requests` is complete and returns its index
    /// (the lowest of those complete at that moment), filling `status`
    /// for a receive; `sperli.UNDEFINED` when none is still open. When the
    /// open ones are all receives of one communicator it waits in the
    /// transport's `wait_any`; requests of other kinds (sends,
    /// non-blocking collectives) or of several communicators it tests in
    /// turn (GIL released) with a short back-off until one completes.
    #[staticmethod]
    #[pyo3(name = "Waitany", signature = (requests, status = None))]
    fn waitany(
        py: Python<'_>,
        requests: Vec<Bound<'_, Request>>,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<i64> {
        if let Some(i) = Self::wait_any_recv(py, &requests)? {
            let mut r = requests[i].borrow_mut();
            r.progress(py, true)?;
            r.fill(status);
            return Ok(i as i64);
        }
        let mut pause = std::time::Duration::from_micros(20);
        loop {
            let mut open = false;
            for (i, r) in requests.iter().enumerate() {
                let mut r = r.borrow_mut();
                if r.id.is_none() {
                    continue;
                }
                open = true;
                if r.progress(py, false)? {
                    r.fill(status);
                    return Ok(i as i64);
                }
            }
            if !open {
                return Ok(UNDEFINED);
            }
            py.check_signals()?;
            py.detach(|| std::thread::sleep(pause));
            pause = (pause * 2).min(std::time::Duration::from_millis(1));
        }
    }

    /// Whether every request can complete; if so completes them all
    /// (filling `statuses[i]` if given) and returns `True`, else returns
    /// `False` and completes none (MPI's `Testall`; a message that came
    /// stays in its request for a later wait).
    #[staticmethod]
    #[pyo3(name = "Testall", signature = (requests, statuses = None))]
    fn testall(
        py: Python<'_>,
        requests: Vec<Bound<'_, Request>>,
        statuses: Option<Vec<Bound<'_, Status>>>,
    ) -> PyResult<bool> {
        for r in &requests {
            if !r.borrow().ready(py)? {
                return Ok(false);
            }
        }
        for (i, r) in requests.iter().enumerate() {
            let mut r = r.borrow_mut();
            r.progress(py, true)?;
            r.fill(statuses.as_ref().and_then(|s| s.get(i)));
        }
        Ok(true)
    }

    /// Whether the request has completed.
    #[getter]
    fn done(&self) -> bool {
        self.id.is_none()
    }
}

impl Comm {
    /// `Send` or `Ssend` of `buf`.
    fn send_buf_mode(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
        mode: SendMode,
    ) -> PyResult<()> {
        let b = Buf::send(buf, "buf")?;
        let (dest, tag) = (rank_arg("dest", dest)?, send_tag(tag)?);
        let bytes = b.region.bytes();
        self.call(py, |r| {
            let dest = r.job_rank_of("dest", dest)?;
            r.send_buffer(dest, tag, bytes, mode)
        })
    }

    /// `Isend` or `Issend` of `buf`.
    fn isend_buf_mode(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
        mode: SendMode,
    ) -> PyResult<Request> {
        let b = Buf::send(buf, "buf")?;
        let (dest, tag) = (rank_arg("dest", dest)?, send_tag(tag)?);
        let bytes = b.region.bytes();
        self.start_request(py, Kind::Send, Peer::Dest(dest), |ep, to, w| {
            start_send(ep, w, to.unwrap_or(dest), tag, bytes, mode)
        })
    }

    /// Starts a request: `start` makes its Rust handle on this rank's
    /// endpoint, the returned `Request` completes it (`kind` says what to
    /// do with the message).
    pub(crate) fn start_request(
        &self,
        py: Python<'_>,
        kind: Kind,
        peer: Peer,
        start: impl FnOnce(&Arc<Endpoint>, Option<u32>, Wire) -> Result<Open, Error> + Send,
    ) -> PyResult<Request> {
        let id = self.call(py, |r| {
            let job = match peer {
                Peer::Dest(d) => Some(r.job_rank_of("dest", d)?),
                Peer::Source(s) => r.source_to_job(s)?,
            };
            let wire = r.wire();
            let open = start(r.handles_ep()?, job, wire)?;
            Ok(r.add_open(open))
        })?;
        Ok(self.request(id, kind))
    }

    /// `Probe` (`wait`) or `Iprobe`: the status of a matching message, in
    /// this communicator's ranks.
    fn probe_on(
        &self,
        py: Python<'_>,
        source: i64,
        tag: i64,
        wait: bool,
    ) -> PyResult<Option<WireStatus>> {
        let (source, tag) = (source_arg(source)?, recv_tag(tag)?);
        self.call(py, |r| {
            let src = r.source_to_job(source)?;
            let st = r.probe_message(src, tag, wait)?;
            Ok(st.map(|st| r.local_status(st)))
        })
    }

    /// The Python request of open request `id` of this communicator.
    pub(crate) fn request(&self, id: u64, kind: Kind) -> Request {
        Request::new(self.slot.clone(), self.sub, id, kind)
    }
}

#[pymethods]
impl Comm {
    /// Sends `buf` (any buffer of the seven dtypes, C-contiguous; without
    /// HELLO feature bit 3 at most 16777216 bytes) to rank `dest` with
    /// `tag`. Returns once the message is queued (up to 64 KiB) or written
    /// into TLS.
    #[pyo3(name = "Send", signature = (buf, dest, tag = 0))]
    fn send_buf(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<()> {
        self.send_buf_mode(py, buf, dest, tag, SendMode::Standard)
    }

    /// As `Send`, returning once rank `dest` matched the message (MPI's
    /// `MPI_Ssend`, protocol §16.5; needs HELLO feature bit 3).
    #[pyo3(name = "Ssend", signature = (buf, dest, tag = 0))]
    fn ssend_buf(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<()> {
        self.send_buf_mode(py, buf, dest, tag, SendMode::Synchronous)
    }

    /// As `Isend`; the request completes once rank `dest` matched the
    /// message (MPI's `MPI_Issend`; needs HELLO feature bit 3).
    #[pyo3(name = "Issend", signature = (buf, dest, tag = 0))]
    fn issend_buf(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<Request> {
        self.isend_buf_mode(py, buf, dest, tag, SendMode::Synchronous)
    }

    /// Receives the next message from rank `source` with `tag` into `buf`,
    /// which must be writable and at least as long; fills `status`
    /// (source, tag, count in bytes). `ANY_SOURCE` (the default) takes the
    /// first matching message to arrive from any rank, `ANY_TAG` (the
    /// default) any tag; `ANY_SOURCE` only on `COMM_WORLD` (a message
    /// carries no communicator).
    #[pyo3(name = "Recv", signature = (buf, source = ANY_SOURCE, tag = ANY_TAG, status = None))]
    fn recv_buf(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        source: i64,
        tag: i64,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<()> {
        let mut b = Buf::recv(buf, "buf")?;
        let (source, tag) = (source_arg(source)?, recv_tag(tag)?);
        let st = self.call(py, |r| {
            let (st, m) = recv_frame(r, source, tag)?;
            let res = deliver(&mut b, &m);
            r.ep().recycle(m);
            res?;
            Ok(r.local_status(st))
        })?;
        fill(status, &st);
        Ok(())
    }

    /// Starts sending `buf` to `dest` (the data is copied or written
    /// before this returns: the buffer may be reused at once). `Wait()`
    /// returns once it is written into TLS.
    #[pyo3(name = "Isend", signature = (buf, dest, tag = 0))]
    fn isend_buf(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<Request> {
        self.isend_buf_mode(py, buf, dest, tag, SendMode::Standard)
    }

    /// Posts a receive from `source` with `tag` (`ANY_SOURCE`, `ANY_TAG`:
    /// any, as `Recv`) into `buf` (kept by the request until it completes;
    /// do not touch it before).
    #[pyo3(name = "Irecv", signature = (buf, source = ANY_SOURCE, tag = ANY_TAG))]
    fn irecv_buf(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        source: i64,
        tag: i64,
    ) -> PyResult<Request> {
        let b = Buf::recv(buf, "buf")?;
        let (source, tag) = (source_arg(source)?, recv_tag(tag)?);
        self.start_request(py, Kind::RecvBuf(b), Peer::Source(source), |ep, from, w| {
            start_recv(ep, w, from, tag)
        })
    }

    /// Sends `sendbuf` to `dest` and receives into `recvbuf` from
    /// `source`, the receive posted first (an exchange of two ranks does
    /// not deadlock).
    #[pyo3(
        name = "Sendrecv",
        signature = (sendbuf, dest, sendtag = 0, recvbuf = None, source = ANY_SOURCE, recvtag = ANY_TAG, status = None)
    )]
    #[allow(clippy::too_many_arguments)]
    fn sendrecv_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        dest: i64,
        sendtag: i64,
        recvbuf: Option<&Bound<'_, PyAny>>,
        source: i64,
        recvtag: i64,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<()> {
        let s = Buf::send(sendbuf, "sendbuf")?;
        let Some(recvbuf) = recvbuf else {
            return Err(BindingError::NoBuffer {
                arg: "recvbuf",
                type_name: "NoneType".into(),
            }
            .into());
        };
        let mut d = Buf::recv(recvbuf, "recvbuf")?;
        let (dest, sendtag) = (rank_arg("dest", dest)?, send_tag(sendtag)?);
        let (source, recvtag) = (source_arg(source)?, recv_tag(recvtag)?);
        let st = self.call(py, |r| {
            let (dest, source) = (r.job_rank_of("dest", dest)?, r.source_to_job(source)?);
            let w = r.wire();
            let ep = r.ep();
            let h = match w {
                Some(c) => ep.irecv_on(c, source, recvtag)?,
                None => ep.irecv_match(source, recvtag)?,
            };
            // The send slice is dead before the receive writes (the two
            // buffers may be one).
            match w {
                Some(c) => ep.send_on(c, dest, sendtag, s.region.bytes(), SendMode::Standard)?,
                None => ep.send(dest, sendtag, s.region.bytes())?,
            }
            let (st, m) = h.wait()?;
            let res = deliver(&mut d, &m);
            r.ep().recycle(m);
            res?;
            Ok(r.local_status(st))
        })?;
        fill(status, &st);
        Ok(())
    }

    /// Waits until a message matching `source` and `tag` (`ANY_SOURCE`,
    /// `ANY_TAG`: any) has arrived and fills `status` with its source, tag
    /// and count (bytes of its first frame), leaving it to be received.
    /// Returns `True` (as mpi4py).
    #[pyo3(name = "Probe", signature = (source = ANY_SOURCE, tag = ANY_TAG, status = None))]
    fn probe_buf(
        &self,
        py: Python<'_>,
        source: i64,
        tag: i64,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<bool> {
        let st = self.probe_on(py, source, tag, true)?;
        if let Some(st) = &st {
            fill(status, st);
        }
        Ok(true)
    }

    /// As `Probe` without waiting: whether such a message has arrived
    /// (then `status` is filled).
    #[pyo3(name = "Iprobe", signature = (source = ANY_SOURCE, tag = ANY_TAG, status = None))]
    fn iprobe_buf(
        &self,
        py: Python<'_>,
        source: i64,
        tag: i64,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<bool> {
        let st = self.probe_on(py, source, tag, false)?;
        if let Some(st) = &st {
            fill(status, st);
        }
        Ok(st.is_some())
    }

    /// `Probe` for the object calls (mpi4py's lowercase `probe`): waits
    /// for a matching message and fills `status`; returns `True`.
    #[pyo3(name = "probe", signature = (source = ANY_SOURCE, tag = ANY_TAG, status = None))]
    fn probe_obj(
        &self,
        py: Python<'_>,
        source: i64,
        tag: i64,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<bool> {
        self.probe_buf(py, source, tag, status)
    }

    /// `Iprobe` for the object calls (mpi4py's lowercase `iprobe`).
    #[pyo3(name = "iprobe", signature = (source = ANY_SOURCE, tag = ANY_TAG, status = None))]
    fn iprobe_obj(
        &self,
        py: Python<'_>,
        source: i64,
        tag: i64,
        status: Option<&Bound<'_, Status>>,
    ) -> PyResult<bool> {
        self.iprobe_buf(py, source, tag, status)
    }
}
