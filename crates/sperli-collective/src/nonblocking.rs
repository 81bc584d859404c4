//! Non-blocking collectives (protocol §8.9): `ibarrier`, `ibcast`,
//! `ireduce`, `iallreduce`, `igather`, `iscatter` and `iallgather` return a
//! [`Request`] at once; [`Request::wait`] and [`Request::test`] complete it.
//!
//! They send exactly the frames of the blocking calls, in the order this
//! rank **issued** them, so sequence numbers count issue order and a v1
//! job stays v1 byte for byte.
//!
//! # How they progress
//!
//! The first non-blocking call of a communicator starts its **progress
//! thread**, which shares the link and the sequence count with the
//! communicator and runs the issued calls one after another, in issue
//! order, as the blocking calls would. So a call moves on while the program
//! computes, whether or not it calls the library (the transport's I/O
//! thread reads and writes the sockets in the background as always; the
//! progress thread does a collective's own steps: the root's fold, the
//! sends of the next phase). A blocking collective on the program's thread
//! first waits until every non-blocking call issued before it is through,
//! so calls reach the wire in issue order. Point-to-point calls do not
//! wait: they share no queue with collectives.
//!
//! The progress thread needs to own a share of the link, so these calls
//! exist for `Comm<L>` with `L: Send + Sync + 'static`: a communicator over
//! an owned [`Endpoint`](sperli_transport::Endpoint), an
//! `Arc<Endpoint>`, or a [`FakePeers`](crate::fake::FakePeers); not over a
//! borrowed `&Endpoint`. Dropping the communicator waits until every call
//! issued is through, then ends the thread.
//!
//! A request not yet completed by `wait` or `test` (and not dropped) is
//! **open**: a checkpoint with an open request fails with H1624 on every
//! rank, like an open send or receive ([`Comm::open_requests`]).

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use sperli_wire::element::Reduction;
use sperli_wire::error::{LocalError, UsageError};
use sperli_wire::Error;

use crate::comm::Comm;
use crate::element::Element;
use crate::peers::Peers;
use crate::state::{lock, State};

/// One issued call, run on the progress thread.
type Job<L> = Box<dyn FnOnce(&Comm<L>) + Send>;

/// A communicator's progress thread (see the module docs).
pub(crate) struct Progress<L: Peers> {
    tx: Option<Sender<Job<L>>>,
    thread: Option<JoinHandle<()>>,
}

impl<L: Peers> fmt::Debug for Progress<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Progress").finish_non_exhaustive()
    }
}

impl<L: Peers> Drop for Progress<L> {
    fn drop(&mut self) {
        // The thread runs what was issued, then sees the channel closed.
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where the progress thread puts a call's result.
struct Slot<R> {
    result: Mutex<Option<Result<R, Error>>>,
    done: Condvar,
}

/// A non-blocking collective call in progress (see the module docs).
///
/// Complete it with [`Request::wait`] or [`Request::test`]; dropping it
/// leaves the call running to its end (every rank still makes it) and
/// drops its result.
pub struct Request<R> {
    slot: Arc<Slot<R>>,
    state: Arc<State>,
    closed: bool,
}

impl<R> fmt::Debug for Request<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("done", &self.is_done())
            .field("closed", &self.closed)
            .finish()
    }
}

impl<R> Request<R> {
    /// True once the call is through (its result waits for `wait`/`test`),
    /// or the request was completed.
    pub fn is_done(&self) -> bool {
        self.closed || lock(&self.slot.result).is_some()
    }

    /// The result, if the call is through (the request is then completed
    /// and later `test`s return `Ok(None)`); `Ok(None)` while it runs.
    pub fn test(&mut self) -> Result<Option<R>, Error> {
        if self.closed {
            return Ok(None);
        }
        let r = lock(&self.slot.result).take();
        match r {
            Some(r) => {
                self.close();
                r.map(Some)
            }
            None => Ok(None),
        }
    }

    /// Waits until the call is through and returns its result.
    pub fn wait(mut self) -> Result<R, Error> {
        let mut g = lock(&self.slot.result);
        let r = loop {
            match g.take() {
                Some(r) => break r,
                None => g = self.slot.done.wait(g).unwrap_or_else(|e| e.into_inner()),
            }
        };
        drop(g);
        self.close();
        r
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.state.closed();
        }
    }
}

impl<R> Drop for Request<R> {
    fn drop(&mut self) {
        self.close();
    }
}

/// Waits for every request; their results in order (the first error is
/// returned after all of them are through).
pub fn wait_all<R>(requests: Vec<Request<R>>) -> Result<Vec<R>, Error> {
    let mut out = Vec::with_capacity(requests.len());
    let mut first_err = None;
    for r in requests {
        match r.wait() {
            Ok(v) => out.push(v),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

impl<L: Peers> Comm<L> {
    /// Non-blocking requests of this communicator that are open: issued
    /// and not yet completed by `wait`/`test`, nor dropped. The
    /// checkpointer counts them with the open sends (H1624).
    pub fn open_requests(&self) -> u64 {
        self.state.open()
    }

    /// Non-blocking calls issued and not yet through.
    pub fn pending_requests(&self) -> u64 {
        self.state.pending()
    }
}

impl<L: Peers + Send + Sync + 'static> Comm<L> {
    /// Starts the progress thread if it is not running.
    fn progress_thread(&self) -> Result<&Progress<L>, Error> {
        if let Some(p) = self.progress.get() {
            return Ok(p);
        }
        let (tx, rx) = channel::<Job<L>>();
        let view = self.progress_view();
        let thread = std::thread::Builder::new()
            .name(format!("sperli-progress-{}", self.rank()))
            .spawn(move || {
                for job in rx {
                    job(&view);
                }
            })
            .map_err(|e| Error::Io {
                op: "starting the communicator's progress thread",
                kind: e.kind(),
            })?;
        let _ = self.progress.set(Progress {
            tx: Some(tx),
            thread: Some(thread),
        });
        self.progress
            .get()
            .ok_or(Error::Local(LocalError::Internal {
                what: "the progress thread was just set",
            }))
    }

    /// Issues `call` to the progress thread.
    pub(crate) fn issue<R: Send + 'static>(
        &self,
        call: impl FnOnce(&Comm<L>) -> Result<R, Error> + Send + 'static,
    ) -> Result<Request<R>, Error> {
        let p = self.progress_thread()?;
        let slot = Arc::new(Slot {
            result: Mutex::new(None),
            done: Condvar::new(),
        });
        self.state.issued();
        let (s, st) = (slot.clone(), self.state.clone());
        let job: Job<L> = Box::new(move |c: &Comm<L>| {
            let r = catch_unwind(AssertUnwindSafe(|| call(c))).unwrap_or_else(|_| {
                Err(Error::Local(LocalError::Internal {
                    what: "a non-blocking collective panicked",
                }))
            });
            *lock(&s.result) = Some(r);
            s.done.notify_all();
            st.through();
        });
        let sent = p.tx.as_ref().map(|tx| tx.send(job).is_ok());
        if sent != Some(true) {
            self.state.through();
            self.state.closed();
            return Err(UsageError::ProgressStopped.into());
        }
        Ok(Request {
            slot,
            state: self.state.clone(),
            closed: false,
        })
    }

    /// Non-blocking [`Comm::barrier`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let ok = fake::run(3, |c| c.ibarrier().unwrap().wait().is_ok());
    /// assert_eq!(ok, vec![true; 3]);
    /// ```
    pub fn ibarrier(&self) -> Result<Request<()>, Error> {
        self.issue(|c| c.barrier())
    }

    /// Non-blocking bcast of any length ([`Comm::bcast_counted`]): the root's
    /// `buf` is sent; the request gives every rank the root's data (the
    /// root its own `buf` back).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     let v = if c.rank() == 0 { vec![5u32, 6] } else { Vec::new() };
    ///     c.ibcast(0, v).unwrap().wait().unwrap()
    /// });
    /// assert_eq!(got, vec![vec![5, 6]; 2]);
    /// ```
    pub fn ibcast<T: Element>(&self, root: u32, buf: Vec<T>) -> Result<Request<Vec<T>>, Error> {
        self.issue(move |c| {
            let mut buf = buf;
            c.bcast_counted(root, &mut buf).map(|()| buf)
        })
    }

    /// Non-blocking reduce of any length ([`Comm::reduce`]); `data`
    /// is copied at the call. The root's request gives `Some(result)`.
    pub fn ireduce<T: Element>(
        &self,
        root: u32,
        data: &[T],
        op: Reduction,
    ) -> Result<Request<Option<Vec<T>>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.reduce(root, &data, op))
    }

    /// Non-blocking allreduce of any length ([`Comm::allreduce`]);
    /// `data` is copied at the call.
    ///
    /// ```
    /// use sperli_collective::prelude::*;
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let r = c.iallreduce(&[c.rank() as f64], Reduction::Sum).unwrap();
    ///     // ... compute while it runs ...
    ///     r.wait().unwrap()
    /// });
    /// assert_eq!(got, vec![vec![3.0]; 3]);
    /// ```
    pub fn iallreduce<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
    ) -> Result<Request<Vec<T>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.allreduce(&data, op))
    }

    /// Non-blocking [`Comm::gather`]; `data` is copied at the call.
    pub fn igather<T: Element>(
        &self,
        root: u32,
        data: &[T],
    ) -> Result<Request<Option<Vec<T>>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.gather(root, &data))
    }

    /// Non-blocking [`Comm::scatter`]; the root's `data` is copied at the
    /// call.
    pub fn iscatter<T: Element>(
        &self,
        root: u32,
        data: Option<&[T]>,
    ) -> Result<Request<Vec<T>>, Error> {
        let data = data.map(<[T]>::to_vec);
        self.issue(move |c| c.scatter(root, data.as_deref()))
    }

    /// Non-blocking [`Comm::allgather`]; `data` is copied at the call.
    pub fn iallgather<T: Element>(&self, data: &[T]) -> Result<Request<Vec<T>>, Error> {
        let data = data.to_vec();
        self.issue(move |c| c.allgather(&data))
    }
}
