//! mpirun and torchrun habits: `-np`, hostfile `slots=N` with
//! `--map-by`, `--version`, `--output-dir`, `LOCAL_WORLD_SIZE`.

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
