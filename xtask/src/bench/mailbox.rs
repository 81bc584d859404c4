//! The mailbox rows (docs/mailbox.md): one `sperli-mailbox-client
//! bench` program per run, which measures in one go
//!
//! - a bare futex round trip between two processes on a mailbox file, and a
//!   loopback TCP request/reply between two processes (the command-socket
//!   design the mailbox replaces);
//! - an empty PING through the mailbox of a warm job of 1 rank (the lane
//!   alone) and of 4 ranks (127.0.0.1-4: the lane, the envelope bcast and
//!   the status gather over TLS);
//! - a small `sum` task at 4 ranks, GROUP task throughput at 1 KiB and
//!   1 MiB payloads (`sum`: payload bcast to every rank, an allreduce,
//!   four replies);
//! - the wall time of a new `sperli run -n 4` per task (`sperli-mailbox-server
//!   --oneshot`: join, the same `sum` by allreduce, BYE), the alternative a
//!   user has today.

use std::fmt::Write;

use super::{group, record, run_retrying, Options, Programs, Samples};

/// The group of the mailbox figures.
pub const GROUP: &str = "mailbox";

/// Runs the mailbox benchmark once and files its figures.
pub(super) fn job(p: &Programs, opts: &Options, samples: &mut Samples) -> Result<(), String> {
    let dir = p
        .sperli
        .parent()
        .ok_or("the sperli binary has no directory")?;
    let mut argv: Vec<String> = vec![
        dir.join("sperli-mailbox-client").display().to_string(),
        "bench".into(),
        "--sperli".into(),
        p.sperli.display().to_string(),
        "--server".into(),
        dir.join("sperli-mailbox-server").display().to_string(),
        "--name".into(),
        format!("xtask-bench-{}", std::process::id()),
    ];
    if opts.quick {
        argv.push("--quick".into());
    }
    let o = run_retrying("mailbox", &argv, &[], samples)?;
    println!("    mailbox: {:.1} s", o.secs);
    for k in [
        "futex_rtt_us",
        "tcp_rtt_us",
        "ping_rtt_us",
        "mailbox_task_us",
        "task_per_s",
        "new_run_ms",
    ] {
        if !o.results.iter().any(|r| r.0 == k) {
            return Err(format!("mailbox: figure {k} missing"));
        }
    }
    record(samples, GROUP, &o);
    Ok(())
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "n/a (not measured)",
    }
}

/// The "## Mailbox" section of docs/performance.md.
pub(super) fn section(o: &mut String, s: &Samples) {
    let g = |name: &str, size: u64| s.get(GROUP, name, size);
    let med = |name: &str, size: u64| g(name, size).map(|x| x.median);
    let cell = |name: &str, size: u64| super::report::cell(g(name, size));
    let _ = writeln!(o, "## Mailbox (warm job)\n");
    let _ = writeln!(
        o,
        "`sperli-mailbox-client bench` (docs/mailbox.md): a client submits through the \
         shared-memory mailbox of a warm job (`sperli run --mailbox`, ranks on \
         127.0.0.1-4, `sperli-mailbox-server`). Round trips are medians over the \
         run's requests (after 10 warm-up requests); the table shows the median \
         (min..max) of the runs. Baselines from the same run: a bare futex round \
         trip between two processes on a mailbox file, a loopback TCP request/reply \
         of 8 bytes between two processes (TCP_NODELAY; the command socket the \
         mailbox replaces), the barrier of the collective benchmark, and a new \
         `sperli run -n 4` per task (join, one allreduce, BYE; wall time of the \
         launcher).\n"
    );
    let _ = writeln!(o, "| figure | median (min..max) | goal | verdict |");
    let _ = writeln!(o, "|---|---|---|---|");
    let ping1 = med("ping_rtt_us", 1);
    let ping4 = med("ping_rtt_us", 4);
    let tcp = med("tcp_rtt_us", 0);
    let barrier4 = s
        .get(&group("sperli", "coll", 4), "barrier", 0)
        .map(|x| x.median);
    let _ = writeln!(
        o,
        "| bare futex round trip, two processes (µs) | {} | the floor of the lane | - |",
        cell("futex_rtt_us", 0)
    );
    let _ = writeln!(
        o,
        "| loopback TCP request/reply, two processes (µs) | {} | baseline | - |",
        cell("tcp_rtt_us", 0)
    );
    let _ = writeln!(
        o,
        "| PING through the mailbox, 1 rank: the lane alone (µs) | {} | <= the TCP request/reply{} | {} |",
        cell("ping_rtt_us", 1),
        ratio_text(ping1, tcp),
        verdict(ping1.zip(tcp).map(|(a, b)| a <= b))
    );
    let budget4 = ping1.zip(barrier4).map(|(p, b)| p + 2.0 * b + 100.0);
    let _ = writeln!(
        o,
        "| PING through the mailbox, 4 ranks (µs) | {} | <= lane + 2 x barrier at 4 ranks + 100 µs{} | {} |",
        cell("ping_rtt_us", 4),
        budget4.map_or(String::new(), |b| format!(" = {b:.0} µs")),
        verdict(ping4.zip(budget4).map(|(a, b)| a <= b))
    );
    let task = med("mailbox_task_us", 4);
    let new_run = med("new_run_ms", 4);
    let _ = writeln!(
        o,
        "| `sum` of 1000 u64 through the mailbox, 4 ranks (µs) | {} | - | - |",
        cell("mailbox_task_us", 4)
    );
    let _ = writeln!(
        o,
        "| a new `sperli run -n 4` for the same task (ms) | {} | the mailbox task >= 100 x cheaper{} | {} |",
        cell("new_run_ms", 4),
        match task.zip(new_run) {
            Some((t, r)) => format!(": {:.0} x", r * 1e3 / t),
            None => String::new(),
        },
        verdict(task.zip(new_run).map(|(t, r)| r * 1e3 / t >= 100.0))
    );
    for (size, goal) in [(1024u64, 1000.0), (1 << 20, 100.0)] {
        let name = if size == 1024 { "1 KiB" } else { "1 MiB" };
        let _ = writeln!(
            o,
            "| GROUP task throughput, {name} payload (tasks/s; payload MB/s) | {}; {} | >= {goal:.0} tasks/s | {} |",
            cell("task_per_s", size),
            cell("task_mb_s", size),
            verdict(med("task_per_s", size).map(|t| t >= goal))
        );
    }
    o.push('\n');
}

fn ratio_text(a: Option<f64>, b: Option<f64>) -> String {
    match a.zip(b) {
        Some((a, b)) => format!(": {:.2} x", a / b),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_judges_each_goal() {
        let mut s = Samples::default();
        for (k, size, v) in [
            ("futex_rtt_us", 0, 20.0),
            ("tcp_rtt_us", 0, 60.0),
            ("ping_rtt_us", 1, 40.0),
            ("ping_rtt_us", 4, 900.0),
            ("mailbox_task_us", 4, 500.0),
            ("new_run_ms", 4, 110.0),
            ("task_per_s", 1024, 1500.0),
            ("task_mb_s", 1024, 1.5),
            ("task_per_s", 1 << 20, 50.0),
            ("task_mb_s", 1 << 20, 52.0),
        ] {
            s.add(GROUP, k, size, v);
        }
        s.add(&group("sperli", "coll", 4), "barrier", 0, 200.0);
        let mut o = String::new();
        section(&mut o, &s);
        let row = |needle: &str| o.lines().find(|l| l.contains(needle)).unwrap().to_string();
        assert!(row("1 rank: the lane").ends_with("| **met** |"), "{o}");
        // 40 + 2 x 200 + 100 = 540 < 900.
        assert!(
            row("PING through the mailbox, 4 ranks").contains("= 540 µs"),
            "{o}"
        );
        assert!(row("PING through the mailbox, 4 ranks").ends_with("| **not met** |"));
        assert!(row("| a new `sperli run").contains(": 220 x"), "{o}");
        assert!(row("1 KiB payload").ends_with("| **met** |"));
        assert!(row("1 MiB payload").ends_with("| **not met** |"));
    }
}
