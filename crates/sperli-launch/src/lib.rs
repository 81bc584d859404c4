//! # sperli-launch
//!
//! The `sperli` launcher (docs/launcher.md): host lists, refused hosts,
//! placement, spawning ranks (locally, through a remote shell or as Slurm
//! job steps), streaming their output with a `[rank]` prefix, the root
//! cause of a failure, exit status, restarts, and no process of a job
//! left behind.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod ckpt_tree;
pub mod example;
pub mod hosts;
pub mod job_key;
pub mod launch_hosts;
pub mod mailbox_cli;
pub mod os;
pub mod outcome;
pub mod output;
pub mod procfs;
pub mod root_cause;
pub mod slurm;
pub mod spawn;
pub mod supervise;
pub mod watchdog;
