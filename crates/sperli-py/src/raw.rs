//! The crate's only `unsafe` code: a Python buffer as a Rust slice
//! ([`Region`], [`pair`]), memory that Python hands over and neither
//! PyO3's safe API nor the collectives' can describe. The buffer calls hand
//! numpy memory to the collectives without a copy. A [`Region`] holds the
//! buffer export (which keeps the memory alive and, for `bytearray` and
//! numpy, its size fixed), is built only for a C-contiguous buffer, and
//! gives out `&[T]` / `&mut [T]` only for the seven element types (plain
//! numbers: every bit pattern is a value), for a whole number of aligned
//! elements, and `&mut` only for a writable buffer, through `&mut self`.
//! Two regions may be views of the same memory (`Allreduce(a, a)`): a call
//! that holds a send slice and a receive slice at once takes them from
//! [`pair`], which refuses overlapping memory. The rest is MPI's contract,
//! as in mpi4py: while a call runs (the GIL is released) no other thread
//! touches its buffers.
//!
//! The slots ([`Slot`]) are safe code. An owned communicator's rank holds
//! the endpoint as an `Arc` (its collectives, sub-communicators and open
//! requests, the transport's owned handles, all hold clones), and
//! [`Slot::close`] takes the endpoint back once the rank is dropped. A
//! mailbox task's slot ([`Slot::scoped`]) owns the server's communicator
//! for the handler call: it moves in when the call starts and back to the
//! server when the slot closes (with `replace_with`, which aborts the
//! process should the handler's code panic in between, as the server could
//! not go on without its communicator).

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::buffer::PyUntypedBuffer;
use sperli_collective::{Comm, Element, Endpoint};

use crate::rank::Rank;

// ---- 1. buffers ---------------------------------------------------------

/// The memory of one C-contiguous Python buffer export.
pub(crate) struct Region {
    buf: PyUntypedBuffer,
}

impl Region {
    /// The export as a region; `None` when it is not C-contiguous.
    pub(crate) fn new(buf: PyUntypedBuffer) -> Option<Self> {
        buf.is_c_contiguous().then_some(Self { buf })
    }

    /// Length in bytes.
    pub(crate) fn len_bytes(&self) -> usize {
        self.buf.len_bytes()
    }

    /// Whether the exporter refused writing.
    pub(crate) fn readonly(&self) -> bool {
        self.buf.readonly()
    }

    fn addr(&self) -> usize {
        self.buf.buf_ptr() as usize
    }

    /// Whether the memory starts on a multiple of `T`'s alignment.
    pub(crate) fn aligned<T>(&self) -> bool {
        self.addr() % std::mem::align_of::<T>() == 0
    }

    /// Whether the two regions share a byte (empty ones share none).
    pub(crate) fn overlaps(&self, other: &Region) -> bool {
        let (a, b) = (self.addr(), other.addr());
        let (a_end, b_end) = (a + self.len_bytes(), b + other.len_bytes());
        self.len_bytes() > 0 && other.len_bytes() > 0 && a < b_end && b < a_end
    }

    fn elem_count<T>(&self) -> Option<usize> {
        let w = std::mem::size_of::<T>();
        (self.len_bytes() % w == 0 && self.aligned::<T>()).then(|| self.len_bytes() / w)
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        let len = self.len_bytes();
        if len == 0 {
            return &[];
        }
        // SAFETY: the export (held by `self`) keeps `len` bytes at
        // `buf_ptr` alive, C-contiguous (checked in `new`), for as long as
        // `self` lives; any byte is a valid u8. Writers: `bytes_mut` needs
        // `&mut self`, other regions of the same memory are combined only
        // through `pair`, and other threads keep off (module docs).
        unsafe { std::slice::from_raw_parts(self.buf.buf_ptr() as *const u8, len) }
    }

    /// The elements, or `None` when the bytes are not a whole number of
    /// aligned `T`.
    pub(crate) fn elems<T: Element>(&self) -> Option<&[T]> {
        let n = self.elem_count::<T>()?;
        if n == 0 {
            return Some(&[]);
        }
        // SAFETY: as in `bytes`, plus: `n * size_of::<T>()` bytes, aligned
        // for `T` (checked by `elem_count`); `T` is one of the sealed
        // element types of `buffer::with_dtype!` (the numbers, `Bool8`
        // and the `repr(C)` complex pairs of floats), for which every bit
        // pattern is a value.
        Some(unsafe { std::slice::from_raw_parts(self.buf.buf_ptr() as *const T, n) })
    }

    /// The bytes for writing; `None` for a read-only buffer.
    pub(crate) fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        let len = self.len_bytes();
        if self.readonly() {
            return None;
        }
        if len == 0 {
            return Some(&mut []);
        }
        // SAFETY: as in `bytes`; the exporter allows writing (not
        // read-only), and `&mut self` makes this the only slice of this
        // region.
        Some(unsafe { std::slice::from_raw_parts_mut(self.buf.buf_ptr() as *mut u8, len) })
    }

    /// The elements for writing; `None` for a read-only buffer or bytes
    /// that are not a whole number of aligned `T`.
    pub(crate) fn elems_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        let n = self.elem_count::<T>()?;
        if self.readonly() {
            return None;
        }
        if n == 0 {
            return Some(&mut []);
        }
        // SAFETY: as in `elems` and `bytes_mut`.
        Some(unsafe { std::slice::from_raw_parts_mut(self.buf.buf_ptr() as *mut T, n) })
    }
}

/// Why [`pair`] gives no slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PairError {
    /// The two buffers share memory.
    Overlap,
    /// A buffer is not a whole number of aligned elements.
    Layout,
    /// The receive buffer is read-only.
    ReadOnly,
}

/// A send slice and a receive slice at once, of memory that does not
/// overlap.
pub(crate) fn pair<'a, S: Element, R: Element>(
    send: &'a Region,
    recv: &'a mut Region,
) -> Result<(&'a [S], &'a mut [R]), PairError> {
    if send.overlaps(recv) {
        return Err(PairError::Overlap);
    }
    if recv.readonly() {
        return Err(PairError::ReadOnly);
    }
    let s = send.elems::<S>().ok_or(PairError::Layout)?;
    let r = recv.elems_mut::<R>().ok_or(PairError::Layout)?;
    Ok((s, r))
}

// ---- 2. the slots -------------------------------------------------------

/// Why a slot no longer runs calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gone {
    /// `Finalize` ended the job step (BYE) or the process is exiting.
    Finalized,
    /// A `MailboxServer` took the endpoint over.
    Served,
    /// The mailbox task this communicator belonged to has returned.
    TaskOver,
    /// The endpoint was still shared when the slot closed (a clone of it
    /// outlived the rank: a defect of this binding).
    StillShared,
}

struct Live {
    rank: Rank,
    /// The endpoint, for `close` to take back once the rank (and with it
    /// every clone) is dropped; `None` for a task's communicator, whose
    /// endpoint the mailbox server owns (see `Slot::scoped`).
    owner: Option<Arc<Endpoint>>,
}

/// One communicator's endpoint, collectives, checkpointer and open
/// requests (module docs, part 2).
pub(crate) struct Slot {
    state: Mutex<Result<Live, Gone>>,
    /// Requests dropped while a call held the lock: removed from the rank
    /// at the next call (a drop never waits for a call with the GIL held).
    cancelled: Mutex<Vec<u64>>,
    /// A task slot's communicator once the slot is closed (by
    /// `Finalize`, `serve` or the end of the handler), until
    /// [`Slot::scoped`] hands it back to the mailbox server.
    task_comm: Mutex<Option<Comm<Endpoint>>>,
}

impl Slot {
    /// A slot owning `ep`; `rank` builds the rank over a counted handle
    /// on it.
    pub(crate) fn owned(ep: Endpoint, rank: impl FnOnce(Arc<Endpoint>) -> Rank) -> Self {
        let owner = Arc::new(ep);
        Self {
            state: Mutex::new(Ok(Live {
                rank: rank(owner.clone()),
                owner: Some(owner),
            })),
            cancelled: Mutex::new(Vec::new()),
            task_comm: Mutex::new(None),
        }
    }

    /// Runs `f` on the rank, holding the slot's lock.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Rank) -> R) -> Result<R, Gone> {
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let live = guard.as_mut().map_err(|g| *g)?;
        live.rank.drop_cancelled(&self.cancelled);
        Ok(f(&mut live.rank))
    }

    /// Drops open request `id` now, or at the next call if one runs.
    pub(crate) fn cancel(&self, id: u64) {
        match self.state.try_lock() {
            Ok(mut g) => {
                if let Ok(live) = g.as_mut() {
                    live.rank.open.remove(&id);
                }
            }
            Err(_) => self
                .cancelled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(id),
        }
    }

    /// Ends the slot with `why`: drops the rank (open requests are
    /// cancelled) and returns the owned endpoint with the collective
    /// sequence reached, or `None` for a task's communicator (kept for
    /// [`Slot::scoped`], which gives it back to the mailbox server). Later
    /// calls fail with `why`; a slot already gone returns its reason.
    pub(crate) fn close(&self, why: Gone) -> Result<Option<(Endpoint, u64)>, Gone> {
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let live = std::mem::replace(&mut *guard, Err(why))?;
        let Live { mut rank, owner } = live;
        let Some(owner) = owner else {
            *self
                .task_comm
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = rank.into_task_comm();
            return Ok(None);
        };
        let seq = rank.sequence();
        // Drops every clone of the endpoint's `Arc` (the collectives, the
        // sub-communicators and their progress threads, which end once
        // their issued calls are through).
        drop(rank);
        match Arc::try_unwrap(owner) {
            Ok(ep) => Ok(Some((ep, seq))),
            Err(_still_shared) => Err(Gone::StillShared),
        }
    }

    /// Runs `f` with a slot that owns `comm` (a mailbox task's
    /// communicator: the server's) for the call; afterwards the slot is
    /// closed with [`Gone::TaskOver`] and `comm` is the server's again, so
    /// a Python communicator kept past the handler only raises.
    pub(crate) fn scoped<R>(comm: &mut Comm<Endpoint>, f: impl FnOnce(&Arc<Slot>) -> R) -> R {
        replace_with::replace_with_or_abort_and_return(comm, |comm| {
            let slot = Arc::new(Slot {
                state: Mutex::new(Ok(Live {
                    rank: Rank::task(comm),
                    owner: None,
                })),
                cancelled: Mutex::new(Vec::new()),
                task_comm: Mutex::new(None),
            });
            let out = f(&slot);
            let _ = slot.close(Gone::TaskOver);
            let back = slot
                .task_comm
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            match back {
                Some(comm) => (out, comm),
                // A task slot's communicator is in its rank until the
                // first `close`, which puts it here; nothing else takes it.
                None => unreachable!("a closed task slot keeps its communicator"),
            }
        })
    }
}
