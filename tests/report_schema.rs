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
        assert_eq!(r["schema_version"], 1, "{command}");
        let hash = pimdes::experiments::sweep::config_hash(&r["config"]);
        assert_eq!(r["config_fnv1a64"], hash.as_str(), "{command}");
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
