//! `cargo xtask vectors [--check]`: writes `docs/sperli-vectors.txt` from the
//! sperli-wire codecs, or checks that the file is exactly what the code
//! generates and that every entry decodes to what it states.

mod binomial_tree;
mod communicators;
mod element_types;
mod entries;
mod membership;
mod owner_fold;
mod p2p;
mod pair;
mod pipelined;
mod render;
mod verify;

use std::fmt::Write as _;

/// One entry of the vectors file: `key: value` lines in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub lines: Vec<(String, String)>,
}

impl Entry {
    pub fn new(name: &str, kind: &str) -> Self {
        Self {
            lines: vec![("name".into(), name.into()), ("kind".into(), kind.into())],
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.lines.push((key.into(), value.into()));
        self
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.lines
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn name(&self) -> &str {
        self.get("name").unwrap_or("?")
    }
}

/// The whole file text.
pub fn generate() -> String {
    let mut out = String::from(include_str!("../vectors_header.txt"));
    for e in entries::all() {
        out.push('\n');
        for (k, v) in &e.lines {
            let _ = writeln!(out, "{k}: {v}");
        }
    }
    out
}

/// Parses the file into entries (comments and blank lines separate them).
pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    let mut cur: Option<Entry> = None;
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') {
            continue;
        }
        if line.is_empty() {
            entries.extend(cur.take());
            continue;
        }
        let (k, v) = line
            .split_once(": ")
            .or_else(|| line.strip_suffix(':').map(|k| (k, "")))
            .ok_or_else(|| format!("line {}: not `key: value`", n + 1))?;
        let e = cur.get_or_insert(Entry { lines: vec![] });
        if e.get(k).is_some() {
            return Err(format!("line {}: duplicate key {k}", n + 1));
        }
        e.lines.push((k.to_string(), v.to_string()));
    }
    entries.extend(cur);
    Ok(entries)
}

/// Runs the task; returns the process exit code.
pub fn run(args: &[String]) -> i32 {
    let root = crate::workspace_root();
    let path = root.join("docs/sperli-vectors.txt");
    let text = generate();
    match args.first().map(String::as_str) {
        None => match std::fs::write(&path, &text) {
            Ok(()) => {
                let n = parse(&text).map(|e| e.len()).unwrap_or(0);
                println!("wrote {} ({n} entries)", path.display());
                0
            }
            Err(e) => {
                eprintln!("cannot write {}: {e}", path.display());
                1
            }
        },
        Some("--check") => {
            let on_disk = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("cannot read {}: {e}", path.display());
                    return 1;
                }
            };
            let mut failed = 0;
            if on_disk != text {
                let first = on_disk
                    .lines()
                    .zip(text.lines())
                    .position(|(a, b)| a != b)
                    .map(|i| i + 1)
                    .unwrap_or(on_disk.lines().count().min(text.lines().count()) + 1);
                eprintln!(
                    "{} differs from what the codecs generate (first at line {first}); run `cargo xtask vectors`",
                    path.display()
                );
                failed += 1;
            }
            let entries = match parse(&on_disk) {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("malformed vectors file: {e}");
                    return 1;
                }
            };
            let mut passed = 0;
            for e in &entries {
                match verify::entry(e) {
                    Ok(()) => passed += 1,
                    Err(why) => {
                        eprintln!("{}: {why}", e.name());
                        failed += 1;
                    }
                }
            }
            println!("{passed} passed, {failed} failed");
            i32::from(failed > 0 || passed == 0)
        }
        Some(other) => {
            eprintln!("usage: cargo xtask vectors [--check] (unknown argument {other})");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_file_verifies() {
        let entries = parse(&generate()).unwrap();
        assert!(entries.len() > 80);
        for e in &entries {
            verify::entry(e).unwrap_or_else(|w| panic!("{}: {w}", e.name()));
        }
    }

    #[test]
    fn a_changed_byte_is_caught() {
        let entries = parse(&generate()).unwrap();
        for e in entries
            .iter()
            .filter(|e| e.get("verdict") == Some("accept"))
        {
            let Some(hex) = e.get("bytes").or(e.get("line")) else {
                continue;
            };
            let key = if e.get("bytes").is_some() {
                "bytes"
            } else {
                "line"
            };
            // Flip one bit in the first, a middle and the last byte.
            for pos in [0, hex.len() / 4, hex.len() / 2 - 1] {
                let mut bytes = sperli_wire::hex::decode(hex.as_bytes()).unwrap();
                bytes[pos] ^= 1;
                let mut m = e.clone();
                for (k, v) in &mut m.lines {
                    if k == key {
                        *v = sperli_wire::hex::encode(&bytes);
                    }
                }
                assert!(verify::entry(&m).is_err(), "{} byte {pos}", e.name());
            }
        }
    }
}
