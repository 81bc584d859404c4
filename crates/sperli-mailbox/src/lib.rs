//! # sperli-mailbox
//!
//! Submit tasks into a running SPERLI job through a shared-memory lane:
//! the group mailbox (docs/mailbox.md). A warm job (started once with
//! `sperli run --mailbox NAME`) serves requests that a client writes into
//! one named shared-memory file only its owner can open; rank 0 alone
//! maps it, and fans each request out to the group over the job's
//! mutually authenticated TLS 1.3 mesh with ordered collectives, gathers
//! every rank's status and reply, and answers in the same file. There
//! are no command sockets.
//!
//! - [`layout`]: the version-1 layout (256-byte header, two 16 MiB
//!   regions) and its checks; pure. [`records`]: what the regions carry;
//!   [`envelope`]: what the rank-side collectives carry; pure.
//! - [`lane`]: the request state machine as steps on the header words.
//! - [`Mailbox`]: the client (create/attach, `submit`, `ping`,
//!   `shutdown`, [`Mailbox::start_job`] to start and watch a job).
//! - [`MailboxServer`]: the rank side, with handlers by name or id.
//! - `shm`: the one module with `unsafe` (mapping, atomics, futex).
//!
//! ```no_run
//! use sperli_mailbox::{JobSpec, Mailbox, Target};
//! let spec = JobSpec::new("target/release/sperli", 4,
//!     vec!["target/release/sperli-mailbox-server".into()]);
//! let mut mb = Mailbox::start_job("demo", &spec)?;
//! let r = mb.submit("sum", Target::Group, &[&[1u64, 2, 3].map(u64::to_le_bytes).concat()])?;
//! assert_eq!(r.ok(0), Some(&6u64.to_le_bytes()[..]));
//! mb.shutdown()?;
//! # Ok::<(), sperli_mailbox::MailboxError>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod client;
pub mod envelope;
pub mod error;
mod fanout;
pub mod files;
mod job;
pub mod lane;
#[cfg(test)]
mod lane_model;
pub mod layout;
#[cfg(test)]
mod layout_vectors;
pub mod records;
mod server;
pub mod shm;

pub use client::{HandlerId, Mailbox, Replies, CLIENT_TICK, DEFAULT_TIMEOUT};
pub use error::{MailboxCode, MailboxError};
pub use fanout::{REPLY_TOO_LARGE, TAG_BODY, TAG_PAYLOAD};
pub use job::{JobSpec, JobWatch};
pub use layout::{GroupState, Opcode, RequestState, TerminalReason};
pub use records::{RankError, RankReply, Target};
pub use server::{
    Handler, MailboxServer, Task, TaskError, INVALID_REQUEST, LAYOUT, PANIC, RANK0_TICK,
    UNKNOWN_HANDLER,
};

/// The environment variable that gives rank 0 the mailbox name (not a
/// secret: the file is mode 0600 and named after its owner). Set by
/// `sperli run --mailbox NAME` for rank 0 only.
pub const MAILBOX_ENV: &str = sperli_wire::env::MAILBOX;

/// Bare futex round trips between two processes on a mailbox-sized file
/// (the benchmark's floor and the two-process futex test): this process
/// and its peer take turns flipping the request word; returns the median
/// round trip. The peer runs [`futex_bench::futex_peer`] on the same `name`.
pub mod futex_bench {
    use std::time::{Duration, Instant};

    use crate::files::MailboxFile;
    use crate::layout::off;
    use crate::MailboxError;

    /// The word values of the ping-pong: 0 before the first ping, `STOP`
    /// at the end, `PING + 2k` a ping, `PING + 2k + 1` its answer.
    const PING: u32 = 0x1000;
    const STOP: u32 = 1;

    /// The side that measures: creates mailbox `name`, waits for the peer
    /// to answer the first ping, then `rounds` round trips. Each round:
    /// store `PING + 2k`, wake, wait for `PING + 2k + 1`. Returns the round
    /// trip times.
    pub fn measure(
        name: &str,
        rounds: u32,
        start_peer: impl FnOnce() -> std::io::Result<std::process::Child>,
    ) -> Result<Vec<Duration>, MailboxError> {
        crate::files::remove(name);
        let f = MailboxFile::create(name, 1)?;
        let mut peer = start_peer().map_err(|e| MailboxError::Launch {
            program: "futex peer".into(),
            kind: e.kind(),
        })?;
        let m = &f.map;
        let mut out = Vec::with_capacity(rounds as usize);
        let result = (|| {
            for k in 0..=rounds {
                let v = PING + 2 * k;
                let t = Instant::now();
                m.store32(off::CLIENT_PID, v);
                m.wake(off::CLIENT_PID);
                let deadline = t + Duration::from_secs(10);
                while m.load32(off::CLIENT_PID) == v {
                    if Instant::now() > deadline {
                        return Err(MailboxError::Timeout {
                            what: "futex peer",
                            after_ms: 10_000,
                            state: crate::layout::RequestState::Idle,
                        });
                    }
                    m.wait(off::CLIENT_PID, v, Duration::from_millis(100));
                }
                if k > 0 {
                    out.push(t.elapsed());
                }
            }
            Ok(())
        })();
        m.store32(off::CLIENT_PID, STOP);
        m.wake(off::CLIENT_PID);
        let _ = peer.wait();
        crate::files::remove(name);
        result.map(|()| out)
    }

    /// The answering side: attaches to mailbox `name` and answers every
    /// ping `v` with `v + 1` until the word says stop.
    pub fn futex_peer(name: &str) -> Result<(), MailboxError> {
        let f = MailboxFile::open(name)?;
        let m = &f.map;
        loop {
            let v = m.load32(off::CLIENT_PID);
            if v == STOP {
                return Ok(());
            }
            if v >= PING && (v - PING) % 2 == 0 {
                m.store32(off::CLIENT_PID, v + 1);
                m.wake(off::CLIENT_PID);
                continue;
            }
            m.wait(off::CLIENT_PID, v, Duration::from_secs(1));
        }
    }
}
