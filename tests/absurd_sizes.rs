//! Sizes that pass every other rule but cannot be simulated on a host in reasonable memory
//! or time are refused up front, naming the keys.

mod common;

use common::{Outcome, assert_bad, pimdes};

fn partition(sets: &[&str]) -> Outcome {
    command("partition", sets)
}

fn command(name: &str, sets: &[&str]) -> Outcome {
    let mut args = vec![
        name,
        "--machine",
        "machines/paper-1012.toml",
        "--workload",
        "workloads/tiny.toml",
    ];
    for s in sets {
        args.extend_from_slice(&["--set", s]);
    }
    pimdes(&args)
}

#[test]
fn a_machine_of_2_to_the_20_dpus_is_refused() {
    let o = partition(&["machine.ranks=16384", "machine.usable_dpus=1012"]);
    assert_bad(
        &o,
        &[
            "--set machine.ranks=16384: key `ranks`",
            "1048576 DPUs in all is above the supported 65536",
        ],
    );
    // The bound itself is accepted: 1,024 ranks of 64 DPUs (1,012 of them usable, as the
    // file says) partition the tiny workload.
    let o = partition(&["machine.ranks=1024"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains("on paper-1012 (1012 DPUs)"),
        "{}",
        o.stdout
    );
}

/// A product past 64 bits is printed as it is, not as the saturated u64 maximum.
#[test]
fn a_machine_beyond_64_bits_of_dpus_names_its_product() {
    let o = partition(&["machine.ranks=4611686018427387904"]);
    assert_bad(
        &o,
        &[
            "key `ranks`",
            "= 295147905179352825856 DPUs in all is above",
        ],
    );
}

/// Shrinking a machine whose file fixes `usable_dpus` says to set that key too (as growing
/// it warns); once it is set, the advice goes.
#[test]
fn shrinking_below_the_files_usable_dpus_says_to_set_them() {
    let o = partition(&["machine.ranks=1"]);
    assert_bad(
        &o,
        &[
            "--set machine.ranks=1: key `ranks`",
            "usable_dpus = 1012 is not between 1 and ranks x dpus_per_rank = 1 x 64 = 64",
            "(machine.usable_dpus=64 for all of them)",
        ],
    );
    let o = partition(&["machine.ranks=1", "machine.usable_dpus=65"]);
    assert_bad(&o, &["usable_dpus = 65 is not between 1 and"]);
    assert!(!o.stderr.contains("for all of them"), "{}", o.stderr);
}

#[test]
fn range_pairs_is_bounded_by_the_data_and_the_work() {
    let o = partition(&["queries.range_pairs=1000000"]);
    assert_bad(
        &o,
        &[
            "--set queries.range_pairs=1000000: key `queries.range_pairs`",
            "more than the 600000 pairs of the data",
        ],
    );
    // Every command that reads the workload: a run scans the ranges, `partition` routes
    // each to every DPU it reaches.
    let sets = ["queries.range_pairs=600000", "queries.batch_size=100000000"];
    for name in ["partition", "run"] {
        assert_bad(
            &command(name, &sets),
            &[
                "--set queries.range_pairs=600000",
                "queries.batch_size",
                "above the limit of 250000000000 (about an hour of a run)",
            ],
        );
    }
}

/// A run whose estimated host memory is above what the host has is refused at once; 2^36
/// pairs need more than a TiB on any machine this runs on.
#[test]
fn a_run_too_big_for_host_memory_is_refused_before_generating() {
    let o = pimdes(&[
        "run",
        "--machine",
        "machines/paper-1012.toml",
        "--workload",
        "workloads/tiny.toml",
        "--quiet",
        "--set",
        "data.pairs=68719476736",
    ]);
    assert_bad(
        &o,
        &[
            "--set data.pairs=68719476736: key `data.pairs`",
            "MiB of host memory",
            "MiB available; lower data.pairs (the pairs alone do not fit)",
        ],
    );
    // Streaming would not help: it is not advised.
    assert!(!o.stderr.contains("stream"), "{}", o.stderr);
    // Held batches too many: the `--set` of the batches is blamed, and the advice is what
    // applies to the run (its index cannot stream).
    let o = pimdes(&[
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/pim-tree-get.toml",
        "--quiet",
        "--set",
        "batches.warmup=99999",
        "--set",
        "batches.measured=1",
    ]);
    assert_bad(
        &o,
        &[
            "--set batches.warmup=99999 and --set batches.measured=1: key `batches.warmup`",
            "queries in all batches",
            "lower data.pairs, queries.batch_size, the number of batches (batches.warmup, batches.measured; 1 cool-down batch with run.batches_in_flight = 2) or the number of DPUs",
        ],
    );
    assert!(!o.stderr.contains("stream"), "{}", o.stderr);
}

/// `partition` keeps every measured batch's per-DPU loads until it computes the imbalance:
/// 65,536 DPUs in 99,000 batches would need about 100 GB, refused up front.
#[test]
fn partition_loads_beyond_host_memory_are_refused() {
    let o = partition(&[
        "machine.ranks=1024",
        "machine.usable_dpus=65536",
        "data.pairs=20000000",
        "batches.measured=99000",
        "queries.batch_size=1",
    ]);
    assert_bad(
        &o,
        &[
            "--set batches.measured=99000: key `batches.measured`",
            "for the loads of 65536 DPUs in 99000 measured batches",
        ],
    );
}
