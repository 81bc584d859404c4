//! Collectives across the groups of an intercommunicator (protocol
//! §15.6) between real TLS ranks on 127.0.0.0/8, with groups of unequal
//! sizes (job ranks below n/2 against the rest): every call with every
//! root, the reductions checked bit for bit against a serial left fold
//! written here, dup and split of the intercommunicator, a wrong root.

use std::time::Duration;

use sperli_collective::prelude::*;

use crate::common::{assert_aborted_by, assert_job_ended, code};
use crate::tls::{run_job, tls_test_within};

/// The data job rank `j` contributes to the reductions: values whose
/// float sum and product depend on the order of the fold.
fn contribution(j: u32) -> Vec<f64> {
    let s = if j % 2 == 0 { 1.0 } else { -1.0 };
    vec![
        0.1 * f64::from(j + 1),
        s * 1e16 + f64::from(j),
        1.0 / f64::from(j + 3),
        1.0 + 1e-15 * f64::from(j),
        f64::from(j) * 0.7 - 1.3,
        3.3e-300 * f64::from(j + 1),
    ]
}

/// The serial left fold of `rows` in order (written apart from the
/// library's folds): `((r0 op r1) op r2) ...` elementwise.
fn left_fold(rows: &[Vec<f64>], op: Reduction) -> Vec<f64> {
    let mut acc = rows[0].clone();
    for row in &rows[1..] {
        for (a, &x) in acc.iter_mut().zip(row) {
            *a = match op {
                Reduction::Sum => *a + x,
                Reduction::Prod => *a * x,
                Reduction::Max => a.max(x),
                Reduction::Min => a.min(x),
                _ => unreachable!("not used here"),
            };
        }
    }
    acc
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Block `i` of `total` elements cut into `n` nearly equal blocks.
fn counts_of(total: usize, n: usize) -> Vec<usize> {
    (0..n)
        .map(|i| total / n + usize::from(i < total % n))
        .collect()
}

fn across(n: u32) {
    run_job(
        n,
        |ep| ep,
        move |c: Comm<Endpoint>| {
            let me = c.rank();
            let color = u32::from(me >= n / 2);
            let group = c.split(Some(color), 0).unwrap().unwrap();
            let other_leader = if color == 0 { n / 2 } else { 0 };
            let ic = group.create_intercomm(0, &c, other_leader, 9).unwrap();
            let mine = ic.local_job_ranks();
            let theirs = ic.remote_job_ranks();
            let (lr, ls, rs) = (ic.rank(), ic.size(), ic.remote_size());
            ic.barrier().unwrap();

            // Rooted calls: every rank of each group is the root once.
            for g in 0..2u32 {
                let roots = if g == color { ls } else { rs };
                for root in 0..roots {
                    let role = if g != color {
                        InterRoot::Remote(root)
                    } else if root == lr {
                        InterRoot::Here
                    } else {
                        InterRoot::Null
                    };
                    let root_job = if g == color {
                        mine[root as usize]
                    } else {
                        theirs[root as usize]
                    };
                    // bcast
                    let mut b = if role == InterRoot::Here {
                        vec![root_job; 3]
                    } else {
                        vec![]
                    };
                    ic.bcast(role, &mut b).unwrap();
                    match role {
                        InterRoot::Remote(_) => assert_eq!(b, vec![root_job; 3]),
                        _ => assert_eq!(b.len(), if role == InterRoot::Here { 3 } else { 0 }),
                    }
                    // gather and gatherv
                    let got = ic.gather(role, &[me, me + 100]).unwrap();
                    let want: Vec<u32> = theirs.iter().flat_map(|&j| [j, j + 100]).collect();
                    assert_eq!(got, (role == InterRoot::Here).then(|| want.clone()));
                    let got = ic.gatherv(role, &vec![me; lr as usize + 1]).unwrap();
                    if role == InterRoot::Here {
                        let got = got.unwrap();
                        assert_eq!(got.counts, (1..=rs as usize).collect::<Vec<_>>());
                        for (i, &j) in theirs.iter().enumerate() {
                            assert_eq!(got.block(i), vec![j; i + 1]);
                        }
                    } else {
                        assert!(got.is_none());
                    }
                    // scatter and scatterv
                    let data: Vec<u64> = (0..2 * u64::from(rs)).map(|x| x + 7).collect();
                    let here = role == InterRoot::Here;
                    let got = ic.scatter(role, here.then_some(&data[..])).unwrap();
                    if let InterRoot::Remote(_) = role {
                        let i = u64::from(lr);
                        assert_eq!(got, vec![2 * i + 7, 2 * i + 8]);
                    } else {
                        assert!(got.is_empty());
                    }
                    let counts: Vec<usize> = (0..rs as usize).collect();
                    let total: usize = counts.iter().sum();
                    let data: Vec<i32> = (0..total as i32).collect();
                    let got = ic
                        .scatterv(role, here.then_some((&data[..], &counts[..])))
                        .unwrap();
                    if let InterRoot::Remote(_) = role {
                        let start: i32 = (0..lr as i32).sum();
                        assert_eq!(got, (start..start + lr as i32).collect::<Vec<_>>());
                    }
                    // reduce: the contributing group folds in rank order
                    for op in [Reduction::Sum, Reduction::Prod] {
                        let got = ic.reduce(role, &contribution(me), op).unwrap();
                        if here {
                            let rows: Vec<_> = theirs.iter().map(|&j| contribution(j)).collect();
                            assert_eq!(bits(&got.unwrap()), bits(&left_fold(&rows, op)));
                        } else {
                            assert!(got.is_none());
                        }
                    }
                }
            }

            // allgather(v): the remote group's blocks in its rank order.
            let got = ic.allgather(&[me, me * 10]).unwrap();
            let want: Vec<u32> = theirs.iter().flat_map(|&j| [j, j * 10]).collect();
            assert_eq!(got, want);
            let got = ic.allgatherv(&vec![me; lr as usize]).unwrap();
            assert_eq!(got.counts, (0..rs as usize).collect::<Vec<_>>());
            for (i, &j) in theirs.iter().enumerate() {
                assert_eq!(got.block(i), vec![j; i]);
            }

            // alltoall(v): block j to remote rank j.
            let data: Vec<u32> = (0..rs).flat_map(|j| [me * 1000 + j; 2]).collect();
            let got = ic.alltoall(&data).unwrap();
            let want: Vec<u32> = theirs.iter().flat_map(|&j| [j * 1000 + lr; 2]).collect();
            assert_eq!(got, want);
            let counts: Vec<usize> = (0..rs as usize).map(|j| j + lr as usize).collect();
            let data: Vec<u32> = counts
                .iter()
                .enumerate()
                .flat_map(|(j, &k)| vec![me * 1000 + j as u32; k])
                .collect();
            let got = ic.alltoallv(&data, &counts).unwrap();
            for (i, &j) in theirs.iter().enumerate() {
                assert_eq!(got.block(i), vec![j * 1000 + lr; i + lr as usize]);
            }

            // allreduce: the remote group's fold.
            let rows: Vec<_> = theirs.iter().map(|&j| contribution(j)).collect();
            for op in [Reduction::Sum, Reduction::Prod, Reduction::Max] {
                let got = ic.allreduce(&contribution(me), op).unwrap();
                assert_eq!(bits(&got), bits(&left_fold(&rows, op)));
            }

            // reduce_scatter_block: both groups pass n_A * n_B elements.
            let total = (ls * rs) as usize;
            let data: Vec<f64> = (0..total)
                .map(|i| contribution(me)[i % 6] * (i + 1) as f64)
                .collect();
            let got = ic.reduce_scatter_block(&data, Reduction::Sum).unwrap();
            let rows: Vec<Vec<f64>> = theirs
                .iter()
                .map(|&j| {
                    (0..total)
                        .map(|i| contribution(j)[i % 6] * (i + 1) as f64)
                        .collect()
                })
                .collect();
            let full = left_fold(&rows, Reduction::Sum);
            let block = rs as usize;
            let start = lr as usize * block;
            assert_eq!(bits(&got), bits(&full[start..start + block]));

            // reduce_scatter: uneven counts, the same total in both groups.
            let counts = counts_of(total, ls as usize);
            let got = ic.reduce_scatter(&data, &counts, Reduction::Sum).unwrap();
            let start: usize = counts[..lr as usize].iter().sum();
            let k = counts[lr as usize];
            assert_eq!(bits(&got), bits(&full[start..start + k]));

            // A remote root past the remote group: refused, the job goes on.
            let e = ic.bcast(InterRoot::Remote(rs), &mut vec![0u8]).unwrap_err();
            assert_eq!(code(&e), 1618);

            // dup: the same groups under a new id, its own messages.
            let d = ic.dup().unwrap();
            assert_ne!(d.id(), ic.id());
            assert_eq!(d.remote_job_ranks(), theirs);
            let got = d.allgather(&[me]).unwrap();
            assert_eq!(got, theirs);

            // split by local rank parity: the remote group of the same
            // parity, or none.
            let s = ic.split(Some(lr % 2), 0).unwrap();
            let want_remote: Vec<u32> = theirs
                .iter()
                .enumerate()
                .filter(|(i, _)| *i as u32 % 2 == lr % 2)
                .map(|(_, &j)| j)
                .collect();
            match s {
                Some(s) => {
                    assert_eq!(s.remote_job_ranks(), want_remote);
                    assert_eq!(s.allgather(&[me]).unwrap(), want_remote);
                }
                None => assert!(want_remote.is_empty()),
            }
            ic.barrier().unwrap();
            c.barrier().unwrap();
        },
    );
}

/// A root's data that is not remote size blocks: only the root sees it,
/// so the job ends (H1618, ABORT reason 4) and the other group's waiting
/// rank fails with H1612 from the root.
fn root_blocks_end_the_job(n: u32) {
    run_job(
        n,
        |ep| ep,
        move |c: Comm<Endpoint>| {
            let me = c.rank();
            let color = u32::from(me >= 1);
            let group = c.split(Some(color), 0).unwrap().unwrap();
            // Rank 0, alone in its group, may end the job before a rank of
            // the other group has its intercommunicator (or has left the
            // barrier behind it): that rank then sees the ABORT there.
            let made = match group.create_intercomm(0, &c, 1 - color, 4) {
                Ok(ic) => c.barrier().map(|()| ic),
                Err(MpiError::Comm(e)) => Err(e),
                Err(e) => panic!("rank {me}: {e}"),
            };
            let ic = match made {
                Ok(ic) => ic,
                Err(e) => {
                    assert_eq!(color, 1, "rank {me}: {e}");
                    assert_aborted_by(&e, 0, AbortReason::InvalidScatter, 1618);
                    return;
                }
            };
            let rs = ic.remote_size();
            if color == 0 {
                let data = vec![1u32; rs as usize + 1];
                let e = ic.scatter(InterRoot::Here, Some(&data)).unwrap_err();
                assert_eq!(code(&e), 1618, "{e}");
                assert!(c.barrier().is_err(), "the job ended");
            } else {
                let first = ic.scatter::<u32>(InterRoot::Remote(0), None);
                let later = c.barrier();
                assert_job_ended(&first, &later, 0, AbortReason::InvalidScatter, 1618);
            }
        },
    );
}

#[test]
fn root_blocks_end_the_job_at_3_ranks() {
    tls_test_within(Duration::from_secs(60), || root_blocks_end_the_job(3));
}

#[test]
fn across_groups_at_2_ranks() {
    tls_test_within(Duration::from_secs(90), || across(2));
}

#[test]
fn across_groups_at_3_ranks() {
    tls_test_within(Duration::from_secs(120), || across(3));
}

#[test]
fn across_groups_at_5_ranks() {
    tls_test_within(Duration::from_secs(180), || across(5));
}
