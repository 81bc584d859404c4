//! The real transport as a [`Peers`] implementation: collectives over the
//! TLS 1.3 mesh of `sperli-transport`, and [`Comm::from_stdin`], how a rank started by the
//! `sperli` launcher joins its job.

use std::io::{IsTerminal, Read};
use std::os::fd::AsFd;
use std::time::Duration;

use sperli_transport::{Endpoint, Settings};
use sperli_wire::abort::AbortReason;
use sperli_wire::description_line::line_len_bound;
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
    fn send_collective_parts(&self, to: u32, head: &[u8], data: &[u8]) -> Result<(), Error> {
        Endpoint::send_collective_parts(self, to, head, data)
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

    fn recover(&self) -> Result<sperli_transport::Recovered, Error> {
        Endpoint::recover(self)
    }

    fn failed_ranks(&self) -> Vec<u32> {
        Endpoint::membership(self).failed
    }

    fn set_best_commit(&self, epoch: u64) {
        Endpoint::set_best_commit(self, epoch)
    }

    fn set_recoverable(&self, on: bool) {
        Endpoint::set_recoverable(self, on)
    }

    fn recoverable(&self) -> bool {
        Endpoint::recoverable(self)
    }

    fn membership(&self) -> sperli_transport::Recovered {
        Endpoint::membership(self)
    }

    fn errors(&self) -> sperli_transport::ErrorMode {
        Endpoint::errors(self)
    }

    fn set_errors(&self, mode: sperli_transport::ErrorMode) {
        Endpoint::set_errors(self, mode)
    }

    fn revoke_communicator(&self, comm: u32) -> Result<(), Error> {
        Endpoint::revoke_communicator(self, comm)
    }

    fn is_communicator_revoked(&self, comm: u32) -> bool {
        Endpoint::is_communicator_revoked(self, comm)
    }
}

/// The longest job description line accepted on stdin (4096 ranks with
/// 253-byte host names fit well below it).
pub const MAX_DESCRIPTION_LINE: u64 = 8 << 20;

/// Reads the job description line from `r` (at most `max` bytes) without
/// reading a byte past its `\n`: as far as the line's length fields tell
/// ([`line_len_bound`], protocol §4.2) in a few reads, then one byte at a
/// time. The bytes are those `read_until(b'\n')` would give (a `\n`, the
/// end of the input or `max` ends them), so the decoder's verdict on an
/// invalid line is the same.
pub fn read_description_line(r: &mut impl Read, max: u64) -> std::io::Result<Vec<u8>> {
    let mut chunk = vec![0u8; 64 << 10];
    let line = read_line_into(r, usize::try_from(max).unwrap_or(usize::MAX), &mut chunk);
    // The line is secret: no copy of it is left behind here.
    chunk.fill(0);
    line
}

fn read_line_into(r: &mut impl Read, max: usize, chunk: &mut [u8]) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    while line.len() < max {
        let want = match line_len_bound(&line) {
            Some(n) if n > line.len() => n.min(max) - line.len(),
            _ => 1,
        };
        let want = want.min(chunk.len());
        let n = match r.read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // Only an invalid line has a `\n` before its length says.
        if let Some(end) = chunk[..n].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&chunk[..=end]);
            break;
        }
        line.extend_from_slice(&chunk[..n]);
    }
    Ok(line)
}

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
        // Unbuffered, through a duplicate of fd 0: whatever follows the
        // line on stdin (the user's input the launcher forwards to rank 0,
        // docs/launcher.md "Standard input") stays there for the program.
        let mut line = std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map(std::fs::File::from)
            .and_then(|mut fd0| read_description_line(&mut fd0, MAX_DESCRIPTION_LINE))
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
        let mut settings = Settings {
            // Protocol §18.1: the launcher's control channel, if it gave one.
            control: sperli_transport::control_channel::from_env()?,
            // Protocol §18.7: a replacement joins with the record on it.
            replacement: sperli_transport::control_channel::is_replacement(),
            // Protocol §18.8: a program run with `--recover shrink` goes on
            // without a lost rank from its start.
            recoverable: std::env::var(sperli_wire::env::RECOVER).is_ok_and(|m| m == "shrink"),
            // Protocol §5.1 step 1: the listener the launcher bound, if any.
            listener: sperli_transport::inherited::listener_from_env()?.map(std::sync::Arc::new),
            ..Settings::default()
        };
        if let Some(ms) = std::env::var(sperli_wire::env::SILENCE_MS)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            settings.silence = Duration::from_millis(ms);
        }
        settings.error_file =
            std::env::var_os(sperli_transport::failure_record::ENV_VAR).map(Into::into);
        if one_machine(&desc) {
            // Protocol §20.1: ranks that share one machine's CPUs do not
            // announce bit 7 (the chain's fewer, longer streams cost less
            // CPU there than the owner fold's n-1 streams per rank).
            settings.features &= !sperli_wire::limits::FEATURE_OWNER_FOLD;
        }
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

/// Whether the ranks of the job share one machine (protocol §20.1): every
/// host is `localhost` or an IPv4 literal in 127.0.0.0/8, or every rank has
/// the same host.
fn one_machine(desc: &JobDescription) -> bool {
    let loopback = |h: &str| {
        h.eq_ignore_ascii_case("localhost")
            || h.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.is_loopback())
    };
    desc.hosts.iter().all(|h| loopback(&h.host))
        || desc.hosts.windows(2).all(|w| w[0].host == w[1].host)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `step` bytes a call.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn description(rank: u32) -> String {
        description_struct(rank).to_line()
    }

    fn description_struct(rank: u32) -> JobDescription {
        use sperli_wire::ids::JobId;
        use sperli_wire::job_description::HostEntry;
        JobDescription {
            job_id: JobId([3; 16]),
            size: 3,
            rank,
            incarnation: 1,
            hosts: (1..=3)
                .map(|i| HostEntry {
                    host: format!("127.0.0.{i}"),
                    port: 7000,
                })
                .collect(),
            job_public_key: vec![1; sperli_wire::limits::PUBLIC_KEY_LEN],
            join_token: vec![2; 90],
            ca_cert_pem: b"ca".to_vec(),
            rank_cert_pem: b"cert".to_vec(),
            job_secret_key: if rank == 0 { vec![5; 64] } else { Vec::new() },
            rank_key_pem: b"key".to_vec(),
        }
    }

    #[test]
    fn a_job_on_loopback_or_on_one_host_is_on_one_machine() {
        use sperli_wire::job_description::HostEntry;
        let mut d = description_struct(1);
        assert!(one_machine(&d));
        d.hosts[1].host = "localhost".into();
        assert!(one_machine(&d));
        for host in ["10.231.0.2", "node7", "::1"] {
            d.hosts[2] = HostEntry {
                host: host.into(),
                port: 7000,
            };
            assert!(!one_machine(&d), "{host}");
            // Every rank on that one host: one machine.
            for h in &mut d.hosts {
                h.host = host.into();
            }
            assert!(one_machine(&d), "{host} x 3");
            d = description_struct(1);
        }
    }

    #[test]
    fn the_line_is_read_and_not_a_byte_more() {
        for rank in [0, 2] {
            let line = description(rank);
            for step in [1, 7, 1 << 20] {
                let input = format!("{line}user input\n");
                let mut r = Trickle(input.as_bytes(), step);
                let got = read_description_line(&mut r, MAX_DESCRIPTION_LINE).unwrap();
                assert_eq!(got, line.as_bytes());
                assert_eq!(r.0, b"user input\n");
            }
        }
    }

    #[test]
    fn invalid_lines_read_as_read_until_does() {
        let line = description(1);
        let cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"0100\nrest".to_vec(),
            b"01zz00".to_vec(),
            line.as_bytes()[..line.len() - 1].to_vec(),
            format!("{}00\nrest", &line[..line.len() - 1]).into_bytes(),
            format!("{}X{}", &line[..40], &line[41..]).into_bytes(),
        ];
        for input in cases {
            let mut expected = Vec::new();
            std::io::BufRead::read_until(&mut &input[..], b'\n', &mut expected).unwrap();
            let got = read_description_line(&mut Trickle(&input, 5), MAX_DESCRIPTION_LINE).unwrap();
            assert_eq!(got, expected);
        }
        let got = read_description_line(&mut Trickle(b"0123456789", 3), 4).unwrap();
        assert_eq!(got, b"0123");
    }
}
