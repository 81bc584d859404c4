//! The binomial bcast of HELLO feature bit 8 (protocol §21): the first
//! frame of a bcast (the v1 data frame, or the OPEN of a pipelined bcast)
//! travels down a binomial tree instead of going from the root to every
//! rank. The frames are those of protocol §8 and §14.2; nothing here is new
//! on the wire but who sends them to whom.

use crate::limits::FEATURE_BINOMIAL_BCAST;

/// Protocol §21.1: whether a job that negotiated `features` runs the bcasts
/// of its intracommunicators along the binomial tree (bit 8; with or
/// without bit 1).
///
/// ```
/// use sperli_wire::binomial_tree::runs_binomial_bcast;
/// use sperli_wire::limits::{FEATURE_BINOMIAL_BCAST, FEATURE_V1_CORE};
/// assert!(runs_binomial_bcast(FEATURE_V1_CORE | FEATURE_BINOMIAL_BCAST));
/// assert!(!runs_binomial_bcast(FEATURE_V1_CORE));
/// ```
pub fn runs_binomial_bcast(features: u64) -> bool {
    features & FEATURE_BINOMIAL_BCAST != 0
}

/// Protocol §21.2: a rank's position in the tree rooted at `root`
/// on `size` ranks, `(rank - root) mod size`. `rank` and `root` are below
/// `size`.
fn position(rank: u32, root: u32, size: u32) -> u32 {
    ((u64::from(rank) + u64::from(size) - u64::from(root)) % u64::from(size)) as u32
}

/// Protocol §21.2: the rank a bcast's first frame comes from at `rank`:
/// the rank at position `p & (p - 1)` (p with its lowest set bit cleared);
/// `None` at the root. `rank` and `root` are below `size`.
///
/// ```
/// use sperli_wire::binomial_tree::binomial_parent;
/// assert_eq!(binomial_parent(0, 0, 8), None);
/// assert_eq!(binomial_parent(6, 0, 8), Some(4));
/// assert_eq!(binomial_parent(7, 0, 8), Some(6));
/// assert_eq!(binomial_parent(1, 3, 8), Some(7)); // position 6, parent position 4
/// ```
pub fn binomial_parent(rank: u32, root: u32, size: u32) -> Option<u32> {
    let p = position(rank, root, size);
    (p != 0).then(|| ((u64::from(root) + u64::from(p & (p - 1))) % u64::from(size)) as u32)
}

/// Protocol §21.2: the ranks `rank` sends a bcast's first frame on to, in
/// the order it sends them: the positions `p + m` for every power of two
/// `m` below the lowest set bit of `p` (below `size` at the root) with `p +
/// m < size`, `m` descending, so the largest subtree gets the frame first.
/// `rank` and `root` are below `size`.
///
/// ```
/// use sperli_wire::binomial_tree::binomial_children;
/// assert_eq!(binomial_children(0, 0, 8), vec![4, 2, 1]);
/// assert_eq!(binomial_children(4, 0, 8), vec![6, 5]);
/// assert_eq!(binomial_children(0, 0, 5), vec![4, 2, 1]);
/// assert_eq!(binomial_children(4, 0, 5), Vec::<u32>::new());
/// assert_eq!(binomial_children(3, 3, 3), vec![2, 1]); // positions 2, 1
/// ```
pub fn binomial_children(rank: u32, root: u32, size: u32) -> Vec<u32> {
    let p = u64::from(position(rank, root, size));
    let n = u64::from(size);
    // Positions below 2^32: `limit` (a power of two, or 2^32 at the root
    // of a job of more than 2^31 ranks) fits a u64.
    let limit = if p == 0 {
        n.next_power_of_two()
    } else {
        p & p.wrapping_neg()
    };
    let mut out = Vec::new();
    let mut m = limit >> 1;
    while m > 0 {
        if p + m < n {
            out.push(((u64::from(root) + p + m) % n) as u32);
        }
        m >>= 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_but_the_root_has_one_parent_that_lists_it_once() {
        for n in 1..=70u32 {
            for root in [0, n / 3, n - 1] {
                let mut parent_of = vec![None; n as usize];
                for r in 0..n {
                    for c in binomial_children(r, root, n) {
                        assert!(parent_of[c as usize].replace(r).is_none(), "n={n}");
                        assert_eq!(binomial_parent(c, root, n), Some(r), "n={n}");
                    }
                }
                for r in 0..n {
                    assert_eq!(parent_of[r as usize].is_none(), r == root, "n={n} r={r}");
                    assert_eq!(binomial_parent(r, root, n).is_none(), r == root);
                }
            }
        }
    }

    #[test]
    fn root_fan_out_is_the_base_2_logarithm_and_depth_the_most_set_bits() {
        for n in 2..=130u32 {
            let log = 32 - (n - 1).leading_zeros();
            assert_eq!(binomial_children(0, 0, n).len() as u32, log, "n={n}");
            // A rank's depth is the number of set bits of its position.
            let bits = (0..n).map(u32::count_ones).max();
            let depth = (0..n)
                .map(|mut r| {
                    let mut d = 0;
                    while let Some(p) = binomial_parent(r, 0, n) {
                        r = p;
                        d += 1;
                    }
                    d
                })
                .max();
            assert_eq!(depth, bits, "n={n}");
            assert!(bits <= Some(log));
        }
    }

    #[test]
    fn a_large_subtree_is_served_first() {
        // Position 8 of 16: children 12, 10, 9 (subtrees of 4, 2, 1).
        assert_eq!(binomial_children(8, 0, 16), vec![12, 10, 9]);
        assert_eq!(binomial_children(9, 0, 16), Vec::<u32>::new());
        assert_eq!(binomial_children(u32::MAX - 1, 0, u32::MAX).len(), 0);
        assert_eq!(binomial_children(0, 0, u32::MAX).len(), 32);
    }
}
