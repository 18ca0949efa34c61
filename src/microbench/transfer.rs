//! PrIM `CPU-DPU` / `DPU-CPU` / broadcast transfers: serial and parallel, 1 to 64 DPUs of
//! one rank and 2 to all ranks, 8 bytes to 32 MiB per DPU by default (both settable), each
//! record naming the term of the transfer model that set its time. Run on the system
//! executor (see [`crate::host`]): no DPU runs.

use crate::config::{InputError, Override};
use crate::host::{Direction, Host, TransferCost};
use crate::machine::Machine;
use crate::system::exec::{TransferBound, transfer_bound};
use crate::system::program::{MRAM_TRANSFER_WORD_BYTES as WORD, TransferKind};
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
    /// Ranks the DPU set spans (1 for the sets inside one rank).
    pub ranks: u32,
    pub dpus: u32,
    pub size_per_dpu_bytes: u64,
    pub time_us: f64,
    /// Bytes delivered to (or read from) all DPUs of the set per second, 10^9 bytes.
    pub bandwidth_gb_per_s: f64,
    /// The term of the transfer model that set the time.
    pub bound: TransferBound,
}

/// Most sizes and most rank counts one sweep takes.
pub const MAX_SWEEP_VALUES: usize = 64;
/// The largest size per DPU a sweep takes: a real DPU's whole MRAM.
pub const MAX_SIZE_PER_DPU_BYTES: u64 = 64 << 20;

/// What the transfer suite sweeps (`--set microbench.transfer.sizes_bytes=[..]`,
/// `--set microbench.transfer.ranks=[..]`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TransferSweep {
    /// Bytes per DPU of each transfer, multiples of 8 (the SDK moves MRAM in 8-byte words).
    /// Default: every power of two from 8 B to 32 MiB.
    #[schemars(length(min = 1, max = MAX_SWEEP_VALUES), inner(range(min = WORD, max = MAX_SIZE_PER_DPU_BYTES)))]
    pub sizes_bytes: Vec<u64>,
    /// Rank counts: 1 sweeps 1, 2, 4, ... 64 DPUs of one rank (as PrIM measured); R > 1
    /// takes every usable DPU of the first R ranks. Default: 1, 2, 4, ... and the machine's
    /// ranks.
    #[schemars(length(min = 1, max = MAX_SWEEP_VALUES), inner(range(min = 1)))]
    pub ranks: Vec<u32>,
}

impl TransferSweep {
    pub fn default_for(machine: &Machine) -> TransferSweep {
        let mut ranks: Vec<u32> = (0..32)
            .map(|i| 1u32 << i)
            .take_while(|&r| r < machine.ranks)
            .collect();
        ranks.push(machine.ranks);
        TransferSweep {
            sizes_bytes: (3..=25).map(|i| 1u64 << i).collect(),
            ranks,
        }
    }

    /// The default with `--set microbench.transfer.KEY=[..]` applied; each override names
    /// its key in errors. `overrides` holds only `microbench.transfer.*` keys.
    pub fn with_overrides(
        machine: &Machine,
        overrides: &[Override],
    ) -> Result<TransferSweep, InputError> {
        let mut sweep = TransferSweep::default_for(machine);
        for o in overrides {
            let bad = |reason: String| InputError::key(format!("--set {}", o.text), &o.key, reason);
            let key = o.strip_prefix("microbench.transfer").unwrap_or("");
            match key {
                "sizes_bytes" => {
                    let sizes: Vec<u64> =
                        positive_list(&o.value, WORD, MAX_SIZE_PER_DPU_BYTES).map_err(bad)?;
                    if let Some(odd) = sizes.iter().find(|s| !s.is_multiple_of(WORD)) {
                        return Err(bad(format!(
                            "{odd} is not a multiple of {WORD}: the SDK moves MRAM in whole {WORD}-byte words and refuses other lengths"
                        )));
                    }
                    sweep.sizes_bytes = sizes;
                }
                "ranks" => {
                    sweep.ranks =
                        positive_list(&o.value, 1, u64::from(machine.ranks)).map_err(bad)?;
                }
                _ => {
                    return Err(bad(
                        "unknown key; the transfer suite takes microbench.transfer.sizes_bytes and microbench.transfer.ranks".into(),
                    ));
                }
            }
        }
        Ok(sweep)
    }
}

/// A non-empty list of distinct integers in least..=max, at most [`MAX_SWEEP_VALUES`] of them.
pub(super) fn positive_list<T: TryFrom<u64>>(
    value: &toml::Value,
    least: u64,
    max: u64,
) -> Result<Vec<T>, String> {
    let items = value
        .as_array()
        .filter(|a| !a.is_empty() && a.len() <= MAX_SWEEP_VALUES)
        .ok_or(format!(
            "expected a list of 1 to {MAX_SWEEP_VALUES} distinct integers from {least} to {max}"
        ))?;
    let mut out: Vec<u64> = Vec::with_capacity(items.len());
    for item in items {
        let x = item
            .as_integer()
            .ok_or(format!("{item} is not an integer"))?;
        let x = u64::try_from(x)
            .ok()
            .filter(|x| (least..=max).contains(x))
            .ok_or(format!(
                "{item} is out of range: each must be from {least} to {max}"
            ))?;
        if out.contains(&x) {
            return Err(format!("{x} is listed twice"));
        }
        out.push(x);
    }
    Ok(out
        .into_iter()
        .filter_map(|x| T::try_from(x).ok())
        .collect())
}

/// The DPU sets of `ranks` rank counts: (ranks, DPUs, membership by global DPU). One rank
/// gives 1, 2, 4, ... 64 DPUs of the fullest rank (as PrIM measured on a full rank) and all
/// its usable DPUs; R ranks give every usable DPU of the first R.
fn dpu_sets(machine: &Machine, ranks: &[u32]) -> Vec<(u32, u32, Vec<bool>)> {
    let per_rank = &machine.usable_dpus_per_rank;
    let mut sets = Vec::new();
    for &r in ranks {
        if r == 1 {
            let largest = per_rank.iter().copied().max().unwrap_or(0);
            let rank = per_rank.iter().position(|&n| n == largest).unwrap_or(0) as u32;
            let first = machine.first_dpu_of_rank(rank);
            let mut counts: Vec<u32> = (0..7)
                .map(|i| 1u32 << i)
                .filter(|&n| n <= largest)
                .collect();
            // A rank with faulty DPUs: its whole usable set too.
            if counts.last() != Some(&largest) {
                counts.push(largest);
            }
            for n in counts {
                let set = (0..machine.dpus)
                    .map(|d| d >= first && d < first + n)
                    .collect();
                sets.push((1, n, set));
            }
        } else {
            let end = machine.first_dpu_of_rank(r);
            let set = (0..machine.dpus).map(|d| d < end).collect();
            sets.push((r, end, set));
        }
    }
    sets
}

/// Every direction and mode over the sweep's DPU sets and sizes.
pub fn transfer(machine: &Machine, sweep: &TransferSweep) -> Vec<TransferRecord> {
    let host = Host::new(machine);
    let mut records = Vec::new();
    for (ranks, dpus, in_set) in dpu_sets(machine, &sweep.ranks) {
        for &size in &sweep.sizes_bytes {
            let sizes: Vec<u64> = in_set.iter().map(|&b| if b { size } else { 0 }).collect();
            let mut push = |direction, mode, kind, cost: TransferCost| {
                let dir = match direction {
                    TransferDirection::DpuCpu => Direction::DpuCpu,
                    _ => Direction::CpuDpu,
                };
                records.push(TransferRecord {
                    direction,
                    mode,
                    ranks,
                    dpus,
                    size_per_dpu_bytes: size,
                    time_us: cost.time.as_us_f64(),
                    bandwidth_gb_per_s: (dpus as u64 * size) as f64 / cost.time.as_s_f64() / 1e9,
                    bound: transfer_bound(machine, dir, kind, &sizes),
                });
            };
            for (d, dir) in [
                (TransferDirection::CpuDpu, Direction::CpuDpu),
                (TransferDirection::DpuCpu, Direction::DpuCpu),
            ] {
                push(
                    d,
                    TransferMode::Serial,
                    TransferKind::Serial,
                    host.serial(dir, &sizes),
                );
                push(
                    d,
                    TransferMode::Parallel,
                    TransferKind::Parallel,
                    host.parallel(dir, &sizes),
                );
            }
            push(
                TransferDirection::Broadcast,
                TransferMode::Parallel,
                TransferKind::Broadcast,
                host.broadcast(&in_set, size),
            );
        }
    }
    records
}
