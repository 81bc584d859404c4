//! Slurm, a real one (docs/launcher.md, "Slurm"): a three-node Slurm cluster on this
//! machine (nodes n1-n3 on 127.0.0.2-4, `scripts/slurm/cluster.sh`); the
//! example allreduce job through `salloc`, exit codes back through srun,
//! and a SIGKILLed launcher ending its steps.
//!
//! `#[ignore]`d: `SPERLI_SLURM_TESTS=1 cargo xtask test` runs it (`.ci/run`
//! sets it and installs munge, slurmctld, slurmd and slurm-client; it
//! needs root), as does `cargo test -p sperli-launch -- --ignored slurm_`.
//! A cluster that does not come up fails the test with the daemons' logs.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::procs::{job, kill, marker, wait_none_left, Launched};

/// A running cluster, stopped when dropped.
struct Cluster {
    dir: PathBuf,
    conf: String,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm/cluster.sh")
}

impl Cluster {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("sperli-slurm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(&dir)
            .output()
            .expect("run scripts/slurm/cluster.sh");
        assert!(
            out.status.success(),
            "the Slurm cluster did not start (scripts/slurm/cluster.sh start):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Self { dir, conf }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `salloc ARGS` with the cluster's configuration.
fn salloc(c: &Cluster, args: &[&str], mark: &str) -> Launched {
    Launched::command("salloc", args, mark, &[("SLURM_CONF", c.conf.as_str())])
}

/// The steps of the cluster's jobs that run a rank (`squeue -s`).
fn rank_steps(c: &Cluster) -> Vec<String> {
    let out = Command::new("squeue")
        .args(["-s", "-h", "-o", "%i %j"])
        .env("SLURM_CONF", &c.conf)
        .output()
        .expect("squeue");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("sperli-rank-"))
        .map(str::to_owned)
        .collect()
}

/// The rank steps Slurm still shows once they are gone from its view, or
/// `limit` passed. slurmctld records a step's end on its own time and
/// tells no one, so its view is read again every 20 ms: the one place in
/// the tests that waits on a state no event announces.
fn steps_gone(c: &Cluster, limit: Duration) -> Vec<String> {
    let t = Instant::now();
    loop {
        let steps = rank_steps(c);
        if steps.is_empty() || t.elapsed() >= limit {
            return steps;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs root and munge, slurmctld, slurmd, slurm-client: SPERLI_SLURM_TESTS=1 cargo xtask test (.ci/run)"]
fn slurm_allreduce_exit_codes_and_a_killed_launcher() {
    let _cpu = crate::shared_cpu();
    let t0 = Instant::now();
    let cluster = Cluster::start();
    let up = t0.elapsed();

    // 1. The example allreduce, 5 ranks on 3 nodes: the allocation's slots
    //    (3 on n1, 1 each on n2 and n3) fill n1 first.
    let t = Instant::now();
    let mark = marker("slurm-allreduce");
    let script = "echo \"where $SPERLI_RANK $SLURMD_NODENAME $LOCAL_WORLD_SIZE\"; exec EXAMPLE allreduce 1000";
    let mut l = salloc(
        &cluster,
        &[
            "-N3",
            "-n5",
            "SPERLI",
            "run",
            "--timeout",
            "60",
            "--",
            "sh",
            "-c",
            script,
        ],
        &mark,
    );
    let status = l.finish(Duration::from_secs(120));
    let what = format!("{}\n{}", l.out, l.err);
    assert!(status.success(), "{what}");
    assert!(
        l.out
            .contains("[0] allreduce of 1000 f64 over 5 ranks: correct"),
        "{what}"
    );
    for (r, node, local) in [
        (0, "n1", 3),
        (1, "n1", 3),
        (2, "n1", 3),
        (3, "n2", 1),
        (4, "n3", 1),
    ] {
        assert!(
            l.out.contains(&format!("[{r}] where {r} {node} {local}")),
            "{what}"
        );
    }
    let allreduce = t.elapsed();

    // 2. Exit codes come back through srun: rank 1 exits 3.
    let t = Instant::now();
    let mark = marker("slurm-exit");
    let mut l = salloc(
        &cluster,
        &[
            "-N3",
            "-n3",
            "SPERLI",
            "run",
            "--silence-ms",
            "2000",
            "--timeout",
            "60",
            "--",
            "EXAMPLE",
            "exit",
            "3",
            "1",
        ],
        &mark,
    );
    let status = l.finish(Duration::from_secs(120));
    let what = format!("{}\n{}", l.out, l.err);
    assert_eq!(status.code(), Some(3), "{what}");
    assert!(
        l.err
            .contains("sperli: rank 1 on 127.0.0.3 failed (exit code 3)"),
        "{what}"
    );
    let exit_codes = t.elapsed();

    // 3. SIGKILL of the launcher inside the allocation ends its steps.
    let t = Instant::now();
    let mark = marker("slurm-kill");
    let mut l = salloc(
        &cluster,
        &[
            "-N3",
            "-n3",
            "SPERLI",
            "run",
            "--silence-ms",
            "2000",
            "--",
            "EXAMPLE",
            "sleep",
            "60000",
        ],
        &mark,
    );
    l.wait_joined(3);
    assert_eq!(rank_steps(&cluster).len(), 3, "{:?}", rank_steps(&cluster));
    let launcher = job(&mark)
        .into_iter()
        .find(|p| {
            std::fs::read_link(format!("/proc/{}/exe", p.pid)).is_ok_and(|e| e.ends_with("sperli"))
        })
        .expect("the launcher under salloc");
    kill("KILL", launcher.pid);
    let killed = Instant::now();
    let left = wait_none_left(&mark, Duration::from_secs(15));
    let procs_gone = killed.elapsed();
    // Slurm shows a step until its end is recorded.
    let steps = steps_gone(
        &cluster,
        Duration::from_secs(15).saturating_sub(killed.elapsed()),
    );
    // salloc ends with its command (Slurm 22.05 exits 0 for a command
    // killed by a signal, so its status is not checked).
    let _ = l.finish(Duration::from_secs(30));
    assert!(
        left.is_ok(),
        "processes left: {left:?}\n{}\n{}",
        l.out,
        l.err
    );
    assert!(steps.is_empty(), "steps left: {steps:?}");
    let kill_took = killed.elapsed();
    let killed_job = t.elapsed();

    let t = Instant::now();
    drop(cluster);
    let down = t.elapsed();
    println!(
        "slurm test: cluster up {up:?}, allreduce {allreduce:?}, exit codes {exit_codes:?}, \
         killed launcher {killed_job:?} (its processes gone {procs_gone:?}, its steps {kill_took:?} \
         after the SIGKILL), \
         cluster down {down:?}, total {:?}",
        t0.elapsed()
    );
}
