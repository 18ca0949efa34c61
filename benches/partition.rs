//! Paper-scale partitioning benchmark: `cargo bench --bench partition`.
//!
//! Runs `pimdes partition` on machines/paper-1012.toml with workloads/paper-raq.toml
//! (D = 500 M pairs, P = 1,012, Q = 1 M, 30 batches: the reference and 20 measured batches
//! are generated and routed) for every partitioner, and prints the wall time of each and
//! the process's peak resident set. Set PIMDES_BENCH_PARTITIONERS=name,name to choose.

use pimdes::experiments::partition::run_partition;
use pimdes::machine::Machine;
use pimdes::partition;
use pimdes::workload::Workload;
use std::path::Path;
use std::time::Instant;

/// Peak resident set of this process in KiB (VmHWM), if the platform reports it.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let machine = Machine::load(&root.join("machines/paper-1012.toml"), &[]).expect("machine");
    let workload = Workload::load(&root.join("workloads/paper-raq.toml"), &[]).expect("workload");
    let wanted = std::env::var("PIMDES_BENCH_PARTITIONERS").ok();
    println!(
        "partition benchmark: D = {}, P = {}, Q = {}, batches = {} ({} threads)",
        workload.pairs,
        machine.dpus,
        workload.batch_size,
        workload.total_batches(),
        rayon::current_num_threads()
    );
    for p in partition::registry() {
        if let Some(w) = &wanted
            && !w.split(',').any(|n| n == p.name())
        {
            continue;
        }
        let start = Instant::now();
        let report = run_partition(&machine, &workload, p.as_ref()).expect("paper run works");
        let wall_s = start.elapsed().as_secs_f64();
        println!(
            "{:<16} wall {:>6.2} s  IF_q {:>8.3}  IF_d {:>7.3}  peak RSS so far {} MiB",
            p.name(),
            wall_s,
            report.imbalance.queries,
            report.imbalance.data,
            peak_rss_kib().map_or("?".into(), |k| (k / 1024).to_string())
        );
    }
}
