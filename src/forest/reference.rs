//! The plain reference the DPUs' answers are checked against: every chunk's sorted pairs,
//! scanned directly, with no tree and no routing.
//!
//! Chunks are visited once each (while the trees are built from the same pairs, so a
//! paper-scale run never holds all pairs twice). Each visit adds the chunk's contribution
//! to every query that overlaps it. Contributions are integer sums and maxima, so the order
//! of visits, and therefore the thread count, does not change the result.
//!
//! The queries of all batches are kept in one array sorted by lower end, so that a chunk's
//! visit makes two searches in all rather than two per batch, and the per-query answers are
//! kept in that order too, so that a visit writes them sequentially rather than at random
//! places (a cache miss each, most of the visits' time once most counts are not zero).

use crate::workload::{Query, QueryKind};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Spacing of the first-level samples of the sorted lower ends.
const SAMPLE_EVERY: usize = 64;

/// One answer. get: the value of the key; range-count-if: the count; range-max: the largest
/// value, `None` for an empty range.
pub type Answer = Option<u64>;

/// Reference answers for a set of batches, filled in chunk by chunk.
pub struct Reference {
    kind: QueryKind,
    /// Largest `hi - lo` of a query, to find the queries overlapping a chunk.
    width_minus_one: u64,
    /// Where each batch's queries begin in the per-query vectors below (one more entry
    /// than batches: the total last).
    starts: Vec<usize>,
    sorted: SortedQueries,
    /// Per query, in the sorted order of [`SortedQueries::entries`] (so that a chunk's
    /// visit writes them sequentially, not at random): the count, maximum or value.
    acc: Vec<AtomicU64>,
    found: Vec<AtomicBool>,
    /// Gets: the existing key each get resolves to.
    resolved: Vec<AtomicU64>,
}

/// Every query of every batch, sorted by lower end, with a sampled first level.
struct SortedQueries {
    /// The queries in that order, so that a chunk's visit reads them sequentially, each
    /// with its index in the batches laid end to end.
    entries: Vec<(Query, u32)>,
    /// Every [`SAMPLE_EVERY`]-th lower end of `entries`: a small first level for the
    /// searches each chunk's visit makes.
    lo_sample: Vec<u64>,
    /// Per query, batch after batch in their own order: its place in `entries`.
    position: Vec<u32>,
}

impl SortedQueries {
    fn new(batches: &[&[Query]]) -> SortedQueries {
        let total: usize = batches.iter().map(|b| b.len()).sum();
        assert!(
            u32::try_from(total).is_ok(),
            "the reference indexes its {total} queries with 32 bits"
        );
        let all = batches.iter().flat_map(|b| b.iter());
        let mut entries: Vec<(Query, u32)> = Vec::with_capacity(total);
        entries.extend(all.enumerate().map(|(i, &q)| (q, i as u32)));
        // Whole queries are sorted, not keys to gather them by afterwards: a gather from
        // random places in the batches waited on a cache and TLB miss per query. The keys
        // are distinct (by index), so the unstable sort is deterministic.
        entries.par_sort_unstable_by_key(|&(q, i)| (q.lo, i));
        let lo_sample = entries
            .iter()
            .step_by(SAMPLE_EVERY)
            .map(|e| e.0.lo)
            .collect();
        let mut position = vec![0u32; total];
        for (p, &(_, i)) in entries.iter().enumerate() {
            position[i as usize] = p as u32;
        }
        SortedQueries {
            entries,
            lo_sample,
            position,
        }
    }

    /// The partition point of `pred` over the sorted lower ends, searching the samples
    /// first and then one window of [`SAMPLE_EVERY`] entries (the same result, with far
    /// fewer cache misses).
    fn partition_point(&self, pred: impl Fn(u64) -> bool) -> usize {
        let s = self.lo_sample.partition_point(|&lo| pred(lo));
        if s == 0 {
            return 0;
        }
        // Entry (s - 1) * SAMPLE_EVERY holds; the boundary lies in the window after it.
        let from = (s - 1) * SAMPLE_EVERY;
        let to = (s * SAMPLE_EVERY).min(self.entries.len());
        from + self.entries[from..to].partition_point(|e| pred(e.0.lo))
    }
}

/// Where each batch begins in the batches laid end to end, and the total last.
fn starts(batches: &[&[Query]]) -> Vec<usize> {
    let mut starts = vec![0];
    for b in batches {
        starts.push(starts[starts.len() - 1] + b.len());
    }
    starts
}

fn atomics<T: Send>(n: usize, new: impl Fn() -> T + Sync) -> Vec<T> {
    (0..n).into_par_iter().map(|_| new()).collect()
}

impl Reference {
    /// Prepares the reference for `batches` (all of the same kind).
    pub fn new(kind: QueryKind, batches: &[&[Query]]) -> Reference {
        let starts = starts(batches);
        let total = starts[batches.len()];
        let width_minus_one = batches
            .par_iter()
            .flat_map_iter(|b| b.iter().map(|q| q.hi - q.lo))
            .max()
            .unwrap_or(0);
        Reference {
            kind,
            width_minus_one,
            sorted: SortedQueries::new(batches),
            starts,
            acc: atomics(total, || AtomicU64::new(0)),
            found: atomics(total, || AtomicBool::new(false)),
            resolved: if kind.is_range() {
                Vec::new()
            } else {
                atomics(total, || AtomicU64::new(0))
            },
        }
    }

    /// Adds chunk `pairs` (sorted, owning keys `[first, last]`) to every query of every batch.
    ///
    /// A get of key k asks for the existing key at or below k (the chunk's first key when
    /// none is below); that key lies in the chunk owning k, which resolves it here. Read the
    /// resolved keys with [`Reference::resolved_gets`].
    pub fn visit(&self, first: u64, last: u64, pairs: &[(u64, u64)]) {
        let s = &self.sorted;
        let from = s.partition_point(|lo| lo < first.saturating_sub(self.width_minus_one));
        let to = s.partition_point(|lo| lo <= last);
        for (&(q, _), i) in s.entries[from..to].iter().zip(from..) {
            if q.hi < first {
                continue;
            }
            if !self.kind.is_range() {
                let at = pairs.partition_point(|p| p.0 <= q.lo).saturating_sub(1);
                let (key, value) = pairs[at];
                self.resolved[i].store(key, Ordering::Relaxed);
                self.acc[i].store(value, Ordering::Relaxed);
                self.found[i].store(true, Ordering::Relaxed);
                continue;
            }
            let a = pairs.partition_point(|p| p.0 < q.lo);
            let z = pairs.partition_point(|p| p.0 <= q.hi);
            // A slice, not a `take_while`: the count over it is vectorised (a scan that
            // stops at the range's end instead of the second search was no faster).
            let hits = &pairs[a..z];
            match self.kind {
                QueryKind::Get | QueryKind::Predecessor => unreachable!("handled above"),
                QueryKind::RangeCountIf => {
                    let n = hits.iter().filter(|p| p.1 == q.value).count() as u64;
                    // Most ranges match nothing: skip the (random) write then.
                    if n > 0 {
                        self.acc[i].fetch_add(n, Ordering::Relaxed);
                    }
                }
                QueryKind::RangeMax => {
                    if let Some(m) = hits.iter().map(|p| p.1).max() {
                        self.acc[i].fetch_max(m, Ordering::Relaxed);
                        self.found[i].store(true, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    /// The places in the sorted order of batch `b`'s queries, in the batch's order.
    fn of(&self, b: usize) -> &[u32] {
        &self.sorted.position[self.starts[b]..self.starts[b + 1]]
    }

    /// The answers of batch `b`, once every chunk has been visited.
    pub fn answers(&self, b: usize) -> Vec<Answer> {
        self.of(b)
            .par_iter()
            .map(|&p| {
                let v = self.acc[p as usize].load(Ordering::Relaxed);
                match self.kind {
                    QueryKind::RangeCountIf => Some(v),
                    _ => self.found[p as usize].load(Ordering::Relaxed).then_some(v),
                }
            })
            .collect()
    }

    /// The existing key each get of batch `b` resolved to (meaningless where it found none).
    pub fn resolved_keys(&self, b: usize) -> Vec<u64> {
        self.of(b)
            .par_iter()
            .map(|&p| self.resolved[p as usize].load(Ordering::Relaxed))
            .collect()
    }

    /// Rewrites the gets of batch `b` to the existing keys they resolved to.
    pub fn resolved_gets(&self, b: usize, batch: &mut [Query]) {
        for (q, &p) in batch.iter_mut().zip(self.of(b)) {
            let key = self.resolved[p as usize].load(Ordering::Relaxed);
            q.lo = key;
            q.hi = key;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(lo: u64, hi: u64) -> Query {
        Query { lo, hi, value: 0 }
    }

    #[test]
    fn the_two_level_search_finds_what_a_plain_search_finds() {
        for n in [0usize, 1, 63, 64, 65, 200, 1000] {
            let lo_sorted: Vec<u64> = (0..n as u64).map(|i| i * 3 / 2).collect();
            let batch: Vec<Query> = lo_sorted.iter().map(|&lo| query(lo, lo)).collect();
            let s = SortedQueries::new(&[&batch]);
            for bound in 0..(n as u64 * 2 + 3) {
                let want = lo_sorted.partition_point(|&lo| lo < bound);
                assert_eq!(
                    s.partition_point(|lo| lo < bound),
                    want,
                    "n {n}, bound {bound}"
                );
                let want = lo_sorted.partition_point(|&lo| lo <= bound);
                assert_eq!(
                    s.partition_point(|lo| lo <= bound),
                    want,
                    "n {n}, bound {bound}"
                );
            }
        }
    }

    /// Four batches of ranges over 400 pairs (keys 0, 5, 10, ...): ranges up to 60 keys
    /// wide, many crossing the boundaries of the 50-pair chunks, most starting between
    /// keys.
    fn pairs_and_batches() -> (Vec<(u64, u64)>, Vec<Vec<Query>>) {
        let pairs: Vec<(u64, u64)> = (0..400u64).map(|k| (k * 5, (k * 7) % 11)).collect();
        let batches = (0..4u64)
            .map(|b| {
                (0..150u64)
                    .map(|i| {
                        let lo = (i * 37 + b * 101) % 2000;
                        Query {
                            lo,
                            hi: lo + (i % 60),
                            value: i % 11,
                        }
                    })
                    .collect()
            })
            .collect();
        (pairs, batches)
    }

    /// The reference of `kind` over `batches`, visited chunk by chunk in reverse order
    /// (the order of visits must not matter).
    fn visited(kind: QueryKind, pairs: &[(u64, u64)], batches: &[Vec<Query>]) -> Reference {
        let views: Vec<&[Query]> = batches.iter().map(|b| b.as_slice()).collect();
        let reference = Reference::new(kind, &views);
        for chunk in pairs.chunks(50).rev() {
            reference.visit(chunk[0].0, chunk[chunk.len() - 1].0 + 4, chunk);
        }
        reference
    }

    /// Batches answered together give each batch what it gets alone, in its own order.
    #[test]
    fn merged_batches_answer_as_separate_ones() {
        let (pairs, batches) = pairs_and_batches();
        let together = visited(QueryKind::RangeCountIf, &pairs, &batches);
        for (b, batch) in batches.iter().enumerate() {
            let want: Vec<Answer> = batch
                .iter()
                .map(|q| {
                    let n = pairs.iter().filter(|p| (q.lo..=q.hi).contains(&p.0));
                    Some(n.filter(|p| p.1 == q.value).count() as u64)
                })
                .collect();
            assert_eq!(together.answers(b), want, "batch {b}");
        }
    }

    #[test]
    fn range_maxima_match_a_plain_scan() {
        let (pairs, batches) = pairs_and_batches();
        let reference = visited(QueryKind::RangeMax, &pairs, &batches);
        for (b, batch) in batches.iter().enumerate() {
            let want: Vec<Answer> = batch
                .iter()
                .map(|q| {
                    let in_range = pairs.iter().filter(|p| (q.lo..=q.hi).contains(&p.0));
                    in_range.map(|p| p.1).max()
                })
                .collect();
            assert!(want.iter().any(|a| a.is_none()), "some ranges are empty");
            assert_eq!(reference.answers(b), want, "batch {b}");
        }
    }
}
