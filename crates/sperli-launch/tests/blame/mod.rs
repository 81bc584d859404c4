//! Blame (docs/launcher.md, "Which rank failed"): the root cause is the
//! rank the failed ranks blame when that rank has no record of its own (it
//! is stopped, or it never
//! joined); it moves to the spare host. And the job's end names the
//! originator of the ABORT with its reason and code.

use std::time::Duration;

use super::procs::{kill, marker, rank_process, wait_none_left, Launched};

/// SIGSTOP of rank `victim` of 3 (hosts 127.0.0.1-3, spare 127.0.0.4)
/// once every rank joined: the survivors lose it (silence), the launcher
/// blames the stopped rank, not a survivor, moves it to the spare and the
/// restarted job succeeds.
fn stopped_rank_moves_to_the_spare(victim: u32) {
    let mark = marker(&format!("sigstop-{victim}"));
    let mut l = Launched::sperli(
        &[
            "run",
            "-n",
            "3",
            "-H",
            "127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4",
            "--restart-max",
            "1",
            "--silence-ms",
            "2000",
            "--timeout",
            "90",
            "--",
            "EXAMPLE",
            "sleep",
            "4000",
        ],
        &mark,
    );
    l.wait_joined(3);
    let p = rank_process(&mark, victim, 1).expect("the victim's process");
    kill("STOP", p.pid);
    let status = l.finish(Duration::from_secs(120));
    let host = format!("127.0.0.{}", victim + 1);
    let what = format!("victim {victim}:\n{}\n{}", l.out, l.err);
    assert!(
        l.err
            .contains(&format!("rank {victim} on {host} failed: it is stopped")),
        "{what}"
    );
    assert!(
        l.err.contains(&format!(
            "moving rank {victim} from {host} to spare host 127.0.0.4"
        )),
        "{what}"
    );
    assert!(
        l.err.contains("restarting the job as incarnation 2"),
        "{what}"
    );
    assert!(status.success(), "{what}");
    // The stopped process was ended too.
    assert!(
        wait_none_left(&mark, Duration::from_secs(2)).is_ok(),
        "{what}"
    );
}

#[test]
fn sigstop_of_rank_0_blames_rank_0_and_moves_it_to_the_spare() {
    let _cpu = crate::shared_cpu();
    stopped_rank_moves_to_the_spare(0);
}

#[test]
fn sigstop_of_the_last_rank_blames_it_and_moves_it_to_the_spare() {
    let _cpu = crate::shared_cpu();
    stopped_rank_moves_to_the_spare(2);
}

/// Rank 1 never joins in incarnation 1 (its program sleeps instead): the
/// others' set-up ends with H1616 "missing ranks [1]" after the 30 s
/// window, the launcher names rank 1 (not rank 0), moves it to the spare
/// and the restart succeeds. Slow: the set-up window is 30 s.
#[test]
#[ignore = "slow (the 30 s set-up window): SPERLI_SLOW_TESTS=1 cargo xtask test, or cargo test -- --ignored"]
fn a_rank_that_never_joins_is_blamed_and_moved_to_the_spare() {
    let _cpu = crate::shared_cpu();
    let mark = marker("never-joins");
    let script =
        "if [ \"$SPERLI_RANK\" = 1 ] && [ \"$SPERLI_INCARNATION\" = 1 ]; then exec sleep 600; fi; \
                  exec EXAMPLE hello";
    let mut l = Launched::sperli(
        &[
            "run",
            "-n",
            "3",
            "-H",
            "127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4",
            "--restart-max",
            "1",
            "--timeout",
            "150",
            "--",
            "sh",
            "-c",
            script,
        ],
        &mark,
    );
    let status = l.finish(Duration::from_secs(180));
    let what = format!("{}\n{}", l.out, l.err);
    assert!(
        l.err.contains("rank 1 on 127.0.0.2 never joined the job"),
        "{what}"
    );
    assert!(l.err.contains("missing ranks [1]"), "{what}");
    assert!(
        l.err
            .contains("moving rank 1 from 127.0.0.2 to spare host 127.0.0.4"),
        "{what}"
    );
    assert!(status.success(), "{what}");
    assert!(l.out.contains("[1] hello from rank 1 of 3"), "{what}");
}

/// A rank that aborts the job (ABORT reason 2, code 42): the launcher's
/// last line names it as the originator with the reason and code.
#[test]
fn the_originators_abort_reason_and_code_are_reported() {
    let _cpu = crate::shared_cpu();
    let mark = marker("abort");
    let mut l = Launched::sperli(
        &[
            "run",
            "-n",
            "3",
            "--silence-ms",
            "2000",
            "--timeout",
            "60",
            "--",
            "EXAMPLE",
            "abort",
            "42",
            "1",
        ],
        &mark,
    );
    let status = l.finish(Duration::from_secs(90));
    let what = format!("{}\n{}", l.out, l.err);
    assert_eq!(status.code(), Some(1), "{what}");
    let last = l
        .err
        .lines()
        .rfind(|x| x.starts_with("sperli: "))
        .unwrap_or("");
    assert!(
        last.starts_with("sperli: rank 1 on localhost failed"),
        "{what}"
    );
    assert!(
        last.contains("the job was aborted by rank 1: reason 2 (application abort), code 42: example abort by rank 1"),
        "{what}"
    );
}
