//! Host entries: a DNS name or a dotted IPv4 address (protocol §4.3).

use std::net::Ipv4Addr;

use crate::error::HostError;
use crate::limits::MAX_HOST_LEN;

/// What a valid host entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKind {
    /// A DNS name (certificate SAN as a DNS name).
    Dns,
    /// A dotted IPv4 address (certificate SAN as an IP address, checked as one).
    Ipv4(Ipv4Addr),
}

/// Parses a dotted IPv4 address: four decimal numbers 0-255, no leading zeros.
pub fn parse_ipv4(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if p.len() > 1 && p.starts_with('0') {
            return None;
        }
        *octet = p.parse::<u8>().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(Ipv4Addr::from(octets))
}

/// Validates a host entry as stored in a job description or token:
/// lowercase, no trailing dot (protocol §4.3).
///
/// ```
/// use sperli_wire::host::{validate, HostKind};
/// assert_eq!(validate("node-1.example").unwrap(), HostKind::Dns);
/// assert!(matches!(validate("127.0.0.2").unwrap(), HostKind::Ipv4(_)));
/// assert!(validate("01.2.3.4").is_err());
/// assert!(validate("Node").is_err());
/// ```
pub fn validate(host: &str) -> Result<HostKind, HostError> {
    let len = host.len();
    if len == 0 || len > MAX_HOST_LEN {
        return Err(HostError::Length { len });
    }
    if let Some(&byte) = host
        .as_bytes()
        .iter()
        .find(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || **b == b'-' || **b == b'.'))
    {
        return Err(HostError::BadChar { byte });
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return parse_ipv4(host)
            .map(HostKind::Ipv4)
            .ok_or_else(|| HostError::BadIpv4 {
                host: host.to_owned(),
            });
    }
    for label in host.split('.') {
        if label.is_empty() || label.len() > 63 || label.starts_with('-') || label.ends_with('-') {
            return Err(HostError::BadLabel {
                label: label.to_owned(),
            });
        }
    }
    Ok(HostKind::Dns)
}

/// What the launcher does to a host the user typed: lowercase, drop one trailing dot.
pub fn normalize(host: &str) -> String {
    let h = host.strip_suffix('.').unwrap_or(host);
    h.to_ascii_lowercase()
}

/// Whether a host is local to this machine: `localhost` or 127.0.0.0/8.
pub fn is_loopback(host: &str) -> bool {
    host == "localhost" || parse_ipv4(host).is_some_and(|a| a.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        for ok in [
            "a",
            "localhost",
            "x-1.y",
            "0.0.0.0",
            "255.255.255.255",
            "a1.2",
        ] {
            assert!(validate(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1.2.3",
            "999.1.1.1",
            "01.2.3.4",
            "1.2.3.4.5",
            "-a",
            "a-",
            "a..b",
            ".a",
            "a.",
            "A",
            "a_b",
            "1.2.3.",
            "256.0.0.1",
        ] {
            assert!(validate(bad).is_err(), "{bad}");
        }
        assert!(validate(&"a".repeat(63)).is_ok());
        assert!(validate(&"a".repeat(64)).is_err());
        let long = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert_eq!(long.len(), 253);
        assert!(validate(&long).is_ok());
        assert_eq!(
            validate(&format!("{long}e")),
            Err(HostError::Length { len: 254 })
        );
    }

    #[test]
    fn loopback() {
        assert!(is_loopback("127.0.0.3"));
        assert!(is_loopback("localhost"));
        assert!(!is_loopback("10.0.0.1"));
        assert_eq!(normalize("Node.Example."), "node.example");
    }
}
