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

    /// The upper end of a query whose lower end is `lo`: a range covers `range_width` keys
    /// (fewer at the top of the key space), a get one.
    fn upper_end(&self, lo: u64) -> u64 {
        match self.kind.is_range() {
            true => lo.saturating_add(self.range_width - 1),
            false => lo,
        }
    }

    /// The lowest lower end of a query that reaches key `first` ([`upper_end`](Self::upper_end)).
    fn lowest_reaching(&self, first: u64) -> u64 {
        match self.kind.is_range() {
            true => first.saturating_sub(self.range_width - 1),
            false => first,
        }
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
    /// The batch whose stream this is for.
    batch: u64,
    /// Half-open intervals of `u`, sorted and disjoint.
    draws: Vec<(f64, f64)>,
    /// For each of `2^PIECE_BITS` equal pieces of [0, 1), whether every `u` in it lies in
    /// `draws`, none does, or some do: most draws are told by one look-up.
    pieces: Vec<Piece>,
    /// The span `last - first` of the key segments outside `draws`.
    span: u64,
}

/// Where a piece of the draws lies against a [`Reach`]'s intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Outside,
    Inside,
    Split,
}

/// 2^14 pieces (16 KiB).
const PIECE_BITS: i32 = 14;

impl Reach {
    /// The draws in `draws` (half-open intervals of `u`, sorted and disjoint) of batch
    /// `batch`, whose key segments outside them span `span`.
    fn of(batch: u64, draws: Vec<(f64, f64)>, span: u64) -> Reach {
        let n = 1usize << PIECE_BITS;
        let pieces = (0..n)
            .map(|k| {
                let (lo, hi) = (k as f64 / n as f64, (k + 1) as f64 / n as f64);
                let i = draws.partition_point(|d| d.1 <= lo);
                match draws.get(i) {
                    Some(d) if d.0 <= lo && d.1 >= hi => Piece::Inside,
                    Some(d) if d.0 < hi => Piece::Split,
                    _ => Piece::Outside,
                }
            })
            .collect();
        Reach {
            batch,
            draws,
            pieces,
            span,
        }
    }

    /// Whether a draw whose first number is `u` (in [0, 1)) can meet the keys.
    #[inline]
    fn holds(&self, u: f64) -> bool {
        // k / 2^PIECE_BITS <= u < (k + 1) / 2^PIECE_BITS exactly (a power-of-two scale).
        match self.pieces[(u * 2f64.powi(PIECE_BITS)) as usize] {
            Piece::Outside => false,
            Piece::Inside => true,
            Piece::Split => {
                let i = self.draws.partition_point(|d| d.1 <= u);
                self.draws.get(i).is_some_and(|d| d.0 <= u)
            }
        }
    }
}

/// `draws` (half-open intervals) sorted, with those that meet or touch merged.
fn merged(mut draws: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    draws.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(draws.len());
    for (below, above) in draws {
        match out.last_mut() {
            Some(prev) if below <= prev.1 => prev.1 = prev.1.max(above),
            _ => out.push((below, above)),
        }
    }
    out
}

/// One draw of [`BatchStream::next_reaching`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drawn {
    Query(Query),
    /// A query that cannot meet the keys asked for.
    Skipped,
}

/// Where a [`BatchStream`] stood: resume it with [`QueryGenerator::resume`].
#[derive(Debug, Clone, PartialEq)]
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
    /// (`[first, last]` each, sorted and disjoint). The draws of a key segment whose span is
    /// not the distribution's usual one are all held: skipping one needs its span.
    pub fn reach(&self, keys: &[(u64, u64)]) -> Reach {
        debug_assert!(
            keys.windows(2).all(|k| k[0].1 < k[1].0),
            "sorted, disjoint key intervals"
        );
        let g = self.generator;
        let dist = self.distribution();
        let mut draws: Vec<(f64, f64)> = keys
            .iter()
            .map(|&(first, last)| dist.draws_reaching(g.lowest_reaching(first), last))
            .collect();
        draws.extend(dist.draws_of_unusual_spans());
        Reach::of(self.index, merged(draws), dist.usual_span())
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
        debug_assert_eq!(reach.batch, self.index, "a reach of this batch");
        self.draw(reach.span, |u| reach.holds(u))
    }

    /// The next draw: skipped when `holds` refuses its first number, the key then taken
    /// from a segment spanning `span`.
    #[inline]
    fn draw(&mut self, span: u64, holds: impl Fn(f64) -> bool) -> Option<Drawn> {
        if self.drawn == self.generator.batch_size {
            return None;
        }
        self.drawn += 1;
        let u = unit_f64(&mut self.rng);
        if !holds(u) {
            // A key inside a segment takes the numbers a draw over its span takes: rand
            // 0.10's `sample_single_inclusive` draws an offset from the range's size alone
            // (a size of 2^64 wraps to one plain number, on both sides).
            self.rng.random_range(0..=span);
            self.rest_of_query(0);
            return Some(Drawn::Skipped);
        }
        let dist = distribution_of(self.generator, &self.sliced, self.index);
        let lo = dist.key_of_draw(u, &mut self.rng);
        Some(Drawn::Query(self.rest_of_query(lo)))
    }

    /// The query whose lower end is `lo`, its other numbers drawn.
    #[inline]
    fn rest_of_query(&mut self, lo: u64) -> Query {
        let g = self.generator;
        let value = match (g.kind, g.value_domain) {
            (QueryKind::RangeCountIf, Some(d)) => self.rng.random_range(0..d),
            (QueryKind::RangeCountIf, None) => self.rng.next_u64(),
            _ => 0,
        };
        Query {
            lo,
            hi: g.upper_end(lo),
            value,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A reach's pieces tell every draw as a search of its intervals does: at the
    /// intervals' ends, at the pieces' edges and next to both.
    #[test]
    fn a_reach_holds_exactly_the_draws_of_its_intervals() {
        let piece = 1.0 / (1u64 << PIECE_BITS) as f64;
        let sets: [&[(f64, f64)]; 5] = [
            &[],
            &[(0.0, f64::INFINITY)],
            &[(0.0, 0.3), (0.3, 0.5), (0.7, 0.7), (0.9, f64::INFINITY)],
            &[
                (3.0 * piece, 4.0 * piece),
                (4.5 * piece, 7.25 * piece),
                (0.25, 0.25 + piece),
            ],
            &[
                (0.1, 0.100_000_000_1),
                (0.5 - piece / 3.0, 0.5 + piece / 3.0),
            ],
        ];
        for draws in sets {
            let reach = Reach::of(0, merged(draws.to_vec()), 0);
            let mut us: Vec<f64> = (0..=1 << PIECE_BITS).map(|k| k as f64 * piece).collect();
            for &(a, b) in draws {
                us.extend([a, b]);
            }
            let edges = us.clone();
            us.extend(edges.iter().flat_map(|u| [u.next_down(), u.next_up()]));
            us.extend((0..10_000).map(|i| i as f64 / 10_000.0));
            for u in us.into_iter().filter(|u| (0.0..1.0).contains(u)) {
                let inside = draws.iter().any(|&(a, b)| a <= u && u < b);
                assert_eq!(reach.holds(u), inside, "{draws:?}, u {u}");
            }
        }
    }

    #[test]
    fn merged_draws_are_sorted_and_disjoint() {
        let m = merged(vec![
            (0.5, 0.6),
            (0.1, 0.2),
            (0.2, 0.3),
            (0.55, 0.9),
            (0.95, 1.0),
        ]);
        assert_eq!(m, [(0.1, 0.3), (0.5, 0.9), (0.95, 1.0)]);
    }
}
