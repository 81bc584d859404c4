//! The launcher's standard input, forwarded to rank 0 as `mpirun` does
//! (docs/launcher.md, "Standard input"). Every other rank's stdin ends
//! right after its job description.
//!
//! A rank's stdin carries its job description line first (protocol §4.1);
//! the rank reads exactly that line (`Comm::from_stdin`), so what follows
//! on the same stdin is the program's. For rank 0 the launcher writes,
//! after the line, the bytes it reads from its own stdin, then ends the
//! stream when its stdin ends:
//!
//! - a local rank: the bytes as they are, then the pipe is closed;
//! - a rank behind a remote shell or srun: its wrapper's stdin must stay
//!   open for the end-of-stdin watchdog ([`crate::spawn`]), so the bytes
//!   travel as lines the wrapper turns back into bytes ([`frame`]): `d`
//!   and the bytes (ASCII letters and digits as they are, every other
//!   byte as a `\ooo` octal escape of the shell's built-in `printf`), and
//!   the line `e` where the stream ends. Every other wrapped rank gets the
//!   `e` line at once.
//!
//! One reader thread takes the launcher's stdin in pieces of at most
//! [`PIECE`] bytes and hands each to the rank 0 of the current
//! incarnation through a channel of one place, so the launcher reads
//! ahead of rank 0 by at most two pieces. After a restart the new rank 0
//! gets the stream from the first piece no earlier rank 0 took (a piece
//! whose write failed because its rank 0 ended is given again); what an
//! ended rank 0 took but had not read is gone with it.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};

use crossbeam_channel::{select, Receiver};

/// The most bytes of the launcher's stdin read at once.
pub const PIECE: usize = 4096;

/// The line that ends the forwarded stream of a wrapped rank.
pub const END_LINE: &[u8] = b"e\n";

/// The launcher's stdin as it is handed to the successive rank 0s.
struct Feed {
    pieces: Receiver<Vec<u8>>,
    /// A piece an ended rank 0 did not take whole: the next one's first.
    pending: Option<Vec<u8>>,
}

/// The launcher's stdin for rank 0, shared by the incarnations of a job.
/// Clones share the one stream.
#[derive(Clone)]
pub struct StdinFeed(Arc<Mutex<Feed>>);

impl std::fmt::Debug for StdinFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StdinFeed")
    }
}

/// Whether the launcher reads its stdin: not when it is a terminal whose
/// foreground is another process group (a launcher started in the
/// background would be stopped by SIGTTIN at its first read; rank 0 then
/// gets an empty stdin, as with `< /dev/null`).
fn readable_stdin() -> bool {
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return true;
    }
    nix::unistd::tcgetpgrp(stdin.as_fd()).is_ok_and(|fg| fg == nix::unistd::getpgrp())
}

impl StdinFeed {
    /// Starts reading the launcher's stdin: not a terminal whose
    /// foreground is another process group (the launcher would be stopped
    /// at its first read); a closed stdin is an empty stream.
    pub fn from_launcher_stdin() -> Self {
        let source = readable_stdin()
            .then(|| std::io::stdin().as_fd().try_clone_to_owned().ok())
            .flatten()
            .map(std::fs::File::from);
        Self::from_reader(source)
    }

    /// An empty stream: rank 0's stdin ends after its job description
    /// (`sperli demo`, `--exit-on-stdin-eof`, whose stdin is the mailbox
    /// client's).
    pub fn empty() -> Self {
        Self::from_reader(None::<std::fs::File>)
    }

    /// The stream of `source`, read by a thread of its own (unbuffered:
    /// pieces as they come, so an interactive line reaches rank 0 at once).
    pub fn from_reader(source: Option<impl Read + Send + 'static>) -> Self {
        let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(1);
        if let Some(mut source) = source {
            std::thread::spawn(move || {
                let mut buf = vec![0u8; PIECE];
                loop {
                    match source.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            if tx.send(buf[..n].to_vec()).is_err() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        // A read error ends the stream as its end does.
                        Err(_) => break,
                    }
                }
            });
        }
        StdinFeed(Arc::new(Mutex::new(Feed {
            pieces: rx,
            pending: None,
        })))
    }

    /// Writes the stream to `to`, rank 0's stdin (after its job
    /// description), until the stream ends (then, for a wrapped rank,
    /// the end line `e`; a local rank's pipe is closed by the caller), writing
    /// fails (rank 0 ended), or `stop` is ready or dropped (this run of the
    /// job is over). One rank 0 at a time: the next incarnation's waits
    /// here until this one returns.
    pub fn forward(&self, to: &mut impl Write, wrapped: bool, stop: &Receiver<()>) {
        let mut feed = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut piece = feed.pending.take();
        loop {
            let p = match piece.take() {
                Some(p) => p,
                None => select! {
                    recv(feed.pieces) -> p => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    recv(stop) -> _ => return,
                },
            };
            if let Err(rest) = write_piece(to, &p, wrapped) {
                feed.pending = Some(rest);
                return;
            }
        }
        if wrapped {
            let _ = to.write_all(END_LINE).and_then(|()| to.flush());
        }
    }
}

/// Writes one piece; on failure returns what rank 0 did not take (for a
/// wrapped rank the whole piece: its wrapper passes on only whole lines).
fn write_piece(to: &mut impl Write, p: &[u8], wrapped: bool) -> Result<(), Vec<u8>> {
    if wrapped {
        return to
            .write_all(&frame(p))
            .and_then(|()| to.flush())
            .map_err(|_| p.to_vec());
    }
    let mut done = 0;
    while done < p.len() {
        match to.write(&p[done..]) {
            Ok(0) => return Err(p[done..].to_vec()),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(p[done..].to_vec()),
        }
    }
    Ok(())
}

/// The line that carries `bytes` to a wrapped rank: `d`, each ASCII letter
/// or digit as it is and every other byte as a three-digit octal escape
/// (`printf` format text with nothing else in it: no `%`, no `\` but the
/// escapes), and `\n`.
pub fn frame(bytes: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(2 + 4 * bytes.len());
    line.push(b'd');
    for &b in bytes {
        if b.is_ascii_alphanumeric() {
            line.push(b);
        } else {
            line.extend_from_slice(format!("\\{b:03o}").as_bytes());
        }
    }
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn frames_escape_everything_printf_would_read() {
        assert_eq!(frame(b"a1%\\\n\0-"), b"da1\\045\\134\\012\\000\\055\n");
        assert_eq!(frame(b""), b"d\n");
    }

    #[test]
    fn the_shell_printf_turns_frames_back_into_the_bytes() {
        let bytes: Vec<u8> = (0..=255u8).chain(*b"100\n%s%d\\n-x").collect();
        let line = frame(&bytes);
        let text = std::str::from_utf8(&line[1..line.len() - 1]).unwrap();
        for sh in ["sh", "bash"] {
            let out = Command::new(sh)
                .args(["-c", "printf \"$1\"", "x", text])
                .stdin(Stdio::null())
                .output();
            let Ok(out) = out else {
                assert_eq!(sh, "bash", "no sh");
                continue;
            };
            assert_eq!(out.stdout, bytes, "{sh}");
        }
    }

    /// A writer that takes `room` bytes, then fails.
    struct Breaks {
        got: Vec<u8>,
        room: usize,
    }

    impl Write for Breaks {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.room);
            self.got.extend_from_slice(&buf[..n]);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_next_rank_0_gets_the_rest_of_the_stream() {
        let feed = StdinFeed::from_reader(Some(&b"first line\nsecond line\n"[..]));
        let (_keep, stop) = crossbeam_channel::bounded::<()>(0);
        // Rank 0 of the first run takes 6 bytes, then ends.
        let mut first = Breaks {
            got: Vec::new(),
            room: 6,
        };
        feed.forward(&mut first, false, &stop);
        assert_eq!(first.got, b"first ");
        let mut second = Vec::new();
        feed.forward(&mut second, false, &stop);
        assert_eq!(second, b"line\nsecond line\n");
        // The stream has ended: a third rank 0 gets nothing, framed or not.
        let mut third = Vec::new();
        feed.forward(&mut third, true, &stop);
        assert_eq!(third, END_LINE);
    }

    #[test]
    fn a_wrapped_rank_gets_frames_and_the_end_line() {
        let feed = StdinFeed::from_reader(Some(&b"7\n"[..]));
        let (_keep, stop) = crossbeam_channel::bounded::<()>(0);
        let mut out = Vec::new();
        feed.forward(&mut out, true, &stop);
        assert_eq!(out, b"d7\\012\ne\n");
        let mut none = Vec::new();
        StdinFeed::empty().forward(&mut none, true, &stop);
        assert_eq!(none, END_LINE);
    }

    #[test]
    fn the_end_of_a_run_stops_the_forwarding() {
        // A stream that never ends (a pipe whose writer stays open).
        let (reader, _writer) = std::os::unix::net::UnixStream::pair().unwrap();
        let feed = StdinFeed::from_reader(Some(reader));
        let (keep, stop) = crossbeam_channel::bounded::<()>(0);
        drop(keep);
        let mut out = Vec::new();
        feed.forward(&mut out, true, &stop);
        assert!(out.is_empty());
    }
}
