//! # sperli-launch
//!
//! The `sperli` launcher (issue 6): host lists, refused hosts, placement,
//! spawning ranks (locally or through a remote shell), streaming their output
//! with a `[rank]` prefix, exit status and restarts.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod example;
pub mod hosts;
pub mod mailbox_cli;
pub mod root_cause;
pub mod supervise;
