//! [`System`]: every usable DPU of a machine, launched together. DPUs are independent from
//! launch to completion, so they are simulated on rayon's threads; each DPU's simulation is
//! single-threaded and deterministic, and results are gathered in DPU order, so the
//! outcome never depends on the thread count.

use crate::dpu::{Dpu, Kernel, LaunchError, LaunchReport};
use crate::machine::Machine;
use rayon::prelude::*;

/// The DPUs of a machine.
pub struct System {
    dpus: Vec<Dpu>,
}

/// One launch on every DPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BatchReport {
    pub per_dpu: Vec<LaunchReport>,
    /// Cycles of the slowest DPU.
    pub slowest_cycles: u64,
    /// Events simulated over all DPUs.
    pub events: u64,
}

impl System {
    pub fn new(machine: &Machine) -> System {
        System {
            dpus: (0..machine.dpus)
                .map(|i| Dpu::new(&machine.dpu, i))
                .collect(),
        }
    }

    pub fn dpus(&self) -> &[Dpu] {
        &self.dpus
    }

    pub fn dpus_mut(&mut self) -> &mut [Dpu] {
        &mut self.dpus
    }

    /// Launches `kernel` with `tasklets` tasklets on every DPU, in parallel. On failure,
    /// returns the error of the lowest-numbered failing DPU.
    pub fn launch<K: Kernel>(
        &mut self,
        kernel: &K,
        tasklets: u32,
    ) -> Result<BatchReport, LaunchError> {
        let per_dpu = self.launch_range(kernel, tasklets, 0..self.dpus.len())?;
        let cycles: Vec<u64> = per_dpu.iter().map(|r| r.cycles).collect();
        Ok(BatchReport {
            slowest_cycles: cycles.iter().copied().max().unwrap_or(0),
            events: per_dpu.iter().map(|r| r.stats.events).sum(),
            per_dpu,
        })
    }

    /// Launches `kernel` on DPUs `dpus` only, in parallel; their reports in DPU order. On
    /// failure, returns the error of the lowest-numbered failing DPU.
    pub fn launch_range<K: Kernel>(
        &mut self,
        kernel: &K,
        tasklets: u32,
        dpus: std::ops::Range<usize>,
    ) -> Result<Vec<LaunchReport>, LaunchError> {
        // One DPU per rayon job: a DPU's launch costs up to ten times another's, and jobs of
        // many DPUs left one thread finishing a long run of them while the other idled.
        let results: Vec<Result<LaunchReport, LaunchError>> = self.dpus[dpus]
            .par_iter_mut()
            .with_max_len(1)
            .map(|d| {
                d.launch(kernel, tasklets).map_err(|error| LaunchError {
                    dpu: d.index(),
                    error,
                })
            })
            .collect();
        results.into_iter().collect()
    }
}
