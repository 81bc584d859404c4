//! [`Rank`]: what every call of a Python communicator runs on, inside
//! [`Slot::with`](crate::raw::Slot::with): the endpoint (point-to-point),
//! the collectives ([`Rank::comm`]: a [`Comm`] over the endpoint, the
//! [`Checkpointer`] that owns it once the program made one, or, in a
//! mailbox task, the server's own communicator), the open requests of
//! `Isend`/`Irecv`, and the job keys a checkpointer needs.

use std::collections::HashMap;

use sperli_ckpt::{Checkpointer, JobKeys};
use sperli_collective::vcoll::Blocks;
use sperli_collective::{Comm, Element, Endpoint, Link, Reduction};
use sperli_transport::{RecvHandle, SendHandle};
use sperli_wire::abort::AbortReason;
use sperli_wire::Error;

use crate::errors::{BindingError, Cause, Fail};
use crate::raw::TaskComm;

/// The collectives of an owned rank: a plain communicator, or the
/// checkpointer that owns it.
pub(crate) enum Collectives<'e> {
    /// Before any checkpointer.
    Plain(Comm<&'e Endpoint>),
    /// After `sperli.Checkpointer(comm)`.
    Ckpt(Box<Checkpointer<&'e Endpoint>>),
}

/// An open request of `Isend`/`Irecv` (and their object forms).
pub(crate) enum Open<'e> {
    /// A started send.
    Send(SendHandle<'e>),
    /// A posted receive.
    Recv(RecvHandle<'e>),
}

enum Kind<'e> {
    /// A communicator that owns its endpoint (the world).
    Owned {
        ep: &'e Endpoint,
        coll: Collectives<'e>,
    },
    /// A mailbox task's: the server's communicator, lent for the handler.
    Task(TaskComm),
}

/// One rank's state behind a Python communicator (see the module docs).
pub(crate) struct Rank<'e> {
    kind: Kind<'e>,
    /// Open requests by id.
    pub(crate) open: HashMap<u64, Open<'e>>,
    next_id: u64,
    /// The job keys from the job description (rank 0: with the secret
    /// key), or why there are none; only a checkpointer takes them.
    pub(crate) keys: Result<JobKeys, Cause>,
}

/// The collectives of one call: [`Rank::comm`].
pub(crate) enum CommMut<'c, 'e> {
    /// Over the rank's own `&Endpoint`.
    Ref(&'c mut Comm<&'e Endpoint>),
    /// A mailbox server's communicator.
    Task(&'c mut Comm<Endpoint>),
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

        impl<L: Link> Coll for Comm<L> {
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

        impl Coll for CommMut<'_, '_> {
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
    /// `Comm::bcast_large`.
    fn bcast_large<T>(&mut self, root: u32, buf: &mut Vec<T>) -> Result<(), Error>;
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
}

impl<'e> Rank<'e> {
    /// A rank over `ep` with no collective call made yet.
    pub(crate) fn new(ep: &'e Endpoint, keys: Result<JobKeys, Cause>) -> Self {
        Self {
            kind: Kind::Owned {
                ep,
                coll: Collectives::Plain(Comm::new(ep)),
            },
            open: HashMap::new(),
            next_id: 0,
            keys,
        }
    }

    /// A mailbox task's rank: the collectives are the server's.
    pub(crate) fn task(comm: TaskComm) -> Self {
        Self {
            kind: Kind::Task(comm),
            open: HashMap::new(),
            next_id: 0,
            keys: Err(Cause::Binding(BindingError::TaskCheckpointer)),
        }
    }

    /// The endpoint, for calls that finish before they return.
    pub(crate) fn ep(&self) -> &Endpoint {
        match &self.kind {
            Kind::Owned { ep, .. } => ep,
            Kind::Task(t) => t.get().link(),
        }
    }

    /// The endpoint for a request that stays open after its call
    /// (`Isend`/`Irecv`): not in a mailbox task.
    pub(crate) fn handles_ep(&self) -> Result<&'e Endpoint, BindingError> {
        match &self.kind {
            Kind::Owned { ep, .. } => Ok(ep),
            Kind::Task(_) => Err(BindingError::TaskRequests),
        }
    }

    /// The collectives.
    pub(crate) fn comm(&mut self) -> CommMut<'_, 'e> {
        match &mut self.kind {
            Kind::Owned {
                coll: Collectives::Plain(c),
                ..
            } => CommMut::Ref(c),
            Kind::Owned {
                coll: Collectives::Ckpt(ck),
                ..
            } => CommMut::Ref(ck.comm()),
            Kind::Task(t) => CommMut::Task(t.get_mut()),
        }
    }

    /// The checkpointer, if the program made one.
    pub(crate) fn checkpointer(&mut self) -> Option<&mut Checkpointer<&'e Endpoint>> {
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
        make: impl FnOnce(Comm<&'e Endpoint>) -> Result<Checkpointer<&'e Endpoint>, Error>,
    ) -> Result<(), Fail> {
        let Kind::Owned { ep, coll } = &mut self.kind else {
            return Err(BindingError::TaskCheckpointer.into());
        };
        let ep: &'e Endpoint = ep;
        if matches!(coll, Collectives::Ckpt(_)) {
            return Ok(());
        }
        let Collectives::Plain(comm) = std::mem::replace(coll, Collectives::Plain(Comm::new(ep)))
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
    pub(crate) fn add_open(&mut self, o: Open<'e>) -> u64 {
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
pub(crate) fn advance<L: Link>(comm: &mut Comm<L>, seq: u64) {
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
