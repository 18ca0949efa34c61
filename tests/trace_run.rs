//! `pimdes run --trace`: the file parses as Chrome trace-event JSON, spans on one exclusive
//! resource never overlap, a batch's critical path nests in it and covers exactly its
//! reported time, a split batch's tasklets run inside each of its launches, the file is
//! byte-identical on any thread count, and bad trace flags are input errors.

mod common;

use common::{assert_bad, pimdes};
use serde_json::Value;
use std::collections::BTreeMap;

const BASE: [&str; 5] = [
    "run",
    "--machine",
    "machines/paper-2rank.toml",
    "--workload",
    "workloads/tiny.toml",
];

fn trace_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pimdes-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs with a trace of batches `batches` (and extra arguments); returns (report, trace).
fn traced(name: &str, batches: &str, extra: &[&str], threads: Option<&str>) -> (Value, String) {
    let path = trace_path(name);
    let mut args: Vec<&str> = BASE.to_vec();
    let p = path.to_str().unwrap().to_owned();
    args.extend_from_slice(&["--json", "--trace", &p, "--trace-batches", batches]);
    args.extend_from_slice(extra);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pimdes"));
    cmd.args(&args).current_dir(env!("CARGO_MANIFEST_DIR"));
    if let Some(t) = threads {
        cmd.env("RAYON_NUM_THREADS", t);
    }
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = serde_json::from_slice(&out.stdout).unwrap();
    (report, std::fs::read_to_string(&path).unwrap())
}

struct Span {
    name: String,
    cat: String,
    start: f64,
    end: f64,
}

/// Complete events by (pid, tid), in file order.
fn spans(trace: &str) -> BTreeMap<(u64, u64), Vec<Span>> {
    let v: Value = serde_json::from_str(trace).unwrap();
    let mut by_track: BTreeMap<(u64, u64), Vec<Span>> = BTreeMap::new();
    for e in v["traceEvents"].as_array().unwrap() {
        if e["ph"] != "X" {
            continue;
        }
        let start = e["ts"].as_f64().unwrap();
        by_track
            .entry((e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
            .or_default()
            .push(Span {
                name: e["name"].as_str().unwrap().to_owned(),
                cat: e["cat"].as_str().unwrap_or("").to_owned(),
                start,
                end: start + e["dur"].as_f64().unwrap(),
            });
    }
    by_track
}

const EPS_US: f64 = 1e-6;

#[test]
fn spans_on_exclusive_resources_never_overlap_and_batches_are_covered() {
    let sets = [
        "--set",
        "run.batches_in_flight=2",
        "--set",
        "run.launch=async",
    ];
    // Tiny: 2 warm-up batches, then measured batches 2 to 4.
    let (report, trace) = traced("all.json", "2..5", &sets, None);
    let by_track = spans(&trace);
    for (&(pid, tid), list) in &by_track {
        if pid == 1 {
            continue; // batches and their critical paths: nested, checked below
        }
        let mut list: Vec<&Span> = list.iter().collect();
        list.sort_by(|a, b| a.start.total_cmp(&b.start));
        for w in list.windows(2) {
            assert!(
                w[0].end <= w[1].start + EPS_US,
                "pid {pid} tid {tid}: {} [{}, {}] overlaps {} at {}",
                w[0].name,
                w[0].start,
                w[0].end,
                w[1].name,
                w[1].start
            );
        }
    }
    // Each batch span holds its critical path, which tiles it exactly.
    let mut batch_us = Vec::new();
    for list in by_track
        .iter()
        .filter(|((pid, _), _)| *pid == 1)
        .map(|(_, l)| l)
    {
        let mut i = 0;
        while i < list.len() {
            let batch = &list[i];
            assert_eq!(batch.cat, "batch");
            let mut at = batch.start;
            i += 1;
            while i < list.len() && list[i].cat == "critical path" {
                assert!(
                    (list[i].start - at).abs() < EPS_US,
                    "{} starts at {}",
                    list[i].name,
                    at
                );
                at = list[i].end;
                i += 1;
            }
            assert!(
                (at - batch.end).abs() < EPS_US,
                "{}: path ends at {at}",
                batch.name
            );
            batch_us.push(batch.end - batch.start);
        }
    }
    assert_eq!(batch_us.len(), 3);
    let mean = batch_us.iter().sum::<f64>() / 3.0;
    let reported = report["batch_time_us"]["mean"].as_f64().unwrap();
    assert!((mean - reported).abs() < 1e-3, "{mean} vs {reported}");
    // The busiest DPU of each traced batch has tasklet tracks.
    assert!(by_track.keys().any(|&(pid, _)| pid >= 10));
}

/// A batch whose DPUs' shares are split over two launches to fit MRAM is traced launch by
/// launch: the busiest DPU's tasklets run inside each of its rank's two kernels of the
/// batch, and nowhere else.
#[test]
fn a_split_batch_is_traced_launch_by_launch() {
    // tiny.toml's busiest DPU needs 263,408 bytes in one launch, 177,424 in two.
    let sets = [
        "--set",
        "machine.dpu.mram_size_bytes=200000",
        "--set",
        "batches.max_launches=2",
    ];
    let (report, trace) = traced("split.json", "2..3", &sets, None);
    assert_eq!(report["launches_per_batch"], 2);
    let v: Value = serde_json::from_str(&trace).unwrap();
    let recorded: Vec<(u64, u64)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .filter_map(|e| {
            let name = e["args"]["name"].as_str()?;
            let rank = name.split("(rank ").nth(1)?.split(')').next()?;
            Some((e["pid"].as_u64()?, rank.parse().ok()?))
        })
        .collect();
    assert_eq!(recorded.len(), 1, "the busiest DPU of one batch");
    let (pid, rank) = recorded[0];
    let by_track = spans(&trace);
    let kernels: Vec<(f64, f64)> = by_track[&(3, rank)]
        .iter()
        .filter(|s| s.name == "kernel")
        .map(|s| (s.start, s.end))
        .collect();
    assert_eq!(kernels.len(), 2, "batch 2's two launches on rank {rank}");
    // Each launch's tasklets start with its kernel and stay inside it.
    let mut starts_with = [false; 2];
    let tasklets = by_track.iter().filter(|((p, _), _)| *p == pid);
    for s in tasklets.flat_map(|(_, list)| list) {
        let inside = |&(a, b): &(f64, f64)| s.start >= a - EPS_US && s.end <= b + EPS_US;
        let k = kernels.iter().position(inside);
        let k = k.unwrap_or_else(|| panic!("{} at {} is in no kernel", s.name, s.start));
        starts_with[k] |= (s.start - kernels[k].0).abs() <= EPS_US;
    }
    assert_eq!(
        starts_with,
        [true, true],
        "tasklets run from the start of both launches"
    );
}

#[test]
fn the_trace_is_byte_identical_on_one_and_three_threads() {
    // Three, not the default: on a one-core runner the default would be one again.
    let (_, one) = traced("one.json", "1..3", &[], Some("1"));
    let (_, all) = traced("three.json", "1..3", &[], Some("3"));
    assert_eq!(one, all);
    assert!(one.contains("\"tasklet 0\""));
}

/// A tasklet timeline that reaches its share of the bound is cut, and the run says so: a
/// warning on stderr and in the report, and an event at the cut in that timeline's track.
#[test]
fn a_cut_tasklet_timeline_is_reported() {
    let dpus = (100..112)
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let (report, trace) = traced("cut.json", "0..5", &["--trace-dpus", &dpus], None);
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains("tasklet timelines"))
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", report["warnings"]);
    assert!(
        warnings[0].contains("of its 60 DPU batches were cut"),
        "{}",
        warnings[0]
    );
    assert!(trace.contains("tasklet timeline cut at"));
    let v: Value = serde_json::from_str(&trace).unwrap();
    assert_eq!(v["otherData"]["tasklet_timelines_cut"], 5);
    assert_eq!(
        v["otherData"]["truncated"], false,
        "the file itself was not cut"
    );
    // Whole timelines give no such warning.
    let (whole, _) = traced("whole.json", "1..3", &[], None);
    assert!(
        !whole["warnings"].to_string().contains("tasklet timelines"),
        "{}",
        whole["warnings"]
    );
}

#[test]
fn bad_trace_flags_are_input_errors() {
    let path = trace_path("bad.json");
    let p = path.to_str().unwrap();
    let many: Vec<String> = (0..16).map(|d| d.to_string()).collect();
    let many = many.join(",");
    for (flags, needle) in [
        (
            vec![
                "--trace",
                p,
                "--trace-batches",
                "0..5",
                "--trace-dpus",
                &many,
            ],
            "at most 64",
        ),
        (
            vec!["--trace", p, "--trace-batches", "18446744073709551615"],
            "--trace-batches: `18446744073709551615` is not among the run's batches 0 to 4",
        ),
        (
            vec!["--trace", p, "--trace-batches", "3..3"],
            "--trace-batches: `3..3` holds no batch",
        ),
        (
            vec!["--trace", p, "--trace-batches", "9..2"],
            "--trace-batches: `9..2` holds no batch",
        ),
        (
            vec!["--trace", p, "--trace-batches", "0..99"],
            "`0..99` reaches past the run's last batch, 4",
        ),
        (
            vec!["--trace", p, "--trace-batches", "x"],
            "not a batch number",
        ),
        (
            vec!["--trace", p, "--trace-dpus", "9999"],
            "DPU 9999 does not exist",
        ),
        (
            vec!["--trace", p, "--trace-dpus", "1,a"],
            "--trace-dpus: `a` is not a DPU number",
        ),
        (
            vec!["--trace", p, "--trace-dpus", "busiest,0"],
            "--trace-dpus: `busiest` stands alone",
        ),
    ] {
        let mut args = BASE.to_vec();
        args.extend_from_slice(&flags);
        assert_bad(&pimdes(&args), &[needle]);
        assert!(!path.exists(), "no trace file after an error");
    }
    // A trace flag without --trace is refused by the parser.
    let mut args = BASE.to_vec();
    args.extend_from_slice(&["--trace-dpus", "busiest"]);
    let o = pimdes(&args);
    assert_eq!(o.code, Some(2));
    assert!(o.stderr.contains("--trace"), "{}", o.stderr);
}

/// A trace that reaches its bound is cut at one moment on every track: its batch, host and
/// rank events are exactly those of the uncut trace that start before the cut. The run's
/// report says so among its warnings.
#[test]
fn a_trace_cut_by_its_bound_is_cut_at_one_time_and_reported() {
    use pimdes::config::Override;
    use pimdes::experiments::run::{Silent, run_traced};
    use pimdes::experiments::timeline::{TraceDpus, TraceRequest};
    let sets: Vec<Override> = ["machine.ranks=1", "machine.usable_dpus=8"]
        .iter()
        .map(|s| Override::parse(s).unwrap())
        .collect();
    let root = env!("CARGO_MANIFEST_DIR");
    let machine =
        pimdes::machine::Machine::load(format!("{root}/machines/paper-2rank.toml").as_ref(), &sets)
            .unwrap();
    let workload =
        pimdes::workload::Workload::load(format!("{root}/workloads/tiny.toml").as_ref(), &sets)
            .unwrap();
    let partitioner = pimdes::partition::by_name("qdd-double-scan").unwrap();
    let traced = |max_events: usize| {
        let request = TraceRequest {
            batches: 0..5,
            dpus: TraceDpus::Busiest,
            max_events,
        };
        let p = partitioner.as_ref();
        run_traced(&machine, &workload, p, &mut Silent, Some(&request)).unwrap()
    };
    let (report, trace) = traced(60);
    let trace = trace.unwrap();
    assert!(trace.truncated(), "the bound is small enough to cut");
    let cut_us = trace.cut_at().unwrap().ps() as f64 / 1e6;
    let warning = report
        .warnings
        .iter()
        .find(|w| w.starts_with("trace cut at "));
    assert!(
        warning.is_some_and(|w| w.contains("by its bound of 60 events")),
        "{:?}",
        report.warnings
    );
    // The system tracks (batches 1, host 2, ranks 3); the tasklets' share of the bound
    // differs between the two runs.
    let system = |trace: &pimdes::trace::Trace, before: f64| {
        let mut bytes = Vec::new();
        trace.write_to(&mut bytes).unwrap();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        let events = v["traceEvents"].as_array().unwrap().clone();
        let kept = events
            .into_iter()
            .filter(|e| e["ph"] == "X" && e["pid"].as_u64().is_some_and(|p| p <= 3));
        let kept = kept.filter(|e| e["ts"].as_f64().unwrap() < before);
        kept.map(|e| e.to_string()).collect::<Vec<String>>()
    };
    let (_, whole) = traced(1_000_000);
    let whole = whole.unwrap();
    assert!(!whole.truncated());
    let cut_events = system(&trace, f64::INFINITY);
    assert!(!cut_events.is_empty());
    assert_eq!(cut_events, system(&whole, cut_us));
    let tracks: std::collections::BTreeSet<String> = cut_events
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).unwrap()["pid"].to_string())
        .collect();
    assert_eq!(
        tracks.len(),
        3,
        "every system track keeps events: {tracks:?}"
    );
}
