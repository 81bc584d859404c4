//! Communicators revoked one by one (feature bit 5, protocol §18.8.1,
//! ULFM's `MPIX_Comm_revoke`): which this rank holds revoked, the notices
//! that came before their communicator was made here, and what a notice
//! asks of the receive state.

use std::collections::HashSet;

use sperli_wire::recovery::{passes_revoked, RecoveryError};
use sperli_wire::Error;

use super::Matching;

/// The revoked communicators of one rank.
#[derive(Debug, Default)]
pub(super) struct Revoked {
    ids: HashSet<u32>,
    /// Notices `(id, sender)` for an id above this rank's highest: the
    /// communicator is made later (protocol §18.8.1).
    early: Vec<(u32, u32)>,
}

/// The error a call on revoked communicator `comm` returns.
pub fn revoked_error(comm: u32) -> Error {
    RecoveryError::CommunicatorRevoked { comm }.into()
}

impl Matching {
    /// Whether this rank holds communicator `comm` revoked.
    pub fn is_revoked(&self, comm: u32) -> bool {
        self.revoked.ids.contains(&comm)
    }

    /// The revoked error when `comm` is revoked.
    pub fn check_comm(&self, comm: u32) -> Result<(), Error> {
        match self.is_revoked(comm) {
            true => Err(revoked_error(comm)),
            false => Ok(()),
        }
    }

    /// [`Matching::check_comm`] for a message with `tag` (`None`: any): the
    /// agreement's tags pass (protocol §18.8.1).
    pub fn check_comm_tag(&self, comm: u32, tag: Option<u32>) -> Result<(), Error> {
        match tag {
            Some(t) if passes_revoked(t) => Ok(()),
            _ => self.check_comm(comm),
        }
    }

    /// Revokes `comm` here (protocol §18.8.1 step 1 and 2): for good; every
    /// receive posted on it fails with the revoked error. False when it
    /// was revoked already.
    pub fn revoke(&mut self, comm: u32) -> bool {
        if !self.revoked.ids.insert(comm) {
            return false;
        }
        let posted = std::mem::take(&mut self.posted);
        for p in posted {
            if p.comm == comm && !p.tag.is_some_and(passes_revoked) {
                self.completed.insert(p.id, Err(revoked_error(comm)));
            } else {
                self.posted.push_back(p);
            }
        }
        true
    }

    /// The job ranks of communicator `comm` as this rank holds it
    /// (`whole`: communicator 0's members), if it holds it.
    pub fn members_of(&self, comm: u32, whole: &[u32]) -> Option<Vec<u32>> {
        if comm == 0 {
            return Some(whole.to_vec());
        }
        let known = &self.p2p.as_ref()?.known;
        known.comms.get(&comm).map(|m| m.to_vec())
    }

    /// A REVOKE COMMUNICATOR notice for `comm` from `from` (protocol
    /// §18.8.1): returns the ranks to forward it to (every other member
    /// but this rank and the sender) the first time it revokes `comm`;
    /// an id above this rank's highest is remembered for when it is made.
    pub fn handle_revoke_notice(&mut self, comm: u32, from: u32, whole: &[u32]) -> Vec<u32> {
        let me = self.me;
        match self.members_of(comm, whole) {
            Some(members) if members.contains(&from) => {
                if !self.revoke(comm) {
                    return Vec::new();
                }
                members
                    .into_iter()
                    .filter(|r| *r != me && *r != from)
                    .collect()
            }
            Some(_) => Vec::new(),
            None => {
                let highest = self.p2p.as_ref().map_or(0, |p| p.known.highest);
                if comm > highest {
                    self.revoked.early.push((comm, from));
                }
                Vec::new()
            }
        }
    }

    /// Communicator `id` was made here with `members`: a notice that came
    /// early for it from one of them revokes it from its birth.
    pub(super) fn apply_early_revokes(&mut self, id: u32, members: Option<&[u32]>) {
        let early = std::mem::take(&mut self.revoked.early);
        let mut revoke = false;
        for (c, from) in early {
            if c != id {
                self.revoked.early.push((c, from));
            } else if members.is_some_and(|m| m.contains(&from)) {
                revoke = true;
            }
        }
        if revoke {
            self.revoke(id);
        }
    }
}
