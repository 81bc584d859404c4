//! Host lists and placement (protocol text "Transport und Sicherheit";
//! layouts §10 "Refused hosts").
//!
//! `-H h1[:port],h2,...` or `--hostfile FILE` (one `host[:port]` per line,
//! `#` comments, an optional ` slots=N` as mpirun writes it, ignored for
//! placement). Names are lowercased and a trailing dot dropped, as the
//! launcher stores them in job descriptions. Every entry is checked against
//! the refused-host policy before anything starts.
//!
//! Placement is round-robin over the listed hosts: rank r runs on host
//! `r mod H`. With two or more hosts, rank r and its checkpoint buddy
//! `(r + 1) mod size` therefore run on different hosts (except where
//! `size mod H == 1` wraps the last rank onto rank 0's host, which only
//! happens when H does not divide the job evenly; see [`place`]).

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
    /// A refused host (H1614).
    #[error("{0}")]
    Refused(Error),
    /// The list is empty.
    #[error("the host list is empty")]
    Empty,
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
    Ok(HostSpec { host, port })
}

/// Parses `h1[:port],h2,...`, refusing hosts as `policy` says.
///
/// ```
/// use sperli_launch::hosts::parse_host_list;
/// use sperli_wire::refused_hosts::RefusedHosts;
/// let p = RefusedHosts::builtin();
/// let hosts = parse_host_list("127.0.0.1:7000, Node-B.example.", &p).unwrap();
/// assert_eq!(hosts[1].host, "node-b.example");
/// assert!(parse_host_list("x.HOST-A.invalid", &p).is_err());
/// ```
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

/// Parses a hostfile: one `host[:port]` per line, `#` comments, optional
/// `slots=N` after the host (accepted for mpirun compatibility).
pub fn parse_hostfile(text: &str, policy: &RefusedHosts) -> Result<Vec<HostSpec>, HostListError> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(first) = line.split_whitespace().next() {
            out.push(parse_entry(first)?);
        }
    }
    check_all(out, policy)
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

/// Round-robin placement: the host index of each of `n` ranks.
///
/// ```
/// assert_eq!(sperli_launch::hosts::place(5, 2), vec![0, 1, 0, 1, 0]);
/// ```
pub fn place(n: u32, hosts: usize) -> Vec<usize> {
    (0..n as usize).map(|r| r % hosts.max(1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(f[1].port, Some(5000));
    }

    #[test]
    fn buddies_on_other_hosts() {
        for hosts in 2..5 {
            for n in 2..20u32 {
                let p = place(n, hosts);
                for r in 0..n as usize - 1 {
                    assert_ne!(p[r], p[r + 1], "n={n} hosts={hosts} r={r}");
                }
            }
        }
    }
}
