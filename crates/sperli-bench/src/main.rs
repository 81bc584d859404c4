//! `sperli-bench`: the programs `cargo xtask bench` runs (docs/performance.md).
//!
//! ```text
//! sperli-bench limits [--quick]          the machine's limits, in this process
//! sperli-bench rank MODE [--quick]       a SPERLI rank (started by `sperli run`)
//!     MODE: pingpong | coll | startup | rss | ckpt | resume | pipe | overlap | p2p
//!         | shrink (`--recover shrink` or `restart`: a rank lost, the job goes on)
//! sperli-bench rank inplace BYTES       `--recover inplace` or `restart`, with BYTES of
//!     checkpointed state per rank: a rank lost and replaced
//! sperli-bench rank rtt [ROUNDS [BYTES]] ROUNDS round trips of BYTES (default
//!     10000 of 8) between ranks 0 and 1, with the context switches of both
//!     rank processes over the loop (for `perf stat -e context-switches`)
//! sperli-bench ckpt-threads [--quick] [MIB...]
//!                                        the ckpt measurement, 4 ranks as threads
//! ```
//!
//! The `ckpt` mode needs `sperli run --checkpoint-dir DIR` (on a real disk,
//! not tmpfs: it measures fsync); `resume` is a later run of that job
//! (`--job-key FILE` and the same DIR).
//!
//! Every figure is printed as one line `RESULT <name> <size in bytes> <value>`
//! (times in µs, or ms when the name ends in `_ms`; bandwidths in GB/s =
//! 10^9 B/s; memory in KiB; counts as they are); a rank
//! program prints its figures from rank 0 only. Other lines are comments.
//! Each invocation is ONE run: the xtask starts several and takes the median.

mod ckpt;
mod cpu_time;
mod latency;
mod limits;
mod overlap;
mod p2p;
mod pipelined;
mod rank;
mod recovery;

/// Prints one figure in the format the xtask parses.
pub fn result(name: &str, size: usize, value: f64) {
    println!("RESULT {name} {size} {value:.6}");
}

/// Iteration counts: the full figure or the `--quick` one.
pub fn iters(quick: bool, full: usize, short: usize) -> usize {
    if quick {
        short
    } else {
        full
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: sperli-bench limits [--quick] | rank pingpong|coll|startup|rss|ckpt|resume|pipe|overlap|p2p|shrink [--quick] | rank inplace BYTES | rank rtt [ROUNDS [BYTES]] | ckpt-threads [--quick] [MIB...]"
    );
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let words: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--quick")
        .collect();
    let r = match words.as_slice() {
        ["limits"] => {
            limits::run(quick);
            Ok(())
        }
        ["rank", "rtt", rest @ ..] => latency::rtt(rest),
        ["rank", "inplace", bytes] => match bytes.parse() {
            Ok(b) => recovery::run_inplace(b),
            Err(_) => usage(),
        },
        ["rank", mode] => rank::run(mode, quick),
        ["ckpt-threads", mib @ ..] => {
            let mib: Option<Vec<usize>> = mib.iter().map(|m| m.parse().ok()).collect();
            match mib {
                Some(mib) => ckpt::threads(quick, &mib),
                None => usage(),
            }
        }
        _ => usage(),
    };
    if let Err(e) = r {
        eprintln!("sperli-bench: {e}");
        std::process::exit(1);
    }
}
