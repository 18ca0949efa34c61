//! PrIM applications on the machine model (`pimdes microbench apps`): VA at the published
//! runs' DPU counts and sizes, its result checked inside the suite, and its timing against
//! hand-worked rules. The comparison with the published hardware times is in
//! docs/validation.md; no parameter was set from it.

mod common;

use pimdes::microbench::prim::{PrimSweep, prim, published};
use pimdes::microbench::{Benchmark, bs, gemv, red, sel, sel_kept, uni, uni_kept, va};

#[test]
fn every_published_run_is_modelled_and_launches_cost_their_fixed_part() {
    let machine = common::machine(&[]);
    let fixed_ms = machine.transfer.launch_fixed.as_us_f64() / 1000.0;
    for b in Benchmark::ALL {
        let records = prim(b, &machine, &PrimSweep::default()).unwrap();
        assert_eq!(records.len(), published(b).count(), "{b:?}");
        for r in &records {
            assert!(r.hardware.is_some(), "{r:?}: a published run");
            assert!(
                (r.kernel_ms - r.slowest_dpu_ms - fixed_ms).abs() < 1e-9,
                "{r:?}: the launch is its fixed cost plus the slowest DPU"
            );
            let n = r.input_size;
            let share = match b {
                // BS: the queries of a DPU, p / 8 in all padded to DPUs x 16 tasklets.
                Benchmark::Bs => {
                    (n / 8).next_multiple_of(u64::from(r.dpus) * 16) / u64::from(r.dpus)
                }
                // SEL: rounded up to whole rounds of 16 tasklets x 128 elements.
                Benchmark::Sel | Benchmark::Uni => {
                    n.div_ceil(u64::from(r.dpus)).next_multiple_of(2048)
                }
                _ => n.div_ceil(u64::from(r.dpus)),
            };
            assert_eq!(r.input_per_dpu, share, "{r:?}");
        }
    }
}

#[test]
fn a_launch_costs_the_ranks_of_the_allocated_dpus_only() {
    // 2,556 usable DPUs on 40 ranks: ranks 0, 1 and 2 keep 63, 64 and 64 of them (the
    // faulty ones spread evenly), so the first 63 DPUs are on one rank, the first 127 on
    // two. With 1 us per launched rank, 1 and 63 DPUs launch in 150 + 1 us, 64 and 127 in
    // 150 + 2, 128 in 150 + 3. Before, all 40 ranks were charged.
    let machine = common::machine(&["transfer.launch_per_rank_us=1"]);
    assert_eq!(machine.usable_dpus_per_rank[..3], [63, 64, 64]);
    let sweep = PrimSweep {
        input_size: Some(65_536),
        dpus: Some(vec![1, 63, 64, 127, 128]),
    };
    let launch_us: Vec<f64> = prim(Benchmark::Va, &machine, &sweep)
        .unwrap()
        .iter()
        .map(|r| ((r.kernel_ms - r.slowest_dpu_ms) * 1000.0 * 1e6).round() / 1e6)
        .collect();
    assert_eq!(launch_us, [151.0, 151.0, 152.0, 152.0, 153.0]);
}

#[test]
fn va_pushes_its_arguments_and_both_vectors_one_call_each() {
    // 1 DPU, 2,097,152 int32: three calls of 100 us (arguments, A, B), and 2 x 8 MiB at the
    // 0.33 GB/s of one DPU = 2 x 25.420024 ms: 51.140 ms.
    let machine = common::machine(&[]);
    let sweep = PrimSweep {
        input_size: Some(2_097_152),
        dpus: Some(vec![1]),
    };
    let r = &prim(Benchmark::Va, &machine, &sweep).unwrap()[0];
    let want = 0.3 + 2.0 * 8_388_608.0 / 0.33e9 * 1e3 + 12.0 / 0.33e9 * 1e3;
    assert!((r.cpu_dpu_ms - want).abs() < 1e-5, "{} ms", r.cpu_dpu_ms);
}

#[test]
fn sel_retrieves_each_dpus_kept_elements_in_one_serial_call_per_dpu() {
    // 4 DPUs, 524,288 elements: each keeps 65,536 (the odd values 1, 3, ...), 512 KiB. After
    // the launch: the tasklets' counts (64 B per DPU) in one parallel read, 100 us + the
    // 67 us ownership switch of the one rank + 256 B at 0.12 GB/s per DPU (0.53 us); then
    // four serial calls of 100 us + 524,288 B at 0.12 GB/s (4,369.07 us): 18.0438 ms.
    let machine = common::machine(&[]);
    let sweep = PrimSweep {
        input_size: Some(524_288),
        dpus: Some(vec![4]),
    };
    let r = &prim(Benchmark::Sel, &machine, &sweep).unwrap()[0];
    let serial_us = 4.0 * (100.0 + 524_288.0 / 0.12e9 * 1e6);
    let want_ms = (100.0 + 67.0 + 64.0 / 0.12e9 * 1e6 + serial_us) / 1000.0;
    assert!((r.dpu_cpu_ms - want_ms).abs() < 1e-3, "{} ms", r.dpu_cpu_ms);
    assert_eq!(
        (0..4).map(|d| sel_kept(524_288, 4, d)).sum::<u64>(),
        262_144
    );
}

#[test]
fn sel_keeps_half_of_every_block_and_pads_whole_rounds() {
    let machine = common::machine(&[]);
    // 3,000 elements on 2 DPUs: 1,500 each, padded to one round of 2,048; 750 kept on
    // each; the checks inside `sel` compare every kept element with the host's.
    let r = sel(&machine, 2, 3_000).unwrap();
    assert_eq!(r.elements_per_dpu, 2048);
    assert_eq!(sel_kept(3_000, 2, 0) + sel_kept(3_000, 2, 1), 1_500);
    // Twice the rounds, about twice the kernel.
    let one = sel(&machine, 1, 32_768).unwrap();
    let two = sel(&machine, 1, 65_536).unwrap();
    let ratio = two.dpu_kernel_ms / one.dpu_kernel_ms;
    assert!((1.9..2.05).contains(&ratio), "{ratio}");
}

#[test]
fn va_time_depends_on_the_share_per_dpu_and_runs_at_seven_cycles_per_element() {
    let machine = common::machine(&[]);
    let one = va(&machine, 1, 2_097_152).unwrap();
    let four = va(&machine, 4, 8_388_608).unwrap();
    assert_eq!(
        one.dpu_kernel_ms, four.dpu_kernel_ms,
        "the same share, the same kernel"
    );
    // 16 tasklets keep the pipeline full (11 suffice): one instruction per cycle. Per
    // element: 3 WRAM accesses + 1 add + 3 of loop overhead = 7 instructions; the DMA of
    // 12 bytes per element (6.2 cycles of bank occupancy) overlaps.
    let cycles = one.dpu_kernel_ms * 1e-3 * machine.dpu.clock.hz() as f64;
    let per_element = cycles / one.elements_per_dpu as f64;
    assert!(
        (7.0..7.05).contains(&per_element),
        "{per_element} cycles per element"
    );
}

#[test]
fn red_runs_at_six_cycles_per_element_plus_its_final_reduction() {
    let machine = common::machine(&[]);
    let one = red(&machine, 1, 2_097_152).unwrap();
    // Per element: 1 WRAM load + 2 for the 64-bit add + 3 of loop overhead = 6, one per
    // cycle with 16 tasklets; 8 bytes of DMA per element (4.1 cycles of occupancy) overlap.
    let cycles = one.dpu_kernel_ms * 1e-3 * machine.dpu.clock.hz() as f64;
    let per_element = cycles / one.elements_per_dpu as f64;
    assert!(
        (6.0..6.05).contains(&per_element),
        "{per_element} cycles per element"
    );
    assert_eq!(
        red(&machine, 4, 8_388_608).unwrap().dpu_kernel_ms,
        one.dpu_kernel_ms
    );
}

#[test]
fn bs_time_grows_with_the_queries_per_dpu_and_the_steps_per_query() {
    let machine = common::machine(&[]);
    // The same vector, twice the queries per DPU: twice the kernel (within 1 %).
    let a = bs(&machine, 4, 131_072).unwrap();
    let b = bs(&machine, 4, 262_144).unwrap();
    let per_query = |r: &pimdes::microbench::AppRecord| r.dpu_kernel_ms / r.elements_per_dpu as f64;
    // Twice the vector is one more halving step per query: a little more per query.
    assert!(per_query(&b) > per_query(&a) && per_query(&b) < 1.2 * per_query(&a));
    // 4 DPUs share the queries of one: about a quarter of the kernel.
    let one = bs(&machine, 1, 131_072).unwrap();
    let ratio = one.dpu_kernel_ms / a.dpu_kernel_ms;
    assert!((3.9..4.1).contains(&ratio), "{ratio}");
}

#[test]
fn gemv_runs_at_the_machine_files_multiply_cost_per_element() {
    let machine = common::machine(&[]);
    let one = gemv(&machine, 1, 8192).unwrap();
    // Per element: 4 WRAM accesses + 30 for the 32-bit multiply + 1 add + 3 of loop
    // overhead = 38 instructions, one per cycle with 16 tasklets (the two 1,024-byte reads
    // per row, 1,056 cycles of bank occupancy, overlap); plus 14 per row and 8 per row of
    // the pair's 16: 2,454 cycles per row.
    let cycles = one.dpu_kernel_ms * 1e-3 * machine.dpu.clock.hz() as f64;
    let per_row = cycles / one.elements_per_dpu as f64;
    assert!(
        (2454.0..2470.0).contains(&per_row),
        "{per_row} cycles per row"
    );
    assert_eq!(
        gemv(&machine, 4, 32_768).unwrap().dpu_kernel_ms,
        one.dpu_kernel_ms
    );
}

#[test]
fn uni_keeps_one_of_each_pair_and_every_dpu_repeats_its_neighbours_last_value() {
    // 0, 2, 2, 4, 4, ...: a DPU of S elements keeps S / 2 + 1 values (its first, and one at
    // each odd index), so 4 DPUs of 131,072 keep 4 x 65,537; the host's stitching drops the
    // three repeated first values, leaving 524,288 / 2 + 1.
    let kept: Vec<u64> = (0..4).map(|d| uni_kept(524_288, 4, d)).collect();
    assert_eq!(kept, [65_537; 4]);
    assert_eq!(kept.iter().sum::<u64>() - 3, 262_145);
    // A DPU of padding only keeps the one repeated value.
    assert_eq!(uni_kept(3_000, 2, 1), 1 + 952 / 2);
    assert_eq!(uni_kept(2_048, 2, 1), 1);
    // The kernel's output is checked inside `uni`, every DPU, across tasklets and rounds.
    let machine = common::machine(&[]);
    let r = uni(&machine, 2, 5_000).unwrap();
    assert_eq!(r.elements_per_dpu, 4096);
}
