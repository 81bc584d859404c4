//! One request across the group (docs/mailbox.md §5.2, §5.3), in the same
//! collective order on every rank: the envelope (bcast from 0), the
//! payloads (bcast for GROUP; tagged DATA from rank 0 to the rank that
//! needs it for RANK and PER_RANK), the handler on each executing rank,
//! the statuses (gather to 0 for PING and SHUTDOWN, allgather for TASK
//! and CONTROL), the bodies (error text and replies, tagged DATA to rank
//! 0). Every byte between ranks goes over the job's TLS mesh.

use std::ops::Range;

use sperli_collective::{Comm, Endpoint};
use sperli_wire::limits::MAX_COLLECTIVE_DATA;

use crate::envelope::{Envelope, Status, ENVELOPE_LEN, STATUS_LEN};
use crate::layout::{Opcode, REGION_LEN};
use crate::records::{
    truncate_utf8, RankError, RankReply, Target, MAX_ERROR_MESSAGE, MAX_ERROR_TYPE,
};
use crate::server::{Handlers, Task, TaskError};

/// The DATA tag of payloads from rank 0 (reserved for the mailbox:
/// handlers must not use it).
pub const TAG_PAYLOAD: u32 = 0x7fff_ff00;
/// The DATA tag of bodies to rank 0 (reserved for the mailbox).
pub const TAG_BODY: u32 = 0x7fff_ff01;

/// Error type of a rank whose reply did not fit the reply region.
pub const REPLY_TOO_LARGE: &str = "reply-too-large";

/// Why the group cannot go on (the request makes it TERMINAL).
#[derive(Debug, Clone)]
pub(crate) enum Broken {
    /// A collective or a DATA exchange failed.
    Comm(sperli_wire::Error),
    /// A rank's status or body breaks docs/mailbox.md §5.2, step 5.
    Peer { rank: u32, what: &'static str },
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broken::Comm(e) => write!(f, "{e}"),
            Broken::Peer { rank, what } => write!(f, "rank {rank}: {what}"),
        }
    }
}

impl From<sperli_wire::Error> for Broken {
    fn from(e: sperli_wire::Error) -> Self {
        Broken::Comm(e)
    }
}

/// Receives the next envelope (every rank but 0). Blocks until rank 0
/// broadcasts one; fails when the job failed.
pub(crate) fn recv_envelope(comm: &mut Comm<Endpoint>) -> Result<Envelope, Broken> {
    let mut b = [0u8; ENVELOPE_LEN];
    comm.bcast_into(0, &mut b)?;
    Envelope::decode(&b, comm.size()).map_err(|e| Broken::Peer { rank: 0, what: e.0 })
}

/// Runs one request on this rank. Rank 0 passes the envelope it built, the
/// request it copied and where its payloads lie in it (one range for GROUP
/// and RANK, one per rank for PER_RANK, none for PING and SHUTDOWN); the
/// others pass the envelope they received, an empty request and no
/// ranges. Returns the reply records at rank 0 (one per executing rank, in
/// rank order), nothing elsewhere.
pub(crate) fn run(
    comm: &mut Comm<Endpoint>,
    handlers: &mut Handlers,
    env: &Envelope,
    request: Vec<u8>,
    ranges: Vec<Range<usize>>,
) -> Result<Option<Vec<RankReply>>, Broken> {
    let payloads: Vec<&[u8]> = ranges.iter().map(|r| &request[r.clone()]).collect();
    let rank = comm.rank();
    let size = comm.size();
    if rank == 0 {
        let mut b = env.encode();
        comm.bcast_into(0, &mut b)?;
    }
    // Payload delivery.
    let mut own: Vec<u8> = Vec::new();
    let payload: &[u8] = match env.target {
        _ if matches!(env.opcode, Opcode::Ping | Opcode::Shutdown) => &[],
        Target::Group => {
            let len = env.group_len as usize;
            if rank == 0 {
                // A GROUP request is its one payload: bcast it in place.
                drop(payloads);
                let mut data = request;
                for c in data.chunks_mut(MAX_COLLECTIVE_DATA) {
                    comm.bcast_into(0, c)?;
                }
                own = data;
            } else {
                own = vec![0u8; len];
                for c in own.chunks_mut(MAX_COLLECTIVE_DATA) {
                    comm.bcast_into(0, c)?;
                }
            }
            &own
        }
        Target::Rank(r) => {
            if rank == 0 && r == 0 {
                payloads[0]
            } else if rank == 0 {
                comm.link().send_large(r, TAG_PAYLOAD, payloads[0])?;
                &[]
            } else if rank == r {
                own = comm.link().recv_large(0, TAG_PAYLOAD)?;
                &own
            } else {
                &[]
            }
        }
        Target::PerRank => {
            if rank == 0 {
                for (i, p) in payloads.iter().enumerate().skip(1) {
                    comm.link().send_large(i as u32, TAG_PAYLOAD, p)?;
                }
                payloads[0]
            } else {
                own = comm.link().recv_large(0, TAG_PAYLOAD)?;
                &own
            }
        }
    };
    // Execute.
    let executes = env.target.executes(rank);
    let outcome: Option<Result<Vec<u8>, TaskError>> = executes.then(|| match env.opcode {
        Opcode::Ping | Opcode::Shutdown => Ok(Vec::new()),
        Opcode::Task | Opcode::Control => {
            // Only a handler every rank runs may call collectives.
            let collective = !matches!(env.target, Target::Rank(_));
            let mut task = Task {
                sequence: env.sequence,
                opcode: env.opcode,
                target: env.target,
                handler: env.handler,
                payload,
                rank,
                size,
                comm: collective.then_some(&mut *comm),
            };
            handlers.call(&mut task)
        }
    });
    if let Some(e) = comm.failure() {
        return Err(Broken::Comm(e.clone()));
    }
    drop(own);
    // Status.
    let (status, body_text, reply) = match outcome {
        None => (
            Status {
                status: Status::STATUS_NOT_TARGET,
                type_len: 0,
                message_len: 0,
                reply_len: 0,
            },
            (String::new(), String::new()),
            Vec::new(),
        ),
        Some(Ok(r)) if r.len() > REGION_LEN => error_status(TaskError::new(
            REPLY_TOO_LARGE,
            format!(
                "a reply of {} bytes does not fit the {REGION_LEN}-byte reply region",
                r.len()
            ),
        )),
        Some(Ok(r)) => (
            Status {
                status: Status::STATUS_OK,
                type_len: 0,
                message_len: 0,
                reply_len: r.len() as u32,
            },
            (String::new(), String::new()),
            r,
        ),
        Some(Err(e)) => error_status(e),
    };
    let statuses: Vec<Status> = match env.opcode {
        Opcode::Ping | Opcode::Shutdown => match comm.gather(0, &status.encode())? {
            Some(all) => decode_statuses(&all)?,
            None => return Ok(None),
        },
        Opcode::Task | Opcode::Control => decode_statuses(&comm.allgather(&status.encode())?)?,
    };
    if statuses[rank as usize] != status {
        return Err(Broken::Peer {
            rank,
            what: "the gathered status differs from this rank's own",
        });
    }
    let total: u64 = statuses.iter().map(Status::record_len).sum();
    let over = total > REGION_LEN as u64;
    let sends_body = |s: &Status| match s.status {
        Status::STATUS_ERROR => s.type_len + s.message_len > 0,
        Status::STATUS_OK => !over && s.reply_len > 0,
        _ => false,
    };
    // Bodies.
    if rank != 0 {
        if sends_body(&status) {
            let mut body = Vec::with_capacity(status.record_len() as usize);
            body.extend_from_slice(body_text.0.as_bytes());
            body.extend_from_slice(body_text.1.as_bytes());
            if status.status == Status::STATUS_OK {
                body.extend_from_slice(&reply);
            }
            comm.link().send_large(0, TAG_BODY, &body)?;
        }
        return Ok(None);
    }
    let mut records = Vec::new();
    for (r, s) in statuses.iter().enumerate() {
        let r = r as u32;
        if s.status == Status::STATUS_NOT_TARGET {
            continue;
        }
        let body = if r == 0 {
            let mut b = Vec::new();
            b.extend_from_slice(body_text.0.as_bytes());
            b.extend_from_slice(body_text.1.as_bytes());
            if !over {
                b.extend_from_slice(&reply);
            }
            b
        } else if sends_body(s) {
            comm.link().recv_large(r, TAG_BODY)?
        } else {
            Vec::new()
        };
        let want = if s.status == Status::STATUS_OK && over {
            0
        } else {
            (s.type_len
                + s.message_len
                + if s.status == Status::STATUS_OK {
                    s.reply_len
                } else {
                    0
                }) as usize
        };
        if body.len() != want {
            return Err(Broken::Peer {
                rank: r,
                what: "its body's length differs from its status",
            });
        }
        let outcome = match s.status {
            Status::STATUS_OK if over => Err(RankError {
                rank: r,
                error_type: REPLY_TOO_LARGE.into(),
                message: format!(
                    "the group's replies need {total} bytes; the reply region holds {REGION_LEN}"
                ),
            }),
            Status::STATUS_OK => Ok(body),
            _ => {
                let (t, m) = body.split_at(s.type_len as usize);
                match (std::str::from_utf8(t), std::str::from_utf8(m)) {
                    (Ok(t), Ok(m)) => Err(RankError {
                        rank: r,
                        error_type: t.into(),
                        message: m.into(),
                    }),
                    _ => {
                        return Err(Broken::Peer {
                            rank: r,
                            what: "its error text is not UTF-8",
                        })
                    }
                }
            }
        };
        records.push(RankReply { rank: r, outcome });
    }
    Ok(Some(records))
}

fn error_status(e: TaskError) -> (Status, (String, String), Vec<u8>) {
    let t = truncate_utf8(&e.error_type, MAX_ERROR_TYPE).to_string();
    let m = truncate_utf8(&e.message, MAX_ERROR_MESSAGE).to_string();
    (
        Status {
            status: Status::STATUS_ERROR,
            type_len: t.len() as u32,
            message_len: m.len() as u32,
            reply_len: 0,
        },
        (t, m),
        Vec::new(),
    )
}

fn decode_statuses(all: &[u8]) -> Result<Vec<Status>, Broken> {
    all.chunks(STATUS_LEN)
        .enumerate()
        .map(|(r, b)| {
            Status::decode(b).ok_or(Broken::Peer {
                rank: r as u32,
                what: "its status block breaks docs/mailbox.md §5.2, step 5",
            })
        })
        .collect()
}
