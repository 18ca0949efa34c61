//! The one-dimensional baselines at key granularity (`partition.granularity = "pair"`):
//! data-balanced and query-balanced partitioning that may cut between any two keys, not only
//! between chunks. The paper's case against one-dimensional partitioning is about keys: an
//! equal share of pairs per DPU leaves the queries skewed, and an equal share of queries per
//! DPU leaves the data skewed, and no cut can split one hot key. B+-Forest's own partitioners
//! work on chunks (height-1 subtrees) and stay there.
//!
//! Keys inside a chunk are materialised from the chunk's own stream only where a boundary
//! falls, so this costs one chunk per DPU on top of the chunk boundaries.

use crate::workload::DataSet;

/// A partitioning of the key space into one contiguous key range per DPU.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyPartitioning {
    /// DPU `j` owns keys `[starts[j], starts[j + 1])` (the last up to the key space's end);
    /// `starts[0] == 0` and the starts never decrease (an empty DPU repeats its successor's).
    pub starts: Vec<u64>,
    /// Pairs each DPU holds.
    pub pairs: Vec<u64>,
}

impl KeyPartitioning {
    /// The DPU that holds `key`: the last DPU with pairs whose range starts at or below it
    /// (DPUs without pairs own no key, whatever their start).
    pub fn dpu_of(&self, key: u64) -> usize {
        let mut d = self.starts.partition_point(|&s| s <= key) - 1;
        while d > 0 && self.pairs[d] == 0 {
            d -= 1;
        }
        d
    }

    /// The DPUs a query over keys `lo..=hi` reaches: every DPU with pairs between its ends.
    pub fn reached(&self, lo: u64, hi: u64) -> impl Iterator<Item = usize> + '_ {
        (self.dpu_of(lo)..=self.dpu_of(hi)).filter(move |&d| self.pairs[d] > 0)
    }

    /// Cuts at the pair ranks `cuts` (one per DPU after the first, non-decreasing).
    fn from_ranks(data: &DataSet, cuts: &[u64]) -> KeyPartitioning {
        let mut starts = vec![0u64];
        let mut pairs = Vec::with_capacity(cuts.len() + 1);
        let mut previous = 0u64;
        for &rank in cuts {
            debug_assert!(rank >= previous, "cuts never decrease");
            starts.push(match rank {
                0 => 0,
                // Past the last pair: an empty range above every key.
                r if r >= data.pairs => key_at(data, data.pairs - 1).saturating_add(1),
                r => key_at(data, r),
            });
            pairs.push(rank - previous);
            previous = rank;
        }
        pairs.push(data.pairs - previous);
        assert_eq!(
            pairs.iter().sum::<u64>(),
            data.pairs,
            "every pair is placed once"
        );
        KeyPartitioning { starts, pairs }
    }
}

/// The key of the pair of rank `rank` (0-based, in key order).
fn key_at(data: &DataSet, rank: u64) -> u64 {
    assert!(rank < data.pairs, "rank {rank} of {} pairs", data.pairs);
    let chunk = (rank / data.chunk_pairs) as usize;
    let offset = (rank % data.chunk_pairs) as usize;
    data.chunk_pairs_of(chunk)[offset].0
}

/// The number of pairs whose key is below `key`.
fn rank_of(data: &DataSet, key: u64) -> u64 {
    let chunk = data.chunk_of(key);
    let below_in_chunk = data
        .chunk_pairs_of(chunk)
        .partition_point(|&(k, _)| k < key) as u64;
    chunk as u64 * data.chunk_pairs + below_in_chunk
}

/// Data-balanced at key granularity: DPU `j` holds pairs `[j D / P, (j + 1) D / P)` by rank.
pub fn data_balanced(data: &DataSet, dpus: u32) -> KeyPartitioning {
    let p = u128::from(dpus);
    let cuts: Vec<u64> = (1..p)
        .map(|j| (j * u128::from(data.pairs) / p) as u64)
        .collect();
    KeyPartitioning::from_ranks(data, &cuts)
}

/// Query-balanced at key granularity: the cuts fall at the quantiles of the reference
/// batch's counted keys (`counted`: each query's lower end, and its upper end when both are
/// counted), so each DPU starts at the key where its equal share of the counted queries
/// begins. Repeated keys cannot be split: a key asked more than a DPU's share leaves the
/// DPUs after it with less, or empty.
pub fn query_balanced(data: &DataSet, mut counted: Vec<u64>, dpus: u32) -> KeyPartitioning {
    assert!(!counted.is_empty(), "a batch has at least one query");
    counted.sort_unstable();
    let n = counted.len() as u128;
    let p = u128::from(dpus);
    let cuts: Vec<u64> = (1..p)
        .map(|j| {
            let at = (j * n / p) as usize;
            rank_of(data, counted[at])
        })
        .collect();
    KeyPartitioning::from_ranks(data, &cuts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> DataSet {
        DataSet::generate_with(5, 10_000, 300, Some(16))
    }

    /// Every pair's key, in order, the plain way.
    fn all_keys(d: &DataSet) -> Vec<u64> {
        (0..d.chunks())
            .flat_map(|c| d.chunk_pairs_of(c).into_iter().map(|(k, _)| k))
            .collect()
    }

    #[test]
    fn ranks_and_keys_agree_with_the_materialised_data() {
        let d = data();
        let keys = all_keys(&d);
        for rank in [0, 1, 299, 300, 301, 5_000, 9_999] {
            assert_eq!(key_at(&d, rank), keys[rank as usize]);
            assert_eq!(rank_of(&d, keys[rank as usize]), rank);
            assert_eq!(rank_of(&d, keys[rank as usize] + 1), rank + 1);
        }
    }

    #[test]
    fn data_balanced_gives_every_dpu_its_share_of_pairs() {
        let d = data();
        let k = data_balanced(&d, 7);
        assert_eq!(
            k.pairs.iter().max().unwrap() - k.pairs.iter().min().unwrap(),
            1
        );
        let keys = all_keys(&d);
        for (j, &start) in k.starts.iter().enumerate().skip(1) {
            let first = keys.iter().position(|&x| x == start).unwrap();
            assert_eq!(first as u64, k.pairs[..j].iter().sum::<u64>());
            assert_eq!(k.dpu_of(start), j);
            assert_eq!(k.dpu_of(start - 1), j - 1);
        }
    }

    #[test]
    fn query_balanced_splits_the_counted_keys_but_not_a_key() {
        let d = data();
        let keys = all_keys(&d);
        // 1,000 queries at evenly spaced keys, then 3,000 more at one key.
        let mut counted: Vec<u64> = (0..1_000).map(|i| keys[i * 10]).collect();
        let even = query_balanced(&d, counted.clone(), 4);
        let per_dpu = |k: &KeyPartitioning, c: &[u64]| {
            let mut n = vec![0u64; k.pairs.len()];
            for &key in c {
                n[k.dpu_of(key)] += 1;
            }
            n
        };
        assert_eq!(per_dpu(&even, &counted), [250, 250, 250, 250]);
        counted.extend(std::iter::repeat_n(keys[5_000], 3_000));
        let hot = query_balanced(&d, counted.clone(), 4);
        let n = per_dpu(&hot, &counted);
        let share = counted.len() as u64 / 4;
        assert!(
            n[hot.dpu_of(keys[5_000])] > 3 * share,
            "the hot key's DPU takes all of its 3,001 queries: {n:?}"
        );
        assert_eq!(hot.pairs.iter().sum::<u64>(), d.pairs);
        // Counted keys above every pair leave the last DPUs an empty range.
        let high = query_balanced(&d, vec![keys[9_999] + 1; 8], 4);
        assert_eq!(high.pairs, [d.pairs, 0, 0, 0]);
        assert_eq!(high.reached(0, u64::MAX).collect::<Vec<_>>(), [0]);
        assert_eq!(high.dpu_of(u64::MAX), 0, "an empty DPU owns no key");
    }
}
