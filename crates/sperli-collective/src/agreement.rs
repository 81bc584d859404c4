//! ULFM's agreement (MPI's `MPI_Comm_agree`, `MPI_Comm_iagree`) and the
//! exchange of ids of [`Comm::shrink`](crate::Comm::shrink), as
//! point-to-point messages on the communicator (protocol §18.8.1, "Agree
//! and shrink in this implementation"): the members' values, one u64 each,
//! go to the communicator's rank 0 with a reserved tag, which folds them in
//! ascending rank order (its own first, the left operand the lower ranks'
//! partial) and sends the result back to every member. Of an
//! intercommunicator, each group's rank 0 then swaps its group's fold with
//! the other group's rank 0 and folds the two before it sends the result,
//! so both groups get the fold over the members of both.
//!
//! The messages are not collective calls: they take no sequence number
//! (protocol §8.1), so an agreement neither waits for nor mixes with the
//! communicator's collectives (a rank may call a barrier while another
//! member's agreement runs, as ULFM allows), and it runs on a revoked
//! communicator. An [`Agreement`] is a request progressed by
//! [`Agreement::test`] and [`Agreement::wait`]: no thread runs it.

use std::sync::Arc;

use sperli_transport::{Endpoint, EndpointRef, PostedRecv, SendMode, StartedSend};
use sperli_wire::error::MismatchError;
use sperli_wire::Error;

/// The tag of an agreement's messages on its communicator (the user tag
/// range's top holds the reserved tags: [`MERGE_TAG`](crate::intercomm::MERGE_TAG),
/// [`COLL_TAG`](crate::intercomm_collectives::COLL_TAG), this one and
/// [`SHRINK_TAG`]); they pass a revoked communicator (protocol §18.8.1).
pub const AGREE_TAG: u32 = sperli_wire::recovery::AGREE_TAG;

/// The tag of the id exchange of [`Comm::shrink`](crate::Comm::shrink).
pub const SHRINK_TAG: u32 = sperli_wire::recovery::SHRINK_TAG;

/// How an agreement folds its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// Bitwise and (ULFM's agree).
    And,
    /// Maximum (the highest ids of a shrink, protocol §15.3).
    Max,
}

impl Fold {
    fn apply(self, left: u64, right: u64) -> u64 {
        match self {
            Fold::And => left & right,
            Fold::Max => left.max(right),
        }
    }
}

/// An endpoint reference an [`Agreement`] posts its messages on: `&Endpoint`
/// (a request that borrows it) or `Arc<Endpoint>` (an owned one).
pub trait AgreementLink: EndpointRef + Clone {
    /// Posts a receive of one message from job rank `from` on wire
    /// communicator `comm` with `tag`.
    fn post(&self, comm: u32, from: u32, tag: u32) -> Result<PostedRecv<Self>, Error>;
    /// Starts a standard send of `data` to job rank `to`.
    fn start(&self, comm: u32, to: u32, tag: u32, data: &[u8]) -> Result<StartedSend<Self>, Error>;
}

impl AgreementLink for &Endpoint {
    fn post(&self, comm: u32, from: u32, tag: u32) -> Result<PostedRecv<Self>, Error> {
        self.irecv_on(comm, Some(from), Some(tag))
    }
    fn start(&self, comm: u32, to: u32, tag: u32, data: &[u8]) -> Result<StartedSend<Self>, Error> {
        self.isend_on(comm, to, tag, data, SendMode::Standard)
    }
}

impl AgreementLink for Arc<Endpoint> {
    fn post(&self, comm: u32, from: u32, tag: u32) -> Result<PostedRecv<Self>, Error> {
        self.irecv_on_owned(comm, Some(from), Some(tag))
    }
    fn start(&self, comm: u32, to: u32, tag: u32, data: &[u8]) -> Result<StartedSend<Self>, Error> {
        self.isend_on_owned(comm, to, tag, data, SendMode::Standard)
    }
}

/// Who takes part in an agreement, as this rank sees it.
#[derive(Debug, Clone)]
pub(crate) struct Members {
    /// The wire communicator of the group's messages (protocol §16.2).
    pub(crate) wire: u32,
    /// The group's members, job ranks in rank order.
    pub(crate) job_ranks: Arc<[u32]>,
    /// This rank's rank in the group.
    pub(crate) rank: u32,
    /// Of an intercommunicator: its wire id and the other group's rank 0
    /// (a job rank), with whom this group's rank 0 swaps its fold.
    pub(crate) across: Option<(u32, u32)>,
}

enum Stage<E: EndpointRef> {
    /// The group's rank 0: the values of ranks 1.. (index i: rank i + 1).
    Gather {
        recvs: Vec<Option<PostedRecv<E>>>,
        got: Vec<u64>,
    },
    /// The group's rank 0 of an intercommunicator: the other group's fold.
    Across(Option<PostedRecv<E>>),
    /// Any other rank: the result from rank 0.
    Result(Option<PostedRecv<E>>),
    /// The result; the sends still to finish.
    Done(u64),
}

/// One agreement under way (see the module docs): [`Agreement::test`]
/// makes progress without waiting, [`Agreement::wait`] until the result.
pub struct Agreement<E: AgreementLink> {
    ep: E,
    who: Members,
    tag: u32,
    fold: Fold,
    acc: u64,
    stage: Stage<E>,
    sends: Vec<StartedSend<E>>,
}

impl<E: AgreementLink> std::fmt::Debug for Agreement<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agreement")
            .field("wire", &self.who.wire)
            .field("rank", &self.who.rank)
            .field("tag", &self.tag)
            .field("fold", &self.fold)
            .finish()
    }
}

/// The value of one agreement message: exactly 8 bytes, a u64 LE;
/// anything else does not fit the call (H1617).
fn value_of(from: u32, bytes: &[u8]) -> Result<u64, Error> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_le_bytes)
        .map_err(|_| {
            Error::CollectiveMismatch(MismatchError::Length {
                from,
                expected: 8,
                got: bytes.len() as u64,
            })
        })
}

impl<E: AgreementLink> Agreement<E> {
    /// Starts this rank's part: `value` folded with `fold` over `who`.
    pub(crate) fn start(
        ep: E,
        who: Members,
        tag: u32,
        fold: Fold,
        value: u64,
    ) -> Result<Self, Error> {
        let mut a = Agreement {
            ep,
            who,
            tag,
            fold,
            acc: value,
            stage: Stage::Done(value),
            sends: Vec::new(),
        };
        let (wire, ranks) = (a.who.wire, a.who.job_ranks.clone());
        if a.who.rank == 0 {
            let recvs = ranks[1..]
                .iter()
                .map(|&r| a.ep.post(wire, r, tag).map(Some))
                .collect::<Result<Vec<_>, Error>>()?;
            a.stage = Stage::Gather {
                got: Vec::with_capacity(recvs.len()),
                recvs,
            };
        } else {
            let root = ranks[0];
            let recv = a.ep.post(wire, root, tag)?;
            a.send(wire, root, value)?;
            a.stage = Stage::Result(Some(recv));
        }
        Ok(a)
    }

    fn send(&mut self, wire: u32, to: u32, v: u64) -> Result<(), Error> {
        let s = self.ep.start(wire, to, self.tag, &v.to_le_bytes())?;
        self.sends.push(s);
        Ok(())
    }

    /// The message of the receive in `h` (taken from it once there):
    /// waited for (`block`), or `None` while it is not there.
    fn take(h: &mut Option<PostedRecv<E>>, block: bool) -> Result<Option<u64>, Error> {
        let m = match h.take() {
            None => return Ok(None),
            Some(r) if block => r.wait()?,
            Some(mut r) => match r.test()? {
                Some(m) => m,
                None => {
                    *h = Some(r);
                    return Ok(None);
                }
            },
        };
        value_of(m.0.source, &m.1).map(Some)
    }

    /// The group's fold is complete at rank 0: across to the other group,
    /// or out to the members.
    fn folded(&mut self) -> Result<(), Error> {
        if let Some((wire, leader)) = self.who.across {
            let recv = self.ep.post(wire, leader, self.tag)?;
            self.send(wire, leader, self.acc)?;
            self.stage = Stage::Across(Some(recv));
            return Ok(());
        }
        self.spread()
    }

    /// Rank 0 sends the result to every other member.
    fn spread(&mut self) -> Result<(), Error> {
        let (wire, ranks) = (self.who.wire, self.who.job_ranks.clone());
        for &r in &ranks[1..] {
            self.send(wire, r, self.acc)?;
        }
        self.stage = Stage::Done(self.acc);
        Ok(())
    }

    /// Makes progress; the result once every member's value is in it and
    /// this rank's sends are through (`block`: waits for that).
    fn step(&mut self, block: bool) -> Result<Option<u64>, Error> {
        loop {
            match &mut self.stage {
                Stage::Gather { recvs, got } => {
                    for h in recvs.iter_mut().skip(got.len()) {
                        match Self::take(h, block)? {
                            Some(v) => got.push(v),
                            None => return Ok(None),
                        }
                    }
                    // Ascending rank order, this rank's (rank 0) first.
                    let acc = got.iter().fold(self.acc, |l, &r| self.fold.apply(l, r));
                    self.acc = acc;
                    self.folded()?;
                }
                Stage::Across(recv) => match Self::take(recv, block)? {
                    Some(v) => {
                        self.acc = self.fold.apply(self.acc, v);
                        self.spread()?;
                    }
                    None => return Ok(None),
                },
                Stage::Result(recv) => match Self::take(recv, block)? {
                    Some(v) => self.stage = Stage::Done(v),
                    None => return Ok(None),
                },
                Stage::Done(v) => {
                    let v = *v;
                    while let Some(s) = self.sends.last_mut() {
                        if s.test()? {
                            self.sends.pop();
                        } else if block {
                            if let Some(s) = self.sends.pop() {
                                s.wait()?;
                            }
                        } else {
                            return Ok(None);
                        }
                    }
                    return Ok(Some(v));
                }
            }
        }
    }

    /// The result if the agreement is complete on this rank, else
    /// `Ok(None)` (it made progress; call again). Later calls after the
    /// result give it again.
    pub fn test(&mut self) -> Result<Option<u64>, Error> {
        self.step(false)
    }

    /// Waits for the result (later calls give it again).
    pub fn wait(&mut self) -> Result<u64, Error> {
        match self.step(true)? {
            Some(v) => Ok(v),
            None => Err(Error::Local(sperli_wire::error::LocalError::Internal {
                what: "an agreement waited for ended without its result",
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds() {
        assert_eq!(Fold::And.apply(0b1100, 0b1010), 0b1000);
        assert_eq!(Fold::Max.apply(3, 9), 9);
        assert_eq!(Fold::Max.apply(9, 3), 9);
    }

    #[test]
    fn a_value_is_exactly_eight_bytes() {
        assert_eq!(value_of(2, &7u64.to_le_bytes()), Ok(7));
        for len in [0usize, 4, 7, 9, 16] {
            assert_eq!(
                value_of(2, &vec![0; len]),
                Err(Error::CollectiveMismatch(MismatchError::Length {
                    from: 2,
                    expected: 8,
                    got: len as u64,
                })),
                "{len} bytes"
            );
        }
    }
}
