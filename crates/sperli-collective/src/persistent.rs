//! Persistent requests (MPI's `MPI_Send_init`, `MPI_Recv_init`,
//! `MPI_Start`, `MPI_Startall`): a send or receive whose arguments are
//! bound once and which is started many times, built over
//! [`Comm::isend`] and [`Comm::irecv`] (the same DATA frames, protocol
//! §7.2).
//!
//! A persistent request is **inactive** when made and after each
//! completion; [`Persistent::start`] makes it **active**; a wait or a
//! test that completes it makes it inactive again, ready for the next
//! start. A wait on an inactive request returns at once (a receive with
//! MPI's empty status, [`empty_status`]); a start on an active one is
//! [`MpiError::Active`] (H1618, nothing is sent). [`start_all`] starts
//! several, after checking that none is active.
//!
//! The send's data lives in the request ([`PersistentSend::data_mut`]):
//! change it between starts, as an MPI program changes the buffer it bound.
//! A start copies it (the send is [`Comm::isend`]), so it may change as soon
//! as `start` returns.

use sperli_transport::Status;
use sperli_wire::error::ArgumentError;
use sperli_wire::Error;

use crate::comm::Comm;
use crate::element::Element;
use crate::mpi_error::MpiError;
use crate::p2p::{HasEndpoint, RecvRequest, SendRequest};
use crate::special::{check_tag, empty_status, PROC_NULL};

/// What [`start_all`] needs of a persistent request.
pub trait Persistent {
    /// Starts the request (an inactive one; [`MpiError::Active`] else).
    fn start(&mut self) -> Result<(), MpiError>;
    /// True from a start until the wait or test that completes it.
    fn is_active(&self) -> bool;
}

/// Starts every request of `requests` (MPI's `MPI_Startall`), in order;
/// [`MpiError::Active`] before any starts when one is active.
///
/// ```no_run
/// use sperli_collective::prelude::*;
/// use sperli_collective::persistent::{start_all, Persistent};
/// # fn f(comm: &Comm<Endpoint>) -> Result<(), MpiError> {
/// let (me, n) = (comm.rank(), comm.size());
/// let (left, right) = ((me + n - 1) % n, (me + 1) % n);
/// let mut halo_in = comm.recv_init::<f64>(Some(left), Some(3))?;
/// let mut halo_out = comm.send_init(right, 3, vec![0.0f64; 4])?;
/// for step in 0..10 {
///     halo_out.data_mut().fill(f64::from(step));
///     start_all(&mut [&mut halo_in, &mut halo_out])?;
///     let (_status, ghost) = halo_in.wait()?;
///     halo_out.wait()?;
///     assert_eq!(ghost, vec![f64::from(step); 4]);
/// }
/// # Ok(()) }
/// ```
pub fn start_all(requests: &mut [&mut dyn Persistent]) -> Result<(), MpiError> {
    if requests.iter().any(|r| r.is_active()) {
        return Err(MpiError::Active);
    }
    for r in requests.iter_mut() {
        r.start()?;
    }
    Ok(())
}

/// A persistent send ([`Comm::send_init`]): to a rank with a tag, of the
/// data it holds.
#[derive(Debug)]
pub struct PersistentSend<'c, L: HasEndpoint, T: Element> {
    comm: &'c Comm<L>,
    to: u32,
    tag: u32,
    data: Vec<T>,
    active: Option<SendRequest<'c>>,
}

impl<L: HasEndpoint, T: Element> PersistentSend<'_, L, T> {
    /// The data the next start sends.
    pub fn data(&self) -> &[T] {
        &self.data
    }

    /// The data the next start sends, to change (also while the request
    /// is active: the start copied what it sends).
    pub fn data_mut(&mut self) -> &mut Vec<T> {
        &mut self.data
    }

    /// Waits until the started send is complete (its frames written into
    /// TLS, as [`SendRequest::wait`]); the request is inactive again. At
    /// once when it is inactive.
    pub fn wait(&mut self) -> Result<(), MpiError> {
        match self.active.take() {
            Some(r) => Ok(r.wait()?),
            None => Ok(()),
        }
    }

    /// True when the started send is complete (the request is then
    /// inactive) or the request was inactive.
    pub fn test(&mut self) -> Result<bool, MpiError> {
        let done = match self.active.as_mut() {
            Some(r) => r.test()?,
            None => true,
        };
        if done {
            self.active = None;
        }
        Ok(done)
    }

    /// Frees the request (MPI's `MPI_Request_free`), after waiting for a
    /// started send to complete.
    pub fn free(mut self) -> Result<(), MpiError> {
        self.wait()
    }
}

impl<L: HasEndpoint, T: Element> Persistent for PersistentSend<'_, L, T> {
    fn start(&mut self) -> Result<(), MpiError> {
        if self.active.is_some() {
            return Err(MpiError::Active);
        }
        self.active = Some(self.comm.isend(self.to, self.tag, &self.data)?);
        Ok(())
    }

    fn is_active(&self) -> bool {
        self.active.is_some()
    }
}

/// A persistent receive ([`Comm::recv_init`]): from a source with a tag
/// (`None`: any), of elements `T`. Dropping an active one cancels its
/// receive; [`PersistentRecv::free`] waits for it.
#[derive(Debug)]
pub struct PersistentRecv<'c, L: HasEndpoint, T: Element> {
    comm: &'c Comm<L>,
    source: Option<u32>,
    tag: Option<u32>,
    active: Option<RecvRequest<'c, T>>,
}

impl<L: HasEndpoint, T: Element> PersistentRecv<'_, L, T> {
    /// Waits for the started receive's message; the request is inactive
    /// again. On an inactive request: at once, MPI's empty status
    /// ([`empty_status`]) and no elements.
    pub fn wait(&mut self) -> Result<(Status, Vec<T>), MpiError> {
        match self.active.take() {
            Some(r) => Ok(r.wait()?),
            None => Ok((empty_status(), Vec::new())),
        }
    }

    /// The message, if the started receive's has come (the request is then
    /// inactive); `Ok(None)` while it has not. On an inactive request: the
    /// empty status and no elements.
    pub fn test(&mut self) -> Result<Option<(Status, Vec<T>)>, MpiError> {
        let Some(r) = self.active.as_mut() else {
            return Ok(Some((empty_status(), Vec::new())));
        };
        let got = r.test()?;
        if got.is_some() {
            self.active = None;
        }
        Ok(got)
    }

    /// Frees the request (MPI's `MPI_Request_free`), after waiting for a
    /// started receive to complete (its message is dropped).
    pub fn free(mut self) -> Result<(), MpiError> {
        self.wait().map(drop)
    }
}

impl<L: HasEndpoint, T: Element> Persistent for PersistentRecv<'_, L, T> {
    fn start(&mut self) -> Result<(), MpiError> {
        if self.active.is_some() {
            return Err(MpiError::Active);
        }
        self.active = Some(self.comm.irecv(self.source, self.tag)?);
        Ok(())
    }

    fn is_active(&self) -> bool {
        self.active.is_some()
    }
}

impl<L: HasEndpoint> Comm<L> {
    /// H1618 for a rank that is neither below the size nor [`PROC_NULL`].
    fn check_peer(&self, r: u32) -> Result<(), Error> {
        if r == PROC_NULL || r < self.size() {
            Ok(())
        } else {
            Err(ArgumentError::Rank {
                rank: r,
                size: self.size(),
            }
            .into())
        }
    }

    /// A persistent send of `data` to `to` with `tag` (MPI's
    /// `MPI_Send_init`), inactive; each [`Persistent::start`] sends the
    /// data it then holds as [`Comm::isend`] does. `to` may be
    /// [`PROC_NULL`]. A rank not below the size or a reserved tag is H1618
    /// ([`MpiError::Comm`] with the point-to-point calls' error) at once.
    ///
    /// ```no_run
    /// use sperli_collective::prelude::*;
    /// # fn f(comm: &Comm<Endpoint>) -> Result<(), MpiError> {
    /// let mut out = comm.send_init(PROC_NULL, 1, vec![1u32, 2])?;
    /// out.start()?; // to PROC_NULL: complete at once
    /// assert!(out.test()?);
    /// out.free()?;
    /// # Ok(()) }
    /// ```
    pub fn send_init<T: Element>(
        &self,
        to: u32,
        tag: u32,
        data: Vec<T>,
    ) -> Result<PersistentSend<'_, L, T>, MpiError> {
        self.check_peer(to)?;
        check_tag(Some(tag))?;
        Ok(PersistentSend {
            comm: self,
            to,
            tag,
            data,
            active: None,
        })
    }

    /// A persistent receive from `source` with `tag` (`None`: any; MPI's
    /// `MPI_Recv_init`), inactive; each [`Persistent::start`] posts a
    /// receive as [`Comm::irecv`] does. `source` may be [`PROC_NULL`].
    /// Errors at once as [`Comm::send_init`]; a receive from any source on
    /// a communicator made by split or dup fails at its start, as
    /// [`Comm::irecv`] does.
    pub fn recv_init<T: Element>(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<PersistentRecv<'_, L, T>, MpiError> {
        if let Some(s) = source {
            self.check_peer(s)?;
        }
        check_tag(tag)?;
        Ok(PersistentRecv {
            comm: self,
            source,
            tag,
            active: None,
        })
    }
}
