//! The host's side of a batch: routing queries to per-DPU, per-tree lists (cut at partition
//! boundaries and tagged with their original index), the byte layout of the DPU buffers, and
//! merging the partial results back in the batch's order.

use super::reference::Answer;
use crate::partition::RoutingTable;
use crate::workload::{Query, QueryKind};
use rayon::prelude::*;

/// The queries one DPU receives in a batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DpuBatch {
    /// Fragments for the cold tree, then for the hot tree, each cut to its partition.
    pub cold: Vec<Query>,
    pub hot: Vec<Query>,
    /// The batch index of the query each fragment came from: cold ones, then hot ones.
    pub origin: Vec<u32>,
}

impl DpuBatch {
    pub fn len(&self) -> usize {
        self.cold.len() + self.hot.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records of launch `launch` of `launches` when this batch is split over several
    /// launches (see [`launch_records`]): cold ones, then hot ones, in their order here.
    pub fn launch_part(&self, launch: u32, launches: u32) -> DpuBatch {
        let r = launch_records(self.len(), launch, launches);
        let c = self.cold.len();
        DpuBatch {
            cold: self.cold[r.start.min(c)..r.end.min(c)].to_vec(),
            hot: self.hot[r.start.max(c) - c..r.end.max(c) - c].to_vec(),
            origin: self.origin[r.clone()].to_vec(),
        }
    }
}

/// Every DPU's records in launch `launch` of `launches`, for launching DPUs `dpus` alone:
/// their parts of `batches`, and no records for the other DPUs.
pub fn launch_parts_of(
    batches: &[DpuBatch],
    dpus: std::ops::Range<usize>,
    launch: u32,
    launches: u32,
) -> Vec<DpuBatch> {
    (0..batches.len())
        .map(|d| match dpus.contains(&d) {
            true => batches[d].launch_part(launch, launches),
            false => DpuBatch::default(),
        })
        .collect()
}

/// One DPU's fragments as they arrive, piece after piece of a batch routed in pieces. Joined
/// in piece order they are the DPU's batch as routing the whole batch gives it, since a
/// routing policy routes each query on its own.
#[derive(Default)]
pub struct Gathered {
    cold: Vec<Query>,
    hot: Vec<Query>,
    cold_origin: Vec<u32>,
    hot_origin: Vec<u32>,
}

impl Gathered {
    /// Appends a piece's fragments, whose origins count from `offset`.
    pub fn append(&mut self, b: &DpuBatch, offset: u32) {
        let (cold, hot) = b.origin.split_at(b.cold.len());
        self.cold_origin.extend(cold.iter().map(|&i| i + offset));
        self.hot_origin.extend(hot.iter().map(|&i| i + offset));
        self.cold.extend_from_slice(&b.cold);
        self.hot.extend_from_slice(&b.hot);
    }

    pub fn into_batch(mut self) -> DpuBatch {
        self.cold_origin.append(&mut self.hot_origin);
        DpuBatch {
            cold: self.cold,
            hot: self.hot,
            origin: self.cold_origin,
        }
    }
}

/// What a batch's fragments must cover between them: every key of every query's range,
/// once. Routing cuts a range into one fragment per partition it meets, and the partitions
/// tile the key space, so the sum of the fragments' lengths is the sum of the queries'
/// lengths, and so is the sum weighted by the index of the query each came from. A
/// fragment lost, repeated, cut wrongly or credited to another query shows in one of the
/// two. Checked for streamed batches, whose merged answers are never held (a held batch
/// checks every merged answer instead).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coverage {
    keys: u128,
    weighted: u128,
}

impl Coverage {
    /// Adds the range `[lo, hi]` of query `index` of the batch.
    #[inline]
    pub fn add(&mut self, index: u64, lo: u64, hi: u64) {
        debug_assert!(lo <= hi, "a range ends at or after its start");
        let keys = (hi - lo) as u128 + 1;
        // Wrapping: a checksum (a 1.1 G-query batch of whole-key-space ranges would pass
        // 2^128 in the weighted sum).
        self.keys = self.keys.wrapping_add(keys);
        let weight = index as u128 + 1;
        self.weighted = self.weighted.wrapping_add(keys.wrapping_mul(weight));
    }

    /// The coverage of `queries`, query `i` being the batch's query `first + i`.
    pub fn of_queries(first: u64, queries: &[Query]) -> Coverage {
        let mut c = Coverage::default();
        for (i, q) in queries.iter().enumerate() {
            c.add(first + i as u64, q.lo, q.hi);
        }
        c
    }

    /// The coverage of the fragments of `batches`, each credited to its origin.
    pub fn of_fragments(batches: &[DpuBatch]) -> Coverage {
        let mut c = Coverage::default();
        for b in batches {
            for (q, &origin) in b.cold.iter().chain(&b.hot).zip(&b.origin) {
                c.add(origin as u64, q.lo, q.hi);
            }
        }
        c
    }

    /// Both coverages together.
    pub fn plus(self, other: Coverage) -> Coverage {
        Coverage {
            keys: self.keys.wrapping_add(other.keys),
            weighted: self.weighted.wrapping_add(other.weighted),
        }
    }

    /// Keys covered (modulo 2^128), for messages.
    pub fn keys(&self) -> u128 {
        self.keys
    }
}

/// Which of a DPU's `records` records (cold then hot) launch `launch` of `launches` takes:
/// contiguous, in order, sizes differing by at most one, the larger ones last.
pub fn launch_records(records: usize, launch: u32, launches: u32) -> std::ops::Range<usize> {
    assert!(launch < launches, "launch {launch} of {launches}");
    let at = |k: u32| (records as u128 * k as u128 / launches as u128) as usize;
    at(launch)..at(launch + 1)
}

/// The largest share [`launch_records`] gives one launch of `records` records.
pub fn largest_launch_records(records: u64, launches: u32) -> u64 {
    records.div_ceil(launches as u64)
}

/// What routing a batch produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoutingStats {
    pub queries: u64,
    pub fragments: u64,
}

/// Routes `queries` through `table`: one fragment per partition a query overlaps, cut to
/// the partition's keys, so that a DPU whose cold tree holds two runs of one range answers
/// each run once.
pub fn route_batch(
    table: &RoutingTable,
    queries: &[Query],
    dpus: u32,
) -> (Vec<DpuBatch>, RoutingStats) {
    let mut cold: Vec<Vec<(u32, Query)>> = vec![Vec::new(); dpus as usize];
    let mut hot: Vec<Vec<(u32, Query)>> = vec![Vec::new(); dpus as usize];
    let mut stats = RoutingStats {
        queries: queries.len() as u64,
        fragments: 0,
    };
    for (i, q) in queries.iter().enumerate() {
        table.route(q.lo, q.hi, |e| {
            let t = table.target(e);
            let fragment = Query {
                lo: q.lo.max(table.start(e)),
                hi: q.hi.min(table.last(e)),
                value: q.value,
            };
            let list = if t.hot { &mut hot } else { &mut cold };
            list[t.dpu as usize].push((i as u32, fragment));
            stats.fragments += 1;
        });
    }
    let batches = cold
        .into_iter()
        .zip(hot)
        .map(|(c, h)| DpuBatch {
            origin: c.iter().chain(&h).map(|&(i, _)| i).collect(),
            cold: c.into_iter().map(|(_, q)| q).collect(),
            hot: h.into_iter().map(|(_, q)| q).collect(),
        })
        .collect();
    (batches, stats)
}

/// Queries per piece of [`route_in_pieces`].
const ROUTE_PIECE_QUERIES: usize = 1 << 16;

/// `route(queries)` for a router that routes each query on its own (as every routing policy
/// does), computed piece by piece on rayon's threads: each DPU's fragments are joined in
/// piece order, so the batches are the ones `route(queries)` gives. `route` must give
/// `dpus` batches.
pub fn route_in_pieces(
    queries: &[Query],
    dpus: usize,
    route: impl Fn(&[Query]) -> Vec<DpuBatch> + Sync,
) -> Vec<DpuBatch> {
    if queries.len() <= ROUTE_PIECE_QUERIES {
        return route(queries);
    }
    let pieces: Vec<Vec<DpuBatch>> = queries
        .par_chunks(ROUTE_PIECE_QUERIES)
        .map(&route)
        .collect();
    for piece in &pieces {
        assert_eq!(piece.len(), dpus, "a router gives every DPU a batch");
    }
    (0..dpus)
        .into_par_iter()
        .map(|d| {
            let mut gathered = Gathered::default();
            for (k, piece) in pieces.iter().enumerate() {
                gathered.append(&piece[d], (k * ROUTE_PIECE_QUERIES) as u32);
            }
            gathered.into_batch()
        })
        .collect()
}

// The record formats, in one place: the host encodes queries and decodes results with
// these, and the kernel decodes queries with them.

/// u64 words of one query record: get: key; range-count-if: lo, hi, value; range-max: lo, hi.
pub fn query_words(kind: QueryKind) -> usize {
    match kind {
        QueryKind::Get | QueryKind::Predecessor => 1,
        QueryKind::RangeCountIf => 3,
        QueryKind::RangeMax => 2,
    }
}

/// The words of `q`'s record (the first [`query_words`] of them are used).
pub fn encode_query(kind: QueryKind, q: &Query) -> [u64; 3] {
    match kind {
        QueryKind::Get | QueryKind::Predecessor => [q.lo, 0, 0],
        QueryKind::RangeCountIf => [q.lo, q.hi, q.value],
        QueryKind::RangeMax => [q.lo, q.hi, 0],
    }
}

/// The query a record stands for (a get is the range of its one key).
pub fn decode_query(kind: QueryKind, w: [u64; 3]) -> Query {
    match kind {
        QueryKind::Get | QueryKind::Predecessor => Query {
            lo: w[0],
            hi: w[0],
            value: 0,
        },
        QueryKind::RangeCountIf => Query {
            lo: w[0],
            hi: w[1],
            value: w[2],
        },
        QueryKind::RangeMax => Query {
            lo: w[0],
            hi: w[1],
            value: 0,
        },
    }
}

/// Bytes of one query record in a DPU's buffer.
pub fn query_record_bytes(kind: QueryKind) -> u64 {
    8 * query_words(kind) as u64
}

/// u64 words of one result record: get: value; range-count-if: count; range-max: the
/// largest value, then the number of pairs seen (0: an empty range).
pub fn result_words(kind: QueryKind) -> usize {
    match kind {
        QueryKind::Get | QueryKind::Predecessor | QueryKind::RangeCountIf => 1,
        QueryKind::RangeMax => 2,
    }
}

/// The answer a result record stands for.
pub fn decode_result(kind: QueryKind, w: &[u64]) -> Answer {
    match kind {
        QueryKind::Get | QueryKind::Predecessor | QueryKind::RangeCountIf => Some(w[0]),
        QueryKind::RangeMax => (w[1] > 0).then_some(w[0]),
    }
}

/// Bytes of one result record.
pub fn result_record_bytes(kind: QueryKind) -> u64 {
    8 * result_words(kind) as u64
}

/// Bytes of a DPU buffer's header: task, cold count, hot count, result offset (u32 each).
pub const HEADER_BYTES: u64 = 16;

/// Bytes of the query buffer a DPU receives for `records` records (header and records).
pub fn query_buffer_bytes(kind: QueryKind, records: u64) -> u64 {
    HEADER_BYTES + records * query_record_bytes(kind)
}

/// Bytes of the result buffer a DPU returns.
pub fn result_buffer_bytes(kind: QueryKind, records: u64) -> u64 {
    records * result_record_bytes(kind)
}

/// Combines the partial results of every DPU (in record order, cold then hot) into one
/// answer per query, in the batch's order: copy for get, sum for count, max for max.
pub fn merge(
    kind: QueryKind,
    batches: &[DpuBatch],
    results: &[Vec<Answer>],
    queries: usize,
) -> Vec<Answer> {
    let mut answers = unmerged(kind, queries);
    for (b, r) in batches.iter().zip(results) {
        debug_assert_eq!(b.origin.len(), r.len());
        for (&i, &partial) in b.origin.iter().zip(r) {
            let slot = &mut answers[i as usize];
            *slot = combine(kind, *slot, partial);
        }
    }
    answers
}

/// Answers per piece of [`merge_parallel`].
const MERGE_PIECE_ANSWERS: usize = 1 << 16;

/// [`merge`] on rayon's threads, with the same answers: each piece of the answers takes its
/// queries' partial results from every DPU in DPU order, cold then hot, as `merge` does. It
/// finds them by binary search, so it needs each DPU's cold origins and hot origins in
/// ascending order (routing gives them in query order); otherwise it calls `merge`.
pub fn merge_parallel(
    kind: QueryKind,
    batches: &[DpuBatch],
    results: &[Vec<Answer>],
    queries: usize,
) -> Vec<Answer> {
    assert_eq!(batches.len(), results.len(), "one result list per DPU");
    if queries <= MERGE_PIECE_ANSWERS {
        return merge(kind, batches, results, queries);
    }
    let ascending = batches.par_iter().zip(results).all(|(b, r)| {
        assert_eq!(b.origin.len(), r.len(), "one partial result per fragment");
        origins_ascending(b)
    });
    if !ascending {
        return merge(kind, batches, results, queries);
    }
    let mut answers = unmerged(kind, queries);
    let pieces = answers.par_chunks_mut(MERGE_PIECE_ANSWERS).enumerate();
    pieces.for_each(|(k, piece)| {
        let from = (k * MERGE_PIECE_ANSWERS) as u32;
        let to = from + piece.len() as u32;
        for (b, r) in batches.iter().zip(results) {
            let c = b.cold.len();
            for run in [0..c, c..b.origin.len()] {
                let origin = &b.origin[run.clone()];
                let (lo, hi) = (
                    origin.partition_point(|&i| i < from),
                    origin.partition_point(|&i| i < to),
                );
                let partials = &r[run.start + lo..run.start + hi];
                for (&i, &partial) in origin[lo..hi].iter().zip(partials) {
                    let slot = &mut piece[(i - from) as usize];
                    *slot = combine(kind, *slot, partial);
                }
            }
        }
    });
    answers
}

/// Whether `b`'s cold origins and its hot origins are each in ascending order, as routing
/// gives them (what [`merge_parallel`] needs to take its fast path).
pub fn origins_ascending(b: &DpuBatch) -> bool {
    let (cold, hot) = b.origin.split_at(b.cold.len());
    cold.is_sorted() && hot.is_sorted()
}

/// The answers before any partial result: a count starts at zero, the others at none.
fn unmerged(kind: QueryKind, queries: usize) -> Vec<Answer> {
    match kind {
        QueryKind::RangeCountIf => vec![Some(0); queries],
        _ => vec![None; queries],
    }
}

/// A query's answer so far with one more partial result: sum for count, max for max, the
/// partial itself for a get.
fn combine(kind: QueryKind, so_far: Answer, partial: Answer) -> Answer {
    match (kind, so_far, partial) {
        (QueryKind::RangeCountIf, Some(a), Some(p)) => Some(a + p),
        (QueryKind::RangeMax, a, p) => a.max(p),
        (_, _, p) => p,
    }
}
