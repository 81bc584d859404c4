//! The job description: one line of lowercase hex on a rank's stdin
//! (protocol §4).
//!
//! It holds secrets (the rank key, and for rank 0 the job secret key): its
//! `Debug` output redacts them, and nothing in this crate writes it anywhere.

use std::fmt;

use crate::codec::{Codec, PutLe, Reader};
use crate::error::{DecodeError, Error, HexError};
use crate::hex;
use crate::ids::JobId;
use crate::join_token::{read_host, JoinToken};
use crate::limits::{MAX_SIZE, PROTOCOL_VERSION, PUBLIC_KEY_LEN, SECRET_KEY_LEN};
use crate::refused_hosts::RefusedHosts;

/// One host-list entry: rank n's host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    /// A lowercase DNS name or dotted IPv4 address.
    pub host: String,
    /// The rank's listening port (>= 1).
    pub port: u16,
}

/// A decoded job description.
#[derive(Clone, PartialEq, Eq)]
pub struct JobDescription {
    /// The job.
    pub job_id: JobId,
    /// Ranks in the job, 1..=4096.
    pub size: u32,
    /// This rank, below `size`.
    pub rank: u32,
    /// The incarnation, >= 1.
    pub incarnation: u32,
    /// `size` entries; entry n is rank n.
    pub hosts: Vec<HostEntry>,
    /// The CompositeSig job public key (1344 bytes).
    pub job_public_key: Vec<u8>,
    /// This rank's join token (message, sig_len, signature).
    pub join_token: Vec<u8>,
    /// The job CA certificate, PEM text.
    pub ca_cert_pem: Vec<u8>,
    /// This rank's certificate, PEM text.
    pub rank_cert_pem: Vec<u8>,
    /// The CompositeSig job secret key: 64 bytes for rank 0, empty for every other rank. Secret.
    pub job_secret_key: Vec<u8>,
    /// This rank's private key, PEM text (PKCS#8 Ed25519). Secret.
    pub rank_key_pem: Vec<u8>,
}

impl fmt::Debug for JobDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobDescription")
            .field("job_id", &self.job_id)
            .field("size", &self.size)
            .field("rank", &self.rank)
            .field("incarnation", &self.incarnation)
            .field("hosts", &self.hosts)
            .field("job_secret_key", &"<redacted>")
            .field("rank_key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

fn range(field: &'static str, got: u64, min: u64, max: u64) -> Result<(), DecodeError> {
    if got < min || got > max {
        return Err(DecodeError::OutOfRange {
            field,
            min,
            max,
            got,
        });
    }
    Ok(())
}

fn read_u32_block<'a>(r: &mut Reader<'a>, field: &'static str) -> Result<&'a [u8], DecodeError> {
    let len = r.u32(field)?;
    r.take(len as usize, field)
}

fn put_u32_block(out: &mut Vec<u8>, bytes: &[u8]) {
    out.put_u32(bytes.len() as u32);
    out.extend_from_slice(bytes);
}

impl<'a> Codec<'a> for JobDescription {
    const NAME: &'static str = "job description";

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(PROTOCOL_VERSION);
        out.extend_from_slice(&self.job_id.0);
        out.put_u32(self.size);
        out.put_u32(self.rank);
        out.put_u32(self.incarnation);
        for e in &self.hosts {
            out.put_u16(e.port);
            out.push(e.host.len() as u8);
            out.extend_from_slice(e.host.as_bytes());
        }
        out.extend_from_slice(&self.job_public_key);
        out.put_u16(self.join_token.len() as u16);
        out.extend_from_slice(&self.join_token);
        put_u32_block(out, &self.ca_cert_pem);
        put_u32_block(out, &self.rank_cert_pem);
        out.put_u16(self.job_secret_key.len() as u16);
        out.extend_from_slice(&self.job_secret_key);
        put_u32_block(out, &self.rank_key_pem);
    }

    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let version = r.u16("version")?;
        if version != PROTOCOL_VERSION {
            return Err(DecodeError::Mismatch {
                field: "version",
                expected: u64::from(PROTOCOL_VERSION),
                got: u64::from(version),
            });
        }
        let job_id = JobId(r.array("job_id")?);
        let size = r.u32("size")?;
        range("size", u64::from(size), 1, u64::from(MAX_SIZE))?;
        let rank = r.u32("rank")?;
        range("rank", u64::from(rank), 0, u64::from(size) - 1)?;
        let incarnation = r.u32("incarnation")?;
        range(
            "incarnation",
            u64::from(incarnation),
            1,
            u64::from(u32::MAX),
        )?;
        let mut hosts = Vec::with_capacity(size.min(64) as usize);
        for _ in 0..size {
            let port = r.u16("port")?;
            range("port", u64::from(port), 1, u64::from(u16::MAX))?;
            let host_len = r.u8("host_len")?;
            range("host_len", u64::from(host_len), 1, 253)?;
            let host = read_host(r.take(usize::from(host_len), "host")?)?;
            hosts.push(HostEntry {
                host: host.to_owned(),
                port,
            });
        }
        let job_public_key = r.take(PUBLIC_KEY_LEN, "job_public_key")?.to_vec();
        let token_len = r.u16("join_token length")?;
        let join_token = r.take(usize::from(token_len), "join_token")?;
        JoinToken::decode(join_token).map_err(|e| DecodeError::Embedded {
            item: "join token",
            error: Box::new(e),
        })?;
        let ca_cert_pem = read_u32_block(r, "ca_cert_pem")?.to_vec();
        let rank_cert_pem = read_u32_block(r, "rank_cert_pem")?.to_vec();
        let key_len = r.u16("job_secret_key length")?;
        let expected = if rank == 0 { SECRET_KEY_LEN as u64 } else { 0 };
        if u64::from(key_len) != expected {
            return Err(DecodeError::Mismatch {
                field: "job_secret_key length",
                expected,
                got: u64::from(key_len),
            });
        }
        let job_secret_key = r.take(usize::from(key_len), "job_secret_key")?.to_vec();
        let rank_key_pem = read_u32_block(r, "rank_key_pem")?.to_vec();
        Ok(Self {
            job_id,
            size,
            rank,
            incarnation,
            hosts,
            job_public_key,
            join_token: join_token.to_vec(),
            ca_cert_pem,
            rank_cert_pem,
            job_secret_key,
            rank_key_pem,
        })
    }
}

impl JobDescription {
    /// The line a launcher writes to a rank's stdin: lowercase hex and `\n`.
    pub fn to_line(&self) -> String {
        let mut line = hex::encode(&self.to_vec());
        line.push('\n');
        line
    }

    /// Decodes the stdin line (hex digits and exactly one `\n`, nothing
    /// else), then refuses it if any host is refused by `policy` (H1614).
    /// Every other rejection is H1615.
    pub fn from_line(line: &[u8], policy: &RefusedHosts) -> Result<Self, Error> {
        let digits = line
            .strip_suffix(b"\n")
            .ok_or(Error::JobDescription(HexError::MissingNewline.into()))?;
        let bytes = hex::decode(digits).map_err(|e| Error::JobDescription(e.into()))?;
        let d = Self::decode(&bytes).map_err(Error::JobDescription)?;
        d.check_hosts(policy)?;
        Ok(d)
    }

    /// H1614 if any host of the list is refused.
    pub fn check_hosts(&self, policy: &RefusedHosts) -> Result<(), Error> {
        self.hosts.iter().try_for_each(|e| policy.check(&e.host))
    }

    /// This rank's own host entry (always present in a decoded description).
    pub fn own_host(&self) -> Option<&HostEntry> {
        self.hosts.get(self.rank as usize)
    }
}

/// The short name of the check a job description fails, as the vectors file
/// writes it (`hex`, `truncated`, `trailing`, `version`, `size`, `rank`,
/// `incarnation`, `port`, `host`, `secret_key`, `token`).
pub fn check_name(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Hex(_) => "hex",
        DecodeError::Truncated { .. } => "truncated",
        DecodeError::TrailingBytes { .. } => "trailing",
        DecodeError::Host(_) => "host",
        DecodeError::Embedded { .. } => "token",
        DecodeError::OutOfRange { field, .. } | DecodeError::Mismatch { field, .. } => match *field
        {
            "host_len" => "host",
            "job_secret_key length" => "secret_key",
            f => f,
        },
        _ => "other",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::join_token::tests::sample_token;
    use crate::HCode;
    use proptest::prelude::*;

    pub(crate) fn sample(rank: u32) -> JobDescription {
        JobDescription {
            job_id: JobId([7; 16]),
            size: 2,
            rank,
            incarnation: 1,
            hosts: vec![
                HostEntry {
                    host: "127.0.0.1".into(),
                    port: 7000,
                },
                HostEntry {
                    host: "node-b.example".into(),
                    port: 7001,
                },
            ],
            job_public_key: vec![0xbb; PUBLIC_KEY_LEN],
            join_token: sample_token("127.0.0.1"),
            ca_cert_pem: b"-----BEGIN CERTIFICATE-----\nca\n".to_vec(),
            rank_cert_pem: b"-----BEGIN CERTIFICATE-----\nr\n".to_vec(),
            job_secret_key: if rank == 0 { vec![0xcc; 64] } else { vec![] },
            rank_key_pem: b"-----BEGIN PRIVATE KEY-----\nk\n".to_vec(),
        }
    }

    fn code(line: &[u8]) -> (HCode, &'static str) {
        match JobDescription::from_line(line, &RefusedHosts::builtin()) {
            Ok(_) => panic!("accepted"),
            Err(Error::JobDescription(e)) => (HCode::H1615, check_name(&e)),
            Err(e) => (e.h_code().unwrap(), "host"),
        }
    }

    #[test]
    fn round_trip_and_line_rules() {
        for rank in [0, 1] {
            let d = sample(rank);
            let line = d.to_line();
            assert_eq!(
                JobDescription::from_line(line.as_bytes(), &RefusedHosts::builtin()).unwrap(),
                d
            );
            assert!(!format!("{d:?}").contains("PRIVATE"));
        }
        let line = sample(0).to_line();
        let digits = line.trim_end();
        assert_eq!(code(digits.as_bytes()).1, "hex");
        assert_eq!(code(format!("{digits}\r\n").as_bytes()).1, "hex");
        assert_eq!(code(format!("{digits}\n\n").as_bytes()).1, "hex");
        assert_eq!(
            code(format!("{}\n", digits.to_uppercase()).as_bytes()).1,
            "hex"
        );
        assert_eq!(code(format!("{digits}00\n").as_bytes()).1, "trailing");
        assert_eq!(
            code(format!("{}\n", &digits[..digits.len() - 2]).as_bytes()).1,
            "truncated"
        );
    }

    #[test]
    fn every_prefix_fails() {
        let bytes = sample(1).to_vec();
        for n in 0..bytes.len() {
            assert!(JobDescription::decode(&bytes[..n]).is_err(), "{n}");
        }
    }

    #[test]
    fn rejections() {
        let enc = |d: &JobDescription| d.to_line();
        let mut d = sample(1);
        d.size = 4097;
        assert_eq!(code(enc(&d).as_bytes()), (HCode::H1615, "size"));
        let mut d = sample(1);
        d.rank = 2;
        assert_eq!(code(enc(&d).as_bytes()), (HCode::H1615, "rank"));
        let mut d = sample(1);
        d.incarnation = 0;
        assert_eq!(code(enc(&d).as_bytes()), (HCode::H1615, "incarnation"));
        let mut d = sample(1);
        d.hosts[0].port = 0;
        assert_eq!(code(enc(&d).as_bytes()), (HCode::H1615, "port"));
        let mut d = sample(1);
        d.hosts[1].host = "Node".into();
        assert_eq!(code(enc(&d).as_bytes()), (HCode::H1615, "host"));
        let mut d = sample(1);
        d.hosts[1].host = "x.host-b.invalid".into();
        assert_eq!(code(enc(&d).as_bytes()), (HCode::H1614, "host"));
        let mut d = sample(1);
        d.job_secret_key = vec![1; 64];
        assert_eq!(code(enc(&d).as_bytes()), (HCode::H1615, "secret_key"));
        let mut d = sample(0);
        d.job_secret_key = vec![];
        assert_eq!(code(enc(&d).as_bytes()), (HCode::H1615, "secret_key"));
        let mut d = sample(1);
        d.join_token.pop();
        assert_eq!(code(enc(&d).as_bytes()), (HCode::H1615, "token"));
        let mut bytes = sample(1).to_vec();
        bytes[0] = 2;
        let line = format!("{}\n", hex::encode(&bytes));
        assert_eq!(code(line.as_bytes()), (HCode::H1615, "version"));
    }

    #[test]
    fn size_limit() {
        let mut d = sample(1);
        d.size = 4096;
        d.hosts = (0..4096)
            .map(|i| HostEntry {
                host: "localhost".into(),
                port: 1 + i as u16,
            })
            .collect();
        assert_eq!(JobDescription::decode(&d.to_vec()).unwrap(), d);
    }

    proptest! {
        #[test]
        fn arbitrary_lines_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4000)) {
            let _ = JobDescription::decode(&bytes);
            let _ = JobDescription::from_line(&bytes, &RefusedHosts::builtin());
        }

        #[test]
        fn round_trip(rank in 0u32..2, inc in 1u32.., port in 1u16.., job: [u8; 16]) {
            let mut d = sample(rank);
            d.incarnation = inc;
            d.hosts[1].port = port;
            d.job_id = JobId(job);
            prop_assert_eq!(JobDescription::decode(&d.to_vec()).unwrap(), d);
        }
    }
}
