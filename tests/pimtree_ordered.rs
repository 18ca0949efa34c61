//! PIM-tree's predecessor and scan batches end to end on small configurations: every
//! answer checked against the plain reference (predecessor, range-count-if and range-max
//! through a scan), the push-pull plan taking over under skew, the rounds each plan runs,
//! determinism across thread counts, and the inputs refused before any DPU runs.

mod common;

use common::{assert_bad, pimdes};

use pimdes::config::Override;
use pimdes::experiments::run::{RunReport, Silent, run};
use pimdes::machine::Machine;
use pimdes::partition::by_name;
use pimdes::workload::Workload;

/// 16 DPUs in one rank of the paper's server.
fn machine() -> Machine {
    let o: Vec<Override> = ["machine.ranks=1", "machine.usable_dpus=16"]
        .iter()
        .map(|s| Override::parse(s).unwrap())
        .collect();
    Machine::from_toml_str(
        "paper-2rank.toml",
        include_str!("../machines/paper-2rank.toml"),
        &o,
    )
    .unwrap()
}

fn workload(kind: &str, extra: &[&str]) -> Workload {
    let kind = format!("queries.kind={kind}");
    let mut o = vec![
        kind.as_str(),
        "data.pairs=120000",
        "data.value_domain=4",
        "queries.batch_size=3000",
        "queries.range_pairs=20",
        "batches.warmup=1",
        "batches.measured=2",
    ];
    o.extend_from_slice(extra);
    let o: Vec<Override> = o.iter().map(|s| Override::parse(s).unwrap()).collect();
    Workload::from_toml_str(
        "pim-tree-get.toml",
        include_str!("../workloads/pim-tree-get.toml"),
        &o,
    )
    .unwrap()
}

fn run_on(w: &Workload) -> RunReport {
    run(
        &machine(),
        w,
        by_name("qdd-double-scan").unwrap().as_ref(),
        &mut Silent,
    )
    .unwrap()
}

fn field(r: &RunReport, key: &str) -> f64 {
    r.index_f64(&["pim_tree", key])
}

#[test]
fn predecessor_answers_are_verified_in_four_rounds_when_unskewed() {
    let r = run_on(&workload("predecessor", &["queries.skew=0"]));
    assert!(r.answers_verified);
    assert_eq!(field(&r, "rounds_per_batch"), 4.0);
    assert_eq!(field(&r, "skewed_rounds_per_batch"), 0.0);
    assert_eq!(field(&r, "pulls_per_batch"), 0.0);
    // Each distinct key is searched once: L3, one push per group, one per key at level 0.
    assert!(field(&r, "distinct_keys_per_batch") > 2900.0);
}

/// Predecessor and scan runs fill the same hash tables as gets, and say what it cost
/// (they reported 0 probes per key).
#[test]
fn ordered_runs_report_the_hash_tables_insert_probes_as_gets_do() {
    let probes = |kind: &str| field(&run_on(&workload(kind, &[])), "insert_probes_per_key");
    let get = probes("get");
    assert!(get >= 1.0, "{get}");
    assert_eq!(probes("predecessor"), get);
    assert_eq!(probes("range-count-if"), get);
}

#[test]
fn skewed_predecessor_batches_pull_hot_nodes() {
    let r = run_on(&workload("predecessor", &["queries.skew=1.2"]));
    assert!(r.answers_verified);
    assert!(field(&r, "skewed_rounds_per_batch") >= 1.0);
    assert!(field(&r, "pulls_per_batch") > 0.0);
    assert!(field(&r, "rounds_per_batch") >= 5.0);
    // Pulled nodes are searched on the host: far fewer searches go to the DPUs than
    // without skew (drawn keys rarely repeat, so query fusion does not help here).
    let flat = run_on(&workload("predecessor", &["queries.skew=0"]));
    assert!(field(&r, "pushes_per_batch") < field(&flat, "pushes_per_batch") / 2.0);
}

/// With one value for every pair, only the predecessor's key tells a right answer from a
/// wrong one: the run checks the key each query was answered from, on pulled nodes too.
#[test]
fn predecessors_are_verified_by_key_when_values_repeat() {
    let sets = ["queries.skew=3", "data.value_domain=1"];
    let r = run_on(&workload("predecessor", &sets));
    assert!(r.answers_verified);
    assert!(field(&r, "pulls_per_batch") > 0.0);
}

#[test]
fn range_aggregates_run_as_scans_and_are_verified() {
    for kind in ["range-count-if", "range-max"] {
        let r = run_on(&workload(kind, &["queries.skew=0.6"]));
        assert!(r.answers_verified, "{kind}");
        // One sub-batch: L3, three levels, data.
        assert_eq!(field(&r, "rounds_per_batch"), 5.0, "{kind}");
        let b = &r.breakdown_us;
        assert!(b.get("dpu_kernel") > 0.0 && b.get("fill") > 0.0, "{kind}");
    }
}

#[test]
fn scans_run_in_sub_batches_of_ten_thousand_ranges() {
    let r = run_on(&workload(
        "range-max",
        &["queries.batch_size=10001", "queries.range_pairs=4"],
    ));
    assert_eq!(field(&r, "rounds_per_batch"), 10.0);
}

#[test]
fn overlapping_ranges_are_merged_before_they_are_sent() {
    // Under heavy skew most ranges overlap: far fewer merged ranges than queries.
    let r = run_on(&workload("range-max", &["queries.skew=1.4"]));
    assert!(
        field(&r, "queries_per_distinct_key") > 2.0,
        "{}",
        field(&r, "queries_per_distinct_key")
    );
    // Boundary nodes that 32 or more merged ranges share are pulled, not searched 32 times.
    assert!(field(&r, "pulls_per_batch") > 0.0);
}

#[test]
fn same_report_on_one_and_several_threads() {
    for kind in ["predecessor", "range-count-if"] {
        let w = workload(kind, &["queries.skew=1.2"]);
        let part = |r: &RunReport| {
            let mut v = serde_json::to_value(r).unwrap();
            v.as_object_mut().unwrap().remove("host");
            serde_json::to_string(&v).unwrap()
        };
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        let a = pool(1).install(|| part(&run_on(&w)));
        let b = pool(3).install(|| part(&run_on(&w)));
        assert_eq!(a, b, "{kind}");
    }
}

fn run_cli(sets: &[&str]) -> common::Outcome {
    let mut args = vec![
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/pim-tree-get.toml",
    ];
    for s in ["data.pairs=60000", "batches.warmup=1"].iter().chain(sets) {
        args.extend(["--set", s]);
    }
    pimdes(&args)
}

#[test]
fn a_round_beyond_pimtree_task_limit_is_refused_naming_batch_round_and_dpu() {
    // 2 DPUs, ranges of 2,000 pairs: the data round sends one DPU far more than 12,800
    // tasks.
    let o = run_cli(&[
        "machine.ranks=1",
        "machine.usable_dpus=2",
        "queries.kind=range-max",
        "queries.range_pairs=2000",
        "queries.batch_size=100",
    ]);
    assert_bad(
        &o,
        &[
            "queries.batch_size",
            "batch 0",
            "(data)",
            "DPU",
            "at most 12800",
        ],
    );
}

#[test]
fn bforest_answers_predecessor_batches_as_gets() {
    let o = pimdes(&[
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
        "--set",
        "queries.kind=predecessor",
        "--set",
        "batches.measured=1",
        "--json",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["answers_verified"], true);
}

#[test]
fn a_scan_plan_beyond_host_memory_is_refused_before_any_work() {
    // The paper's RAQ workload as PIM-tree scans: 3 x 10^9 covered pairs, each held in the
    // plan (hundreds of GB); refused with the estimate, naming the batch size.
    let o = pimdes(&[
        "run",
        "--machine",
        "machines/upmem-2538.toml",
        "--workload",
        "workloads/paper-raq.toml",
        "--set",
        "run.index=pim-tree",
    ]);
    assert_bad(
        &o,
        &[
            "queries.batch_size",
            "MiB of host memory",
            "queries in all batches",
        ],
    );
}
