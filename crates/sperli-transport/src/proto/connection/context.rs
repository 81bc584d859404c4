//! What every connection of one rank knows about its job, and the check
//! of a peer's join token (protocol §7.1.2).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

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
    /// The CompositeSig job public key (1344 bytes), decoded once.
    pub job_public_key: JobKey,
    /// The refused-host policy (a token naming a refused host is H1614).
    pub refused: RefusedHosts,
    /// The feature bits this rank announces in its HELLO (bit 0 always
    /// set; protocol §7.1.1).
    pub features: u64,
    /// The rank's membership epoch (feature bit 5, protocol §18.2).
    pub membership: Arc<MembershipEpoch>,
}

/// The job public key of a rank's job description (protocol §3, §4.2):
/// its bytes and the key they decode to, decoded on first use and kept, so
/// that checking the join tokens of every peer's HELLO (protocol §7.1.2)
/// does not decode it again each time (decoding expands the ML-DSA key).
#[derive(Debug, Clone)]
pub struct JobKey {
    bytes: Vec<u8>,
    key: OnceLock<Option<PublicKey>>,
}

impl JobKey {
    /// The key of `bytes` (not decoded yet).
    pub fn new(bytes: Vec<u8>) -> Self {
        Self {
            bytes,
            key: OnceLock::new(),
        }
    }

    /// The bytes, as the job description has them.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The decoded key; `None` when the bytes do not decode (then no
    /// token's signature verifies: H1611).
    pub fn key(&self) -> Option<&PublicKey> {
        self.key
            .get_or_init(|| PublicKey::from_bytes(&self.bytes).ok())
            .as_ref()
    }
}

/// A rank's current membership epoch (protocol §18.1, §18.2), which its
/// frames carry once its set-up ended with feature bit 5 in the job, and
/// what the records applied so far changed: each rank's incarnation and
/// the endpoints of replaced ranks.
#[derive(Debug)]
pub struct MembershipEpoch {
    carried: AtomicBool,
    epoch: AtomicU32,
    peers: RwLock<PeerTable>,
}

/// The per-rank part of a membership (protocol §18.3 "applied").
#[derive(Debug, Default)]
struct PeerTable {
    /// `inc[n]` (0: not a member); empty: every rank at the job's
    /// incarnation (set-up's membership, and v1).
    incarnations: Vec<u32>,
    /// The endpoints of ranks a record replaced (protocol §18.7).
    hosts: Vec<(u32, HostEntry)>,
    /// The record applied last (empty before any), which a connection
    /// sends ahead of its first frame of that epoch (protocol §18.6).
    record: Arc<Vec<u8>>,
}

impl Default for MembershipEpoch {
    /// Epoch 1, the membership set-up makes (protocol §18.1), not carried yet.
    fn default() -> Self {
        Self {
            carried: AtomicBool::new(false),
            epoch: AtomicU32::new(1),
            peers: RwLock::default(),
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

    /// A MEMBERSHIP record was applied (protocol §18.3): the epoch, every
    /// rank's incarnation in it, and the endpoints of the ranks it
    /// replaced (`hosts`: rank, host, port).
    pub fn apply(
        &self,
        epoch: u32,
        incarnations: &[u32],
        hosts: &[(u32, String, u16)],
        record: Arc<Vec<u8>>,
    ) {
        {
            let mut t = self.peers.write().unwrap_or_else(|e| e.into_inner());
            t.incarnations = incarnations.to_vec();
            t.record = record;
            for (rank, host, port) in hosts {
                t.hosts.retain(|(r, _)| r != rank);
                t.hosts.push((
                    *rank,
                    HostEntry {
                        host: host.clone(),
                        port: *port,
                    },
                ));
            }
        }
        self.advance(epoch);
    }

    /// `inc[rank]` of the current membership, when a record set it
    /// (protocol §18.2 check 9); `None`: the job's incarnation.
    pub fn incarnation_of(&self, rank: u32) -> Option<u32> {
        let t = self.peers.read().unwrap_or_else(|e| e.into_inner());
        t.incarnations.get(rank as usize).copied()
    }

    /// The record applied last (empty before any record).
    pub fn record(&self) -> Arc<Vec<u8>> {
        let t = self.peers.read().unwrap_or_else(|e| e.into_inner());
        t.record.clone()
    }

    /// The endpoint a record gave `rank` (protocol §18.7), if one did.
    pub fn host_of(&self, rank: u32) -> Option<HostEntry> {
        let t = self.peers.read().unwrap_or_else(|e| e.into_inner());
        t.hosts
            .iter()
            .find(|(r, _)| *r == rank)
            .map(|(_, h)| h.clone())
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

    /// The incarnation frames of `peer` carry (protocol §18.2 check 9):
    /// `inc[peer]` of the current membership with feature bit 5, else the
    /// job's (v1, protocol §6.2 check 9).
    pub fn peer_incarnation(&self, peer: u32) -> u32 {
        self.membership
            .incarnation_of(peer)
            .unwrap_or(self.incarnation)
    }

    /// `peer`'s host-list entry: the one a record gave it (protocol
    /// §18.7), else the job description's.
    pub fn peer_host(&self, peer: u32) -> Option<HostEntry> {
        self.membership
            .host_of(peer)
            .or_else(|| self.hosts.get(peer as usize).cloned())
    }
}

/// Checks a join token presented in a peer's HELLO (protocol §7.1, §7.1.2)
/// with `sperli_tls::join_token::verify_token`:
/// signature with the job public key, job id, rank = header source =
/// certificate rank (`peer`, the only source the header check lets
/// through), size, incarnation (`inc[peer]` of the current membership
/// with feature bit 5, protocol §18.7 check 4), host = host-list entry of
/// that rank (the record's, for a replaced rank) and not refused, expiry
/// after the receiver's clock `now_ms` (Unix ms).
/// Fails with H1611 (H1614 for a refused host).
pub fn verify_token(ctx: &JobContext, peer: u32, token: &[u8], now_ms: u64) -> Result<(), Error> {
    let auth = |error| Error::Authentication {
        peer: Some(peer),
        error: AuthError::Token(error),
    };
    let pk = ctx
        .job_public_key
        .key()
        .ok_or_else(|| auth(TokenError::BadSignature))?;
    let entry = ctx.peer_host(peer);
    let host = entry.as_ref().map(|h| h.host.as_str()).unwrap_or("");
    let exp = TokenExpectation {
        job_id: ctx.job_id,
        rank_from_header: peer,
        rank_from_cert: peer,
        size: ctx.size,
        incarnation: ctx.peer_incarnation(peer),
        host_of_that_rank: host,
        now_ms,
        refused: &ctx.refused,
    };
    join_token::verify_token(token, &exp, pk).map(|_| ())
}
