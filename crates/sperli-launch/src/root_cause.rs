//! Which rank failed first: the root cause the launcher reports, and the
//! rank it moves to a spare host on restart (docs/launcher.md, "Which rank
//! failed").
//!
//! When one rank fails, its peers fail too, within milliseconds, and their
//! exits race the first one to the launcher. Exit order alone cannot tell
//! them apart on a loaded machine, so every rank writes a
//! [`FailureRecord`] (`SPERLI_ERROR_FILE`, as torchrun's
//! `TORCHELASTIC_ERROR_FILE`): a rank that failed because a peer was lost
//! or aborted names that peer; a rank whose set-up timed out names the
//! ranks that never joined; a rank that failed on its own, or exited with
//! an error status without a SPERLI error, names nobody.
//!
//! The root cause follows the blame from rank to rank until it reaches a
//! rank that blames nobody, or a rank that has no record of its own
//! because it has not ended: it is stopped, hung, or never joined. That
//! rank is the root cause even though it never exited.

use sperli_wire::failure_record::{AbortNote, FailureRecord};

use crate::rank_exit::RankExit;

/// One failed rank as the launcher saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The rank.
    pub rank: u32,
    /// How it ended.
    pub exit: RankExit,
    /// What it wrote about its failure, if anything.
    pub record: Option<FailureRecord>,
}

impl Failure {
    /// The ranks this failure blames: the peer it lost or that aborted
    /// it, or the ranks its set-up never reached. Empty: it failed on its
    /// own (killed by a signal, no record, or a record blaming nobody).
    pub fn blamed(&self) -> Vec<u32> {
        if matches!(self.exit, RankExit::Signal(_)) {
            return Vec::new();
        }
        match &self.record {
            Some(r) => match r.blame {
                Some(b) if b != self.rank => vec![b],
                Some(_) => Vec::new(),
                None => r
                    .missing
                    .iter()
                    .copied()
                    .filter(|m| *m != self.rank)
                    .collect(),
            },
            None => Vec::new(),
        }
    }
}

/// What the launcher knows of a rank that has no failure (yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Its process runs (or its remote shell or srun step does).
    Running,
    /// Its process is stopped (SIGSTOP, a debugger).
    Stopped,
    /// Its process never started (the remote shell or srun did not run
    /// it yet).
    NotStarted,
    /// It exited successfully.
    Exited,
}

/// Why the root-cause rank failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// It ended with this status (and its record's H-code, if any).
    Exited(RankExit, Option<u32>),
    /// Its peers lost it and it is stopped.
    Stopped,
    /// Its peers lost it; it runs but does not answer (hung, or on a host
    /// the launcher cannot look into).
    Unresponsive,
    /// Its peers' set-up ended without it (H1616): it started but never
    /// joined.
    NeverJoined,
    /// Its process never started within the set-up window.
    NotStarted,
    /// Its remote shell or srun ended with this status before the rank
    /// started (an unreachable host, a refused login, no allocation).
    StartFailed(RankExit),
}

/// The root cause of a failed job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The root-cause rank (it moves to a spare host on restart).
    pub rank: u32,
    /// Why.
    pub cause: Cause,
    /// Other ranks with the same cause (more ranks that never joined).
    pub also: Vec<u32>,
    /// The launcher's exit status: the rank's own, or, when it did not
    /// exit, that of the first rank that failed because of it (else 1).
    pub exit_code: i32,
    /// The ABORT that ended the job as a rank received it: the
    /// originator's rank, reason, code and message (protocol §7.5: "The
    /// originator's reason and code are what the launcher reports").
    pub abort: Option<(u32, AbortNote)>,
}

impl Verdict {
    /// Whether the root cause is a rank that has not exited: the launcher
    /// must end it.
    pub fn still_running(&self) -> bool {
        !matches!(self.cause, Cause::Exited(..) | Cause::StartFailed(_))
    }
}

/// The end of the blame chain that starts at `f`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Terminal {
    /// A failure (its index) that blames nobody, or the first reported
    /// member of a blame cycle.
    Failed(usize),
    /// A rank without a failure of its own, as the launcher sees it.
    Alive(u32, Liveness),
}

fn terminal(failures: &[Failure], start: usize, live: &dyn Fn(u32) -> Liveness) -> Terminal {
    let mut cur = start;
    let mut seen = vec![start];
    loop {
        let blamed = failures[cur].blamed();
        let Some(&next) = blamed.first() else {
            return Terminal::Failed(cur);
        };
        if let Some(i) = failures.iter().position(|f| f.rank == next) {
            if let Some(at) = seen.iter().position(|s| *s == i) {
                // A cycle (ranks that lost each other): its first reported
                // member stands for it, so that every chain into the same
                // cycle ends at the same rank.
                return Terminal::Failed(seen[at..].iter().copied().min().unwrap_or(i));
            }
            seen.push(i);
            cur = i;
            continue;
        }
        return match live(next) {
            Liveness::Exited => Terminal::Failed(cur),
            l => Terminal::Alive(next, l),
        };
    }
}

/// The root cause among `failures` (in the order they were reported);
/// `live` says what is known of a rank without a failure.
///
/// 1. A rank killed by a signal (a SPERLI rank whose peer fails exits
///    with an error, it is not killed).
/// 2. Else the end of the blame chains (see the module docs) that most
///    failures lead to: a failed rank that blames nobody, or a rank that
///    has not ended; a chain that runs in a circle ends at the circle's
///    first reported rank.
/// 3. Ties (e.g. no records at all) go to the exit status fewest of the
///    tied ranks share, then to the first reported.
pub fn root_cause(failures: &[Failure], live: &dyn Fn(u32) -> Liveness) -> Option<Verdict> {
    let abort = failures.iter().find_map(|f| {
        let r = f.record.as_ref()?;
        Some((r.blame?, r.abort.clone()?))
    });
    if let Some(f) = failures
        .iter()
        .find(|f| matches!(f.exit, RankExit::Signal(_)))
    {
        return Some(Verdict {
            rank: f.rank,
            cause: Cause::Exited(f.exit, None),
            also: Vec::new(),
            exit_code: f.exit.exit_code(),
            abort,
        });
    }
    let ends: Vec<Terminal> = (0..failures.len())
        .map(|i| terminal(failures, i, live))
        .collect();
    let mut candidates: Vec<(Terminal, usize)> = Vec::new();
    for t in &ends {
        match candidates.iter_mut().find(|(c, _)| c == t) {
            Some((_, n)) => *n += 1,
            None => candidates.push((*t, 1)),
        }
    }
    let most = candidates.iter().map(|(_, n)| *n).max()?;
    let tied: Vec<Terminal> = candidates
        .iter()
        .filter(|(_, n)| *n == most)
        .map(|(t, _)| *t)
        .collect();
    let status_of = |t: &Terminal| match t {
        Terminal::Failed(i) => Some(failures[*i].exit),
        Terminal::Alive(..) => None,
    };
    let share = |t: &Terminal| tied.iter().filter(|o| status_of(o) == status_of(t)).count();
    let best = *tied.iter().min_by_key(|t| share(t))?;
    let first_blamer = ends.iter().position(|t| *t == best).map(|i| &failures[i]);
    Some(match best {
        Terminal::Failed(i) => {
            let f = &failures[i];
            Verdict {
                rank: f.rank,
                cause: Cause::Exited(f.exit, f.record.as_ref().map(|r| r.code)),
                also: Vec::new(),
                exit_code: f.exit.exit_code(),
                abort,
            }
        }
        Terminal::Alive(rank, l) => {
            let by_setup = failures
                .iter()
                .any(|f| f.record.as_ref().is_some_and(|r| r.missing.contains(&rank)));
            let cause = match l {
                Liveness::NotStarted => Cause::NotStarted,
                _ if by_setup => Cause::NeverJoined,
                Liveness::Stopped => Cause::Stopped,
                _ => Cause::Unresponsive,
            };
            let mut also: Vec<u32> = failures
                .iter()
                .filter_map(|f| f.record.as_ref())
                .flat_map(|r| r.missing.iter().copied())
                .filter(|m| *m != rank && !failures.iter().any(|f| f.rank == *m))
                .collect();
            also.sort_unstable();
            also.dedup();
            Verdict {
                rank,
                cause,
                also,
                exit_code: first_blamer.map_or(1, |f| f.exit.exit_code().max(1)),
                abort,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(code: u32, blame: Option<u32>) -> FailureRecord {
        FailureRecord {
            code,
            blame,
            abort: None,
            missing: Vec::new(),
        }
    }

    fn f(rank: u32, exit: RankExit, blame: Option<Option<u32>>) -> Failure {
        Failure {
            rank,
            exit,
            record: blame.map(|blame| rec(1613, blame)),
        }
    }

    fn running(_: u32) -> Liveness {
        Liveness::Running
    }

    fn exited(_: u32) -> Liveness {
        Liveness::Exited
    }

    #[test]
    fn a_killed_rank_comes_first() {
        let v = [
            f(1, RankExit::Code(1), Some(Some(2))),
            f(2, RankExit::Signal(9), None),
            f(0, RankExit::Code(1), Some(Some(2))),
        ];
        let r = root_cause(&v, &running).unwrap();
        assert_eq!((r.rank, r.exit_code), (2, 137));
    }

    #[test]
    fn the_rank_others_blame_wins_even_when_reported_last() {
        // Rank 1 exits 3 on its own; rank 0 notices and exits 1 first.
        let v = [
            f(0, RankExit::Code(1), Some(Some(1))),
            f(1, RankExit::Code(3), None),
        ];
        let r = root_cause(&v, &running).unwrap();
        assert_eq!((r.rank, r.exit_code), (1, 3));
        assert_eq!(r.cause, Cause::Exited(RankExit::Code(3), None));
        // Rank 2 rejected a frame (blames nobody), the others got its ABORT.
        let mut v = vec![
            f(0, RankExit::Code(1), Some(Some(2))),
            f(1, RankExit::Code(1), Some(Some(2))),
            f(2, RankExit::Code(1), Some(None)),
        ];
        let note = AbortNote {
            reason: 7,
            code: 1610,
            message: "H1610 frame rejected".into(),
        };
        v[1].record = Some(FailureRecord {
            code: 1612,
            blame: Some(2),
            abort: Some(note.clone()),
            missing: Vec::new(),
        });
        let r = root_cause(&v, &running).unwrap();
        assert_eq!(r.rank, 2);
        assert_eq!(r.abort, Some((2, note)));
    }

    #[test]
    fn blame_follows_an_abort_to_the_rank_that_was_lost() {
        // Rank 0 is stopped: rank 1 lost it and sent ABORT, ranks 2 and 3
        // got that ABORT (they blame rank 1).
        let mut v = vec![
            f(2, RankExit::Code(1), Some(Some(1))),
            f(1, RankExit::Code(1), Some(Some(0))),
            f(3, RankExit::Code(1), Some(Some(1))),
        ];
        v[0].record.as_mut().unwrap().code = 1612;
        let stopped = |r: u32| {
            if r == 0 {
                Liveness::Stopped
            } else {
                Liveness::Running
            }
        };
        let r = root_cause(&v, &stopped).unwrap();
        assert_eq!((r.rank, &r.cause, r.exit_code), (0, &Cause::Stopped, 1));
        assert!(r.still_running());
        let r = root_cause(&v, &running).unwrap();
        assert_eq!((r.rank, r.cause), (0, Cause::Unresponsive));
        // A rank blamed by a peer that exited successfully is not it.
        let r = root_cause(&v, &exited).unwrap();
        assert_eq!(r.rank, 1);
    }

    #[test]
    fn the_ranks_a_set_up_never_reached_are_the_root_cause() {
        let missing = |rank: u32, m: Vec<u32>| Failure {
            rank,
            exit: RankExit::Code(1),
            record: Some(FailureRecord {
                code: 1616,
                blame: None,
                abort: None,
                missing: m,
            }),
        };
        let v = [missing(0, vec![1, 3]), missing(2, vec![1, 3])];
        let r = root_cause(&v, &running).unwrap();
        assert_eq!(
            (r.rank, &r.cause, &r.also),
            (1, &Cause::NeverJoined, &vec![3])
        );
        let not_started = |_: u32| Liveness::NotStarted;
        assert_eq!(
            root_cause(&v, &not_started).unwrap().cause,
            Cause::NotStarted
        );
        // A missing rank that failed on its own (say its program was not
        // found) is followed to its own failure.
        let v = [missing(0, vec![1]), f(1, RankExit::Code(127), None)];
        let r = root_cause(&v, &running).unwrap();
        assert_eq!((r.rank, r.exit_code), (1, 127));
    }

    #[test]
    fn without_records_the_rarest_status_then_the_first() {
        let v = [
            f(0, RankExit::Code(1), None),
            f(2, RankExit::Code(1), None),
            f(1, RankExit::Code(3), None),
        ];
        assert_eq!(root_cause(&v, &running).unwrap().rank, 1);
        let v = [f(4, RankExit::Code(1), None), f(1, RankExit::Code(1), None)];
        assert_eq!(root_cause(&v, &running).unwrap().rank, 4);
        assert_eq!(root_cause(&[], &running), None);
    }

    #[test]
    fn a_blame_cycle_does_not_loop_and_counts_as_one() {
        let v = [
            f(0, RankExit::Code(1), Some(Some(1))),
            f(1, RankExit::Code(2), Some(Some(0))),
        ];
        assert_eq!(root_cause(&v, &running).unwrap().rank, 0);
        // Ranks 5 and 3 lost each other (reported second and fourth); the
        // others' chains all run into that cycle: its first reported
        // member wins over rank 9, which blames nobody.
        let v = [
            f(2, RankExit::Code(1), Some(Some(5))),
            f(5, RankExit::Code(1), Some(Some(3))),
            f(9, RankExit::Code(1), Some(None)),
            f(3, RankExit::Code(1), Some(Some(5))),
            f(4, RankExit::Code(1), Some(Some(3))),
        ];
        assert_eq!(root_cause(&v, &running).unwrap().rank, 5);
    }
}
