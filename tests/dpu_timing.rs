//! Each timing rule of the DPU model against a number worked out by hand, on the PrIM
//! machine: alpha_read = 77, alpha_write = 61, beta = 0.5 cycle/byte, DMA occupancy
//! 16 + 0.5 x size cycles, revolver interval 11 cycles, one issue slot per cycle.

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, Tasklet};

/// Every tasklet reads `size` bytes once.
struct OneRead {
    size: u32,
}

impl Kernel for OneRead {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(self.size)?;
        t.mram_read(t.id() as u64 * 2048, buf, self.size).await
    }
}

struct OneWrite {
    size: u32,
}

impl Kernel for OneWrite {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(self.size)?;
        t.mram_write(buf, 0, self.size).await
    }
}

/// Tasklet i computes `instructions[i]` instructions (or the first entry for all).
struct Compute {
    instructions: Vec<u64>,
}

impl Kernel for Compute {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let n = *self
            .instructions
            .get(t.id() as usize)
            .unwrap_or(&self.instructions[0]);
        t.compute(n).await
    }
}

fn launch<K: Kernel>(kernel: &K, tasklets: u32) -> pimdes::dpu::LaunchReport {
    let m = common::machine(&[]);
    Dpu::new(&m.dpu, 0).launch(kernel, tasklets).unwrap()
}

#[test]
fn one_tasklet_one_2048_byte_read_takes_alpha_plus_beta_times_size() {
    // 77 + 0.5 x 2048 = 1,101 cycles.
    assert_eq!(launch(&OneRead { size: 2048 }, 1).cycles, 1101);
    // 77 + 0.5 x 8 = 81 cycles.
    assert_eq!(launch(&OneRead { size: 8 }, 1).cycles, 81);
}

#[test]
fn one_tasklet_one_write_takes_the_write_alpha() {
    // 61 + 0.5 x 2048 = 1,085 cycles; 61 + 0.5 x 64 = 93.
    assert_eq!(launch(&OneWrite { size: 2048 }, 1).cycles, 1085);
    assert_eq!(launch(&OneWrite { size: 64 }, 1).cycles, 93);
}

#[test]
fn concurrent_reads_queue_at_the_engine_by_occupancy() {
    // Each 2,048-byte request keeps the engine busy 16 + 1,024 = 1,040 cycles; request k
    // starts at 1,040 k and completes 1,101 cycles later. 4 tasklets: 3 x 1,040 + 1,101.
    let r = launch(&OneRead { size: 2048 }, 4);
    assert_eq!(r.tasklet_cycles, vec![1101, 2141, 3181, 4221]);
    assert_eq!(r.stats.dma_busy_cycles, 4 * 1040);
}

#[test]
fn compute_loop_at_1_11_12_and_24_tasklets() {
    let k = Compute {
        instructions: vec![1000],
    };
    // One tasklet issues every 11 cycles: 11,000 cycles.
    assert_eq!(launch(&k, 1).cycles, 11_000);
    // 11 tasklets fill the 11 pipeline slots: still 11,000 cycles, 11x the throughput.
    assert_eq!(launch(&k, 11).cycles, 11_000);
    // 12 share one issue per cycle: each gets 1/12, so 12,000 cycles.
    assert_eq!(launch(&k, 12).cycles, 12_000);
    // 24: 24,000 cycles (throughput stays at 1 instruction per cycle).
    let r = launch(&k, 24);
    assert_eq!(r.cycles, 24_000);
    assert_eq!(r.stats.instructions, 24_000);
}

#[test]
fn the_pipeline_share_changes_when_a_tasklet_finishes() {
    // 12 tasklets: tasklet 0 has 100 instructions, the others 1,000. Until tasklet 0 ends
    // every tasklet gets 1/12 instruction per cycle: tasklet 0 ends at 1,200. The other 11
    // have 900 left at 1/11: 9,900 more cycles, so they end at 11,100.
    let mut instructions = vec![1000; 12];
    instructions[0] = 100;
    let r = launch(&Compute { instructions }, 12);
    assert_eq!(r.tasklet_cycles[0], 1200);
    assert!(r.tasklet_cycles[1..].iter().all(|&c| c == 11_100));
}

/// A tasklet that computes while another waits for its DMA gets its full 1/11 rate.
struct ComputeBesideDma;

impl Kernel for ComputeBesideDma {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        if t.id() == 0 {
            let buf = t.mem_alloc(2048)?;
            t.mram_read(0, buf, 2048).await?;
            t.compute(10).await
        } else {
            t.compute(100).await
        }
    }
}

#[test]
fn dma_waits_do_not_take_pipeline_slots() {
    // Tasklet 1: 100 x 11 = 1,100 cycles. Tasklet 0: read ends at 1,101, then 10
    // instructions alone at 1/11 (tasklet 1 ended at 1,100): 1,101 + 110 = 1,211.
    let r = launch(&ComputeBesideDma, 2);
    assert_eq!(r.tasklet_cycles, vec![1211, 1100]);
}

/// Mutex hand-over: each tasklet locks, computes 50 instructions, unlocks.
struct Critical;

impl Kernel for Critical {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.mutex_lock(0).await?;
        t.compute(50).await?;
        t.mutex_unlock(0).await
    }
}

#[test]
fn a_mutex_serialises_its_critical_sections() {
    // lock = 3, unlock = 2 instructions on this machine. Tasklet 0: lock at 0, 3 + 50
    // instructions alone at 1/11 = 583 cycles, then unlock hands over to tasklet 1 at 583.
    // Tasklet 0's 2 unlock instructions and tasklet 1's 3 lock + 50 run side by side at
    // 1/11 each: tasklet 0 ends at 583 + 22 = 605, tasklet 1 holds the lock until
    // 583 + 583 = 1,166 and ends at 1,166 + 22 = 1,188.
    let r = launch(&Critical, 2);
    assert_eq!(r.tasklet_cycles, vec![605, 1188]);
}

/// Tasklet i computes 100 (i + 1) instructions, then all meet at a barrier.
struct Meet;

impl Kernel for Meet {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.compute(100 * (t.id() as u64 + 1)).await?;
        t.barrier_wait(0).await
    }
}

#[test]
fn a_barrier_releases_everyone_when_the_last_arrives() {
    // 3 tasklets (below 11, so 1/11 each): the last arrives at 300 x 11 = 3,300; then each
    // pays barrier_wait = 10 instructions at 1/11: 3,410 for all.
    let r = launch(&Meet, 3);
    assert_eq!(r.tasklet_cycles, vec![3410, 3410, 3410]);
}

#[test]
fn cycles_convert_to_picoseconds_rounding_up() {
    let m = common::machine(&[]);
    let dpu = Dpu::new(&m.dpu, 0);
    let r = dpu.clone().launch(&OneRead { size: 2048 }, 1).unwrap();
    // 1,101 cycles at 350 MHz = 3,145,714.28... ps, rounded up.
    assert_eq!(dpu.duration(&r).ps(), 3_145_715);
}
