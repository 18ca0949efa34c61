//! `pimdes calibrate host`: times the project's own host code on the machine it runs on, one
//! thread, and prints the `[host]` constants it measured as a machine-file fragment with
//! their source. Simulated runs never read the wall clock: they keep using the constants in
//! the machine file, so timing stays deterministic; a user who wants their own host's
//! constants pastes the fragment into a machine file.
//!
//! What is timed is exactly what the indexes run: B+-Forest's routing of a batch through a
//! routing table, the packing of its per-DPU query buffers and the merge of the partial
//! results (`crate::forest`); PIM-tree's sort of a get batch with positions, its
//! deduplication pass, the hash of each distinct key, the bucketing into per-DPU task lists
//! and the fill of every query's answer (`crate::pimtree::gets`).

use crate::forest::batch::{DpuBatch, merge, route_batch};
use crate::forest::image::query_buffer;
use crate::forest::reference::Answer;
use crate::machine::Machine;
use crate::partition::prepared::Prepared;
use crate::partition::{Partitioner, RoutingTable};
use crate::pimtree::gets::{GetRound, bucket, deduplicate, hash_all, sort_with_positions};
use crate::workload::{Query, Workload};
use std::hint::black_box;
use std::time::Instant;

/// Most runs of each step (the fastest counts).
pub const MAX_RUNS: u32 = 100;

/// One measured constant of the `[host]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The machine-file key, e.g. `route_ns_per_query`.
    pub key: &'static str,
    /// Nanoseconds per unit, the fastest of the runs.
    pub ns_per_unit: f64,
    /// What was timed, for the source comment.
    pub what: String,
}

/// Times every step `runs` times on batch 0 of `workload` and returns the fastest run of
/// each, per unit.
pub fn host(
    machine: &Machine,
    workload: &Workload,
    partitioner: &dyn Partitioner,
    runs: u32,
) -> Result<Vec<Measured>, crate::error::Error> {
    let runs = runs.clamp(1, MAX_RUNS);
    if workload.granularity == crate::workload::spec::Granularity::Pair {
        let reason = "calibrate times B+-Forest's routing table, which is cut between chunks; set partition.granularity = \"chunk\"";
        return Err(workload
            .attribution
            .error_at("partition.granularity", reason)
            .into());
    }
    let prepared = Prepared::new(machine, workload)?;
    let partitioning = prepared.partition(partitioner, workload)?;
    let table = RoutingTable::new(&partitioning, &prepared.data);
    let queries = prepared.queries.batch(0);
    let mut out = forest_steps(machine, workload, &table, &queries, runs);
    let keys: Vec<u64> = queries.iter().map(|q| q.lo).collect();
    out.extend(pim_tree_steps(machine.dpus, &keys, runs));
    Ok(out)
}

/// The fastest of `runs` timings of `f`, in nanoseconds.
fn fastest_ns<T>(runs: u32, mut f: impl FnMut() -> T) -> f64 {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed().as_nanos() as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn forest_steps(
    machine: &Machine,
    workload: &Workload,
    table: &RoutingTable,
    queries: &[Query],
    runs: u32,
) -> Vec<Measured> {
    let n = queries.len() as f64;
    let dpus = machine.dpus;
    let kind = workload.kind;
    let route = fastest_ns(runs, || route_batch(table, queries, dpus));
    let (batches, stats) = route_batch(table, queries, dpus);
    let bytes: usize = batches.iter().map(|b| query_buffer(kind, b).len()).sum();
    let pack = fastest_ns(runs, || pack_all(kind, &batches));
    let results: Vec<Vec<Answer>> = batches.iter().map(|b| vec![Some(1); b.len()]).collect();
    let merged = fastest_ns(runs, || merge(kind, &batches, &results, queries.len()));
    let table_note = format!(
        "a routing table of {} entries on {}, batch 0 of {} {} queries",
        table.len(),
        crate::machine::dpus_phrase(dpus),
        queries.len(),
        kind.name()
    );
    vec![
        Measured {
            key: "route_ns_per_query",
            ns_per_unit: route / n,
            what: format!("route_batch over {table_note}"),
        },
        Measured {
            key: "merge_ns_per_result",
            ns_per_unit: merged / stats.fragments.max(1) as f64,
            what: format!("merge of {} partial results", stats.fragments),
        },
        Measured {
            key: "pack_ns_per_byte",
            ns_per_unit: pack / bytes.max(1) as f64,
            what: format!(
                "query_buffer of every DPU, {bytes} bytes (the SDK's byte transposition is not included)"
            ),
        },
    ]
}

fn pack_all(kind: crate::workload::QueryKind, batches: &[DpuBatch]) -> usize {
    batches.iter().map(|b| query_buffer(kind, b).len()).sum()
}

fn pim_tree_steps(dpus: u32, keys: &[u64], runs: u32) -> Vec<Measured> {
    let n = keys.len() as f64;
    let sort = fastest_ns(runs, || sort_with_positions(keys));
    let order = sort_with_positions(keys);
    let scan = fastest_ns(runs, || deduplicate(&order, keys.len()));
    let (distinct, _) = deduplicate(&order, keys.len());
    let m = distinct.len() as f64;
    let hash = fastest_ns(runs, || hash_all(&distinct, dpus));
    let targets = hash_all(&distinct, dpus);
    let bucketed = fastest_ns(runs, || bucket(&distinct, &targets, dpus));
    let round = GetRound::plan(keys, dpus);
    let replies: Vec<Vec<(u64, u64)>> = round
        .tasks
        .iter()
        .map(|t| t.iter().map(|&k| (k, 1)).collect())
        .collect();
    let fill = fastest_ns(runs, || round.fill(&replies));
    let of = |what: &str| {
        format!(
            "{what} ({} lower ends of batch 0 as drawn, {m} distinct; a run asks for the existing keys they resolve to)",
            keys.len()
        )
    };
    vec![
        Measured {
            key: "sort_ns_per_element",
            ns_per_unit: sort / n,
            what: of("sort_with_positions"),
        },
        Measured {
            key: "scan_ns_per_element",
            ns_per_unit: scan / n,
            what: of("deduplicate, one pass"),
        },
        Measured {
            key: "hash_ns_per_key",
            ns_per_unit: hash / m.max(1.0),
            what: of("hash_all"),
        },
        Measured {
            key: "bucket_ns_per_task",
            ns_per_unit: bucketed / m.max(1.0),
            what: of("bucket"),
        },
        Measured {
            key: "fill_ns_per_result",
            ns_per_unit: fill / n,
            what: of("GetRound::fill"),
        },
    ]
}

/// Host threads: those of the simulated host (the machine file's `host.threads`) and those
/// of the machine that measured.
#[derive(Debug, Clone, Copy)]
pub struct Threads {
    pub simulated: u32,
    pub here: usize,
    /// The machine file tags its `threads` `[est]`: the fragment keeps the tag, so that a
    /// spliced file's sensitivity study still moves it.
    pub estimated: bool,
}

/// The `[host]` fragment: the measured constants with their source, `cpu` for the user to
/// check, and the machine file's own `threads`: the constants are per thread, and the
/// simulated host keeps its threads (the calibrating machine's are named in a comment).
pub fn fragment(cpu: &str, threads: Threads, runs: u32, measured: &[Measured]) -> String {
    let runs_phrase = match runs {
        1 => "one run".to_owned(),
        n => format!("fastest of {n} runs"),
    };
    let mut s = format!(
        "# Measured by `pimdes calibrate host` ({} {}), one thread, {runs_phrase}.\n[host]\n",
        env!("CARGO_PKG_NAME"),
        super::VERSION
    );
    s.push_str(&format!(
        "cpu = {}   # [meas] /proc/cpuinfo of the calibrating machine\n",
        toml::Value::String(cpu.to_owned())
    ));
    let tag = if threads.estimated { "[est] " } else { "" };
    s.push_str(&format!(
        "threads = {}   # {tag}the machine file's own: the simulated host's threads (the calibrating machine has {}; set it to model this host)\n",
        threads.simulated, threads.here
    ));
    for m in measured {
        // Machine files refuse zero; a step faster than the clock's resolution rounds up.
        let value = (m.ns_per_unit * 1000.0).round().max(1.0) / 1000.0;
        // `{:?}` keeps the decimal point (84.0, not 84): the keys are floats.
        s.push_str(&format!(
            "{} = {value:?}   # [meas] pimdes calibrate host: {}\n",
            m.key, m.what
        ));
    }
    s
}
