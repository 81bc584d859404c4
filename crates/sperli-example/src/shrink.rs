//! `shrink STEPS LOSS...`: an allreduce loop that loses ranks and goes on
//! over the survivors (protocol §18.8; `sperli run --recover shrink`).
//! Each LOSS is `RANK:STEP` (the rank SIGKILLs itself before that step),
//! `RANK:STEP:stop` (it SIGSTOPs itself: its peers find it silent and the
//! launcher fences it) or `RANK:STEP:recovery` (it SIGKILLs itself once
//! a call of that step or a later one returned the revoked error: in the
//! first recovery it takes part in from then on).

use std::process::ExitCode;

use sperli_collective::{Comm, Reduction};
use sperli_wire::recovery::RecoveryError;
use sperli_wire::Error;

use crate::losses::{lose, parse_loss, How, Loss};

/// What job rank `r` adds in step `s`: values whose sum depends on the
/// order of the fold, so a fold in another order would show.
pub fn shrink_value(r: u32, s: u64) -> f64 {
    1.0 / f64::from(r + 3) + (s as f64) * 0.1
}

/// The ascending fold over `members` of step `s`, left operand first
/// (protocol §8.3): what the allreduce must give, bit for bit.
pub fn shrink_fold(members: &[u32], s: u64) -> f64 {
    let mut it = members.iter();
    let first = it.next().map_or(0.0, |r| shrink_value(*r, s));
    it.fold(first, |acc, r| acc + shrink_value(*r, s))
}

/// Runs the `shrink` example (module docs): every rank makes STEPS
/// allreduces of one f64 and checks each against [`shrink_fold`] over the
/// members that took part; each LOSS takes its rank away before its step.
/// A survivor whose call returns the revoked error recovers into the
/// launcher's membership ([`Comm::recover`]), prints `rank R: epoch E
/// members [..] failed [..]`, and the survivors go on from the lowest step
/// any of them is at. Each survivor ends with `rank R: shrink done: STEPS
/// steps over [..], every fold checked`.
pub fn run_shrink(args: &[String]) -> ExitCode {
    let steps = args.get(1).and_then(|s| s.parse::<u64>().ok());
    let losses: Option<Vec<Loss>> = args.iter().skip(2).map(|s| parse_loss(s)).collect();
    let (Some(steps), Some(losses)) = (steps, losses) else {
        eprintln!("usage: sperli-example shrink STEPS [RANK:STEP[:stop|:recovery]]...");
        return ExitCode::from(2);
    };
    let comm = match Comm::from_stdin() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot join the job: {e}");
            return ExitCode::from(1);
        }
    };
    let me = comm.rank();
    match shrink_loop(comm, steps, &losses) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rank {me}: {e}");
            ExitCode::from(1)
        }
    }
}

fn shrink_loop(
    comm: Comm<sperli_collective::Endpoint>,
    steps: u64,
    losses: &[Loss],
) -> Result<(), Error> {
    comm.link().set_errors(sperli_collective::ErrorMode::Return);
    let me = comm.rank();
    println!("rank {me}: pid {}", std::process::id());
    let mut world = comm;
    let mut step = 0u64;
    while step < steps {
        let mine = |how: How| {
            losses
                .iter()
                .any(|l| l.rank == me && l.step == step && l.how == how)
        };
        for how in [How::Kill, How::Stop] {
            if mine(how) {
                lose(me, step, how);
            }
        }
        match world.allreduce(&[shrink_value(me, step)], Reduction::Sum) {
            Ok(sum) => {
                let members: Vec<u32> = (0..world.size()).map(|r| world.job_rank(r)).collect();
                let want = shrink_fold(&members, step);
                if sum.first().map(|v| v.to_bits()) != Some(want.to_bits()) {
                    eprintln!(
                        "rank {me}: step {step} gave {sum:?}, the fold over {members:?} is {want}"
                    );
                    std::process::exit(i32::from(crate::EXIT_WRONG_RESULT));
                }
                step += 1;
            }
            Err(Error::Recovery(RecoveryError::Revoked { .. })) => {
                let in_recovery = |l: &&Loss| l.how == How::InRecovery && l.step <= step;
                if losses.iter().filter(in_recovery).any(|l| l.rank == me) {
                    lose(me, step, How::InRecovery);
                }
                // A rank lost during the recovery revokes the new epoch too:
                // recover again until the survivors agree.
                step = loop {
                    let (w, m) = world.recover()?;
                    println!(
                        "rank {me}: epoch {} members {:?} failed {:?}",
                        m.epoch, m.members, m.failed
                    );
                    world = w;
                    // Go on from the lowest step a survivor is at (one may
                    // have finished a step another saw revoked).
                    match world.allreduce(&[step], Reduction::Min) {
                        Ok(v) => break v[0],
                        Err(Error::Recovery(RecoveryError::Revoked { .. })) => continue,
                        Err(e) => return Err(e),
                    }
                };
            }
            Err(e) => return Err(e),
        }
    }
    let members: Vec<u32> = (0..world.size()).map(|r| world.job_rank(r)).collect();
    println!(
        "rank {me}: shrink done: {steps} steps over {members:?}, every fold checked, pid {}",
        std::process::id()
    );
    world.barrier()?;
    world.into_link().finish()
}
