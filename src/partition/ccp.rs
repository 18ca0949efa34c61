//! Chains-on-chains partitioning (CCP): cut the chunk sequence into P contiguous parts that
//! minimise the largest query load, optionally with every part holding at most a data cap.
//!
//! Exact method: the smallest feasible integer bottleneck B is found by binary search; a
//! bottleneck is feasible when the greedy probe (close a part when the next chunk would
//! push it above B queries or above the cap) needs at most P parts. Both limits are on sums
//! of non-negative loads, so the greedy probe uses the fewest parts possible for a given B,
//! which makes the search exact.

use super::{
    ChunkLoads, PartitionError, PartitionParams, Partitioner, Partitioning, check_enough_chunks,
};
use std::ops::Range;

/// Greedy probe: the number of parts needed with bottleneck `b`, or `None` when a single
/// chunk exceeds `b`. Stops counting once above `limit`.
fn parts_needed(loads: &ChunkLoads, b: u64, cap_pairs: u64, limit: usize) -> Option<usize> {
    let mut parts = 1;
    let (mut q, mut d) = (0u64, 0u64);
    for i in 0..loads.chunks() {
        let (cq, cd) = (loads.chunk_queries(i), loads.chunk_size(i));
        if cq > b {
            return None;
        }
        if q + cq > b || d + cd > cap_pairs {
            parts += 1;
            if parts > limit {
                return Some(parts);
            }
            q = 0;
            d = 0;
        }
        q += cq;
        d += cd;
    }
    Some(parts)
}

/// The greedy cut for bottleneck `b` (assumed feasible).
fn greedy_cut(loads: &ChunkLoads, b: u64, cap_pairs: u64) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut q, mut d) = (0usize, 0u64, 0u64);
    for i in 0..loads.chunks() {
        let (cq, cd) = (loads.chunk_queries(i), loads.chunk_size(i));
        if i > start && (q + cq > b || d + cd > cap_pairs) {
            ranges.push(start..i);
            start = i;
            q = 0;
            d = 0;
        }
        q += cq;
        d += cd;
    }
    ranges.push(start..loads.chunks());
    ranges
}

/// Exact CCP into at most `p` parts with at most `cap_pairs` pairs each. Returns the parts
/// of the greedy probe at the optimal bottleneck, and that bottleneck.
///
/// When one dense chunk sets the bottleneck, the probe may need fewer than `p` parts; the
/// remaining DPUs then hold no data, as in the method's definition. (Splitting the longest
/// parts over them would lower the data imbalance without raising the bottleneck; that is
/// a different baseline, not the one the paper compares with.)
pub fn ccp(
    loads: &ChunkLoads,
    p: u32,
    cap_pairs: u64,
) -> Result<(Vec<Range<usize>>, u64), PartitionError> {
    let limit = p as usize;
    for i in 0..loads.chunks() {
        if loads.chunk_size(i) > cap_pairs {
            return Err(PartitionError::ChunkAboveCap {
                chunk: i,
                pairs: loads.chunk_size(i),
                cap_pairs,
            });
        }
    }
    let mut lo = loads.max_chunk_queries();
    let mut hi = loads.total_queries();
    match parts_needed(loads, hi, cap_pairs, limit) {
        Some(n) if n <= limit => {}
        _ => {
            return Err(PartitionError::CapInfeasible {
                dpus: p,
                cap_pairs,
                pairs: loads.total_size(),
            });
        }
    }
    // Invariant: hi is feasible; everything below lo is infeasible.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match parts_needed(loads, mid, cap_pairs, limit) {
            Some(n) if n <= limit => hi = mid,
            _ => lo = mid + 1,
        }
    }
    Ok((greedy_cut(loads, hi, cap_pairs), hi))
}

/// The data cap in pairs: floor(data_cap x D / P), where a product within a billionth of a
/// whole number is that number (1.15 is not exact in binary: 1.15 x 12,800 / 128 computes
/// as 114.99999999999999, and means 115).
pub fn cap_pairs(loads: &ChunkLoads, params: &PartitionParams) -> u64 {
    let d = loads.total_size() as f64;
    let exact = params.data_cap * d / params.dpus as f64;
    let nearest = exact.round();
    let cap = if (exact - nearest).abs() <= 1e-9 * nearest.max(1.0) {
        nearest
    } else {
        exact.floor()
    };
    cap as u64
}

/// Query-balanced: CCP on query load alone, no memory cap (Pinar and Aykanat 2004).
pub struct QueryBalanced;

impl Partitioner for QueryBalanced {
    fn name(&self) -> &'static str {
        "query-balanced"
    }

    fn partition(
        &self,
        loads: &ChunkLoads,
        params: &PartitionParams,
    ) -> Result<Partitioning, PartitionError> {
        check_enough_chunks(loads, params.dpus)?;
        let (ranges, _) = ccp(loads, params.dpus, u64::MAX)?;
        Ok(Partitioning::from_ranges(&ranges, params.dpus))
    }
}

/// Density-unaware baseline: CCP with every part at most data_cap x D/P pairs.
pub struct CappedCcp;

impl Partitioner for CappedCcp {
    fn name(&self) -> &'static str {
        "ccp-capped"
    }

    fn tuning_keys(&self) -> &'static [&'static str] {
        &["partition.data_cap"]
    }

    fn partition(
        &self,
        loads: &ChunkLoads,
        params: &PartitionParams,
    ) -> Result<Partitioning, PartitionError> {
        check_enough_chunks(loads, params.dpus)?;
        let (ranges, _) = ccp(loads, params.dpus, cap_pairs(loads, params))?;
        Ok(Partitioning::from_ranges(&ranges, params.dpus))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example() {
        // Queries 5 1 1 1 5 over 3 parts: best bottleneck 5 ([5] [1 1 1] [5]).
        let loads = ChunkLoads::new(&[1; 5], &[5, 1, 1, 1, 5]);
        let (ranges, b) = ccp(&loads, 3, u64::MAX).unwrap();
        assert_eq!(b, 5);
        assert_eq!(ranges, vec![0..1, 1..4, 4..5]);
        // A cap of 2 pairs per part forces [5] [1 1] [1 5]: bottleneck 6.
        let (ranges, b) = ccp(&loads, 3, 2).unwrap();
        assert_eq!(b, 6);
        assert_eq!(ranges, vec![0..2, 2..4, 4..5]);
        // A cap of 1 pair per part cannot fit 5 chunks in 3 parts.
        assert_eq!(
            ccp(&loads, 3, 1),
            Err(PartitionError::CapInfeasible {
                dpus: 3,
                cap_pairs: 1,
                pairs: 5
            })
        );
    }

    #[test]
    fn the_cap_is_a_whole_number_of_pairs_where_the_product_is_one() {
        let params = |data_cap: f64, dpus: u32| PartitionParams {
            dpus,
            alpha: 1,
            data_cap,
            double_scan_gates: false,
        };
        // 12,800 chunks of one pair each.
        let loads = ChunkLoads::new(&[1; 12_800], &[1; 12_800]);
        // 1.15 x 12,800 / 128 is 115, though the float product falls just below it.
        assert_eq!(cap_pairs(&loads, &params(1.15, 128)), 115);
        assert_eq!(cap_pairs(&loads, &params(1.1, 100)), 140);
        assert_eq!(cap_pairs(&loads, &params(1.0, 3)), 4266);
        // A cap that cannot hold the data, 3 x 4,266 < 12,800 however the chunks are cut,
        // says which key to raise.
        let e = CappedCcp.partition(&loads, &params(1.0, 3)).unwrap_err();
        assert!(e.to_string().contains("raise partition.data_cap"), "{e}");
        assert!(!e.to_string().contains("chunk_pairs"), "{e}");
    }
}
