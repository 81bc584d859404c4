//! # sperli-launch
//!
//! The `sperli` launcher (docs/launcher.md): host lists, refused hosts,
//! placement, spawning ranks (locally, through a remote shell or as Slurm
//! job steps), streaming their output with a `[rank]` prefix, the root
//! cause of a failure, exit status, restarts, and no process of a job
//! left behind.
//!
//! The library is the `sperli` binary's: it exports what `src/main.rs`
//! calls and the types those calls take and return, nothing else. The
//! tests under `tests/` run the binary and use none of it. Of the
//! rank-side crates the launcher uses the transport's sans-I/O recovery
//! Decider (protocol §18.6) and `sperli-mailbox` (for `--mailbox` and
//! `sperli submit`): it reads the ranks' failure records with
//! [`sperli_wire::failure_record`] and runs its example rank program
//! (`sperli-example`, crates/sperli-example) as a process.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod ckpt_tree;
mod control;
mod hosts;
mod job_key;
mod launch_hosts;
mod listen_ahead;
pub mod mailbox_cli;
mod os;
mod outcome;
mod output;
mod procfs;
mod rank_exit;
mod record_dir;
mod recovery;
mod replacement;
mod root_cause;
mod slurm;
mod spawn;
mod stdin_feed;
mod supervise;
mod watchdog;

pub use ckpt_tree::{at_end, CheckpointTree};
pub use hosts::{parse_deny_file, place, DenyFileError, HostSpec, MapBy};
pub use job_key::{JobIdentity, KeyFileError};
pub use launch_hosts::{hosts_of, HostChoice, Hosts};
pub use os::become_subreaper;
pub use outcome::{Blame, Outcome, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_TIMEOUT, EXIT_USAGE};
pub use rank_exit::RankExit;
pub use recovery::{RecoverMode, RecoveryPlan, UnknownRecoverMode};
pub use root_cause::{Cause, Verdict};
pub use spawn::{omp_threads, RankLaunch, SpawnFailure, StartError, Via, DEFAULT_RSH};
pub use stdin_feed::StdinFeed;
pub use supervise::{is_local, run_job_recovering, Options, SETUP_MARGIN};
