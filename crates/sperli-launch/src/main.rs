//! `sperli`: starts a SPERLI job on a host list or a Slurm allocation
//! (docs/launcher.md).
//!
//! ```text
//! sperli run -n N [-H h1[:port],h2,... | --hostfile FILE] [--map-by slot|node]
//!            [--restart-max K] [--recover inplace|shrink|restart]
//!            [--deny-hosts FILE] [--silence-ms MS] [--timeout S]
//!            [--output-dir DIR] [--raw-output] [--rsh TEMPLATE] [--rsh-local]
//!            [--no-slurm] [--no-stdin] -- PROGRAM [ARGS...]
//! ```
//!
//! mpirun's `-np N` is taken as `-n N`. Inside a Slurm allocation without
//! `-H`/`--hostfile`, hosts and `-n` come from the allocation and every
//! rank is one `srun` job step. Each rank gets its job description as one
//! hex line on stdin (never an argument, an environment variable, a file
//! or a log), and `SPERLI_RANK`, `SPERLI_SIZE`, `SPERLI_LOCAL_RANK`,
//! `SPERLI_LOCAL_SIZE` (and `RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `LOCAL_WORLD_SIZE`) in its environment. After its description line,
//! rank 0's stdin carries the launcher's stdin (`--no-stdin`: nothing).

// The argument types' doc comments are clap's `--help` text, written for a
// terminal (`[N]`, `DIR/rank-<r>`), not rustdoc markup.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sperli_launch::{
    at_end, hosts_of, is_local, omp_threads, parse_deny_file, place, run_job_recovering,
    CheckpointTree, HostChoice, HostSpec, Hosts, JobIdentity, MapBy, Options, Outcome, RankLaunch,
    RecoverMode, RecoveryPlan, StdinFeed, Via, DEFAULT_RSH, EXIT_USAGE, SETUP_MARGIN,
};
use sperli_wire::env;
use sperli_wire::job_description::HostEntry;
use sperli_wire::refused_hosts::{RefusedHosts, ENV_VAR};

/// `sperli --version`.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (SPERLI protocol v1)");

#[derive(Parser)]
#[command(
    name = "sperli",
    version = VERSION,
    about = "Run SPERLI jobs: MPI semantics over mutually authenticated TLS 1.3"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start PROGRAM as N ranks.
    Run(RunArgs),
    /// Run a 4-rank example job on this machine and explain what happened.
    Demo,
    /// Run the example rank program `sperli-example` found next to this
    /// binary (hello | allreduce [N] | exit CODE RANK | ...).
    #[command(hide = true)]
    Example {
        /// The mode and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Send one request to the mailbox of a job started with `run --mailbox NAME`.
    Submit(sperli_launch::mailbox_cli::SubmitArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Number of ranks (also `-np N`, as mpirun). Inside a Slurm
    /// allocation the default is SLURM_NTASKS.
    #[arg(short = 'n', long = "np", value_parser = clap::value_parser!(u32).range(1..=i64::from(sperli_wire::limits::MAX_SIZE)))]
    n: Option<u32>,
    /// Hosts, comma-separated, each `host[:port]` (default: localhost, or
    /// the Slurm allocation's nodes).
    #[arg(short = 'H', long = "hosts", conflicts_with = "hostfile")]
    hosts: Option<String>,
    /// A file with one `host[:port] [slots=N]` per line.
    #[arg(long)]
    hostfile: Option<PathBuf>,
    /// `slot`: fill each host's slots before the next (default, as
    /// mpirun); `node`: one rank per host in turn.
    #[arg(long, default_value = "slot")]
    map_by: MapBy,
    /// Restart the job at most this many times after a failure.
    #[arg(long, default_value_t = 0)]
    restart_max: u32,
    /// What a rank's failure costs (docs/launcher.md, "Recovery"):
    /// `inplace` (the default, but for `--mailbox` jobs: the failed rank
    /// is replaced and every rank rolls back to the last COMMIT in place,
    /// while `--restart-max` allows), `shrink` (the survivors go on without it), `restart`
    /// (every rank is ended and the job starts again; ranks without a
    /// control channel).
    #[arg(long)]
    recover: Option<RecoverMode>,
    /// More refused host names, separated by commas or whitespace (an
    /// unreadable file or an entry that is not a host stops the launcher).
    #[arg(long)]
    deny_hosts: Option<PathBuf>,
    /// The silence limit the ranks use, in milliseconds (at least 1500: a
    /// quiet peer sends a heartbeat every 1000 ms).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1500..))]
    silence_ms: u64,
    /// End the job after this many seconds (at least 1; exit status 124).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: Option<u64>,
    /// Checkpoint directory; rank r uses `DIR/rank-r` (passed as `SPERLI_CHECKPOINT_DIR`).
    #[arg(long)]
    checkpoint_dir: Option<PathBuf>,
    /// Keep the job's identity in FILE (created mode 0600 if missing): a
    /// later run with the same FILE and --checkpoint-dir continues the job
    /// from its last valid COMMIT (docs/launcher.md).
    #[arg(long, value_name = "FILE", requires = "checkpoint_dir")]
    job_key: Option<PathBuf>,
    /// Keep the checkpoints (and the key file) when the job ends normally.
    #[arg(long)]
    keep_checkpoints: bool,
    /// Lifetime of certificates and join tokens, in seconds.
    #[arg(long, default_value_t = 24 * 3600)]
    token_lifetime: u64,
    /// Do not prefix output lines with `[rank]`.
    #[arg(long)]
    raw_output: bool,
    /// Also write each rank's output to DIR/rank-<r>/stdout and stderr.
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// Remote shell for non-local hosts; `{host}` is replaced.
    #[arg(long, default_value = DEFAULT_RSH)]
    rsh: String,
    /// Start ranks on this machine's loopback hosts through --rsh too.
    #[arg(long)]
    rsh_local: bool,
    /// Inside a Slurm allocation, do not use it (hosts from -H, or localhost).
    #[arg(long)]
    no_slurm: bool,
    /// Do not forward this launcher's stdin to rank 0 (as `mpirun --stdin
    /// none`): every rank's stdin ends after its job description.
    #[arg(long)]
    no_stdin: bool,
    #[command(flatten)]
    mailbox: sperli_launch::mailbox_cli::MailboxArgs,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    program: Vec<String>,
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("sperli: {msg}");
    ExitCode::from(EXIT_USAGE as u8)
}

/// mpirun's `-np N` (one dash) as `-n N`, before the program's `--`.
fn mpirun_habits(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut program = false;
    for a in args {
        if !program && a == "--" {
            program = true;
        }
        match a.to_str() {
            Some("-np") if !program => out.push("-n".into()),
            Some(s) if !program && s.starts_with("-np=") => {
                out.push(format!("-n={}", &s[4..]).into())
            }
            _ => out.push(a),
        }
    }
    out
}

fn policy(deny: Option<&PathBuf>) -> Result<RefusedHosts, String> {
    let var = std::env::var(ENV_VAR).ok();
    let file = match deny {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| {
                format!(
                    "cannot read --deny-hosts {}: {e} (refusing to start)",
                    p.display()
                )
            })?;
            Some(parse_deny_file(&text).map_err(|e| format!("--deny-hosts {}: {e}", p.display()))?)
        }
        None => None,
    };
    Ok(RefusedHosts::new(var.as_deref(), file.as_deref()))
}

/// The first port on a remote host given without one.
const DEFAULT_REMOTE_PORT: u16 = 29500;

/// Host entries for every rank, placed by `map_by` over `hosts`; ranks
/// that share a host get consecutive ports from the host's given port, or
/// free ports. Returns the entries and each rank's host index.
fn assign(
    n: u32,
    hosts: &[HostSpec],
    map_by: MapBy,
) -> Result<(Vec<HostEntry>, Vec<usize>), String> {
    let mut next_port: HashMap<usize, u16> = HashMap::new();
    let mut held = Vec::new();
    let placed = place(n, hosts, map_by);
    let entries = placed
        .iter()
        .map(|&h| {
            let spec = &hosts[h];
            let port = match spec.port {
                Some(p) => {
                    let k = next_port.entry(h).or_insert(p);
                    let port = *k;
                    *k = k.checked_add(1).ok_or("port range exhausted")?;
                    port
                }
                None if is_local(&spec.host) => {
                    // Held until every rank has its port: no two the same.
                    let (port, l) = sperli_tls::job_plan::free_port_held(&spec.host)
                        .map_err(|e| e.to_string())?;
                    held.push(l);
                    port
                }
                None => {
                    // A remote host without a port: consecutive ports from
                    // a default, as torchrun's 29500.
                    let k = next_port.entry(h).or_insert(DEFAULT_REMOTE_PORT);
                    let port = *k;
                    *k = k.checked_add(1).ok_or("port range exhausted")?;
                    port
                }
            };
            Ok(HostEntry {
                host: spec.host.clone(),
                port,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((entries, placed))
}

/// Ends the job on SIGINT, SIGTERM and SIGHUP: the signal's number.
fn interrupt_flag() -> Result<Arc<AtomicI32>, String> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let interrupt = Arc::new(AtomicI32::new(0));
    let flag = interrupt.clone();
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| format!("cannot handle signals: {e}"))?;
    std::thread::spawn(move || {
        for s in signals.forever() {
            flag.store(s, Ordering::Relaxed);
        }
    });
    Ok(interrupt)
}

fn run(args: RunArgs) -> ExitCode {
    let policy = match policy(args.deny_hosts.as_ref()) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let Hosts {
        specs: hosts,
        vias,
        allocation_n,
    } = match hosts_of(
        &HostChoice {
            hosts: args.hosts.as_deref(),
            hostfile: args.hostfile.as_deref(),
            no_slurm: args.no_slurm,
            rsh_local: args.rsh_local,
        },
        &policy,
    ) {
        Ok(h) => h,
        Err(e) => return fail(e),
    };
    let Some(n) = args.n.or(allocation_n) else {
        return fail("-n N is required (outside a Slurm allocation)");
    };
    if n == 0 || n > sperli_wire::limits::MAX_SIZE {
        return fail(format!("-n must be 1..=4096, got {n}"));
    }
    let (mut entries, placed) = match assign(n, &hosts, args.map_by) {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    let mut rank_via: Vec<Via> = placed.iter().map(|&h| vias[h].clone()).collect();
    // Hosts the placement left unused: a failed rank may move to one of
    // them on restart (never to a refused host: the list was checked
    // above, and each move is checked again).
    let mut spares: Vec<(HostSpec, Via)> = hosts
        .iter()
        .zip(&vias)
        .enumerate()
        .filter(|(i, _)| !placed.contains(i))
        .map(|(_, (h, v))| (h.clone(), v.clone()))
        .collect();
    let interrupt = match interrupt_flag() {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    let mut opts = Options {
        rsh: args.rsh.clone(),
        raw_output: args.raw_output,
        output_dir: args.output_dir.clone(),
        output_append: false,
        wait_after_failure: Duration::from_millis(args.silence_ms + 2000),
        grace: Duration::from_secs(3),
        timeout: args.timeout.map(Duration::from_secs),
        start_deadline: Duration::from_millis(sperli_wire::limits::SETUP_WINDOW_MS) + SETUP_MARGIN,
        // With --exit-on-stdin-eof the launcher's stdin is the mailbox
        // client's liveness pipe, not input for rank 0.
        stdin: if args.no_stdin || args.mailbox.exit_on_stdin_eof {
            StdinFeed::empty()
        } else {
            StdinFeed::from_launcher_stdin()
        },
    };
    let mailbox = match sperli_launch::mailbox_cli::MailboxJob::prepare(
        &args.mailbox,
        n,
        &entries[0].host,
        args.restart_max,
        &interrupt,
    ) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let lifetime = Duration::from_secs(args.token_lifetime);
    let mut identity = match JobIdentity::open(args.job_key.as_deref()) {
        Ok(i) => i,
        Err(e) => return fail(e),
    };
    let mut plan = match identity.plan(entries.clone(), lifetime) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let tree = (args.checkpoint_dir.as_deref()).map(|d| CheckpointTree::new(d, plan.job_id, n));
    if let Some(dir) = &args.checkpoint_dir {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return fail(format!(
                "cannot create --checkpoint-dir {}: {e}",
                dir.display()
            ));
        }
    }
    loop {
        let incarnation = plan.incarnation;
        opts.output_append = incarnation > 1;
        let mut local_size: HashMap<&str, u32> = HashMap::new();
        for e in &entries {
            *local_size.entry(&e.host).or_insert(0) += 1;
        }
        let mut local_rank: HashMap<&str, u32> = HashMap::new();
        let direct_ranks = rank_via.iter().filter(|v| **v == Via::Direct).count() as u32;
        let omp_set = std::env::var_os(env::OMP_NUM_THREADS).is_some();
        let ranks = (0..n)
            .map(|r| {
                let host = &entries[r as usize].host;
                let lr = local_rank.entry(host).or_insert(0);
                let ls = local_size[host.as_str()];
                // SPERLI's names, and torchrun's for programs written for it.
                let env = vec![
                    (env::RANK.into(), r.to_string()),
                    (env::SIZE.into(), n.to_string()),
                    (env::LOCAL_RANK.into(), lr.to_string()),
                    (env::LOCAL_SIZE.into(), ls.to_string()),
                    (env::SILENCE_MS.into(), args.silence_ms.to_string()),
                    (env::INCARNATION.into(), incarnation.to_string()),
                    (env::TORCH_RANK.into(), r.to_string()),
                    (env::WORLD_SIZE.into(), n.to_string()),
                    (env::TORCH_LOCAL_RANK.into(), lr.to_string()),
                    (env::LOCAL_WORLD_SIZE.into(), ls.to_string()),
                ];
                *lr += 1;
                let mut env = env;
                let via = &rank_via[r as usize];
                env.extend(omp_threads(via, direct_ranks, ls, omp_set));
                env.extend(mailbox.as_ref().and_then(|m| m.env(r)));
                if let Some(dir) = &args.checkpoint_dir {
                    // Each rank gets its own directory (protocol §9.1: "`<dir>`
                    // is the rank's own checkpoint directory"): two ranks on
                    // one host never share one.
                    let own = dir.join(format!("rank-{r}"));
                    env.push((
                        env::CHECKPOINT_DIR.into(),
                        own.to_string_lossy().into_owned(),
                    ));
                }
                let via = rank_via[r as usize].clone();
                RankLaunch {
                    rank: r,
                    host: host.clone(),
                    // Protocol §5.1 step 1: bound by the launcher ahead.
                    port: (via == Via::Direct).then_some(entries[r as usize].port),
                    via,
                    argv: args.program.clone(),
                    env,
                    stdin_line: plan.description(r).to_line(),
                }
            })
            .collect();
        let restarts = identity.restarts(incarnation);
        // A control channel exists only for ranks started directly; one
        // rank without it makes the job run without feature bit 5
        // (protocol §18), so none gets one.
        let asked = args.recover;
        // A warm mailbox group ends TERMINAL on a lost rank (docs/mailbox.md):
        // no recovery unless one is named.
        let default = if mailbox.is_some() {
            RecoverMode::Restart
        } else {
            RecoverMode::default()
        };
        let recover_mode = asked
            .unwrap_or(default)
            .protocol_mode()
            .filter(|_| rank_via.iter().all(|v| *v == Via::Direct));
        // Said only when the user asked for a mode by name.
        let named = asked.is_some_and(|m| m != RecoverMode::Restart);
        if recover_mode.is_none() && named && restarts == 0 {
            eprintln!(
                "sperli: ranks started through a remote shell or srun have no control channel: the job runs as with --recover restart"
            );
        }
        let mut ranks: Vec<RankLaunch> = ranks;
        if let Some(mode) = recover_mode {
            let word = match mode {
                sperli_wire::recovery::Mode::Replace => "inplace",
                sperli_wire::recovery::Mode::Shrink => "shrink",
            };
            for r in &mut ranks {
                r.env.push((env::RECOVER.into(), word.into()));
            }
        }
        let spare_hosts: Vec<String> = spares
            .iter()
            .filter(|(h, v)| *v == Via::Direct && policy.check(&h.host).is_ok())
            .map(|(h, _)| h.host.clone())
            .collect();
        let recovery = recover_mode.map(|mode| RecoveryPlan {
            job: &plan,
            mode,
            replacements: args.restart_max.saturating_sub(restarts),
            spares: &spare_hosts,
        });
        let outcome = run_job_recovering(ranks, &opts, &interrupt, recovery);
        if !matches!(outcome, Outcome::Failed(_)) || restarts >= args.restart_max {
            at_end(
                tree.as_ref(),
                &mut identity,
                matches!(outcome, Outcome::Success),
                args.keep_checkpoints,
            );
        }
        match &outcome {
            Outcome::Success => return ExitCode::SUCCESS,
            Outcome::Failed(blame) if restarts < args.restart_max => {
                let rank = blame.verdict.rank as usize;
                eprintln!(
                    "sperli: {blame}; restarting the job as incarnation {} ({} of {} restarts)",
                    incarnation + 1,
                    restarts + 1,
                    args.restart_max
                );
                if let Some((spare, via)) = (!spares.is_empty()).then(|| spares.remove(0)) {
                    if policy.check(&spare.host).is_ok() {
                        let port = match spare.port {
                            Some(p) => p,
                            None if is_local(&spare.host) => {
                                match sperli_tls::job_plan::free_port(&spare.host) {
                                    Ok(p) => p,
                                    Err(e) => return fail(format!("no free port: {e}")),
                                }
                            }
                            None => DEFAULT_REMOTE_PORT,
                        };
                        eprintln!(
                            "sperli: moving rank {rank} from {} to spare host {}",
                            entries[rank].host, spare.host
                        );
                        entries[rank] = HostEntry {
                            host: spare.host.clone(),
                            port,
                        };
                        rank_via[rank] = via;
                    }
                }
                if let Err(e) = identity.next_incarnation(&mut plan, entries.clone()) {
                    return fail(format!("cannot renew the job for a restart: {e}"));
                }
            }
            Outcome::Failed(blame) => {
                eprintln!("sperli: {blame}; the job failed");
                return ExitCode::from(outcome.exit_code().clamp(1, 255) as u8);
            }
            Outcome::TimedOut => {
                eprintln!("sperli: --timeout passed; every rank was ended");
                return ExitCode::from(outcome.exit_code() as u8);
            }
            Outcome::Interrupted(sig) => {
                eprintln!("sperli: interrupted by signal {sig}; every rank was ended");
                return ExitCode::from(outcome.exit_code().clamp(1, 255) as u8);
            }
            Outcome::SpawnFailed(f) => {
                eprintln!("sperli: {f}");
                return ExitCode::from(outcome.exit_code() as u8);
            }
        }
    }
}

/// `sperli demo`: a real 4-rank job on this machine (ranks on 127.0.0.1,
/// 127.0.0.2, 127.0.0.3 and localhost) over mutually authenticated TLS 1.3,
/// running the example program's `ckpt` mode: an iteration with one
/// allreduce per step and a signed, buddy-replicated checkpoint every 10
/// steps. Rank 2 kills itself with SIGKILL in the first incarnation; the
/// launcher starts a replacement of rank 2 only, the other ranks keep
/// their processes and roll back in place to the last COMMIT (protocol
/// §18.7), and the job ends with the result of an undisturbed run.
fn demo() -> ExitCode {
    let example = match example_program() {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let scratch = std::env::temp_dir().join(format!("sperli-demo-{}", std::process::id()));
    println!("SPERLI demo: starting 4 ranks on this machine (127.0.0.1, 127.0.0.2, 127.0.0.3, localhost).");
    println!(
        "The launcher creates a job CA, one TLS certificate and one signed join token per rank,"
    );
    println!(
        "and hands each rank its job description on stdin. The ranks connect to each other over"
    );
    println!("mutually authenticated TLS 1.3 and iterate 60 steps, one allreduce per step. Every 10 steps");
    println!("they checkpoint: each rank writes its state, sends a copy to its buddy, and rank 0 signs a");
    println!(
        "COMMIT. Before step 35, rank 2 kills itself with SIGKILL: the others notice, the launcher"
    );
    println!("starts a replacement of rank 2 only, and every rank rolls back in place to the last COMMIT:");
    println!("the survivors keep their processes. Output lines are prefixed with [rank].");
    println!();
    let args = RunArgs {
        n: Some(4),
        hosts: Some("127.0.0.1,127.0.0.2,127.0.0.3,localhost".into()),
        hostfile: None,
        map_by: MapBy::Slot,
        restart_max: 1,
        recover: Some(RecoverMode::Inplace),
        deny_hosts: None,
        checkpoint_dir: Some(scratch.clone()),
        job_key: None,
        keep_checkpoints: false,
        silence_ms: 2000,
        timeout: Some(120),
        token_lifetime: 600,
        raw_output: false,
        output_dir: None,
        rsh: DEFAULT_RSH.into(),
        rsh_local: false,
        no_slurm: true,
        no_stdin: true,
        mailbox: Default::default(),
        program: vec![
            example.to_string_lossy().into_owned(),
            "ckpt".into(),
            "60".into(),
            "10".into(),
            "15".into(),
            "35".into(),
            "2".into(),
        ],
    };
    let start = std::time::Instant::now();
    let code = run(args);
    let _ = std::fs::remove_dir_all(&scratch);
    if code == ExitCode::SUCCESS {
        println!();
        println!(
            "Done in {:.2} s: rank 2 was killed and replaced, the job rolled back to the epoch shown above and finished",
            start.elapsed().as_secs_f64()
        );
        println!("with the same result bytes as an undisturbed run; every rank said BYE.");
    }
    code
}

/// The example rank program's file name (crates/sperli-example).
const EXAMPLE_PROGRAM: &str = "sperli-example";

/// `sperli-example` in the directory of this `sperli` binary (where
/// `cargo build` and `cargo install` put both).
fn example_program() -> Result<PathBuf, String> {
    let me = std::env::current_exe()
        .map_err(|e| format!("cannot find the sperli binary itself: {e}"))?;
    let example = me.with_file_name(EXAMPLE_PROGRAM);
    if example.is_file() {
        Ok(example)
    } else {
        Err(format!(
            "{EXAMPLE_PROGRAM} is not next to sperli (no {}): build it with `cargo build -p sperli-example`",
            example.display()
        ))
    }
}

/// `sperli example MODE...`: runs `sperli-example MODE...` in this
/// process's place.
fn example(args: &[String]) -> ExitCode {
    use std::os::unix::process::CommandExt;
    match example_program() {
        Ok(p) => {
            let e = std::process::Command::new(&p).args(args).exec();
            fail(format!("cannot run {}: {e}", p.display()))
        }
        Err(e) => fail(e),
    }
}

fn main() -> ExitCode {
    // Orphans of the ranks (a rank's children whose parent exited) become
    // the launcher's children: it waits for them, so no process of a job
    // outlives it unnoticed.
    sperli_launch::become_subreaper();
    match Cli::parse_from(mpirun_habits(std::env::args_os())).command {
        Cmd::Run(args) => run(args),
        Cmd::Demo => demo(),
        Cmd::Example { args } => example(&args),
        Cmd::Submit(args) => sperli_launch::mailbox_cli::submit(&args),
    }
}
