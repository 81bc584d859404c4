//! Building and running the benchmark's programs: the release build of
//! `sperli-bench` and `sperli` (and the OpenMPI baseline), one program's
//! run with its `RESULT`/`INFO` lines, and the command lines of a SPERLI
//! job and its OpenMPI twin.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{Samples, TIMEOUT};

/// The programs to run.
pub(super) struct Programs {
    pub(super) sperli: PathBuf,
    pub(super) bench: PathBuf,
    /// `mpirun` and the compiled baseline, or why they are missing.
    pub(super) mpi: Result<(PathBuf, PathBuf), String>,
}

pub(super) fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

pub(super) fn build(root: &Path) -> Result<Programs, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("==> cargo build --release -p sperli-bench -p sperli-launch -p sperli-mailbox");
    let st = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "-p",
            "sperli-bench",
            "-p",
            "sperli-launch",
            "-p",
            "sperli-mailbox",
            "--bins",
        ])
        .current_dir(root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !st.success() {
        return Err(format!("the release build failed ({st})"));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("release");
    let mpi = match (on_path("mpicc"), on_path("mpirun")) {
        (Some(mpicc), Some(mpirun)) => {
            let out = target.join("sperli_mpi_bench");
            let src = root.join("bench/mpi/sperli_mpi_bench.c");
            println!("==> mpicc -O2 -o {} {}", out.display(), src.display());
            match Command::new(mpicc)
                .args(["-O2", "-Wall", "-o"])
                .arg(&out)
                .arg(&src)
                .status()
            {
                Ok(s) if s.success() => Ok((mpirun, out)),
                Ok(s) => return Err(format!("mpicc failed ({s}) on {}", src.display())),
                Err(e) => return Err(format!("cannot run mpicc: {e}")),
            }
        }
        _ => Err(
            "OpenMPI is not installed (no mpicc/mpirun on PATH): the OpenMPI \
                  baseline is skipped. Install it with `apt-get install -y openmpi-bin \
                  libopenmpi-dev`."
                .to_string(),
        ),
    };
    if let Err(why) = &mpi {
        println!("xtask bench: {why}");
    }
    Ok(Programs {
        sperli: target.join("sperli"),
        bench: target.join("sperli-bench"),
        mpi,
    })
}

/// What one program printed.
pub(super) struct Output {
    pub(super) results: Vec<(String, u64, f64)>,
    pub(super) info: Vec<(String, String)>,
    /// Unix time (ns) just before the program was started.
    pub(super) spawned_ns: f64,
    pub(super) secs: f64,
}

pub(super) fn unix_ns() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as f64)
        .unwrap_or(0.0)
}

/// Runs `argv`, collects its `RESULT`/`INFO` lines; any failure (spawn,
/// non-zero exit, signal, timeout, no figure) is an error.
pub(super) fn run_program(
    label: &str,
    argv: &[String],
    env: &[(&str, &str)],
) -> Result<Output, String> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = Instant::now();
    let spawned_ns = unix_ns();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{label}: cannot start {}: {e}", argv[0]))?;
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        let _ = tx.send((true, s));
    });
    thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        let _ = tx2.send((false, s));
    });
    let status = loop {
        if let Some(st) = child
            .try_wait()
            .map_err(|e| format!("{label}: wait: {e}"))?
        {
            break st;
        }
        if t.elapsed() > TIMEOUT {
            // SIGTERM first: the launcher and mpirun then end their ranks.
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{label}: timed out after {TIMEOUT:?}"));
        }
        thread::sleep(Duration::from_millis(5));
    };
    let secs = t.elapsed().as_secs_f64();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    for _ in 0..2 {
        if let Ok((is_out, s)) = rx.recv_timeout(Duration::from_secs(10)) {
            if is_out {
                stdout = s;
            } else {
                stderr = s;
            }
        }
    }
    if !status.success() {
        return Err(format!(
            "{label}: {} exited with {status}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
            argv.join(" ")
        ));
    }
    let mut o = Output {
        results: Vec::new(),
        info: Vec::new(),
        spawned_ns,
        secs,
    };
    for line in BufReader::new(stdout.as_bytes())
        .lines()
        .map_while(Result::ok)
    {
        if let Some(i) = line.find("RESULT ") {
            let w: Vec<&str> = line[i + 7..].split_whitespace().collect();
            match (
                w.first(),
                w.get(1).and_then(|s| s.parse().ok()),
                w.get(2).and_then(|s| s.parse().ok()),
            ) {
                (Some(name), Some(size), Some(v)) => o.results.push((name.to_string(), size, v)),
                _ => return Err(format!("{label}: bad line {line:?}")),
            }
        } else if let Some(i) = line.find("INFO ") {
            let rest = &line[i + 5..];
            let (k, v) = rest.split_once(' ').unwrap_or((rest, ""));
            o.info.push((k.to_string(), v.to_string()));
        }
    }
    if o.results.is_empty() {
        return Err(format!(
            "{label}: printed no figure\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
        ));
    }
    Ok(o)
}

/// [`run_program`], started again (at most twice) when a rank lost the
/// launcher's free-port race: `sperli run` picks each rank's port by
/// binding port 0 and releasing it, and on a busy loopback another socket
/// may take it first (the rank then fails with AddrInUse). Counted in
/// `samples.retries` and named in the report.
pub(super) fn run_retrying(
    label: &str,
    argv: &[String],
    env: &[(&str, &str)],
    samples: &mut Samples,
) -> Result<Output, String> {
    let mut tries = 0;
    loop {
        match run_program(label, argv, env) {
            Err(e) if tries < 2 && e.contains("AddrInUse") => {
                tries += 1;
                samples.retries.push(label.to_string());
                println!(
                    "    {label}: a rank's port was taken (AddrInUse); starting the job again"
                );
            }
            r => return r,
        }
    }
}

pub(super) fn mpi_argv(mpirun: &Path, prog: &Path, n: u32, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![mpirun.display().to_string()];
    if is_root() {
        v.push("--allow-run-as-root".into());
    }
    for a in [
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "btl_tcp_if_include",
        "lo",
        "--oversubscribe",
        "-n",
    ] {
        v.push(a.into());
    }
    v.push(n.to_string());
    v.push(prog.display().to_string());
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

pub(super) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

pub(super) const MPI_ENV: [(&str, &str); 2] = [
    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
];

/// `sperli run -n N --timeout T [-H hosts] LAUNCHER_ARGS -- sperli-bench ARGS`.
pub(super) fn sperli_argv(
    p: &Programs,
    n: u32,
    hosts: Option<String>,
    launcher: &[String],
    args: &[&str],
) -> Vec<String> {
    let mut v: Vec<String> = vec![
        p.sperli.display().to_string(),
        "run".into(),
        "-n".into(),
        n.to_string(),
        "--timeout".into(),
        TIMEOUT.as_secs().to_string(),
    ];
    if let Some(h) = hosts {
        v.push("-H".into());
        v.push(h);
    }
    v.extend(launcher.iter().cloned());
    v.push("--".into());
    v.push(p.bench.display().to_string());
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// `127.0.0.1,127.0.0.2,...`: rank r on 127.0.0.(r+1), as `JobPlan::localhost`.
pub(super) fn spread_hosts(n: u32) -> String {
    (1..=n)
        .map(|i| format!("127.0.0.{i}"))
        .collect::<Vec<_>>()
        .join(",")
}
