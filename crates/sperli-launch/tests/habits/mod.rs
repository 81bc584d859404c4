//! mpirun and torchrun habits: `-np`, hostfile `slots=N` with
//! `--map-by`, `--version`, `--output-dir`, `LOCAL_WORLD_SIZE`, torchrun's
//! `OMP_NUM_THREADS=1`.

use super::sperli;

fn stdout_of(args: &[&str]) -> String {
    let out = sperli(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn np_is_an_alias_of_n() {
    let _cpu = crate::shared_cpu();
    for np in [&["-np", "2"][..], &["-np=2"][..], &["--np", "2"][..]] {
        let mut args = vec!["run"];
        args.extend_from_slice(np);
        args.extend(["--timeout", "60", "--", "EXAMPLE", "hello"]);
        let out = stdout_of(&args);
        for r in 0..2 {
            assert!(
                out.contains(&format!("[{r}] hello from rank {r} of 2")),
                "{np:?}: {out}"
            );
        }
    }
    // `-np` after `--` belongs to the program.
    let out = sperli(&["run", "-n", "1", "--", "echo", "-np"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "[0] -np\n");
}

#[test]
fn version() {
    let _cpu = crate::shared_cpu();
    let out = sperli(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("sperli {} (SPERLI protocol v1)", env!("CARGO_PKG_VERSION"))
    );
}

/// Each rank prints `RANK LOCAL_RANK LOCAL_WORLD_SIZE`, then joins.
const WHERE: &str = "echo \"where $SPERLI_RANK $LOCAL_RANK $LOCAL_WORLD_SIZE\"; exec EXAMPLE hello";

/// The `where` lines of a run, by rank: (local rank, local world size).
fn placement(stdout: &str, n: usize) -> Vec<(u32, u32)> {
    let mut v = vec![(u32::MAX, u32::MAX); n];
    for l in stdout.lines() {
        let Some((_, w)) = l.split_once("] where ") else {
            continue;
        };
        let f: Vec<u32> = w.split(' ').map(|x| x.parse().unwrap()).collect();
        v[f[0] as usize] = (f[1], f[2]);
    }
    v
}

/// Hostfile `slots=2` on two hosts, 4 ranks: by default (mpirun's `--map-by
/// slot`) ranks 0 and 1 share the first host; `--map-by node` deals them
/// out: ranks 0 and 2 share it. `LOCAL_WORLD_SIZE` is 2 everywhere.
#[test]
fn hostfile_slots_fill_each_host_first_unless_map_by_node() {
    let _cpu = crate::shared_cpu();
    let dir = std::env::temp_dir().join(format!("sperli-hostfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hosts");
    std::fs::write(&file, "# two hosts\n127.0.0.1 slots=2\n127.0.0.2 slots=2\n").unwrap();
    let file = file.to_str().unwrap();
    let by_slot = stdout_of(&[
        "run",
        "-n",
        "4",
        "--hostfile",
        file,
        "--timeout",
        "60",
        "--",
        "sh",
        "-c",
        WHERE,
    ]);
    assert_eq!(
        placement(&by_slot, 4),
        [(0, 2), (1, 2), (0, 2), (1, 2)],
        "{by_slot}"
    );
    let by_node = stdout_of(&[
        "run",
        "-n",
        "4",
        "--hostfile",
        file,
        "--map-by",
        "node",
        "--timeout",
        "60",
        "--",
        "sh",
        "-c",
        WHERE,
    ]);
    assert_eq!(
        placement(&by_node, 4),
        [(0, 2), (0, 2), (1, 2), (1, 2)],
        "{by_node}"
    );
    // A field that is not slots=N stops the launcher.
    std::fs::write(dir.join("bad"), "127.0.0.1 slot=2\n").unwrap();
    let out = sperli(&[
        "run",
        "-n",
        "1",
        "--hostfile",
        dir.join("bad").to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"slot=2\" is not slots=N"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--output-dir DIR`: each rank's stdout and stderr in
/// `DIR/rank-<r>/{stdout,stderr}`, untagged, besides the tagged terminal
/// output.
#[test]
fn output_dir_holds_each_ranks_output() {
    let _cpu = crate::shared_cpu();
    let dir = std::env::temp_dir().join(format!("sperli-output-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let script = "echo out-$SPERLI_RANK; echo err-$SPERLI_RANK >&2; exec EXAMPLE hello";
    let out = sperli(&[
        "run",
        "-n",
        "2",
        "--output-dir",
        d,
        "--timeout",
        "60",
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for r in 0..2 {
        let o = std::fs::read_to_string(dir.join(format!("rank-{r}/stdout"))).unwrap();
        let e = std::fs::read_to_string(dir.join(format!("rank-{r}/stderr"))).unwrap();
        assert_eq!(o, format!("out-{r}\nhello from rank {r} of 2\n"));
        assert_eq!(e, format!("err-{r}\n"));
        assert!(stdout.contains(&format!("[{r}] out-{r}")), "{stdout}");
        assert!(stderr.contains(&format!("[{r}] err-{r}")), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What each rank of `sperli run -n N -- sh -c ...` prints as its
/// `OMP_NUM_THREADS`, by rank, with `omp` in the launcher's environment (or
/// none).
fn omp_of_ranks(n: &str, omp: Option<&str>) -> Vec<String> {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sperli"));
    cmd.args(["run", "-n", n, "--timeout", "60", "--", "sh", "-c"])
        .arg("echo \"omp=${OMP_NUM_THREADS-unset}\"")
        .env_remove("SPERLI_REFUSED_HOSTS")
        .env_remove("OMP_NUM_THREADS")
        .stdin(std::process::Stdio::null());
    if let Some(v) = omp {
        cmd.env("OMP_NUM_THREADS", v);
    }
    crate::sorted_lines(&cmd.output().expect("run sperli"))
}

/// torchrun's default: ranks that share the machine get
/// `OMP_NUM_THREADS=1` (their OpenMP and OpenBLAS pools would take the
/// cores from each other); a value the launcher's environment sets is
/// passed on instead; a rank alone on its machine gets none.
#[test]
fn ranks_sharing_a_machine_get_one_omp_thread_unless_set() {
    let _cpu = crate::shared_cpu();
    assert_eq!(omp_of_ranks("2", None), ["[0] omp=1", "[1] omp=1"]);
    assert_eq!(omp_of_ranks("2", Some("3")), ["[0] omp=3", "[1] omp=3"]);
    assert_eq!(omp_of_ranks("1", None), ["[0] omp=unset"]);
}
