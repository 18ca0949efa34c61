//! The workload against plain references: chunk query counts against a scan of the
//! materialised keys, range widths against the pairs they really cover, and ZcAmp against
//! its exact probability.

use pimdes::config::Override;
use pimdes::partition::ChunkLoads;
use pimdes::workload::keys::KeyDistribution;
use pimdes::workload::{DataSet, QueryGenerator, Workload};

fn tiny(overrides: &[&str]) -> Workload {
    let o: Vec<Override> = overrides
        .iter()
        .map(|s| Override::parse(s).unwrap())
        .collect();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/tiny.toml"))
        .unwrap();
    Workload::from_toml_str("tiny.toml", &text, &o).unwrap()
}

/// Every key of the data set, sorted.
fn all_keys(data: &DataSet) -> Vec<u64> {
    (0..data.chunks())
        .flat_map(|i| data.chunk_pairs_of(i).into_iter().map(|p| p.0))
        .collect()
}

#[test]
fn chunk_query_counts_match_a_scan_of_the_keys() {
    for both_ends in [false, true] {
        let w = tiny(&["data.pairs=30000", "queries.batch_size=5000"]);
        let data = DataSet::generate(&w);
        let queries = QueryGenerator::new(&w, &data, 16);
        let loads = ChunkLoads::from_reference(&data, &queries, both_ends);
        let keys = all_keys(&data);
        assert!(keys.windows(2).all(|p| p[0] < p[1]));
        // Reference: the chunk of a key is the index of its predecessor key / chunk_pairs.
        let chunk_of = |k: u64| {
            let pred = keys.partition_point(|&x| x <= k).saturating_sub(1);
            pred / w.chunk_pairs as usize
        };
        let mut counts = vec![0u64; data.chunks()];
        for q in queries.batch(0) {
            counts[chunk_of(q.lo)] += 1;
            if both_ends {
                counts[chunk_of(q.hi)] += 1;
            }
        }
        for (i, &c) in counts.iter().enumerate() {
            assert_eq!(
                loads.chunk_queries(i),
                c,
                "chunk {i}, both ends {both_ends}"
            );
        }
        assert_eq!(loads.total_size(), 30_000);
    }
}

#[test]
fn ranges_cover_range_pairs_on_average() {
    let w = tiny(&[
        "data.pairs=200000",
        "queries.batch_size=20000",
        "queries.skew=0.99",
    ]);
    let data = DataSet::generate(&w);
    let keys = all_keys(&data);
    let queries = QueryGenerator::new(&w, &data, 16);
    let batch = queries.batch(1);
    let covered: u64 = batch
        .iter()
        .map(|q| {
            (keys.partition_point(|&k| k <= q.hi) - keys.partition_point(|&k| k < q.lo)) as u64
        })
        .sum();
    let mean = covered as f64 / batch.len() as f64;
    assert!(
        (97.0..103.0).contains(&mean),
        "a range covers {mean} pairs on average"
    );
}

#[test]
fn zcamp_amplifies_the_chosen_base_partition_exactly() {
    let dpus = 64u64;
    let w = tiny(&[
        "deviation.base_partition=5",
        "deviation.factor=10",
        "queries.batch_size=200000",
    ]);
    let data = DataSet::generate(&w);
    let queries = QueryGenerator::new(&w, &data, dpus as u32);
    let n = data.chunks() as u64;
    let (first, end) = ((5 * n / dpus) as usize, (6 * n / dpus) as usize);
    let (lo, hi) = (data.range_start(first), data.range_start(end) - 1);
    let share = |batch: u64| {
        let b = queries.batch(batch);
        b.iter().filter(|q| (lo..=hi).contains(&q.lo)).count() as f64 / b.len() as f64
    };
    let m = KeyDistribution::zipf_composite(14, 1.0).mass(lo, hi);
    let amplified = 10.0 * m / (10.0 * m + 1.0 - m);
    // Batch 0 is the reference, not amplified; later batches are.
    let (s0, s1) = (share(0), share(1));
    let sd = |p: f64| (p * (1.0 - p) / 200_000.0).sqrt();
    assert!((s0 - m).abs() < 5.0 * sd(m), "reference share {s0} vs {m}");
    assert!(
        (s1 - amplified).abs() < 5.0 * sd(amplified),
        "amplified share {s1} vs {amplified}"
    );
    assert!(s1 > 3.0 * s0);
}

#[test]
fn zipf_slices_give_each_batch_its_own_hot_slice_with_the_zipf_share() {
    // PIM-tree's generator: one slice of the key space per DPU, Zipf over the slices in an
    // order drawn for each batch.
    let dpus = 64u32;
    let w = tiny(&[
        "queries.kind=get",
        "queries.distribution=zipf-slices",
        "queries.skew=1.0",
        "queries.batch_size=100000",
    ]);
    let data = DataSet::generate(&w);
    let queries = QueryGenerator::new(&w, &data, dpus);
    let slice_of = |k: u64| ((k as u128 * dpus as u128) >> 64) as usize;
    let hottest = |batch: u64| {
        let mut count = vec![0u64; dpus as usize];
        for q in queries.batch(batch) {
            count[slice_of(q.lo)] += 1;
        }
        let top = (0..count.len()).max_by_key(|&i| count[i]).unwrap();
        (top, count[top] as f64 / 100_000.0)
    };
    let p0 = 1.0 / (1..=64).map(|r| 1.0 / r as f64).sum::<f64>();
    let sd = (p0 * (1.0 - p0) / 100_000.0).sqrt();
    let tops: Vec<(usize, f64)> = (0..6).map(hottest).collect();
    for &(_, share) in &tops {
        assert!((share - p0).abs() < 5.0 * sd, "top share {share} vs {p0}");
    }
    let mut slices: Vec<usize> = tops.iter().map(|t| t.0).collect();
    slices.sort();
    slices.dedup();
    assert!(
        slices.len() >= 4,
        "the hot slice moves between batches: {tops:?}"
    );
}
