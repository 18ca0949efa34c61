//! The host memory a `pimdes run` will need, estimated from the configuration before
//! anything is generated, so a run that cannot fit is refused at once instead of running
//! the host out of memory minutes later.

use crate::config::InputError;
use crate::machine::Machine;
use crate::workload::Workload;

/// Fixed cost: the binary, thread stacks, the report.
const BASE_BYTES: u64 = 32 << 20;
/// Per DPU: its state and touched MRAM pages at the smallest data (measured: 2^17 DPUs with
/// 10 pairs each, 1.26 GB peak).
const PER_DPU_BYTES: u64 = 10 << 10;
/// Per pair: the data, the trees in MRAM and the reference (measured: 63.25 M pairs on 128
/// DPUs, 1.14 GB peak; about 18 bytes, rounded up).
const PER_PAIR_BYTES: u64 = 20;
/// Per query of every batch, all generated up front (measured: 0.7 M more queries, 46 MB).
const PER_QUERY_BYTES: u64 = 70;

/// The estimate, in bytes, and the key of its largest term (to name in an error).
struct Estimate {
    bytes: u64,
    terms: [(&'static str, u64); 3],
}

fn estimate(machine: &Machine, workload: &Workload) -> Estimate {
    let queries = workload.batch_size.saturating_mul(workload.total_batches());
    let terms = [
        (
            "ranks",
            u64::from(machine.dpus).saturating_mul(PER_DPU_BYTES),
        ),
        ("data.pairs", workload.pairs.saturating_mul(PER_PAIR_BYTES)),
        (
            "queries.batch_size",
            queries.saturating_mul(PER_QUERY_BYTES),
        ),
    ];
    let bytes = terms
        .iter()
        .fold(BASE_BYTES, |sum, (_, b)| sum.saturating_add(*b));
    Estimate { bytes, terms }
}

/// The host's available memory in bytes (`MemAvailable` of `/proc/meminfo`); `None` where
/// it cannot be read, and then nothing is refused.
fn available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Refuses a run whose estimated host memory exceeds the memory available now, naming
/// the key of the largest term and the estimate.
pub(crate) fn check_host_memory(machine: &Machine, workload: &Workload) -> Result<(), InputError> {
    let Some(available) = available_bytes() else {
        return Ok(());
    };
    let e = estimate(machine, workload);
    if e.bytes <= available {
        return Ok(());
    }
    let mib = |b: u64| b >> 20;
    let (key, _) = e
        .terms
        .iter()
        .copied()
        .max_by_key(|&(_, b)| b)
        .unwrap_or(("data.pairs", 0));
    let reason = format!(
        "the run would need about {} MiB of host memory ({} MiB for {} DPUs, {} MiB for {} pairs, {} MiB for {} queries in all batches), more than the {} MiB available; lower data.pairs, queries.batch_size or the number of DPUs",
        mib(e.bytes),
        mib(e.terms[0].1),
        machine.dpus,
        mib(e.terms[1].1),
        workload.pairs,
        mib(e.terms[2].1),
        workload.batch_size.saturating_mul(workload.total_batches()),
        mib(available)
    );
    Err(match key {
        "ranks" => machine.attribution.error_at(key, reason),
        _ => workload.attribution.error_at(key, reason),
    })
}
