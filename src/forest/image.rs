//! A DPU's MRAM for B+-Forest: where its trees, query buffer and result buffer live, and the
//! host's functional reads and writes of them (their timing is the host model's).
//!
//! Layout, every region 8-byte aligned: `[cold tree][hot tree][query buffer][result buffer]`.
//! The query buffer starts with a 16-byte header: task (the query kind's code), cold count,
//! hot count, result offset from the query buffer's start (u32 each).

use super::batch::{
    DpuBatch, HEADER_BYTES, decode_result, encode_query, query_record_bytes, query_words,
    result_record_bytes, result_words,
};
use super::build::DpuTrees;
use super::kernel::{DpuArgs, TreeArgs};
use super::layout::dpu_trees_bytes;
use super::reference::Answer;
use crate::dpu::Mram;
use crate::workload::{Query, QueryKind};

/// The task code the header carries for each query kind.
pub fn task_code(kind: QueryKind) -> u32 {
    match kind {
        QueryKind::Get | QueryKind::Predecessor => 1,
        QueryKind::RangeCountIf => 2,
        QueryKind::RangeMax => 3,
    }
}

/// Where a DPU's trees and buffers start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpuLayout {
    pub cold_base: u64,
    pub hot_base: u64,
    /// First byte after the trees: the query buffer's start.
    pub query_base: u64,
}

impl DpuLayout {
    pub fn new(trees: &DpuTrees) -> DpuLayout {
        let cold = trees.cold.bytes.len() as u64;
        let hot = trees.hot.as_ref().map_or(0, |h| h.bytes.len() as u64);
        DpuLayout {
            cold_base: 0,
            hot_base: cold,
            query_base: (cold + hot).next_multiple_of(8),
        }
    }

    /// Bytes the trees occupy.
    pub fn tree_bytes(&self) -> u64 {
        self.query_base
    }

    /// The result buffer's start for a batch whose query buffer holds `n` records.
    pub fn result_base(&self, kind: QueryKind, n: u64) -> u64 {
        self.query_base + HEADER_BYTES + n * query_record_bytes(kind)
    }

    /// The kernel's arguments for a batch of `n` records on this DPU.
    pub fn args(&self, trees: &DpuTrees, kind: QueryKind, n: u64) -> DpuArgs {
        DpuArgs {
            cold: TreeArgs {
                base: self.cold_base,
                root: trees.cold.root,
                height: trees.cold.height,
            },
            hot: trees.hot.as_ref().map(|h| TreeArgs {
                base: self.hot_base,
                root: h.root,
                height: h.height,
            }),
            query_base: self.query_base,
            result_base: self.result_base(kind, n),
        }
    }
}

/// MRAM bytes a DPU needs: its trees, then (8-byte aligned) a query buffer and a result
/// buffer of `records` records. The one formula for a B+-Forest DPU's MRAM need; it is the
/// layout of [`DpuLayout`] (trees, header, query records, result records).
pub fn mram_need_bytes(kind: QueryKind, cold_pairs: u64, hot_pairs: u64, records: u64) -> u64 {
    dpu_trees_bytes(cold_pairs, hot_pairs).next_multiple_of(8)
        + HEADER_BYTES
        + records * (query_record_bytes(kind) + result_record_bytes(kind))
}

/// Writes the trees into MRAM.
pub fn write_trees(mram: &mut Mram, layout: &DpuLayout, trees: &DpuTrees) {
    mram.write(layout.cold_base, &trees.cold.bytes);
    if let Some(h) = &trees.hot {
        mram.write(layout.hot_base, &h.bytes);
    }
}

/// The query buffer of `batch`: header, cold records, hot records.
pub fn query_buffer(kind: QueryKind, batch: &DpuBatch) -> Vec<u8> {
    let n = batch.len() as u64;
    let mut out = Vec::with_capacity((HEADER_BYTES + n * query_record_bytes(kind)) as usize);
    let result_offset = HEADER_BYTES + n * query_record_bytes(kind);
    for word in [
        task_code(kind),
        batch.cold.len() as u32,
        batch.hot.len() as u32,
        result_offset as u32,
    ] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    let words = query_words(kind);
    let mut push = |q: &Query| {
        for w in &encode_query(kind, q)[..words] {
            out.extend_from_slice(&w.to_le_bytes());
        }
    };
    batch.cold.iter().for_each(&mut push);
    batch.hot.iter().for_each(&mut push);
    out
}

/// Reads the results of a batch of `n` records back from MRAM, as answers.
pub fn read_results(mram: &Mram, layout: &DpuLayout, kind: QueryKind, n: u64) -> Vec<Answer> {
    let words = mram.read_u64s(
        layout.result_base(kind, n),
        (n * result_record_bytes(kind) / 8) as usize,
    );
    words
        .chunks_exact(result_words(kind))
        .map(|w| decode_result(kind, w))
        .collect()
}
