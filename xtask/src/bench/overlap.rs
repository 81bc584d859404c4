//! The iallreduce overlap row of `cargo xtask bench` (protocol §8.9):
//! `sperli-bench rank overlap` at 4 ranks. Each step is a 16 MiB f64
//! allreduce and 20 ms of computation: blocking (`allreduce`, then
//! the computation) against non-blocking (`iallreduce`, the computation
//! while it runs on the communicator's progress thread, then `wait`). The
//! ratio blocking / non-blocking says what the overlap won (above 1: the
//! non-blocking step is shorter).

use std::fmt::Write;

use super::{group, record, run_retrying, sperli_argv, spread_hosts, Options, Programs, Samples};

/// Ranks of the overlap job.
const RANKS: u32 = 4;
/// Bytes per rank (as `crates/sperli-bench/src/overlap.rs`).
const BYTES: u64 = 16 << 20;

/// Runs the overlap job and files its figures in group `sperli.overlap.4`.
pub(super) fn jobs(p: &Programs, opts: &Options, samples: &mut Samples) -> Result<(), String> {
    let mut a = vec!["rank", "overlap"];
    if opts.quick {
        a.push("--quick");
    }
    let argv = sperli_argv(p, RANKS, Some(spread_hosts(RANKS)), &[], &a);
    let label = format!("sperli overlap n={RANKS}");
    let o = run_retrying(&label, &argv, &[], samples)?;
    println!("    {label}: {:.1} s", o.secs);
    for k in [
        "overlap_compute_ms",
        "overlap_blocking_ms",
        "overlap_nonblocking_ms",
    ] {
        if !o.results.iter().any(|r| r.0 == k) {
            return Err(format!("{label}: figure {k} missing"));
        }
    }
    record(samples, &group("sperli", "overlap", RANKS), &o);
    Ok(())
}

/// The report section.
pub(super) fn section(o: &mut String, s: &Samples) {
    let g = group("sperli", "overlap", RANKS);
    let blocking = s.get(&g, "overlap_blocking_ms", BYTES);
    let overlapped = s.get(&g, "overlap_nonblocking_ms", BYTES);
    let compute = s.get(&g, "overlap_compute_ms", 0);
    let _ = writeln!(o, "## Non-blocking allreduce overlapped with computation\n");
    let _ = writeln!(
        o,
        "`sperli-bench rank overlap` at {RANKS} ranks (127.0.0.1-{RANKS}): one step is an \
         allreduce of 16 MiB per rank (f64, sum) and 20 ms of computation. Blocking: \
         `allreduce`, then the computation. Non-blocking: `iallreduce`, the \
         computation while the call runs on the communicator's progress thread, then \
         `wait`. Times are the slowest rank's mean per step; the table shows the median \
         (min..max) of the runs. The ratio is blocking / non-blocking: what the overlap won.\n"
    );
    let _ = writeln!(o, "| figure | median (min..max) |");
    let _ = writeln!(o, "|---|---|");
    let cell = super::report::cell;
    let _ = writeln!(o, "| computation alone (ms) | {} |", cell(compute));
    let _ = writeln!(
        o,
        "| allreduce + computation, blocking (ms) | {} |",
        cell(blocking)
    );
    let _ = writeln!(
        o,
        "| iallreduce overlapped with computation (ms) | {} |",
        cell(overlapped)
    );
    let ratio = blocking.zip(overlapped).map(|(b, n)| b.median / n.median);
    let _ = writeln!(
        o,
        "| overlap won: blocking / non-blocking | {} |\n",
        ratio.map_or("n/a".into(), |r| format!("{r:.2}"))
    );
    let _ = writeln!(
        o,
        "How to read it: the computation is 20 ms of wall time on every rank, so \
         the overlap can only win the time the blocking allreduce leaves a core idle. \
         Here {RANKS} ranks share the machine's 2 cores and the allreduce is work for \
         them (AES-GCM on both ends of every link, the fold, the copies: see \"Where the \
         time goes\" above), so both phases keep both cores busy and a ratio near 1 is \
         what this machine allows. With a core per rank (one rank per host, as on a \
         cluster) the progress thread and the transport's I/O thread have a core the \
         computation does not use, and the ratio is what the overlap won.\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_shows_the_ratio() {
        let mut s = Samples::default();
        let g = group("sperli", "overlap", RANKS);
        s.add(&g, "overlap_blocking_ms", BYTES, 60.0);
        s.add(&g, "overlap_nonblocking_ms", BYTES, 40.0);
        s.add(&g, "overlap_compute_ms", 0, 20.0);
        let mut o = String::new();
        section(&mut o, &s);
        assert!(
            o.contains("| overlap won: blocking / non-blocking | 1.50 |"),
            "{o}"
        );
    }
}
