//! Rank output: every line a rank writes goes to the launcher's stdout or
//! stderr whole, with a `[rank] ` prefix (`--raw-output` drops it), under
//! one lock so lines of different ranks never tear; with `--output-dir
//! DIR` also, without the prefix, to `DIR/rank-<r>/stdout` and
//! `DIR/rank-<r>/stderr` (as `mpirun --output-filename` and `torchrun
//! --log-dir` keep them). The wrapper's control lines
//! ([`crate::spawn::Control`]) are taken out and reported instead.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;

use crate::spawn::Control;

/// A line longer than this is written in pieces of this size.
pub const MAX_LINE: u64 = 64 << 10;

/// Which stream of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Its stdout.
    Stdout,
    /// Its stderr.
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// What a pump reports to the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PumpEvent {
    /// A control line of the wrapper.
    Control(Control),
    /// The stream ended (every writer closed it).
    Closed(Stream),
}

/// The lock every rank's output lines are written under.
pub type Sink = Arc<Mutex<()>>;

/// Opens `DIR/rank-<rank>/<stream>` for writing: truncated in a job's first
/// incarnation, appended to in later ones.
pub fn open_output_file(
    dir: &Path,
    rank: u32,
    stream: Stream,
    append: bool,
) -> std::io::Result<File> {
    let d = dir.join(format!("rank-{rank}"));
    std::fs::create_dir_all(&d)?;
    let mut o = OpenOptions::new();
    o.create(true);
    if append {
        o.append(true);
    } else {
        o.write(true).truncate(true);
    }
    o.open(d.join(stream.name()))
}

/// Where a pump writes.
pub struct PumpTarget {
    /// The stream it reads.
    pub stream: Stream,
    /// `[rank] ` or nothing.
    pub prefix: Option<String>,
    /// The output file, if any.
    pub file: Option<File>,
    /// Whether control lines are taken out (wrapped ranks' stderr).
    pub controls: bool,
}

/// Copies `src` line by line to the terminal (and the file), reporting
/// control lines and the end of the stream through `report`.
pub fn pump(
    src: impl Read + Send + 'static,
    mut target: PumpTarget,
    lock: Sink,
    report: impl Fn(PumpEvent) + Send + 'static,
) {
    thread::spawn(move || {
        let mut reader = BufReader::new(src);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if target.controls {
                let text = String::from_utf8_lossy(&line);
                if let Some(c) = Control::parse(text.trim_end_matches('\n')) {
                    report(PumpEvent::Control(c));
                    continue;
                }
            }
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            if let Some(f) = &mut target.file {
                let _ = f.write_all(&line);
            }
            let mut out = Vec::with_capacity(line.len() + 8);
            if let Some(p) = &target.prefix {
                out.extend_from_slice(p.as_bytes());
            }
            out.extend_from_slice(&line);
            let _guard = lock.lock();
            let _ = match target.stream {
                Stream::Stderr => std::io::stderr().lock().write_all(&out),
                Stream::Stdout => std::io::stdout().lock().write_all(&out),
            };
        }
        report(PumpEvent::Closed(target.stream));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lines_go_to_the_file_and_controls_are_reported() {
        let dir = std::env::temp_dir().join(format!("sperli-output-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = open_output_file(&dir, 3, Stream::Stderr, false).unwrap();
        let text = b"one\n\x1esperli:started\ntwo without newline".to_vec();
        let (tx, rx) = crossbeam_channel::unbounded();
        pump(
            std::io::Cursor::new(text),
            PumpTarget {
                stream: Stream::Stderr,
                prefix: Some("[3] ".into()),
                file: Some(file),
                controls: true,
            },
            Arc::new(Mutex::new(())),
            move |e| {
                let _ = tx.send(e);
            },
        );
        let a = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let b = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(a, PumpEvent::Control(Control::Started));
        assert_eq!(b, PumpEvent::Closed(Stream::Stderr));
        let got = std::fs::read_to_string(dir.join("rank-3/stderr")).unwrap();
        assert_eq!(got, "one\ntwo without newline\n");
        // A later incarnation appends.
        let mut f = open_output_file(&dir, 3, Stream::Stderr, true).unwrap();
        f.write_all(b"three\n").unwrap();
        let got = std::fs::read_to_string(dir.join("rank-3/stderr")).unwrap();
        assert_eq!(got, "one\ntwo without newline\nthree\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
