//! [`Rank`]: what every call of a Python communicator runs on, inside
//! [`Slot::with`](crate::raw::Slot::with): the endpoint (point-to-point),
//! the collectives (a [`Comm`] over the endpoint, or the [`Checkpointer`]
//! that owns it once the program made one), the open requests of
//! `Isend`/`Irecv`, and the job keys a checkpointer needs.

use std::collections::HashMap;

use sperli_ckpt::{Checkpointer, JobKeys};
use sperli_collective::{Comm, Endpoint, Link, Reduction};
use sperli_transport::{RecvHandle, SendHandle};
use sperli_wire::abort::AbortReason;
use sperli_wire::Error;

use crate::errors::{BindingError, Cause, Fail};

/// The collectives of a rank: a plain communicator, or the checkpointer
/// that owns it.
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

/// One rank's state behind a Python communicator (see the module docs).
pub(crate) struct Rank<'e> {
    /// The transport endpoint.
    pub(crate) ep: &'e Endpoint,
    coll: Collectives<'e>,
    /// Open requests by id.
    pub(crate) open: HashMap<u64, Open<'e>>,
    next_id: u64,
    /// The job keys from the job description (rank 0: with the secret
    /// key), or why there are none; only a checkpointer takes them.
    pub(crate) keys: Result<JobKeys, Cause>,
}

impl<'e> Rank<'e> {
    /// A rank over `ep` with no collective call made yet.
    pub(crate) fn new(ep: &'e Endpoint, keys: Result<JobKeys, Cause>) -> Self {
        Self {
            ep,
            coll: Collectives::Plain(Comm::new(ep)),
            open: HashMap::new(),
            next_id: 0,
            keys,
        }
    }

    /// A rank over `ep` whose collectives continue at sequence `seq` (a
    /// mailbox task's communicator: no checkpointer).
    pub(crate) fn at_sequence(ep: &'e Endpoint, seq: u64) -> Self {
        let mut comm = Comm::new(ep);
        advance(&mut comm, seq);
        Self {
            ep,
            coll: Collectives::Plain(comm),
            open: HashMap::new(),
            next_id: 0,
            keys: Err(Cause::Binding(BindingError::TaskCheckpointer)),
        }
    }

    /// The collectives.
    pub(crate) fn comm(&mut self) -> &mut Comm<&'e Endpoint> {
        match &mut self.coll {
            Collectives::Plain(c) => c,
            Collectives::Ckpt(ck) => ck.comm(),
        }
    }

    /// The checkpointer, if the program made one.
    pub(crate) fn checkpointer(&mut self) -> Option<&mut Checkpointer<&'e Endpoint>> {
        match &mut self.coll {
            Collectives::Plain(_) => None,
            Collectives::Ckpt(ck) => Some(ck),
        }
    }

    /// Hands the communicator to a checkpointer built by `make`. On
    /// failure the rank keeps a communicator at the same sequence.
    pub(crate) fn install_checkpointer(
        &mut self,
        make: impl FnOnce(Comm<&'e Endpoint>) -> Result<Checkpointer<&'e Endpoint>, Error>,
    ) -> Result<(), Error> {
        if matches!(self.coll, Collectives::Ckpt(_)) {
            return Ok(());
        }
        let seq = self.sequence();
        let Collectives::Plain(comm) =
            std::mem::replace(&mut self.coll, Collectives::Plain(Comm::new(self.ep)))
        else {
            unreachable!("checked above");
        };
        match make(comm) {
            Ok(ck) => {
                self.coll = Collectives::Ckpt(Box::new(ck));
                Ok(())
            }
            Err(e) => {
                let mut c = Comm::new(self.ep);
                advance(&mut c, seq);
                self.coll = Collectives::Plain(c);
                Err(e)
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
        self.ep.error().is_some() || self.comm().failure().is_some()
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
        self.ep.abort(
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
/// given sequence; this is how a task's communicator and the mailbox
/// server stay in step.
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
}
