//! B+-Forest's functional path against the plain reference: trees built from a real
//! partitioning, queries routed and cut at partition boundaries, each DPU's fragments
//! answered by walking its tree images (descend, then follow leaf links), partial results
//! merged; every answer must equal the reference's chunk scan. For all three query kinds,
//! ranges crossing partitions and DPUs, and empty ranges.

use pimdes::config::Override;
use pimdes::experiments::partition::Prepared;
use pimdes::forest::batch::{DpuBatch, merge, route_batch};
use pimdes::forest::build::{DpuTrees, build_trees, chunk_key_range};
use pimdes::forest::image::{DpuLayout, query_buffer, read_results, write_trees};
use pimdes::forest::kernel::{ForestKernel, WorkSplit};
use pimdes::forest::reference::{Answer, Reference};
use pimdes::forest::tree::{Internal, Leaf, NO_LINK, TreeImage};
use pimdes::machine::Machine;
use pimdes::partition::{RoutingTable, by_name};
use pimdes::system::System;
use pimdes::workload::{Query, QueryKind, Workload};

fn answer_on_tree(t: &TreeImage, kind: QueryKind, q: &Query) -> Answer {
    let mut link = t.root;
    for _ in 1..t.height {
        link = Internal::new(t.node_bytes(link, false), link.used())
            .child_for(q.lo)
            .0;
    }
    let (mut count, mut max): (u64, Option<u64>) = (0, None);
    while link != NO_LINK {
        let leaf = Leaf::new(t.node_bytes(link, true));
        for i in 0..leaf.pairs() {
            let (k, v) = (leaf.key(i), leaf.value(i));
            if k > q.hi {
                return finish(kind, count, max);
            }
            if k >= q.lo {
                match kind {
                    QueryKind::Get | QueryKind::Predecessor => return Some(v),
                    QueryKind::RangeCountIf => count += (v == q.value) as u64,
                    QueryKind::RangeMax => max = max.max(Some(v)),
                }
            }
        }
        link = leaf.next();
    }
    finish(kind, count, max)
}

fn finish(kind: QueryKind, count: u64, max: Option<u64>) -> Answer {
    match kind {
        QueryKind::Get | QueryKind::Predecessor => None,
        QueryKind::RangeCountIf => Some(count),
        QueryKind::RangeMax => max,
    }
}

/// A small machine and workload of `kind`, partitioned by `partitioner`, with the trees
/// built and the reference filled for three batches.
struct Case {
    machine: Machine,
    workload: Workload,
    table: RoutingTable,
    trees: Vec<DpuTrees>,
    reference: Reference,
    batches: Vec<Vec<Query>>,
}

impl Case {
    fn new(kind: &str, partitioner: &str, extra: &[&str]) -> Case {
        let machine_text = include_str!("../machines/paper-2rank.toml");
        let machine = Machine::from_toml_str(
            "m.toml",
            machine_text,
            &[
                Override::parse("machine.usable_dpus=16").unwrap(),
                Override::parse("machine.ranks=1").unwrap(),
            ],
        )
        .unwrap();
        let mut o = vec![
            format!("queries.kind={kind}"),
            "data.pairs=60000".into(),
            "queries.batch_size=3000".into(),
            "batches.warmup=1".into(),
            "batches.measured=2".into(),
            "partition.alpha=4".into(),
            "queries.range_pairs=700".into(),
        ];
        o.extend(extra.iter().map(|s| s.to_string()));
        let o: Vec<Override> = o.iter().map(|s| Override::parse(s).unwrap()).collect();
        let text = include_str!("../workloads/tiny.toml");
        let workload = Workload::from_toml_str("tiny.toml", text, &o).unwrap();
        let prepared = Prepared::new(&machine, &workload).unwrap();
        let part = prepared
            .partition(by_name(partitioner).unwrap().as_ref(), &workload)
            .unwrap();
        let mut batches: Vec<Vec<Query>> = (0..3).map(|b| prepared.queries.batch(b)).collect();
        // Add ranges that are empty (between two keys) and ranges over the whole key space.
        if workload.kind.is_range() {
            let (_, last0) = chunk_key_range(&prepared.data, 0);
            batches[1].push(Query {
                lo: last0,
                hi: last0,
                value: 1,
            });
            batches[1].push(Query {
                lo: 0,
                hi: u64::MAX,
                value: 3,
            });
        }
        let views: Vec<&[Query]> = batches.iter().map(|b| b.as_slice()).collect();
        let reference = Reference::new(workload.kind, &views);
        let trees = build_trees(&prepared.data, &part, |c, pairs| {
            let (first, last) = chunk_key_range(&prepared.data, c);
            reference.visit(first, last, pairs);
        });
        if workload.kind == QueryKind::Get {
            for (b, batch) in batches.iter_mut().enumerate() {
                reference.resolved_gets(b, batch);
            }
        }
        let table = RoutingTable::new(&part, &prepared.data);
        Case {
            machine,
            workload,
            table,
            trees,
            reference,
            batches,
        }
    }
}

/// Each DPU's answers, by walking its tree images directly.
fn answers_on_images(
    kind: QueryKind,
    dpu_batches: &[DpuBatch],
    trees: &[DpuTrees],
) -> Vec<Vec<Answer>> {
    dpu_batches
        .iter()
        .zip(trees)
        .map(|(db, t)| {
            let cold = db.cold.iter().map(|q| answer_on_tree(&t.cold, kind, q));
            let hot = (db.hot.iter()).map(|q| answer_on_tree(t.hot.as_ref().unwrap(), kind, q));
            cold.chain(hot).collect()
        })
        .collect()
}

/// Each DPU's answers, from the timed kernel with `split` on `system` (its trees written).
fn answers_of_kernel(
    system: &mut System,
    (kind, split): (QueryKind, WorkSplit),
    layouts: &[DpuLayout],
    trees: &[DpuTrees],
    dpu_batches: &[DpuBatch],
) -> Vec<Vec<Answer>> {
    for (dpu, (l, db)) in system
        .dpus_mut()
        .iter_mut()
        .zip(layouts.iter().zip(dpu_batches))
    {
        dpu.mram_mut().write(l.query_base, &query_buffer(kind, db));
    }
    let kernel = ForestKernel {
        kind,
        split,
        dpus: (layouts.iter().zip(trees).zip(dpu_batches))
            .map(|((l, t), db)| l.args(t, kind, db.len() as u64))
            .collect(),
    };
    let report = system.launch(&kernel, 11).expect("the kernel runs");
    assert!(report.slowest_cycles > 0);
    (system.dpus().iter().zip(layouts.iter().zip(dpu_batches)))
        .map(|(d, (l, db))| read_results(d.mram(), l, kind, db.len() as u64))
        .collect()
}

fn check(kind: &str, partitioner: &str, extra: &[&str]) {
    let case = Case::new(kind, partitioner, extra);
    let k = case.workload.kind;
    let mut system = System::new(&case.machine);
    let layouts: Vec<DpuLayout> = case.trees.iter().map(DpuLayout::new).collect();
    for ((dpu, l), t) in system.dpus_mut().iter_mut().zip(&layouts).zip(&case.trees) {
        write_trees(dpu.mram_mut(), l, t);
    }
    let mut crossing = 0;
    for (b, batch) in case.batches.iter().enumerate() {
        let (dpu_batches, stats) = route_batch(&case.table, batch, case.machine.dpus);
        crossing += stats.fragments - stats.queries;
        let results = answers_on_images(k, &dpu_batches, &case.trees);
        let answers = merge(k, &dpu_batches, &results, batch.len());
        let want = case.reference.answers(b);
        assert_eq!(answers, want, "{kind} {partitioner} batch {b}");
        // The same batch through the timed DPU kernel, with both work splits.
        for split in [WorkSplit::Static, WorkSplit::Dynamic] {
            let timed =
                answers_of_kernel(&mut system, (k, split), &layouts, &case.trees, &dpu_batches);
            let answers = merge(k, &dpu_batches, &timed, batch.len());
            assert_eq!(
                answers, want,
                "timed kernel, {split:?}: {kind} {partitioner} batch {b}"
            );
        }
        if k == QueryKind::RangeCountIf {
            assert!(
                want.iter().filter(|a| a.is_some_and(|c| c > 0)).count() > batch.len() / 2,
                "counts are not trivially zero"
            );
        }
    }
    if k.is_range() {
        assert!(crossing > 0, "some ranges cross partitions");
    }
}

#[test]
fn range_count_if_answers_match_the_reference() {
    for p in ["qdd-double-scan", "ccp-capped", "data-balanced"] {
        check("range-count-if", p, &[]);
    }
}

#[test]
fn range_max_answers_match_the_reference() {
    check("range-max", "qdd-double-scan", &[]);
    check("range-max", "qdd-greedy", &["data.value_domain=1000000"]);
}

#[test]
fn get_answers_match_the_reference() {
    check("get", "qdd-double-scan", &[]);
    check("get", "query-balanced", &[]);
}
