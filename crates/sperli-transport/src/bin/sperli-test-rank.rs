//! `sperli-test-rank`: a rank program for the transport's multi-process
//! tests (`tests/transport/procs.rs`), not for users. It reads its job
//! description from stdin as a launcher writes it, starts its endpoint,
//! says `up` on stdout once every peer is up, and then runs one mode:
//!
//! ```text
//! sperli-test-rank [--errors fatal|return] [--silence-ms N] [--error-file PATH] MODE
//!     sleep MS   sleep MS ms in user code, then receive (any source, tag 2)
//!     recv       receive (any source, tag 2) at once
//!     panic      panic (the endpoint is dropped while the thread unwinds)
//! ```
//!
//! The outcome of that receive goes to stdout as `next-call: ok` or
//! `next-call-error: <error>` (exit status 3); a fatal error ends the
//! process inside the library with its own status.

use std::io::{BufRead, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use sperli_transport::{Endpoint, ErrorMode, Settings};
use sperli_wire::job_description::JobDescription;
use sperli_wire::refused_hosts::RefusedHosts;

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut settings = Settings::default();
    let mut mode = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--errors" => {
                settings.errors = match args.next().as_deref() {
                    Some("return") => ErrorMode::Return,
                    _ => ErrorMode::Fatal,
                }
            }
            "--silence-ms" => {
                let ms = args.next().and_then(|v| v.parse().ok()).unwrap_or(5000);
                settings.silence = Duration::from_millis(ms);
            }
            "--error-file" => settings.error_file = args.next().map(Into::into),
            _ => mode.push(a),
        }
    }
    let mut line = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(8 << 20)
        .read_until(b'\n', &mut line);
    if read.is_err() {
        eprintln!("cannot read the job description");
        return ExitCode::from(2);
    }
    let desc = match JobDescription::from_line(&line, &RefusedHosts::builtin()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("job description: {e}");
            return ExitCode::from(2);
        }
    };
    let ep = match Endpoint::start(&desc, settings) {
        Ok(ep) => ep,
        Err(e) => {
            eprintln!("start: {e}");
            return ExitCode::from(2);
        }
    };
    // Up only once every peer is: one message to and from each.
    let me = ep.rank();
    for r in (0..ep.size()).filter(|&r| r != me) {
        if let Err(e) = ep.send(r, 1, b"up") {
            eprintln!("up: {e}");
            return ExitCode::from(2);
        }
    }
    for r in (0..ep.size()).filter(|&r| r != me) {
        if let Err(e) = ep.recv(r, 1) {
            eprintln!("up: {e}");
            return ExitCode::from(2);
        }
    }
    say("up");
    match mode.first().map(String::as_str) {
        Some("sleep") => {
            let ms = mode.get(1).and_then(|v| v.parse().ok()).unwrap_or(1000);
            std::thread::sleep(Duration::from_millis(ms));
        }
        Some("recv") => {}
        Some("panic") => panic!("deliberate panic in rank {me}"),
        other => {
            eprintln!("unknown mode {other:?}");
            return ExitCode::from(2);
        }
    }
    match ep.recv_match(None, Some(2)) {
        Ok(_) => {
            say("next-call: ok");
            let _ = ep.finish();
            ExitCode::SUCCESS
        }
        Err(e) => {
            say(&format!("next-call-error: {e}"));
            ExitCode::from(3)
        }
    }
}
