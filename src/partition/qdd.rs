//! Query density-driven partitioning (QDD): Algorithm 1 of the paper with FindHot as the
//! greedy scan (Algorithm 2) or the double scan (Algorithm 3).
//!
//! Thresholds are compared exactly in integers: a window is "wide" when
//! `Size x alpha x P >= mult x D` and "hot" when `NQrys x P >= Q`, with D the total pairs
//! and Q the total of the chunk query counts.

use super::{
    ChunkLoads, PartitionError, PartitionParams, Partitioner, Partitioning, check_enough_chunks,
};

/// A hot partition: one or more runs of chunks (inclusive bounds), moved together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotPiece {
    pub runs: Vec<(usize, usize)>,
}

#[derive(Debug, Clone, Copy)]
struct Thresholds {
    total_pairs: u128,
    total_queries: u128,
    dpus: u128,
    alpha: u128,
}

impl Thresholds {
    fn new(loads: &ChunkLoads, params: &PartitionParams) -> Thresholds {
        Thresholds {
            total_pairs: loads.total_size() as u128,
            total_queries: loads.total_queries() as u128,
            dpus: params.dpus as u128,
            alpha: params.alpha as u128,
        }
    }

    /// Size >= (mult / alpha)(D / P).
    fn wide(&self, size: u64, mult: u64) -> bool {
        size as u128 * self.alpha * self.dpus >= mult as u128 * self.total_pairs
    }

    /// NQrys >= Q / P.
    fn hot(&self, queries: u64) -> bool {
        queries as u128 * self.dpus >= self.total_queries
    }

    /// floor(NQrys / (Q / P)); 0 when there are no queries.
    fn beta(&self, queries: u64) -> u64 {
        (queries as u128 * self.dpus)
            .checked_div(self.total_queries)
            .map_or(0, |b| b as u64)
    }

    /// The gate of the authors' later code: cold load above max(3, alpha + 1)/3 x Q/P.
    fn above_gate(&self, queries: u64) -> bool {
        queries as u128 * 3 * self.dpus > (self.alpha + 1).max(3) * self.total_queries
    }
}

/// Algorithm 2 on base partition `s..=e`: hot ranges as inclusive chunk bounds. With
/// `gates`, the scan only runs while the base's remaining cold load is above the gate.
fn greedy_find_hot(
    loads: &ChunkLoads,
    s: usize,
    e: usize,
    th: &Thresholds,
    gates: bool,
) -> Vec<(usize, usize)> {
    let mut hot = Vec::new();
    if th.total_queries == 0 {
        return hot; // no query density anywhere: nothing is hot
    }
    let mut remaining = loads.queries(s, e);
    if gates && !th.above_gate(remaining) {
        return hot;
    }
    let mut l = s;
    for r in s..=e {
        // Move l to the largest l' in (l, r] whose window c_l'..c_r is still wide.
        while l < r && th.wide(loads.size(l + 1, r), 1) {
            l += 1;
        }
        if th.hot(loads.queries(l, r)) {
            hot.push((l, r));
            remaining -= loads.queries(l, r);
            l = r + 1;
            if gates && !th.above_gate(remaining) {
                break;
            }
        }
    }
    hot
}

/// Algorithm 3 on base partition `s..=e`.
fn double_scan_find_hot(
    loads: &ChunkLoads,
    s: usize,
    e: usize,
    th: &Thresholds,
    gates: bool,
) -> Vec<HotPiece> {
    let first = greedy_find_hot(loads, s, e, th, gates);
    let mut pieces: Vec<HotPiece> = first.iter().map(|&r| HotPiece { runs: vec![r] }).collect();
    let len = e - s + 1;
    let mut in_first = vec![false; len];
    for &(a, b) in &first {
        in_first[a - s..=b - s].fill(true);
    }
    // cold[k] = queries of chunks s..s+k not in the first scan's hot ranges.
    let mut cold = Vec::with_capacity(len + 1);
    cold.push(0u64);
    for k in 0..len {
        let q = if in_first[k] {
            0
        } else {
            loads.chunk_queries(s + k)
        };
        cold.push(cold[k] + q);
    }
    let cold_of = |a: usize, b: usize| cold[b - s + 1] - cold[a - s];
    let cold_total = cold[len];
    let beta = th.beta(cold_total);
    if beta == 0 || (gates && !th.above_gate(cold_total)) {
        return pieces;
    }
    // First loop: the window about beta hot-range widths wide with the most cold queries.
    let (mut l, mut l0, mut r0) = (s, s, s);
    for r in s..=e {
        while l < r && th.wide(loads.size(l + 1, r), beta) {
            l += 1;
        }
        if cold_of(l, r) > cold_of(l0, r0) {
            (l0, r0) = (l, r);
        }
    }
    // Second loop: carve the window right to left into pieces of hot-range width.
    let mut remaining = cold_total;
    let mut r = r0;
    loop {
        let mut l = r;
        while l > l0 && !th.wide(loads.size(l, r), 1) {
            l -= 1;
        }
        let runs = runs_outside(&in_first, s, l, r);
        if !runs.is_empty() {
            remaining -= cold_of(l, r);
            pieces.push(HotPiece { runs });
        }
        if l == l0 || (gates && !th.above_gate(remaining)) {
            break;
        }
        r = l - 1;
    }
    pieces
}

/// The maximal runs of `a..=b` outside the marked chunks (`marked` is indexed from `s`).
fn runs_outside(marked: &[bool], s: usize, a: usize, b: usize) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = None;
    for c in a..=b {
        match (marked[c - s], start) {
            (false, None) => start = Some(c),
            (true, Some(st)) => {
                runs.push((st, c - 1));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(st) = start {
        runs.push((st, b));
    }
    runs
}

/// Algorithm 1 with the given FindHot.
fn qdd_partition(
    loads: &ChunkLoads,
    params: &PartitionParams,
    find_hot: impl Fn(usize, usize, &Thresholds) -> Vec<HotPiece>,
) -> Result<Partitioning, PartitionError> {
    check_enough_chunks(loads, params.dpus)?;
    let p = params.dpus as usize;
    let th = Thresholds::new(loads, params);
    let mut owners: Vec<(u32, bool)> = Vec::with_capacity(loads.chunks());
    let mut cold_load = Vec::with_capacity(p);
    // (load, first chunk, home base partition, piece)
    let mut hot: Vec<(u64, usize, usize, HotPiece)> = Vec::new();
    for j in 0..p {
        let (a, b) = loads.base_partition(j, p);
        owners.extend(std::iter::repeat_n((j as u32, false), b - a));
        cold_load.push(loads.queries(a, b - 1));
        for piece in find_hot(a, b - 1, &th) {
            let load = piece.runs.iter().map(|&(x, y)| loads.queries(x, y)).sum();
            hot.push((load, piece.runs[0].0, j, piece));
        }
    }
    // Heaviest hot pieces first; ties in key order.
    hot.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let mut warnings = Vec::new();
    if hot.len() > p {
        warnings.push(format!(
            "FindHot returned {} hot ranges for {p} DPUs; the {} lightest stay cold",
            hot.len(),
            hot.len() - p
        ));
        hot.truncate(p);
    }
    for (load, _, home, _) in &hot {
        cold_load[*home] -= load;
    }
    // Lightest cold DPUs first; ties by DPU index.
    let mut order: Vec<usize> = (0..p).collect();
    order.sort_by_key(|&j| (cold_load[j], j));
    for ((_, _, _, piece), &dpu) in hot.iter().zip(&order) {
        for &(x, y) in &piece.runs {
            owners[x..=y].fill((dpu as u32, true));
        }
    }
    let mut partitioning = Partitioning::from_owners(&owners, params.dpus, hot.len() as u32);
    partitioning.warnings = warnings;
    Ok(partitioning)
}

/// QDD with the greedy FindHot (Algorithm 2).
pub struct QddGreedy;

impl Partitioner for QddGreedy {
    fn name(&self) -> &'static str {
        "qdd-greedy"
    }

    fn tuning_keys(&self) -> &'static [&'static str] {
        &["partition.alpha"]
    }

    fn partition(
        &self,
        loads: &ChunkLoads,
        params: &PartitionParams,
    ) -> Result<Partitioning, PartitionError> {
        qdd_partition(loads, params, |s, e, th| {
            greedy_find_hot(loads, s, e, th, false)
                .into_iter()
                .map(|r| HotPiece { runs: vec![r] })
                .collect()
        })
    }
}

/// QDD with the double-scan FindHot (Algorithm 3).
pub struct QddDoubleScan;

impl Partitioner for QddDoubleScan {
    fn name(&self) -> &'static str {
        "qdd-double-scan"
    }

    fn tuning_keys(&self) -> &'static [&'static str] {
        &["partition.alpha", "partition.double_scan_gates"]
    }

    fn partition(
        &self,
        loads: &ChunkLoads,
        params: &PartitionParams,
    ) -> Result<Partitioning, PartitionError> {
        let gates = params.double_scan_gates;
        qdd_partition(loads, params, |s, e, th| {
            double_scan_find_hot(loads, s, e, th, gates)
        })
    }
}

/// FindHot results for a single base partition, exposed for property tests.
pub fn find_hot_for_tests(
    loads: &ChunkLoads,
    params: &PartitionParams,
    s: usize,
    e: usize,
    double_scan: bool,
) -> Vec<HotPiece> {
    let th = Thresholds::new(loads, params);
    if double_scan {
        double_scan_find_hot(loads, s, e, &th, params.double_scan_gates)
    } else {
        greedy_find_hot(loads, s, e, &th, false)
            .into_iter()
            .map(|r| HotPiece { runs: vec![r] })
            .collect()
    }
}
