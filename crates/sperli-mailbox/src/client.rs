//! The client side (docs/mailbox.md §7): create or attach a mailbox,
//! submit requests and read their replies, ping, shut the group down.
//!
//! One client at a time: the first request takes the client lease (an
//! exclusive flock on the mailbox file) and keeps it until the
//! [`Mailbox`] is dropped. Waits are futex waits on the request word with
//! a timeout of [`CLIENT_TICK`], after which the client looks at the
//! launcher it started (its exit makes the group TERMINAL) and at its
//! deadline.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::MailboxError;
use crate::files::{MailboxFile, Manifest};
use crate::job::JobWatch;
use crate::lane::{self, ClientLook, NotNow, Publish};
use crate::layout::{
    off, GroupState, Header, Opcode, RequestState, TerminalReason, LAYOUT_SIZE, REPLY_REGION,
    REQUEST_REGION, VERSION,
};
use crate::records::{plan_request, RankError, RankReply, Target};

/// How long one futex wait of the client lasts at most before it looks
/// at the launcher and its deadline again.
pub const CLIENT_TICK: Duration = Duration::from_millis(50);
/// The default timeout of a request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A handler id: a number, or a name (its 32-bit FNV-1a, docs/mailbox.md §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HandlerId(pub u32);

impl From<u32> for HandlerId {
    fn from(v: u32) -> Self {
        HandlerId(v)
    }
}

impl From<&str> for HandlerId {
    fn from(name: &str) -> Self {
        HandlerId(crate::layout::handler_id(name))
    }
}

/// The answer to one request: one record per rank that executed it, in
/// rank order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replies {
    /// The request's sequence id.
    pub sequence: u64,
    /// The records.
    pub replies: Vec<RankReply>,
}

impl Replies {
    /// The record of `rank`, if it executed the request.
    pub fn get(&self, rank: u32) -> Option<&RankReply> {
        self.replies.iter().find(|r| r.rank == rank)
    }

    /// The reply bytes of `rank`, if it executed the request and succeeded.
    pub fn ok(&self, rank: u32) -> Option<&[u8]> {
        self.get(rank).and_then(|r| r.outcome.as_deref().ok())
    }

    /// Every error, in rank order.
    pub fn errors(&self) -> impl Iterator<Item = &RankError> {
        self.replies.iter().filter_map(|r| r.outcome.as_ref().err())
    }

    /// Whether some rank failed.
    pub fn failed(&self) -> bool {
        self.errors().next().is_some()
    }
}

/// A mailbox seen from the client (docs/mailbox.md §7).
///
/// ```no_run
/// use sperli_mailbox::{Mailbox, Target};
/// let mut mb = Mailbox::attach("my-job")?;
/// mb.wait_ready(std::time::Duration::from_secs(30))?;
/// let replies = mb.submit("sum", Target::Group, &[&7u64.to_le_bytes()])?;
/// println!("{} ranks answered", replies.replies.len());
/// mb.shutdown()?;
/// # Ok::<(), sperli_mailbox::MailboxError>(())
/// ```
#[derive(Debug)]
pub struct Mailbox {
    name: String,
    file: MailboxFile,
    world_size: u32,
    leased: bool,
    timeout: Duration,
    pub(crate) job: Option<JobWatch>,
    /// The launcher's pid from the manifest (for a client that did not
    /// start the job: a launcher that is gone makes the group TERMINAL).
    launcher_pid: Option<u32>,
    /// Whether this side made the group TERMINAL (then there is no
    /// record of rank 0 to read).
    set_terminal: bool,
}

fn not_now(e: NotNow) -> MailboxError {
    match e {
        NotNow::Terminal(reason) => MailboxError::Terminal {
            reason,
            detail: None,
        },
        NotNow::NotServing(group) => MailboxError::NotServing { group },
        NotNow::Busy(_) => MailboxError::Terminal {
            reason: TerminalReason::Protocol,
            detail: None,
        },
    }
}

impl Mailbox {
    /// Creates mailbox `name` for a job of `world_size` ranks: a file of
    /// mode 0600 in `/dev/shm` named after this user, with the fresh
    /// header (docs/mailbox.md §1, §2.2). `sperli run --mailbox NAME`
    /// calls it (and writes the manifest); the caller removes the file
    /// with [`crate::files::remove`] when the job is over.
    pub fn create(name: &str, world_size: u32) -> Result<Self, MailboxError> {
        let file = MailboxFile::create(name, world_size)?;
        Ok(Self::new(name, file, world_size))
    }

    fn new(name: &str, file: MailboxFile, world_size: u32) -> Self {
        Self {
            name: name.to_string(),
            file,
            world_size,
            leased: false,
            timeout: DEFAULT_TIMEOUT,
            job: None,
            launcher_pid: None,
            set_terminal: false,
        }
    }

    /// Attaches to mailbox `name` through its manifest: checks the
    /// manifest, the file (owner, mode 0600, size) and the header (magic,
    /// version, layout size, world size as the manifest says, reserved
    /// bytes zero, valid codes); fails closed on any difference (H1640).
    /// A TERMINAL group is refused (H1643); the group may still be
    /// INITIALIZING ([`Mailbox::wait_ready`]).
    pub fn attach(name: &str) -> Result<Self, MailboxError> {
        let manifest = Manifest::read(name)?.ok_or_else(|| MailboxError::NotFound {
            path: crate::files::manifest_path(name),
        })?;
        for (field, m, want) in [
            ("version", u64::from(manifest.version), u64::from(VERSION)),
            ("layout size", manifest.layout_size, LAYOUT_SIZE),
        ] {
            if m != want {
                return Err(MailboxError::ManifestMismatch {
                    field,
                    manifest: m,
                    header: want,
                });
            }
        }
        let file = MailboxFile::open(name)?;
        let h = file.header()?;
        h.check_world(manifest.world_size)?;
        match h.group {
            GroupState::Terminal => {
                return Err(MailboxError::Terminal {
                    reason: h.terminal.unwrap_or(TerminalReason::Protocol),
                    detail: None,
                })
            }
            GroupState::Closed => return Err(MailboxError::NotServing { group: h.group }),
            GroupState::Initializing | GroupState::Ready => {}
        }
        let mut mb = Self::new(name, file, manifest.world_size);
        mb.launcher_pid = Some(manifest.launcher_pid);
        Ok(mb)
    }

    /// The mailbox name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The mailbox file.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// The manifest file.
    pub fn manifest_path(&self) -> PathBuf {
        crate::files::manifest_path(&self.name)
    }

    /// The job's world size.
    pub fn world_size(&self) -> u32 {
        self.world_size
    }

    /// A decoded copy of the header (H1640 if it does not decode).
    pub fn header(&self) -> Result<Header, MailboxError> {
        self.file.header()
    }

    /// The timeout of each later request (default 60 s). A request that
    /// passes it makes the group TERMINAL (docs/mailbox.md §3.4).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The launcher's pid, for a mailbox of a job this client started.
    pub fn launcher_pid(&self) -> Option<u32> {
        self.job.as_ref().map(JobWatch::pid)
    }

    /// Makes the group TERMINAL for `reason` (absorbing; a CLOSED group
    /// stays CLOSED), and wakes rank 0.
    pub fn make_terminal(&mut self, reason: TerminalReason) {
        if lane::set_terminal(&self.file.map, reason) {
            self.set_terminal = true;
        }
        self.file.map.wake(off::REQUEST_STATE);
        self.file.map.wake(off::GROUP_STATE);
    }

    /// Whether the launcher is gone: the child this client started has
    /// exited, or the process the manifest names no longer exists.
    fn launcher_gone(&mut self) -> bool {
        match (&mut self.job, self.launcher_pid) {
            (Some(job), _) => job.exited(),
            (None, Some(pid)) => i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
                .is_some_and(|p| {
                    rustix::process::test_kill_process(p) == Err(rustix::io::Errno::SRCH)
                }),
            (None, None) => false,
        }
    }

    /// The launcher has exited: the group is TERMINAL (docs/mailbox.md §3.4).
    fn check_launcher(&mut self) -> Result<(), MailboxError> {
        if self.launcher_gone() {
            self.make_terminal(TerminalReason::LauncherExit);
            return Err(MailboxError::Terminal {
                reason: lane::terminal_reason(&self.file.map),
                detail: None,
            });
        }
        Ok(())
    }

    /// Waits until rank 0 has published READY (after every rank joined and
    /// the readiness allgather), at most `timeout` (H1644). At once and at
    /// every [`CLIENT_TICK`] it looks at the launcher: a launcher this
    /// client started that exited ends the wait with
    /// [`MailboxError::LauncherEnded`]; for an attached client, a
    /// manifest's launcher that is gone makes the group TERMINAL
    /// (reason 5, H1643; docs/mailbox.md §3.4).
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<(), MailboxError> {
        let deadline = Instant::now() + timeout;
        loop {
            let code = self.file.map.load32(off::GROUP_STATE);
            match GroupState::from_code(code) {
                Some(GroupState::Ready) => return Ok(()),
                Some(GroupState::Initializing) => {}
                Some(GroupState::Terminal) => {
                    return Err(MailboxError::Terminal {
                        reason: lane::terminal_reason(&self.file.map),
                        detail: None,
                    })
                }
                Some(g) => return Err(MailboxError::NotServing { group: g }),
                None => {
                    return Err(crate::layout::LayoutError::Code {
                        field: "group state",
                        got: code,
                    }
                    .into())
                }
            }
            // Every tick looks at the launcher (docs/mailbox.md §3.4): the
            // child this client started, or the manifest's launcher_pid.
            if let Some(job) = &mut self.job {
                if let Some(status) = job.exit_status() {
                    return Err(MailboxError::LauncherEnded { status });
                }
            } else {
                self.check_launcher()?;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(MailboxError::Timeout {
                    what: "waiting for READY",
                    after_ms: timeout.as_millis() as u64,
                    state: lane::request(&self.file.map).unwrap_or(RequestState::Idle),
                });
            }
            self.file
                .map
                .wait(off::GROUP_STATE, code, CLIENT_TICK.min(deadline - now));
        }
    }

    /// Takes the client lease, waiting up to the timeout while another
    /// client holds it (H1645 then).
    fn lease(&mut self) -> Result<(), MailboxError> {
        if self.leased {
            return Ok(());
        }
        let deadline = Instant::now() + self.timeout;
        while !self.file.try_lease()? {
            if Instant::now() >= deadline {
                return Err(MailboxError::Busy {
                    pid: self.file.map.load32(off::CLIENT_PID),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.leased = true;
        self.file.map.store32(off::CLIENT_PID, std::process::id());
        Ok(())
    }

    /// Publishes a request; returns its sequence id.
    fn publish(
        &mut self,
        opcode: Opcode,
        target: Target,
        handler: u32,
        payloads: &[&[u8]],
    ) -> Result<u64, MailboxError> {
        let lens: Vec<usize> = payloads.iter().map(|p| p.len()).collect();
        let plan = plan_request(opcode, target, &lens, self.world_size)?;
        self.lease()?;
        self.check_launcher()?;
        if let Err(e) = lane::client_may_publish(&self.file.map) {
            if let NotNow::Busy(_) = e {
                // Under a fresh lease the lane is not IDLE: a client died
                // with a request in flight. Fail closed (docs/mailbox.md §3.4).
                self.make_terminal(TerminalReason::ClientLost);
                return Err(MailboxError::Terminal {
                    reason: lane::terminal_reason(&self.file.map),
                    detail: None,
                });
            }
            return Err(not_now(e));
        }
        let map = &self.file.map;
        map.write(REQUEST_REGION, &plan.table);
        for (p, at) in payloads.iter().zip(&plan.offsets) {
            map.write(REQUEST_REGION + at, p);
        }
        let (kind, target_rank) = target.kind();
        let Some(sequence) = map.load64(off::SEQUENCE).checked_add(1) else {
            self.make_terminal(TerminalReason::Protocol);
            return Err(MailboxError::Terminal {
                reason: TerminalReason::Protocol,
                detail: None,
            });
        };
        let map = &self.file.map;
        lane::client_publish(
            map,
            &Publish {
                sequence,
                opcode,
                target: kind,
                target_rank,
                handler,
                payload_count: plan.payload_count,
                request_len: plan.request_len,
            },
        )
        .map_err(not_now)?;
        map.wake(off::REQUEST_STATE);
        Ok(sequence)
    }

    /// The error for a TERMINAL group seen while request `in_flight` was
    /// published: with rank 0's record when it left one.
    fn terminal(&self, reason: TerminalReason, in_flight: bool) -> MailboxError {
        let map = &self.file.map;
        let mut detail = None;
        let state = lane::request(map);
        if in_flight
            && !self.set_terminal
            && matches!(
                state,
                Some(
                    RequestState::RequestReady
                        | RequestState::ShutdownReady
                        | RequestState::TaskAccepted
                )
            )
            && map.load32(off::REPLY_COUNT) == 1
        {
            let len = map.load32(off::REPLY_LEN) as usize;
            let mut b = vec![0u8; len.min(crate::layout::REGION_LEN)];
            map.read(REPLY_REGION, &mut b);
            if let Ok(mut r) = RankReply::decode_all(&b, 1) {
                detail = r.pop().and_then(|r| r.outcome.err());
            }
        }
        MailboxError::Terminal { reason, detail }
    }

    /// Waits for the answer to `sequence`, at most until `deadline`.
    fn wait_answer(
        &mut self,
        sequence: u64,
        target: Target,
        opcode: Opcode,
        deadline: Instant,
        mut on_accept: Option<&mut dyn FnMut(&Self)>,
    ) -> Result<Replies, MailboxError> {
        loop {
            match lane::client_look(&self.file.map) {
                ClientLook::Pending { state, accepted } => {
                    if accepted {
                        if let Some(f) = on_accept.take() {
                            f(self);
                        }
                    }
                    self.check_launcher()
                        .map_err(|_| self.terminal(TerminalReason::LauncherExit, true))?;
                    let now = Instant::now();
                    if now >= deadline {
                        self.make_terminal(TerminalReason::Timeout);
                        // A runtime timeout ends the whole job this client
                        // started (docs/mailbox.md §3.4).
                        if let Some(job) = &mut self.job {
                            job.end();
                        }
                        return Err(MailboxError::Timeout {
                            what: "waiting for the reply",
                            after_ms: self.timeout.as_millis() as u64,
                            state: RequestState::from_code(state).unwrap_or(RequestState::Idle),
                        });
                    }
                    // Rank 0 stores TASK_ACCEPTED without a wake: while a
                    // copy-before-accept hook waits for it, look often.
                    let tick = if on_accept.is_some() {
                        Duration::from_millis(1)
                    } else {
                        CLIENT_TICK
                    };
                    self.file
                        .map
                        .wait(off::REQUEST_STATE, state, tick.min(deadline - now));
                }
                ClientLook::Answered { failed } => {
                    let r = self.read_replies(sequence, target, opcode);
                    let acked = lane::client_ack(&self.file.map);
                    let replies = r?;
                    if acked.is_err() {
                        return Err(self.terminal(lane::terminal_reason(&self.file.map), false));
                    }
                    if failed != replies.failed() {
                        self.make_terminal(TerminalReason::Protocol);
                        return Err(crate::records::RecordError::Invalid {
                            index: 0,
                            what: "TASK_DONE/TASK_FAILED does not match the records",
                        }
                        .into());
                    }
                    if failed {
                        return Err(MailboxError::TaskFailed(Box::new(replies)));
                    }
                    return Ok(replies);
                }
                ClientLook::ShutdownDone if opcode == Opcode::Shutdown => {
                    return self.read_replies(sequence, target, opcode);
                }
                ClientLook::ShutdownDone => {
                    self.make_terminal(TerminalReason::Protocol);
                    return Err(MailboxError::NotServing {
                        group: GroupState::Closed,
                    });
                }
                ClientLook::Terminal(reason) => return Err(self.terminal(reason, true)),
            }
        }
    }

    /// Reads and checks the reply records: one per executing rank, in
    /// rank order (GROUP, PER_RANK, PING, SHUTDOWN: every rank; RANK r:
    /// rank r), or one record of rank 0 for a request it refused.
    fn read_replies(
        &mut self,
        sequence: u64,
        target: Target,
        opcode: Opcode,
    ) -> Result<Replies, MailboxError> {
        let map = &self.file.map;
        let count = map.load32(off::REPLY_COUNT);
        let len = map.load32(off::REPLY_LEN) as usize;
        if len > crate::layout::REGION_LEN {
            self.make_terminal(TerminalReason::Protocol);
            return Err(crate::layout::LayoutError::Length {
                field: "reply length",
                got: len as u32,
            }
            .into());
        }
        let mut b = vec![0u8; len];
        map.read(REPLY_REGION, &mut b);
        let replies = match RankReply::decode_all(&b, count) {
            Ok(r) => r,
            Err(e) => {
                self.make_terminal(TerminalReason::Protocol);
                return Err(e.into());
            }
        };
        let ranks: Vec<u32> = replies.iter().map(|r| r.rank).collect();
        let expected: Vec<u32> = match (opcode, target) {
            (Opcode::Task | Opcode::Control, Target::Rank(r)) => vec![r],
            _ => (0..self.world_size).collect(),
        };
        let refused = ranks == [0]
            && replies[0]
                .outcome
                .as_ref()
                .is_err_and(|e| e.error_type == crate::server::INVALID_REQUEST);
        if ranks != expected && !refused {
            self.make_terminal(TerminalReason::Protocol);
            return Err(crate::records::RecordError::Invalid {
                index: 0,
                what: "the records are not those of the ranks the request targets",
            }
            .into());
        }
        Ok(Replies { sequence, replies })
    }

    /// Submits a TASK to the handler `handler` (a name or an id) and waits
    /// for every target's reply (docs/mailbox.md §4.1): GROUP and RANK
    /// take one payload, PER_RANK one per rank. Returns every reply when
    /// every target succeeded; [`MailboxError::TaskFailed`] (H1642) with
    /// every reply and error when some failed (the group goes on
    /// serving). A request that passes the timeout makes the group
    /// TERMINAL (H1644).
    pub fn submit(
        &mut self,
        handler: impl Into<HandlerId>,
        target: Target,
        payloads: &[&[u8]],
    ) -> Result<Replies, MailboxError> {
        self.request(Opcode::Task, handler.into().0, target, payloads, None)
    }

    /// As [`Mailbox::submit`] for a CONTROL handler.
    pub fn control(
        &mut self,
        handler: impl Into<HandlerId>,
        target: Target,
        payloads: &[&[u8]],
    ) -> Result<Replies, MailboxError> {
        self.request(Opcode::Control, handler.into().0, target, payloads, None)
    }

    /// As [`Mailbox::submit`], and calls `on_accept` once rank 0 has
    /// published TASK_ACCEPTED: the request region is the client's again
    /// then (see [`Mailbox::overwrite_request_region`]).
    pub fn submit_with_accept_hook(
        &mut self,
        handler: impl Into<HandlerId>,
        target: Target,
        payloads: &[&[u8]],
        on_accept: &mut dyn FnMut(&Self),
    ) -> Result<Replies, MailboxError> {
        self.request(
            Opcode::Task,
            handler.into().0,
            target,
            payloads,
            Some(on_accept),
        )
    }

    /// Overwrites the first `len` bytes of the request region with `fill`,
    /// only while the region is the client's (IDLE, or TASK_ACCEPTED: a
    /// test of the copy-before-accept rule, or staging the next request).
    /// Returns whether it did.
    pub fn overwrite_request_region(&self, len: usize, fill: u8) -> bool {
        let state = lane::request(&self.file.map);
        if !matches!(state, Some(RequestState::TaskAccepted | RequestState::Idle)) {
            return false;
        }
        let len = len.min(crate::layout::REGION_LEN);
        self.file.map.write(REQUEST_REGION, &vec![fill; len]);
        true
    }

    fn request(
        &mut self,
        opcode: Opcode,
        handler: u32,
        target: Target,
        payloads: &[&[u8]],
        on_accept: Option<&mut dyn FnMut(&Self)>,
    ) -> Result<Replies, MailboxError> {
        let deadline = Instant::now() + self.timeout;
        let seq = self.publish(opcode, target, handler, payloads)?;
        self.wait_answer(seq, target, opcode, deadline, on_accept)
    }

    /// PING: every rank answers through the collectives (an empty record
    /// each), proving the whole group serves.
    pub fn ping(&mut self) -> Result<Replies, MailboxError> {
        self.request(Opcode::Ping, 0, Target::Group, &[], None)
    }

    /// SHUTDOWN: one broadcast, every rank leaves its loop and ends
    /// normally (BYE); returns once rank 0 published SHUTDOWN_DONE (the
    /// group is CLOSED). For a job this client started, also waits for
    /// the launcher to exit and removes the mailbox and manifest.
    pub fn shutdown(&mut self) -> Result<(), MailboxError> {
        self.request(Opcode::Shutdown, 0, Target::Group, &[], None)?;
        if let Some(job) = &mut self.job {
            job.wait_exit(Duration::from_secs(30));
        }
        Ok(())
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        if let Some(mut job) = self.job.take() {
            // A job this client started ends with it (docs/mailbox.md §7.3).
            if lane::group(&self.file.map) == Some(GroupState::Ready)
                && lane::request(&self.file.map) == Some(RequestState::Idle)
                && !job.exited()
            {
                self.timeout = Duration::from_secs(10);
                self.job = Some(job);
                let _ = self.request(Opcode::Shutdown, 0, Target::Group, &[], None);
                job = self.job.take().expect("put back above");
            }
            job.end();
            crate::files::remove(&self.name);
        }
    }
}
