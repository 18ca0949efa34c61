//! `pimdes sensitivity`: each parameter moved alone against the unchanged run, refused
//! variants reported with their reason, bad settings refused.

mod common;

use common::{assert_bad, pimdes};
use serde_json::Value;

const ARGS: [&str; 9] = [
    "sensitivity",
    "--machine",
    "machines/paper-2rank.toml",
    "--workload",
    "workloads/tiny.toml",
    "--set",
    "machine.ranks=1",
    "--set",
    "machine.usable_dpus=16",
];

fn study(extra: &[&str]) -> Value {
    let o = pimdes(&[&ARGS[..], extra, &["--json", "--quiet"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

#[test]
fn each_parameter_moves_alone_against_the_unchanged_run() {
    let s = study(&["--keys", "dma.occupancy_fixed_cycles,usable_dpus"]);
    // The same inputs as the study, as a plain run.
    let plain = pimdes(&[&["run"][..], &ARGS[1..], &["--json", "--quiet"]].concat());
    let plain: Value = serde_json::from_str(&plain.stdout).unwrap();
    assert_eq!(
        s["baseline"]["batch_time_us"],
        plain["batch_time_us"]["mean"]
    );
    let variants = s["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 4, "two keys x two factors");
    let change = |i: usize| variants[i]["batch_time_change_pct"].as_f64().unwrap();
    // A busier MRAM bank (16 -> 32 cycles per request) slows the kernel; 8 speeds it up.
    assert_eq!(variants[0]["value"], 8);
    assert!(change(0) < 0.0 && change(1) > 0.0, "{variants:?}");
    // The base is the effective value, after --set: 16 DPUs, moved to 8 and 32.
    assert_eq!(variants[2]["base_value"], 16);
    assert_eq!(
        (&variants[2]["value"], &variants[3]["value"]),
        (&Value::from(8), &Value::from(32))
    );
    // Half the DPUs: each holds and serves twice as much, so the batch is slower.
    assert!(change(2) > 0.0 && change(3) != 0.0, "{variants:?}");
}

#[test]
fn a_factor_that_leaves_the_value_in_place_is_not_reported_as_measured() {
    // One rank (ARGS): half of it rounds back to 1, twice it is 2.
    let s = study(&["--keys", "ranks", "--factors", "0.5,2"]);
    let v = &s["variants"];
    assert_eq!(
        (&v[0]["value"], &v[0]["unchanged"]),
        (&Value::from(1), &Value::from(true))
    );
    assert!(
        v[0]["figures"].is_null() && v[0]["batch_time_change_pct"].is_null(),
        "{v}"
    );
    assert!(v[0]["refused"].is_null(), "{v}");
    assert_eq!(
        (&v[1]["value"], &v[1]["unchanged"]),
        (&Value::from(2), &Value::from(false))
    );
    assert!(v[1]["batch_time_change_pct"].is_f64(), "{v}");
    let table = pimdes(
        &[
            &ARGS[..],
            &["--keys", "ranks", "--factors", "0.5", "--quiet"],
        ]
        .concat(),
    );
    assert_eq!(table.code, Some(0), "{}", table.stderr);
    assert!(table.stdout.contains("1 -> unchanged"), "{}", table.stdout);
}

#[test]
fn moving_the_rank_count_carries_the_usable_dpus_warning() {
    // The file's usable_dpus stays at 128 when the study doubles its ranks: the DPU count
    // does not move, and the study must say so as `run` does.
    let args = [
        "sensitivity",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
        "--keys",
        "ranks",
        "--factors",
        "2",
    ];
    let o = pimdes(&[&args[..], &["--json", "--quiet"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let s: Value = serde_json::from_str(&o.stdout).unwrap();
    let w = s["variants"][0]["warnings"].as_array().unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    // With what the variant measures, not the advice to move usable_dpus beside it, which
    // a study of one key at a time cannot take.
    let w = w[0].as_str().unwrap();
    assert!(w.contains("usable_dpus = 128 stays"), "{w}");
    assert!(
        w.ends_with("this variant measures the same DPUs over other ranks"),
        "{w}"
    );
    assert!(!w.contains("set machine.usable_dpus too"), "{w}");
    let table = pimdes(&[&args[..], &["--quiet"]].concat());
    assert!(
        table.stdout.contains("warning: ranks = 4: "),
        "{}",
        table.stdout
    );
}

#[test]
fn a_variant_the_simulator_refuses_is_reported_with_its_reason() {
    // 16 x 8 = 128 DPUs on one rank of 64.
    let s = study(&["--keys", "usable_dpus", "--factors", "8"]);
    let v = &s["variants"][0];
    assert_eq!(v["value"], 128);
    assert!(v["figures"].is_null());
    assert!(
        v["refused"].as_str().unwrap().contains("usable_dpus"),
        "{v}"
    );
    // A variant the kernel refuses (a DMA it issues is now too small) is named by the
    // --set that moved it, as a plain run names it.
    let s = study(&["--keys", "dma.min_size_bytes", "--factors", "2"]);
    let refused = s["variants"][0]["refused"].as_str().unwrap().to_owned();
    let named = "--set machine.dma.min_size_bytes=16: key `dma.min_size_bytes`: DPU ";
    assert!(refused.starts_with(named), "{refused}");
}

#[test]
fn bad_settings_are_refused() {
    for factor in ["0", "1e-300", "1001"] {
        assert_bad(
            &pimdes(&[&ARGS[..], &["--factors", factor]].concat()),
            &[
                "--factors",
                "each factor must be a number from 0.001 to 1000",
            ],
        );
    }
    assert_bad(
        &pimdes(&[&ARGS[..], &["--keys", "dpu.nosuch"]].concat()),
        &["error: --keys: `dpu.nosuch`", "not a number of the machine"],
    );
    assert_bad(
        &pimdes(&[&ARGS[..], &["--keys", "machine.nosuch"]].concat()),
        &[
            "error: --keys: `machine.nosuch`",
            "not a number of the machine",
        ],
    );
    for empty in ["", ",", "ranks,"] {
        assert_bad(
            &pimdes(&[&ARGS[..], &["--keys", empty]].concat()),
            &["error: --keys: an empty key in the list"],
        );
    }
    // A key or factor twice would run its variants twice and print duplicate columns.
    assert_bad(
        &pimdes(&[&ARGS[..], &["--keys", "usable_dpus,usable_dpus"]].concat()),
        &["--keys", "usable_dpus is listed twice"],
    );
    assert_bad(
        &pimdes(&[&ARGS[..], &["--factors", "2,0.5,2"]].concat()),
        &["--factors", "2 is listed twice"],
    );
}

/// What a run warns of reaches the study: the baseline's warnings (in `warnings`, and in
/// the table for every run), and a variant's own, such as a key the run does not read,
/// said once per key in the table.
#[test]
fn the_runs_warnings_reach_the_study() {
    let pim_tree = [
        "--set",
        "run.index=\"pim-tree\"",
        "--set",
        "queries.batch_size=2000",
        "--keys",
        "host.route_ns_per_query",
    ];
    let s = study(&pim_tree);
    let baseline = s["warnings"].as_array().unwrap();
    assert!(
        baseline
            .iter()
            .any(|w| w.as_str().unwrap().contains("another host protocol")),
        "{baseline:?}"
    );
    for v in s["variants"].as_array().unwrap() {
        let warnings = v["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let w = warnings[0].as_str().unwrap();
        assert!(w.contains("changes nothing in this run: pim-tree"), "{w}");
    }
    // The baseline's warnings on stderr, as a run's, in the table's mode and in JSON's.
    let json = pimdes(&[&ARGS[..], &pim_tree, &["--quiet", "--json"]].concat());
    let o = pimdes(&[&ARGS[..], &pim_tree, &["--quiet"]].concat());
    for o in [&json, &o] {
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        assert!(
            o.stderr.contains("warning: pim-tree runs here"),
            "{}",
            o.stderr
        );
    }
    assert!(!o.stdout.contains("pim-tree runs here"), "{}", o.stdout);
    let head = "sensitivity of pim-tree on paper-2rank: 600000 pairs, 2000 range-count-if queries per batch, skew 1, seed 7\n";
    assert!(o.stdout.starts_with(head), "{}", o.stdout);
    assert_eq!(
        o.stdout
            .matches("not read: host.route_ns_per_query: ")
            .count(),
        1,
        "{}",
        o.stdout
    );
}

/// Keys as `--set` writes them (`machine.` first) and spaces around commas are taken;
/// scaled numbers carry no float noise, and a per-byte cycle cost moves in thousandths.
#[test]
fn keys_and_factors_are_read_as_written_and_values_are_clean() {
    let keys = "machine.dpu.clock_mhz, dma.latency_cycles_per_byte";
    let s = study(&["--keys", keys, "--factors", "0.001, 0.3"]);
    let values: Vec<String> = s["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["value"].to_string())
        .collect();
    // 350 x 0.001 and x 0.3; 0.5 x 0.001 rounds up to one thousandth, 0.5 x 0.3 is 0.15.
    assert_eq!(values, ["0.35", "105.0", "0.001", "0.15"]);
}

/// The keys are the machine's after its `--set`s, and any key TOML allows is read.
#[test]
fn keys_are_found_as_the_machine_has_them() {
    // A key the file leaves out, given by an override, can be moved.
    let v1b = "machines/upmem-v1b-400mhz.toml";
    assert!(
        !std::fs::read_to_string(v1b)
            .unwrap()
            .contains("rank_fixed_us")
    );
    let mut args = ARGS.to_vec();
    args[2] = v1b;
    let moved = ["--keys", "transfer.rank_fixed_us"];
    let o = pimdes(&[&args[..], &moved, &["--json", "--quiet"]].concat());
    assert_bad(
        &o,
        &["--keys: `transfer.rank_fixed_us` is not a number of the machine"],
    );
    let set = [
        "--set",
        "machine.transfer.rank_fixed_us=10",
        "--json",
        "--quiet",
    ];
    let o = pimdes(&[&args[..], &moved, &set].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let s: Value = serde_json::from_str(&o.stdout).unwrap();
    let values: Vec<f64> = (s["variants"].as_array().unwrap().iter())
        .map(|v| v["value"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [5.0, 20.0]);
    // A quoted key tagged [est] is moved as the plain one is.
    let text = std::fs::read_to_string(ARGS[2]).unwrap();
    let quoted = text.replace("\nthreads_per_rank = 8 ", "\n\"threads_per_rank\" = 8 ");
    assert_ne!(quoted, text);
    let dir = std::env::temp_dir().join(format!("pimdes-sensitivity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("quoted.toml");
    std::fs::write(&path, quoted).unwrap();
    args[2] = path.to_str().unwrap();
    let keys = |args: &[&str]| {
        let o = pimdes(&[args, &["--factors", "2", "--json", "--quiet"]].concat());
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let s: Value = serde_json::from_str(&o.stdout).unwrap();
        (s["variants"].as_array().unwrap().iter())
            .map(|v| v["key"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let found = keys(&args);
    assert!(
        found.contains(&"transfer.threads_per_rank".to_owned()),
        "{found:?}"
    );
    assert_eq!(found, keys(&ARGS));
    let _ = std::fs::remove_dir_all(dir);
}

/// A key the run reads but that no factor moved is named as such, with where the batch
/// may be bound instead; a key that moved is not. (PIM-tree's gets polled every 1 ms: a
/// barrier's cost ends within the same poll.)
#[test]
fn a_read_key_that_moved_nothing_is_named() {
    let polled = [
        "--set",
        "run.index=\"pim-tree\"",
        "--set",
        "queries.kind=get",
        "--set",
        "run.launch=async",
        "--set",
        "run.poll_interval_us=1000",
        "--keys",
        "dpu.instructions.barrier_wait,host.sort_ns_per_element",
        "--quiet",
    ];
    let o = pimdes(&[&ARGS[..], &polled].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let lines: Vec<&str> = (o.stdout.lines())
        .filter(|l| l.starts_with("no effect: "))
        .collect();
    assert_eq!(lines.len(), 1, "{}", o.stdout);
    assert!(
        lines[0].starts_with("no effect: dpu.instructions.barrier_wait: the run reads it"),
        "{}",
        o.stdout
    );
}
