//! The per-job PKI (protocol §2.2: "For each job the launcher creates: a job
//! CA ...; for each rank n an Ed25519 key and certificate signed by the job
//! CA").
//!
//! The CA is an Ed25519 key with a self-signed certificate, CN
//! `sperli-<job hex>-ca`, basicConstraints CA:true (critical), keyUsage
//! keyCertSign. A rank certificate has CN `sperli-<job hex>-<rank>` (at most
//! 44 bytes), CA:false, keyUsage digitalSignature, extendedKeyUsage
//! serverAuth and clientAuth, and one SAN naming the rank's host: an IP
//! address for a dotted IPv4 host, else a DNS name. Validity starts five
//! minutes before issue and ends at the job deadline.
//!
//! This module reads and checks what a rank needs on its own path; issuing
//! certificates (rcgen) is [`crate::issue`], behind the `issue` feature, so
//! a rank binary links no certificate generator.

use std::fmt;
use std::net::Ipv4Addr;

use sperli_wire::host::HostKind;
use sperli_wire::JobId;
use x509_parser::extensions::GeneralName;
use zeroize::Zeroizing;

#[cfg(feature = "issue")]
pub use crate::issue::{JobCa, RankCertParams, BACKDATE};

/// Longest rank CN: `sperli-` + 32 hex + `-` + 4 digits (protocol §2.2: "at
/// most 44 bytes").
pub const MAX_RANK_CN_LEN: usize = 44;

/// Why a certificate cannot be made or read (protocol §2.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PkiError {
    /// Key or certificate generation failed in rcgen (only when issuing,
    /// the `issue` feature).
    #[cfg(feature = "issue")]
    #[error("certificate generation failed: {0}")]
    Generate(rcgen::Error),
    /// The system random number generator failed.
    #[error("system random number generator failed")]
    Random,
    /// The deadline is not in the future.
    #[error("the job deadline is not after now")]
    DeadlinePassed,
    /// A common name longer than 44 bytes.
    #[error("common name of {len} bytes exceeds {MAX_RANK_CN_LEN}")]
    CommonNameTooLong {
        /// Its length.
        len: usize,
    },
    /// A host that is neither a dotted IPv4 address nor a valid DNS name.
    #[error("host is not a valid DNS name or dotted IPv4 address: {0}")]
    Host(sperli_wire::error::HostError),
    /// A SAN of a kind SPERLI never issues.
    #[error("only IPv4 and DNS SANs can be issued")]
    UnsupportedSan,
    /// A certificate that does not parse as X.509 DER.
    #[error("certificate does not parse")]
    Parse,
    /// A certificate without exactly one subject common name that is text.
    #[error("certificate has no single UTF-8 subject common name")]
    CommonName,
}

/// The subject alternative name of a rank certificate (protocol §2.2: "a
/// dNSName, or, if the host is a dotted IPv4 address, an iPAddress").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubjectAltName {
    /// An IPv4 address SAN.
    Ip(Ipv4Addr),
    /// A DNS name SAN.
    Dns(String),
    /// Any other SAN type, or an IPv6 address (never issued by SPERLI).
    Other,
}

impl SubjectAltName {
    /// The SAN for a host-list entry (protocol §2.2, §4.3): a dotted IPv4
    /// host becomes an IP SAN, a valid DNS name a DNS SAN, anything else is
    /// an error.
    pub fn for_host(host: &str) -> Result<Self, PkiError> {
        match sperli_wire::host::validate(host).map_err(PkiError::Host)? {
            HostKind::Ipv4(ip) => Ok(Self::Ip(ip)),
            _ => Ok(Self::Dns(host.to_owned())),
        }
    }
}

/// The CN of rank `rank`'s certificate: `sperli-<32 hex>-<rank>` (protocol
/// §2.2).
pub fn expected_cn(job: &JobId, rank: u32) -> String {
    format!("sperli-{}-{rank}", job.to_hex())
}

/// The rank a rank certificate's CN names, the inverse of [`expected_cn`]:
/// `sperli-<32 hex of job>-<rank>` with the rank in canonical decimal (no
/// sign, no leading zero). `None` for any other CN.
pub fn rank_from_cn(job: &JobId, cn: &str) -> Option<u32> {
    let digits = cn
        .strip_prefix("sperli-")?
        .strip_prefix(job.to_hex().as_str())?
        .strip_prefix('-')?;
    let rank = digits.parse::<u32>().ok()?;
    (rank.to_string() == digits).then_some(rank)
}

/// The CN of the job CA: `sperli-<32 hex>-ca` (protocol §2.2).
pub fn ca_cn(job: &JobId) -> String {
    format!("sperli-{}-ca", job.to_hex())
}

/// What a peer's certificate names (protocol §2.2): its subject CN and its
/// SANs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerIdentity {
    /// The subject common name.
    pub common_name: String,
    /// The subject alternative names, in certificate order.
    pub san: Vec<SubjectAltName>,
}

/// Reads the subject CN and SANs of a DER certificate (protocol §2.2).
/// Never panics on any input.
pub fn peer_identity(cert_der: &[u8]) -> Result<PeerIdentity, PkiError> {
    let (rest, cert) =
        x509_parser::parse_x509_certificate(cert_der).map_err(|_| PkiError::Parse)?;
    if !rest.is_empty() {
        return Err(PkiError::Parse);
    }
    let mut cns = cert.subject().iter_common_name();
    let cn = cns.next().ok_or(PkiError::CommonName)?;
    if cns.next().is_some() {
        return Err(PkiError::CommonName);
    }
    let common_name = cn.as_str().map_err(|_| PkiError::CommonName)?.to_owned();
    let mut san = Vec::new();
    if let Some(ext) = cert
        .subject_alternative_name()
        .map_err(|_| PkiError::Parse)?
    {
        for name in &ext.value.general_names {
            san.push(match name {
                GeneralName::DNSName(d) => SubjectAltName::Dns((*d).to_owned()),
                GeneralName::IPAddress(b) => match <[u8; 4]>::try_from(*b) {
                    Ok(a) => SubjectAltName::Ip(Ipv4Addr::from(a)),
                    Err(_) => SubjectAltName::Other,
                },
                _ => SubjectAltName::Other,
            });
        }
    }
    Ok(PeerIdentity { common_name, san })
}

/// The three PEM texts a rank needs for TLS (protocol §4.1: "the three PEM
/// texts"): the job CA certificate, the
/// rank certificate and the rank's PKCS#8 Ed25519 key. The key is zeroized
/// on drop and never shown by `Debug`.
#[derive(Clone)]
pub struct RankIdentity {
    /// The job CA certificate, PEM.
    pub ca_cert_pem: String,
    /// The rank certificate, PEM.
    pub cert_pem: String,
    key_pem: Zeroizing<String>,
}

impl RankIdentity {
    /// Bundles the three PEM texts (protocol §4.2).
    pub fn new(ca_cert_pem: String, cert_pem: String, key_pem: Zeroizing<String>) -> Self {
        Self {
            ca_cert_pem,
            cert_pem,
            key_pem,
        }
    }

    /// The rank's private key, PKCS#8 PEM. A secret: never log it.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

impl fmt::Debug for RankIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RankIdentity")
            .field(
                "ca_cert_pem",
                &format_args!("{} bytes", self.ca_cert_pem.len()),
            )
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("key_pem", &format_args!("(secret)"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobId {
        JobId([0xab; 16])
    }

    #[test]
    fn cn_lengths() {
        let cn = expected_cn(&job(), 4095);
        assert_eq!(cn.len(), MAX_RANK_CN_LEN);
        assert_eq!(
            expected_cn(&job(), 0),
            format!("sperli-{}-0", "ab".repeat(16))
        );
        assert_eq!(ca_cn(&job()), format!("sperli-{}-ca", "ab".repeat(16)));
    }

    #[test]
    fn rank_from_cn_inverts_expected_cn() {
        for r in [0, 1, 9, 10, 4095, u32::MAX] {
            assert_eq!(rank_from_cn(&job(), &expected_cn(&job(), r)), Some(r));
        }
        let p = format!("sperli-{}-", job().to_hex());
        for bad in ["01", "+1", "-1", "", "1 ", "ca", "4294967296"] {
            assert_eq!(rank_from_cn(&job(), &format!("{p}{bad}")), None, "{bad:?}");
        }
        assert_eq!(rank_from_cn(&JobId([1; 16]), &expected_cn(&job(), 3)), None);
        assert_eq!(rank_from_cn(&job(), "sperli-"), None);
    }

    #[test]
    fn unparsable_certificates() {
        assert_eq!(peer_identity(b"not a certificate"), Err(PkiError::Parse));
        assert_eq!(peer_identity(&[]), Err(PkiError::Parse));
    }
}
