//! Descriptors the launcher hands a rank it starts, each by a number in an
//! environment variable: the control channel (protocol §18.1,
//! [`crate::control_channel`]) and the rank's listening socket (protocol
//! §5.1 step 1, [`listener_from_env`]).
//!
//! The only `unsafe` of this crate is here: taking ownership of an
//! inherited descriptor needs it (the OS hands it over by number).

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::sync::Mutex;

use sperli_wire::error::LocalError;
use sperli_wire::Error;

/// The environment variable that names the descriptor of the listener the
/// launcher bound for this rank (a number, not a secret). Bound before
/// any rank of the job starts, it queues the dials of peers that start
/// first, so none is refused and tried again 100 ms later (protocol §5.1
/// step 2).
pub const LISTEN_FD_ENV: &str = "SPERLI_LISTEN_FD";

/// Descriptor numbers taken so far: each once per process.
static TAKEN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Takes the inherited descriptor numbered `text` (an environment
/// variable's value) when it is 3 or above, open, not taken before, and
/// its `/proc/self/fd` entry passes `kind`. `None` otherwise.
pub(crate) fn take_socket(
    text: &str,
    kind: impl Fn(&std::fs::Metadata) -> bool,
) -> Option<OwnedFd> {
    let fd: i32 = text.trim().parse().ok()?;
    // Descriptors 0-2 are stdin, stdout and stderr, never a handed socket.
    if fd < 3 {
        return None;
    }
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    if taken.contains(&fd) {
        return None;
    }
    let meta = std::fs::metadata(format!("/proc/self/fd/{fd}")).ok()?;
    if !meta.file_type().is_socket() || !kind(&meta) {
        return None;
    }
    taken.push(fd);
    // SAFETY: `fd` is open and a socket (checked just above through
    // /proc/self/fd), the launcher opened it for this process and named it
    // in an environment variable, and no other code of this process owns
    // it: this function takes each number once per process (TAKEN), and
    // only it reads the variables that name them.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The listener the launcher bound for this rank, if it handed one
/// ([`LISTEN_FD_ENV`]): a TCP socket (the launcher made it listen, with a
/// backlog for every peer), taken with close-on-exec (programs the rank
/// starts do not inherit it). `Ok(None)` without the variable: the rank binds its own.
/// [`Settings::listener`](crate::Settings::listener) then checks that it is
/// bound to exactly the rank's host and port of the job description.
pub fn listener_from_env() -> Result<Option<std::net::TcpListener>, Error> {
    let Ok(text) = std::env::var(LISTEN_FD_ENV) else {
        return Ok(None);
    };
    let bad = || {
        Error::Local(LocalError::ListenerFd {
            value: text.clone(),
        })
    };
    let owned = take_socket(&text, |_| true).ok_or_else(bad)?;
    let inherited = std::net::TcpListener::from(owned);
    inherited.local_addr().map_err(|_| bad())?;
    // A duplicate with close-on-exec; the inherited descriptor closes here.
    let l = inherited
        .try_clone()
        .map_err(|e| Error::io("duplicating the handed listener", &e))?;
    Ok(Some(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_that_is_no_open_socket_is_not_taken() {
        for text in ["", "x", "-1", "0", "2", "999999"] {
            assert!(take_socket(text, |_| true).is_none(), "{text:?}");
        }
        // A regular file is no socket.
        let f = std::fs::File::open("/proc/self/status").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f).to_string();
        assert!(take_socket(&fd, |_| true).is_none());
    }
}
