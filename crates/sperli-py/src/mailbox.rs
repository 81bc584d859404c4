//! The group mailbox from Python (sperli-mailbox; docs/mailbox.md):
//! `sperli.Mailbox`, the client that submits tasks into a warm job, and
//! `sperli.MailboxServer`, the rank side with task handlers written in
//! Python.
//!
//! ```python
//! # the rank program, started with sperli run -n 4 --mailbox NAME -- python3 server.py
//! server = sperli.MailboxServer()
//!
//! @server.task("sum")
//! def total(task):                        # every rank, GROUP or PER_RANK
//!     x = int.from_bytes(task.payload, "little")
//!     return task.comm.allreduce(x).to_bytes(8, "little")
//!
//! server.serve()                          # until SHUTDOWN
//! ```
//!
//! A handler gets a `sperli.Task` (`payload`, `rank`, `size`, `sequence`,
//! `handler`, `target`, `comm`) and returns bytes (or `None`); an
//! exception becomes that rank's task error (its type name and message),
//! and the group goes on serving. `task.comm` is a communicator for the
//! task's collectives (GROUP and PER_RANK requests; `None` for a request
//! to one rank), valid until the handler returns.

use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use sperli_collective::Comm as RustComm;
use sperli_mailbox::layout::handler_id;
use sperli_mailbox::{
    JobSpec, Mailbox as RustMailbox, MailboxError, MailboxServer as RustServer, Opcode, Replies,
    Target, Task as RustTask, TaskError,
};

use crate::buffer::type_name;
use crate::comm::{or_world, rank_arg, Comm};
use crate::errors::{BindingError, Fail};
use crate::rank::advance;
use crate::raw::{Gone, Slot};

/// One rank's answer to a request.
#[pyclass(module = "sperli", frozen, get_all)]
pub struct Reply {
    /// The rank.
    rank: u32,
    /// Whether it succeeded.
    ok: bool,
    /// Its reply bytes (`None` when it failed).
    data: Option<Py<PyBytes>>,
    /// Its error's type name (`None` when it succeeded).
    error_type: Option<String>,
    /// Its error message (`None` when it succeeded).
    error: Option<String>,
}

#[pymethods]
impl Reply {
    fn __repr__(&self, py: Python<'_>) -> String {
        match &self.data {
            Some(d) => format!(
                "<sperli.Reply rank {} ok, {} bytes>",
                self.rank,
                d.bind(py).as_bytes().len()
            ),
            None => format!(
                "<sperli.Reply rank {} failed: {}: {}>",
                self.rank,
                self.error_type.as_deref().unwrap_or(""),
                self.error.as_deref().unwrap_or("")
            ),
        }
    }
}

/// Every rank's reply as a list of `sperli.Reply`, in rank order.
pub(crate) fn replies_list<'py>(py: Python<'py>, r: &Replies) -> PyResult<Bound<'py, PyList>> {
    let items: Vec<Reply> = r
        .replies
        .iter()
        .map(|rep| match &rep.outcome {
            Ok(b) => Reply {
                rank: rep.rank,
                ok: true,
                data: Some(PyBytes::new(py, b).unbind()),
                error_type: None,
                error: None,
            },
            Err(e) => Reply {
                rank: rep.rank,
                ok: false,
                data: None,
                error_type: Some(e.error_type.clone()),
                error: Some(e.message.clone()),
            },
        })
        .collect();
    PyList::new(py, items)
}

fn mailbox_err(py: Python<'_>, e: MailboxError) -> PyErr {
    Fail::from(e).into_pyerr(py)
}

/// The target of a request: `None` or `"group"` (every rank, one payload),
/// `"per_rank"` (rank i gets payload i), or a rank number (that rank).
fn target(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Target> {
    let Some(t) = obj else {
        return Ok(Target::Group);
    };
    if let Ok(s) = t.extract::<String>() {
        return match s.as_str() {
            "group" => Ok(Target::Group),
            "per_rank" => Ok(Target::PerRank),
            _ => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "target {s:?}: 'group', 'per_rank' or a rank number"
            ))),
        };
    }
    Ok(Target::Rank(rank_arg("target", t.extract::<i64>()?)?))
}

/// The payloads: one bytes-like object, or a list of them (PER_RANK).
fn payloads(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Vec<u8>>> {
    let Some(p) = obj else {
        return Ok(vec![Vec::new()]);
    };
    let one = |o: &Bound<'_, PyAny>| -> PyResult<Vec<u8>> {
        let buf = pyo3::buffer::PyUntypedBuffer::get(o).map_err(|_| BindingError::NoBuffer {
            arg: "payload",
            type_name: type_name(o),
        })?;
        let region =
            crate::raw::Region::new(buf).ok_or(BindingError::NotContiguous { arg: "payload" })?;
        Ok(region.bytes().to_vec())
    };
    if p.cast::<PyList>().is_ok() || p.cast::<pyo3::types::PyTuple>().is_ok() {
        p.try_iter()?.map(|o| one(&o?)).collect()
    } else {
        Ok(vec![one(p)?])
    }
}

/// A mailbox seen from the client (docs/mailbox.md §7): `create` or
/// `attach` one, or `start_job` to start a warm job and watch it; then
/// `submit` tasks, `ping`, `shutdown`. One client at a time holds a
/// mailbox. Every wait releases the GIL.
#[pyclass(module = "sperli", frozen)]
pub struct Mailbox {
    inner: Mutex<RustMailbox>,
    name: String,
    world_size: u32,
}

impl Mailbox {
    fn of(m: RustMailbox) -> Self {
        Self {
            name: m.name().to_string(),
            world_size: m.world_size(),
            inner: Mutex::new(m),
        }
    }

    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut RustMailbox) -> Result<R, MailboxError> + Send,
    ) -> PyResult<R> {
        let inner = &self.inner;
        py.detach(move || {
            f(&mut inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner))
        })
        .map_err(|e| mailbox_err(py, e))
    }
}

#[pymethods]
impl Mailbox {
    /// Creates mailbox `name` for a job of `world_size` ranks (start the
    /// job with `sperli run -n N --mailbox NAME`).
    #[staticmethod]
    fn create(py: Python<'_>, name: &str, world_size: u32) -> PyResult<Self> {
        py.detach(|| RustMailbox::create(name, world_size))
            .map(Self::of)
            .map_err(|e| mailbox_err(py, e))
    }

    /// Attaches to mailbox `name` of a running job.
    #[staticmethod]
    fn attach(py: Python<'_>, name: &str) -> PyResult<Self> {
        py.detach(|| RustMailbox::attach(name))
            .map(Self::of)
            .map_err(|e| mailbox_err(py, e))
    }

    /// Starts `sperli run -n ranks --mailbox name -- program...` with the
    /// `sperli` launcher at `sperli`, waits until the group is READY and
    /// returns its mailbox. The job ends when this client ends (it is
    /// shut down when the object is dropped).
    #[staticmethod]
    #[pyo3(signature = (name, sperli, ranks, program, hosts = None, launcher_args = Vec::new(), setup_timeout = 60.0, inherit_output = true))]
    #[allow(clippy::too_many_arguments)]
    fn start_job(
        py: Python<'_>,
        name: &str,
        sperli: std::path::PathBuf,
        ranks: u32,
        program: Vec<String>,
        hosts: Option<String>,
        launcher_args: Vec<String>,
        setup_timeout: f64,
        inherit_output: bool,
    ) -> PyResult<Self> {
        let mut spec = JobSpec::new(sperli, ranks, program);
        spec.hosts = hosts;
        spec.launcher_args = launcher_args;
        spec.setup_timeout = Duration::from_secs_f64(setup_timeout.max(0.0));
        spec.inherit_output = inherit_output;
        py.detach(|| RustMailbox::start_job(name, &spec))
            .map(Self::of)
            .map_err(|e| mailbox_err(py, e))
    }

    /// Waits until the group is READY (H1644 after `timeout` seconds).
    #[pyo3(signature = (timeout = 30.0))]
    fn wait_ready(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let t = Duration::from_secs_f64(timeout.max(0.0));
        self.with(py, |m| m.wait_ready(t))
    }

    /// The timeout of each later request, in seconds (default 60; a
    /// request past it makes the group TERMINAL, H1644).
    fn set_timeout(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        let t = Duration::from_secs_f64(seconds.max(0.0));
        self.with(py, |m| {
            m.set_timeout(t);
            Ok(())
        })
    }

    /// Submits a task to handler `handler` (its name, or an id) with
    /// `payload` (bytes-like; a list of them for `target="per_rank"`) and
    /// waits for every target's reply: a list of `sperli.Reply` in rank
    /// order. Raises `TaskFailedError` (H1642, `.replies`) when a target
    /// failed; the group goes on serving.
    #[pyo3(signature = (handler, payload = None, target = None))]
    fn submit(
        &self,
        py: Python<'_>,
        handler: &Bound<'_, PyAny>,
        payload: Option<&Bound<'_, PyAny>>,
        target: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyList>> {
        self.request(py, handler, payload, target, false)
    }

    /// As `submit`, for a CONTROL handler.
    #[pyo3(signature = (handler, payload = None, target = None))]
    fn control(
        &self,
        py: Python<'_>,
        handler: &Bound<'_, PyAny>,
        payload: Option<&Bound<'_, PyAny>>,
        target: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyList>> {
        self.request(py, handler, payload, target, true)
    }

    /// PING: every rank answers (an empty reply each).
    fn ping(&self, py: Python<'_>) -> PyResult<Py<PyList>> {
        let r = self.with(py, |m| m.ping())?;
        Ok(replies_list(py, &r)?.unbind())
    }

    /// SHUTDOWN: every rank leaves its loop and ends normally; for a job
    /// this client started, also waits for the launcher to exit.
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |m| m.shutdown())
    }

    /// The mailbox name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The job size it serves.
    #[getter]
    fn world_size(&self) -> u32 {
        self.world_size
    }

    fn __repr__(&self) -> String {
        format!(
            "<sperli.Mailbox {:?}, {} ranks>",
            self.name, self.world_size
        )
    }
}

impl Mailbox {
    fn request(
        &self,
        py: Python<'_>,
        handler: &Bound<'_, PyAny>,
        payload: Option<&Bound<'_, PyAny>>,
        target_obj: Option<&Bound<'_, PyAny>>,
        control: bool,
    ) -> PyResult<Py<PyList>> {
        let id = match handler.extract::<String>() {
            Ok(name) => handler_id(&name),
            Err(_) => handler.extract::<u32>()?,
        };
        let t = target(target_obj)?;
        let p = payloads(payload)?;
        let replies = self.with(py, move |m| {
            let refs: Vec<&[u8]> = p.iter().map(Vec::as_slice).collect();
            if control {
                m.control(id, t, &refs)
            } else {
                m.submit(id, t, &refs)
            }
        })?;
        Ok(replies_list(py, &replies)?.unbind())
    }
}

/// What a Python handler gets (see the module docs).
#[pyclass(module = "sperli", frozen, get_all)]
pub struct Task {
    /// This rank's payload.
    payload: Py<PyBytes>,
    /// This rank.
    rank: u32,
    /// The job size.
    size: u32,
    /// The request's sequence id.
    sequence: u64,
    /// The handler id.
    handler: u32,
    /// `"task"` or `"control"`.
    opcode: String,
    /// `"group"`, `"per_rank"` or the target rank.
    target: Py<PyAny>,
    /// The task's communicator (GROUP, PER_RANK), else `None`.
    comm: Option<Py<Comm>>,
}

fn run_handler(py: Python<'_>, f: &Py<PyAny>, task: Task) -> Result<Vec<u8>, TaskError> {
    let to_err = |e: PyErr| {
        let kind = e
            .get_type(py)
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "Exception".into());
        let msg = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
        TaskError::new(kind, msg)
    };
    let out = f.call1(py, (task,)).map_err(to_err)?;
    let out = out.bind(py);
    if out.is_none() {
        return Ok(Vec::new());
    }
    let buf = pyo3::buffer::PyUntypedBuffer::get(out).map_err(|_| {
        TaskError::new(
            "TypeError",
            format!("a handler returns bytes or None, not {}", type_name(out)),
        )
    })?;
    match crate::raw::Region::new(buf) {
        Some(r) => Ok(r.bytes().to_vec()),
        None => Err(TaskError::new(
            "TypeError",
            "a handler returns contiguous bytes",
        )),
    }
}

/// Runs Python handler `f` for one request.
fn handle(f: &Py<PyAny>, t: &mut RustTask<'_>) -> Result<Vec<u8>, TaskError> {
    let (rank, size, sequence, handler) = (t.rank, t.size, t.sequence, t.handler);
    let opcode = if t.opcode == Opcode::Control {
        "control"
    } else {
        "task"
    };
    let target = t.target;
    let payload = t.payload.to_vec();
    Python::attach(|py| {
        let target_obj: Py<PyAny> = match target {
            Target::Group => "group".into_pyobject(py).map(|o| o.into_any().unbind()),
            Target::PerRank => "per_rank".into_pyobject(py).map(|o| o.into_any().unbind()),
            Target::Rank(r) => r.into_pyobject(py).map(|o| o.into_any().unbind()),
        }
        .unwrap_or_else(|_| py.None());
        let task = |comm: Option<Py<Comm>>| Task {
            payload: PyBytes::new(py, &payload).unbind(),
            rank,
            size,
            sequence,
            handler,
            opcode: opcode.into(),
            target: target_obj.clone_ref(py),
            comm,
        };
        match t.comm() {
            None => run_handler(py, f, task(None)),
            Some(c) => Slot::scoped(c, |slot| {
                let comm = Py::new(py, Comm::over(slot.clone(), rank, size, 0))
                    .map_err(|e| TaskError::new("RuntimeError", e.to_string()))?;
                run_handler(py, f, task(Some(comm)))
            }),
        }
    })
}

/// The rank side of a mailbox job (see the module docs): register
/// handlers with `task(name, fn)` / `control(name, fn)` (or as decorators:
/// `@server.task("name")`), then `serve(comm)`.
#[pyclass(module = "sperli", frozen)]
pub struct MailboxServer {
    /// (control?, name, handler), in registration order.
    handlers: Mutex<Vec<(bool, String, Py<PyAny>)>>,
}

impl MailboxServer {
    fn add(&self, control: bool, name: String, f: Py<PyAny>) -> PyResult<()> {
        let mut hs = self
            .handlers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let id = handler_id(&name);
        if let Some((_, other, _)) = hs
            .iter()
            .find(|(c, n, _)| *c == control && handler_id(n) == id)
        {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "handler {name:?} has the id {id:#010x} of {other:?}: register another name"
            )));
        }
        hs.push((control, name, f));
        Ok(())
    }

    fn register(
        slf: &Bound<'_, Self>,
        control: bool,
        name: String,
        f: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        match f {
            Some(f) => {
                slf.get().add(control, name, f.clone().unbind())?;
                Ok(f.unbind())
            }
            None => {
                // Decorator form: return a function that registers.
                let server = slf.clone().unbind();
                let deco = pyo3::types::PyCFunction::new_closure(
                    py,
                    None,
                    None,
                    move |args: &Bound<'_, pyo3::types::PyTuple>,
                          _kw: Option<&Bound<'_, pyo3::types::PyDict>>|
                          -> PyResult<Py<PyAny>> {
                        let f = args.get_item(0)?;
                        server
                            .get()
                            .add(control, name.clone(), f.clone().unbind())?;
                        Ok(f.unbind())
                    },
                )?;
                Ok(deco.into_any().unbind())
            }
        }
    }
}

#[pymethods]
impl MailboxServer {
    #[new]
    fn new() -> Self {
        Self {
            handlers: Mutex::new(Vec::new()),
        }
    }

    /// Registers a TASK handler `fn(task) -> bytes | None` under `name`;
    /// without `fn`, a decorator that does.
    #[pyo3(signature = (name, handler = None))]
    fn task(
        slf: &Bound<'_, Self>,
        name: String,
        handler: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        Self::register(slf, false, name, handler)
    }

    /// Registers a CONTROL handler (as `task`).
    #[pyo3(signature = (name, handler = None))]
    fn control(
        slf: &Bound<'_, Self>,
        name: String,
        handler: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        Self::register(slf, true, name, handler)
    }

    /// Serves requests until SHUTDOWN, then ends the job step normally
    /// (BYE). Takes `comm` (default `sperli.COMM_WORLD`) over: it cannot
    /// be used afterwards and must have no open requests. Every rank
    /// serves with the same handlers. Raises what made the group TERMINAL.
    #[pyo3(signature = (comm = None))]
    fn serve(&self, py: Python<'_>, comm: Option<Bound<'_, Comm>>) -> PyResult<()> {
        let comm = or_world(py, comm)?;
        let comm = comm.get();
        if comm.sub.is_some() {
            return Err(BindingError::SubServer.into());
        }
        let open = comm.call(py, |r| Ok(r.open.len()))?;
        if open > 0 {
            return Err(BindingError::OpenRequests { count: open }.into());
        }
        let hs: Vec<(bool, String, Py<PyAny>)> = self
            .handlers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(c, n, f)| (*c, n.clone(), f.clone_ref(py)))
            .collect();
        let mut server = RustServer::new();
        for (control, name, f) in hs {
            let h = move |t: &mut RustTask<'_>| handle(&f, t);
            server = if control {
                server.control(&name, h)
            } else {
                server.task(&name, h)
            };
        }
        let slot = &comm.slot;
        let res = py.detach(move || {
            let (ep, seq) = match slot.close(Gone::Served) {
                Ok(Some(x)) => x,
                Ok(None) => return Err(Fail::from(Gone::TaskOver)),
                Err(g) => return Err(Fail::from(g)),
            };
            let mut c = RustComm::new(ep);
            advance(&mut c, seq);
            server.serve(c).map_err(Fail::from)
        });
        res.map_err(|f| f.into_pyerr(py))
    }
}
