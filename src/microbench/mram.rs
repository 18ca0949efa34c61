//! PrIM MRAM latency/bandwidth: one tasklet issues back-to-back `mram_read` or
//! `mram_write` calls of one size, 8 to 2,048 bytes. The bytes are real: a read must bring
//! MRAM's pattern into WRAM, a write must leave WRAM's pattern in MRAM (checked by the
//! kernel and by the host after the launch).

use super::{launch_one, mb_per_s};
use crate::dpu::{Kernel, KernelError, LaunchError, Tasklet};
use crate::machine::{DmaDirection, Machine};
use rayon::prelude::*;
use serde::Serialize;

const REPETITIONS: u64 = 64;

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MramRecord {
    pub direction: DmaDirection,
    pub size_bytes: u32,
    pub tasklets: u32,
    /// Mean cycles of one transfer.
    pub latency_cycles: f64,
    pub bandwidth_mb_per_s: f64,
}

struct BackToBack {
    direction: DmaDirection,
    size: u32,
}

/// The byte the suite puts at MRAM address `addr` (a read's source, a write's target).
fn pattern(addr: u64) -> u8 {
    (addr ^ addr >> 8 ^ addr >> 16).wrapping_mul(0x9d) as u8
}

fn fill(bytes: &mut [u8], addr: u64) {
    for (b, a) in bytes.iter_mut().zip(addr..) {
        *b = pattern(a);
    }
}

/// Where `bytes`, which should hold MRAM's pattern from `addr` on, do not.
fn mismatch(bytes: &[u8], addr: u64) -> Option<(u64, u8)> {
    (addr..)
        .zip(bytes)
        .find(|&(a, &b)| b != pattern(a))
        .map(|(a, &b)| (a, b))
}

impl Kernel for BackToBack {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(self.size)?;
        for i in 0..REPETITIONS {
            let addr = i * self.size as u64;
            match self.direction {
                DmaDirection::Read => {
                    t.mram_read(addr, buf, self.size).await?;
                    if let Some((a, b)) = t.with_wram(buf, self.size, |w| mismatch(w, addr))? {
                        return Err(t.fail(format!("MRAM byte {a} read as {b}")));
                    }
                }
                DmaDirection::Write => {
                    t.with_wram(buf, self.size, |w| fill(w, addr))?;
                    t.mram_write(buf, addr, self.size).await?;
                }
            }
        }
        Ok(())
    }
}

/// The MRAM the suite touches: [`REPETITIONS`] back-to-back blocks of the largest size.
pub(super) fn mram_need_bytes(machine: &Machine) -> u64 {
    REPETITIONS * u64::from(machine.dpu.dma.max_size_bytes)
}

/// Both directions, every power-of-two size the DMA engine accepts, one tasklet.
pub fn mram(machine: &Machine) -> Result<Vec<MramRecord>, LaunchError> {
    let d = &machine.dpu.dma;
    let mut configs = Vec::new();
    for direction in [DmaDirection::Read, DmaDirection::Write] {
        let mut size = d.min_size_bytes.next_power_of_two().max(d.alignment_bytes);
        while size <= d.max_size_bytes {
            configs.push((direction, size));
            size *= 2;
        }
    }
    super::in_order(configs.into_par_iter().map(|(direction, size)| {
        let bytes = (size as u64 * REPETITIONS) as usize;
        let kernel = BackToBack { direction, size };
        let (report, dpu) = launch_one(machine, &kernel, 1, |d| {
            if direction == DmaDirection::Read {
                let mut source = vec![0; bytes];
                fill(&mut source, 0);
                d.mram_mut().write(0, &source);
            }
        })?;
        let mut written = vec![0; bytes];
        dpu.mram().read(0, &mut written);
        if let Some((a, b)) = mismatch(&written, 0) {
            let what = match direction {
                DmaDirection::Read => "reads",
                DmaDirection::Write => "writes",
            };
            let reason = format!("MRAM byte {a} is {b} after the {what}");
            let error = KernelError::Kernel { tasklet: 0, reason };
            return Err(LaunchError { dpu: 0, error });
        }
        Ok(MramRecord {
            direction,
            size_bytes: size,
            tasklets: 1,
            latency_cycles: report.cycles as f64 / REPETITIONS as f64,
            bandwidth_mb_per_s: mb_per_s(machine, size as u64 * REPETITIONS, report.cycles),
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_check_finds_a_changed_byte() {
        let mut bytes = vec![0; 4096];
        fill(&mut bytes, 8192);
        assert_eq!(mismatch(&bytes, 8192), None);
        // The pattern depends on the address: the same bytes elsewhere do not match.
        assert!(mismatch(&bytes, 0).is_some());
        bytes[1000] ^= 1;
        assert_eq!(mismatch(&bytes, 8192), Some((9192, bytes[1000])));
    }
}
