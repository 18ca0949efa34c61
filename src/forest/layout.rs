//! Geometry of B+-Forest's per-DPU B+-trees, following the authors' layout: 256-byte
//! nodes, leaves of up to 15 key-value pairs, internal nodes of up to 22 children.

/// Bytes of one tree node in MRAM.
pub const NODE_BYTES: u64 = 256;
/// Key-value pairs a leaf holds at most.
pub const LEAF_PAIRS: u64 = 15;
/// Children an internal node holds at most.
pub const INTERNAL_CHILDREN: u64 = 22;
/// Bytes of one key-value pair (64-bit key, 64-bit value).
pub const PAIR_BYTES: u64 = 16;

/// Nodes per level of a tree bulk-loaded from `pairs` sorted pairs with full nodes,
/// leaves first. An empty tree still has one (empty) leaf as its root.
pub fn bulk_loaded_levels(pairs: u64) -> Vec<u64> {
    let mut levels = vec![pairs.div_ceil(LEAF_PAIRS).max(1)];
    while *levels.last().expect("levels is never empty") > 1 {
        let below = *levels.last().expect("levels is never empty");
        levels.push(below.div_ceil(INTERNAL_CHILDREN));
    }
    levels
}

/// MRAM bytes of a bulk-loaded tree holding `pairs` pairs.
pub fn tree_bytes(pairs: u64) -> u64 {
    bulk_loaded_levels(pairs).iter().sum::<u64>() * NODE_BYTES
}

/// MRAM bytes of a DPU's trees: the cold tree, and the hot tree when it has hot pairs.
pub fn dpu_trees_bytes(cold_pairs: u64, hot_pairs: u64) -> u64 {
    tree_bytes(cold_pairs)
        + if hot_pairs > 0 {
            tree_bytes(hot_pairs)
        } else {
            0
        }
}

/// Height of a bulk-loaded tree (1 = a single leaf).
pub fn tree_height(pairs: u64) -> u32 {
    bulk_loaded_levels(pairs).len() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_worked_by_hand() {
        // 300 pairs: 20 leaves, 1 internal node -> 21 nodes, height 2 (one chunk).
        assert_eq!(bulk_loaded_levels(300), vec![20, 1]);
        assert_eq!(tree_bytes(300), 21 * 256);
        // 0 pairs: one empty leaf.
        assert_eq!(tree_bytes(0), 256);
        // 494,071 pairs (500 M over 1,012 DPUs): 32,939 leaves, 1,498, 69, 4, 1 -> height 5
        // with the root; the root lives in WRAM, so 4 MRAM levels as the paper says.
        assert_eq!(bulk_loaded_levels(494_071), vec![32_939, 1_498, 69, 4, 1]);
    }
}
