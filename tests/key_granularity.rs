//! `partition.granularity = "pair"`: the one-dimensional baselines cut between keys. Data
//! balance is then exact to a pair, query balance is at least as good on the batch it was
//! cut for as at chunk granularity, and the other partitioners and `run` refuse it.

mod common;

use common::{assert_bad, pimdes};
use serde_json::Value;

fn partition(partitioner: &str, sets: &[&str]) -> Value {
    let flags = ["--partitioner", partitioner, "--json", "--quiet"];
    let o = common::tiny("partition", &flags, sets);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

#[test]
fn data_balanced_by_pairs_is_exact_to_one_pair() {
    let r = partition("data-balanced", &["partition.granularity=pair"]);
    let max = r["max_pairs_per_dpu"].as_u64().unwrap();
    let mean = r["mean_pairs_per_dpu"].as_f64().unwrap();
    assert!(max as f64 - mean < 1.0, "max {max}, mean {mean}");
    assert_eq!(r["config"]["workload"]["partition"]["granularity"], "pair");
    // The default granularity is left out of the configuration (and its hash).
    let chunk = partition("data-balanced", &[]);
    assert!(
        chunk["config"]["workload"]["partition"]
            .get("granularity")
            .is_none()
    );
}

#[test]
fn query_balanced_by_pairs_balances_its_reference_batch_at_least_as_well() {
    for kind in ["get", "range-count-if"] {
        let set = format!("queries.kind={kind}");
        let chunk = partition("query-balanced", &[&set]);
        let pair = partition("query-balanced", &[&set, "partition.granularity=pair"]);
        let reference = |r: &Value| r["imbalance"]["queries_reference"].as_f64().unwrap();
        assert!(
            reference(&pair) <= reference(&chunk) + 1e-9,
            "{kind}: pairs {} against chunks {}",
            reference(&pair),
            reference(&chunk)
        );
        assert!(reference(&pair) >= 1.0);
    }
}

#[test]
fn routing_entries_count_the_dpus_that_hold_pairs() {
    let all = partition("data-balanced", &["partition.granularity=pair"]);
    assert_eq!(all["partitions"], 128);
    // Every query on one key: query balance puts all the data on one DPU.
    let skewed = ["queries.skew=1e308", "queries.prefix_bits=24"];
    let r = partition(
        "query-balanced",
        &[&skewed[..], &["partition.granularity=pair"]].concat(),
    );
    assert_eq!(r["max_pairs_per_dpu"], 600_000, "one DPU holds every pair");
    assert_eq!(r["partitions"], 1);
}

#[test]
fn chunk_partitioners_and_runs_refuse_pair_granularity() {
    let o = pimdes(&[
        "partition",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
        "--partitioner",
        "qdd-double-scan",
        "--set",
        "partition.granularity=pair",
    ]);
    assert_bad(
        &o,
        &[
            "key `partition.granularity`",
            "qdd-double-scan partitions chunks",
        ],
    );
    let o = pimdes(&[
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
        "--set",
        "partition.granularity=pair",
    ]);
    assert_bad(&o, &["key `partition.granularity`", "built from chunks"]);
    let o = pimdes(&[
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/pim-tree-get.toml",
        "--set",
        "partition.granularity=pair",
    ]);
    assert_bad(
        &o,
        &[
            "key `partition.granularity`",
            "pim-tree places keys by hashing",
        ],
    );
    let o = pimdes(&[
        "partition",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
        "--set",
        "partition.granularity=key",
    ]);
    assert_bad(&o, &["partition.granularity", "unknown variant `key`"]);
}

/// The table's first line names what shapes the partitioning: the partitioner's own keys
/// (only those it reads), pair granularity and a ZcAmp deviation.
#[test]
fn the_table_header_names_the_settings_that_shape_the_partitioning() {
    let header = |partitioner: &str, sets: &[&str]| {
        let o = common::tiny(
            "partition",
            &["--partitioner", partitioner, "--quiet"],
            sets,
        );
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        o.stdout.lines().next().unwrap().to_owned()
    };
    let capped = header("ccp-capped", &[]);
    assert!(capped.contains("skew 1, data_cap 1.1, seed 7"), "{capped}");
    let zcamp = ["deviation.base_partition=3", "deviation.factor=10"];
    let gated = [&zcamp[..], &["partition.double_scan_gates=true"]].concat();
    let qdd = header("qdd-double-scan", &gated);
    assert!(
        qdd.contains(", alpha 10, double-scan gates, ZcAmp(b_3, 10), seed 7"),
        "{qdd}"
    );
    let pairs = header("data-balanced", &["partition.granularity=pair"]);
    assert!(
        pairs.contains("skew 1, pair granularity, seed 7"),
        "{pairs}"
    );
}
