//! Example rank programs, run by `sperli-example MODE` or the launcher's
//! own `sperli example MODE` (what `sperli demo` starts):
//!
//! - `hello`: every rank says who it is, then a barrier;
//! - `allreduce [N]`: an f64 sum allreduce of N elements (default 1000);
//!   rank 0 checks the result against the closed form;
//! - `pingpong [BYTES] [ROUNDS]`: ranks 0 and 1 bounce a DATA message
//!   (tag 7) ROUNDS times; rank 0 prints the half round-trip time;
//! - `sleep MS`: join, barrier, sleep MS milliseconds (the I/O thread keeps
//!   heartbeats going), barrier;
//! - `exit-once CODE RANK`: like `exit`, in the first incarnation only;
//! - `exit CODE RANK`: once the mesh is up, rank RANK exits with CODE; the
//!   others then fail (the launcher reports RANK's code).

use std::process::ExitCode;

use sperli_collective::{Comm, Reduction};

/// Runs the example named by `args[0]` as one rank of the job on stdin.
pub fn run(args: &[String]) -> ExitCode {
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
                        return ExitCode::from(4);
                    }
                }
                Err(e) => Err(e),
            }
        }
        Some(mode @ ("exit" | "exit-once")) => {
            // `exit-once` fails only in the first incarnation, so a restart succeeds.
            let first = std::env::var("SPERLI_INCARNATION").map_or(true, |v| v == "1");
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
