//! Communicators (HELLO feature bit 2, protocol §15): the 24-byte record
//! a rank contributes to a split's exchange, what every rank computes from
//! the exchange (the new id, the groups, its own rank), the id of a dup,
//! and the judgement of a frame of another communicator that a call passes
//! over while it takes a sender's frames (§15.4).
//!
//! Pure functions: the collective layer makes the exchange with ordinary
//! calls on the parent communicator and hands the bytes here; the vectors
//! (`communicator-split`, `communicator-take`) are derived from the same
//! functions.

use crate::codec::{PutLe, Reader};
use crate::error::{ArgumentError, DecodeError, MismatchError};
use crate::limits::MAX_COMMUNICATOR_ID;

/// The length of one rank's record in a split's exchange.
pub const SPLIT_RECORD_LEN: usize = 24;

/// The `color` of a rank that joins no communicator ("no color").
pub const NO_COLOR: u64 = u64::MAX;

/// One rank's record in a split's exchange (protocol §15.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitRecord {
    /// The rank's color, `None` for no color (it joins no communicator).
    pub color: Option<u32>,
    /// The rank's key: members are ordered by key, then by parent rank.
    pub key: i32,
    /// The largest communicator id the rank has made so far.
    pub highest: u32,
}

impl SplitRecord {
    /// Appends the 24 bytes: color (u64, [`NO_COLOR`] for none), key (the
    /// i32 as a two's-complement i64), highest (u64).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.color.map_or(NO_COLOR, u64::from));
        out.put_u64(i64::from(self.key) as u64);
        out.put_u64(u64::from(self.highest));
    }

    /// Reads one record of parent rank `from`; a value outside its rule
    /// (protocol §15.3 table) does not fit the call (H1617).
    pub fn decode(r: &mut Reader<'_>, from: u32) -> Result<Self, SplitError> {
        let color = r.u64("color")?;
        let key = r.u64("key")?;
        let highest = r.u64("highest")?;
        let bad = |field, got| SplitError::Exchange(MismatchError::Exchange { from, field, got });
        let color = match color {
            NO_COLOR => None,
            c => Some(u32::try_from(c).map_err(|_| bad("color", c))?),
        };
        let key = i32::try_from(key as i64).map_err(|_| bad("key", key))?;
        let highest = u32::try_from(highest)
            .ok()
            .filter(|&h| h <= MAX_COMMUNICATOR_ID)
            .ok_or(bad("highest", highest))?;
        Ok(Self {
            color,
            key,
            highest,
        })
    }
}

/// Why a split's exchange gives no communicator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitError {
    /// The exchange is not `size` records of 24 bytes, judged before any
    /// record (protocol §15.3): H1617, ABORT reason 3 (check `length`).
    Truncated(DecodeError),
    /// A record breaks its rule: H1617, ABORT reason 3.
    Exchange(MismatchError),
    /// No id is left: H1618 on every rank, the job goes on.
    Ids(ArgumentError),
}

impl From<DecodeError> for SplitError {
    fn from(e: DecodeError) -> Self {
        SplitError::Truncated(e)
    }
}

/// What one rank computes from a split's exchange (protocol §15.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The id of every communicator this split makes.
    pub id: u32,
    /// This rank's communicator: its members' parent ranks in the order of
    /// their new ranks; `None` for a rank without a color.
    pub members: Option<Vec<u32>>,
    /// This rank's rank in it.
    pub rank: Option<u32>,
}

/// The id after `highest`, the largest id in use (protocol §15.3 step 1):
/// H1618 when none is left.
pub fn next_id(highest: u64) -> Result<u32, ArgumentError> {
    highest
        .checked_add(1)
        .and_then(|id| u32::try_from(id).ok())
        .filter(|&id| id <= MAX_COMMUNICATOR_ID)
        .ok_or(ArgumentError::CommunicatorIds { highest })
}

/// Decodes a split's exchange (`size` records in parent rank order, the
/// bcast data of its allgather) and computes what parent rank `me` gets.
///
/// ```
/// use sperli_wire::communicator::{split, Split, SplitRecord};
/// let mut x = Vec::new();
/// for (color, key) in [(Some(1), 0), (Some(0), 5), (Some(1), -3), (None, 0)] {
///     SplitRecord { color, key, highest: 2 }.encode(&mut x);
/// }
/// // Parent rank 0: color 1 with parent rank 2, ordered by key (-3 first).
/// assert_eq!(split(&x, 4, 0).unwrap(),
///            Split { id: 3, members: Some(vec![2, 0]), rank: Some(1) });
/// assert_eq!(split(&x, 4, 3).unwrap(), Split { id: 3, members: None, rank: None });
/// ```
pub fn split(exchange: &[u8], size: u32, me: u32) -> Result<Split, SplitError> {
    // Protocol §15.3: the exchange's length is judged before any record, so
    // a short or long exchange is `length` whatever its records hold.
    let want = SPLIT_RECORD_LEN as u64 * u64::from(size);
    if exchange.len() as u64 != want {
        return Err(SplitError::Truncated(DecodeError::Mismatch {
            field: "split exchange length",
            expected: want,
            got: exchange.len() as u64,
        }));
    }
    let mut r = Reader::new(exchange);
    let records = (0..size)
        .map(|from| SplitRecord::decode(&mut r, from))
        .collect::<Result<Vec<_>, _>>()?;
    r.expect_end("split exchange")?;
    let highest = records
        .iter()
        .map(|x| u64::from(x.highest))
        .max()
        .unwrap_or(0);
    let id = next_id(highest).map_err(SplitError::Ids)?;
    let mine = records.get(me as usize).and_then(|x| x.color);
    let Some(color) = mine else {
        return Ok(Split {
            id,
            members: None,
            rank: None,
        });
    };
    let mut group: Vec<(i32, u32)> = records
        .iter()
        .zip(0u32..)
        .filter(|(x, _)| x.color == Some(color))
        .map(|(x, p)| (x.key, p))
        .collect();
    group.sort_unstable();
    let members: Vec<u32> = group.into_iter().map(|(_, p)| p).collect();
    let rank = members.iter().position(|&p| p == me).map(|i| i as u32);
    Ok(Split {
        id,
        members: Some(members),
        rank,
    })
}

/// What a receiver knows when it judges a frame of another communicator
/// (protocol §15.4).
pub trait Communicators {
    /// Whether `id` is one of this rank's communicators and, if so, whether
    /// job rank `rank` is a member of it (`None`: not a communicator here).
    fn has_member(&self, id: u32, rank: u32) -> Option<bool>;
    /// The largest id this rank has made.
    fn highest(&self) -> u32;
    /// Whether this rank is inside a split or dup right now.
    fn making(&self) -> bool;
}

/// What one rank holds of its communicators, the plain [`Communicators`]:
/// its highest id, whether it is inside a split or dup, and the ids it
/// holds (not the job's 0) with their members' job ranks.
///
/// ```
/// use sperli_wire::communicator::{Communicators, KnownCommunicators};
/// let mut k = KnownCommunicators::default();
/// k.made(3, Some(std::sync::Arc::from([0, 2])));
/// assert_eq!((k.has_member(3, 2), k.has_member(3, 1), k.highest()), (Some(true), Some(false), 3));
/// assert_eq!(k.has_member(0, 7), Some(true)); // the job's
/// ```
#[derive(Debug, Clone, Default)]
pub struct KnownCommunicators {
    /// The largest id this rank has made.
    pub highest: u32,
    /// Inside a split or dup.
    pub making: bool,
    /// The communicators this rank holds: id to its members' job ranks.
    pub comms: std::collections::HashMap<u32, std::sync::Arc<[u32]>>,
}

impl KnownCommunicators {
    /// The call that gave out `id` ended on this rank: its highest is at
    /// least `id`, it is no longer making one, and it holds `members` (job
    /// ranks) as `id` if it joined.
    pub fn made(&mut self, id: u32, members: Option<std::sync::Arc<[u32]>>) {
        self.highest = self.highest.max(id);
        self.making = false;
        if let Some(m) = members {
            self.comms.insert(id, m);
        }
    }
}

impl Communicators for KnownCommunicators {
    fn has_member(&self, id: u32, rank: u32) -> Option<bool> {
        if id == 0 {
            return Some(true);
        }
        self.comms.get(&id).map(|m| m.contains(&rank))
    }
    fn highest(&self) -> u32 {
        self.highest
    }
    fn making(&self) -> bool {
        self.making
    }
}

/// Protocol §15.4: a frame of job rank `from` with tag `tag` that a call on
/// communicator `taking` passes over is kept (`Ok`) when `tag` names a
/// communicator of this rank of which `from` is a member, or an id above
/// this rank's highest while it makes a communicator; anything else is a
/// frame of another communicator (H1617, ABORT reason 3).
///
/// ```
/// use sperli_wire::communicator::{passed_over, Communicators};
/// struct Mine;
/// impl Communicators for Mine {
///     fn has_member(&self, id: u32, rank: u32) -> Option<bool> {
///         (id == 0 || id == 4).then_some(id == 0 || rank < 2)
///     }
///     fn highest(&self) -> u32 { 4 }
///     fn making(&self) -> bool { false }
/// }
/// assert!(passed_over(4, 1, 0, &Mine).is_ok()); // kept for communicator 4
/// assert!(passed_over(4, 3, 0, &Mine).is_err()); // rank 3 is not in it
/// assert!(passed_over(9, 1, 0, &Mine).is_err()); // not being made
/// ```
pub fn passed_over(
    tag: u32,
    from: u32,
    taking: u32,
    known: &impl Communicators,
) -> Result<(), MismatchError> {
    let keep = match known.has_member(tag, from) {
        Some(member) => member,
        None => known.making() && tag > known.highest(),
    };
    if keep {
        Ok(())
    } else {
        Err(MismatchError::Communicator {
            from,
            expected: taking,
            got: tag,
        })
    }
}

/// Protocol §15.4 on one sender's queue of (tag, payload) in arrival
/// order: removes and returns the earliest payload whose tag is `tag`;
/// every entry with another tag before it is shown to `pass` (its tag),
/// whose error ends the take (the entries stay). `None` when no entry has
/// `tag`.
pub fn take_earliest<P, E>(
    queue: &mut std::collections::VecDeque<(u32, P)>,
    tag: u32,
    mut pass: impl FnMut(u32) -> Result<(), E>,
) -> Option<Result<P, E>> {
    for i in 0..queue.len() {
        let t = queue[i].0;
        if t == tag {
            return queue.remove(i).map(|(_, p)| Ok(p));
        }
        if let Err(e) = pass(t) {
            return Some(Err(e));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn exchange(records: &[SplitRecord]) -> Vec<u8> {
        let mut x = Vec::new();
        for r in records {
            r.encode(&mut x);
        }
        x
    }

    #[test]
    fn take_earliest_skips_other_tags_and_stops_at_a_refusal() {
        let mut q: std::collections::VecDeque<(u32, u8)> = [(3, 1), (0, 2), (0, 3)].into();
        assert_eq!(take_earliest(&mut q, 0, |_| Ok::<(), ()>(())), Some(Ok(2)));
        assert_eq!(
            take_earliest(&mut q, 0, |t| if t == 3 { Err(t) } else { Ok(()) }),
            Some(Err(3))
        );
        assert_eq!(q.len(), 2, "a refusal leaves the queue as it was");
        assert_eq!(take_earliest(&mut q, 5, |_| Ok::<(), ()>(())), None);
    }

    #[test]
    fn records_round_trip_and_every_proper_prefix_fails() {
        let rec = SplitRecord {
            color: Some(7),
            key: -2,
            highest: 9,
        };
        let x = exchange(&[rec]);
        assert_eq!(x.len(), SPLIT_RECORD_LEN);
        assert_eq!(SplitRecord::decode(&mut Reader::new(&x), 0).unwrap(), rec);
        for n in 0..x.len() {
            assert!(matches!(
                split(&x[..n], 1, 0),
                Err(SplitError::Truncated(_))
            ));
        }
        let mut long = x.clone();
        long.push(0);
        assert!(matches!(split(&long, 1, 0), Err(SplitError::Truncated(_))));
    }

    #[test]
    fn the_length_is_judged_before_any_record() {
        // Record 0 breaks its rule (color 2^32), and the exchange is one
        // record short of size 2, or one byte long: `length` either way.
        let mut x = exchange(&[SplitRecord {
            color: Some(1),
            key: 0,
            highest: 0,
        }]);
        x[4] = 1;
        assert!(matches!(split(&x, 2, 0), Err(SplitError::Truncated(_))));
        x.push(0);
        assert!(matches!(split(&x, 1, 0), Err(SplitError::Truncated(_))));
        x.pop();
        assert!(matches!(split(&x, 1, 0), Err(SplitError::Exchange(_))));
    }

    #[test]
    fn out_of_rule_values_are_exchange_mismatches() {
        let mut x = exchange(&[SplitRecord {
            color: Some(1),
            key: 0,
            highest: 0,
        }]);
        x[4] = 1; // color 2^32 + 1
        let e = split(&x, 1, 0).unwrap_err();
        assert!(matches!(
            e,
            SplitError::Exchange(MismatchError::Exchange { field: "color", .. })
        ));
        let mut x = exchange(&[SplitRecord {
            color: None,
            key: 0,
            highest: 0,
        }]);
        x[12] = 1; // key 2^32: not an i32
        assert!(matches!(
            split(&x, 1, 0),
            Err(SplitError::Exchange(MismatchError::Exchange {
                field: "key",
                ..
            }))
        ));
        let x = {
            let mut v = Vec::new();
            v.put_u64(0);
            v.put_u64(0);
            v.put_u64(u64::from(MAX_COMMUNICATOR_ID) + 1);
            v
        };
        assert!(matches!(
            split(&x, 1, 0),
            Err(SplitError::Exchange(MismatchError::Exchange {
                field: "highest",
                ..
            }))
        ));
    }

    #[test]
    fn ids_run_out_at_the_largest() {
        let rec = |h| SplitRecord {
            color: Some(0),
            key: 0,
            highest: h,
        };
        let x = exchange(&[rec(MAX_COMMUNICATOR_ID - 1), rec(3)]);
        assert_eq!(split(&x, 2, 1).unwrap().id, MAX_COMMUNICATOR_ID);
        let x = exchange(&[rec(MAX_COMMUNICATOR_ID), rec(3)]);
        assert!(matches!(split(&x, 2, 1), Err(SplitError::Ids(_))));
        assert_eq!(next_id(0), Ok(1));
    }

    proptest! {
        #[test]
        fn every_rank_computes_the_same_partition(
            recs in proptest::collection::vec((proptest::option::of(0u32..3), -2i32..3, 0u32..5), 1..12)
        ) {
            let records: Vec<SplitRecord> = recs
                .iter()
                .map(|&(color, key, highest)| SplitRecord { color, key, highest })
                .collect();
            let n = records.len() as u32;
            let x = exchange(&records);
            let all: Vec<Split> = (0..n).map(|me| split(&x, n, me).unwrap()).collect();
            let id = all[0].id;
            for (me, s) in all.iter().enumerate() {
                prop_assert_eq!(s.id, id);
                match (&s.members, s.rank) {
                    (Some(m), Some(r)) => {
                        prop_assert_eq!(m[r as usize], me as u32);
                        // Every member computes the same list.
                        for &p in m {
                            prop_assert_eq!(&all[p as usize].members, &s.members);
                        }
                        // Ordered by (key, parent rank).
                        for w in m.windows(2) {
                            let (a, b) = (&records[w[0] as usize], &records[w[1] as usize]);
                            prop_assert!((a.key, w[0]) < (b.key, w[1]));
                        }
                    }
                    (None, None) => prop_assert_eq!(records[me].color, None),
                    _ => prop_assert!(false, "members without a rank"),
                }
            }
        }

        #[test]
        fn any_exchange_bytes_get_an_answer(bytes in proptest::collection::vec(any::<u8>(), 0..100), n in 1u32..5) {
            let _ = split(&bytes, n, 0);
        }
    }
}
