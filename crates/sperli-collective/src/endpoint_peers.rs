//! The real transport as a [`Peers`] implementation: collectives over the
//! TLS 1.3 mesh of `sperli-transport`, and [`Comm::from_stdin`], how a rank started by the
//! `sperli` launcher joins its job.

use std::io::{BufRead, IsTerminal, Read};
use std::time::Duration;

use sperli_transport::{Endpoint, Settings};
use sperli_wire::abort::AbortReason;
use sperli_wire::error::{DecodeError, Error, HexError, LaunchStdin};
use sperli_wire::job_description::JobDescription;
use sperli_wire::payload::Payload;
use sperli_wire::refused_hosts::{RefusedHosts, ENV_VAR};

use crate::comm::Comm;
use crate::peers::{CkptFrame, Peers};

impl Peers for Endpoint {
    fn rank(&self) -> u32 {
        Endpoint::rank(self)
    }
    fn size(&self) -> u32 {
        Endpoint::size(self)
    }
    fn send_collective(&self, to: u32, payload: &[u8]) -> Result<(), Error> {
        Endpoint::send_collective(self, to, payload)
    }
    fn recv_collective(&self, from: u32) -> Result<Vec<u8>, Error> {
        Endpoint::recv_collective(self, from)
    }
    fn abort(&self, reason: AbortReason, code: u32, message: &str) {
        Endpoint::abort(self, reason, code, message)
    }
    fn take_buffer(&self, len: usize) -> Vec<u8> {
        Endpoint::take_buffer(self, len)
    }
    fn send_collective_vec(&self, to: u32, payload: Vec<u8>) -> Result<(), Error> {
        Endpoint::send_collective_vec(self, to, payload)
    }
    fn recycle(&self, buf: Vec<u8>) {
        Endpoint::recycle(self, buf)
    }
    fn send_collective_each(&self, to: &[u32], payload: &[u8]) -> Result<(), Error> {
        Endpoint::send_collective_each(self, to, payload)
    }
    fn features(&self) -> u64 {
        Endpoint::features(self)
    }
    fn communicator_made(
        &self,
        id: u32,
        members: Option<std::sync::Arc<[u32]>>,
    ) -> Result<(), Error> {
        Endpoint::communicator_made(self, id, members)
    }
    fn communicator_freer(&self) -> Option<crate::peers::Freer> {
        let f = Endpoint::communicator_freer(self);
        Some(std::sync::Arc::new(move |id| f.freed(id)))
    }
    fn send_collective_tagged(&self, to: u32, tag: u32, payload: &[u8]) -> Result<(), Error> {
        Endpoint::send_collective_tagged(self, to, tag, payload)
    }
    fn recv_collective_where(
        &self,
        from: u32,
        tag: u32,
        pass: &dyn Fn(u32) -> Result<(), Error>,
    ) -> Result<Vec<u8>, Error> {
        Endpoint::recv_collective_where(self, from, tag, pass)
    }

    // ---- Checkpoint and RESUME frames (protocol §7.7-§7.11) ----
    fn send_ckpt(&self, to: u32, epoch: u64, payload: &Payload<'_>) -> Result<(), Error> {
        Endpoint::send_frame(self, to, epoch, payload)
    }
    fn recv_ckpt(&self, from: u32) -> Result<CkptFrame, Error> {
        let (h, payload) = Endpoint::recv_ckpt(self, from)?;
        Ok(CkptFrame {
            frame_type: h.frame_type,
            epoch: h.epoch,
            payload,
        })
    }
    fn open_handles(&self) -> (u64, u64) {
        Endpoint::open_handles(self)
    }
    fn job_error(&self) -> Option<Error> {
        Endpoint::error(self)
    }
}

/// The longest job description line accepted on stdin (4096 ranks with
/// 253-byte host names fit well below it).
pub const MAX_DESCRIPTION_LINE: u64 = 8 << 20;

impl Comm<Endpoint> {
    /// Joins the job whose description the launcher wrote on stdin (one
    /// hex line, protocol §4.2): checks it (H1615, refused hosts H1614 with
    /// `SPERLI_REFUSED_HOSTS`), sets up the TLS mesh (H1611/H1616), and
    /// returns the communicator. The silence limit comes from
    /// `SPERLI_SILENCE_MS` when set (the launcher's `--silence-ms`); the
    /// HELLO feature bits from `SPERLI_FEATURES` when set (a harness's
    /// v1-only rank, [`sperli_wire::env::FEATURES`]).
    pub fn from_stdin() -> Result<Self, Error> {
        Self::from_stdin_with_description().map(|(comm, mut desc)| {
            desc.job_secret_key.fill(0);
            comm
        })
    }

    /// Like [`Comm::from_stdin`], and also returns the job description
    /// (protocol §4.2) for what a rank needs after set-up: the job id, the
    /// incarnation, the job public key and, on rank 0 only, the job secret
    /// key that signs COMMIT files (protocol §2.4, §4.1; sperli-ckpt uses
    /// it). The rank's private TLS key and join token are no longer needed
    /// once the mesh is up: they are overwritten with zeros and emptied in
    /// the returned copy. The caller must keep `job_secret_key` out of logs
    /// and files and drop it when done.
    pub fn from_stdin_with_description() -> Result<(Self, JobDescription), Error> {
        // Started by hand (a terminal, or nothing on stdin): say in one
        // line how to start it instead of blocking or a decoding error.
        let not_launched = |stdin| Error::NotLaunched {
            stdin,
            program: std::env::args().next().unwrap_or_else(|| "PROGRAM".into()),
        };
        if std::io::stdin().is_terminal() {
            return Err(not_launched(LaunchStdin::Terminal));
        }
        let mut line = Vec::new();
        std::io::stdin()
            .lock()
            .take(MAX_DESCRIPTION_LINE)
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::io("reading the job description from stdin", &e))?;
        if line.is_empty() {
            return Err(not_launched(LaunchStdin::Empty));
        }
        if line.last() != Some(&b'\n') {
            return Err(Error::JobDescription(DecodeError::Hex(
                HexError::MissingNewline,
            )));
        }
        let policy = RefusedHosts::new(std::env::var(ENV_VAR).ok().as_deref(), None);
        let desc = JobDescription::from_line(&line, &policy);
        line.fill(0);
        let desc = desc?;
        let mut settings = Settings::default();
        if let Some(ms) = std::env::var(sperli_wire::env::SILENCE_MS)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            settings.silence = Duration::from_millis(ms);
        }
        settings.error_file =
            std::env::var_os(sperli_transport::failure_record::ENV_VAR).map(Into::into);
        if let Some(f) = std::env::var(sperli_wire::env::FEATURES)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            // The test and benchmark harness's v1-only rank (protocol §7.1.1).
            settings.features = f;
        }
        let comm = Comm::new(Endpoint::start(&desc, settings)?);
        let mut desc = desc;
        desc.rank_key_pem.fill(0);
        desc.rank_key_pem = Vec::new();
        desc.join_token = Vec::new();
        Ok((comm, desc))
    }
}
