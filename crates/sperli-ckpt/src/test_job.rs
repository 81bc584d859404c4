//! Unit-test harness: a job of N ranks on in-memory links
//! ([`FakePeers`]), one thread per rank, each with its own checkpoint
//! directory on the real disk and the same job key in every incarnation.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use sperli_collective::fake::FakePeers;
use sperli_collective::{Comm, Recovered};
use sperli_tls::composite_sig::{self, SecretKey};
use sperli_wire::ckpt_path::epoch_dir;
use sperli_wire::JobId;

use crate::{Checkpointer, JobKeys};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A job: its id, key, size and the root of its ranks' directories.
pub(crate) struct TestJob {
    pub(crate) job: JobId,
    pub(crate) key: SecretKey,
    pub(crate) size: u32,
    pub(crate) root: PathBuf,
}

impl TestJob {
    /// A job of `size` ranks with fresh directories under the temp dir.
    pub(crate) fn new(name: &str, size: u32) -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!(
            "sperli-ckpt-unit-{}-{n}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        let mut job = [0u8; 16];
        job[..4].copy_from_slice(&n.to_le_bytes());
        job[4..8].copy_from_slice(&std::process::id().to_le_bytes());
        Self {
            job: JobId(job),
            key: composite_sig::generate().expect("a job key"),
            size,
            root,
        }
    }

    /// Rank `r`'s checkpoint directory.
    pub(crate) fn dir(&self, r: u32) -> PathBuf {
        self.root.join(format!("rank-{r}"))
    }

    /// Rank `r`'s directory of `epoch`.
    pub(crate) fn edir(&self, r: u32, epoch: u64) -> PathBuf {
        epoch_dir(self.dir(r), self.job, epoch)
    }

    /// Runs `f` on every rank of incarnation `incarnation` (each on its own
    /// thread and fake link); the results in rank order.
    pub(crate) fn run<R: Send>(
        &self,
        incarnation: u32,
        f: impl Fn(u32, &mut Checkpointer<FakePeers>) -> R + Sync,
    ) -> Vec<R> {
        self.run_as(&vec![incarnation; self.size as usize], None, f)
    }

    /// As [`TestJob::run`] with rank r at `incarnations[r]` (protocol
    /// §18.1: per-rank incarnations) and, with `membership`, every link's
    /// membership set to it before its checkpointer is made (the record a
    /// replacement joins with, protocol §18.7).
    pub(crate) fn run_as<R: Send>(
        &self,
        incarnations: &[u32],
        membership: Option<&Recovered>,
        f: impl Fn(u32, &mut Checkpointer<FakePeers>) -> R + Sync,
    ) -> Vec<R> {
        let f = &f;
        std::thread::scope(|s| {
            let handles: Vec<_> = FakePeers::job(self.size)
                .into_iter()
                .enumerate()
                .map(|(r, link)| {
                    if let Some(m) = membership {
                        link.set_membership(m.clone());
                    }
                    let keys = JobKeys::new(
                        self.job,
                        incarnations[r],
                        self.key.public_key().clone(),
                        (r == 0).then(|| self.key.clone()),
                    );
                    let r = r as u32;
                    let dir = self.dir(r);
                    s.spawn(move || {
                        let mut ck = Checkpointer::new(Comm::new(link), dir, keys).unwrap();
                        f(r, &mut ck)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }
}

/// The state the resume tests checkpoint: a step and a vector whose
/// length and contents depend on the rank and the epoch.
pub(crate) type S = (u64, Vec<u32>);

/// Rank `r`'s state [`S`] of epoch `e`.
pub(crate) fn state(r: u32, e: u64) -> S {
    (e, vec![r * 1000 + e as u32; 300 + e as usize])
}

impl TestJob {
    /// Incarnation 1 starts from the beginning and writes epochs 1..=n.
    pub(crate) fn epochs(&self, n: u64) {
        self.run(1, |r, ck| {
            assert_eq!(ck.resume::<S>().unwrap(), None);
            for e in 1..=n {
                assert_eq!(ck.checkpoint(&state(r, e)).unwrap(), e);
            }
        });
    }
}

/// The membership of a replace-mode record of epoch 2 over `size` ranks
/// with rollback epoch `rollback` (protocol §18.3, §18.7).
pub(crate) fn replace_record(size: u32, rollback: u64) -> Recovered {
    Recovered {
        epoch: 2,
        mode: Some(sperli_wire::recovery::Mode::Replace),
        agreed: true,
        rollback: Some(rollback),
        members: (0..size).collect(),
        failed: Vec::new(),
    }
}

impl Drop for TestJob {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A file's bytes with one byte flipped.
pub(crate) fn flip_byte(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    let i = at.min(b.len() - 1);
    b[i] ^= 0x5a;
    std::fs::write(path, b).unwrap();
}
