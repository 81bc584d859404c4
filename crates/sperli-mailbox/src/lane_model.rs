//! Model check of the request state machine (docs/mailbox.md §3.5): an
//! explicit-state search over every interleaving of client and rank-0
//! steps, for a bounded number of requests and at most one fault per run
//! (the client dies, a rank is lost, the client reuses a sequence id).
//! Each step calls the real functions of [`crate::lane`] on a model of the
//! header words; the regions are modelled by which request's bytes they
//! hold. Invariants are checked on every state and every edge.

use std::cell::Cell;
use std::collections::{HashSet, VecDeque};

use crate::lane::{self, ClientLook, NotNow, Outcome, Publish, Rank0Look, Words};
use crate::layout::{off, GroupState, Header, Opcode, RequestState, TargetKind, TerminalReason};

const WORDS: usize = 20;
/// A region overwritten by the client after TASK_ACCEPTED.
const GARBAGE: u64 = u64::MAX;
/// The reply region holding rank 0's terminal record.
const RECORD: u64 = u64::MAX - 1;

struct CellWords([Cell<u32>; WORDS]);

impl CellWords {
    fn of(w: &[u32; WORDS]) -> Self {
        Self(std::array::from_fn(|i| Cell::new(w[i])))
    }
    fn get(&self) -> [u32; WORDS] {
        std::array::from_fn(|i| self.0[i].get())
    }
}

impl Words for CellWords {
    fn load32(&self, off: usize) -> u32 {
        self.0[off / 4].get()
    }
    fn store32(&self, off: usize, v: u32) {
        self.0[off / 4].set(v)
    }
    fn cas32(&self, off: usize, current: u32, new: u32) -> u32 {
        let v = self.0[off / 4].get();
        if v == current {
            self.0[off / 4].set(new);
        }
        v
    }
    fn load64(&self, off: usize) -> u64 {
        u64::from(self.0[off / 4].get()) | u64::from(self.0[off / 4 + 1].get()) << 32
    }
    fn store64(&self, off: usize, v: u64) {
        self.0[off / 4].set(v as u32);
        self.0[off / 4 + 1].set((v >> 32) as u32);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    /// May publish request `next` (or SHUTDOWN after the last).
    Idle {
        next: u64,
    },
    /// Wrote request `seq` into the region, not yet published.
    Wrote {
        seq: u64,
    },
    /// Waits for the answer to `seq`.
    Waiting {
        seq: u64,
        shutdown: bool,
    },
    Finished,
    SawTerminal,
    Dead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Rank0 {
    Init,
    Look,
    /// Took request `seq`, whose copied bytes are request `data`'s.
    Took {
        seq: u64,
        data: u64,
        shutdown: bool,
    },
    Accepted {
        seq: u64,
        data: u64,
        shutdown: bool,
    },
    Finished,
    Terminal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fault {
    ClientDied { in_flight: bool },
    RankLost,
    StaleSequence,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct St {
    w: [u32; WORDS],
    request_region: u64,
    reply_region: u64,
    client: Client,
    rank0: Rank0,
    lease: bool,
    last_executed: u64,
    fault: Option<Fault>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Rank0,
    Environment,
}

fn initial() -> St {
    let h = Header::fresh(4).encode();
    St {
        w: std::array::from_fn(|i| u32::from_le_bytes(h[4 * i..4 * i + 4].try_into().unwrap())),
        request_region: 0,
        reply_region: 0,
        client: Client::Idle { next: 1 },
        rank0: Rank0::Init,
        lease: true,
        last_executed: 0,
        fault: None,
    }
}

fn state_of(w: &[u32; WORDS], at: usize) -> u32 {
    w[at / 4]
}

/// Applies `f` to a copy of `s` with its words in cells.
fn step(s: &St, f: impl FnOnce(&mut St, &CellWords)) -> St {
    let mut n = s.clone();
    let cw = CellWords::of(&s.w);
    f(&mut n, &cw);
    n.w = cw.get();
    n
}

fn rank0_terminal(n: &mut St, w: &CellWords, reason: TerminalReason) {
    if lane::rank0_owns_reply(w) {
        n.reply_region = RECORD;
    }
    lane::set_terminal(w, reason);
    n.rank0 = Rank0::Terminal;
}

fn successors(s: &St, requests: u64, faults: bool) -> Vec<(Side, St)> {
    let mut out = Vec::new();
    let cw = CellWords::of(&s.w);
    // ---- client ----
    match s.client {
        Client::Idle { next } => match lane::client_may_publish(&cw) {
            Ok(()) if next <= requests => {
                out.push((
                    Side::Client,
                    step(s, |n, _| {
                        n.request_region = next;
                        n.client = Client::Wrote { seq: next };
                    }),
                ));
                if faults && s.fault.is_none() && next >= 2 {
                    // A broken client republishes an old sequence id.
                    out.push((
                        Side::Client,
                        step(s, |n, w| {
                            n.fault = Some(Fault::StaleSequence);
                            n.request_region = next - 1;
                            publish(w, next - 1, Opcode::Task).unwrap();
                            n.client = Client::Waiting {
                                seq: next - 1,
                                shutdown: false,
                            };
                        }),
                    ));
                }
            }
            Ok(()) => out.push((
                Side::Client,
                step(s, |n, w| {
                    publish(w, next, Opcode::Shutdown).unwrap();
                    n.client = Client::Waiting {
                        seq: next,
                        shutdown: true,
                    };
                }),
            )),
            Err(NotNow::Terminal(_)) => {
                out.push((Side::Client, step(s, |n, _| n.client = Client::SawTerminal)))
            }
            Err(NotNow::NotServing(GroupState::Initializing)) => {} // waits for READY
            Err(e) => panic!("client cannot publish in {s:?}: {e:?}"),
        },
        Client::Wrote { seq } => out.push((
            Side::Client,
            step(s, |n, w| match publish(w, seq, Opcode::Task) {
                Ok(()) => {
                    n.client = Client::Waiting {
                        seq,
                        shutdown: false,
                    }
                }
                // Rank 0 went TERMINAL while the client wrote.
                Err(NotNow::Busy(_)) if lane::group(w) == Some(GroupState::Terminal) => {
                    n.client = Client::SawTerminal
                }
                Err(e) => panic!("publish refused in {s:?}: {e:?}"),
            }),
        )),
        Client::Waiting { seq, shutdown } => match lane::client_look(&cw) {
            ClientLook::Pending { accepted, .. } => {
                if accepted && s.request_region != GARBAGE {
                    // Copy before accept: the client reuses its region at once.
                    out.push((Side::Client, step(s, |n, _| n.request_region = GARBAGE)));
                }
            }
            ClientLook::Answered { .. } => {
                assert!(!shutdown, "a task answer to SHUTDOWN in {s:?}");
                out.push((
                    Side::Client,
                    step(s, |n, w| {
                        assert_eq!(n.reply_region, seq, "reply of another request in {s:?}");
                        lane::client_ack(w).unwrap();
                        n.client = Client::Idle { next: seq + 1 };
                    }),
                ));
            }
            ClientLook::ShutdownDone => {
                assert!(shutdown, "SHUTDOWN_DONE for a task in {s:?}");
                out.push((Side::Client, step(s, |n, _| n.client = Client::Finished)));
            }
            ClientLook::Terminal(_) => {
                out.push((Side::Client, step(s, |n, _| n.client = Client::SawTerminal)))
            }
        },
        Client::Finished | Client::SawTerminal | Client::Dead => {}
    }
    if faults
        && s.fault.is_none()
        && matches!(
            s.client,
            Client::Idle { .. } | Client::Wrote { .. } | Client::Waiting { .. }
        )
    {
        out.push((
            Side::Environment,
            step(s, |n, w| {
                let in_flight = matches!(
                    lane::request(w),
                    Some(
                        RequestState::RequestReady
                            | RequestState::TaskAccepted
                            | RequestState::TaskDone
                            | RequestState::TaskFailed
                    )
                ) && !matches!(s.client, Client::Waiting { shutdown: true, .. });
                n.fault = Some(Fault::ClientDied { in_flight });
                n.client = Client::Dead;
                n.lease = false;
            }),
        ));
    }
    // ---- rank 0 ----
    match s.rank0 {
        Rank0::Init => out.push((
            Side::Rank0,
            step(s, |n, w| {
                lane::publish_ready(w).unwrap();
                n.rank0 = Rank0::Look;
            }),
        )),
        Rank0::Look => match lane::rank0_look(&cw) {
            Rank0Look::Wait { in_flight, .. } => {
                if in_flight && !s.lease {
                    // The timed wake finds no lease with a reply waiting.
                    out.push((
                        Side::Rank0,
                        step(s, |n, w| rank0_terminal(n, w, TerminalReason::ClientLost)),
                    ));
                }
            }
            Rank0Look::Take { shutdown } => out.push((
                Side::Rank0,
                step(s, |n, w| match lane::rank0_take(w, n.last_executed) {
                    Ok(t) => {
                        n.rank0 = Rank0::Took {
                            seq: t.sequence,
                            data: n.request_region,
                            shutdown,
                        }
                    }
                    Err(reason) => rank0_terminal(n, w, reason),
                }),
            )),
            Rank0Look::Terminal(_) => {
                out.push((Side::Rank0, step(s, |n, _| n.rank0 = Rank0::Terminal)))
            }
        },
        Rank0::Took {
            seq,
            data,
            shutdown,
        } => out.push((
            Side::Rank0,
            step(s, |n, w| match lane::rank0_accept(w, shutdown) {
                Ok(()) => {
                    n.rank0 = Rank0::Accepted {
                        seq,
                        data,
                        shutdown,
                    }
                }
                Err(reason) => panic!("accept refused ({reason:?}) in {s:?}"),
            }),
        )),
        Rank0::Accepted {
            seq,
            data,
            shutdown,
        } => out.push((
            Side::Rank0,
            step(s, |n, w| {
                // Invariants: each request runs once, in order, on the
                // bytes the client published (copied before TASK_ACCEPTED).
                assert!(seq > n.last_executed, "request {seq} ran twice in {s:?}");
                n.last_executed = seq;
                if !shutdown {
                    assert_eq!(data, seq, "request {seq} ran on other bytes in {s:?}");
                }
                n.reply_region = seq;
                let outcome = if shutdown {
                    Outcome::ShutdownDone
                } else {
                    Outcome::Done
                };
                match lane::rank0_publish(w, outcome, 1, 0) {
                    Ok(()) => {
                        n.rank0 = if shutdown {
                            Rank0::Finished
                        } else {
                            Rank0::Look
                        }
                    }
                    Err(reason) => panic!("publish refused ({reason:?}) in {s:?}"),
                }
            }),
        )),
        Rank0::Finished | Rank0::Terminal => {}
    }
    if faults && s.fault.is_none() && matches!(s.rank0, Rank0::Look | Rank0::Accepted { .. }) {
        out.push((
            Side::Environment,
            step(s, |n, w| {
                n.fault = Some(Fault::RankLost);
                rank0_terminal(n, w, TerminalReason::Collective);
            }),
        ));
    }
    out
}

fn publish(w: &CellWords, seq: u64, opcode: Opcode) -> Result<(), NotNow> {
    lane::client_publish(
        w,
        &Publish {
            sequence: seq,
            opcode,
            target: TargetKind::Group,
            target_rank: 0,
            handler: 0,
            payload_count: 0,
            request_len: 0,
        },
    )
}

/// The request-state changes the table of docs/mailbox.md §3.2 allows,
/// per side.
fn allowed(side: Side, from: u32, to: u32) -> bool {
    use RequestState::*;
    let (Some(f), Some(t)) = (RequestState::from_code(from), RequestState::from_code(to)) else {
        return false;
    };
    f == t
        || match side {
            Side::Client => matches!(
                (f, t),
                (Idle, RequestReady)
                    | (Idle, ShutdownReady)
                    | (TaskDone, Idle)
                    | (TaskFailed, Idle)
            ),
            Side::Rank0 => matches!(
                (f, t),
                (RequestReady, TaskAccepted)
                    | (ShutdownReady, TaskAccepted)
                    | (TaskAccepted, TaskDone)
                    | (TaskAccepted, TaskFailed)
                    | (TaskAccepted, ShutdownDone)
            ),
            Side::Environment => false,
        }
}

fn check_edge(side: Side, a: &St, b: &St) {
    let (ga, gb) = (
        state_of(&a.w, off::GROUP_STATE),
        state_of(&b.w, off::GROUP_STATE),
    );
    for fin in [GroupState::Terminal, GroupState::Closed] {
        if ga == fin.code() {
            assert_eq!(gb, ga, "{fin} left: {a:?} -> {b:?}");
        }
    }
    let (ra, rb) = (
        state_of(&a.w, off::REQUEST_STATE),
        state_of(&b.w, off::REQUEST_STATE),
    );
    assert!(
        allowed(side, ra, rb),
        "request state {ra} -> {rb} not in the table: {a:?} -> {b:?}"
    );
}

fn check_final(s: &St, requests: u64) {
    let group = state_of(&s.w, off::GROUP_STATE);
    let terminal = group == GroupState::Terminal.code();
    match s.fault {
        None => {
            assert_eq!(s.client, Client::Finished, "{s:?}");
            assert_eq!(s.rank0, Rank0::Finished, "{s:?}");
            assert_eq!(group, GroupState::Closed.code(), "{s:?}");
            assert_eq!(s.last_executed, requests + 1, "{s:?}");
        }
        Some(Fault::RankLost | Fault::StaleSequence | Fault::ClientDied { in_flight: true }) => {
            assert!(terminal, "fault {:?} did not end TERMINAL: {s:?}", s.fault);
            assert_ne!(s.rank0, Rank0::Look, "{s:?}");
        }
        Some(Fault::ClientDied { in_flight: false }) => {
            // A dead client without a request in flight leaves rank 0
            // waiting on an IDLE lane (shell use: the next client takes
            // over; the client that started the job ends it through the
            // launcher's stdin), or the group finished its shutdown.
            let idle = state_of(&s.w, off::REQUEST_STATE) == RequestState::Idle.code();
            assert!(
                (s.rank0 == Rank0::Look && idle)
                    || matches!(s.rank0, Rank0::Finished | Rank0::Terminal),
                "{s:?}"
            );
        }
    }
    assert!(
        matches!(
            s.client,
            Client::Finished | Client::SawTerminal | Client::Dead
        ),
        "deadlock: {s:?}"
    );
}

/// Searches every state reachable from the start; returns (states, finals).
fn search(requests: u64, faults: bool) -> (usize, usize) {
    let start = initial();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::new();
    seen.insert(start.clone());
    queue.push_back(start);
    let mut finals = 0;
    while let Some(s) = queue.pop_front() {
        let next = successors(&s, requests, faults);
        if next.is_empty() {
            check_final(&s, requests);
            finals += 1;
        }
        for (side, n) in next {
            check_edge(side, &s, &n);
            if seen.insert(n.clone()) {
                queue.push_back(n);
            }
        }
    }
    (seen.len(), finals)
}

#[test]
fn every_interleaving_without_faults_serves_every_request_then_closes() {
    let (states, finals) = search(3, false);
    println!("{states} states, {finals} final");
    assert!(states > 20, "{states}");
    assert!(finals >= 1);
}

#[test]
fn every_interleaving_with_one_fault_keeps_the_invariants() {
    let (states, finals) = search(3, true);
    println!("{states} states, {finals} final");
    assert!(states > 100, "{states}");
    assert!(finals > 10, "{finals}");
}

#[test]
fn the_model_finds_a_broken_rule() {
    // Sanity of the checker itself: a rank 0 that accepted before copying
    // would run on the client's later bytes; the invariant must catch it.
    let r = std::panic::catch_unwind(|| {
        let mut s = initial();
        s.rank0 = Rank0::Accepted {
            seq: 1,
            data: GARBAGE,
            shutdown: false,
        };
        let w = CellWords::of(&s.w);
        lane::publish_ready(&w).unwrap();
        s.w = w.get();
        for (_, _) in successors(&s, 1, false) {}
    });
    assert!(r.is_err());
}
