//! A get batch as PIM-tree's host prepares and finishes it (PT:`host/operation.hpp`,
//! `get_load` and `get`): sort the keys with their positions, keep one task per distinct
//! key (query fusion), hash each distinct key to its DPU and place the tasks in per-DPU
//! buffers (a stable counting sort, PB:`include/host/task_framework_host.hpp`); after the
//! round, copy each distinct key's reply to every query that asked for it.

use super::hash_to_dpu;
use super::kernel::ABSENT;
use crate::host::HostWork;

/// One get batch, planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetRound {
    /// The batch's distinct keys, sorted.
    pub distinct: Vec<u64>,
    /// For each query (batch order), the index of its key in `distinct`.
    pub key_of_query: Vec<u32>,
    /// Per DPU, its tasks: distinct keys, in sorted order.
    pub tasks: Vec<Vec<u64>>,
    /// For each distinct key, its DPU and its position in that DPU's tasks.
    pub placed: Vec<(u32, u32)>,
}

impl GetRound {
    /// Plans the gets of `keys` (exact keys, batch order) on `dpus` DPUs: the host steps
    /// below, in order.
    pub fn plan(keys: &[u64], dpus: u32) -> GetRound {
        let order = sort_with_positions(keys);
        let (distinct, key_of_query) = deduplicate(&order, keys.len());
        let targets = hash_all(&distinct, dpus);
        let (tasks, placed) = bucket(&distinct, &targets, dpus);
        GetRound {
            distinct,
            key_of_query,
            tasks,
            placed,
        }
    }

    /// Tasks of the busiest DPU.
    pub fn max_tasks(&self) -> u64 {
        self.tasks.iter().map(|t| t.len() as u64).max().unwrap_or(0)
    }

    /// The busiest DPU's tasks over the mean per DPU (1 when every DPU has as many; 0 for
    /// a round without tasks).
    pub fn task_imbalance(&self) -> f64 {
        let total: u64 = self.tasks.iter().map(|t| t.len() as u64).sum();
        match total {
            0 => 0.0,
            _ => self.max_tasks() as f64 * self.tasks.len() as f64 / total as f64,
        }
    }

    /// The answer of every query from the DPUs' replies (`replies[d][j]` answers
    /// `tasks[d][j]`): the value, or `None` when the DPU found no such key or replied for
    /// another key.
    pub fn fill(&self, replies: &[Vec<(u64, u64)>]) -> Vec<Option<u64>> {
        let per_key: Vec<Option<u64>> = self
            .distinct
            .iter()
            .zip(&self.placed)
            .map(|(&k, &(d, j))| match replies[d as usize].get(j as usize) {
                Some(&(rk, v)) if rk == k && !(rk == ABSENT && v == ABSENT) => Some(v),
                _ => None,
            })
            .collect();
        self.key_of_query
            .iter()
            .map(|&i| per_key[i as usize])
            .collect()
    }

    /// Host work before the round: the sort and its two passes (pair up, split), the
    /// deduplication's two passes (flag, pack), the hashes and the bucketing.
    pub fn load_work(&self) -> (HostWork, HostWork) {
        let n = self.key_of_query.len() as u64;
        let m = self.distinct.len() as u64;
        let sort = HostWork {
            elements_sorted: n,
            elements_scanned: 2 * n,
            ..HostWork::default()
        };
        let tasks = HostWork {
            elements_scanned: 2 * n,
            keys_hashed: m,
            tasks_bucketed: m,
            ..HostWork::default()
        };
        (sort, tasks)
    }

    /// Host work after the round: one copy per original query.
    pub fn fill_work(&self) -> HostWork {
        HostWork {
            results_filled: self.key_of_query.len() as u64,
            ..HostWork::default()
        }
    }
}

// The host steps of a get batch, each its own function so that `pimdes calibrate host`
// times exactly the code the index runs.

/// The keys with their batch positions, sorted (by key, then position).
pub fn sort_with_positions(keys: &[u64]) -> Vec<(u64, u32)> {
    let mut order: Vec<(u64, u32)> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| (k, i as u32))
        .collect();
    order.sort_unstable();
    order
}

/// One pass over the sorted keys: the distinct keys, and each query's index among them.
pub fn deduplicate(order: &[(u64, u32)], queries: usize) -> (Vec<u64>, Vec<u32>) {
    let mut distinct = Vec::new();
    let mut key_of_query = vec![0u32; queries];
    for &(k, i) in order {
        if distinct.last() != Some(&k) {
            distinct.push(k);
        }
        key_of_query[i as usize] = (distinct.len() - 1) as u32;
    }
    (distinct, key_of_query)
}

/// Each distinct key's DPU.
pub fn hash_all(distinct: &[u64], dpus: u32) -> Vec<u32> {
    distinct.iter().map(|&k| hash_to_dpu(k, 0, dpus)).collect()
}

/// Per-DPU task lists in key order, and each key's (DPU, position in its list).
pub fn bucket(distinct: &[u64], targets: &[u32], dpus: u32) -> (Vec<Vec<u64>>, Vec<(u32, u32)>) {
    let mut tasks = vec![Vec::new(); dpus as usize];
    let placed = distinct
        .iter()
        .zip(targets)
        .map(|(&k, &d)| {
            let list = &mut tasks[d as usize];
            list.push(k);
            (d, (list.len() - 1) as u32)
        })
        .collect();
    (tasks, placed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_sent_once_and_answered_everywhere() {
        let keys = [30, 10, 30, 20, 10, 30];
        let r = GetRound::plan(&keys, 4);
        assert_eq!(r.distinct, vec![10, 20, 30]);
        assert_eq!(r.key_of_query, vec![2, 0, 2, 1, 0, 2]);
        assert_eq!(r.tasks.iter().map(Vec::len).sum::<usize>(), 3);
        for (i, &k) in r.distinct.iter().enumerate() {
            let (d, j) = r.placed[i];
            assert_eq!(d, hash_to_dpu(k, 0, 4));
            assert_eq!(r.tasks[d as usize][j as usize], k);
        }
        // Replies: value = key + 1, except key 20 absent.
        let replies: Vec<Vec<(u64, u64)>> = r
            .tasks
            .iter()
            .map(|t| {
                t.iter()
                    .map(|&k| {
                        if k == 20 {
                            (ABSENT, ABSENT)
                        } else {
                            (k, k + 1)
                        }
                    })
                    .collect()
            })
            .collect();
        assert_eq!(
            r.fill(&replies),
            vec![Some(31), Some(11), Some(31), None, Some(11), Some(31)]
        );
    }

    #[test]
    fn tasks_of_a_dpu_stay_sorted() {
        let keys: Vec<u64> = (0..5000u64).map(|i| (i * 7_777_777) % 100_003).collect();
        let r = GetRound::plan(&keys, 16);
        for t in &r.tasks {
            assert!(t.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
