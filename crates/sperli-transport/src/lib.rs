//! # sperli-transport
//!
//! The SPERLI v1 transport (protocol text "Verbindungen", "Frame", HELLO,
//! DATA, HEARTBEAT, ABORT, BYE; layouts §2-§4, §6, §8, §10): one TCP
//! connection per pair of ranks, mutually authenticated TLS 1.3 against the
//! job CA only, HELLO with a signed join token, heartbeats from an I/O
//! thread, and DATA matched by (source, tag) in arrival order.
//!
//! Architecture: one I/O thread per rank ([`mesh`]) runs a blocking mio
//! loop that owns every socket and rustls session. The user's thread talks
//! to it through an [`Endpoint`]: commands go in over a crossbeam channel
//! (plus a `mio::Waker`), accepted frames come back over an event channel.
//! Protocol logic lives in sans-I/O state machines: [`frame_reader`] and
//! [`connection`].
//!
//! Failures end the job step ([`Endpoint`] docs): a rejected frame (H1610,
//! ABORT reason 7 to all), an ABORT received (H1612), a lost peer (H1613,
//! ABORT reason 1 to all). After a failure every pending and future call
//! returns the job's error.
//!
//! Large messages: one DATA frame carries at most 16777216 bytes. The
//! layer above splits bigger messages; [`Endpoint::send_large`] and
//! [`Endpoint::recv_large`] do it with this convention (it does not change
//! the wire): the first DATA frame starts with the total length as a
//! little-endian `u64`, followed by as many message bytes as fit; further
//! DATA frames with the same tag carry the rest in order, each as full as
//! possible. Both sides must use the pair for that (source, tag).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod connection;
mod endpoint;
pub mod failure_record;
pub mod fd_limit;
pub mod frame_reader;
pub mod job;
pub mod mesh;
pub mod pool;

use std::path::PathBuf;
use std::time::Duration;

pub use endpoint::{Endpoint, RecvHandle, SendHandle, Status};

/// Settings of a rank's transport (protocol text "Verbindungen").
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
    /// How long a waiting thread (the user's thread in a blocking call, the
    /// I/O thread after activity) busy-polls before it sleeps. Default 0
    /// (off): on the 2-core benchmark machine polling made the ping-pong
    /// slower (4 threads on 2 cores); it may help where every thread has
    /// a core of its own.
    pub spin: Duration,
    /// Where the I/O thread writes the [`failure_record::FailureRecord`]
    /// of the error that ends the job step, before the program sees the
    /// error (the launcher's `SPERLI_ERROR_FILE`). Default none.
    pub error_file: Option<PathBuf>,
    /// The HELLO feature bits this rank announces (protocol §7.1.1).
    /// Default: every extension this implementation has
    /// ([`sperli_wire::limits::FEATURES_IMPLEMENTED`]); bit 0 is always
    /// sent. Clearing a bit makes this rank v1-only for that extension,
    /// and so the whole job ([`Endpoint::features`]).
    pub features: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            silence: Duration::from_millis(sperli_wire::limits::DEFAULT_SILENCE_MS),
            setup_window: Duration::from_millis(sperli_wire::limits::SETUP_WINDOW_MS),
            connect_retry: Duration::from_millis(sperli_wire::limits::CONNECT_RETRY_MS),
            linger: Duration::from_secs(1),
            spin: Duration::ZERO,
            error_file: None,
            features: sperli_wire::limits::FEATURES_IMPLEMENTED,
        }
    }
}
