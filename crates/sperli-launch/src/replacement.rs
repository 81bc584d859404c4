//! What the launcher issues for the replacement of a failed rank in the
//! replace mode (protocol §18.7): a new rank certificate (the same CN, the
//! replacement's host in its SAN) whose DER's SHA-256 goes into the
//! record's change entry, a join token for (rank, new incarnation, host),
//! and a job description with the new incarnation and the host list with
//! every changed endpoint.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use sperli_tls::job_plan::JobPlan;
use sperli_tls::join_token::{create_token, CreateTokenError};
use sperli_tls::pki::PkiError;
use sperli_wire::ids::Sha256Digest;
use sperli_wire::job_description::{HostEntry, JobDescription};
use sperli_wire::join_token::JoinTokenMessage;
use sperli_wire::recovery::{Change, MembershipRecord};

/// Why a replacement cannot be issued (the launcher's own failure: no
/// H-code; the recovery then restarts the job in full).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplacementError {
    /// The rank is not in the job.
    #[error("rank {rank} is not in the job of {size} ranks")]
    Rank {
        /// The rank.
        rank: u32,
        /// The job's size.
        size: u32,
    },
    /// The rank certificate could not be issued.
    #[error("rank certificate: {0}")]
    Pki(PkiError),
    /// The certificate the CA issued is not PEM.
    #[error("the issued rank certificate is not PEM")]
    Pem,
    /// The join token could not be signed.
    #[error("join token: {0}")]
    Token(CreateTokenError),
    /// No listening port was free on the replacement's host.
    #[error("{0}")]
    Port(sperli_tls::job_plan::PlanError),
}

/// The replacement of one failed rank (protocol §18.7).
#[derive(Clone, PartialEq, Eq)]
pub struct Replacement {
    /// The rank it replaces.
    pub rank: u32,
    /// Its incarnation, `inc[rank]` of the record.
    pub incarnation: u32,
    /// Its host and listening port.
    pub endpoint: HostEntry,
    /// SHA-256 of its certificate (DER): the change entry's `cert_sha256`.
    pub cert_sha256: Sha256Digest,
    /// Its job description (secret: only ever its stdin line).
    pub description: JobDescription,
}

impl std::fmt::Debug for Replacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replacement")
            .field("rank", &self.rank)
            .field("incarnation", &self.incarnation)
            .field("endpoint", &self.endpoint)
            .field("cert_sha256", &self.cert_sha256)
            .finish_non_exhaustive()
    }
}

/// Issues the replacement of `rank` at `incarnation` in the job of `plan`;
/// `hosts` is the host list of the new epoch (entry `rank` is the
/// replacement's endpoint, the others every rank's current one).
pub fn issue(
    plan: &JobPlan,
    hosts: &[HostEntry],
    rank: u32,
    incarnation: u32,
) -> Result<Replacement, ReplacementError> {
    let size = plan.size();
    let endpoint = hosts
        .get(rank as usize)
        .filter(|_| rank < size && hosts.len() == size as usize)
        .cloned()
        .ok_or(ReplacementError::Rank { rank, size })?;
    let identity = plan
        .ca
        .issue_rank(rank, &endpoint.host)
        .map_err(ReplacementError::Pki)?;
    let der = CertificateDer::from_pem_slice(identity.cert_pem.as_bytes())
        .map_err(|_| ReplacementError::Pem)?;
    let token = create_token(
        &plan.job_key,
        &JoinTokenMessage {
            job_id: plan.job_id,
            rank,
            size,
            incarnation,
            expires_at_ms: plan.expires_at_ms,
            host: &endpoint.host,
        },
    )
    .map_err(ReplacementError::Token)?;
    // The set-up description of the rank (the job key for rank 0), with
    // what is new.
    let mut description = plan.description(rank);
    description.incarnation = incarnation;
    description.hosts = hosts.to_vec();
    description.join_token = token;
    description.rank_cert_pem = identity.cert_pem.as_bytes().to_vec();
    description.rank_key_pem = identity.key_pem().as_bytes().to_vec();
    Ok(Replacement {
        rank,
        incarnation,
        endpoint,
        cert_sha256: Sha256Digest::of(der.as_ref()),
        description,
    })
}

/// Puts each replacement's certificate fingerprint and endpoint into its
/// change entry of `record` (before it is signed); false when a change
/// entry has no replacement.
pub fn fill_changes(record: &mut MembershipRecord, replacements: &[Replacement]) -> bool {
    for c in &mut record.changes {
        let Some(r) = replacements.iter().find(|r| r.rank == c.rank) else {
            return false;
        };
        *c = Change {
            rank: c.rank,
            cert_sha256: r.cert_sha256,
            endpoint: Some((r.endpoint.port, r.endpoint.host.clone())),
        };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_tls::join_token::{verify_token, TokenExpectation};
    use sperli_wire::recovery::{Mode, CONTEXT_MEMBER};
    use sperli_wire::refused_hosts::RefusedHosts;

    #[test]
    fn a_replacement_gets_a_new_certificate_token_and_description() {
        let plan = JobPlan::localhost(3).unwrap();
        let mut hosts = plan.hosts.clone();
        hosts[2].port = hosts[2].port.wrapping_add(1).max(1);
        let rep = issue(&plan, &hosts, 2, 2).unwrap();
        assert_eq!((rep.rank, rep.incarnation), (2, 2));
        assert_eq!(rep.endpoint, hosts[2]);
        // The description goes through its line and names the new epoch.
        let policy = RefusedHosts::new(None, None);
        let d = JobDescription::from_line(rep.description.to_line().as_bytes(), &policy).unwrap();
        assert_eq!((d.rank, d.incarnation, &d.hosts), (2, 2, &hosts));
        assert!(d.job_secret_key.is_empty());
        // Its certificate: the same CN, the fingerprint the record carries,
        // not the old one's.
        let der = CertificateDer::from_pem_slice(&d.rank_cert_pem).unwrap();
        assert_eq!(Sha256Digest::of(der.as_ref()), rep.cert_sha256);
        let id = sperli_tls::pki::peer_identity(der.as_ref()).unwrap();
        assert_eq!(
            id.common_name,
            sperli_tls::pki::expected_cn(&plan.job_id, 2)
        );
        let old = CertificateDer::from_pem_slice(plan.identity(2).cert_pem.as_bytes()).unwrap();
        assert_ne!(Sha256Digest::of(old.as_ref()), rep.cert_sha256);
        // Its token admits rank 2 at incarnation 2 on its host, not at 1.
        let mut exp = TokenExpectation {
            job_id: plan.job_id,
            rank_from_header: 2,
            rank_from_cert: 2,
            size: 3,
            incarnation: 2,
            host_of_that_rank: &hosts[2].host,
            now_ms: 1,
            refused: &policy,
        };
        let pk = plan.job_key.public_key();
        assert!(verify_token(&d.join_token, &exp, pk).is_ok());
        exp.incarnation = 1;
        assert!(verify_token(&d.join_token, &exp, pk).is_err());
        // Rank 0's replacement holds the job key, as rank 0 does.
        let zero = issue(&plan, &plan.hosts, 0, 2).unwrap();
        assert_eq!(zero.description.job_secret_key.len(), 64);
        assert!(matches!(
            issue(&plan, &hosts, 3, 2),
            Err(ReplacementError::Rank { rank: 3, size: 3 })
        ));
    }

    #[test]
    fn the_record_carries_each_replacement_and_verifies_once_signed() {
        let plan = JobPlan::localhost(3).unwrap();
        let rep = issue(&plan, &plan.hosts, 1, 2).unwrap();
        let mut record = MembershipRecord {
            mode: Mode::Replace,
            agreed: true,
            job_id: plan.job_id,
            start_incarnation: 1,
            epoch: 2,
            size: 3,
            rollback: 0,
            incarnations: vec![1, 2, 1],
            changes: vec![Change {
                rank: 1,
                cert_sha256: Sha256Digest([0; 32]),
                endpoint: Some((1, "127.0.0.9".into())),
            }],
            signature: vec![0; sperli_wire::limits::SIGNATURE_LEN],
        };
        let mut other = record.clone();
        other.changes[0].rank = 2;
        assert!(!fill_changes(&mut other, std::slice::from_ref(&rep)));
        assert!(fill_changes(&mut record, std::slice::from_ref(&rep)));
        crate::recovery::sign(&plan.job_key, &mut record).unwrap();
        let back = MembershipRecord::decode(&record.encode()).unwrap();
        assert_eq!(back.changes[0].cert_sha256, rep.cert_sha256);
        assert_eq!(
            back.changes[0].endpoint,
            Some((plan.hosts[1].port, plan.hosts[1].host.clone()))
        );
        assert!(sperli_tls::composite_sig::verify_bytes(
            plan.job_key.public_key().as_bytes(),
            &back.signed_bytes(),
            CONTEXT_MEMBER,
            &back.signature
        ));
    }
}
