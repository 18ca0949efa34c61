//! PrIM applications on the machine model (`pimdes microbench apps`): VA at the published
//! runs' DPU counts and sizes, its result checked inside the suite, and its timing against
//! hand-worked rules. The comparison with the published hardware times is in
//! docs/validation.md; no parameter was set from it.

mod common;

use pimdes::microbench::{BS_RUNS, GEMV_RUNS, RED_RUNS, VA_RUNS, apps, bs, gemv, red, va};

#[test]
fn va_runs_every_published_configuration_and_launches_cost_their_fixed_part() {
    let machine = common::machine(&[]);
    let records = apps(&machine).unwrap();
    assert_eq!(
        records.len(),
        VA_RUNS.len() + RED_RUNS.len() + BS_RUNS.len() + GEMV_RUNS.len()
    );
    let fixed_ms = machine.transfer.launch_fixed.as_us_f64() / 1000.0;
    for r in &records {
        assert!(
            (r.launch_ms - r.dpu_kernel_ms - fixed_ms).abs() < 1e-9,
            "{r:?}: the launch is its fixed cost plus the slowest DPU"
        );
        let share = match r.app.as_str() {
            // BS: the queries of a DPU, p / 8 in all padded to DPUs x 16 tasklets.
            "bs" => (r.elements / 8).next_multiple_of(u64::from(r.dpus) * 16) / u64::from(r.dpus),
            _ => r.elements.div_ceil(u64::from(r.dpus)),
        };
        assert_eq!(r.elements_per_dpu, share, "{r:?}");
    }
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
