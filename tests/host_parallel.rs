//! The host's steps of a batch on all threads give what they give on one: a batch routed in
//! pieces is the batch routed whole, fragment for fragment, and the parallel merge gives the
//! plain merge's answers, also for origins out of order (where it must fall back).

use pimdes::config::Override;
use pimdes::experiments::partition::Prepared;
use pimdes::forest::batch::{
    DpuBatch, merge, merge_parallel, origins_ascending, route_batch, route_in_pieces,
};
use pimdes::forest::reference::Answer;
use pimdes::machine::Machine;
use pimdes::partition::{RoutingTable, by_name};
use pimdes::workload::{Query, Workload};

/// A routing table on 16 DPUs and a batch of 200,000 queries of `kind`: more than three
/// pieces of routing and of merging.
fn batch_of(kind: &str) -> (Workload, RoutingTable, Vec<Query>, usize) {
    let machine = Machine::from_toml_str(
        "m.toml",
        include_str!("../machines/paper-2rank.toml"),
        &[
            Override::parse("machine.usable_dpus=16").unwrap(),
            Override::parse("machine.ranks=1").unwrap(),
        ],
    )
    .unwrap();
    let o: Vec<Override> = [
        format!("queries.kind={kind}"),
        "data.pairs=60000".into(),
        "queries.batch_size=200000".into(),
        "queries.range_pairs=700".into(),
        "partition.alpha=4".into(),
    ]
    .iter()
    .map(|s| Override::parse(s).unwrap())
    .collect();
    let text = include_str!("../workloads/tiny.toml");
    let workload = Workload::from_toml_str("tiny.toml", text, &o).unwrap();
    let prepared = Prepared::new(&machine, &workload).unwrap();
    let partitioner = by_name("qdd-double-scan").unwrap();
    let part = prepared.partition(partitioner.as_ref(), &workload).unwrap();
    let table = RoutingTable::new(&part, &prepared.data);
    let queries = prepared.queries.batch(0);
    assert!(queries.len() > 3 * (1 << 16), "the parallel paths run");
    (workload, table, queries, machine.dpus as usize)
}

/// A partial result for each fragment, some of them none, drawn from `seed`.
fn partials(batches: &[DpuBatch], seed: u64) -> Vec<Vec<Answer>> {
    let mut x = seed | 1;
    let mut next = move || {
        // xorshift64: any spread of values does.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut draw = || match next() % 8 {
        0 => None,
        v => Some(v),
    };
    (batches.iter())
        .map(|b| (0..b.len()).map(|_| draw()).collect())
        .collect()
}

#[test]
fn a_batch_routed_in_pieces_is_the_batch_routed_whole() {
    for kind in ["range-count-if", "range-max", "get"] {
        let (_, table, queries, dpus) = batch_of(kind);
        let whole = route_batch(&table, &queries, dpus as u32).0;
        let pieces = route_in_pieces(&queries, dpus, |p| route_batch(&table, p, dpus as u32).0);
        assert_eq!(pieces, whole, "{kind}");
        if kind != "get" {
            let fragments: usize = whole.iter().map(DpuBatch::len).sum();
            assert!(fragments > queries.len(), "{kind}: some ranges cross DPUs");
        }
    }
}

#[test]
fn the_parallel_merge_gives_the_plain_merges_answers() {
    for kind in ["range-count-if", "range-max", "get"] {
        let (workload, table, queries, dpus) = batch_of(kind);
        let batches = route_batch(&table, &queries, dpus as u32).0;
        // Routing's order, so the parallel merge takes its own path, not the fallback.
        assert!(batches.iter().all(origins_ascending), "{kind}");
        let results = partials(&batches, 20261205);
        let plain = merge(workload.kind, &batches, &results, queries.len());
        let parallel = merge_parallel(workload.kind, &batches, &results, queries.len());
        assert_eq!(parallel, plain, "{kind}");
    }
}

#[test]
fn the_parallel_merge_falls_back_when_origins_are_out_of_order() {
    let (workload, table, queries, dpus) = batch_of("get");
    let mut batches = route_batch(&table, &queries, dpus as u32).0;
    let mut results = partials(&batches, 7);
    // Reverse the first DPU's cold fragments (with their results): a binary search over
    // those origins would miss fragments, so only the fallback gives every answer.
    let (b, r) = (&mut batches[0], &mut results[0]);
    let c = b.cold.len();
    assert!(c > 1, "the first DPU has cold fragments to reorder");
    b.cold.reverse();
    b.origin[..c].reverse();
    r[..c].reverse();
    assert!(!origins_ascending(&batches[0]), "the fallback is taken");
    let plain = merge(workload.kind, &batches, &results, queries.len());
    let parallel = merge_parallel(workload.kind, &batches, &results, queries.len());
    assert_eq!(parallel, plain);
}
