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
//!
//! **RED** (`RED/dpu/task.c`, defaults of `RED/Makefile`: 16 tasklets, `BL = 10`, `INT64`,
//! `VERSION = SINGLE`): each tasklet sums its 1,024-byte blocks of int64 elements in WRAM,
//! stores its sum in a shared array, meets the others at a barrier, and tasklet 0 adds the
//! sums. The host shares the input out as for VA (8-byte elements need no rounding).

use super::launch_one;
use crate::dpu::{Kernel, KernelError, Op, Tasklet};
use crate::error::Error;
use crate::host::Host;
use crate::machine::Machine;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering::Relaxed;

/// PrIM VA's defaults (`VA/Makefile`).
pub const VA_TASKLETS: u32 = 16;
const BLOCK_BYTES: u32 = 1 << 10;
const ELEMENT_BYTES: u64 = 4;

/// PrIM RED's default tasklets (`RED/Makefile`).
pub const RED_TASKLETS: u32 = 16;

/// One kernel run of a PrIM application (the `prim-*` suites add the host's transfers).
#[derive(Debug, Clone, PartialEq)]
pub struct AppRecord {
    /// `va`, `red`, `bs`, `gemv` or `sel`.
    pub app: String,
    pub dpus: u32,
    /// Elements of the whole input (PrIM's `-i`; BS: the vector every DPU holds; GEMV: the
    /// matrix's rows).
    pub elements: u64,
    /// Elements each DPU processes (BS: its queries; GEMV: its rows).
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
pub fn va(machine: &Machine, dpus: u32, elements: u64) -> Result<AppRecord, Error> {
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
        if i32::from_le_bytes(y.try_into().expect("4 bytes")) != want {
            return Err(Error::Verification(format!(
                "VA on {dpus} DPUs: element {i} wrong"
            )));
        }
    }
    record(
        machine,
        ("va", VA_TASKLETS),
        dpus,
        elements,
        share,
        report.cycles,
    )
}

struct Reduction {
    share_bytes: u64,
    sums: Vec<AtomicI64>,
    total: AtomicI64,
}

impl Kernel for Reduction {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.barrier_wait(0).await?;
        let a = t.mem_alloc(BLOCK_BYTES)?;
        // Per element: one WRAM load (8 bytes), the 64-bit add, the loop's overhead.
        let per_element = t.cost(Op::WramAccess) + t.cost(Op::AddI64) + t.cost(Op::LoopIteration);
        let stride = u64::from(BLOCK_BYTES) * u64::from(t.tasklets());
        let mut at = u64::from(t.id()) * u64::from(BLOCK_BYTES);
        let mut sum = 0i64;
        while at < self.share_bytes {
            let size = (self.share_bytes - at).min(u64::from(BLOCK_BYTES)) as u32;
            t.mram_read(at, a, size).await?;
            t.with_wram(a, size, |x| {
                for e in x.chunks_exact(8) {
                    sum = sum.wrapping_add(i64::from_le_bytes(e.try_into().expect("8 bytes")));
                }
            })?;
            t.compute(per_element * u64::from(size) / 8).await?;
            at += stride;
        }
        // The tasklet's sum into the shared array; after the barrier tasklet 0 adds them.
        self.sums[t.id() as usize].store(sum, Relaxed);
        t.op(Op::WramAccess, 1).await?;
        t.barrier_wait(0).await?;
        if t.id() == 0 {
            let total = self
                .sums
                .iter()
                .fold(0i64, |s, x| s.wrapping_add(x.load(Relaxed)));
            let others = u64::from(t.tasklets() - 1);
            t.compute(others * (t.cost(Op::WramAccess) + t.cost(Op::AddI64)))
                .await?;
            self.total.store(total, Relaxed);
        }
        Ok(())
    }
}

/// One RED run: `elements` int64 in all on `dpus` DPUs, the sum checked.
pub fn red(machine: &Machine, dpus: u32, elements: u64) -> Result<AppRecord, Error> {
    let share = elements.div_ceil(u64::from(dpus));
    let kernel = Reduction {
        share_bytes: share * 8,
        sums: (0..RED_TASKLETS).map(|_| AtomicI64::new(0)).collect(),
        total: AtomicI64::new(0),
    };
    let input: Vec<i64> = (0..share).map(|i| i64::from(va_input(2, i))).collect();
    let bytes: Vec<u8> = input.iter().flat_map(|x| x.to_le_bytes()).collect();
    let (report, _) = launch_one(machine, &kernel, RED_TASKLETS, |d| {
        d.mram_mut().write(0, &bytes)
    })?;
    let want = input.iter().fold(0i64, |s, &x| s.wrapping_add(x));
    if kernel.total.load(Relaxed) != want {
        return Err(Error::Verification(format!(
            "RED on {dpus} DPUs: wrong sum"
        )));
    }
    record(
        machine,
        ("red", RED_TASKLETS),
        dpus,
        elements,
        share,
        report.cycles,
    )
}

/// The record of `dpus` DPUs each running `cycles` of one application (name, tasklets); an
/// error when the launch would pass the simulator's time ceiling (absurd machine costs).
pub(super) fn record(
    machine: &Machine,
    (app, tasklets): (&str, u32),
    dpus: u32,
    elements: u64,
    share: u64,
    cycles: u64,
) -> Result<AppRecord, Error> {
    let kernel_time = machine.dpu.clock.to_time(crate::engine::Cycles(cycles));
    // PrIM allocates `dpus` DPUs and launches them; the ranks of the others are not launched.
    let launch = Host::new(&machine.allocated(dpus)).launch(&vec![cycles; dpus as usize])?;
    Ok(AppRecord {
        app: app.to_owned(),
        dpus,
        elements,
        elements_per_dpu: share,
        tasklets,
        dpu_kernel_ms: kernel_time.as_us_f64() / 1000.0,
        launch_ms: launch.as_us_f64() / 1000.0,
    })
}
