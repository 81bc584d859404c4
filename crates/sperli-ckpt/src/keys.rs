//! [`JobKeys`]: what a rank needs to sign and check COMMIT files (protocol
//! §2.4: who holds which key; §4.2 `job_public_key`, `job_secret_key`;
//! §9.3).

use std::fmt;

use sperli_tls::composite_sig::{CompositeSigError, PublicKey, SecretKey};
use sperli_wire::error::{DecodeError, Error};
use sperli_wire::job_description::JobDescription;
use sperli_wire::limits::{PUBLIC_KEY_LEN, SECRET_KEY_LEN};
use sperli_wire::JobId;

/// The job's identity and CompositeSig keys as one rank holds them
/// (protocol §4.2, §2.4): every rank has the job id,
/// the incarnation and the job public key; rank 0 alone has the job secret
/// key, which signs COMMIT files (§9.3). `Debug` never shows the secret.
#[derive(Clone)]
pub struct JobKeys {
    job_id: JobId,
    incarnation: u32,
    public: PublicKey,
    secret: Option<SecretKey>,
}

impl fmt::Debug for JobKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobKeys")
            .field("job_id", &self.job_id)
            .field("incarnation", &self.incarnation)
            .field(
                "secret",
                &if self.secret.is_some() {
                    "<present>"
                } else {
                    "<none>"
                },
            )
            .finish_non_exhaustive()
    }
}

impl JobKeys {
    /// Keys from their parts (protocol §4.2).
    pub fn new(
        job_id: JobId,
        incarnation: u32,
        public: PublicKey,
        secret: Option<SecretKey>,
    ) -> Self {
        Self {
            job_id,
            incarnation,
            public,
            secret,
        }
    }

    /// The keys in a job description (protocol §4.2): the 1344-byte public key
    /// must decode and, when `job_secret_key` is not empty, the 64-byte
    /// secret key must match it; a rank 0 without a secret key cannot sign
    /// COMMIT files. Each failure is H1615 ([`Error::JobDescription`]).
    pub fn from_description(desc: &JobDescription) -> Result<Self, Error> {
        let public = PublicKey::from_bytes(&desc.job_public_key).map_err(|e| {
            Error::JobDescription(match e {
                CompositeSigError::Length { got, .. } => DecodeError::Mismatch {
                    field: "job_public_key length",
                    expected: PUBLIC_KEY_LEN as u64,
                    got: got as u64,
                },
                _ => DecodeError::InvalidKey {
                    field: "job_public_key",
                },
            })
        })?;
        let secret = if desc.job_secret_key.is_empty() {
            None
        } else {
            let sk = SecretKey::from_slice(&desc.job_secret_key).map_err(|_| {
                Error::JobDescription(DecodeError::Mismatch {
                    field: "job_secret_key length",
                    expected: SECRET_KEY_LEN as u64,
                    got: desc.job_secret_key.len() as u64,
                })
            })?;
            if sk.public_key() != &public {
                return Err(Error::JobDescription(DecodeError::KeysDoNotMatch {
                    secret: "job_secret_key",
                    public: "job_public_key",
                }));
            }
            Some(sk)
        };
        if desc.rank == 0 && secret.is_none() {
            return Err(Error::JobDescription(DecodeError::Mismatch {
                field: "job_secret_key length (rank 0)",
                expected: SECRET_KEY_LEN as u64,
                got: 0,
            }));
        }
        Ok(Self::new(desc.job_id, desc.incarnation, public, secret))
    }

    /// The job id.
    pub fn job_id(&self) -> JobId {
        self.job_id
    }

    /// The incarnation this rank runs in (>= 1).
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// The job public key, which checks COMMIT signatures (§9.3).
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// The job secret key (rank 0 only), which signs COMMIT files (§9.4 step 4).
    pub fn secret_key(&self) -> Option<&SecretKey> {
        self.secret.as_ref()
    }
}
