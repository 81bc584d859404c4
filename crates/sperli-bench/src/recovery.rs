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
