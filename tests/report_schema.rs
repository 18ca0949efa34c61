//! What scripts rely on in every JSON report: a schema version, the hash of the effective
//! configuration (the one sweeps use), the command line, and every measured batch's time.

mod common;

use common::pimdes;
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let o = pimdes(args);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

const INPUTS: [&str; 4] = [
    "--machine",
    "machines/paper-2rank.toml",
    "--workload",
    "workloads/tiny.toml",
];

#[test]
fn reports_carry_their_schema_configuration_hash_and_command_line() {
    for command in ["partition", "run"] {
        let args = [&[command][..], &INPUTS, &["--json", "--quiet"]].concat();
        let r = json(&args);
        assert_eq!(
            r["schema_version"],
            pimdes::experiments::REPORT_SCHEMA_VERSION,
            "{command}"
        );
        assert_eq!(pimdes::experiments::REPORT_SCHEMA_VERSION, 4);
        let hash = pimdes::experiments::sweep::config_hash(&r["config"]);
        assert_eq!(r["config_fnv1a64"], hash.as_str(), "{command}");
        // The same value written two ways is the same configuration.
        let hash_of = |skew: &str| {
            let set = format!("queries.skew={skew}");
            let args = [
                &[command][..],
                &INPUTS,
                &["--set", &set, "--json", "--quiet"],
            ]
            .concat();
            json(&args)["config_fnv1a64"].clone()
        };
        assert_eq!(hash_of("-0.0"), hash_of("0"), "{command}");
        let line = r["command_line"].as_str().unwrap();
        assert!(
            line.starts_with(&format!(
                "pimdes {command} --machine machines/paper-2rank.toml"
            )),
            "{line}"
        );
    }
}

#[test]
fn a_run_keeps_every_measured_batch_time() {
    let args = [&["run"][..], &INPUTS, &["--json", "--quiet"]].concat();
    let r = json(&args);
    let times: Vec<f64> = r["batch_times_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    assert_eq!(times.len() as u64, r["measured_batches"].as_u64().unwrap());
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let reported = r["batch_time_us"]["mean"].as_f64().unwrap();
    assert!(
        (mean - reported).abs() <= 1e-9 * reported,
        "{mean} vs {reported}"
    );
}

// ---- Schemas: generated from the types, committed in docs/schema/, met by real outputs ----

#[test]
fn committed_schemas_are_the_generated_ones() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema");
    for name in pimdes::experiments::schema::NAMES {
        let o = pimdes(&["schema", name]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let path = dir.join(format!("{name}.json"));
        if std::env::var_os("PIMDES_BLESS").is_some() {
            std::fs::write(&path, &o.stdout).unwrap();
        }
        let committed = std::fs::read_to_string(&path).expect("docs/schema file exists");
        assert!(
            committed == o.stdout,
            "docs/schema/{name}.json differs from `pimdes schema {name}`; refresh it with PIMDES_BLESS=1 cargo test --profile checked --test report_schema"
        );
    }
}

fn schema(name: &str) -> Value {
    serde_json::from_str(&pimdes::experiments::schema::schema(name).unwrap()).unwrap()
}

/// Each kind of report with a command that prints one.
fn report_commands() -> Vec<(&'static str, Vec<&'static str>)> {
    let on_inputs = |command: &'static str, extra: &[&'static str]| {
        [&[command][..], &INPUTS, extra, &["--json", "--quiet"]].concat()
    };
    let pim_tree = vec![
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/pim-tree-get.toml",
        "--set",
        "data.pairs=60000",
        "--set",
        "queries.batch_size=4000",
        "--json",
        "--quiet",
    ];
    let pair_granularity = [
        "--partitioner",
        "query-balanced",
        "--set",
        "partition.granularity=pair",
    ];
    let sensitivity = [
        "--keys",
        "transfer.host_cap_dpu_cpu_gb_per_s",
        "--factors",
        "2",
        "--set",
        "machine.ranks=1",
        "--set",
        "machine.usable_dpus=16",
    ];
    vec![
        ("run", on_inputs("run", &[])),
        ("run", pim_tree),
        ("partition", on_inputs("partition", &[])),
        // Every suite's records.
        ("microbench", vec!["microbench", "all", "--json", "--quiet"]),
        ("partition", on_inputs("partition", &pair_granularity)),
        ("sensitivity", on_inputs("sensitivity", &sensitivity)),
    ]
}

#[test]
fn every_report_meets_its_schema() {
    for (name, args) in report_commands() {
        let report = json(&args);
        let errors = validate(&schema(name), &report);
        assert!(errors.is_empty(), "{name}: {errors:#?}");
        if name == "run" {
            // A manifest's figures may name only these (checked before a sweep runs).
            let keys = pimdes::experiments::run::breakdown_keys();
            for key in report["breakdown_us"].as_object().unwrap().keys() {
                assert!(
                    keys.contains(&key.as_str()),
                    "breakdown_us.{key}: not in {keys:?}"
                );
            }
        }
        let commit = &report["git_commit"];
        assert!(commit.is_null() || commit.is_string(), "{name}: {commit}");
    }
}

#[test]
fn every_shipped_input_file_meets_its_schema() {
    for (name, dir) in [("machine", "machines"), ("workload", "workloads")] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let value: Value = toml::from_str(&text).unwrap();
            let errors = validate(&schema(name), &value);
            assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        }
    }
}

#[test]
fn the_schemas_reject_what_pimdes_would_not_write_or_read() {
    let mut run = json(&[&["run"][..], &INPUTS, &["--json", "--quiet"]].concat());
    let run_schema = schema("run");
    run.as_object_mut().unwrap().remove("imbalance");
    assert!(
        !validate(&run_schema, &run).is_empty(),
        "B+-Forest keys are required"
    );
    run["imbalance"] = Value::from("high");
    assert!(
        !validate(&run_schema, &run).is_empty(),
        "a string for an object"
    );
    let mut machine: Value = toml::from_str(include_str!("../machines/paper-2rank.toml")).unwrap();
    machine["dpu"]["mram_size_bytez"] = Value::from(1);
    assert!(
        !validate(&schema("machine"), &machine).is_empty(),
        "unknown key"
    );
    // The bounds pimdes checks: an empty name, no rank, no measured batch.
    let mut machine: Value = toml::from_str(include_str!("../machines/paper-2rank.toml")).unwrap();
    let errors = |m: &Value| validate(&schema("machine"), m);
    machine["name"] = Value::from("");
    assert_eq!(errors(&machine), ["$.name: \"\" is shorter than 1"]);
    machine["name"] = Value::from("m");
    machine["ranks"] = Value::from(0);
    assert_eq!(errors(&machine), ["$.ranks: 0 is below 1"]);
    let mut workload: Value = toml::from_str(include_str!("../workloads/tiny.toml")).unwrap();
    workload["batches"]["measured"] = Value::from(0);
    let errors = validate(&schema("workload"), &workload);
    assert_eq!(errors, ["$.batches.measured: 0 is below 1"]);
}

/// The violations of `value` against `schema`, as text (pimdes's own checker, which treats
/// a rule it lacks as a violation, so a test cannot pass by a rule being ignored).
fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let found = pimdes::experiments::validate::validate(schema, value);
    found.iter().map(ToString::to_string).collect()
}

/// "The same field means the same type in every command": a top-level field of the run,
/// partition and microbench reports has one type wherever it appears; an object may be
/// another's subset (run's `mram` has three of partition's four keys). `config` is each
/// command's own effective configuration and differs by design.
#[test]
fn a_field_name_has_one_type_in_every_report() {
    use std::collections::BTreeMap;
    let mut seen: BTreeMap<String, (Value, Value, &str)> = BTreeMap::new();
    let mut clashes = Vec::new();
    for name in ["run", "partition", "microbench", "sensitivity"] {
        let root = schema(name);
        for (key, sub) in root["properties"].as_object().unwrap() {
            if key == "config" {
                continue;
            }
            match seen.get(key) {
                Some((other_root, other, first)) => {
                    if !compatible(other_root, other, &root, sub) {
                        clashes.push(format!("`{key}` differs between {first} and {name}"));
                    }
                }
                None => {
                    seen.insert(key.clone(), (root.clone(), sub.clone(), name));
                }
            }
        }
    }
    assert!(clashes.is_empty(), "{clashes:#?}");
    assert!(
        seen.len() > 20,
        "the walk saw the reports' fields ({})",
        seen.len()
    );
}

/// Whether two schemas (each with its root, for `$ref`s) describe the same type, or objects
/// one of which has a subset of the other's keys with the same types.
fn compatible(ra: &Value, a: &Value, rb: &Value, b: &Value) -> bool {
    let resolve = |root: &Value, s: &Value| -> Value {
        match s["$ref"].as_str() {
            Some(r) => root["$defs"][r.trim_start_matches("#/$defs/")].clone(),
            None => s.clone(),
        }
    };
    let (a, b) = (resolve(ra, a), resolve(rb, b));
    match (a["properties"].as_object(), b["properties"].as_object()) {
        (Some(pa), Some(pb)) => {
            let (small, large, rs, rl) = if pa.len() <= pb.len() {
                (pa, pb, ra, rb)
            } else {
                (pb, pa, rb, ra)
            };
            small
                .iter()
                .all(|(k, v)| large.get(k).is_some_and(|w| compatible(rs, v, rl, w)))
        }
        _ => {
            let shape = |s: &Value| (s["type"].clone(), s["items"]["type"].clone());
            shape(&a) == shape(&b)
        }
    }
}

/// A sweep directory's index and a refused point's file meet their schemas.
#[test]
fn sweep_files_meet_their_schemas() {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("schema_sweep");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let root = |f: &str| format!("{}/{f}", env!("CARGO_MANIFEST_DIR"));
    let manifest = d.join("m.toml");
    std::fs::write(
        &manifest,
        format!(
            "machine = {:?}\nworkload = {:?}\ncommand = \"run\"\nrecord_refused = true\n[set]\nmachine.ranks = 1\nmachine.usable_dpus = 16\nmachine.dpu.mram_size_bytes = 1_048_576\nbatches.warmup = 1\nbatches.measured = 2\n[grid]\ndata.pairs = [100_000, 1_500_000]\n",
            root("machines/paper-2rank.toml"),
            root("workloads/tiny.toml")
        ),
    )
    .unwrap();
    let out = d.join("out");
    let o = pimdes(&[
        "sweep",
        manifest.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let read = |f: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(out.join(f)).unwrap()).unwrap()
    };
    for (name, file) in [
        ("sweep-index", "sweep.json"),
        ("sweep-refused", "data.pairs=1500000.json"),
        ("run", "data.pairs=100000.json"),
    ] {
        let errors = validate(&schema(name), &read(file));
        assert!(errors.is_empty(), "{file}: {errors:#?}");
    }
}
