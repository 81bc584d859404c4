//! The vectors of HELLO feature bit 8, the binomial tree (protocol
//! §21.4): `binomial-tree` entries that state, for a rank of a tree rooted
//! at some rank of a communicator of some size, the rank a frame down the
//! tree comes from and the ranks it sends that frame on to, in order. The
//! stated lines are derived from `sperli_wire::binomial_tree`.

use sperli_wire::binomial_tree::{binomial_children, binomial_parent};

use super::verify::num;
use super::Entry;

/// The derived lines of a `binomial-tree` entry from its `tree:` line.
pub fn derive_tree(e: Entry) -> Result<Entry, String> {
    let tree = e.get("tree").unwrap_or("").to_string();
    let size: u32 = num(&tree, "size")?;
    let root: u32 = num(&tree, "root")?;
    let rank: u32 = num(&tree, "rank")?;
    if size == 0 || root >= size || rank >= size {
        return Err(format!(
            "tree: root and rank must be below size in {tree:?}"
        ));
    }
    let parent = binomial_parent(rank, root, size).map_or("none".into(), |p| p.to_string());
    let kids = binomial_children(rank, root, size);
    let children = match kids.is_empty() {
        true => "none".to_string(),
        false => kids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" "),
    };
    Ok(e.with("parent", parent).with("children", children))
}

fn tree(size: u32, root: u32, rank: u32) -> Entry {
    let e = Entry::new(
        &format!("binomial-tree-size-{size}-root-{root}-rank-{rank}"),
        "binomial-tree",
    )
    .with("tree", format!("size={size} root={root} rank={rank}"));
    derive_tree(e).unwrap_or_else(|w| panic!("size {size}: {w}"))
}

/// Every bit-8 entry: every rank of 8 ranks from root 3 and of 13 ranks
/// from root 0 (a size that is no power of two), a job of one rank, both
/// ranks of two, and ranks of large jobs where positions need 32 bits.
pub fn entries() -> Vec<Entry> {
    let mut v = vec![tree(1, 0, 0), tree(2, 1, 1), tree(2, 1, 0)];
    v.extend((0..8).map(|r| tree(8, 3, r)));
    v.extend((0..13).map(|r| tree(13, 0, r)));
    v.push(tree(4096, 4000, 3999));
    v.push(tree(4096, 4000, 1000));
    v.push(tree(u32::MAX, 0, 0));
    v.push(tree(u32::MAX, 0, u32::MAX - 1));
    v.push(tree(u32::MAX, u32::MAX - 1, 5));
    v
}
