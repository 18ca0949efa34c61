//! The plain reference the DPUs' answers are checked against: every chunk's sorted pairs,
//! scanned directly, with no tree and no routing.
//!
//! Chunks are visited once each (while the trees are built from the same pairs, so a
//! paper-scale run never holds all pairs twice). Each visit adds the chunk's contribution
//! to every query that overlaps it. Contributions are integer sums and maxima, so the order
//! of visits, and therefore the thread count, does not change the result.

use crate::workload::{Query, QueryKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Spacing of the first-level samples of a batch's sorted lower ends.
const SAMPLE_EVERY: usize = 64;

impl BatchRef {
    /// The partition point of `pred` over the sorted lower ends, searching the samples first and then one window of
    /// [`SAMPLE_EVERY`] entries (the same result, with far fewer cache misses).
    fn partition_point(&self, pred: impl Fn(u64) -> bool) -> usize {
        let s = self.lo_sample.partition_point(|&lo| pred(lo));
        if s == 0 {
            return 0;
        }
        // Entry (s - 1) * SAMPLE_EVERY holds; the boundary lies in the window after it.
        let from = (s - 1) * SAMPLE_EVERY;
        let to = (s * SAMPLE_EVERY).min(self.sorted.len());
        from + self.sorted[from..to].partition_point(|q| pred(q.lo))
    }
}

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
    /// The queries in that order, so that a chunk's visit reads them sequentially.
    sorted: Vec<Query>,
    /// Every [`SAMPLE_EVERY`]-th lower end of `sorted`: a small, cache-resident first level
    /// for the searches each chunk's visit makes.
    lo_sample: Vec<u64>,
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
                let sorted: Vec<Query> = by_lo.iter().map(|&i| b[i as usize]).collect();
                let lo_sample = sorted.iter().step_by(SAMPLE_EVERY).map(|q| q.lo).collect();
                for q in b.iter() {
                    width_minus_one = width_minus_one.max(q.hi - q.lo);
                }
                BatchRef {
                    by_lo,
                    sorted,
                    lo_sample,
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
    pub fn visit(&self, first: u64, last: u64, pairs: &[(u64, u64)]) {
        for b in &self.batches {
            let from = b.partition_point(|lo| lo < first.saturating_sub(self.width_minus_one));
            let to = b.partition_point(|lo| lo <= last);
            for (q, &qi) in b.sorted[from..to].iter().zip(&b.by_lo[from..to]) {
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
                        // Most ranges match nothing: skip the (random) write then.
                        if n > 0 {
                            b.acc[i].fetch_add(n, Ordering::Relaxed);
                        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_level_search_finds_what_a_plain_search_finds() {
        for n in [0usize, 1, 63, 64, 65, 200, 1000] {
            let lo_sorted: Vec<u64> = (0..n as u64).map(|i| i * 3 / 2).collect();
            let b = BatchRef {
                by_lo: Vec::new(),
                lo_sample: lo_sorted.iter().step_by(SAMPLE_EVERY).copied().collect(),
                sorted: lo_sorted
                    .iter()
                    .map(|&lo| Query {
                        lo,
                        hi: lo,
                        value: 0,
                    })
                    .collect(),
                acc: Vec::new(),
                found: Vec::new(),
                resolved: Vec::new(),
            };
            for bound in 0..(n as u64 * 2 + 3) {
                let want = lo_sorted.partition_point(|&lo| lo < bound);
                assert_eq!(
                    b.partition_point(|lo| lo < bound),
                    want,
                    "n {n}, bound {bound}"
                );
                let want = lo_sorted.partition_point(|&lo| lo <= bound);
                assert_eq!(
                    b.partition_point(|lo| lo <= bound),
                    want,
                    "n {n}, bound {bound}"
                );
            }
        }
    }
}
