//! The failure record: one line a rank writes when its job step ends in an
//! error, so that a launcher can tell the rank that failed first from the
//! ranks that failed because of it (docs/launcher.md, "Which rank failed").
//!
//! This is not part of the wire protocol. The launcher names a file in
//! `SPERLI_ERROR_FILE` (as torchrun names one in
//! `TORCHELASTIC_ERROR_FILE`); the rank's I/O thread writes the record
//! there before the error reaches the program, so the record exists before
//! the process can exit. It holds no secret: the H-code and, when the error
//! names one, the rank it blames.
//!
//! ```
//! use sperli_transport::failure_record::FailureRecord;
//! use sperli_wire::{error::LossCause, Error};
//!
//! let e = Error::PeerLost { peer: 3, cause: LossCause::ClosedWithoutBye };
//! let r = FailureRecord::of(&e);
//! assert_eq!(r.to_line(), "H1613 blame=3\n");
//! assert_eq!(FailureRecord::parse(&r.to_line()), Some(r));
//! ```

use std::path::Path;

use sperli_wire::Error;

/// The environment variable that names the file of the record.
pub const ENV_VAR: &str = sperli_wire::env::ERROR_FILE;

/// What a failed rank reports about its failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureRecord {
    /// The H number of the error (0: none, e.g. an I/O error).
    pub code: u32,
    /// The rank the error blames: the lost peer (H1613) or the sender of
    /// the ABORT (H1612). `None`: this rank failed on its own (a rejected
    /// frame, a refused call, set-up, I/O).
    pub blame: Option<u32>,
}

impl FailureRecord {
    /// The record of `error`.
    pub fn of(error: &Error) -> Self {
        let blame = match error {
            Error::PeerLost { peer, .. } => Some(*peer),
            Error::AbortedByPeer { from, .. } => Some(*from),
            _ => None,
        };
        Self {
            code: error.h_code().map_or(0, |c| c.number()),
            blame,
        }
    }

    /// The record as its one line: `H<code> blame=<rank>` or
    /// `H<code> blame=-`, ending in a newline.
    pub fn to_line(&self) -> String {
        match self.blame {
            Some(r) => format!("H{} blame={r}\n", self.code),
            None => format!("H{} blame=-\n", self.code),
        }
    }

    /// Reads a line written by [`FailureRecord::to_line`]; anything else
    /// is `None` (the file is input: never a panic).
    pub fn parse(text: &str) -> Option<Self> {
        let line = text.strip_suffix('\n').unwrap_or(text);
        let (code, blame) = line.split_once(' ')?;
        let code = code.strip_prefix('H')?.parse().ok()?;
        let blame = match blame.strip_prefix("blame=")? {
            "-" => None,
            r => Some(r.parse().ok()?),
        };
        Some(Self { code, blame })
    }

    /// Reads the record at `path`; `None` when there is none or it is not
    /// a record.
    pub fn read(path: &Path) -> Option<Self> {
        let mut text = String::new();
        use std::io::Read;
        std::fs::File::open(path)
            .ok()?
            .take(64)
            .read_to_string(&mut text)
            .ok()?;
        Self::parse(&text)
    }

    /// Writes the record to `path` (best effort: a launcher without the
    /// record falls back to exit statuses).
    pub fn write(&self, path: &Path) {
        let _ = std::fs::write(path, self.to_line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sperli_wire::error::LossCause;

    #[test]
    fn blame_follows_the_error() {
        let aborted = Error::AbortedByPeer {
            from: 7,
            reason: 1,
            code: 1613,
            message: "H1613 peer rank 2 lost".into(),
        };
        assert_eq!(
            FailureRecord::of(&aborted),
            FailureRecord {
                code: 1612,
                blame: Some(7)
            }
        );
        let lost = Error::PeerLost {
            peer: 2,
            cause: LossCause::Reset,
        };
        assert_eq!(FailureRecord::of(&lost).to_line(), "H1613 blame=2\n");
        let own = Error::SetupTimeout {
            after_ms: 30_000,
            missing: vec![1],
        };
        let r = FailureRecord::of(&own);
        assert_eq!(r.blame, None);
        assert_eq!(r.to_line(), format!("H{} blame=-\n", r.code));
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
        ] {
            assert_eq!(FailureRecord::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_missing_file_is_none() {
        assert_eq!(
            FailureRecord::read(Path::new("/nonexistent/sperli/error")),
            None
        );
    }

    proptest! {
        #[test]
        fn round_trip(code in any::<u32>(), blame in proptest::option::of(any::<u32>())) {
            let r = FailureRecord { code, blame };
            prop_assert_eq!(FailureRecord::parse(&r.to_line()), Some(r));
        }

        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = FailureRecord::parse(&s);
        }
    }
}
