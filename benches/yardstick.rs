//! The yardstick (`cargo bench --bench yardstick`): the wall time of a simulated run beside
//! the wall time of merely answering the same queries on the host, measured back to back in
//! one process, and their ratio; also the simulated DPU events per second per core.
//!
//! The plain evaluation does the same work without a machine: it generates the workload's
//! pairs into one array sorted by key (chunks in parallel, then a sort), and answers every
//! batch of the run (warm-up and measured: 30 batches of 1 M queries for the paper's
//! workloads) with a binary search for each query's first pair and a scan of its range, on
//! rayon's threads. Then it frees that array, runs the simulation (`pimdes run` without
//! output), and does the plain evaluation once more. The ratio is to the mean of the two
//! plain times, and to each: on a machine whose first touch of freed memory is slow (a
//! virtual machine whose host reclaims it, as on the project's), the first evaluation runs
//! on cold memory and the others on memory just freed. The answers' checksum is printed so
//! that the work cannot be optimised away.
//!
//! Defaults: `machines/paper-1012.toml` and `workloads/paper-raq.toml` (about 10 GiB
//! peak each, one after the other; about 4 minutes on 2 cores). `PIMDES_YARDSTICK_MACHINE` and
//! `PIMDES_YARDSTICK_WORKLOAD` name other files (`workloads/quick-raq.toml` takes seconds).

use pimdes::experiments::partition::choose_partitioner;
use pimdes::experiments::run::{Silent, run};
use pimdes::machine::Machine;
use pimdes::workload::{DataSet, Query, QueryGenerator, QueryKind, Workload};
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

fn path(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(default),
        PathBuf::from,
    )
}

/// The answer of `q` over `pairs` (sorted by key) and the position of the pair its search
/// ended at, folded into one checksum word.
fn answer(pairs: &[(u64, u64)], kind: QueryKind, q: &Query) -> u64 {
    let (value, at) = match kind {
        QueryKind::Get | QueryKind::Predecessor => {
            let at = pairs.partition_point(|p| p.0 <= q.lo).saturating_sub(1);
            (pairs.get(at).map_or(0, |p| p.1), at)
        }
        QueryKind::RangeCountIf | QueryKind::RangeMax => {
            let from = pairs.partition_point(|p| p.0 < q.lo);
            let hits = pairs[from..].iter().take_while(|p| p.0 <= q.hi);
            let value = match kind {
                QueryKind::RangeCountIf => hits.filter(|p| p.1 == q.value).count() as u64,
                _ => hits.map(|p| p.1).max().unwrap_or(0),
            };
            (value, from)
        }
    };
    value.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ at as u64
}

/// Seconds to build the sorted array and answer every batch; the answers' checksum.
fn plain_evaluation(machine: &Machine, w: &Workload) -> (f64, f64, u64) {
    let start = Instant::now();
    let data = DataSet::generate(w);
    let mut pairs: Vec<(u64, u64)> = (0..data.chunks())
        .into_par_iter()
        .flat_map_iter(|c| data.chunk_pairs_of(c))
        .collect();
    pairs.par_sort_unstable_by_key(|p| p.0);
    let built = start.elapsed().as_secs_f64();
    let queries = QueryGenerator::new(w, &data, machine.dpus);
    let mut checksum = 0u64;
    for b in 0..w.warmup_batches + w.measured_batches {
        let batch = queries.batch(b);
        let kind = queries.kind();
        checksum = checksum.wrapping_add(
            batch
                .par_iter()
                .map(|q| answer(&pairs, kind, q))
                .reduce(|| 0, u64::wrapping_add),
        );
    }
    (built, start.elapsed().as_secs_f64(), checksum)
}

fn main() {
    let machine_path = path("PIMDES_YARDSTICK_MACHINE", "machines/paper-1012.toml");
    let workload_path = path("PIMDES_YARDSTICK_WORKLOAD", "workloads/paper-raq.toml");
    let machine = Machine::load(&machine_path, &[]).expect("the machine file is valid");
    let workload = Workload::load(&workload_path, &[]).expect("the workload file is valid");
    let threads = rayon::current_num_threads();
    println!(
        "yardstick: {} on {}, {threads} threads",
        workload_path.display(),
        machine_path.display()
    );

    let plain = |when: &str| {
        let (built_s, plain_s, checksum) = plain_evaluation(&machine, &workload);
        println!(
            "plain evaluation {when}: {plain_s:.2} s ({built_s:.2} s to build the sorted array), checksum {checksum:#x}"
        );
        pimdes::experiments::estimate::release_free_memory();
        (plain_s, checksum)
    };
    let (before_s, checksum) = plain("before");

    let partitioner = choose_partitioner(&None, &workload).expect("the workload names one");
    let start = Instant::now();
    let report =
        run(&machine, &workload, partitioner.as_ref(), &mut Silent).expect("the run succeeds");
    let sim_s = start.elapsed().as_secs_f64();
    println!(
        "simulation: {sim_s:.2} s ({} M events, answers verified: {})",
        report.host.simulated_events / 1_000_000,
        report.answers_verified
    );
    let phases: Vec<String> = (report.host.phases.iter())
        .map(|p| format!("{} {:.2} s", p.phase, p.wall_s))
        .collect();
    println!(
        "simulation phases: {} (DPU simulation {:.2} s of the batches)",
        phases.join(", "),
        report.host.kernel_wall_s
    );
    // The engine's speed on this run: events per wall second of the DPU simulation, per
    // thread (the DPUs are simulated on all of them).
    let h = &report.host;
    println!(
        "DPU simulation: {:.1} M events per second per core ({} threads)",
        h.simulated_events_per_s / h.threads as f64 / 1e6,
        h.threads
    );
    drop(report);
    pimdes::experiments::estimate::release_free_memory();

    let (after_s, again) = plain("after");
    assert_eq!(checksum, again, "the plain evaluation is deterministic");
    println!(
        "ratio simulation / plain evaluation: {:.3} (to the one before: {:.3}; to the one after: {:.3})",
        sim_s / ((before_s + after_s) / 2.0),
        sim_s / before_s,
        sim_s / after_s
    );
}
