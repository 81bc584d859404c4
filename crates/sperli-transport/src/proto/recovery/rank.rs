//! A rank's side of a recovery (protocol §18.6-18.8).

use std::collections::{BTreeSet, VecDeque};

use sperli_wire::recovery::header::{check_membership_epoch, EpochVerdict};
use sperli_wire::recovery::{
    MembershipRecord, MembershipView, Mode, Precheck, RecoverPayload, RecoveryError, Report,
    RECORD_WAIT_MS, RECOVER_FRAME_TYPE, REVOKE_DELAY_MS,
};

use super::JOIN_WINDOW_MS;

/// Verifies a record's CompositeSig (protocol §18.3 check 16): given the
/// signed bytes and the signature, true when it verifies with the job
/// public key and context `SPERLI-MEMBER-1`.
pub type Verifier = Box<dyn Fn(&[u8], &[u8]) -> bool + Send>;

/// What the rank is doing (protocol §18.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// The epoch stands; no recovery under way.
    Running,
    /// This rank revoked its epoch and waits for a record (since `at`).
    Revoked {
        /// When it revoked.
        at: u64,
    },
    /// The record is applied; this rank waits for connections with these
    /// ranks (a survivor: the replacements; a replacement: every member)
    /// until `deadline` (protocol §18.7).
    Joining {
        /// Ranks still to authenticate.
        waiting: BTreeSet<u32>,
        /// The end of the join window.
        deadline: u64,
    },
    /// The job step ended: the full restart (launcher lost) or a rejected
    /// frame (protocol §18.6).
    Ended(RecoveryError),
    /// This rank was declared failed (protocol §18.3 check 18).
    Fenced,
}

/// A decision as a rank takes it from the record it applied (protocol §18.7, §18.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The new epoch.
    pub epoch: u32,
    /// Replace or shrink.
    pub mode: Mode,
    /// The agreed AND of the members' flags.
    pub agreed: bool,
    /// The COMMIT epoch to resume (replace).
    pub rollback: u64,
    /// `inc[n]` of the new epoch.
    pub incarnations: Vec<u32>,
}

/// A record as a rank applies it (protocol §18.3 "applied").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The new epoch.
    pub epoch: u32,
    /// `inc[n]` of the new epoch.
    pub incarnations: Vec<u32>,
    /// The endpoints of the replaced ranks: rank, host, port.
    pub hosts: Vec<(u32, String, u16)>,
    /// The record's bytes: each connection sends them ahead of its first
    /// frame of the new epoch (protocol §18.6, "Learning it").
    pub record: Vec<u8>,
}

impl Applied {
    fn of(rec: &MembershipRecord, bytes: &[u8]) -> Self {
        Applied {
            record: bytes.to_vec(),
            epoch: rec.epoch,
            incarnations: rec.incarnations.clone(),
            hosts: rec
                .changes
                .iter()
                .filter_map(|c| {
                    let (port, host) = c.endpoint.clone()?;
                    Some((c.rank, host, port))
                })
                .collect(),
        }
    }
}

/// Events a rank's recovery takes (protocol §18.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Silence, a close without BYE, or ABORT reason 1 or 2 from `peer` (protocol §18.6).
    PeerLost {
        /// The peer.
        peer: u32,
        /// Whether the detection was the close of the peer's connection
        /// (FIN or reset), which every member sees at once when a process
        /// ends: its REVOKEs may wait (protocol §18.6 step 2).
        closed: bool,
    },
    /// A RECOVER frame from `from` with its header's `membership_epoch`.
    Recover {
        /// The sender.
        from: u32,
        /// Its header's epoch.
        header_epoch: u32,
        /// The decoded payload.
        payload: RecoverPayload,
    },
    /// A record line from the control channel.
    Control {
        /// The record's bytes.
        record: Vec<u8>,
    },
    /// The control channel ended (the launcher is gone).
    ControlClosed,
    /// A connection of the new epoch with `peer` authenticated (protocol §18.7).
    Joined {
        /// The peer.
        peer: u32,
    },
}

/// What the rank must do (taken with [`RankRecovery::poll_output`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Send a RECOVER frame to `to`, header `membership_epoch` = `header_epoch`.
    Send {
        /// The receiver.
        to: u32,
        /// The header's epoch.
        header_epoch: u32,
        /// The payload.
        payload: RecoverPayload,
    },
    /// Write this REPORT to the control channel.
    Report(Report),
    /// Close the connection to `peer` without BYE.
    Close {
        /// The peer.
        peer: u32,
    },
    /// A record is applied (protocol §18.3): frames of its epoch are sent
    /// and judged from now on, and what the old epoch left starts again
    /// (protocol §18.2).
    Applied(Applied),
    /// The new membership stands on this rank.
    Decided(Decision),
    /// The job step ends with this error (sends ABORT reason 1 or 7 as v1,
    /// unless it is `Fenced`, which sends nothing).
    End(RecoveryError),
}

/// Where a record came from (protocol §18.3: check 16 is for a peer's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A RECOVER MEMBERSHIP frame of a member.
    Peer,
    /// The rank's control channel, which only the launcher writes.
    Launcher,
}

/// One rank's recovery state (protocol §18).
pub struct RankRecovery {
    rank: u32,
    incarnation: u32,
    view: MembershipView,
    phase: Phase,
    suspects: BTreeSet<u32>,
    /// Per member: the suspects its REVOKE of the current epoch named (it
    /// has revoked and knows them; protocol §18.6).
    heard: std::collections::BTreeMap<u32, BTreeSet<u32>>,
    /// When the REVOKEs held back go out (protocol §18.6 step 2: every
    /// suspect so far was detected by its close).
    revoke_due: Option<u64>,
    flag: bool,
    best_commit: u64,
    verify: Verifier,
    refused: Box<dyn Fn(&str) -> bool + Send>,
    out: VecDeque<Output>,
}

impl RankRecovery {
    /// A rank in the membership `view` (after set-up: epoch 1, every rank
    /// at the start incarnation); its own incarnation is `inc[rank]` there.
    pub fn new(rank: u32, view: MembershipView, verify: Verifier) -> Self {
        let incarnation = view.incarnations.get(rank as usize).copied().unwrap_or(0);
        RankRecovery {
            rank,
            incarnation,
            view,
            phase: Phase::Running,
            suspects: BTreeSet::new(),
            heard: Default::default(),
            revoke_due: None,
            flag: true,
            best_commit: 0,
            verify,
            refused: Box::new(|_| false),
            out: VecDeque::new(),
        }
    }

    /// The refused-host policy (protocol §2.3) a record's hosts are judged
    /// by (§18.3 check 17: H1614); without it no host is refused.
    pub fn set_refused_hosts(&mut self, refused: Box<dyn Fn(&str) -> bool + Send>) {
        self.refused = refused;
    }

    /// A replacement, given the record on its control channel (protocol
    /// §18.7) and its own (rank, incarnation) from its job description: it
    /// judges the record against itself (its own entry must be a change
    /// entry with its incarnation) and dials every member, waiting for them
    /// until `now` + the join window.
    pub fn replacement(
        own: (u32, u32),
        record_bytes: &[u8],
        verify: Verifier,
        now: u64,
    ) -> Result<Self, RecoveryError> {
        let (rank, own_incarnation) = own;
        let rec = MembershipRecord::decode(record_bytes)?;
        if !verify(&rec.signed_bytes(), &rec.signature) {
            return Err(RecoveryError::BadSignature);
        }
        let incarnation = rec.incarnations.get(rank as usize).copied().unwrap_or(0);
        if incarnation == 0
            || incarnation != own_incarnation
            || !rec.changes.iter().any(|c| c.rank == rank)
        {
            return Err(RecoveryError::Fenced { epoch: rec.epoch });
        }
        let waiting: BTreeSet<u32> = members(&rec.incarnations).filter(|m| *m != rank).collect();
        let view = MembershipView {
            job_id: rec.job_id,
            size: rec.size,
            start_incarnation: rec.start_incarnation,
            epoch: rec.epoch,
            incarnations: rec.incarnations.clone(),
            current_record: record_bytes.to_vec(),
        };
        let mut me = Self::new(rank, view, verify);
        me.phase = Phase::Joining {
            waiting,
            deadline: now + JOIN_WINDOW_MS,
        };
        me.out
            .push_back(Output::Applied(Applied::of(&rec, record_bytes)));
        me.finish_join(&rec);
        Ok(me)
    }

    /// The agreement flag and best COMMIT epoch this rank reports (protocol §18.4).
    pub fn set_report_values(&mut self, flag: bool, best_commit: u64) {
        self.flag = flag;
        self.best_commit = best_commit;
    }

    /// The highest COMMIT epoch this rank holds whose signature verifies
    /// (protocol §18.4 `best_commit`), for its next REPORT.
    pub fn set_best_commit(&mut self, best_commit: u64) {
        self.best_commit = best_commit;
    }

    /// Whether this rank waits for `rank` to join its epoch (protocol
    /// §18.7 check 2), and if so the SHA-256 its certificate (DER) must
    /// have (check 3).
    pub fn awaits_join(&self, rank: u32) -> Option<sperli_wire::ids::Sha256Digest> {
        let Phase::Joining { waiting, .. } = &self.phase else {
            return None;
        };
        if !waiting.contains(&rank) {
            return None;
        }
        self.current_record()?
            .changes
            .iter()
            .find(|c| c.rank == rank && c.endpoint.is_some())
            .map(|c| c.cert_sha256)
    }

    /// The rank's current phase.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The rank's current membership epoch.
    pub fn epoch(&self) -> u32 {
        self.view.epoch
    }

    /// The rank's own incarnation.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// `inc[n]` of every rank in this rank's current membership (0: not a member).
    pub fn incarnations(&self) -> &[u32] {
        &self.view.incarnations
    }

    /// `inc[rank]` in this rank's current membership (0: not a member).
    pub fn incarnation_of(&self, rank: u32) -> u32 {
        self.view
            .incarnations
            .get(rank as usize)
            .copied()
            .unwrap_or(0)
    }

    fn ended(&self) -> bool {
        matches!(self.phase, Phase::Ended(_) | Phase::Fenced)
    }

    fn end(&mut self, e: RecoveryError) {
        self.out.push_back(Output::End(e.clone()));
        self.phase = match e {
            RecoveryError::Fenced { .. } => Phase::Fenced,
            e => Phase::Ended(e),
        };
    }

    /// Takes one event (protocol §18.6).
    pub fn handle_event(&mut self, event: Event, now: u64) {
        if self.ended() {
            return;
        }
        match event {
            Event::PeerLost { peer, closed } => self.suspect(&[peer], !closed, now),
            Event::Recover {
                from,
                header_epoch,
                payload,
            } => {
                let verdict =
                    check_membership_epoch(RECOVER_FRAME_TYPE, header_epoch, self.view.epoch);
                match (verdict, payload) {
                    (Err(e), _) => self.end(e),
                    (Ok(EpochVerdict::Pass), RecoverPayload::Revoke { suspects }) => {
                        self.heard.entry(from).or_default().extend(&suspects);
                        self.suspect(&suspects, true, now)
                    }
                    // protocol §18.2: a record counts whatever the header's
                    // epoch; §18.3 check 15 discards one already passed.
                    (Ok(_), RecoverPayload::Membership { record }) => {
                        self.record(&record, Source::Peer, now)
                    }
                    (Ok(_), RecoverPayload::Revoke { .. }) => {}
                    // protocol §18.8.1: one communicator's revoke leaves
                    // the epoch as it is; the communicator layer takes it.
                    (Ok(_), RecoverPayload::RevokeCommunicator { .. }) => {}
                }
            }
            Event::Control { record } => self.record(&record, Source::Launcher, now),
            Event::ControlClosed => self.end(RecoveryError::LauncherLost),
            Event::Joined { peer } => {
                if let Phase::Joining { waiting, .. } = &mut self.phase {
                    waiting.remove(&peer);
                    if let Some(rec) = self.current_record() {
                        self.finish_join(&rec);
                    }
                }
            }
        }
    }

    fn current_record(&self) -> Option<MembershipRecord> {
        MembershipRecord::decode(&self.view.current_record).ok()
    }

    /// Revoke (protocol §18.6): on the first detection or REVOKE of the
    /// epoch, and again whenever the suspects grow. `urgent`: a detection
    /// by silence, ABORT or the join window, or a REVOKE heard; otherwise
    /// (each suspect detected by its close) the REVOKEs wait until
    /// [`REVOKE_DELAY_MS`] has passed, and go only if no record came first
    /// (step 2); the REPORT goes at once either way (step 3).
    fn suspect(&mut self, ranks: &[u32], urgent: bool, now: u64) {
        let before = self.suspects.len();
        for r in ranks {
            if *r != self.rank
                && self
                    .view
                    .incarnations
                    .get(*r as usize)
                    .is_some_and(|i| *i != 0)
            {
                self.suspects.insert(*r);
            }
        }
        let first = !matches!(self.phase, Phase::Revoked { .. });
        if self.suspects.len() == before && !first {
            return;
        }
        if self.suspects.is_empty() {
            return;
        }
        if first {
            self.phase = Phase::Revoked { at: now };
        }
        if urgent {
            self.send_revokes();
        } else if self.revoke_due.is_none() {
            self.revoke_due = Some(now + REVOKE_DELAY_MS);
        }
        let suspects: Vec<u32> = self.suspects.iter().copied().collect();
        self.out.push_back(Output::Report(Report {
            flag: self.flag,
            job_id: self.view.job_id,
            rank: self.rank,
            incarnation: self.incarnation,
            epoch: self.view.epoch,
            best_commit: self.best_commit,
            suspects,
        }));
    }

    /// Step 2 of the revoke (protocol §18.6): REVOKE with every suspect to
    /// every member this rank does not suspect, except one whose own
    /// REVOKE named every suspect already (it has revoked and knows them).
    fn send_revokes(&mut self) {
        self.revoke_due = None;
        let suspects: Vec<u32> = self.suspects.iter().copied().collect();
        for to in members(&self.view.incarnations) {
            let knows = self
                .heard
                .get(&to)
                .is_some_and(|h| self.suspects.is_subset(h));
            if to != self.rank && !self.suspects.contains(&to) && !knows {
                self.out.push_back(Output::Send {
                    to,
                    header_epoch: self.view.epoch,
                    payload: RecoverPayload::Revoke {
                        suspects: suspects.clone(),
                    },
                });
            }
        }
    }

    /// Learning a record (protocol §18.3, §18.6): checks, forward, apply.
    /// Check 16 (the signature) is for a record a peer sent; one from the
    /// control channel is the launcher's own word (protocol §18.3).
    fn record(&mut self, bytes: &[u8], source: Source, now: u64) {
        let rec = match MembershipRecord::decode(bytes) {
            Ok(r) => r,
            Err(e) => return self.end(e),
        };
        match rec.precheck(bytes, &self.view) {
            Err(e) => return self.end(e),
            Ok(Precheck::Discard) => return,
            Ok(Precheck::Verify) => {}
        }
        if source == Source::Peer && !(self.verify)(&rec.signed_bytes(), &rec.signature) {
            return self.end(RecoveryError::BadSignature);
        }
        let own = (self.rank, self.incarnation);
        if let Err(e) = rec.check_history(&self.view, own, |h| (self.refused)(h)) {
            return self.end(e);
        }
        // Protocol §18.6, "Learning it": each connection sends the record
        // ahead of its first frame of the new epoch (the transport's
        // connections do, from `Output::Applied`).
        let changed: BTreeSet<u32> = rec.changes.iter().map(|c| c.rank).collect();
        for c in &changed {
            self.out.push_back(Output::Close { peer: *c });
        }
        // Protocol §18.6: a rank this one saw fail that the record keeps (the
        // launcher signed before it learned of it) is a failure of the new
        // epoch, suspected again at once.
        let kept: Vec<u32> = self
            .suspects
            .iter()
            .copied()
            .filter(|s| rec.incarnations.get(*s as usize).is_some_and(|i| *i != 0))
            .filter(|s| !changed.contains(s))
            .collect();
        self.view.epoch = rec.epoch;
        self.view.incarnations = rec.incarnations.clone();
        self.view.current_record = bytes.to_vec();
        self.suspects.clear();
        self.heard.clear();
        self.revoke_due = None;
        self.out
            .push_back(Output::Applied(Applied::of(&rec, bytes)));
        let waiting = match rec.mode {
            Mode::Replace => changed,
            Mode::Shrink => BTreeSet::new(),
        };
        self.phase = Phase::Joining {
            waiting,
            deadline: now + JOIN_WINDOW_MS,
        };
        self.finish_join(&rec);
        if !kept.is_empty() {
            self.suspect(&kept, true, now);
        }
    }

    fn finish_join(&mut self, rec: &MembershipRecord) {
        if let Phase::Joining { waiting, .. } = &self.phase {
            if waiting.is_empty() {
                self.phase = Phase::Running;
                self.out.push_back(Output::Decided(Decision {
                    epoch: rec.epoch,
                    mode: rec.mode,
                    agreed: rec.agreed,
                    rollback: rec.rollback,
                    incarnations: rec.incarnations.clone(),
                }));
            }
        }
    }

    /// Runs the timers (protocol §18.6, §18.7): the REVOKEs held back, the
    /// join window (a rank not joined is suspected) and the 60 s wait for
    /// a record.
    pub fn poll_timers(&mut self, now: u64) {
        if self.revoke_due.is_some_and(|t| now >= t) && !self.ended() {
            self.send_revokes();
        }
        match &self.phase {
            Phase::Joining { waiting, deadline } if now >= *deadline => {
                let late: Vec<u32> = waiting.iter().copied().collect();
                self.suspect(&late, true, now);
            }
            Phase::Revoked { at } if now >= at + RECORD_WAIT_MS => {
                self.end(RecoveryError::LauncherLost)
            }
            _ => {}
        }
    }

    /// The next deadline of [`Self::poll_timers`], if any.
    pub fn poll_timeout(&self) -> Option<u64> {
        let phase = match &self.phase {
            Phase::Joining { deadline, .. } => Some(*deadline),
            Phase::Revoked { at } => Some(at + RECORD_WAIT_MS),
            _ => None,
        };
        match (phase, self.revoke_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next thing to do, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }
}

/// The members of an incarnation table (`inc` ≠ 0).
pub fn members(incarnations: &[u32]) -> impl Iterator<Item = u32> + '_ {
    incarnations
        .iter()
        .enumerate()
        .filter(|(_, i)| **i != 0)
        .map(|(n, _)| n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::recovery::decider::{Decider, DeciderOutput};
    use sperli_wire::ids::JobId;

    fn view(size: u32) -> MembershipView {
        MembershipView {
            job_id: JobId([3; 16]),
            size,
            start_incarnation: 1,
            epoch: 1,
            incarnations: vec![1; size as usize],
            current_record: vec![],
        }
    }

    /// The launcher's record after rank 1 of 2 ended and rank 0 reported:
    /// rank 1 replaced at incarnation 2, epoch 2.
    fn replaced_rank_1() -> MembershipRecord {
        let mut d = Decider::new(JobId([3; 16]), 2, 1, Mode::Replace, 1);
        d.handle_exit(1, 1, 0);
        assert_eq!(d.poll_timeout(), Some(REPORT_WAIT));
        let rep = Report {
            flag: true,
            job_id: JobId([3; 16]),
            rank: 0,
            incarnation: 1,
            epoch: 1,
            best_commit: 2,
            suspects: vec![],
        };
        d.handle_report(rep, 1);
        std::iter::from_fn(|| d.poll_output())
            .find_map(|o| match o {
                DeciderOutput::Issue { record, .. } => Some(record),
                _ => None,
            })
            .expect("a record")
    }

    fn outputs(r: &mut RankRecovery) -> Vec<Output> {
        std::iter::from_fn(|| r.poll_output()).collect()
    }

    /// The REVOKE targets of `out`, ascending.
    fn revoked_to(out: &[Output]) -> Vec<u32> {
        out.iter()
            .filter_map(|o| match o {
                Output::Send {
                    to,
                    payload: RecoverPayload::Revoke { .. },
                    ..
                } => Some(*to),
                _ => None,
            })
            .collect()
    }

    /// Protocol §18.6 step 2: no REVOKE to a member whose own REVOKE named
    /// every suspect already; one that names fewer still gets it.
    #[test]
    fn no_revoke_goes_back_to_a_member_that_revoked_for_the_same_suspects() {
        let mut r = RankRecovery::new(0, view(5), Box::new(|_, _| true));
        let revoke = |from, suspects: Vec<u32>| Event::Recover {
            from,
            header_epoch: 1,
            payload: RecoverPayload::Revoke { suspects },
        };
        r.handle_event(revoke(1, vec![4]), 10);
        // The first REVOKE heard: to every member but rank 1 (it knows).
        assert_eq!(revoked_to(&outputs(&mut r)), [2, 3]);
        r.handle_event(revoke(2, vec![4]), 11);
        assert!(outputs(&mut r).is_empty(), "no new suspect");
        // A second suspect: ranks 1 and 2 named only rank 4.
        r.handle_event(
            Event::PeerLost {
                peer: 3,
                closed: false,
            },
            12,
        );
        assert_eq!(revoked_to(&outputs(&mut r)), [1, 2]);
    }

    #[test]
    fn loss_revokes_reports_and_a_shrink_record_decides() {
        let mut r = RankRecovery::new(0, view(3), Box::new(|_, _| true));
        r.handle_event(
            Event::PeerLost {
                peer: 2,
                closed: false,
            },
            10,
        );
        let out = outputs(&mut r);
        assert_eq!(
            out[0],
            Output::Send {
                to: 1,
                header_epoch: 1,
                payload: RecoverPayload::Revoke { suspects: vec![2] }
            }
        );
        let Output::Report(rep) = out[1].clone() else {
            panic!("{out:?}")
        };
        assert_eq!((rep.epoch, rep.suspects.clone()), (1, vec![2]));
        let mut d = Decider::new(JobId([3; 16]), 3, 1, Mode::Shrink, 0);
        d.handle_report(rep, 10);
        let mut rep1 = Report {
            rank: 1,
            ..Report::decode(&out[1].report_bytes()).unwrap()
        };
        rep1.suspects = vec![2];
        d.handle_report(rep1, 11);
        assert_eq!(d.poll_output(), Some(DeciderOutput::Fence { rank: 2 }));
        let Some(DeciderOutput::Issue { record, to }) = d.poll_output() else {
            panic!()
        };
        assert_eq!((record.epoch, to), (2, vec![0, 1]));
        let record_bytes = record.encode();
        r.handle_event(
            Event::Control {
                record: record_bytes.clone(),
            },
            12,
        );
        let out = outputs(&mut r);
        // The record goes to the peers with each connection's first frame
        // of epoch 2 (protocol §18.6): the machine sends none itself, and
        // applies it; rank 2's connection closes.
        assert!(!out.iter().any(|o| matches!(o, Output::Send { .. })));
        assert!(out.contains(&Output::Close { peer: 2 }));
        assert!(matches!(
            out.iter().find(|o| matches!(o, Output::Applied(_))),
            Some(Output::Applied(Applied { epoch: 2, record, .. })) if *record == record_bytes
        ));
        assert!(matches!(
            out.last(),
            Some(Output::Decided(Decision { epoch: 2, .. }))
        ));
        assert_eq!(r.epoch(), 2);
        // The same record again, forwarded by a peer with the old epoch: discarded.
        r.handle_event(
            Event::Recover {
                from: 1,
                header_epoch: 1,
                payload: RecoverPayload::Revoke { suspects: vec![2] },
            },
            13,
        );
        assert!(outputs(&mut r).is_empty());
    }

    /// Protocol §18.6 step 2: a loss detected by its close reports at once
    /// and holds the REVOKEs back for REVOKE_DELAY_MS; a record that comes
    /// first means none are sent, a REVOKE naming a new suspect sends them
    /// all at once.
    #[test]
    fn a_closed_peer_holds_the_revokes_back_until_the_delay() {
        let lost = |peer| Event::PeerLost { peer, closed: true };
        // Nothing comes: the REVOKEs go when the delay ends, not before.
        let mut r = RankRecovery::new(0, view(4), Box::new(|_, _| true));
        r.handle_event(lost(3), 10);
        let out = outputs(&mut r);
        assert!(matches!(out[..], [Output::Report(_)]), "{out:?}");
        assert_eq!(r.poll_timeout(), Some(10 + REVOKE_DELAY_MS));
        r.poll_timers(9 + REVOKE_DELAY_MS);
        assert!(outputs(&mut r).is_empty());
        r.poll_timers(10 + REVOKE_DELAY_MS);
        assert_eq!(revoked_to(&outputs(&mut r)), [1, 2]);
        r.poll_timers(20 + REVOKE_DELAY_MS);
        assert!(outputs(&mut r).is_empty(), "sent once");
        // The record comes first: no REVOKE at all.
        let mut r = RankRecovery::new(0, view(2), Box::new(|_, _| true));
        r.handle_event(lost(1), 10);
        outputs(&mut r);
        let mut d = Decider::new(JobId([3; 16]), 2, 1, Mode::Shrink, 0);
        d.handle_exit(1, 1, 11);
        d.handle_report(
            Report {
                flag: true,
                job_id: JobId([3; 16]),
                rank: 0,
                incarnation: 1,
                epoch: 1,
                best_commit: 0,
                suspects: vec![1],
            },
            11,
        );
        let record = std::iter::from_fn(|| d.poll_output())
            .find_map(|o| match o {
                DeciderOutput::Issue { record, .. } => Some(record.encode()),
                _ => None,
            })
            .expect("a record");
        r.handle_event(Event::Control { record }, 12);
        outputs(&mut r);
        r.poll_timers(10 + REVOKE_DELAY_MS);
        assert!(revoked_to(&outputs(&mut r)).is_empty());
        // A REVOKE that names a suspect this rank had not: every REVOKE
        // goes at once, with both suspects, and none waits any more.
        let mut r = RankRecovery::new(0, view(5), Box::new(|_, _| true));
        r.handle_event(lost(4), 10);
        outputs(&mut r);
        r.handle_event(
            Event::Recover {
                from: 1,
                header_epoch: 1,
                payload: RecoverPayload::Revoke { suspects: vec![3] },
            },
            11,
        );
        let out = outputs(&mut r);
        assert_eq!(revoked_to(&out), [1, 2]);
        assert!(out.contains(&Output::Send {
            to: 2,
            header_epoch: 1,
            payload: RecoverPayload::Revoke {
                suspects: vec![3, 4]
            }
        }));
        r.poll_timers(10 + REVOKE_DELAY_MS);
        assert!(outputs(&mut r).is_empty());
    }

    #[test]
    fn a_suspect_the_record_keeps_revokes_the_new_epoch() {
        // Rank 0 of 4 saw ranks 2 and 3 fail; the launcher signed before it
        // knew of rank 3 (rank 1's report named only rank 2).
        let mut r = RankRecovery::new(0, view(4), Box::new(|_, _| true));
        r.handle_event(
            Event::PeerLost {
                peer: 2,
                closed: false,
            },
            10,
        );
        let first = outputs(&mut r);
        let Some(Output::Report(rep)) = first.last().cloned() else {
            panic!("{first:?}")
        };
        let mut d = Decider::new(JobId([3; 16]), 4, 1, Mode::Shrink, 0);
        for rank in [0, 1, 3] {
            d.handle_report(
                Report {
                    rank,
                    ..rep.clone()
                },
                11,
            );
        }
        r.handle_event(
            Event::PeerLost {
                peer: 3,
                closed: false,
            },
            12,
        );
        outputs(&mut r);
        let _fence = d.poll_output();
        let Some(DeciderOutput::Issue { record, .. }) = d.poll_output() else {
            panic!()
        };
        assert_eq!(record.incarnations, vec![1, 1, 0, 1]);
        r.handle_event(
            Event::Control {
                record: record.encode(),
            },
            13,
        );
        let out = outputs(&mut r);
        let decided = out
            .iter()
            .position(|o| matches!(o, Output::Decided(Decision { epoch: 2, .. })))
            .expect("the record applies");
        // Then epoch 2 is revoked at once, naming rank 3.
        let Some(Output::Report(again)) = out[decided..].last().cloned() else {
            panic!("{out:?}")
        };
        assert_eq!((again.epoch, again.suspects), (2, vec![3]));
        assert!(matches!(r.phase(), Phase::Revoked { .. }));
    }

    #[test]
    fn a_newer_epoch_frame_and_a_bad_signature_end_the_step() {
        let mut r = RankRecovery::new(0, view(2), Box::new(|_, _| true));
        r.handle_event(
            Event::Recover {
                from: 1,
                header_epoch: 2,
                payload: RecoverPayload::Revoke { suspects: vec![0] },
            },
            1,
        );
        assert!(matches!(
            r.phase(),
            Phase::Ended(RecoveryError::HeaderEpoch { current: 1, got: 2 })
        ));
        // Check 16 judges a peer's record; the control channel's is the
        // launcher's own (protocol §18.3).
        let rec = replaced_rank_1();
        let mut r = RankRecovery::new(0, view(2), Box::new(|_, _| false));
        r.handle_event(
            Event::Recover {
                from: 1,
                header_epoch: 1,
                payload: RecoverPayload::Membership {
                    record: rec.encode(),
                },
            },
            1,
        );
        assert_eq!(r.phase(), &Phase::Ended(RecoveryError::BadSignature));
        let mut r = RankRecovery::new(0, view(2), Box::new(|_, _| false));
        r.handle_event(
            Event::Control {
                record: rec.encode(),
            },
            1,
        );
        assert_eq!(r.epoch(), 2, "applied without a signature check");
    }

    #[test]
    fn a_replacement_checks_its_own_entry_and_a_refused_host_is_h1614() {
        let rec = replaced_rank_1();
        let bytes = rec.encode();
        let ok = RankRecovery::replacement((1, 2), &bytes, Box::new(|_, _| true), 5).unwrap();
        assert!(
            matches!(ok.phase(), Phase::Joining { waiting, deadline: 30_005 } if waiting.len() == 1)
        );
        for own in [(1, 3), (0, 1)] {
            let e = RankRecovery::replacement(own, &bytes, Box::new(|_, _| true), 5).err();
            assert_eq!(e, Some(RecoveryError::Fenced { epoch: 2 }), "{own:?}");
        }
        let mut r = RankRecovery::new(0, view(2), Box::new(|_, _| true));
        r.set_refused_hosts(Box::new(|_| true));
        r.handle_event(Event::Control { record: bytes }, 6);
        assert_eq!(
            r.phase(),
            &Phase::Ended(RecoveryError::HostRefused { rank: 1 })
        );
    }

    #[test]
    fn no_record_within_the_wait_is_a_lost_launcher() {
        let mut r = RankRecovery::new(1, view(2), Box::new(|_, _| true));
        r.handle_event(
            Event::PeerLost {
                peer: 0,
                closed: false,
            },
            5,
        );
        assert_eq!(r.poll_timeout(), Some(5 + RECORD_WAIT_MS));
        r.poll_timers(5 + RECORD_WAIT_MS - 1);
        assert!(matches!(r.phase(), Phase::Revoked { .. }));
        r.poll_timers(5 + RECORD_WAIT_MS);
        assert_eq!(r.phase(), &Phase::Ended(RecoveryError::LauncherLost));
    }

    const REPORT_WAIT: u64 = crate::proto::recovery::REPORT_WAIT_MS;

    impl Output {
        fn report_bytes(&self) -> Vec<u8> {
            match self {
                Output::Report(r) => r.encode(),
                _ => vec![],
            }
        }
    }
}
