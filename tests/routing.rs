//! The routing table agrees with a brute-force scan of every partition, and with the data
//! set's chunk ownership.

use pimdes::forest::batch::{Coverage, route_batch};
use pimdes::partition::routing::Target;
use pimdes::partition::{ChunkLoads, PartitionParams, RoutingTable, by_name};
use pimdes::workload::{DataSet, Query};
use proptest::prelude::*;

fn brute_force(starts: &[u64], lo: u64, hi: u64) -> Vec<usize> {
    (0..starts.len())
        .filter(|&i| {
            let first = starts[i];
            let last = starts.get(i + 1).map_or(u64::MAX, |s| s - 1);
            first <= hi && lo <= last
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn route_matches_brute_force(
        mut cuts in prop::collection::btree_set(1u64..1000, 0..20),
        a in 0u64..1100,
        b in 0u64..1100,
        far in any::<bool>(),
    ) {
        cuts.insert(0);
        let starts: Vec<u64> = cuts.into_iter().collect();
        let targets = (0..starts.len()).map(|i| Target { dpu: i as u32, hot: i % 2 == 1 }).collect();
        let table = RoutingTable::from_parts(starts.clone(), targets);
        let (lo, mut hi) = (a.min(b), a.max(b));
        if far {
            hi = u64::MAX; // a range clamped at the end of the key space
        }
        let mut routed = Vec::new();
        table.route(lo, hi, |e| routed.push(e));
        prop_assert_eq!(&routed, &brute_force(&starts, lo, hi));
        // A range crossing k partitions yields k fragments.
        prop_assert!(!routed.is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Routed fragments cover their queries' ranges exactly, so the streamed batches'
    /// coverage check passes; and it fails on a fragment lost, repeated, cut short or
    /// credited to another query.
    #[test]
    fn fragments_cover_their_queries_and_the_check_sees_a_broken_routing(
        mut cuts in prop::collection::btree_set(1u64..1000, 1..20),
        ends in prop::collection::vec((0u64..1100, 0u64..1100, any::<bool>()), 2..40),
        break_at in any::<prop::sample::Index>(),
        how in 0..4,
    ) {
        cuts.insert(0);
        let starts: Vec<u64> = cuts.into_iter().collect();
        let n = starts.len() as u32;
        let targets = (0..n).map(|i| Target { dpu: i % 3, hot: i % 2 == 1 }).collect();
        let table = RoutingTable::from_parts(starts, targets);
        let queries: Vec<Query> = ends
            .iter()
            .map(|&(a, b, far)| Query {
                lo: a.min(b),
                hi: if far { u64::MAX } else { a.max(b) },
                value: 0,
            })
            .collect();
        let first = 1_000;
        let (mut batches, _) = route_batch(&table, &queries, 3);
        for b in &mut batches {
            for o in &mut b.origin {
                *o += first as u32;
            }
        }
        let want = Coverage::of_queries(first, &queries);
        prop_assert_eq!(Coverage::of_fragments(&batches), want);
        // Break one fragment of the first non-empty DPU batch (a cold one if it has any).
        let b = batches.iter_mut().find(|b| !b.is_empty()).unwrap();
        let cold = b.cold.len();
        let (list, skip) = if cold > 0 { (&mut b.cold, 0) } else { (&mut b.hot, cold) };
        let i = break_at.index(list.len());
        match how {
            0 => {
                list.remove(i);
                b.origin.remove(skip + i);
            }
            1 => {
                let (q, o) = (list[i], b.origin[skip + i]);
                list.insert(i, q);
                b.origin.insert(skip + i, o);
            }
            2 => {
                // One key shorter, or a single key one longer (never an empty or inverted
                // range, which the check asserts against).
                let q = &mut list[i];
                if q.hi > q.lo {
                    q.hi -= 1
                } else if q.lo > 0 {
                    q.lo -= 1
                } else {
                    q.hi += 1
                }
            }
            _ => b.origin[skip + i] += 1 + queries.len() as u32,
        }
        prop_assert_ne!(Coverage::of_fragments(&batches), want);
    }
}

#[test]
fn routing_entries_own_the_chunks_of_their_keys() {
    let data = DataSet::generate_with(3, 60_000, 300, None);
    let sizes: Vec<u64> = (0..data.chunks()).map(|i| data.chunk_size(i)).collect();
    // Dense queries on a few chunks so the QDD partitioners cut hot ranges out.
    let queries: Vec<u64> = (0..data.chunks())
        .map(|i| if i % 37 < 3 { 500 } else { 1 })
        .collect();
    let loads = ChunkLoads::new(&sizes, &queries);
    let params = PartitionParams {
        dpus: 16,
        alpha: 4,
        data_cap: 1.1,
        double_scan_gates: false,
    };
    for name in pimdes::partition::names() {
        let part = by_name(name).unwrap().partition(&loads, &params).unwrap();
        let table = RoutingTable::new(&part, &data);
        let owner: Vec<(u32, bool)> = part
            .parts
            .iter()
            .flat_map(|p| p.chunks.clone().map(move |_| (p.dpu, p.hot)))
            .collect();
        for i in 0..data.chunks() {
            for key in [
                data.range_start(i),
                data.first_key(i),
                data.first_key(i).wrapping_add(12345),
            ] {
                let chunk = data.chunk_of(key);
                let t = table.target(table.locate(key));
                prop_assert_eq_plain(owner[chunk], (t.dpu, t.hot), name);
            }
        }
    }
}

fn prop_assert_eq_plain(a: (u32, bool), b: (u32, bool), name: &str) {
    assert_eq!(a, b, "{name}");
}
