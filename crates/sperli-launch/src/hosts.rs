//! Host lists, the deny file and placement (protocol §2.3 refused hosts and
//! the deny file, §4.3 hosts).
//!
//! `-H h1[:port],h2,...` or `--hostfile FILE` (one `host[:port]` per line,
//! `#` comments, an optional ` slots=N` as mpirun writes it). Names are
//! lowercased and a trailing dot dropped, as the launcher stores them in
//! job descriptions. Every entry is checked against the refused-host
//! policy before anything starts.
//!
//! Placement ([`place`]) is mpirun's: by default (`--map-by slot`) each
//! host's slots are filled before the next host gets a rank; `--map-by
//! node` deals the ranks round-robin, one per host with a free slot. A
//! host without `slots=` has one slot, so a plain list is round-robin
//! either way, and rank r and its checkpoint buddy r+1 run on different
//! hosts. When the job has more ranks than slots, placement goes round
//! again (oversubscribing, as before slots existed).

use std::fmt;

use sperli_wire::host::{normalize, validate};
use sperli_wire::refused_hosts::RefusedHosts;
use sperli_wire::Error;

/// One host of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// Lowercase name or dotted IPv4 address.
    pub host: String,
    /// The first port to use on this host, if given.
    pub port: Option<u16>,
    /// Ranks this host takes in one round of placement (`slots=N`; 1 when
    /// not given).
    pub slots: u32,
}

impl HostSpec {
    /// A host with one slot and no port.
    pub fn named(host: &str) -> Self {
        Self {
            host: host.to_owned(),
            port: None,
            slots: 1,
        }
    }
}

/// Why a host list is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostListError {
    /// An entry that is not `host[:port]`.
    #[error("host list entry {entry:?} is not host[:port] with a port of 1-65535")]
    Syntax {
        /// The entry.
        entry: String,
    },
    /// A host that is neither a DNS name nor a dotted IPv4 address.
    #[error("host {entry:?} is invalid: {error}")]
    Invalid {
        /// The entry.
        entry: String,
        /// Why.
        error: sperli_wire::error::HostError,
    },
    /// A hostfile field other than `slots=N` with N in 1..=4096.
    #[error("hostfile line {line}: {field:?} is not slots=N with N of 1-4096")]
    Field {
        /// The line number (from 1).
        line: usize,
        /// The field.
        field: String,
    },
    /// A refused host (H1614).
    #[error("{0}")]
    Refused(Error),
    /// The list is empty.
    #[error("the host list is empty")]
    Empty,
}

/// A deny file (`--deny-hosts`) entry that is not a valid host (protocol
/// §2.3: it "stops the launcher, as an unreadable file does: a refusal that
/// cannot be read refuses nothing, so it is never skipped").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("deny file line {line}: {entry:?} is not a valid host ({error}); refusing to start")]
pub struct DenyFileError {
    /// The line number (from 1).
    pub line: usize,
    /// The entry as written.
    pub entry: String,
    /// Why it is not a host.
    pub error: sperli_wire::error::HostError,
}

impl fmt::Display for HostSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}:{p}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

fn parse_entry(entry: &str) -> Result<HostSpec, HostListError> {
    let syntax = || HostListError::Syntax {
        entry: entry.to_string(),
    };
    let (name, port) = match entry.rsplit_once(':') {
        Some((h, p)) => {
            let port: u16 = p.parse().map_err(|_| syntax())?;
            if port == 0 {
                return Err(syntax());
            }
            (h, Some(port))
        }
        None => (entry, None),
    };
    let host = normalize(name);
    validate(&host).map_err(|error| HostListError::Invalid {
        entry: entry.to_string(),
        error,
    })?;
    Ok(HostSpec {
        host,
        port,
        slots: 1,
    })
}

/// Parses `h1[:port],h2,...`, refusing hosts as `policy` says.
pub fn parse_host_list(list: &str, policy: &RefusedHosts) -> Result<Vec<HostSpec>, HostListError> {
    check_all(
        list.split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(parse_entry)
            .collect::<Result<Vec<_>, _>>()?,
        policy,
    )
}

/// Parses a hostfile: one `host[:port] [slots=N]` per line, `#` comments.
pub fn parse_hostfile(text: &str, policy: &RefusedHosts) -> Result<Vec<HostSpec>, HostListError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            continue;
        };
        let mut spec = parse_entry(first)?;
        for field in words {
            let bad = || HostListError::Field {
                line: i + 1,
                field: field.to_owned(),
            };
            let n: u32 = field
                .strip_prefix("slots=")
                .and_then(|v| v.parse().ok())
                .ok_or_else(bad)?;
            if !(1..=sperli_wire::limits::MAX_SIZE).contains(&n) {
                return Err(bad());
            }
            spec.slots = n;
        }
        out.push(spec);
    }
    check_all(out, policy)
}

/// The names of a deny file (protocol §2.3): separated by commas and any
/// whitespace, blank lines and lines starting with `#` ignored, each
/// lowercased with a trailing dot dropped and checked to be a valid host.
/// Returns them one per line, as [`RefusedHosts::new`] takes them.
///
/// ```
/// use sperli_launch::parse_deny_file;
/// let names = parse_deny_file("a.example b.example,127.0.0.3\n# note\n").unwrap();
/// assert_eq!(names, "a.example\nb.example\n127.0.0.3\n");
/// assert!(parse_deny_file("ok.example *.bad\n").is_err());
/// ```
pub fn parse_deny_file(text: &str) -> Result<String, DenyFileError> {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        for entry in line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|e| !e.is_empty())
        {
            let name = normalize(entry);
            validate(&name).map_err(|error| DenyFileError {
                line: i + 1,
                entry: entry.to_owned(),
                error,
            })?;
            out.push_str(&name);
            out.push('\n');
        }
    }
    Ok(out)
}

fn check_all(hosts: Vec<HostSpec>, policy: &RefusedHosts) -> Result<Vec<HostSpec>, HostListError> {
    if hosts.is_empty() {
        return Err(HostListError::Empty);
    }
    for h in &hosts {
        policy.check(&h.host).map_err(HostListError::Refused)?;
    }
    Ok(hosts)
}

/// How ranks are dealt to hosts (mpirun's `--map-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapBy {
    /// Fill each host's slots before the next (mpirun's default).
    #[default]
    Slot,
    /// One rank per host in turn, skipping hosts whose slots are full.
    Node,
}

impl std::str::FromStr for MapBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "slot" => Ok(MapBy::Slot),
            "node" => Ok(MapBy::Node),
            other => Err(format!("--map-by {other:?}: expected slot or node")),
        }
    }
}

/// The host index of each of `n` ranks (see the module docs).
///
/// ```
/// use sperli_launch::{place, HostSpec, MapBy};
/// let mut hosts = vec![HostSpec::named("a"), HostSpec::named("b")];
/// assert_eq!(place(5, &hosts, MapBy::Slot), vec![0, 1, 0, 1, 0]);
/// hosts[0].slots = 2;
/// hosts[1].slots = 2;
/// assert_eq!(place(5, &hosts, MapBy::Slot), vec![0, 0, 1, 1, 0]);
/// assert_eq!(place(5, &hosts, MapBy::Node), vec![0, 1, 0, 1, 0]);
/// ```
pub fn place(n: u32, hosts: &[HostSpec], map_by: MapBy) -> Vec<usize> {
    if hosts.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(n as usize);
    while out.len() < n as usize {
        // One round: every slot once.
        let mut left: Vec<u32> = hosts.iter().map(|h| h.slots.max(1)).collect();
        match map_by {
            MapBy::Slot => {
                for (h, slots) in left.iter().enumerate() {
                    for _ in 0..*slots {
                        out.push(h);
                    }
                }
            }
            MapBy::Node => {
                while left.iter().any(|s| *s > 0) {
                    for (h, slots) in left.iter_mut().enumerate() {
                        if *slots > 0 {
                            *slots -= 1;
                            out.push(h);
                        }
                    }
                }
            }
        }
    }
    out.truncate(n as usize);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_list_is_normalized_and_checked() {
        let p = RefusedHosts::builtin();
        let hosts = parse_host_list("127.0.0.1:7000, Node-B.example.", &p).unwrap();
        assert_eq!(hosts[1].host, "node-b.example");
        assert!(parse_host_list("x.HOST-A.invalid", &p).is_err());
    }

    #[test]
    fn a_hostfile_gives_slots() {
        let h = parse_hostfile("node1 slots=4\nnode2\n", &RefusedHosts::builtin()).unwrap();
        assert_eq!((h[0].slots, h[1].slots), (4, 1));
    }
    use sperli_wire::HCode;

    #[test]
    fn refused_in_every_spelling() {
        let p = RefusedHosts::new(Some("bad.example"), Some("worse.example\n"));
        for list in [
            "host-a.invalid",
            "HOST-B.INVALID",
            "host-a.invalid.",
            "n1.host-b.invalid",
            "ok.example,Sub.Bad.Example.",
            "worse.example:7000",
        ] {
            match parse_host_list(list, &p) {
                Err(HostListError::Refused(e)) => assert_eq!(e.h_code(), Some(HCode::H1614)),
                other => panic!("{list}: {other:?}"),
            }
        }
        assert!(parse_host_list("ok.example,127.0.0.2:9", &p).is_ok());
    }

    #[test]
    fn syntax() {
        let p = RefusedHosts::builtin();
        assert!(matches!(
            parse_host_list("a:0", &p),
            Err(HostListError::Syntax { .. })
        ));
        assert!(matches!(
            parse_host_list("a:x", &p),
            Err(HostListError::Syntax { .. })
        ));
        assert!(matches!(
            parse_host_list("01.2.3.4", &p),
            Err(HostListError::Invalid { .. })
        ));
        assert_eq!(parse_host_list(" , ", &p), Err(HostListError::Empty));
        let f = parse_hostfile("# c\nnode1 slots=4\n\n127.0.0.3:5000 # x\n", &p).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].slots, f[1].slots), (4, 1));
        assert_eq!(f[1].port, Some(5000));
        for bad in [
            "node1 slots=0",
            "node1 slots=x",
            "node1 slots=4097",
            "node1 max_slots=2",
            "node1 4",
        ] {
            assert!(
                matches!(
                    parse_hostfile(bad, &p),
                    Err(HostListError::Field { line: 1, .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_deny_file_separates_like_the_variable_and_fails_closed() {
        let names =
            parse_deny_file("a.example b.example,127.0.0.3\n\n  # c\n\tC.Example.\n").unwrap();
        assert_eq!(names, "a.example\nb.example\n127.0.0.3\nc.example\n");
        let p = RefusedHosts::new(None, Some(&names));
        for h in ["a.example", "x.b.example", "127.0.0.3", "c.example"] {
            assert!(p.check(h).is_err(), "{h}");
        }
        assert!(p.check("127.0.0.4").is_ok());
        for (text, line) in [
            ("ok.example\nbad_name\n", 2),
            ("01.2.3.4", 1),
            ("a.example,,*.x", 1),
        ] {
            let e = parse_deny_file(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}");
            assert!(e.to_string().contains("refusing to start"), "{e}");
        }
        assert_eq!(parse_deny_file("").unwrap(), "");
    }

    fn hosts(slots: &[u32]) -> Vec<HostSpec> {
        slots
            .iter()
            .enumerate()
            .map(|(i, s)| HostSpec {
                slots: *s,
                ..HostSpec::named(&format!("h{i}"))
            })
            .collect()
    }

    #[test]
    fn slots_fill_first_by_default_and_round_robin_on_request() {
        let h = hosts(&[2, 1, 3]);
        assert_eq!(place(6, &h, MapBy::Slot), vec![0, 0, 1, 2, 2, 2]);
        assert_eq!(place(6, &h, MapBy::Node), vec![0, 1, 2, 0, 2, 2]);
        // More ranks than slots: another round.
        assert_eq!(place(8, &h, MapBy::Slot), vec![0, 0, 1, 2, 2, 2, 0, 0]);
        assert_eq!(place(3, &h, MapBy::Slot), vec![0, 0, 1]);
        assert!(place(3, &[], MapBy::Slot).is_empty());
    }

    #[test]
    fn buddies_on_other_hosts() {
        for n_hosts in 2..5 {
            let h = hosts(&vec![1; n_hosts]);
            for n in 2..20u32 {
                for map_by in [MapBy::Slot, MapBy::Node] {
                    let p = place(n, &h, map_by);
                    for r in 0..n as usize - 1 {
                        assert_ne!(p[r], p[r + 1], "n={n} hosts={n_hosts} r={r}");
                    }
                }
            }
        }
    }
}
