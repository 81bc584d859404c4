//! `combine_into` throughput against `memcpy`, measured in the same run.
//!
//! Run: `cargo bench -p sperli-wire --bench combine`. Prints a markdown
//! table for `docs/performance.md`.
//!
//! Accounting: every row counts the bytes of ONE operand per second. For
//! memcpy that is the bytes copied (`dst.copy_from_slice(&src)`); for
//! `combine_into(acc, right)` it is `acc.len()` (= `right.len()`), although
//! the loop reads both operands and writes `acc`. A run repeats the operation
//! until 16 MiB have been processed (1 call at 16 MiB, 256 calls at 64 KiB);
//! after warm-up runs, RUNS runs are timed and their median, min and max
//! are reported. The ratio is median / median of memcpy at the same size.

use std::hint::black_box;
use std::time::{Duration, Instant};

use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::reduce::combine_into;

const RUNS: usize = 15;
const WARMUP: usize = 3;
const PER_RUN: usize = 16 << 20;

/// GB/s (10^9 bytes) of `bytes` processed in `d`.
fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

/// Times `op` (which processes `size` bytes per call) over RUNS runs of
/// PER_RUN bytes each; GB/s statistics.
fn measure(size: usize, mut op: impl FnMut()) -> Stats {
    let calls = (PER_RUN / size).max(1);
    let mut run = || {
        let t0 = Instant::now();
        for _ in 0..calls {
            op();
        }
        t0.elapsed()
    };
    for _ in 0..WARMUP {
        run();
    }
    let mut rates: Vec<f64> = (0..RUNS).map(|_| gbps(size * calls, run())).collect();
    rates.sort_by(f64::total_cmp);
    Stats {
        median: rates[RUNS / 2],
        min: rates[0],
        max: rates[RUNS - 1],
    }
}

/// Deterministic operand bytes of element type `t`: normal finite values for
/// floats (no subnormals, no NaN), mixed values for integers.
fn operand(size: usize, t: ElementType, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut next = move || {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let w = t.width();
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        let v = next();
        match t {
            ElementType::F64 => {
                out.extend_from_slice(&((v % 1_000_000) as f64 / 7.0 - 50_000.0).to_le_bytes())
            }
            ElementType::F32 => {
                out.extend_from_slice(&((v % 1_000_000) as f32 / 7.0 - 50_000.0).to_le_bytes())
            }
            _ => out.extend_from_slice(&v.to_le_bytes()[..w]),
        }
    }
    out
}

fn main() {
    let cases = [
        (ElementType::F64, Reduction::Sum),
        (ElementType::I32, Reduction::Sum),
        (ElementType::F64, Reduction::Min),
        (ElementType::U64, Reduction::Bxor),
    ];
    let mut rows = Vec::new();
    for size in [16 << 20, 64 << 10] {
        let src = operand(size, ElementType::U8, 1);
        let mut dst = vec![0u8; size];
        let base = measure(size, || {
            black_box(&mut dst).copy_from_slice(black_box(&src));
        });
        black_box(&dst);
        rows.push((
            size,
            "memcpy (`copy_from_slice`)".to_string(),
            base.median,
            base,
        ));
        let base_median = rows.last().map(|r| r.2).unwrap_or(1.0);
        for (t, r) in cases {
            let mut acc = operand(size, t, 2);
            let right = operand(size, t, 3);
            let s = measure(size, || {
                combine_into(black_box(&mut acc), black_box(&right), t, r).unwrap();
            });
            black_box(&acc);
            rows.push((size, format!("combine_into {t} {r}"), base_median, s));
        }
    }
    println!("| size | operation | median GB/s | min GB/s | max GB/s | ratio to memcpy (median) |");
    println!("|---|---|---|---|---|---|");
    for (size, name, base, s) in rows {
        let size = if size >= 1 << 20 {
            format!("{} MiB", size >> 20)
        } else {
            format!("{} KiB", size >> 10)
        };
        println!(
            "| {size} | {name} | {:.2} | {:.2} | {:.2} | {:.2} |",
            s.median,
            s.min,
            s.max,
            s.median / base
        );
    }
}
