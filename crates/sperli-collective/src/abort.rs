//! [`Comm::abort`]: the program ends the job (protocol §7.5, ABORT reason 2
//! "application"), as `MPI_Abort` does.

use sperli_wire::abort::{Abort, AbortReason};
use sperli_wire::Error;

use crate::comm::Comm;
use crate::peers::Peers;

impl<L: Peers> Comm<L> {
    /// Ends the job from the program: ABORT reason 2 (application) with
    /// `code` in the frame's code field and `message` (cut to the frame's
    /// 1024 bytes on a UTF-8 boundary) to every peer (protocol §7.5), then
    /// the connections close. Every peer's pending and later calls fail
    /// with [`Error::AbortedByPeer`] naming this rank, reason 2 and `code`;
    /// so do this rank's later calls. The process goes on: the program
    /// decides how it ends (under `sperli run` the launcher reports the
    /// abort and ends the other ranks).
    ///
    /// ```
    /// use sperli_collective::prelude::*;
    /// use sperli_collective::fake;
    /// let out = fake::run(2, |c| {
    ///     if c.rank() == 0 {
    ///         c.abort(42, "input file is empty");
    ///     }
    ///     c.barrier()
    /// });
    /// assert!(matches!(out[1], Err(Error::AbortedByPeer { from: 0, reason: 2, code: 42, .. })));
    /// ```
    pub fn abort(&self, code: u32, message: &str) {
        let message = Abort::truncate_message(message);
        self.link.abort(AbortReason::Application, code, message);
        self.state.set_failed(&Error::AbortedByPeer {
            from: self.rank(),
            reason: AbortReason::Application.code(),
            code,
            message: message.to_owned(),
        });
    }
}
