//! Warm-up batches left unsimulated (`batches.simulate_warmup = false`): the measured
//! batches come out the same as when the warm-up batches run on the machine, field by
//! field, across launch modes, held and streamed batches, query kinds and a batch that
//! leaves a rank's MRAM with its DPUs; fewer DPU events are simulated; and the protocols in
//! which a warm-up batch shapes the measured ones are refused, as is a trace of a batch
//! that is not simulated.

mod common;

use common::{assert_bad, run_tiny};
use pimdes::config::Override;
use pimdes::experiments::run::{RunReport, Silent, run};
use pimdes::machine::Machine;
use pimdes::partition::by_name;
use pimdes::workload::Workload;

/// Two ranks of 16 DPUs, with `sets` (keys of the machine file).
fn machine(sets: &[&str]) -> Machine {
    let text = include_str!("../machines/paper-2rank.toml");
    let o: Vec<Override> = sets
        .iter()
        .map(|s| Override::parse(&format!("machine.{s}")).unwrap())
        .collect();
    Machine::from_toml_str("paper-2rank.toml", text, &o).unwrap()
}

/// `workloads/tiny.toml`, smaller, with `sets`.
fn workload(sets: &[&str]) -> Workload {
    let mut o = vec![
        "data.pairs=120000",
        "queries.batch_size=3000",
        "batches.warmup=2",
        "batches.measured=2",
        "partition.alpha=4",
    ];
    o.extend_from_slice(sets);
    let o: Vec<Override> = o.iter().map(|s| Override::parse(s).unwrap()).collect();
    Workload::from_toml_str("tiny.toml", include_str!("../workloads/tiny.toml"), &o).unwrap()
}

fn report(machine_sets: &[&str], sets: &[&str]) -> RunReport {
    let qdd = by_name("qdd-double-scan").unwrap();
    run(
        &machine(machine_sets),
        &workload(sets),
        qdd.as_ref(),
        &mut Silent,
    )
    .unwrap()
}

/// The report without the host's facts and the configuration (which names the choice).
fn measured(r: &RunReport) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    let o = v.as_object_mut().unwrap();
    for k in ["host", "config", "config_fnv1a64"] {
        o.remove(k).unwrap();
    }
    v
}

/// Runs `sets` with and without the warm-up batches simulated; the measured batches must
/// be the same, with fewer DPU events simulated.
#[track_caller]
fn same_measured_batches(machine_sets: &[&str], sets: &[&str]) {
    let full = report(machine_sets, sets);
    let skipping = [sets, &["batches.simulate_warmup=false"]].concat();
    let skipped = report(machine_sets, &skipping);
    assert_eq!(measured(&full), measured(&skipped), "with {sets:?}");
    assert!(
        skipped.host.simulated_events < full.host.simulated_events,
        "{} events without the warm-up batches, {} with them",
        skipped.host.simulated_events,
        full.host.simulated_events
    );
}

#[test]
fn sync_and_async_launches_measure_the_same_batches() {
    same_measured_batches(&[], &[]);
    same_measured_batches(&[], &["run.launch=\"async\""]);
    same_measured_batches(&[], &["run.launch=\"async\"", "run.poll_interval_us=3"]);
    // Ranks switching MRAM one after another on the host's threads: another path.
    let serial = ["transfer.ownership_switch=\"serial\""];
    same_measured_batches(&serial, &["run.launch=\"async\""]);
    same_measured_batches(&serial, &[]);
}

#[test]
fn held_and_streamed_batches_and_every_kind_measure_the_same_batches() {
    same_measured_batches(&[], &["queries.kind=\"get\""]);
    same_measured_batches(&[], &["queries.kind=\"predecessor\""]);
    same_measured_batches(&[], &["queries.kind=\"range-max\""]);
    let streamed = [
        "batches.streaming=\"always\"",
        "batches.stream_fragments=700",
    ];
    same_measured_batches(&[], &streamed);
    // Split launches: every batch's shares need three launches.
    let split = [
        "batches.max_launches=4",
        "queries.batch_size=60000",
        "batches.measured=1",
    ];
    same_measured_batches(&["dpu.mram_size_bytes=300000"], &split);
    let r = report(&["dpu.mram_size_bytes=300000"], &split);
    assert_eq!(r.index_fields["launches_per_batch"], 3);
}

/// A batch of a few queries reaches some ranks only; a rank without results is not read,
/// so its DPUs keep its MRAM and the next batch's push to it pays the ownership switch.
/// The skipped warm-up batch must leave the ranks so too.
#[test]
fn a_rank_left_unread_by_the_warm_up_stays_with_its_dpus() {
    let ranks = ["ranks=4", "usable_dpus=64"];
    let few = ["queries.batch_size=2", "queries.kind=\"get\""];
    same_measured_batches(&ranks, &few);
    let r = report(&ranks, &few);
    let pushes = r.breakdown_us.0.iter().find(|(k, _)| k == "cpu_to_dpu");
    let switch_us = machine(&ranks)
        .transfer
        .ownership_switch_per_rank
        .as_us_f64();
    assert!(
        pushes.is_some_and(|(_, us)| *us > switch_us),
        "the push pays a switch: {pushes:?}"
    );
}

#[test]
fn the_table_says_the_warm_up_batches_were_not_simulated() {
    let o = run_tiny(&[], &["batches.simulate_warmup=false"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains(
            "yes, of the measured batches (2 warm-up not simulated: batches.simulate_warmup = false)"
        ),
        "{}",
        o.stdout
    );
    let json = run_tiny(&["--json"], &["batches.simulate_warmup=false"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        v["config"]["workload"]["batches"]["simulate_warmup"],
        serde_json::Value::Bool(false)
    );
    // Left at its default, the key is not written: older configurations keep their hash.
    let json = run_tiny(&["--json"], &[]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(v["config"]["workload"]["batches"]["simulate_warmup"].is_null());
}

#[test]
fn protocols_where_a_warm_up_batch_shapes_the_measured_ones_are_refused() {
    let skip = "batches.simulate_warmup=false";
    let o = run_tiny(&[], &[skip, "run.batches_in_flight=2"]);
    assert_bad(
        &o,
        &[
            "batches.simulate_warmup",
            "run.batches_in_flight=2",
            "2 batches in flight",
        ],
    );
    let open = ["run.arrival=\"open\"", "run.queries_per_s=1e6"];
    let o = run_tiny(&[], &[&[skip][..], &open].concat());
    assert_bad(&o, &["batches.simulate_warmup", "open arrivals"]);
    let o = run_tiny(&[], &[skip, "run.index=\"pim-tree\""]);
    assert_bad(
        &o,
        &["batches.simulate_warmup", "pim-tree simulates every batch"],
    );
    let o = run_tiny(&[], &[skip, "batches.simulate_warmup=\"no\""]);
    assert_bad(&o, &["batches.simulate_warmup", "expected a boolean"]);
}

#[test]
fn a_trace_of_a_batch_not_simulated_is_refused() {
    let trace = std::env::temp_dir().join(format!("warmup-skip-{}.json", std::process::id()));
    let path = trace.to_str().unwrap();
    let skip = "batches.simulate_warmup=false";
    let o = run_tiny(&["--trace", path, "--trace-batches", "1..3"], &[skip]);
    assert_bad(
        &o,
        &["--trace-batches", "warm-up batch 1", "trace batches 2 to 4"],
    );
    assert!(!trace.exists(), "no trace written");
    let o = run_tiny(&["--trace", path, "--trace-batches", "2"], &[skip]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    // The trace says its warm-up batches were not simulated.
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let note = written["otherData"]["warmup"].as_str().unwrap_or_default();
    assert!(note.contains("warm-up batches 0 to 1"), "{note}");
    std::fs::remove_file(&trace).unwrap();
}

/// `pimdes compare` takes a run that left its warm-up batches unsimulated against one that
/// simulated them: the key changes no measured figure, so it is not a configuration change.
#[test]
fn compare_takes_runs_with_and_without_the_warm_up_simulated() {
    let dir = std::env::temp_dir().join(format!("warmup-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (full, skipped) = (dir.join("full.json"), dir.join("skipped.json"));
    let (full, skipped) = (full.to_str().unwrap(), skipped.to_str().unwrap());
    assert_eq!(run_tiny(&["--quiet", "--out", full], &[]).code, Some(0));
    let skip = ["batches.simulate_warmup=false"];
    assert_eq!(
        run_tiny(&["--quiet", "--out", skipped], &skip).code,
        Some(0)
    );
    let o = common::pimdes(&["compare", full, skipped]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    // Another key still makes another configuration.
    let other = ["batches.simulate_warmup=false", "queries.skew=0.5"];
    assert_eq!(
        run_tiny(&["--quiet", "--out", skipped], &other).code,
        Some(0)
    );
    let o = common::pimdes(&["compare", full, skipped]);
    assert_bad(&o, &["config.workload.queries.skew"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
