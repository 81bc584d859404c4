//! Project tasks, run as `cargo xtask <task>`:
//!
//! - `test`: the whole test suite (the README's test command);
//! - `vectors`: write `docs/sperli-vectors.txt` from the sperli-wire codecs;
//! - `vectors --check`: fail if the file differs from what the code
//!   generates or if any entry does not decode to what it states;
//! - `bench [--quick] [--write-docs] [--runs N] [--python] [--simnet]`:
//!   SPERLI next to its limits and OpenMPI; writes `docs/performance.md`
//!   and `docs/img/` (`--python` or `--simnet`: only the Python rows or
//!   the simulated cluster's, written under `target/`).

mod bench;
mod test;
mod vectors;

use std::path::PathBuf;

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("vectors") => vectors::run(&args[1..]),
        Some("test") => test::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask test | vectors [--check] | bench [--quick] [--write-docs] [--runs N] [--python] [--simnet]");
            2
        }
    };
    std::process::exit(code);
}
