//! Feature bit 5 for the program (protocol §18.6-18.8): after a lost peer
//! every call returns `RecoveryError::Revoked` until the program recovers
//! into the membership the launcher decides.

use sperli_wire::recovery::FEATURE_MEMBERSHIP;
use sperli_wire::Error;

use super::Endpoint;
use crate::io::recovery::Recovered;

impl Endpoint {
    /// Waits for the membership that follows a revoke (protocol §18.6:
    /// the launcher's MEMBERSHIP record, applied and passed on to the
    /// peers) and lets calls run again, in it. Without a revoke it returns
    /// the membership in force at once; so it does in a job without
    /// feature bit 5 (epoch 0, every rank a member).
    ///
    /// In the shrink mode (protocol §18.8) the members of the new epoch
    /// are the survivors; in the replace mode they are every rank. The
    /// job's error (the recovery failed: a record that does not verify,
    /// the launcher lost, this rank fenced) ends the wait.
    pub fn recover(&self) -> Result<Recovered, Error> {
        let shared = &self.shared;
        match &shared.recovery {
            Some(r) if self.features() & FEATURE_MEMBERSHIP != 0 => {
                let ended = || shared.error.get().cloned();
                let got = r.recover(&ended);
                self.outcome(got)
            }
            _ => Ok(self.membership()),
        }
    }

    /// Revokes communicator `comm` (ULFM's `MPIX_Comm_revoke`, protocol
    /// §18.8.1): every pending and later call on it, here and, through
    /// RECOVER REVOKE COMMUNICATOR, on its other members, fails with
    /// `RecoveryError::CommunicatorRevoked`. In a job without feature bit
    /// 5 (no RECOVER frame) only this rank's calls fail. Revoking a
    /// revoked communicator changes nothing.
    pub fn revoke_communicator(&self, comm: u32) -> Result<(), Error> {
        self.check()?;
        let shared = &self.shared;
        let sent = match &shared.recovery {
            Some(r) if self.features() & FEATURE_MEMBERSHIP != 0 => {
                let mut st = shared.state();
                r.revoke_communicator(comm, self.rank(), &mut st)
            }
            _ => {
                shared.state().revoke(comm);
                false
            }
        };
        if sent {
            shared.command(crate::io::shared::Command::Recovery);
        }
        shared.changed();
        Ok(())
    }

    /// Says whether the program can go on after a lost peer (feature bit
    /// 5, protocol §18.6): while on, and under [`ErrorMode::Return`], a
    /// lost peer revokes the epoch (every call returns
    /// `RecoveryError::Revoked` until [`Endpoint::recover`]); while off, a
    /// lost peer ends the job step as in v1. From
    /// [`Settings::recoverable`] until changed.
    ///
    /// [`ErrorMode::Return`]: crate::ErrorMode::Return
    /// [`Settings::recoverable`]: crate::Settings::recoverable
    pub fn set_recoverable(&self, on: bool) {
        self.shared.set_recoverable(on);
    }

    /// See [`Endpoint::set_recoverable`].
    pub fn recoverable(&self) -> bool {
        self.shared.recoverable()
    }

    /// Notes that this rank holds a COMMIT file of checkpoint `epoch`
    /// whose signature verifies (protocol §18.4: the REPORT's
    /// `best_commit`; the launcher rolls the replace mode back to the
    /// lowest of the reports, §18.6). Without feature bit 5's recovery
    /// it changes nothing.
    pub fn set_best_commit(&self, epoch: u64) {
        if let Some(r) = &self.shared.recovery {
            r.set_best_commit(epoch);
        }
    }

    /// Whether communicator `comm` is revoked on this rank (protocol
    /// §18.8.1).
    pub fn is_communicator_revoked(&self, comm: u32) -> bool {
        self.shared.state().is_revoked(comm)
    }

    /// The membership in force (protocol §18.1): epoch 0 and every rank in
    /// a job without feature bit 5.
    pub fn membership(&self) -> Recovered {
        match &self.shared.recovery {
            Some(r) if self.features() & FEATURE_MEMBERSHIP != 0 => r.membership(),
            _ => Recovered::whole_job(self.size()),
        }
    }
}
