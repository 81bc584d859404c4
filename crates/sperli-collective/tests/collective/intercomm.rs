//! Intercommunicators (protocol §15.6) between real TLS ranks on
//! 127.0.0.0/8: evens and odds joined by `create_intercomm`, messages
//! across with their remote ranks (any source too), never mixed with the
//! world's, and `merge` in both orders.

use std::time::Duration;

use sperli_collective::prelude::*;

use crate::tls::{run_job, tls_test_within};

fn evens_and_odds(n: u32) {
    run_job(
        n,
        |ep| ep,
        move |c: Comm<Endpoint>| {
            let me = c.rank();
            let color = me % 2;
            let group = c.split(Some(color), me as i32).unwrap().unwrap();
            // Each group's leader is its first member; the other's is
            // world rank 1 - color.
            let ic = group.create_intercomm(0, &c, 1 - color, 77).unwrap();
            let mine: Vec<u32> = (0..n).filter(|r| r % 2 == color).collect();
            let theirs: Vec<u32> = (0..n).filter(|r| r % 2 != color).collect();
            assert_eq!(ic.local_job_ranks(), mine);
            assert_eq!(ic.remote_job_ranks(), theirs);
            assert_eq!((ic.rank(), ic.size()), (group.rank(), group.size()));
            assert_eq!(ic.remote_size(), theirs.len() as u32);
            // A world message to this rank with the same tag stays the
            // world's.
            c.send(me, 5, &[u32::MAX]).unwrap();
            let remote = ic.remote();
            for r in 0..ic.remote_size() {
                remote.send(r, 5, &[me]).unwrap();
            }
            let mut from = Vec::new();
            for _ in 0..ic.remote_size() {
                let (st, v) = remote.recv_match::<u32>(None, Some(5)).unwrap();
                assert_eq!(
                    v,
                    vec![theirs[st.source as usize]],
                    "source is the remote rank"
                );
                from.push(st.source);
            }
            from.sort_unstable();
            assert_eq!(from, (0..ic.remote_size()).collect::<Vec<_>>());
            assert_eq!(c.recv::<u32>(me, 5).unwrap(), [u32::MAX]);
            // The odds ask to go high: evens first.
            let merged = ic.merge(color == 1).unwrap();
            let order: Vec<u32> = mine_then(&[0, 1], n);
            assert_eq!(merged.size(), n);
            assert_eq!(merged.job_rank(merged.rank()), me);
            assert_eq!(
                (0..n).map(|r| merged.job_rank(r)).collect::<Vec<_>>(),
                order
            );
            let sum = merged
                .allreduce_scalar(u64::from(me), Reduction::Sum)
                .unwrap();
            assert_eq!(sum, u64::from(n * (n - 1) / 2));
            // The evens ask to go high: odds first.
            let flipped = ic.merge(color == 0).unwrap();
            assert_eq!(flipped.job_rank(0), 1);
            // Both the same: the group of the lower first member first.
            let same = ic.merge(true).unwrap();
            assert_eq!(same.job_rank(0), 0);
            c.barrier().unwrap();
        },
    );
}

/// The job ranks of the colors in `colors`' order, each ascending.
fn mine_then(colors: &[u32], n: u32) -> Vec<u32> {
    colors
        .iter()
        .flat_map(|&k| (0..n).filter(move |r| r % 2 == k))
        .collect()
}

#[test]
fn evens_and_odds_at_2_ranks() {
    tls_test_within(Duration::from_secs(60), || evens_and_odds(2));
}

#[test]
fn evens_and_odds_at_5_ranks() {
    tls_test_within(Duration::from_secs(90), || evens_and_odds(5));
}
