//! What the reports say about imbalance the partitioner cannot remove or does not see: the
//! chunk floor (the busiest chunk's share of the queries, in `imbalance.chunk_floor`) and
//! ranges longer than the chunks the density model counts them in (a warning).

mod common;

use common::tiny;
use serde_json::Value;

const JSON: [&str; 2] = ["--json", "--quiet"];

fn report(command: &str, sets: &[&str]) -> Value {
    let o = tiny(command, &JSON, sets);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    serde_json::from_str(&o.stdout).expect("a JSON report")
}

fn range_span_warnings(report: &Value) -> Vec<String> {
    let warnings = report["warnings"].as_array().expect("a warnings list");
    let note = pimdes::partition::prepared::RANGE_SPAN_NOTE;
    (warnings.iter().filter_map(Value::as_str))
        .filter(|w| w.starts_with(note))
        .map(str::to_owned)
        .collect()
}

/// The chunk floor is the figure the chunk-floor warning prints, it is the same in `run`
/// and `partition`, and a partitioning cut between keys has none.
#[test]
fn the_chunk_floor_is_reported_where_it_applies() {
    let partition = report("partition", &[]);
    let floor = partition["imbalance"]["chunk_floor"]
        .as_f64()
        .expect("a floor");
    let warnings = partition["warnings"].as_array().unwrap();
    let warned = warnings
        .iter()
        .filter_map(Value::as_str)
        .find(|w| common::is_chunk_floor(w));
    let printed = format!("draws {floor:.1} times");
    assert!(
        warned.is_some_and(|w| w.contains(&printed)),
        "{floor}: {warnings:?}"
    );
    let run = report("run", &["batches.measured=1"]);
    assert_eq!(run["imbalance"]["chunk_floor"].as_f64(), Some(floor));
    let keys = report(
        "partition",
        &[
            "partition.partitioner=data-balanced",
            "partition.granularity=pair",
        ],
    );
    assert!(
        keys["imbalance"]["chunk_floor"].is_null(),
        "{}",
        keys["imbalance"]
    );
}

/// Ranges longer than a chunk are named with their mean reach, with or without counting
/// both ends; ranges within a chunk, gets, predecessors and data-balanced (which reads no
/// queries) are not.
#[test]
fn ranges_longer_than_a_chunk_warn() {
    let long = report("partition", &["partition.chunk_pairs=30"]);
    let warned = range_span_warnings(&long);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].starts_with("ranges of 100 pairs are longer than the chunks of 30 pairs (each reaches about 4.3 chunks)")
            && warned[0].contains("only in the chunk where it starts:"),
        "{}",
        warned[0]
    );
    let warns = [
        &["partition.chunk_pairs=30", "partition.count_both_ends=true"][..],
        &["partition.chunk_pairs=99"],
        &["partition.chunk_pairs=30", "queries.kind=range-max"],
    ];
    for sets in warns {
        let warned = range_span_warnings(&report("partition", sets));
        assert_eq!(warned.len(), 1, "{sets:?}: {warned:?}");
    }
    let both = range_span_warnings(&report("partition", warns[0]));
    assert!(
        both[0].contains("the chunks where it starts and ends"),
        "{both:?}"
    );
    let quiet = [
        &["partition.chunk_pairs=100"][..],
        &["partition.chunk_pairs=30", "queries.kind=get"],
        &["partition.chunk_pairs=30", "queries.kind=predecessor"],
        &[
            "partition.chunk_pairs=30",
            "partition.partitioner=data-balanced",
        ],
    ];
    for sets in quiet {
        let warned = range_span_warnings(&report("partition", sets));
        assert!(warned.is_empty(), "{sets:?}: {warned:?}");
    }
}

/// The run's table prints the floor beside IF_q and IF_d, and the partition's table on its
/// own row ("none" for a cut between keys).
#[test]
fn the_tables_print_the_chunk_floor() {
    let run = tiny("run", &["--quiet"], &["batches.measured=1"]);
    let row = run
        .stdout
        .lines()
        .find(|l| l.contains("IF_q / IF_d / chunk floor"));
    assert!(
        row.is_some_and(|r| r.ends_with(" / 33.61")),
        "{}",
        run.stdout
    );
    let keys = tiny(
        "partition",
        &["--quiet"],
        &[
            "partition.partitioner=data-balanced",
            "partition.granularity=pair",
        ],
    );
    let row = keys.stdout.lines().find(|l| l.contains("chunk floor"));
    assert!(
        row.is_some_and(|r| r.ends_with("none (cut between keys)")),
        "{}",
        keys.stdout
    );
}

/// The warning is about load the partitioner does not see, so the run that shows it prints
/// it too.
#[test]
fn a_run_warns_of_long_ranges_as_partition_does() {
    let run = report("run", &["partition.chunk_pairs=30", "batches.measured=1"]);
    assert_eq!(range_span_warnings(&run).len(), 1, "{}", run["warnings"]);
}
