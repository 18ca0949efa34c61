//! PrIM `CPU-DPU` / `DPU-CPU` / broadcast transfers: serial and parallel, 1 to 64 DPUs of
//! one rank and the whole system, 8 bytes to 32 MiB per DPU. Analytic (see
//! [`crate::host`]): no DPU runs.

use crate::host::{Direction, Host, TransferCost};
use crate::machine::Machine;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TransferMode {
    Serial,
    Parallel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TransferDirection {
    CpuDpu,
    DpuCpu,
    Broadcast,
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TransferRecord {
    pub direction: TransferDirection,
    pub mode: TransferMode,
    pub dpus: u32,
    pub size_per_dpu_bytes: u64,
    pub time_us: f64,
    /// Bytes delivered to (or read from) all DPUs of the set per second, 10^9 bytes.
    pub bandwidth_gb_per_s: f64,
}

/// Sizes per DPU: 8 B to 32 MiB, by factors of 8 (32 MiB ends the list).
fn sizes() -> Vec<u64> {
    let mut s: Vec<u64> = (0..8).map(|i| 8u64 << (3 * i)).collect();
    s.push(32 << 20);
    s
}

/// The DPU sets: 1, 2, 4, ... 64 DPUs of one rank (the first of the fullest ranks, as
/// PrIM measured on a full rank), then every DPU of the system.
fn dpu_sets(machine: &Machine) -> Vec<(u32, Vec<bool>)> {
    let per_rank = &machine.usable_dpus_per_rank;
    let largest = per_rank.iter().copied().max().unwrap_or(0);
    let rank = per_rank.iter().position(|&n| n == largest).unwrap_or(0) as u32;
    let first = machine.first_dpu_of_rank(rank);
    let mut sets: Vec<(u32, Vec<bool>)> = (0..7)
        .map(|i| 1u32 << i)
        .filter(|&n| n <= largest)
        .map(|n| {
            let set = (0..machine.dpus)
                .map(|d| d >= first && d < first + n)
                .collect();
            (n, set)
        })
        .collect();
    if sets.last().is_none_or(|(n, _)| *n != machine.dpus) {
        sets.push((machine.dpus, vec![true; machine.dpus as usize]));
    }
    sets
}

pub fn transfer(machine: &Machine) -> Vec<TransferRecord> {
    let host = Host::new(machine);
    let mut records = Vec::new();
    for (dpus, in_set) in dpu_sets(machine) {
        for size in sizes() {
            let sizes: Vec<u64> = in_set.iter().map(|&b| if b { size } else { 0 }).collect();
            let mut push = |direction, mode, cost: TransferCost| {
                records.push(TransferRecord {
                    direction,
                    mode,
                    dpus,
                    size_per_dpu_bytes: size,
                    time_us: cost.time.as_us_f64(),
                    bandwidth_gb_per_s: (dpus as u64 * size) as f64 / cost.time.as_s_f64() / 1e9,
                });
            };
            for (d, dir) in [
                (TransferDirection::CpuDpu, Direction::CpuDpu),
                (TransferDirection::DpuCpu, Direction::DpuCpu),
            ] {
                push(d, TransferMode::Serial, host.serial(dir, &sizes));
                push(d, TransferMode::Parallel, host.parallel(dir, &sizes));
            }
            push(
                TransferDirection::Broadcast,
                TransferMode::Parallel,
                host.broadcast(&in_set, size),
            );
        }
    }
    records
}
