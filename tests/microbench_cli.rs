//! `pimdes microbench NAME --json` prints one JSON report whose records have exactly the
//! fields the issue lists, each naming its suite, beside the effective machine; without
//! `--json`, tables for people.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args(args)
        // A slow build may run long enough for a progress line; this test checks the output.
        .arg("--quiet")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

fn keys(suite: &str, machine: Option<&str>) -> (usize, Vec<String>) {
    let mut args = vec!["microbench", suite, "--json"];
    if let Some(m) = machine {
        args.extend(["--machine", m]);
    }
    let (code, text) = run(&args);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["suite"], suite);
    assert!(value["config"]["machine"]["dpu"].is_object(), "{text}");
    assert!(value["config_fnv1a64"].is_string());
    let records = value["records"].as_array().expect("an array of records");
    for r in records {
        assert_eq!(r["suite"], suite, "every record names its suite");
    }
    let mut keys: Vec<String> = records[0].as_object().unwrap().keys().cloned().collect();
    keys.sort();
    for r in records {
        let mut k: Vec<String> = r.as_object().unwrap().keys().cloned().collect();
        k.sort();
        assert_eq!(k, keys, "every record of {suite} has the same fields");
    }
    (records.len(), keys)
}

#[test]
fn records_have_the_listed_fields() {
    let (n, k) = keys("mram", None);
    assert_eq!(n, 2 * 9, "read and write, 8 to 2,048 bytes");
    assert_eq!(
        k,
        [
            "bandwidth_mb_per_s",
            "direction",
            "latency_cycles",
            "size_bytes",
            "suite",
            "tasklets"
        ]
    );
    let (_, k) = keys("stream", None);
    assert_eq!(
        k,
        [
            "bandwidth_mb_per_s",
            "kernel",
            "memory",
            "suite",
            "tasklets"
        ]
    );
    let (_, k) = keys("transfer", None);
    assert_eq!(
        k,
        [
            "bandwidth_gb_per_s",
            "direction",
            "dpus",
            "mode",
            "size_per_dpu_bytes",
            "suite",
            "time_us"
        ]
    );
}

#[test]
fn arithmetic_sweeps_the_machines_tasklets() {
    let (n, k) = keys("arithmetic", Some("machines/upmem-v1b-400mhz.toml"));
    assert_eq!(k, ["mops", "op", "suite", "tasklets", "type"]);
    // 4 ops x 4 types x 16 tasklets on a v1B DPU.
    assert_eq!(n, 4 * 4 * 16);
}

#[test]
fn tables_are_for_people() {
    let (code, text) = run(&["microbench", "mram"]);
    assert_eq!(code, 0);
    assert!(text.contains("MRAM <-> WRAM DMA, one tasklet"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("read") && l.contains(" 2048 "))
        .unwrap();
    assert!(row.contains("1101.0") && row.contains("651.04"), "{row}");
}
