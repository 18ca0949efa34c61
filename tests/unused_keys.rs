//! A `--set` of a machine key the run does not read says so in a warning, and the keys it
//! names truly change nothing: the run with all of them changed gives the same results.

mod common;

use common::run_tiny;
use serde_json::Value;

/// Every key the warning may name, each set far from the shipped machine's value.
const CANDIDATES: [&str; 37] = [
    "machine.dpu.max_tasklets=32",
    "machine.dpu.instructions.alu=97",
    "machine.dpu.instructions.wram_access=97",
    "machine.dpu.instructions.loop_iteration=97",
    "machine.dpu.instructions.add_i32=97",
    "machine.dpu.instructions.sub_i32=97",
    "machine.dpu.instructions.mul_i32=97",
    "machine.dpu.instructions.div_i32=97",
    "machine.dpu.instructions.add_i64=97",
    "machine.dpu.instructions.sub_i64=97",
    "machine.dpu.instructions.mul_i64=97",
    "machine.dpu.instructions.div_i64=97",
    "machine.dpu.instructions.add_f32=97",
    "machine.dpu.instructions.sub_f32=97",
    "machine.dpu.instructions.mul_f32=97",
    "machine.dpu.instructions.div_f32=97",
    "machine.dpu.instructions.add_f64=97",
    "machine.dpu.instructions.sub_f64=97",
    "machine.dpu.instructions.mul_f64=97",
    "machine.dpu.instructions.div_f64=97",
    "machine.dpu.instructions.mutex_lock=97",
    "machine.dpu.instructions.mutex_unlock=97",
    "machine.dpu.instructions.barrier_wait=97",
    "machine.host.route_ns_per_query=900",
    "machine.host.merge_ns_per_result=900",
    "machine.host.pack_ns_per_byte=9",
    "machine.host.sort_ns_per_element=900",
    "machine.host.scan_ns_per_element=900",
    "machine.host.hash_ns_per_key=900",
    "machine.host.bucket_ns_per_task=900",
    "machine.host.fill_ns_per_result=900",
    "machine.transfer.broadcast_gb_per_s_per_rank=0.5",
    "machine.transfer.poll_interval_us=900",
    "machine.dpu.wram_size_bytes=131072",
    "machine.dpu.stack_bytes_per_tasklet=2048",
    "machine.dpu.atomic_bits=128",
    "machine.dpu.iram_instructions=100000",
];

/// The capacities made smaller, but still fitting the tiny runs.
const SMALLER: [&str; 5] = [
    "machine.dpu.max_tasklets=16",
    "machine.dpu.wram_size_bytes=32768",
    "machine.dpu.stack_bytes_per_tasklet=256",
    "machine.dpu.atomic_bits=8",
    "machine.dpu.iram_instructions=3584",
];

/// A quiet JSON run of one measured batch of the tiny workload with `sets`: the report
/// without what a changed configuration changes by itself, and its warnings.
fn results(sets: &[&str]) -> (Value, Vec<String>) {
    let sets = [&["batches.measured=1"], sets].concat();
    let o = run_tiny(&["--json", "--quiet"], &sets);
    assert_eq!(o.code, Some(0), "{sets:?}: {}", o.stderr);
    let mut v: Value = serde_json::from_str(&o.stdout).unwrap();
    let warnings = v["warnings"].as_array().unwrap().iter();
    let warnings = warnings.map(|w| w.as_str().unwrap().to_owned()).collect();
    for key in [
        "config",
        "config_fnv1a64",
        "host",
        "warnings",
        "command_line",
    ] {
        v.as_object_mut().unwrap().remove(key);
    }
    (v, warnings)
}

/// The candidates the run's warnings name, and those they do not.
fn named(warnings: &[String]) -> (Vec<&'static str>, Vec<&'static str>) {
    CANDIDATES.iter().partition(|c| {
        let note = format!("--set {c} changes nothing in this run");
        warnings.iter().any(|w| w.starts_with(&note))
    })
}

/// Runs `sets` on the tiny workload, then again with every candidate the first run's
/// warnings name: the results are the same, and the keys `used` are never named. Then
/// with the capacities made smaller: each is named, and the results are the same too.
fn check(sets: &[&str], used: &[&str]) {
    let (want, _) = results(sets);
    let (_, warnings) = results(&[sets, &CANDIDATES].concat());
    let (unused, read) = named(&warnings);
    for key in used {
        assert!(
            read.iter().any(|c| c.starts_with(key)),
            "{sets:?}: {key} named unused"
        );
    }
    let (got, _) = results(&[sets, &unused].concat());
    assert_eq!(
        got, want,
        "{sets:?}: these keys changed the results: {unused:?}"
    );
    // Every instruction cost the warnings leave unnamed (the index says its kernels read
    // it) moves the results on its own: a list naming a key they never read fails here.
    for set in read
        .iter()
        .filter(|c| c.starts_with("machine.dpu.instructions."))
    {
        let (got, _) = results(&[sets, &[*set]].concat());
        assert_ne!(got, want, "{sets:?}: {set} changed nothing");
    }
    assert!(unused.len() >= 5, "{sets:?}: only {unused:?} named");
    let (got, warnings) = results(&[sets, &SMALLER].concat());
    assert_eq!(
        got, want,
        "{sets:?}: smaller capacities changed the results"
    );
    for c in SMALLER {
        let note = format!("--set {c} changes nothing in this run");
        assert!(
            warnings.iter().any(|w| w.starts_with(&note)),
            "{c}: {warnings:?}"
        );
    }
}

#[test]
fn bforest_names_only_keys_that_change_nothing() {
    let used = [
        "machine.host.route",
        "machine.host.merge",
        "machine.host.pack",
        "machine.dpu.instructions.alu",
        "machine.dpu.instructions.wram_access",
        "machine.dpu.instructions.loop_iteration",
        "machine.dpu.instructions.sub_i64",
        "machine.dpu.instructions.add_i64",
        "machine.dpu.instructions.barrier_wait",
    ];
    check(&[], &used);
    // The dynamic work split takes its blocks under a mutex, with a 32-bit add.
    let mutex = [
        "machine.dpu.instructions.mutex_lock",
        "machine.dpu.instructions.mutex_unlock",
        "machine.dpu.instructions.add_i32",
    ];
    check(
        &["run.evaluation=tasklet-dynamic"],
        &[&used[..], &mutex].concat(),
    );
    // Async launches poll at the machine's interval: then it is read; a run with an
    // interval of its own does not read the machine's.
    check(
        &["run.launch=async"],
        &["machine.transfer.poll_interval_us"],
    );
    check(&["run.launch=async", "run.poll_interval_us=20"], &[]);
}

/// A key counts as changed by its final value against the file's: a later `--set` of
/// the file's value takes the change back, a number equal to the file's (`60.0` for `60`)
/// is no change.
#[test]
fn only_a_changed_value_is_named() {
    let run = |sets: &[String]| results(&sets.iter().map(String::as_str).collect::<Vec<_>>()).1;
    let sort = |v: &str| format!("machine.host.sort_ns_per_element={v}");
    let named = |w: Vec<String>| w.iter().any(|w| w.contains("sort_ns_per_element"));
    assert!(named(run(&[sort("60"), sort("900")])));
    assert!(!named(run(&[sort("900"), sort("60")])));
    assert!(!named(run(&[sort("60.0")])));
    let text = std::fs::read_to_string("machines/paper-2rank.toml").unwrap();
    assert!(
        text.contains("sort_ns_per_element = 60 "),
        "the file's value moved"
    );
}

/// A capacity raised above the file's may be what let the run fit (without the tasklet
/// limit the run is refused), so it is not named; one lowered under which the run still
/// fit is.
#[test]
fn a_raised_capacity_is_not_named() {
    let limit = |w: &[String]| {
        w.iter()
            .any(|w| w.contains("--set machine.dpu.max_tasklets"))
    };
    let refused = run_tiny(&["--quiet"], &["run.tasklets=32", "batches.measured=1"]);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    let (_, needed) = results(&["run.tasklets=32", "machine.dpu.max_tasklets=32"]);
    assert!(!limit(&needed), "{needed:?}");
    let (_, lowered) = results(&["machine.dpu.max_tasklets=20"]);
    assert!(limit(&lowered), "{lowered:?}");
}

#[test]
fn pim_tree_names_only_keys_that_change_nothing() {
    let used = [
        "machine.host.sort",
        "machine.host.hash",
        "machine.host.fill",
    ];
    // Both kernels' blocks are made of the same operations (src/pimtree/costs.rs).
    let kernels = [
        "machine.dpu.instructions.alu",
        "machine.dpu.instructions.wram_access",
        "machine.dpu.instructions.loop_iteration",
        "machine.dpu.instructions.add_i32",
        "machine.dpu.instructions.sub_i64",
        "machine.dpu.instructions.barrier_wait",
    ];
    check(
        &["run.index=pim-tree", "queries.kind=get"],
        &[&used[..], &kernels].concat(),
    );
    let ordered = ["run.index=pim-tree", "queries.kind=predecessor"];
    check(
        &ordered,
        &[&["machine.host.sort", "machine.host.scan"][..], &kernels].concat(),
    );
}

/// PIM-tree places its data by hash: a partitioner's tuning key set for it is named, and
/// changes nothing; `partition.chunk_pairs`, which shapes the data set, is read.
#[test]
fn pim_tree_names_the_partitioners_keys_it_does_not_read() {
    let base = ["run.index=pim-tree", "queries.kind=get"];
    let tuning = [
        "partition.alpha=3",
        "partition.data_cap=1.5",
        "partition.double_scan_gates=true",
        "partition.count_both_ends=false",
        "partition.chunk_pairs=50",
    ];
    let (want, _) = results(&[&base[..], &tuning[4..]].concat());
    let (got, warnings) = results(&[&base[..], &tuning].concat());
    assert_eq!(got, want);
    for set in &tuning[..4] {
        let note = format!("--set {set} had no effect: pim-tree places its data by hash");
        assert!(
            warnings.iter().any(|w| w.starts_with(&note)),
            "{set}: {warnings:?}"
        );
    }
    assert!(
        !warnings.iter().any(|w| w.contains("chunk_pairs")),
        "{warnings:?}"
    );
    let (other, _) = results(&base);
    assert_ne!(other, want, "chunk_pairs shapes PIM-tree's data");
}

/// A key no query of the run reads is named and changes nothing: a range's length for
/// point queries (either index), streaming for PIM-tree (which does not stream).
#[test]
fn keys_the_query_kind_or_the_index_does_not_read_are_named() {
    let cases: [(&[&str], &[&str]); 3] = [
        (&["queries.kind=get"], &["queries.range_pairs=7"]),
        (
            &["run.index=pim-tree", "queries.kind=predecessor"],
            &["queries.range_pairs=7"],
        ),
        (
            &["run.index=pim-tree", "queries.kind=range-max"],
            &["batches.stream_fragments=3", "batches.streaming=\"never\""],
        ),
    ];
    for (base, unread) in cases {
        let (want, quiet) = results(base);
        let (got, warnings) = results(&[base, unread].concat());
        assert_eq!(got, want, "{unread:?}");
        assert_eq!(warnings.len(), quiet.len() + unread.len(), "{warnings:?}");
        for set in unread {
            let note = format!("--set {set} had no effect: ");
            assert!(
                warnings.iter().any(|w| w.starts_with(&note)),
                "{set}: {warnings:?}"
            );
        }
    }
}

/// PIM-tree hashes keys for gets only: the note of a hash cost set for its predecessor
/// queries names the query kind, not the index as a whole.
#[test]
fn a_hash_cost_under_predecessor_queries_names_the_kind() {
    let sets = [
        "run.index=pim-tree",
        "queries.kind=predecessor",
        "machine.host.hash_ns_per_key=900",
    ];
    let (_, warnings) = results(&sets);
    let note = "--set machine.host.hash_ns_per_key=900 changes nothing in this run: pim-tree does no hashing of keys on the host for predecessor queries (only gets hash)";
    assert!(warnings.iter().any(|w| w == note), "{warnings:?}");
}

/// The example in docs/file-formats.md prints the warning it shows there.
#[test]
fn the_documented_warning_is_printed() {
    let o = run_tiny(&["--quiet"], &["machine.host.sort_ns_per_element=600"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let docs = include_str!("../docs/file-formats.md");
    let shown: Vec<&str> = (docs.lines())
        .skip_while(|l| !l.contains("sort_ns_per_element=600 --quiet"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect();
    assert_eq!(shown.len(), 2, "the example's output lines");
    assert_eq!(o.stderr.trim_end(), shown.join("\n"));
}

/// `partition` does no timing and no run: a `--set` of a timing key or of a run's own key is
/// named as changing nothing, and indeed changes nothing; one of the DPU count is not named.
#[test]
fn partition_names_the_keys_it_does_not_read() {
    let unread = [
        "machine.dpu.clock_mhz=100",
        "machine.host.threads=3",
        "machine.dma.read_latency_fixed_cycles=500",
        "run.tasklets=4",
        "run.evaluation=\"tasklet-dynamic\"",
        "batches.streaming=\"always\"",
        "batches.max_launches=4",
    ];
    let report = |sets: &[&str]| {
        let o = common::tiny("partition", &["--json", "--quiet"], sets);
        assert_eq!(o.code, Some(0), "{sets:?}: {}", o.stderr);
        let mut v: Value = serde_json::from_str(&o.stdout).unwrap();
        let warnings: Vec<String> = (v["warnings"].as_array().unwrap().iter())
            .map(|w| w.as_str().unwrap().to_owned())
            .collect();
        for key in ["config", "config_fnv1a64", "warnings", "command_line"] {
            v.as_object_mut().unwrap().remove(key);
        }
        (v, warnings)
    };
    let sized = ["machine.ranks=1", "machine.usable_dpus=64"];
    let (want, _) = report(&sized);
    let (got, warnings) = report(&[&sized[..], &unread].concat());
    assert_eq!(got, want, "a key named unread moved the partition");
    let named = |set: &str| {
        let note = format!("--set {set} changes nothing here");
        warnings.iter().any(|w| w.starts_with(&note))
    };
    for set in unread {
        assert!(named(set), "{set}: {warnings:?}");
    }
    for set in sized {
        assert!(!named(set), "{set}: {warnings:?}");
    }
}

/// A skew over one key prefix is said to change nothing, and it changes nothing; a prefix
/// count set for PIM-tree's slices is said to be unread.
#[test]
fn a_skew_over_one_prefix_and_prefix_bits_for_slices_are_named() {
    let run = |sets: &[&str]| {
        let o = run_tiny(&["--json", "--quiet"], sets);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        serde_json::from_str::<Value>(&o.stdout).unwrap()
    };
    let one = [
        "machine.ranks=1",
        "machine.usable_dpus=16",
        "queries.prefix_bits=0",
    ];
    let skewed = run(&[&one[..], &["queries.skew=1.2"]].concat());
    let flat = run(&[&one[..], &["queries.skew=0"]].concat());
    assert_eq!(skewed["batch_times_us"], flat["batch_times_us"]);
    assert_eq!(skewed["imbalance"], flat["imbalance"]);
    let said = "queries.skew = 1.2 has no effect: queries.prefix_bits = 0 leaves one key prefix";
    let has = |r: &Value, text: &str| {
        let warnings = r["warnings"].as_array().unwrap();
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().starts_with(text))
    };
    assert!(has(&skewed, said), "{:?}", skewed["warnings"]);
    assert!(!has(&flat, "queries.skew = "), "{:?}", flat["warnings"]);
    let slices = ["queries.distribution=zipf-slices", "queries.prefix_bits=3"];
    let r = run(&[&one[..2], &slices[..]].concat());
    let unread =
        "--set queries.prefix_bits=3 had no effect: queries.distribution = \"zipf-slices\"";
    assert!(has(&r, unread), "{:?}", r["warnings"]);
}
