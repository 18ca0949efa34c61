//! The host model's timing rules against numbers worked out by hand, on the PrIM machine:
//! call 100 us, launch 150 us, ownership switch 67 us per rank, CPU->DPU 0.33 GB/s per DPU
//! and 6.68 GB/s per rank, broadcast 16.88 GB/s per rank, host cap 25 GB/s, host CPU
//! 60 ns per query routed, 10 ns per result merged, 0.25 ns per byte packed, 32 threads.

mod common;

use pimdes::engine::Time;
use pimdes::host::{Direction, Host, HostWork};
use pimdes::system::exec::{TransferBound, transfer_bound};
use pimdes::system::program::TransferKind;

fn one_rank() -> Host {
    Host::new(&common::machine(&["ranks=1", "usable_dpus=64"]))
}

#[test]
fn a_parallel_transfer_with_unequal_sizes_costs_the_padded_size() {
    let host = one_rank();
    let mut sizes = vec![1_000_000u64; 64];
    sizes[17] = 2_000_000;
    let cost = host.push_parallel(&sizes);
    // Every DPU of the rank gets 2,000,000 bytes: 128 MB at 6.68 GB/s = 19,161,676,646.7 ps,
    // rounded up, plus the 100 us call.
    assert_eq!(cost.moved_bytes, 128_000_000);
    assert_eq!(cost.payload_bytes, 65_000_000);
    assert_eq!(cost.time, Time(100_000_000 + 19_161_676_647));
    // Exactly what equal 2 MB buffers cost.
    assert_eq!(host.push_parallel(&[2_000_000; 64]).time, cost.time);
}

#[test]
fn a_few_dpus_are_bound_by_the_per_dpu_rate() {
    let host = one_rank();
    let mut sizes = vec![0u64; 64];
    sizes[0] = 1_000_000;
    sizes[1] = 1_000_000;
    // 2 MB at 6.68 GB/s is below 1 MB at 0.33 GB/s = 3,030,303,030.3 ps.
    assert_eq!(
        host.push_parallel(&sizes).time,
        Time(100_000_000 + 3_030_303_031)
    );
}

#[test]
fn serial_transfers_add_up_one_call_per_dpu() {
    let host = one_rank();
    let mut sizes = vec![0u64; 64];
    sizes[0] = 1_000_000;
    sizes[5] = 1_000_000;
    let cost = host.serial(Direction::CpuDpu, &sizes);
    assert_eq!(cost.time, Time(2 * (100_000_000 + 3_030_303_031)));
}

#[test]
fn a_broadcast_is_bound_by_the_broadcast_rate_of_the_rank() {
    let host = one_rank();
    // 64 x 1 MB at 16.88 GB/s = 3,791,469,194.3 ps (above 1 MB at 0.33 GB/s).
    let cost = host.broadcast(&[true; 64], 1_000_000);
    assert_eq!(cost.time, Time(100_000_000 + 3_791_469_195));
    assert_eq!(cost.moved_bytes, 64_000_000);
}

#[test]
fn the_host_cap_bounds_a_whole_system_transfer() {
    let m = common::machine(&[]);
    let host = Host::new(&m);
    // 2,556 MB in all at 25 GB/s = 102.24 ms, above one rank's 64 MB at 6.68 GB/s. The
    // 40 ranks share the cap (625 MB/s each, below their own rate, so the cap binds
    // throughout); ranks of 63 DPUs end first and the rest speed up. Each completion is
    // rounded up to a picosecond, so the end may be a few picoseconds late, never early.
    let cost = host.push_parallel(&vec![1_000_000; m.dpus as usize]);
    let exact = 100_000_000 + 102_240_000_000;
    assert!(
        (exact..exact + 40).contains(&cost.time.ps()),
        "{:?}",
        cost.time
    );
}

#[test]
fn a_launch_waits_for_the_slowest_dpu() {
    let host = one_rank();
    // 350,000,000 cycles at 350 MHz = 1 s, plus the 150 us launch.
    let mut cycles = vec![100u64; 64];
    cycles[7] = 350_000_000;
    let t = host.launch(&cycles).unwrap();
    assert_eq!(t, Time(150_000_000 + 1_000_000_000_000));
    assert_eq!(host.ownership_switch(3), Time(3 * 67_000_000));
}

#[test]
fn host_cpu_work_is_spread_over_the_threads_it_may_use() {
    let host = one_rank();
    let work = HostWork {
        queries_routed: 1000,
        results_merged: 500,
        bytes_packed: 4000,
        ..HostWork::default()
    };
    // 1000 x 60 + 500 x 10 + 4000 x 0.25 = 66,000 ns.
    assert_eq!(host.cpu(work, 1).unwrap(), Time(66_000_000));
    assert_eq!(host.cpu(work, 4).unwrap(), Time(16_500_000));
    // At most the host's 32 threads.
    assert_eq!(host.cpu(work, 1000).unwrap(), Time(2_062_500));
}

// The system-scale terms (issue "Timing that holds at system scale"), each on the PrIM
// machine with only that term set.

#[test]
fn a_call_pays_its_fixed_cost_per_rank() {
    // Two ranks, 10 us per rank: 100 + 2 x 10 us, then each rank's 64 x 8 B = 512 B at
    // 6.68 GB/s = 76,646.7 ps, rounded up.
    let m = common::machine(&["ranks=2", "usable_dpus=128", "transfer.rank_fixed_us=10"]);
    let cost = Host::new(&m).push_parallel(&[8; 128]);
    assert_eq!(cost.time, Time(120_000_000 + 76_647));
    // A serial transfer's calls each involve one rank: 128 x (100 + 10 us + 8 B at 0.33 GB/s).
    let serial = Host::new(&m).serial(Direction::CpuDpu, &[8; 128]);
    assert_eq!(serial.time, Time(128 * (110_000_000 + 24_243)));
}

#[test]
fn a_launch_pays_its_fixed_cost_per_rank() {
    let m = common::machine(&[
        "ranks=3",
        "usable_dpus=192",
        "transfer.launch_per_rank_us=5",
    ]);
    let t = Host::new(&m).launch(&[0; 192]).unwrap();
    assert_eq!(t, Time(150_000_000 + 15_000_000));
}

#[test]
fn concurrent_ownership_switches_cost_one_rank() {
    let m = common::machine(&["transfer.ownership_switch=\"concurrent\""]);
    let host = Host::new(&m);
    assert_eq!(host.ownership_switch(3), Time(67_000_000));
    assert_eq!(host.ownership_switch(0), Time::ZERO);
    // The first read after a launch on 40 ranks pays one switch, not forty.
    let sizes = vec![8u64; m.dpus as usize];
    let serial = common::machine(&[]);
    let gap = Host::new(&serial).pull_after_launch(&sizes) - host.pull_after_launch(&sizes);
    assert_eq!(gap, Time(39 * 67_000_000));
}

#[test]
fn each_direction_has_its_own_host_cap() {
    // All 2,556 DPUs, 1 MB each: 2,556 MB at a DPU->CPU cap of 2.5 GB/s is 1.0224 s, far
    // above one rank's 64 MB at 4.74 GB/s; the CPU->DPU direction keeps 25 GB/s (102.24 ms).
    let m = common::machine(&["transfer.host_cap_dpu_cpu_gb_per_s=2.5"]);
    let host = Host::new(&m);
    let sizes = vec![1_000_000u64; m.dpus as usize];
    let pull = host.pull_parallel(&sizes).time.ps();
    let push = host.push_parallel(&sizes).time.ps();
    let pull_exact = 100_000_000 + 1_022_400_000_000;
    let push_exact = 100_000_000 + 102_240_000_000;
    assert!((pull_exact..pull_exact + 40).contains(&pull), "{pull}");
    assert!((push_exact..push_exact + 40).contains(&push), "{push}");
}

#[test]
fn a_broadcast_crosses_the_host_memory_system_once_per_rank() {
    // 1 MB to every DPU of 40 ranks at a 1 GB/s CPU->DPU cap: 40 MB through the host (40 ms),
    // not the 2,556 MB the DPUs receive (2.556 s); each rank alone would take 64 MB at
    // 16.88 GB/s = 3.79 ms.
    let m = common::machine(&["transfer.host_cap_cpu_dpu_gb_per_s=1"]);
    let cost = Host::new(&m).broadcast(&vec![true; m.dpus as usize], 1_000_000);
    let us = cost.time.as_us_f64() - 100.0;
    assert!((39_000.0..41_000.0).contains(&us), "{us} us");
    assert_eq!(cost.moved_bytes, m.dpus as u64 * 1_000_000);
}

#[test]
fn a_shared_cap_beside_both_directional_caps_is_refused() {
    let o = common::pimdes(&[
        "microbench",
        "transfer",
        "--set",
        "machine.transfer.host_cap_cpu_dpu_gb_per_s=5",
        "--set",
        "machine.transfer.host_cap_dpu_cpu_gb_per_s=5",
        "--quiet",
    ]);
    common::assert_bad(&o, &["transfer.host_cap_gb_per_s", "has no effect"]);
}

#[test]
fn a_ranks_transfer_threads_bound_its_part_when_they_transpose_slower_than_the_rank() {
    // One thread per rank transposing 2 GB/s: 64 x 1 MB = 64 MB at 2 GB/s (below the
    // rank's 6.68) = 32 ms, plus the 100 us call.
    let m = common::machine(&[
        "ranks=1",
        "usable_dpus=64",
        "transfer.threads_per_rank=1",
        "transfer.transpose_gb_per_s_per_thread=2",
    ]);
    let sizes = vec![1_000_000u64; 64];
    assert_eq!(
        Host::new(&m).push_parallel(&sizes).time,
        Time(100_000_000 + 32_000_000_000)
    );
    let bound = transfer_bound(&m, Direction::CpuDpu, TransferKind::Parallel, &sizes);
    assert_eq!(bound, TransferBound::Transposition);
    // A serial transfer moves one DPU's bytes at a time, at that DPU's rate here; with
    // a transposition slower still (0.05 GB/s) the transposition is named (a serial
    // transfer was always named per-dpu-rate).
    let serial = |m: &pimdes::machine::Machine| {
        transfer_bound(m, Direction::CpuDpu, TransferKind::Serial, &sizes)
    };
    assert_eq!(serial(&m), TransferBound::PerDpuRate);
    let slow = common::machine(&[
        "ranks=1",
        "usable_dpus=64",
        "transfer.threads_per_rank=1",
        "transfer.transpose_gb_per_s_per_thread=0.05",
    ]);
    assert_eq!(serial(&slow), TransferBound::Transposition);
    // Eight threads transpose 16 GB/s: the rank's own rate binds again (64 MB at 6.68 GB/s).
    let eight = common::machine(&[
        "ranks=1",
        "usable_dpus=64",
        "transfer.threads_per_rank=8",
        "transfer.transpose_gb_per_s_per_thread=2",
    ]);
    assert_eq!(
        Host::new(&eight).push_parallel(&sizes).time,
        Time(100_000_000 + 9_580_838_324)
    );
}

#[test]
fn a_broadcast_is_transposed_once_per_rank() {
    // 1 MB to 64 DPUs: the rank's threads transpose the 1 MB buffer once, at 0.01 GB/s
    // (100 ms), not the 64 MB the DPUs receive (6.4 s); the broadcast rate alone gives 3.79 ms.
    let m = common::machine(&[
        "ranks=1",
        "usable_dpus=64",
        "transfer.threads_per_rank=1",
        "transfer.transpose_gb_per_s_per_thread=0.01",
    ]);
    let cost = Host::new(&m).broadcast(&[true; 64], 1_000_000);
    assert_eq!(cost.time, Time(100_000_000 + 100_000_000_000));
}

#[test]
fn a_serial_call_is_transposed_on_one_thread() {
    // 1 MB at one thread's 0.1 GB/s = 10 ms (the per-DPU rate alone: 3.03 ms), even with
    // eight threads per rank.
    let m = common::machine(&[
        "ranks=1",
        "usable_dpus=64",
        "transfer.threads_per_rank=8",
        "transfer.transpose_gb_per_s_per_thread=0.1",
    ]);
    let mut sizes = vec![0u64; 64];
    sizes[3] = 1_000_000;
    let cost = Host::new(&m).serial(Direction::CpuDpu, &sizes);
    assert_eq!(cost.time, Time(100_000_000 + 10_000_000_000));
}

#[test]
fn all_ranks_share_the_hosts_threads_for_transposition() {
    // 2 host threads at 1 GB/s each: 2,556 MB through 2 GB/s (below the 25 GB/s cap) is
    // 1.278 s; each rank's 8 threads alone would allow 8 GB/s, above its 6.68.
    let m = common::machine(&[
        "host.threads=2",
        "transfer.threads_per_rank=8",
        "transfer.transpose_gb_per_s_per_thread=1",
    ]);
    let sizes = vec![1_000_000u64; m.dpus as usize];
    let push = Host::new(&m).push_parallel(&sizes).time.ps();
    let exact = 100_000_000 + 1_278_000_000_000;
    assert!((exact..exact + 40).contains(&push), "{push}");
    let bound = transfer_bound(&m, Direction::CpuDpu, TransferKind::Parallel, &sizes);
    assert_eq!(bound, TransferBound::Transposition);
}
