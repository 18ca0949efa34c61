//! Streamed batches: B+-Forest answers a batch too large to hold (the paper's largest has
//! 1.1 G queries, about 26 GB) with host memory bounded by a [`Budget`], not by the batch
//! size.
//!
//! 1. **Count.** The batch is drawn once from its seeded stream, a slab at a time, and each
//!    slab is routed by the routing policy; only each DPU's number of fragments (the batch's
//!    [`Shape`]), the queries each DPU serves, and a checkpoint of the stream at each slab
//!    are kept. The MRAM check and every cost of the batch follow from the shape.
//! 2. **Groups.** The DPUs are cut into runs of consecutive DPUs holding at most
//!    `batches.stream_fragments` fragments ([`Budget`]). For each group the batch is drawn
//!    again from the checkpoints (slabs in parallel); the queries that meet the group's key
//!    ranges are routed, which gives the group's fragments in the order a whole-batch
//!    routing gives them. Most of the others are told from their draw's first number
//!    ([`Reach`]) and never built.
//! 3. **Windows.** Each group is evaluated in windows of a fifth of that: for
//!    each DPU of the window the plain reference answers its fragments from its chunks'
//!    pairs (drawn again) and resolves its gets; the evaluation policy writes the buffers,
//!    launches the window's DPUs and reads their results; every result is checked against
//!    the reference; the window's buffers are discarded from MRAM.
//!
//! Every DPU gets the same records as when the batch is held, so its kernel time, and the
//! batch's program, are the same bit for bit (a test runs both ways). What streaming does not
//! do is merge the fragments into one answer per query on the host: each fragment's partial
//! answer is checked instead, against the pairs of the partition it was cut to.

use super::distinct_queries;
use crate::dpu::LaunchReport;
use crate::forest::batch::{
    Coverage, DpuBatch, Gathered, launch_parts_of, launch_records, query_record_bytes,
    result_record_bytes,
};
use crate::forest::build::chunk_key_range;
#[cfg(doc)]
use crate::forest::build::chunks_per_dpu;
use crate::forest::reference::{Answer, Reference};
use crate::index::IndexError;
use crate::meter::Meter;
use crate::partition::Partitioning;
use crate::partition::prepared::Prepared;
use crate::policies::{BatchEnv, EvaluationPolicy, RoutingPolicy, Shape};
use crate::system::System;
use crate::workload::queries::{Checkpoint, Drawn, Reach};
use crate::workload::{DataSet, Query, QueryGenerator, QueryKind};
use rayon::prelude::*;
use std::ops::Range;

/// Slabs drawn and routed at once, in parallel, in a group's pass.
const SLABS_AT_ONCE: usize = 8;
/// The fewest and the most queries of a slab. Each slab leaves a checkpoint of the stream
/// (a few hundred bytes) that is kept for every batch of the run, so a small budget must
/// not make slabs of a few queries: at `batches.stream_fragments = 1` that was one
/// checkpoint per query, more memory than holding the batch.
const MIN_SLAB_QUERIES: u64 = 1 << 16;
const MAX_SLAB_QUERIES: u64 = 1 << 20;
/// Host bytes per fragment a group holds: the query and its origin.
const GROUP_BYTES_PER_FRAGMENT: u64 = 28;
/// Host bytes per fragment of a window: its buffers in MRAM (up to 40 bytes), its result
/// read back (16) and the reference's copy of it (up to 78: the fragment 24, its sorted entry
/// 32, the answer, flag and resolved key 17, its place in the sorted order 4).
const WINDOW_BYTES_PER_FRAGMENT: u64 = 134;
/// A window holds this fraction of a group's fragments.
const WINDOWS_PER_GROUP: u64 = 5;
/// Host bytes per query of a slab in flight: the drawn query.
const SLAB_BYTES_PER_QUERY: u64 = std::mem::size_of::<Query>() as u64;
/// Host bytes a batch's count keeps per DPU: its fragments and the queries it serves.
const COUNTED_BYTES_PER_DPU: u64 = 16;

/// How much of a batch is held at once, from `batches.stream_fragments`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Fragments a group of DPUs holds.
    pub group_fragments: u64,
    /// Fragments evaluated at once.
    pub window_fragments: u64,
    /// Queries drawn and routed at a time: an eighth of a group's fragments, so that the
    /// slabs in flight hold about a group's fragments, but from 64 Ki to 1 Mi.
    pub slab_queries: usize,
}

impl Budget {
    pub fn new(group_fragments: u64) -> Budget {
        assert!(group_fragments > 0, "a group holds at least one fragment");
        let slab =
            (group_fragments / SLABS_AT_ONCE as u64).clamp(MIN_SLAB_QUERIES, MAX_SLAB_QUERIES);
        Budget {
            group_fragments,
            window_fragments: (group_fragments / WINDOWS_PER_GROUP).max(1),
            slab_queries: slab as usize,
        }
    }

    /// Host bytes of the batch held at once: a group, a window of it, and the slabs in
    /// flight. A DPU given more fragments than the budget is a group and a window of its
    /// own, so both hold at least `dpu_fragments`, the most one DPU can be given
    /// ([`most_fragments_per_dpu`]); and none holds more than the batch has:
    /// `batch_fragments` fragments of `batch_queries` queries at most.
    pub fn host_bytes(
        &self,
        dpu_fragments: u64,
        (batch_queries, batch_fragments): (u64, u64),
    ) -> u64 {
        let group = self.group_fragments.max(dpu_fragments).min(batch_fragments);
        let window = self
            .window_fragments
            .max(dpu_fragments)
            .min(batch_fragments);
        let slabs = ((SLABS_AT_ONCE * self.slab_queries) as u64).min(batch_queries);
        (group.saturating_mul(GROUP_BYTES_PER_FRAGMENT))
            .saturating_add(window.saturating_mul(WINDOW_BYTES_PER_FRAGMENT))
            .saturating_add(slabs * SLAB_BYTES_PER_QUERY)
    }

    /// Host bytes the count of one batch of `queries` queries on `dpus` DPUs keeps until
    /// the run ends ([`Counted`]): two counts per DPU and a checkpoint per slab.
    pub fn counted_bytes(&self, queries: u64, dpus: u64) -> u64 {
        let slabs = queries.div_ceil(self.slab_queries as u64);
        let checkpoint = std::mem::size_of::<Checkpoint>() as u64;
        (dpus.saturating_mul(COUNTED_BYTES_PER_DPU))
            .saturating_add(slabs.saturating_mul(checkpoint))
    }
}

/// The most fragments one DPU can be given in a batch that runs: its query and result
/// buffers must fit in `mram_bytes` in each of at most `max_launches` launches (a batch
/// that needs more is refused before it is evaluated).
pub fn most_fragments_per_dpu(kind: QueryKind, mram_bytes: u64, max_launches: u32) -> u64 {
    let record = query_record_bytes(kind) + result_record_bytes(kind);
    (mram_bytes / record).saturating_mul(u64::from(max_launches))
}

/// A batch after its counting pass.
#[derive(Debug, Clone)]
pub struct Counted {
    pub shape: Shape,
    /// Queries each DPU serves (a query counted once per DPU).
    pub served: Vec<u64>,
    /// The batch's stream at the start of each slab.
    checkpoints: Vec<Checkpoint>,
    slab_queries: usize,
    /// What the batch's fragments must cover ([`Coverage`]).
    coverage: Coverage,
}

/// Draws batch `index` a slab at a time and routes it, keeping only its shape; the next
/// slab is drawn while the last is routed.
pub fn count(
    queries: &QueryGenerator,
    index: u64,
    routing: &dyn RoutingPolicy,
    env: &BatchEnv,
    slab_queries: usize,
) -> Counted {
    let p = env.machine.dpus as usize;
    let mut stream = queries.stream(index);
    let mut fragments = vec![0u64; p];
    let mut served = vec![0u64; p];
    let mut checkpoints = vec![stream.checkpoint()];
    let mut slab = Vec::with_capacity(slab_queries);
    stream.fill(&mut slab, slab_queries);
    let most_slabs = queries.batch_size().div_ceil(slab_queries as u64);
    let (mut coverage, mut first) = (Coverage::default(), 0u64);
    while !slab.is_empty() {
        assert!(
            checkpoints.len() as u64 <= most_slabs,
            "slabs beyond the batch"
        );
        let mut next = Vec::with_capacity(slab_queries);
        // The slab's coverage is summed beside its routing, off the drawing thread.
        let ((routed, covered), ()) = rayon::join(
            || {
                (
                    routing.route(env, &slab),
                    Coverage::of_queries(first, &slab),
                )
            },
            || {
                if stream.drawn() < queries.batch_size() {
                    checkpoints.push(stream.checkpoint());
                    stream.fill(&mut next, slab_queries);
                }
            },
        );
        for (d, b) in routed.iter().enumerate() {
            fragments[d] += b.len() as u64;
            served[d] += distinct_queries(b);
        }
        coverage = coverage.plus(covered);
        first += slab_queries as u64;
        slab = next;
    }
    Counted {
        shape: Shape {
            queries: queries.batch_size(),
            fragments,
        },
        served,
        checkpoints,
        slab_queries,
        coverage,
    }
}

/// Cuts DPUs `dpus` into runs of consecutive DPUs of at most `budget` fragments (a DPU
/// above the budget alone).
pub fn runs(fragments: &[u64], dpus: Range<usize>, budget: u64) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut sum) = (dpus.start, 0u64);
    for d in dpus.clone() {
        if d > start && sum + fragments[d] > budget {
            out.push(start..d);
            (start, sum) = (d, 0);
        }
        sum += fragments[d];
    }
    if start < dpus.end {
        out.push(start..dpus.end);
    }
    out
}

/// The key ranges the chunks of DPUs `group` own, sorted and merged where they touch.
pub fn key_ranges(
    partitioning: &Partitioning,
    data: &DataSet,
    group: &Range<usize>,
) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for part in partitioning.parts.iter() {
        if !group.contains(&(part.dpu as usize)) {
            continue;
        }
        let first = chunk_key_range(data, part.chunks.start).0;
        let last = chunk_key_range(data, part.chunks.end - 1).1;
        match out.last_mut() {
            Some(prev) if prev.1.checked_add(1) == Some(first) => prev.1 = last,
            _ => out.push((first, last)),
        }
    }
    out
}

/// Whether `[lo, hi]` meets one of `ranges` (sorted, disjoint).
fn meets(ranges: &[(u64, u64)], lo: u64, hi: u64) -> bool {
    let i = ranges.partition_point(|r| r.1 < lo);
    ranges.get(i).is_some_and(|r| r.0 <= hi)
}

/// Draws slab `c` and routes the queries that meet `ranges`: every DPU's fragments, their
/// origins the queries' indices in the slab. `reach` holds the draws that can.
fn route_slab(
    queries: &QueryGenerator,
    (index, c, slab_queries): (u64, &Checkpoint, usize),
    routing: &dyn RoutingPolicy,
    env: &BatchEnv,
    (ranges, reach): (&[(u64, u64)], &Reach),
) -> Vec<DpuBatch> {
    // Each query is tested as it is drawn: most are another group's, and holding the
    // whole slab only to drop them cost a slab's bytes through memory twice. Most of those
    // are known from the draw's first number, before their keys are worked out.
    let mut stream = queries.resume(index, c);
    let (mut slab, mut kept) = (Vec::new(), Vec::new());
    let n = u32::try_from(slab_queries).expect("a slab holds at most 1 Mi queries");
    for i in 0..n {
        let Some(drawn) = stream.next_reaching(reach) else {
            break;
        };
        if let Drawn::Query(q) = drawn
            && meets(ranges, q.lo, q.hi)
        {
            slab.push(q);
            kept.push(i);
        }
    }
    let mut routed = routing.route(env, &slab);
    for b in &mut routed {
        for o in &mut b.origin {
            *o = kept[*o as usize];
        }
    }
    routed
}

/// Draws batch `index` again and routes it, keeping the fragments of DPUs `group`: every
/// DPU's batch (empty outside the group), as routing the whole batch gives them. Only the
/// queries that meet the group's key ranges are routed: a routing policy routes each query
/// on its own (see [`RoutingPolicy::route`]).
pub fn route_group(
    queries: &QueryGenerator,
    (index, counted): (u64, &Counted),
    routing: &dyn RoutingPolicy,
    env: &BatchEnv,
    (group, ranges): (Range<usize>, &[(u64, u64)]),
) -> Vec<DpuBatch> {
    let mut gathered: Vec<Gathered> = group.clone().map(|_| Gathered::default()).collect();
    let slab_queries = counted.slab_queries;
    let reach = queries.stream(index).reach(ranges);
    for (first, at) in counted.checkpoints.chunks(SLABS_AT_ONCE).enumerate() {
        let routed: Vec<Vec<DpuBatch>> = at
            .par_iter()
            .map(|c| {
                let at = (index, c, slab_queries);
                let mut all = route_slab(queries, at, routing, env, (ranges, &reach));
                all.truncate(group.end);
                all.drain(..group.start);
                all
            })
            .collect();
        for (k, slab) in routed.into_iter().enumerate() {
            let offset = ((first * SLABS_AT_ONCE + k) * slab_queries) as u32;
            for (g, b) in gathered.iter_mut().zip(slab) {
                g.append(&b, offset);
            }
        }
    }
    let mut batches = vec![DpuBatch::default(); group.start];
    batches.extend(gathered.into_iter().map(Gathered::into_batch));
    batches.resize(env.machine.dpus as usize, DpuBatch::default());
    batches
}

/// What evaluating a streamed batch needs besides the system.
pub struct Streamer<'a> {
    pub env: &'a BatchEnv<'a>,
    pub routing: &'a dyn RoutingPolicy,
    pub evaluation: &'a dyn EvaluationPolicy,
    pub prepared: &'a Prepared,
    pub partitioning: &'a Partitioning,
    /// Each DPU's cold and hot chunks (see [`chunks_per_dpu`]).
    pub chunks: &'a (Vec<Vec<usize>>, Vec<Vec<usize>>),
    pub batch: u64,
    pub budget: Budget,
    /// Launches each DPU's share of the batch is split into (see
    /// [`DpuBatch::launch_part`]).
    pub launches: u32,
}

impl Streamer<'_> {
    /// Evaluates batch `counted` a group at a time, a window at a time, and checks the
    /// result of every fragment: for each launch, every DPU's launch report, in DPU order.
    /// `meter` counts each fragment once routed and once evaluated.
    pub fn evaluate(
        &self,
        system: &mut System,
        counted: &Counted,
        meter: &Meter,
    ) -> Result<Vec<Vec<LaunchReport>>, IndexError> {
        let fragments = &counted.shape.fragments;
        meter.start(2 * counted.shape.total_fragments().max(1));
        let mut reports: Vec<Vec<LaunchReport>> = (0..self.launches)
            .map(|_| Vec::with_capacity(fragments.len()))
            .collect();
        let (mut checked, mut covered) = (0u64, Coverage::default());
        for group in runs(fragments, 0..fragments.len(), self.budget.group_fragments) {
            let ranges = key_ranges(self.partitioning, &self.prepared.data, &group);
            let mut batches = route_group(
                &self.prepared.queries,
                (self.batch, counted),
                self.routing,
                self.env,
                (group.clone(), &ranges),
            );
            // Before the evaluation rewrites gets to the keys they resolve to.
            covered = covered.plus(Coverage::of_fragments(&batches[group.clone()]));
            meter.add(fragments[group.clone()].iter().sum());
            for w in runs(fragments, group, self.budget.window_fragments) {
                let done: u64 = fragments[w.clone()].iter().sum();
                let (window, records) = self.evaluate_window(system, &mut batches, w)?;
                for (all, launch) in reports.iter_mut().zip(window) {
                    all.extend(launch);
                }
                checked += records;
                meter.add(done);
            }
        }
        let total = counted.shape.total_fragments();
        if checked != total {
            return Err(IndexError::Verification(format!(
                "batch {}: the results of {checked} of its {total} fragments were checked against the reference",
                self.batch
            )));
        }
        if covered != counted.coverage {
            return Err(IndexError::Verification(format!(
                "batch {}: its fragments cover {} keys (with their checksum), its queries' ranges {}: routing lost, repeated or misplaced part of a query",
                self.batch,
                covered.keys(),
                counted.coverage.keys()
            )));
        }
        Ok(reports)
    }

    /// Answers the fragments of DPUs `dpus` plainly (resolving gets), evaluates them on the
    /// DPUs launch after launch, checks every result, and discards their buffers from
    /// MRAM. Returns, for each launch, the DPUs' launch reports, and the results checked.
    fn evaluate_window(
        &self,
        system: &mut System,
        batches: &mut [DpuBatch],
        dpus: Range<usize>,
    ) -> Result<(Vec<Vec<LaunchReport>>, u64), IndexError> {
        let (cold, hot) = self.chunks;
        let kind = self.env.kind;
        let expected: Vec<Vec<Answer>> = batches[dpus.clone()]
            .par_iter_mut()
            .zip(dpus.clone())
            .map(|(b, d)| expected_answers(kind, &self.prepared.data, [&cold[d], &hot[d]], b))
            .collect();
        let mut reports = Vec::with_capacity(self.launches as usize);
        let mut checked = 0u64;
        for l in 0..self.launches {
            let split: Vec<DpuBatch>;
            let launch = if self.launches == 1 {
                &*batches
            } else {
                split = launch_parts_of(batches, dpus.clone(), l, self.launches);
                &split
            };
            let part = self
                .evaluation
                .evaluate(self.env, system, launch, dpus.clone())?;
            for ((d, got), want) in dpus.clone().zip(&part.results).zip(&expected) {
                let records = launch_records(want.len(), l, self.launches);
                let want = &want[records.clone()];
                if got.len() != want.len() {
                    return Err(IndexError::Verification(format!(
                        "batch {}, DPU {d}: the DPU answered {} records, the reference {}",
                        self.batch,
                        got.len(),
                        want.len()
                    )));
                }
                if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                    let record = records.start + i;
                    return Err(IndexError::Verification(format!(
                        "batch {}, DPU {d}, record {record} (of query {}, {}): the DPU answered {:?}, the reference {:?}",
                        self.batch,
                        batches[d].origin[record],
                        kind.name(),
                        got[i],
                        want[i]
                    )));
                }
                checked += want.len() as u64;
            }
            reports.push(part.reports);
        }
        for (dpu, layout) in system.dpus_mut()[dpus.clone()]
            .iter_mut()
            .zip(&self.env.layouts[dpus])
        {
            dpu.mram_mut().discard_from(layout.query_base);
        }
        Ok((reports, checked))
    }
}

/// The plain answer of each of a DPU's fragments (cold, then hot), from the pairs of its
/// chunks; gets are rewritten to the existing keys they resolve to, as the host does
/// before it sends them.
fn expected_answers(
    kind: crate::workload::QueryKind,
    data: &DataSet,
    chunks: [&[usize]; 2],
    batch: &mut DpuBatch,
) -> Vec<Answer> {
    let mut fragments: Vec<Query> = batch.cold.iter().chain(&batch.hot).copied().collect();
    let reference = Reference::new(kind, &[&fragments]);
    for &c in chunks[0].iter().chain(chunks[1]) {
        let (first, last) = chunk_key_range(data, c);
        reference.visit(first, last, &data.chunk_pairs_of(c));
    }
    if !kind.is_range() {
        reference.resolved_gets(0, &mut fragments);
        let (cold, hot) = fragments.split_at(batch.cold.len());
        batch.cold.copy_from_slice(cold);
        batch.hot.copy_from_slice(hot);
    }
    reference.answers(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_respect_the_budget_and_cover_every_dpu_once() {
        let f = [5, 5, 5, 20, 1, 1, 0, 8];
        assert_eq!(runs(&f, 0..8, 10), vec![0..2, 2..3, 3..4, 4..8]);
        assert_eq!(runs(&f, 2..5, 100), vec![2..5]);
        assert_eq!(runs(&f, 3..3, 10), Vec::<Range<usize>>::new());
        assert_eq!(runs(&[0, 0], 0..2, 0), vec![0..2]);
    }

    #[test]
    fn a_small_budget_keeps_slabs_large_and_the_counts_small() {
        // One fragment per group: slabs of 64 Ki queries, not of one query, so a 1.1 G
        // batch keeps about 17 k checkpoints, not 1.1 G of them.
        let tiny = Budget::new(1);
        assert_eq!(tiny.slab_queries, 1 << 16);
        let batch = 1_100_000_000;
        let checkpoint = std::mem::size_of::<Checkpoint>() as u64;
        let counted = tiny.counted_bytes(batch, 1012);
        assert_eq!(counted, 1012 * 16 + batch.div_ceil(1 << 16) * checkpoint);
        assert!(counted < 16 << 20, "{counted}");
        // The default budget: slabs of 1 Mi queries.
        assert_eq!(Budget::new(80 << 20).slab_queries, 1 << 20);
        assert_eq!(Budget::new(1 << 22).slab_queries, 1 << 19);
    }

    #[test]
    fn a_dpu_above_the_budget_counts_as_a_group_and_a_window() {
        let budget = Budget::new(1000);
        let slabs = 8 * (1 << 16) * 24;
        let big = (u64::MAX, u64::MAX);
        assert_eq!(budget.host_bytes(0, big), 1000 * 28 + 200 * 134 + slabs);
        // One DPU may be given 10,000 fragments: it is a group and a window alone.
        assert_eq!(budget.host_bytes(10_000, big), 10_000 * (28 + 134) + slabs);
        // A batch of 100 queries and at most 300 fragments holds no more than those.
        assert_eq!(
            budget.host_bytes(10_000, (100, 300)),
            300 * (28 + 134) + 100 * 24
        );
        // 64 MiB of MRAM, records of 24 + 8 bytes for a range count: 2 Mi per launch.
        let most = most_fragments_per_dpu(QueryKind::RangeCountIf, 64 << 20, 3);
        assert_eq!(most, 3 * (2 << 20));
    }
}
