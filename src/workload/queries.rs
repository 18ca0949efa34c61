//! Query batches. Batch `k` is drawn from its own seeded stream; batch 0 is the reference
//! batch the partitioner sees. A ZcAmp deviation applies to every batch but the reference.

use crate::rng::{Purpose, stream};
use crate::workload::data::DataSet;
use crate::workload::keys::{KeyDistribution, zipf_probabilities};
use crate::workload::spec::{KeyLaw, QueryKind, Workload};
use rand::{Rng, RngExt};

/// One query. For get, `lo == hi` is the drawn key; the query asks for the existing key
/// at or below it (its predecessor; the first key when none is below), which always lies in
/// the chunk whose range holds `lo`. For ranges, `[lo, hi]` is inclusive. `value` is the
/// value a range-count-if compares with (0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query {
    pub lo: u64,
    pub hi: u64,
    pub value: u64,
}

pub struct QueryGenerator {
    seed: u64,
    kind: QueryKind,
    batch_size: u64,
    value_domain: Option<u64>,
    /// Key width of a range: range_pairs x 2^64 / D, so a range covers range_pairs pairs on
    /// average.
    range_width: u64,
    reference: KeyDistribution,
    deviated: Option<KeyDistribution>,
    /// ZcAmp's key interval and factor.
    deviation: Option<(u64, u64, f64)>,
    /// Zipf-slices: the probability of each slice rank (one slice per DPU).
    slice_ranks: Option<Vec<f64>>,
}

impl QueryGenerator {
    /// `dpus` and `data` locate the deviation's base partition, if there is one.
    pub fn new(w: &Workload, data: &DataSet, dpus: u32) -> QueryGenerator {
        let reference = KeyDistribution::zipf_composite(w.prefix_bits, w.skew);
        let deviation = w.deviation.map(|dev| {
            let chunks = data.chunks() as u64;
            let p = dev.base_partition;
            let first_chunk = (p * chunks / dpus as u64) as usize;
            let end_chunk = ((p + 1) * chunks / dpus as u64) as usize;
            assert!(
                first_chunk < end_chunk,
                "a deviation's base partition holds a chunk (checked with the workload)"
            );
            let first = data.range_start(first_chunk);
            let last = if end_chunk >= data.chunks() {
                u64::MAX
            } else {
                data.range_start(end_chunk) - 1
            };
            (first, last, dev.factor)
        });
        let deviated = deviation.map(|(a, b, f)| reference.amplified(a, b, f));
        let slice_ranks = (w.distribution == KeyLaw::ZipfSlices)
            .then(|| zipf_probabilities(dpus as usize, w.skew));
        let width = ((w.range_pairs as u128) << 64) / w.pairs as u128;
        QueryGenerator {
            seed: w.seed,
            kind: w.kind,
            batch_size: w.batch_size,
            value_domain: w.value_domain,
            range_width: width.clamp(1, u64::MAX as u128) as u64,
            reference,
            deviated,
            deviation,
            slice_ranks,
        }
    }

    /// Zipf-slices: batch `index`'s distribution, its slice order drawn first from the
    /// batch's stream (Fisher-Yates), ZcAmp applied to every batch but the reference.
    fn slices_of(&self, probabilities: &[f64], index: u64, rng: &mut impl Rng) -> KeyDistribution {
        let mut order: Vec<usize> = (0..probabilities.len()).collect();
        for i in 0..order.len() {
            let j = rng.random_range(i..order.len());
            order.swap(i, j);
        }
        // order[rank] = slice; the distribution needs each slice's rank.
        let mut rank_of_slice = vec![0; order.len()];
        for (rank, &slice) in order.iter().enumerate() {
            rank_of_slice[slice] = rank;
        }
        let dist = KeyDistribution::ranked_slices(probabilities, &rank_of_slice);
        match self.deviation {
            Some((a, b, f)) if index > 0 => dist.amplified(a, b, f),
            _ => dist,
        }
    }

    pub fn kind(&self) -> QueryKind {
        self.kind
    }

    pub fn batch_size(&self) -> u64 {
        self.batch_size
    }

    /// Batch `index` as a stream of queries, drawn in order on demand.
    pub fn stream(&self, index: u64) -> BatchStream<'_> {
        let mut rng = stream(self.seed, Purpose::Batch, index);
        let sliced = self
            .slice_ranks
            .as_ref()
            .map(|p| self.slices_of(p, index, &mut rng));
        BatchStream {
            generator: self,
            index,
            sliced,
            rng,
            drawn: 0,
        }
    }

    /// Batch `index`'s stream, resumed from a checkpoint another of its streams took.
    pub fn resume(&self, index: u64, at: &Checkpoint) -> BatchStream<'_> {
        assert_eq!(at.index, index, "a checkpoint resumes its own batch");
        let mut s = self.stream(index);
        s.rng = at.rng.clone();
        s.drawn = at.drawn;
        s
    }

    /// Calls `f` on each query of batch `index`, in order, without storing the batch.
    pub fn for_each(&self, index: u64, mut f: impl FnMut(Query)) {
        let mut s = self.stream(index);
        while let Some(q) = s.next_query() {
            f(q);
        }
    }

    /// Batch `index` as a vector.
    pub fn batch(&self, index: u64) -> Vec<Query> {
        let mut out = Vec::with_capacity(self.batch_size as usize);
        self.for_each(index, |q| out.push(q));
        out
    }
}

/// The queries of one batch, drawn one after another from the batch's stream. A caller may
/// keep [`checkpoints`](BatchStream::checkpoint) and draw slabs of the batch again, in any
/// order, without drawing what comes before them ([`QueryGenerator::resume`]).
pub struct BatchStream<'a> {
    generator: &'a QueryGenerator,
    index: u64,
    /// Zipf-slices: this batch's own distribution.
    sliced: Option<KeyDistribution>,
    rng: rand_chacha::ChaCha8Rng,
    drawn: u64,
}

/// Where a [`BatchStream`] stood: resume it with [`QueryGenerator::resume`].
#[derive(Debug, Clone)]
pub struct Checkpoint {
    index: u64,
    rng: rand_chacha::ChaCha8Rng,
    drawn: u64,
}

impl BatchStream<'_> {
    /// Where the stream stands now.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            index: self.index,
            rng: self.rng.clone(),
            drawn: self.drawn,
        }
    }

    /// Queries drawn so far.
    pub fn drawn(&self) -> u64 {
        self.drawn
    }

    /// The next query, `None` once the batch's `batch_size` queries are drawn.
    pub fn next_query(&mut self) -> Option<Query> {
        let g = self.generator;
        if self.drawn == g.batch_size {
            return None;
        }
        self.drawn += 1;
        let dist = match (&self.sliced, &g.deviated, self.index) {
            (Some(d), _, _) => d,
            (None, Some(d), i) if i > 0 => d,
            _ => &g.reference,
        };
        let lo = dist.sample(&mut self.rng);
        let rng = &mut self.rng;
        Some(match g.kind {
            QueryKind::Get | QueryKind::Predecessor => Query {
                lo,
                hi: lo,
                value: 0,
            },
            QueryKind::RangeMax => Query {
                lo,
                hi: lo.saturating_add(g.range_width - 1),
                value: 0,
            },
            QueryKind::RangeCountIf => {
                let value = match g.value_domain {
                    Some(d) => rng.random_range(0..d),
                    None => rng.next_u64(),
                };
                Query {
                    lo,
                    hi: lo.saturating_add(g.range_width - 1),
                    value,
                }
            }
        })
    }

    /// Appends up to `n` next queries to `out`; returns how many.
    pub fn fill(&mut self, out: &mut Vec<Query>, n: usize) -> usize {
        let before = out.len();
        while out.len() - before < n {
            match self.next_query() {
                Some(q) => out.push(q),
                None => break,
            }
        }
        out.len() - before
    }
}
