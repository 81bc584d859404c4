//! # sperli-tls
//!
//! The security layer of SPERLI v1 (protocol text "Transport und Sicherheit";
//! layouts §4, §9, §10): CompositeSig signatures, the per-job PKI, rustls
//! TLS 1.3 configurations with mutual authentication against the job CA
//! only, the peer-subject check, and join-token signing and checking.
//! There is no plaintext path.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod composite_sig;
pub mod config;
pub mod join_token;
pub mod pki;
