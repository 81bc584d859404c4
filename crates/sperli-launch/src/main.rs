//! `sperli`: starts a SPERLI job on a host list (issue 6).
//!
//! ```text
//! sperli run -n N [-H h1[:port],h2,... | --hostfile FILE] [--restart-max K]
//!            [--deny-hosts FILE] [--silence-ms MS] [--timeout S] [--raw-output]
//!            [--rsh TEMPLATE] -- PROGRAM [ARGS...]
//! ```
//!
//! Each rank gets its job description as one hex line on stdin (never an
//! argument, an environment variable, a file or a log), and `SPERLI_RANK`,
//! `SPERLI_SIZE`, `SPERLI_LOCAL_RANK` (and `RANK`, `WORLD_SIZE`,
//! `LOCAL_RANK`) in its environment.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sperli_launch::hosts::{parse_host_list, parse_hostfile, place, HostSpec};
use sperli_launch::supervise::{run_job, Options, Outcome, RankLaunch, EXIT_USAGE};
use sperli_tls::job_plan::JobPlan;
use sperli_wire::job_description::HostEntry;
use sperli_wire::refused_hosts::{RefusedHosts, ENV_VAR};

#[derive(Parser)]
#[command(
    name = "sperli",
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
    /// Run an example rank program (hello | allreduce [N] | exit CODE RANK);
    /// `sperli demo` starts ranks this way.
    #[command(hide = true)]
    Example {
        /// The mode and its arguments.
        args: Vec<String>,
    },
    /// Send one request to the mailbox of a job started with `run --mailbox NAME`.
    Submit(sperli_launch::mailbox_cli::SubmitArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Number of ranks.
    #[arg(short = 'n', long = "np")]
    n: u32,
    /// Hosts, comma-separated, each `host[:port]` (default: localhost).
    #[arg(short = 'H', long = "hosts", conflicts_with = "hostfile")]
    hosts: Option<String>,
    /// A file with one `host[:port]` per line.
    #[arg(long)]
    hostfile: Option<PathBuf>,
    /// Restart the job at most this many times after a failure.
    #[arg(long, default_value_t = 0)]
    restart_max: u32,
    /// More refused host names, one per line (an unreadable file stops the launcher).
    #[arg(long)]
    deny_hosts: Option<PathBuf>,
    /// The silence limit the ranks use, in milliseconds (at least 1500: a
    /// quiet peer sends a heartbeat every 1000 ms).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1500..))]
    silence_ms: u64,
    /// End the job after this many seconds (exit status 124).
    #[arg(long)]
    timeout: Option<u64>,
    /// Checkpoint directory; rank r uses `DIR/rank-r` (passed as `SPERLI_CHECKPOINT_DIR`).
    #[arg(long)]
    checkpoint_dir: Option<PathBuf>,
    /// Lifetime of certificates and join tokens, in seconds.
    #[arg(long, default_value_t = 24 * 3600)]
    token_lifetime: u64,
    /// Do not prefix output lines with `[rank]`.
    #[arg(long)]
    raw_output: bool,
    /// Remote shell for non-local hosts; `{host}` is replaced.
    #[arg(long, default_value = "ssh -o BatchMode=yes {host}")]
    rsh: String,
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

fn policy(deny: Option<&PathBuf>) -> Result<RefusedHosts, String> {
    let var = std::env::var(ENV_VAR).ok();
    let file = match deny {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| {
            format!(
                "cannot read --deny-hosts {}: {e} (refusing to start)",
                p.display()
            )
        })?),
        None => None,
    };
    Ok(RefusedHosts::new(var.as_deref(), file.as_deref()))
}

/// Host entries for every rank: round-robin over `hosts`; ranks that share
/// a host get consecutive ports from the host's given port, or free ports.
/// The first port on a remote host given without one.
const DEFAULT_REMOTE_PORT: u16 = 29500;

fn assign(n: u32, hosts: &[HostSpec]) -> Result<Vec<HostEntry>, String> {
    let mut next_port: HashMap<usize, u16> = HashMap::new();
    place(n, hosts.len())
        .into_iter()
        .map(|h| {
            let spec = &hosts[h];
            let port = match spec.port {
                Some(p) => {
                    let k = next_port.entry(h).or_insert(p);
                    let port = *k;
                    *k = k.checked_add(1).ok_or("port range exhausted")?;
                    port
                }
                None if sperli_launch::supervise::is_local(&spec.host) => {
                    sperli_tls::job_plan::free_port(&spec.host).map_err(|e| e.to_string())?
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
        .collect()
}

fn run(args: RunArgs) -> ExitCode {
    if args.n == 0 || args.n > sperli_wire::limits::MAX_SIZE {
        return fail(format!("-n must be 1..=4096, got {}", args.n));
    }
    let policy = match policy(args.deny_hosts.as_ref()) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let hosts = match (&args.hosts, &args.hostfile) {
        (Some(list), _) => parse_host_list(list, &policy),
        (None, Some(file)) => match std::fs::read_to_string(file) {
            Ok(text) => parse_hostfile(&text, &policy),
            Err(e) => return fail(format!("cannot read hostfile {}: {e}", file.display())),
        },
        (None, None) => parse_host_list("localhost", &policy),
    };
    let hosts = match hosts {
        Ok(h) => h,
        Err(e) => return fail(e),
    };
    let mut entries = match assign(args.n, &hosts) {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    // Hosts the round-robin placement left unused: a failed rank may move
    // to one of them on restart (never to a refused host: the list was
    // checked above, and each move is checked again).
    let mut spares: Vec<HostSpec> = hosts.iter().skip(args.n as usize).cloned().collect();
    let interrupt = Arc::new(AtomicI32::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let flag = interrupt.clone();
        let mut signals = match signal_hook::iterator::Signals::new([sig]) {
            Ok(s) => s,
            Err(e) => return fail(format!("cannot handle signals: {e}")),
        };
        std::thread::spawn(move || {
            for s in signals.forever() {
                flag.store(s, Ordering::Relaxed);
            }
        });
    }
    let opts = Options {
        rsh: args.rsh.clone(),
        raw_output: args.raw_output,
        wait_after_failure: Duration::from_millis(args.silence_ms + 2000),
        grace: Duration::from_secs(3),
        timeout: args.timeout.map(Duration::from_secs),
    };
    let mailbox = match sperli_launch::mailbox_cli::MailboxJob::prepare(
        &args.mailbox,
        args.n,
        &entries[0].host,
        args.restart_max,
        &interrupt,
    ) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let lifetime = Duration::from_secs(args.token_lifetime);
    let mut plan = match JobPlan::new(entries.clone(), 1, lifetime) {
        Ok(p) => p,
        Err(e) => return fail(format!("cannot create the job: {e}")),
    };
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
        let mut local_rank: HashMap<&str, u32> = HashMap::new();
        let ranks = (0..args.n)
            .map(|r| {
                let host = &entries[r as usize].host;
                let lr = local_rank.entry(host).or_insert(0);
                let env = vec![
                    ("SPERLI_RANK".into(), r.to_string()),
                    ("SPERLI_SIZE".into(), args.n.to_string()),
                    ("SPERLI_LOCAL_RANK".into(), lr.to_string()),
                    ("SPERLI_SILENCE_MS".into(), args.silence_ms.to_string()),
                    ("SPERLI_INCARNATION".into(), incarnation.to_string()),
                    ("RANK".into(), r.to_string()),
                    ("WORLD_SIZE".into(), args.n.to_string()),
                    ("LOCAL_RANK".into(), lr.to_string()),
                ];
                *lr += 1;
                let mut env = env;
                env.extend(mailbox.as_ref().and_then(|m| m.env(r)));
                if let Some(dir) = &args.checkpoint_dir {
                    // Each rank gets its own directory (layouts §7): two ranks
                    // on one host never share one.
                    let own = dir.join(format!("rank-{r}"));
                    env.push((
                        "SPERLI_CHECKPOINT_DIR".into(),
                        own.to_string_lossy().into_owned(),
                    ));
                }
                RankLaunch {
                    rank: r,
                    host: host.clone(),
                    argv: args.program.clone(),
                    env,
                    stdin_line: plan.description(r).to_line(),
                }
            })
            .collect();
        let outcome = run_job(ranks, &opts, &interrupt);
        match &outcome {
            Outcome::Success => return ExitCode::SUCCESS,
            Outcome::Failed { rank, exit } if incarnation <= args.restart_max => {
                eprintln!(
                    "sperli: rank {rank} failed ({exit}); restarting the job as incarnation {} ({} of {} restarts)",
                    incarnation + 1,
                    incarnation,
                    args.restart_max
                );
                if let Some(spare) = (!spares.is_empty()).then(|| spares.remove(0)) {
                    if policy.check(&spare.host).is_ok() {
                        let port = match spare.port {
                            Some(p) => p,
                            None => match sperli_tls::job_plan::free_port(&spare.host) {
                                Ok(p) => p,
                                Err(e) => return fail(format!("no free port: {e}")),
                            },
                        };
                        eprintln!(
                            "sperli: moving rank {rank} from {} to spare host {}",
                            entries[*rank as usize].host, spare.host
                        );
                        entries[*rank as usize] = HostEntry {
                            host: spare.host.clone(),
                            port,
                        };
                    }
                }
                if let Err(e) = plan.next_incarnation(entries.clone()) {
                    return fail(format!("cannot renew the job for a restart: {e}"));
                }
            }
            Outcome::Failed { rank, exit } => {
                eprintln!("sperli: rank {rank} failed ({exit}); the job failed");
                return ExitCode::from(outcome.exit_code().clamp(1, 255) as u8);
            }
            Outcome::TimedOut => {
                eprintln!("sperli: --timeout passed; the job was ended");
                return ExitCode::from(outcome.exit_code() as u8);
            }
            Outcome::Interrupted(sig) => {
                eprintln!("sperli: interrupted by signal {sig}; every rank was ended");
                return ExitCode::from(outcome.exit_code().clamp(1, 255) as u8);
            }
            Outcome::SpawnFailed { rank, kind } => {
                return fail(format!("cannot start rank {rank}: {kind:?}"));
            }
        }
    }
}

/// `sperli demo`: a real 4-rank job on this machine (ranks on 127.0.0.1,
/// 127.0.0.2, 127.0.0.3 and localhost) over mutually authenticated TLS 1.3,
/// running the example program's `ckpt` mode: an iteration with one
/// allreduce per step and a signed, buddy-replicated checkpoint every 10
/// steps. Rank 2 kills itself with SIGKILL in the first incarnation; the
/// launcher restarts the job, which resumes from its last COMMIT and ends
/// with the result of an undisturbed run.
fn demo() -> ExitCode {
    let Ok(me) = std::env::current_exe() else {
        return fail("cannot find the sperli binary itself");
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
    println!("restarts every rank, and they resume from the last COMMIT. Output lines are prefixed with [rank].");
    println!();
    let args = RunArgs {
        n: 4,
        hosts: Some("127.0.0.1,127.0.0.2,127.0.0.3,localhost".into()),
        hostfile: None,
        restart_max: 1,
        deny_hosts: None,
        checkpoint_dir: Some(scratch.clone()),
        silence_ms: 2000,
        timeout: Some(120),
        token_lifetime: 600,
        raw_output: false,
        rsh: "ssh -o BatchMode=yes {host}".into(),
        mailbox: Default::default(),
        program: vec![
            me.to_string_lossy().into_owned(),
            "example".into(),
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
            "Done in {:.2} s: rank 2 was killed, the job restarted from the epoch shown above and finished",
            start.elapsed().as_secs_f64()
        );
        println!("with the same result bytes as an undisturbed run; every rank said BYE.");
    }
    code
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::Run(args) => run(args),
        Cmd::Demo => demo(),
        Cmd::Example { args } => sperli_launch::example::run(&args),
        Cmd::Submit(args) => sperli_launch::mailbox_cli::submit(&args),
    }
}
