//! The rank side (docs/mailbox.md §5): [`MailboxServer`], the loop every
//! rank of a mailbox job runs after joining.
//!
//! All ranks complete a readiness allgather (which also compares the
//! ranks' handler tables); then rank 0 alone opens the mailbox by name
//! (from [`crate::MAILBOX_ENV`]), checks it is a fresh version-1 mailbox
//! for this world size, and publishes READY. Rank 0 parks on the request
//! word (a shared futex) with a timeout of [`RANK0_TICK`]; each timed wake
//! looks at the transport's error, at a TERMINAL made by the client and,
//! while a reply waits for the client, at the client's lease. The other
//! ranks wait in the envelope bcast.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use sha2::{Digest, Sha256};
use sperli_collective::{Comm, Endpoint};
use sperli_wire::abort::AbortReason;

use crate::envelope::Envelope;
use crate::error::{MailboxCode, MailboxError};
use crate::fanout::{self, Broken};
use crate::files::MailboxFile;
use crate::lane::{self, Outcome, Rank0Look};
use crate::layout::{
    handler_id, off, Header, LayoutError, Opcode, TargetKind, TerminalReason, HEADER_LEN,
    REGION_LEN, REPLY_REGION, REQUEST_REGION, RESERVED_START,
};
use crate::records::{split_request, RankError, RankReply, Target};

/// How long rank 0 sleeps on the request word at most before it looks at
/// the transport's error, the group state and the client's lease.
pub const RANK0_TICK: Duration = Duration::from_millis(100);
/// Error type of a request rank 0 refuses without running it.
pub const INVALID_REQUEST: &str = "invalid-request";
/// Error type of a request for a handler no rank registered.
pub const UNKNOWN_HANDLER: &str = "unknown-handler";
/// Error type of a handler that panicked.
pub const PANIC: &str = "panic";
/// Error type of the terminal record when a fixed header field changed
/// while rank 0 served (docs/mailbox.md §2.3).
pub const LAYOUT: &str = "layout";

/// An ordinary task error: returned to the client (H1642), the group goes
/// on serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError {
    /// A short type name (cut to 64 bytes), e.g. `ValueError`.
    pub error_type: String,
    /// What went wrong (cut to 1024 bytes).
    pub message: String,
}

impl TaskError {
    /// A task error of type `error_type`.
    pub fn new(error_type: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            error_type: error_type.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error_type, self.message)
    }
}

/// What a handler gets: the request and, when every rank runs it (GROUP,
/// PER_RANK), the communicator.
pub struct Task<'a> {
    /// The request's sequence id.
    pub sequence: u64,
    /// TASK or CONTROL.
    pub opcode: Opcode,
    /// Its target.
    pub target: Target,
    /// Its handler id.
    pub handler: u32,
    /// This rank's payload (the GROUP payload, its PER_RANK payload i, or
    /// the RANK payload).
    pub payload: &'a [u8],
    /// This rank.
    pub rank: u32,
    /// The job size.
    pub size: u32,
    pub(crate) comm: Option<&'a mut Comm<Endpoint>>,
}

impl Task<'_> {
    /// The communicator, for a GROUP or PER_RANK request (every rank runs
    /// the handler, so each collective is made on every rank). `None` for
    /// a RANK request: only one rank runs it. A handler must make the same
    /// collective calls on every rank, also when it fails.
    pub fn comm(&mut self) -> Option<&mut Comm<Endpoint>> {
        self.comm.as_deref_mut()
    }
}

/// A task or control handler: bytes in, bytes out.
pub type Handler = Box<dyn FnMut(&mut Task<'_>) -> Result<Vec<u8>, TaskError> + Send>;

/// The handlers of a server, by opcode and id.
#[derive(Default)]
pub(crate) struct Handlers {
    tasks: BTreeMap<u32, Handler>,
    controls: BTreeMap<u32, Handler>,
}

impl Handlers {
    pub(crate) fn call(&mut self, task: &mut Task<'_>) -> Result<Vec<u8>, TaskError> {
        let map = match task.opcode {
            Opcode::Control => &mut self.controls,
            _ => &mut self.tasks,
        };
        let Some(h) = map.get_mut(&task.handler) else {
            return Err(TaskError::new(
                UNKNOWN_HANDLER,
                format!("no {} handler {:#010x}", task.opcode, task.handler),
            ));
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| h(task))) {
            Ok(r) => r,
            Err(p) => {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into());
                Err(TaskError::new(PANIC, what))
            }
        }
    }

    /// The table's fingerprint: the first 8 bytes of SHA-256 over every
    /// (kind, id) in order; the readiness allgather compares it.
    fn fingerprint(&self) -> u64 {
        let mut h = Sha256::new();
        for (kind, map) in [(b'T', &self.tasks), (b'C', &self.controls)] {
            for id in map.keys() {
                h.update([kind]);
                h.update(id.to_le_bytes());
            }
        }
        let d = h.finalize();
        u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
    }
}

/// The rank side of a mailbox job (docs/mailbox.md §5).
///
/// ```no_run
/// use sperli_collective::Comm;
/// use sperli_mailbox::{MailboxServer, TaskError};
/// let comm = Comm::from_stdin()?;
/// MailboxServer::new()
///     .task("echo", |t| Ok(t.payload.to_vec()))
///     .task("fail", |_| Err(TaskError::new("ValueError", "always")))
///     .serve(comm)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct MailboxServer {
    handlers: Handlers,
    names: BTreeMap<(u8, u32), String>,
}

impl MailboxServer {
    /// A server without handlers (PING and SHUTDOWN work all the same).
    pub fn new() -> Self {
        Self::default()
    }

    fn add(mut self, kind: u8, id: u32, name: String, f: Handler) -> Self {
        if let Some(old) = self.names.insert((kind, id), name.clone()) {
            panic!(
                "handler {name:?} has the id {id:#010x} of {old:?}: register another name or id"
            );
        }
        match kind {
            b'T' => self.handlers.tasks.insert(id, f),
            _ => self.handlers.controls.insert(id, f),
        };
        self
    }

    /// Registers a TASK handler by name (its id is the name's FNV-1a).
    /// Panics if the id is taken.
    pub fn task(
        self,
        name: &str,
        f: impl FnMut(&mut Task<'_>) -> Result<Vec<u8>, TaskError> + Send + 'static,
    ) -> Self {
        self.add(b'T', handler_id(name), name.to_string(), Box::new(f))
    }

    /// Registers a TASK handler by id. Panics if the id is taken.
    pub fn task_id(
        self,
        id: u32,
        f: impl FnMut(&mut Task<'_>) -> Result<Vec<u8>, TaskError> + Send + 'static,
    ) -> Self {
        self.add(b'T', id, format!("#{id}"), Box::new(f))
    }

    /// Registers a CONTROL handler by name.
    pub fn control(
        self,
        name: &str,
        f: impl FnMut(&mut Task<'_>) -> Result<Vec<u8>, TaskError> + Send + 'static,
    ) -> Self {
        self.add(b'C', handler_id(name), name.to_string(), Box::new(f))
    }

    /// Serves until SHUTDOWN, then ends the job step normally (BYE).
    /// Rank 0 takes the mailbox name from [`crate::MAILBOX_ENV`]. Returns
    /// the error that made the group TERMINAL otherwise (after rank 0 sent
    /// ABORT: every rank ends).
    pub fn serve(self, comm: Comm<Endpoint>) -> Result<(), MailboxError> {
        let name = std::env::var(crate::MAILBOX_ENV).ok();
        self.serve_named(comm, name.as_deref())
    }

    /// As [`MailboxServer::serve`] with the mailbox name given (rank 0
    /// needs it; the other ranks ignore it).
    pub fn serve_named(self, comm: Comm<Endpoint>, name: Option<&str>) -> Result<(), MailboxError> {
        // The server reports the job's errors to its client itself (the
        // group goes TERMINAL): its endpoint returns them instead of
        // ending the process (sperli_transport::ErrorMode).
        comm.link().set_errors(sperli_transport::ErrorMode::Return);
        let rank = comm.rank();
        // Readiness allgather: [handler table fingerprint, ready] per rank.
        let named = rank != 0 || name.is_some_and(|n| crate::files::check_name(n).is_ok());
        let ready = comm.allgather(&[self.handlers.fingerprint(), u64::from(named)])?;
        let mine = ready[0];
        let startup_error = ready.chunks(2).enumerate().find_map(|(r, v)| {
            if v[1] == 0 {
                Some((
                    r as u32,
                    "rank 0 has no valid mailbox name in its environment".to_string(),
                ))
            } else if v[0] != mine {
                Some((
                    r as u32,
                    format!("rank {r} registered other handlers than rank 0"),
                ))
            } else {
                None
            }
        });
        if rank != 0 {
            if let Some((_, msg)) = startup_error {
                return Err(MailboxError::Stopped {
                    reason: TerminalReason::Startup,
                    detail: Some(RankError {
                        rank: 0,
                        error_type: "startup".into(),
                        message: msg,
                    }),
                });
            }
            return self.serve_peer(comm);
        }
        let Some(name) = name else {
            return Err(MailboxError::NoMailboxEnv);
        };
        let file = match MailboxFile::attach_rank0(name, comm.size()) {
            Ok(f) => f,
            Err(e) => {
                comm.link().abort(
                    AbortReason::Application,
                    MailboxCode::H1640.number(),
                    &abort_text(&e.to_string()),
                );
                return Err(e);
            }
        };
        let mut rank0 = Rank0 {
            comm,
            file,
            handlers: self.handlers,
            last_sequence: 0,
        };
        if let Some((r, msg)) = startup_error {
            return Err(rank0.terminal(TerminalReason::Startup, r, "startup", &msg));
        }
        if let Err(g) = lane::publish_ready(&rank0.file.map) {
            let msg = format!("the group was {g} before READY");
            return Err(rank0.terminal(lane::terminal_reason(&rank0.file.map), 0, "startup", &msg));
        }
        rank0.file.map.wake(off::GROUP_STATE);
        rank0.serve()
    }

    fn serve_peer(mut self, mut comm: Comm<Endpoint>) -> Result<(), MailboxError> {
        loop {
            let r = fanout::recv_envelope(&mut comm).and_then(|env| {
                fanout::run(&mut comm, &mut self.handlers, &env, Vec::new(), Vec::new())
                    .map(|_| env)
            });
            match r {
                Ok(env) if env.opcode == Opcode::Shutdown => {
                    comm.into_link().finish()?;
                    return Ok(());
                }
                Ok(_) => {}
                Err(b) => {
                    let message = b.to_string();
                    if let Broken::Peer { .. } = b {
                        comm.link().abort(
                            AbortReason::Application,
                            MailboxCode::H1643.number(),
                            &abort_text(&message),
                        );
                    }
                    return Err(MailboxError::Stopped {
                        reason: TerminalReason::Collective,
                        detail: Some(RankError {
                            rank: comm.rank(),
                            error_type: "collective".into(),
                            message,
                        }),
                    });
                }
            }
        }
    }
}

fn abort_text(s: &str) -> String {
    sperli_wire::abort::Abort::truncate_message(s).to_string()
}

/// Rank 0's state.
struct Rank0 {
    comm: Comm<Endpoint>,
    file: MailboxFile,
    handlers: Handlers,
    last_sequence: u64,
}

impl Rank0 {
    /// Makes the group TERMINAL (with a record of `rank`'s error when
    /// the reply region is rank 0's), wakes the client, ends the job with
    /// ABORT, and returns the error.
    fn terminal(
        &mut self,
        reason: TerminalReason,
        rank: u32,
        error_type: &str,
        message: &str,
    ) -> MailboxError {
        let map = &self.file.map;
        let detail = RankError {
            rank,
            error_type: error_type.to_string(),
            message: message.to_string(),
        };
        if lane::rank0_owns_reply(map) {
            let mut b = Vec::new();
            RankReply {
                rank,
                outcome: Err(detail.clone()),
            }
            .encode_into(&mut b);
            map.write(REPLY_REGION, &b);
            map.store32(off::REPLY_COUNT, 1);
            map.store32(off::REPLY_LEN, b.len() as u32);
        }
        let terminal = lane::set_terminal(map, reason);
        map.wake(off::REQUEST_STATE);
        map.wake(off::GROUP_STATE);
        let text = format!("mailbox group TERMINAL: {reason}: {detail}");
        self.comm.link().abort(
            AbortReason::Application,
            MailboxCode::H1643.number(),
            &abort_text(&text),
        );
        if terminal {
            MailboxError::Terminal {
                reason: lane::terminal_reason(map),
                detail: Some(detail),
            }
        } else {
            // CLOSED already: the group word stays; say what is true.
            MailboxError::Stopped {
                reason,
                detail: Some(detail),
            }
        }
    }

    /// The fixed fields of the header (magic, version, world size, layout
    /// size, reserved bytes) as at the attach: checked at every look, so a
    /// change while serving makes the group TERMINAL (docs/mailbox.md
    /// §2.3, "after the attach"). Reads bytes 0-23 and 80-255 only.
    fn check_fixed(&self) -> Result<(), LayoutError> {
        let mut b = [0u8; HEADER_LEN];
        self.file.map.read(0, &mut b[..off::GROUP_STATE]);
        self.file.map.read(RESERVED_START, &mut b[RESERVED_START..]);
        Header::check_fixed(&b, self.comm.size())
    }

    /// Waits for the next request; returns whether it is a SHUTDOWN.
    fn wait_request(&mut self) -> Result<bool, MailboxError> {
        loop {
            if let Some(e) = self.comm.link().error() {
                let rank = match &e {
                    sperli_wire::Error::PeerLost { peer, .. } => *peer,
                    sperli_wire::Error::AbortedByPeer { from, .. } => *from,
                    _ => 0,
                };
                return Err(self.terminal(
                    TerminalReason::Collective,
                    rank,
                    "collective",
                    &e.to_string(),
                ));
            }
            if let Err(e) = self.check_fixed() {
                let msg = format!("the header changed while serving: {e}");
                return Err(self.terminal(TerminalReason::Protocol, 0, LAYOUT, &msg));
            }
            match lane::rank0_look(&self.file.map) {
                Rank0Look::Take { shutdown } => return Ok(shutdown),
                Rank0Look::Wait { state, in_flight } => {
                    // A client acks (IDLE) before it lets the lease go: a
                    // lease gone while the reply still waits is a lost
                    // client; one gone after the ack is a client that ended.
                    if in_flight
                        && !self.file.lease_held()
                        && self.file.map.load32(off::REQUEST_STATE) == state
                    {
                        return Err(self.terminal(
                            TerminalReason::ClientLost,
                            0,
                            "client-lost",
                            "the client's lease ended before it took its reply",
                        ));
                    }
                    self.file.map.wait(off::REQUEST_STATE, state, RANK0_TICK);
                }
                Rank0Look::Terminal(reason) => {
                    let msg = format!("the lane became TERMINAL: {reason}");
                    return Err(self.terminal(reason, 0, "terminal", &msg));
                }
            }
        }
    }

    fn serve(mut self) -> Result<(), MailboxError> {
        loop {
            let shutdown = self.wait_request()?;
            let map = &self.file.map;
            let t = match lane::rank0_take(map, self.last_sequence) {
                Ok(t) => t,
                Err(reason) => {
                    let got = map.load64(off::SEQUENCE);
                    let msg = format!("sequence id {got} after {}", self.last_sequence);
                    return Err(self.terminal(reason, 0, "sequence", &msg));
                }
            };
            self.last_sequence = t.sequence;
            // Copy the whole request into private memory, then accept.
            let len = (t.request_len as usize).min(REGION_LEN);
            let mut request = vec![0u8; len];
            map.read(REQUEST_REGION, &mut request);
            if let Err(reason) = lane::rank0_accept(map, shutdown) {
                return Err(self.terminal(
                    reason,
                    0,
                    "protocol",
                    "the request state changed under rank 0",
                ));
            }
            let checked = check_request(&t, &request, self.comm.size(), shutdown);
            let (env, ranges) = match checked {
                Ok(x) => x,
                Err(msg) => {
                    let r = RankReply {
                        rank: 0,
                        outcome: Err(RankError {
                            rank: 0,
                            error_type: INVALID_REQUEST.into(),
                            message: msg,
                        }),
                    };
                    self.publish(Outcome::Failed, &[r])?;
                    continue;
                }
            };
            let records =
                match fanout::run(&mut self.comm, &mut self.handlers, &env, request, ranges) {
                    Ok(Some(r)) => r,
                    Ok(None) => unreachable!("rank 0 gets the records"),
                    Err(b) => {
                        let rank = match &b {
                            Broken::Peer { rank, .. } => *rank,
                            Broken::Comm(sperli_wire::Error::PeerLost { peer, .. }) => *peer,
                            Broken::Comm(sperli_wire::Error::AbortedByPeer { from, .. }) => *from,
                            Broken::Comm(_) => 0,
                        };
                        return Err(self.terminal(
                            TerminalReason::Collective,
                            rank,
                            "collective",
                            &b.to_string(),
                        ));
                    }
                };
            let failed = records.iter().any(|r| r.outcome.is_err());
            let outcome = match (shutdown, failed) {
                (true, _) => Outcome::ShutdownDone,
                (false, true) => Outcome::Failed,
                (false, false) => Outcome::Done,
            };
            self.publish(outcome, &records)?;
            if shutdown {
                self.comm.into_link().finish()?;
                return Ok(());
            }
        }
    }

    /// Writes the records into the reply region and publishes `outcome`.
    fn publish(&mut self, outcome: Outcome, records: &[RankReply]) -> Result<(), MailboxError> {
        let mut b = Vec::with_capacity(records.iter().map(RankReply::encoded_len).sum());
        for r in records {
            r.encode_into(&mut b);
        }
        debug_assert!(
            b.len() <= REGION_LEN,
            "the fan-out keeps replies within the region"
        );
        let map = &self.file.map;
        map.write(REPLY_REGION, &b);
        if let Err(reason) = lane::rank0_publish(map, outcome, records.len() as u32, b.len() as u32)
        {
            return Err(self.terminal(
                reason,
                0,
                "protocol",
                "the lane changed while rank 0 ran the request",
            ));
        }
        map.wake(off::REQUEST_STATE);
        Ok(())
    }
}

/// Checks a copied request against docs/mailbox.md §4.1 and builds its
/// envelope; a refusal is the message of an `invalid-request` record.
fn check_request(
    t: &lane::Taken,
    request: &[u8],
    world: u32,
    shutdown: bool,
) -> Result<(Envelope, Vec<std::ops::Range<usize>>), String> {
    if t.request_len as usize > REGION_LEN {
        return Err(format!(
            "request length {} exceeds the region",
            t.request_len
        ));
    }
    let opcode = Opcode::from_code(t.opcode).ok_or_else(|| {
        format!(
            "opcode {} is none of TASK (1), CONTROL (2), PING (3), SHUTDOWN (4)",
            t.opcode
        )
    })?;
    if shutdown != (opcode == Opcode::Shutdown) {
        return Err(format!(
            "{opcode} published as {}",
            if shutdown {
                "SHUTDOWN_READY"
            } else {
                "REQUEST_READY"
            }
        ));
    }
    let target = match (TargetKind::from_code(t.target), t.target_rank) {
        (Some(TargetKind::Group), 0) => Target::Group,
        (Some(TargetKind::PerRank), 0) => Target::PerRank,
        (Some(TargetKind::Rank), r) => Target::Rank(r),
        (Some(k), r) => {
            return Err(format!(
                "a {k} request has target rank 0 (only RANK names a rank), got {r}"
            ))
        }
        (None, _) => {
            return Err(format!(
                "target {} is none of GROUP (1), RANK (2), PER_RANK (3)",
                t.target
            ))
        }
    };
    let ranges = split_request(opcode, target, t.payload_count, request, world)
        .map_err(|e| e.to_string())?;
    let group_len = match (opcode, target) {
        (Opcode::Task | Opcode::Control, Target::Group) => request.len() as u32,
        _ => 0,
    };
    let handler = match opcode {
        Opcode::Task | Opcode::Control => t.handler,
        _ if t.handler != 0 => return Err(format!("{opcode} with handler {}", t.handler)),
        _ => 0,
    };
    Ok((
        Envelope {
            sequence: t.sequence,
            opcode,
            target,
            handler,
            group_len,
        },
        ranges,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(opcode: u32, target: u32, target_rank: u32) -> lane::Taken {
        lane::Taken {
            sequence: 1,
            opcode,
            target,
            target_rank,
            handler: 7,
            payload_count: 1,
            request_len: 0,
        }
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        let msg = |t: lane::Taken| check_request(&t, &[], 4, false).unwrap_err();
        assert_eq!(
            msg(taken(1, 9, 0)),
            "target 9 is none of GROUP (1), RANK (2), PER_RANK (3)"
        );
        assert_eq!(
            msg(taken(1, 1, 2)),
            "a GROUP request has target rank 0 (only RANK names a rank), got 2"
        );
        assert_eq!(
            msg(taken(9, 1, 0)),
            "opcode 9 is none of TASK (1), CONTROL (2), PING (3), SHUTDOWN (4)"
        );
        assert!(check_request(&taken(1, 2, 3), &[], 4, false).is_ok());
    }
}
