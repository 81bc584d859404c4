//! [`Comm`]: the six v1 collectives over a [`Link`] (protocol §8; the
//! element types of §8.3, early frames of §8.8, and the receivers of bcast
//! and scatter that do not know the length, §8.5).
//!
//! Every collective is a star around its root (barrier and allreduce: rank
//! 0). Each call takes the next sequence number first, so a call that fails,
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
use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::error::{ArgumentError, FrameError, MismatchError};
use sperli_wire::limits::{COLLECTIVE_HEADER_LEN, FEATURE_COMMUNICATORS, MAX_COLLECTIVE_DATA};
use sperli_wire::pipeline::{Body, CollectivePayload};
use sperli_wire::reduce::{check_args, combine_into};
use sperli_wire::{Error, FrameType};

use crate::communicators::{Group, Registry};
use crate::element::Element;
use crate::link::Link;
use crate::nonblocking::Progress;
use crate::pipeline::chain::ChainOp;
use crate::pipeline::{ElemsMut, Grow, NoResult};
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
/// Wraps a [`Link`] and counts this rank's collective calls (the
/// `sequence` of protocol §8.1). Every rank must make the same calls in the
/// same order.
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
/// let sums = fake::run(3, |comm: &mut Comm<fake::FakeLink>| {
///     comm.allreduce(&[comm.rank() as i64, 1], Reduction::Sum).unwrap()
/// });
/// assert_eq!(sums, vec![vec![3, 3]; 3]);
/// ```
#[derive(Debug)]
pub struct Comm<L: Link> {
    pub(crate) link: Arc<L>,
    rank: u32,
    size: u32,
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

impl<L: Link> Comm<L> {
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
    /// (protocol §8.9).
    pub(crate) fn begin(&self) -> Result<u64, Error> {
        if !self.progress_side {
            self.state.wait_idle();
        }
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

    pub(crate) fn send_coll(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        let sent = match self.group.id {
            0 => self.link.send_collective(to, payload),
            id => self
                .link
                .send_collective_tagged(self.job_rank(to), id, payload),
        };
        match sent {
            Ok(()) => Ok(()),
            Err(e) => self.link_failed(e),
        }
    }

    /// Sends a payload the link takes over (no copy).
    pub(crate) fn send_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        if self.group.id != 0 {
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
    /// sends: [`Link::send_collective_each`]), then recycles it.
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
        if self.group.id != 0 {
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
        let mut p = self.link.take_buffer(H + range.len());
        p.extend_from_slice(&call.header(phase));
        data.put(range, &mut p);
        p
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
    fn recv_coll(&self, call: &Call, phase: Phase, from: u32) -> Result<Vec<u8>, Error> {
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

    // ---- the six v1 operations at byte level ---------------------------
    //
    // Payload buffers come from the link (`Link::take_buffer`, a pool on the
    // real transport) and received ones go back (`Link::recycle`) once read,
    // so steady traffic of large calls reuses buffers that are already
    // faulted in. Results are returned as the payload buffer
    // (data at `[16..]`); the caller reads it and recycles it.

    /// barrier: empty phase 0 to rank 0, then empty phase 1 from rank 0.
    pub(crate) fn barrier_core(&self) -> Result<(), Error> {
        let seq = self.begin()?;
        if self.size == 1 {
            return Ok(());
        }
        let call = Call {
            op: Operation::Barrier,
            element_type: 0,
            reduction: 0,
            root: 0,
            seq,
            len: 0,
        };
        if self.rank == 0 {
            for r in 1..self.size {
                let p = self.recv_coll(&call, Phase::ToRoot, r)?;
                self.expect_len(r, 0, p.len() - H)?;
            }
            let p = call.header(Phase::FromRoot);
            for r in 1..self.size {
                self.send_coll(r, &p)?;
            }
        } else {
            self.send_coll(0, &call.header(Phase::ToRoot))?;
            let p = self.recv_coll(&call, Phase::FromRoot, 0)?;
            self.expect_len(0, 0, p.len() - H)?;
        }
        Ok(())
    }

    /// bcast. At the root returns `None` (its data is the result); at
    /// other ranks the received payload (data at `[16..]`), checked to be
    /// whole `width`-byte elements and, if `expect` is given, that long.
    pub(crate) fn bcast_core<D: Src + ?Sized>(
        &self,
        root: u32,
        root_data: &D,
        width: usize,
        expect: Option<usize>,
    ) -> Result<Option<Vec<u8>>, Error> {
        let seq = self.begin()?;
        self.check_root(root)?;
        let call = Call {
            op: Operation::Bcast,
            element_type: 0,
            reduction: 0,
            root,
            seq,
            len: root_data.byte_len(),
        };
        if self.rank == root {
            let len = root_data.byte_len();
            if len > MAX_COLLECTIVE_DATA {
                // Protocol §8.4 (decided there): the others cannot know the length.
                return self.fail_job(
                    AbortReason::CollectiveMismatch,
                    ArgumentError::TooLong {
                        len,
                        max: MAX_COLLECTIVE_DATA,
                    }
                    .into(),
                );
            }
            if self.size == 1 {
                return Ok(None);
            }
            let p = self.payload(&call, Phase::FromRoot, root_data, 0..len);
            self.send_all((0..self.size).filter(|&r| r != root), p)?;
            Ok(None)
        } else {
            let p = self.recv_coll(&call, Phase::FromRoot, root)?;
            let got = p.len() - H;
            match expect {
                Some(n) => self.expect_len(root, n, got)?,
                None => self.expect_whole(root, width, got)?,
            }
            Ok(Some(p))
        }
    }

    /// Argument checks of reduce/allreduce (protocol §8.4), H1618.
    pub(crate) fn reduce_args(
        &self,
        root: u32,
        len: usize,
        element_type: u8,
        reduction: u8,
    ) -> Result<(ElementType, Reduction), Error> {
        self.check_root(root)?;
        let t = ElementType::from_code(element_type)?;
        let r = Reduction::from_code(reduction)?;
        check_args(len, t, r)?;
        if len > MAX_COLLECTIVE_DATA {
            return Err(ArgumentError::TooLong {
                len,
                max: MAX_COLLECTIVE_DATA,
            }
            .into());
        }
        Ok((t, r))
    }

    /// reduce (`allreduce == false`) or allreduce. Returns the payload
    /// buffer holding the result at `[16..]` where the rank has a result
    /// (the root; every rank for allreduce), else `None`. The root folds in
    /// place into the first operand's buffer (rank 0's payload, or its own
    /// data), then recycles every other received buffer.
    pub(crate) fn reduce_core<D: Src + ?Sized>(
        &self,
        allreduce: bool,
        root: u32,
        data: &D,
        element_type: u8,
        reduction: u8,
    ) -> Result<Option<Vec<u8>>, Error> {
        let seq = self.begin()?;
        let root = if allreduce { 0 } else { root };
        let len = data.byte_len();
        let (t, red) = self.reduce_args(root, len, element_type, reduction)?;
        let call = Call {
            op: if allreduce {
                Operation::Allreduce
            } else {
                Operation::Reduce
            },
            element_type,
            reduction,
            root,
            seq,
            len,
        };
        if self.size == 1 {
            return Ok(Some(self.payload(&call, Phase::FromRoot, data, 0..len)));
        }
        if self.rank != root {
            let p = self.payload(&call, Phase::ToRoot, data, 0..len);
            self.send_vec(root, p)?;
            if !allreduce {
                return Ok(None);
            }
            let p = self.recv_coll(&call, Phase::FromRoot, root)?;
            self.expect_len(root, len, p.len() - H)?;
            return Ok(Some(p));
        }
        // The root: fold in ascending rank order, left operand = lower ranks.
        let mut acc: Option<Vec<u8>> = None;
        for r in 0..self.size {
            let contribution = if r == root {
                if acc.is_none() {
                    acc = Some(self.payload(&call, Phase::FromRoot, data, 0..len));
                    continue;
                }
                self.bytes(data, 0..len)
            } else {
                let p = self.recv_coll(&call, Phase::ToRoot, r)?;
                if p.len() - H != len {
                    // Protocol §8.4: the lengths are data of a call: H1618.
                    let e = ArgumentError::LengthMismatch {
                        left: len,
                        right: p.len() - H,
                    };
                    return self.fail_job(AbortReason::CollectiveMismatch, e.into());
                }
                if acc.is_none() {
                    acc = Some(p);
                    continue;
                }
                p
            };
            let off = if r == root { 0 } else { H };
            let a = acc.as_mut().expect("set above");
            if let Err(e) = combine_into(&mut a[H..], &contribution[off..], t, red) {
                return self.fail_job(AbortReason::CollectiveMismatch, e.into());
            }
            self.recycle(contribution);
        }
        let mut acc = acc.expect("size >= 1");
        acc[..H].copy_from_slice(&call.header(Phase::FromRoot));
        if allreduce {
            let to: Vec<u32> = (1..self.size).collect();
            self.send_each(&to, &acc)?;
        }
        Ok(Some(acc))
    }

    /// gather: calls `sink` at the root with every block in rank order.
    pub(crate) fn gather_core<D: Src + ?Sized>(
        &self,
        root: u32,
        data: &D,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<bool, Error> {
        let seq = self.begin()?;
        self.check_root(root)?;
        let len = data.byte_len();
        if len > MAX_COLLECTIVE_DATA {
            return Err(ArgumentError::TooLong {
                len,
                max: MAX_COLLECTIVE_DATA,
            }
            .into());
        }
        let call = Call {
            op: Operation::Gather,
            element_type: 0,
            reduction: 0,
            root,
            seq,
            len: data.byte_len(),
        };
        if self.rank != root {
            let p = self.payload(&call, Phase::ToRoot, data, 0..len);
            self.send_vec(root, p)?;
            return Ok(false);
        }
        for r in 0..self.size {
            if r == root {
                let own = self.bytes(data, 0..len);
                sink(&own);
                self.recycle(own);
            } else {
                let p = self.recv_coll(&call, Phase::ToRoot, r)?;
                // Protocol §8.4: gather blocks of different lengths: H1617.
                self.expect_len(r, len, p.len() - H)?;
                sink(&p[H..]);
                self.recycle(p);
            }
        }
        Ok(true)
    }

    /// scatter: the root's `data` is `size` blocks of `width`-byte
    /// elements; returns this rank's block (at the root a copy, elsewhere
    /// the payload's `[16..]` — see the `usize` offset returned).
    pub(crate) fn scatter_core<D: Src + ?Sized>(
        &self,
        root: u32,
        data: &D,
        width: usize,
        expect: Option<usize>,
    ) -> Result<(Vec<u8>, usize), Error> {
        let seq = self.begin()?;
        self.check_root(root)?;
        let call = Call {
            op: Operation::Scatter,
            element_type: 0,
            reduction: 0,
            root,
            seq,
            len: 0,
        };
        let size = self.size as usize;
        if self.rank == root {
            let len = data.byte_len();
            let elems = len / width;
            let block = (elems / size) * width;
            if len % width != 0 || elems % size != 0 || block > MAX_COLLECTIVE_DATA {
                return self.fail_job(
                    AbortReason::InvalidScatter,
                    ArgumentError::ScatterBlocks {
                        len,
                        size: self.size,
                    }
                    .into(),
                );
            }
            for r in (0..self.size).filter(|&r| r != root) {
                let i = r as usize;
                let p = self.payload(&call, Phase::FromRoot, data, i * block..(i + 1) * block);
                self.send_vec(r, p)?;
            }
            let i = root as usize;
            Ok((self.bytes(data, i * block..(i + 1) * block), 0))
        } else {
            let p = self.recv_coll(&call, Phase::FromRoot, root)?;
            let got = p.len() - H;
            match expect {
                Some(n) => self.expect_len(root, n, got)?,
                None => self.expect_whole(root, width, got)?,
            }
            Ok((p, H))
        }
    }

    // ---- feature bit 1 (protocol §14) ------------------------------------

    /// The HELLO feature bits of the job (protocol §7.1.1): bit 1
    /// ([`FEATURE_PIPELINED`](sperli_wire::limits::FEATURE_PIPELINED)) set
    /// means large calls run pipelined (protocol §14).
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Sets the chunk length of the pipelined streams this rank starts
    /// (protocol §14.5; a multiple of 8 bytes, rounded down), or back to the
    /// default rule with `None`. Any value gives the same results; it only
    /// changes how the bytes are cut. A tuning knob for benchmarks.
    pub fn set_pipeline_chunk(&self, bytes: Option<usize>) {
        self.state.set_chunk(bytes);
    }

    /// allreduce of `data` into `out` (same length) as a pipelined call.
    pub(crate) fn allreduce_pipelined<T: Element>(
        &self,
        data: &[T],
        op: Reduction,
        large: bool,
        out: &mut [T],
    ) -> Result<(), Error> {
        let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
        let kind = ChainOp::Allreduce;
        self.chain_call(kind, &Elems(data), et, red, large, &mut ElemsMut(out))?;
        Ok(())
    }

    /// bcast of a `Vec` whose receivers do not know the length, with
    /// feature bit 1 (protocol §14.3); `large`: of any length.
    pub(crate) fn bcast_grow<T: Element>(
        &self,
        root: u32,
        buf: &mut Vec<T>,
        large: bool,
    ) -> Result<(), Error> {
        if self.rank == root {
            return self.bcast_bit1(root, &Elems(&buf[..]), T::WIDTH, None, large, &mut NoResult);
        }
        buf.clear();
        self.bcast_bit1(root, &[][..], T::WIDTH, None, large, &mut Grow(buf))
    }

    // ---- the public v1 collectives -------------------------------------

    /// barrier (protocol §8.2, operation 1): returns when every rank has
    /// entered it. Size 1 returns at once.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let ok = fake::run(4, |c| c.barrier().is_ok());
    /// assert!(ok.iter().all(|&b| b));
    /// ```
    pub fn barrier(&self) -> Result<(), Error> {
        self.barrier_core()
    }

    /// bcast (protocol §8.2, operation 2; §8.5 "Lengths the receiver does not know": receivers of bcast
    /// and scatter"): at the root `buf` is sent and left as it is; at every
    /// other rank `buf` is replaced by the root's data, whatever its length
    /// (up to 16777200 bytes; H1617 if it is not a whole number of `T`).
    ///
    /// Errors: H1618 for `root >= size` on every rank; root data longer than
    /// 16777200 bytes ends the job (root H1618, others H1612). For longer
    /// arrays see [`Comm::bcast_large`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let mut v: Vec<f32> = if c.rank() == 1 { vec![1.5, 2.5] } else { Vec::new() };
    ///     c.bcast(1, &mut v).unwrap();
    ///     v
    /// });
    /// assert_eq!(got, vec![vec![1.5, 2.5]; 3]);
    /// ```
    pub fn bcast<T: Element>(&self, root: u32, buf: &mut Vec<T>) -> Result<(), Error> {
        if self.bit1() {
            return self.bcast_grow(root, buf, false);
        }
        let src = Elems(if self.rank == root { &buf[..] } else { &[] });
        if let Some(p) = self.bcast_core(root, &src, T::WIDTH, None)? {
            buf.clear();
            T::extend_from_le(&p[H..], buf);
            self.recycle(p);
        }
        Ok(())
    }

    /// bcast into a buffer of known length (protocol §8.2): every rank
    /// passes a buffer of the root's length; the root's is sent, the others
    /// are overwritten. Data of another length at a receiver is H1617
    /// (ABORT reason 3). Allocates no result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     let mut v = [c.rank() as u64 + 7; 3];
    ///     c.bcast_into(0, &mut v).unwrap();
    ///     v
    /// });
    /// assert_eq!(got, vec![[7, 7, 7]; 2]);
    /// ```
    pub fn bcast_into<T: Element>(&self, root: u32, buf: &mut [T]) -> Result<(), Error> {
        let want = buf.len() * T::WIDTH;
        if self.bit1() {
            if self.rank == root {
                return self.bcast_bit1(
                    root,
                    &Elems(&buf[..]),
                    T::WIDTH,
                    None,
                    false,
                    &mut NoResult,
                );
            }
            return self.bcast_bit1(
                root,
                &[][..],
                T::WIDTH,
                Some(want),
                false,
                &mut ElemsMut(buf),
            );
        }
        let src = Elems(if self.rank == root { &buf[..] } else { &[] });
        if let Some(p) = self.bcast_core(root, &src, T::WIDTH, Some(want))? {
            T::read_le(&p[H..], buf);
            self.recycle(p);
        }
        Ok(())
    }

    /// reduce (protocol §8.2, operation 3): the fold of every rank's `data`
    /// in ascending rank order (left operand = lower ranks), `Some` at the
    /// root, `None` elsewhere. Bit-identical run after run.
    ///
    /// Errors (protocol §8.4): H1618 on every rank before anything is sent
    /// for `root >= size`, a refused type/reduction pair (the table of protocol §8.3)
    /// or data longer than 16777200 bytes; contributions of different
    /// lengths end the job (root H1618 with ABORT reason 3, others H1612).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(3, |c| c.reduce(2, &[c.rank() as i32 - 1], Reduction::Min).unwrap());
    /// assert_eq!(got, vec![None, None, Some(vec![-1])]);
    /// ```
    pub fn reduce<T: Element>(
        &self,
        root: u32,
        data: &[T],
        op: Reduction,
    ) -> Result<Option<Vec<T>>, Error> {
        if self.runs_pipelined(Operation::Reduce, data.len() * T::WIDTH) {
            let mut out = vec![T::default(); if self.rank == root { data.len() } else { 0 }];
            let kind = ChainOp::Reduce { root };
            let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
            let at_root =
                self.chain_call(kind, &Elems(data), et, red, false, &mut ElemsMut(&mut out))?;
            return Ok(at_root.then_some(out));
        }
        let r = self.reduce_core(false, root, &Elems(data), T::ELEMENT_TYPE.code(), op.code())?;
        Ok(r.map(|p| {
            let v = T::vec_from_le(&p[H..]);
            self.recycle(p);
            v
        }))
    }

    /// reduce into the root's `out` (protocol §8.2): `out` must have
    /// `data.len()` elements at the root; other ranks may pass an empty
    /// slice. A wrong `out` at the root is a check only the root can make,
    /// so it ends the job before anything is sent (root H1618 with ABORT
    /// reason 3, others H1612). Returns `true` at the
    /// root. Allocates no result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(2, |c| {
    ///     let mut out = [0u32; 1];
    ///     let at_root = c.reduce_into(0, &[5u32], &mut out, Reduction::Prod).unwrap();
    ///     (at_root, out)
    /// });
    /// assert_eq!(got, vec![(true, [25]), (false, [0])]);
    /// ```
    pub fn reduce_into<T: Element>(
        &self,
        root: u32,
        data: &[T],
        out: &mut [T],
        op: Reduction,
    ) -> Result<bool, Error> {
        if self.rank == root && out.len() != data.len() {
            // Only the root can see this: it ends the job (protocol §8.4).
            self.begin()?;
            return self.fail_job(
                AbortReason::CollectiveMismatch,
                ArgumentError::LengthMismatch {
                    left: data.len() * T::WIDTH,
                    right: out.len() * T::WIDTH,
                }
                .into(),
            );
        }
        if self.runs_pipelined(Operation::Reduce, data.len() * T::WIDTH) {
            let out = if self.rank == root { out } else { &mut [] };
            let kind = ChainOp::Reduce { root };
            let (et, red) = (T::ELEMENT_TYPE.code(), op.code());
            return self.chain_call(kind, &Elems(data), et, red, false, &mut ElemsMut(out));
        }
        match self.reduce_core(false, root, &Elems(data), T::ELEMENT_TYPE.code(), op.code())? {
            Some(p) => {
                T::read_le(&p[H..], out);
                self.recycle(p);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// allreduce (protocol §8.2, operation 4): reduce to rank 0, then phase
    /// 1 with the result to every rank. Errors as [`Comm::reduce`]; a result
    /// whose length differs from this rank's contribution is H1617.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(4, |c| c.allreduce(&[1.0f64, c.rank() as f64], Reduction::Max).unwrap());
    /// assert_eq!(got, vec![vec![1.0, 3.0]; 4]);
    /// ```
    pub fn allreduce<T: Element>(&self, data: &[T], op: Reduction) -> Result<Vec<T>, Error> {
        if self.runs_pipelined(Operation::Allreduce, data.len() * T::WIDTH) {
            let mut out = vec![T::default(); data.len()];
            self.allreduce_pipelined(data, op, false, &mut out)?;
            return Ok(out);
        }
        let p = self
            .reduce_core(true, 0, &Elems(data), T::ELEMENT_TYPE.code(), op.code())?
            .expect("allreduce has a result on every rank");
        let v = T::vec_from_le(&p[H..]);
        self.recycle(p);
        Ok(v)
    }

    /// allreduce into `out`, which must have `data.len()` elements (else
    /// H1618 before anything is sent). Allocates no result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// use sperli_wire::element::Reduction;
    /// let got = fake::run(3, |c| {
    ///     let mut out = [0i64; 2];
    ///     c.allreduce_into(&[1, -1], &mut out, Reduction::Sum).unwrap();
    ///     out
    /// });
    /// assert_eq!(got, vec![[3, -3]; 3]);
    /// ```
    pub fn allreduce_into<T: Element>(
        &self,
        data: &[T],
        out: &mut [T],
        op: Reduction,
    ) -> Result<(), Error> {
        if out.len() != data.len() {
            self.begin()?;
            return Err(ArgumentError::LengthMismatch {
                left: data.len() * T::WIDTH,
                right: out.len() * T::WIDTH,
            }
            .into());
        }
        if self.runs_pipelined(Operation::Allreduce, data.len() * T::WIDTH) {
            return self.allreduce_pipelined(data, op, false, out);
        }
        let p = self
            .reduce_core(true, 0, &Elems(data), T::ELEMENT_TYPE.code(), op.code())?
            .expect("allreduce has a result on every rank");
        T::read_le(&p[H..], out);
        self.recycle(p);
        Ok(())
    }

    /// reduce on raw little-endian bytes with wire codes (protocol §8.3,
    /// §8.4): `element_type` 0..=6, `reduction` 1..=10. Codes out of range,
    /// a refused pair, data that is not a whole number of elements or
    /// longer than 16777200 bytes, or `root >= size`: H1618 on every rank
    /// before anything is sent.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     // u32 (type 2) bor (reduction 9).
    ///     let ok = c.reduce_bytes(0, &(1u32 << c.rank()).to_le_bytes(), 2, 9).unwrap();
    ///     let refused = c.reduce_bytes(0, &[0; 3], 2, 9).unwrap_err(); // 3 bytes of u32
    ///     (ok, refused.h_code().unwrap().number())
    /// });
    /// assert_eq!(got[0], (Some(3u32.to_le_bytes().to_vec()), 1618));
    /// assert_eq!(got[1], (None, 1618));
    /// ```
    pub fn reduce_bytes(
        &self,
        root: u32,
        data: &[u8],
        element_type: u8,
        reduction: u8,
    ) -> Result<Option<Vec<u8>>, Error> {
        if self.runs_pipelined(Operation::Reduce, data.len()) {
            let mut out = vec![0u8; if self.rank == root { data.len() } else { 0 }];
            let kind = ChainOp::Reduce { root };
            let at_root = self.chain_call(
                kind,
                data,
                element_type,
                reduction,
                false,
                &mut ElemsMut(&mut out[..]),
            )?;
            return Ok(at_root.then_some(out));
        }
        Ok(self
            .reduce_core(false, root, data, element_type, reduction)?
            .map(|p| {
                let v = p[H..].to_vec();
                self.recycle(p);
                v
            }))
    }

    /// allreduce on raw little-endian bytes with wire codes; checks as
    /// [`Comm::reduce_bytes`].
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| c.allreduce_bytes(&[0b01 << c.rank()], 0, 10).unwrap());
    /// assert_eq!(got, vec![vec![0b11]; 2]);
    /// ```
    pub fn allreduce_bytes(
        &self,
        data: &[u8],
        element_type: u8,
        reduction: u8,
    ) -> Result<Vec<u8>, Error> {
        if self.runs_pipelined(Operation::Allreduce, data.len()) {
            let mut out = vec![0u8; data.len()];
            let kind = ChainOp::Allreduce;
            self.chain_call(
                kind,
                data,
                element_type,
                reduction,
                false,
                &mut ElemsMut(&mut out[..]),
            )?;
            return Ok(out);
        }
        let p = self
            .reduce_core(true, 0, data, element_type, reduction)?
            .expect("allreduce has a result on every rank");
        let v = p[H..].to_vec();
        self.recycle(p);
        Ok(v)
    }

    /// gather (protocol §8.2, operation 5): at the root, every rank's block
    /// concatenated in rank order (its own at its rank's place); `None`
    /// elsewhere. H1618 on every rank for `root >= size` or a block longer
    /// than 16777200 bytes; a block whose length differs from the root's
    /// own ends the job (root H1617 with ABORT reason 3, others H1612).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| c.gather(0, &[c.rank() as u8; 2]).unwrap());
    /// assert_eq!(got, vec![Some(vec![0, 0, 1, 1, 2, 2]), None, None]);
    /// ```
    pub fn gather<T: Element>(&self, root: u32, data: &[T]) -> Result<Option<Vec<T>>, Error> {
        let mut out = Vec::new();
        if self.rank == root {
            out.reserve(data.len() * self.size as usize);
        }
        let at_root = self.gather_core(root, &Elems(data), |b| T::extend_from_le(b, &mut out))?;
        Ok(at_root.then_some(out))
    }

    /// scatter (protocol §8.2, operation 6; §8.5): the root's data is
    /// `size` equal blocks; rank i gets block i. Non-roots pass `None` (a
    /// `Some` there is ignored); `None` at the root is an empty array.
    /// Receivers take whatever arrives (a whole number of `T`, else H1617).
    ///
    /// Errors: H1618 on every rank for `root >= size`; root data that is not
    /// `size` blocks of at most 16777200 bytes ends the job (root H1618 with
    /// ABORT reason 4, others H1612).
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(3, |c| {
    ///     let data = [10i32, 11, 20, 21, 30, 31];
    ///     c.scatter(1, (c.rank() == 1).then_some(&data[..])).unwrap()
    /// });
    /// assert_eq!(got, vec![vec![10, 11], vec![20, 21], vec![30, 31]]);
    /// ```
    pub fn scatter<T: Element>(&self, root: u32, data: Option<&[T]>) -> Result<Vec<T>, Error> {
        let src = Elems(match (self.rank == root, data) {
            (true, Some(d)) => d,
            _ => &[],
        });
        let (p, off) = self.scatter_core(root, &src, T::WIDTH, None)?;
        let v = T::vec_from_le(&p[off..]);
        self.recycle(p);
        Ok(v)
    }

    /// scatter into `out`, which must have exactly the block's length on
    /// every rank: at the root a wrong `out` length ends the job like an
    /// invalid scatter (H1618, ABORT reason 4), at a receiver data of
    /// another length is H1617. Allocates no result vector.
    ///
    /// ```
    /// use sperli_collective::fake;
    /// let got = fake::run(2, |c| {
    ///     let mut out = [0u64; 2];
    ///     c.scatter_into(0, (c.rank() == 0).then_some(&[1, 2, 3, 4][..]), &mut out).unwrap();
    ///     out
    /// });
    /// assert_eq!(got, vec![[1, 2], [3, 4]]);
    /// ```
    pub fn scatter_into<T: Element>(
        &self,
        root: u32,
        data: Option<&[T]>,
        out: &mut [T],
    ) -> Result<(), Error> {
        let src = Elems(match (self.rank == root, data) {
            (true, Some(d)) => d,
            _ => &[],
        });
        let want = out.len() * T::WIDTH;
        if self.rank == root && root < self.size && src.byte_len() != want * self.size as usize {
            self.begin()?;
            return self.fail_job(
                AbortReason::InvalidScatter,
                ArgumentError::ScatterBlocks {
                    len: src.byte_len(),
                    size: self.size,
                }
                .into(),
            );
        }
        let (p, off) = self.scatter_core(root, &src, T::WIDTH, Some(want))?;
        T::read_le(&p[off..], out);
        self.recycle(p);
        Ok(())
    }
}

#[cfg(test)]
mod buffer_tests {
    //! The collectives take their payload buffers from the link
    //! and give every received payload back.

    use std::sync::atomic::{AtomicUsize, Ordering};

    use sperli_wire::element::Reduction;
    use sperli_wire::Error;

    use crate::fake::FakeLink;
    use crate::{Comm, Link};

    /// A fake link that counts buffers taken, received and given back.
    struct Counting {
        inner: FakeLink,
        taken: AtomicUsize,
        received: AtomicUsize,
        recycled: AtomicUsize,
    }

    impl Link for Counting {
        fn rank(&self) -> u32 {
            self.inner.rank()
        }
        fn size(&self) -> u32 {
            self.inner.size()
        }
        fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
            self.inner.send_collective(to, payload)
        }
        fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
            self.received.fetch_add(1, Ordering::Relaxed);
            self.inner.recv_collective(from)
        }
        fn abort(&self, reason: sperli_wire::abort::AbortReason, code: u32, message: &str) {
            self.inner.abort(reason, code, message)
        }
        fn take_buffer(&self, len: usize) -> Vec<u8> {
            self.taken.fetch_add(1, Ordering::Relaxed);
            Vec::with_capacity(len)
        }
        fn recycle(&self, buf: Vec<u8>) {
            self.recycled.fetch_add(1, Ordering::Relaxed);
            drop(buf);
        }
    }

    #[test]
    fn into_calls_recycle_every_received_payload_and_fold_correctly() {
        let links = FakeLink::job(3);
        let out: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = links
                .into_iter()
                .map(|inner| {
                    s.spawn(move || {
                        let c = Comm::new(Counting {
                            inner,
                            taken: AtomicUsize::new(0),
                            received: AtomicUsize::new(0),
                            recycled: AtomicUsize::new(0),
                        });
                        let me = c.rank() as f64;
                        let data: Vec<f64> = (0..1000).map(|i| i as f64 + me).collect();
                        let mut out = vec![0f64; 1000];
                        c.allreduce_into(&data, &mut out, Reduction::Sum).unwrap();
                        let want: Vec<f64> = (0..1000).map(|i| 3.0 * i as f64 + 3.0).collect();
                        assert_eq!(out, want);
                        // Root 1: its own data is folded in the middle.
                        let mut r = vec![0f64; 1000];
                        let at = c.reduce_into(1, &data, &mut r, Reduction::Max).unwrap();
                        if at {
                            assert_eq!(r, (0..1000).map(|i| i as f64 + 2.0).collect::<Vec<_>>());
                        }
                        let mut b = data.clone();
                        c.bcast_into(2, &mut b).unwrap();
                        assert_eq!(b, (0..1000).map(|i| i as f64 + 2.0).collect::<Vec<_>>());
                        let blocks: Vec<u64> = (0..30).collect();
                        let mut mine = [0u64; 10];
                        let d = (c.rank() == 0).then_some(&blocks[..]);
                        c.scatter_into(0, d, &mut mine).unwrap();
                        let k = c.rank() as u64 * 10;
                        assert_eq!(mine.to_vec(), (k..k + 10).collect::<Vec<_>>());
                        let g = c.gather(0, &[c.rank() as i32; 2]).unwrap();
                        if c.rank() == 0 {
                            assert_eq!(g.unwrap(), vec![0, 0, 1, 1, 2, 2]);
                        }
                        let l = c.link();
                        (
                            l.taken.load(Ordering::Relaxed),
                            l.received.load(Ordering::Relaxed),
                            l.recycled.load(Ordering::Relaxed),
                        )
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (rank, (taken, received, recycled)) in out.into_iter().enumerate() {
            assert!(taken > 0, "rank {rank} took buffers from the link");
            // Every received payload goes back; buffers taken for the
            // root's own contributions go back too.
            assert!(recycled >= received, "rank {rank}: {recycled} < {received}");
        }
    }
}
