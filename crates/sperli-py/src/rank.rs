//! [`Rank`]: what every call of a Python communicator runs on, inside
//! [`Slot::with`](crate::raw::Slot::with): the endpoint (point-to-point),
//! the collectives ([`Rank::comm`]: a [`Comm`] over the endpoint, the
//! [`Checkpointer`] that owns it once the program made one, or, in a
//! mailbox task, the server's own communicator), the open requests of
//! `Isend`/`Irecv` and of the non-blocking collectives, the
//! sub-communicators made by `Split`/`Dup` (keyed by their id, sharing the
//! endpoint and the slot's lock), and the job keys a checkpointer needs.
//!
//! Everything here holds a counted handle on the endpoint ([`Shared`]),
//! none borrows it: a non-blocking collective runs on the communicator's
//! progress thread, which needs an owned link, and the open
//! point-to-point requests are the transport's owned handles, so a rank
//! can live in a Python object, which carries no lifetime.

use std::collections::HashMap;
use std::sync::Arc;

use sperli_ckpt::{Checkpointer, JobKeys};
use sperli_collective::vcoll::Blocks;
use sperli_collective::{Comm, Element, Endpoint, Peers, Reduction, Request as CollRequest};
use sperli_transport::{OwnedRecvHandle, OwnedSendHandle, Status as WireStatus};
use sperli_wire::abort::AbortReason;
use sperli_wire::error::UsageError;
use sperli_wire::recovery::RecoveryError;
use sperli_wire::Error;

use crate::buffer::Buf;
use crate::errors::{BindingError, Cause, Fail};

/// The collectives of an owned rank: a plain communicator, or the
/// checkpointer that owns it.
pub(crate) enum Collectives {
    /// Before any checkpointer.
    Plain(Comm<Shared>),
    /// After `sperli.Checkpointer(comm)`.
    Ckpt(Box<Checkpointer<Shared>>),
}

/// The link of an owned rank's collectives: the endpoint, counted.
pub(crate) type Shared = Arc<Endpoint>;

/// An open request of `Isend`/`Irecv` (and their object forms), or of a
/// non-blocking collective.
pub(crate) enum Open {
    /// A started send.
    Send(OwnedSendHandle),
    /// A posted receive.
    Recv(OwnedRecvHandle),
    /// A non-blocking collective issued (`Iallreduce`, ...).
    Coll(Box<dyn Pending>),
    /// A posted receive whose message a wait or test over several
    /// requests took (`Waitany`, `Testall`): its request completes with it.
    Taken(sperli_transport::Message),
}

impl Open {
    /// Whether the request can complete without waiting; a receive whose
    /// message has come takes it (becoming [`Open::Taken`]), nothing is
    /// delivered yet.
    pub(crate) fn ready(&mut self) -> Result<bool, Error> {
        match self {
            Open::Send(h) => h.test(),
            Open::Recv(h) => match h.test()? {
                Some(m) => {
                    *self = Open::Taken(m);
                    Ok(true)
                }
                None => Ok(false),
            },
            Open::Coll(p) => p.ready(),
            Open::Taken(_) => Ok(true),
        }
    }
}

/// A non-blocking collective in progress and what to do with its result
/// ([`Issued`]); its request owns nothing of the rank.
pub(crate) trait Pending: Send {
    /// Completes the call if it is through (waits for it when `block`),
    /// writing its result into `out`; `Ok(true)` once complete.
    fn poll(&mut self, block: bool, out: Option<&mut Buf>) -> Result<bool, Fail>;

    /// Whether the call is through (`poll` then completes it at once).
    fn is_done(&self) -> bool;

    /// [`Pending::is_done`] after making what progress it can without
    /// waiting (a request no thread runs makes it here).
    fn ready(&mut self) -> Result<bool, Error> {
        Ok(self.is_done())
    }
}

/// A Rust [`CollRequest`] with the step that delivers its result.
pub(crate) struct Issued<R, F> {
    req: Option<CollRequest<R>>,
    deliver: Option<F>,
}

impl<R, F> Issued<R, F>
where
    R: Send + 'static,
    F: FnOnce(R, Option<&mut Buf>) -> Result<(), Fail> + Send + 'static,
{
    /// `req`, whose result `deliver` writes into the request's buffer.
    pub(crate) fn open(req: CollRequest<R>, deliver: F) -> Open {
        Open::Coll(Box::new(Self {
            req: Some(req),
            deliver: Some(deliver),
        }))
    }
}

impl<R, F> Pending for Issued<R, F>
where
    R: Send,
    F: FnOnce(R, Option<&mut Buf>) -> Result<(), Fail> + Send,
{
    fn poll(&mut self, block: bool, out: Option<&mut Buf>) -> Result<bool, Fail> {
        let got = match self.req.take() {
            None => return Ok(true),
            Some(req) if block => req.wait()?,
            Some(mut req) => match req.test()? {
                Some(r) => r,
                None => {
                    self.req = Some(req);
                    return Ok(false);
                }
            },
        };
        if let Some(d) = self.deliver.take() {
            d(got, out)?;
        }
        Ok(true)
    }

    fn is_done(&self) -> bool {
        self.req.as_ref().is_none_or(CollRequest::is_done)
    }
}

/// A communicator made by `Split`/`Dup`: over the world's shared
/// endpoint, or over a mailbox server's communicator's.
pub(crate) enum SubComm {
    /// Made from an owned rank's collectives.
    Shared(Comm<Shared>),
    /// Made from a mailbox task's communicator.
    Task(Comm<Endpoint>),
    /// An intercommunicator (`Create_intercomm`, protocol §15.6): its
    /// point-to-point calls and ranks are the remote group's.
    Inter(Box<sperli_collective::Intercomm<Shared>>),
    /// The local communicator of the intercommunicator of this id: its
    /// calls are the local group's.
    InterLocal(u32),
}

pub(crate) enum Kind {
    /// A communicator that owns its endpoint (the world).
    Owned { shared: Shared, coll: Collectives },
    /// A mailbox task's: the server's communicator, moved in for the
    /// handler call and back out when its slot closes.
    Task(Comm<Endpoint>),
}

/// One rank's state behind a Python communicator (see the module docs).
pub(crate) struct Rank {
    pub(crate) kind: Kind,
    /// Open requests by id.
    pub(crate) open: HashMap<u64, Open>,
    next_id: u64,
    /// The communicators made by `Split`/`Dup`, by id.
    pub(crate) subs: HashMap<u32, SubComm>,
    /// The communicator of the running call: `None` for the rank's own,
    /// else a key of `subs` ([`Rank::select`]).
    pub(crate) selected: Option<u32>,
    /// The job keys from the job description (rank 0: with the secret
    /// key), or why there are none; only a checkpointer takes them.
    pub(crate) keys: Result<JobKeys, Cause>,
}

/// The collectives of one call: [`Rank::comm`].
pub(crate) enum CommMut<'c> {
    /// Over the rank's shared endpoint.
    Ref(&'c mut Comm<Shared>),
    /// A mailbox server's communicator (or one made from it).
    Task(&'c mut Comm<Endpoint>),
}

/// `$body` with `$c` the communicator of a [`CommMut`].
macro_rules! both {
    ($m:expr, $c:ident => $body:expr) => {
        match $m {
            CommMut::Ref($c) => $body,
            CommMut::Task($c) => $body,
        }
    };
}

impl CommMut<'_> {
    /// The number of ranks.
    pub(crate) fn size(&self) -> u32 {
        both!(self, c => c.size())
    }

    /// The communicator's id (protocol §15.2).
    pub(crate) fn id(&self) -> u32 {
        both!(self, c => c.id())
    }

    /// The job rank of this communicator's rank `r`.
    pub(crate) fn job_rank(&self, r: u32) -> u32 {
        both!(self, c => c.job_rank(r))
    }

    /// This communicator's rank of job rank `job`, if a member.
    pub(crate) fn rank_of_job_rank(&self, job: u32) -> Option<u32> {
        both!(self, c => c.rank_of_job_rank(job))
    }

    /// `Comm::abort`.
    pub(crate) fn abort(&self, code: u32, message: &str) {
        both!(self, c => c.abort(code, message))
    }

    /// `Comm::split`.
    pub(crate) fn split(&self, color: Option<u32>, key: i32) -> Result<Option<SubComm>, Error> {
        Ok(match self {
            CommMut::Ref(c) => c.split(color, key)?.map(SubComm::Shared),
            CommMut::Task(c) => c.split(color, key)?.map(SubComm::Task),
        })
    }

    /// `Comm::cart_create`: the grid's communicator (`None` beyond its
    /// places).
    pub(crate) fn cart_create(
        &self,
        dims: &[u32],
        periods: &[bool],
        reorder: bool,
    ) -> Result<Option<SubComm>, sperli_collective::MpiError> {
        Ok(match self {
            CommMut::Ref(c) => c
                .cart_create(dims, periods, reorder)?
                .map(|g| SubComm::Shared(g.into_comm())),
            CommMut::Task(c) => c
                .cart_create(dims, periods, reorder)?
                .map(|g| SubComm::Task(g.into_comm())),
        })
    }

    /// `Comm::dup`.
    pub(crate) fn dup(&self) -> Result<SubComm, Error> {
        Ok(match self {
            CommMut::Ref(c) => SubComm::Shared(c.dup()?),
            CommMut::Task(c) => SubComm::Task(c.dup()?),
        })
    }

    /// `Comm::ibarrier`.
    pub(crate) fn ibarrier(&self) -> Result<CollRequest<()>, Error> {
        both!(self, c => c.ibarrier())
    }

    /// `Comm::ibcast`.
    pub(crate) fn ibcast<T: Element>(
        &self,
        root: u32,
        buf: Vec<T>,
    ) -> Result<CollRequest<Vec<T>>, Error> {
        both!(self, c => c.ibcast(root, buf))
    }

    /// `Comm::ireduce`.
    pub(crate) fn ireduce<T: Element>(
        &self,
        root: u32,
        data: &[T],
        op: Reduction,
    ) -> Result<CollRequest<Option<Vec<T>>>, Error> {
        both!(self, c => c.ireduce(root, data, op))
    }

    /// `Comm::iallreduce`.
    pub(crate) fn iallreduce<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
    ) -> Result<CollRequest<Vec<T>>, Error> {
        both!(self, c => c.iallreduce(data, op))
    }

    /// `Comm::igather`.
    pub(crate) fn igather<T: Element>(
        &self,
        root: u32,
        data: &[T],
    ) -> Result<CollRequest<Option<Vec<T>>>, Error> {
        both!(self, c => c.igather(root, data))
    }

    /// `Comm::iscatter`.
    pub(crate) fn iscatter<T: Element>(
        &self,
        root: u32,
        data: Option<&[T]>,
    ) -> Result<CollRequest<Vec<T>>, Error> {
        both!(self, c => c.iscatter(root, data))
    }

    /// `Comm::iallgather`.
    pub(crate) fn iallgather<T: Element>(&self, data: &[T]) -> Result<CollRequest<Vec<T>>, Error> {
        both!(self, c => c.iallgather(data))
    }
}

/// Declares [`Coll`] with the Rust `Comm` calls the Python calls make,
/// and implements it for every `Comm` and for [`CommMut`].
macro_rules! coll {
    ($($(#[$m:meta])* fn $name:ident $(<$T:ident>)? (&mut self $(, $a:ident: $t:ty)*) -> $r:ty;)*) => {
        /// The Rust `Comm` calls a Python communicator makes (sperli-collective
        /// documents each), for a `Comm` over any link and for [`CommMut`].
        pub(crate) trait Coll {
            /// This rank.
            fn rank(&self) -> u32;
            /// The collective sequence reached (protocol §8.1).
            fn sequence(&self) -> u64;
            /// Whether the collectives failed (every later one fails too).
            fn failed(&self) -> bool;
            $($(#[$m])* fn $name $(<$T: Element>)? (&mut self $(, $a: $t)*) -> $r;)*
        }

        impl<L: Peers> Coll for Comm<L> {
            fn rank(&self) -> u32 {
                Comm::rank(self)
            }
            fn sequence(&self) -> u64 {
                Comm::sequence(self)
            }
            fn failed(&self) -> bool {
                self.failure().is_some()
            }
            $(fn $name $(<$T: Element>)? (&mut self $(, $a: $t)*) -> $r {
                Comm::$name(self $(, $a)*)
            })*
        }

        impl Coll for CommMut<'_> {
            fn rank(&self) -> u32 {
                match self {
                    CommMut::Ref(c) => c.rank(),
                    CommMut::Task(c) => c.rank(),
                }
            }
            fn sequence(&self) -> u64 {
                match self {
                    CommMut::Ref(c) => c.sequence(),
                    CommMut::Task(c) => c.sequence(),
                }
            }
            fn failed(&self) -> bool {
                match self {
                    CommMut::Ref(c) => c.failure().is_some(),
                    CommMut::Task(c) => c.failure().is_some(),
                }
            }
            $(fn $name $(<$T: Element>)? (&mut self $(, $a: $t)*) -> $r {
                match self {
                    CommMut::Ref(c) => c.$name($($a),*),
                    CommMut::Task(c) => c.$name($($a),*),
                }
            })*
        }
    };
}

coll! {
    /// `Comm::barrier`.
    fn barrier(&mut self) -> Result<(), Error>;
    /// `Comm::bcast`.
    fn bcast<T>(&mut self, root: u32, buf: &mut Vec<T>) -> Result<(), Error>;
    /// `Comm::bcast_into`.
    fn bcast_into<T>(&mut self, root: u32, buf: &mut [T]) -> Result<(), Error>;
    /// `Comm::bcast_counted`.
    fn bcast_counted<T>(&mut self, root: u32, buf: &mut Vec<T>) -> Result<(), Error>;
    /// `Comm::reduce_into`.
    fn reduce_into<T>(&mut self, root: u32, data: &[T], out: &mut [T], op: Reduction) -> Result<bool, Error>;
    /// `Comm::reduce_scalar`.
    fn reduce_scalar<T>(&mut self, root: u32, x: T, op: Reduction) -> Result<Option<T>, Error>;
    /// `Comm::allreduce_into`.
    fn allreduce_into<T>(&mut self, data: &[T], out: &mut [T], op: Reduction) -> Result<(), Error>;
    /// `Comm::allreduce_scalar`.
    fn allreduce_scalar<T>(&mut self, x: T, op: Reduction) -> Result<T, Error>;
    /// `Comm::gather`.
    fn gather<T>(&mut self, root: u32, data: &[T]) -> Result<Option<Vec<T>>, Error>;
    /// `Comm::gather_into`.
    fn gather_into<T>(&mut self, root: u32, data: &[T], out: &mut [T]) -> Result<bool, Error>;
    /// `Comm::scatter`.
    fn scatter<T>(&mut self, root: u32, data: Option<&[T]>) -> Result<Vec<T>, Error>;
    /// `Comm::scatter_into`.
    fn scatter_into<T>(&mut self, root: u32, data: Option<&[T]>, out: &mut [T]) -> Result<(), Error>;
    /// `Comm::allgather`.
    fn allgather<T>(&mut self, data: &[T]) -> Result<Vec<T>, Error>;
    /// `Comm::alltoall`.
    fn alltoall<T>(&mut self, data: &[T]) -> Result<Vec<T>, Error>;
    /// `Comm::reduce_scatter`.
    fn reduce_scatter<T>(&mut self, data: &[T], op: Reduction) -> Result<Vec<T>, Error>;
    /// `Comm::gatherv`.
    fn gatherv<T>(&mut self, root: u32, data: &[T]) -> Result<Option<Blocks<T>>, Error>;
    /// `Comm::scatterv`.
    fn scatterv<T>(&mut self, root: u32, data: Option<(&[T], &[usize])>) -> Result<Vec<T>, Error>;
    /// `Comm::allgatherv`.
    fn allgatherv<T>(&mut self, data: &[T]) -> Result<Blocks<T>, Error>;
    /// `Comm::alltoallv`.
    fn alltoallv<T>(&mut self, data: &[T], counts: &[usize]) -> Result<Blocks<T>, Error>;
    /// `Comm::scan`.
    fn scan<T>(&mut self, data: &[T], op: Reduction) -> Result<Vec<T>, Error>;
    /// `Comm::exscan`.
    fn exscan<T>(&mut self, data: &[T], op: Reduction) -> Result<Option<Vec<T>>, Error>;
    /// `Comm::reduce_bytes_with` (a user-defined reduction, protocol §17.4).
    fn reduce_bytes_with(&mut self, root: u32, data: &[u8], element_type: u8, f: &mut dyn FnMut(&mut [u8], &[u8])) -> Result<Option<Vec<u8>>, Error>;
    /// `Comm::allreduce_bytes_with`.
    fn allreduce_bytes_with(&mut self, data: &[u8], element_type: u8, f: &mut dyn FnMut(&mut [u8], &[u8])) -> Result<Vec<u8>, Error>;
    /// `Comm::scan_bytes_with`.
    fn scan_bytes_with(&mut self, data: &[u8], element_type: u8, exclusive: bool, f: &mut dyn FnMut(&mut [u8], &[u8])) -> Result<Vec<u8>, Error>;
}

impl Rank {
    /// A rank over `shared` with no collective call made yet.
    pub(crate) fn new(shared: Shared, keys: Result<JobKeys, Cause>) -> Self {
        Self {
            kind: Kind::Owned {
                coll: Collectives::Plain(Comm::new(shared.clone())),
                shared,
            },
            open: HashMap::new(),
            next_id: 0,
            subs: HashMap::new(),
            selected: None,
            keys,
        }
    }

    /// A mailbox task's rank: the collectives are the server's.
    pub(crate) fn task(comm: Comm<Endpoint>) -> Self {
        Self {
            kind: Kind::Task(comm),
            open: HashMap::new(),
            next_id: 0,
            subs: HashMap::new(),
            selected: None,
            keys: Err(Cause::Binding(BindingError::TaskCheckpointer)),
        }
    }

    /// A mailbox task's communicator back (the rest of the rank, its
    /// sub-communicators included, is dropped); `None` for an owned rank.
    pub(crate) fn into_task_comm(self) -> Option<Comm<Endpoint>> {
        match self.kind {
            Kind::Task(c) => Some(c),
            Kind::Owned { .. } => None,
        }
    }

    /// The endpoint, for calls that finish before they return.
    pub(crate) fn ep(&self) -> &Endpoint {
        match &self.kind {
            Kind::Owned { shared, .. } => shared,
            Kind::Task(c) => c.link(),
        }
    }

    /// The endpoint for a request that stays open after its call
    /// (`Isend`/`Irecv`): not in a mailbox task.
    pub(crate) fn handles_ep(&self) -> Result<&Shared, BindingError> {
        match &self.kind {
            Kind::Owned { shared, .. } => Ok(shared),
            Kind::Task(_) => Err(BindingError::TaskRequests),
        }
    }

    /// Makes `sub` (`None`: the rank's own communicator) the one the
    /// running call's collectives and ranks are of; H1618-free error when
    /// it was freed.
    pub(crate) fn select(&mut self, sub: Option<u32>) -> Result<(), BindingError> {
        if let Some(id) = sub {
            if !self.subs.contains_key(&id) {
                return Err(BindingError::CommFreed);
            }
        }
        self.selected = sub;
        Ok(())
    }

    /// Whether the running call is on a sub-communicator.
    pub(crate) fn on_sub(&self) -> bool {
        self.selected.is_some()
    }

    /// Files `sub` (made by `Split`/`Dup`, or an intercommunicator, whose
    /// local communicator is filed beside it under its own id); returns
    /// its id, rank and size (an intercommunicator's: its local rank and
    /// the remote size, the ranks of its point-to-point calls).
    pub(crate) fn add_sub(&mut self, sub: SubComm) -> (u32, u32, u32) {
        let (id, rank, size) = match &sub {
            SubComm::Shared(c) => (c.id(), c.rank(), c.size()),
            SubComm::Task(c) => (c.id(), c.rank(), c.size()),
            SubComm::Inter(ic) => {
                let local = ic.local().id();
                self.subs.insert(local, SubComm::InterLocal(ic.id()));
                (ic.id(), ic.rank(), ic.remote_size())
            }
            SubComm::InterLocal(_) => unreachable!("filed with its intercommunicator"),
        };
        self.subs.insert(id, sub);
        (id, rank, size)
    }

    /// Drops sub-communicator `id` (`Free`); an intercommunicator's local
    /// communicator goes with it.
    pub(crate) fn free_sub(&mut self, id: u32) {
        if let Some(SubComm::Inter(ic)) = self.subs.get(&id) {
            let local = ic.local().id();
            self.subs.remove(&local);
            if self.selected == Some(local) {
                self.selected = None;
            }
        }
        if self.selected == Some(id) {
            self.selected = None;
        }
        self.subs.remove(&id);
    }

    /// H1613 when the running call's communicator is revoked (protocol
    /// §18.8.1): the check of every point-to-point call, which the binding
    /// makes on the endpoint (the collectives' is the Rust `Comm`'s).
    pub(crate) fn live(&mut self) -> Result<(), Fail> {
        let c = self.comm();
        let revoked = both!(&c, k => k.is_revoked());
        if revoked {
            let comm = c.id();
            return Err(Error::from(RecoveryError::CommunicatorRevoked { comm }).into());
        }
        Ok(())
    }

    /// The job rank of rank `r` of the running call's communicator: H1618
    /// when it is not below the communicator's size (the world's ranks go
    /// to the transport as they are, which checks them); H1613 when the
    /// communicator is revoked.
    pub(crate) fn job_rank_of(&mut self, arg: &'static str, r: u32) -> Result<u32, Fail> {
        self.live()?;
        if !self.on_sub() {
            return Ok(r);
        }
        let c = self.comm();
        if r >= c.size() {
            return Err(BindingError::Rank {
                arg,
                got: i64::from(r),
            }
            .into());
        }
        Ok(c.job_rank(r))
    }

    /// A receive's source (`None`: any) as a job rank; any source on every
    /// communicator with HELLO feature bit 3, else only on the job's (as
    /// the Rust API: a message then carries no communicator).
    pub(crate) fn source_to_job(&mut self, s: Option<u32>) -> Result<Option<u32>, Fail> {
        self.live()?;
        match s {
            Some(r) => Ok(Some(self.job_rank_of("source", r)?)),
            None if self.on_sub() && !self.ep().has_p2p_communicators() => {
                Err(Error::from(UsageError::AnySourceOnSubcommunicator).into())
            }
            None => Ok(None),
        }
    }

    /// `st` with its source as a rank of the running call's communicator.
    pub(crate) fn local_status(&mut self, st: WireStatus) -> WireStatus {
        if !self.on_sub() {
            return st;
        }
        let source = self.comm().rank_of_job_rank(st.source).unwrap_or(st.source);
        WireStatus { source, ..st }
    }

    /// The collectives of the running call's communicator.
    pub(crate) fn comm(&mut self) -> CommMut<'_> {
        if let Some(id) = self.selected {
            let id = match self.subs.get(&id) {
                Some(SubComm::InterLocal(i)) => *i,
                _ => id,
            };
            let local = id != self.selected.unwrap_or(id);
            match self.subs.get_mut(&id) {
                Some(SubComm::Shared(c)) => return CommMut::Ref(c),
                Some(SubComm::Task(c)) => return CommMut::Task(c),
                Some(SubComm::Inter(ic)) => {
                    return CommMut::Ref(if local {
                        ic.local_mut()
                    } else {
                        ic.remote_mut()
                    })
                }
                // `select` checked it; `free_sub` unselects.
                Some(SubComm::InterLocal(_)) | None => {}
            }
        }
        match &mut self.kind {
            Kind::Owned {
                coll: Collectives::Plain(c),
                ..
            } => CommMut::Ref(c),
            Kind::Owned {
                coll: Collectives::Ckpt(ck),
                ..
            } => CommMut::Ref(ck.comm()),
            Kind::Task(c) => CommMut::Task(c),
        }
    }

    /// The checkpointer, if the program made one.
    pub(crate) fn checkpointer(&mut self) -> Option<&mut Checkpointer<Shared>> {
        match &mut self.kind {
            Kind::Owned {
                coll: Collectives::Ckpt(ck),
                ..
            } => Some(ck),
            _ => None,
        }
    }

    /// Hands the communicator to a checkpointer built by `make`. On
    /// failure the rank keeps a communicator at the same sequence.
    pub(crate) fn install_checkpointer(
        &mut self,
        make: impl FnOnce(Comm<Shared>) -> Result<Checkpointer<Shared>, Error>,
    ) -> Result<(), Fail> {
        if self.on_sub() {
            return Err(BindingError::SubCheckpointer.into());
        }
        let Kind::Owned { shared, coll, .. } = &mut self.kind else {
            return Err(BindingError::TaskCheckpointer.into());
        };
        let ep = shared.clone();
        if matches!(coll, Collectives::Ckpt(_)) {
            return Ok(());
        }
        let Collectives::Plain(comm) =
            std::mem::replace(coll, Collectives::Plain(Comm::new(ep.clone())))
        else {
            unreachable!("checked above");
        };
        let seq = comm.sequence();
        match make(comm) {
            Ok(ck) => {
                *coll = Collectives::Ckpt(Box::new(ck));
                Ok(())
            }
            Err(e) => {
                let mut c = Comm::new(ep);
                advance(&mut c, seq);
                *coll = Collectives::Plain(c);
                Err(e.into())
            }
        }
    }

    /// The collective sequence reached (protocol §8.1).
    pub(crate) fn sequence(&mut self) -> u64 {
        self.comm().sequence()
    }

    /// Removes the requests whose Python objects were dropped meanwhile.
    pub(crate) fn drop_cancelled(&mut self, cancelled: &std::sync::Mutex<Vec<u64>>) {
        let ids = std::mem::take(
            &mut *cancelled
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for id in ids {
            self.open.remove(&id);
        }
    }

    /// Files an open request; returns its id.
    pub(crate) fn add_open(&mut self, o: Open) -> u64 {
        self.next_id += 1;
        self.open.insert(self.next_id, o);
        self.next_id
    }

    /// Whether the job step is over for this rank: the transport failed,
    /// or the collectives failed (after which every collective fails).
    pub(crate) fn job_over(&mut self) -> bool {
        self.ep().error().is_some() || self.comm().failed()
    }

    /// `e` with whether it ended the job.
    pub(crate) fn fail(&mut self, e: impl Into<Fail>) -> Fail {
        let mut f = e.into();
        f.job_over = self.job_over();
        f
    }

    /// A check only this rank can make (the root's buffers): ends the job
    /// as the Rust API does for its own such checks (protocol §8.4: ABORT
    /// with `reason` and H1618 to every peer; they fail with H1612).
    pub(crate) fn end_job(&mut self, reason: AbortReason, e: BindingError) -> Fail {
        let text = e.to_string();
        self.ep().abort(
            reason,
            e.h_code().number(),
            sperli_wire::abort::Abort::truncate_message(&text),
        );
        self.fail(e)
    }
}

/// Brings `comm` to sequence `seq` without touching the link: a call the
/// Rust API refuses before anything is sent still takes its sequence
/// number (protocol §8.1; `Comm::allreduce_into` with an output of the
/// wrong length). The Rust API has no call to start a communicator at a
/// given sequence; this is how the mailbox server takes over the world
/// communicator (once) and how a failed checkpointer gives it back.
pub(crate) fn advance<L: Peers>(comm: &mut Comm<L>, seq: u64) {
    while comm.sequence() < seq {
        let _ = comm.allreduce_into::<u8>(&[0], &mut [], Reduction::Sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_collective::fake;

    #[test]
    fn advance_counts_calls_without_sending() {
        let got = fake::run(3, |c| {
            let before = c.sequence();
            advance(c, before + 5);
            let after = c.sequence();
            // The ranks are still in step: a real call works.
            let s = c.allreduce_scalar(1u32, Reduction::Sum).unwrap();
            (before, after, s, c.sequence())
        });
        assert_eq!(got, vec![(0, 5, 3, 6); 3]);
    }

    #[test]
    fn an_issued_call_delivers_its_result_once_when_polled() {
        let got = fake::run(3, |c| {
            let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let s = seen.clone();
            let req = c.iallreduce(&[c.rank() + 1], Reduction::Sum).unwrap();
            let Open::Coll(mut p) = Issued::open(req, move |v: Vec<u32>, out| {
                assert!(out.is_none());
                s.lock().unwrap().extend(v);
                Ok(())
            }) else {
                panic!("an issued call is Open::Coll");
            };
            while !p.poll(false, None).unwrap() {
                std::thread::yield_now();
            }
            // Complete: later polls deliver nothing more.
            assert!(p.poll(true, None).unwrap());
            let v = seen.lock().unwrap().clone();
            v
        });
        assert_eq!(got, vec![vec![6]; 3]);
    }

    #[test]
    fn coll_forwards_to_the_comm() {
        let got = fake::run(2, |c| {
            let mut v = vec![0u64; 2];
            if Coll::rank(c) == 0 {
                v = vec![4, 5];
            }
            Coll::bcast_into(c, 0, &mut v).unwrap();
            let s = Coll::allreduce_scalar(c, 1i64, Reduction::Sum).unwrap();
            (v, s, Coll::sequence(c), Coll::failed(c))
        });
        assert_eq!(got, vec![(vec![4, 5], 2, 2, false); 2]);
    }
}
