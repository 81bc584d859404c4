//! The rank's end of its control channel (feature bit 5, protocol §18.1):
//! a stream only the launcher and this rank can write, which the launcher
//! hands to a rank it starts as an inherited descriptor whose number is in
//! [`CONTROL_FD_ENV`]. The rank writes REPORT records to it and reads
//! MEMBERSHIP records from it, one lowercase hex line each.
//!
//! The inherited descriptor is taken in [`crate::inherited`].

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use sperli_wire::error::LocalError;
use sperli_wire::Error;

/// The environment variable that names the descriptor of the control
/// channel (protocol §18.1; a number, not a secret).
pub const CONTROL_FD_ENV: &str = "SPERLI_CONTROL_FD";

/// The environment variable the launcher sets to `1` for a replacement
/// it starts (protocol §18.7): the first line of the control channel is
/// then the MEMBERSHIP record the rank joins with. Not a secret.
pub const REPLACEMENT_ENV: &str = "SPERLI_REPLACEMENT";

/// Whether the launcher started this process as a replacement
/// ([`REPLACEMENT_ENV`] is `1`).
pub fn is_replacement() -> bool {
    std::env::var(REPLACEMENT_ENV).is_ok_and(|v| v.trim() == "1")
}

/// Reads the first record line of `channel` (a replacement's MEMBERSHIP
/// record, protocol §18.7), waiting at most `wait`. Returns the record's
/// bytes and what came after its line. A channel that ends or stays
/// silent is the launcher's loss (H1613); a line that is not hex is a
/// record that does not decode (protocol §18.3 check 1: empty bytes, which
/// fail it).
pub fn read_first_record(
    channel: &UnixStream,
    wait: std::time::Duration,
) -> Result<(Vec<u8>, Vec<u8>), Error> {
    use std::io::Read;
    let lost = || Error::Recovery(sperli_wire::recovery::RecoveryError::LauncherLost);
    let deadline = std::time::Instant::now() + wait;
    let mut line = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        if let Some(end) = line.iter().position(|b| *b == b'\n') {
            let rest = line.split_off(end + 1);
            let record = sperli_wire::hex::decode(&line[..end]).unwrap_or_default();
            return Ok((record, rest));
        }
        if line.len() > MAX_RECORD_LINE {
            return Ok((Vec::new(), Vec::new()));
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(lost());
        }
        channel
            .set_read_timeout(Some(left))
            .map_err(|e| Error::io("waiting on the control channel", &e))?;
        match (&*channel).read(&mut buf) {
            Ok(0) => return Err(lost()),
            Ok(n) => line.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(Error::io("reading the control channel", &e)),
        }
    }
}

/// The longest record line this rank reads from its channel: the hex of
/// the largest MEMBERSHIP record (4096 ranks, 4095 change entries with
/// 253-byte hosts, protocol §18.3) and its newline, rounded up.
pub const MAX_RECORD_LINE: usize = 4 << 20;

/// What [`from_env`] took: the channel, once per process.
static TAKEN: Mutex<Option<Arc<UnixStream>>> = Mutex::new(None);

/// The control channel the launcher gave this process, if any: the
/// descriptor named by [`CONTROL_FD_ENV`], checked to be an open socket
/// before it is taken (once per process; later calls return the same
/// channel). `Ok(None)` without the variable: the rank then does not
/// announce feature bit 5 (protocol §18.1).
pub fn from_env() -> Result<Option<Arc<UnixStream>>, Error> {
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = taken.as_ref() {
        return Ok(Some(c.clone()));
    }
    let Ok(text) = std::env::var(CONTROL_FD_ENV) else {
        return Ok(None);
    };
    let bad = || {
        Error::Local(LocalError::ControlChannel {
            value: text.clone(),
        })
    };
    let owned =
        crate::inherited::take_socket(&text, |m| m.file_type().is_socket()).ok_or_else(bad)?;
    let inherited = UnixStream::from(owned);
    // A duplicate with close-on-exec, so programs the rank starts do not
    // inherit the channel; the inherited descriptor closes here.
    let stream = inherited
        .try_clone()
        .map_err(|e| Error::io("duplicating the control channel", &e))?;
    drop(inherited);
    let c = Arc::new(stream);
    *taken = Some(c.clone());
    Ok(Some(c))
}
