//! docs/launcher.md, "Requeued jobs and the key file": a job
//! killed as a whole continues in a later `sperli run --job-key FILE`, a
//! key file others may read is refused, and what a normal end does to the
//! checkpoint tree.

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::{children_of, port_race, result_line};

/// Steps, checkpoint interval and sleep per step of the `ckpt` example:
/// about 2 s of steps, a checkpoint every 10.
const CKPT: [&str; 4] = ["ckpt", "80", "10", "25"];

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sperli-requeue-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `sperli run -n 3 ARGS -- sperli-example EXAMPLE...` as a command.
fn command(args: &[&str], example: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sperli"));
    c.args(["run", "-n", "3", "--silence-ms", "2000", "--timeout", "90"])
        .args(args)
        .arg("--")
        .arg(crate::example())
        .args(example)
        .env_remove("SPERLI_REFUSED_HOSTS")
        .env_remove("SPERLI_TEST_CKPT_KILL");
    c
}

/// The `result <hex>` line rank 0 of an undisturbed `ckpt` run of `size`
/// ranks and `steps` steps prints (`sperli-example ckpt-reference`).
fn ckpt_reference(size: u32, steps: u64) -> String {
    let out = Command::new(crate::example())
        .args(["ckpt-reference", &size.to_string(), &steps.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs to the end; None after a port race (the key file, if it was
/// created, is left for the retry: a race loses no state).
fn run_to_end(args: &[&str], example: &[&str]) -> Option<(Output, String, String)> {
    let out = command(args, example).output().unwrap();
    let (stdout, stderr) = text(&out);
    if !out.status.success() && port_race(&stderr) {
        return None;
    }
    Some((out, stdout, stderr))
}

/// Starts the job and SIGKILLs the launcher and every rank at once (a
/// scheduler preempting the whole job) as soon as rank 0 has printed the
/// COMMIT of epoch 2. Returns what was printed; None after a port race.
fn kill_whole_job_after_epoch_2(args: &[&str]) -> Option<String> {
    let mut child = command(args, &CKPT)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let mut killed = false;
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
        seen.push_str(&line);
        seen.push('\n');
        if line.starts_with("[0] checkpoint epoch 2 ") {
            let ranks = children_of(child.id());
            let _ = Command::new("kill")
                .arg("-9")
                .arg(child.id().to_string())
                .status();
            for p in ranks {
                let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
            }
            killed = true;
            break;
        }
    }
    let _ = child.wait();
    let err = err.join().unwrap();
    if !killed && port_race(&err) {
        return None;
    }
    assert!(killed, "no COMMIT of epoch 2:\n{seen}\n{err}");
    Some(seen)
}

fn key_incarnation(key: &Path) -> u32 {
    let t = std::fs::read_to_string(key).unwrap();
    t.lines()
        .find_map(|l| l.strip_prefix("incarnation "))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn job_trees(dir: &Path) -> Vec<PathBuf> {
    (0..3)
        .flat_map(|r| {
            std::fs::read_dir(dir.join(format!("rank-{r}")))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|e| e.path())
        .collect()
}

/// The whole job (launcher and ranks) is SIGKILLed after the COMMIT of
/// epoch 2; `sperli run` again with the same `--job-key` and
/// `--checkpoint-dir` is the same job: it resumes from the last valid
/// COMMIT and ends with the result of an undisturbed run. Then the tree
/// and the key file are gone.
#[test]
fn a_job_killed_as_a_whole_continues_in_a_later_run_with_its_key_file() {
    let _cpu = super::shared_cpu();
    let root = scratch("killed");
    let key = root.join("keys/job.key");
    let dir = root.join("ckpt");
    let args = [
        "--job-key",
        key.to_str().unwrap(),
        "--checkpoint-dir",
        dir.to_str().unwrap(),
    ];
    let seen = (0..3)
        .find_map(|_| kill_whole_job_after_epoch_2(&args))
        .expect("three port races in a row");
    assert!(
        seen.contains("[0] incarnation 1: starting from the beginning"),
        "{seen}"
    );
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "key file mode");
    let kdir = key.parent().unwrap();
    assert_eq!(
        std::fs::metadata(kdir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let first = key_incarnation(&key);
    let (out, stdout, stderr) = (0..3)
        .find_map(|_| run_to_end(&args, &CKPT))
        .expect("three port races in a row");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let resumed = stdout
        .lines()
        .find(|l| l.starts_with("[0] incarnation ") && l.contains(": resumed from epoch "))
        .unwrap_or_else(|| panic!("no resume:\n{stdout}\n{stderr}"));
    assert!(
        resumed.starts_with(&format!("[0] incarnation {}: ", first + 1)),
        "{resumed} (the key file said {first})"
    );
    let epoch: u64 = resumed
        .split("resumed from epoch ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|e| e.parse().ok())
        .unwrap();
    assert!(epoch >= 2, "{resumed}");
    let want = format!("[0] {}", ckpt_reference(3, 80));
    assert_eq!(
        result_line(&stdout).as_deref(),
        Some(want.as_str()),
        "{stdout}"
    );
    assert!(stderr.contains("removed the key file"), "{stderr}");
    assert!(!key.exists(), "the key file outlived the job");
    assert!(job_trees(&dir).is_empty(), "{:?}", job_trees(&dir));
    let _ = std::fs::remove_dir_all(&root);
}

/// A key file that group or others may read is refused before any rank
/// starts, with a message that says how to fix it; after `chmod 600` the
/// same command runs.
#[test]
fn a_key_file_readable_by_group_or_others_is_refused() {
    let _cpu = super::shared_cpu();
    let root = scratch("mode");
    let key = root.join("job.key");
    let dir = root.join("ckpt");
    let args = [
        "--keep-checkpoints",
        "--job-key",
        key.to_str().unwrap(),
        "--checkpoint-dir",
        dir.to_str().unwrap(),
    ];
    let (out, stdout, stderr) = (0..3)
        .find_map(|_| run_to_end(&args, &["hello"]))
        .expect("three port races in a row");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(key.exists(), "--keep-checkpoints keeps the key file");
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = command(&args, &["hello"]).output().unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
        assert!(
            stderr.contains("may be read or written by group or others")
                && stderr.contains(&format!("mode {mode:04o}"))
                && stderr.contains("chmod 600"),
            "{stderr}"
        );
        assert!(
            !stdout.contains("hello from rank"),
            "a rank started: {stdout}"
        );
    }
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (out, stdout, stderr) = (0..3)
        .find_map(|_| run_to_end(&args, &["hello"]))
        .expect("three port races in a row");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("[2] hello from rank 2 of 3"), "{stdout}");
    let _ = std::fs::remove_dir_all(&root);
}

/// A normal end removes the job's checkpoint tree; `--keep-checkpoints`
/// keeps it.
#[test]
fn a_normal_end_removes_the_checkpoints_unless_asked_to_keep_them() {
    let _cpu = super::shared_cpu();
    let root = scratch("end");
    let short = ["ckpt", "20", "10"];
    for keep in [false, true] {
        let dir = root.join(format!("keep-{keep}"));
        let mut args = vec!["--checkpoint-dir", dir.to_str().unwrap()];
        if keep {
            args.push("--keep-checkpoints");
        }
        let (out, stdout, stderr) = (0..3)
            .find_map(|_| run_to_end(&args, &short))
            .expect("three port races in a row");
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("[0] checkpoint epoch 2 at step 20"),
            "{stdout}"
        );
        let trees = job_trees(&dir);
        if keep {
            assert_eq!(trees.len(), 3, "{trees:?}\n{stderr}");
        } else {
            assert!(trees.is_empty(), "{trees:?}\n{stderr}");
            assert!(stderr.contains("removed its checkpoints"), "{stderr}");
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
