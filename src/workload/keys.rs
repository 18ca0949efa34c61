//! Distributions over the 64-bit key space, sampled exactly.
//!
//! A [`KeyDistribution`] is piecewise uniform: a list of key segments, each with a weight,
//! uniform inside. The Zipf-composite distribution is the special case of 2^b segments
//! (one per key prefix) weighted by Zipf(theta); a ZcAmp deviation multiplies the weight of
//! a key interval and renormalises. Sampling picks a segment from the cumulative weights by
//! binary search, then a uniform key inside it, so every theta (1.0 included) is exact up
//! to f64 rounding of the weights.

use rand::RngExt;

/// One key segment `[first, last]` (inclusive) and its unnormalised weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    pub first: u64,
    pub last: u64,
    pub weight: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KeyDistribution {
    segments: Vec<Segment>,
    /// cdf[i] = total weight of segments 0..=i divided by the total weight.
    cdf: Vec<f64>,
    /// guide[k] = how many cdf values are at or below k / 2^GUIDE_BITS (k up to
    /// 2^GUIDE_BITS): a first level, so a draw searches only the few cdf values between
    /// two guide points instead of the whole cdf (the same segment, fewer cache misses).
    guide: Vec<u32>,
    /// The span `last - first` of most segments, and the segments of another span.
    usual_span: u64,
    unusual_spans: Vec<u32>,
}

/// 2^16 guide points (256 KiB).
const GUIDE_BITS: i32 = 16;

/// For each k in 0..=2^GUIDE_BITS, how many of `cdf` (non-decreasing) are at or below
/// k / 2^GUIDE_BITS.
fn guide(cdf: &[f64]) -> Vec<u32> {
    assert!(cdf.len() < u32::MAX as usize, "segment indices fit in u32");
    let points = 1usize << GUIDE_BITS;
    let mut out = Vec::with_capacity(points + 1);
    let mut i = 0;
    for k in 0..=points {
        let at = k as f64 / points as f64;
        while i < cdf.len() && cdf[i] <= at {
            i += 1;
        }
        out.push(i as u32);
    }
    out
}

/// The span `last - first` of most `segments` (the smallest of the most common), and the
/// indices of the segments of another span.
fn spans(segments: &[Segment]) -> (u64, Vec<u32>) {
    let mut counts: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
    for s in segments {
        *counts.entry(s.last - s.first).or_default() += 1;
    }
    let most = counts.values().copied().max().expect("a segment");
    let usual = counts
        .iter()
        .find(|&(_, &n)| n == most)
        .map(|(&span, _)| span)
        .expect("a most common span");
    let unusual = (0..segments.len() as u32)
        .filter(|&i| segments[i as usize].last - segments[i as usize].first != usual)
        .collect();
    (usual, unusual)
}

/// The exact Zipf(theta) probabilities of ranks 0..n (rank 0 most popular).
pub fn zipf_probabilities(n: usize, theta: f64) -> Vec<f64> {
    let weights: Vec<f64> = (0..n).map(|r| ((r + 1) as f64).powf(-theta)).collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

impl KeyDistribution {
    /// Builds a distribution from segments in increasing key order.
    pub fn from_segments(segments: Vec<Segment>) -> KeyDistribution {
        assert!(!segments.is_empty(), "a key distribution needs a segment");
        let total: f64 = segments.iter().map(|s| s.weight).sum();
        assert!(
            total > 0.0 && total.is_finite(),
            "weights must sum to a positive number"
        );
        let mut running = 0.0;
        let cdf: Vec<f64> = segments
            .iter()
            .map(|s| {
                running += s.weight;
                running / total
            })
            .collect();
        let guide = guide(&cdf);
        let (usual_span, unusual_spans) = spans(&segments);
        KeyDistribution {
            segments,
            cdf,
            guide,
            usual_span,
            unusual_spans,
        }
    }

    /// Zipf-composite keys: the upper `prefix_bits` bits follow Zipf(`theta`) over the
    /// 2^prefix_bits prefixes, rank r mapped to prefix r; the lower bits are uniform.
    pub fn zipf_composite(prefix_bits: u32, theta: f64) -> KeyDistribution {
        assert!(
            prefix_bits <= 24,
            "prefix_bits is validated to be at most 24"
        );
        let n = 1usize << prefix_bits;
        let probabilities = zipf_probabilities(n, theta);
        let width_bits = 64 - prefix_bits;
        let segments = probabilities
            .iter()
            .enumerate()
            .map(|(r, &p)| {
                let first = if prefix_bits == 0 {
                    0
                } else {
                    (r as u64) << width_bits
                };
                let last = if width_bits == 64 {
                    u64::MAX
                } else {
                    first | ((1u64 << width_bits) - 1)
                };
                Segment {
                    first,
                    last,
                    weight: p,
                }
            })
            .collect();
        Self::from_segments(segments)
    }

    /// Keys in `probabilities.len()` equal slices of the key space, slice `i` drawn with
    /// probability `probabilities[rank_of_slice[i]]`, uniform inside (PIM-tree's
    /// generator, cmuparlay/pim_base `include/host/test_generator.hpp`, `zipf_over_keys`).
    pub fn ranked_slices(probabilities: &[f64], rank_of_slice: &[usize]) -> KeyDistribution {
        let n = probabilities.len() as u128;
        assert!(n > 0 && rank_of_slice.len() as u128 == n);
        let bound = |i: u128| ((i << 64) / n) as u64;
        let segments = (0..n)
            .map(|i| Segment {
                first: bound(i),
                last: if i + 1 == n {
                    u64::MAX
                } else {
                    bound(i + 1) - 1
                },
                weight: probabilities[rank_of_slice[i as usize]],
            })
            .collect();
        Self::from_segments(segments)
    }

    /// The distribution with the weight of keys in `[first, last]` multiplied by `factor`
    /// (ZcAmp), renormalised.
    pub fn amplified(&self, first: u64, last: u64, factor: f64) -> KeyDistribution {
        assert!(first <= last);
        let mut out = Vec::with_capacity(self.segments.len() + 2);
        for s in &self.segments {
            let len = (s.last - s.first) as f64 + 1.0;
            let mut push = |a: u64, b: u64, scale: f64| {
                let share = ((b - a) as f64 + 1.0) / len;
                out.push(Segment {
                    first: a,
                    last: b,
                    weight: s.weight * share * scale,
                });
            };
            // Split the segment at the interval's ends; weight is proportional to length.
            if first > s.first {
                push(s.first, s.last.min(first - 1), 1.0);
            }
            let (a, b) = (s.first.max(first), s.last.min(last));
            if a <= b {
                push(a, b, factor);
            }
            if last < s.last {
                push(s.first.max(last + 1), s.last, 1.0);
            }
        }
        Self::from_segments(out)
    }

    /// The key of a draw whose first number was `u` ([`unit_f64`](crate::rng::unit_f64)): a uniform key inside
    /// `u`'s segment, drawn from `rng`.
    #[inline]
    pub fn key_of_draw(&self, u: f64, rng: &mut impl rand::Rng) -> u64 {
        let s = self.segments[self.segment_of(u)];
        rng.random_range(s.first..=s.last)
    }

    /// The draws `u` whose key can lie in `[first, last]` (`first <= last`), as a half-open
    /// interval of `u`: every `u` outside it falls in a segment wholly outside `[first,
    /// last]`; a `u` inside may still give a key outside.
    pub fn draws_reaching(&self, first: u64, last: u64) -> (f64, f64) {
        assert!(first <= last, "an interval of keys");
        let a = self.segments.partition_point(|s| s.last < first);
        let b = self.segments.partition_point(|s| s.last < last);
        self.draws_of_segments(a, b)
    }

    /// The draws `u` that fall in segments `a..=b`, as a half-open interval of `u`:
    /// `segment_of(u) < a` exactly when `cdf[a - 1] > u`, and `segment_of(u) > b` exactly
    /// when `cdf[b] <= u` (for `b` below the last segment).
    fn draws_of_segments(&self, a: usize, b: usize) -> (f64, f64) {
        let below = if a == 0 { 0.0 } else { self.cdf[a - 1] };
        let above = if b + 1 >= self.segments.len() {
            f64::INFINITY
        } else {
            self.cdf[b]
        };
        (below, above)
    }

    /// The span `last - first` of most segments (the smallest of the most common).
    pub fn usual_span(&self) -> u64 {
        self.usual_span
    }

    /// The draws that fall in a segment whose span is not [`usual_span`](Self::usual_span),
    /// as half-open intervals of `u` in increasing order.
    pub fn draws_of_unusual_spans(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.unusual_spans
            .iter()
            .map(|&i| self.draws_of_segments(i as usize, i as usize))
    }

    /// The segment a draw `u` in [0, 1) falls in: the first whose cdf is above `u`.
    fn segment_of(&self, u: f64) -> usize {
        // k / 2^GUIDE_BITS <= u < (k + 1) / 2^GUIDE_BITS exactly (a power-of-two scale).
        let k = (u * 2f64.powi(GUIDE_BITS)) as usize;
        let (lo, hi) = (self.guide[k] as usize, self.guide[k + 1] as usize);
        let i = lo + self.cdf[lo..hi].partition_point(|&c| c <= u);
        i.min(self.segments.len() - 1)
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Probability mass of keys in `[first, last]`.
    pub fn mass(&self, first: u64, last: u64) -> f64 {
        let total: f64 = self.segments.iter().map(|s| s.weight).sum();
        let mut m = 0.0;
        for s in &self.segments {
            let a = s.first.max(first);
            let b = s.last.min(last);
            if a <= b {
                m += s.weight * ((b - a) as f64 + 1.0) / ((s.last - s.first) as f64 + 1.0);
            }
        }
        m / total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::unit_f64;

    #[test]
    fn the_guided_search_finds_the_segment_a_plain_search_finds() {
        let plain = |d: &KeyDistribution, u: f64| {
            let i = d.cdf.partition_point(|&c| c <= u);
            i.min(d.segments.len() - 1)
        };
        let dists = [
            KeyDistribution::zipf_composite(14, 1.0),
            KeyDistribution::zipf_composite(3, 1.2),
            KeyDistribution::zipf_composite(0, 0.0),
            KeyDistribution::zipf_composite(14, 0.0).amplified(1 << 60, 1 << 61, 10.0),
        ];
        let mut rng = crate::rng::stream(1, crate::rng::Purpose::Soak, 0);
        for d in &dists {
            let mut us: Vec<f64> = (0..50_000).map(|_| unit_f64(&mut rng)).collect();
            // The cdf values and the guide points themselves, and next to them.
            for &c in d.cdf.iter().take(2_000) {
                us.extend([c, c.next_down(), c.next_up()]);
            }
            us.extend((0..1 << GUIDE_BITS).map(|k| k as f64 / 65_536.0));
            for u in us.into_iter().filter(|u| (0.0..1.0).contains(u)) {
                assert_eq!(d.segment_of(u), plain(d, u), "u {u}");
            }
        }
    }

    /// `draws_of_segments(a, b)` holds exactly the draws whose segment is in `a..=b`, at
    /// the cdf's values and next to them, where an error by one would show.
    #[test]
    fn the_draws_of_some_segments_are_exactly_those_that_fall_in_them() {
        let w = |first: u64, last: u64, weight: f64| Segment {
            first,
            last,
            weight,
        };
        let zero_weights = KeyDistribution::from_segments(vec![
            w(0, 9, 0.0),
            w(10, 19, 1.0),
            w(20, 29, 0.0),
            w(30, 39, 0.0),
            w(40, 49, 2.0),
            w(50, u64::MAX, 0.0),
        ]);
        let dists = [
            KeyDistribution::zipf_composite(10, 1.0),
            KeyDistribution::zipf_composite(0, 0.0),
            KeyDistribution::zipf_composite(6, 100.0), // the cdf reaches 1 early
            KeyDistribution::ranked_slices(&zipf_probabilities(30, 1.0), &[7; 30]),
            KeyDistribution::zipf_composite(4, 0.5).amplified(1 << 61, 5 << 60, 9.0),
            zero_weights,
        ];
        let mut rng = stream(3, Purpose::Soak, 0);
        for d in &dists {
            let n = d.segments.len();
            let mut us: Vec<f64> = (0..2_000).map(|_| unit_f64(&mut rng)).collect();
            for &c in &d.cdf {
                us.extend([c, c.next_down(), c.next_up()]);
            }
            us.retain(|u| (0.0..1.0).contains(u));
            let pairs = [
                (0, 0),
                (0, n - 1),
                (n - 1, n - 1),
                (n / 2, n / 2),
                (1, n / 3),
            ];
            for (a, b) in pairs.into_iter().filter(|&(a, b)| a <= b && b < n) {
                let (below, above) = d.draws_of_segments(a, b);
                for &u in &us {
                    let inside = (a..=b).contains(&d.segment_of(u));
                    assert_eq!(inside, below <= u && u < above, "segments {a}..={b}, u {u}");
                }
            }
        }
    }

    #[test]
    fn the_usual_span_is_the_most_common_and_the_others_are_listed() {
        let d = KeyDistribution::zipf_composite(14, 1.0);
        assert_eq!((d.usual_span(), d.unusual_spans.len()), ((1 << 50) - 1, 0));
        // ZcAmp splits the two segments its interval's ends fall in.
        let a = d.amplified(3 << 50 | 5, 7 << 50 | 9, 4.0);
        assert_eq!(a.usual_span(), (1 << 50) - 1);
        let unusual: Vec<u64> = a
            .unusual_spans
            .iter()
            .map(|&i| a.segments[i as usize].first)
            .collect();
        assert_eq!(unusual, [3 << 50, 3 << 50 | 5, 7 << 50, 7 << 50 | 10]);
        // 2^64 / 3 is not whole: slices of two spans, the smaller the more common.
        let s = KeyDistribution::ranked_slices(&[0.5, 0.3, 0.2], &[0, 1, 2]);
        let spans: Vec<u64> = s.segments.iter().map(|s| s.last - s.first).collect();
        assert_eq!(spans, [u64::MAX / 3 - 1, u64::MAX / 3 - 1, u64::MAX / 3]);
        assert_eq!(
            (s.usual_span(), s.unusual_spans.clone()),
            (u64::MAX / 3 - 1, vec![2])
        );
    }

    use crate::rng::{Purpose, stream};

    /// Pearson's chi-square statistic of `counts` against `probabilities`.
    fn chi_square(counts: &[u64], probabilities: &[f64]) -> f64 {
        let n: u64 = counts.iter().sum();
        counts
            .iter()
            .zip(probabilities)
            .map(|(&c, &p)| {
                let e = p * n as f64;
                (c as f64 - e).powi(2) / e
            })
            .sum()
    }

    #[test]
    fn zipf_probabilities_worked_by_hand() {
        // theta 1 over 2 ranks: 1 : 1/2 -> 2/3, 1/3.
        let p = zipf_probabilities(2, 1.0);
        assert!((p[0] - 2.0 / 3.0).abs() < 1e-15 && (p[1] - 1.0 / 3.0).abs() < 1e-15);
        // theta 0 is uniform.
        assert!(
            zipf_probabilities(8, 0.0)
                .iter()
                .all(|&x| (x - 0.125).abs() < 1e-15)
        );
        // theta 2 over 3 ranks: 1, 1/4, 1/9 over 49/36.
        let p = zipf_probabilities(3, 2.0);
        assert!((p[2] - (1.0 / 9.0) / (49.0 / 36.0)).abs() < 1e-15);
    }

    #[test]
    fn sampled_prefix_frequencies_match_exact_probabilities() {
        // 64 prefixes, 200,000 draws: chi-square with 63 degrees of freedom stays below
        // 110 with probability 0.9998. The seed is fixed, so the test is deterministic.
        for (i, theta) in [0.0, 0.6, 0.8, 0.99, 1.0, 1.01, 1.2, 1.5, 2.0]
            .into_iter()
            .enumerate()
        {
            let d = KeyDistribution::zipf_composite(6, theta);
            let mut rng = stream(11, Purpose::Batch, i as u64);
            let mut counts = vec![0u64; 64];
            for _ in 0..200_000 {
                let u = unit_f64(&mut rng);
                counts[(d.key_of_draw(u, &mut rng) >> 58) as usize] += 1;
            }
            let probabilities = zipf_probabilities(64, theta);
            let x2 = chi_square(&counts, &probabilities);
            assert!(x2 < 110.0, "theta {theta}: chi-square {x2}");
        }
    }

    #[test]
    fn zipf_composite_at_paper_scale_covers_the_key_space() {
        let d = KeyDistribution::zipf_composite(14, 1.0);
        assert_eq!(d.segments().len(), 16_384);
        assert_eq!(d.segments()[0].first, 0);
        assert_eq!(d.segments()[16_383].last, u64::MAX);
        assert!((d.mass(0, u64::MAX) - 1.0).abs() < 1e-12);
        // Rank 0 holds 1/H(16384) of the mass, H(16384) = 10.2813...
        assert!((d.mass(0, (1 << 50) - 1) - 1.0 / 10.281_333).abs() < 1e-6);
    }

    #[test]
    fn amplification_multiplies_and_renormalises() {
        let d = KeyDistribution::zipf_composite(2, 0.0); // four equal quarters
        let q = 1u64 << 62;
        // Amplify the second half of the first quarter by 4.
        let a = d.amplified(q / 2, q - 1, 4.0);
        // Weights: 1/8 * 4 = 1/2 inside, 7/8 outside; total 11/8.
        assert!((a.mass(q / 2, q - 1) - (0.5 / 1.375)).abs() < 1e-12);
        assert!((a.mass(0, q / 2 - 1) - (0.125 / 1.375)).abs() < 1e-12);
        assert!((a.mass(0, u64::MAX) - 1.0).abs() < 1e-12);
        // Whole space amplified is the same distribution.
        let all = d.amplified(0, u64::MAX, 3.0);
        assert!((all.mass(0, q - 1) - 0.25).abs() < 1e-12);
    }
}
