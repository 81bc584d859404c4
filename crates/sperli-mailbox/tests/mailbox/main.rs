//! The mailbox's multi-process tests: 4-rank jobs under the real `sperli`
//! launcher (`sperli run --mailbox`), ranks on 127.0.0.1-127.0.0.4 over
//! mutually authenticated TLS 1.3, the example server
//! `sperli-mailbox-server` as the rank program; plus the attach checks on
//! real files in /dev/shm and an in-process job of real TLS endpoints.
//!
//! One test binary (modules below). `SPERLI_TEST_VERBOSE=1` shows the
//! launchers' and ranks' output.
#![forbid(unsafe_code)]

mod attach;
mod common;
mod faults;
mod lane;
mod serve;
