//! rustls configurations for SPERLI connections (protocol §2.1, §2.2; who
//! may abort a job, protocol §5.3).
//!
//! - TLS 1.3 only, one crypto provider (ring) for the whole workspace.
//! - Both sides present a certificate and check the peer's against the job
//!   CA alone; no system store, no bundled roots.
//! - The connecting side checks the server's SAN against the host-list entry
//!   it dials: a dotted IPv4 host as an IP address, anything else as a DNS
//!   name.
//! - After the handshake each side checks the peer's subject CN against the
//!   job and the expected rank ([`check_peer`]).
//!
//! The three PEM texts live in a private directory ([`PrivatePemDir`]) only
//! while connections are set up.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::net::TcpStream;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand_core::{OsRng, RngCore};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, ClientConnection, CommonState, PeerIncompatible,
    ProtocolVersion, RootCertStore, ServerConfig, ServerConnection, StreamOwned,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, DnsName, PrivateKeyDer, ServerName};
use sperli_wire::error::{AuthError, TlsFailure};
use sperli_wire::host::HostKind;
use sperli_wire::{Error, JobId};

use crate::pki::{expected_cn, peer_identity, RankIdentity};

/// Why a TLS configuration cannot be built from the PEM files (protocol
/// §2.2). These are local failures, not a peer's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A PEM file could not be read or written.
    #[error("I/O error on {what}: {kind:?}")]
    Io {
        /// Which file ("CA certificate", "rank certificate", "rank key", "directory").
        what: &'static str,
        /// The OS error kind.
        kind: io::ErrorKind,
    },
    /// A PEM file holds no usable item of the right kind.
    #[error("{what} is not valid PEM")]
    Pem {
        /// Which file.
        what: &'static str,
    },
    /// rustls refused the certificate, key or CA.
    #[error("rustls refused the configuration: {0}")]
    Rustls(rustls::Error),
    /// The client verifier could not be built from the CA.
    #[error("the job CA cannot be used as the client-certificate root")]
    Verifier,
    /// A host entry that is neither a DNS name nor a dotted IPv4 address.
    #[error("invalid host: {0}")]
    Host(sperli_wire::error::HostError),
    /// The system random number generator failed (the private directory's
    /// name is random).
    #[error("the system random number generator failed while naming the PEM directory")]
    Random,
}

/// The one crypto provider of the workspace: ring (docs/crypto-provider.md).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The only protocol version SPERLI speaks (protocol §2.1: "Every
/// connection is TLS 1.3 only").
pub static VERSIONS: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

fn read_file(path: &Path, what: &'static str) -> Result<Vec<u8>, ConfigError> {
    fs::read(path).map_err(|e| ConfigError::Io {
        what,
        kind: e.kind(),
    })
}

fn load_roots(ca_pem: &[u8]) -> Result<RootCertStore, ConfigError> {
    let mut roots = RootCertStore::empty();
    let mut any = false;
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|_| ConfigError::Pem {
            what: "CA certificate",
        })?;
        roots.add(cert).map_err(ConfigError::Rustls)?;
        any = true;
    }
    if !any {
        return Err(ConfigError::Pem {
            what: "CA certificate",
        });
    }
    Ok(roots)
}

fn load_chain(cert_pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| ConfigError::Pem {
            what: "rank certificate",
        })?;
    if chain.is_empty() {
        return Err(ConfigError::Pem {
            what: "rank certificate",
        });
    }
    Ok(chain)
}

fn load_key(key_pem: &[u8]) -> Result<PrivateKeyDer<'static>, ConfigError> {
    PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| ConfigError::Pem { what: "rank key" })
}

/// The server (accepting) side's configuration from PEM bytes (protocol
/// §2.1, §2.2): TLS 1.3 only, client certificate
/// required and checked against the job CA alone.
pub fn server_config_from_pem(
    ca_pem: &[u8],
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<ServerConfig>, ConfigError> {
    let provider = provider();
    let roots = Arc::new(load_roots(ca_pem)?);
    let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|_| ConfigError::Verifier)?;
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(VERSIONS)
        .map_err(ConfigError::Rustls)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(load_chain(cert_pem)?, load_key(key_pem)?)
        .map_err(ConfigError::Rustls)?;
    Ok(Arc::new(config))
}

/// The client (connecting) side's configuration from PEM bytes (protocol
/// §2.1, §2.2): TLS 1.3 only, the job CA as the only
/// root, our certificate presented.
pub fn client_config_from_pem(
    ca_pem: &[u8],
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<ClientConfig>, ConfigError> {
    let config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(ConfigError::Rustls)?
        .with_root_certificates(load_roots(ca_pem)?)
        .with_client_auth_cert(load_chain(cert_pem)?, load_key(key_pem)?)
        .map_err(ConfigError::Rustls)?;
    Ok(Arc::new(config))
}

/// The name the connecting side checks the server certificate against
/// (protocol §2.2: "A dotted IPv4 host is checked as an address against an
/// iPAddress entry, never as a DNS name"), anything else a DNS name.
pub fn server_name_for_host(host: &str) -> Result<ServerName<'static>, ConfigError> {
    match sperli_wire::host::validate(host).map_err(ConfigError::Host)? {
        HostKind::Ipv4(ip) => Ok(ServerName::IpAddress(std::net::IpAddr::V4(ip).into())),
        _ => {
            let name = DnsName::try_from(host.to_owned()).map_err(|_| {
                ConfigError::Host(sperli_wire::error::HostError::BadLabel {
                    label: host.to_owned(),
                })
            })?;
            Ok(ServerName::DnsName(name))
        }
    }
}

fn auth_error(peer: Option<u32>, error: AuthError) -> Error {
    Error::Authentication { peer, error }
}

/// Checks, after the handshake, that the peer is rank `expected_rank` of
/// `job` (protocol §2.2: "After the handshake each side compares the peer
/// certificate's subject CN with `sperli-<job hex>-<n>` for the expected
/// rank n"). Also insists on TLS 1.3. Fails with H1611.
pub fn check_peer(conn: &CommonState, job: &JobId, expected_rank: u32) -> Result<(), Error> {
    let peer = Some(expected_rank);
    if conn.protocol_version() != Some(ProtocolVersion::TLSv1_3) {
        return Err(auth_error(
            peer,
            AuthError::Tls(TlsFailure::ProtocolVersion),
        ));
    }
    let cert = conn
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or_else(|| auth_error(peer, AuthError::Tls(TlsFailure::NoCertificate)))?;
    let id =
        peer_identity(cert).map_err(|_| auth_error(peer, AuthError::Tls(TlsFailure::Invalid)))?;
    let expected = expected_cn(job, expected_rank);
    if id.common_name != expected {
        return Err(auth_error(
            peer,
            AuthError::Subject {
                expected,
                got: id.common_name,
            },
        ));
    }
    Ok(())
}

/// Maps a rustls error to our words for it (H1611, protocol §13).
pub fn tls_failure(e: &rustls::Error) -> TlsFailure {
    use rustls::Error as E;
    match e {
        E::NoCertificatesPresented => TlsFailure::NoCertificate,
        E::InvalidCertificate(CertificateError::UnknownIssuer | CertificateError::BadSignature) => {
            TlsFailure::UnknownIssuer
        }
        E::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => TlsFailure::NameMismatch,
        E::InvalidCertificate(
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. },
        ) => TlsFailure::Expired,
        E::PeerIncompatible(
            PeerIncompatible::SupportedVersionsExtensionRequired
            | PeerIncompatible::ServerDoesNotSupportTls12Or13
            | PeerIncompatible::ServerTlsVersionIsDisabledByOurConfig
            | PeerIncompatible::Tls12NotOffered
            | PeerIncompatible::Tls12NotOfferedOrEnabled,
        ) => TlsFailure::ProtocolVersion,
        E::AlertReceived(rustls::AlertDescription::ProtocolVersion) => TlsFailure::ProtocolVersion,
        E::AlertReceived(rustls::AlertDescription::CertificateRequired) => {
            TlsFailure::NoCertificate
        }
        E::AlertReceived(_) => TlsFailure::PeerAlert,
        E::InvalidMessage(_)
        | E::InappropriateMessage { .. }
        | E::InappropriateHandshakeMessage { .. }
        | E::DecryptError => TlsFailure::Broken,
        _ => TlsFailure::Invalid,
    }
}

/// Maps an I/O error from a TLS stream (which wraps the rustls error, if
/// any) to our words (H1611, protocol §13). A bare socket error during the
/// handshake is [`TlsFailure::Broken`].
pub fn tls_failure_from_io(e: &io::Error) -> TlsFailure {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(r) => tls_failure(r),
        None => TlsFailure::Broken,
    }
}

/// Runs a handshake to its end on a blocking stream.
fn complete<C, D>(conn: &mut C, sock: &mut TcpStream) -> io::Result<()>
where
    C: std::ops::DerefMut<Target = rustls::ConnectionCommon<D>>,
    D: rustls::SideData,
{
    while conn.is_handshaking() {
        conn.complete_io(sock)?;
    }
    // Flush what is left of our last flight (the client's Finished).
    while conn.wants_write() {
        conn.write_tls(sock)?;
    }
    Ok(())
}

/// Connects as rank `own` side to rank `peer_rank` at host-list entry
/// `host` over an already connected socket (protocol §5.1 step 4, §2.2):
/// TLS 1.3 handshake, SAN checked against
/// `host`, then the peer's subject checked. Any failure is H1611.
pub fn connect(
    config: Arc<ClientConfig>,
    mut sock: TcpStream,
    host: &str,
    job: &JobId,
    peer_rank: u32,
) -> Result<StreamOwned<ClientConnection, TcpStream>, Error> {
    let peer = Some(peer_rank);
    let name = server_name_for_host(host)
        .map_err(|_| auth_error(peer, AuthError::Tls(TlsFailure::NameMismatch)))?;
    let mut conn = ClientConnection::new(config, name)
        .map_err(|e| auth_error(peer, AuthError::Tls(tls_failure(&e))))?;
    complete(&mut conn, &mut sock)
        .map_err(|e| auth_error(peer, AuthError::Tls(tls_failure_from_io(&e))))?;
    check_peer(&conn, job, peer_rank)?;
    Ok(StreamOwned::new(conn, sock))
}

/// Accepts a connection from rank `peer_rank` (protocol §5.1 step 4):
/// TLS 1.3 handshake with a required client certificate
/// from the job CA, then the peer's subject checked. Any failure is H1611.
pub fn accept(
    config: Arc<ServerConfig>,
    mut sock: TcpStream,
    job: &JobId,
    peer_rank: u32,
) -> Result<StreamOwned<ServerConnection, TcpStream>, Error> {
    let peer = Some(peer_rank);
    let mut conn = ServerConnection::new(config)
        .map_err(|e| auth_error(peer, AuthError::Tls(tls_failure(&e))))?;
    complete(&mut conn, &mut sock)
        .map_err(|e| auth_error(peer, AuthError::Tls(tls_failure_from_io(&e))))?;
    check_peer(&conn, job, peer_rank)?;
    Ok(StreamOwned::new(conn, sock))
}

/// The three PEM texts written to a fresh private directory (protocol §4.1:
/// "to files in a directory of its own, the directory mode 0700 and the
/// files mode 0600 ..., and only for as long as it sets up connections").
/// The directory is
/// created with mode 0700 and the files with 0600 from the start; dropping
/// the guard removes them.
#[derive(Debug)]
pub struct PrivatePemDir {
    path: PathBuf,
}

/// The memory file systems where [`PrivatePemDir::create`] tries to make
/// its directory first, so the rank key never reaches a disk and set-up
/// waits on no disk: `$XDG_RUNTIME_DIR` (the user's own runtime directory,
/// mode 0700, a tmpfs on systemd machines), then `/dev/shm` (the
/// shared-memory tmpfs of Linux), each when it is an absolute path to a
/// directory.
pub fn memory_parents() -> Vec<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    runtime
        .into_iter()
        .chain([PathBuf::from("/dev/shm")])
        .filter(|p| p.is_absolute() && p.is_dir())
        .collect()
}

/// File name of the job CA certificate in a [`PrivatePemDir`].
pub const CA_FILE: &str = "ca.pem";
/// File name of the rank certificate in a [`PrivatePemDir`].
pub const CERT_FILE: &str = "rank.pem";
/// File name of the rank key in a [`PrivatePemDir`].
pub const KEY_FILE: &str = "rank-key.pem";

impl PrivatePemDir {
    /// Writes `identity` into a new directory (protocol §4.1) under the
    /// first of [`memory_parents`] that takes it, else under the system
    /// temp dir (`$TMPDIR` or `/tmp`).
    pub fn create(identity: &RankIdentity) -> Result<Self, ConfigError> {
        for parent in memory_parents() {
            if let Ok(dir) = Self::create_in(&parent, identity) {
                return Ok(dir);
            }
        }
        Self::create_in(&std::env::temp_dir(), identity)
    }

    /// Writes `identity` into a new directory under `parent` (protocol
    /// §4.1).
    pub fn create_in(parent: &Path, identity: &RankIdentity) -> Result<Self, ConfigError> {
        let mut rnd = [0u8; 12];
        OsRng
            .try_fill_bytes(&mut rnd)
            .map_err(|_| ConfigError::Random)?;
        let path = parent.join(format!("sperli-tls-{}", sperli_wire::hex::encode(&rnd)));
        DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| ConfigError::Io {
                what: "directory",
                kind: e.kind(),
            })?;
        // From here on the guard removes the directory on any failure.
        let dir = Self { path };
        dir.write(CA_FILE, identity.ca_cert_pem.as_bytes(), "CA certificate")?;
        dir.write(CERT_FILE, identity.cert_pem.as_bytes(), "rank certificate")?;
        dir.write(KEY_FILE, identity.key_pem().as_bytes(), "rank key")?;
        Ok(dir)
    }

    fn write(&self, name: &str, bytes: &[u8], what: &'static str) -> Result<(), ConfigError> {
        let io_err = |e: io::Error| ConfigError::Io {
            what,
            kind: e.kind(),
        };
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(self.path.join(name))
            .map_err(io_err)?;
        // No fsync: the files live for the milliseconds the configurations
        // take to load, and a sync would put the key on a disk the kernel
        // otherwise most likely never writes it to (the unlink drops the
        // unwritten pages); on a memory file system it is moot.
        f.write_all(bytes).map_err(io_err)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The server configuration loaded from the directory's files.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, ConfigError> {
        let (ca, cert, key) = self.read_all()?;
        server_config_from_pem(&ca, &cert, &key)
    }

    /// The client configuration loaded from the directory's files.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, ConfigError> {
        let (ca, cert, key) = self.read_all()?;
        client_config_from_pem(&ca, &cert, &key)
    }

    #[allow(clippy::type_complexity)]
    fn read_all(&self) -> Result<(Vec<u8>, Vec<u8>, zeroize::Zeroizing<Vec<u8>>), ConfigError> {
        Ok((
            read_file(&self.path.join(CA_FILE), "CA certificate")?,
            read_file(&self.path.join(CERT_FILE), "rank certificate")?,
            zeroize::Zeroizing::new(read_file(&self.path.join(KEY_FILE), "rank key")?),
        ))
    }
}

impl Drop for PrivatePemDir {
    fn drop(&mut self) {
        // Best effort: overwrite the key before unlinking it, synced for a
        // disk-backed temp dir whose pages the kernel may have written.
        let key = self.path.join(KEY_FILE);
        if let Ok(meta) = fs::metadata(&key) {
            if let Ok(mut f) = OpenOptions::new().write(true).open(&key) {
                let zeros = vec![0u8; usize::try_from(meta.len()).unwrap_or(0)];
                let _ = f.write_all(&zeros);
                let _ = f.sync_all();
            }
        }
        let _ = fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::JobCa;
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, SystemTime};

    #[test]
    fn pem_dir_modes_and_removal() {
        let ca =
            JobCa::generate(JobId([1; 16]), SystemTime::now() + Duration::from_secs(600)).unwrap();
        let id = ca.issue_rank(0, "127.0.0.1").unwrap();
        let dir = PrivatePemDir::create(&id).unwrap();
        let path = dir.path().to_owned();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o700
        );
        for f in [CA_FILE, CERT_FILE, KEY_FILE] {
            let m = fs::metadata(path.join(f)).unwrap().permissions().mode() & 0o777;
            assert_eq!(m, 0o600, "{f}");
        }
        assert_eq!(
            fs::read_to_string(path.join(KEY_FILE)).unwrap(),
            id.key_pem()
        );
        dir.server_config().unwrap();
        dir.client_config().unwrap();
        // On a memory file system where the machine has one.
        if let Some(first) = memory_parents().first() {
            assert!(path.starts_with(first), "{path:?} not under {first:?}");
        }
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn server_names() {
        assert!(matches!(
            server_name_for_host("127.0.0.1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name_for_host("node-1.example").unwrap(),
            ServerName::DnsName(_)
        ));
        assert!(server_name_for_host("01.2.3.4").is_err());
        assert!(server_name_for_host("").is_err());
    }

    #[test]
    fn bad_pem_is_an_error() {
        assert_eq!(
            server_config_from_pem(b"junk", b"junk", b"junk").unwrap_err(),
            ConfigError::Pem {
                what: "CA certificate"
            }
        );
        assert!(client_config_from_pem(b"", b"", b"").is_err());
    }

    #[test]
    fn error_mapping() {
        use rustls::Error as E;
        assert_eq!(
            tls_failure(&E::NoCertificatesPresented),
            TlsFailure::NoCertificate
        );
        assert_eq!(
            tls_failure(&E::InvalidCertificate(CertificateError::UnknownIssuer)),
            TlsFailure::UnknownIssuer
        );
        assert_eq!(
            tls_failure(&E::InvalidCertificate(CertificateError::NotValidForName)),
            TlsFailure::NameMismatch
        );
        assert_eq!(
            tls_failure(&E::InvalidCertificate(CertificateError::Expired)),
            TlsFailure::Expired
        );
        assert_eq!(
            tls_failure(&E::AlertReceived(rustls::AlertDescription::ProtocolVersion)),
            TlsFailure::ProtocolVersion
        );
        assert_eq!(
            tls_failure(&E::AlertReceived(rustls::AlertDescription::BadCertificate)),
            TlsFailure::PeerAlert
        );
        let io = io::Error::new(io::ErrorKind::InvalidData, E::NoCertificatesPresented);
        assert_eq!(tls_failure_from_io(&io), TlsFailure::NoCertificate);
        let bare = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(tls_failure_from_io(&bare), TlsFailure::Broken);
    }
}
