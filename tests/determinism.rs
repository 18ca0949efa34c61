//! Same inputs and seed, same bytes: across runs, thread counts, and against a golden file.
//! Regenerate the golden files with
//! `PIMDES_BLESS=1 cargo test --profile checked --test determinism` after an intended change,
//! and say why in the commit.

mod common;

use std::process::Command;

fn partition_json(partitioner: &str, threads: &str, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args([
            "partition",
            "--machine",
            "machines/paper-1012.toml",
            "--workload",
            "workloads/tiny.toml",
            "--partitioner",
            partitioner,
            "--json",
        ])
        .args(extra)
        .env("RAYON_NUM_THREADS", threads)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("JSON is UTF-8")
}

#[test]
fn same_seed_same_bytes_on_any_thread_count() {
    for name in pimdes::partition::names() {
        let one = partition_json(name, "1", &[]);
        assert_eq!(
            one,
            partition_json(name, "1", &[]),
            "{name}: two runs differ"
        );
        assert_eq!(
            one,
            partition_json(name, "2", &[]),
            "{name}: 1 vs 2 threads differ"
        );
        assert_eq!(
            one,
            partition_json(name, "7", &[]),
            "{name}: 1 vs 7 threads differ"
        );
    }
}

/// The seed decides the data and the queries: another seed gives other imbalance figures.
/// Only the results are compared, since the report also echoes the seed itself.
#[test]
fn another_seed_changes_the_result() {
    let results = |extra: &[&str]| {
        let text = partition_json("qdd-double-scan", "2", extra);
        let report: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let field = |key: &str| report[key].clone();
        [
            field("imbalance"),
            field("max_queries_per_dpu"),
            field("mean_pairs_per_dpu"),
        ]
    };
    let (a, b) = (results(&[]), results(&["--set", "seed=8"]));
    assert!(a.iter().all(|v| !v.is_null()), "{a:?}");
    assert_ne!(a[0], b[0], "the imbalance figures");
    assert_ne!(a[1], b[1], "the busiest DPU's queries");
}

#[test]
fn golden_partition_output() {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/partition-tiny-qdd-double-scan.json");
    let got = partition_json(
        "qdd-double-scan",
        "2",
        &[
            "--set",
            "deviation.base_partition=3",
            "--set",
            "deviation.factor=10",
        ],
    );
    // The build's commit is not an output of the simulation: the golden file has null.
    assert_golden(&golden, &without_commit(&got));
}

/// `got` is the content of `golden`; with `PIMDES_BLESS` set, it becomes it first.
#[track_caller]
fn assert_golden(golden: &std::path::Path, got: &str) {
    if std::env::var_os("PIMDES_BLESS").is_some() {
        std::fs::write(golden, got).unwrap();
    }
    let want = std::fs::read_to_string(golden).expect("golden file exists (bless to create)");
    assert_eq!(
        got,
        want,
        "{}: output changed; if intended, bless and explain in the commit",
        golden.display()
    );
}

/// `json` with its `git_commit` line (the build's commit) set to null.
fn without_commit(json: &str) -> String {
    let line = json
        .lines()
        .find(|l| l.trim_start().starts_with("\"git_commit\":"))
        .expect("reports name the build's commit");
    json.replace(line, "  \"git_commit\": null,")
}

/// The report of `pimdes run` of the tiny workload with `index`, without its `host` block
/// (the simulating host's wall times and memory) and with a null commit: what the
/// simulation computed, timing included.
fn run_report(index: &str) -> String {
    let out = common::run_tiny(&["--json", "--quiet"], &[&format!("run.index={index}")]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let mut report: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let fields = report.as_object_mut().expect("an object");
    assert!(fields.remove("host").is_some(), "reports have a host block");
    fields.insert("git_commit".into(), serde_json::Value::Null);
    serde_json::to_string_pretty(&report).expect("serialises") + "\n"
}

/// Both indexes' reports on the tiny workload, batch times and kernel cycles included, are
/// the committed ones: a change to the engine, a kernel or a host cost that moves any
/// simulated figure shows here (`.ci/run`'s snapshot sweep covers B+-Forest only).
#[test]
fn golden_run_outputs() {
    for (index, file) in [
        ("b+forest", "run-tiny-bforest.json"),
        ("pim-tree", "run-tiny-pimtree.json"),
    ] {
        let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(file);
        assert_golden(&golden, &run_report(index));
    }
}
