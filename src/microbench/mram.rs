//! PrIM MRAM latency/bandwidth: one tasklet issues back-to-back `mram_read` or
//! `mram_write` calls of one size, 8 to 2,048 bytes.

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

impl Kernel for BackToBack {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(self.size)?;
        for i in 0..REPETITIONS {
            let addr = i * self.size as u64;
            match self.direction {
                DmaDirection::Read => t.mram_read(addr, buf, self.size).await?,
                DmaDirection::Write => t.mram_write(buf, addr, self.size).await?,
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
    configs
        .into_par_iter()
        .map(|(direction, size)| {
            let (report, _) = launch_one(machine, &BackToBack { direction, size }, 1, |_| {})?;
            Ok(MramRecord {
                direction,
                size_bytes: size,
                tasklets: 1,
                latency_cycles: report.cycles as f64 / REPETITIONS as f64,
                bandwidth_mb_per_s: mb_per_s(machine, size as u64 * REPETITIONS, report.cycles),
            })
        })
        .collect()
}
