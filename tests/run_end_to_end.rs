//! `pimdes run` end to end on small configurations: verified answers for every query kind,
//! determinism across thread counts, a batch bound by its slowest DPU, and bad input.

mod common;

use common::{assert_bad, pimdes};

use pimdes::config::Override;
use pimdes::experiments::run::{RunReport, Silent, run};
use pimdes::machine::Machine;
use pimdes::partition::by_name;
use pimdes::workload::Workload;

/// 16 DPUs in one rank of the paper's server.
fn machine() -> Machine {
    let o = ["machine.ranks=1", "machine.usable_dpus=16"].map(|s| Override::parse(s).unwrap());
    Machine::from_toml_str(
        "paper-2rank.toml",
        include_str!("../machines/paper-2rank.toml"),
        &o,
    )
    .unwrap()
}

fn workload(extra: &[&str]) -> Workload {
    let mut o = vec![
        "data.pairs=60000",
        "queries.batch_size=2000",
        "batches.warmup=1",
        "batches.measured=2",
        "partition.alpha=4",
    ];
    o.extend_from_slice(extra);
    let o: Vec<Override> = o.iter().map(|s| Override::parse(s).unwrap()).collect();
    Workload::from_toml_str("tiny.toml", include_str!("../workloads/tiny.toml"), &o).unwrap()
}

fn run_with(w: &Workload, partitioner: &str) -> RunReport {
    run(
        &machine(),
        w,
        by_name(partitioner).unwrap().as_ref(),
        &mut Silent,
    )
    .unwrap()
}

#[test]
fn answers_are_verified_for_every_kind_and_policy() {
    for kind in ["get", "range-count-if", "range-max"] {
        for evaluation in ["tasklet-static", "tasklet-dynamic"] {
            let w = workload(&[
                &format!("queries.kind={kind}"),
                &format!("run.evaluation={evaluation}"),
                "queries.range_pairs=400",
            ]);
            let r = run_with(&w, "qdd-double-scan");
            assert!(r.answers_verified, "{kind} {evaluation}");
            assert_eq!(r.index_fields["policies"]["evaluation"]["name"], evaluation);
            if kind != "get" {
                // Ranges of 400 pairs cross partitions.
                assert!(
                    r.index_f64(&["policies", "routing", "metrics", "fragments_per_query"]) > 1.0
                );
            }
        }
    }
}

#[test]
fn breakdown_adds_up_to_the_batch_time() {
    let r = run_with(&workload(&[]), "ccp-capped");
    let b = &r.breakdown_us;
    let stages = [
        "routing",
        "cpu_to_dpu",
        "dpu_kernel",
        "dpu_to_cpu",
        "postprocessing",
    ];
    let sum: f64 = stages.iter().map(|s| b.get(s)).sum::<f64>() + b.get("waiting");
    assert!(
        (sum - r.batch_time_us.mean).abs() < 1e-6 * sum,
        "{sum} vs {}",
        r.batch_time_us.mean
    );
    let classes = b.get("cpu") + b.get("communication") + b.get("pim") + b.get("waiting");
    assert!((classes - sum).abs() < 1e-6 * sum, "{classes} vs {sum}");
    assert_eq!(b.get("waiting"), 0.0, "one batch at a time never waits");
    let split = &r.launch_split["dpu_kernel"];
    let parts = split.launch_us + split.slowest_dpu_us + split.until_seen_us;
    assert!(
        (parts - b.get("dpu_kernel")).abs() < 1e-6 * parts,
        "{split:?}"
    );
    assert_eq!(split.until_seen_us, 0.0, "a sync launch is seen as it ends");
    assert_eq!(split.launches, 1.0);
    assert_eq!(r.launch_split.len(), 1, "one launching stage");
    assert!((r.throughput_queries_per_s - 2000.0 / (r.batch_time_us.mean * 1e-6)).abs() < 1e-6);
}

/// Everything but the `host` block.
fn deterministic_part(r: &RunReport) -> String {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("host");
    serde_json::to_string(&v).unwrap()
}

#[test]
fn same_seed_same_report_on_one_and_several_threads() {
    for protocol in [
        &[][..],
        &["run.launch=async", "run.batches_in_flight=2"][..],
        &["run.arrival=open", "run.queries_per_s=2e7"][..],
    ] {
        let mut sets = vec!["run.evaluation=tasklet-dynamic"];
        sets.extend_from_slice(protocol);
        same_report_on_any_thread_count(&workload(&sets));
    }
}

fn same_report_on_any_thread_count(w: &Workload) {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let many = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let a = one.install(|| deterministic_part(&run_with(w, "qdd-double-scan")));
    let b = many.install(|| deterministic_part(&run_with(w, "qdd-double-scan")));
    assert_eq!(a, b);
    assert_eq!(a, deterministic_part(&run_with(w, "qdd-double-scan")));
}

#[test]
fn a_batch_waits_for_its_slowest_dpu() {
    // Prefix 0 of 2^24 prefixes takes all but 2^-50 of the queries at skew 50, and it lies
    // in DPU 0's base partition: with data-balanced partitioning every query goes to DPU 0.
    let w = workload(&[
        "queries.prefix_bits=24",
        "queries.skew=50",
        "queries.range_pairs=1",
        "batches.measured=1",
    ]);
    let m = machine();
    let r = run_with(&w, "data-balanced");
    assert!(
        (r.index_f64(&["imbalance", "queries"]) - 16.0).abs() < 1e-9,
        "all queries on one DPU: IF_q {}",
        r.index_f64(&["imbalance", "queries"])
    );
    let launch_us = m.transfer.launch_fixed.as_us_f64()
        + m.transfer.launch_per_rank.as_us_f64() * m.ranks as f64;
    // The kernel stage is the launch cost plus the slowest DPU (histogram: 3 significant digits).
    let slowest = r.breakdown_us.get("dpu_kernel") - launch_us;
    let split = &r.launch_split["dpu_kernel"];
    assert!((split.launch_us - launch_us).abs() < 1e-9, "{split:?}");
    assert!(
        (split.slowest_dpu_us - slowest).abs() < 1e-6 * slowest,
        "{split:?}"
    );
    assert!(
        (slowest - r.dpu_kernel_us.max).abs() <= 0.002 * slowest,
        "{slowest} vs {}",
        r.dpu_kernel_us.max
    );
    // The idle DPUs finish far earlier.
    assert!(r.dpu_kernel_us.p50 * 20.0 < r.dpu_kernel_us.max);
    // Spreading the same queries (double scan) makes the batch faster.
    let spread = run_with(&w, "qdd-double-scan");
    assert!(spread.breakdown_us.get("dpu_kernel") < r.breakdown_us.get("dpu_kernel"));
}

#[test]
fn data_that_does_not_fit_fails_before_simulating() {
    let out = std::env::temp_dir().join(format!("pimdes-run-{}.json", std::process::id()));
    let o = pimdes(&[
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
        "--set",
        "machine.dpu.mram_size_bytes=65536",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_bad(&o, &["does not fit in MRAM: DPU", "needs", "but has 65536"]);
    assert!(!out.exists(), "nothing written at --out");
}

/// The same for `run` and for `partition`, which builds no index but must not accept, and
/// write into its report, a run no index would.
#[test]
fn bad_run_settings_are_input_errors() {
    let base = [
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
    ];
    for (set, needle) in [
        (
            "run.tasklets=25",
            "25 tasklets requested (--set run.tasklets=25); the machine's DPUs run at most 24 (dpu.max_tasklets of machines/paper-2rank.toml)",
        ),
        ("run.tasklets=0", "`run.tasklets`"),
        ("run.evaluation=magic", "unknown policy `magic`"),
        ("run.routing=magic", "`run.routing`"),
        ("run.index=btree", "unknown index `btree`"),
        ("run.launch=later", "`run.launch`"),
        ("run.batches_in_flight=0", "not between 1 and 4"),
        ("run.batches_in_flight=5", "`run.batches_in_flight`"),
        ("run.arrival=open", "open arrivals need a rate"),
        ("run.queries_per_s=1000", "only open arrivals have a rate"),
        ("run.arrival=sometimes", "`run.arrival`"),
    ] {
        for command in ["run", "partition"] {
            let mut args = vec![command];
            args.extend_from_slice(&base);
            args.extend_from_slice(&["--set", set]);
            assert_bad(&pimdes(&args), &[&format!("--set {set}"), needle]);
        }
    }
}

/// PIM-tree places its data by hash and has its own routing, evaluation and merge: a run
/// that names other B+-Forest choices is told they had no effect; the defaults pass quietly.
#[test]
fn pim_tree_notes_the_choices_it_does_not_use() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--machine",
            "machines/paper-2rank.toml",
            "--workload",
            "workloads/pim-tree-get.toml",
            "--set",
            "data.pairs=60000",
            "--set",
            "queries.batch_size=2000",
            "--set",
            "batches.warmup=2",
            "--set",
            "batches.measured=1",
            "--json",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let o = pimdes(&args);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let report: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        report["warnings"].as_array().unwrap().clone()
    };
    assert_eq!(run(&[]), Vec::<serde_json::Value>::new());
    let chosen = [
        "--partitioner",
        "ccp-capped",
        "--set",
        "run.evaluation=tasklet-dynamic",
        "--set",
        "batches.max_launches=4",
    ];
    let warnings = run(&chosen);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let note = warnings[0].as_str().unwrap();
    for needle in [
        "pim-tree does not use",
        "the partitioner = \"ccp-capped\"",
        "run.evaluation = \"tasklet-dynamic\"",
        "batches.max_launches = 4",
    ] {
        assert!(note.contains(needle), "{note}");
    }
    assert!(!note.contains("run.routing"), "{note}");
}

/// A tuning key the chosen partitioner does not read changes nothing: the run and the
/// partition report say so, naming the partitioners that do read it; one it reads, or a
/// key left to the file, passes quietly.
#[test]
fn an_override_the_partitioner_does_not_read_is_reported() {
    let warnings = |command: &str, partitioner: &str, set: &str| {
        let flags = ["--partitioner", partitioner, "--json", "--quiet"];
        let o = common::tiny(command, &flags, &[set]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let report: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        let w = report["warnings"].as_array().unwrap();
        w.iter()
            .map(|w| w.as_str().unwrap().to_owned())
            .filter(|w| !common::is_chunk_floor(w))
            .collect::<Vec<_>>()
    };
    let w = warnings("run", "qdd-double-scan", "partition.data_cap=1.5");
    assert_eq!(
        w,
        [
            "--set partition.data_cap=1.5 had no effect: partitioner qdd-double-scan does not read partition.data_cap (ccp-capped reads it)"
        ]
    );
    let w = warnings("partition", "ccp-capped", "partition.alpha=4");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("(qdd-greedy and qdd-double-scan read it)"),
        "{w:?}"
    );
    assert!(warnings("partition", "qdd-greedy", "partition.alpha=4").is_empty());
    let w = warnings(
        "partition",
        "qdd-greedy",
        "partition.double_scan_gates=true",
    );
    assert!(w[0].contains("(qdd-double-scan reads it)"), "{w:?}");
    assert!(warnings("partition", "ccp-capped", "queries.skew=0.8").is_empty());
}

#[test]
fn out_file_holds_the_json_report() {
    let out = std::env::temp_dir().join(format!("pimdes-run-ok-{}.json", std::process::id()));
    let o = pimdes(&[
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
        "--set",
        "machine.ranks=1",
        "--set",
        "machine.usable_dpus=16",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for key in [
        "batch_time_us",
        "breakdown_us",
        "init_us",
        "throughput_queries_per_s",
        "imbalance",
        "partitioner",
        "policies",
        "protocol",
        "batch_interval_us",
        "latency_us",
        "saturated",
        "dpu_kernel_us",
        "answers_verified",
        "seed",
        "version",
        "config",
        "host",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["answers_verified"], true);
    check_phases(&v);
    check_keys_reserved(&v);
    std::fs::remove_file(&out).unwrap();
}

/// The host's wall time, phase by phase, in the order they ran, adding up to the whole.
fn check_phases(v: &serde_json::Value) {
    let phases = v["host"]["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "setup",
            "partitioning",
            "generating batches",
            "building trees",
            "batches"
        ]
    );
    let sum_s: f64 = phases.iter().map(|p| p["wall_s"].as_f64().unwrap()).sum();
    let wall_s = v["host"]["wall_s"].as_f64().unwrap();
    assert!(phases.iter().all(|p| p["wall_s"].as_f64().unwrap() >= 0.0));
    assert!(
        (sum_s - wall_s).abs() < 1e-6,
        "{sum_s} s against {wall_s} s"
    );
}

/// Every key is the report's own or B+-Forest's; the driver's reserved list is complete.
fn check_keys_reserved(v: &serde_json::Value) {
    let reserved = pimdes::experiments::run::RESERVED_KEYS;
    for key in v.as_object().unwrap().keys() {
        let forest = [
            "partitioner",
            "streamed",
            "launches_per_batch",
            "imbalance",
            "policies",
        ]
        .contains(&key.as_str());
        assert!(
            forest || reserved.contains(&key.as_str()),
            "{key} not reserved"
        );
    }
}

#[test]
fn progress_lines_go_to_stderr_when_it_is_not_a_terminal_and_quiet_silences_them() {
    let run = |quiet: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pimdes"));
        cmd.args([
            "run",
            "--machine",
            "machines/paper-2rank.toml",
            "--workload",
            "workloads/tiny.toml",
            "--json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PIMDES_PROGRESS_EVERY_MS", "10");
        if quiet {
            cmd.arg("--quiet");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (report, String::from_utf8(out.stderr).unwrap())
    };
    let (loud, stderr) = run(false);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("pimdes run: "))
        .collect();
    assert!(!lines.is_empty(), "no progress line in: {stderr}");
    assert!(lines.iter().all(|l| l.ends_with(" elapsed")), "{lines:?}");
    let (quiet, stderr) = run(true);
    assert!(!stderr.contains("pimdes run: "), "{stderr}");
    // Progress never changes the report (but the host block, a fact about this machine,
    // and the command line, which has `--quiet` once).
    let strip = |mut v: serde_json::Value| {
        v.as_object_mut().unwrap().remove("host");
        v.as_object_mut().unwrap().remove("command_line");
        v
    };
    assert_eq!(strip(loud), strip(quiet));
}

/// The main job (no command) says what it is simulating while it runs, in each of its
/// two parts, and its table is the same with the progress lines as without.
#[test]
fn the_main_job_shows_its_progress() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .env("PIMDES_PROGRESS_EVERY_MS", "10")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    for part in [
        "pimdes: simulating 1/4: ccp-capped at skew 0.6",
        "pimdes: partitioning at skew",
    ] {
        assert!(stderr.contains(part), "no `{part}` in: {stderr}");
    }
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("pimdes: B+-Forest on paper-2rank"),
        "{stdout}"
    );
    assert!(!stdout.contains("elapsed"), "{stdout}");
}

#[test]
fn the_tree_build_reports_how_far_it_has_come() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args([
            "run",
            "--machine",
            "machines/paper-2rank.toml",
            "--workload",
            "workloads/quick-raq.toml",
            "--set",
            "batches.warmup=1",
            "--set",
            "batches.measured=1",
            "--json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PIMDES_PROGRESS_EVERY_MS", "10")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let building: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("pimdes run: building trees, "))
        .collect();
    assert!(!building.is_empty(), "no build line in: {stderr}");
    // Every line of the build has its share done; a later line never shows less.
    let percent = |l: &str| -> u64 {
        let p = l.split(", ").nth(1).unwrap();
        p.strip_suffix(" %")
            .unwrap_or_else(|| panic!("{l}"))
            .parse()
            .unwrap()
    };
    let shares: Vec<u64> = building.iter().map(|l| percent(l)).collect();
    assert!(shares.windows(2).all(|w| w[0] <= w[1]), "{shares:?}");
    assert!(shares.iter().all(|&p| p <= 100), "{shares:?}");
}
