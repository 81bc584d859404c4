//! What the calls of one communicator share behind `&self`: the sequence
//! count (protocol §8.1), the error that ended the job, the pipelined chunk
//! length, and the bookkeeping of non-blocking collectives (how many are
//! issued and not yet through, how many requests are open).
//!
//! Every field is behind an atomic or a mutex, so the communicator's
//! progress thread (see [`crate::nonblocking`]) works on the same state as
//! the program's thread. The rule that keeps sequence numbers in issue
//! order (protocol §8.9 "a rank puts its calls on the wire in the order it
//! issued them"): a blocking call on the program's thread first waits until
//! every non-blocking call issued before it is through
//! ([`State::wait_idle`]); the progress thread runs the non-blocking calls
//! one after another, in the order they were issued.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use sperli_wire::Error;

/// Locks `m`, taking over a poisoned lock (every value kept here is
/// consistent at every point a panic could leave it).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared state of one communicator.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Calls made so far: the sequence number of the last one.
    seq: AtomicU64,
    /// The error that ended the job on this rank, if one did.
    failed: Mutex<Option<Error>>,
    /// A chunk length for the pipelined streams this rank starts.
    chunk: Mutex<Option<usize>>,
    /// Non-blocking calls issued and not yet through on the progress thread.
    pending: Mutex<u64>,
    /// Signalled whenever `pending` drops.
    through: Condvar,
    /// Non-blocking requests not yet completed by `wait`/`test` or dropped.
    open: AtomicU64,
    /// Failed members the program acknowledged (ULFM's `ack_failed`).
    acked: AtomicU32,
}

impl State {
    /// Takes the next sequence number.
    pub(crate) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Counts `n` calls that were not made.
    pub(crate) fn skip(&self, n: u64) {
        self.seq.fetch_add(n, Ordering::SeqCst);
    }

    /// Calls made so far.
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// The error that ended the job, if one did.
    pub(crate) fn failure(&self) -> Option<Error> {
        lock(&self.failed).clone()
    }

    /// Remembers the error that ended the job (the first one stays).
    pub(crate) fn set_failed(&self, e: &Error) {
        lock(&self.failed).get_or_insert_with(|| e.clone());
    }

    /// The chunk length set by `set_pipeline_chunk`.
    pub(crate) fn chunk(&self) -> Option<usize> {
        *lock(&self.chunk)
    }

    /// Sets the chunk length.
    pub(crate) fn set_chunk(&self, c: Option<usize>) {
        *lock(&self.chunk) = c;
    }

    /// One more non-blocking call issued.
    pub(crate) fn issued(&self) {
        *lock(&self.pending) += 1;
        self.open.fetch_add(1, Ordering::SeqCst);
    }

    /// A non-blocking call is through (its result is in its request).
    pub(crate) fn through(&self) {
        let mut p = lock(&self.pending);
        *p = p.saturating_sub(1);
        self.through.notify_all();
    }

    /// Waits until every non-blocking call issued so far is through.
    pub(crate) fn wait_idle(&self) {
        let mut p = lock(&self.pending);
        while *p > 0 {
            p = self.through.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Non-blocking calls issued and not yet through.
    pub(crate) fn pending(&self) -> u64 {
        *lock(&self.pending)
    }

    /// A request was completed (by `wait` or `test`) or dropped.
    pub(crate) fn closed(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }

    /// Open requests.
    pub(crate) fn open(&self) -> u64 {
        self.open.load(Ordering::SeqCst)
    }

    /// Acknowledges `n` failed members (never fewer than before); the
    /// number acknowledged now.
    pub(crate) fn acknowledge(&self, n: u32) -> u32 {
        self.acked.fetch_max(n, Ordering::SeqCst).max(n)
    }
}
