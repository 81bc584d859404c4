//! `rank shrink`: what losing a rank costs under `sperli run --recover
//! shrink` (protocol §18.6, §18.8), and under `--recover restart` for the
//! same job. The last rank kills itself (SIGABRT: its sockets close as
//! with SIGKILL) after three allreduces, saying when.
//!
//! Shrink: each survivor's next allreduce returns the revoked error (the
//! failure is known), it recovers into the launcher's membership and
//! agrees with the others on where to go on (an allreduce over the
//! survivors), then makes the next step. The new communicator's rank 0
//! prints `shrink_agree_us` (from the earliest survivor that knew of the
//! failure to the last that agreed) and `step_after_kill_unix_ns` (the
//! last survivor's next completed step). Restart: every rank ends, the
//! launcher starts the job again (incarnation 2), whose rank 0 prints the
//! time its first step completed.

use std::time::{SystemTime, UNIX_EPOCH};

use sperli_collective::{Comm, ErrorMode, Reduction};
use sperli_transport::Endpoint;
use sperli_wire::recovery::RecoveryError;
use sperli_wire::Error;

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Runs the mode (module docs).
pub fn run(comm: Comm<Endpoint>) -> Result<(), Error> {
    let n = u64::from(comm.size());
    let incarnation = std::env::var(sperli_wire::env::INCARNATION).unwrap_or_default();
    if incarnation != "1" {
        // The restarted job: its first step.
        comm.allreduce(&[1u64], Reduction::Sum)?;
        let t = comm.allreduce(&[unix_ns()], Reduction::Max)?[0];
        if comm.rank() == 0 {
            println!("RESULT step_after_kill_unix_ns {n} {t}");
        }
        return comm.into_link().finish();
    }
    comm.link().set_errors(ErrorMode::Return);
    let victim = u64::from(comm.rank()) == n - 1;
    // A survivor may still be in the step before the kill when the revoke
    // comes (the lost rank had that step's result, not every survivor).
    let mut step = 0;
    let known = loop {
        if victim && step == 3 {
            println!("RESULT kill_unix_ns {n} {}", unix_ns());
            std::process::abort();
        }
        match comm.allreduce(&[1u64], Reduction::Sum) {
            Ok(_) if step < 3 => step += 1,
            Ok(_) => {
                eprintln!("sperli-bench shrink: a step completed without the lost rank");
                std::process::exit(1);
            }
            Err(Error::Recovery(RecoveryError::Revoked { .. })) => break unix_ns(),
            Err(e) => return Err(e),
        }
    };
    let (world, _) = comm.recover()?;
    drop(comm);
    world.allreduce(&[3u64], Reduction::Min)?;
    let agreed = unix_ns();
    world.allreduce(&[1u64], Reduction::Sum)?;
    let stepped = unix_ns();
    let first = world.allreduce(&[known], Reduction::Min)?[0];
    let last = world.allreduce(&[agreed], Reduction::Max)?[0];
    let step = world.allreduce(&[stepped], Reduction::Max)?[0];
    if world.rank() == 0 {
        println!("RESULT shrink_agree_us {n} {}", (last - first) as f64 / 1e3);
        println!("RESULT step_after_kill_unix_ns {n} {step}");
    }
    world.into_link().finish()
}

/// `rank inplace BYTES`: what losing a rank costs under `sperli run
/// --recover inplace` (protocol §18.7), and under `--recover restart
/// --restart-max 1` for the same job. Every rank holds BYTES of state
/// (`Vec<u8>`) and checkpoints it once (epoch 1) after its first step;
/// the last rank of the first incarnation kills itself (SIGABRT) before
/// step 3, saying when. In place, the survivors' next call returns the
/// revoked error, `Checkpointer::run` waits for the launcher's record and
/// the replacement's join and runs the body again, which resumes epoch 1
/// (the replacement too); after a restart every rank resumes it. The first
/// step completed after the resume ends the job: rank 0 prints
/// `step_after_kill_unix_ns` (the last rank's completion).
pub fn run_inplace(state_bytes: usize) -> Result<(), Error> {
    let mut ck = sperli_ckpt::Checkpointer::join()?;
    let n = u64::from(ck.comm().size());
    let rank = ck.comm().rank();
    let incarnation = ck.keys().incarnation();
    let mut armed = incarnation == 1 && u64::from(rank) == n - 1;
    ck.run(|ck| {
        let resumed = ck.resume::<(u64, Vec<u8>)>()?;
        if resumed.is_some() {
            // After a rollback or a restart: the next completed step.
            ck.comm().allreduce(&[1u64], Reduction::Sum)?;
            let t = ck.comm().allreduce(&[unix_ns()], Reduction::Max)?[0];
            if rank == 0 {
                println!("RESULT step_after_kill_unix_ns {n} {t}");
            }
            return Ok(());
        }
        let state = (1u64, vec![rank as u8; state_bytes]);
        ck.comm().allreduce(&[1u64], Reduction::Sum)?;
        ck.checkpoint(&state)?;
        for step in 1..=3 {
            if armed && step == 3 {
                armed = false;
                println!("RESULT kill_unix_ns {n} {}", unix_ns());
                std::process::abort();
            }
            // Step 3 returns the revoked error on the survivors.
            ck.comm().allreduce(&[1u64], Reduction::Sum)?;
        }
        eprintln!("sperli-bench inplace: a step completed without the lost rank");
        std::process::exit(1);
    })?;
    ck.into_comm().into_link().finish()
}
