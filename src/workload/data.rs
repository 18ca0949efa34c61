//! The data set: D pairs with distinct keys uniform over the 64-bit space, cut into chunks
//! of `chunk_pairs` consecutive pairs in key order.
//!
//! Holding 500 M keys is not needed to partition: only the first key of every chunk is.
//! The sorted keys of a uniform sample are cumulative sums of exponential spacings,
//! normalised by their total; the gap between the first keys of two chunks is a sum of
//! `chunk_pairs` spacings, i.e. Gamma(chunk_pairs). So chunk boundaries are drawn directly,
//! in O(chunks), and their joint distribution is that of the sorted sample. The keys inside
//! a chunk are, given its boundaries, independent uniforms between them, so a chunk's pairs
//! can be materialised on demand from its own seeded stream.

use crate::rng::{Purpose, stream};
use crate::workload::spec::Workload;
use rand::{Rng, RngExt};
use rand_distr::{Distribution, Gamma};

#[derive(Debug, Clone, PartialEq)]
pub struct DataSet {
    pub seed: u64,
    pub pairs: u64,
    pub chunk_pairs: u64,
    pub value_domain: Option<u64>,
    /// The first (smallest) key of each chunk, strictly increasing.
    first_keys: Vec<u64>,
    /// For each value `b` of a key's top [`BUCKET_BITS`] bits (and one past the last):
    /// how many first keys after chunk 0's lie below `b`'s keys. A first level that finds
    /// a key's chunk among a few dozen first keys, without the cache misses of a binary
    /// search over all of them.
    bucket_starts: Vec<u32>,
}

/// Top bits of a key that index [`DataSet::chunk_of`]'s first level (2^16 buckets, 256 KiB).
const BUCKET_BITS: u32 = 16;

/// For each bucket `b` of [`BUCKET_BITS`] top bits, and one past the last, how many of
/// `keys` (sorted) lie below the bucket's first key.
fn bucket_starts(keys: &[u64]) -> Vec<u32> {
    assert!(keys.len() < u32::MAX as usize, "chunk indices fit in u32");
    let buckets = 1usize << BUCKET_BITS;
    let mut starts = Vec::with_capacity(buckets + 1);
    let mut i = 0;
    for b in 0..buckets as u64 {
        let first = b << (64 - BUCKET_BITS);
        while i < keys.len() && keys[i] < first {
            i += 1;
        }
        starts.push(i as u32);
    }
    starts.push(keys.len() as u32);
    starts
}

impl DataSet {
    pub fn generate(w: &Workload) -> DataSet {
        Self::generate_with(w.seed, w.pairs, w.chunk_pairs, w.value_domain)
    }

    pub fn generate_with(
        seed: u64,
        pairs: u64,
        chunk_pairs: u64,
        value_domain: Option<u64>,
    ) -> DataSet {
        assert!(pairs > 0 && chunk_pairs > 0);
        let chunks = pairs.div_ceil(chunk_pairs) as usize;
        let last_chunk_pairs = pairs - (chunks as u64 - 1) * chunk_pairs;
        let mut rng = stream(seed, Purpose::DataBoundaries, 0);
        let gap = Gamma::new(chunk_pairs as f64, 1.0).expect("shape is positive");
        // cumulative[i] = spacings up to chunk i's first key; then the tail to the end.
        let mut cumulative = Vec::with_capacity(chunks);
        let first_gap: f64 = Gamma::new(1.0, 1.0).expect("shape 1").sample(&mut rng);
        let mut running = first_gap;
        cumulative.push(running);
        for _ in 1..chunks {
            running += gap.sample(&mut rng);
            cumulative.push(running);
        }
        let tail: f64 = Gamma::new(last_chunk_pairs as f64, 1.0)
            .expect("shape is positive")
            .sample(&mut rng);
        let total = running + tail;
        let scale = 2f64.powi(64) / total;
        let mut first_keys = Vec::with_capacity(chunks);
        let mut previous: Option<u64> = None;
        for c in &cumulative {
            let mut key = (c * scale) as u64; // saturates at u64::MAX
            // Rounding to the f64 grid could, in principle, leave no room for a chunk's
            // distinct keys; nudge so each chunk spans at least its pair count.
            if let Some(p) = previous
                && key < p.saturating_add(chunk_pairs)
            {
                key = p + chunk_pairs;
            }
            first_keys.push(key);
            previous = Some(key);
        }
        assert!(
            u64::MAX - first_keys[chunks - 1] >= last_chunk_pairs,
            "key space exhausted"
        );
        let bucket_starts = bucket_starts(&first_keys[1..]);
        DataSet {
            seed,
            pairs,
            chunk_pairs,
            value_domain,
            first_keys,
            bucket_starts,
        }
    }

    pub fn chunks(&self) -> usize {
        self.first_keys.len()
    }

    /// Pairs in chunk `i` (all full but possibly the last).
    pub fn chunk_size(&self, i: usize) -> u64 {
        if i + 1 == self.chunks() {
            self.pairs - (self.chunks() as u64 - 1) * self.chunk_pairs
        } else {
            self.chunk_pairs
        }
    }

    /// The first key of chunk `i`.
    pub fn first_key(&self, i: usize) -> u64 {
        self.first_keys[i]
    }

    /// The lowest key routed to chunk `i`: 0 for the first chunk, else its first key.
    /// Chunk `i` owns keys `[range_start(i), range_start(i + 1))`.
    pub fn range_start(&self, i: usize) -> u64 {
        if i == 0 { 0 } else { self.first_keys[i] }
    }

    /// The chunk whose key range holds `key`: how many first keys after chunk 0's are at
    /// or below it, searched only among those in `key`'s bucket.
    pub fn chunk_of(&self, key: u64) -> usize {
        let b = (key >> (64 - BUCKET_BITS)) as usize;
        let (lo, hi) = (
            self.bucket_starts[b] as usize,
            self.bucket_starts[b + 1] as usize,
        );
        lo + self.first_keys[1 + lo..1 + hi].partition_point(|&k| k <= key)
    }

    /// The pairs of chunk `i`, sorted by key, generated from the chunk's own stream.
    pub fn chunk_pairs_of(&self, i: usize) -> Vec<(u64, u64)> {
        let n = self.chunk_size(i) as usize;
        let lo = self.first_keys[i];
        // Interior keys lie strictly between this chunk's first key and the next one's.
        let hi = if i + 1 < self.chunks() {
            self.first_keys[i + 1] - 1
        } else {
            u64::MAX
        };
        let mut rng = stream(self.seed, Purpose::DataChunk, i as u64);
        let mut keys = Vec::with_capacity(n);
        keys.push(lo);
        while keys.len() < n {
            while keys.len() < n {
                keys.push(rng.random_range(lo + 1..=hi));
            }
            keys.sort_unstable();
            keys.dedup();
        }
        let domain = self.value_domain;
        keys.into_iter()
            .map(|k| {
                let v = match domain {
                    Some(d) => rng.random_range(0..d),
                    None => rng.next_u64(),
                };
                (k, v)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_partition_the_key_space_and_hold_their_keys() {
        let d = DataSet::generate_with(5, 10_050, 300, Some(4));
        assert_eq!(d.chunks(), 34);
        assert_eq!(d.chunk_size(33), 150);
        let mut all = Vec::new();
        for i in 0..d.chunks() {
            let pairs = d.chunk_pairs_of(i);
            assert_eq!(pairs.len() as u64, d.chunk_size(i));
            assert_eq!(pairs[0].0, d.first_key(i));
            for &(k, v) in &pairs {
                assert_eq!(d.chunk_of(k), i);
                assert!(v < 4);
            }
            all.extend(pairs.iter().map(|p| p.0));
        }
        assert!(
            all.windows(2).all(|w| w[0] < w[1]),
            "keys distinct and sorted"
        );
        assert_eq!(d.chunk_of(0), 0);
        assert_eq!(d.chunk_of(u64::MAX), 33);
    }

    #[test]
    fn the_bucketed_chunk_search_finds_what_a_plain_search_finds() {
        use rand::RngExt;
        for (pairs, chunk) in [(10_050, 300), (7, 300), (3_000_000, 10)] {
            let d = DataSet::generate_with(9, pairs, chunk, None);
            let plain = |key: u64| d.first_keys[1..].partition_point(|&k| k <= key);
            let mut rng = stream(3, Purpose::Soak, 0);
            let mut keys: Vec<u64> = (0..20_000).map(|_| rng.random()).collect();
            // Every first key, either side of it, and the ends of the key space.
            for &k in &d.first_keys {
                keys.extend([k.saturating_sub(1), k, k.saturating_add(1)]);
            }
            keys.extend([0, u64::MAX, 1 << 48, (1 << 48) - 1]);
            for key in keys {
                assert_eq!(d.chunk_of(key), plain(key), "{pairs} pairs, key {key}");
            }
        }
    }

    #[test]
    fn keys_look_uniform() {
        // Fraction of chunk boundaries below half the key space is about one half.
        let d = DataSet::generate_with(9, 3_000_000, 300, None);
        let below = (0..d.chunks())
            .filter(|&i| d.first_key(i) < 1 << 63)
            .count();
        let frac = below as f64 / d.chunks() as f64;
        assert!((frac - 0.5).abs() < 0.02, "{frac}");
    }
}
