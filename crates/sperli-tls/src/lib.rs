//! # sperli-tls
//!
//! The security layer of SPERLI v1 (protocol §2, §3, §7.1.2): CompositeSig
//! signatures, the per-job PKI, rustls
//! TLS 1.3 configurations with mutual authentication against the job CA
//! only, the peer-subject check, and join-token signing and checking.
//! There is no plaintext path.
//!
//! Issuing (the job CA, rank certificates, [`job_plan::JobPlan`]) is behind
//! the `issue` feature: the launcher and tests turn it on, a rank binary
//! does not, so ranks link no certificate generator.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod composite_sig;
pub mod config;
#[cfg(feature = "issue")]
pub mod issue;
#[cfg(feature = "issue")]
pub mod job_plan;
pub mod join_token;
pub mod pki;
