//! The host's routing table: the sorted start keys of the partitions and, per partition,
//! its DPU and tree. A query's lower end is located by binary search; a range is then cut
//! into one fragment per partition it crosses by walking right.

use super::Partitioning;
use crate::workload::DataSet;

/// Where a partition lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub dpu: u32,
    pub hot: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoutingTable {
    /// starts[0] = 0; partition i owns keys [starts[i], starts[i + 1]).
    starts: Vec<u64>,
    targets: Vec<Target>,
}

impl RoutingTable {
    pub fn new(partitioning: &Partitioning, data: &DataSet) -> RoutingTable {
        let starts = partitioning
            .parts
            .iter()
            .map(|p| data.range_start(p.chunks.start))
            .collect();
        let targets = partitioning
            .parts
            .iter()
            .map(|p| Target {
                dpu: p.dpu,
                hot: p.hot,
            })
            .collect();
        Self::from_parts(starts, targets)
    }

    /// From raw arrays; `starts` must begin at 0 and increase strictly.
    pub fn from_parts(starts: Vec<u64>, targets: Vec<Target>) -> RoutingTable {
        assert_eq!(starts.len(), targets.len());
        assert_eq!(
            starts.first(),
            Some(&0),
            "the first partition starts at key 0"
        );
        assert!(
            starts.windows(2).all(|w| w[0] < w[1]),
            "start keys increase"
        );
        RoutingTable { starts, targets }
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    pub fn target(&self, entry: usize) -> Target {
        self.targets[entry]
    }

    pub fn start(&self, entry: usize) -> u64 {
        self.starts[entry]
    }

    /// The last key entry `entry` owns.
    pub fn last(&self, entry: usize) -> u64 {
        self.starts.get(entry + 1).map_or(u64::MAX, |s| s - 1)
    }

    /// The entry owning `key`: upper bound minus one.
    #[inline]
    pub fn locate(&self, key: u64) -> usize {
        self.starts.partition_point(|&s| s <= key) - 1
    }

    /// Calls `f(entry)` for each partition `[lo, hi]` overlaps, in key order.
    #[inline]
    pub fn route(&self, lo: u64, hi: u64, mut f: impl FnMut(usize)) {
        debug_assert!(lo <= hi);
        let mut i = self.locate(lo);
        f(i);
        while i + 1 < self.starts.len() && self.starts[i + 1] <= hi {
            i += 1;
            f(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_crossing_k_partitions_yields_k_fragments() {
        let t = RoutingTable::from_parts(
            vec![0, 10, 20, 30],
            (0..4).map(|d| Target { dpu: d, hot: false }).collect(),
        );
        let frags = |lo, hi| {
            let mut v = Vec::new();
            t.route(lo, hi, |e| v.push(e));
            v
        };
        assert_eq!(frags(0, 0), vec![0]);
        assert_eq!(frags(9, 10), vec![0, 1]);
        assert_eq!(frags(5, 35), vec![0, 1, 2, 3]);
        assert_eq!(frags(30, u64::MAX), vec![3]);
        assert_eq!(frags(19, 19), vec![1]);
    }
}
