//! Capped CCP is exact: on small inputs its bottleneck equals the best of all contiguous
//! cuts found by brute force, and its parts respect the cap.

use pimdes::partition::ccp::ccp;
use pimdes::partition::{ChunkLoads, PartitionError};
use proptest::prelude::*;

/// The smallest largest-query-load over every cut into at most `p` contiguous parts with
/// at most `cap` pairs each; None when no cut respects the cap.
fn brute_force(sizes: &[u64], queries: &[u64], p: usize, cap: u64) -> Option<u64> {
    let n = sizes.len();
    let mut best: Option<u64> = None;
    for mask in 0u32..(1 << (n - 1)) {
        if mask.count_ones() as usize + 1 > p {
            continue;
        }
        let (mut q, mut d, mut worst, mut ok) = (0u64, 0u64, 0u64, true);
        for i in 0..n {
            q += queries[i];
            d += sizes[i];
            let cut_after = i + 1 == n || mask & (1 << i) != 0;
            if cut_after {
                ok &= d <= cap;
                worst = worst.max(q);
                q = 0;
                d = 0;
            }
        }
        if ok {
            best = Some(best.map_or(worst, |b| b.min(worst)));
        }
    }
    best
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn capped_ccp_matches_brute_force(
        sizes in prop::collection::vec(1u64..=10, 1..=10),
        queries_seed in prop::collection::vec(0u64..=30, 10),
        p in 1usize..=5,
        cap in 5u64..=40,
    ) {
        let n = sizes.len();
        let queries = &queries_seed[..n];
        let loads = ChunkLoads::new(&sizes, queries);
        let expected = brute_force(&sizes, queries, p, cap);
        match ccp(&loads, p as u32, cap) {
            Ok((ranges, bottleneck)) => {
                prop_assert_eq!(Some(bottleneck), expected);
                // At most p non-empty parts covering all chunks in order.
                prop_assert!(ranges.len() <= p);
                let mut next = 0;
                for r in &ranges {
                    prop_assert_eq!(r.start, next);
                    prop_assert!(r.end > r.start);
                    next = r.end;
                    prop_assert!(loads.size(r.start, r.end - 1) <= cap);
                    prop_assert!(loads.queries(r.start, r.end - 1) <= bottleneck);
                }
                prop_assert_eq!(next, n);
            }
            Err(PartitionError::ChunkAboveCap { pairs, .. }) => {
                prop_assert!(pairs > cap);
                prop_assert_eq!(expected, None);
            }
            Err(PartitionError::CapInfeasible { .. }) => prop_assert_eq!(expected, None),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    #[test]
    fn uncapped_ccp_matches_brute_force(
        queries in prop::collection::vec(0u64..=50, 1..=10),
        p in 1usize..=6,
    ) {
        let sizes = vec![1u64; queries.len()];
        let loads = ChunkLoads::new(&sizes, &queries);
        let (_, bottleneck) = ccp(&loads, p as u32, u64::MAX).unwrap();
        prop_assert_eq!(Some(bottleneck), brute_force(&sizes, &queries, p, u64::MAX));
    }
}
