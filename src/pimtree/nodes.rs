//! A DPU's part of the skip list in MRAM: chunked-node headers, their chains of data
//! blocks, and the replicated top. The byte formats are ours, sized as PIM-tree's
//! (PT:`dpu/node_dpu.h`, `dpu/data_block.h`, `dpu/l3_ab_tree.h`):
//!
//! - **header** (48 B, [`BNODE_BYTES`]): level, entries, the first block of the key chain,
//!   of the pointer chain and of the shadow-copy chain (0: none), the head key;
//! - **data block** (136 B): the next block's address (0: last), then 16 entries;
//! - **top node** (288 B): unused, the right sibling (leaves; 0: last), height (0: leaf),
//!   entries, 16 keys, 16 pointers (a leaf's point at level-2 nodes, an inner node's at
//!   its children). The top region's first node slot holds the root's address and the
//!   tree's height instead.
//!
//! Bulk-built top nodes are full (16 entries); PIM-tree's (a, b)-tree keeps 8 to 16.

use super::image::{BNODE_BYTES, DATA_BLOCK_BYTES, L3_NODE_BYTES, Layout};
use super::skiplist::{BLOCK_ENTRIES, SkipList, chain_blocks, pptr};
use crate::dpu::Mram;

/// Words of a header, a data block and a top node.
pub const HEADER_WORDS: usize = (BNODE_BYTES / 8) as usize;
pub const BLOCK_WORDS: usize = (DATA_BLOCK_BYTES / 8) as usize;
pub const TOP_NODE_WORDS: usize = (L3_NODE_BYTES / 8) as usize;
/// Entries of a top node.
pub const TOP_FANOUT: usize = 16;

/// The MRAM address of header slot `slot`.
pub fn header_addr(layout: &Layout, slot: u32) -> u64 {
    layout.headers.base + slot as u64 * BNODE_BYTES
}

/// A pointer to node `i` of `level`.
pub fn node_pptr(layout: &Layout, list: &SkipList, level: usize, i: usize) -> u64 {
    pptr(list.dpu(level, i), header_addr(layout, list.slot(level, i)))
}

/// Header slots and data blocks a DPU's MRAM holds.
pub fn capacity(layout: &Layout) -> (u64, u64) {
    (
        layout.headers.bytes / BNODE_BYTES,
        layout.blocks.bytes / DATA_BLOCK_BYTES,
    )
}

/// The image of the replicated top, the same on every DPU.
#[derive(Debug, Clone)]
pub struct Top {
    pub words: Vec<u64>,
    /// Nodes, the root slot included.
    pub nodes: u64,
    pub height: u64,
}

impl Top {
    /// The top over the level-2 heads, leaves first.
    pub fn build(layout: &Layout, list: &SkipList) -> Top {
        let addr = |slot: usize| layout.top.base + slot as u64 * L3_NODE_BYTES;
        let mut words = vec![0u64; TOP_NODE_WORDS];
        // (first key, address) of each node of the level being built.
        let mut level: Vec<(u64, u64)> = (0..list.nodes(2))
            .map(|i| {
                let p = pptr(list.dpu(2, i), header_addr(layout, list.slot(2, i)));
                (list.head(2, i), p)
            })
            .collect();
        let mut height = 0u64;
        loop {
            let first_slot = words.len() / TOP_NODE_WORDS;
            let groups = level.len().div_ceil(TOP_FANOUT);
            let mut up = Vec::with_capacity(groups);
            for (g, group) in level.chunks(TOP_FANOUT).enumerate() {
                let right = if height == 0 && g + 1 < groups {
                    addr(first_slot + g + 1)
                } else {
                    0
                };
                let mut node = vec![0, right, height, group.len() as u64];
                node.resize(TOP_NODE_WORDS, 0);
                for (j, &(k, p)) in group.iter().enumerate() {
                    node[4 + j] = k;
                    node[4 + TOP_FANOUT + j] = p;
                }
                up.push((group[0].0, addr(first_slot + g)));
                words.extend_from_slice(&node);
            }
            height += 1;
            if up.len() == 1 {
                words[0] = up[0].1;
                words[1] = height;
                break;
            }
            level = up;
        }
        Top {
            nodes: (words.len() / TOP_NODE_WORDS) as u64,
            words,
            height,
        }
    }
}

/// Writes DPU `d`'s nodes: the top, its level-2 nodes with their children's shadow
/// copies, its level-1 nodes, and its level-0 nodes, whose entries (data key, pointer to
/// the data node) the caller gathered: `level0[j]` is node `list.on_dpu(0, d)[j]`. The
/// caller checked the capacities.
pub fn write_nodes(
    mram: &mut Mram,
    layout: &Layout,
    list: &SkipList,
    d: u32,
    level0: &[Vec<(u64, u64)>],
    top: &Top,
) {
    mram.write_u64s(layout.top.base, &top.words);
    let mut w = Writer {
        mram,
        layout,
        next_block: layout.blocks.base,
    };
    let level1 = |c: usize| -> (Vec<u64>, Vec<u64>) {
        list.children(1, c)
            .map(|g| (list.head(0, g), node_pptr(layout, list, 0, g)))
            .unzip()
    };
    for &i in list.on_dpu(2, d) {
        let i = i as usize;
        let children = list.children(2, i);
        let keys: Vec<u64> = children.clone().map(|c| list.head(1, c)).collect();
        let ptrs: Vec<u64> = children
            .clone()
            .map(|c| node_pptr(layout, list, 1, c))
            .collect();
        let copies: Vec<u64> = children
            .clone()
            .map(|c| header_addr(layout, list.shadow_slot(c)))
            .collect();
        w.node(list.slot(2, i), 2, &keys, &ptrs, Some(&copies));
        for c in children {
            let (k, p) = level1(c);
            w.node(list.shadow_slot(c), 1, &k, &p, None);
        }
    }
    for &i in list.on_dpu(1, d) {
        let (k, p) = level1(i as usize);
        w.node(list.slot(1, i as usize), 1, &k, &p, None);
    }
    let on0 = list.on_dpu(0, d);
    assert_eq!(on0.len(), level0.len(), "one entry list per level-0 node");
    for (&i, entries) in on0.iter().zip(level0) {
        assert_eq!(entries.len() as u64, list.len(0, i as usize));
        let (k, p): (Vec<u64>, Vec<u64>) = entries.iter().copied().unzip();
        w.node(list.slot(0, i as usize), 0, &k, &p, None);
    }
    assert!(w.next_block <= layout.blocks.base + layout.blocks.bytes);
}

struct Writer<'a> {
    mram: &'a mut Mram,
    layout: &'a Layout,
    next_block: u64,
}

impl Writer<'_> {
    fn node(&mut self, slot: u32, level: u64, keys: &[u64], ptrs: &[u64], copies: Option<&[u64]>) {
        let key_chain = self.chain(keys);
        let ptr_chain = self.chain(ptrs);
        let copy_chain = copies.map_or(0, |c| self.chain(c));
        let len = keys.len() as u64;
        let head = keys.first().copied().unwrap_or(0);
        let header = [level, len, key_chain, ptr_chain, copy_chain, head];
        self.mram
            .write_u64s(header_addr(self.layout, slot), &header);
    }

    /// Writes a chain of `len / 16 + 1` blocks holding `entries`; returns its first block.
    fn chain(&mut self, entries: &[u64]) -> u64 {
        let blocks = chain_blocks(entries.len() as u64);
        let first = self.next_block;
        for b in 0..blocks {
            let at = self.next_block;
            self.next_block += DATA_BLOCK_BYTES;
            let next = if b + 1 < blocks { self.next_block } else { 0 };
            let mut words = [0u64; BLOCK_WORDS];
            words[0] = next;
            let from = (b * BLOCK_ENTRIES) as usize;
            let to = (from + BLOCK_ENTRIES as usize).min(entries.len());
            if from < to {
                words[1..1 + to - from].copy_from_slice(&entries[from..to]);
            }
            self.mram.write_u64s(at, &words);
        }
        first
    }
}
