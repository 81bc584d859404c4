//! docs/launcher.md, "Recovery": `sperli run --recover`. The ranks here
//! are `sh` scripts standing in for the rank side (protocol §18.4): each
//! takes the job id, its rank and its incarnation from the first bytes
//! of its job description (protocol §4.2), writes a REPORT naming the
//! lost rank to `$SPERLI_CONTROL_FD` and prints the line it reads back.
//! The test checks that line: one MEMBERSHIP record, signed with the
//! job key (read from the `--job-key` file) and context `SPERLI-MEMBER-1`.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use sperli_tls::composite_sig::{verify_bytes, SecretKey};
use sperli_wire::recovery::{MembershipRecord, Mode, CONTEXT_MEMBER, NO_ROLLBACK};

/// The rank program: rank `$VICTIM` of incarnation 1 kills itself with
/// SIGKILL; every other rank reports it (epoch 1, flag 1, no COMMIT,
/// suspect `$VICTIM`, as little-endian hex `$VICTIM_LE`) and prints
/// `record HEX` with the line it reads back. In a later incarnation every
/// rank just says so.
const RANK: &str = r#"IFS= read -r d
head=$(printf '%s' "$d" | cut -c1-60)
d=
if [ "$SPERLI_INCARNATION" != 1 ]; then echo "incarnation $SPERLI_INCARNATION"; exit 0; fi
[ "$SPERLI_CONTROL_FD" = 3 ] || { echo "no control channel"; exit 9; }
if [ "$SPERLI_RANK" = "$VICTIM" ]; then kill -9 $$; fi
job=$(printf '%s' "$head" | cut -c5-36)
me=$(printf '%s' "$head" | cut -c45-52)
inc=$(printf '%s' "$head" | cut -c53-60)
printf '5350525001000100%s%s%s01000000010000000000000000000000%s\n' "$job" "$me" "$inc" "$VICTIM_LE" >&3
IFS= read -r rec <&3 || exit 10
echo "record $rec"
"#;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sperli-recover-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `sperli run -n N ARGS -- sh -c RANK` with rank `victim` killed, its key
/// file in `dir`.
fn run(n: u32, victim: u32, args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sperli"))
        .args(["run", "-n", &n.to_string(), "--timeout", "60"])
        .args(["--silence-ms", "1500", "--keep-checkpoints"])
        .arg("--checkpoint-dir")
        .arg(dir.join("ckpt"))
        .arg("--job-key")
        .arg(dir.join("key"))
        .args(args)
        .args(["--", "sh", "-c", RANK])
        .env("VICTIM", victim.to_string())
        .env("VICTIM_LE", format!("{victim:02x}000000"))
        .env_remove("SPERLI_REFUSED_HOSTS")
        .stdin(Stdio::null())
        .output()
        .expect("run sperli")
}

/// The job key from the key file's `secret` line.
fn job_key(dir: &std::path::Path) -> SecretKey {
    let text = std::fs::read_to_string(dir.join("key")).unwrap();
    let hex = text
        .lines()
        .find_map(|l| l.strip_prefix("secret "))
        .expect("a secret line");
    SecretKey::from_slice(&sperli_wire::hex::decode(hex.as_bytes()).unwrap()).unwrap()
}

/// The records rank `r` printed, decoded and verified with `key`.
fn records(stdout: &str, r: u32, key: &SecretKey) -> Vec<MembershipRecord> {
    let prefix = format!("[{r}] record ");
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|hex| {
            let bytes = sperli_wire::hex::decode(hex.as_bytes()).unwrap();
            let rec = MembershipRecord::decode(&bytes).unwrap();
            assert!(
                verify_bytes(
                    key.public_key().as_bytes(),
                    &rec.signed_bytes(),
                    CONTEXT_MEMBER,
                    &rec.signature
                ),
                "rank {r}: the record's signature does not verify"
            );
            rec
        })
        .collect()
}

#[test]
fn shrink_a_killed_rank_s_peers_get_one_signed_record_and_finish() {
    let _cpu = crate::shared_cpu();
    let dir = scratch("shrink");
    let out = run(4, 3, &["--recover", "shrink"], &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "sperli: epoch 2: rank 3 lost (killed by signal 9 (SIGKILL)); shrunk to 3 ranks\n"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.matches("sperli: epoch").count(), 1, "{stderr}");
    let key = job_key(&dir);
    let first = records(&stdout, 0, &key);
    assert_eq!(first.len(), 1, "{stdout}");
    let rec = &first[0];
    assert_eq!(
        (rec.mode, rec.epoch, rec.size, rec.agreed, rec.rollback),
        (Mode::Shrink, 2, 4, true, NO_ROLLBACK)
    );
    assert_eq!(rec.incarnations, [1, 1, 1, 0]);
    assert_eq!(rec.changes.len(), 1);
    assert_eq!(rec.changes[0].rank, 3);
    for r in 1..3 {
        assert_eq!(records(&stdout, r, &key), first, "{stdout}");
    }
    assert!(records(&stdout, 3, &key).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--recover inplace` (protocol §18.7): the launcher starts the killed
/// rank's replacement (incarnation 2, `SPERLI_REPLACEMENT=1`, the record
/// first on its channel) and writes one signed replace record to the
/// survivors; nobody is restarted.
#[test]
fn inplace_starts_a_replacement_and_writes_one_replace_record() {
    let _cpu = crate::shared_cpu();
    let dir = scratch("inplace");
    let out = run(3, 1, &["--restart-max", "1", "--recover", "inplace"], &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("sperli: epoch 2: rank 1 lost (killed by signal 9 (SIGKILL)); replacement of rank 1 runs on "),
        "{stderr}"
    );
    assert!(!stderr.contains("restarting the job"), "{stderr}");
    let key = job_key(&dir);
    let first = records(&stdout, 0, &key);
    assert_eq!(first.len(), 1, "{stdout}");
    let rec = &first[0];
    assert_eq!(
        (rec.mode, rec.epoch, rec.size, rec.rollback),
        (Mode::Replace, 2, 3, 0)
    );
    assert_eq!(rec.incarnations, [1, 2, 1]);
    assert_eq!(rec.changes.len(), 1);
    assert_eq!(rec.changes[0].rank, 1);
    assert!(rec.changes[0].endpoint.is_some());
    assert_eq!(records(&stdout, 2, &key), first, "{stdout}");
    // The replacement: its script says its incarnation and ends.
    assert!(stdout.contains("[1] incarnation 2\n"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn restart_gives_no_control_channel() {
    let _cpu = crate::shared_cpu();
    let probe = r#"IFS= read -r d; d=
if [ -n "$SPERLI_CONTROL_FD" ]; then echo "channel $SPERLI_CONTROL_FD"; elif { true >&3; } 2>/dev/null; then echo "fd 3 open"; else echo none; fi"#;
    let go = |recover: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_sperli"));
        c.args(["run", "-n", "2", "--timeout", "60"]);
        if let Some(m) = recover {
            c.args(["--recover", m]);
        }
        let out = c
            .args(["--", "sh", "-c", probe])
            .env_remove("SPERLI_REFUSED_HOSTS")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            crate::sorted_lines(&out),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (lines, stderr) = go(Some("restart"));
    assert_eq!(lines, ["[0] none", "[1] none"]);
    assert_eq!(stderr, "");
    // In place is the default (docs/launcher.md, "Recovery").
    for mode in [None, Some("inplace"), Some("shrink")] {
        let (lines, _) = go(mode);
        assert_eq!(lines, ["[0] channel 3", "[1] channel 3"], "{mode:?}");
    }
}
