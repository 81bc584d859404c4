//! How one rank is started: directly (a loopback host), through the remote
//! shell template (`--rsh`), or as a Slurm job step (`srun`), and the
//! clear message when it cannot be (docs/launcher.md, "Spawning").
//!
//! A rank started through a remote shell or srun runs under a small POSIX
//! `sh` wrapper ([`RANK_WRAPPER`]) on its host. It:
//!
//! 1. says it started (a control line on stderr, so the launcher's set-up
//!    deadline knows the remote side is up);
//! 2. checks that the program can be started, else says why and exits 127;
//! 3. reads the job description line from its stdin and hands it to the
//!    program's stdin (in memory: a shell variable, never exported, and
//!    the shell's built-in `printf`; never an argument or a file);
//! 4. then hands the program the bytes of the `d` lines that follow (the
//!    launcher's stdin, rank 0 only: [`crate::stdin_feed`]) until the
//!    line `e`, where the program's stdin ends;
//! 5. keeps reading its stdin, which stays open as long as the launcher
//!    (or the remote shell's connection) lives: at end of file it kills
//!    its whole process group, program and grandchildren included: the
//!    end-of-stdin watchdog that ends remote ranks when the launcher dies;
//! 6. gives the program its own failure-record file on that host and
//!    sends the record back as a control line on stderr when it ends;
//! 7. exits with the program's status (128 + n for signal n).
//!
//! Control lines start with the byte 0x1e and `sperli:`; the launcher
//! takes them out of the rank's output.

use std::process::Command;

use crate::os;

/// How a rank's process is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// A child process of the launcher (a loopback host).
    Direct,
    /// The remote-shell template with `{host}` replaced.
    Rsh,
    /// `srun -N1 -n1 --overlap -w NODE` inside a Slurm allocation.
    Srun {
        /// The Slurm node name.
        node: String,
    },
}

impl Via {
    /// Whether the rank runs under the launcher's rank wrapper (a `sh -c`
    /// script that reports the rank's start, its failure record and a
    /// start failure on stderr).
    pub fn wrapped(&self) -> bool {
        !matches!(self, Via::Direct)
    }
}

/// torchrun's default for a rank that shares its machine with other ranks
/// of the job: `OMP_NUM_THREADS=1` (OpenMP, and OpenBLAS under numpy, read
/// it), so that each rank's thread pools do not take the cores from the
/// others (mpirun gets the same by binding each rank to a core). `None`
/// when the rank has its machine to itself or the launcher's own
/// environment sets the variable (then that value reaches the rank). A
/// rank started directly shares the launcher's machine with the
/// `direct_ranks` started directly; one started on another host shares it
/// with the `host_ranks` of its host entry.
pub fn omp_threads(
    via: &Via,
    direct_ranks: u32,
    host_ranks: u32,
    launcher_sets: bool,
) -> Option<(String, String)> {
    let sharing = match via {
        Via::Direct => direct_ranks > 1,
        Via::Rsh | Via::Srun { .. } => host_ranks > 1,
    };
    (sharing && !launcher_sets).then(|| (sperli_wire::env::OMP_NUM_THREADS.into(), "1".into()))
}

/// How to start one rank.
#[derive(Clone)]
pub struct RankLaunch {
    /// The rank.
    pub rank: u32,
    /// Its host (the address in the job description).
    pub host: String,
    /// How its process is started.
    pub via: Via,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// Extra environment (never secrets).
    pub env: Vec<(String, String)>,
    /// The job description line for stdin (secret).
    pub stdin_line: String,
    /// The port of its host-list entry, for a rank started directly: the
    /// launcher binds it before any rank starts and hands the listener over
    /// (protocol §5.1 step 1). `None`: the rank binds its own.
    pub port: Option<u16>,
}

impl std::fmt::Debug for RankLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankLaunch")
            .field("rank", &self.rank)
            .field("host", &self.host)
            .field("via", &self.via)
            .field("argv", &self.argv)
            .finish_non_exhaustive()
    }
}

/// The start of a control line the wrapper writes on stderr.
pub const CONTROL_PREFIX: &str = "\u{1e}sperli:";

/// A control line of the wrapper, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// The wrapper runs on the rank's host.
    Started,
    /// The program cannot be started: why, as a shell tells it apart, and
    /// the text that names it and why.
    CannotStart(StartError, String),
    /// The program's failure record (one line).
    Record(String),
}

impl Control {
    /// Parses a line (without its newline); `None` for ordinary output.
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix(CONTROL_PREFIX)?;
        if rest == "started" {
            return Some(Control::Started);
        }
        if let Some(m) = rest.strip_prefix("cannot-start ") {
            let (status, what) = m.split_once(' ')?;
            return Some(Control::CannotStart(
                StartError::of_shell_status(status),
                what.to_owned(),
            ));
        }
        rest.strip_prefix("record ")
            .map(|r| Control::Record(r.to_owned()))
    }
}

/// The wrapper (see the module docs). Run as
/// `sh -c RANK_WRAPPER sperli-rank PROGRAM ARGS...`.
pub const RANK_WRAPPER: &str = r#"printf '\036sperli:started\n' >&2
case $1 in
*/*) if [ ! -e "$1" ]; then e='no such file or directory'; s=127; elif [ -d "$1" ] || [ ! -x "$1" ]; then e='permission denied'; s=126; else e=; fi ;;
*) if command -v "$1" >/dev/null 2>&1; then e=; else e='command not found'; s=127; fi ;;
esac
if [ -n "$e" ]; then printf '\036sperli:cannot-start %s %s: %s\n' "$s" "$1" "$e" >&2; exit $s; fi
IFS= read -r d || { printf '\036sperli:cannot-start - %s: no job description on stdin\n' "$1" >&2; exit 127; }
f=$(mktemp "${TMPDIR:-/tmp}/sperli-record.XXXXXXXX" 2>/dev/null) || f=
if [ -n "$f" ]; then SPERLI_ERROR_FILE=$f; export SPERLI_ERROR_FILE; else unset SPERLI_ERROR_FILE; fi
exec 3<&0
{
  trap '' PIPE
  printf '%s\n' "$d"
  d=
  while IFS= read -r l; do
    case $l in
    d*) printf "${l#d}" 2>/dev/null ;;
    *) break ;;
    esac
  done
  exec >/dev/null
  while IFS= read -r _; do :; done
  kill -9 0
} <&3 | {
  d=
  exec 3<&-
  "$@"
  s=$?
  if [ -n "$f" ]; then
    if [ -s "$f" ]; then printf '\036sperli:record %s\n' "$(head -n 1 "$f")" >&2; fi
    rm -f "$f"
  fi
  trap '' TERM
  kill -TERM 0 2>/dev/null
  exit $s
} &
d=
exec 3<&-
trap '' TERM
wait $!
"#;

/// The remote shell template used when `--rsh` is not given: no password
/// prompt, and a connect timeout so an unreachable host fails in seconds.
pub const DEFAULT_RSH: &str = "ssh -o BatchMode=yes -o ConnectTimeout=10 {host}";

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Why a rank's command cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// No program was given.
    #[error("no program given")]
    NoProgram,
    /// The remote shell template has no command.
    #[error("the --rsh template {0:?} has no command")]
    EmptyTemplate(String),
}

/// `sh -c RANK_WRAPPER sperli-rank PROGRAM ARGS...` as words.
fn wrapped_argv(argv: &[String]) -> Vec<String> {
    let mut v = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        RANK_WRAPPER.to_owned(),
        "sperli-rank".to_owned(),
    ];
    v.extend(argv.iter().cloned());
    v
}

/// The command that starts `r` (`rsh`: the remote shell template). Its
/// child leads a process group of its own and dies with the launcher
/// ([`os::rank_group_dying_with_launcher`]).
pub fn command_for(r: &RankLaunch, rsh: &str) -> Result<Command, CommandError> {
    let (program, rest) = r.argv.split_first().ok_or(CommandError::NoProgram)?;
    let mut c = match &r.via {
        Via::Direct => {
            let mut c = Command::new(program);
            c.args(rest).envs(r.env.iter().map(|(k, v)| (k, v)));
            c
        }
        Via::Rsh => {
            let mut words = rsh.split_whitespace().map(|w| w.replace("{host}", &r.host));
            let first = words
                .next()
                .ok_or_else(|| CommandError::EmptyTemplate(rsh.to_owned()))?;
            let mut c = Command::new(first);
            c.args(words);
            // The remote login shell runs this line: `exec` so that the
            // wrapper is the process the remote side waits for.
            let mut remote: Vec<String> = vec!["exec".into(), "env".into()];
            remote.extend(r.env.iter().map(|(k, v)| shell_quote(&format!("{k}={v}"))));
            remote.extend(wrapped_argv(&r.argv).iter().map(|a| shell_quote(a)));
            c.arg(remote.join(" "));
            c.env_remove(sperli_wire::failure_record::ENV_VAR);
            c
        }
        Via::Srun { node } => {
            let mut c = Command::new("srun");
            c.args(crate::slurm::srun_args(node, r.rank))
                .args(wrapped_argv(&r.argv))
                .envs(r.env.iter().map(|(k, v)| (k, v)))
                .env_remove(sperli_wire::failure_record::ENV_VAR);
            c
        }
    };
    os::rank_group_dying_with_launcher(&mut c);
    Ok(c)
}

/// The OS error of a failed spawn in words: `permission denied`, `no such
/// file or directory`.
pub fn os_error_text(e: &std::io::Error) -> String {
    let text = match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_owned(),
        None => e.to_string(),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// Why a rank's program did not start, as the shell, `env` and `timeout`
/// tell it apart: the launcher exits with their status (docs/launcher.md,
/// "Exit status").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    /// There is no such program (exit status 127).
    NotFound,
    /// The program exists but cannot be executed: no execute permission,
    /// a directory, not an executable format (exit status 126).
    NotExecutable,
    /// Anything else: no job description reached it, an output file could
    /// not be made, the system refused a process (exit status 2).
    Other,
}

impl StartError {
    /// The kind of a failed spawn's OS error.
    pub fn of_os_error(e: &std::io::Error) -> Self {
        use nix::errno::Errno;
        match e.raw_os_error().map(Errno::from_raw) {
            Some(Errno::ENOENT) => StartError::NotFound,
            Some(
                Errno::EACCES | Errno::EPERM | Errno::ENOEXEC | Errno::EISDIR | Errno::ETXTBSY,
            ) => StartError::NotExecutable,
            _ => StartError::Other,
        }
    }

    /// The kind the rank wrapper's status names (`127`, `126`, else
    /// other).
    fn of_shell_status(status: &str) -> Self {
        match status {
            "127" => StartError::NotFound,
            "126" => StartError::NotExecutable,
            _ => StartError::Other,
        }
    }
}

/// A rank that could not be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnFailure {
    /// The rank.
    pub rank: u32,
    /// Its host.
    pub host: String,
    /// Why, as a shell tells it apart.
    pub error: StartError,
    /// What failed and why: `PROGRAM: OS error`.
    pub what: String,
}

impl std::fmt::Display for SpawnFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot start rank {} on {}: {}",
            self.rank, self.host, self.what
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::time::Duration;

    fn launch(via: Via, argv: &[&str]) -> RankLaunch {
        RankLaunch {
            rank: 1,
            host: "node-b.example".into(),
            via,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![("SPERLI_RANK".into(), "1".into())],
            stdin_line: "00ff\n".into(),
            port: None,
        }
    }

    #[test]
    fn remote_command_quotes_and_wraps() {
        let r = launch(Via::Rsh, &["prog", "a b"]);
        let c = command_for(&r, DEFAULT_RSH).unwrap();
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(c.get_program(), "ssh");
        assert_eq!(
            args[..5],
            [
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=10",
                "node-b.example"
            ]
        );
        assert!(
            args[5].starts_with("exec env SPERLI_RANK=1 sh -c '"),
            "{}",
            args[5]
        );
        assert!(args[5].ends_with("' sperli-rank prog 'a b'"), "{}", args[5]);
        assert_eq!(
            command_for(&launch(Via::Rsh, &["p"]), "  ").unwrap_err(),
            CommandError::EmptyTemplate("  ".into())
        );
        assert_eq!(
            command_for(&launch(Via::Direct, &[]), DEFAULT_RSH).unwrap_err(),
            CommandError::NoProgram
        );
    }

    #[test]
    fn control_lines() {
        assert_eq!(
            Control::parse("\u{1e}sperli:started"),
            Some(Control::Started)
        );
        assert_eq!(
            Control::parse("\u{1e}sperli:record H1613 blame=1"),
            Some(Control::Record("H1613 blame=1".into()))
        );
        assert_eq!(
            Control::parse("\u{1e}sperli:cannot-start 126 x: permission denied"),
            Some(Control::CannotStart(
                StartError::NotExecutable,
                "x: permission denied".into()
            ))
        );
        assert_eq!(
            Control::parse("\u{1e}sperli:cannot-start - x: no job description on stdin"),
            Some(Control::CannotStart(
                StartError::Other,
                "x: no job description on stdin".into()
            ))
        );
        assert_eq!(Control::parse("sperli:started"), None);
        assert_eq!(Control::parse("\u{1e}sperli:other"), None);
    }

    #[test]
    fn os_errors_in_words() {
        let e = std::io::Error::from_raw_os_error(13);
        assert_eq!(os_error_text(&e), "permission denied");
        let e = std::io::Error::from_raw_os_error(2);
        assert_eq!(os_error_text(&e), "no such file or directory");
    }

    /// Runs the wrapper locally with `script` as the program; returns the
    /// child and a reader of its stderr lines.
    fn wrapper(script: &str) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
        let mut c = Command::new("sh");
        c.args(["-c", RANK_WRAPPER, "sperli-rank", "sh", "-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = c.spawn().unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        (child, rx)
    }

    use std::os::unix::process::CommandExt;

    /// A file without execute permission (mode 0644) under the temporary
    /// directory.
    pub(crate) fn not_executable(name: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = std::env::temp_dir().join(format!("sperli-plain-{name}-{}", std::process::id()));
        std::fs::write(&p, "not a program\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        p
    }

    #[test]
    fn the_wrapper_passes_the_line_and_the_stream_reports_the_record_and_the_status() {
        let (mut child, rx) = wrapper(
            r#"read l; [ "$l" = 00ff ] || exit 9; IFS= read -r m; [ "$m" = "in %s put" ] || exit 10; read x && exit 11; printf 'H1613 blame=2\n' > "$SPERLI_ERROR_FILE"; echo out; exit 3"#,
        );
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"00ff\n").unwrap();
        // The launcher's stdin (rank 0), in two pieces, then its end; the
        // wrapper's stdin stays open.
        stdin.write_all(&crate::stdin_feed::frame(b"in %")).unwrap();
        stdin
            .write_all(&crate::stdin_feed::frame(b"s put\n"))
            .unwrap();
        stdin.write_all(crate::stdin_feed::END_LINE).unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(out, "out\n");
        let lines: Vec<String> = rx.iter().collect();
        assert_eq!(
            lines
                .iter()
                .filter_map(|l| Control::parse(l))
                .collect::<Vec<_>>(),
            [Control::Started, Control::Record("H1613 blame=2".into())]
        );
        drop(stdin);
    }

    #[test]
    fn the_wrapper_kills_its_group_when_its_stdin_ends() {
        let (mut child, rx) = wrapper("read l; sleep 30 & echo ready; sleep 30; echo never");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"00ff\n").unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)).ok().as_deref(),
            Some("\u{1e}sperli:started")
        );
        // The program runs, with a child of its own.
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        let pgid = child.id();
        drop(stdin);
        let status = child.wait().unwrap();
        assert!(status.code().is_none() || status.code() != Some(0));
        // Every member of the group (the two sleeps) is gone.
        crate::procfs::wait_until("a member of the group is left", || {
            crate::procfs::group_members(pgid)
                .into_iter()
                .all(|p| crate::procfs::proc_state(p) == crate::procfs::ProcState::Gone)
        });
    }

    #[test]
    fn the_wrapper_says_when_the_program_cannot_start() {
        let plain = not_executable("wrapper");
        let plain = plain.to_str().unwrap();
        for (prog, why, status) in [
            ("/nonexistent/prog", "no such file or directory", 127),
            (plain, "permission denied", 126),
            ("no-such-command-sperli", "command not found", 127),
        ] {
            let mut c = Command::new("sh");
            c.args(["-c", RANK_WRAPPER, "sperli-rank", prog])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            let out = c.output().unwrap();
            assert_eq!(out.status.code(), Some(status));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(&format!("\u{1e}sperli:cannot-start {status} {prog}: {why}")),
                "{err}"
            );
        }
    }
}
