//! The skip list above PIM-tree's data nodes, as the host knows it: which keys head a node
//! at each level, where each node lives, and where its header sits in that DPU's MRAM.
//!
//! PIM-tree keeps three distributed levels of chunked nodes (`L2_HEIGHT` = 3,
//! PT:`common/common.h`) and a replicated top. A key of height h heads a node at every
//! level below min(3, h - 1) (PT:`host/operation.hpp`, insert); the first key of the data
//! plays the part of PIM-tree's `INT64_MIN` sentinel and heads a node at every level, so
//! every query has a node to start from. A level-l node headed by key k holds, in key
//! order, the keys heading level-(l - 1) nodes from k up to the next level-l head (at level
//! 0: the data keys), each with a pointer to that node (at level 0: to the key's data node).
//! The top (L3) indexes the level-2 heads.
//!
//! Placement (PT:`host/operation.hpp`, `hash_to_dpu` and the level-2 root count): level-0
//! and level-1 nodes go to `hash_to_dpu(key, level)`, a level-2 node to the least loaded of
//! four DPUs drawn for it. Each level-2 node's DPU also keeps a copy of every level-1 child
//! (the shadow subtree, PT:`dpu/bnode.h`), so a search pushed to a level-2 node descends
//! two levels on one DPU.
//!
//! The host side of PIM-tree keeps no such mirror: it learns node addresses from the
//! DPUs' replies. pimdes builds it to plan every round before the DPUs run, and checks each
//! DPU reply against it.

use super::{hash_to_dpu, hash64};

/// Distributed levels of chunked nodes (PT:`common/common.h`, `L2_HEIGHT`).
pub const LEVELS: usize = 3;
/// Entries per data block (PT:`common/common.h`, `DB_SIZE`).
pub const BLOCK_ENTRIES: u64 = 16;
/// DPUs drawn for a level-2 node, which goes to the least loaded of them
/// (PT:`host/operation.hpp`, insert: four random DPUs, `l2_root_count`).
const LEVEL2_CHOICES: u64 = 4;

/// A pointer to a node on a DPU: the DPU in the high half, the MRAM address in the low
/// (PIM-tree's `pptr`, PT:`common/pptr.h`).
pub fn pptr(dpu: u32, addr: u64) -> u64 {
    debug_assert!(addr < 1 << 32);
    ((dpu as u64) << 32) | addr
}

/// The DPU of a pointer.
pub fn pptr_dpu(p: u64) -> u32 {
    (p >> 32) as u32
}

/// The MRAM address of a pointer.
pub fn pptr_addr(p: u64) -> u64 {
    p & 0xffff_ffff
}

/// Blocks of one chain of a node of `len` entries (PT:`dpu/data_block.h`: len / 16 + 1).
pub fn chain_blocks(len: u64) -> u64 {
    len / BLOCK_ENTRIES + 1
}

/// Chains of a node: keys and pointers, and at level 2 the shadow copies' addresses.
pub fn chains(level: usize) -> u64 {
    if level == 2 { 3 } else { 2 }
}

/// The keys heading a level-0 node, with their heights, and each node's data keys: what
/// one pass over the data gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skeleton {
    /// Sorted; the first is the data's first key (the sentinel), the rest have height >= 2.
    pub heads: Vec<u64>,
    pub heights: Vec<u8>,
    /// Data keys of each level-0 node.
    pub entries: Vec<u32>,
}

impl Skeleton {
    /// Adds the next data key (keys in increasing order) of height `height`.
    pub fn push(&mut self, key: u64, height: u64) {
        if self.heads.is_empty() || height >= 2 {
            self.heads.push(key);
            // The sentinel reaches the top.
            let h = if self.heads.len() == 1 { 4 } else { height };
            self.heights.push(h.min(u8::MAX as u64) as u8);
            self.entries.push(0);
        }
        *self.entries.last_mut().expect("a head was pushed") += 1;
    }
}

/// The three levels with their placement and header slots.
#[derive(Debug, Clone)]
pub struct SkipList {
    pub dpus: u32,
    /// `heads[l]`: sorted keys heading a level-l node.
    heads: [Vec<u64>; LEVELS],
    /// For a node of level l >= 1, the index in `heads[l - 1]` of its first child.
    first_child: [Vec<u32>; LEVELS],
    /// Entries of each level-0 node (data keys).
    entries0: Vec<u32>,
    /// The DPU of each node.
    dpu: [Vec<u32>; LEVELS],
    /// The header slot of each node on its DPU.
    slot: [Vec<u32>; LEVELS],
    /// The slot of each level-1 node's shadow copy, on its parent's DPU.
    shadow_slot: Vec<u32>,
    /// Per DPU, its nodes of each level (indices, in key order).
    on_dpu: [Vec<Vec<u32>>; LEVELS],
    /// Per DPU: headers and data blocks its nodes take.
    pub headers: Vec<u64>,
    pub blocks: Vec<u64>,
}

impl SkipList {
    /// Places the nodes the skeleton defines on `dpus` DPUs; `seed` draws the level-2
    /// choices.
    pub fn new(seed: u64, dpus: u32, skeleton: Skeleton) -> SkipList {
        assert!(!skeleton.heads.is_empty(), "the data has a first key");
        let Skeleton {
            heads: heads0,
            heights,
            entries: entries0,
        } = skeleton;
        let above = |min: u8| -> (Vec<u64>, Vec<u32>) {
            heads0
                .iter()
                .zip(&heights)
                .enumerate()
                .filter(|(_, (_, h))| **h >= min)
                .map(|(i, (k, _))| (*k, i as u32))
                .unzip()
        };
        let (heads1, at1) = above(3);
        let (heads2, _) = above(4);
        // Level-2 heads are level-1 heads too: their index among the level-1 heads.
        let at2: Vec<u32> = heads2
            .iter()
            .map(|k| heads1.binary_search(k).expect("nested") as u32)
            .collect();
        let p = dpus as usize;
        let dpu0: Vec<u32> = heads0.iter().map(|&k| hash_to_dpu(k, 0, dpus)).collect();
        let dpu1: Vec<u32> = heads1.iter().map(|&k| hash_to_dpu(k, 1, dpus)).collect();
        let dpu2 = least_loaded(seed, dpus, &heads2);
        let mut list = SkipList {
            dpus,
            heads: [heads0, heads1, heads2],
            first_child: [Vec::new(), at1, at2],
            entries0,
            dpu: [dpu0, dpu1, dpu2],
            slot: [Vec::new(), Vec::new(), Vec::new()],
            shadow_slot: Vec::new(),
            on_dpu: [
                vec![Vec::new(); p],
                vec![Vec::new(); p],
                vec![Vec::new(); p],
            ],
            headers: vec![0; p],
            blocks: vec![0; p],
        };
        list.allocate();
        list
    }

    /// Header slots per DPU, in this order: level-2 nodes, the shadow copies of their
    /// children, level-1 nodes, level-0 nodes (each in key order); and the data blocks.
    fn allocate(&mut self) {
        let take = |headers: &mut Vec<u64>, blocks: &mut Vec<u64>, d: u32, chains: u64, len| {
            let s = headers[d as usize];
            headers[d as usize] += 1;
            blocks[d as usize] += chains * chain_blocks(len);
            s as u32
        };
        let (mut headers, mut blocks) = (vec![0; self.dpus as usize], vec![0; self.dpus as usize]);
        let mut slot2 = Vec::with_capacity(self.heads[2].len());
        let mut shadow = vec![u32::MAX; self.heads[1].len()];
        for i in 0..self.heads[2].len() {
            let d = self.dpu[2][i];
            slot2.push(take(&mut headers, &mut blocks, d, 3, self.len(2, i)));
            for c in self.children(2, i) {
                shadow[c] = take(&mut headers, &mut blocks, d, 2, self.len(1, c));
            }
        }
        let mut slots = [Vec::new(), Vec::new(), slot2];
        for level in [1, 0] {
            slots[level] = (0..self.heads[level].len())
                .map(|i| {
                    let d = self.dpu[level][i];
                    take(&mut headers, &mut blocks, d, 2, self.len(level, i))
                })
                .collect();
        }
        for (level, on) in self.on_dpu.iter_mut().enumerate() {
            for (i, &d) in self.dpu[level].iter().enumerate() {
                on[d as usize].push(i as u32);
            }
        }
        self.slot = slots;
        self.shadow_slot = shadow;
        self.headers = headers;
        self.blocks = blocks;
    }

    /// Nodes at `level`.
    pub fn nodes(&self, level: usize) -> usize {
        self.heads[level].len()
    }

    /// The key heading node `i` of `level`.
    pub fn head(&self, level: usize, i: usize) -> u64 {
        self.heads[level][i]
    }

    /// The heads of `level` (sorted).
    pub fn heads(&self, level: usize) -> &[u64] {
        &self.heads[level]
    }

    /// The node of `level` whose keys cover `key`: the last head at or below it, or the
    /// first node (the sentinel's) when `key` is below every head.
    pub fn cover(&self, level: usize, key: u64) -> usize {
        self.heads[level]
            .partition_point(|&h| h <= key)
            .saturating_sub(1)
    }

    /// The children of node `i` of `level` >= 1: indices of level `level - 1`.
    pub fn children(&self, level: usize, i: usize) -> std::ops::Range<usize> {
        assert!(level >= 1);
        let first = &self.first_child[level];
        let end = first
            .get(i + 1)
            .map_or(self.heads[level - 1].len(), |&c| c as usize);
        first[i] as usize..end
    }

    /// Entries of node `i` of `level`.
    pub fn len(&self, level: usize, i: usize) -> u64 {
        if level == 0 {
            self.entries0[i] as u64
        } else {
            self.children(level, i).len() as u64
        }
    }

    /// The DPU of node `i` of `level`.
    pub fn dpu(&self, level: usize, i: usize) -> u32 {
        self.dpu[level][i]
    }

    /// The header slot of node `i` of `level` on its DPU.
    pub fn slot(&self, level: usize, i: usize) -> u32 {
        self.slot[level][i]
    }

    /// The slot of level-1 node `i`'s shadow copy on its parent's DPU.
    pub fn shadow_slot(&self, i: usize) -> u32 {
        self.shadow_slot[i]
    }

    /// The nodes of `level` on DPU `d`.
    pub fn on_dpu(&self, level: usize, d: u32) -> &[u32] {
        &self.on_dpu[level][d as usize]
    }
}

/// The DPU of each level-2 node: the least loaded of four drawn for it, counting the
/// level-2 nodes placed before it (key order); ties go to the first drawn.
fn least_loaded(seed: u64, dpus: u32, heads: &[u64]) -> Vec<u32> {
    let mut count = vec![0u32; dpus as usize];
    heads
        .iter()
        .map(|&k| {
            let base = hash64(k ^ hash64(seed ^ 0x5eed_0002));
            let d = (0..LEVEL2_CHOICES)
                .map(|j| (hash64(base.wrapping_add(j)) % dpus as u64) as u32)
                .min_by_key(|&d| count[d as usize])
                .expect("four choices");
            count[d as usize] += 1;
            d
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pimtree::image::key_height;

    fn skeleton(seed: u64, keys: &[u64]) -> Skeleton {
        let mut s = Skeleton::default();
        for &k in keys {
            s.push(k, key_height(seed, k));
        }
        s
    }

    #[test]
    fn levels_nest_and_children_partition_each_level() {
        let keys: Vec<u64> = (1..200_000u64).map(|i| i * 1000).collect();
        let list = SkipList::new(5, 64, skeleton(5, &keys));
        assert_eq!(list.head(0, 0), 1000);
        for level in 0..LEVELS {
            assert_eq!(list.head(level, 0), 1000, "the sentinel heads every level");
        }
        let total0: u64 = (0..list.nodes(0)).map(|i| list.len(0, i)).sum();
        assert_eq!(total0, keys.len() as u64);
        for level in 1..LEVELS {
            let mut next = 0;
            for i in 0..list.nodes(level) {
                let c = list.children(level, i);
                assert_eq!(c.start, next, "children are consecutive");
                assert_eq!(list.head(level - 1, c.start), list.head(level, i));
                next = c.end;
            }
            assert_eq!(next, list.nodes(level - 1));
        }
        // About 1/16, 1/256, 1/4096 of the keys head nodes.
        assert!(
            (11_000..14_000).contains(&list.nodes(0)),
            "{}",
            list.nodes(0)
        );
        assert!((600..980).contains(&list.nodes(1)), "{}", list.nodes(1));
        assert!((25..80).contains(&list.nodes(2)), "{}", list.nodes(2));
    }

    #[test]
    fn cover_is_the_last_head_at_or_below() {
        let keys: Vec<u64> = (1..50_000u64).map(|i| i * 10).collect();
        let list = SkipList::new(1, 8, skeleton(1, &keys));
        for q in [0, 5, 10, 11, 123_456, 499_990, u64::MAX] {
            for level in 0..LEVELS {
                let i = list.cover(level, q);
                let heads = list.heads(level);
                let want = heads.iter().rposition(|&h| h <= q).unwrap_or(0);
                assert_eq!(i, want, "level {level}, key {q}");
            }
        }
    }

    #[test]
    fn slots_are_dense_per_dpu_and_shadow_copies_sit_with_their_parent() {
        let keys: Vec<u64> = (1..300_000u64).map(|i| i * 7).collect();
        let list = SkipList::new(9, 16, skeleton(9, &keys));
        let mut used = vec![Vec::new(); 16];
        for level in 0..LEVELS {
            for i in 0..list.nodes(level) {
                used[list.dpu(level, i) as usize].push(list.slot(level, i));
            }
        }
        for i in 0..list.nodes(2) {
            for c in list.children(2, i) {
                used[list.dpu(2, i) as usize].push(list.shadow_slot(c));
            }
        }
        for (d, mut s) in used.into_iter().enumerate() {
            s.sort_unstable();
            assert_eq!(s, (0..s.len() as u32).collect::<Vec<_>>(), "DPU {d}");
            assert_eq!(s.len() as u64, list.headers[d]);
        }
    }

    #[test]
    fn level2_nodes_spread_over_the_least_loaded_choices() {
        let heads: Vec<u64> = (0..4096u64).map(|i| i * 977).collect();
        let d = least_loaded(3, 64, &heads);
        let mut count = [0u32; 64];
        for x in d {
            count[x as usize] += 1;
        }
        // 64 per DPU on average; the power of four choices keeps the maximum near it.
        assert!(count.iter().all(|&c| (56..=72).contains(&c)), "{count:?}");
    }
}
