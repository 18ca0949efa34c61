//! Predecessor and scan batches as PIM-tree's host plans them (PT:`host/operation.hpp`,
//! `predecessor_core` and `scan`), round by round, with the reply each DPU task must give.
//!
//! **Predecessor**: sort and deduplicate; an L3 round (the distinct keys cut into equal
//! contiguous slices, one per DPU, each searched in the replicated top); the skew test at
//! the level-2 nodes (bias = busiest DPU's queries x P / m, threshold 3). Unskewed: one push
//! round through the shadow subtrees (groups cut at 32 keys). Skewed: a round pulling the
//! level-2 nodes of groups above 16 queries, then a round pulling the level-1 nodes of
//! groups above 16 and pushing the rest. Then the level-0 round (the bias again: each query
//! pushed alone, or push-pull at 16) and the data round (one task per distinct data node).
//!
//! **Scan** (for range-count-if and range-max, which PIM-tree has no operator for): in
//! sub-batches of 10,000 ranges (PB:`include/host/driver.hpp`), sort the ranges, merge the
//! overlapping ones, cut merged ranges at least five times the first range's width into
//! pieces of that width; an L3 scan round; one round per level, where each range's first
//! and last node are searched (pushed, or pulled once when 32 or more ranges share it) and
//! the nodes between them return all their children; the data round; then the host sorts
//! the pairs and answers every range by two binary searches and a pass over its pairs.

use super::image::Layout;
use super::nodes::node_pptr;
use super::round::{Block, DpuRound, TaskType};
use super::skiplist::{SkipList, pptr_dpu};
use crate::host::HostWork;
use crate::workload::Query;

/// PIM-tree's skew threshold (PT:`host/operation.hpp`, `bias_limit` = 3).
pub const BIAS_LIMIT: f64 = 3.0;
/// Queries of one node above which the predecessor rounds pull the node
/// (PT:`host/operation.hpp`, `push_pull_limit_dynamic` = `L2_SIZE` = 16).
pub const PULL_LIMIT: usize = 16;
/// Largest group pushed at once through the shadow subtrees, and the ranges sharing a
/// boundary node from which the scan pulls it (`push_pull_limit` = 2 x `L2_SIZE` = 32).
pub const PUSH_LIMIT: usize = 32;
/// Ranges per scan sub-batch in PIM-tree's driver (PB:`include/host/driver.hpp`).
pub const SCAN_SUB_BATCH: usize = 10_000;
/// A merged range this many times the first range's width is cut
/// (PT:`host/operation.hpp`, `scan`).
pub const RESPLIT_FACTOR: u64 = 5;

/// A data key as the host must find it: key, value, pointer to its data node.
pub type Found = (u64, u64, u64);

/// The data the plans need, found in one pass over the data in key order: the
/// predecessor of every point query, and every key inside the scans' ranges.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    points: Vec<u64>,
    answers: Vec<Found>,
    cursor: usize,
    last: Option<Found>,
    ranges: Vec<(u64, u64)>,
    range_cursor: usize,
    inside: Vec<Found>,
}

impl Wanted {
    /// For the point queries `points` and the ranges `ranges` (any order, overlapping).
    pub fn new(mut points: Vec<u64>, mut ranges: Vec<(u64, u64)>) -> Wanted {
        points.sort_unstable();
        points.dedup();
        ranges.sort_unstable();
        Wanted {
            answers: Vec::with_capacity(points.len()),
            points,
            ranges: union(&ranges),
            ..Wanted::default()
        }
    }

    /// The next data key (keys in increasing order).
    pub fn see(&mut self, found: Found) {
        let key = found.0;
        while self.cursor < self.points.len() && self.points[self.cursor] < key {
            self.answers.push(self.last.unwrap_or(found));
            self.cursor += 1;
        }
        self.last = Some(found);
        while self.range_cursor < self.ranges.len() && self.ranges[self.range_cursor].1 < key {
            self.range_cursor += 1;
        }
        if self
            .ranges
            .get(self.range_cursor)
            .is_some_and(|r| r.0 <= key)
        {
            self.inside.push(found);
        }
    }

    /// After the last key.
    pub fn finish(&mut self) {
        let last = self.last.expect("the data has keys");
        self.answers.resize(self.points.len(), last);
    }

    /// The predecessor of point `q` (the first key when none is below).
    pub fn answer(&self, q: u64) -> Found {
        let i = self.points.binary_search(&q).expect("a wanted point");
        self.answers[i]
    }

    /// The keys in `[lo, hi]` (a range inside a wanted one).
    pub fn inside(&self, lo: u64, hi: u64) -> &[Found] {
        let a = self.inside.partition_point(|f| f.0 < lo);
        let z = self.inside.partition_point(|f| f.0 <= hi);
        &self.inside[a..z]
    }

    /// Keys held for the scans.
    pub fn inside_len(&self) -> usize {
        self.inside.len()
    }
}

/// Sorted ranges merged where they overlap or touch.
fn union(sorted: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(sorted.len());
    for &(lo, hi) in sorted {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// A batch's ranges as a scan sub-batch sends them: sorted, merged, long ones re-split.
pub fn merge_ranges(queries: &[Query]) -> Vec<(u64, u64)> {
    let Some(first) = queries.first() else {
        return Vec::new();
    };
    // Keys the first range spans (its width, in the key space).
    let width = (first.hi - first.lo).saturating_add(1);
    let mut sorted: Vec<(u64, u64)> = queries.iter().map(|q| (q.lo, q.hi)).collect();
    sorted.sort_unstable();
    let mut out = Vec::new();
    for (lo, hi) in union_overlapping(&sorted) {
        if (hi - lo).saturating_add(1) < RESPLIT_FACTOR.saturating_mul(width) {
            out.push((lo, hi));
            continue;
        }
        let mut at = lo;
        loop {
            let end = at.saturating_add(width - 1).min(hi);
            out.push((at, end));
            if end == hi {
                break;
            }
            at = end + 1;
        }
    }
    out
}

/// Sorted ranges merged where they overlap (PIM-tree's prefix maximum of right ends).
fn union_overlapping(sorted: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(sorted.len());
    for &(lo, hi) in sorted {
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// One round of a batch: what each DPU runs, and the host work before and after it.
#[derive(Debug, Clone)]
pub struct Round {
    pub name: &'static str,
    pub dpus: Vec<DpuRound>,
    pub prepare: HostWork,
    pub finish: HostWork,
}

/// A batch's plan: its rounds, the host's work before and after them, how to read the
/// answers from the data rounds' replies, and PIM-tree's counts.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub rounds: Vec<Round>,
    pub load: HostWork,
    pub fill: HostWork,
    /// The data-round tasks, (round, DPU, task), whose replies answer the queries.
    pub fetched: Vec<(u32, u32, u32)>,
    /// Each query's tasks: `fetched[start..end]`.
    pub answer_spans: Vec<(u32, u32)>,
    pub distinct: u64,
    pub pushes: u64,
    pub pulls: u64,
    pub skewed_rounds: u64,
}

/// Builds one round's per-DPU blocks.
struct Builder<'a> {
    layout: &'a Layout,
    list: &'a SkipList,
    dpus: Vec<DpuRound>,
    pushes: u64,
    pulls: u64,
}

impl<'a> Builder<'a> {
    fn new(layout: &'a Layout, list: &'a SkipList) -> Builder<'a> {
        Builder {
            layout,
            list,
            dpus: vec![Vec::new(); list.dpus as usize],
            pushes: 0,
            pulls: 0,
        }
    }

    /// DPU `d`'s block of `kind` (created on first use); returns its task count so far.
    fn add(&mut self, d: u32, kind: TaskType, task: &[u64], expect: &[u64]) -> u32 {
        let round = &mut self.dpus[d as usize];
        let at = match round.iter().position(|b| b.kind == kind) {
            Some(at) => at,
            None => {
                round.push(Block::new(kind));
                round.len() - 1
            }
        };
        let block = &mut round[at];
        block.push(task, expect);
        match kind {
            TaskType::Push | TaskType::PushOne | TaskType::ScanSearch => self.pushes += 1,
            TaskType::Pull => self.pulls += 1,
            _ => {}
        }
        (block.len() - 1) as u32
    }

    fn ptr(&self, level: usize, i: usize) -> u64 {
        node_pptr(self.layout, self.list, level, i)
    }

    /// A pull of node `i` of `level >= 1`: its keys, then its children's pointers.
    fn pull(&mut self, level: usize, i: usize) {
        let children = self.list.children(level, i);
        let mut expect: Vec<u64> = children
            .clone()
            .map(|c| self.list.head(level - 1, c))
            .collect();
        expect.extend(children.map(|c| self.ptr(level - 1, c)));
        self.add(
            self.list.dpu(level, i),
            TaskType::Pull,
            &[self.ptr(level, i)],
            &expect,
        );
    }

    /// A pull of level-0 node `i`, of which the host knows the entries `known`.
    fn pull0(&mut self, i: usize, known: &[Found]) {
        let d = self.list.dpu(0, i);
        let mut expect = vec![self.list.len(0, i)];
        expect.extend(known.iter().flat_map(|f| [f.0, f.2]));
        let at = self.add(d, TaskType::Pull, &[self.ptr(0, i)], &expect);
        let round = &mut self.dpus[d as usize];
        let block = round
            .iter_mut()
            .find(|b| b.kind == TaskType::Pull)
            .expect("added");
        assert!(at == 0 || block.partial, "one block pulls one level");
        block.partial = true;
    }

    fn finish(self, name: &'static str, prepare: HostWork, finish: HostWork) -> (Round, u64, u64) {
        let round = Round {
            name,
            dpus: self.dpus,
            prepare,
            finish,
        };
        (round, self.pushes, self.pulls)
    }
}

/// Consecutive runs of equal values: (start, end) index pairs.
fn groups<T: PartialEq>(values: &[T]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=values.len() {
        if i == values.len() || values[i] != values[start] {
            if start < values.len() {
                out.push((start, i));
            }
            start = i;
        }
    }
    out
}

/// PIM-tree's bias of `nodes` (one per query) at `level`: busiest DPU's share x P.
fn bias(list: &SkipList, level: usize, nodes: &[usize]) -> f64 {
    let mut count = vec![0u64; list.dpus as usize];
    for &n in nodes {
        count[list.dpu(level, n) as usize] += 1;
    }
    let most = count.iter().copied().max().unwrap_or(0);
    most as f64 * list.dpus as f64 / nodes.len().max(1) as f64
}

/// Scanned elements as host work.
fn scanned(n: u64) -> HostWork {
    HostWork {
        elements_scanned: n,
        ..HostWork::default()
    }
}

/// Tasks bucketed into per-DPU buffers, after `passes` passes over `n` queries.
fn bucketed(tasks: u64, passes: u64, n: u64) -> HostWork {
    HostWork {
        tasks_bucketed: tasks,
        elements_scanned: passes * n,
        ..HostWork::default()
    }
}

/// Plans a predecessor batch of drawn `keys` (batch order).
pub fn plan_predecessor(layout: &Layout, list: &SkipList, wanted: &Wanted, keys: &[u64]) -> Plan {
    let order = super::gets::sort_with_positions(keys);
    let (distinct, key_of_query) = super::gets::deduplicate(&order, keys.len());
    let (n, m) = (keys.len() as u64, distinct.len() as u64);
    let mut plan = Plan {
        load: HostWork {
            elements_sorted: n,
            elements_scanned: 4 * n,
            ..HostWork::default()
        },
        distinct: m,
        ..Plan::default()
    };
    let p = list.dpus as u64;
    let mut b = Builder::new(layout, list);
    let n2: Vec<usize> = distinct.iter().map(|&q| list.cover(2, q)).collect();
    for (j, &q) in distinct.iter().enumerate() {
        let d = slice_owner(j as u64, m, p);
        b.add(d as u32, TaskType::TopSearch, &[q], &[b.ptr(2, n2[j])]);
    }
    plan.push(b, "l3", bucketed(m, 1, m), scanned(m));
    let n1 = level2_rounds(&mut plan, layout, list, &distinct, &n2);
    let n0: Vec<usize> = distinct.iter().map(|&q| list.cover(0, q)).collect();
    debug_assert!(
        n1.iter()
            .zip(&distinct)
            .all(|(&a, &q)| a == list.cover(1, q))
    );
    let answers: Vec<Found> = distinct.iter().map(|&q| wanted.answer(q)).collect();
    level0_round(&mut plan, layout, list, &distinct, &n0, &answers);
    // The data round: one task per distinct data node (answers are in key order).
    let mut b = Builder::new(layout, list);
    let mut task_of = Vec::with_capacity(answers.len());
    let mut last: Option<(u64, (u32, u32, u32))> = None;
    let data_round = plan.rounds.len() as u32;
    for f in &answers {
        let at = match last {
            Some((ptr, at)) if ptr == f.2 => at,
            _ => {
                let d = pptr_dpu(f.2);
                let t = b.add(d, TaskType::GetKey, &[f.2 & 0xffff_ffff], &[f.0, f.1]);
                (data_round, d, t)
            }
        };
        last = Some((f.2, at));
        task_of.push(at);
    }
    plan.push(b, "data", bucketed(m, 1, m), HostWork::default());
    plan.fetched = task_of;
    plan.answer_spans = key_of_query.iter().map(|&i| (i, i + 1)).collect();
    plan.fill = HostWork {
        results_filled: n,
        ..HostWork::default()
    };
    plan
}

/// The DPU of task `j` of `m` cut into `p` equal contiguous slices.
fn slice_owner(j: u64, m: u64, p: u64) -> u64 {
    // Slice d is [d m / p, (d + 1) m / p): the last d with d m / p <= j.
    let mut d = (j * p / m.max(1)).min(p - 1);
    while d > 0 && d * m / p > j {
        d -= 1;
    }
    while d + 1 < p && (d + 1) * m / p <= j {
        d += 1;
    }
    d
}

impl Plan {
    fn push(&mut self, b: Builder, name: &'static str, prepare: HostWork, finish: HostWork) {
        let (round, pushes, pulls) = b.finish(name, prepare, finish);
        self.pushes += pushes;
        self.pulls += pulls;
        self.rounds.push(round);
    }
}

/// The level-2 and level-1 rounds of a predecessor batch; returns each query's level-1
/// node.
fn level2_rounds(
    plan: &mut Plan,
    layout: &Layout,
    list: &SkipList,
    distinct: &[u64],
    n2: &[usize],
) -> Vec<usize> {
    let m = distinct.len() as u64;
    let n1: Vec<usize> = distinct.iter().map(|&q| list.cover(1, q)).collect();
    let groups2 = groups(n2);
    if bias(list, 2, n2) < BIAS_LIMIT {
        let mut b = Builder::new(layout, list);
        for &(s, e) in &groups2 {
            for piece in (s..e).collect::<Vec<_>>().chunks(PUSH_LIMIT) {
                push_group(&mut b, 2, n2[s], piece, distinct);
            }
        }
        plan.push(
            b,
            "l2",
            bucketed(total_tasks_hint(&groups2), 2, m),
            scanned(m),
        );
        return n1;
    }
    plan.skewed_rounds += 1;
    let mut a = Builder::new(layout, list);
    let pulled: Vec<bool> = groups2.iter().map(|&(s, e)| e - s > PULL_LIMIT).collect();
    for (&(s, _), &pull) in groups2.iter().zip(&pulled) {
        if pull {
            a.pull(2, n2[s]);
        }
    }
    plan.push(
        a,
        "l2_pull",
        bucketed(groups2.len() as u64, 3, m),
        HostWork::default(),
    );
    let mut b = Builder::new(layout, list);
    let mut searched = 0u64;
    for (&(s, e), &pull) in groups2.iter().zip(&pulled) {
        if !pull {
            push_group(&mut b, 2, n2[s], &(s..e).collect::<Vec<_>>(), distinct);
            continue;
        }
        // The host searched the pulled level-2 node: these queries are at level 1 now.
        searched += (e - s) as u64 + list.len(2, n2[s]);
        for (s1, e1) in groups(&n1[s..e]) {
            let (s1, e1) = (s + s1, s + e1);
            if e1 - s1 > PULL_LIMIT {
                b.pull(1, n1[s1]);
                searched += (e1 - s1) as u64 + list.len(1, n1[s1]);
            } else {
                push_group(&mut b, 1, n1[s1], &(s1..e1).collect::<Vec<_>>(), distinct);
            }
        }
    }
    plan.push(
        b,
        "l2_push",
        bucketed(m, 2, m) + scanned(searched),
        scanned(searched),
    );
    n1
}

fn total_tasks_hint(groups: &[(usize, usize)]) -> u64 {
    groups
        .iter()
        .map(|&(s, e)| (e - s).div_ceil(PUSH_LIMIT) as u64)
        .sum()
}

/// Pushes queries `idx` (indices of `distinct`) to node `node` of `level`; each must come
/// back with its level-0 node.
fn push_group(b: &mut Builder, level: usize, node: usize, idx: &[usize], distinct: &[u64]) {
    let mut task = vec![b.ptr(level, node), idx.len() as u64];
    task.extend(idx.iter().map(|&j| distinct[j]));
    let expect: Vec<u64> = idx
        .iter()
        .map(|&j| b.ptr(0, b.list.cover(0, distinct[j])))
        .collect();
    b.add(b.list.dpu(level, node), TaskType::Push, &task, &expect);
}

/// The level-0 round of a predecessor batch: every query finds its data node.
fn level0_round(
    plan: &mut Plan,
    layout: &Layout,
    list: &SkipList,
    distinct: &[u64],
    n0: &[usize],
    answers: &[Found],
) {
    let m = distinct.len() as u64;
    let mut b = Builder::new(layout, list);
    if bias(list, 0, n0) < BIAS_LIMIT {
        for (j, &q) in distinct.iter().enumerate() {
            b.add(
                list.dpu(0, n0[j]),
                TaskType::PushOne,
                &[b.ptr(0, n0[j]), q],
                &[answers[j].2],
            );
        }
        plan.push(b, "l1", bucketed(m, 1, m), scanned(m));
        return;
    }
    plan.skewed_rounds += 1;
    let mut searched = 0u64;
    for (s, e) in groups(n0) {
        if e - s > PULL_LIMIT {
            let mut known = answers[s..e].to_vec();
            known.dedup();
            b.pull0(n0[s], &known);
            searched += (e - s) as u64 + list.len(0, n0[s]);
            continue;
        }
        let mut task = vec![b.ptr(0, n0[s]), (e - s) as u64];
        task.extend_from_slice(&distinct[s..e]);
        let expect: Vec<u64> = answers[s..e].iter().map(|f| f.2).collect();
        b.add(list.dpu(0, n0[s]), TaskType::Push, &task, &expect);
    }
    plan.push(b, "l1", bucketed(m, 3, m), scanned(searched));
}

/// Plans a scan batch of `queries` (range-count-if or range-max), in sub-batches.
pub fn plan_scan(layout: &Layout, list: &SkipList, wanted: &Wanted, queries: &[Query]) -> Plan {
    let mut plan = Plan::default();
    for sub in queries.chunks(SCAN_SUB_BATCH) {
        let merged = merge_ranges(sub);
        let n = sub.len() as u64;
        plan.load += HostWork {
            elements_sorted: n,
            elements_scanned: 3 * n,
            ..HostWork::default()
        };
        plan.distinct += merged.len() as u64;
        let keys = scan_rounds(&mut plan, layout, list, wanted, &merged);
        // Each range's keys: the data tasks of the merged pieces it meets.
        let base = plan.fetched.len();
        for q in sub {
            let a = base + keys.partition_point(|k| k.0 < q.lo);
            let z = base + keys.partition_point(|k| k.0 <= q.hi);
            plan.answer_spans.push((a as u32, z as u32));
        }
        plan.fetched.extend(keys.iter().map(|k| k.1));
        let pairs = keys.len() as u64;
        plan.fill += HostWork {
            elements_sorted: pairs,
            elements_scanned: pairs + 2 * n * (64 - pairs.leading_zeros() as u64),
            results_filled: n,
            ..HostWork::default()
        };
    }
    plan
}

/// The rounds of one scan sub-batch; returns every key fetched with its data task, sorted.
fn scan_rounds(
    plan: &mut Plan,
    layout: &Layout,
    list: &SkipList,
    wanted: &Wanted,
    merged: &[(u64, u64)],
) -> Vec<(u64, (u32, u32, u32))> {
    let (r, p) = (merged.len() as u64, list.dpus as u64);
    let mut b = Builder::new(layout, list);
    for (j, &(lo, hi)) in merged.iter().enumerate() {
        let d = slice_owner(j as u64, r, p);
        let expect: Vec<u64> = meeting(list, 2, lo, hi).map(|i| b.ptr(2, i)).collect();
        b.add(d as u32, TaskType::TopScan, &[lo, hi], &expect);
    }
    plan.push(b, "l3", bucketed(r, 1, r), scanned(r));
    for level in [2, 1, 0] {
        let mut b = Builder::new(layout, list);
        let tasks = scan_level(&mut b, wanted, merged, level);
        let name = ["l2_0", "l2_1", "l2_2"][level];
        plan.push(b, name, bucketed(tasks, 2, r), scanned(tasks));
    }
    let mut b = Builder::new(layout, list);
    let data_round = plan.rounds.len() as u32;
    let mut keys = Vec::new();
    for &(lo, hi) in merged {
        for f in wanted.inside(lo, hi) {
            let d = pptr_dpu(f.2);
            let t = b.add(d, TaskType::GetKey, &[f.2 & 0xffff_ffff], &[f.0, f.1]);
            keys.push((f.0, (data_round, d, t)));
        }
    }
    let fetched = keys.len() as u64;
    let prepare = bucketed(fetched, 1, fetched);
    plan.push(b, "data", prepare, HostWork::default());
    keys
}

/// One scan round at `level`: each range's first and last node searched (or pulled once
/// when [`PUSH_LIMIT`] ranges share it), the nodes between them asked for every child.
/// Returns the nodes the ranges meet.
fn scan_level(b: &mut Builder, wanted: &Wanted, merged: &[(u64, u64)], level: usize) -> u64 {
    let list = b.list;
    let spans: Vec<std::ops::Range<usize>> = merged
        .iter()
        .map(|&(lo, hi)| meeting(list, level, lo, hi))
        .collect();
    let mut shared = std::collections::BTreeMap::<usize, Vec<usize>>::new();
    for (j, span) in spans.iter().enumerate() {
        if let (Some(first), Some(last)) = (span.clone().next(), span.clone().last()) {
            shared.entry(first).or_default().push(j);
            if last != first {
                shared.entry(last).or_default().push(j);
            }
        }
    }
    for (&node, ranges) in &shared {
        if ranges.len() >= PUSH_LIMIT && level == 0 {
            let known: Vec<Found> = ranges
                .iter()
                .flat_map(|&j| node_keys(list, wanted, node, merged[j]).to_vec())
                .collect();
            b.pull0(node, &known);
        } else if ranges.len() >= PUSH_LIMIT {
            b.pull(level, node);
        } else {
            for &j in ranges {
                let (lo, hi) = merged[j];
                let expect = scan_expect(b, wanted, level, node, lo, hi);
                let task = [b.ptr(level, node), lo, hi];
                b.add(list.dpu(level, node), TaskType::ScanSearch, &task, &expect);
            }
        }
    }
    for (j, span) in spans.iter().enumerate() {
        for node in span.clone().skip(1).take(span.len().saturating_sub(2)) {
            let expect = scan_expect(b, wanted, level, node, merged[j].0, merged[j].1);
            let task = [b.ptr(level, node)];
            b.add(list.dpu(level, node), TaskType::Children, &task, &expect);
        }
    }
    spans.iter().map(|s| s.len() as u64).sum()
}

/// The nodes of `level` meeting `[lo, hi]`: from the one covering `lo` to the last head at
/// or below `hi`.
fn meeting(list: &SkipList, level: usize, lo: u64, hi: u64) -> std::ops::Range<usize> {
    let end = list.heads(level).partition_point(|&h| h <= hi);
    let start = list.cover(level, lo);
    start.min(end)..end
}

/// The data keys of level-0 node `i` inside `(lo, hi)`.
fn node_keys<'a>(
    list: &SkipList,
    wanted: &'a Wanted,
    i: usize,
    (lo, hi): (u64, u64),
) -> &'a [Found] {
    let from = lo.max(list.head(0, i));
    let to = if i + 1 < list.nodes(0) {
        hi.min(list.head(0, i + 1) - 1)
    } else {
        hi
    };
    if from > to {
        return &[];
    }
    wanted.inside(from, to)
}

/// What a scan search (or, for nodes between a range's ends, a child fetch) of node `i`
/// of `level` for `[lo, hi]` returns.
fn scan_expect(b: &Builder, wanted: &Wanted, level: usize, i: usize, lo: u64, hi: u64) -> Vec<u64> {
    if level == 0 {
        return node_keys(b.list, wanted, i, (lo, hi))
            .iter()
            .map(|f| f.2)
            .collect();
    }
    let meet = meeting(b.list, level - 1, lo, hi);
    let children = b.list.children(level, i);
    (children.start.max(meet.start)..children.end.min(meet.end))
        .map(|c| b.ptr(level - 1, c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(lo: u64, hi: u64) -> Query {
        Query { lo, hi, value: 0 }
    }

    #[test]
    fn overlapping_ranges_merge_and_long_ones_are_cut_at_the_first_width() {
        // First range 10 wide: a merged range of 50 or more is cut into pieces of 10.
        let m = merge_ranges(&[
            q(100, 109),
            q(105, 120),
            q(200, 209),
            q(300, 309),
            q(305, 360),
        ]);
        assert_eq!(
            m,
            vec![
                (100, 120),
                (200, 209),
                (300, 309),
                (310, 319),
                (320, 329),
                (330, 339),
                (340, 349),
                (350, 359),
                (360, 360)
            ]
        );
        // Touching but not overlapping ranges stay apart.
        assert_eq!(merge_ranges(&[q(0, 9), q(10, 19)]), vec![(0, 9), (10, 19)]);
    }

    #[test]
    fn wanted_finds_predecessors_and_the_keys_inside_ranges() {
        let mut w = Wanted::new(vec![5, 25, 30, 99], vec![(12, 31), (28, 40)]);
        for k in [10u64, 20, 30, 40, 50] {
            w.see((k, k + 1, k * 100));
        }
        w.finish();
        // Below the first key: the first key.
        assert_eq!(w.answer(5), (10, 11, 1000));
        assert_eq!(w.answer(25), (20, 21, 2000));
        assert_eq!(w.answer(30), (30, 31, 3000));
        assert_eq!(w.answer(99), (50, 51, 5000));
        let keys: Vec<u64> = w.inside(12, 40).iter().map(|f| f.0).collect();
        assert_eq!(keys, vec![20, 30, 40]);
        assert_eq!(w.inside_len(), 3);
    }

    #[test]
    fn equal_slices_cover_every_task_once_in_order() {
        for (m, p) in [(10u64, 4u64), (3, 8), (1000, 7), (1, 1)] {
            let owners: Vec<u64> = (0..m).map(|j| slice_owner(j, m, p)).collect();
            assert!(owners.windows(2).all(|w| w[0] <= w[1]));
            for d in 0..p {
                let n = owners.iter().filter(|&&o| o == d).count() as u64;
                assert_eq!(n, (d + 1) * m / p - d * m / p, "m {m}, p {p}, DPU {d}");
            }
        }
    }

    #[test]
    fn groups_are_maximal_runs() {
        assert_eq!(groups(&[1, 1, 2, 3, 3, 3]), vec![(0, 2), (2, 3), (3, 6)]);
        assert_eq!(groups::<u8>(&[]), vec![]);
    }
}
