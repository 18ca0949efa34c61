//! Placing the data on the DPUs: each DPU's cold tree (its cold partitions) and hot tree
//! (the hot partition it received), bulk-loaded from the chunks' pairs.

use super::tree::TreeImage;
use crate::partition::Partitioning;
use crate::workload::DataSet;
use rayon::prelude::*;

/// The trees of one DPU.
#[derive(Debug, Clone, PartialEq)]
pub struct DpuTrees {
    pub cold: TreeImage,
    /// `None` when the DPU received no hot partition.
    pub hot: Option<TreeImage>,
}

/// The key range chunk `c` owns: `[range_start(c), range_start(c + 1) - 1]`.
pub fn chunk_key_range(data: &DataSet, c: usize) -> (u64, u64) {
    let last = if c + 1 < data.chunks() {
        data.range_start(c + 1) - 1
    } else {
        u64::MAX
    };
    (data.range_start(c), last)
}

/// The chunks of each DPU's cold tree and hot tree, in key order.
pub fn chunks_per_dpu(partitioning: &Partitioning) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let mut cold: Vec<Vec<usize>> = vec![Vec::new(); partitioning.dpus as usize];
    let mut hot: Vec<Vec<usize>> = vec![Vec::new(); partitioning.dpus as usize];
    for p in &partitioning.parts {
        let list = if p.hot { &mut hot } else { &mut cold };
        list[p.dpu as usize].extend(p.chunks.clone());
    }
    (cold, hot)
}

/// Builds one DPU's trees from its cold and hot chunks. Each chunk's pairs are generated
/// once and shown to `visit(chunk, pairs)` (for the reference) before going into a tree.
pub fn build_dpu_trees(
    data: &DataSet,
    cold: &[usize],
    hot: &[usize],
    visit: &(impl Fn(usize, &[(u64, u64)]) + Sync),
) -> DpuTrees {
    let tree = |chunks: &[usize]| {
        let expected = chunks.iter().map(|&c| data.chunk_size(c)).sum();
        TreeImage::build_sized(
            expected,
            chunks.iter().flat_map(|&c| {
                let pairs = data.chunk_pairs_of(c);
                visit(c, &pairs);
                pairs
            }),
        )
    };
    DpuTrees {
        cold: tree(cold),
        hot: (!hot.is_empty()).then(|| tree(hot)),
    }
}

/// Builds every DPU's trees, in parallel over DPUs (see [`build_dpu_trees`]). The result is
/// in DPU order and does not depend on the thread count.
pub fn build_trees(
    data: &DataSet,
    partitioning: &Partitioning,
    visit: impl Fn(usize, &[(u64, u64)]) + Sync,
) -> Vec<DpuTrees> {
    let (cold, hot) = chunks_per_dpu(partitioning);
    (0..partitioning.dpus as usize)
        .into_par_iter()
        .map(|d| build_dpu_trees(data, &cold[d], &hot[d], &visit))
        .collect()
}
