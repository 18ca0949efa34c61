//! `pimdes sweep`: resumable after a kill, `--list` lines equivalent to the sweep, `--point`,
//! repetitions, collection, compare on sweep directories, and bad manifests.

mod common;

use common::{Outcome, assert_bad, pimdes};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A process id above Linux's largest (2^22): no process runs under it, so a temporary
/// file named after it was left by a killed process.
const DEAD_PID: u32 = 4_999_999;

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn root(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(file)
        .display()
        .to_string()
}

/// A manifest on the tiny workload and 16 DPUs, one warm-up and two measured batches.
fn manifest(d: &Path, body: &str) -> PathBuf {
    let text = format!(
        "machine = {:?}\nworkload = {:?}\n{body}\n",
        root("machines/paper-2rank.toml"),
        root("workloads/tiny.toml")
    );
    let path = d.join("manifest.toml");
    std::fs::write(&path, text).unwrap();
    path
}

const GRID: &str = r#"command = "run"
[set]
machine.ranks = 1
machine.usable_dpus = 16
batches.warmup = 1
batches.measured = 2
[grid]
partition.partitioner = ["ccp-capped", "qdd-greedy"]
queries.skew = [0.6, 1.0]
"#;

fn sweep(args: &[&str]) -> Outcome {
    let mut all = vec!["sweep"];
    all.extend(args);
    let o = pimdes(&all);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    o
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The files of sweep directory `d` as text: results without their `host` block, and with
/// the directory in their command line written `DIR`, so two directories of one sweep
/// compare equal.
fn files(d: &Path) -> BTreeMap<String, String> {
    let canonical = std::fs::canonicalize(d).unwrap().display().to_string();
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(d).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let text = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(mut m)) if m.contains_key("config") => {
                m.remove("host");
                if let Some(Value::String(line)) = m.get_mut("command_line") {
                    *line = line.replace(&canonical, "DIR");
                }
                Value::Object(m).to_string()
            }
            _ => text,
        };
        out.insert(name, text);
    }
    out
}

#[test]
fn a_killed_sweep_reruns_to_the_files_of_an_uninterrupted_one() {
    let d = dir("sweep_resume");
    let m = manifest(&d, GRID);
    let (whole, killed) = (d.join("whole"), d.join("killed"));
    let o = sweep(&[s(&m), "--out", s(&whole), "--jobs", "2"]);
    assert!(
        o.stdout.contains("collected 4 points into "),
        "{}",
        o.stdout
    );
    let expected = files(&whole);
    assert_eq!(expected.len(), 4 + 3, "{:?}", expected.keys());
    // Each point is said on stderr as it ends, counted (in any order under --jobs).
    for n in 1..=4 {
        let said = format!(": done ({n} of 4)\n");
        assert!(o.stderr.contains(&said), "{said}: {}", o.stderr);
    }
    // A rerun writes nothing and says so; with --quiet, on stdout alone.
    let o = sweep(&[s(&m), "--out", s(&whole), "--quiet"]);
    assert!(
        o.stdout.contains("results.jsonl are up to date (4 points)"),
        "{}",
        o.stdout
    );
    assert_eq!(o.stderr, "");
    assert!(expected.contains_key("partition.partitioner=qdd-greedy,queries.skew=0.6.json"));

    sweep(&[s(&m), "--out", s(&killed)]);
    let names: Vec<&String> = expected
        .keys()
        .filter(|n| n.starts_with("partition"))
        .collect();
    std::fs::remove_file(killed.join(names[0])).unwrap();
    std::fs::remove_file(killed.join("results.csv")).unwrap();
    std::fs::write(
        killed.join(format!(".{}.tmp-{DEAD_PID}-0", names[1])),
        "{ half",
    )
    .unwrap();
    std::fs::write(
        killed.join(format!("{}.tmp-{DEAD_PID}-1", names[1])),
        "{ older",
    )
    .unwrap();
    // A result of another configuration under a point's name is not taken as the point's.
    std::fs::copy(killed.join(names[3]), killed.join(names[2])).unwrap();
    let o = sweep(&[s(&m), "--out", s(&killed), "--jobs", "2"]);
    assert!(
        o.stdout.contains("4 points in") && o.stdout.contains("2 run, 2 up to date"),
        "{}",
        o.stdout
    );
    assert_eq!(files(&killed), expected);

    let csv = std::fs::read_to_string(whole.join("results.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(
        header.starts_with("point,file,partition.partitioner,queries.skew,batch_time_us.mean,"),
        "{header}"
    );
    for column in [
        "breakdown_us.dpu_kernel",
        "imbalance.queries",
        "answers_verified",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert_eq!(csv.lines().count(), 5);
    let jsonl = std::fs::read_to_string(whole.join("results.jsonl")).unwrap();
    let first: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(first["queries.skew"], 0.6);
    assert_eq!(first["answers_verified"], true);
    // The breakdown in the reports' order (stages, waiting, classes), not sorted by name.
    let stages: Vec<&str> = header
        .split(',')
        .filter_map(|c| c.strip_prefix("breakdown_us."))
        .collect();
    let keys = pimdes::experiments::run::breakdown_keys();
    let at = |k: &&str| keys.iter().position(|o| o == k).unwrap();
    assert!(stages.windows(2).all(|w| at(&w[0]) < at(&w[1])), "{header}");
    // Every cell is its point file's value exactly, to the last bit of a double.
    for line in jsonl.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        let file = whole.join(row["file"].as_str().unwrap());
        let point: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        for (column, cell) in row.as_object().unwrap() {
            let pointer = format!("/{}", column.replace('.', "/"));
            if let Some(value) = point.pointer(&pointer).filter(|_| cell.is_f64()) {
                assert_eq!(value.as_f64(), cell.as_f64(), "{column}");
            }
        }
    }
}

#[test]
fn list_lines_run_alone_in_any_order_make_the_same_files() {
    let d = dir("sweep_list");
    let m = manifest(&d, GRID);
    let (whole, listed) = (d.join("whole"), d.join("listed"));
    sweep(&[s(&m), "--out", s(&whole)]);
    let o = sweep(&[s(&m), "--out", s(&listed), "--list"]);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", o.stdout);
    for line in lines.iter().rev() {
        assert!(!line.contains(['\'', '"']), "plain words: {line}");
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words[0], "pimdes");
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_pimdes"))
            .args(&words[1..])
            .current_dir("/")
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    sweep(&["--collect", s(&listed)]);
    assert_eq!(files(&listed), files(&whole));
    // The table has what a latency-against-load figure needs.
    let csv = std::fs::read_to_string(whole.join("results.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for column in [
        "latency_us.p99",
        "queries_per_measured_batch.mean",
        "saturated",
    ] {
        assert!(header.contains(&column), "{header:?}");
    }
    // The sweeps compare equal point by point; a slower point is caught.
    let o = pimdes(&["compare", s(&whole), s(&listed)]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("over 4 points"), "{}", o.stdout);
    let name = "partition.partitioner=qdd-greedy,queries.skew=1.json";
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(listed.join(name)).unwrap()).unwrap();
    v["batch_time_us"]["mean"] = (v["batch_time_us"]["mean"].as_f64().unwrap() * 1.02).into();
    std::fs::write(listed.join(name), v.to_string()).unwrap();
    let o = pimdes(&["compare", s(&whole), s(&listed), "--rtol", "0.01"]);
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains(&format!("{name}: batch_time_us.mean")),
        "{}",
        o.stdout
    );
}

#[test]
fn points_kept_from_another_build_are_named() {
    let d = dir("sweep_other_build");
    let m = manifest(&d, GRID);
    let out = d.join("out");
    sweep(&[s(&m), "--out", s(&out), "--quiet"]);
    let o = sweep(&[s(&m), "--out", s(&out)]);
    assert!(!o.stderr.contains("another pimdes build"), "{}", o.stderr);
    let name = "partition.partitioner=qdd-greedy,queries.skew=1.json";
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join(name)).unwrap()).unwrap();
    v["version"] = "0.0.1".into();
    v["git_commit"] = "0123456789abcdef0123-dirty".into();
    std::fs::write(out.join(name), serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let o = sweep(&[s(&m), "--out", s(&out)]);
    assert!(o.stdout.contains("0 run, 4 up to date"), "{}", o.stdout);
    let said = format!("{name}: up to date (written by pimdes 0.0.1 at 0123456789ab-dirty)");
    assert!(o.stderr.contains(&said), "{}", o.stderr);
    let warning = "warning: 1 of the sweep's 4 points kept from another pimdes build (pimdes 0.0.1 at 0123456789ab-dirty; this is pimdes ";
    assert!(o.stderr.contains(warning), "{}", o.stderr);
    assert!(
        o.stderr.contains("sweep into a fresh --out"),
        "{}",
        o.stderr
    );
}

#[test]
fn compare_reads_only_a_sweeps_own_points_and_refuses_one_that_compares_nothing() {
    let d = dir("sweep_compare_points");
    let m = manifest(&d, GRID);
    let out = d.join("out");
    sweep(&[s(&m), "--out", s(&out)]);
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    let copy = |name: &str, edit: &dyn Fn(&mut Value, &Path)| {
        let to = d.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for p in index["points"].as_array().unwrap() {
            let f = p["file"].as_str().unwrap();
            std::fs::copy(out.join(f), to.join(f)).unwrap();
        }
        let mut i = index.clone();
        edit(&mut i, &to);
        std::fs::write(to.join("sweep.json"), i.to_string()).unwrap();
        to
    };
    // A point file named outside the directory.
    let outside = copy("outside", &|i, _| {
        i["points"][0]["file"] = "../x.json".into()
    });
    assert_bad(
        &pimdes(&["compare", s(&outside), s(&out)]),
        &["point 0's file `../x.json` is not a file name in the sweep's directory"],
    );
    // A point file holding another point's result.
    let swapped = copy("swapped", &|i, to| {
        let (f0, f1) = (
            i["points"][0]["file"].as_str(),
            i["points"][1]["file"].as_str(),
        );
        std::fs::copy(out.join(f1.unwrap()), to.join(f0.unwrap())).unwrap();
    });
    assert_bad(
        &pimdes(&["compare", s(&out), s(&swapped)]),
        &["the result's configuration is not point 0's"],
    );
    // Results cut down to their configuration: nothing compared is a refusal, not a pass.
    let gutted = copy("gutted", &|i, to| {
        for p in i["points"].as_array().unwrap() {
            let path = to.join(p["file"].as_str().unwrap());
            let r: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let kept = ["schema_version", "config", "version"].map(|k| (k, r[k].clone()));
            let mut cut: serde_json::Map<String, Value> =
                kept.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            // An empty object is still a run's result, with no metric in it.
            cut.insert("batch_time_us".into(), serde_json::json!({}));
            std::fs::write(&path, Value::Object(cut).to_string()).unwrap();
        }
    });
    assert_bad(
        &pimdes(&["compare", s(&gutted), s(&out)]),
        &["no metric was compared: BASE holds none outside `host`"],
    );
}

#[test]
fn repetitions_derive_seeds_and_a_point_runs_alone() {
    let d = dir("sweep_reps");
    let body = "command = \"partition\"\nrepetitions = 2\n[set]\nmachine.ranks = 1\nmachine.usable_dpus = 16\n";
    let m = manifest(&d, body);
    let out = d.join("out");
    let o = sweep(&[s(&m), "--out", s(&out), "--list"]);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(
        lines[0].starts_with("pimdes partition ") && lines[0].contains("--set seed=7 "),
        "{}",
        o.stdout
    );
    assert!(!lines[1].contains("--set seed=7 "), "{}", o.stdout);
    sweep(&[s(&m), "--out", s(&out), "--point", "1"]);
    let names: Vec<String> = files(&out).into_keys().collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("repetition=1,seed="), "{names:?}");
    let o = pimdes(&["sweep", "--collect", s(&out)]);
    assert_bad(&o, &["point 0 has no result yet", "--point 0"]);
    sweep(&[s(&m), "--out", s(&out)]);
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(
        csv.starts_with("point,file,repetition,seed,imbalance.data,"),
        "{csv}"
    );
    assert!(
        csv.contains("\n0,\"repetition=0,seed=7.json\",0,7,"),
        "{csv}"
    );
    // A `run` of point 0's configuration written in its place has the point's
    // configuration hash, but not the sweep's command: collecting it is refused.
    let point = out.join("repetition=0,seed=7.json");
    let (machine, workload) = (
        root("machines/paper-2rank.toml"),
        root("workloads/tiny.toml"),
    );
    let o = pimdes(&[
        "run",
        "--machine",
        &machine,
        "--workload",
        &workload,
        "--set",
        "machine.ranks=1",
        "--set",
        "machine.usable_dpus=16",
        "--set",
        "seed=7",
        "--quiet",
        "--out",
        s(&point),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let o = pimdes(&["sweep", "--collect", s(&out)]);
    assert_bad(
        &o,
        &["the result is of pimdes run, not of the sweep's `pimdes partition`"],
    );
    // A rerun does not take it for up to date (as the collect said, it reruns the point),
    // and then collects.
    let o = sweep(&[s(&m), "--out", s(&out)]);
    assert!(o.stdout.contains("1 run, 1 up to date"), "{}", o.stdout);
}

/// Manifests that must be refused, with what the error must say (besides the file name).
const BAD_MANIFESTS: [(&str, &[&str]); 27] = [
    // A key that would change the `--set` it becomes (it ran skew 1.2 for every point),
    // and one that looks like another key.
    (
        "command = \"run\"\n[grid]\n\"queries.skew=1.2 #\" = [0.6, 1.0]",
        &["key `queries.skew=1.2 #`", "is not a key"],
    ),
    (
        "command = \"run\"\n[grid]\n\"queries.skew\" = [0.6]\n\" queries.skew\" = [1.2]",
        &["key ` queries.skew`", "is not a key"],
    ),
    // A point's value the workload refuses: the manifest is named, not a `--set`.
    (
        "command = \"run\"\n[grid]\nqueries.skeww = [1.0]",
        &[
            "key `queries.skeww`",
            "point 0 (`queries.skeww=1.0`)",
            "skeww",
        ],
    ),
    (
        "command = \"run\"\n[grid]\nqueries.skew = [0.6, \"x\"]",
        &[
            "key `queries.skew`",
            "point 1 (`queries.skew=x`)",
            "invalid type",
        ],
    ),
    (
        "command = \"run\"\npartitioner = \"qdd-greedy\"\n[grid]\npartition.partitioner = [\"ccp-capped\"]",
        &["key `partition.partitioner`", "overridden"],
    ),
    ("command = \"run\"\ngrdi = 1", &["unknown field `grdi`"]),
    (
        "command = \"walk\"",
        &["key `command`", "unknown variant `walk`"],
    ),
    (
        "command = \"run\"\n[grid]\nqueries.skew = 0.6",
        &["key `grid.queries.skew`", "non-empty list"],
    ),
    (
        "command = \"run\"\n[zip]\na = [1, 2]\nb = [1]",
        &["key `zip.b`", "same length"],
    ),
    // A value listed twice (by value: 1 and 1.0 are one skew) would run one point twice.
    (
        "command = \"run\"\n[grid]\nqueries.skew = [0.6, 1, 1.0]",
        &[
            "key `grid.queries.skew`",
            "lists one value twice: 1 (value 1) and 1.0 (value 2)",
        ],
    ),
    (
        "command = \"run\"\n[zip]\nqueries.skew = [0.6, 1.2, 0.6]\npartition.alpha = [2, 3, 2]",
        &[
            "key `zip.partition.alpha`",
            "rows 0 and 2 alike (partition.alpha = 2, queries.skew = 0.6)",
        ],
    ),
    (
        "command = \"run\"\npartitioner = \"best\"",
        &["key `partitioner`", "unknown partitioner `best`"],
    ),
    (
        "command = \"run\"\nrepetitions = 2\n[grid]\nseed = [1, 2]",
        &["key `seed`", "repetitions"],
    ),
    (
        "command = \"run\"\n[set]\nqueries.skew = 0.6\n[grid]\nqueries.skew = [1.0]",
        &["key `queries.skew`", "more than once"],
    ),
    (
        "command = \"run\"\n[ranges]\ndeviation.base_partition = [1]",
        &["key `ranges.deviation.base_partition`", "[first, last]"],
    ),
    (
        "command = \"run\"\n[ranges]\ndeviation.base_partition = [5, 1]",
        &["key `ranges.deviation.base_partition`", "first <= last"],
    ),
    (
        "command = \"run\"\n[ranges]\nseed = [-9223372036854775808, 9223372036854775807]",
        &["key `ranges.seed`", "at most 100000"],
    ),
    (
        "command = \"run\"\n[ranges]\nseed = [0, 99_999]\n[grid]\nqueries.skew = [0.6, 1.0]",
        &["more than 100000 points"],
    ),
    (
        "command = \"run\"\nrepetitions = 0",
        &[
            "key `repetitions`",
            "expected a whole number from 1 to 4294967295",
        ],
    ),
    (
        "command = \"run\"\nrepetitions = -1",
        &[
            "key `repetitions`",
            "expected a whole number from 1 to 4294967295",
        ],
    ),
    (
        "command = \"run\"\n[set]\nqueries.skew = 1.0\nrepetitions = 2",
        &[
            "key `set.repetitions`",
            "a key of the manifest, not a `--set`",
            "move it above the first table",
        ],
    ),
    (
        "command = \"run\"\n[set]\nmachine = 3",
        &["key `set.machine`", "a key of the manifest"],
    ),
    (
        "command = \"run\"\n[grid]\nbatches.warmup = [99999]\nbatches.measured = [5]",
        &["point 0 (`batches.measured=5`, `batches.warmup=99999`): warmup + measured"],
    ),
    (
        "[set]\nqueries.skew = 1.0\ncommand = \"run\"",
        &["key `set.command`", "move it above the first table"],
    ),
    (
        "command = \"run\"\n[grid]\npartition.partitioner = [\"ccp-capped\", \"nope\"]",
        &[
            "key `partition.partitioner`: point 1 (`partition.partitioner=nope`)",
            "unknown partitioner `nope`",
        ],
    ),
    (
        // serde would fill a figure's keys from an array by position.
        "command = \"run\"\nplot = [[\"tp\", \"T\", \"queries.skew\", [\"throughput_queries_per_s\"]]]\n[grid]\nqueries.skew = [0.6]",
        &[
            "key `plot[0]`",
            "is a table of keys, given an array; write each as `[[plot]]`",
        ],
    ),
    (
        "command = \"run\"\n[ranges]\nseed = [0, 3]\n[grid]\nseed = [1]",
        &[
            "key `seed`",
            "more than once among `set`, `grid`, `ranges` and `zip`",
        ],
    ),
];

#[test]
fn bad_manifests_name_the_file_and_key() {
    let d = dir("sweep_bad");
    for (body, needles) in BAD_MANIFESTS {
        let m = manifest(&d, body);
        let o = pimdes(&["sweep", s(&m), "--out", s(&d.join("out"))]);
        let mut all = vec!["manifest.toml"];
        all.extend(needles);
        assert_bad(&o, &all);
    }
    // A machine or workload that is not a file: the manifest and its key are named.
    let workload = root("workloads/tiny.toml");
    for (machine, needle) in [("", "is not a file"), ("nosuch.toml", "cannot be read")] {
        let m = d.join("paths.toml");
        let text = format!("machine = {machine:?}\nworkload = {workload:?}\ncommand = \"run\"\n");
        std::fs::write(&m, text).unwrap();
        let o = pimdes(&["sweep", s(&m), "--out", s(&d.join("out"))]);
        assert_bad(&o, &["paths.toml: key `machine`", needle]);
    }
}

#[test]
fn bad_sweep_arguments_name_the_problem() {
    let d = dir("sweep_bad_args");
    let o = pimdes(&["sweep", s(&d.join("none.toml")), "--out", s(&d.join("out"))]);
    assert_bad(&o, &["none.toml", "cannot read"]);
    let m = manifest(&d, "command = \"partition\"");
    assert_bad(
        &pimdes(&["sweep", s(&m), "--out", s(&d.join("out")), "--point", "1"]),
        &["--point", "points 0 to 0"],
    );
    assert_bad(
        &pimdes(&["sweep", "--collect", s(&d)]),
        &["sweep.json", "sweep directory"],
    );
    // Collecting runs nothing, so a thread count is a mistake, not something to ignore.
    assert_bad(
        &pimdes(&["sweep", "--collect", s(&d), "--jobs", "4"]),
        &["--collect", "--jobs"],
    );
}

/// Two data sizes on 16 DPUs with MRAM cut so that the larger does not fit.
const REFUSING: &str = r#"command = "run"
[set]
machine.ranks = 1
machine.usable_dpus = 16
machine.dpu.mram_size_bytes = 1_048_576
batches.warmup = 1
batches.measured = 2
[grid]
data.pairs = [100_000, 1_500_000]
"#;

#[test]
fn a_refused_point_stops_the_sweep_unless_the_manifest_records_it() {
    let d = dir("sweep_refused_stops");
    let m = manifest(&d, REFUSING);
    let o = pimdes(&["sweep", s(&m), "--out", s(&d.join("out"))]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr.contains("error: ")
            && o.stderr.contains("manifest.toml: key `machine.dpu.mram_size_bytes`: point 1 (`data.pairs=1500000`, [set] `machine.dpu.mram_size_bytes=1048576`, [set] `machine.usable_dpus=16`, [set] `machine.ranks=1`): the data does not fit in MRAM"),
        "{}",
        o.stderr
    );
    // The point is named before the error (with `--jobs`, others run beside it).
    assert!(
        o.stderr
            .contains("pimdes sweep: point 1, data.pairs=1500000.json: failed\nerror: "),
        "{}",
        o.stderr
    );

    let d = dir("sweep_refused_recorded");
    let m = manifest(&d, &format!("record_refused = true\n{REFUSING}"));
    let out = d.join("out");
    let o = sweep(&[s(&m), "--out", s(&out)]);
    assert!(
        o.stdout.contains("1 run, 1 refused, 0 up to date"),
        "{}",
        o.stdout
    );
    assert!(o.stderr.contains("refused ("), "{}", o.stderr);
    let refused: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("data.pairs=1500000.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(refused["refused"]["key"], "dpu.mram_size_bytes");
    assert!(
        refused["refused"]["reason"]
            .as_str()
            .unwrap()
            .contains("does not fit in MRAM")
    );
    let hash = pimdes::experiments::sweep::config_hash(&refused["config"]);
    assert_eq!(refused["config_fnv1a64"], hash.as_str());
    // Collected with its reason and no numbers; a rerun finds it up to date.
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with(",refused.reason"), "{header}");
    let row = csv.lines().nth(2).unwrap();
    assert!(
        row.contains(",,") && row.contains("does not fit in MRAM"),
        "{row}"
    );
    assert!(csv.lines().nth(1).unwrap().ends_with(",true,"), "{csv}");
    let o = sweep(&[s(&m), "--out", s(&out)]);
    assert!(o.stdout.contains("0 run, 2 up to date"), "{}", o.stdout);
    // Its --list lines run each point through the sweep, which records the refusal, so
    // that they collect into the same tables.
    let listed = d.join("listed");
    let o = sweep(&[s(&m), "--out", s(&listed), "--list"]);
    for line in o.stdout.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words[..2], ["pimdes", "sweep"], "{line}");
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_pimdes"))
            .args(&words[1..])
            .current_dir("/")
            .output()
            .unwrap();
        assert!(run.status.success(), "{line}: {run:?}");
    }
    sweep(&["--collect", s(&listed)]);
    let table = |dir: &Path| std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert_eq!(table(&listed), table(&out));
    recorded_refusals_compare(&d, &out, &refused);
}

/// How `compare` treats the refused point `refused` of the sweep in `out`: against a run of
/// its configuration, another command's result, itself, another refusal, and in sweeps.
fn recorded_refusals_compare(d: &Path, out: &Path, refused: &Value) {
    // A refused point against a run result of its configuration is not a silent pass: the
    // point changed (exit 1), and the line says how.
    let mut ran: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("data.pairs=100000.json")).unwrap())
            .unwrap();
    ran["config"] = refused["config"].clone();
    let ran_path = d.join("ran.json");
    std::fs::write(&ran_path, ran.to_string()).unwrap();
    let o = pimdes(&[
        "compare",
        s(&out.join("data.pairs=1500000.json")),
        s(&ran_path),
    ]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    let reason = refused["refused"]["reason"].as_str().unwrap();
    let line = o
        .stdout
        .lines()
        .find(|l| l.contains("refused.reason"))
        .unwrap_or("");
    assert!(
        line.contains(&format!("{reason:?}")) && line.contains("\"(ran)\""),
        "{}",
        o.stdout
    );
    let refused_file = out.join("data.pairs=1500000.json");
    let o = pimdes(&["compare", s(&ran_path), s(&refused_file)]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    // A metric is asked of the side that ran, whichever order the files come in; so in
    // sweeps of that one point.
    for (a, b) in [(&refused_file, &ran_path), (&ran_path, &refused_file)] {
        let o = pimdes(&["compare", s(a), s(b), "--metric", "batch_time_us"]);
        assert_eq!(o.code, Some(1), "{}", o.stderr);
    }
    let mut index: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    index["points"] = Value::Array(vec![index["points"][1].clone()]);
    let name = "data.pairs=1500000.json";
    let one = |dir: &str, result: &Path| {
        let to = d.join(dir);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::write(to.join("sweep.json"), index.to_string()).unwrap();
        std::fs::copy(result, to.join(name)).unwrap();
        to
    };
    let (one_refused, one_ran) = (one("one_refused", &refused_file), one("one_ran", &ran_path));
    for (a, b) in [(&one_refused, &one_ran), (&one_ran, &one_refused)] {
        let o = pimdes(&["compare", s(a), s(b), "--metric", "batch_time_us"]);
        assert_eq!(o.code, Some(1), "{}", o.stderr);
    }
    // Against another command's result, a refused point is not a change but bad input.
    let bench = pimdes(&["microbench", "arithmetic", "--quiet", "--json"]);
    let bench_path = d.join("bench.json");
    std::fs::write(&bench_path, bench.stdout).unwrap();
    let o = pimdes(&["compare", s(&refused_file), s(&bench_path)]);
    assert_bad(
        &o,
        &["different commands (a refused point and pimdes microbench)"],
    );
    // Two refusals compare by their key and reason: another DPU or size is a change.
    let refused_path = out.join("data.pairs=1500000.json");
    let o = pimdes(&["compare", s(&refused_path), s(&refused_path)]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout
            .contains("2 metrics over 1 point compared, 0 moved"),
        "{}",
        o.stdout
    );
    let mut other = refused.clone();
    other["refused"]["reason"] = "the data does not fit in MRAM: DPU 3 needs more".into();
    let other_path = d.join("other-refusal.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let o = pimdes(&["compare", s(&refused_path), s(&other_path)]);
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("refused.reason") && o.stdout.contains("OUTSIDE"),
        "{}",
        o.stdout
    );
    // A metric is asked of the measured points: the refused one has none and is skipped,
    // while a metric no measured point has is still a mistake.
    let o = pimdes(&["compare", s(out), s(out), "--metric", "batch_time_us.mean"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("1 metric over 2 points"), "{}", o.stdout);
    let o = pimdes(&["compare", s(out), s(out), "--metric", "batch_time_us.meen"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("is not a metric of any measured point of"),
        "{}",
        o.stderr
    );
    // An index without points compares nothing: refused, not passed.
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let mut index: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    index["points"] = Value::Array(Vec::new());
    std::fs::write(empty.join("sweep.json"), index.to_string()).unwrap();
    let o = pimdes(&["compare", s(&empty), s(&empty)]);
    assert_bad(&o, &["the sweeps hold no point: nothing to compare"]);
}

#[test]
fn a_sweep_writes_only_into_a_directory_of_its_own() {
    let d = dir("sweep_own_dir");
    let m = manifest(&d, "command = \"partition\"");
    let mine = |path: &Path| {
        std::fs::write(path, "mine").unwrap();
        path.to_owned()
    };
    // A file, a directory with other files, a directory with another sweep.json: refused,
    // and left as they were.
    let file = mine(&d.join("file.json"));
    std::fs::create_dir_all(d.join("notes")).unwrap();
    let notes = mine(&d.join("notes/notes.txt"));
    std::fs::create_dir_all(d.join("foreign")).unwrap();
    let foreign = mine(&d.join("foreign/sweep.json"));
    for (out, needle) in [
        (d.join("file.json"), "is a file, not a directory"),
        (d.join("notes"), "not empty and holds no sweep.json"),
        (
            d.join("foreign"),
            "holds a sweep.json that is not a sweep's",
        ),
    ] {
        assert_bad(
            &pimdes(&["sweep", s(&m), "--out", s(&out)]),
            &["--out", needle],
        );
    }
    for path in [&file, &notes, &foreign] {
        assert_eq!(std::fs::read_to_string(path).unwrap(), "mine", "{path:?}");
    }
    // In its own directory a sweep leaves a file that only looks like a temporary one, and
    // a huge --jobs starts no more threads than there are points.
    let out = d.join("out");
    sweep(&[s(&m), "--out", s(&out)]);
    let lookalikes = [
        "results.csv.tmp-keep",
        "results.csv.tmp-2024-01-01",
        "point.json.tmp-1",
    ]
    .map(|name| mine(&out.join(name)));
    sweep(&[s(&m), "--out", s(&out), "--jobs", "1000000"]);
    for lookalike in lookalikes {
        assert_eq!(std::fs::read_to_string(lookalike).unwrap(), "mine");
    }
    // A symbolic link to nothing is no place for the sweep's directory.
    let dangling = d.join("dangling");
    std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
    assert_bad(
        &pimdes(&["sweep", s(&m), "--out", s(&dangling)]),
        &["--out", "is a symbolic link to nothing"],
    );
    // Another manifest's sweep (another command here) does not replace this one's index.
    let index = std::fs::read_to_string(out.join("sweep.json")).unwrap();
    let other = d.join("other.toml");
    let text = std::fs::read_to_string(&m).unwrap();
    std::fs::write(&other, text.replace("\"partition\"", "\"run\"")).unwrap();
    assert_bad(
        &pimdes(&["sweep", s(&other), "--out", s(&out), "--list"]),
        &[
            "--out",
            "holds a sweep of another command",
            "`partition` over []",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(out.join("sweep.json")).unwrap(),
        index
    );
    // Nor does another manifest of the same shape (as two experiments sweeping the same
    // parameters); the same manifest, edited, still sweeps into its directory.
    let twin = d.join("twin.toml");
    std::fs::copy(&m, &twin).unwrap();
    assert_bad(
        &pimdes(&["sweep", s(&twin), "--out", s(&out)]),
        &[
            "--out",
            "holds the sweep of manifest sweep_own_dir/manifest.toml, and this is sweep_own_dir/twin.toml",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(out.join("sweep.json")).unwrap(),
        index
    );
    std::fs::write(&m, format!("{text}[set]\nqueries.skew = 0.8\n")).unwrap();
    sweep(&[s(&m), "--out", s(&out)]);
}

#[test]
fn a_sweep_killed_while_writing_its_index_can_be_rerun() {
    // Killed before its index was in place, a sweep leaves a directory holding only the
    // index's temporary file: not a user's directory, so the rerun takes it and clears it.
    let d = dir("sweep_killed_index");
    let m = manifest(&d, "command = \"partition\"");
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join(format!(".sweep.json.tmp-{DEAD_PID}-0")),
        "{\"format\": 1, \"comm",
    )
    .unwrap();
    let o = sweep(&[s(&m), "--out", s(&out)]);
    assert!(o.stdout.contains("1 run, 0 up to date"), "{}", o.stdout);
    assert!(!out.join(format!(".sweep.json.tmp-{DEAD_PID}-0")).exists());
    // A user's file beside it still makes the directory someone else's.
    let d = dir("sweep_killed_index_and_notes");
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join(format!(".sweep.json.tmp-{DEAD_PID}-0")), "").unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let o = pimdes(&["sweep", s(&m), "--out", s(&out)]);
    assert_bad(&o, &["is not empty and holds no sweep.json"]);
}

#[test]
fn an_out_directory_that_cannot_be_made_is_a_bad_flag() {
    let d = dir("sweep_out_uncreatable");
    let m = manifest(&d, "command = \"partition\"");
    // Nothing can be created in /proc (Linux), whatever the user's rights.
    let o = pimdes(&["sweep", s(&m), "--out", "/proc/pimdes-sweep-test"]);
    assert_bad(&o, &["--out: cannot create /proc/pimdes-sweep-test"]);
    // A name too long for the file system fails after its parents were made: they go too.
    let out = d.join("new").join("parent").join("x".repeat(300));
    let o = pimdes(&["sweep", s(&m), "--out", s(&out)]);
    assert_bad(&o, &["--out: cannot create"]);
    assert!(
        !d.join("new").exists(),
        "the parents made for it are removed"
    );
}

/// A point whose file cannot be replaced (here a directory in its place) is refused before
/// it runs, as bad input (exit 2), not after its simulation as a failed write (exit 1).
#[test]
fn a_point_file_that_cannot_be_replaced_is_refused_before_the_point_runs() {
    let d = dir("sweep_point_blocked");
    let m = manifest(&d, GRID);
    let out = d.join("out");
    let listed = pimdes(&["sweep", s(&m), "--out", s(&out), "--list"]);
    let first = listed.stdout.lines().next().expect("a listed point");
    let file = first.rsplit_once("--out ").expect("its --out").1;
    std::fs::create_dir_all(file).unwrap();
    let o = pimdes(&["sweep", s(&m), "--out", s(&out)]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    let refused = format!("error: the sweep's file {file}: exists and is a directory");
    assert!(o.stderr.contains(&refused), "{}", o.stderr);
}

/// A table or figure that the collection could not replace is refused before any point
/// runs: no point's file is written (the collection used to find it after every point
/// had been simulated).
#[test]
fn a_table_that_cannot_be_replaced_is_refused_before_any_point_runs() {
    let d = dir("sweep_table_blocked");
    let m = manifest(&d, GRID);
    let out = d.join("out");
    let listed = pimdes(&["sweep", s(&m), "--out", s(&out), "--list"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    std::fs::create_dir_all(out.join("results.csv")).unwrap();
    let o = pimdes(&["sweep", s(&m), "--out", s(&out)]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    let refused = format!(
        "error: the sweep's file {}: exists and is a directory",
        out.join("results.csv").display()
    );
    assert!(o.stderr.contains(&refused), "{}", o.stderr);
    let points = std::fs::read_dir(&out).unwrap().filter(|e| {
        let name = e.as_ref().unwrap().file_name();
        name.to_string_lossy().ends_with(".json") && name != "sweep.json"
    });
    assert_eq!(points.count(), 0, "no point ran");
}

/// A child process killed when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running pimdes's temporary files are being written, not left behind: a whole sweep
/// leaves a `--point` job's alone (but not a file named after a process id that another
/// program now has), and a `--point` job starts beside another that is writing the index.
/// (Processes are looked up in Linux's /proc.)
#[cfg(target_os = "linux")]
#[test]
fn a_running_sweeps_temporary_files_are_left_alone() {
    use std::process::{Command, Stdio};
    // A pimdes with long work, stopped at once so that it takes no CPU; and another program.
    let busy = Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args(["soak", "--cases", "100000", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pimdes = Child(busy);
    let pid = pimdes.0.id();
    let stop = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status();
    assert!(stop.unwrap().success());
    let other = Child(Command::new("sleep").arg("3600").spawn().unwrap());
    let d = dir("sweep_live_temporaries");
    let m = manifest(&d, "command = \"partition\"");
    let out = d.join("out");
    sweep(&[s(&m), "--out", s(&out)]);
    let name = |pid: u32| out.join(format!(".point.json.tmp-{pid}-0"));
    for file in [name(pid), name(other.0.id()), name(DEAD_PID)] {
        std::fs::write(file, "{ half").unwrap();
    }
    sweep(&[s(&m), "--out", s(&out)]);
    assert!(name(pid).exists(), "a running pimdes's file is kept");
    assert!(
        !name(other.0.id()).exists(),
        "another program's process id is no writer"
    );
    assert!(
        !name(DEAD_PID).exists(),
        "a killed process's file is removed"
    );

    let starting = d.join("starting");
    std::fs::create_dir_all(&starting).unwrap();
    std::fs::write(starting.join(format!(".sweep.json.tmp-{pid}-0")), "").unwrap();
    sweep(&[s(&m), "--out", s(&starting), "--point", "0"]);
    assert!(starting.join("point.json").exists());
}

/// A rerun that replaces the index takes the old tables and figures with it, so that a
/// rerun that then fails leaves nothing `pimdes plot` would redraw from the old points.
#[test]
fn a_replaced_index_takes_its_tables_and_figures_along() {
    let d = dir("sweep_stale_tables");
    let plot = "[[plot]]\nname = \"a\"\ntitle = \"t\"\ny_label = \"y\"\nx = \"data.pairs\"\ny = [\"batch_time_us.mean\"]\n";
    let fitting = REFUSING.replace("1_500_000", "200_000");
    let m = manifest(&d, &format!("{fitting}{plot}"));
    let out = d.join("out");
    sweep(&[s(&m), "--out", s(&out)]);
    let derived = ["results.csv", "results.jsonl", "a.svg", "a.md"];
    for name in derived {
        assert!(out.join(name).exists(), "{name}");
    }
    // Unchanged, a rerun that does not collect (--list) keeps them, also when the index is
    // from before indexes named their manifest.
    let kept = || derived.iter().all(|name| out.join(name).exists());
    sweep(&[s(&m), "--out", s(&out), "--list"]);
    assert!(kept());
    let index = std::fs::read_to_string(out.join("sweep.json")).unwrap();
    let unnamed: String = (index.lines())
        .filter(|l| !l.contains("\"manifest\":"))
        .map(|l| l.to_owned() + "\n")
        .collect();
    assert_ne!(unnamed, index);
    std::fs::write(out.join("sweep.json"), unnamed).unwrap();
    sweep(&[s(&m), "--out", s(&out), "--list"]);
    assert!(kept());
    // A figure the index names outside the directory is not removed with it.
    let victim = d.join("victim.md");
    std::fs::write(&victim, "mine").unwrap();
    let index = std::fs::read_to_string(out.join("sweep.json")).unwrap();
    let outside = index.replace("\"name\": \"a\"", "\"name\": \"../victim\"");
    assert_ne!(outside, index);
    std::fs::write(out.join("sweep.json"), outside).unwrap();
    sweep(&[s(&m), "--out", s(&out), "--list"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
    sweep(&[s(&m), "--out", s(&out)]);
    assert!(kept());
    // Point 1 now does not fit in MRAM: the sweep fails, and nothing of the old points'
    // tables and figures is left to plot.
    manifest(&d, &format!("{REFUSING}{plot}"));
    assert_eq!(pimdes(&["sweep", s(&m), "--out", s(&out)]).code, Some(2));
    for name in derived {
        assert!(!out.join(name).exists(), "{name}");
    }
    assert_bad(
        &pimdes(&["plot", s(&out)]),
        &["results.jsonl", "pimdes sweep --collect DIR"],
    );
}

#[test]
fn an_up_to_date_sweep_rewrites_nothing_and_a_linked_table_is_refused() {
    let d = dir("sweep_untouched");
    let m = manifest(&d, GRID);
    let out = d.join("out");
    sweep(&[s(&m), "--out", s(&out)]);
    let stamps = || -> BTreeMap<String, std::time::SystemTime> {
        let entries = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap());
        entries
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().modified().unwrap(),
                )
            })
            .collect()
    };
    let before = stamps();
    assert!(before.contains_key("sweep.json") && before.contains_key("results.csv"));
    // Up to date, the sweep writes no file (so it also runs in a directory it may only read).
    let o = sweep(&[s(&m), "--out", s(&out)]);
    assert!(o.stdout.contains("0 run, 4 up to date"), "{}", o.stdout);
    assert_eq!(stamps(), before);
    // A table that is a link is refused before anything is written, as a point's file is.
    let csv = out.join("results.csv");
    std::fs::remove_file(&csv).unwrap();
    std::os::unix::fs::symlink(d.join("elsewhere.csv"), &csv).unwrap();
    let o = pimdes(&["sweep", "--collect", s(&out)]);
    assert_bad(&o, &["results.csv", "is a symbolic link"]);
    assert!(!d.join("elsewhere.csv").exists());
}

#[test]
fn a_warning_every_point_has_is_said_once_and_counted() {
    let d = dir("sweep_same_warning");
    // Capped CCP reads no alpha: its two points warn alike.
    let body = GRID.replace("[set]\n", "[set]\npartition.alpha = 4\n");
    let m = manifest(&d, &body);
    let o = sweep(&[s(&m), "--out", s(&d.join("out")), "--jobs", "2"]);
    let said = "--set partition.alpha=4 had no effect: partitioner ccp-capped";
    assert_eq!(o.stderr.matches(said).count(), 1, "{}", o.stderr);
    let counted = "warning above came for 1 more point too: ";
    assert!(o.stderr.contains(counted), "{}", o.stderr);
}
