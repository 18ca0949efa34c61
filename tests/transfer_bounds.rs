//! The run report's `transfer_bounds`: which term of the transfer model bounds each
//! measured transfer, by stage. Against the machine's numbers: on paper-2rank the host's
//! cap binds both directions; with the caps lifted, the ranks' own rates do; and every
//! measured transfer is counted once.

mod common;

use common::run_tiny;
use serde_json::{Value, json};

fn bounds(sets: &[&str]) -> Value {
    let o = run_tiny(&["--json", "--quiet"], sets);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let report: Value = serde_json::from_str(&o.stdout).unwrap();
    report["transfer_bounds"].clone()
}

#[test]
fn the_host_cap_binds_until_it_is_lifted() {
    // tiny.toml measures 3 batches of one push and one pull each.
    let capped = json!({"cpu_to_dpu": {"host-cap": 3}, "dpu_to_cpu": {"host-cap": 3}});
    assert_eq!(bounds(&[]), capped);
    // Two ranks at 6.68 and 4.74 GB/s: below caps of 200 GB/s, so the ranks' rates bind.
    let lifted = [
        "machine.transfer.host_cap_cpu_dpu_gb_per_s=200",
        "machine.transfer.host_cap_dpu_cpu_gb_per_s=200",
    ];
    let ranks = json!({"cpu_to_dpu": {"per-rank-rate": 3}, "dpu_to_cpu": {"per-rank-rate": 3}});
    assert_eq!(bounds(&lifted), ranks);
    // A call's fixed cost above everything else: the call binds.
    let slow_calls = ["machine.transfer.call_fixed_us=100000"];
    let calls = json!({"cpu_to_dpu": {"per-call": 3}, "dpu_to_cpu": {"per-call": 3}});
    assert_eq!(bounds(&slow_calls), calls);
}

#[test]
fn split_launches_count_each_transfer() {
    let split = [
        "data.pairs=120000",
        "queries.batch_size=60000",
        "batches.max_launches=4",
        "machine.dpu.mram_size_bytes=300000",
    ];
    let b = bounds(&split);
    // 3 measured batches of 3 launches, each with a push and a pull.
    for stage in ["cpu_to_dpu", "dpu_to_cpu"] {
        let counted: u64 = b[stage]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(counted, 9, "{stage}: {b}");
    }
}

/// Each direction's padded bytes are what a parallel transfer moves: the largest buffer
/// of the rank times its DPUs that have one (one rank of 16 here, every DPU with queries:
/// a multiple of 16, above the bytes carried under skew), and the table's row gives both
/// counts in MB.
#[test]
fn padded_bytes_are_the_largest_buffer_times_the_ranks_dpus() {
    let sets = [
        "machine.ranks=1",
        "machine.usable_dpus=16",
        "batches.measured=1",
    ];
    let o = run_tiny(&["--json", "--quiet"], &sets);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let report: Value = serde_json::from_str(&o.stdout).unwrap();
    let metric = |stage: &str, key: &str| {
        let m = &report["policies"][stage]["metrics"][key];
        m.as_f64().unwrap_or_else(|| panic!("{stage}.{key}: {m}"))
    };
    let push = (
        metric("routing", "bytes_sent"),
        metric("routing", "bytes_moved_with_padding"),
    );
    let pull = (
        metric("postprocessing", "bytes_received"),
        metric("postprocessing", "bytes_moved_with_padding"),
    );
    for (carried, moved) in [push, pull] {
        assert!(
            moved > carried && moved % 16.0 == 0.0,
            "{carried} / {moved}"
        );
    }
    let table = run_tiny(&["--quiet"], &sets).stdout;
    let row = format!(
        "CPU -> DPU {:.2} / {:.2} MB, DPU -> CPU {:.2} / {:.2} MB (batch mean)",
        push.0 / 1e6,
        push.1 / 1e6,
        pull.0 / 1e6,
        pull.1 / 1e6
    );
    assert!(table.contains(&row), "{row}\n{table}");
}
