//! [`Comm`], a rank's communicator over a [`Peers`] implementation, and
//! what every call shares: the sequence count, the job's failure, sending and taking
//! collective frames with their header checks (protocol §8; the element
//! types of §8.3, early frames of §8.8, the receivers of bcast and scatter
//! that do not know the length, §8.5). The calls themselves are in
//! `collectives` (typed, public), `star` (the v1 star at byte level) and
//! `pipeline` (feature bit 1).
//!
//! Each call takes the next sequence number first, so a call that fails,
//! even one refused before anything is sent, still counts (protocol §8.1).
//! Checks every rank can make alone refuse the call with H1618 before
//! anything is sent and the job goes on; checks only one rank can make end
//! the job with ABORT (protocol §8.4). After a job-ending error every later
//! call fails with the same error without touching the link.
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
use sperli_wire::error::{ArgumentError, FrameError, MismatchError};
use sperli_wire::limits::{COLLECTIVE_HEADER_LEN, FEATURE_COMMUNICATORS, MAX_COLLECTIVE_DATA};
use sperli_wire::pipeline::{Body, CollectivePayload};
use sperli_wire::{Error, FrameType};

use crate::communicators::{Group, Registry};
use crate::element::Element;
use crate::nonblocking::Progress;
use crate::peers::Peers;
use crate::state::State;

const H: usize = COLLECTIVE_HEADER_LEN;

/// What a frame answering one call must carry (protocol §8.6).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call {
    pub(crate) op: Operation,
    pub(crate) element_type: u8,
    pub(crate) reduction: u8,
    pub(crate) root: u32,
    pub(crate) seq: u64,
    /// This rank's length of the call in bytes (its contribution or block;
    /// the root's data for bcast; 0 where no rank knows one), for the
    /// shape check of protocol §14.4.
    pub(crate) len: usize,
}

impl Call {
    pub(crate) fn header(&self, phase: Phase) -> [u8; 16] {
        self.pheader(phase, self.root).to_bytes()
    }

    /// The collective header of this call in `phase` with `root_field` in
    /// the root field (protocol §14.2: a block for allgather and
    /// reduce_scatter).
    pub(crate) fn pheader(&self, phase: Phase, root_field: u32) -> CollectiveHeader {
        CollectiveHeader {
            operation: self.op,
            element_type: self.element_type,
            reduction: self.reduction,
            phase,
            root: root_field,
            sequence: self.seq,
        }
    }
}

/// The data of a call as little-endian bytes: raw bytes, or elements
/// ([`Elems`]) converted straight into the payload buffer, so a typed call
/// copies the user's data once (no intermediate byte vector).
pub(crate) trait Src {
    /// Length in bytes.
    fn byte_len(&self) -> usize;
    /// Appends bytes `range` (on element boundaries) to `out`.
    fn put(&self, range: Range<usize>, out: &mut Vec<u8>);
    /// Bytes `range` (on element boundaries) without a copy, where the
    /// data already is little-endian bytes in memory.
    fn slice(&self, range: Range<usize>) -> Option<&[u8]>;
}

impl Src for [u8] {
    fn byte_len(&self) -> usize {
        self.len()
    }
    fn put(&self, range: Range<usize>, out: &mut Vec<u8>) {
        out.extend_from_slice(&self[range]);
    }
    fn slice(&self, range: Range<usize>) -> Option<&[u8]> {
        Some(&self[range])
    }
}

/// Elements of type `T` as a [`Src`].
pub(crate) struct Elems<'a, T>(pub(crate) &'a [T]);

impl<T: Element> Src for Elems<'_, T> {
    fn byte_len(&self) -> usize {
        self.0.len() * T::WIDTH
    }
    fn put(&self, range: Range<usize>, out: &mut Vec<u8>) {
        T::extend_le(&self.0[range.start / T::WIDTH..range.end / T::WIDTH], out);
    }
    fn slice(&self, range: Range<usize>) -> Option<&[u8]> {
        T::le_bytes(&self.0[range.start / T::WIDTH..range.end / T::WIDTH])
    }
}

/// A communicator: one rank's view of the job's collectives (protocol §8).
///
/// Wraps a [`Peers`] implementation and counts this rank's collective
/// calls (the `sequence` of protocol §8.1). Every rank must make the same
/// calls in the same order.
///
/// Every call takes `&self`, so a posted receive (which borrows the
/// communicator) can stay open across a collective. The threading rules
/// (see the crate docs): a `Comm` is [`Send`] but not [`Sync`], so one
/// thread makes its calls; to make calls from two threads, give each its
/// own transport view or use the endpoint ([`Comm::link`]) for
/// point-to-point from the other thread. Non-blocking collectives run on
/// the communicator's own progress thread.
///
/// ```
/// use sperli_collective::prelude::*;
/// use sperli_collective::fake;
/// let sums = fake::run(3, |comm: &mut Comm<fake::FakePeers>| {
///     comm.allreduce(&[comm.rank() as i64, 1], Reduction::Sum).unwrap()
/// });
/// assert_eq!(sums, vec![vec![3, 3]; 3]);
/// ```
#[derive(Debug)]
pub struct Comm<L: Peers> {
    pub(crate) link: Arc<L>,
    pub(crate) rank: u32,
    pub(crate) size: u32,
    /// What the calls share (sequence count, failure, chunk, requests).
    pub(crate) state: Arc<State>,
    /// The job's HELLO features (protocol §7.1.1), from the link.
    pub(crate) features: u64,
    /// True for the progress thread's view of the communicator: its calls
    /// are the non-blocking ones, already in issue order.
    pub(crate) progress_side: bool,
    /// The progress thread, started by the first non-blocking call.
    pub(crate) progress: OnceLock<Progress<L>>,
    /// Which communicator this is (protocol §15.2).
    pub(crate) group: Group,
    /// What this rank knows of its communicators (protocol §15.4).
    pub(crate) registry: Arc<Registry>,
    /// Not `Sync`: one thread makes the calls of one `Comm`.
    _one_thread: PhantomData<Cell<()>>,
}

impl<L: Peers> Comm<L> {
    /// A communicator over `link`; the first call will have sequence 1
    /// (protocol §8.1).
    pub fn new(link: L) -> Self {
        Self::over(Arc::new(link), Arc::default(), false)
    }

    /// A view of `link` with `state`.
    pub(crate) fn over(link: Arc<L>, state: Arc<State>, progress_side: bool) -> Self {
        let rank = link.rank();
        Self::with_group(
            link,
            state,
            progress_side,
            Group::default(),
            Arc::default(),
            rank,
        )
    }

    /// A view of `link` as communicator `group`, in which this rank is
    /// `rank`.
    pub(crate) fn with_group(
        link: Arc<L>,
        state: Arc<State>,
        progress_side: bool,
        group: Group,
        registry: Arc<Registry>,
        rank: u32,
    ) -> Self {
        let size = match &group.members {
            Some(m) => m.len() as u32,
            None => link.size(),
        };
        let features = link.features();
        Self {
            link,
            rank,
            size,
            state,
            features,
            progress_side,
            progress: OnceLock::new(),
            group,
            registry,
            _one_thread: PhantomData,
        }
    }

    /// The progress thread's view of this communicator (same link, state,
    /// group and registry).
    pub(crate) fn progress_view(&self) -> Self {
        Self::with_group(
            self.link.clone(),
            self.state.clone(),
            true,
            self.group.clone(),
            self.registry.clone(),
            self.rank,
        )
    }

    /// Takes the next COLLECTIVE payload of this communicator from its rank
    /// `from` (protocol §15.4 with bit 2: the earliest frame with this
    /// communicator's id; every frame of another communicator passed over
    /// is judged, H1617 with ABORT reason 3 for one this rank does not
    /// share with the sender).
    pub(crate) fn take_payload(&self, from: u32) -> Result<Vec<u8>, Error> {
        let job = self.job_rank(from);
        let r = if self.features & FEATURE_COMMUNICATORS == 0 {
            self.link.recv_collective(job)
        } else {
            let (reg, id) = (&self.registry, self.group.id);
            self.link
                .recv_collective_where(job, id, &|t| reg.judge(t, job, id))
        };
        match r {
            Ok(p) => Ok(p),
            Err(e @ Error::CollectiveMismatch(MismatchError::Communicator { .. })) => {
                self.fail_job(AbortReason::CollectiveMismatch, e)
            }
            Err(e) => self.link_failed(e),
        }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The job size.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The link underneath (e.g. to reach the fake's fault hooks in tests).
    pub fn link(&self) -> &L {
        &self.link
    }

    /// Gives the link back (after the progress thread, if one was
    /// started, ran every non-blocking call issued and ended).
    ///
    /// # Panics
    ///
    /// If a communicator made from this one by [`Comm::split`] or
    /// [`Comm::dup`] is still alive (it shares the link): drop it first, or
    /// use [`Comm::try_into_link`].
    pub fn into_link(self) -> L {
        match self.try_into_link() {
            Ok(l) => l,
            Err(_) => panic!(
                "Comm::into_link: a communicator made by split or dup still shares the link; drop it first"
            ),
        }
    }

    /// As [`Comm::into_link`], or the communicator back (its progress
    /// thread ended) while a communicator made from it still shares the
    /// link.
    pub fn try_into_link(self) -> Result<L, Box<Self>> {
        let Comm {
            link,
            rank,
            state,
            progress,
            group,
            registry,
            ..
        } = self;
        drop(progress);
        Arc::try_unwrap(link)
            .map_err(|link| Box::new(Comm::with_group(link, state, false, group, registry, rank)))
    }

    /// The number of v1 collective calls made so far, which is the sequence
    /// number of the last one (protocol §8.1). Failed calls count.
    pub fn sequence(&self) -> u64 {
        self.state.seq()
    }

    /// The error that ended the job on this rank, if one did.
    pub fn failure(&self) -> Option<Error> {
        self.state.failure()
    }

    // ---- plumbing -------------------------------------------------------

    /// Takes the next sequence number; fails at once if the job already failed.
    ///
    /// On the program's thread it first waits until every non-blocking call
    /// issued before is through, so calls go on the wire in issue order
    /// (protocol §8.9). A call on a revoked communicator fails first, with
    /// H1613, and takes no number (protocol §18.8.1: the communicator's
    /// calls are over).
    pub(crate) fn begin(&self) -> Result<u64, Error> {
        if !self.progress_side {
            self.state.wait_idle();
        }
        self.check_revoked()?;
        let seq = self.state.next_seq();
        match self.state.failure() {
            Some(e) => Err(e),
            None => Ok(seq),
        }
    }

    /// Counts `n` calls that were not made (a composite refused with H1618
    /// on every rank keeps the sequence aligned by counting all its parts).
    pub(crate) fn skip_calls(&self, n: u64) {
        if !self.progress_side {
            self.state.wait_idle();
        }
        self.state.skip(n);
    }

    /// Ends the job: ABORT (`reason`, the error's H number) to every peer,
    /// remember the error, return it.
    pub(crate) fn fail_job<X>(&self, reason: AbortReason, err: Error) -> Result<X, Error> {
        let code = err.h_code().map_or(0, |c| c.number());
        let text = err.to_string();
        self.link
            .abort(reason, code, Abort::truncate_message(&text));
        self.state.set_failed(&err);
        Err(err)
    }

    /// A link failure (H1612, H1613, ...): remember it, return it.
    pub(crate) fn link_failed<X>(&self, err: Error) -> Result<X, Error> {
        self.state.set_failed(&err);
        Err(err)
    }

    /// The job's communicator with every rank (its rank r is job rank r):
    /// the link's untagged calls serve it. A shrunk job's communicator
    /// (protocol §18.8) has id 0 too, but not every rank.
    fn whole_job(&self) -> bool {
        self.group.id == 0 && self.group.members.is_none()
    }

    pub(crate) fn send_coll(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        let sent = match self.whole_job() {
            true => self.link.send_collective(to, payload),
            false => self
                .link
                .send_collective_tagged(self.job_rank(to), self.group.id, payload),
        };
        match sent {
            Ok(()) => Ok(()),
            Err(e) => self.link_failed(e),
        }
    }

    /// Sends a payload the link takes over (no copy).
    pub(crate) fn send_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        if !self.whole_job() {
            self.send_coll(to, &payload)?;
            self.link.recycle(payload);
            return Ok(());
        }
        match self.link.send_collective_vec(to, payload) {
            Ok(()) => Ok(()),
            Err(e) => self.link_failed(e),
        }
    }

    /// Sends `payload` to every rank in `to` (the link may overlap the
    /// sends: [`Peers::send_collective_each`]), then recycles it.
    pub(crate) fn send_all(
        &self,
        to: impl Iterator<Item = u32>,
        payload: Vec<u8>,
    ) -> Result<(), Error> {
        let to: Vec<u32> = to.collect();
        self.send_each(&to, &payload)?;
        self.link.recycle(payload);
        Ok(())
    }

    pub(crate) fn send_each(&self, to: &[u32], payload: &[u8]) -> Result<(), Error> {
        if !self.whole_job() {
            for &r in to {
                self.send_coll(r, payload)?;
            }
            return Ok(());
        }
        match self.link.send_collective_each(to, payload) {
            Ok(()) => Ok(()),
            Err(e) => self.link_failed(e),
        }
    }

    /// Header and bytes `range` of `data` in one buffer from the link.
    pub(crate) fn payload<D: Src + ?Sized>(
        &self,
        call: &Call,
        phase: Phase,
        data: &D,
        range: Range<usize>,
    ) -> Vec<u8> {
        self.headed(&call.header(phase), data, range)
    }

    /// `head` and bytes `range` of `data` in one buffer from the link.
    pub(crate) fn headed<D: Src + ?Sized>(
        &self,
        head: &[u8],
        data: &D,
        range: Range<usize>,
    ) -> Vec<u8> {
        let mut p = self.link.take_buffer(head.len() + range.len());
        p.extend_from_slice(head);
        data.put(range, &mut p);
        p
    }

    /// Sends the header of `call` in `phase` and bytes `range` of `data`
    /// as one COLLECTIVE frame to `to` ([`Comm::send_headed`]).
    pub(crate) fn send_data<D: Src + ?Sized>(
        &self,
        to: u32,
        call: &Call,
        phase: Phase,
        data: &D,
        range: Range<usize>,
    ) -> Result<(), Error> {
        self.send_headed(to, &call.header(phase), data, range)
    }

    /// Sends `head` (the collective header, and a chunk header for a
    /// pipelined chunk) and bytes `range` of `data` as one COLLECTIVE
    /// frame to `to`: straight from `data` where it is little-endian bytes
    /// in memory ([`Peers::send_collective_parts`]: the transport writes a
    /// large frame into TLS from the caller's memory, no copy), else
    /// through a payload buffer.
    pub(crate) fn send_headed<D: Src + ?Sized>(
        &self,
        to: u32,
        head: &[u8],
        data: &D,
        range: Range<usize>,
    ) -> Result<(), Error> {
        if self.whole_job() {
            if let Some(b) = data.slice(range.clone()) {
                return match self.link.send_collective_parts(to, head, b) {
                    Ok(()) => Ok(()),
                    Err(e) => self.link_failed(e),
                };
            }
        }
        let p = self.headed(head, data, range);
        self.send_vec(to, p)
    }

    /// As [`Comm::send_headed`] to every rank in `to`: to one rank straight
    /// from `data`; to several from one payload buffer, whose sends the
    /// link may overlap ([`Comm::send_all`]).
    pub(crate) fn send_headed_each<D: Src + ?Sized>(
        &self,
        to: &[u32],
        head: &[u8],
        data: &D,
        range: Range<usize>,
    ) -> Result<(), Error> {
        match to {
            [] => Ok(()),
            [one] => self.send_headed(*one, head, data, range),
            many => {
                let p = self.headed(head, data, range);
                self.send_all(many.iter().copied(), p)
            }
        }
    }

    /// Calls `f` with bytes `range` of `data`: borrowed where they are
    /// little-endian bytes in memory, else in a buffer from the link,
    /// given back afterwards.
    pub(crate) fn with_bytes<D: Src + ?Sized, R>(
        &self,
        data: &D,
        range: Range<usize>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> R {
        if let Some(b) = data.slice(range.clone()) {
            return f(b);
        }
        let own = self.bytes(data, range);
        let r = f(&own);
        self.recycle(own);
        r
    }

    /// Bytes `range` of `data` alone, in a buffer from the link.
    pub(crate) fn bytes<D: Src + ?Sized>(&self, data: &D, range: Range<usize>) -> Vec<u8> {
        let mut p = self.link.take_buffer(range.len());
        data.put(range, &mut p);
        p
    }

    /// Gives a buffer that is no longer needed back to the link.
    pub(crate) fn recycle(&self, buf: Vec<u8>) {
        self.link.recycle(buf);
    }

    /// Receives the frame answering `call` in `phase` from `from` and checks
    /// its collective header (protocol §8.4). Returns the whole payload; the
    /// data is `payload[16..]`.
    pub(crate) fn recv_coll(&self, call: &Call, phase: Phase, from: u32) -> Result<Vec<u8>, Error> {
        let payload = self.take_payload(from)?;
        // Judged with the job's features (protocol §7.1.1, §14.1): without
        // bit 1 a pipelined frame does not decode.
        let decoded = CollectivePayload::decode(&payload, self.features);
        let open_total = match decoded {
            Ok(CollectivePayload {
                body: Body::Open(o),
                ..
            }) => Some(o.total),
            _ => None,
        };
        let header = match decoded.map(|c| c.header) {
            Ok(h) => h,
            Err(error) => {
                // Protocol §8.4: a collective header that does not decode
                // (or a payload shorter than 16 bytes) is a rejected frame.
                return self.fail_job(
                    AbortReason::RejectedFrame,
                    Error::FrameRejected(FrameError::Payload {
                        frame_type: FrameType::Collective,
                        error,
                    }),
                );
            }
        };
        let fields: [(&'static str, u64, u64); 6] = [
            (
                "operation",
                u64::from(call.op.code()),
                u64::from(header.operation.code()),
            ),
            (
                "element_type",
                u64::from(call.element_type),
                u64::from(header.element_type),
            ),
            (
                "reduction",
                u64::from(call.reduction),
                u64::from(header.reduction),
            ),
            ("phase", phase as u64, header.phase as u64),
            ("root", u64::from(call.root), u64::from(header.root)),
            ("sequence", call.seq, header.sequence),
        ];
        if let Some(&(field, expected, got)) = fields.iter().find(|(_, e, g)| e != g) {
            if let Some(total) = open_total.filter(|_| phase == Phase::ToRoot) {
                // Protocol §14.4 check 2: the sender chose the pipeline.
                if crate::pipeline::other_shape(call, &header) {
                    return self.shape_mismatch(call, from, total);
                }
            }
            return self.mismatch(MismatchError::Header {
                from,
                field,
                expected,
                got,
            });
        }
        let len = payload.len() - H;
        if len > MAX_COLLECTIVE_DATA {
            return self.mismatch(MismatchError::Length {
                from,
                expected: MAX_COLLECTIVE_DATA as u64,
                got: len as u64,
            });
        }
        Ok(payload)
    }

    /// H1617 with ABORT reason 3.
    pub(crate) fn mismatch<X>(&self, e: MismatchError) -> Result<X, Error> {
        self.fail_job(
            AbortReason::CollectiveMismatch,
            Error::CollectiveMismatch(e),
        )
    }

    /// H1617 unless `got == expected`.
    pub(crate) fn expect_len(&self, from: u32, expected: usize, got: usize) -> Result<(), Error> {
        if got == expected {
            Ok(())
        } else {
            self.mismatch(MismatchError::Length {
                from,
                expected: expected as u64,
                got: got as u64,
            })
        }
    }

    /// H1617 unless `got` is a whole number of `width`-byte elements.
    pub(crate) fn expect_whole(&self, from: u32, width: usize, got: usize) -> Result<(), Error> {
        self.expect_len(from, got - got % width, got)
    }

    /// A bcast root's data is longer than one call carries: only the root
    /// knows, so the job ends (protocol §8.4, decided there: the others
    /// cannot know the length).
    pub(crate) fn root_data_too_long<X>(&self, len: usize) -> Result<X, Error> {
        self.fail_job(
            AbortReason::CollectiveMismatch,
            ArgumentError::TooLong {
                len,
                max: MAX_COLLECTIVE_DATA,
            }
            .into(),
        )
    }

    pub(crate) fn check_root(&self, root: u32) -> Result<(), Error> {
        if root < self.size {
            Ok(())
        } else {
            Err(ArgumentError::Root {
                root,
                size: self.size,
            }
            .into())
        }
    }
}
