//! The vectors of HELLO feature bit 2 (protocol §15): COLLECTIVE frames
//! whose header tag is a communicator id, for receivers of jobs with and
//! without the bit; `communicator-split` entries (a split's exchange and
//! what one rank computes from it, §15.3) and `communicator-take` entries
//! (a sender's queued frames as a receiver with its communicators sees
//! them, §15.4), derived with `sperli_wire::communicator`.

use std::collections::BTreeMap;

use sperli_wire::codec::Reader;
use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
use sperli_wire::communicator::{passed_over, split, Communicators, SplitError, SplitRecord};
use sperli_wire::hex;
use sperli_wire::limits::{
    FEATURE_COMMUNICATORS, FEATURE_PIPELINED, FEATURE_V1_CORE, MAX_COMMUNICATOR_ID,
};
use sperli_wire::pipeline::{encode_chunk, ChunkHeader};

use super::pipelined::frame_tagged;
use super::verify::{derive, field, num};
use super::Entry;

/// Bits 0 and 2.
const COMMS: u64 = FEATURE_V1_CORE | FEATURE_COMMUNICATORS;
/// Bits 0, 1 and 2.
const ALL: u64 = COMMS | FEATURE_PIPELINED;

// ---- communicator-split -------------------------------------------------------

fn records_line(x: &[u8], size: u32) -> Option<String> {
    let mut r = Reader::new(x);
    let recs: Vec<SplitRecord> = (0..size)
        .map(|p| SplitRecord::decode(&mut r, p))
        .collect::<Result<_, _>>()
        .ok()?;
    Some(
        recs.iter()
            .map(|x| {
                let c = x.color.map_or("none".to_string(), |c| c.to_string());
                format!("{c}/{}/{}", x.key, x.highest)
            })
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Fills in `verdict` and, for an accepted split, `records`, `id`,
/// `members`, `rank`.
pub fn derive_split(e: Entry) -> Result<Entry, String> {
    let parent = e.get("parent").unwrap_or("");
    let size: u32 = num(parent, "size")?;
    let me: u32 = num(parent, "rank")?;
    if size == 0 || me >= size {
        return Err("parent rank not below size".into());
    }
    let x = hex::decode(e.get("exchange").unwrap_or("").as_bytes()).map_err(|x| x.to_string())?;
    match split(&x, size, me) {
        Ok(s) => {
            let list = |v: &Option<Vec<u32>>| match v {
                None => "none".to_string(),
                Some(m) => m.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            };
            Ok(e.clone()
                .with("verdict", "accept")
                .with("records", records_line(&x, size).ok_or("records")?)
                .with("id", s.id.to_string())
                .with("members", list(&s.members))
                .with("rank", s.rank.map_or("none".to_string(), |r| r.to_string())))
        }
        Err(SplitError::Truncated(_)) => Ok(e.with("verdict", "reject H1617 length")),
        Err(SplitError::Exchange(_)) => Ok(e.with("verdict", "reject H1617 exchange")),
        Err(SplitError::Ids(_)) => Ok(e.with("verdict", "reject H1618 ids")),
    }
}

fn split_entry(name: &str, me: u32, recs: &[(Option<u32>, i32, u32)], verdict: &str) -> Entry {
    let mut x = Vec::new();
    for &(color, key, highest) in recs {
        SplitRecord {
            color,
            key,
            highest,
        }
        .encode(&mut x);
    }
    split_bytes(name, recs.len() as u32, me, &x, verdict)
}

fn split_bytes(name: &str, size: u32, me: u32, x: &[u8], verdict: &str) -> Entry {
    let e = Entry::new(name, "communicator-split")
        .with("parent", format!("size={size} rank={me}"))
        .with("exchange", hex::encode(x));
    let e = derive(e).unwrap_or_else(|why| panic!("{name}: {why}"));
    assert_eq!(e.get("verdict"), Some(verdict), "{name}");
    e
}

fn splits() -> Vec<Entry> {
    let mut v = Vec::new();
    // Uneven groups: colors 0 (3 ranks) and 1 (2 ranks), one rank without.
    let uneven = [
        (Some(0), 0, 0),
        (Some(1), 0, 0),
        (Some(0), 0, 0),
        (None, 0, 0),
        (Some(0), 0, 0),
        (Some(1), 0, 0),
    ];
    for me in [0, 1, 3, 4] {
        v.push(split_entry(
            &format!("split-uneven-groups-rank-{me}"),
            me,
            &uneven,
            "accept",
        ));
    }
    // Keys order the members (signed), ties by parent rank; the id is one
    // above the largest highest.
    let keyed = [
        (Some(7), 5, 2),
        (Some(7), -1, 4),
        (Some(7), 5, 1),
        (Some(7), 0, 3),
    ];
    v.push(split_entry("split-by-key-then-rank", 2, &keyed, "accept"));
    v.push(split_entry(
        "split-one-color-is-a-copy",
        1,
        &[(Some(0), 0, 0), (Some(0), 0, 0), (Some(0), 0, 0)],
        "accept",
    ));
    v.push(split_entry(
        "split-of-one-rank",
        0,
        &[(Some(3), 0, 9)],
        "accept",
    ));
    v.push(split_entry(
        "split-last-id",
        0,
        &[(Some(0), 0, MAX_COMMUNICATOR_ID - 1), (Some(0), 0, 2)],
        "accept",
    ));
    v.push(split_entry(
        "split-no-id-left",
        0,
        &[(Some(0), 0, MAX_COMMUNICATOR_ID), (Some(0), 0, 2)],
        "reject H1618 ids",
    ));
    // Records that break their rules.
    let good = {
        let mut x = Vec::new();
        for _ in 0..2 {
            SplitRecord {
                color: Some(1),
                key: 0,
                highest: 0,
            }
            .encode(&mut x);
        }
        x
    };
    let mut color = good.clone();
    color[4] = 1; // 2^32 + 1: above u32, not 2^64 - 1
    v.push(split_bytes(
        "split-color-above-u32",
        2,
        0,
        &color,
        "reject H1617 exchange",
    ));
    let mut key = good.clone();
    key[24 + 8..24 + 16].copy_from_slice(&(1u64 << 31).to_le_bytes());
    v.push(split_bytes(
        "split-key-not-an-i32",
        2,
        0,
        &key,
        "reject H1617 exchange",
    ));
    let mut high = good.clone();
    high[16..24].copy_from_slice(&(u64::from(MAX_COMMUNICATOR_ID) + 1).to_le_bytes());
    v.push(split_bytes(
        "split-highest-above-the-largest-id",
        2,
        1,
        &high,
        "reject H1617 exchange",
    ));
    v.push(split_bytes(
        "split-exchange-short",
        2,
        0,
        &good[..47],
        "reject H1617 length",
    ));
    let mut long = good.clone();
    long.push(0);
    v.push(split_bytes(
        "split-exchange-long",
        2,
        0,
        &long,
        "reject H1617 length",
    ));
    // Protocol §15.3: the length is judged before any record.
    v.push(split_bytes(
        "split-exchange-short-with-a-bad-record",
        2,
        0,
        &color[..47],
        "reject H1617 length",
    ));
    color.push(0);
    v.push(split_bytes(
        "split-exchange-long-with-a-bad-record",
        2,
        0,
        &color,
        "reject H1617 length",
    ));
    v
}

// ---- communicator-take --------------------------------------------------------

/// What a receiver holds: its communicators (members as job ranks), its
/// highest id, whether it is making one (protocol §15.4, §16.4).
pub(super) struct Known {
    pub comms: BTreeMap<u32, Vec<u32>>,
    pub highest: u32,
    pub making: bool,
}

/// Parses a `communicators:` line, `id:member,member,...` items (`none`
/// for no item), each of which must hold job rank `me`.
pub(super) fn parse_communicators(line: &str, me: u32) -> Result<BTreeMap<u32, Vec<u32>>, String> {
    let mut comms = BTreeMap::new();
    for item in line.split(' ').filter(|x| !x.is_empty() && *x != "none") {
        let (id, members) = item.split_once(':').ok_or("communicators: id:members")?;
        let id: u32 = id.parse().map_err(|_| "communicator id")?;
        let members: Vec<u32> = members
            .split(',')
            .map(|m| m.parse().map_err(|_| "member"))
            .collect::<Result<_, _>>()?;
        if !members.contains(&me) {
            return Err(format!("communicator {id} does not hold the receiver"));
        }
        comms.insert(id, members);
    }
    Ok(comms)
}

/// Builds an entry of `kind` from its inputs, derives it and asserts its
/// verdict (the generator's guard that an entry states what it is for).
pub(super) fn derived(name: &str, kind: &str, inputs: &[(&str, &str)], verdict: &str) -> Entry {
    let e = inputs
        .iter()
        .fold(Entry::new(name, kind), |e, (k, v)| e.with(k, *v));
    let e = derive(e).unwrap_or_else(|why| panic!("{name}: {why}"));
    assert_eq!(e.get("verdict"), Some(verdict), "{name}");
    e
}

impl Communicators for Known {
    fn has_member(&self, id: u32, rank: u32) -> Option<bool> {
        self.comms.get(&id).map(|m| m.contains(&rank))
    }
    fn highest(&self) -> u32 {
        self.highest
    }
    fn making(&self) -> bool {
        self.making
    }
}

/// Fills in `verdict` and `at` of a `communicator-take` entry.
pub fn derive_take(e: Entry) -> Result<Entry, String> {
    let rx = e.get("receiver").unwrap_or("");
    let me: u32 = num(rx, "rank")?;
    let making = match field(rx, "making")? {
        "yes" => true,
        "no" => false,
        _ => return Err("making is yes or no".into()),
    };
    let comms = parse_communicators(e.get("communicators").unwrap_or(""), me)?;
    let known = Known {
        comms,
        highest: num(rx, "highest")?,
        making,
    };
    let take = e.get("take").unwrap_or("");
    let from: u32 = num(take, "from")?;
    let c: u32 = num(take, "communicator")?;
    if known.has_member(c, from) != Some(true) {
        return Err("the call takes from a member of its communicator".into());
    }
    let tags: Vec<u32> = e
        .get("frames")
        .unwrap_or("")
        .split(' ')
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().map_err(|_| "frame tag"))
        .collect::<Result<_, _>>()?;
    for (i, &t) in tags.iter().enumerate() {
        if t == c {
            return Ok(e.with("verdict", "accept").with("at", i.to_string()));
        }
        if passed_over(t, from, c, &known).is_err() {
            return Ok(e
                .with("verdict", "reject H1617 communicator")
                .with("at", i.to_string()));
        }
    }
    Ok(e.with("verdict", "accept").with("at", "none"))
}

fn take(name: &str, rx: &str, comms: &str, take: &str, frames: &str, verdict: &str) -> Entry {
    derived(
        name,
        "communicator-take",
        &[
            ("receiver", rx),
            ("communicators", comms),
            ("take", take),
            ("frames", frames),
        ],
        verdict,
    )
}

fn takes() -> Vec<Entry> {
    // Rank 1 of 4 holds the job's communicator 0, communicator 3 = {0, 1}
    // (a split that gave {2, 3} the same id) and communicator 5 = {1, 2, 3}.
    let comms = "0:0,1,2,3 3:0,1 5:1,2,3";
    let rx = "rank=1 highest=5 making=no";
    let making = "rank=1 highest=5 making=yes";
    vec![
        take(
            "take-first-frame",
            rx,
            comms,
            "from=2 communicator=0",
            "0 5",
            "accept",
        ),
        take(
            "take-passes-over-a-shared-communicator",
            rx,
            comms,
            "from=2 communicator=0",
            "5 5 0",
            "accept",
        ),
        take(
            "take-waits-keeping-other-communicators",
            rx,
            comms,
            "from=0 communicator=3",
            "0 0",
            "accept",
        ),
        take(
            "take-nothing-queued",
            rx,
            comms,
            "from=3 communicator=5",
            "",
            "accept",
        ),
        take(
            "take-sender-not-a-member",
            rx,
            comms,
            "from=2 communicator=0",
            "3 0",
            "reject H1617 communicator",
        ),
        take(
            "take-unknown-communicator",
            rx,
            comms,
            "from=2 communicator=0",
            "4 0",
            "reject H1617 communicator",
        ),
        take(
            "take-id-above-highest-not-making",
            rx,
            comms,
            "from=2 communicator=5",
            "6",
            "reject H1617 communicator",
        ),
        take(
            "take-id-above-highest-while-making",
            making,
            comms,
            "from=2 communicator=5",
            "6 9 5",
            "accept",
        ),
        take(
            "take-old-id-while-making",
            making,
            comms,
            "from=2 communicator=5",
            "2 5",
            "reject H1617 communicator",
        ),
    ]
}

// ---- frames -------------------------------------------------------------------

fn star(op: Operation, phase: Phase, root: u32, data: &[u8]) -> Vec<u8> {
    let (et, red) = if op.reduces() { (4, 1) } else { (0, 0) };
    let h = CollectiveHeader {
        operation: op,
        element_type: et,
        reduction: red,
        phase,
        root,
        sequence: 2,
    };
    let mut p = h.to_bytes().to_vec();
    p.extend_from_slice(data);
    p
}

fn frames() -> Vec<Entry> {
    let ar = star(Operation::Allreduce, Phase::ToRoot, 0, &7u64.to_le_bytes());
    let bc = star(Operation::Bcast, Phase::FromRoot, 1, b"abc");
    let mut chunk = Vec::new();
    let h = CollectiveHeader {
        operation: Operation::Allreduce,
        element_type: 4,
        reduction: 1,
        phase: Phase::Partial,
        root: 0,
        sequence: 2,
    };
    encode_chunk(
        &h,
        ChunkHeader {
            offset: 0,
            total: 16,
        },
        &[1; 8],
        &mut chunk,
    );
    let cases: [(&str, u64, u32, &[u8], &str); 8] = [
        ("frame-collective-communicator-3", COMMS, 3, &ar, "accept"),
        (
            "frame-collective-communicator-largest-id",
            COMMS,
            MAX_COMMUNICATOR_ID,
            &bc,
            "accept",
        ),
        (
            "frame-collective-communicator-pipelined",
            ALL,
            9,
            &chunk,
            "accept",
        ),
        (
            "frame-collective-communicator-0-with-bit-2",
            COMMS,
            0,
            &ar,
            "accept",
        ),
        (
            "reject-collective-communicator-reserved-id",
            COMMS,
            MAX_COMMUNICATOR_ID + 1,
            &ar,
            "reject H1610 tag",
        ),
        (
            "reject-collective-communicator-without-bit-2",
            FEATURE_V1_CORE | FEATURE_PIPELINED,
            3,
            &ar,
            "reject H1610 tag",
        ),
        (
            "reject-collective-communicator-in-a-v1-job",
            FEATURE_V1_CORE,
            1,
            &bc,
            "reject H1610 tag",
        ),
        (
            "reject-collective-communicator-pipelined-without-bit-1",
            COMMS,
            9,
            &chunk,
            "reject H1610 payload",
        ),
    ];
    cases
        .iter()
        .map(|&(name, f, tag, p, verdict)| {
            let e = frame_tagged(name, 1, 2, Some(f), tag, p);
            assert_eq!(e.get("verdict"), Some(verdict), "{name}");
            e
        })
        .collect()
}

/// Every bit-2 entry.
pub fn entries() -> Vec<Entry> {
    let mut v = frames();
    v.extend(splits());
    v.extend(takes());
    v
}
