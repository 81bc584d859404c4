//! Standard input (docs/launcher.md, "Standard input"): the launcher's
//! stdin reaches rank 0 after its job description, for a local rank and
//! for one behind a remote shell; every other rank reads end of file; a
//! restarted rank 0 reads the rest of the stream.

use std::io::Write;
use std::time::Duration;

use super::procs::{fake_ssh, marker, Launched};

/// A line no shell or `printf` may change on the way: quotes, `%`, `\`,
/// a leading `-`, a tab.
const LINE: &str = "-n 'q' \"d\" %s %% \\n \\ é\tend";

/// Closes the launcher's stdin and waits for the job to end well; the
/// whole output, for the messages of failed checks.
fn ended_well(l: &mut Launched, name: &str, stdin: std::process::ChildStdin) -> String {
    drop(stdin);
    let status = l.finish(Duration::from_secs(90));
    let what = format!("{name}:\n{}\n{}", l.out, l.err);
    assert!(status.success(), "{what}");
    what
}

/// The stdout lines of rank `rank`.
fn lines_of(l: &Launched, rank: u32) -> Vec<&str> {
    let prefix = format!("[{rank}] ");
    l.out.lines().filter(|l| l.starts_with(&prefix)).collect()
}

/// `sperli run` of two ranks on 127.0.0.1-2 with `extra` launcher
/// arguments, running the example with `example` (its mode and arguments).
fn job_args<'a>(extra: &[&'a str], example: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "-n",
        "2",
        "-H",
        "127.0.0.1,127.0.0.2",
        "--timeout",
        "90",
    ];
    args.extend_from_slice(extra);
    args.push("--");
    args.push("EXAMPLE");
    args.extend_from_slice(example);
    args
}

/// Two ranks of the `stdin` example with `extra` launcher arguments; the
/// test writes two lines and closes the launcher's stdin.
fn forwarded(name: &str, extra: &[&str]) {
    let mark = marker(name);
    let args = job_args(extra, &["stdin"]);
    let (mut l, mut stdin) = Launched::sperli_fed(&args, &mark);
    stdin
        .write_all(format!("{LINE}\nsecond line\n").as_bytes())
        .unwrap();
    let what = ended_well(&mut l, name, stdin);
    let rank0 = lines_of(&l, 0);
    assert_eq!(
        rank0,
        [
            format!("[0] rank 0 stdin: {LINE}").as_str(),
            "[0] rank 0 stdin: second line",
            "[0] rank 0 stdin: end of file"
        ],
        "{what}"
    );
    let rank1 = lines_of(&l, 1);
    assert_eq!(rank1, ["[1] rank 1 stdin: end of file"], "{what}");
}

/// Runs `case` with local ranks, then with ranks behind a remote shell.
fn local_and_remote(name: &str, case: fn(&str, &[&str])) {
    let _cpu = crate::shared_cpu();
    case(&format!("{name}-local"), &[]);
    let rsh = format!("{} {{host}}", fake_ssh());
    case(&format!("{name}-rsh"), &["--rsh-local", "--rsh", &rsh]);
}

#[test]
fn rank_0_reads_the_launchers_stdin_local_or_remote() {
    local_and_remote("stdin", forwarded);
}

#[test]
fn no_stdin_gives_rank_0_end_of_file() {
    let _cpu = crate::shared_cpu();
    let mark = marker("stdin-none");
    let (mut l, mut stdin) = Launched::sperli_fed(&job_args(&["--no-stdin"], &["stdin"]), &mark);
    // The launcher does not read it: rank 0 ends without it being closed.
    stdin.write_all(b"not for rank 0\n").unwrap();
    let status = l.finish(Duration::from_secs(90));
    let what = format!("{}\n{}", l.out, l.err);
    assert!(status.success(), "{what}");
    assert!(l.out.contains("[0] rank 0 stdin: end of file"), "{what}");
    assert!(!l.out.contains("not for rank 0"), "{what}");
    drop(stdin);
}

/// Rank 0 of the first incarnation reads one line and exits 3; the
/// launcher restarts the job, and the new rank 0 reads what came after.
fn restarted(name: &str, extra: &[&str]) {
    let mark = marker(name);
    let args = job_args(&[&["--restart-max", "1"], extra].concat(), &["stdin", "3"]);
    let (mut l, mut stdin) = Launched::sperli_fed(&args, &mark);
    stdin.write_all(b"first\n").unwrap();
    stdin.flush().unwrap();
    // The second line only once the first run is over (the launcher says
    // it restarts): written earlier, it could reach the first rank 0,
    // which takes it with it.
    let restart = l.wait_until(Duration::from_secs(60), |err, l| {
        err && l.contains("restarting the job as incarnation 2")
    });
    assert!(restart, "no restart:\n{}\n{}", l.out, l.err);
    stdin.write_all(b"second\n").unwrap();
    let what = ended_well(&mut l, name, stdin);
    let rank0 = lines_of(&l, 0);
    assert_eq!(
        rank0,
        [
            "[0] rank 0 stdin: first",
            "[0] rank 0 stdin: second",
            "[0] rank 0 stdin: end of file"
        ],
        "{what}"
    );
}

#[test]
fn a_restarted_rank_0_reads_the_rest_of_the_stream_local_or_remote() {
    local_and_remote("stdin-restart", restarted);
}
