//! Values that pass validation one by one but whose products cannot be simulated (time
//! that overflows, a layout that does not fit) are input errors naming the keys, not panics.

mod common;

use common::{assert_bad, pimdes};

#[test]
fn a_transfer_rate_too_slow_for_the_machine_is_refused() {
    let set = "machine.transfer.cpu_dpu_gb_per_s_per_dpu=0.000001";
    let o = pimdes(&["microbench", "transfer", "--set", set]);
    assert_bad(
        &o,
        &[
            &format!("--set {set}"),
            "`transfer.cpu_dpu_gb_per_s_per_dpu`",
            "2556 DPUs",
            "dpu.mram_size_bytes",
            "above the 1000000 s limit",
        ],
    );
    // The same rate on a run's machine file is refused the same way, before simulating.
    let o = pimdes(&[
        "partition",
        "--machine",
        "machines/paper-1012.toml",
        "--workload",
        "workloads/tiny.toml",
        "--set",
        "machine.transfer.host_cap_dpu_cpu_gb_per_s=0.000001",
    ]);
    assert_bad(&o, &["`transfer.host_cap_dpu_cpu_gb_per_s`", "too slow"]);
}

#[test]
fn a_microbenchmark_layout_larger_than_mram_is_refused() {
    let set = "machine.dpu.mram_size_bytes=4096";
    for suite in ["arithmetic", "mram", "stream", "all"] {
        let o = pimdes(&["microbench", suite, "--set", set]);
        assert_bad(
            &o,
            &[
                &format!("--set {set}: key `dpu.mram_size_bytes`"),
                "microbenchmark lays out",
                "each DPU has 4096",
            ],
        );
    }
    // Exactly the layout is enough.
    let o = pimdes(&[
        "microbench",
        "stream",
        "--json",
        "--set",
        "machine.dpu.mram_size_bytes=800768",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
}

#[test]
fn an_ownership_switch_too_slow_for_every_rank_is_refused() {
    // 1e9 us per rank on the 2,556-DPU machine: over 1e6 s to switch every rank.
    let set = "machine.transfer.ownership_switch_us_per_rank=1e9";
    let o = pimdes(&["microbench", "transfer", "--set", set]);
    assert_bad(
        &o,
        &["`transfer.ownership_switch_us_per_rank`", "simulated time"],
    );
}

#[test]
fn fixed_costs_that_would_overflow_simulated_time_are_refused() {
    // 1,000 s of polling per batch over 2,002 batches: beyond the 10^6 s limit (only
    // async launches poll).
    let o = pimdes(&[
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
        "--set",
        "machine.transfer.poll_interval_us=1e9",
        "--set",
        "run.launch=async",
        "--set",
        "batches.measured=2000",
        "--set",
        "queries.batch_size=100",
    ]);
    assert_bad(&o, &["`batches.measured`", "fixed costs alone"]);
}

/// Host costs at their largest valid values times a run's queries pass the end of u64
/// picoseconds: the run stops at the simulator's time ceiling (2^62 ps) with an input
/// error naming the keys, instead of the panic "host work fits u64 picoseconds".
#[test]
fn host_costs_times_the_work_past_the_time_ceiling_are_bad_input() {
    let o = run_tiny(&[
        "machine.host.pack_ns_per_byte=1e9",
        "machine.host.route_ns_per_query=1e9",
        "machine.host.threads=1",
        "batches.measured=20",
    ]);
    // A rule between the costs and the work: every override of either is named.
    assert_bad(
        &o,
        &[
            "--set machine.host.pack_ns_per_byte=1e9 and --set machine.host.route_ns_per_query=1e9 and --set machine.host.threads=1 and --set batches.measured=20: key `host.pack_ns_per_byte`",
            "simulated time passed 4611686 s (2^62 ps, the simulator's ceiling) in batch 8",
            "host.*_ns_per_*",
        ],
    );
    // Past the ceiling in the warm-up batch: the batch's size is named, since fewer
    // measured batches would not help.
    let o = run_tiny(&[
        "machine.host.pack_ns_per_byte=1e9",
        "machine.host.threads=1",
        "queries.batch_size=200000",
        "batches.measured=3",
    ]);
    assert_bad(
        &o,
        &[
            "and --set queries.batch_size=200000: key `host.pack_ns_per_byte`",
            "in batch 0",
        ],
    );
    assert!(!o.stderr.contains("batches.measured=3"), "{}", o.stderr);
    // The DPU's costs count too: the pipeline's interval among them.
    let dpu_costs = [
        "machine.dpu.instructions.alu=1000000",
        "machine.dpu.pipeline.tasklet_issue_interval_cycles=1024",
        "machine.dpu.clock_mhz=1",
    ];
    let o = run_tiny(&dpu_costs);
    let sets: Vec<String> = dpu_costs.iter().map(|s| format!("--set {s}")).collect();
    let named = format!("error: {}: key `dpu.instructions.alu`", sets.join(" and "));
    assert_bad(&o, &[&named, "simulated time passed"]);
}

/// `pimdes run --quiet` of the tiny workload on the 2-rank machine with `sets`.
fn run_tiny(sets: &[&str]) -> common::Outcome {
    common::run_tiny(&["--quiet"], sets)
}

/// A serial transfer pays the call's fixed cost once per DPU: at its largest valid value on
/// 5,120 DPUs that passed the time ceiling and panicked in the transfer microbenchmark.
#[test]
fn a_call_cost_too_large_for_every_dpu_is_refused() {
    let o = pimdes(&[
        "microbench",
        "transfer",
        "--machine",
        "machines/upmem-2538.toml",
        "--set",
        "machine.ranks=80",
        "--set",
        "machine.usable_dpus=5120",
        "--set",
        "machine.transfer.call_fixed_us=1e9",
    ]);
    assert_bad(
        &o,
        &[
            // Every override of the rule's keys (the cost and the DPUs) is named.
            "--set machine.transfer.call_fixed_us=1e9 and --set machine.usable_dpus=5120 and --set machine.ranks=80: key `transfer.call_fixed_us`",
            "5120 DPUs at most, would take over 1000000 s",
        ],
    );
}
