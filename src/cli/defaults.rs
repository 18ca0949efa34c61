//! The main job on embedded defaults (`cargo run --release` with no arguments).

use super::{table, write_stdout};
use crate::config::Override;
use crate::error::Error;
use crate::experiments::partition::{Prepared, evaluate};
use crate::machine::Machine;
use crate::partition;
use crate::workload::Workload;

pub const DEFAULT_MACHINE: &str = include_str!("../../machines/paper-2rank.toml");
pub const DEFAULT_WORKLOAD: &str = include_str!("../../workloads/quick-raq.toml");
pub const DEFAULT_SKEWS: [f64; 4] = [0.6, 0.8, 1.0, 1.2];

/// Every partitioner at each default skew, on two ranks of the paper's machine (128 DPUs) with a
/// scaled-down workload.
pub fn run_default() -> Result<(), Error> {
    let machine =
        Machine::from_toml_str("<embedded machines/paper-2rank.toml>", DEFAULT_MACHINE, &[])?;
    let mut rows = Vec::new();
    let mut header = String::new();
    for skew in DEFAULT_SKEWS {
        let o = [Override::parse(&format!("queries.skew={skew}"))?];
        let workload =
            Workload::from_toml_str("<embedded workloads/quick-raq.toml>", DEFAULT_WORKLOAD, &o)?;
        if header.is_empty() {
            header = format!(
                "pimdes: partitioners of B+-Forest on {} ({} DPUs), {} pairs, {} {} queries per batch, alpha {}, seed {}\n(partitioning only; the timed simulator is not built yet)\n\n",
                machine.name,
                machine.dpus,
                workload.pairs,
                workload.batch_size,
                workload.kind.name(),
                workload.alpha,
                workload.seed
            );
        }
        let prepared = Prepared::new(&machine, &workload)?;
        for p in partition::registry() {
            let partitioning = prepared.partition(p.as_ref(), &workload)?;
            let report = evaluate(&machine, &workload, &prepared, &partitioning, p.name());
            rows.push((skew, report));
        }
    }
    write_stdout(&(header + &table::comparison(&rows)))
}
