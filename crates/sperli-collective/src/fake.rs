//! An in-memory [`Peers`] implementation for N ranks in one process, for
//! tests and doctests (protocol §8; ABORT semantics of protocol §7.5).
//!
//! Each rank has a mailbox with one FIFO queue per sending rank (frames of
//! one "connection" arrive in the order sent, early frames are kept until
//! taken: protocol §8.8). [`Peers::abort`] puts the ABORT into every other
//! rank's mailbox; from then on their pending and later calls fail with
//! H1612 [`Error::AbortedByPeer`] carrying the originator's rank, reason and
//! code. A rank whose link is dropped counts as closed without BYE (H1613)
//! for receives that find nothing queued, and a receive that waits longer
//! than the silence limit fails with H1613, so no test hangs.
//!
//! Misbehaviour for tests: [`FakePeers::set_send_hook`] rewrites, drops or
//! multiplies every frame this rank sends (forged headers, truncated data,
//! wrong sequence); [`FakePeers::inject`] sends raw bytes unchecked.
//!
//! Checkpoint and RESUME frames ([`Peers::send_ckpt`], [`Peers::recv_ckpt`])
//! travel in a queue of their own per sender, so sperli-ckpt's checkpoint
//! and resume run on fake links too; [`FakePeers::inject_ckpt`] forges one.
//!
//! Recovery (feature bit 5, protocol §18) is the test's to stage: it sets
//! the membership a rank's [`Peers::recover`] and [`Peers::membership`]
//! return ([`FakePeers::set_membership`], the launcher's record as that
//! rank would apply it), and reads the COMMIT epoch the rank would report
//! ([`FakePeers::best_commit`], §18.4).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sperli_transport::Recovered;

use sperli_wire::abort::AbortReason;
use sperli_wire::communicator::take_earliest;
use sperli_wire::error::{FrameError, LossCause};
use sperli_wire::limits::{FEATURES_IMPLEMENTED, FEATURE_COMMUNICATORS, FEATURE_V1_CORE};
use sperli_wire::payload::Payload;
use sperli_wire::Error;

use crate::comm::Comm;
use crate::peers::{CkptFrame, Peers};

/// The default silence limit of a fake receive (generous: debug builds of
/// large tests are slow).
pub const DEFAULT_SILENCE: Duration = Duration::from_secs(60);

/// A send hook: gets the target rank and the payload about to be sent,
/// returns the payloads to deliver instead (none to drop it, several to
/// add frames).
pub type SendHook = Box<dyn FnMut(u32, Vec<u8>) -> Vec<Vec<u8>> + Send>;

#[derive(Debug, Clone)]
struct AbortNote {
    from: u32,
    reason: u16,
    code: u32,
    message: String,
}

impl AbortNote {
    fn error(&self) -> Error {
        Error::AbortedByPeer {
            from: self.from,
            reason: self.reason,
            code: self.code,
            message: self.message.clone(),
        }
    }
}

#[derive(Debug)]
struct BoxState {
    /// COLLECTIVE payloads with their header tag (the communicator id,
    /// protocol §15.2), one queue per sender.
    queues: Vec<VecDeque<(u32, Vec<u8>)>>,
    /// Checkpoint and RESUME frames, one queue per sender (kept apart from
    /// the COLLECTIVE payloads, as the transport keeps them).
    ckpt: Vec<VecDeque<CkptFrame>>,
    /// The first ABORT this rank received, or its own (then `from` is itself).
    abort: Option<AbortNote>,
    closed: Vec<bool>,
}

#[derive(Debug)]
struct Mailbox {
    state: Mutex<BoxState>,
    cv: Condvar,
}

impl Mailbox {
    fn lock(&self) -> MutexGuard<'_, BoxState> {
        // A panicking test thread must not poison the others' mailboxes.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One rank's end of an in-memory job (see the module docs).
///
/// ```
/// use sperli_collective::{fake::FakePeers, Peers};
/// let links = FakePeers::job(2);
/// links[0].send_collective(1, &[1, 2, 3]).unwrap();
/// assert_eq!(links[1].recv_collective(0).unwrap(), vec![1, 2, 3]);
/// ```
pub struct FakePeers {
    rank: u32,
    size: u32,
    boxes: Arc<Vec<Mailbox>>,
    hook: Mutex<Option<SendHook>>,
    silence: Duration,
    /// The job's negotiated HELLO features as this rank sees them
    /// (protocol §7.1.1; see [`FakePeers::job_with_features`]).
    features: u64,
    /// What `recover` and `membership` return (`None`: the whole job,
    /// epoch 0); see [`FakePeers::set_membership`].
    membership: Mutex<Option<Recovered>>,
    /// The last `set_best_commit`.
    best_commit: AtomicU64,
}

impl std::fmt::Debug for FakePeers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakePeers")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl FakePeers {
    /// The links of a job of `size` ranks (1..=4096), index = rank. Every
    /// rank announces the features this implementation has
    /// ([`FEATURES_IMPLEMENTED`]), as the real transport does by default.
    pub fn job(size: u32) -> Vec<FakePeers> {
        Self::job_with_features(&vec![FEATURES_IMPLEMENTED; size as usize])
    }

    fn job_of(size: u32, features: u64) -> Vec<FakePeers> {
        assert!((1..=4096).contains(&size), "size must be 1..=4096");
        let n = size as usize;
        let boxes: Arc<Vec<Mailbox>> = Arc::new(
            (0..n)
                .map(|_| Mailbox {
                    state: Mutex::new(BoxState {
                        queues: vec![VecDeque::new(); n],
                        ckpt: vec![VecDeque::new(); n],
                        abort: None,
                        closed: vec![false; n],
                    }),
                    cv: Condvar::new(),
                })
                .collect(),
        );
        (0..size)
            .map(|rank| FakePeers {
                rank,
                size,
                boxes: Arc::clone(&boxes),
                hook: Mutex::new(None),
                silence: DEFAULT_SILENCE,
                features,
                membership: Mutex::new(None),
                best_commit: AtomicU64::new(0),
            })
            .collect()
    }

    // ---- HELLO features (pipelined collectives, protocol §7.1.1, §14) -----

    /// The links of a job whose rank r announces `announced[r]` in its
    /// HELLO (bit 0 is always added); every rank then sees the AND of all
    /// of them, as after a real set-up (protocol §7.1.1). A job with one
    /// v1-only rank (`FEATURE_V1_CORE`) runs every call on the v1 star.
    ///
    /// ```
    /// use sperli_collective::{fake::FakePeers, Peers};
    /// use sperli_wire::limits::{FEATURE_PIPELINED, FEATURE_V1_CORE};
    /// let both = FEATURE_V1_CORE | FEATURE_PIPELINED;
    /// let links = FakePeers::job_with_features(&[both, FEATURE_V1_CORE, both]);
    /// assert!(links.iter().all(|l| l.features() == FEATURE_V1_CORE));
    /// ```
    pub fn job_with_features(announced: &[u64]) -> Vec<FakePeers> {
        let and = announced.iter().fold(u64::MAX, |a, f| a & f) | FEATURE_V1_CORE;
        Self::job_of(announced.len() as u32, and)
    }

    /// Overrides the features this one rank believes the job negotiated
    /// (a misbehaving rank: e.g. one that sends pipelined frames in a job
    /// without bit 1).
    pub fn set_features(&mut self, features: u64) {
        self.features = features;
    }

    /// Sets the membership this rank's [`Peers::recover`] and
    /// [`Peers::membership`] return from now on: a test's stand-in for the
    /// launcher's MEMBERSHIP record as this rank applies it (protocol
    /// §18.3). Nothing else changes: the mailboxes stay as they are.
    ///
    /// ```
    /// use sperli_collective::{fake::FakePeers, Peers, Recovered};
    /// let links = FakePeers::job(2);
    /// let mut m = Recovered::whole_job(2);
    /// m.epoch = 2;
    /// links[1].set_membership(m.clone());
    /// assert_eq!(links[1].recover().unwrap(), m);
    /// assert_eq!(links[0].membership().epoch, 0);
    /// ```
    pub fn set_membership(&self, m: Recovered) {
        *self.membership.lock().unwrap_or_else(|e| e.into_inner()) = Some(m);
    }

    /// The COMMIT epoch this rank last noted with [`Peers::set_best_commit`]
    /// (0 before any): what its REPORT would carry (protocol §18.4).
    pub fn best_commit(&self) -> u64 {
        self.best_commit.load(Ordering::SeqCst)
    }

    /// Sets how long a receive waits before it reports the peer lost (H1613).
    pub fn set_silence(&mut self, limit: Duration) {
        self.silence = limit;
    }

    /// Makes this rank misbehave: every payload it sends goes through
    /// `hook(to, payload)` and the returned payloads are delivered instead.
    ///
    /// ```
    /// use sperli_collective::{fake::FakePeers, Peers};
    /// let links = FakePeers::job(2);
    /// links[0].set_send_hook(|_to, mut p| { p.truncate(1); vec![p] });
    /// links[0].send_collective(1, &[1, 2, 3]).unwrap();
    /// assert_eq!(links[1].recv_collective(0).unwrap(), vec![1]);
    /// ```
    pub fn set_send_hook(&self, hook: impl FnMut(u32, Vec<u8>) -> Vec<Vec<u8>> + Send + 'static) {
        *self.hook.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(hook));
    }

    /// Removes the send hook.
    pub fn clear_send_hook(&self) {
        *self.hook.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Delivers raw `payload` to `to` as if it were a COLLECTIVE payload
    /// from this rank, bypassing the hook and every check.
    pub fn inject(&self, to: u32, payload: Vec<u8>) {
        self.deliver(to, 0, payload);
    }

    /// As [`FakePeers::inject`] with communicator id `tag` in the frame's
    /// tag (protocol §15.2).
    pub fn inject_tagged(&self, to: u32, tag: u32, payload: Vec<u8>) {
        self.deliver(to, tag, payload);
    }

    fn deliver(&self, to: u32, tag: u32, payload: Vec<u8>) {
        let b = &self.boxes[to as usize];
        b.lock().queues[self.rank as usize].push_back((tag, payload));
        b.cv.notify_all();
    }

    /// Sends `payload` with `tag` through the hook.
    fn send_tagged_vec(&self, to: u32, tag: u32, payload: Vec<u8>) -> Result<(), Error> {
        assert!(to < self.size && to != self.rank, "bad target {to}");
        self.check_send(to)?;
        let frames = match self.hook.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            Some(h) => h(to, payload),
            None => vec![payload],
        };
        for f in frames {
            self.deliver(to, tag, f);
        }
        Ok(())
    }

    fn own(&self) -> &Mailbox {
        &self.boxes[self.rank as usize]
    }

    /// Waits until `take` finds something from `from` in this rank's
    /// mailbox, the job failed (H1612), `from` closed (H1613) or the
    /// silence limit passed (H1613).
    fn wait_take<T>(
        &self,
        from: u32,
        mut take: impl FnMut(&mut BoxState) -> Option<T>,
    ) -> Result<T, Error> {
        let deadline = Instant::now() + self.silence;
        let b = self.own();
        let mut st = b.lock();
        loop {
            if let Some(a) = &st.abort {
                return Err(a.error());
            }
            if let Some(p) = take(&mut st) {
                return Ok(p);
            }
            if st.closed[from as usize] {
                return Err(Error::PeerLost {
                    peer: from,
                    cause: LossCause::ClosedWithoutBye,
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::PeerLost {
                    peer: from,
                    cause: LossCause::Silence {
                        silent_ms: self.silence.as_millis() as u64,
                        limit_ms: self.silence.as_millis() as u64,
                    },
                });
            }
            st =
                b.cv.wait_timeout(st, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
        }
    }

    /// As [`FakePeers::wait_take`] where `take` may fail.
    fn wait_take_result<T>(
        &self,
        from: u32,
        take: impl FnMut(&mut BoxState) -> Option<Result<T, Error>>,
    ) -> Result<T, Error> {
        self.wait_take(from, take)?
    }

    /// Whether a send to `to` may go ahead: the job has not failed and
    /// `to` has not closed.
    fn check_send(&self, to: u32) -> Result<(), Error> {
        let st = self.own().lock();
        if let Some(a) = &st.abort {
            return Err(a.error());
        }
        if st.closed[to as usize] {
            return Err(Error::PeerLost {
                peer: to,
                cause: LossCause::ClosedWithoutBye,
            });
        }
        Ok(())
    }
}

impl Peers for FakePeers {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        self.send_collective_vec(to, payload.to_vec())
    }

    fn send_collective_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        self.send_tagged_vec(to, 0, payload)
    }

    fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
        self.recv_collective_where(from, 0, &|_| Ok(()))
    }

    fn send_collective_tagged(&self, to: u32, tag: u32, payload: &[u8]) -> Result<(), Error> {
        if tag != 0 && self.features & FEATURE_COMMUNICATORS == 0 {
            return Err(sperli_wire::error::UsageError::NoCommunicators.into());
        }
        self.send_tagged_vec(to, tag, payload.to_vec())
    }

    fn recv_collective_where(
        &self,
        from: u32,
        tag: u32,
        pass: &dyn Fn(u32) -> Result<(), Error>,
    ) -> Result<Vec<u8>, Error> {
        assert!(from < self.size && from != self.rank, "bad source {from}");
        // Protocol §15.4: the earliest frame with `tag`; the others stay,
        // each shown to `pass`.
        self.wait_take_result(from, |st| {
            take_earliest(&mut st.queues[from as usize], tag, pass)
        })
    }

    // ---- HELLO features (pipelined collectives, protocol §7.1.1, §14) -----
    fn features(&self) -> u64 {
        self.features
    }

    fn abort(&self, reason: AbortReason, code: u32, message: &str) {
        let note = AbortNote {
            from: self.rank,
            reason: reason.code(),
            code,
            message: message.to_owned(),
        };
        for (i, b) in self.boxes.iter().enumerate() {
            let mut st = b.lock();
            // The first ABORT counts; a receiver forwards nothing.
            if st.abort.is_none() || i == self.rank as usize {
                st.abort = Some(note.clone());
            }
            drop(st);
            b.cv.notify_all();
        }
    }

    // ---- Checkpoint and RESUME frames (protocol §7.7-§7.11) ----

    fn send_ckpt(&self, to: u32, epoch: u64, payload: &Payload<'_>) -> Result<(), Error> {
        assert!(to < self.size, "bad target {to}");
        let frame_type = payload.frame_type();
        if !CkptFrame::carries(frame_type) {
            return Err(FrameError::Unexpected {
                frame_type,
                when: "through send_ckpt (checkpoint and RESUME frames only)",
            }
            .into());
        }
        self.check_send(to)?;
        let mut bytes = Vec::new();
        payload.encode(&mut bytes);
        self.inject_ckpt(
            to,
            CkptFrame {
                frame_type,
                epoch,
                payload: bytes,
            },
        );
        Ok(())
    }

    fn recv_ckpt(&self, from: u32) -> Result<CkptFrame, Error> {
        assert!(from < self.size, "bad source {from}");
        self.wait_take(from, |st| st.ckpt[from as usize].pop_front())
    }

    fn job_error(&self) -> Option<Error> {
        self.own().lock().abort.as_ref().map(AbortNote::error)
    }

    // ---- Recovery (feature bit 5, protocol §18), as the test stages it ----

    fn recover(&self) -> Result<Recovered, Error> {
        Ok(self.membership())
    }

    fn membership(&self) -> Recovered {
        self.membership
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| Recovered::whole_job(self.size))
    }

    fn set_best_commit(&self, epoch: u64) {
        self.best_commit.store(epoch, Ordering::SeqCst);
    }
}

impl FakePeers {
    /// Delivers `frame` to `to` as if it were a checkpoint or RESUME frame
    /// from this rank, bypassing every check (a forged frame for tests).
    pub fn inject_ckpt(&self, to: u32, frame: CkptFrame) {
        let b = &self.boxes[to as usize];
        b.lock().ckpt[self.rank as usize].push_back(frame);
        b.cv.notify_all();
    }
}

impl Drop for FakePeers {
    fn drop(&mut self) {
        for (i, b) in self.boxes.iter().enumerate() {
            if i != self.rank as usize {
                b.lock().closed[self.rank as usize] = true;
                b.cv.notify_all();
            }
        }
    }
}

/// Runs `f` on every rank of a fresh in-memory job of `size` ranks, each on
/// its own thread, and returns the results in rank order. A panic on any
/// rank is re-raised.
///
/// ```
/// use sperli_collective::fake;
/// let ranks = fake::run(3, |c| (c.rank(), c.size()));
/// assert_eq!(ranks, vec![(0, 3), (1, 3), (2, 3)]);
/// ```
pub fn run<R: Send>(size: u32, f: impl Fn(&mut Comm<FakePeers>) -> R + Sync) -> Vec<R> {
    run_links(FakePeers::job(size), f)
}

/// As [`run`], on links prepared by the caller (e.g. with a send hook or
/// another silence limit, or wrapped in a test's own [`Peers`]
/// implementation).
pub fn run_links<L: Peers + Send, R: Send>(
    links: Vec<L>,
    f: impl Fn(&mut Comm<L>) -> R + Sync,
) -> Vec<R> {
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = links
            .into_iter()
            .map(|link| {
                std::thread::Builder::new()
                    .name(format!("rank-{}", link.rank()))
                    .spawn_scoped(s, move || f(&mut Comm::new(link)))
                    .expect("spawn rank thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}
