//! Signing and checking join tokens (protocol §7.1.2). The byte layout lives
//! in `sperli_wire::join_token`; this module adds the CompositeSig signature
//! under context `SPERLI-JOIN-1` and every check protocol §7.1.2 names, in
//! its order: the token does not parse; "the signature does not verify with
//! the job public key and context `SPERLI-JOIN-1`"; job_id, rank (the HELLO
//! header's `source_rank` and the certificate's), size, incarnation or host
//! differ from what the receiver knows; "expires_at is not after the
//! receiver's clock (Unix ms)".
//!
//! Each failure is its own [`TokenError`] inside `Error::Authentication`
//! (H1611); a token naming a refused host is H1614 (protocol §7.1.2: "a
//! token whose host is refused by the receiver's refused-host policy
//! (section 2.3) is rejected with H1614").

use sperli_wire::error::{AuthError, HostError, TokenError};
use sperli_wire::join_token::{JoinToken, JoinTokenMessage};
use sperli_wire::limits::CONTEXT_JOIN;
use sperli_wire::refused_hosts::RefusedHosts;
use sperli_wire::{Codec, Error, JobId};

use crate::composite_sig::{self, CompositeSigError, PublicKey, SecretKey, Signature};

/// Why a token cannot be made (protocol §7.1.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CreateTokenError {
    /// The message's host is not a valid host entry (protocol §4.3).
    #[error("invalid host: {0}")]
    Host(HostError),
    /// Signing failed.
    #[error("signing failed: {0}")]
    Sign(CompositeSigError),
}

/// Signs `message` with the job secret key under context `SPERLI-JOIN-1`
/// and frames it as a token: message, `u16 sig_len` (2484), signature
/// (protocol §7.1.2).
pub fn create_token(
    sk: &SecretKey,
    message: &JoinTokenMessage<'_>,
) -> Result<Vec<u8>, CreateTokenError> {
    sperli_wire::host::validate(message.host).map_err(CreateTokenError::Host)?;
    let bytes = message.to_vec();
    let sig = composite_sig::sign(sk, &bytes, CONTEXT_JOIN).map_err(CreateTokenError::Sign)?;
    Ok(JoinToken::assemble(&bytes, &sig.0))
}

/// What the receiver of a token knows (protocol §7.1.2).
#[derive(Debug, Clone)]
pub struct TokenExpectation<'a> {
    /// This job's id.
    pub job_id: JobId,
    /// The source rank in the HELLO frame header.
    pub rank_from_header: u32,
    /// The rank in the peer certificate's subject CN.
    pub rank_from_cert: u32,
    /// This job's size.
    pub size: u32,
    /// This job's incarnation.
    pub incarnation: u32,
    /// That rank's host-list entry.
    pub host_of_that_rank: &'a str,
    /// The receiver's clock, Unix milliseconds.
    pub now_ms: u64,
    /// The refused-host policy of this rank.
    pub refused: &'a RefusedHosts,
}

fn token_error(exp: &TokenExpectation<'_>, error: TokenError) -> Error {
    Error::Authentication {
        peer: Some(exp.rank_from_cert),
        error: AuthError::Token(error),
    }
}

/// Checks a join token (protocol §7.1.2), in this
/// order: it parses, its signature verifies under `job_pk` with context
/// `SPERLI-JOIN-1`, job id, rank (equal to the frame header's and the
/// certificate's), size, incarnation, host (equal to that rank's host-list
/// entry, and not refused), expiry (strictly after `now_ms`). Returns the
/// message on success.
pub fn verify_token<'a>(
    token_bytes: &'a [u8],
    expected: &TokenExpectation<'_>,
    job_pk: &PublicKey,
) -> Result<JoinTokenMessage<'a>, Error> {
    let token = JoinToken::decode(token_bytes)
        .map_err(|e| token_error(expected, TokenError::Malformed(e)))?;
    let sig = Signature::from_slice(token.signature)
        .map_err(|_| token_error(expected, TokenError::BadSignature))?;
    if !composite_sig::verify(job_pk, token.message_bytes, CONTEXT_JOIN, &sig) {
        return Err(token_error(expected, TokenError::BadSignature));
    }
    let m = token.message;
    if m.job_id != expected.job_id {
        return Err(token_error(
            expected,
            TokenError::Job {
                expected: expected.job_id,
                got: m.job_id,
            },
        ));
    }
    for rank in [expected.rank_from_header, expected.rank_from_cert] {
        if m.rank != rank {
            return Err(token_error(
                expected,
                TokenError::Rank {
                    expected: rank,
                    got: m.rank,
                },
            ));
        }
    }
    if m.size != expected.size {
        return Err(token_error(
            expected,
            TokenError::Size {
                expected: expected.size,
                got: m.size,
            },
        ));
    }
    if m.incarnation != expected.incarnation {
        return Err(token_error(
            expected,
            TokenError::Incarnation {
                expected: expected.incarnation,
                got: m.incarnation,
            },
        ));
    }
    if m.host != expected.host_of_that_rank {
        return Err(token_error(
            expected,
            TokenError::Host {
                expected: expected.host_of_that_rank.to_owned(),
                got: m.host.to_owned(),
            },
        ));
    }
    expected.refused.check(m.host)?;
    if m.expires_at_ms <= expected.now_ms {
        return Err(token_error(
            expected,
            TokenError::Expired {
                expires_at_ms: m.expires_at_ms,
                now_ms: expected.now_ms,
            },
        ));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_wire::error::{DecodeError, RefusalRule};
    use sperli_wire::limits::CONTEXT_COMMIT;
    use sperli_wire::HCode;
    use std::sync::OnceLock;

    const NOW: u64 = 1_800_000_000_000;
    const JOB: JobId = JobId([9; 16]);

    fn key() -> &'static SecretKey {
        static K: OnceLock<SecretKey> = OnceLock::new();
        K.get_or_init(|| composite_sig::generate().unwrap())
    }

    fn message(host: &str) -> JoinTokenMessage<'_> {
        JoinTokenMessage {
            job_id: JOB,
            rank: 2,
            size: 4,
            incarnation: 1,
            expires_at_ms: NOW + 60_000,
            host,
        }
    }

    fn expectation(refused: &RefusedHosts) -> TokenExpectation<'_> {
        TokenExpectation {
            job_id: JOB,
            rank_from_header: 2,
            rank_from_cert: 2,
            size: 4,
            incarnation: 1,
            host_of_that_rank: "node-2.example",
            now_ms: NOW,
            refused,
        }
    }

    fn token_err(e: Error) -> TokenError {
        assert_eq!(e.h_code(), Some(HCode::H1611), "{e}");
        match e {
            Error::Authentication {
                peer: Some(2),
                error: AuthError::Token(t),
            } => t,
            e => panic!("{e}"),
        }
    }

    fn check(msg: &JoinTokenMessage<'_>, exp: &TokenExpectation<'_>) -> Result<(), Error> {
        let t = create_token(key(), msg).unwrap();
        verify_token(&t, exp, key().public_key()).map(|_| ())
    }

    #[test]
    fn good_token_verifies() {
        let r = RefusedHosts::builtin();
        let t = create_token(key(), &message("node-2.example")).unwrap();
        let m = verify_token(&t, &expectation(&r), key().public_key()).unwrap();
        assert_eq!(m, message("node-2.example"));
    }

    #[test]
    fn bad_signature() {
        let r = RefusedHosts::builtin();
        let mut t = create_token(key(), &message("node-2.example")).unwrap();
        let last = t.len() - 1;
        t[last] ^= 1;
        let e = verify_token(&t, &expectation(&r), key().public_key()).unwrap_err();
        assert_eq!(token_err(e), TokenError::BadSignature);
        // Another key.
        let t = create_token(key(), &message("node-2.example")).unwrap();
        let other = composite_sig::generate().unwrap();
        let e = verify_token(&t, &expectation(&r), other.public_key()).unwrap_err();
        assert_eq!(token_err(e), TokenError::BadSignature);
        // Signed under the COMMIT context.
        let bytes = message("node-2.example").to_vec();
        let sig = composite_sig::sign(key(), &bytes, CONTEXT_COMMIT).unwrap();
        let t = JoinToken::assemble(&bytes, &sig.0);
        let e = verify_token(&t, &expectation(&r), key().public_key()).unwrap_err();
        assert_eq!(token_err(e), TokenError::BadSignature);
        // A message byte changed after signing.
        let mut t = create_token(key(), &message("node-2.example")).unwrap();
        t[16] ^= 1; // rank
        let e = verify_token(&t, &expectation(&r), key().public_key()).unwrap_err();
        assert_eq!(token_err(e), TokenError::BadSignature);
    }

    #[test]
    fn malformed() {
        let r = RefusedHosts::builtin();
        let t = create_token(key(), &message("node-2.example")).unwrap();
        for bad in [&t[..t.len() - 1], &t[..10], &[][..]] {
            let e = verify_token(bad, &expectation(&r), key().public_key()).unwrap_err();
            assert!(matches!(token_err(e), TokenError::Malformed(_)));
        }
        let mut long = t.clone();
        long.push(0);
        let e = verify_token(&long, &expectation(&r), key().public_key()).unwrap_err();
        assert!(matches!(
            token_err(e),
            TokenError::Malformed(DecodeError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn wrong_job() {
        let r = RefusedHosts::builtin();
        let mut m = message("node-2.example");
        m.job_id = JobId([8; 16]);
        let e = check(&m, &expectation(&r)).unwrap_err();
        assert_eq!(
            token_err(e),
            TokenError::Job {
                expected: JOB,
                got: JobId([8; 16])
            }
        );
    }

    #[test]
    fn wrong_rank_vs_header_and_cert() {
        let r = RefusedHosts::builtin();
        let mut m = message("node-2.example");
        m.rank = 3;
        let e = check(&m, &expectation(&r)).unwrap_err();
        assert_eq!(
            token_err(e),
            TokenError::Rank {
                expected: 2,
                got: 3
            }
        );
        // Token and header agree, the certificate says another rank.
        let mut exp = expectation(&r);
        exp.rank_from_header = 3;
        let e = check(&m, &exp).unwrap_err();
        assert!(matches!(
            e,
            Error::Authentication {
                error: AuthError::Token(TokenError::Rank {
                    expected: 2,
                    got: 3
                }),
                ..
            }
        ));
        // Token and certificate agree, the header says another rank.
        let mut exp = expectation(&r);
        exp.rank_from_header = 1;
        let e = check(&message("node-2.example"), &exp).unwrap_err();
        assert_eq!(
            token_err(e),
            TokenError::Rank {
                expected: 1,
                got: 2
            }
        );
    }

    #[test]
    fn wrong_size_and_incarnation() {
        let r = RefusedHosts::builtin();
        let mut m = message("node-2.example");
        m.size = 5;
        let e = check(&m, &expectation(&r)).unwrap_err();
        assert_eq!(
            token_err(e),
            TokenError::Size {
                expected: 4,
                got: 5
            }
        );
        let mut m = message("node-2.example");
        m.incarnation = 0;
        let e = check(&m, &expectation(&r)).unwrap_err();
        assert_eq!(
            token_err(e),
            TokenError::Incarnation {
                expected: 1,
                got: 0
            }
        );
    }

    #[test]
    fn wrong_host() {
        let r = RefusedHosts::builtin();
        let e = check(&message("node-3.example"), &expectation(&r)).unwrap_err();
        assert_eq!(
            token_err(e),
            TokenError::Host {
                expected: "node-2.example".into(),
                got: "node-3.example".into()
            }
        );
    }

    #[test]
    fn refused_host() {
        let r = RefusedHosts::new(Some("example"), None);
        let e = check(&message("node-2.example"), &expectation(&r)).unwrap_err();
        assert_eq!(e.h_code(), Some(HCode::H1614));
        assert!(matches!(
            e,
            Error::HostRefused {
                rule: RefusalRule::Variable { .. },
                ..
            }
        ));
        // The built-in reserved names, even when the host list names them.
        let r = RefusedHosts::builtin();
        let mut exp = expectation(&r);
        exp.host_of_that_rank = "host-a.invalid";
        let e = check(&message("host-a.invalid"), &exp).unwrap_err();
        assert_eq!(e.h_code(), Some(HCode::H1614));
    }

    #[test]
    fn expiry_must_be_strictly_after_now() {
        let r = RefusedHosts::builtin();
        let mut m = message("node-2.example");
        m.expires_at_ms = NOW;
        let e = check(&m, &expectation(&r)).unwrap_err();
        assert_eq!(
            token_err(e),
            TokenError::Expired {
                expires_at_ms: NOW,
                now_ms: NOW
            }
        );
        m.expires_at_ms = NOW + 1;
        check(&m, &expectation(&r)).unwrap();
    }

    #[test]
    fn create_refuses_bad_host() {
        let long = "a".repeat(300);
        assert!(matches!(
            create_token(key(), &message(&long)),
            Err(CreateTokenError::Host(_))
        ));
    }
}
