//! `pimdes calibrate host` prints a `[host]` fragment that a machine file takes as it is:
//! every key of the table, each measured value positive, and the machine loads with it.
//! `pimdes calibrate transfer` prints the fit and held-out errors the docs state.

mod common;

use common::{assert_bad, pimdes};
use pimdes::machine::Machine;

const ARGS: [&str; 7] = [
    "calibrate",
    "host",
    "--machine",
    "machines/paper-2rank.toml",
    "--workload",
    "workloads/tiny.toml",
    "--runs=1",
];

#[test]
fn the_fragment_replaces_a_machine_files_host_table() {
    let o = pimdes(&ARGS);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let fragment: toml::Table = o.stdout.parse().expect("the fragment is TOML");
    let host = fragment["host"].as_table().unwrap();
    let keys = [
        "route_ns_per_query",
        "merge_ns_per_result",
        "pack_ns_per_byte",
        "sort_ns_per_element",
        "scan_ns_per_element",
        "hash_ns_per_key",
        "bucket_ns_per_task",
        "fill_ns_per_result",
    ];
    for key in keys {
        let v = host[key]
            .as_float()
            .unwrap_or_else(|| panic!("{key}: {}", host[key]));
        assert!(v > 0.0 && v.is_finite(), "{key} = {v}");
        let line = o.stdout.lines().find(|l| l.starts_with(key)).unwrap();
        assert!(line.contains("# [meas] pimdes calibrate host: "), "{line}");
    }
    // The constants are per thread; the simulated host keeps its 64 threads.
    assert_eq!(host["threads"].as_integer(), Some(64));
    assert!(o.stdout.contains("one thread, one run."), "{}", o.stdout);
    // tiny.toml's batches are small for timing per query, and the run says so.
    assert!(
        o.stderr.contains("warning: batch 0 holds 20000 queries"),
        "{}",
        o.stderr
    );
    assert_eq!(host.len(), keys.len() + 2, "cpu, threads and the constants");
    // Spliced into the machine file in place of its [host] table, the machine loads.
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("machines/paper-2rank.toml"),
    )
    .unwrap();
    let start = text.find("\n[host]").unwrap();
    let end = text[start + 1..]
        .find("\n[")
        .map_or(text.len(), |i| start + 1 + i);
    let spliced = format!("{}\n{}{}", &text[..start], o.stdout, &text[end..]);
    Machine::from_toml_str("spliced.toml", &spliced, &[]).expect("the machine takes the fragment");
}

#[test]
fn the_fragment_keeps_the_machine_files_estimate_tag_on_threads() {
    let machine = "machines/upmem-v1b-400mhz.toml";
    let threads_line = |stdout: &str| -> String {
        let line = stdout.lines().find(|l| l.starts_with("threads"));
        line.unwrap_or_else(|| panic!("no threads line in\n{stdout}"))
            .to_owned()
    };
    let o = pimdes(&[&ARGS[..3], &[machine], &ARGS[4..]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    // That file's `threads` is an estimate: a spliced file's sensitivity study moves it.
    let line = threads_line(&o.stdout);
    let keys = pimdes::experiments::sensitivity::estimated_keys(&format!("[host]\n{line}"));
    assert_eq!(keys.len(), 1, "{line}");
    assert_eq!(keys[0].0, "host.threads");
    // paper-2rank.toml measured its host's threads: no tag.
    let o = pimdes(&ARGS);
    assert!(!threads_line(&o.stdout).contains("[est]"), "{}", o.stdout);
}

#[test]
fn bad_calibration_input_is_refused() {
    let o = pimdes(&[&ARGS[..6], &["--runs=0"]].concat());
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stdout.is_empty());
    assert_bad(
        &pimdes(&[&ARGS[..], &["--partitioner", "best"]].concat()),
        &["unknown partitioner `best`"],
    );
    assert_bad(
        &pimdes(&[&ARGS[..], &["--set", "queries.skew=-1"]].concat()),
        &["queries.skew"],
    );
    // The output is a TOML fragment: `--json`, once accepted and ignored, is refused.
    let o = pimdes(&[&ARGS[..], &["--json"]].concat());
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(
        o.stdout.is_empty() && o.stderr.contains("--json"),
        "{}",
        o.stderr
    );
}

#[test]
fn calibrate_transfer_compares_fit_and_held_out_figures_as_the_docs_state() {
    let o = pimdes(&["calibrate", "transfer"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout
            .starts_with("machine upmem-2538: its transfer model"),
        "{}",
        o.stdout
    );
    let mae = |set: &str| -> String {
        let line = o
            .stdout
            .lines()
            .find(|l| l.split_whitespace().take(2).eq([set, "all"]))
            .unwrap_or_else(|| panic!("no `{set} all` line in\n{}", o.stdout));
        line.split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches('%')
            .to_owned()
    };
    let (fit, held) = (mae("fit"), mae("hold-out"));
    let docs = std::fs::read_to_string("docs/validation.md").unwrap();
    for (what, value) in [("fit", &fit), ("held out", &held)] {
        assert!(
            docs.contains(&format!("{value} %")),
            "docs/validation.md does not state the {what} error {value} %"
        );
    }
    // One JSON object per figure, each with its set.
    let o = pimdes(&["calibrate", "transfer", "--json"]);
    let rows: Vec<serde_json::Value> = o
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(rows.len() > 100);
    assert!(rows.iter().any(|r| r["set"] == "hold-out"));
}

#[test]
fn calibrate_transfer_refuses_keys_that_are_not_the_machines() {
    let o = pimdes(&["calibrate", "transfer", "--set", "queries.skew=1"]);
    assert_bad(&o, &["queries.skew", "machine keys"]);
    let o = pimdes(&[
        "calibrate",
        "transfer",
        "--set",
        "machine.transfer.call_fixed_us=-1",
    ]);
    assert_bad(&o, &["key `transfer.call_fixed_us`", "-1 is not between 0"]);
    // The size is each figure's: an override of it was replaced (usable_dpus) or broke
    // the cut with an error naming settings the user never gave (dpus_per_rank).
    for set in [
        "machine.usable_dpus=5",
        "machine.dpus_per_rank=32",
        "machine.ranks=80",
    ] {
        let o = pimdes(&["calibrate", "transfer", "--set", set]);
        let key = format!(
            "key `{}`",
            set.split('=')
                .next()
                .unwrap()
                .trim_start_matches("machine.")
        );
        assert_bad(
            &o,
            &[&format!("--set {set}"), &key, "its size cannot be set"],
        );
    }
}

/// A key the transfer figures do not read is said to change nothing, and indeed does not;
/// one they read (host.threads bounds the transposes) is not.
#[test]
fn calibrate_transfer_warns_of_keys_it_does_not_read() {
    let plain = pimdes(&["calibrate", "transfer", "--json"]);
    assert_eq!(plain.code, Some(0), "{}", plain.stderr);
    for (set, read) in [
        ("machine.dpu.clock_mhz=1", false),
        ("machine.host.route_ns_per_query=1000", false),
        ("machine.host.threads=1", true),
        ("machine.transfer.call_fixed_us=1", true),
        ("machine.transfer.ownership_switch_us_per_rank=99", true),
        ("machine.transfer.poll_interval_us=99", false),
    ] {
        let o = pimdes(&["calibrate", "transfer", "--json", "--set", set]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let warned = o
            .stderr
            .contains(&format!("warning: --set {set} changes nothing here"));
        assert_eq!(warned, !read, "{set}: {}", o.stderr);
        assert_eq!(o.stdout == plain.stdout, !read, "{set}");
    }
}
