//! `pimdes compare`: exit codes and what it reports, on real results of the tiny workload.

mod common;

use common::{assert_bad, pimdes};
use std::path::{Path, PathBuf};

const SMALL: [&str; 8] = [
    "--machine",
    "machines/paper-2rank.toml",
    "--workload",
    "workloads/tiny.toml",
    "--set",
    "machine.ranks=1",
    "--set",
    "machine.usable_dpus=16",
];

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `pimdes run` on the small configuration and writes its JSON to `path`.
fn run_to(path: &Path, extra: &[&str]) {
    let p = path.to_str().unwrap();
    let mut args = vec!["run", "--quiet", "--out", p];
    args.extend(SMALL);
    args.extend(extra);
    let o = pimdes(&args);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
}

fn compare(base: &Path, new: &Path, extra: &[&str]) -> common::Outcome {
    let mut args = vec!["compare", base.to_str().unwrap(), new.to_str().unwrap()];
    args.extend(extra);
    pimdes(&args)
}

fn edit(from: &Path, to: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(to, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn an_identical_rerun_passes_and_a_two_percent_slowdown_does_not() {
    let d = dir("compare_runs");
    let (a, b, slow) = (d.join("a.json"), d.join("b.json"), d.join("slow.json"));
    run_to(&a, &[]);
    run_to(&b, &[]);
    let o = compare(&a, &b, &[]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains(", 0 moved, 0 outside tolerance"),
        "{}",
        o.stdout
    );

    edit(&a, &slow, |v| {
        let mean = v["batch_time_us"]["mean"].as_f64().unwrap();
        v["batch_time_us"]["mean"] = (mean * 1.02).into();
    });
    let o = compare(&a, &slow, &["--rtol", "0.01"]);
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("batch_time_us.mean"));
    let line = line.unwrap_or_else(|| panic!("no row: {}", o.stdout));
    assert!(
        line.contains("+2.000%") && line.ends_with("OUTSIDE"),
        "{line}"
    );
    assert!(
        o.stdout.contains("1 moved, 1 outside tolerance"),
        "{}",
        o.stdout
    );

    let o = compare(&a, &slow, &["--rtol", "0.03"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("1 moved, 0 outside tolerance"),
        "{}",
        o.stdout
    );
    // A metric that did not move passes even at zero tolerance.
    let o = compare(
        &a,
        &slow,
        &["--metric", "breakdown_us", "--metric", "imbalance.data"],
    );
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
}

#[test]
fn partition_results_compare_and_a_lost_flag_is_a_regression() {
    let d = dir("compare_partition");
    let a = d.join("a.json");
    let mut args = vec!["partition", "--json"];
    args.extend(SMALL);
    let o = pimdes(&args);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    std::fs::write(&a, &o.stdout).unwrap();
    let o = compare(&a, &a, &[]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let b = d.join("b.json");
    edit(&a, &b, |v| v["fits_in_mram"] = false.into());
    let o = compare(&a, &b, &["--rtol", "1"]);
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("fits_in_mram"), "{}", o.stdout);
    // A metric NEW has and BASE lacks is named, not compared, and not a regression.
    let c = d.join("c.json");
    edit(&a, &c, |v| v["imbalance"]["new_metric"] = 1.5.into());
    let o = compare(&a, &c, &[]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout
            .contains("1 metric only in NEW, not compared: imbalance.new_metric"),
        "{}",
        o.stdout
    );
}

#[test]
fn different_configurations_and_bad_files_are_refused() {
    let d = dir("compare_bad");
    let a = d.join("a.json");
    run_to(&a, &[]);
    let other = d.join("other.json");
    edit(&a, &other, |v| {
        v["config"]["workload"]["queries"]["skew"] = 0.8.into()
    });
    let o = compare(&a, &other, &["--rtol", "1"]);
    assert_bad(
        &o,
        &[
            "different configurations",
            "`config.workload.queries.skew`, 1.0 in BASE and 0.8 in NEW",
            "pass --what-if",
        ],
    );

    // A report of another version of the report shape is not compared metric by metric.
    let older = d.join("older.json");
    edit(&a, &older, |v| v["schema_version"] = 1.into());
    assert_bad(
        &compare(&older, &a, &[]),
        &[
            "different report versions (schema_version 1 and 4)",
            "rerun BASE with this pimdes",
            "refresh",
        ],
    );
    // The advice names the side this pimdes did not write.
    assert_bad(
        &compare(&a, &older, &[]),
        &["(schema_version 4 and 1); rerun NEW with this pimdes"],
    );

    let missing = d.join("missing.json");
    assert_bad(
        &compare(&a, &missing, &[]),
        &["missing.json", "cannot read"],
    );
    let garbage = d.join("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    assert_bad(&compare(&garbage, &a, &[]), &["garbage.json", "not JSON"]);
    // A device never ends and a FIFO blocks: both are refused before they are opened.
    let zero = Path::new("/dev/zero");
    assert_bad(
        &compare(zero, &a, &[]),
        &["/dev/zero", "not a regular file"],
    );
    // A sweep directory whose index is not a regular file is refused the same way.
    let sweep = d.join("sweep");
    std::fs::create_dir_all(&sweep).unwrap();
    std::os::unix::fs::symlink(zero, sweep.join("sweep.json")).unwrap();
    assert_bad(
        &compare(&sweep, &sweep, &[]),
        &["sweep.json", "not a regular file"],
    );
    // One directory and one file: neither two results nor two sweeps.
    assert_bad(
        &compare(&a, &sweep, &[]),
        &[
            "sweep is a directory and",
            "a.json is not",
            "two sweep directories",
        ],
    );
    // A mistyped path is missing, not a directory or a file of the other kind.
    let o = compare(&d.join("swep"), &sweep, &[]);
    assert_bad(&o, &["swep", "cannot read"]);
    assert!(!o.stderr.contains("is a directory"), "{}", o.stderr);
    // A microbenchmark's result is another command's, whatever its configuration.
    let bench = d.join("bench.json");
    let o = pimdes(&["microbench", "arithmetic", "--quiet", "--json"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    std::fs::write(&bench, o.stdout).unwrap();
    assert_bad(
        &compare(&a, &bench, &[]),
        &["different commands (pimdes run and pimdes microbench)"],
    );
    let foreign = d.join("foreign.json");
    std::fs::write(&foreign, "{\"batch_time_us\": 1}").unwrap();
    assert_bad(&compare(&a, &foreign, &[]), &["not a pimdes result"]);
    assert_bad(
        &compare(&a, &a, &["--metric", "nope.mean"]),
        &[
            "`nope.mean` is not a metric of",
            "`answers_verified`, `batch_interval_us`",
        ],
    );
    // A wrong name in a known section is answered with that section's metrics.
    assert_bad(
        &compare(&a, &a, &["--metric", "breakdown_us.kernel"]),
        &["it has `breakdown_us.dpu_kernel`, `breakdown_us.communication`, "],
    );
    // A name close to a metric's puts that metric first.
    assert_bad(
        &compare(&a, &a, &["--metric", "throughput"]),
        &["it has `throughput_queries_per_s`, `answers_verified`"],
    );
    assert_bad(&compare(&a, &a, &["--rtol=-1"]), &["--rtol"]);
}

/// A result that breaks its report's schema is refused on either side: a metric written as
/// a string or null would otherwise go uncompared and a corrupt snapshot pass. A field the
/// BASE lacks is not a break (a later pimdes may add fields): it is listed as only in NEW.
#[test]
fn a_result_that_breaks_its_schema_is_refused() {
    let d = dir("compare_schema");
    let a = d.join("a.json");
    run_to(&a, &[]);
    let texted = d.join("texted.json");
    edit(&a, &texted, |v| {
        let mean = v["batch_time_us"]["mean"].to_string();
        v["batch_time_us"]["mean"] = mean.into();
        v["answers_verified"] = serde_json::Value::Null;
    });
    for (base, new) in [(&texted, &a), (&a, &texted)] {
        assert_bad(
            &compare(base, new, &[]),
            &[
                "texted.json: not a valid result of pimdes run",
                "$.answers_verified: null is not of type boolean (and 1 more violation)",
                "`pimdes schema run`",
            ],
        );
    }
    // A value of the right type outside what a run can report is a break too.
    let negative = d.join("negative.json");
    edit(&a, &negative, |v| {
        let t = v["throughput_queries_per_s"].as_f64().unwrap();
        v["throughput_queries_per_s"] = (-t).into();
    });
    assert_bad(
        &compare(&negative, &a, &[]),
        &[
            "negative.json: not a valid result of pimdes run",
            "$.throughput_queries_per_s",
        ],
    );
    let older = d.join("older.json");
    edit(&a, &older, |v| {
        v.as_object_mut().unwrap().remove("breakdown_us");
    });
    let o = compare(&older, &a, &[]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout
            .contains("only in NEW, not compared: breakdown_us."),
        "{}",
        o.stdout
    );
    // A result with no metric left compares nothing: refused, not passed.
    let gutted = d.join("gutted.json");
    edit(&a, &gutted, |v| {
        let keep = ["schema_version", "config", "version", "batch_time_us"];
        v.as_object_mut()
            .unwrap()
            .retain(|k, _| keep.contains(&k.as_str()));
        v["batch_time_us"] = serde_json::json!({});
    });
    assert_bad(
        &compare(&gutted, &a, &[]),
        &["gutted.json: no metric was compared", "(NEW has "],
    );
    // Nor is a field a record lacks (records are one of several shapes in the schema).
    let bench = d.join("bench.json");
    let o = pimdes(&["microbench", "mram", "--quiet", "--json"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    std::fs::write(&bench, o.stdout).unwrap();
    let lacking = d.join("lacking.json");
    edit(&bench, &lacking, |v| {
        v["records"][0]
            .as_object_mut()
            .unwrap()
            .remove("latency_cycles");
    });
    let o = compare(&lacking, &bench, &[]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let only = "only in NEW, not compared: records[0].latency_cycles";
    assert!(o.stdout.contains(only), "{}", o.stdout);
}

/// What a later pimdes or a person changes in a configuration without changing a result:
/// a key written with its default (a snapshot from before the key existed lacks it), a
/// description. Neither stops the comparison; an unknown key still does.
#[test]
fn a_defaulted_key_or_a_description_is_not_another_configuration() {
    let d = dir("compare_defaults");
    let a = d.join("a.json");
    run_to(&a, &[]);
    let defaulted = d.join("defaulted.json");
    edit(&a, &defaulted, |v| {
        let batches = v["config"]["workload"]["batches"].as_object_mut().unwrap();
        assert!(batches.remove("streaming").is_some());
        v["config"]["workload"]["description"] = "another text".into();
        v["config"]["machine"]["description"] = "a machine".into();
    });
    let o = compare(&a, &defaulted, &[]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    // A byte-order mark an editor wrote says nothing: the file compares as without it.
    let marked = d.join("marked.json");
    let text = std::fs::read_to_string(&a).unwrap();
    std::fs::write(&marked, format!("\u{feff}{text}")).unwrap();
    let o = compare(&marked, &a, &[]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let changed = d.join("changed.json");
    edit(&a, &changed, |v| {
        v["config"]["workload"]["batches"]["streaming"] = "always".into();
    });
    let o = compare(&a, &changed, &[]);
    assert_bad(
        &o,
        &["`config.workload.batches.streaming`, \"auto\" in BASE and \"always\" in NEW"],
    );
    let unknown = d.join("unknown.json");
    edit(&a, &unknown, |v| {
        v["config"]["workload"]["batches"]["new_key"] = 1.into()
    });
    let o = compare(&a, &unknown, &[]);
    assert_bad(
        &o,
        &["`config.workload.batches.new_key`, absent in BASE and 1 in NEW"],
    );
}

/// A what-if: two runs of different configurations compare with `--what-if`, which lists
/// every configuration key that differs before the metrics they moved; the exit code still
/// says whether a metric moved beyond the tolerances.
#[test]
fn a_what_if_lists_the_changed_keys_and_what_they_moved() {
    let d = dir("compare_what_if");
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    run_to(&a, &[]);
    let faster = [
        "--set",
        "machine.dpu.clock_mhz=700",
        "--set",
        "queries.skew=0.8",
    ];
    run_to(&b, &faster);
    let o = compare(&a, &b, &["--what-if", "--metric", "batch_time_us"]);
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[0], "configuration (BASE -> NEW):", "{}", o.stdout);
    assert_eq!(
        lines[1], "  machine.dpu.clock_mhz: 350.0 -> 700.0",
        "{}",
        o.stdout
    );
    assert_eq!(
        lines[2], "  workload.queries.skew: 1.0 -> 0.8",
        "{}",
        o.stdout
    );
    assert!(lines[4].starts_with("batch_time_us.mean "), "{}", o.stdout);
    let o = compare(&a, &b, &["--what-if", "--rtol", "10"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    // Without a difference there is nothing to list.
    let o = compare(&a, &a, &["--what-if"]);
    assert!(
        o.code == Some(0) && !o.stdout.contains("configuration"),
        "{}",
        o.stdout
    );
}
