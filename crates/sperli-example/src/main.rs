//! `sperli-example MODE [ARGS]`: the example rank programs the `sperli`
//! launcher ships (docs/launcher.md, "Examples"). `sperli demo`
//! runs the one found next to the `sperli` binary; the launcher's tests
//! build it and run it as their ranks. Each mode is one rank of the job
//! whose description is on stdin:
//!
//! - `hello`: every rank says who it is, then a barrier;
//! - `allreduce [N]`: an f64 sum allreduce of N elements (default 1000);
//!   rank 0 checks the result against the closed form (exit status 4 if it
//!   differs, as for `ckpt` and `scale`);
//! - `pingpong [BYTES] [ROUNDS]`: ranks 0 and 1 bounce a DATA message
//!   (tag 7) ROUNDS times; rank 0 prints the half round-trip time;
//! - `sleep MS`: join, barrier, sleep MS milliseconds (the I/O thread keeps
//!   heartbeats going), barrier;
//! - `exit-once CODE RANK`: like `exit`, in the first incarnation only;
//! - `exit CODE RANK`: once the mesh is up, rank RANK exits with CODE; the
//!   others then fail (the launcher reports RANK's code);
//! - `abort CODE RANK`: once the mesh is up, rank RANK aborts the job
//!   (ABORT reason 2, application abort, with code CODE) and exits 1; the
//!   others fail with H1612 naming it (the launcher prints the
//!   originator's reason and code);
//! - `die-in OP VICTIM LATE [LATE_MS]` (docs/reliability.md, crash tests):
//!   after a barrier (each rank then prints `rank R past the first
//!   barrier`) every rank calls the collective OP (`barrier`, `bcast`,
//!   `reduce`, `allreduce`, `gather`, `scatter`) once; rank LATE enters it
//!   LATE_MS (default 1500) ms late (for `bcast` and `scatter` it is the root, for `reduce`
//!   and `gather` VICTIM is), so rank VICTIM is blocked inside the call
//!   when it SIGKILLs itself 300 ms after entering (a VICTIM >= size kills
//!   nobody);
//! - `scale`: joins with a checkpointer, prints `up <unix ms>`, runs an
//!   allreduce and a checkpoint, then prints its peak resident memory
//!   (`VmHWM`), resident memory and open file descriptors (docs/reliability.md,
//!   "Scale"); needs `--checkpoint-dir`;
//! - `pipe-kill VICTIM [FRAMES]` (protocol §14.7): every rank
//!   makes one allreduce of 64 MiB of f64 per rank (`allreduce_into`:
//!   one pipelined call when the job negotiated HELLO feature bit 1); in
//!   incarnation 1 rank VICTIM SIGKILLs itself once it has taken FRAMES
//!   (default 6) COLLECTIVE frames, in the middle of the pipeline; rank 0
//!   checks the result of a run that completes;
//! - `ckpt STEPS EVERY [SLEEP_MS [KILL_STEP KILL_RANK]]`: a deterministic
//!   f64 iteration with one allreduce per step ([`ckpt::ckpt_step`]), a
//!   checkpoint (sperli-ckpt, protocol §9.4) every EVERY
//!   steps and the resume exchange (protocol §10.2) at the start of every
//!   incarnation; rank 0 prints the final allreduce result as hex and
//!   checks it against [`ckpt::ckpt_reference`]. Needs `sperli run
//!   --checkpoint-dir DIR`. With KILL_STEP, rank KILL_RANK kills itself
//!   with SIGKILL before step KILL_STEP in incarnation 1 (`sperli demo`).
//!   Under `sperli run --recover inplace` the survivors roll back in place
//!   to the launcher's rollback epoch (protocol §18.7) and rank 0 prints
//!   `rolled back to epoch E (step S)`; the replacement joins the same
//!   body ([`Checkpointer::run`](sperli_ckpt::Checkpointer::run));
//! - `stdin [CODE]`: after a barrier every rank prints each line of its
//!   stdin (what follows its job description: the launcher's stdin for
//!   rank 0) as `rank R stdin: LINE`, then `rank R stdin: end of file`;
//!   with CODE, rank 0 of the first incarnation exits with CODE after its
//!   first line (a restart's rank 0 reads the rest of the stream);
//! - `shrink STEPS [RANK:STEP[:stop|:recovery]]...` (protocol §18.8,
//!   `sperli run --recover shrink`): an allreduce loop whose every fold is
//!   checked; each RANK raises SIGKILL (or SIGSTOP) before its STEP, or
//!   SIGKILL in the recovery of its STEP, and the survivors go on without
//!   it ([`shrink::run_shrink`]);
//! - `ckpt-reference SIZE STEPS`: no job; prints `result <hex>`, the line
//!   rank 0 of an undisturbed `ckpt` run of SIZE ranks and STEPS steps
//!   prints ([`ckpt::ckpt_reference`]), so that a test can compare a run that
//!   was killed and restarted with it.

use std::process::ExitCode;

mod ckpt;
mod losses;
mod shrink;

use sperli_ckpt::Checkpointer;
use sperli_collective::{Comm, Reduction};
use sperli_wire::Error;

/// The exit status of a rank whose result differs from the reference (the
/// `allreduce` example's, too).
const EXIT_WRONG_RESULT: u8 = 4;

/// What an example run that checks its result ends with.
enum Failure {
    /// A SPERLI call failed.
    Sperli(Error),
    /// The computed result differs from the reference (the example names
    /// which one).
    WrongResult(&'static str),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Sperli(e)
    }
}

impl Failure {
    /// Prints the failure as rank `rank` and gives the exit status.
    fn exit(self, rank: u32) -> ExitCode {
        match self {
            Failure::Sperli(e) => {
                eprintln!("rank {rank}: {e}");
                ExitCode::from(1)
            }
            Failure::WrongResult(what) => {
                eprintln!("rank {rank}: {what} differs from the reference");
                ExitCode::from(EXIT_WRONG_RESULT)
            }
        }
    }
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize) -> Option<T> {
    args.get(i).and_then(|s| s.parse().ok())
}

/// Joins the job on stdin with a checkpointer; exit status 1, said on
/// stderr, when that fails.
fn join_checkpointer() -> Result<Checkpointer, ExitCode> {
    Checkpointer::join().map_err(|e| {
        eprintln!("cannot join the job: {e}");
        ExitCode::from(1)
    })
}

/// The `die-in` example (see the module docs).
fn die_in<L: sperli_collective::Peers>(comm: &mut Comm<L>, args: &[String]) -> Result<(), Error> {
    let op = args.get(1).map_or("barrier", String::as_str).to_owned();
    let victim: u32 = arg(args, 2).unwrap_or(1);
    let late: u32 = arg(args, 3).unwrap_or(0);
    let late_ms: u64 = arg(args, 4).unwrap_or(1500);
    let rank = comm.rank();
    let size = comm.size();
    comm.barrier()?;
    println!("rank {rank} past the first barrier");
    if rank == victim {
        let op = op.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            println!("rank {rank}: SIGKILL inside {op}");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        });
    }
    if rank == late {
        std::thread::sleep(std::time::Duration::from_millis(late_ms));
    }
    let mine = vec![f64::from(rank); 4];
    match op.as_str() {
        "barrier" => comm.barrier(),
        "bcast" => {
            let mut b = mine;
            comm.bcast(late, &mut b)
        }
        "reduce" => comm
            .reduce(victim.min(size - 1), &mine, Reduction::Sum)
            .map(drop),
        "allreduce" => comm.allreduce(&mine, Reduction::Sum).map(drop),
        "gather" => comm.gather(victim.min(size - 1), &mine).map(drop),
        "scatter" => {
            let all = vec![1.0f64; 4 * size as usize];
            comm.scatter(late, (rank == late).then_some(&all[..]))
                .map(drop)
        }
        other => {
            eprintln!("unknown collective {other}");
            std::process::exit(2);
        }
    }?;
    if rank == victim {
        // The call returned before the kill: say so (the test fails).
        println!("rank {rank}: {op} returned before the SIGKILL");
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
    comm.barrier()
}

/// `VmHWM`, `VmRSS` (KiB) of this process and its open descriptors.
fn own_memory_and_fds() -> (u64, u64, usize) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| -> u64 {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
    (field("VmHWM:"), field("VmRSS:"), fds)
}

/// The `scale` example (see the module docs).
fn run_scale() -> ExitCode {
    let mut ck = match join_checkpointer() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rank = ck.comm().rank();
    let size = ck.comm().size();
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    };
    println!("up {}", now_ms());
    let result = (|| -> Result<(), Failure> {
        let mine = vec![f64::from(rank); 1000];
        let sum = ck.comm().allreduce(&mine, Reduction::Sum)?;
        let want = f64::from(size) * f64::from(size - 1) / 2.0;
        if sum.iter().any(|v| *v != want) {
            return Err(Failure::WrongResult("the scale example's allreduce"));
        }
        let epoch = ck.checkpoint(&(rank, mine))?;
        let (hwm, rss, fds) = own_memory_and_fds();
        println!("stats epoch {epoch} hwm_kib {hwm} rss_kib {rss} fds {fds}");
        Ok(ck.comm().barrier()?)
    })();
    match result.and_then(|()| Ok(ck.into_comm().into_link().finish()?)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.exit(rank),
    }
}

// ---- pipe-kill (protocol §14.7) ---------------------------------------------

/// A [`Peers`](sperli_collective::Peers) implementation over the rank's
/// endpoint that SIGKILLs the process when it takes its `left`-th COLLECTIVE frame.
struct KillAfter {
    ep: sperli_collective::Endpoint,
    left: std::cell::Cell<u64>,
}

impl sperli_collective::Peers for KillAfter {
    fn rank(&self) -> u32 {
        self.ep.rank()
    }
    fn size(&self) -> u32 {
        self.ep.size()
    }
    fn features(&self) -> u64 {
        self.ep.features()
    }
    fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        self.ep.send_collective(to, payload)
    }
    fn send_collective_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        self.ep.send_collective_vec(to, payload)
    }
    fn send_collective_each(&self, to: &[u32], payload: &[u8]) -> Result<(), Error> {
        self.ep.send_collective_each(to, payload)
    }
    fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
        let p = self.ep.recv_collective(from)?;
        let left = self.left.get().saturating_sub(1);
        self.left.set(left);
        if left == 0 {
            println!(
                "rank {}: SIGKILL in the middle of the pipelined allreduce",
                self.ep.rank()
            );
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
        Ok(p)
    }
    fn abort(&self, reason: sperli_wire::abort::AbortReason, code: u32, message: &str) {
        self.ep.abort(reason, code, message)
    }
    fn take_buffer(&self, len: usize) -> Vec<u8> {
        self.ep.take_buffer(len)
    }
    fn recycle(&self, buf: Vec<u8>) {
        self.ep.recycle(buf)
    }
}

/// The `pipe-kill` example (see the module docs).
fn run_pipe_kill(args: &[String]) -> ExitCode {
    let victim: u32 = arg(args, 1).unwrap_or(1);
    let frames: u64 = arg(args, 2).unwrap_or(6);
    let first = std::env::var(sperli_wire::env::INCARNATION).map_or(true, |v| v == "1");
    let ep = match Comm::from_stdin() {
        Ok(c) => c.into_link(),
        Err(e) => {
            eprintln!("cannot join the job: {e}");
            return ExitCode::from(1);
        }
    };
    let (rank, size) = (ep.rank(), ep.size());
    let left = if first && rank == victim {
        frames + 1
    } else {
        u64::MAX
    };
    let comm = Comm::new(KillAfter {
        ep,
        left: std::cell::Cell::new(left),
    });
    let n = (64 << 20) / 8;
    let mine: Vec<f64> = (0..n)
        .map(|i| (i % 1000) as f64 + f64::from(rank))
        .collect();
    let mut out = vec![0f64; n];
    let result = comm.barrier().and_then(|()| {
        let before = comm.sequence();
        comm.allreduce_into(&mine, &mut out, Reduction::Sum)?;
        let calls = comm.sequence() - before;
        let k = f64::from(size * (size - 1) / 2);
        let ok = out
            .iter()
            .enumerate()
            .all(|(i, v)| *v == f64::from(size) * (i % 1000) as f64 + k);
        if rank == 0 {
            println!(
                "allreduce of 64 MiB over {size} ranks in {calls} call(s), features {}: {}",
                comm.features(),
                if ok { "correct" } else { "WRONG" }
            );
        }
        comm.barrier()
    });
    match result.and_then(|()| comm.into_link().ep.finish()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rank {rank}: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    run(&args)
}

/// Runs the example named by `args[0]` as one rank of the job on stdin.
fn run(args: &[String]) -> ExitCode {
    if args.first().map(String::as_str) == Some("ckpt-reference") {
        return ckpt::run_ckpt_reference(args);
    }
    if args.first().map(String::as_str) == Some("ckpt") {
        return ckpt::run_ckpt(args);
    }
    if args.first().map(String::as_str) == Some("pipe-kill") {
        return run_pipe_kill(args);
    }
    if args.first().map(String::as_str) == Some("shrink") {
        return shrink::run_shrink(args);
    }
    if args.first().map(String::as_str) == Some("scale") {
        return run_scale();
    }
    let mut comm = match Comm::from_stdin() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot join the job: {e}");
            return ExitCode::from(1);
        }
    };
    let (rank, size) = (comm.rank(), comm.size());
    let result = match args.first().map(String::as_str) {
        Some("hello") | None => {
            println!("hello from rank {rank} of {size}");
            comm.barrier()
        }
        Some("allreduce") => {
            let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
            let mine: Vec<f64> = (0..n).map(|i| (i as f64) * f64::from(rank + 1)).collect();
            match comm.allreduce(&mine, Reduction::Sum) {
                Ok(sum) => {
                    // sum_r (r+1) * i = i * size*(size+1)/2
                    let k = f64::from(size * (size + 1) / 2);
                    let ok = sum.iter().enumerate().all(|(i, v)| *v == i as f64 * k);
                    if rank == 0 {
                        println!(
                            "allreduce of {n} f64 over {size} ranks: {}",
                            if ok { "correct" } else { "WRONG" }
                        );
                    }
                    if ok {
                        comm.barrier()
                    } else {
                        return ExitCode::from(EXIT_WRONG_RESULT);
                    }
                }
                Err(e) => Err(e),
            }
        }
        Some(mode @ ("exit" | "exit-once")) => {
            // `exit-once` fails only in the first incarnation, so a restart succeeds.
            let first = std::env::var(sperli_wire::env::INCARNATION).map_or(true, |v| v == "1");
            let fail_now = mode == "exit" || first;
            let code: u8 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
            let who: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
            // Exit only once the whole mesh is up.
            if let Err(e) = comm.barrier() {
                eprintln!("rank {rank}: {e}");
                return ExitCode::from(1);
            }
            if rank == who && fail_now {
                std::process::exit(i32::from(code));
            }
            comm.barrier()
        }
        Some("abort") => {
            let code: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(42);
            let who: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
            if let Err(e) = comm.barrier() {
                eprintln!("rank {rank}: {e}");
                return ExitCode::from(1);
            }
            if rank == who {
                comm.link().abort(
                    sperli_wire::abort::AbortReason::Application,
                    code,
                    &format!("example abort by rank {rank}"),
                );
                return ExitCode::from(1);
            }
            comm.barrier()
        }
        Some("pingpong") => {
            let bytes: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(8);
            let rounds: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
            let ep = comm.link();
            let msg = vec![0x5a; bytes];
            let start = std::time::Instant::now();
            let mut r = Ok(());
            for _ in 0..rounds {
                r = match rank {
                    0 => ep.send(1, 7, &msg).and_then(|()| ep.recv(1, 7)).map(drop),
                    1 => ep.recv(0, 7).and_then(|m| ep.send(0, 7, &m)),
                    _ => Ok(()),
                };
                if r.is_err() {
                    break;
                }
            }
            if rank == 0 && r.is_ok() && size > 1 {
                let half = start.elapsed().as_secs_f64() / f64::from(rounds.max(1)) / 2.0;
                println!(
                    "ping-pong of {bytes} bytes between ranks 0 and 1: {:.1} us half round trip",
                    half * 1e6
                );
            }
            r.and_then(|()| comm.barrier())
        }
        Some("die-in") => die_in(&mut comm, args),
        Some("sleep") => {
            let ms: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
            println!("rank {rank} joined");
            if let Err(e) = comm.barrier() {
                eprintln!("rank {rank}: {e}");
                return ExitCode::from(1);
            }
            std::thread::sleep(std::time::Duration::from_millis(ms));
            comm.barrier()
        }
        Some("stdin") => {
            let once: Option<u8> = args.get(1).and_then(|s| s.parse().ok());
            let first = std::env::var(sperli_wire::env::INCARNATION).map_or(true, |v| v == "1");
            if let Err(e) = comm.barrier() {
                eprintln!("rank {rank}: {e}");
                return ExitCode::from(1);
            }
            let mut line = String::new();
            loop {
                line.clear();
                match std::io::stdin().read_line(&mut line) {
                    Ok(0) => {
                        println!("rank {rank} stdin: end of file");
                        break;
                    }
                    Ok(_) => println!("rank {rank} stdin: {}", line.trim_end_matches('\n')),
                    Err(e) => {
                        println!("rank {rank} stdin: {e}");
                        break;
                    }
                }
                if let (Some(code), 0, true) = (once, rank, first) {
                    std::process::exit(i32::from(code));
                }
            }
            comm.barrier()
        }
        Some(other) => {
            eprintln!("unknown mode {other}");
            return ExitCode::from(2);
        }
    };
    let result = result.and_then(|()| comm.into_link().finish());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rank {rank}: {e}");
            ExitCode::from(1)
        }
    }
}
