//! The main job on embedded defaults (`cargo run --release` with no arguments): the B+-Forest
//! paper's headline comparison, scaled down to two ranks with the paper's per-DPU load.

use super::{command_line, table, write_stdout};
use crate::config::Override;
use crate::error::Error;
use crate::experiments::partition::{Prepared, evaluate};
use crate::experiments::run::Progress;
use crate::experiments::run::{Silent, run};
use crate::machine::Machine;
use crate::partition;
use crate::workload::Workload;

pub const DEFAULT_MACHINE: &str = include_str!("../../machines/paper-2rank.toml");
pub const DEFAULT_WORKLOAD: &str = include_str!("../../workloads/quick-raq.toml");
/// Skews of the imbalance table (every partitioner, no timing).
pub const PARTITION_SKEWS: [f64; 4] = [0.6, 0.8, 1.0, 1.2];
/// Skews and partitioners of the timed comparison.
pub const RUN_SKEWS: [f64; 2] = [0.6, 1.0];
pub const RUN_PARTITIONERS: [&str; 2] = ["ccp-capped", "qdd-double-scan"];

fn workload_at(skew: f64) -> Result<Workload, Error> {
    let o = [Override::parse(&format!("queries.skew={skew}"))?];
    Ok(Workload::from_toml_str(
        "<embedded workloads/quick-raq.toml>",
        DEFAULT_WORKLOAD,
        &o,
    )?)
}

pub fn run_default() -> Result<(), Error> {
    let machine =
        Machine::from_toml_str("<embedded machines/paper-2rank.toml>", DEFAULT_MACHINE, &[])?;
    let base = workload_at(1.0)?;
    let mut out = format!(
        "pimdes: B+-Forest on {} ({}, {} tasklets), {} pairs, {} {} queries per batch, alpha {}, seed {}\n\n",
        machine.name,
        crate::machine::dpus_phrase(machine.dpus),
        base.tasklets,
        base.pairs,
        base.batch_size,
        base.kind.name(),
        base.alpha,
        base.seed
    );
    // As `run`'s: a line rewritten every second on a terminal, a plain line every 5 s
    // elsewhere (the job takes about 13 s on a 2-core machine).
    let mut progress = super::progress::heartbeat("pimdes", false, "starting");
    let total = RUN_SKEWS.len() * RUN_PARTITIONERS.len();
    let mut timed = Vec::new();
    for skew in RUN_SKEWS {
        let workload = workload_at(skew)?;
        for name in RUN_PARTITIONERS {
            if let Some(p) = progress.as_mut() {
                let n = timed.len() + 1;
                p.phase(&format!("simulating {n}/{total}: {name} at skew {skew}"));
            }
            let p = partition::by_name(name).expect("default partitioners exist");
            let report = run(&machine, &workload, p.as_ref(), &mut Silent).map_err(|e| {
                e.attributed(&machine.attribution, Some(&workload.attribution))
                    .reproducible(command_line, Some(workload.seed))
            })?;
            timed.push(report);
        }
    }
    out.push_str(&format!(
        "Batch time with {} warm-up and {} measured batches (every answer checked against a reference):\n",
        base.warmup_batches, base.measured_batches
    ));
    out.push_str(&table::run_comparison(&timed));
    out.push_str("\nImbalance of every partitioner (partitioning only, no timing):\n");
    let mut rows = Vec::new();
    for skew in PARTITION_SKEWS {
        if let Some(p) = progress.as_mut() {
            p.phase(&format!("partitioning at skew {skew}, every partitioner"));
        }
        let workload = workload_at(skew)?;
        let prepared = Prepared::new(&machine, &workload)?;
        for p in partition::registry() {
            let partitioning = prepared.partition(p.as_ref(), &workload)?;
            let report = evaluate(&machine, &workload, &prepared, &partitioning, p.name());
            rows.push((skew, report));
        }
    }
    out.push_str(&table::comparison(&rows));
    // The progress line ends before the table is printed.
    drop(progress);
    write_stdout(&out)
}
