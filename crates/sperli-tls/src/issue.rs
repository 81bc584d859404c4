//! Issuing the per-job PKI (protocol §2.2: "For each job the launcher
//! creates: a job CA ...; for each rank n an Ed25519 key and certificate
//! signed by the job CA"): the job CA and the rank
//! certificates, made with rcgen. Only the launcher and tests issue
//! certificates, so this module (and rcgen) sits behind the `issue`
//! feature; a rank reads and checks certificates with [`crate::pki`].

use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use rand_core::{OsRng, RngCore};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use sperli_wire::JobId;
use time::OffsetDateTime;
use zeroize::Zeroizing;

use crate::pki::{ca_cn, expected_cn, PkiError, RankIdentity, SubjectAltName, MAX_RANK_CN_LEN};

/// How long before issue a certificate becomes valid (protocol §2.2:
/// "notBefore a few minutes before issue"), to absorb clock skew between
/// hosts.
pub const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// The rcgen form of a SAN SPERLI issues (IPv4 or DNS).
fn to_rcgen(san: &SubjectAltName) -> Result<SanType, PkiError> {
    match san {
        SubjectAltName::Ip(ip) => Ok(SanType::IpAddress(IpAddr::V4(*ip))),
        SubjectAltName::Dns(name) => Ok(SanType::DnsName(
            name.clone().try_into().map_err(PkiError::Generate)?,
        )),
        SubjectAltName::Other => Err(PkiError::UnsupportedSan),
    }
}

/// What a rank certificate says (protocol §2.2): normally from
/// [`RankCertParams::for_rank`]; tests build odd ones by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankCertParams {
    /// The subject CN (at most 44 bytes).
    pub common_name: String,
    /// The one SAN.
    pub san: SubjectAltName,
}

impl RankCertParams {
    /// The parameters of rank `rank` on `host` (protocol §2.2).
    pub fn for_rank(job: &JobId, rank: u32, host: &str) -> Result<Self, PkiError> {
        Ok(Self {
            common_name: expected_cn(job, rank),
            san: SubjectAltName::for_host(host)?,
        })
    }
}

/// A job CA: Ed25519 key and self-signed certificate (protocol §2.2). Its
/// key stays in memory; `Debug` shows no key.
pub struct JobCa {
    job: JobId,
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    cert_der: Vec<u8>,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
}

impl fmt::Debug for JobCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobCa")
            .field("job", &self.job)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// The DER prefix of a PKCS#8 v1 Ed25519 private key (RFC 8410 §7), before
/// the 32-byte seed.
const ED25519_PKCS8_V1_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// A fresh Ed25519 key whose PEM is PKCS#8 v1 (RFC 8410), which every
/// TLS stack reads; ring's own generator writes v2, which OpenSSL 3.0
/// refuses.
fn ed25519_key_v1() -> Result<KeyPair, PkiError> {
    let mut der = Zeroizing::new(Vec::with_capacity(48));
    der.extend_from_slice(&ED25519_PKCS8_V1_PREFIX);
    let mut seed = Zeroizing::new([0u8; 32]);
    OsRng
        .try_fill_bytes(&mut seed[..])
        .map_err(|_| PkiError::Random)?;
    der.extend_from_slice(&seed[..]);
    KeyPair::try_from(der.as_slice()).map_err(PkiError::Generate)
}

fn validity(deadline: SystemTime) -> Result<(OffsetDateTime, OffsetDateTime), PkiError> {
    let now = SystemTime::now();
    if deadline <= now {
        return Err(PkiError::DeadlinePassed);
    }
    let start = now.checked_sub(BACKDATE).unwrap_or(SystemTime::UNIX_EPOCH);
    Ok((OffsetDateTime::from(start), OffsetDateTime::from(deadline)))
}

impl JobCa {
    /// Makes the CA of job `job`, valid from five minutes ago until
    /// `deadline` (protocol §2.2).
    pub fn generate(job: JobId, deadline: SystemTime) -> Result<Self, PkiError> {
        let (not_before, not_after) = validity(deadline)?;
        let key = KeyPair::generate_for(&rcgen::PKCS_ED25519).map_err(PkiError::Generate)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, ca_cn(&job));
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        params.not_before = not_before;
        params.not_after = not_after;
        let cert = params.self_signed(&key).map_err(PkiError::Generate)?;
        Ok(Self {
            job,
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            issuer: Issuer::new(params, key),
            not_before,
            not_after,
        })
    }

    /// The job this CA belongs to.
    pub fn job(&self) -> JobId {
        self.job
    }

    /// The CA certificate, PEM (protocol §2.2).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA certificate, DER (protocol §2.2).
    pub fn cert_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// Issues rank `rank`'s certificate for `host` (protocol §2.2).
    pub fn issue_rank(&self, rank: u32, host: &str) -> Result<RankIdentity, PkiError> {
        self.issue(&RankCertParams::for_rank(&self.job, rank, host)?)
    }

    /// Issues a rank certificate with the given CN and SAN (protocol §2.2):
    /// CA:false, keyUsage digitalSignature, EKU serverAuth and clientAuth,
    /// valid as long as the CA.
    pub fn issue(&self, spec: &RankCertParams) -> Result<RankIdentity, PkiError> {
        if spec.common_name.len() > MAX_RANK_CN_LEN {
            return Err(PkiError::CommonNameTooLong {
                len: spec.common_name.len(),
            });
        }
        let key = ed25519_key_v1()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, spec.common_name.clone());
        params.distinguished_name = dn;
        params.subject_alt_names = vec![to_rcgen(&spec.san)?];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        params.not_before = self.not_before;
        params.not_after = self.not_after;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(PkiError::Generate)?;
        Ok(RankIdentity::new(
            self.cert_pem.clone(),
            cert.pem(),
            Zeroizing::new(key.serialize_pem()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{ca_cn, expected_cn, peer_identity};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    use std::net::Ipv4Addr;

    fn job() -> JobId {
        JobId([0xab; 16])
    }

    fn deadline() -> SystemTime {
        SystemTime::now() + Duration::from_secs(3600)
    }

    #[test]
    fn rank_certificate_reads_back() {
        let ca = JobCa::generate(job(), deadline()).unwrap();
        let ca_id = peer_identity(ca.cert_der()).unwrap();
        assert_eq!(ca_id.common_name, ca_cn(&job()));
        for (host, san) in [
            ("127.0.0.1", SubjectAltName::Ip(Ipv4Addr::LOCALHOST)),
            (
                "node-7.example",
                SubjectAltName::Dns("node-7.example".into()),
            ),
        ] {
            let id = ca.issue_rank(3, host).unwrap();
            let der = CertificateDer::from_pem_slice(id.cert_pem.as_bytes()).unwrap();
            let got = peer_identity(&der).unwrap();
            assert_eq!(got.common_name, expected_cn(&job(), 3));
            assert_eq!(got.san, vec![san]);
            assert!(id.key_pem().starts_with("-----BEGIN PRIVATE KEY-----"));
            let key =
                rustls_pki_types::PrivateKeyDer::from_pem_slice(id.key_pem().as_bytes()).unwrap();
            assert_eq!(key.secret_der()[..16], ED25519_PKCS8_V1_PREFIX);
            assert_eq!(key.secret_der().len(), 48);
            assert!(!format!("{id:?}").contains("PRIVATE"));
        }
    }

    #[test]
    fn certificate_extensions() {
        let ca = JobCa::generate(job(), deadline()).unwrap();
        let (_, c) = x509_parser::parse_x509_certificate(ca.cert_der()).unwrap();
        let bc = c.basic_constraints().unwrap().unwrap();
        assert!(bc.critical && bc.value.ca);
        let ku = c.key_usage().unwrap().unwrap().value;
        assert!(ku.key_cert_sign() && !ku.digital_signature());

        let id = ca.issue_rank(1, "10.0.0.1").unwrap();
        let der = CertificateDer::from_pem_slice(id.cert_pem.as_bytes()).unwrap();
        let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert!(!c.basic_constraints().unwrap().unwrap().value.ca);
        let ku = c.key_usage().unwrap().unwrap().value;
        assert!(ku.digital_signature() && !ku.key_cert_sign());
        let eku = c.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth && eku.client_auth);
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let nb = c.validity().not_before.timestamp();
        let na = c.validity().not_after.timestamp();
        assert!(nb <= now - 60 && nb >= now - 600, "{nb} vs {now}");
        let dl = OffsetDateTime::from(deadline()).unix_timestamp();
        assert!(na <= dl && na >= dl - 5);
    }

    #[test]
    fn refusals() {
        assert_eq!(
            JobCa::generate(job(), SystemTime::now() - Duration::from_secs(1)).unwrap_err(),
            PkiError::DeadlinePassed
        );
        let ca = JobCa::generate(job(), deadline()).unwrap();
        assert!(matches!(
            ca.issue_rank(0, "Bad_Host"),
            Err(PkiError::Host(_))
        ));
        assert!(matches!(
            ca.issue_rank(0, "01.2.3.4"),
            Err(PkiError::Host(_))
        ));
        let long = RankCertParams {
            common_name: "x".repeat(45),
            san: SubjectAltName::Dns("a.example".into()),
        };
        assert!(matches!(
            ca.issue(&long),
            Err(PkiError::CommonNameTooLong { len: 45 })
        ));
    }
}
