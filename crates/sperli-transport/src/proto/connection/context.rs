//! What every connection of one rank knows about its job, and the check
//! of a peer's join token (protocol §7.1.2).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use sperli_tls::composite_sig::PublicKey;
use sperli_tls::join_token::{self, TokenExpectation};
use sperli_wire::error::{AuthError, TokenError};
use sperli_wire::header::FrameHeader;
use sperli_wire::job_description::HostEntry;
use sperli_wire::refused_hosts::RefusedHosts;
use sperli_wire::{Error, FrameType, JobId};

/// What every connection of one rank knows about the job.
#[derive(Debug, Clone)]
pub struct JobContext {
    /// The job id.
    pub job_id: JobId,
    /// The job size.
    pub size: u32,
    /// This rank.
    pub rank: u32,
    /// This rank's incarnation.
    pub incarnation: u32,
    /// Host list, entry n is rank n.
    pub hosts: Vec<HostEntry>,
    /// The CompositeSig job public key (1344 bytes).
    pub job_public_key: Vec<u8>,
    /// The refused-host policy (a token naming a refused host is H1614).
    pub refused: RefusedHosts,
    /// The feature bits this rank announces in its HELLO (bit 0 always
    /// set; protocol §7.1.1).
    pub features: u64,
    /// The rank's membership epoch (feature bit 5, protocol §18.2).
    pub membership: Arc<MembershipEpoch>,
}

/// A rank's current membership epoch (protocol §18.1, §18.2), which its
/// frames carry once its set-up ended with feature bit 5 in the job.
#[derive(Debug)]
pub struct MembershipEpoch {
    carried: AtomicBool,
    epoch: AtomicU32,
}

impl Default for MembershipEpoch {
    /// Epoch 1, the membership set-up makes (protocol §18.1), not carried yet.
    fn default() -> Self {
        Self {
            carried: AtomicBool::new(false),
            epoch: AtomicU32::new(1),
        }
    }
}

impl MembershipEpoch {
    /// The current epoch (≥ 1), as a receiver judges frames with bit 5.
    pub fn current(&self) -> u32 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// What this rank's frames carry: the current epoch once set-up ended
    /// with bit 5 in the job, else 0 (protocol §18.2; v1: 0).
    pub fn carried(&self) -> u32 {
        if self.carried.load(Ordering::SeqCst) {
            self.current()
        } else {
            0
        }
    }

    /// Set-up ended with bit 5 in the job: frames carry the epoch from now on.
    pub fn start_carrying(&self) {
        self.carried.store(true, Ordering::SeqCst);
    }

    /// A MEMBERSHIP record of `epoch` was applied (protocol §18.3).
    pub fn advance(&self, epoch: u32) {
        self.epoch.fetch_max(epoch, Ordering::SeqCst);
    }
}

impl JobContext {
    /// A header of `t` from this rank to `peer`, with the membership epoch
    /// this rank's frames carry (HELLO: 0, protocol §18.2).
    pub fn header(&self, t: FrameType, peer: u32) -> FrameHeader {
        let m = if t == FrameType::Hello {
            0
        } else {
            self.membership.carried()
        };
        FrameHeader::new(t, self.job_id, self.rank, peer, self.incarnation).with_membership_epoch(m)
    }
}

/// Checks a join token presented in a peer's HELLO (protocol §7.1, §7.1.2)
/// with `sperli_tls::join_token::verify_token`:
/// signature with the job public key, job id, rank = header source =
/// certificate rank (`peer`, the only source the header check lets
/// through), size, incarnation, host = host-list entry of that rank (and
/// not refused), expiry after the receiver's clock `now_ms` (Unix ms).
/// Fails with H1611 (H1614 for a refused host).
pub fn verify_token(ctx: &JobContext, peer: u32, token: &[u8], now_ms: u64) -> Result<(), Error> {
    let auth = |error| Error::Authentication {
        peer: Some(peer),
        error: AuthError::Token(error),
    };
    let pk =
        PublicKey::from_bytes(&ctx.job_public_key).map_err(|_| auth(TokenError::BadSignature))?;
    let host = ctx
        .hosts
        .get(peer as usize)
        .map(|h| h.host.as_str())
        .unwrap_or("");
    let exp = TokenExpectation {
        job_id: ctx.job_id,
        rank_from_header: peer,
        rank_from_cert: peer,
        size: ctx.size,
        incarnation: ctx.incarnation,
        host_of_that_rank: host,
        now_ms,
        refused: &ctx.refused,
    };
    join_token::verify_token(token, &exp, &pk).map(|_| ())
}
