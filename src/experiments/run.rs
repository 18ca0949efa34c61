//! `pimdes run`: B+-Forest end to end on the machine model. Initialisation (build, partition,
//! hot-pair exchange), then every batch through routing, the DPU kernel and postprocessing,
//! with every answer checked against the plain reference.

use crate::engine::Time;
use crate::error::{Error, InputError};
use crate::experiments::partition::{EffectiveConfig, Prepared, imbalance_factor};
use crate::forest::batch::{HEADER_BYTES, query_record_bytes, result_record_bytes};
use crate::forest::build::{DpuTrees, build_dpu_trees, chunk_key_range, chunks_per_dpu};
use crate::forest::image::{DpuLayout, write_trees};
use crate::forest::layout::{PAIR_BYTES, tree_bytes};
use crate::forest::reference::Reference;
use crate::host::HostWork;
use crate::machine::Machine;
use crate::partition::{Partitioner, Partitioning, RoutingTable};
use crate::policies::{
    BatchEnv, EvaluationPolicy, Metrics, PostprocessingPolicy, RoutingPolicy, evaluation_policies,
    postprocessing_policies, routing_policies,
};
use crate::system::System;
use crate::workload::{Query, QueryKind, Workload};
use hdrhistogram::Histogram;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct MeanStd {
    pub mean: f64,
    pub stddev: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Breakdown {
    pub routing: f64,
    pub cpu_to_dpu: f64,
    pub dpu_kernel: f64,
    pub dpu_to_cpu: f64,
    pub postprocessing: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct InitCost {
    /// Sending each DPU its base partition and bulk-loading the cold trees.
    pub build: f64,
    /// Counting the reference batch per chunk and running the partitioner on the host.
    pub partition: f64,
    /// Moving hot pairs DPU -> host -> DPU and building the hot trees.
    pub exchange: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    pub min: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunImbalance {
    pub data: f64,
    /// Mean over the measured batches of IF_q (a query counts once per DPU it reaches).
    pub queries: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PolicyReport {
    pub name: String,
    /// Each metric's mean over the measured batches.
    pub metrics: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Policies {
    pub routing: PolicyReport,
    pub evaluation: PolicyReport,
    pub postprocessing: PolicyReport,
}

/// Facts about the simulating host; determinism comparisons ignore this block.
#[derive(Debug, Clone, Serialize)]
pub struct HostFacts {
    pub wall_s: f64,
    pub peak_rss_bytes: Option<u64>,
    /// Events of the DPU simulations (all batches, warm-up included).
    pub simulated_events: u64,
    /// Wall time spent in the evaluation stage (writing buffers, simulating, reading back).
    pub kernel_wall_s: f64,
    /// Simulated events per wall second of the evaluation stage, over all threads.
    pub simulated_events_per_s: f64,
    pub threads: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub partitioner: String,
    pub dpus: u32,
    pub tasklets: u32,
    pub queries_per_batch: u64,
    pub measured_batches: u64,
    pub batch_time_us: MeanStd,
    /// Means over the measured batches; they add up to `batch_time_us.mean`.
    pub breakdown_us: Breakdown,
    pub init_us: InitCost,
    pub throughput_queries_per_s: f64,
    pub imbalance: RunImbalance,
    /// Kernel time of every DPU in every measured batch.
    pub dpu_kernel_us: Spread,
    pub answers_verified: bool,
    /// Things the user should know, such as the partitioner's warnings.
    pub warnings: Vec<String>,
    pub policies: Policies,
    pub mram: MramNeed,
    pub seed: u64,
    pub version: &'static str,
    pub config: EffectiveConfig,
    pub host: HostFacts,
}

#[derive(Debug, Clone, Serialize)]
pub struct MramNeed {
    pub available_bytes: u64,
    /// Largest need of one DPU: trees plus its largest query and result buffers.
    pub max_needed_bytes: u64,
    pub max_needed_dpu: u32,
}

/// Progress reporting, decided by the caller (a terminal, not `--quiet`).
pub trait Progress {
    fn batch(&mut self, _done: u64, _total: u64) {}
    fn phase(&mut self, _what: &str) {}
}

/// No progress output.
pub struct Silent;
impl Progress for Silent {}

fn pick<T: ?Sized>(
    list: Vec<Box<T>>,
    name: &str,
    key: &str,
    workload: &Workload,
    names: impl Fn(&T) -> &'static str,
) -> Result<Box<T>, InputError> {
    let known: Vec<&'static str> = list.iter().map(|p| names(p)).collect();
    list.into_iter().find(|p| names(p) == name).ok_or_else(|| {
        workload.attribution.error_at(
            key,
            format!(
                "unknown policy `{name}`; expected one of: {}",
                known.join(", ")
            ),
        )
    })
}

/// The policy of each stage of a batch.
pub type Stages = (
    Box<dyn RoutingPolicy>,
    Box<dyn EvaluationPolicy>,
    Box<dyn PostprocessingPolicy>,
);

/// The three policies the workload names.
pub fn policies_of(workload: &Workload) -> Result<Stages, InputError> {
    Ok((
        pick(
            routing_policies(),
            &workload.routing,
            "run.routing",
            workload,
            |p| p.name(),
        )?,
        pick(
            evaluation_policies(),
            &workload.evaluation,
            "run.evaluation",
            workload,
            |p| p.name(),
        )?,
        pick(
            postprocessing_policies(),
            &workload.postprocessing,
            "run.postprocessing",
            workload,
            |p| p.name(),
        )?,
    ))
}

/// Queries each DPU serves in a routed batch, a query counted once per DPU.
fn distinct_queries(batch: &crate::forest::batch::DpuBatch) -> u64 {
    let (cold, hot) = batch.origin.split_at(batch.cold.len());
    // Both lists are in batch order; count their union.
    let (mut i, mut j, mut n) = (0, 0, 0u64);
    let mut last = None;
    while i < cold.len() || j < hot.len() {
        let next = if j >= hot.len() || (i < cold.len() && cold[i] <= hot[j]) {
            i += 1;
            cold[i - 1]
        } else {
            j += 1;
            hot[j - 1]
        };
        if last != Some(next) {
            n += 1;
            last = Some(next);
        }
    }
    n
}

/// DPU cycles to stream `bytes` through the DMA engine in 2,048-byte transfers.
fn streaming_cycles(machine: &Machine, bytes: u64) -> u64 {
    let per_block = machine.dpu.dma.occupancy_cycles(2048);
    bytes.div_ceil(2048) * per_block
}

/// [est] One-off costs. Build: a parallel push of each DPU's base partition (16 bytes per
/// pair), then a launch that streams the pairs in and the tree nodes out through the DMA
/// engine. Partition: the host counts the reference batch per chunk (one lookup per query
/// end) and scans the chunks once. Exchange: a parallel pull of the hot pairs from their
/// home DPUs (after the ownership switch), a parallel push to their new DPUs, and a launch
/// that builds the hot trees.
fn init_costs(
    machine: &Machine,
    system: &System,
    workload: &Workload,
    prepared: &Prepared,
    partitioning: &Partitioning,
) -> InitCost {
    let host = system.host();
    let p = machine.dpus as usize;
    let base: Vec<u64> = (0..p)
        .map(|j| {
            let (a, b) = prepared.loads.base_partition(j, p);
            prepared.loads.size(a, b - 1)
        })
        .collect();
    let push = host.push_parallel(&base.iter().map(|n| n * PAIR_BYTES).collect::<Vec<_>>());
    let build_cycles: Vec<u64> = base
        .iter()
        .map(|&n| streaming_cycles(machine, n * PAIR_BYTES + tree_bytes(n)))
        .collect();
    let build = push.time + host.launch(&build_cycles);

    let ends = if workload.count_both_ends { 2 } else { 1 };
    let partition = host.cpu(
        HostWork {
            queries_routed: workload.batch_size * ends + prepared.loads.chunks() as u64,
            results_merged: 0,
            bytes_packed: 0,
        },
        1,
    );

    let mut out = vec![0u64; p];
    let mut into = vec![0u64; p];
    for part in partitioning.parts.iter().filter(|x| x.hot) {
        let pairs = prepared.loads.size(part.chunks.start, part.chunks.end - 1);
        let home = (0..p)
            .find(|&j| {
                let (a, b) = prepared.loads.base_partition(j, p);
                (a..b).contains(&part.chunks.start)
            })
            .expect("every chunk has a base partition");
        out[home] += pairs * PAIR_BYTES;
        into[part.dpu as usize] += pairs * PAIR_BYTES;
    }
    let exchange = if into.iter().all(|&b| b == 0) {
        Time::ZERO
    } else {
        let rebuild: Vec<u64> = into
            .iter()
            .map(|&b| streaming_cycles(machine, b + tree_bytes(b / PAIR_BYTES)))
            .collect();
        host.ownership_switch(machine.ranks)
            + host.pull_parallel(&out).time
            + host.push_parallel(&into).time
            + host.launch(&rebuild)
    };
    InitCost {
        build: build.as_us_f64(),
        partition: partition.as_us_f64(),
        exchange: exchange.as_us_f64(),
    }
}

/// Checks, before anything is simulated, that every DPU's trees and its largest query and
/// result buffers fit in MRAM. The error names the DPU and the bytes.
fn check_mram(
    machine: &Machine,
    workload: &Workload,
    partitioning: &Partitioning,
    prepared: &Prepared,
    table: &RoutingTable,
    batches: &[Vec<Query>],
) -> Result<MramNeed, InputError> {
    let pairs = partitioning.pairs_per_dpu(&prepared.loads);
    let mut records = vec![0u64; machine.dpus as usize];
    let mut count = vec![0u64; machine.dpus as usize];
    for batch in batches {
        count.fill(0);
        for q in batch {
            table.route(q.lo, q.hi, |e| count[table.target(e).dpu as usize] += 1);
        }
        for (r, &c) in records.iter_mut().zip(&count) {
            *r = (*r).max(c);
        }
    }
    let kind = workload.kind;
    let need: Vec<u64> = pairs
        .iter()
        .zip(&records)
        .map(|(&(cold, hot), &n)| {
            let trees = tree_bytes(cold) + if hot > 0 { tree_bytes(hot) } else { 0 };
            trees.next_multiple_of(8)
                + HEADER_BYTES
                + n * (query_record_bytes(kind) + result_record_bytes(kind))
        })
        .collect();
    let (dpu, &max) = need
        .iter()
        .enumerate()
        .max_by_key(|&(i, b)| (*b, std::cmp::Reverse(i)))
        .expect("at least one DPU");
    if max > machine.mram_size_bytes {
        let (cold, hot) = pairs[dpu];
        return Err(workload.attribution.error_at(
            "data.pairs",
            format!(
                "the data does not fit in MRAM: DPU {dpu} needs {max} bytes ({cold} cold and {hot} hot pairs in trees, and buffers for up to {} queries) but has {} (dpu.mram_size_bytes); choose another partitioner, less data or more DPUs",
                records[dpu], machine.mram_size_bytes
            ),
        ));
    }
    Ok(MramNeed {
        available_bytes: machine.mram_size_bytes,
        max_needed_bytes: max,
        max_needed_dpu: dpu as u32,
    })
}

/// A simulation failure that is not the input's fault.
fn verification_error(kind: QueryKind, batch: u64, i: usize, got: String, want: String) -> Error {
    Error::Verification(format!(
        "batch {batch}, query {i} ({}): the DPUs answered {got}, the reference {want}",
        kind.name()
    ))
}

/// Runs the whole experiment.
pub fn run(
    machine: &Machine,
    workload: &Workload,
    partitioner: &dyn Partitioner,
    progress: &mut dyn Progress,
) -> Result<RunReport, Error> {
    let wall = std::time::Instant::now();
    if workload.tasklets > machine.dpu.max_tasklets {
        return Err(workload
            .attribution
            .error_at(
                "run.tasklets",
                format!(
                    "{} tasklets requested; the machine's DPUs run at most {} (dpu.max_tasklets)",
                    workload.tasklets, machine.dpu.max_tasklets
                ),
            )
            .into());
    }
    let (routing, evaluation, postprocessing) = policies_of(workload)?;
    progress.phase("partitioning");
    let prepared = Prepared::new(machine, workload)?;
    let partitioning = prepared.partition(partitioner, workload)?;
    let table = RoutingTable::new(&partitioning, &prepared.data);
    progress.phase("generating batches");
    let mut batches: Vec<Vec<Query>> = (0..workload.total_batches())
        .map(|b| prepared.queries.batch(b))
        .collect();
    let mram = check_mram(
        machine,
        workload,
        &partitioning,
        &prepared,
        &table,
        &batches,
    )?;

    progress.phase("building trees");
    let views: Vec<&[Query]> = batches.iter().map(|b| b.as_slice()).collect();
    let reference = Reference::new(workload.kind, &views);
    let visit = |c: usize, pairs: &[(u64, u64)]| {
        let (first, last) = chunk_key_range(&prepared.data, c);
        reference.visit(&views, first, last, pairs);
    };
    let (cold_chunks, hot_chunks) = chunks_per_dpu(&partitioning);
    let mut system = System::new(machine);
    // Each DPU's trees go straight into its MRAM; only their shape is kept on the side, so
    // the tree bytes exist once.
    let built: Vec<(DpuLayout, DpuTrees)> = system
        .dpus_mut()
        .par_iter_mut()
        .enumerate()
        .map(|(d, dpu)| {
            let mut t = build_dpu_trees(&prepared.data, &cold_chunks[d], &hot_chunks[d], &visit);
            let layout = DpuLayout::new(&t);
            write_trees(dpu.mram_mut(), &layout, &t);
            t.cold.bytes = Vec::new();
            if let Some(h) = t.hot.as_mut() {
                h.bytes = Vec::new();
            }
            (layout, t)
        })
        .collect();
    drop(views);
    if workload.kind == QueryKind::Get {
        for (b, batch) in batches.iter_mut().enumerate() {
            reference.resolved_gets(b, batch);
        }
    }
    let (layouts, trees): (Vec<DpuLayout>, Vec<DpuTrees>) = built.into_iter().unzip();
    let init = init_costs(machine, &system, workload, &prepared, &partitioning);

    let env_host = system.host().clone();
    let env = BatchEnv {
        kind: workload.kind,
        host: &env_host,
        ranks: machine.ranks,
        dpus: machine.dpus,
        tasklets: workload.tasklets,
        table: &table,
        layouts: &layouts,
        trees: &trees,
    };
    let measured_from = workload.warmup_batches;
    let mut batch_us = Vec::new();
    let mut sums = [0f64; 5];
    let mut if_q = Vec::new();
    let mut kernel_hist =
        Histogram::<u64>::new(3).expect("three significant figures is a valid precision");
    let mut metric_sums: [BTreeMap<&'static str, f64>; 3] = Default::default();
    let mut events = 0u64;
    let mut kernel_wall_s = 0f64;
    let total = workload.total_batches();
    for (b, batch) in batches.iter().enumerate() {
        let b = b as u64;
        progress.batch(b, total);
        let routed = routing.route(&env, batch);
        let started = std::time::Instant::now();
        let evaluated = evaluation.evaluate(&env, &mut system, &routed)?;
        kernel_wall_s += started.elapsed().as_secs_f64();
        let post = postprocessing.postprocess(&env, &routed, &evaluated, batch.len());
        events += evaluated.events;
        let want = reference.answers(b as usize);
        if let Some(i) = (0..batch.len()).find(|&i| post.answers[i] != want[i]) {
            return Err(verification_error(
                workload.kind,
                b,
                i,
                format!("{:?}", post.answers[i]),
                format!("{:?}", want[i]),
            ));
        }
        if b < measured_from {
            continue;
        }
        let parts = [
            routed.routing,
            routed.cpu_to_dpu,
            evaluated.dpu_kernel,
            post.dpu_to_cpu,
            post.postprocessing,
        ];
        let t: Time = parts.iter().copied().fold(Time::ZERO, |a, x| a + x);
        batch_us.push(t.as_us_f64());
        for (s, x) in sums.iter_mut().zip(parts) {
            *s += x.as_us_f64();
        }
        let served: Vec<u64> = routed.batches.iter().map(distinct_queries).collect();
        if_q.push(imbalance_factor(&served));
        for d in &evaluated.per_dpu {
            kernel_hist
                .record(d.ps().div_ceil(1000).max(1))
                .expect("kernel times fit the histogram");
        }
        for (acc, m) in
            metric_sums
                .iter_mut()
                .zip([&routed.metrics, &evaluated.metrics, &post.metrics])
        {
            add_metrics(acc, m);
        }
    }
    progress.phase("done");
    let n = batch_us.len() as f64;
    let mean = batch_us.iter().sum::<f64>() / n;
    let var = batch_us.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let pairs = partitioning.pairs_per_dpu(&prepared.loads);
    let totals: Vec<u64> = pairs.iter().map(|&(c, h)| c + h).collect();
    let ns = |v: u64| v as f64 / 1000.0;
    let policy = |name: &str, sums: &BTreeMap<&'static str, f64>| PolicyReport {
        name: name.to_owned(),
        metrics: sums.iter().map(|(k, v)| (k.to_string(), v / n)).collect(),
    };
    let wall_s = wall.elapsed().as_secs_f64();
    let mut raw_workload = workload.raw.clone();
    raw_workload.partition.partitioner = partitioner.name().to_owned();
    Ok(RunReport {
        partitioner: partitioner.name().to_owned(),
        dpus: machine.dpus,
        tasklets: workload.tasklets,
        queries_per_batch: workload.batch_size,
        measured_batches: workload.measured_batches,
        batch_time_us: MeanStd {
            mean,
            stddev: var.sqrt(),
        },
        breakdown_us: Breakdown {
            routing: sums[0] / n,
            cpu_to_dpu: sums[1] / n,
            dpu_kernel: sums[2] / n,
            dpu_to_cpu: sums[3] / n,
            postprocessing: sums[4] / n,
        },
        init_us: init,
        throughput_queries_per_s: workload.batch_size as f64 / (mean * 1e-6),
        imbalance: RunImbalance {
            data: imbalance_factor(&totals),
            queries: if_q.iter().sum::<f64>() / n,
        },
        dpu_kernel_us: Spread {
            min: ns(kernel_hist.min()),
            p50: ns(kernel_hist.value_at_quantile(0.5)),
            p99: ns(kernel_hist.value_at_quantile(0.99)),
            max: ns(kernel_hist.max()),
        },
        answers_verified: true,
        warnings: partitioning.warnings.clone(),
        policies: Policies {
            routing: policy(routing.name(), &metric_sums[0]),
            evaluation: policy(evaluation.name(), &metric_sums[1]),
            postprocessing: policy(postprocessing.name(), &metric_sums[2]),
        },
        mram,
        seed: workload.seed,
        version: env!("CARGO_PKG_VERSION"),
        config: EffectiveConfig {
            machine: machine.raw.clone(),
            workload: raw_workload,
        },
        host: HostFacts {
            wall_s,
            peak_rss_bytes: peak_rss_bytes(),
            simulated_events: events,
            kernel_wall_s,
            simulated_events_per_s: events as f64 / kernel_wall_s.max(1e-9),
            threads: rayon::current_num_threads(),
        },
    })
}

fn add_metrics(acc: &mut BTreeMap<&'static str, f64>, m: &Metrics) {
    for &(k, v) in m {
        *acc.entry(k).or_insert(0.0) += v;
    }
}

/// Peak resident set of this process (VmHWM), where the platform reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
