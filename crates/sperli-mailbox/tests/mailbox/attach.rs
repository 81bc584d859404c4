//! Both attach paths refuse a mailbox that is not exactly a version-1
//! mailbox of this job: one mutation per header field (each reserved byte
//! included), the file's mode, size and type (docs/mailbox.md §2.3).

use std::os::unix::fs::{FileExt, PermissionsExt};
use std::time::Duration;

use sperli_mailbox::error::{FileProblem, ManifestError};
use sperli_mailbox::files::{self, mailbox_path, MailboxFile, Manifest};
use sperli_mailbox::layout::{off, LayoutError, LAYOUT_SIZE, REGION_LEN, RESERVED_START};
use sperli_mailbox::{Mailbox, MailboxError, MailboxServer};
use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, ErrorMode, Settings};

use crate::common::unique;

/// A fresh 4-rank mailbox with its manifest; removed when dropped.
struct Fresh(String);

impl Fresh {
    fn new(tag: &str) -> Self {
        let name = unique(tag);
        MailboxFile::create(&name, 4).expect("create");
        Manifest::new(&name, 4).write().expect("manifest");
        Fresh(name)
    }

    fn poke(&self, at: usize, bytes: &[u8]) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(mailbox_path(&self.0))
            .expect("open for the mutation");
        f.write_all_at(bytes, at as u64)
            .expect("write the mutation");
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        files::remove(&self.0);
    }
}

fn rank0(name: &str) -> Result<(), MailboxError> {
    MailboxFile::attach_rank0(name, 4).map(drop)
}

fn client(name: &str) -> Result<(), MailboxError> {
    Mailbox::attach(name).map(drop)
}

fn layout_error(r: Result<(), MailboxError>) -> LayoutError {
    match r {
        Err(MailboxError::Layout(e)) => e,
        other => panic!("expected a layout refusal, got {other:?}"),
    }
}

#[test]
fn a_fresh_mailbox_attaches_on_both_paths() {
    let f = Fresh::new("fresh");
    rank0(&f.0).unwrap();
    client(&f.0).unwrap();
}

#[test]
fn one_mutation_per_header_field_is_refused_at_rank_0_attach() {
    let u32s = |v: u32| v.to_le_bytes().to_vec();
    let u64s = |v: u64| v.to_le_bytes().to_vec();
    // (field, offset, bytes, the error rank 0 must report)
    let cases: Vec<(&str, usize, Vec<u8>, LayoutError)> = vec![
        (
            "version",
            off::VERSION,
            u32s(2),
            LayoutError::Version { got: 2 },
        ),
        (
            "world size (other job)",
            off::WORLD_SIZE,
            u32s(5),
            LayoutError::WorldSize {
                expected: Some(4),
                got: 5,
            },
        ),
        (
            "world size (0)",
            off::WORLD_SIZE,
            u32s(0),
            LayoutError::WorldSize {
                expected: None,
                got: 0,
            },
        ),
        (
            "layout size",
            off::LAYOUT_SIZE,
            u64s(LAYOUT_SIZE - 1),
            LayoutError::LayoutSize {
                got: LAYOUT_SIZE - 1,
            },
        ),
        (
            "group state (READY)",
            off::GROUP_STATE,
            u32s(2),
            LayoutError::NotFresh {
                field: "group state",
                expected: 1,
                got: 2,
            },
        ),
        (
            "group state (no code)",
            off::GROUP_STATE,
            u32s(9),
            LayoutError::Code {
                field: "group state",
                got: 9,
            },
        ),
        (
            "request state (REQUEST_READY)",
            off::REQUEST_STATE,
            u32s(2),
            LayoutError::NotFresh {
                field: "request state",
                expected: 1,
                got: 2,
            },
        ),
        (
            "request state (no code)",
            off::REQUEST_STATE,
            u32s(0),
            LayoutError::Code {
                field: "request state",
                got: 0,
            },
        ),
        (
            "sequence id",
            off::SEQUENCE,
            u64s(7),
            LayoutError::NotFresh {
                field: "sequence id",
                expected: 0,
                got: 7,
            },
        ),
        (
            "opcode",
            off::OPCODE,
            u32s(1),
            LayoutError::NotFresh {
                field: "opcode",
                expected: 0,
                got: 1,
            },
        ),
        (
            "opcode (no code)",
            off::OPCODE,
            u32s(5),
            LayoutError::Code {
                field: "opcode",
                got: 5,
            },
        ),
        (
            "target",
            off::TARGET,
            u32s(2),
            LayoutError::NotFresh {
                field: "target",
                expected: 0,
                got: 2,
            },
        ),
        (
            "target (no code)",
            off::TARGET,
            u32s(4),
            LayoutError::Code {
                field: "target",
                got: 4,
            },
        ),
        (
            "target rank",
            off::TARGET_RANK,
            u32s(3),
            LayoutError::NotFresh {
                field: "target rank",
                expected: 0,
                got: 3,
            },
        ),
        (
            "handler",
            off::HANDLER,
            u32s(1),
            LayoutError::NotFresh {
                field: "handler",
                expected: 0,
                got: 1,
            },
        ),
        (
            "payload count",
            off::PAYLOAD_COUNT,
            u32s(1),
            LayoutError::NotFresh {
                field: "payload count",
                expected: 0,
                got: 1,
            },
        ),
        (
            "request length",
            off::REQUEST_LEN,
            u32s(1),
            LayoutError::NotFresh {
                field: "request length",
                expected: 0,
                got: 1,
            },
        ),
        (
            "request length (beyond the region)",
            off::REQUEST_LEN,
            u32s(REGION_LEN as u32 + 1),
            LayoutError::Length {
                field: "request length",
                got: REGION_LEN as u32 + 1,
            },
        ),
        (
            "reply count",
            off::REPLY_COUNT,
            u32s(1),
            LayoutError::NotFresh {
                field: "reply count",
                expected: 0,
                got: 1,
            },
        ),
        (
            "reply length",
            off::REPLY_LEN,
            u32s(REGION_LEN as u32 + 1),
            LayoutError::Length {
                field: "reply length",
                got: REGION_LEN as u32 + 1,
            },
        ),
        (
            "terminal reason",
            off::TERMINAL_REASON,
            u32s(3),
            LayoutError::NotFresh {
                field: "terminal reason",
                expected: 0,
                got: 3,
            },
        ),
        (
            "terminal reason (no code)",
            off::TERMINAL_REASON,
            u32s(8),
            LayoutError::Code {
                field: "terminal reason",
                got: 8,
            },
        ),
        (
            "client pid",
            off::CLIENT_PID,
            u32s(42),
            LayoutError::NotFresh {
                field: "client pid",
                expected: 0,
                got: 42,
            },
        ),
    ];
    for (what, at, bytes, want) in cases {
        let f = Fresh::new("field");
        f.poke(at, &bytes);
        let e = layout_error(rank0(&f.0));
        assert_eq!(e, want, "{what}");
        let text = MailboxError::from(e).to_string();
        assert!(
            text.starts_with("H1640 mailbox refused: "),
            "{what}: {text}"
        );
    }
    for i in 0..8 {
        let f = Fresh::new("magic");
        let mut m = *b"SMPIBOX\0";
        m[i] ^= 0x20;
        f.poke(off::MAGIC, &m);
        assert_eq!(
            layout_error(rank0(&f.0)),
            LayoutError::Magic { got: m },
            "magic byte {i}"
        );
        assert!(matches!(
            layout_error(client(&f.0)),
            LayoutError::Magic { .. }
        ));
    }
}

#[test]
fn each_reserved_byte_is_refused_on_both_attach_paths() {
    let f = Fresh::new("reserved");
    for offset in RESERVED_START..256 {
        f.poke(offset, &[0xa5]);
        let want = LayoutError::Reserved {
            offset,
            value: 0xa5,
        };
        assert_eq!(layout_error(rank0(&f.0)), want, "rank 0, byte {offset}");
        assert_eq!(layout_error(client(&f.0)), want, "client, byte {offset}");
        f.poke(offset, &[0]);
    }
    rank0(&f.0).unwrap();
}

#[test]
fn the_client_path_refuses_another_version_layout_world_or_code() {
    let cases: Vec<(usize, Vec<u8>)> = vec![
        (off::VERSION, 0u32.to_le_bytes().to_vec()),
        (off::LAYOUT_SIZE, (LAYOUT_SIZE + 1).to_le_bytes().to_vec()),
        (off::WORLD_SIZE, 3u32.to_le_bytes().to_vec()),
        (off::GROUP_STATE, 0u32.to_le_bytes().to_vec()),
        (off::REQUEST_STATE, 8u32.to_le_bytes().to_vec()),
        (off::TARGET, 9u32.to_le_bytes().to_vec()),
    ];
    for (at, bytes) in cases {
        let f = Fresh::new("client");
        f.poke(at, &bytes);
        let e = layout_error(client(&f.0));
        assert!(!e.to_string().is_empty(), "offset {at}");
    }
    // A client may attach to a lane in use: a sequence id is no refusal.
    let f = Fresh::new("client-seq");
    f.poke(off::SEQUENCE, &9u64.to_le_bytes());
    client(&f.0).unwrap();
    // TERMINAL and CLOSED groups are refused (H1643).
    for (g, terminal) in [(3u32, true), (4, false)] {
        let f = Fresh::new("client-state");
        f.poke(off::GROUP_STATE, &g.to_le_bytes());
        f.poke(off::TERMINAL_REASON, &2u32.to_le_bytes());
        let e = client(&f.0).unwrap_err();
        assert_eq!(e.code().map(|c| c.number()), Some(1643), "{e}");
        assert_eq!(matches!(e, MailboxError::Terminal { .. }), terminal, "{e}");
    }
}

#[test]
fn mode_size_owner_and_symlinks_are_refused() {
    let f = Fresh::new("mode");
    let path = mailbox_path(&f.0);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    for r in [rank0(&f.0), client(&f.0)] {
        assert!(
            matches!(
                r,
                Err(MailboxError::File {
                    problem: FileProblem::Mode { got: 0o644 },
                    ..
                })
            ),
            "{r:?}"
        );
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(LAYOUT_SIZE - 4096)
        .unwrap();
    assert!(matches!(
        rank0(&f.0),
        Err(MailboxError::File {
            problem: FileProblem::Size { .. },
            ..
        })
    ));
    let link = Fresh(unique("link"));
    std::os::unix::fs::symlink(&path, mailbox_path(&link.0)).unwrap();
    assert!(matches!(
        rank0(&link.0),
        Err(MailboxError::File {
            problem: FileProblem::Symlink,
            ..
        })
    ));
    assert!(matches!(
        rank0(&unique("absent")),
        Err(MailboxError::NotFound { .. })
    ));
}

/// The rank side refuses a bad mailbox through the same path, and ends
/// the job: an in-process job of two real TLS endpoints on 127.0.0.1-2.
#[test]
fn a_server_whose_mailbox_is_refused_ends_the_job() {
    let f = Fresh::new("server");
    f.poke(200, &[1]);
    // The mailbox is for 4 ranks; make it one for 2.
    f.poke(off::WORLD_SIZE, &2u32.to_le_bytes());
    let plan = JobPlan::localhost_bound(2).expect("plan");
    let name = f.0.clone();
    let handles: Vec<_> = (0..2)
        .map(|r| {
            let desc = plan.description(r);
            let name = name.clone();
            let listener = plan.take_listener(r);
            std::thread::spawn(move || {
                let ep = Endpoint::start(
                    &desc,
                    Settings {
                        listener,
                        silence: Duration::from_secs(5),
                        // Ranks are threads of this test: errors returned.
                        errors: ErrorMode::Return,
                        ..Settings::default()
                    },
                )
                .expect("join");
                MailboxServer::new().serve_named(sperli_collective::Comm::new(ep), Some(&name))
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    match &results[0] {
        Err(MailboxError::Layout(LayoutError::Reserved { offset: 200, .. })) => {}
        other => panic!("rank 0: {other:?}"),
    }
    // Rank 1 learns it from rank 0's ABORT, with rank 0's reason.
    match &results[1] {
        Err(MailboxError::Collective(e)) if e.to_string().contains("H1640 mailbox refused") => {}
        Err(MailboxError::Stopped { .. }) => {}
        other => panic!("rank 1: {other:?}"),
    }
}

/// The manifest gets the mailbox file's checks (docs/mailbox.md §1.2):
/// not a symbolic link, this user's, mode 0600; each refusal is H1640,
/// from the library and from `sperli submit` alike.
#[test]
fn a_manifest_that_is_open_to_others_another_users_or_a_symlink_is_refused() {
    use std::os::unix::fs::MetadataExt;
    let expect_refused = |name: &str, problem: FileProblem| {
        match Mailbox::attach(name) {
            Err(
                e @ MailboxError::Manifest {
                    error: ManifestError::File(_),
                    ..
                },
            ) => {
                assert_eq!(e.code().map(|c| c.number()), Some(1640), "{e}");
                let MailboxError::Manifest {
                    error: ManifestError::File(got),
                    ..
                } = &e
                else {
                    unreachable!()
                };
                assert_eq!(got, &problem, "{e}");
                assert!(e.to_string().starts_with("H1640 manifest "), "{e}");
            }
            other => panic!("expected the manifest refused ({problem}), got {other:?}"),
        }
        let out = std::process::Command::new(crate::common::sperli())
            .args(["submit", "--mailbox", name, "--ping", "--timeout", "5"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "sperli submit: {err}");
        assert!(err.contains("H1640 manifest"), "sperli submit: {err}");
    };
    let f = Fresh::new("manifest-mode");
    let manifest = files::manifest_path(&f.0);
    std::fs::set_permissions(&manifest, std::fs::Permissions::from_mode(0o644)).unwrap();
    expect_refused(&f.0, FileProblem::Mode { got: 0o644 });
    std::fs::set_permissions(&manifest, std::fs::Permissions::from_mode(0o600)).unwrap();
    client(&f.0).unwrap();

    // Tests run as root: the manifest of another user (nobody's uid).
    let me = std::fs::metadata(&manifest).unwrap().uid();
    let nobody = 65534;
    std::os::unix::fs::chown(&manifest, Some(nobody), None).unwrap();
    expect_refused(
        &f.0,
        FileProblem::Owner {
            expected: me,
            got: nobody,
        },
    );
    std::os::unix::fs::chown(&manifest, Some(me), None).unwrap();
    client(&f.0).unwrap();

    // A symbolic link to a good manifest (here: the real one's bytes).
    let link = Fresh::new("manifest-link");
    let target = std::env::temp_dir().join(format!("{}.manifest", link.0));
    std::fs::copy(files::manifest_path(&link.0), &target).unwrap();
    std::fs::remove_file(files::manifest_path(&link.0)).unwrap();
    std::os::unix::fs::symlink(&target, files::manifest_path(&link.0)).unwrap();
    expect_refused(&link.0, FileProblem::Symlink);
    let _ = std::fs::remove_file(&target);
}

/// docs/mailbox.md §3.4: a client waiting for READY looks at the launcher
/// the manifest names at once and at every tick; a dead one makes the
/// group TERMINAL (reason 5) instead of a wait to the timeout.
#[test]
fn waiting_for_ready_on_a_dead_launchers_mailbox_ends_with_reason_5_at_once() {
    let f = Fresh::new("dead-launcher");
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let mut m = Manifest::new(&f.0, 4);
    m.launcher_pid = gone.id();
    std::fs::remove_file(files::manifest_path(&f.0)).unwrap();
    m.write().unwrap();
    let mut mb = Mailbox::attach(&f.0).unwrap();
    let t = std::time::Instant::now();
    let e = mb.wait_ready(Duration::from_secs(30)).unwrap_err();
    let took = t.elapsed();
    assert!(
        matches!(
            e,
            MailboxError::Terminal {
                reason: sperli_mailbox::TerminalReason::LauncherExit,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.code().map(|c| c.number()), Some(1643), "{e}");
    assert!(took < Duration::from_millis(100), "{took:?}");
    assert_eq!(
        mb.header().unwrap().group,
        sperli_mailbox::GroupState::Terminal
    );
}
