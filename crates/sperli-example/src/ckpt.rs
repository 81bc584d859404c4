//! `ckpt STEPS EVERY [SLEEP_MS [KILL_STEP KILL_RANK]] [LOSS...]` (each LOSS
//! as the `losses` module says) and `ckpt-reference
//! SIZE STEPS` (module docs of the binary): an iteration that checkpoints
//! (protocol §9.4), resumes after a restart (§10.2) and, in a job run with
//! `sperli run --recover inplace`, rolls back in place (§18.7), with one
//! body for all three ([`Checkpointer::run`](sperli_ckpt::Checkpointer::run)).

use std::process::ExitCode;

use sperli_collective::Reduction;

use sperli_wire::recovery::RecoveryError;
use sperli_wire::Error;

use crate::losses::{lose, parse_loss, How, Loss};
use crate::{arg, join_checkpointer, Failure};

/// The `ckpt` example (see the module docs of the binary). Rank 0 prints
/// how the body starts (`incarnation I: starting from the beginning`,
/// `incarnation I: resumed from epoch E (step S)` after a restart, or
/// `rolled back to epoch E (step S)` after a recovery in place), each
/// `checkpoint epoch E at step S`, and the `result` line.
pub fn run_ckpt(args: &[String]) -> ExitCode {
    let steps: u64 = arg(args, 1).unwrap_or(60);
    let every: u64 = arg::<u64>(args, 2).unwrap_or(10).max(1);
    let sleep_ms: u64 = arg(args, 3).unwrap_or(0);
    let kill_step: Option<u64> = arg(args, 4);
    let kill_rank: u32 = arg(args, 5).unwrap_or(1);
    let losses: Option<Vec<Loss>> = args
        .iter()
        .skip(1)
        .filter(|a| a.contains(':'))
        .map(|a| parse_loss(a))
        .collect();
    let Some(mut losses) = losses else {
        eprintln!(
            "usage: sperli-example ckpt STEPS EVERY [SLEEP_MS [KILL_STEP KILL_RANK]] [RANK:STEP[:stop|:recovery]]..."
        );
        return ExitCode::from(2);
    };
    if let Some(step) = kill_step {
        losses.push(Loss {
            rank: kill_rank,
            step,
            how: How::Kill,
        });
    }
    let mut ck = match join_checkpointer() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rank = ck.comm().rank();
    let size = ck.comm().size();
    let incarnation = ck.keys().incarnation();
    let pid = std::process::id();
    println!("rank {rank}: pid {pid} incarnation {incarnation}");
    // Each loss fires once per process at most, and only in the rank's
    // process of the first incarnation. After a rollback in place the
    // survivors run the body again, and their steps again, still with
    // incarnation 1 (protocol §18.1: a survivor keeps its incarnation); so
    // the test is on this process, not on the incarnation alone. A lost
    // rank's replacement has incarnation >= 2 and never loses itself.
    let mut armed: Vec<Loss> = losses
        .into_iter()
        .filter(|l| incarnation == 1 && l.rank == rank)
        .collect();
    let result = ck.run(|ck| {
        let (mut step, mut x, resumed) = match ck.resume::<(u64, Vec<f64>)>()? {
            Some((epoch, (step, x))) => (step, x, Some(epoch)),
            None => (0, ckpt_initial(rank), None),
        };
        if rank == 0 {
            match (ck.rolled_back(), resumed) {
                (Some(e), _) => println!("rolled back to epoch {e} (step {step})"),
                (None, Some(e)) => {
                    println!("incarnation {incarnation}: resumed from epoch {e} (step {step})")
                }
                (None, None) => println!("incarnation {incarnation}: starting from the beginning"),
            }
        }
        while step < steps {
            if let Some(i) = armed
                .iter()
                .position(|l| l.step == step && l.how != How::InRecovery)
            {
                let l = armed.remove(i);
                lose(rank, step, l.how);
            }
            let sum = match ck.comm().allreduce(&x, Reduction::Sum) {
                Err(e @ Error::Recovery(RecoveryError::Revoked { .. })) => {
                    // A loss in the recovery: this rank goes while it
                    // takes part in it.
                    if let Some(i) = armed
                        .iter()
                        .position(|l| l.step <= step && l.how == How::InRecovery)
                    {
                        let l = armed.remove(i);
                        lose(rank, step, l.how);
                    }
                    return Err(e);
                }
                r => r?,
            };
            ckpt_step(&mut x, &sum, size, step);
            step += 1;
            if step % every == 0 {
                let epoch = ck.checkpoint(&(step, x.clone()))?;
                if rank == 0 {
                    println!("checkpoint epoch {epoch} at step {step}");
                }
            }
            if sleep_ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(sleep_ms));
            }
        }
        ck.comm().allreduce(&x, Reduction::Sum)
    });
    if result.is_ok() {
        println!("rank {rank}: done, pid {pid}");
    }
    let result = result.map_err(Failure::from).and_then(|sum| {
        if rank == 0 {
            println!("result {}", f64_hex(&sum));
            let ok = f64_hex(&sum) == f64_hex(&ckpt_reference(size, steps));
            println!(
                "result check against an undisturbed computation: {}",
                if ok { "correct" } else { "WRONG" }
            );
            if !ok {
                return Err(Failure::WrongResult("the ckpt example's result"));
            }
        }
        Ok(())
    });
    match result.and_then(|()| Ok(ck.into_comm().into_link().finish()?)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.exit(rank),
    }
}

/// Elements per rank in the `ckpt` example.
const CKPT_LEN: usize = 16;

/// Rank `rank`'s start vector in the `ckpt` example.
pub fn ckpt_initial(rank: u32) -> Vec<f64> {
    (0..CKPT_LEN)
        .map(|i| f64::from(rank + 1) * (i as f64 + 1.0) / 7.0)
        .collect()
}

/// One step of the `ckpt` example: `x = x/2 + sum/(4 size) + 1/(step+1)`,
/// element by element, where `sum` is the allreduce (sum) of every rank's
/// `x`. Only IEEE +, *, / so every machine gets the same bits.
pub fn ckpt_step(x: &mut [f64], sum: &[f64], size: u32, step: u64) {
    let q = 4.0 * f64::from(size);
    let c = 1.0 / (step as f64 + 1.0);
    for (xi, si) in x.iter_mut().zip(sum) {
        *xi = 0.5 * *xi + *si / q + c;
    }
}

/// The sum of `x` over ranks as the v1 allreduce folds it: ascending rank
/// order, the lower rank's partial as the left operand (protocol §8.2).
fn fold_sum(xs: &[Vec<f64>]) -> Vec<f64> {
    let mut acc = xs.first().cloned().unwrap_or_default();
    for x in xs.iter().skip(1) {
        for (a, b) in acc.iter_mut().zip(x) {
            *a += *b;
        }
    }
    acc
}

/// The final result of an undisturbed `ckpt` run of `size` ranks and
/// `steps` steps, computed in one process.
pub fn ckpt_reference(size: u32, steps: u64) -> Vec<f64> {
    let mut xs: Vec<Vec<f64>> = (0..size).map(ckpt_initial).collect();
    for step in 0..steps {
        let sum = fold_sum(&xs);
        for x in &mut xs {
            ckpt_step(x, &sum, size, step);
        }
    }
    fold_sum(&xs)
}

/// Lowercase hex of the little-endian bytes of `v`.
pub fn f64_hex(v: &[f64]) -> String {
    v.iter()
        .flat_map(|x| x.to_le_bytes())
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `ckpt-reference SIZE STEPS`: the `result` line of an undisturbed `ckpt`
/// run (exit status 2 for arguments that are not numbers).
pub fn run_ckpt_reference(args: &[String]) -> ExitCode {
    match (arg::<u32>(args, 1), arg::<u64>(args, 2)) {
        (Some(size), Some(steps)) if size > 0 => {
            println!("result {}", f64_hex(&ckpt_reference(size, steps)));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: sperli-example ckpt-reference SIZE STEPS");
            ExitCode::from(2)
        }
    }
}
