//! The open-file limit (RLIMIT_NOFILE) against the job size: a rank holds
//! one socket per peer plus a listener, the poller and a waker.

use sperli_wire::Error;

/// File descriptors a rank of a job of `size` needs: one socket per peer,
/// plus a margin for the listener, the poller, the waker, stdio and files.
pub fn needed(size: u32) -> u64 {
    u64::from(size) + 64
}

/// Checks RLIMIT_NOFILE; raises the soft limit up to the hard limit when
/// that is enough. Fails when even the hard limit is too low: the operator
/// must raise it (`ulimit -n`, or the hard limit in limits.conf).
pub fn ensure(size: u32) -> Result<(), Error> {
    let need = needed(size);
    let (soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE)
        .map_err(|e| Error::io("reading RLIMIT_NOFILE", &e))?;
    if soft >= need {
        return Ok(());
    }
    if hard >= need && rlimit::setrlimit(rlimit::Resource::NOFILE, need, hard).is_ok() {
        return Ok(());
    }
    Err(Error::FdLimit {
        needed: need,
        soft,
        hard,
    })
}
