//! CompositeSig: ML-DSA-44 and Ed25519 together, algorithm
//! id-MLDSA44-Ed25519-SHA512 of the IETF LAMPS draft
//! draft-ietf-lamps-pq-composite-sigs (protocol §3), label
//! `COMPSIG-MLDSA44-Ed25519-SHA512`.
//!
//! The message representative is
//! `M' = Prefix || Label || len(ctx) (1 byte) || ctx || SHA-512(M)`.
//! The ML-DSA-44 component signs `M'` with ML-DSA's own context set to the
//! Label (pure, hedged ML-DSA); the Ed25519 component signs `M'`.
//!
//! Byte layouts (protocol §3): public key = ML-DSA-44 (1312) || Ed25519 (32) = 1344 bytes;
//! signature = ML-DSA-44 (2420) || Ed25519 (64) = 2484 bytes; secret key =
//! ML-DSA-44 keygen seed (32) || Ed25519 seed (32) = 64 bytes.

use std::fmt;

use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use fips204::ml_dsa_44;
use fips204::traits::{KeyGen, SerDes, Signer, Verifier};
use rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha512};
use sperli_wire::limits::{PUBLIC_KEY_LEN, SECRET_KEY_LEN, SIGNATURE_LEN};
use zeroize::Zeroizing;

/// The draft's fixed prefix, ASCII `CompositeAlgorithmSignatures2025` (protocol §3).
pub const PREFIX: &[u8; 32] = b"CompositeAlgorithmSignatures2025";
/// The algorithm label (protocol §3).
pub const LABEL: &[u8; 30] = b"COMPSIG-MLDSA44-Ed25519-SHA512";
/// ML-DSA-44 public key length (protocol §3).
pub const MLDSA_PK_LEN: usize = ml_dsa_44::PK_LEN;
/// ML-DSA-44 signature length (protocol §3).
pub const MLDSA_SIG_LEN: usize = ml_dsa_44::SIG_LEN;
/// Longest application context: its length is one byte (protocol §3).
pub const MAX_CONTEXT_LEN: usize = 255;

const _: () = assert!(MLDSA_PK_LEN + 32 == PUBLIC_KEY_LEN);
const _: () = assert!(MLDSA_SIG_LEN + 64 == SIGNATURE_LEN);
const _: () = assert!(SECRET_KEY_LEN == 64);

/// Why a key, signature or signing call is refused (protocol §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompositeSigError {
    /// A byte string of the wrong length.
    #[error("{what} must be {expected} bytes, got {got}")]
    Length {
        /// "public key", "signature" or "secret key".
        what: &'static str,
        /// The length it must have.
        expected: usize,
        /// The length that came.
        got: usize,
    },
    /// The ML-DSA-44 component of a public key does not decode.
    #[error("ML-DSA-44 public key does not decode")]
    MlDsaPublicKey,
    /// The Ed25519 component of a public key is not a valid point.
    #[error("Ed25519 public key is not a valid point")]
    Ed25519PublicKey,
    /// An application context longer than 255 bytes.
    #[error("context of {len} bytes exceeds 255")]
    ContextTooLong {
        /// Its length.
        len: usize,
    },
    /// The system random number generator failed.
    #[error("system random number generator failed")]
    Random,
}

/// The message representative `M'` of the draft (protocol §3).
/// Fails only for a context longer than 255 bytes.
pub fn message_representative(msg: &[u8], ctx: &[u8]) -> Result<Vec<u8>, CompositeSigError> {
    let ctx_len = u8::try_from(ctx.len())
        .map_err(|_| CompositeSigError::ContextTooLong { len: ctx.len() })?;
    let mut m = Vec::with_capacity(PREFIX.len() + LABEL.len() + 1 + ctx.len() + 64);
    m.extend_from_slice(PREFIX);
    m.extend_from_slice(LABEL);
    m.push(ctx_len);
    m.extend_from_slice(ctx);
    m.extend_from_slice(&Sha512::digest(msg));
    Ok(m)
}

/// A CompositeSig public key, 1344 bytes (protocol §3).
#[derive(Clone)]
pub struct PublicKey {
    bytes: [u8; PUBLIC_KEY_LEN],
    mldsa: ml_dsa_44::PublicKey,
    ed: VerifyingKey,
}

impl PublicKey {
    /// Decodes a 1344-byte public key (protocol §3). Any other length or an
    /// undecodable component is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CompositeSigError> {
        let bytes: [u8; PUBLIC_KEY_LEN] =
            bytes.try_into().map_err(|_| CompositeSigError::Length {
                what: "public key",
                expected: PUBLIC_KEY_LEN,
                got: bytes.len(),
            })?;
        let mut mldsa_bytes = [0u8; MLDSA_PK_LEN];
        mldsa_bytes.copy_from_slice(&bytes[..MLDSA_PK_LEN]);
        let mldsa = ml_dsa_44::PublicKey::try_from_bytes(mldsa_bytes)
            .map_err(|_| CompositeSigError::MlDsaPublicKey)?;
        let mut ed_bytes = [0u8; 32];
        ed_bytes.copy_from_slice(&bytes[MLDSA_PK_LEN..]);
        let ed =
            VerifyingKey::from_bytes(&ed_bytes).map_err(|_| CompositeSigError::Ed25519PublicKey)?;
        Ok(Self { bytes, mldsa, ed })
    }

    /// The 1344 bytes: ML-DSA-44 public key, then Ed25519 public key (protocol §3).
    pub fn to_bytes(&self) -> [u8; PUBLIC_KEY_LEN] {
        self.bytes
    }

    /// The 1344 bytes, borrowed (protocol §3).
    pub fn as_bytes(&self) -> &[u8; PUBLIC_KEY_LEN] {
        &self.bytes
    }
}

impl PartialEq for PublicKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for PublicKey {}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head: String = self.bytes[..8].iter().map(|b| format!("{b:02x}")).collect();
        write!(f, "CompositePublicKey({head}..)")
    }
}

/// A CompositeSig secret key: 32-byte ML-DSA-44 keygen seed, then the
/// 32-byte Ed25519 seed (protocol §3). Zeroized on drop; its `Debug` shows
/// no secret byte.
#[derive(Clone)]
pub struct SecretKey {
    seed: Zeroizing<[u8; SECRET_KEY_LEN]>,
    mldsa: ml_dsa_44::PrivateKey,
    ed: SigningKey,
    public: PublicKey,
}

impl SecretKey {
    /// Expands a 64-byte secret key (protocol §3).
    pub fn from_bytes(bytes: &[u8; SECRET_KEY_LEN]) -> Self {
        let seed = Zeroizing::new(*bytes);
        let mut xi = Zeroizing::new([0u8; 32]);
        xi.copy_from_slice(&seed[..32]);
        let (mldsa_pk, mldsa) = ml_dsa_44::KG::keygen_from_seed(&xi);
        let mut ed_seed = Zeroizing::new([0u8; 32]);
        ed_seed.copy_from_slice(&seed[32..]);
        let ed = SigningKey::from_bytes(&ed_seed);
        let ed_pk = ed.verifying_key();
        let mut pk = [0u8; PUBLIC_KEY_LEN];
        pk[..MLDSA_PK_LEN].copy_from_slice(&mldsa_pk.clone().into_bytes());
        pk[MLDSA_PK_LEN..].copy_from_slice(ed_pk.as_bytes());
        let public = PublicKey {
            bytes: pk,
            mldsa: mldsa_pk,
            ed: ed_pk,
        };
        Self {
            seed,
            mldsa,
            ed,
            public,
        }
    }

    /// Decodes a secret key from a slice, which must be 64 bytes (protocol §3).
    pub fn from_slice(bytes: &[u8]) -> Result<Self, CompositeSigError> {
        let arr: &[u8; SECRET_KEY_LEN] =
            bytes.try_into().map_err(|_| CompositeSigError::Length {
                what: "secret key",
                expected: SECRET_KEY_LEN,
                got: bytes.len(),
            })?;
        Ok(Self::from_bytes(arr))
    }

    /// The 64 secret bytes (protocol §3). Handle with care: never log them.
    pub fn to_bytes(&self) -> Zeroizing<[u8; SECRET_KEY_LEN]> {
        self.seed.clone()
    }

    /// The matching public key (protocol §3).
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CompositeSecretKey(..)")
    }
}

/// A CompositeSig signature, 2484 bytes (protocol §3).
#[derive(Clone, PartialEq, Eq)]
pub struct Signature(pub [u8; SIGNATURE_LEN]);

impl Signature {
    /// A signature from a slice that must be 2484 bytes (protocol §3).
    pub fn from_slice(bytes: &[u8]) -> Result<Self, CompositeSigError> {
        let arr: [u8; SIGNATURE_LEN] = bytes.try_into().map_err(|_| CompositeSigError::Length {
            what: "signature",
            expected: SIGNATURE_LEN,
            got: bytes.len(),
        })?;
        Ok(Self(arr))
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head: String = self.0[..8].iter().map(|b| format!("{b:02x}")).collect();
        write!(f, "CompositeSignature({head}..)")
    }
}

/// Generates a fresh key pair from the system RNG (protocol §3; the
/// launcher's job key, protocol §2.2).
pub fn generate() -> Result<SecretKey, CompositeSigError> {
    let mut seed = Zeroizing::new([0u8; SECRET_KEY_LEN]);
    OsRng
        .try_fill_bytes(&mut seed[..])
        .map_err(|_| CompositeSigError::Random)?;
    Ok(SecretKey::from_bytes(&seed))
}

/// Signs `msg` under application context `ctx` (protocol §3): hedged
/// ML-DSA-44 over `M'` with context Label, Ed25519 over `M'`.
pub fn sign(sk: &SecretKey, msg: &[u8], ctx: &[u8]) -> Result<Signature, CompositeSigError> {
    let m = message_representative(msg, ctx)?;
    let mldsa_sig = sk
        .mldsa
        .try_sign_with_rng(&mut OsRng, &m, LABEL)
        .map_err(|_| CompositeSigError::Random)?;
    let ed_sig = sk.ed.sign(&m);
    let mut out = [0u8; SIGNATURE_LEN];
    out[..MLDSA_SIG_LEN].copy_from_slice(&mldsa_sig);
    out[MLDSA_SIG_LEN..].copy_from_slice(&ed_sig.to_bytes());
    Ok(Signature(out))
}

/// Verifies `sig` over `msg` under context `ctx` (protocol §3): both
/// components must verify (Ed25519 with `verify_strict`). A context longer
/// than 255 bytes never verifies.
pub fn verify(pk: &PublicKey, msg: &[u8], ctx: &[u8], sig: &Signature) -> bool {
    let Ok(m) = message_representative(msg, ctx) else {
        return false;
    };
    let mut mldsa_sig = [0u8; MLDSA_SIG_LEN];
    mldsa_sig.copy_from_slice(&sig.0[..MLDSA_SIG_LEN]);
    if !pk.mldsa.verify(&m, &mldsa_sig, LABEL) {
        return false;
    }
    let mut ed_bytes = [0u8; 64];
    ed_bytes.copy_from_slice(&sig.0[MLDSA_SIG_LEN..]);
    let ed_sig = ed25519_dalek::Signature::from_bytes(&ed_bytes);
    pk.ed.verify_strict(&m, &ed_sig).is_ok()
}

/// Verifies raw bytes as they come from a token or file (protocol §3): a
/// public key or signature of the wrong length or encoding does not verify.
pub fn verify_bytes(pk: &[u8], msg: &[u8], ctx: &[u8], sig: &[u8]) -> bool {
    match (PublicKey::from_bytes(pk), Signature::from_slice(sig)) {
        (Ok(pk), Ok(sig)) => verify(&pk, msg, ctx, &sig),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_wire::limits::{CONTEXT_COMMIT, CONTEXT_JOIN};

    #[test]
    fn round_trip_and_context_separation() {
        let sk = generate().unwrap();
        let pk = sk.public_key();
        let sig = sign(&sk, b"hello", CONTEXT_JOIN).unwrap();
        assert!(verify(pk, b"hello", CONTEXT_JOIN, &sig));
        assert!(!verify(pk, b"hello", CONTEXT_COMMIT, &sig));
        assert!(!verify(pk, b"hellO", CONTEXT_JOIN, &sig));
        let other = generate().unwrap();
        assert!(!verify(other.public_key(), b"hello", CONTEXT_JOIN, &sig));
        // Hedged: two signatures of the same message differ.
        let sig2 = sign(&sk, b"hello", CONTEXT_JOIN).unwrap();
        assert_ne!(sig, sig2);
        assert!(verify(pk, b"hello", CONTEXT_JOIN, &sig2));
    }

    #[test]
    fn secret_key_round_trip_and_debug_hides_secret() {
        let sk = generate().unwrap();
        let again = SecretKey::from_bytes(&sk.to_bytes());
        assert_eq!(again.public_key(), sk.public_key());
        let dbg = format!("{sk:?}");
        let hex2: String = sk.to_bytes()[..4]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(!dbg.contains(&hex2), "{dbg}");
    }

    #[test]
    fn wrong_lengths_are_errors() {
        assert!(PublicKey::from_bytes(&[0u8; 1343]).is_err());
        assert!(Signature::from_slice(&[0u8; 2485]).is_err());
        assert!(SecretKey::from_slice(&[0u8; 63]).is_err());
        assert!(!verify_bytes(&[0u8; 10], b"m", b"", &[0u8; 2484]));
        let sk = generate().unwrap();
        assert_eq!(
            sign(&sk, b"m", &[0u8; 256]).unwrap_err(),
            CompositeSigError::ContextTooLong { len: 256 }
        );
    }
}

#[cfg(test)]
mod vector_tests {
    //! The draft's test vectors (tests/data/compsig-mldsa44-ed25519.json).
    use super::*;
    use sperli_wire::limits::{CONTEXT_COMMIT, CONTEXT_JOIN};

    const JSON: &str = include_str!("../tests/data/compsig-mldsa44-ed25519.json");

    /// The string value of the first `"key": "..."` at or after `from`.
    fn field<'a>(text: &'a str, key: &str, from: usize) -> (&'a str, usize) {
        let pat = format!("\"{key}\": \"");
        let start = text[from..].find(&pat).expect("key present") + from + pat.len();
        let len = text[start..].find('"').expect("closing quote");
        (&text[start..start + len], start + len)
    }

    fn hex(s: &str) -> Vec<u8> {
        sperli_wire::hex::decode(s.as_bytes()).expect("hex")
    }

    struct Vector {
        ctx: Vec<u8>,
        sig: Vec<u8>,
        mprime: Vec<u8>,
    }

    fn load() -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<Vector>) {
        let (pk, _) = field(JSON, "pk", JSON.find("\"key\"").unwrap());
        let (sk, _) = field(JSON, "sk", JSON.find("\"key\"").unwrap());
        let (msg, mut pos) = field(JSON, "message", 0);
        let (prefix, _) = field(JSON, "prefix_hex", 0);
        assert_eq!(hex(prefix), PREFIX);
        let (label, _) = field(JSON, "label_hex", 0);
        assert_eq!(hex(label), LABEL);
        let mut vectors = Vec::new();
        while let Some(off) = JSON[pos..].find("\"id\":") {
            let at = pos + off;
            let (ctx, _) = field(JSON, "ctx", at);
            let (sig, _) = field(JSON, "sig", at);
            let (mprime, end) = field(JSON, "mprime", at);
            let (expected, end2) = field(JSON, "expected", end);
            assert_eq!(expected, "valid");
            vectors.push(Vector {
                ctx: hex(ctx),
                sig: hex(sig),
                mprime: hex(mprime),
            });
            pos = end2;
        }
        (hex(pk), hex(sk), hex(msg), vectors)
    }

    #[test]
    fn vectors_verify_and_key_derives() {
        let (pk, sk, msg, vectors) = load();
        assert_eq!(vectors.len(), 2);
        assert!(vectors[0].ctx.is_empty() && !vectors[1].ctx.is_empty());
        let sk = SecretKey::from_slice(&sk).unwrap();
        assert_eq!(sk.public_key().as_bytes()[..], pk[..]);
        let pk = PublicKey::from_bytes(&pk).unwrap();
        for v in &vectors {
            assert_eq!(message_representative(&msg, &v.ctx).unwrap(), v.mprime);
            let sig = Signature::from_slice(&v.sig).unwrap();
            assert!(verify(&pk, &msg, &v.ctx, &sig));
            // Our own signature with the vector's key verifies too.
            let ours = sign(&sk, &msg, &v.ctx).unwrap();
            assert!(verify(&pk, &msg, &v.ctx, &ours));
        }
        // The vector's signatures are bound to their contexts.
        let sig0 = Signature::from_slice(&vectors[0].sig).unwrap();
        assert!(!verify(&pk, &msg, &vectors[1].ctx, &sig0));
        assert!(!verify(&pk, &msg, CONTEXT_JOIN, &sig0));
    }

    // The flip tests are split in three so the harness runs them in parallel
    // (an unoptimised Ed25519 verify takes ~10 ms).
    #[test]
    fn every_flipped_public_key_byte_fails() {
        let (pk, _, msg, vectors) = load();
        let v = &vectors[1];
        assert!(verify_bytes(&pk, &msg, &v.ctx, &v.sig));
        for i in 0..pk.len() {
            let mut p = pk.clone();
            p[i] ^= 1;
            assert!(!verify_bytes(&p, &msg, &v.ctx, &v.sig), "pk byte {i}");
        }
    }

    #[test]
    fn every_flipped_signature_byte_fails() {
        let (pk, _, msg, vectors) = load();
        let v = &vectors[1];
        let pk = PublicKey::from_bytes(&pk).unwrap();
        let mut sig = Signature::from_slice(&v.sig).unwrap();
        assert!(verify(&pk, &msg, &v.ctx, &sig));
        for i in 0..SIGNATURE_LEN {
            sig.0[i] ^= 1;
            assert!(!verify(&pk, &msg, &v.ctx, &sig), "sig byte {i}");
            sig.0[i] ^= 1;
        }
    }

    #[test]
    fn every_flipped_message_or_context_byte_fails() {
        let (pk, _, msg, vectors) = load();
        let v = &vectors[1];
        assert!(verify_bytes(&pk, &msg, &v.ctx, &v.sig));
        for i in 0..msg.len() {
            let mut m = msg.clone();
            m[i] ^= 1;
            assert!(!verify_bytes(&pk, &m, &v.ctx, &v.sig), "msg byte {i}");
        }
        for i in 0..v.ctx.len() {
            let mut c = v.ctx.clone();
            c[i] ^= 1;
            assert!(!verify_bytes(&pk, &msg, &c, &v.sig), "ctx byte {i}");
        }
    }

    #[test]
    fn join_signature_is_not_a_commit_signature() {
        let sk = generate().unwrap();
        let sig = sign(&sk, b"token", CONTEXT_JOIN).unwrap();
        assert!(verify(sk.public_key(), b"token", CONTEXT_JOIN, &sig));
        assert!(!verify(sk.public_key(), b"token", CONTEXT_COMMIT, &sig));
    }
}
