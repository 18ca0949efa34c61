//! Per-chunk data and query loads, with prefix sums so that `Size` and `NQrys` of any run of
//! chunks cost O(1).

use crate::workload::{DataSet, QueryGenerator};

#[derive(Debug, Clone, PartialEq)]
pub struct ChunkLoads {
    /// size_prefix[i] = pairs in chunks 0..i.
    size_prefix: Vec<u64>,
    /// query_prefix[i] = reference queries counted in chunks 0..i.
    query_prefix: Vec<u64>,
}

impl ChunkLoads {
    /// Builds loads from per-chunk pairs and query counts.
    pub fn new(sizes: &[u64], queries: &[u64]) -> ChunkLoads {
        assert_eq!(sizes.len(), queries.len());
        let prefix = |xs: &[u64]| {
            let mut p = Vec::with_capacity(xs.len() + 1);
            let mut s = 0u64;
            p.push(0);
            for &x in xs {
                s += x;
                p.push(s);
            }
            p
        };
        ChunkLoads {
            size_prefix: prefix(sizes),
            query_prefix: prefix(queries),
        }
    }

    /// Counts the reference batch (batch 0) per chunk: each query at the chunk of its lower
    /// end, and with `both_ends` also at the chunk of its upper end (+1 each, as the
    /// authors' code does).
    pub fn from_reference(data: &DataSet, queries: &QueryGenerator, both_ends: bool) -> ChunkLoads {
        let n = data.chunks();
        let mut counts = vec![0u64; n];
        // The next slab is drawn while the last is counted.
        const SLAB: usize = 1 << 20;
        let mut stream = queries.stream(0);
        let mut slab = Vec::with_capacity(SLAB);
        stream.fill(&mut slab, SLAB);
        while !slab.is_empty() {
            let mut next = Vec::with_capacity(SLAB);
            rayon::join(
                || stream.fill(&mut next, SLAB),
                || {
                    for q in &slab {
                        counts[data.chunk_of(q.lo)] += 1;
                        if both_ends {
                            counts[data.chunk_of(q.hi)] += 1;
                        }
                    }
                },
            );
            slab = next;
        }
        let sizes: Vec<u64> = (0..n).map(|i| data.chunk_size(i)).collect();
        ChunkLoads::new(&sizes, &counts)
    }

    pub fn chunks(&self) -> usize {
        self.size_prefix.len() - 1
    }

    /// Pairs in chunks `a..=b`.
    #[inline]
    pub fn size(&self, a: usize, b: usize) -> u64 {
        self.size_prefix[b + 1] - self.size_prefix[a]
    }

    /// Queries counted in chunks `a..=b`.
    #[inline]
    pub fn queries(&self, a: usize, b: usize) -> u64 {
        self.query_prefix[b + 1] - self.query_prefix[a]
    }

    pub fn total_size(&self) -> u64 {
        *self.size_prefix.last().expect("prefix has a first element")
    }

    pub fn total_queries(&self) -> u64 {
        *self
            .query_prefix
            .last()
            .expect("prefix has a first element")
    }

    pub fn chunk_size(&self, i: usize) -> u64 {
        self.size(i, i)
    }

    pub fn chunk_queries(&self, i: usize) -> u64 {
        self.queries(i, i)
    }

    /// The floor chunk granularity sets under the busiest DPU's load: the reference queries
    /// of the busiest chunk over a DPU's mean share of them, Q/P (a chunk is never split, so
    /// its DPU gets at least its queries). 1 when there are no queries.
    pub fn chunk_floor(&self, dpus: u32) -> f64 {
        let total = self.total_queries();
        if total == 0 {
            return 1.0;
        }
        let most = (0..self.chunks()).map(|i| self.chunk_queries(i)).max();
        most.unwrap_or(0) as f64 / (total as f64 / dpus as f64)
    }

    /// `M_d`: the largest chunk.
    pub fn max_chunk_size(&self) -> u64 {
        (0..self.chunks())
            .map(|i| self.chunk_size(i))
            .max()
            .unwrap_or(0)
    }

    /// `M_q`: the largest chunk query count.
    pub fn max_chunk_queries(&self) -> u64 {
        (0..self.chunks())
            .map(|i| self.chunk_queries(i))
            .max()
            .unwrap_or(0)
    }

    /// The chunk range `[first, end)` of base partition `j` of `p`: chunks split as evenly
    /// as their count allows.
    pub fn base_partition(&self, j: usize, p: usize) -> (usize, usize) {
        let n = self.chunks();
        (j * n / p, (j + 1) * n / p)
    }
}

#[cfg(test)]
mod tests {
    use super::ChunkLoads;

    /// Hand-worked: 40 queries on 4 DPUs is 10 per DPU; the busiest chunk holds 25.
    #[test]
    fn the_chunk_floor_is_the_busiest_chunk_over_a_dpus_share() {
        let loads = ChunkLoads::new(&[300, 300, 300, 300], &[5, 25, 10, 0]);
        assert_eq!(loads.chunk_floor(4), 2.5);
        assert_eq!(loads.chunk_floor(1), 25.0 / 40.0);
        let idle = ChunkLoads::new(&[300, 300], &[0, 0]);
        assert_eq!(idle.chunk_floor(8), 1.0);
    }
}
