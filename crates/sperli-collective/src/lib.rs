//! sperli-collective: see the crate README and docs/sperli-protocol.md.
#![forbid(unsafe_code)]
