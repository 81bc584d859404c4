//! The refused-host policy (protocol §2.3).
//!
//! Refused are: the built-in names `host-a.invalid` and `host-b.invalid`, the
//! names of `SPERLI_REFUSED_HOSTS` (separated by commas or any whitespace) and
//! the names of a `--deny-hosts` file (one per line), each with every
//! subdomain below it, in any letter case, a trailing dot ignored. An IPv4
//! entry refuses only that address. This module does no I/O: the caller reads
//! the variable and the file and passes their text.

use crate::error::{Error, RefusalRule};
use crate::host::parse_ipv4;

/// Names that never run a rank.
pub const RESERVED: [&str; 2] = ["host-a.invalid", "host-b.invalid"];

/// The environment variable that names refused hosts.
pub const ENV_VAR: &str = crate::env::REFUSED_HOSTS;

/// A refused-host policy.
///
/// ```
/// use sperli_wire::refused_hosts::RefusedHosts;
/// let p = RefusedHosts::new(Some("bad.example, 10.0.0.9"), None);
/// assert!(p.check("Node.BAD.example.").is_err());
/// assert!(p.check("host-a.invalid").is_err());
/// assert!(p.check("10.0.0.9").is_err());
/// assert!(p.check("10.0.0.10").is_ok());
/// assert!(p.check("good.example").is_ok());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefusedHosts {
    variable: Vec<String>,
    deny_file: Vec<String>,
}

fn normalize_entry(name: &str) -> Option<String> {
    let n = name.trim();
    let n = n.strip_suffix('.').unwrap_or(n);
    (!n.is_empty()).then(|| n.to_ascii_lowercase())
}

fn matches(host: &str, entry: &str) -> bool {
    if parse_ipv4(host).is_some() || parse_ipv4(entry).is_some() {
        return host == entry;
    }
    host == entry
        || (host.len() > entry.len()
            && host.ends_with(entry)
            && host.as_bytes()[host.len() - entry.len() - 1] == b'.')
}

impl RefusedHosts {
    /// The policy from the variable's value (if set) and the deny file's text (if any).
    pub fn new(variable: Option<&str>, deny_file: Option<&str>) -> Self {
        let variable = variable
            .unwrap_or("")
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter_map(normalize_entry)
            .collect();
        let deny_file = deny_file
            .unwrap_or("")
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(normalize_entry)
            .collect();
        Self {
            variable,
            deny_file,
        }
    }

    /// Only the built-in reserved names.
    pub fn builtin() -> Self {
        Self::default()
    }

    /// The rule that refuses `host`, if one does.
    pub fn refusal(&self, host: &str) -> Option<RefusalRule> {
        let h = normalize_entry(host)?;
        if let Some(name) = RESERVED.into_iter().find(|r| matches(&h, r)) {
            return Some(RefusalRule::Reserved { name });
        }
        if let Some(name) = self.variable.iter().find(|e| matches(&h, e)) {
            return Some(RefusalRule::Variable { name: name.clone() });
        }
        self.deny_file
            .iter()
            .find(|e| matches(&h, e))
            .map(|name| RefusalRule::DenyFile { name: name.clone() })
    }

    /// `Ok` if `host` may run a rank, else H1614 naming the host and the rule.
    pub fn check(&self, host: &str) -> Result<(), Error> {
        match self.refusal(host) {
            None => Ok(()),
            Some(rule) => Err(Error::HostRefused {
                host: host.to_owned(),
                rule,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HCode;

    #[test]
    fn reserved_every_spelling() {
        let p = RefusedHosts::builtin();
        for h in [
            "host-a.invalid",
            "HOST-A.INVALID",
            "host-b.invalid.",
            "x.host-a.invalid",
            "a.b.Host-B.Invalid.",
        ] {
            let e = p.check(h).unwrap_err();
            assert_eq!(e.h_code(), Some(HCode::H1614), "{h}");
        }
        for h in [
            "host-c.invalid",
            "xhost-a.invalid",
            "host-a.invalid.example",
            "invalid",
        ] {
            assert!(p.check(h).is_ok(), "{h}");
        }
    }

    #[test]
    fn variable_and_file() {
        let p = RefusedHosts::new(
            Some("a.example,b.example\n c.example\t1.2.3.4"),
            Some("d.example\n\n# comment\n E.example. \n"),
        );
        assert!(matches!(
            p.refusal("x.a.example"),
            Some(RefusalRule::Variable { .. })
        ));
        assert!(p.check("C.EXAMPLE").is_err());
        assert!(matches!(
            p.refusal("e.example"),
            Some(RefusalRule::DenyFile { .. })
        ));
        assert!(p.check("1.2.3.4").is_err());
        assert!(p.check("1.2.3.40").is_ok());
        assert!(p.check("comment").is_ok());
        // An empty deny file leaves the variable's names in force.
        let q = RefusedHosts::new(Some("a.example"), Some(""));
        assert!(q.check("a.example").is_err());
    }
}
