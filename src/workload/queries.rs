//! Query batches. Batch `k` is drawn from its own seeded stream; batch 0 is the reference
//! batch the partitioner sees. A ZcAmp deviation applies to every batch but the reference.

use crate::rng::{Purpose, stream, unit_f64};
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

/// Batch `index`'s distribution: a Zipf-slices batch's own, ZcAmp's for every batch but the
/// reference, or the reference's.
fn distribution_of<'a>(
    g: &'a QueryGenerator,
    sliced: &'a Option<KeyDistribution>,
    index: u64,
) -> &'a KeyDistribution {
    match (sliced, &g.deviated, index) {
        (Some(d), _, _) => d,
        (None, Some(d), i) if i > 0 => d,
        _ => &g.reference,
    }
}

/// The draws of a batch whose query can meet some intervals of keys
/// ([`BatchStream::reach`]): a draw whose first number `u` lies in none of `draws` gives a
/// query that cannot.
#[derive(Debug, Clone, PartialEq)]
pub struct Reach {
    /// Half-open intervals of `u`, sorted and disjoint.
    draws: Vec<(f64, f64)>,
    /// For each of `2^PIECE_BITS` equal pieces of [0, 1), whether every `u` in it lies in
    /// `draws` ([`Piece::Every`]), none does, or some do: most draws are told by one look-up.
    pieces: Vec<Piece>,
    /// The width of every key segment of the distribution.
    width: u64,
}

/// How much of a piece of the draws a [`Reach`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    None,
    Every,
    Some,
}

/// 2^14 pieces (16 KiB).
const PIECE_BITS: i32 = 14;

impl Reach {
    /// Every draw.
    pub fn every() -> Reach {
        Reach::of(vec![(0.0, f64::INFINITY)], 0)
    }

    /// The draws in `draws` (half-open intervals of `u`, sorted and disjoint), of a
    /// distribution whose segments are `width` wide.
    fn of(draws: Vec<(f64, f64)>, width: u64) -> Reach {
        let n = 1usize << PIECE_BITS;
        let pieces = (0..n)
            .map(|k| {
                let (lo, hi) = (k as f64 / n as f64, (k + 1) as f64 / n as f64);
                let i = draws.partition_point(|d| d.1 <= lo);
                match draws.get(i) {
                    Some(d) if d.0 <= lo && d.1 >= hi => Piece::Every,
                    Some(d) if d.0 < hi => Piece::Some,
                    _ => Piece::None,
                }
            })
            .collect();
        Reach {
            draws,
            pieces,
            width,
        }
    }

    /// Whether a draw whose first number is `u` (in [0, 1)) can meet the keys.
    #[inline]
    fn holds(&self, u: f64) -> bool {
        // k / 2^PIECE_BITS <= u < (k + 1) / 2^PIECE_BITS exactly (a power-of-two scale).
        match self.pieces[(u * 2f64.powi(PIECE_BITS)) as usize] {
            Piece::None => false,
            Piece::Every => true,
            Piece::Some => {
                let i = self.draws.partition_point(|d| d.1 <= u);
                self.draws.get(i).is_some_and(|d| d.0 <= u)
            }
        }
    }
}

/// One draw of [`BatchStream::next_reaching`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drawn {
    Query(Query),
    /// A query that cannot meet the keys asked for.
    Skipped,
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

    /// The key distribution this batch draws from.
    fn distribution(&self) -> &KeyDistribution {
        distribution_of(self.generator, &self.sliced, self.index)
    }

    /// The draws of this batch whose query can meet one of the key intervals `keys`
    /// (`[first, last]` each, sorted and disjoint): a range's lower end lies at most
    /// `range_width - 1` below its upper end, a get's key is both. A distribution whose key
    /// segments differ in width skips nothing.
    pub fn reach(&self, keys: &[(u64, u64)]) -> Reach {
        let g = self.generator;
        let dist = self.distribution();
        let Some(width) = dist.common_width() else {
            return Reach::every();
        };
        let mut draws: Vec<(f64, f64)> = Vec::with_capacity(keys.len());
        for &(first, last) in keys {
            let lo_first = if g.kind.is_range() {
                first.saturating_sub(g.range_width - 1)
            } else {
                first
            };
            let (below, above) = dist.draws_reaching(lo_first, last);
            match draws.last_mut() {
                Some(prev) if below <= prev.1 => prev.1 = prev.1.max(above),
                _ => draws.push((below, above)),
            }
        }
        Reach::of(draws, width)
    }

    /// The next query, `None` once the batch's `batch_size` queries are drawn.
    pub fn next_query(&mut self) -> Option<Query> {
        match self.draw(0, |_| true)? {
            Drawn::Query(q) => Some(q),
            Drawn::Skipped => unreachable!("a draw that reaches every key skips none"),
        }
    }

    /// The next query, or [`Drawn::Skipped`] if it cannot meet the keys of `reach` (then
    /// its key is not worked out, but the stream moves on as [`next_query`](Self::next_query)
    /// does); `None` once the batch's `batch_size` queries are drawn.
    #[inline]
    pub fn next_reaching(&mut self, reach: &Reach) -> Option<Drawn> {
        self.draw(reach.width, |u| reach.holds(u))
    }

    /// The next draw: skipped when `holds` refuses its first number, taking a key from a
    /// segment `width` wide.
    #[inline]
    fn draw(&mut self, width: u64, holds: impl Fn(f64) -> bool) -> Option<Drawn> {
        if self.drawn == self.generator.batch_size {
            return None;
        }
        self.drawn += 1;
        let u = unit_f64(&mut self.rng);
        if !holds(u) {
            // A key inside a segment takes what a draw over the segment's width takes.
            self.rng.random_range(0..=width);
            self.rest_of_query(0);
            return Some(Drawn::Skipped);
        }
        let dist = distribution_of(self.generator, &self.sliced, self.index);
        let lo = dist.key_at(u, &mut self.rng);
        Some(Drawn::Query(self.rest_of_query(lo)))
    }

    /// The query whose lower end is `lo`, its other numbers drawn.
    #[inline]
    fn rest_of_query(&mut self, lo: u64) -> Query {
        let g = self.generator;
        match g.kind {
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
                    Some(d) => self.rng.random_range(0..d),
                    None => self.rng.next_u64(),
                };
                Query {
                    lo,
                    hi: lo.saturating_add(g.range_width - 1),
                    value,
                }
            }
        }
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
