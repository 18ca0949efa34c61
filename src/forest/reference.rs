//! The plain reference the DPUs' answers are checked against: every chunk's sorted pairs,
//! scanned directly, with no tree and no routing.
//!
//! Chunks are visited once each (while the trees are built from the same pairs, so a
//! paper-scale run never holds all pairs twice). Each visit adds the chunk's contribution
//! to every query that overlaps it. Contributions are integer sums and maxima, so the order
//! of visits, and therefore the thread count, does not change the result.

use crate::workload::{Query, QueryKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One answer. get: the value of the key; range-count-if: the count; range-max: the largest
/// value, `None` for an empty range.
pub type Answer = Option<u64>;

/// Reference answers for a set of batches, filled in chunk by chunk.
pub struct Reference {
    kind: QueryKind,
    /// Largest `hi - lo` of a query, to find the queries overlapping a chunk.
    width_minus_one: u64,
    batches: Vec<BatchRef>,
}

struct BatchRef {
    /// Query indices sorted by lower end.
    by_lo: Vec<u32>,
    lo_sorted: Vec<u64>,
    acc: Vec<AtomicU64>,
    found: Vec<AtomicBool>,
    /// Gets: the existing key each get resolves to.
    resolved: Vec<AtomicU64>,
}

impl Reference {
    /// Prepares the reference for `batches` (all of the same kind).
    pub fn new(kind: QueryKind, batches: &[&[Query]]) -> Reference {
        let mut width_minus_one = 0;
        let batches = batches
            .iter()
            .map(|b| {
                let mut by_lo: Vec<u32> = (0..b.len() as u32).collect();
                by_lo.sort_by_key(|&i| (b[i as usize].lo, i));
                let lo_sorted = by_lo.iter().map(|&i| b[i as usize].lo).collect();
                for q in b.iter() {
                    width_minus_one = width_minus_one.max(q.hi - q.lo);
                }
                BatchRef {
                    by_lo,
                    lo_sorted,
                    acc: (0..b.len()).map(|_| AtomicU64::new(0)).collect(),
                    found: (0..b.len()).map(|_| AtomicBool::new(false)).collect(),
                    resolved: if !kind.is_range() {
                        (0..b.len()).map(|_| AtomicU64::new(0)).collect()
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect();
        Reference {
            kind,
            width_minus_one,
            batches,
        }
    }

    /// Adds chunk `pairs` (sorted, owning keys `[first, last]`) to every query of every batch.
    ///
    /// A get of key k asks for the existing key at or below k (the chunk's first key when
    /// none is below); that key lies in the chunk owning k, which resolves it here. Read the
    /// resolved keys with [`Reference::resolved_gets`].
    pub fn visit(&self, batches: &[&[Query]], first: u64, last: u64, pairs: &[(u64, u64)]) {
        for (b, queries) in self.batches.iter().zip(batches) {
            let from = b
                .lo_sorted
                .partition_point(|&lo| lo < first.saturating_sub(self.width_minus_one));
            let to = b.lo_sorted.partition_point(|&lo| lo <= last);
            for &qi in &b.by_lo[from..to] {
                let q = queries[qi as usize];
                if q.hi < first {
                    continue;
                }
                let i = qi as usize;
                if !self.kind.is_range() {
                    let at = pairs.partition_point(|p| p.0 <= q.lo).saturating_sub(1);
                    let (key, value) = pairs[at];
                    b.resolved[i].store(key, Ordering::Relaxed);
                    b.acc[i].store(value, Ordering::Relaxed);
                    b.found[i].store(true, Ordering::Relaxed);
                    continue;
                }
                let a = pairs.partition_point(|p| p.0 < q.lo);
                let z = pairs.partition_point(|p| p.0 <= q.hi);
                let hits = &pairs[a..z];
                match self.kind {
                    QueryKind::Get | QueryKind::Predecessor => unreachable!("handled above"),
                    QueryKind::RangeCountIf => {
                        let n = hits.iter().filter(|p| p.1 == q.value).count() as u64;
                        b.acc[i].fetch_add(n, Ordering::Relaxed);
                    }
                    QueryKind::RangeMax => {
                        if let Some(m) = hits.iter().map(|p| p.1).max() {
                            b.acc[i].fetch_max(m, Ordering::Relaxed);
                            b.found[i].store(true, Ordering::Relaxed);
                        }
                    }
                }
            }
        }
    }

    /// The answers of batch `b`, once every chunk has been visited.
    pub fn answers(&self, b: usize) -> Vec<Answer> {
        let r = &self.batches[b];
        r.acc
            .iter()
            .zip(&r.found)
            .map(|(a, f)| {
                let v = a.load(Ordering::Relaxed);
                match self.kind {
                    QueryKind::RangeCountIf => Some(v),
                    _ => f.load(Ordering::Relaxed).then_some(v),
                }
            })
            .collect()
    }

    /// Rewrites the gets of batch `b` to the existing keys they resolved to.
    pub fn resolved_gets(&self, b: usize, batch: &mut [Query]) {
        for (q, k) in batch.iter_mut().zip(&self.batches[b].resolved) {
            let key = k.load(Ordering::Relaxed);
            q.lo = key;
            q.hi = key;
        }
    }
}
