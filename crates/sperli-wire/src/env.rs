//! The environment contract between the launcher and its ranks: the name
//! of every environment variable the launcher sets or reads, in one place
//! (docs/launcher.md has the same table for users). None of them carries a
//! secret (protocol §4.1: the job description travels on stdin only).
//!
//! | variable | set by | read by | meaning |
//! |---|---|---|---|
//! | [`REFUSED_HOSTS`] | the operator | launcher, rank | names never to run a rank on (protocol §2.3) |
//! | [`RANK`] | launcher | program | this rank, `0..size` |
//! | [`SIZE`] | launcher | program | the job size |
//! | [`LOCAL_RANK`] | launcher | program | this rank's index among the ranks on its host |
//! | [`LOCAL_SIZE`] | launcher | program | how many of the job's ranks run on its host |
//! | [`INCARNATION`] | launcher | program | the job's incarnation, from 1 (protocol §10.1) |
//! | [`SILENCE_MS`] | launcher | rank | the silence limit in ms (protocol §5.2) |
//! | [`CHECKPOINT_DIR`] | launcher | rank | this rank's own checkpoint directory (protocol §9.1) |
//! | [`ERROR_FILE`] | launcher | rank | where the rank writes its failure record |
//! | [`TORCH_RANK`] (`RANK`) | launcher | program | torchrun's name for [`RANK`] |
//! | [`WORLD_SIZE`] | launcher | program | torchrun's name for [`SIZE`] |
//! | [`TORCH_LOCAL_RANK`] (`LOCAL_RANK`) | launcher | program | torchrun's name for [`LOCAL_RANK`] |
//! | [`LOCAL_WORLD_SIZE`] | launcher | program | torchrun's name for [`LOCAL_SIZE`] |
//! | [`OMP_NUM_THREADS`] | launcher, ranks sharing a machine, unless set | program | `1`: one thread per rank in OpenMP and OpenBLAS pools (torchrun's default) |
//! | [`MAILBOX`] | launcher (`--mailbox`), rank 0 only | rank 0 | the name of the job's task mailbox (docs/mailbox.md) |
//! | [`RECOVER`] | launcher (`--recover`), ranks with a control channel | rank | `inplace` or `shrink`: the recovery of a lost rank (protocol §18) |
//!
//! Variables of the test and benchmark harnesses, never set by the
//! launcher for a user's job, are listed at the end of this module:
//! [`SLOW_TESTS`], [`SLURM_TESTS`], [`TEST_JOB`], [`TEST_CKPT_KILL`] and
//! [`FEATURES`] (the HELLO feature bits a rank announces, e.g. `1` for a
//! v1-only rank; the launcher passes it on like any variable of its own
//! environment).

/// Host names (and IPv4 addresses) that never run a rank, separated by
/// commas and whitespace (protocol §2.3).
pub const REFUSED_HOSTS: &str = "SPERLI_REFUSED_HOSTS";
/// This rank, `0..size`, for the program (like `OMPI_COMM_WORLD_RANK`).
pub const RANK: &str = "SPERLI_RANK";
/// The job size, for the program (like `OMPI_COMM_WORLD_SIZE`).
pub const SIZE: &str = "SPERLI_SIZE";
/// This rank's index among the job's ranks on the same host.
pub const LOCAL_RANK: &str = "SPERLI_LOCAL_RANK";
/// How many of the job's ranks run on this rank's host (torchrun's
/// `LOCAL_WORLD_SIZE`).
pub const LOCAL_SIZE: &str = "SPERLI_LOCAL_SIZE";
/// The job's incarnation, from 1; a restart counts it on (protocol §10.1).
pub const INCARNATION: &str = "SPERLI_INCARNATION";
/// The silence limit in milliseconds (protocol §5.2), from `sperli run
/// --silence-ms`.
pub const SILENCE_MS: &str = "SPERLI_SILENCE_MS";
/// This rank's own checkpoint directory (protocol §9.1), from `sperli run
/// --checkpoint-dir`.
pub const CHECKPOINT_DIR: &str = "SPERLI_CHECKPOINT_DIR";
/// The file in which the rank's I/O thread writes the failure record of
/// the error that ended its job step, before the program sees the error.
pub const ERROR_FILE: &str = "SPERLI_ERROR_FILE";

/// torchrun's name for [`LOCAL_SIZE`], set too so torchrun habits work.
pub const LOCAL_WORLD_SIZE: &str = "LOCAL_WORLD_SIZE";
/// The threads of a rank's OpenMP (and OpenBLAS) pools: `1`, as torchrun
/// sets it, for a rank that shares its machine with other ranks of the
/// job, unless the launcher's own environment sets it (docs/launcher.md).
pub const OMP_NUM_THREADS: &str = "OMP_NUM_THREADS";
/// torchrun's name for [`RANK`], set to the same value.
pub const TORCH_RANK: &str = "RANK";
/// torchrun's name for [`SIZE`], set to the same value.
pub const WORLD_SIZE: &str = "WORLD_SIZE";
/// torchrun's name for [`LOCAL_RANK`], set to the same value.
pub const TORCH_LOCAL_RANK: &str = "LOCAL_RANK";
/// The name of the job's task mailbox (`sperli run --mailbox NAME`), set
/// for rank 0 only (docs/mailbox.md). A name, not a secret.
pub const MAILBOX: &str = "SPERLI_MAILBOX";

/// The job's recovery mode (`sperli run --recover inplace|shrink`), set
/// for ranks that have a control channel (protocol §18.1). With `shrink`
/// every rank takes a lost peer into the recovery from its start (a
/// program run so goes on without the lost rank, protocol §18.8); with
/// `inplace` only while its program asks for it (`Checkpointer::run`,
/// protocol §18.7). Not a secret.
pub const RECOVER: &str = "SPERLI_RECOVER";

/// Test harness: `1` makes `cargo xtask test` run the `#[ignore]`d slow
/// scale and fault tests too.
pub const SLOW_TESTS: &str = "SPERLI_SLOW_TESTS";
/// Test harness: `1` makes `cargo xtask test` run the launcher's
/// `#[ignore]`d Slurm test (a real three-node cluster on the machine;
/// needs root and the Slurm packages).
pub const SLURM_TESTS: &str = "SPERLI_SLURM_TESTS";
/// Test harness: a marker the launcher tests put into a job's environment
/// to find every process of that job in `/proc`.
pub const TEST_JOB: &str = "SPERLI_TEST_JOB";
/// Test harness: kill this rank at a named checkpoint step (the
/// fault-injection hook of the checkpoint tests).
pub const TEST_CKPT_KILL: &str = "SPERLI_TEST_CKPT_KILL";
/// Test and benchmark harness: the HELLO feature bits this rank announces
/// (protocol §7.1.1), decimal; bit 0 is always sent. Unset: every extension
/// the implementation has. `1` makes the rank, and so the whole job, v1
/// only: every collective then runs the v1 star (the star side of the
/// pipelined-collective benchmark, and the mixed-job tests). Not a secret.
pub const FEATURES: &str = "SPERLI_FEATURES";

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_distinct_and_prefixed() {
        let all = [
            super::REFUSED_HOSTS,
            super::RANK,
            super::SIZE,
            super::LOCAL_RANK,
            super::LOCAL_SIZE,
            super::INCARNATION,
            super::SILENCE_MS,
            super::CHECKPOINT_DIR,
            super::ERROR_FILE,
            super::RECOVER,
            super::SLOW_TESTS,
            super::SLURM_TESTS,
            super::TEST_JOB,
            super::TEST_CKPT_KILL,
            super::FEATURES,
        ];
        let set: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(set.len(), all.len());
        assert!(all.iter().all(|n| n.starts_with("SPERLI_")));
        let torchrun = [
            super::TORCH_RANK,
            super::WORLD_SIZE,
            super::TORCH_LOCAL_RANK,
            super::LOCAL_WORLD_SIZE,
        ];
        let set: std::collections::BTreeSet<_> = all.iter().chain(&torchrun).collect();
        assert_eq!(set.len(), all.len() + torchrun.len());
    }
}
