//! The failure record's file on the rank side: the rank's I/O thread
//! writes the record of the error that ends its job step to the file the
//! launcher names in `SPERLI_ERROR_FILE` (docs/launcher.md, "Which rank
//! failed"). The format, with its tests, is
//! [`sperli_wire::failure_record`], which the launcher reads without this
//! crate.
//!
//! ```
//! use sperli_transport::failure_record::{read, write, FailureRecord};
//! use sperli_wire::{error::LossCause, Error};
//!
//! let path = std::env::temp_dir().join(format!("sperli-doc-record-{}", std::process::id()));
//! let r = FailureRecord::of(&Error::PeerLost { peer: 3, cause: LossCause::Reset });
//! write(&r, &path);
//! assert_eq!(read(&path), Some(r));
//! std::fs::remove_file(&path).unwrap();
//! ```

use std::io::Read;
use std::path::Path;

pub use sperli_wire::failure_record::{AbortNote, FailureRecord, ENV_VAR, MAX_RECORD_BYTES};

/// Writes `record` to `path` (best effort: a launcher without the record
/// falls back to exit statuses).
pub fn write(record: &FailureRecord, path: &Path) {
    let _ = std::fs::write(path, record.to_line());
}

/// Reads the record at `path` (at most [`MAX_RECORD_BYTES`]); `None` when
/// there is none or it is not a record.
pub fn read(path: &Path) -> Option<FailureRecord> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_RECORD_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    FailureRecord::parse(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_none() {
        assert_eq!(read(Path::new("/nonexistent/sperli/error")), None);
    }
}
