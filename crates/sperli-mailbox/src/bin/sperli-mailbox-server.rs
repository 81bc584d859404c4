//! The example rank program of a mailbox job (docs/mailbox.md §9):
//!
//! ```text
//! sperli run -n 4 --mailbox NAME -- sperli-mailbox-server [--label TEXT]
//! sperli run -n 4 -- sperli-mailbox-server --oneshot     (one task per job)
//! ```
//!
//! Its handlers and their request and reply formats: [`HELP`]
//! (`sperli-mailbox-server --help` prints it; docs/mailbox.md §9).
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use sha2::{Digest, Sha256};
use sperli_collective::Comm;
use sperli_collective::Reduction;
use sperli_mailbox::{MailboxServer, Task, TaskError};

/// The usage and the handlers' formats (`--help`).
const HELP: &str = "\
usage: sperli-mailbox-server [--label TEXT] [--oneshot]   (started by `sperli run`)
  sperli run -n 4 --mailbox NAME -- sperli-mailbox-server [--label TEXT]
  sperli run -n 4 -- sperli-mailbox-server --oneshot       (one task per job)
  --label TEXT  ignored (tests find the job's processes by it)
  --oneshot     join, one allreduce sum of 1..=1000, BYE (no mailbox)

Handlers (integers little-endian; a reply is that of each rank that runs it;
a bad payload is a ValueError on that rank, the job goes on):
  TASK sum     GROUP (RANK: a TargetError). payload: n x u64 (n >= 0).
               reply: u64, the wrapping sum of all n, the same on every rank
               (each rank adds its block, then an allreduce).
  TASK poly    any target, meant for PER_RANK. payload: exactly one u64 x.
               reply: u64, x*x + 3x + rank (wrapping), rank = the rank that ran it.
  TASK echo    any target. payload: any bytes. reply: the same bytes.
  TASK digest  any target. payload: any bytes. reply: 40 bytes, the payload's
               length (u64), then its SHA-256 (32 bytes).
  TASK fail    any target. payload: ranks, u32 each (a tail of 1-3 bytes is
               ignored). reply: `ok` (2 bytes); a listed rank fails instead
               with ValueError `rank R was told to fail`.
  TASK sleep   any target. payload: exactly one u64, milliseconds.
               reply: 0 bytes, after sleeping that long.
  TASK pid     any target. payload: ignored. reply: u32, the rank's process id.
  TASK big     any target. payload: exactly one u64 n <= 67108864.
               reply: n zero bytes (replies beyond the region: reply-too-large).
  TASK panic   any target. payload: ignored. the handler panics: error type
               `panic`, message `the panic handler panicked`.
  CONTROL hello  any target. payload: ignored. reply: `rank R of N` (UTF-8).
Handler ids are the FNV-1a of the names (docs/mailbox.md section 4.3).
";

fn u64s(p: &[u8]) -> Result<Vec<u64>, TaskError> {
    if p.len() % 8 != 0 {
        return Err(TaskError::new(
            "ValueError",
            format!("{} bytes are not a whole number of u64", p.len()),
        ));
    }
    Ok(p.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

fn one_u64(p: &[u8]) -> Result<u64, TaskError> {
    match u64s(p)?.as_slice() {
        [x] => Ok(*x),
        v => Err(TaskError::new(
            "ValueError",
            format!("expected one u64, got {}", v.len()),
        )),
    }
}

/// `sum`: rank r adds block r of the vector; an allreduce adds the blocks.
fn sum(t: &mut Task<'_>) -> Result<Vec<u8>, TaskError> {
    let v = u64s(t.payload);
    let (rank, size) = (t.rank as usize, t.size as usize);
    let Some(comm) = t.comm() else {
        return Err(TaskError::new("TargetError", "sum runs on the GROUP"));
    };
    // Every rank makes the allreduce, also with a bad payload (then 0).
    let part = match &v {
        Ok(v) => {
            let block = v.len().div_ceil(size);
            v.iter()
                .skip(rank * block)
                .take(block)
                .fold(0u64, |a, &x| a.wrapping_add(x))
        }
        Err(_) => 0,
    };
    let total = comm
        .allreduce_scalar(part, Reduction::Sum)
        .map_err(|e| TaskError::new("CollectiveError", e.to_string()))?;
    v?;
    Ok(total.to_le_bytes().to_vec())
}

/// `poly`: x² + 3x + rank on this rank's own x.
fn poly(t: &mut Task<'_>) -> Result<Vec<u8>, TaskError> {
    let x = one_u64(t.payload)?;
    let y = x
        .wrapping_mul(x)
        .wrapping_add(x.wrapping_mul(3))
        .wrapping_add(u64::from(t.rank));
    Ok(y.to_le_bytes().to_vec())
}

fn server() -> MailboxServer {
    MailboxServer::new()
        .task("sum", sum)
        .task("poly", poly)
        .task("echo", |t| Ok(t.payload.to_vec()))
        .task("digest", |t| {
            let mut out = (t.payload.len() as u64).to_le_bytes().to_vec();
            out.extend_from_slice(&Sha256::digest(t.payload));
            Ok(out)
        })
        .task("fail", |t| {
            let me = t.rank;
            let listed = t
                .payload
                .chunks_exact(4)
                .any(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")) == me);
            if listed {
                Err(TaskError::new(
                    "ValueError",
                    format!("rank {me} was told to fail"),
                ))
            } else {
                Ok(b"ok".to_vec())
            }
        })
        .task("sleep", |t| {
            std::thread::sleep(Duration::from_millis(one_u64(t.payload)?));
            Ok(Vec::new())
        })
        .task("pid", |_| Ok(std::process::id().to_le_bytes().to_vec()))
        .task("big", |t| {
            let n = one_u64(t.payload)?;
            if n > 64 << 20 {
                return Err(TaskError::new("ValueError", "at most 64 MiB"));
            }
            Ok(vec![0u8; n as usize])
        })
        .task("panic", |_| panic!("the panic handler panicked"))
        .control("hello", |t| {
            Ok(format!("rank {} of {}", t.rank, t.size).into_bytes())
        })
}

/// One task per job (the alternative to a warm job): join, one `sum` of
/// 1..=1000 by allreduce, BYE.
fn oneshot(comm: Comm<sperli_collective::Endpoint>) -> Result<(), String> {
    let (rank, size) = (u64::from(comm.rank()), u64::from(comm.size()));
    let part: u64 = (1..=1000u64).filter(|x| x % size == rank).sum();
    let total = comm
        .allreduce_scalar(part, Reduction::Sum)
        .map_err(|e| e.to_string())?;
    if total != 500_500 {
        return Err(format!("sum {total}, expected 500500"));
    }
    comm.into_link().finish().map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut oneshot_mode = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--oneshot" => oneshot_mode = true,
            "--label" if it.next().is_some() => {}
            "--help" | "-h" => {
                print!("{HELP}");
                return ExitCode::SUCCESS;
            }
            _ => {
                eprint!("{HELP}");
                return ExitCode::from(2);
            }
        }
    }
    let comm = match Comm::from_stdin() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sperli-mailbox-server: cannot join the job: {e}");
            return ExitCode::from(1);
        }
    };
    let r = if oneshot_mode {
        oneshot(comm)
    } else {
        server().serve(comm).map_err(|e| e.to_string())
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sperli-mailbox-server: {e}");
            ExitCode::from(1)
        }
    }
}
