//! What the regions carry (docs/mailbox.md §4): the request region's
//! payloads and the reply records. Pure.

use std::ops::Range;

use crate::layout::{Opcode, TargetKind, REGION_LEN};

/// Bytes of one reply record's fixed part: rank, status, and the three
/// lengths (u32 each).
pub const RECORD_HEAD: usize = 20;
/// The longest error type in a record (longer ones are cut).
pub const MAX_ERROR_TYPE: usize = 64;
/// The longest error message in a record (longer ones are cut on a
/// character boundary, as ABORT messages).
pub const MAX_ERROR_MESSAGE: usize = 1024;

/// Why a request is refused (H1641 at the client before it is published;
/// an `invalid-request` error record when rank 0 finds it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// GROUP and RANK carry one payload, PER_RANK one per rank, PING and
    /// SHUTDOWN none.
    #[error("{target} needs {expected} payloads, got {got}")]
    PayloadCount {
        /// The target (or opcode) name.
        target: &'static str,
        /// Payloads it needs.
        expected: u32,
        /// Payloads given.
        got: u32,
    },
    /// The payloads (and, for PER_RANK, their length table) do not fit the
    /// 16 MiB request region.
    #[error("request of {len} bytes does not fit the {REGION_LEN}-byte request region")]
    TooLarge {
        /// Bytes the request needs.
        len: u64,
    },
    /// A RANK target outside the job.
    #[error("target rank {rank} is not in a job of {size} ranks")]
    TargetRank {
        /// The rank given.
        rank: u32,
        /// The world size.
        size: u32,
    },
    /// A field combination the table of docs/mailbox.md §4.1 does not have.
    #[error("{0}")]
    Shape(&'static str),
    /// The PER_RANK length table does not add up to the request length.
    #[error("PER_RANK length table sums to {table} bytes, the request has {data}")]
    Table {
        /// Sum of the table.
        table: u64,
        /// Bytes after the table.
        data: u64,
    },
}

/// The target of a request, as the client gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// Every rank runs the handler on the same payload.
    Group,
    /// Only this rank runs it; every rank still sees the envelope.
    Rank(u32),
    /// Every rank runs it, rank i on payload i.
    PerRank,
}

impl Target {
    /// Its code and target rank in the header.
    pub fn kind(self) -> (TargetKind, u32) {
        match self {
            Target::Group => (TargetKind::Group, 0),
            Target::Rank(r) => (TargetKind::Rank, r),
            Target::PerRank => (TargetKind::PerRank, 0),
        }
    }

    /// Whether `rank` executes a request with this target.
    pub fn executes(self, rank: u32) -> bool {
        match self {
            Target::Rank(r) => r == rank,
            Target::Group | Target::PerRank => true,
        }
    }
}

/// Where each payload goes in the request region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPlan {
    /// Payload count for the header.
    pub payload_count: u32,
    /// Request length for the header.
    pub request_len: u32,
    /// The PER_RANK length table (little-endian u32 each), empty otherwise.
    pub table: Vec<u8>,
    /// Offset in the region of each payload.
    pub offsets: Vec<usize>,
}

/// Plans a request of `opcode` with `target` and payload lengths `lens`
/// for a job of `world` ranks (docs/mailbox.md §4.1): GROUP and RANK carry
/// exactly one payload at offset 0; PER_RANK carries `world` payloads after
/// a table of their lengths; PING and SHUTDOWN carry none and go to GROUP.
pub fn plan_request(
    opcode: Opcode,
    target: Target,
    lens: &[usize],
    world: u32,
) -> Result<RequestPlan, RequestError> {
    let count = u32::try_from(lens.len()).unwrap_or(u32::MAX);
    let need = |target: &'static str, expected: u32| {
        if count == expected {
            Ok(())
        } else {
            Err(RequestError::PayloadCount {
                target,
                expected,
                got: count,
            })
        }
    };
    if let Target::Rank(r) = target {
        if r >= world {
            return Err(RequestError::TargetRank {
                rank: r,
                size: world,
            });
        }
    }
    match opcode {
        Opcode::Ping | Opcode::Shutdown => {
            if target != Target::Group {
                return Err(RequestError::Shape("PING and SHUTDOWN go to GROUP"));
            }
            need(opcode.name(), 0)?;
            return Ok(RequestPlan {
                payload_count: 0,
                request_len: 0,
                table: Vec::new(),
                offsets: Vec::new(),
            });
        }
        Opcode::Task | Opcode::Control => {}
    }
    let total: u64 = lens.iter().map(|&l| l as u64).sum();
    match target {
        Target::Group | Target::Rank(_) => {
            need(target.kind().0.name(), 1)?;
            if total > REGION_LEN as u64 {
                return Err(RequestError::TooLarge { len: total });
            }
            Ok(RequestPlan {
                payload_count: 1,
                request_len: total as u32,
                table: Vec::new(),
                offsets: vec![0],
            })
        }
        Target::PerRank => {
            need("PER_RANK", world)?;
            let len = 4 * u64::from(world) + total;
            if len > REGION_LEN as u64 {
                return Err(RequestError::TooLarge { len });
            }
            let mut table = Vec::with_capacity(4 * lens.len());
            let mut offsets = Vec::with_capacity(lens.len());
            let mut at = 4 * lens.len();
            for &l in lens {
                table.extend_from_slice(&(l as u32).to_le_bytes());
                offsets.push(at);
                at += l;
            }
            Ok(RequestPlan {
                payload_count: world,
                request_len: len as u32,
                table,
                offsets,
            })
        }
    }
}

/// The payload ranges of a request rank 0 copied out of the region:
/// checks the header's opcode, target, counts and lengths against each
/// other (docs/mailbox.md §4.1) and returns where each payload lies in
/// `region` (the `request_len` bytes copied).
pub fn split_request(
    opcode: Opcode,
    target: Target,
    payload_count: u32,
    region: &[u8],
    world: u32,
) -> Result<Vec<Range<usize>>, RequestError> {
    if let Target::Rank(r) = target {
        if r >= world {
            return Err(RequestError::TargetRank {
                rank: r,
                size: world,
            });
        }
    }
    let expected = match (opcode, target) {
        (Opcode::Ping | Opcode::Shutdown, Target::Group) => 0,
        (Opcode::Ping | Opcode::Shutdown, _) => {
            return Err(RequestError::Shape("PING and SHUTDOWN go to GROUP"))
        }
        (_, Target::PerRank) => world,
        _ => 1,
    };
    if payload_count != expected {
        return Err(RequestError::PayloadCount {
            target: if expected == 0 {
                opcode.name()
            } else {
                target.kind().0.name()
            },
            expected,
            got: payload_count,
        });
    }
    match expected {
        0 if !region.is_empty() => Err(RequestError::Shape("PING and SHUTDOWN carry no bytes")),
        0 => Ok(Vec::new()),
        1 if target != Target::PerRank => Ok(std::iter::once(0..region.len()).collect()),
        _ => {
            let n = world as usize;
            if region.len() < 4 * n {
                return Err(RequestError::Table {
                    table: 0,
                    data: region.len() as u64,
                });
            }
            let mut at = 4 * n;
            let mut out = Vec::with_capacity(n);
            let mut table = 0u64;
            for i in 0..n {
                let l = u32::from_le_bytes([
                    region[4 * i],
                    region[4 * i + 1],
                    region[4 * i + 2],
                    region[4 * i + 3],
                ]) as usize;
                table += l as u64;
                out.push(at..at.saturating_add(l));
                at = at.saturating_add(l);
            }
            let data = (region.len() - 4 * n) as u64;
            if table != data {
                return Err(RequestError::Table { table, data });
            }
            Ok(out)
        }
    }
}

/// The outcome of one rank in a reply record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankError {
    /// The rank.
    pub rank: u32,
    /// A short type name (`handler`, `unknown-handler`, `panic`,
    /// `reply-too-large`, `invalid-request`, or the handler's own).
    pub error_type: String,
    /// What went wrong.
    pub message: String,
}

impl std::fmt::Display for RankError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rank {}: {}: {}",
            self.rank, self.error_type, self.message
        )
    }
}

/// One record of the reply region (docs/mailbox.md §4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankReply {
    /// The rank.
    pub rank: u32,
    /// Its reply bytes, or its error.
    pub outcome: Result<Vec<u8>, RankError>,
}

/// Why the reply region does not decode (the client's view: rank 0 wrote
/// something else than docs/mailbox.md §4.2 says).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A record needs more bytes than the reply length leaves.
    #[error("record {index}: needs {needed} bytes, {left} left")]
    Truncated {
        /// The record.
        index: u32,
        /// Bytes needed.
        needed: u64,
        /// Bytes left.
        left: u64,
    },
    /// Bytes after the last record.
    #[error("{0} bytes after the last record")]
    Trailing(usize),
    /// A status other than 0 and 1, an OK record with error text, an error
    /// record with reply bytes, an error type or message too long or not
    /// UTF-8, or ranks out of ascending order.
    #[error("record {index}: {what}")]
    Invalid {
        /// The record.
        index: u32,
        /// What is wrong.
        what: &'static str,
    },
}

pub use sperli_wire::codec::truncate_utf8;

impl RankReply {
    /// Bytes of this record.
    pub fn encoded_len(&self) -> usize {
        RECORD_HEAD
            + match &self.outcome {
                Ok(r) => r.len(),
                Err(e) => e.error_type.len() + e.message.len(),
            }
    }

    /// Appends the record: rank, status (0 ok, 1 error), type length,
    /// message length, reply length, then the three byte strings. Error
    /// type and message are cut to their limits.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let (status, ty, msg, reply): (u32, &str, &str, &[u8]) = match &self.outcome {
            Ok(r) => (0, "", "", r),
            Err(e) => (
                1,
                truncate_utf8(&e.error_type, MAX_ERROR_TYPE),
                truncate_utf8(&e.message, MAX_ERROR_MESSAGE),
                &[],
            ),
        };
        for v in [
            self.rank,
            status,
            ty.len() as u32,
            msg.len() as u32,
            reply.len() as u32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(msg.as_bytes());
        out.extend_from_slice(reply);
    }

    /// Decodes exactly `count` records filling all of `bytes`; ranks must
    /// ascend strictly.
    pub fn decode_all(bytes: &[u8], count: u32) -> Result<Vec<RankReply>, RecordError> {
        let mut out = Vec::with_capacity(count.min(4096) as usize);
        let mut at = 0usize;
        let mut last: Option<u32> = None;
        for index in 0..count {
            let left = (bytes.len() - at) as u64;
            if left < RECORD_HEAD as u64 {
                return Err(RecordError::Truncated {
                    index,
                    needed: RECORD_HEAD as u64,
                    left,
                });
            }
            let w = |i: usize| {
                let p = at + 4 * i;
                u32::from_le_bytes([bytes[p], bytes[p + 1], bytes[p + 2], bytes[p + 3]])
            };
            let (rank, status, tl, ml, rl) = (w(0), w(1), w(2), w(3), w(4));
            let body = u64::from(tl) + u64::from(ml) + u64::from(rl);
            if left - (RECORD_HEAD as u64) < body {
                return Err(RecordError::Truncated {
                    index,
                    needed: RECORD_HEAD as u64 + body,
                    left,
                });
            }
            if last.is_some_and(|l| rank <= l) {
                return Err(RecordError::Invalid {
                    index,
                    what: "ranks not in ascending order",
                });
            }
            last = Some(rank);
            let p = at + RECORD_HEAD;
            let (tl, ml, rl) = (tl as usize, ml as usize, rl as usize);
            let outcome = match status {
                0 if tl == 0 && ml == 0 => Ok(bytes[p..p + rl].to_vec()),
                0 => {
                    return Err(RecordError::Invalid {
                        index,
                        what: "an OK record with error text",
                    })
                }
                1 if rl == 0 => {
                    if tl > MAX_ERROR_TYPE || ml > MAX_ERROR_MESSAGE {
                        return Err(RecordError::Invalid {
                            index,
                            what: "error type or message longer than its limit",
                        });
                    }
                    let text = |r: Range<usize>| {
                        std::str::from_utf8(&bytes[r])
                            .map(str::to_owned)
                            .map_err(|_| RecordError::Invalid {
                                index,
                                what: "error text is not UTF-8",
                            })
                    };
                    Err(RankError {
                        rank,
                        error_type: text(p..p + tl)?,
                        message: text(p + tl..p + tl + ml)?,
                    })
                }
                1 => {
                    return Err(RecordError::Invalid {
                        index,
                        what: "an error record with reply bytes",
                    })
                }
                _ => {
                    return Err(RecordError::Invalid {
                        index,
                        what: "status is neither 0 (ok) nor 1 (error)",
                    })
                }
            };
            out.push(RankReply { rank, outcome });
            at = p + tl + ml + rl;
        }
        if at != bytes.len() {
            return Err(RecordError::Trailing(bytes.len() - at));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        let p = plan_request(Opcode::Task, Target::Group, &[REGION_LEN], 4).unwrap();
        assert_eq!((p.payload_count, p.request_len), (1, REGION_LEN as u32));
        assert_eq!(
            plan_request(Opcode::Task, Target::Group, &[REGION_LEN + 1], 4),
            Err(RequestError::TooLarge {
                len: REGION_LEN as u64 + 1
            })
        );
        let p = plan_request(Opcode::Task, Target::PerRank, &[1, 0, 2], 3).unwrap();
        assert_eq!(p.request_len, 12 + 3);
        assert_eq!(p.offsets, vec![12, 13, 13]);
        assert!(plan_request(Opcode::Task, Target::PerRank, &[1, 2], 3).is_err());
        assert!(plan_request(Opcode::Task, Target::Rank(3), &[1], 3).is_err());
        assert!(plan_request(Opcode::Ping, Target::Rank(0), &[], 3).is_err());
        assert!(plan_request(Opcode::Ping, Target::Group, &[0], 3).is_err());
        let p = plan_request(Opcode::Shutdown, Target::Group, &[], 3).unwrap();
        assert_eq!((p.payload_count, p.request_len), (0, 0));
    }

    #[test]
    fn split_inverts_plan() {
        let lens = [3usize, 0, 5, 1];
        let p = plan_request(Opcode::Task, Target::PerRank, &lens, 4).unwrap();
        let mut region = p.table.clone();
        region.extend((0..9u8).collect::<Vec<_>>());
        let r = split_request(Opcode::Task, Target::PerRank, 4, &region, 4).unwrap();
        let got: Vec<usize> = r.iter().map(|x| x.len()).collect();
        assert_eq!(got, lens);
        region.push(0);
        assert_eq!(
            split_request(Opcode::Task, Target::PerRank, 4, &region, 4),
            Err(RequestError::Table { table: 9, data: 10 })
        );
        assert!(split_request(Opcode::Task, Target::Group, 2, &[], 4).is_err());
        assert!(split_request(Opcode::Ping, Target::Group, 0, &[1], 4).is_err());
        assert!(split_request(Opcode::Task, Target::Rank(4), 1, &[], 4).is_err());
    }

    #[test]
    fn records_round_trip_and_every_prefix_fails() {
        let rs = vec![
            RankReply {
                rank: 0,
                outcome: Ok(vec![1, 2, 3]),
            },
            RankReply {
                rank: 2,
                outcome: Err(RankError {
                    rank: 2,
                    error_type: "ValueError".into(),
                    message: "négatif".into(),
                }),
            },
        ];
        let mut b = Vec::new();
        for r in &rs {
            r.encode_into(&mut b);
        }
        assert_eq!(
            b.len(),
            rs.iter().map(RankReply::encoded_len).sum::<usize>()
        );
        assert_eq!(RankReply::decode_all(&b, 2).unwrap(), rs);
        for n in 0..b.len() {
            assert!(RankReply::decode_all(&b[..n], 2).is_err(), "prefix {n}");
        }
        assert_eq!(
            RankReply::decode_all(&b, 1),
            Err(RecordError::Trailing(b.len() - 23))
        );
        let mut bad = b.clone();
        bad[4] = 7;
        assert!(RankReply::decode_all(&bad, 2).is_err());
    }

    #[test]
    fn long_error_text_is_cut_on_a_char_boundary() {
        let r = RankReply {
            rank: 1,
            outcome: Err(RankError {
                rank: 1,
                error_type: "t".repeat(100),
                message: "é".repeat(600),
            }),
        };
        let mut b = Vec::new();
        r.encode_into(&mut b);
        let d = RankReply::decode_all(&b, 1).unwrap();
        let e = d[0].outcome.clone().unwrap_err();
        assert_eq!(e.error_type.len(), MAX_ERROR_TYPE);
        assert_eq!(e.message.len(), MAX_ERROR_MESSAGE);
    }
}
