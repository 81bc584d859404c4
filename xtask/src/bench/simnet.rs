//! The simulated-cluster rows of `cargo xtask bench` (`--simnet` runs
//! only these): `scripts/simnet.sh` makes one network namespace per node
//! (node i at 10.231.0.(i+1), a veth pair to a bridge, every link limited
//! to 1 Gbit/s by tbf in both directions), and the collectives and
//! pipelined jobs run across the nodes through the script's remote shell:
//! SPERLI with `sperli run --rsh`, OpenMPI with `mpirun --mca
//! plm_rsh_agent`, each next to the other in the same run, every row with
//! its link bound. A two-node ping-pong of the same run gives the stream
//! rate the bounds use.
//!
//! Needs root (namespaces, tc) and `ip`/`tc`; elsewhere the section says
//! why it was skipped. The namespaces exist only while the jobs run: a
//! cleaner process (its own process group, so a Ctrl-C of the bench does
//! not reach it) waits for the end of a pipe only this process holds and
//! then runs `simnet.sh down`, so they go however the bench ends (an
//! error, a panic, a signal, SIGKILL).

use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use super::link_bound::{bound_bytes, bound_cell, goal_cell, nearest};
use super::pipelined::PIPE_SIZES;
use super::programs::{is_root, on_path};
use super::report::{ratio_cell, size_name, time_cell, COLL_SIZES};
use super::{group, record, run_retrying, sperli_argv, Options, Programs, Samples, Stat, MPI_ENV};

const MIB: u64 = 1 << 20;
/// Node counts of the simulated cluster's rows.
pub const SIMNET_NODES: [u32; 2] = [4, 8];
/// Every link's rate, as `tc` spells it.
pub const RATE: &str = "1gbit";
/// The collectives rows (`sperli-bench rank coll`), as on loopback.
const COLL_OPS: [&str; 5] = ["bcast", "reduce", "allreduce", "gather", "scatter"];
/// From this size on a row's goal is its link bound (and OpenMPI).
const LARGE: u64 = MIB;
/// A large row is met within this factor of its link bound.
const BOUND_GOAL: f64 = 1.1;
/// "No slower than OpenMPI" allows the spread of rows that both sides run
/// at the link bound (in trial runs the two medians differed by up to
/// 0.4 % there, either way).
const NOISE: f64 = 1.02;
/// The stream sizes of the ping-pong (`sperli_bw`), the bounds' rates.
const BW_SIZES: [u64; 3] = [MIB, 16 * MIB, 64 * MIB];

/// Why the simulated cluster cannot be made here, if it cannot.
fn unavailable() -> Option<String> {
    if !is_root() {
        return Some("it needs root (network namespaces and tc)".into());
    }
    for tool in ["ip", "tc"] {
        if on_path(tool).is_none() && !Path::new("/usr/sbin").join(tool).is_file() {
            return Some(format!("`{tool}` is not installed (iproute2)"));
        }
    }
    None
}

/// The addresses of the first `n` nodes.
fn hosts(n: u32) -> String {
    (1..=n)
        .map(|i| format!("10.231.0.{i}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The namespaces of one run, removed when this is dropped or when the
/// bench process ends in any other way (see the module's text).
struct Cluster {
    script: PathBuf,
    /// The write end of the cleaner's pipe: closed on drop (or by the
    /// kernel when this process dies), which starts `simnet.sh down`.
    pipe: Option<ChildStdin>,
    cleaner: Child,
}

impl Cluster {
    fn up(script: &Path, nodes: u32) -> Result<Cluster, String> {
        let sh = script.display().to_string();
        let mut cleaner = Command::new("sh")
            .arg("-c")
            .arg(r#"cat >/dev/null; exec bash "$0" down >/dev/null"#)
            .arg(&sh)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("simnet: cannot start the cleaner: {e}"))?;
        let pipe = cleaner.stdin.take();
        let cluster = Cluster {
            script: script.to_path_buf(),
            pipe,
            cleaner,
        };
        // Leftovers of a run that ended before its cleaner could act.
        cluster.script_run(&["down"])?;
        cluster.script_run(&["up", &nodes.to_string(), RATE])?;
        Ok(cluster)
    }

    fn script_run(&self, args: &[&str]) -> Result<(), String> {
        let out = Command::new("bash")
            .arg(&self.script)
            .args(args)
            .output()
            .map_err(|e| format!("simnet: cannot run {}: {e}", self.script.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "simnet {}: {} ({})",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim(),
                out.status
            ))
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut p) = self.pipe.take() {
            let _ = p.flush();
        }
        let _ = self.cleaner.wait();
    }
}

/// `sperli run --rsh "bash simnet.sh exec {host}"` of `sperli-bench rank
/// MODE` on the first `n` nodes.
fn sperli_job(p: &Programs, script: &Path, n: u32, mode: &str, quick: bool) -> Vec<String> {
    let rsh = vec![
        "--rsh".to_string(),
        format!("bash {} exec {{host}}", script.display()),
    ];
    let mut a = vec!["rank", mode];
    if quick {
        a.push("--quick");
    }
    sperli_argv(p, n, Some(hosts(n)), &rsh, &a)
}

/// `mpirun` of `sperli_mpi_bench MODE` on the first `n` nodes, its daemons
/// started through the script's remote shell. `mpi_yield_when_idle`: with
/// one slot per host, OpenMPI thinks no node is oversubscribed and its
/// ranks busy-poll; on this 2-core machine 4 or 8 spinning ranks then take
/// the cores from each other for whole scheduler slices (8 B allreduce at
/// 4 nodes: 7.2 ms spinning, 64 µs yielding). On loopback the bench's
/// `--oversubscribe` sets the same. `rtc_hwloc_vmhole none`: each daemon
/// (`orted`, started here, unlike on loopback) would map the hardware
/// topology into a hole of its address space for its ranks; in one CI run
/// that write segfaulted in hwloc (`hwloc_shmem_topology_write`) twice in a
/// row, so the daemons did not start. Without it each rank reads the
/// topology itself.
fn mpi_job(
    mpirun: &Path,
    prog: &Path,
    script: &Path,
    n: u32,
    mode: &str,
    quick: bool,
) -> Vec<String> {
    let mut v: Vec<String> = vec![mpirun.display().to_string(), "--allow-run-as-root".into()];
    let agent = format!("bash {} exec", script.display());
    for a in [
        "--mca",
        "plm_rsh_agent",
        agent.as_str(),
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "btl_tcp_if_include",
        "10.231.0.0/24",
        "--mca",
        "oob_tcp_if_include",
        "simbr0,eth0",
        "--mca",
        "mpi_yield_when_idle",
        "1",
        "--mca",
        "rtc_hwloc_vmhole",
        "none",
        "-H",
    ] {
        v.push(a.into());
    }
    v.push(hosts(n));
    v.push("-n".into());
    v.push(n.to_string());
    v.push(prog.display().to_string());
    v.push(mode.into());
    if quick {
        v.push("--quick".into());
    }
    v
}

/// Runs the simulated cluster's jobs of run number `run` and files their
/// figures under `simnet_sperli.MODE.N` and `simnet_mpi.MODE.N`, or files
/// why they were skipped (`info["simnet_skipped"]`).
pub(super) fn jobs(
    p: &Programs,
    opts: &Options,
    run: usize,
    samples: &mut Samples,
) -> Result<(), String> {
    if let Some(why) = unavailable() {
        samples.info.insert("simnet_skipped".into(), why);
        return Ok(());
    }
    let script = crate::workspace_root().join("scripts/simnet.sh");
    if script.display().to_string().contains(char::is_whitespace) {
        return Err(format!(
            "simnet: the remote-shell templates split at blanks, and {} has one",
            script.display()
        ));
    }
    let max = SIMNET_NODES.iter().copied().max().unwrap_or(2);
    if opts.quick && run > 0 && !opts.simnet_only {
        return Ok(()); // a smoke run measures the cluster once
    }
    let _cluster = match Cluster::up(&script, max) {
        Ok(c) => c,
        Err(why) => {
            // e.g. a container without CAP_NET_ADMIN: root, yet no namespaces
            samples.info.insert("simnet_skipped".into(), why);
            return Ok(());
        }
    };
    let mut plan: Vec<(u32, &str)> = vec![(2, "pingpong")];
    for n in SIMNET_NODES {
        plan.push((n, "coll"));
        plan.push((n, "pipe"));
    }
    for (n, mode) in plan {
        let mut sides = [true, false]; // SPERLI first in even runs
        if run % 2 == 1 {
            sides.reverse();
        }
        for sperli in sides {
            let (label, grp, argv, env): (String, String, Vec<String>, &[(&str, &str)]) = if sperli
            {
                (
                    format!("simnet sperli {mode} n={n}"),
                    group("simnet_sperli", mode, n),
                    sperli_job(p, &script, n, mode, opts.quick),
                    &[],
                )
            } else {
                let Ok((mpirun, prog)) = &p.mpi else { continue };
                (
                    format!("simnet mpi {mode} n={n}"),
                    group("simnet_mpi", mode, n),
                    mpi_job(mpirun, prog, &script, n, mode, opts.quick),
                    &MPI_ENV,
                )
            };
            let o = run_simnet_job(&label, &argv, env, samples)?;
            println!("    {label}: {:.1} s", o.secs);
            record(samples, &grp, &o);
        }
    }
    Ok(())
}

/// [`run_retrying`], and up to twice more when OpenMPI's daemons failed to
/// start: in one of the first trial runs the daemons on the namespaces,
/// which share the host name and /tmp, failed in `orte_session_dir`
/// (before any rank ran); counted in `samples.retries`.
fn run_simnet_job(
    label: &str,
    argv: &[String],
    env: &[(&str, &str)],
    samples: &mut Samples,
) -> Result<super::programs::Output, String> {
    let mut left = 2;
    loop {
        match run_retrying(label, argv, env, samples) {
            Err(e)
                if left > 0
                    && (e.contains("orte_init failed") || e.contains("ORTE was unable")) =>
            {
                left -= 1;
                samples.retries.push(label.to_string());
                println!("    {label}: OpenMPI's daemons did not start; starting the job again");
            }
            r => return r,
        }
    }
}

/// The stream rate (bytes/µs) of the measured ping-pong size nearest to
/// `bytes` (on a log scale).
fn rate_near(s: &Samples, bytes: f64) -> Option<(u64, f64)> {
    let grp = group("simnet_sperli", "pingpong", 2);
    nearest(&BW_SIZES, bytes, |b| {
        Some(s.get(&grp, "sperli_bw", b)?.median * 1e3)
    })
}

/// The link bound of a row in µs, if the rate was measured.
fn bound_us(s: &Samples, op: &str, n: u32, bytes: u64) -> Option<f64> {
    let b = bound_bytes(op, n, bytes);
    rate_near(s, b).map(|(_, rate)| b / rate)
}

/// A row's goal: from 1 MiB on, within 1.1 x its link bound and no slower
/// than OpenMPI; below, no slower than OpenMPI.
fn verdict(bytes: u64, sp: Option<Stat>, mpi: Option<Stat>, bound: Option<f64>) -> Option<bool> {
    let sp = sp?.median;
    let vs_mpi = sp <= NOISE * mpi?.median;
    if bytes < LARGE {
        return Some(vs_mpi);
    }
    Some(vs_mpi && sp <= BOUND_GOAL * bound?)
}

/// One table: `rows` of (operation, size, SPERLI figure name, OpenMPI
/// figure name) at `n` nodes; returns the rows not met.
fn table(
    o: &mut String,
    s: &Samples,
    mode: &str,
    n: u32,
    rows: &[(&str, u64, String, String)],
) -> Vec<String> {
    let sp = group("simnet_sperli", mode, n);
    let mp = group("simnet_mpi", mode, n);
    let _ = writeln!(
        o,
        "| operation | size per rank | SPERLI | OpenMPI (TCP) | link bound | SPERLI / OpenMPI | SPERLI / bound | goal |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
    let mut missed = Vec::new();
    for (op, bytes, sname, mname) in rows {
        let a = s.get(&sp, sname, *bytes);
        let m = s.get(&mp, mname, *bytes);
        let b = bound_us(s, op, n, *bytes);
        let v = verdict(*bytes, a, m, b);
        if v == Some(false) {
            missed.push(format!("{op} {} at {n} nodes ({mode})", size_name(*bytes)));
        }
        let _ = writeln!(
            o,
            "| {op} | {} | {} | {} | {} | {} | {} | {} |",
            size_name(*bytes),
            time_cell(a),
            time_cell(m),
            bound_cell(b),
            ratio_cell(Some(a.zip(m).map(|(a, m)| a.median / m.median)).flatten()),
            if *bytes < LARGE {
                "-".to_string() // latency, not the link, bounds these
            } else {
                ratio_cell(a.zip(b).map(|(a, b)| a.median / b))
            },
            goal_cell(v)
        );
    }
    o.push('\n');
    missed
}

/// The report's section.
pub fn section(s: &Samples, opts: &Options) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Simulated cluster (1 Gbit/s links)\n");
    if let Some(why) = s.info.get("simnet_skipped") {
        let _ = writeln!(
            o,
            "Skipped in this run: {why}. Run `cargo xtask bench --simnet` as root on a \
             machine with iproute2 for this section.\n"
        );
        return o;
    }
    let _ = writeln!(
        o,
        "`scripts/simnet.sh up 8 {RATE}` makes one network namespace per node, node i \
         at 10.231.0.(i+1), each on a veth pair to a bridge and each link limited by \
         tbf to 1 Gbit/s in both directions; every rank runs in its node's namespace, \
         started through `scripts/simnet.sh exec` as its remote shell (`sperli run -H \
         10.231.0.1,... --rsh 'bash scripts/simnet.sh exec {{host}}'`; `mpirun --mca \
         plm_rsh_agent 'bash scripts/simnet.sh exec' --mca btl tcp,self --mca \
         btl_tcp_if_include 10.231.0.0/24 --mca mpi_yield_when_idle 1 --mca \
         rtc_hwloc_vmhole none -H ...`; the last keeps each daemon from mapping the \
         hardware topology into its address space, which segfaulted in one CI run), and the \
         namespaces are removed when the jobs are done, however the bench ends. Here \
         the link, not the 2 CPUs, bounds the large rows, as on a real cluster. \
         `mpi_yield_when_idle`: with one slot per host OpenMPI counts no node as \
         oversubscribed and its ranks busy-poll, so 4 or 8 spinning ranks take the 2 \
         cores from each other for whole scheduler slices (8 B allreduce at 4 nodes: \
         7.2 ms spinning against 64 µs yielding in a trial run); on loopback the \
         bench's `--oversubscribe` sets the same.\n"
    );
    let grp = group("simnet_sperli", "pingpong", 2);
    let rates: Vec<String> = BW_SIZES
        .iter()
        .filter_map(|&b| {
            let st = s.get(&grp, "sperli_bw", b)?;
            Some(format!("{} {:.0} MB/s", size_name(b), st.median * 1e3))
        })
        .collect();
    let _ = writeln!(
        o,
        "**Link bound**: the bytes the busiest rank must send or receive whatever the \
         algorithm (bcast and reduce: s; allreduce: 2(n-1)/n s; gather and scatter: \
         (n-1) s, for s bytes per rank at n ranks), at the TLS stream rate of SPERLI's \
         ping-pong between two nodes in the same run at the nearest size ({}). \
         **Goal**: a row from 1 MiB up is met when it is within {BOUND_GOAL} x its \
         link bound and no slower than OpenMPI; a smaller row when it is no slower \
         than OpenMPI (no slower: at most {NOISE} x, the spread of rows both sides \
         run at the link bound). One call per row as on loopback (SPERLI's gather and \
         scatter of 16 MiB: two v1 calls); bits 1 and 7 are negotiated (the hosts \
         are not in 127.0.0.0/8, protocol §20.1): allreduce from 64 KiB runs the \
         owner fold of protocol §20, reduce and bcast from 64 KiB a chain in 8 KiB \
         chunks, where the loopback tables run the star below 256 KiB and the \
         chain above. {} run(s).\n",
        if rates.is_empty() {
            "not measured".to_string()
        } else {
            rates.join(", ")
        },
        opts.runs
    );
    let mut missed = Vec::new();
    for n in SIMNET_NODES {
        let _ = writeln!(o, "### Collectives, {n} nodes\n");
        let rows: Vec<(&str, u64, String, String)> = COLL_SIZES
            .iter()
            .flat_map(|&b| {
                COLL_OPS
                    .iter()
                    .map(move |&op| (op, b, op.to_string(), op.to_string()))
            })
            .collect();
        missed.extend(table(&mut o, s, "coll", n, &rows));
        let _ = writeln!(o, "### Pipelined allreduce and bcast, {n} nodes\n");
        let rows: Vec<(&str, u64, String, String)> = ["allreduce", "bcast"]
            .iter()
            .flat_map(|&op| {
                PIPE_SIZES
                    .iter()
                    .map(move |&b| (op, b, format!("pipe_{op}"), format!("mpi_{op}")))
            })
            .collect();
        missed.extend(table(&mut o, s, "pipe", n, &rows));
    }
    if missed.is_empty() {
        let _ = writeln!(o, "Every row with figures meets its goal.\n");
    } else {
        let _ = writeln!(
            o,
            "Rows not met ({}): {}.\n",
            missed.len(),
            missed.join(", ")
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_row_needs_both_the_bound_and_openmpi() {
        let st = |v: f64| {
            Some(Stat {
                median: v,
                min: v,
                max: v,
                n: 1,
            })
        };
        assert_eq!(verdict(MIB, st(105.0), st(200.0), Some(100.0)), Some(true));
        assert_eq!(verdict(MIB, st(120.0), st(200.0), Some(100.0)), Some(false));
        assert_eq!(verdict(MIB, st(105.0), st(100.0), Some(100.0)), Some(false));
        assert_eq!(verdict(MIB, st(101.0), st(100.0), Some(100.0)), Some(true));
        assert_eq!(verdict(8, st(105.0), st(200.0), None), Some(true));
        assert_eq!(verdict(8, st(205.0), st(200.0), None), Some(false));
        assert_eq!(verdict(MIB, st(105.0), None, Some(100.0)), None);
    }

    #[test]
    fn hosts_are_the_simnet_addresses() {
        assert_eq!(hosts(3), "10.231.0.1,10.231.0.2,10.231.0.3");
    }
}
