//! # sperli-transport
//!
//! The SPERLI v1 transport (protocol §2, §5-§7): one TCP connection per
//! pair of ranks, mutually authenticated TLS 1.3 against the job CA only,
//! HELLO with a signed join token, heartbeats, and DATA matched by
//! (source, tag) in arrival order.
//!
//! ## Architecture
//!
//! A sans-I/O core ([`proto`]: frames, connections, set-up, the end of a
//! job step, matching) driven by an I/O edge (`io`: the pollers, the
//! sockets, rustls, the threads).
//!
//! Progress happens on the thread that waits. A call that sends writes
//! the frame into TLS and onto the socket itself. A call that waits
//! (`recv`, `wait`, a collective, a checkpoint step) reads and decrypts
//! the sockets itself: it busy-polls them for [`Settings::spin`] (200 µs;
//! the core goes to any other runnable thread between two polls, and a core
//! contended by other work stops the spinning for 10 ms), then sleeps in
//! the kernel until a socket has data. No other thread is woken for a
//! message on that path. Set-up runs on the thread that called
//! [`Endpoint::start`].
//!
//! The I/O thread keeps the job alive while the program computes: it
//! sends heartbeats, notices a silent or lost peer, and reads and writes
//! the sockets. While a call drives the sockets, the I/O thread neither
//! reads them nor is woken by them. It takes them back once no call has
//! run for 5 ms, or at once when bytes wait for a socket and no call
//! drives it.
//!
//! ## Threads
//!
//! [`Endpoint`] is `Send + Sync`, and every call takes `&self`, so an
//! `Arc<Endpoint>` may be shared by the program's threads (for example a
//! thread that progresses non-blocking collectives). Any calls may run
//! at the same time:
//!
//! - Receives match as in MPI. Messages from one source with one tag are
//!   received in the order they arrived. Among receives that match the same
//!   message, the one posted first gets it. A receive from any source gets
//!   the first matching message to arrive.
//! - `recv_collective` and `recv_ckpt` take a peer's frames in arrival
//!   order. Two threads taking frames from the same peer get them in an
//!   order nobody can predict, so the layer above makes its calls from one
//!   thread at a time (sperli-collective's sequence numbers count issue
//!   order).
//! - Sends to one peer leave in the order their calls took the socket.
//!   From one thread, that is program order.
//! - Of the threads that wait in calls at the same moment, one drives the
//!   sockets (it leads) and the others sleep until what they wait for
//!   has come. Then the leader hands over.
//! - [`Endpoint::wait_for`] and [`Endpoint::wait_any`] wait over several
//!   outstanding operations. [`Endpoint::progress`] makes progress without
//!   waiting.
//!
//! ```
//! use std::sync::Arc;
//! use sperli_tls::job_plan::JobPlan;
//! use sperli_transport::{Endpoint, ErrorMode, Settings};
//!
//! // Two ranks as two threads of this process (a real job runs each rank
//! // as a process started by `sperli run`).
//! let plan = JobPlan::localhost(2).unwrap();
//! let settings = Settings {
//!     errors: ErrorMode::Return,
//!     ..Settings::default()
//! };
//! let ranks: Vec<_> = (0..2)
//!     .map(|r| {
//!         let (desc, s) = (plan.description(r), settings.clone());
//!         std::thread::spawn(move || {
//!             let ep = Arc::new(Endpoint::start(&desc, s).unwrap());
//!             if ep.rank() == 1 {
//!                 ep.send(0, 7, b"hello").unwrap();
//!                 return ep.recv(0, 8).unwrap();
//!             }
//!             // One thread waits for any source while another sends.
//!             let other = ep.clone();
//!             let waiter = std::thread::spawn(move || other.recv_match(None, Some(7)));
//!             ep.send(1, 8, b"back").unwrap();
//!             let (status, msg) = waiter.join().unwrap().unwrap();
//!             assert_eq!((status.source, status.len), (1, 5));
//!             msg
//!         })
//!     })
//!     .collect();
//! let got: Vec<Vec<u8>> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
//! assert_eq!(got, [b"hello".to_vec(), b"back".to_vec()]);
//! ```
//!
//! ## Errors
//!
//! A failure ends the job step:
//!
//! - a rejected frame: H1610, ABORT reason 7 to all;
//! - an ABORT received: H1612;
//! - a lost peer (silence, a close without BYE, a reset): H1613, ABORT
//!   reason 1 to all.
//!
//! The rank writes its failure record ([`Settings::error_file`]) before the
//! program can see the error. What follows depends on [`ErrorMode`]
//! ([`Settings::errors`], [`Endpoint::set_errors`]):
//!
//! - [`ErrorMode::Fatal`], the default (like `MPI_ERRORS_ARE_FATAL`;
//!   protocol §7.4 "stops"). The rank sends its ABORT, lingers up to
//!   [`Settings::linger`] to flush it, and ends its process with exit
//!   status `H-code - 1600`: 10 for H1610, 12 for H1612, 13 for H1613, 1
//!   for an error without a code. It does this within the linger (1 s) of
//!   noticing the failure, so for a silent peer within the silence limit
//!   plus 1 s of the peer's last byte, whether the program computes or
//!   waits in a call. A call in progress does not return. The program
//!   never sees a job-ending error.
//! - [`ErrorMode::Return`]: the pending call and every later call return
//!   the error, and the program decides. In-process multi-rank tests (ranks
//!   as threads of one process) use this mode.
//!
//! Failures before set-up completes (H1611, H1616) are returned by
//! [`Endpoint::start`] in both modes. So are errors that do not end the
//! job: H1618 argument checks, a peer that left normally (H1613
//! `Departed`), and the program's own [`Endpoint::abort`], after which the
//! process goes on.
//!
//! A rank program started by `sperli run` joins with
//! `Comm::from_stdin()` (sperli-collective), which uses
//! `Settings::default()`. Errors are therefore fatal there unless the
//! program calls `set_errors(ErrorMode::Return)` (as the sperli-mailbox
//! server does: it reports the job's errors to its client itself).
//!
//! ## Panics
//!
//! A program that panics leaves with ABORT reason 2 and the panic's message,
//! never with BYE. The `Endpoint` dropped while its thread unwinds sends the
//! ABORT. Built with `panic = "abort"`, nothing unwinds, so the panic hook
//! this crate installs sends it. A panic on a thread that does not own the
//! `Endpoint` is the program's own business: it may catch it, or join the
//! thread and re-raise it.
//!
//! ## Messages on communicators (HELLO feature bit 3)
//!
//! Where every rank announces feature bit 3 (the default), a DATA payload
//! starts with the DATA header of protocol §16.2: a message names its
//! communicator and is matched by (communicator, source, tag), a message
//! of any length is one call ([`Endpoint::send_on`], [`Endpoint::irecv_on`],
//! [`Endpoint::probe_on`]), a synchronous send ([`SendMode::Synchronous`])
//! completes once its receiver matched it, and a matched probe
//! ([`Endpoint::mprobe_on`]) takes a message for one receive. The calls
//! that name no communicator send and receive on communicator 0. The layer
//! that makes communicators reports them ([`Endpoint::communicator_made`],
//! [`Endpoint::communicator_freer`]) so that a message for one is judged by
//! protocol §16.4. Without bit 3 on every rank, DATA is v1's.
//!
//! ## Large messages
//!
//! One DATA frame carries at most 16777216 bytes. The layer above splits
//! bigger messages. [`Endpoint::send_large`] and [`Endpoint::recv_large`]
//! do it with this convention, which does not change the wire: the first
//! DATA frame starts with the total length as a little-endian `u64`,
//! followed by as many message bytes as fit; further DATA frames with the
//! same tag carry the rest in order, each as full as possible. Both sides
//! must use the pair for that (source, tag). The frames are written
//! straight from the sender's buffer and read straight into the receiver's
//! message, so a large message streams at the rate of a single frame.
//! With feature bit 3 the pair sends and receives one message of
//! protocol §16 (its length is in its DATA header).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod control_channel;
mod endpoint;
pub mod failure_record;
pub mod fd_limit;
#[allow(unsafe_code)]
pub mod inherited;
mod io;
pub mod job;
pub mod pool;
pub mod proto;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use endpoint::{
    CommunicatorFreer, Endpoint, EndpointRef, OwnedRecvHandle, OwnedSendHandle, PostedRecv,
    RecvHandle, SendHandle, SendMode, StartedSend, EAGER_LIMIT,
};
pub use io::recovery::Recovered;
pub use proto::matching::{Message, Status};

/// What happens when the job step fails (crate docs, "Errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorMode {
    /// The rank sends its ABORT, writes its error record and ends its
    /// process with status `H-code - 1600` within the silence limit plus
    /// the linger; no call returns the error (MPI's `MPI_ERRORS_ARE_FATAL`).
    #[default]
    Fatal,
    /// The pending and every later call return the error (MPI's
    /// `MPI_ERRORS_RETURN`).
    Return,
}

/// The default of [`Settings::spin`]: how long a call that waits busy-polls
/// its sockets before it sleeps in the kernel. Chosen by measurement on a
/// 2-core machine (docs/performance.md, "The waiting caller drives its own
/// sockets"): it covers the
/// wait of a barrier or an 8-byte allreduce at 2 to 8 ranks, so such a
/// wait is seen within a microsecond or two instead of a wake-up of about
/// 30 µs; spinning yields the core between two polls, so it also helped
/// where 4 or 8 ranks share the 2 cores.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(200);

/// Settings of a rank's transport (protocol §5).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Silence limit: a connection that delivered no byte for this long is
    /// a lost peer (H1613). Default 5000 ms.
    pub silence: Duration,
    /// Set-up window: connect tries (and accepts) go on this long. Default 30 s.
    pub setup_window: Duration,
    /// Interval between connect tries. Default 100 ms.
    pub connect_retry: Duration,
    /// How long a failing rank keeps its connections to flush ABORT and
    /// read the peers' close. Default 1 s.
    pub linger: Duration,
    /// How long a call that waits busy-polls its sockets before it sleeps
    /// in the kernel ([`DEFAULT_SPIN`]; zero: never). A message that comes
    /// within this time is seen within a microsecond or two; one that comes
    /// later costs a wake-up (about 30 µs when the thread is woken on the
    /// other core). Between two polls the core goes to any other runnable
    /// thread; when that took long (the core is contended by other work),
    /// the spinning stops for 10 ms. [`Endpoint::set_spin`] changes it at
    /// run time.
    pub spin: Duration,
    /// Where the rank writes the [`failure_record::FailureRecord`] of the
    /// error that ends the job step, before the program sees the error (the
    /// launcher's `SPERLI_ERROR_FILE`). Default none.
    pub error_file: Option<PathBuf>,
    /// What happens when the job step fails: [`ErrorMode::Fatal`] by
    /// default (crate docs, "Errors").
    pub errors: ErrorMode,
    /// The HELLO feature bits this rank announces (protocol §7.1.1).
    /// Default: every extension this implementation has
    /// ([`sperli_wire::limits::FEATURES_IMPLEMENTED`]; bit 5 is announced
    /// only with a [`Settings::control`] channel); bit 0 is always sent. Clearing a bit makes this rank v1-only for that extension,
    /// and so the whole job ([`Endpoint::features`]).
    pub features: u64,
    /// A listener already bound to this rank's host:port of the job
    /// description, which the rank accepts its peers on instead of binding
    /// one itself (protocol §5.1 step 1). Whoever plans the ports binds
    /// them first and keeps them bound, so no other program can take a
    /// port between the plan and the rank's start (the in-process tests'
    /// `JobPlan::localhost_bound`). Default none: the rank binds its own.
    /// A listener bound elsewhere is refused with
    /// [`UsageError::ListenerAddress`](sperli_wire::error::UsageError::ListenerAddress).
    pub listener: Option<Arc<std::net::TcpListener>>,
    /// The control channel the launcher gave this rank (protocol §18.1;
    /// [`control_channel::from_env`]). With it, and bit 5 in `features`,
    /// the rank announces HELLO feature bit 5 (membership epochs: a lost
    /// peer is recovered from instead of ending the job step, crate docs
    /// "Recovery"); without it, bit 5 is cleared. Default none.
    pub control: Option<Arc<std::os::unix::net::UnixStream>>,
    /// This rank is a replacement the launcher started for a failed rank
    /// (protocol §18.7; [`control_channel::is_replacement`]): the first
    /// line of [`Settings::control`] is the MEMBERSHIP record it joins
    /// with, and it dials every member of that record's epoch instead of
    /// the set-up of section 5. Default false.
    pub replacement: bool,
    /// With feature bit 5 (a [`Settings::control`] channel), whether a
    /// lost peer is taken into the recovery (protocol §18.6: the epoch is
    /// revoked, calls return `RecoveryError::Revoked` until
    /// [`Endpoint::recover`]) from the start, under
    /// [`ErrorMode::Return`]. False: only while the program says it can go
    /// on after a loss ([`Endpoint::set_recoverable`]; sperli-ckpt's
    /// `Checkpointer::run` does); until then a lost peer ends the job step
    /// as in v1. Default false; `sperli run --recover shrink` sets it
    /// through [`sperli_wire::env::RECOVER`].
    pub recoverable: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            silence: Duration::from_millis(sperli_wire::limits::DEFAULT_SILENCE_MS),
            setup_window: Duration::from_millis(sperli_wire::limits::SETUP_WINDOW_MS),
            connect_retry: Duration::from_millis(sperli_wire::limits::CONNECT_RETRY_MS),
            linger: Duration::from_secs(1),
            spin: DEFAULT_SPIN,
            error_file: None,
            errors: ErrorMode::Fatal,
            features: sperli_wire::limits::FEATURES_IMPLEMENTED,
            listener: None,
            control: None,
            replacement: false,
            recoverable: false,
        }
    }
}
