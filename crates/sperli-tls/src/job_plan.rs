//! [`JobPlan`]: a whole job made the way the launcher makes it (protocol
//! §2.2, §2.4, §4 and §7.1.2): the job id (16 random bytes), the job CA and
//! one certificate per rank (the rank's host as SAN), the CompositeSig job
//! key pair, one join token per rank and, from them, one [`JobDescription`]
//! per rank; rank 0 alone gets the job secret key. The launcher and the
//! tests use it; it sits behind the `issue` feature with [`crate::issue`].

use std::net::TcpListener;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand_core::{OsRng, RngCore};
use sperli_wire::job_description::{HostEntry, JobDescription};
use sperli_wire::join_token::JoinTokenMessage;
use sperli_wire::JobId;

use crate::composite_sig::{self, CompositeSigError, SecretKey};
use crate::join_token::{create_token, CreateTokenError};
use crate::pki::{JobCa, PkiError, RankIdentity};

/// Why a job cannot be planned. None of these is bad input from a peer:
/// they are failures of this machine or of the caller's arguments, so they
/// carry no H-code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The system random number generator failed (job id).
    #[error("the system random number generator failed")]
    Random,
    /// The job CA or a rank certificate could not be made.
    #[error("job PKI: {0}")]
    Pki(PkiError),
    /// The CompositeSig job key pair could not be made.
    #[error("job key generation: {0}")]
    JobKey(CompositeSigError),
    /// A join token could not be signed.
    #[error("join token: {0}")]
    Token(CreateTokenError),
    /// The incarnation counter would pass `u32::MAX`.
    #[error("the incarnation counter is at its maximum {}", u32::MAX)]
    IncarnationOverflow,
    /// No listening port of `host` in 20000-32767 was free (200 tries).
    #[error("no free listening port on {host} (last error {last:?})")]
    NoFreePort {
        /// The address tried.
        host: String,
        /// The last bind error.
        last: std::io::ErrorKind,
    },
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A planned job: everything the launcher hands its ranks.
pub struct JobPlan {
    /// The job id.
    pub job_id: JobId,
    /// The incarnation (>= 1).
    pub incarnation: u32,
    /// The host list, entry n is rank n.
    pub hosts: Vec<HostEntry>,
    /// The job CA.
    pub ca: JobCa,
    /// The CompositeSig job key pair.
    pub job_key: SecretKey,
    /// The join tokens' expiry (Unix ms).
    pub expires_at_ms: u64,
    identities: Vec<RankIdentity>,
    tokens: Vec<Vec<u8>>,
    /// The listeners [`JobPlan::localhost_bound`] bound, until a rank
    /// takes its own ([`JobPlan::take_listener`]).
    listeners: Mutex<Vec<Option<Arc<TcpListener>>>>,
}

impl std::fmt::Debug for JobPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobPlan")
            .field("job_id", &self.job_id)
            .field("incarnation", &self.incarnation)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl JobPlan {
    /// Plans a job on `hosts` (entry n is rank n) with `incarnation`; the
    /// certificates and join tokens are valid for `lifetime` from now.
    pub fn new(
        hosts: Vec<HostEntry>,
        incarnation: u32,
        lifetime: Duration,
    ) -> Result<Self, PlanError> {
        let mut id = [0u8; 16];
        OsRng
            .try_fill_bytes(&mut id)
            .map_err(|_| PlanError::Random)?;
        Self::with_job_id(JobId(id), hosts, incarnation, lifetime)
    }

    /// Like [`JobPlan::new`] with a given job id.
    pub fn with_job_id(
        job_id: JobId,
        hosts: Vec<HostEntry>,
        incarnation: u32,
        lifetime: Duration,
    ) -> Result<Self, PlanError> {
        let job_key = composite_sig::generate().map_err(PlanError::JobKey)?;
        Self::with_job_key(job_id, job_key, hosts, incarnation, lifetime)
    }

    /// The plan of a job that already exists, for a later launcher run of
    /// it (protocol §10.1; the key file of `sperli run --job-key`): the
    /// same job id and job key pair (so its COMMIT files still verify),
    /// `incarnation` (the next one: a token of an earlier run names an
    /// older incarnation and is refused), and a new job CA with new
    /// certificates and join tokens valid for `lifetime` from now.
    pub fn with_job_key(
        job_id: JobId,
        job_key: SecretKey,
        hosts: Vec<HostEntry>,
        incarnation: u32,
        lifetime: Duration,
    ) -> Result<Self, PlanError> {
        let deadline = SystemTime::now() + lifetime;
        let ca = JobCa::generate(job_id, deadline).map_err(PlanError::Pki)?;
        let mut plan = Self {
            job_id,
            incarnation,
            hosts,
            ca,
            job_key,
            expires_at_ms: unix_ms(deadline),
            identities: Vec::new(),
            tokens: Vec::new(),
            listeners: Mutex::new(Vec::new()),
        };
        plan.issue()?;
        Ok(plan)
    }

    /// Issues one certificate and one join token per rank for the current
    /// incarnation and host list.
    fn issue(&mut self) -> Result<(), PlanError> {
        self.identities.clear();
        self.tokens.clear();
        for rank in 0..self.hosts.len() as u32 {
            let host = self.hosts[rank as usize].host.clone();
            self.identities
                .push(self.ca.issue_rank(rank, &host).map_err(PlanError::Pki)?);
            let token = self.sign_token(rank, &host, self.expires_at_ms)?;
            self.tokens.push(token);
        }
        Ok(())
    }

    /// The plan for the next incarnation of the same job: the same job id,
    /// job CA and job key (COMMIT files signed in earlier incarnations still
    /// verify), incarnation + 1, `hosts` (a failed rank may have moved), and
    /// new certificates and join tokens, so a token of an older incarnation
    /// is refused (protocol §10.1).
    pub fn next_incarnation(&mut self, hosts: Vec<HostEntry>) -> Result<(), PlanError> {
        self.incarnation = self
            .incarnation
            .checked_add(1)
            .ok_or(PlanError::IncarnationOverflow)?;
        self.hosts = hosts;
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.issue()
    }

    /// A job of `size` ranks on loopback: rank n on 127.0.0.(n+1) with a
    /// port that was free a moment ago ([`free_port`]), incarnation 1,
    /// valid 10 minutes. For ranks in other processes, which bind their
    /// ports themselves.
    pub fn localhost(size: u32) -> Result<Self, PlanError> {
        Self::new(local_hosts(size)?, 1, Duration::from_secs(600))
    }

    /// Like [`JobPlan::localhost`], but each rank's port stays bound by a
    /// listener the plan holds until the rank takes it
    /// ([`JobPlan::take_listener`], handed to the transport as its
    /// `Settings::listener`): no other program can take the port between
    /// the plan and the rank's start. For ranks that run in this process.
    /// A new incarnation ([`JobPlan::next_incarnation`]) holds none: its
    /// ranks bind their ports themselves.
    pub fn localhost_bound(size: u32) -> Result<Self, PlanError> {
        let mut hosts = Vec::new();
        let mut listeners = Vec::new();
        for r in 0..size {
            let host = format!("127.0.0.{}", r % 254 + 1);
            let l = bind_free(&host)?;
            let port = l
                .local_addr()
                .map_err(|e| PlanError::NoFreePort {
                    host: host.clone(),
                    last: e.kind(),
                })?
                .port();
            hosts.push(HostEntry { host, port });
            listeners.push(Some(Arc::new(l)));
        }
        let plan = Self::new(hosts, 1, Duration::from_secs(600))?;
        *plan
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = listeners;
        Ok(plan)
    }

    /// The listener [`JobPlan::localhost_bound`] holds for `rank`, once:
    /// `None` for a plan that holds none, a rank out of range, or a second
    /// call.
    pub fn take_listener(&self, rank: u32) -> Option<Arc<TcpListener>> {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(rank as usize)?
            .take()
    }

    /// The job size.
    pub fn size(&self) -> u32 {
        self.hosts.len() as u32
    }

    /// Signs a join token for `rank` on `host` expiring at `expires_at_ms`
    /// (protocol §7.1.2). Tests use it for odd tokens.
    pub fn sign_token(
        &self,
        rank: u32,
        host: &str,
        expires_at_ms: u64,
    ) -> Result<Vec<u8>, PlanError> {
        let msg = JoinTokenMessage {
            job_id: self.job_id,
            rank,
            size: self.size(),
            incarnation: self.incarnation,
            expires_at_ms,
            host,
        };
        create_token(&self.job_key, &msg).map_err(PlanError::Token)
    }

    /// Rank `rank`'s join token.
    pub fn token(&self, rank: u32) -> &[u8] {
        &self.tokens[rank as usize]
    }

    /// Rank `rank`'s certificate, key and the CA certificate.
    pub fn identity(&self, rank: u32) -> &RankIdentity {
        &self.identities[rank as usize]
    }

    /// Rank `rank`'s job description (protocol §4): rank 0 alone carries
    /// the job secret key.
    pub fn description(&self, rank: u32) -> JobDescription {
        let id = self.identity(rank);
        JobDescription {
            job_id: self.job_id,
            size: self.size(),
            rank,
            incarnation: self.incarnation,
            hosts: self.hosts.clone(),
            job_public_key: self.job_key.public_key().as_bytes().to_vec(),
            join_token: self.token(rank).to_vec(),
            ca_cert_pem: id.ca_cert_pem.as_bytes().to_vec(),
            rank_cert_pem: id.cert_pem.as_bytes().to_vec(),
            job_secret_key: if rank == 0 {
                self.job_key.to_bytes().to_vec()
            } else {
                Vec::new()
            },
            rank_key_pem: id.key_pem().as_bytes().to_vec(),
        }
    }
}

/// `size` loopback hosts 127.0.0.1, 127.0.0.2, ... each with a port that
/// was free a moment ago (see [`free_port`]).
pub fn local_hosts(size: u32) -> Result<Vec<HostEntry>, PlanError> {
    // Each port stays bound until every one is picked: no two ranks get
    // the same port of one address.
    let mut held = Vec::new();
    (0..size)
        .map(|r| {
            let host = format!("127.0.0.{}", r % 254 + 1);
            let (port, l) = free_port_held(&host)?;
            held.push(l);
            Ok(HostEntry { host, port })
        })
        .collect()
}

/// Listening ports are picked below the kernel's ephemeral range
/// (32768-60999 on Linux), where every outgoing connection takes its source
/// port: a port picked there could be taken by a connection of another job
/// before the rank binds it.
const LISTEN_PORTS: std::ops::Range<u16> = 20_000..32_768;

/// A port of `host` (`localhost` or a dotted IPv4 address of this machine)
/// that was free a moment ago: a random port of 20000-32767 that binds on
/// exactly that address, tried up to 200 times.
pub fn free_port(host: &str) -> Result<u16, PlanError> {
    free_port_held(host).map(|(port, _)| port)
}

/// Like [`free_port`], with the listener that holds the port until it is
/// dropped: a caller that picks several ports keeps the earlier ones
/// bound while it picks the next, so that no two are the same (released
/// one by one, two of 64 ranks' ports would be the same one time in seven).
pub fn free_port_held(host: &str) -> Result<(u16, TcpListener), PlanError> {
    let l = bind_free(host)?;
    let port = l
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| PlanError::NoFreePort {
            host: host.to_owned(),
            last: e.kind(),
        })?;
    Ok((port, l))
}

/// The address a listener for a rank on `host` binds: `localhost` is
/// 127.0.0.1 (not ::1 or whatever the resolver answers first), any other
/// host itself.
pub fn listen_addr(host: &str) -> &str {
    if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    }
}

/// A listener on a random port of 20000-32767 of `host` (see
/// [`free_port`]), tried up to 200 times.
fn bind_free(host: &str) -> Result<TcpListener, PlanError> {
    let addr = listen_addr(host);
    let span = u32::from(LISTEN_PORTS.end - LISTEN_PORTS.start);
    let mut last = std::io::ErrorKind::AddrInUse;
    for _ in 0..200 {
        let port = LISTEN_PORTS.start + (OsRng.next_u32() % span) as u16;
        match TcpListener::bind((addr, port)) {
            Ok(l) => return Ok(l),
            Err(e) => last = e.kind(),
        }
    }
    Err(PlanError::NoFreePort {
        host: addr.to_owned(),
        last,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_with_an_existing_key_is_the_same_job_with_new_certificates() {
        let first = JobPlan::localhost(2).unwrap();
        let later = JobPlan::with_job_key(
            first.job_id,
            first.job_key.clone(),
            first.hosts.clone(),
            7,
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(later.job_id, first.job_id);
        assert_eq!(later.incarnation, 7);
        for r in 0..2 {
            let (a, b) = (first.description(r), later.description(r));
            assert_eq!(a.job_public_key, b.job_public_key);
            assert_eq!(b.incarnation, 7);
            assert_ne!(a.ca_cert_pem, b.ca_cert_pem, "a new job CA");
            assert_ne!(a.join_token, b.join_token);
        }
        assert_eq!(
            later.description(0).job_secret_key,
            first.job_key.to_bytes().to_vec()
        );
    }

    /// Ports picked while the earlier ones are held never repeat (the
    /// launcher gives each of 64 ranks on `localhost` one of them).
    #[test]
    fn held_free_ports_are_all_different() {
        let mut held = Vec::new();
        let mut ports = std::collections::BTreeSet::new();
        for _ in 0..300 {
            let (port, l) = free_port_held("127.0.0.1").unwrap();
            assert!(LISTEN_PORTS.contains(&port));
            assert!(ports.insert(port), "port {port} twice");
            held.push(l);
        }
    }

    #[test]
    fn a_bound_plan_holds_each_ranks_port_until_the_rank_takes_it() {
        let mut plan = JobPlan::localhost_bound(3).unwrap();
        for r in 0..3u32 {
            let h = &plan.hosts[r as usize];
            let addr: std::net::SocketAddr = format!("{}:{}", h.host, h.port).parse().unwrap();
            // The port is taken while the plan holds it.
            assert!(TcpListener::bind(addr).is_err(), "rank {r}'s port is held");
            let l = plan.take_listener(r).expect("held once");
            assert_eq!(l.local_addr().unwrap(), addr);
            assert!(plan.take_listener(r).is_none(), "taken only once");
        }
        assert!(plan.take_listener(3).is_none(), "no rank 3");
        let hosts = plan.hosts.clone();
        plan.next_incarnation(hosts).unwrap();
        assert!(JobPlan::localhost(1).unwrap().take_listener(0).is_none());
    }
}
