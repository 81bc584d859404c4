//! The user-facing handle of one rank: [`Endpoint`].

use crate::io::recovery::Recovery;
use crate::proto::setup::Setup;
use sperli_wire::recovery::FEATURE_MEMBERSHIP;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use std::time::Instant;

use mio::{Poll, Waker};
use sperli_tls::config::PrivatePemDir;
use sperli_tls::pki::RankIdentity;
use sperli_wire::abort::AbortReason;
use sperli_wire::error::{ArgumentError, IdentityProblem, LocalError};
use sperli_wire::job_description::JobDescription;
use sperli_wire::limits::FEATURE_V1_CORE;
use sperli_wire::refused_hosts::RefusedHosts;
use sperli_wire::Error;
use zeroize::Zeroizing;

use crate::io::driver::Driver;
use crate::io::event_loop::{EventLoop, WAKER};
use crate::io::fatal;
use crate::io::shared::{Command, Shared, SharedParts};
use crate::proto::connection::{JobContext, JobKey};
use crate::proto::ending::AbortFrame;
use crate::{ErrorMode, Settings};

mod frames;
mod messages;
mod recovery;
mod recv;
mod send;

pub use messages::{CommunicatorFreer, SendMode};

pub use recv::{OwnedRecvHandle, PostedRecv, RecvHandle};
pub use send::{OwnedSendHandle, SendHandle, StartedSend};

/// How a request handle ([`StartedSend`], [`PostedRecv`]) holds its
/// endpoint: borrowed (`&Endpoint`: [`SendHandle`], [`RecvHandle`], from
/// [`Endpoint::isend`] and the other `i*` calls) or counted
/// (`Arc<Endpoint>`: [`OwnedSendHandle`], [`OwnedRecvHandle`], from
/// [`Endpoint::isend_owned`] and the other `*_owned` calls), for a handle
/// that must not borrow, such as one kept in an object without a lifetime.
/// Both forms behave the same; an owned handle keeps the endpoint alive
/// until it is dropped. Sealed: implemented for these two only.
pub trait EndpointRef: std::ops::Deref<Target = Endpoint> + sealed::Sealed {}

impl EndpointRef for &Endpoint {}
impl EndpointRef for Arc<Endpoint> {}

mod sealed {
    /// Keeps [`super::EndpointRef`] to the two forms this crate gives out.
    pub trait Sealed {}
    impl Sealed for &super::Endpoint {}
    impl Sealed for std::sync::Arc<super::Endpoint> {}
}

/// Messages up to this size are sent eagerly: a blocking `send` returns
/// once the message is queued. Bigger ones wait until written into TLS.
pub const EAGER_LIMIT: usize = 64 * 1024;

/// Allocates and frees one 24 MiB buffer, once per rank. With glibc this
/// raises malloc's adaptive mmap threshold to 24 MiB (and its trim
/// threshold to 48 MiB), as the first free of any large block would: from
/// then on buffers up to 24 MiB (received 16 MiB frames a user drops,
/// rustls's 16 KiB records, up to 256 KiB of them per connection) come
/// from the heap and are reused from it, instead of being mapped, faulted
/// in and unmapped per message; the heap is trimmed only once 48 MiB at
/// its top are free (the cost: up to that much freed memory stays
/// resident). Without it, the first such free happens at some random later
/// point, or never when the pool keeps every large buffer. Other
/// allocators just allocate and free.
fn warm_malloc() {
    drop(std::hint::black_box(Vec::<u8>::with_capacity(24 << 20)));
}

/// One rank of a running job: the program's side of the transport.
///
/// Created by [`Endpoint::start`], which sets up every connection (or fails
/// with H1611/H1616 at the set-up deadline). `Send + Sync`: every call
/// takes `&self` and any number of threads may make calls at once (crate
/// docs, "Threads"). Dropping it runs [`Endpoint::finish`]; dropping it
/// while its thread panics aborts the job instead (ABORT reason 2).
///
/// Every call first checks the job's state. Once the job step failed (a
/// rejected frame, an ABORT, a lost peer), errors are fatal by default: the
/// rank sends its ABORT, writes its error record and ends its process; a
/// call in progress does not return (crate docs, "Errors"). With
/// [`ErrorMode::Return`] every pending and future call returns that error
/// instead. After a local [`Endpoint::abort`] every call returns
/// [`Error::AbortedByPeer`] naming this rank, in either mode.
pub struct Endpoint {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    next_seq: AtomicU64,
    /// Per peer, the last message number used on its connection (feature
    /// bit 3), locked while a message's frames are queued.
    outboxes: Vec<Mutex<messages::Outbox>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("rank", &self.shared.ctx.rank)
            .field("size", &self.shared.ctx.size)
            .finish_non_exhaustive()
    }
}

/// A TLS configuration that cannot be built from the job description's
/// PEM texts: writing the private PEM directory is I/O, the rest is what
/// is wrong with the identity itself.
fn config_error(e: sperli_tls::config::ConfigError) -> Error {
    use sperli_tls::config::ConfigError;
    let identity = |what, problem| Error::Local(LocalError::Identity { what, problem });
    match e {
        ConfigError::Io { kind, .. } => Error::Io {
            op: "writing or reading the rank's private PEM files",
            kind,
        },
        ConfigError::Pem { what } => identity(what, IdentityProblem::NotPem),
        ConfigError::Verifier => identity("CA certificate", IdentityProblem::NoClientRoot),
        ConfigError::Host(e) => Error::JobDescription(e.into()),
        ConfigError::Random => Error::Local(LocalError::Random {
            op: "naming the rank's private PEM directory",
        }),
        _ => identity(
            "rank certificate, key or CA certificate",
            IdentityProblem::Refused,
        ),
    }
}

/// A PEM text of the job description (`what`: which one) as text.
fn pem_text(bytes: &[u8], what: &'static str) -> Result<String, Error> {
    String::from_utf8(bytes.to_vec()).map_err(|_| {
        Error::Local(LocalError::Identity {
            what,
            problem: IdentityProblem::NotUtf8,
        })
    })
}

/// The HELLO features a rank announces (protocol §7.1.1): bit 0 always,
/// bit 5 only with a control channel (protocol §18.1).
fn announced(settings: &Settings) -> u64 {
    let f = settings.features | FEATURE_V1_CORE;
    match settings.control {
        Some(_) => f,
        None => f & !FEATURE_MEMBERSHIP,
    }
}

/// Feature bit 5's recovery of this rank, when it has a control channel
/// and announces the bit (protocol §18.1); for a replacement, from the
/// MEMBERSHIP record on the first line of its channel (protocol §18.7).
fn recovery_of(ctx: &JobContext, settings: &Settings) -> Result<Option<Recovery>, Error> {
    let Some(control) = settings.control.clone() else {
        return Ok(None);
    };
    if ctx.features & FEATURE_MEMBERSHIP == 0 {
        return Ok(None);
    }
    if !settings.replacement {
        return Ok(Some(Recovery::new(
            ctx.rank,
            ctx.size,
            ctx.job_id,
            ctx.incarnation,
            ctx.job_public_key.bytes().to_vec(),
            control,
        )));
    }
    let (record, rest) =
        crate::control_channel::read_first_record(&control, settings.setup_window)?;
    let r = Recovery::replacement(
        (ctx.rank, ctx.incarnation),
        &record,
        rest,
        ctx.job_public_key.bytes().to_vec(),
        control,
    )?;
    Ok(Some(r))
}

impl Endpoint {
    /// Starts rank `desc.rank` of the job with the refused-host policy of
    /// `SPERLI_REFUSED_HOSTS` (and the built-in names); see
    /// [`Endpoint::start_with_policy`].
    pub fn start(desc: &JobDescription, settings: Settings) -> Result<Self, Error> {
        let var = std::env::var(sperli_wire::env::REFUSED_HOSTS).ok();
        Self::start_with_policy(desc, settings, RefusedHosts::new(var.as_deref(), None))
    }

    /// Starts rank `desc.rank` of the job: checks RLIMIT_NOFILE, listens
    /// on the rank's own host:port, writes the three PEM texts into a
    /// private directory only while the TLS configurations are built, sets
    /// the mesh up on the calling thread and returns once every peer is
    /// connected and authenticated (or with H1611/H1616 at the set-up
    /// deadline); then the I/O thread takes over.
    pub fn start_with_policy(
        desc: &JobDescription,
        settings: Settings,
        refused: RefusedHosts,
    ) -> Result<Self, Error> {
        desc.check_hosts(&refused)?;
        crate::fd_limit::ensure(desc.size)?;
        let ctx = Arc::new(JobContext {
            job_id: desc.job_id,
            size: desc.size,
            rank: desc.rank,
            incarnation: desc.incarnation,
            hosts: desc.hosts.clone(),
            job_public_key: JobKey::new(desc.job_public_key.clone()),
            refused,
            features: announced(&settings),
            membership: Arc::default(),
        });
        // Protocol §5.1 step 1: the rank "listens on its own port ... before
        // anything else". Peers that start earlier dial at once; a port not
        // yet listening refuses them, and they try again only after the
        // retry interval (100 ms), while the listener queues the early ones.
        let listener = crate::io::setup::bind(&ctx, settings.listener.as_deref())?;
        let (server, client) = {
            let identity = RankIdentity::new(
                pem_text(&desc.ca_cert_pem, "CA certificate")?,
                pem_text(&desc.rank_cert_pem, "rank certificate")?,
                Zeroizing::new(pem_text(&desc.rank_key_pem, "rank key")?),
            );
            let dir = PrivatePemDir::create(&identity).map_err(config_error)?;
            let server = dir.server_config().map_err(config_error)?;
            let client = dir.client_config().map_err(config_error)?;
            drop(dir); // the PEM files exist only while set-up needs them
            (server, client)
        };
        let poll = Poll::new().map_err(|e| Error::io("creating the poller", &e))?;
        let io_waker =
            Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("creating the waker", &e))?;
        let io_registry = poll
            .registry()
            .try_clone()
            .map_err(|e| Error::io("sharing the poller", &e))?;
        let driver = Driver::new().map_err(|e| Error::io("creating the callers' poller", &e))?;
        let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared::new(SharedParts {
            ctx: ctx.clone(),
            driver,
            cmds: cmd_tx,
            io_waker,
            io_registry,
            errors: settings.errors,
            spin: settings.spin,
            linger: settings.linger,
            error_file: settings.error_file.clone(),
            recovery: recovery_of(&ctx, &settings)?,
            recoverable: settings.recoverable,
        }));
        let setup = match &shared.recovery {
            Some(r) if settings.replacement => {
                // Protocol §18.7: the record is applied before set-up (its
                // epoch, incarnations and endpoints), and frames carry its
                // epoch at once.
                r.settle(&mut shared.state(), &ctx.membership);
                ctx.membership.start_carrying();
                let (inc, replaced) = r.join_plan();
                Setup::replacement(
                    ctx.rank,
                    &inc,
                    &replaced,
                    settings.setup_window,
                    settings.connect_retry,
                    Instant::now(),
                )
            }
            _ => Setup::new(
                ctx.rank,
                ctx.size,
                settings.setup_window,
                settings.connect_retry,
                Instant::now(),
            ),
        };
        fatal::install_panic_hook();
        warm_malloc();
        let mut lp = EventLoop::new(
            poll,
            shared.clone(),
            settings,
            desc.join_token.clone(),
            server,
            client,
            listener,
            cmd_rx,
            setup,
        )
        .map_err(|e| Error::io("registering the listener", &e))?;
        // The thread that waits for set-up drives it.
        if lp.run(true) {
            lp.finish_up();
            // A set-up ends early only through a failure, which records
            // its error first.
            return Err(shared.error.get().cloned().unwrap_or(Error::Local(
                LocalError::Internal {
                    what: "the set-up ended without recording why",
                },
            )));
        }
        let rank = ctx.rank;
        let thread = std::thread::Builder::new()
            .name(format!("sperli-io-{rank}"))
            .spawn(move || {
                lp.run(false);
                if let Some(status) = lp.finish_up() {
                    if let Some(e) = lp.shared.error.get() {
                        fatal::exit_process(rank, e, status);
                    }
                }
            })
            .map_err(|e| Error::io("starting the I/O thread", &e))?;
        fatal::register_live(Arc::downgrade(&shared));
        Ok(Self {
            shared,
            thread: Mutex::new(Some(thread)),
            next_seq: AtomicU64::new(0),
            outboxes: (0..ctx.size).map(|_| Mutex::default()).collect(),
        })
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.shared.ctx.rank
    }

    /// The job size.
    pub fn size(&self) -> u32 {
        self.shared.ctx.size
    }

    /// The HELLO feature bits every rank of the job announced, this one
    /// included (protocol §7.1.1): an extension is used only when its bit
    /// is set here. Fixed once [`Endpoint::start`] returns.
    pub fn features(&self) -> u64 {
        self.shared
            .job_features
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The job's error, if it failed (a query: never ends the process).
    pub fn error(&self) -> Option<Error> {
        self.shared.error.get().cloned()
    }

    /// What happens when the job step fails (crate docs, "Errors"); from
    /// [`Settings::errors`] until changed.
    pub fn errors(&self) -> ErrorMode {
        self.shared.errors()
    }

    /// Chooses what happens when the job step fails, from now on (like
    /// `MPI_Comm_set_errhandler`).
    pub fn set_errors(&self, mode: ErrorMode) {
        self.shared.set_errors(mode);
    }

    /// How long a waiting call busy-polls before it sleeps; from
    /// [`Settings::spin`] until changed.
    pub fn spin(&self) -> Duration {
        self.shared.spin()
    }

    /// Changes how long a waiting call busy-polls before it sleeps in the
    /// kernel, for the calls that start from now on.
    pub fn set_spin(&self, spin: Duration) {
        self.shared.set_spin(spin);
    }

    /// The job's error for a call that must return it: in fatal mode a
    /// job-ending error never returns (the process ends).
    fn outcome<T>(&self, r: Result<T, Error>) -> Result<T, Error> {
        match r {
            Err(e) if self.is_fatal(&e) => fatal::stop(&self.shared, &e),
            r => r,
        }
    }

    fn is_fatal(&self, e: &Error) -> bool {
        self.shared.errors() == ErrorMode::Fatal
            && !self.shared.aborted_locally()
            && self.shared.error.get() == Some(e)
    }

    /// The job's state for a new call.
    fn check(&self) -> Result<(), Error> {
        self.outcome(self.shared.check())
    }

    fn check_rank(&self, r: u32) -> Result<(), Error> {
        if r >= self.shared.ctx.size {
            return Err(ArgumentError::Rank {
                rank: r,
                size: self.shared.ctx.size,
            }
            .into());
        }
        Ok(())
    }

    /// Blocks until `poll` returns `Ok(Some(value))` (or an error), driving
    /// the sockets meanwhile; `poll` runs again after every change of the
    /// transport's state (a message arrived, a send was written, a peer
    /// left, the job failed) and must not block. The building block of
    /// waits over several handles (request objects of a layer above, e.g.
    /// non-blocking collectives): `poll` tests them. The job's error ends
    /// the wait.
    pub fn wait_for<T>(
        &self,
        mut poll: impl FnMut() -> Result<Option<T>, Error>,
    ) -> Result<T, Error> {
        self.wait(|| poll().transpose())
    }

    fn wait<T>(&self, ready: impl FnMut() -> Option<Result<T, Error>>) -> Result<T, Error> {
        self.outcome(self.shared.wait_until(ready))
    }

    /// Reads and writes what the sockets hold now, without blocking (what
    /// every `test` call does first); the I/O thread does it too while no
    /// call is in progress.
    pub fn progress(&self) -> Result<(), Error> {
        self.check()?;
        self.shared.progress();
        self.check()
    }

    /// Aborts the job: ABORT with `reason`, `code` (an H number or 0) and
    /// `message` to all peers, close everything. Returns once the I/O
    /// thread has flushed and closed (bounded by the linger setting). Every
    /// later call fails with [`Error::AbortedByPeer`] naming this rank; the
    /// process goes on (the program decides how it ends).
    pub fn abort(&self, reason: AbortReason, code: u32, message: &str) {
        let error = Error::AbortedByPeer {
            from: self.rank(),
            reason: reason.code(),
            code,
            message: message.to_owned(),
        };
        if self.shared.fail(error, true) {
            self.shared.command(Command::Abort(AbortFrame {
                reason,
                code,
                message: message.to_owned(),
            }));
        }
        self.join_io();
    }

    fn join_io(&self) {
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }

    /// Normal end: BYE to every peer, then close_notify and close. Returns
    /// once every connection is closed; fails with the job's error if the
    /// job failed.
    pub fn finish(self) -> Result<(), Error> {
        self.finish_inner()
    }

    fn finish_inner(&self) -> Result<(), Error> {
        let running = self
            .thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if running {
            self.shared.command(Command::Finish);
            self.join_io();
        }
        match self.shared.error.get() {
            Some(e) => self.outcome(Err(e.clone())),
            None => Ok(()),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A panicking program never says BYE: its peers would blame a
            // healthy rank for what follows (protocol §7.5 reason 2).
            let msg = fatal::panic_message(self.rank());
            self.abort(AbortReason::Application, 0, &msg);
            return;
        }
        let _ = self.finish_inner();
    }
}
