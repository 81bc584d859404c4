//! host::validate and RefusedHosts::new/check.
//!
//! The input is `host NUL variable NUL deny-file` (missing parts are
//! empty/None). validate must accept only normalized hosts and give an
//! IPv4 address that prints back as the host; RefusedHosts must refuse
//! every name it was given (and, for DNS names, every subdomain).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sperli_wire::host::{self, HostKind};
use sperli_wire::limits::MAX_HOST_LEN;
use sperli_wire::refused_hosts::{RefusedHosts, RESERVED};

fn normalized(name: &str) -> Option<String> {
    let n = name.trim();
    let n = n.strip_suffix('.').unwrap_or(n);
    (!n.is_empty()).then(|| n.to_ascii_lowercase())
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\0');
    let h = parts.next().unwrap_or("");
    let variable = parts.next();
    let deny = parts.next();

    match host::validate(h) {
        Ok(kind) => {
            assert!(!h.is_empty() && h.len() <= MAX_HOST_LEN);
            assert_eq!(host::normalize(h), h, "valid host is not normalized");
            match kind {
                HostKind::Ipv4(a) => {
                    assert_eq!(a.to_string(), h, "IPv4 does not print back");
                    assert_eq!(host::parse_ipv4(h), Some(a));
                }
                HostKind::Dns => assert!(host::parse_ipv4(h).is_none()),
            }
        }
        Err(e) => {
            let _ = format!("{e} {e:?}");
        }
    }
    if let Some(a) = host::parse_ipv4(h) {
        assert_eq!(a.to_string(), h, "parse_ipv4 accepted a non-canonical form");
    }
    let _ = host::is_loopback(h);

    let policy = RefusedHosts::new(variable, deny);
    if let Err(e) = policy.check(h) {
        let _ = format!("{e} {e:?} {:?}", e.h_code());
    }
    for r in RESERVED {
        assert!(policy.check(r).is_err());
    }
    let mut entries: Vec<&str> = Vec::new();
    if let Some(v) = variable {
        entries.extend(v.split(|c: char| c == ',' || c.is_whitespace()));
    }
    if let Some(d) = deny {
        entries.extend(d.lines().filter(|l| !l.trim_start().starts_with('#')));
    }
    for e in entries.into_iter().take(16) {
        let Some(n) = normalized(e) else {
            continue;
        };
        assert!(policy.check(e).is_err(), "entry {e:?} not refused");
        if host::validate(&n) == Ok(HostKind::Dns) && n.len() < MAX_HOST_LEN - 2 {
            let sub = format!("x.{n}");
            assert!(policy.check(&sub).is_err(), "subdomain {sub:?} of {n:?} not refused");
        }
    }
});
