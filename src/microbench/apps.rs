//! PrIM applications (CMU-SAFARI/prim-benchmarks) as kernels on the machine model, at the
//! DPU counts and input sizes of the published real-hardware runs, so the DPU model is
//! checked on whole applications and not only on microbenchmarks.
//!
//! **VA** (`VA/dpu/task.c`, defaults of `VA/Makefile`: 16 tasklets, `BL = 10`, `INT32`):
//! each DPU holds its share of vectors A and B; each tasklet takes 1,024-byte blocks
//! `tasklets` apart, reads the block of A and of B, adds A into B element by element in
//! WRAM, and writes the block of B back. The host (`VA/host/app.c`) gives each DPU
//! `ceil(n / DPUs)` elements, rounded up to a multiple of 8 bytes, and times
//! `dpu_launch(DPU_SYNCHRONOUS)`; so the figure here is the launch's fixed cost plus the
//! slowest DPU's kernel (all DPUs get the same share, so one DPU is simulated).

use super::launch_one;
use crate::dpu::{Kernel, KernelError, LaunchError, Op, Tasklet};
use crate::host::Host;
use crate::machine::Machine;
use serde::Serialize;

/// PrIM VA's defaults (`VA/Makefile`).
pub const VA_TASKLETS: u32 = 16;
const BLOCK_BYTES: u32 = 1 << 10;
const ELEMENT_BYTES: u64 = 4;

/// The published real-hardware runs of VA: (DPUs, elements in all), from GitHub
/// VIA-Research/uPIMulator, `tools/upmem_reg_model/data/input.xlsx` (commit 870d916).
pub const VA_RUNS: [(u32, u64); 18] = [
    (1, 2_097_152),
    (4, 524_288),
    (4, 1_048_576),
    (4, 2_097_152),
    (4, 4_194_304),
    (4, 8_388_608),
    (4, 9_437_184),
    (16, 524_288),
    (16, 1_048_576),
    (16, 2_097_152),
    (16, 4_194_304),
    (16, 8_388_608),
    (16, 9_437_184),
    (64, 524_288),
    (64, 1_048_576),
    (64, 2_097_152),
    (64, 4_194_304),
    (64, 9_437_184),
];

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AppRecord {
    /// `va`.
    pub app: String,
    pub dpus: u32,
    /// Elements of the whole input (PrIM's `-i`).
    pub elements: u64,
    /// Elements each DPU processes.
    pub elements_per_dpu: u64,
    pub tasklets: u32,
    /// The slowest DPU's kernel alone.
    pub dpu_kernel_ms: f64,
    /// What PrIM's host times: the synchronous launch (fixed cost plus the slowest DPU).
    pub launch_ms: f64,
}

/// Elements per DPU as PrIM VA's host computes them.
fn va_share(elements: u64, dpus: u32) -> u64 {
    let share = elements.div_ceil(u64::from(dpus));
    // Rounded up to a multiple of 8 bytes: two 4-byte elements.
    share.next_multiple_of(8 / ELEMENT_BYTES)
}

/// MRAM VA lays out for `elements` in all on `dpus` DPUs: A, then B.
pub fn va_mram_bytes(elements: u64, dpus: u32) -> u64 {
    2 * va_share(elements, dpus) * ELEMENT_BYTES
}

struct VectorAdd {
    share_bytes: u64,
}

impl Kernel for VectorAdd {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.barrier_wait(0).await?;
        let a = t.mem_alloc(BLOCK_BYTES)?;
        let b = t.mem_alloc(BLOCK_BYTES)?;
        // Per element: two WRAM loads, the add, a WRAM store, the loop's overhead.
        let per_element =
            3 * t.cost(Op::WramAccess) + t.cost(Op::AddI32) + t.cost(Op::LoopIteration);
        let stride = u64::from(BLOCK_BYTES) * u64::from(t.tasklets());
        let mut at = u64::from(t.id()) * u64::from(BLOCK_BYTES);
        while at < self.share_bytes {
            let size = (self.share_bytes - at).min(u64::from(BLOCK_BYTES)) as u32;
            t.mram_read(at, a, size).await?;
            t.mram_read(self.share_bytes + at, b, size).await?;
            let mut sum = vec![0u8; size as usize];
            t.with_wram(a, size, |x| sum.copy_from_slice(x))?;
            t.with_wram(b, size, |y| {
                for (y, x) in y.chunks_exact_mut(4).zip(sum.chunks_exact(4)) {
                    let s = i32::from_le_bytes(y.try_into().expect("4 bytes"))
                        .wrapping_add(i32::from_le_bytes(x.try_into().expect("4 bytes")));
                    y.copy_from_slice(&s.to_le_bytes());
                }
            })?;
            t.compute(per_element * u64::from(size) / ELEMENT_BYTES)
                .await?;
            t.mram_write(b, self.share_bytes + at, size).await?;
            at += stride;
        }
        Ok(())
    }
}

/// The value of element `i` of vector `v` (0: A, 1: B).
fn va_input(v: u64, i: u64) -> i32 {
    (i.wrapping_mul(2_654_435_761).wrapping_add(v * 97) % 1_000_003) as i32 - 500_000
}

/// One VA run: `elements` in all on `dpus` DPUs of `machine`, the result checked.
pub fn va(machine: &Machine, dpus: u32, elements: u64) -> Result<AppRecord, LaunchError> {
    let share = va_share(elements, dpus);
    let share_bytes = share * ELEMENT_BYTES;
    let kernel = VectorAdd { share_bytes };
    let bytes = |v: u64| -> Vec<u8> {
        (0..share)
            .flat_map(|i| va_input(v, i).to_le_bytes())
            .collect()
    };
    let (report, dpu) = launch_one(machine, &kernel, VA_TASKLETS, |d| {
        d.mram_mut().write(0, &bytes(0));
        d.mram_mut().write(share_bytes, &bytes(1));
    })?;
    let mut out = vec![0u8; share_bytes as usize];
    dpu.mram().read(share_bytes, &mut out);
    for (i, y) in out.chunks_exact(4).enumerate() {
        let want = va_input(0, i as u64).wrapping_add(va_input(1, i as u64));
        assert_eq!(
            i32::from_le_bytes(y.try_into().expect("4 bytes")),
            want,
            "VA result wrong at element {i}"
        );
    }
    let kernel_time = machine
        .dpu
        .clock
        .to_time(crate::engine::Cycles(report.cycles));
    // The first `dpus` DPUs run it (PrIM allocates that many; the others stay idle).
    let mut cycles = vec![0; machine.dpus as usize];
    cycles[..dpus as usize].fill(report.cycles);
    let launch = Host::new(machine)
        .launch(&cycles)
        .expect("one launch stays below the time ceiling");
    Ok(AppRecord {
        app: "va".to_owned(),
        dpus,
        elements,
        elements_per_dpu: share,
        tasklets: VA_TASKLETS,
        dpu_kernel_ms: kernel_time.as_us_f64() / 1000.0,
        launch_ms: launch.as_us_f64() / 1000.0,
    })
}

/// Every published VA run that fits the machine (enough DPUs; MRAM for the share).
pub fn apps(machine: &Machine) -> Result<Vec<AppRecord>, LaunchError> {
    use rayon::prelude::*;
    VA_RUNS
        .par_iter()
        .filter(|&&(dpus, elements)| {
            dpus <= machine.dpus && va_mram_bytes(elements, dpus) <= machine.dpu.mram_size_bytes
        })
        .map(|&(dpus, elements)| va(machine, dpus, elements))
        .collect()
}
