//! The control channel between the launcher and a rank started directly
//! (protocol §18.1): an `AF_UNIX` socket pair. The rank's end is inherited
//! at descriptor [`CONTROL_FD`], whose number the rank reads from the
//! environment variable [`CONTROL_FD_ENV`] (a number, not a secret); the
//! launcher keeps the other end. Both directions carry records as lines of
//! lowercase hex and one `\n`: the rank writes REPORT records (protocol
//! §18.4), the launcher writes MEMBERSHIP records (protocol §18.3).
//!
//! A reader thread per rank turns each line into a [`ChannelLine`]: a
//! REPORT, or a refused line (not hex, not a REPORT, longer than any
//! REPORT can be), which the launcher treats as a failure of that rank
//! (protocol §18.4).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use sperli_wire::error::HexError;
use sperli_wire::limits::MAX_SIZE;
use sperli_wire::recovery::{report, RecoveryError, Report};

/// The environment variable that names the rank's end of its control
/// channel (protocol §18.1).
pub const CONTROL_FD_ENV: &str = "SPERLI_CONTROL_FD";

/// The descriptor number of the rank's end in the rank's process.
pub const CONTROL_FD: i32 = 3;

/// The longest line a rank may write: the hex of a REPORT with the most
/// suspects (4095), and its `\n` (protocol §18.4).
pub const MAX_LINE: usize = 2 * (report::FIXED_LEN + 4 * (MAX_SIZE as usize - 1)) + 1;

/// How long the launcher's write of one record may block (a rank that
/// reads nothing must not stop the launcher).
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a line from a rank's control channel is refused (protocol §18.4:
/// H1610, the record does not decode; the launcher treats it as a failure
/// of that rank).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// The line is not lowercase hex.
    #[error("a control line that is not lowercase hex: {0}")]
    Hex(HexError),
    /// The line is longer than any REPORT record.
    #[error("a control line longer than {MAX_LINE} bytes")]
    TooLong,
    /// The bytes are not a REPORT record.
    #[error("{0}")]
    Report(RecoveryError),
}

/// One line a rank wrote to its control channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelLine {
    /// A REPORT record that decodes.
    Report(Report),
    /// A line that does not (protocol §18.4: refused).
    Refused(LineError),
}

/// Decodes one line (without its `\n`) as a REPORT record.
pub fn parse_line(line: &[u8]) -> ChannelLine {
    match sperli_wire::hex::decode(line) {
        Err(e) => ChannelLine::Refused(LineError::Hex(e)),
        Ok(bytes) => match Report::decode(&bytes) {
            Ok(r) => ChannelLine::Report(r),
            Err(e) => ChannelLine::Refused(LineError::Report(e)),
        },
    }
}

/// The launcher's end of one rank's control channel, and the rank's end
/// until the rank's process is spawned (then dropped here).
pub struct ControlPair {
    /// The launcher's end.
    pub launcher: UnixStream,
    /// The rank's end, inherited at [`CONTROL_FD`].
    pub rank: OwnedFd,
}

impl ControlPair {
    /// A new socket pair (both ends close on exec until the rank's end is
    /// moved to [`CONTROL_FD`] in the child).
    pub fn new() -> std::io::Result<Self> {
        let (launcher, rank) = UnixStream::pair()?;
        launcher.set_write_timeout(Some(WRITE_TIMEOUT))?;
        Ok(Self {
            launcher,
            rank: rank.into(),
        })
    }
}

/// Reads lines from `stream` until its end, calling `deliver` for each;
/// a line past [`MAX_LINE`] is refused and ends the reading (the rank's
/// failure is all the launcher needs to know).
pub fn read_lines(stream: impl Read, mut deliver: impl FnMut(ChannelLine)) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = (MAX_LINE + 1) as u64;
        match (&mut reader).take(limit).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            if line.len() > MAX_LINE {
                deliver(ChannelLine::Refused(LineError::TooLong));
            } else {
                // The channel ended within a line: nothing the launcher
                // can judge; the rank's exit tells the rest.
            }
            return;
        }
        line.pop();
        deliver(parse_line(&line));
    }
}

/// `record` (its encoded bytes) as the hex line a control channel carries
/// (protocol §18.1), for [`write_line`].
pub fn record_line(record: &[u8]) -> Vec<u8> {
    let mut line = sperli_wire::hex::encode(record).into_bytes();
    line.push(b'\n');
    line
}

/// Writes a [`record_line`] (encoded once for all the survivors a record
/// goes to).
pub fn write_line(mut stream: &UnixStream, line: &[u8]) -> std::io::Result<()> {
    stream.write_all(line)
}

/// Writes `record` (its encoded bytes) as one hex line (protocol §18.1).
pub fn write_record(stream: &UnixStream, record: &[u8]) -> std::io::Result<()> {
    write_line(stream, &record_line(record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sperli_wire::ids::JobId;

    fn report(rank: u32, suspects: Vec<u32>) -> Report {
        Report {
            flag: true,
            job_id: JobId([7; 16]),
            rank,
            incarnation: 1,
            epoch: 1,
            best_commit: 4,
            suspects,
        }
    }

    fn lines_of(input: &[u8]) -> Vec<ChannelLine> {
        let mut out = Vec::new();
        read_lines(input, |l| out.push(l));
        out
    }

    #[test]
    fn reports_and_refused_lines() {
        let r = report(2, vec![0, 3]);
        let mut input = sperli_wire::hex::encode(&r.encode()).into_bytes();
        input.extend_from_slice(b"\nzz\n");
        let mut short = r.encode();
        short.pop();
        input.extend_from_slice(sperli_wire::hex::encode(&short).as_bytes());
        input.extend_from_slice(b"\n0A\n");
        let got = lines_of(&input);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0], ChannelLine::Report(r));
        assert!(matches!(got[1], ChannelLine::Refused(LineError::Hex(_))));
        match &got[2] {
            ChannelLine::Refused(LineError::Report(e)) => {
                assert_eq!(e.check_name(), "truncated")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(got[3], ChannelLine::Refused(LineError::Hex(_))));
    }

    #[test]
    fn the_longest_report_passes_and_a_longer_line_is_refused() {
        let r = report(4095, (0..4095).collect());
        let mut line = sperli_wire::hex::encode(&r.encode()).into_bytes();
        assert_eq!(line.len() + 1, MAX_LINE);
        line.push(b'\n');
        assert_eq!(lines_of(&line), [ChannelLine::Report(r)]);
        let long = vec![b'0'; MAX_LINE + 10];
        assert_eq!(lines_of(&long), [ChannelLine::Refused(LineError::TooLong)]);
        // A line cut by the channel's end is not judged.
        assert_eq!(lines_of(b"00ff"), []);
    }

    #[test]
    fn a_record_crosses_the_pair_as_one_hex_line() {
        let pair = ControlPair::new().unwrap();
        let rank = UnixStream::from(pair.rank);
        write_record(&pair.launcher, &[0x0a, 0xff]).unwrap();
        drop(pair.launcher);
        let mut text = String::new();
        BufReader::new(rank).read_to_string(&mut text).unwrap();
        assert_eq!(text, "0aff\n");
    }

    /// Through `run_job_recovering` with `sh` ranks: each survivor
    /// writes its REPORT to `$SPERLI_CONTROL_FD` and keeps the line it
    /// reads back; `victim` ends by `how`. Returns the outcome and which
    /// ranks read the one shrink record that removes `victim`.
    fn shrink_run(size: u32, victim: u32, how: &str) -> (crate::Outcome, Vec<bool>) {
        use crate::recovery::RecoveryPlan;
        use sperli_wire::recovery::Mode;
        let job = sperli_tls::job_plan::JobPlan::localhost(size).unwrap();
        let plan = RecoveryPlan {
            job: &job,
            mode: Mode::Shrink,
            replacements: 0,
            spares: &[],
        };
        let script = format!(
            r#"read -r d
[ "$d" = 00ff ] || exit 8
[ "$SPERLI_CONTROL_FD" = 3 ] || exit 9
if [ "$SPERLI_RANK" = {victim} ]; then {how}; sleep 30; exit 0; fi
printf '%s\n' "$REPORT_HEX" >&$SPERLI_CONTROL_FD
IFS= read -r rec <&$SPERLI_CONTROL_FD || exit 10
printf '%s\n' "$rec" > "$OUT""#
        );
        let (outcome, records) =
            crate::supervise::recover::tests::run_sh_ranks(plan, &script, victim);
        let mut inc = vec![1; size as usize];
        inc[victim as usize] = 0;
        let read = records
            .into_iter()
            .map(|r| {
                r.is_some_and(|r| {
                    assert_eq!((r.mode, r.epoch, &r.incarnations), (Mode::Shrink, 2, &inc));
                    true
                })
            })
            .collect();
        (outcome, read)
    }

    #[test]
    fn a_killed_rank_s_peers_report_and_read_the_signed_record() {
        let (outcome, read) = shrink_run(4, 3, "kill -9 $$");
        assert_eq!(outcome, crate::Outcome::Success);
        assert_eq!(read, [true, true, true, false]);
    }

    #[test]
    fn a_stopped_rank_is_fenced_and_the_survivors_go_on() {
        let (outcome, read) = shrink_run(3, 1, "kill -STOP $$");
        assert_eq!(outcome, crate::Outcome::Success);
        assert_eq!(read, [true, false, true]);
    }

    #[test]
    fn without_a_recovery_plan_a_rank_has_no_channel() {
        use crate::supervise::{run_job, Options};
        let script = r#"read -r d; [ -z "$SPERLI_CONTROL_FD" ] || exit 9; if { true >&3; } 2>/dev/null; then exit 10; fi"#;
        let rank = crate::spawn::RankLaunch {
            rank: 0,
            host: "127.0.0.1".into(),
            via: crate::spawn::Via::Direct,
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: Vec::new(),
            stdin_line: "00ff\n".into(),
            port: None,
        };
        let none = std::sync::atomic::AtomicI32::new(0);
        assert_eq!(
            run_job(vec![rank], &Options::default(), &none),
            crate::Outcome::Success
        );
    }
}
