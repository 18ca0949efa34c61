//! A B+-tree as the bytes it occupies in MRAM, in B+-Forest's layout: 256-byte nodes,
//! leaves of up to 15 key-value pairs linked to their right sibling, internal nodes of up to
//! 22 children, and links that carry the target node's occupancy so that one DMA of exactly
//! the used bytes reads a node.
//!
//! Layout (all little-endian, node `i` at byte `i x 256` of the tree's region):
//! - link (u32): node index << 8 | used count (pairs for a leaf, keys for an internal node);
//!   [`NO_LINK`] for "no right sibling".
//! - leaf with n pairs: `[next: link u32][n: u32][keys: n x u64][values: n x u64]`, read with
//!   16n + 8 bytes (248 when full).
//! - internal node with n keys (n + 1 children): `[keys: n x u64][children: (n + 1) x link]`,
//!   read with 12n + 4 bytes rounded up to a multiple of 8 (12n + 8 for even n), at most 256.
//!   Child i holds the keys k with `keys[i - 1] <= k < keys[i]`.
//!
//! The trees are static (bulk-loaded for a run), so values can follow keys directly; the
//! authors' layout grows keys and values from opposite ends to allow inserts, with the same
//! bytes read per node.

use super::layout::{INTERNAL_CHILDREN, LEAF_PAIRS, NODE_BYTES, tree_bytes};

/// A link to a node: index and occupancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link(pub u32);

/// "No right sibling".
pub const NO_LINK: Link = Link(u32::MAX);

/// Largest node index a link can hold (24 bits).
pub const MAX_NODES: u64 = 1 << 24;

impl Link {
    pub fn new(node: u64, used: u64) -> Link {
        assert!(node < MAX_NODES && used < 256, "link fields out of range");
        Link(((node as u32) << 8) | used as u32)
    }

    pub fn node(self) -> u64 {
        (self.0 >> 8) as u64
    }

    pub fn used(self) -> u64 {
        (self.0 & 0xff) as u64
    }

    /// Byte offset of the node within its tree's region.
    pub fn offset_bytes(self) -> u64 {
        self.node() * NODE_BYTES
    }
}

/// Bytes one DMA moves to read a leaf of `pairs` pairs.
pub fn leaf_read_bytes(pairs: u64) -> u64 {
    16 * pairs + 8
}

/// Bytes one DMA moves to read an internal node of `keys` keys.
pub fn internal_read_bytes(keys: u64) -> u64 {
    (12 * keys + 4).next_multiple_of(8)
}

/// A tree's MRAM image.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeImage {
    pub bytes: Vec<u8>,
    pub root: Link,
    /// Levels, 1 for a tree that is a single leaf.
    pub height: u32,
    pub pairs: u64,
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Reads a little-endian u32 at `at`.
pub fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

/// Reads a little-endian u64 at `at`.
pub fn get_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

impl TreeImage {
    /// Bulk-loads a tree from pairs in strictly increasing key order, with full nodes.
    pub fn build(pairs: impl IntoIterator<Item = (u64, u64)>) -> TreeImage {
        Self::build_sized(0, pairs)
    }

    /// As [`TreeImage::build`], reserving the bytes of `expected_pairs` pairs up front so
    /// that a large tree is not copied as it grows.
    pub fn build_sized(
        expected_pairs: u64,
        pairs: impl IntoIterator<Item = (u64, u64)>,
    ) -> TreeImage {
        Self::build_into(Vec::new(), expected_pairs, pairs)
    }

    /// As [`TreeImage::build_sized`], into `bytes`'s allocation (its contents are dropped):
    /// a caller that builds many trees one after another hands each image's bytes back
    /// here, so the memory is allocated (and its pages touched) once, not once per tree.
    pub fn build_into(
        mut bytes: Vec<u8>,
        expected_pairs: u64,
        pairs: impl IntoIterator<Item = (u64, u64)>,
    ) -> TreeImage {
        bytes.clear();
        bytes.reserve(tree_bytes(expected_pairs) as usize);
        // (first key, link) of each leaf.
        let mut leaves: Vec<(u64, Link)> = Vec::new();
        let mut leaf: Vec<(u64, u64)> = Vec::with_capacity(LEAF_PAIRS as usize);
        let mut count = 0u64;
        let mut last_key: Option<u64> = None;
        for (k, v) in pairs {
            assert!(
                last_key.is_none_or(|l| l < k),
                "pairs must be in strictly increasing key order"
            );
            last_key = Some(k);
            leaf.push((k, v));
            count += 1;
            if leaf.len() == LEAF_PAIRS as usize {
                push_leaf(&mut bytes, &mut leaves, &mut leaf);
            }
        }
        if !leaf.is_empty() || leaves.is_empty() {
            push_leaf(&mut bytes, &mut leaves, &mut leaf);
        }
        let (root, height) = push_internal_levels(&mut bytes, leaves);
        TreeImage {
            bytes,
            root,
            height,
            pairs: count,
        }
    }

    pub fn nodes(&self) -> u64 {
        self.bytes.len() as u64 / NODE_BYTES
    }

    /// The used bytes of the node `link` points to: what one DMA reads.
    pub fn node_bytes(&self, link: Link, leaf: bool) -> &[u8] {
        let start = link.offset_bytes() as usize;
        let len = if leaf {
            leaf_read_bytes(link.used())
        } else {
            internal_read_bytes(link.used())
        };
        &self.bytes[start..start + len as usize]
    }
}

/// A decoded view of an internal node's bytes (as read by one DMA).
pub struct Internal<'a> {
    bytes: &'a [u8],
    keys: usize,
}

impl<'a> Internal<'a> {
    pub fn new(bytes: &'a [u8], keys: u64) -> Internal<'a> {
        Internal {
            bytes,
            keys: keys as usize,
        }
    }

    pub fn keys(&self) -> usize {
        self.keys
    }

    pub fn key(&self, i: usize) -> u64 {
        get_u64(self.bytes, 8 * i)
    }

    pub fn child(&self, i: usize) -> Link {
        Link(get_u32(self.bytes, 8 * self.keys + 4 * i))
    }

    /// The child whose range holds `key` and the number of keys compared (for cost models):
    /// a linear scan, as the DPU code does over at most 21 keys.
    pub fn child_for(&self, key: u64) -> (Link, usize) {
        let mut i = 0;
        while i < self.keys && self.key(i) <= key {
            i += 1;
        }
        (self.child(i), (i + 1).min(self.keys))
    }
}

/// A decoded view of a leaf's bytes (as read by one DMA).
pub struct Leaf<'a> {
    bytes: &'a [u8],
    pairs: usize,
}

impl<'a> Leaf<'a> {
    pub fn new(bytes: &'a [u8]) -> Leaf<'a> {
        let pairs = get_u32(bytes, 4) as usize;
        Leaf { bytes, pairs }
    }

    pub fn pairs(&self) -> usize {
        self.pairs
    }

    pub fn next(&self) -> Link {
        Link(get_u32(self.bytes, 0))
    }

    pub fn key(&self, i: usize) -> u64 {
        get_u64(self.bytes, 8 + 8 * i)
    }

    pub fn value(&self, i: usize) -> u64 {
        get_u64(self.bytes, 8 + 8 * self.pairs + 8 * i)
    }

    /// Every (key, value) in key order, as [`key`](Self::key) and [`value`](Self::value)
    /// give them, with one bounds check for the leaf rather than two per pair.
    pub fn pairs_iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let (keys, rest) = self.bytes[8..].split_at(8 * self.pairs);
        let (keys, _) = keys.as_chunks::<8>();
        let (values, _) = rest[..8 * self.pairs].as_chunks::<8>();
        let word = |b: &[u8; 8]| u64::from_le_bytes(*b);
        keys.iter().map(word).zip(values.iter().map(word))
    }
}

/// Appends a leaf holding the pairs of `leaf` (then empties it) to `bytes`, links the last
/// leaf of `leaves` to it, and adds it to `leaves` as (first key, link).
fn push_leaf(bytes: &mut Vec<u8>, leaves: &mut Vec<(u64, Link)>, leaf: &mut Vec<(u64, u64)>) {
    let node = (bytes.len() as u64) / NODE_BYTES;
    bytes.resize(bytes.len() + NODE_BYTES as usize, 0);
    let base = (node * NODE_BYTES) as usize;
    let n = leaf.len();
    put_u32(bytes, base, NO_LINK.0);
    put_u32(bytes, base + 4, n as u32);
    for (i, &(k, v)) in leaf.iter().enumerate() {
        put_u64(bytes, base + 8 + 8 * i, k);
        put_u64(bytes, base + 8 + 8 * n + 8 * i, v);
    }
    let link = Link::new(node, n as u64);
    if let Some(&(_, prev)) = leaves.last() {
        put_u32(bytes, prev.offset_bytes() as usize, link.0);
    }
    leaves.push((leaf.first().map_or(0, |p| p.0), link));
    leaf.clear();
}

/// Appends the internal levels above `level` (the (first key, link) of each node of the
/// lowest level) to `bytes`, one level after another; the root's link and the tree's height.
fn push_internal_levels(bytes: &mut Vec<u8>, mut level: Vec<(u64, Link)>) -> (Link, u32) {
    let mut height = 1;
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(INTERNAL_CHILDREN as usize));
        for group in level.chunks(INTERNAL_CHILDREN as usize) {
            let node = (bytes.len() as u64) / NODE_BYTES;
            bytes.resize(bytes.len() + NODE_BYTES as usize, 0);
            let base = (node * NODE_BYTES) as usize;
            let keys = group.len() - 1;
            for (i, &(first, _)) in group[1..].iter().enumerate() {
                put_u64(bytes, base + 8 * i, first);
            }
            for (i, &(_, link)) in group.iter().enumerate() {
                put_u32(bytes, base + 8 * keys + 4 * i, link.0);
            }
            next.push((group[0].0, Link::new(node, keys as u64)));
        }
        level = next;
        height += 1;
    }
    (level[0].1, height)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forest::layout::bulk_loaded_levels;

    fn pairs(n: u64) -> Vec<(u64, u64)> {
        (0..n).map(|i| (10 * i + 5, i % 7)).collect()
    }

    /// Descends from the root to the leaf holding `key`, following links.
    fn find_leaf(t: &TreeImage, key: u64) -> Link {
        let mut link = t.root;
        for _ in 1..t.height {
            link = Internal::new(t.node_bytes(link, false), link.used())
                .child_for(key)
                .0;
        }
        link
    }

    #[test]
    fn read_sizes_match_the_authors_layout() {
        assert_eq!(leaf_read_bytes(15), 248);
        assert_eq!(leaf_read_bytes(1), 24);
        assert_eq!(internal_read_bytes(21), 256);
        assert_eq!(internal_read_bytes(20), 248); // 12n + 8 for even n
        assert_eq!(internal_read_bytes(1), 16); // 12n + 4 for odd n
    }

    #[test]
    fn image_size_matches_the_layout_model() {
        for n in [0u64, 1, 15, 16, 300, 330, 331, 5000, 7261] {
            let t = TreeImage::build(pairs(n));
            assert_eq!(t.bytes.len() as u64, tree_bytes(n), "{n} pairs");
            assert_eq!(t.height as usize, bulk_loaded_levels(n).len());
            assert_eq!(t.pairs, n);
        }
    }

    #[test]
    fn every_key_is_found_and_leaves_chain_in_order() {
        let data = pairs(7261);
        let t = TreeImage::build(data.iter().copied());
        for &(k, v) in &data {
            let leaf_link = find_leaf(&t, k);
            let leaf = Leaf::new(t.node_bytes(leaf_link, true));
            let i = (0..leaf.pairs())
                .find(|&i| leaf.key(i) == k)
                .expect("key in its leaf");
            assert_eq!(leaf.value(i), v);
        }
        // Walking the sibling chain from the leftmost leaf yields every pair in order.
        let mut link = find_leaf(&t, 0);
        let mut seen = Vec::new();
        while link != NO_LINK {
            let leaf = Leaf::new(t.node_bytes(link, true));
            let by_index: Vec<(u64, u64)> = (0..leaf.pairs())
                .map(|i| (leaf.key(i), leaf.value(i)))
                .collect();
            assert!(leaf.pairs_iter().eq(by_index.iter().copied()));
            seen.extend(by_index);
            link = leaf.next();
        }
        assert_eq!(seen, data);
    }
}
