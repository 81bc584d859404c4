//! How long a job description line is (protocol §4.2), told from its first
//! hex digits, so that a rank reads its line from stdin without reading a
//! byte past its `\n`: what follows on the same stdin (the user's input
//! the launcher forwards to rank 0) belongs to the rank's program.
//!
//! No I/O here: [`line_len_bound`] looks at the digits read so far; the
//! reader (`sperli-collective`'s `Comm::from_stdin`) asks for that many.

use crate::limits::{MAX_SIZE, PUBLIC_KEY_LEN};

/// The bytes of the fixed fields after the host list (protocol §4.2):
/// job public key, token length, CA and rank certificate lengths, secret
/// key length, rank key length.
const TAIL_MIN: usize = PUBLIC_KEY_LEN + 2 + 4 + 4 + 2 + 4;

/// The smallest host entry: port, host length, one byte of host.
const HOST_ENTRY_MIN: usize = 4;

/// The bytes before the host list.
const HEADER: usize = 30;

/// What the walk over the digits read so far found.
enum Stop {
    /// The line has at least this many characters (hex digits and the
    /// `\n`).
    AtLeast(usize),
    /// A length field is not lowercase hex, or out of range: the line is
    /// not one a launcher writes and its length cannot be told.
    Unknown,
}

/// The value of one lowercase hex digit.
fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// The little-endian unsigned integer of `n` bytes at byte offset `at`
/// of the line's bytes; `rest` is the least number of bytes of the line
/// from `at` on, for the bound when the digits are not there yet.
fn le(line: &[u8], at: usize, n: usize, rest: usize) -> Result<usize, Stop> {
    let digits = line
        .get(2 * at..2 * (at + n))
        .ok_or(Stop::AtLeast(2 * (at + rest) + 1))?;
    let mut v = 0usize;
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        let b = digit(pair[0])
            .zip(digit(pair[1]))
            .map(|(h, l)| h << 4 | l)
            .ok_or(Stop::Unknown)?;
        v |= usize::from(b) << (8 * i);
    }
    Ok(v)
}

fn walk(line: &[u8]) -> Result<usize, Stop> {
    let size = le(line, 18, 4, 12 + HOST_ENTRY_MIN + TAIL_MIN)?;
    if size == 0 || size > MAX_SIZE as usize {
        return Err(Stop::Unknown);
    }
    let mut at = HEADER;
    for left in (1..=size).rev() {
        let host_len = le(line, at + 2, 1, HOST_ENTRY_MIN * left + TAIL_MIN)?;
        at += 3 + host_len;
    }
    // The length fields after the hosts, each with the fixed bytes before
    // it and the least that follows it.
    let mut tail_left = TAIL_MIN;
    for (skip, width) in [(PUBLIC_KEY_LEN, 2), (0, 4), (0, 4), (0, 2), (0, 4)] {
        at += skip;
        tail_left -= skip;
        let len = le(line, at, width, tail_left)?;
        at += width + len;
        tail_left -= width;
    }
    Ok(2 * at + 1)
}

/// A lower bound of the length in characters (hex digits and the final
/// `\n`) of the job description line that `line` (the digits read so far,
/// no `\n` among them) starts; the exact length once every length field
/// is among the digits. `None` when a length field is not lowercase hex or
/// the size is out of range (the line is invalid: read on to its `\n`, the
/// decoder says why, protocol §4.2). Reading up to the bound never reads
/// past the `\n` of a valid line.
pub fn line_len_bound(line: &[u8]) -> Option<usize> {
    match walk(line) {
        Ok(n) | Err(Stop::AtLeast(n)) => Some(n),
        Err(Stop::Unknown) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job_description::tests::sample;

    /// Reads `line` as a rank does: bound, read up to it, again.
    fn reads(line: &[u8]) -> (usize, Vec<usize>) {
        let mut got = 0;
        let mut steps = Vec::new();
        while let Some(n) = line_len_bound(&line[..got]) {
            assert!(n <= line.len(), "the bound {n} passes the line's end");
            if n == got {
                break;
            }
            steps.push(n);
            got = n;
        }
        (got, steps)
    }

    #[test]
    fn the_bound_reaches_the_exact_length_and_never_passes_it() {
        for rank in [0, 1] {
            let line = sample(rank).to_line();
            let (got, steps) = reads(line.as_bytes());
            assert_eq!(got, line.len());
            assert_eq!(line.as_bytes()[got - 1], b'\n');
            // Few reads: the header, the hosts, the tail's length fields.
            assert!(steps.len() <= 10, "{steps:?}");
        }
    }

    #[test]
    fn many_hosts_take_few_reads() {
        let mut d = sample(1);
        d.size = 300;
        d.hosts = (0..300)
            .map(|i| crate::job_description::HostEntry {
                host: format!("node-{i}.example"),
                port: 7000,
            })
            .collect();
        let line = d.to_line();
        let (got, steps) = reads(line.as_bytes());
        assert_eq!(got, line.len());
        assert!(steps.len() < 40, "{} reads", steps.len());
    }

    #[test]
    fn invalid_length_fields_are_unknown() {
        let line = sample(1).to_line();
        let mut bad = line.clone().into_bytes();
        // The size field (bytes 18..22) in uppercase hex, then zero.
        bad[36] = b'A';
        assert_eq!(line_len_bound(&bad[..60]), None);
        let zero = format!("{}00000000{}", &line[..36], &line[44..60]);
        assert_eq!(line_len_bound(zero.as_bytes()), None);
        // Too short to tell: a bound, not an answer.
        assert!(line_len_bound(b"0100").is_some_and(|n| n > 60));
    }
}
