//! One peer's socket: the TCP stream, its rustls session and the
//! [`Connection`] state, behind one lock, with the routines every thread
//! that touches a socket uses: read a batch (rustls reads the socket,
//! decrypts, the plaintext goes straight to the frame reader), flush, send
//! a frame now, write a frame straight from a caller's buffer.
//!
//! Whoever holds the lock may read or write: the I/O thread, or a caller
//! that drives the socket while it waits (`io::driver`). No routine here
//! blocks (sockets are non-blocking), none holds the lock for more than
//! [`BATCH`] bytes of reading, and none wakes another thread: the caller
//! wakes waiters once the lock is released.

use std::io::{self, BufRead};
use std::net::Shutdown;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use mio::net::TcpStream;
use mio::Token;
use sperli_tls::config::tls_failure;
use sperli_wire::error::{LossCause, TlsFailure};
use sperli_wire::header::FrameHeader;
use sperli_wire::Error;

use crate::proto::connection::{ConnState, Connection, Deliver, Fed, Outgoing};

/// The most bytes one read batch takes under the lock; a socket with more
/// is read again after the lock was released once.
pub const BATCH: usize = 256 * 1024;

/// How much ciphertext rustls may hold before its writer takes no more:
/// big enough for few, large socket writes, small enough to stay in cache.
/// It also bounds how far a sender runs ahead of the socket.
pub const TLS_BUFFER: usize = 256 * 1024;

/// A socket and its state (see the module docs).
pub(crate) struct Link {
    /// The token of this socket in the I/O thread's poller.
    pub token: Token,
    /// The socket's descriptor (registered with the pollers by it).
    pub fd: RawFd,
    io: Mutex<LinkIo>,
    /// The I/O thread has the socket in its poller (reads it, writes its
    /// backlog); else the callers drive it.
    pub io_owns: AtomicBool,
    /// Bytes wait for the socket (queued frames or ciphertext).
    pub backlog: AtomicBool,
    /// Callers waiting to write a frame of theirs into this socket: a
    /// writable socket concerns them.
    pub writers: AtomicUsize,
    /// A read stopped with bytes left (the read budget, or a pause after
    /// a RECOVER frame) while the callers took the socket: no new socket
    /// event will say so, so the callers' leader reads it on its next turn.
    pub unread: AtomicBool,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// What the lock of a [`Link`] protects.
pub(crate) struct LinkIo {
    pub tcp: TcpStream,
    pub tls: rustls::Connection,
    pub conn: Option<Connection>,
    /// Final phase: no more frames queued; close_notify after the queue.
    pub closing: bool,
    close_notify_sent: bool,
    write_shut: bool,
    /// EOF or error seen: the socket can go.
    pub dead: bool,
    /// Sequence numbers of frames handed to rustls whole by
    /// [`LinkIo::send_whole`]: their senders wait until rustls has put
    /// every record on the socket.
    pub drain_seqs: Vec<u64>,
    /// A DATA frame streaming into a large receive (`io::deliver`).
    pub stream: Option<crate::io::deliver::Streaming>,
}

/// How a read batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadStatus {
    /// The socket would block: everything is read.
    Drained,
    /// The batch's byte limit was reached; more may wait.
    More,
    /// The feed paused at a frame boundary (a large receive's frame
    /// ended): the rest waits in rustls until the socket is read again.
    Paused,
    /// The TLS handshake just completed and no [`Connection`] exists yet:
    /// the I/O thread checks the peer and makes one, then reads on.
    HandshakeDone,
    /// The peer closed (TCP EOF, or close_notify).
    Closed,
}

/// Why a read or write failed.
#[derive(Debug)]
pub(crate) enum SockFail {
    /// The socket failed (reset, another OS error).
    Socket(LossCause),
    /// TLS failed (a bad record, an alert).
    Tls(TlsFailure),
    /// The connection rejected what came (a frame, the HELLO, an ABORT).
    Frame(Error),
}

/// The loss cause of a socket error.
pub(crate) fn loss_cause(e: &io::Error) -> LossCause {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => LossCause::Reset,
        kind => LossCause::Socket { kind },
    }
}

/// Why a send was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The job step failed or is ending.
    Ended,
    /// The peer's connection is over (it said BYE or closed).
    PeerLeft,
}

impl Link {
    pub fn new(token: Token, tcp: TcpStream, tls: rustls::Connection) -> Self {
        Self {
            token,
            fd: tcp.as_raw_fd(),
            io: Mutex::new(LinkIo {
                tcp,
                tls,
                conn: None,
                closing: false,
                close_notify_sent: false,
                write_shut: false,
                dead: false,
                drain_seqs: Vec::new(),
                stream: None,
            }),
            io_owns: AtomicBool::new(true),
            backlog: AtomicBool::new(false),
            writers: AtomicUsize::new(0),
            unread: AtomicBool::new(false),
        }
    }

    /// The lock (a poisoned lock is taken over: its state is consistent at
    /// every point a panic could leave it).
    pub fn lock(&self) -> MutexGuard<'_, LinkIo> {
        self.io.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes whether bytes still wait for the socket after `l` was written.
    pub fn note_backlog(&self, l: &LinkIo) -> bool {
        let b = l.backlog();
        self.backlog.store(b, Ordering::SeqCst);
        b
    }
}

impl LinkIo {
    /// Closes the connection at once, without BYE: what is queued is
    /// dropped (a failed peer's, protocol §18.6).
    pub fn close_now(&mut self) {
        self.closing = true;
        self.dead = true;
        if let Some(c) = self.conn.as_mut() {
            c.discard_queued();
            c.close();
        }
    }

    /// Reads at most `limit` bytes from the socket (and what rustls holds
    /// already), feeding the plaintext to the connection, which delivers
    /// to `out`. `drain_only`: the bytes are read and dropped (after a
    /// failure).
    pub fn read(
        &mut self,
        limit: usize,
        now: Instant,
        now_ms: u64,
        out: &mut dyn Deliver,
        drain_only: bool,
    ) -> Result<ReadStatus, SockFail> {
        let mut read = 0usize;
        loop {
            // Plaintext rustls holds, fed to the frame reader straight
            // from rustls's buffer (no copy in between).
            if self.conn.is_some() || drain_only {
                if let Some(st) = self.feed_plaintext(now, now_ms, out, drain_only)? {
                    return Ok(st);
                }
            }
            if read >= limit {
                return Ok(ReadStatus::More);
            }
            let n = match self.tls.read_tls(&mut self.tcp) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(ReadStatus::Drained),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(SockFail::Socket(loss_cause(&e))),
            };
            read += n;
            if n > 0 {
                if let Some(c) = self.conn.as_mut() {
                    c.touch(now);
                }
            }
            let handshaking = self.tls.is_handshaking();
            if let Err(e) = self.tls.process_new_packets() {
                // Send the alert, then drop.
                let _ = self.tls.write_tls(&mut self.tcp);
                return Err(SockFail::Tls(tls_failure(&e)));
            }
            if handshaking && !self.tls.is_handshaking() && self.conn.is_none() && !drain_only {
                return Ok(ReadStatus::HandshakeDone);
            }
            if n == 0 {
                // TCP EOF (after the plaintext above is fed), or rustls
                // takes nothing after close_notify.
                if self.conn.is_some() {
                    if let Some(st) = self.feed_plaintext(now, now_ms, out, drain_only)? {
                        return Ok(st);
                    }
                }
                return Ok(ReadStatus::Closed);
            }
        }
    }

    /// Feeds what rustls decrypted to the connection. `Some(Closed)` on a
    /// clean close (close_notify, or EOF without it).
    fn feed_plaintext(
        &mut self,
        now: Instant,
        now_ms: u64,
        out: &mut dyn Deliver,
        drain_only: bool,
    ) -> Result<Option<ReadStatus>, SockFail> {
        let LinkIo { tls, conn, .. } = self;
        loop {
            let mut reader = tls.reader();
            match reader.fill_buf() {
                Ok([]) => return Ok(Some(ReadStatus::Closed)),
                Ok(chunk) => {
                    let k = chunk.len();
                    let mut fed = Fed {
                        taken: k,
                        stopped: false,
                    };
                    if !drain_only {
                        if let Some(c) = conn.as_mut() {
                            match c.handle_bytes_pausing(chunk, now, now_ms, out) {
                                Ok(f) => fed = f,
                                Err(e) => {
                                    // The connection ended here (a rejected
                                    // frame, an ABORT): its bytes are
                                    // taken, so no later read feeds them
                                    // again and reports the closed
                                    // connection instead of this error.
                                    reader.consume(k);
                                    return Err(SockFail::Frame(e));
                                }
                            }
                        }
                    }
                    reader.consume(fed.taken);
                    // A stop at the chunk's very end is a stop too: the
                    // next chunk (the next TLS record) must wait as well.
                    if fed.stopped || fed.taken < k {
                        return Ok(Some(ReadStatus::Paused));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                // The peer closed TCP without close_notify.
                Err(_) => return Ok(Some(ReadStatus::Closed)),
            }
        }
    }

    /// Writes queued frames into TLS and TLS records to the socket until
    /// nothing is left or the socket would block (the poller then reports
    /// it writable). `done(seq)` for each whole frame written.
    pub fn flush(&mut self, done: &mut dyn FnMut(u64)) -> io::Result<()> {
        if self.dead {
            return Ok(());
        }
        loop {
            if let Some(c) = self.conn.as_mut() {
                if !self.tls.is_handshaking() {
                    let mut w = self.tls.writer();
                    if c.write_to(&mut w, done).is_err() {
                        break;
                    }
                    if self.closing && !c.has_output() && !self.close_notify_sent {
                        self.tls.send_close_notify();
                        self.close_notify_sent = true;
                    }
                }
            }
            if !self.tls.wants_write() {
                break;
            }
            match self.tls.write_tls(&mut self.tcp) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if !self.tls.wants_write() {
            for s in self.drain_seqs.drain(..) {
                done(s);
            }
        }
        if self.close_notify_sent && !self.write_shut && !self.tls.wants_write() {
            let _ = self.tcp.shutdown(Shutdown::Write);
            self.write_shut = true;
        }
        Ok(())
    }

    /// Bytes wait: frames queued or TLS records not yet on the socket.
    pub fn backlog(&self) -> bool {
        !self.dead
            && (self.tls.wants_write() || self.conn.as_ref().is_some_and(Connection::has_output))
    }

    /// The connection a send may use: none after the job's failure (its
    /// ABORT must be the last frame; the failure is published before the
    /// ABORT is queued under this lock), none to a closing, dead or
    /// departed peer.
    pub fn open_connection(&mut self, ended: bool) -> Result<&mut Connection, Refused> {
        if ended || self.closing {
            return Err(Refused::Ended);
        }
        let dead = self.dead;
        match self.conn.as_mut() {
            Some(c) if !dead && c.state() == ConnState::Open && !c.bye_sent() => Ok(c),
            _ => Err(Refused::PeerLeft),
        }
    }

    /// Queues `frame` behind anything queued before it (order) and writes
    /// as much as the socket takes now; `done` gets every frame completed
    /// on the way. True when `frame` itself is whole in TLS.
    pub fn send_now(
        &mut self,
        ended: bool,
        frame: Outgoing,
        done: &mut dyn FnMut(u64),
    ) -> Result<io::Result<bool>, Refused> {
        let c = self.open_connection(ended)?;
        let seq = frame.seq;
        c.queue_frame(frame, Instant::now());
        Ok(self.flush_for(seq, done))
    }

    /// Writes what the link holds after a send of frame `seq` (0: none to
    /// report); true when that frame is written.
    fn flush_for(&mut self, seq: u64, done: &mut dyn FnMut(u64)) -> io::Result<bool> {
        let mut written = false;
        self.flush(&mut |s| {
            if s == seq && seq != 0 {
                written = true;
            } else {
                done(s);
            }
        })?;
        Ok(written)
    }

    /// A whole frame whose payload the caller lends, when nothing is queued
    /// ahead of it: straight into rustls, whose buffer limit is lifted for
    /// it, then as much to the socket as it takes. The frame (`seq`) counts
    /// as written once rustls has put its last record on the socket, so
    /// the ciphertext in rustls stays bounded by one message. `Ok(None)`:
    /// frames wait in the queue; the caller queues a copy instead.
    pub fn send_whole(
        &mut self,
        ended: bool,
        header: FrameHeader,
        payload: &[u8],
        seq: u64,
        done: &mut dyn FnMut(u64),
    ) -> Result<io::Result<Option<bool>>, Refused> {
        self.open_connection(ended)?;
        if self.tls.is_handshaking() {
            return Ok(Ok(None));
        }
        let LinkIo { tls, conn, .. } = self;
        let Some(c) = conn.as_mut() else {
            return Err(Refused::PeerLeft);
        };
        tls.set_buffer_limit(None);
        let taken = c.write_whole(&mut tls.writer(), header, payload, Instant::now());
        tls.set_buffer_limit(Some(TLS_BUFFER));
        match taken {
            Ok(true) => self.drain_seqs.push(seq),
            Ok(false) => return Ok(Ok(None)),
            Err(e) => return Ok(Err(e)),
        }
        Ok(self.flush_for(seq, done).map(Some))
    }

    /// One step of writing a frame straight from the caller's buffer
    /// (`job`): frames queued ahead go first, then the header and as much
    /// of the payload as rustls takes (its buffer limit bounds the
    /// ciphertext ahead of the socket), and the records to the socket.
    /// `Ok(true)` once every payload byte is in TLS. After the job's
    /// failure an opened frame is completed at once (the limit lifted), so
    /// the stream stays whole for the ABORT behind it, and the send is
    /// refused.
    pub fn stream_step(
        &mut self,
        ended: bool,
        job: &mut StreamJob<'_>,
        done: &mut dyn FnMut(u64),
    ) -> Result<io::Result<bool>, Refused> {
        if job.opened && (ended || self.dead) {
            self.complete_unlimited(job);
            return Err(Refused::Ended);
        }
        if !job.opened {
            self.open_connection(ended)?;
        }
        loop {
            if let Err(e) = self.flush(done) {
                self.complete_unlimited(job);
                return Ok(Err(e));
            }
            let (progressed, complete) = {
                let LinkIo { tls, conn, .. } = &mut *self;
                let Some(c) = conn.as_mut() else {
                    return Err(Refused::PeerLeft);
                };
                if !job.opened {
                    if c.has_output()
                        || tls.is_handshaking()
                        || !c.open_direct(job.header, job.len(), Instant::now())
                    {
                        return Ok(Ok(false)); // queued frames first
                    }
                    job.opened = true;
                }
                let mut w = tls.writer();
                let mut progressed = false;
                loop {
                    let n = match c.write_direct(&mut w, job.rest()) {
                        Ok(n) => n,
                        Err(e) => return Ok(Err(e)),
                    };
                    job.advance(n);
                    if !c.direct_open() || n == 0 {
                        break;
                    }
                    progressed = true;
                }
                (progressed, !c.direct_open())
            };
            if complete {
                if let Err(e) = self.flush(done) {
                    return Ok(Err(e));
                }
                return Ok(Ok(true));
            }
            if !progressed {
                // rustls is full: write it out, or wait for the socket.
                if !self.tls.wants_write() {
                    return Ok(Ok(false));
                }
                match self.tls.write_tls(&mut self.tcp) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Ok(false)),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.complete_unlimited(job);
                        return Ok(Err(e));
                    }
                }
            }
        }
    }

    /// Puts the rest of an opened direct frame into rustls at once.
    fn complete_unlimited(&mut self, job: &mut StreamJob<'_>) {
        if !job.opened {
            return;
        }
        let LinkIo { tls, conn, .. } = self;
        let Some(c) = conn.as_mut() else {
            return;
        };
        tls.set_buffer_limit(None);
        let mut w = tls.writer();
        while c.direct_open() {
            match c.write_direct(&mut w, job.rest()) {
                Ok(n) if n > 0 || !c.direct_open() => job.advance(n),
                _ => break,
            }
        }
        tls.set_buffer_limit(Some(TLS_BUFFER));
    }

    /// Closes our side after the peer left normally (BYE, then close).
    pub fn close_after_bye(&mut self) {
        self.tls.send_close_notify();
        let _ = self.tls.write_tls(&mut self.tcp);
        let _ = self.tcp.shutdown(Shutdown::Both);
    }
}

/// A frame a caller writes straight from its buffers: a header and a
/// payload in up to two parts (the `send_large` prefix and the data).
#[derive(Debug)]
pub(crate) struct StreamJob<'a> {
    pub header: FrameHeader,
    parts: [&'a [u8]; 2],
    done: usize,
    pub opened: bool,
}

impl<'a> StreamJob<'a> {
    /// A frame with `header` and the payload `first` then `second`.
    pub fn new(header: FrameHeader, first: &'a [u8], second: &'a [u8]) -> Self {
        Self {
            header,
            parts: [first, second],
            done: 0,
            opened: false,
        }
    }

    fn len(&self) -> usize {
        self.parts[0].len() + self.parts[1].len()
    }

    /// The payload bytes not yet in TLS, of the current part (empty when
    /// every byte is).
    fn rest(&self) -> &'a [u8] {
        let [a, b] = self.parts;
        if self.done < a.len() {
            &a[self.done..]
        } else {
            b.get(self.done - a.len()..).unwrap_or(&[])
        }
    }

    fn advance(&mut self, n: usize) {
        self.done += n;
    }
}
