//! Who sends a bcast's first frame to whom (protocol §21): with HELLO
//! feature bit 8 the v1 data frame, or the OPEN of a pipelined bcast, goes
//! down a binomial tree, each rank handing it on unchanged to its
//! children; without it the root sends it to every rank (protocol §8.2,
//! §14.3).

use sperli_wire::binomial_tree::{binomial_children, binomial_parent, runs_binomial_bcast};

use crate::comm::Comm;
use crate::peers::Peers;

impl<L: Peers> Comm<L> {
    /// Whether this job runs its bcasts along the binomial tree (feature
    /// bit 8 negotiated, protocol §21.1).
    pub(crate) fn binomial_bcast(&self) -> bool {
        runs_binomial_bcast(self.features)
    }

    /// The rank this rank takes a bcast's first frame from: with bit 8
    /// its parent in the binomial tree of `root` (protocol §21.2), else the
    /// root itself (§8.2, §14.3). Not called at the root.
    pub(crate) fn first_frame_source(&self, root: u32) -> u32 {
        match self.binomial_bcast() {
            true => binomial_parent(self.rank(), root, self.size()).unwrap_or(root),
            false => root,
        }
    }

    /// The ranks this rank sends a bcast's first frame to, in order: with
    /// bit 8 its children in the binomial tree of `root`, largest subtree
    /// first (protocol §21.2); else, at the root, every other rank in
    /// ascending order, and nobody elsewhere (§8.2, §14.3).
    pub(crate) fn first_frame_targets(&self, root: u32) -> Vec<u32> {
        let (me, n) = (self.rank(), self.size());
        if self.binomial_bcast() {
            binomial_children(me, root, n)
        } else if me == root {
            (0..n).filter(|&r| r != root).collect()
        } else {
            Vec::new()
        }
    }
}
