//! The failure record: one line a rank writes when its job step ends in an
//! error, so that a launcher can tell the rank that failed first from the
//! ranks that failed because of it (docs/launcher.md, "Which rank failed").
//!
//! This is not part of the wire protocol. The launcher names a file in
//! `SPERLI_ERROR_FILE` (as torchrun names one in
//! `TORCHELASTIC_ERROR_FILE`); the rank's I/O thread writes the record
//! there before the error reaches the program, so the record exists before
//! the process can exit. It holds no secret: the H-code, the rank it
//! blames, for an ABORT received the originator's reason, code and message
//! (what the launcher reports, protocol §7.5), and for a
//! set-up timeout the ranks that never joined.
//!
//! ```
//! use sperli_wire::failure_record::FailureRecord;
//! use sperli_wire::{error::LossCause, Error};
//!
//! let e = Error::PeerLost { peer: 3, cause: LossCause::ClosedWithoutBye };
//! let r = FailureRecord::of(&e);
//! assert_eq!(r.to_line(), "H1613 blame=3\n");
//! assert_eq!(FailureRecord::parse(&r.to_line()), Some(r));
//!
//! let e = Error::SetupTimeout { after_ms: 30_000, missing: vec![1, 2] };
//! assert_eq!(FailureRecord::of(&e).to_line(), "H1616 blame=- missing=1,2\n");
//! ```
//!
//! The line: `H<code> blame=<rank|->`, then optional ` key=value` fields in
//! this order: `reason=<u16> code=<u32>` (the ABORT received, H1612),
//! `missing=<rank>,<rank>...` (H1616), and last `msg=<text>` (the ABORT's
//! message, up to the end of the line; control characters are written as
//! spaces). A reader ignores a field it does not know, so a newer writer's
//! extra fields do not hide the code and the blame from an older launcher.
//!
//! Only the format is here (no I/O): the rank side writes the file
//! (`sperli_transport::failure_record`), the launcher reads it, at most
//! [`MAX_RECORD_BYTES`] of it.

use crate::limits::MAX_ABORT_MESSAGE;
use crate::Error;

/// The environment variable that names the file of the record.
pub const ENV_VAR: &str = crate::env::ERROR_FILE;

/// The most bytes of a record file that are read (4096 missing ranks and a
/// full ABORT message fit).
pub const MAX_RECORD_BYTES: u64 = 64 << 10;

/// The originator's ABORT as a rank received it (protocol §7.5: reason, code,
/// message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortNote {
    /// The ABORT's reason (1 peer lost, 2 application abort, ...).
    pub reason: u16,
    /// The ABORT's H number, or 0.
    pub code: u32,
    /// The ABORT's message (control characters replaced by spaces).
    pub message: String,
}

/// What a failed rank reports about its failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureRecord {
    /// The H number of the error (0: none, e.g. an I/O error).
    pub code: u32,
    /// The rank the error blames: the lost peer (H1613) or the sender of
    /// the ABORT (H1612). `None`: this rank failed on its own (a rejected
    /// frame, a refused call, set-up, I/O).
    pub blame: Option<u32>,
    /// For H1612: the ABORT received (its sender is `blame`).
    pub abort: Option<AbortNote>,
    /// For H1616: the ranks this rank's set-up never reached, ascending.
    pub missing: Vec<u32>,
}

/// `text` with every control character as a space, at most `max` bytes
/// (cut at a character boundary).
fn one_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(c);
    }
    out
}

impl FailureRecord {
    /// The record of `error`.
    pub fn of(error: &Error) -> Self {
        let (blame, abort, missing) = match error {
            Error::PeerLost { peer, .. } => (Some(*peer), None, Vec::new()),
            Error::AbortedByPeer {
                from,
                reason,
                code,
                message,
            } => (
                Some(*from),
                Some(AbortNote {
                    reason: *reason,
                    code: *code,
                    message: one_line(message, MAX_ABORT_MESSAGE),
                }),
                Vec::new(),
            ),
            Error::SetupTimeout { missing, .. } => {
                let mut m = missing.clone();
                m.sort_unstable();
                m.dedup();
                (None, None, m)
            }
            _ => (None, None, Vec::new()),
        };
        Self {
            code: error.h_code().map_or(0, |c| c.number()),
            blame,
            abort,
            missing,
        }
    }

    /// The record as its one line (see the module docs), ending in a
    /// newline.
    pub fn to_line(&self) -> String {
        let mut s = match self.blame {
            Some(r) => format!("H{} blame={r}", self.code),
            None => format!("H{} blame=-", self.code),
        };
        if let Some(a) = &self.abort {
            s.push_str(&format!(" reason={} code={}", a.reason, a.code));
        }
        if !self.missing.is_empty() {
            let m: Vec<String> = self.missing.iter().map(u32::to_string).collect();
            s.push_str(&format!(" missing={}", m.join(",")));
        }
        if let Some(a) = &self.abort {
            if !a.message.is_empty() {
                s.push_str(" msg=");
                s.push_str(&one_line(&a.message, MAX_ABORT_MESSAGE));
            }
        }
        s.push('\n');
        s
    }

    /// Reads a line written by [`FailureRecord::to_line`]; anything else
    /// is `None` (the file is input: never a panic).
    pub fn parse(text: &str) -> Option<Self> {
        let line = text.strip_suffix('\n').unwrap_or(text);
        let (code, rest) = line.split_once(' ')?;
        let code = code.strip_prefix('H')?.parse().ok()?;
        let (blame, mut rest) = match rest.split_once(' ') {
            Some((b, r)) => (b, Some(r)),
            None => (rest, None),
        };
        let blame = match blame.strip_prefix("blame=")? {
            "-" => None,
            r => Some(r.parse().ok()?),
        };
        let mut reason: Option<u16> = None;
        let mut abort_code: Option<u32> = None;
        let mut message = String::new();
        let mut missing = Vec::new();
        while let Some(r) = rest {
            if let Some(m) = r.strip_prefix("msg=") {
                message = one_line(m, MAX_ABORT_MESSAGE);
                break;
            }
            let (field, tail) = match r.split_once(' ') {
                Some((f, t)) => (f, Some(t)),
                None => (r, None),
            };
            rest = tail;
            let (key, value) = field.split_once('=')?;
            match key {
                "reason" => reason = Some(value.parse().ok()?),
                "code" => abort_code = Some(value.parse().ok()?),
                "missing" => {
                    missing = value
                        .split(',')
                        .map(|v| v.parse().ok())
                        .collect::<Option<Vec<u32>>>()?;
                }
                _ => {}
            }
        }
        let abort = match (reason, abort_code) {
            (Some(reason), Some(code)) => Some(AbortNote {
                reason,
                code,
                message,
            }),
            (None, None) => None,
            _ => return None,
        };
        Some(Self {
            code,
            blame,
            abort,
            missing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::LossCause;
    use proptest::prelude::*;

    fn plain(code: u32, blame: Option<u32>) -> FailureRecord {
        FailureRecord {
            code,
            blame,
            abort: None,
            missing: Vec::new(),
        }
    }

    #[test]
    fn blame_follows_the_error() {
        let aborted = Error::AbortedByPeer {
            from: 7,
            reason: 1,
            code: 1613,
            message: "H1613 peer rank 2 lost\nsilent".into(),
        };
        let r = FailureRecord::of(&aborted);
        assert_eq!(
            r,
            FailureRecord {
                code: 1612,
                blame: Some(7),
                abort: Some(AbortNote {
                    reason: 1,
                    code: 1613,
                    message: "H1613 peer rank 2 lost silent".into()
                }),
                missing: Vec::new(),
            }
        );
        assert_eq!(
            r.to_line(),
            "H1612 blame=7 reason=1 code=1613 msg=H1613 peer rank 2 lost silent\n"
        );
        assert_eq!(FailureRecord::parse(&r.to_line()), Some(r));
        let lost = Error::PeerLost {
            peer: 2,
            cause: LossCause::Reset,
        };
        assert_eq!(FailureRecord::of(&lost).to_line(), "H1613 blame=2\n");
        let own = Error::SetupTimeout {
            after_ms: 30_000,
            missing: vec![3, 1],
        };
        let r = FailureRecord::of(&own);
        assert_eq!(r.blame, None);
        assert_eq!(r.missing, vec![1, 3]);
        assert_eq!(r.to_line(), "H1616 blame=- missing=1,3\n");
    }

    #[test]
    fn lines_of_the_first_format_still_read() {
        assert_eq!(
            FailureRecord::parse("H1613 blame=1\n"),
            Some(plain(1613, Some(1)))
        );
        assert_eq!(
            FailureRecord::parse("H1610 blame=-"),
            Some(plain(1610, None))
        );
        // Unknown fields are skipped.
        assert_eq!(
            FailureRecord::parse("H1613 blame=1 cause=silence\n"),
            Some(plain(1613, Some(1)))
        );
    }

    #[test]
    fn malformed_lines_are_none() {
        for bad in [
            "",
            "\n",
            "H1613",
            "1613 blame=1",
            "H1613 blame=",
            "H1613 blame=x",
            "H1613 blam=1",
            "Hx blame=1",
            "H1613 blame=-1",
            "H1613 blame=99999999999",
            "H1612 blame=1 reason=1",
            "H1612 blame=1 code=5",
            "H1612 blame=1 reason=x code=5",
            "H1616 blame=- missing=1,,2",
            "H1616 blame=- missing=",
            "H1616 blame=- junk",
        ] {
            assert_eq!(FailureRecord::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_long_message_is_cut_on_a_character_boundary() {
        let m = "é".repeat(MAX_ABORT_MESSAGE);
        let r = FailureRecord::of(&Error::AbortedByPeer {
            from: 1,
            reason: 2,
            code: 0,
            message: m,
        });
        let msg = &r.abort.as_ref().unwrap().message;
        assert!(msg.len() <= MAX_ABORT_MESSAGE);
        assert_eq!(FailureRecord::parse(&r.to_line()), Some(r));
    }

    proptest! {
        #[test]
        fn round_trip(
            code in any::<u32>(),
            blame in proptest::option::of(any::<u32>()),
            abort in proptest::option::of((any::<u16>(), any::<u32>(), "[ -~é]{0,60}")),
            mut missing in proptest::collection::vec(any::<u32>(), 0..8),
        ) {
            missing.sort_unstable();
            missing.dedup();
            let abort = abort.map(|(reason, code, message)| AbortNote { reason, code, message });
            let r = FailureRecord { code, blame, abort, missing };
            prop_assert_eq!(FailureRecord::parse(&r.to_line()), Some(r));
        }

        #[test]
        fn parse_never_panics(s in ".{0,80}") {
            let _ = FailureRecord::parse(&s);
        }
    }
}
