//! ULFM's calls between real TLS ranks on 127.0.0.0/8 (protocol §18.8.1):
//! agree is the bitwise AND of every member's flag, on a communicator and
//! across an intercommunicator's groups; iagree completes only once every
//! member called it and needs no order against the collectives; shrink of
//! a healthy communicator has every member in its old order; a revoked
//! communicator refuses its calls with H1613 but still agrees and shrinks.

use sperli_collective::agreement::AGREE_TAG;
use sperli_collective::prelude::*;

use crate::common::xorshift;
use crate::tls::{finish, run_job, tls_test};

fn h(e: &Error) -> Option<u32> {
    e.h_code().map(|c| c.number())
}

/// Every rank clears its own bit, then random flags against a serial AND.
fn agree_is_the_and(size: u32) {
    let out = run_job(
        size,
        |ep| ep,
        move |c: Comm<Endpoint>| {
            let me = c.rank();
            let own = c.agree(!(1u32 << me)).unwrap();
            let mut seeds: Vec<u64> = (0..size).map(|r| 0x9e37_79b9 + u64::from(r)).collect();
            let mut got = Vec::new();
            for _ in 0..5 {
                let flags: Vec<u32> = seeds.iter_mut().map(|s| xorshift(s) as u32).collect();
                let want = flags.iter().fold(u32::MAX, |a, f| a & f);
                got.push((c.agree(flags[me as usize]).unwrap(), want));
            }
            finish(c);
            (own, got)
        },
    );
    let cleared = !((1u32 << size) - 1);
    for (own, got) in out {
        assert_eq!(own, cleared);
        for (g, want) in got {
            assert_eq!(g, want);
        }
    }
}

#[test]
fn agree_is_the_bitwise_and_at_2_ranks() {
    tls_test(|| agree_is_the_and(2));
}

#[test]
fn agree_is_the_bitwise_and_at_4_ranks() {
    tls_test(|| agree_is_the_and(4));
}

/// As mpi4py's test: each rank in turn starts an iagree while the others
/// are in a barrier it then joins; its request is not complete before the
/// others called iagree, and every rank gets the AND.
#[test]
fn iagree_waits_for_every_member_and_mixes_with_collectives() {
    tls_test(|| {
        let out = run_job(
            3,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let me = c.rank();
                let mut got = Vec::new();
                for root in 0..3 {
                    c.barrier().unwrap();
                    let mut r = if me == root {
                        let mut r = c.iagree(0b1011).unwrap();
                        let early = r.test().unwrap();
                        c.barrier().unwrap();
                        got.push(early.is_none());
                        r
                    } else {
                        c.barrier().unwrap();
                        c.iagree(0b1101).unwrap()
                    };
                    got.push(r.wait().unwrap() == 0b1001);
                }
                finish(c);
                got
            },
        );
        for (rank, got) in out.into_iter().enumerate() {
            assert_eq!(got.len(), 4, "rank {rank}");
            assert!(got.iter().all(|&ok| ok), "rank {rank}: {got:?}");
        }
    });
}

/// Shrink of a healthy communicator and of a dup: the same members and
/// ranks under a new id; a revoked dup refuses its collectives and its
/// messages (PROC_NULL too) with H1613, yet agrees and shrinks, and its
/// shrink works.
#[test]
fn shrink_and_revoke_at_3_ranks() {
    tls_test(|| {
        let out = run_job(
            3,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let me = c.rank();
                let s = c.shrink().unwrap();
                let same = (s.rank(), s.size(), s.id() > c.id());
                let sum = s.allreduce_scalar(me + 1, Reduction::Sum).unwrap();
                let d = c.dup().unwrap();
                d.revoke();
                let refused = [
                    h(&d.barrier().unwrap_err()),
                    h(&d.send(PROC_NULL, 0, &[1u8]).unwrap_err()),
                    h(&d.recv::<u8>(PROC_NULL, 0).unwrap_err()),
                    h(&d.send((me + 1) % 3, 0, &[1u8]).unwrap_err()),
                ];
                let agreed = d.agree(u32::from(me != 1)).unwrap();
                let ds = d.shrink().unwrap();
                let after = ds.allreduce_scalar(me, Reduction::Max).unwrap();
                let parent_ok = c.allreduce_scalar(1u32, Reduction::Sum).unwrap();
                let out = (
                    same,
                    sum,
                    refused,
                    agreed,
                    (ds.rank(), ds.is_revoked(), after),
                    parent_ok,
                    c.get_failed(),
                    c.ack_failed(3),
                );
                drop((s, d, ds));
                finish(c);
                out
            },
        );
        for (rank, got) in out.into_iter().enumerate() {
            let r = rank as u32;
            assert_eq!(got.0, (r, 3, true));
            assert_eq!(got.1, 6);
            assert_eq!(got.2, [Some(1613); 4]);
            assert_eq!(got.3, 0);
            assert_eq!(got.4, (r, false, 2));
            assert_eq!(got.5, 3);
            assert_eq!(got.6, Vec::<u32>::new());
            assert_eq!(got.7, 0);
        }
    });
}

/// An intercommunicator of groups {0, 1} and {2, 3}: agree over both
/// groups, its shrink has both groups in their order, revoke refuses its
/// calls.
#[test]
fn intercomm_agree_and_shrink_at_4_ranks() {
    tls_test(|| {
        let out = run_job(
            4,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let me = c.rank();
                let color = u32::from(me >= 2);
                let group = c.split(Some(color), 0).unwrap().unwrap();
                let ic = group.create_intercomm(0, &c, 2 - 2 * color, 9).unwrap();
                let flag = !(1u32 << me);
                let all = ic.agree(flag).unwrap();
                let nb = ic.iagree(0b110 | me).unwrap().wait().unwrap();
                let s = ic.shrink().unwrap();
                let shape = (s.rank(), s.size(), s.remote_size(), s.remote_job_ranks());
                s.barrier().unwrap();
                ic.revoke();
                let refused = h(&ic.barrier().unwrap_err());
                let still = ic.agree(1).unwrap();
                let out = (all, nb, shape, refused, ic.is_revoked(), still);
                drop((s, ic, group));
                finish(c);
                out
            },
        );
        for (rank, got) in out.into_iter().enumerate() {
            let r = rank as u32;
            let theirs = if r < 2 { vec![2, 3] } else { vec![0, 1] };
            assert_eq!(got.0, !0b1111u32);
            assert_eq!(got.1, 0b110);
            assert_eq!(got.2, (r % 2, 2, 2, theirs));
            assert_eq!(got.3, Some(1613));
            assert!(got.4);
            assert_eq!(got.5, 1);
        }
    });
}

/// A member's agreement message of another length than 8 bytes fails the
/// agreement at rank 0 with H1617; the job goes on.
#[test]
fn an_agreement_message_of_another_length_is_h1617() {
    tls_test(|| {
        let out = run_job(
            2,
            |ep| ep,
            |c: Comm<Endpoint>| {
                let got = if c.rank() == 1 {
                    c.send(0, AGREE_TAG, &[1u32]).unwrap();
                    None
                } else {
                    Some(h(&c.agree(1).unwrap_err()))
                };
                c.barrier().unwrap();
                finish(c);
                got
            },
        );
        assert_eq!(out, vec![Some(Some(1617)), None]);
    });
}
