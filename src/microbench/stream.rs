//! PrIM `STREAM` (copy-dma, copy, add, scale, triad on 64-bit elements), on MRAM (whole
//! kernel timed: DMA plus compute) and on WRAM (only the compute between barriers timed),
//! plus a fine-grained `random` kernel (8-byte read-modify-write at random addresses,
//! like PrIM's random-access/GUPS study) to show what streaming buys.

use super::{launch_one, mb_per_s};
use crate::dpu::{Kernel, KernelError, LaunchError, Op, Tasklet};
use crate::machine::Machine;
use rayon::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// 64-bit elements per array per DPU (PrIM uses 2,097,152; the model reaches steady state
/// far sooner).
const ELEMENTS: u64 = 1 << 15;
const BLOCK_BYTES: u32 = 1024;
const ARRAY_BYTES: u64 = ELEMENTS * 8;
const SCALAR: u64 = 3;
/// Updates per tasklet of the random kernel.
const RANDOM_UPDATES: u64 = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StreamKernel {
    CopyDma,
    Copy,
    Add,
    Scale,
    Triad,
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Memory {
    Mram,
    Wram,
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct StreamRecord {
    pub kernel: StreamKernel,
    pub memory: Memory,
    pub tasklets: u32,
    pub bandwidth_mb_per_s: f64,
}

impl StreamKernel {
    /// Input arrays read per element.
    fn inputs(self) -> u64 {
        match self {
            StreamKernel::Add | StreamKernel::Triad => 2,
            _ => 1,
        }
    }

    /// Bytes counted per element: inputs read plus the output written (STREAM's rule).
    fn bytes_per_element(self) -> u64 {
        8 * (self.inputs() + 1)
    }

    /// Instructions per element of the WRAM loop.
    fn instructions(self, t: &Tasklet) -> u64 {
        let access = t.cost(Op::WramAccess);
        let lp = t.cost(Op::LoopIteration);
        match self {
            StreamKernel::CopyDma | StreamKernel::Random => 0,
            StreamKernel::Copy => 2 * access + lp,
            StreamKernel::Add => 3 * access + t.cost(Op::AddI64) + lp,
            StreamKernel::Scale => 2 * access + t.cost(Op::MulI64) + lp,
            StreamKernel::Triad => 3 * access + t.cost(Op::MulI64) + t.cost(Op::AddI64) + lp,
        }
    }

    fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            StreamKernel::CopyDma | StreamKernel::Copy | StreamKernel::Random => a,
            StreamKernel::Add => a.wrapping_add(b),
            StreamKernel::Scale => a.wrapping_mul(SCALAR),
            StreamKernel::Triad => a.wrapping_add(SCALAR.wrapping_mul(b)),
        }
    }
}

struct Stream {
    kernel: StreamKernel,
    memory: Memory,
    iterations: u64,
    cycles: Vec<AtomicU64>,
}

impl Kernel for Stream {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let a = t.mem_alloc(BLOCK_BYTES)?;
        let b = t.mem_alloc(BLOCK_BYTES)?;
        let words = (BLOCK_BYTES / 8) as usize;
        let (mut xa, mut xb) = (vec![0u64; words], vec![0u64; words]);
        let per_block = self.kernel.instructions(t) * words as u64;
        let stride = BLOCK_BYTES as u64 * t.tasklets() as u64;
        t.barrier_wait(0).await?;
        let begin = t.cycle();
        let mut timed = 0;
        for i in 0..self.iterations {
            let offset = i * stride + t.id() as u64 * BLOCK_BYTES as u64;
            t.mram_read(offset, a, BLOCK_BYTES).await?;
            if self.kernel.inputs() == 2 {
                t.mram_read(ARRAY_BYTES + offset, b, BLOCK_BYTES).await?;
            }
            let out = if self.kernel == StreamKernel::CopyDma {
                a
            } else {
                if self.memory == Memory::Wram {
                    t.barrier_wait(0).await?;
                }
                let start = t.cycle();
                t.wram_read_u64s(a, &mut xa)?;
                t.wram_read_u64s(b, &mut xb)?;
                for (x, &y) in xa.iter_mut().zip(&xb) {
                    *x = self.kernel.apply(*x, y);
                }
                t.wram_write_u64s(b, &xa)?;
                t.compute(per_block).await?;
                timed += t.cycle() - start;
                if self.memory == Memory::Wram {
                    t.barrier_wait(0).await?;
                }
                b
            };
            t.mram_write(out, 2 * ARRAY_BYTES + offset, BLOCK_BYTES)
                .await?;
        }
        let total = match self.memory {
            Memory::Mram => t.cycle() - begin,
            Memory::Wram => timed,
        };
        self.cycles[t.id() as usize].store(total, Ordering::Relaxed);
        Ok(())
    }
}

/// 8-byte read-modify-write at pseudo-random addresses of a table of [`ELEMENTS`] words.
struct Random {
    cycles: Vec<AtomicU64>,
}

/// The MRAM addresses tasklet `tasklet` of the random kernel updates, in order (a linear
/// congruential generator seeded by the tasklet id).
fn random_addresses(tasklet: u32) -> impl Iterator<Item = u64> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ tasklet as u64;
    (0..RANDOM_UPDATES).map(move |_| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % ELEMENTS) * 8
    })
}

/// Checks the random kernel's table (zero before the launch) against a count of every
/// tasklet's updates per word. Tasklets update without a lock, so an update whose read came
/// before another tasklet's write of the same word can be lost; as HPCC RandomAccess does,
/// up to 1 % of the updates may be. No word may hold more than its updates, and a word
/// updated at all holds at least 1.
fn check_random(table: &[u64], tasklets: u32) -> Result<(), String> {
    let mut want = vec![0u64; ELEMENTS as usize];
    for t in 0..tasklets {
        for addr in random_addresses(t) {
            want[(addr / 8) as usize] += 1;
        }
    }
    let mut lost = 0;
    for (i, (&got, &updates)) in table.iter().zip(&want).enumerate() {
        if got > updates || (updates > 0 && got == 0) {
            return Err(format!("random: word {i} is {got} after {updates} updates"));
        }
        lost += updates - got;
    }
    let updates = RANDOM_UPDATES * tasklets as u64;
    if lost * 100 > updates {
        return Err(format!(
            "random: {lost} of {updates} updates lost, above 1 %"
        ));
    }
    Ok(())
}

impl Kernel for Random {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(8)?;
        // Index hash (multiply, shift, mask), the add, loop overhead.
        let per_update = 3 * t.cost(Op::Alu) + t.cost(Op::AddI64) + t.cost(Op::LoopIteration);
        t.barrier_wait(0).await?;
        let begin = t.cycle();
        for addr in random_addresses(t.id()) {
            t.mram_read(addr, buf, 8).await?;
            let v = t.wram_read_u64(buf)?;
            t.wram_write_u64(buf, v.wrapping_add(1))?;
            t.compute(per_update).await?;
            t.mram_write(buf, addr, 8).await?;
        }
        self.cycles[t.id() as usize].store(t.cycle() - begin, Ordering::Relaxed);
        Ok(())
    }
}

/// The MRAM the suite lays out: arrays a and b, then c, each rounded up to whole blocks of
/// every tasklet.
pub(super) fn mram_need_bytes(machine: &Machine) -> u64 {
    (1..=u64::from(machine.dpu.max_tasklets.min(16)))
        .map(|tasklets| {
            let stride = u64::from(BLOCK_BYTES) * tasklets;
            2 * ARRAY_BYTES + ARRAY_BYTES.div_ceil(stride) * stride
        })
        .max()
        .unwrap_or(3 * ARRAY_BYTES)
}

/// Every kernel on MRAM and WRAM (copy-dma and random on MRAM only), 1 to 16 tasklets.
pub fn stream(machine: &Machine) -> Result<Vec<StreamRecord>, LaunchError> {
    use StreamKernel::*;
    let mut configs = Vec::new();
    for memory in [Memory::Mram, Memory::Wram] {
        for kernel in [CopyDma, Copy, Add, Scale, Triad, Random] {
            if memory == Memory::Wram && matches!(kernel, CopyDma | Random) {
                continue;
            }
            for tasklets in 1..=machine.dpu.max_tasklets.min(16) {
                configs.push((kernel, memory, tasklets));
            }
        }
    }
    super::in_order(
        configs
            .into_par_iter()
            .map(|(kernel, memory, tasklets)| run_one(machine, kernel, memory, tasklets)),
    )
}

fn run_one(
    machine: &Machine,
    kernel: StreamKernel,
    memory: Memory,
    tasklets: u32,
) -> Result<StreamRecord, LaunchError> {
    let cycles: Vec<AtomicU64> = (0..tasklets).map(|_| AtomicU64::new(0)).collect();
    let (bytes, cycles) = if kernel == StreamKernel::Random {
        let k = Random { cycles };
        let (_, dpu) = launch_one(machine, &k, tasklets, |_| {})?;
        let table = dpu.mram().read_u64s(0, ELEMENTS as usize);
        check_random(&table, tasklets).map_err(|reason| LaunchError {
            dpu: 0,
            error: KernelError::Kernel { tasklet: 0, reason },
        })?;
        (16 * RANDOM_UPDATES * tasklets as u64, max(&k.cycles))
    } else {
        let stride = BLOCK_BYTES as u64 * tasklets as u64;
        let iterations = ARRAY_BYTES.div_ceil(stride);
        let k = Stream {
            kernel,
            memory,
            iterations,
            cycles,
        };
        let span = (iterations * stride / 8) as usize;
        let a: Vec<u64> = (0..span as u64).collect();
        let b: Vec<u64> = (0..span as u64).map(|i| 7 * i + 1).collect();
        let (_, dpu) = launch_one(machine, &k, tasklets, |d| {
            d.mram_mut().write_u64s(0, &a);
            d.mram_mut().write_u64s(ARRAY_BYTES, &b);
        })?;
        let c = dpu
            .mram()
            .read_u64s(2 * ARRAY_BYTES, span.min(ELEMENTS as usize));
        for (i, &x) in c.iter().enumerate() {
            let want = kernel.apply(a[i], b[i]);
            if x != want {
                let reason = format!("STREAM {kernel:?}: element {i} is {x}, the host's {want}");
                let error = KernelError::Kernel { tasklet: 0, reason };
                return Err(LaunchError { dpu: 0, error });
            }
        }
        let elements = iterations * stride / 8;
        (kernel.bytes_per_element() * elements, max(&k.cycles))
    };
    Ok(StreamRecord {
        kernel,
        memory,
        tasklets,
        bandwidth_mb_per_s: mb_per_s(machine, bytes, cycles),
    })
}

fn max(cycles: &[AtomicU64]) -> u64 {
    cycles
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table a random run leaves when no update is lost.
    fn counted(tasklets: u32) -> Vec<u64> {
        let mut table = vec![0; ELEMENTS as usize];
        for t in 0..tasklets {
            for addr in random_addresses(t) {
                table[(addr / 8) as usize] += 1;
            }
        }
        table
    }

    #[test]
    fn the_random_check_takes_every_update_and_refuses_what_no_run_leaves() {
        let good = counted(4);
        assert_eq!(check_random(&good, 4), Ok(()));
        let touched = good.iter().position(|&n| n > 0).unwrap();
        let mut extra = good.clone();
        extra[touched] += 1;
        assert!(
            check_random(&extra, 4)
                .unwrap_err()
                .contains("after 1 updates")
        );
        let mut zero = good.clone();
        zero[touched] = 0;
        assert!(check_random(&zero, 4).is_err());
        // One update lost of 1,024 passes; 11 (above 1 %) do not.
        let mut lost = good.clone();
        let words: Vec<usize> = (0..lost.len()).filter(|&i| lost[i] >= 2).collect();
        lost[words[0]] -= 1;
        assert_eq!(check_random(&lost, 4), Ok(()));
        for &w in &words[1..11] {
            lost[w] -= 1;
        }
        assert!(check_random(&lost, 4).unwrap_err().contains("11 of 1024"));
    }
}
