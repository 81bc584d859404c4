//! The request state machine of the lane (docs/mailbox.md §3), as the
//! steps each side takes on the header words. Sans-I/O: the steps work on
//! any [`Words`] (the shared mapping, or the model of `lane_model.rs`
//! that searches every interleaving), and never wait; the caller waits
//! on the futex between steps.
//!
//! Every change of a state word is a compare-and-swap from the state the
//! side saw, so a change the table does not allow is seen, never lost:
//!
//! | request state | next | by |
//! |---|---|---|
//! | IDLE | REQUEST_READY, SHUTDOWN_READY | client (group READY) |
//! | REQUEST_READY, SHUTDOWN_READY | TASK_ACCEPTED | rank 0, after copying the request |
//! | TASK_ACCEPTED | TASK_DONE, TASK_FAILED | rank 0 (a task) |
//! | TASK_ACCEPTED | SHUTDOWN_DONE, TASK_FAILED | rank 0 (a shutdown) |
//! | TASK_DONE, TASK_FAILED | IDLE | client, after reading the reply |
//!
//! | group state | next | by |
//! |---|---|---|
//! | INITIALIZING | READY | rank 0 |
//! | INITIALIZING, READY | TERMINAL | either side |
//! | READY | CLOSED | rank 0, before SHUTDOWN_DONE |
//!
//! TERMINAL and CLOSED have no next state (TERMINAL is absorbing).

use crate::layout::{off, GroupState, Opcode, RequestState, TargetKind, TerminalReason};
use crate::shm::Mapping;

/// The header words a side reads and writes (acquire loads, release
/// stores, acquire-release compare-and-swap).
pub trait Words {
    /// Loads a u32 field.
    fn load32(&self, off: usize) -> u32;
    /// Stores a u32 field.
    fn store32(&self, off: usize, v: u32);
    /// Compare-and-swap of a u32 field; returns the value found.
    fn cas32(&self, off: usize, current: u32, new: u32) -> u32;
    /// Loads a u64 field.
    fn load64(&self, off: usize) -> u64;
    /// Stores a u64 field.
    fn store64(&self, off: usize, v: u64);
}

impl Words for Mapping {
    fn load32(&self, off: usize) -> u32 {
        Mapping::load32(self, off)
    }
    fn store32(&self, off: usize, v: u32) {
        Mapping::store32(self, off, v)
    }
    fn cas32(&self, off: usize, current: u32, new: u32) -> u32 {
        Mapping::cas32(self, off, current, new)
    }
    fn load64(&self, off: usize) -> u64 {
        Mapping::load64(self, off)
    }
    fn store64(&self, off: usize, v: u64) {
        Mapping::store64(self, off, v)
    }
}

/// The group state word (`None`: not a valid code).
pub fn group(w: &impl Words) -> Option<GroupState> {
    GroupState::from_code(w.load32(off::GROUP_STATE))
}

/// The request state word (`None`: not a valid code).
pub fn request(w: &impl Words) -> Option<RequestState> {
    RequestState::from_code(w.load32(off::REQUEST_STATE))
}

/// The terminal reason (Protocol if the code is unknown or missing).
pub fn terminal_reason(w: &impl Words) -> TerminalReason {
    TerminalReason::from_code(w.load32(off::TERMINAL_REASON)).unwrap_or(TerminalReason::Protocol)
}

/// Makes the group TERMINAL for `reason` unless it already is (the first
/// reason stays) or is CLOSED. Returns whether the group is TERMINAL now.
pub fn set_terminal(w: &impl Words, reason: TerminalReason) -> bool {
    w.cas32(off::TERMINAL_REASON, 0, reason.code());
    loop {
        let g = w.load32(off::GROUP_STATE);
        if g == GroupState::Terminal.code() {
            return true;
        }
        if g == GroupState::Closed.code() {
            return false;
        }
        if w.cas32(off::GROUP_STATE, g, GroupState::Terminal.code()) == g {
            return true;
        }
    }
}

/// Rank 0 publishes READY after the readiness allgather: only from
/// INITIALIZING (a group that is TERMINAL already stays so).
pub fn publish_ready(w: &impl Words) -> Result<(), GroupState> {
    let init = GroupState::Initializing.code();
    match w.cas32(off::GROUP_STATE, init, GroupState::Ready.code()) {
        v if v == init => Ok(()),
        v => Err(GroupState::from_code(v).unwrap_or(GroupState::Terminal)),
    }
}

/// What rank 0 sees when it looks at the lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank0Look {
    /// Nothing to take: wait on the request word while it holds `state`.
    /// `in_flight`: a reply waits for the client (TASK_DONE, TASK_FAILED),
    /// so the client's lease must be held.
    Wait {
        /// The request-state code to wait on.
        state: u32,
        /// Whether a request is in flight.
        in_flight: bool,
    },
    /// A request to take: REQUEST_READY, or SHUTDOWN_READY (`shutdown`).
    Take {
        /// Whether it is SHUTDOWN_READY.
        shutdown: bool,
    },
    /// The group is TERMINAL (the client made it so) or the lane is broken.
    Terminal(TerminalReason),
}

/// Rank 0 looks at the lane (group READY, then the request state).
pub fn rank0_look(w: &impl Words) -> Rank0Look {
    match group(w) {
        Some(GroupState::Ready) => {}
        Some(GroupState::Terminal) => return Rank0Look::Terminal(terminal_reason(w)),
        _ => return Rank0Look::Terminal(TerminalReason::Protocol),
    }
    let code = w.load32(off::REQUEST_STATE);
    match RequestState::from_code(code) {
        Some(RequestState::Idle) => Rank0Look::Wait {
            state: code,
            in_flight: false,
        },
        Some(RequestState::TaskDone | RequestState::TaskFailed) => Rank0Look::Wait {
            state: code,
            in_flight: true,
        },
        Some(RequestState::RequestReady) => Rank0Look::Take { shutdown: false },
        Some(RequestState::ShutdownReady) => Rank0Look::Take { shutdown: true },
        // TASK_ACCEPTED and SHUTDOWN_DONE are rank 0's to write; a client
        // that wrote them (or an unknown code) broke the lane.
        _ => Rank0Look::Terminal(TerminalReason::Protocol),
    }
}

/// The request fields rank 0 reads before it copies the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Taken {
    /// Sequence id.
    pub sequence: u64,
    /// Opcode code (checked later: a bad one is an invalid request).
    pub opcode: u32,
    /// Target code.
    pub target: u32,
    /// Target rank.
    pub target_rank: u32,
    /// Handler id.
    pub handler: u32,
    /// Payload count.
    pub payload_count: u32,
    /// Bytes in the request region.
    pub request_len: u32,
}

/// Rank 0 takes a request after [`Rank0Look::Take`]: reads its fields and
/// checks its sequence id against the last one (docs/mailbox.md §3.4: a
/// duplicate or decreasing id makes the group TERMINAL).
pub fn rank0_take(w: &impl Words, last_sequence: u64) -> Result<Taken, TerminalReason> {
    let t = Taken {
        sequence: w.load64(off::SEQUENCE),
        opcode: w.load32(off::OPCODE),
        target: w.load32(off::TARGET),
        target_rank: w.load32(off::TARGET_RANK),
        handler: w.load32(off::HANDLER),
        payload_count: w.load32(off::PAYLOAD_COUNT),
        request_len: w.load32(off::REQUEST_LEN),
    };
    if t.sequence <= last_sequence {
        return Err(TerminalReason::Sequence);
    }
    Ok(t)
}

/// Rank 0 publishes TASK_ACCEPTED once the request is in private memory
/// (from REQUEST_READY or SHUTDOWN_READY). No wake: no one waits for it
/// alone (docs/mailbox.md §3.3).
pub fn rank0_accept(w: &impl Words, shutdown: bool) -> Result<(), TerminalReason> {
    let from = if shutdown {
        RequestState::ShutdownReady
    } else {
        RequestState::RequestReady
    }
    .code();
    if w.cas32(off::REQUEST_STATE, from, RequestState::TaskAccepted.code()) != from {
        return Err(TerminalReason::Protocol);
    }
    Ok(())
}

/// Whether the reply region is rank 0's to write now: every state but
/// TASK_DONE and TASK_FAILED, in which the client reads it.
pub fn rank0_owns_reply(w: &impl Words) -> bool {
    !matches!(
        request(w),
        Some(RequestState::TaskDone | RequestState::TaskFailed)
    )
}

/// How a request ended, as rank 0 publishes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// TASK_DONE.
    Done,
    /// TASK_FAILED.
    Failed,
    /// SHUTDOWN_DONE (the group becomes CLOSED first).
    ShutdownDone,
}

/// Rank 0 publishes the outcome of the accepted request, whose reply
/// (`reply_count` records, `reply_len` bytes) is in the region. The
/// caller wakes the request word after it.
pub fn rank0_publish(
    w: &impl Words,
    outcome: Outcome,
    reply_count: u32,
    reply_len: u32,
) -> Result<(), TerminalReason> {
    w.store32(off::REPLY_COUNT, reply_count);
    w.store32(off::REPLY_LEN, reply_len);
    let to = match outcome {
        Outcome::Done => RequestState::TaskDone,
        Outcome::Failed => RequestState::TaskFailed,
        Outcome::ShutdownDone => {
            let ready = GroupState::Ready.code();
            if w.cas32(off::GROUP_STATE, ready, GroupState::Closed.code()) != ready {
                return Err(terminal_reason(w));
            }
            RequestState::ShutdownDone
        }
    };
    let acc = RequestState::TaskAccepted.code();
    if w.cas32(off::REQUEST_STATE, acc, to.code()) != acc {
        return Err(TerminalReason::Protocol);
    }
    Ok(())
}

/// Why the client may not publish now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotNow {
    /// The group is TERMINAL.
    Terminal(TerminalReason),
    /// The group is INITIALIZING or CLOSED.
    NotServing(GroupState),
    /// A request is in flight (the lane is not IDLE).
    Busy(Option<RequestState>),
}

/// Whether the client may write a request now: group READY, lane IDLE.
pub fn client_may_publish(w: &impl Words) -> Result<(), NotNow> {
    match group(w) {
        Some(GroupState::Ready) => {}
        Some(GroupState::Terminal) => return Err(NotNow::Terminal(terminal_reason(w))),
        Some(g) => return Err(NotNow::NotServing(g)),
        None => return Err(NotNow::Terminal(TerminalReason::Protocol)),
    }
    match request(w) {
        Some(RequestState::Idle) => Ok(()),
        s => Err(NotNow::Busy(s)),
    }
}

/// The header fields of a request the client publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Publish {
    /// Sequence id (one more than the last).
    pub sequence: u64,
    /// Opcode.
    pub opcode: Opcode,
    /// Target.
    pub target: TargetKind,
    /// Target rank.
    pub target_rank: u32,
    /// Handler id.
    pub handler: u32,
    /// Payload count.
    pub payload_count: u32,
    /// Bytes in the request region.
    pub request_len: u32,
}

/// The client publishes a request whose bytes are in the request region:
/// the fields, then IDLE → REQUEST_READY (SHUTDOWN_READY for SHUTDOWN).
/// The caller wakes the request word after it.
pub fn client_publish(w: &impl Words, p: &Publish) -> Result<(), NotNow> {
    w.store64(off::SEQUENCE, p.sequence);
    w.store32(off::OPCODE, p.opcode.code());
    w.store32(off::TARGET, p.target.code());
    w.store32(off::TARGET_RANK, p.target_rank);
    w.store32(off::HANDLER, p.handler);
    w.store32(off::PAYLOAD_COUNT, p.payload_count);
    w.store32(off::REQUEST_LEN, p.request_len);
    let to = if p.opcode == Opcode::Shutdown {
        RequestState::ShutdownReady
    } else {
        RequestState::RequestReady
    };
    let idle = RequestState::Idle.code();
    match w.cas32(off::REQUEST_STATE, idle, to.code()) {
        v if v == idle => Ok(()),
        v => Err(NotNow::Busy(RequestState::from_code(v))),
    }
}

/// What the client sees while its request is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientLook {
    /// Not answered yet: wait on the request word while it holds `state`.
    Pending {
        /// The request-state code to wait on.
        state: u32,
        /// Whether rank 0 has copied the request (TASK_ACCEPTED): the
        /// request region is the client's again.
        accepted: bool,
    },
    /// Answered: TASK_DONE (`failed` false) or TASK_FAILED.
    Answered {
        /// Whether it is TASK_FAILED.
        failed: bool,
    },
    /// SHUTDOWN_DONE.
    ShutdownDone,
    /// The group is TERMINAL.
    Terminal(TerminalReason),
}

/// The client looks at its request in flight.
pub fn client_look(w: &impl Words) -> ClientLook {
    if group(w) == Some(GroupState::Terminal) {
        return ClientLook::Terminal(terminal_reason(w));
    }
    let code = w.load32(off::REQUEST_STATE);
    match RequestState::from_code(code) {
        Some(RequestState::TaskDone) => ClientLook::Answered { failed: false },
        Some(RequestState::TaskFailed) => ClientLook::Answered { failed: true },
        Some(RequestState::ShutdownDone) if group(w) == Some(GroupState::Closed) => {
            ClientLook::ShutdownDone
        }
        Some(RequestState::RequestReady | RequestState::ShutdownReady) => ClientLook::Pending {
            state: code,
            accepted: false,
        },
        Some(RequestState::TaskAccepted) => ClientLook::Pending {
            state: code,
            accepted: true,
        },
        // IDLE while a request is in flight, SHUTDOWN_DONE without CLOSED,
        // or an unknown code: only a broken peer writes these.
        _ => ClientLook::Terminal(TerminalReason::Protocol),
    }
}

/// The client is done with the reply: TASK_DONE/TASK_FAILED → IDLE.
pub fn client_ack(w: &impl Words) -> Result<(), TerminalReason> {
    for s in [RequestState::TaskDone, RequestState::TaskFailed] {
        if w.cas32(off::REQUEST_STATE, s.code(), RequestState::Idle.code()) == s.code() {
            return Ok(());
        }
    }
    Err(TerminalReason::Protocol)
}
