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
    build_dpu_trees_into(data, (cold, hot), visit, &mut TreeScratch::default())
}

/// Two byte buffers that tree images are built into and handed back from (see
/// [`TreeImage::build_into`]), one for each of a DPU's trees.
#[derive(Debug, Default)]
pub struct TreeScratch {
    cold: Vec<u8>,
    hot: Vec<u8>,
}

impl TreeScratch {
    /// Takes the bytes of `trees` back for the next DPU's build (the images keep their
    /// shape: root, height, pairs).
    pub fn reclaim(&mut self, trees: &mut DpuTrees) {
        self.cold = std::mem::take(&mut trees.cold.bytes);
        if let Some(h) = trees.hot.as_mut() {
            self.hot = std::mem::take(&mut h.bytes);
        }
    }
}

/// [`build_dpu_trees`] into the buffers of `scratch`.
pub fn build_dpu_trees_into(
    data: &DataSet,
    (cold, hot): (&[usize], &[usize]),
    visit: &(impl Fn(usize, &[(u64, u64)]) + Sync),
    scratch: &mut TreeScratch,
) -> DpuTrees {
    let tree = |bytes: Vec<u8>, chunks: &[usize]| {
        let expected = chunks.iter().map(|&c| data.chunk_size(c)).sum();
        TreeImage::build_into(
            bytes,
            expected,
            chunks.iter().flat_map(|&c| {
                let pairs = data.chunk_pairs_of(c);
                visit(c, &pairs);
                pairs
            }),
        )
    };
    DpuTrees {
        cold: tree(std::mem::take(&mut scratch.cold), cold),
        hot: (!hot.is_empty()).then(|| tree(std::mem::take(&mut scratch.hot), hot)),
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
