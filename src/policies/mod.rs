//! The three stages of a B+-Forest batch as pluggable policies, chosen by name:
//! routing (host), evaluation (the DPU kernel and its work split) and postprocessing (host).
//!
//! Each stage computes its part of the batch functionally and says what it costs in the
//! machine's terms (host work, bytes per DPU, each DPU's kernel time); the index turns that
//! into the batch's program, and the system executor times it. Every stage also returns
//! named metrics, so every implementation reports in one schema; `pimdes run` averages them
//! over the measured batches under `policies.<stage>.metrics`.
//!
//! Each stage's functional part (route, evaluate a range of DPUs, merge) is apart from its
//! cost, which depends only on the batch's [`Shape`]: so a batch too large to hold at once
//! can be routed and evaluated a group of DPUs at a time and still cost exactly what it
//! would have cost whole (see `index::bforest::stream`).

use crate::dpu::{LaunchError, LaunchReport, TaskletTimeline};
use crate::engine::Time;
use crate::forest::batch::{
    DpuBatch, merge_parallel, query_buffer_bytes, result_buffer_bytes, route_batch, route_in_pieces,
};
use crate::forest::build::DpuTrees;
use crate::forest::image::{DpuLayout, query_buffer, read_results};
use crate::forest::kernel::{ForestKernel, WorkSplit};
use crate::forest::reference::Answer;
use crate::host::{HostWork, moved_bytes};
use crate::machine::Machine;
use crate::partition::RoutingTable;
use crate::system::System;
use crate::system::program::TransferKind;
use crate::workload::{Query, QueryKind};
use rayon::prelude::*;
use std::ops::Range;

/// Named per-batch measurements of a stage.
pub type Metrics = Vec<(&'static str, f64)>;

/// What every stage may look at.
pub struct BatchEnv<'a> {
    pub kind: QueryKind,
    pub machine: &'a Machine,
    pub tasklets: u32,
    pub table: &'a RoutingTable,
    pub layouts: &'a [DpuLayout],
    pub trees: &'a [DpuTrees],
}

/// What a batch's costs depend on: its number of queries and each DPU's fragments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub queries: u64,
    /// Fragments (records) each DPU receives, by DPU.
    pub fragments: Vec<u64>,
}

impl Shape {
    /// The shape of `queries` queries routed to `batches`.
    pub fn of(queries: u64, batches: &[DpuBatch]) -> Shape {
        Shape {
            queries,
            fragments: batches.iter().map(|b| b.len() as u64).collect(),
        }
    }

    pub fn total_fragments(&self) -> u64 {
        self.fragments.iter().sum()
    }
}

/// A host stage's cost: its host work, the bytes of each DPU's buffer it moves, its metrics.
pub struct Cost {
    pub work: HostWork,
    pub bytes: Vec<u64>,
    pub metrics: Metrics,
}

/// The routing stage's result: per-DPU query lists, the host work and the buffers to send.
pub struct Routed {
    pub batches: Vec<DpuBatch>,
    /// Host work of routing and packing.
    pub work: HostWork,
    /// Bytes of each DPU's query buffer.
    pub push_bytes: Vec<u64>,
    pub metrics: Metrics,
}

/// The evaluation stage's result: each DPU's partial results in record order.
pub struct Evaluated {
    pub results: Vec<Vec<Answer>>,
    /// Each DPU's kernel time.
    pub per_dpu: Vec<Time>,
    pub events: u64,
    pub metrics: Metrics,
}

/// The postprocessing stage's result: one answer per query, in batch order.
pub struct Postprocessed {
    pub answers: Vec<Answer>,
    /// Bytes of each DPU's result buffer, read back before merging.
    pub pull_bytes: Vec<u64>,
    /// Host work of merging.
    pub work: HostWork,
    pub metrics: Metrics,
}

pub trait RoutingPolicy: Send + Sync {
    fn name(&self) -> &'static str;
    /// Each DPU's fragments of `queries`, their `origin` indices into `queries`, in query
    /// order. Each query's fragments must depend on that query alone: a batch is routed in
    /// pieces on all threads ([`route`]), and a streamed batch also leaves out queries that
    /// reach none of the DPUs at hand.
    fn route(&self, env: &BatchEnv, queries: &[Query]) -> Vec<DpuBatch>;
    /// The host work of routing and packing a batch of `shape`, and each DPU's query
    /// buffer bytes.
    fn cost(&self, env: &BatchEnv, shape: &Shape) -> Cost;
}

/// Routes `queries` with `policy` on rayon's threads (see [`route_in_pieces`]), and prices
/// the result.
pub fn route(policy: &dyn RoutingPolicy, env: &BatchEnv, queries: &[Query]) -> Routed {
    let dpus = env.machine.dpus as usize;
    let batches = route_in_pieces(queries, dpus, |piece| policy.route(env, piece));
    let cost = policy.cost(env, &Shape::of(queries.len() as u64, &batches));
    Routed {
        batches,
        work: cost.work,
        push_bytes: cost.bytes,
        metrics: cost.metrics,
    }
}

/// One launch on a range of DPUs: their partial results and launch reports, in DPU order.
pub struct Part {
    pub results: Vec<Vec<Answer>>,
    pub reports: Vec<LaunchReport>,
}

pub trait EvaluationPolicy: Send + Sync {
    fn name(&self) -> &'static str;
    /// The `[dpu.instructions]` keys its kernel reads (by default not said).
    fn instruction_keys(&self) -> Option<Vec<&'static str>> {
        None
    }
    /// Writes the query buffers of DPUs `dpus` (`batches` holds every DPU's), launches the
    /// kernel on them and reads their results back.
    fn evaluate(
        &self,
        env: &BatchEnv,
        system: &mut System,
        batches: &[DpuBatch],
        dpus: Range<usize>,
    ) -> Result<Part, LaunchError>;

    /// The stage's metrics, from every DPU's launch report of the batch. Each must add up
    /// over launches that follow one another (a batch split over several launches reports
    /// the sum, see [`Evaluated::in_sequence`]): counts and critical-path cycles, not ratios.
    fn metrics(&self, reports: &[LaunchReport]) -> Metrics;

    /// Runs DPU `dpu`'s kernel of the batch just evaluated again, recording its tasklets'
    /// activity (at most `max_spans` spans), for a trace. The kernel only reads its query
    /// buffer and trees and rewrites its results, so the rerun is the same launch: its
    /// report is returned for the caller to check.
    fn record(
        &self,
        env: &BatchEnv,
        system: &mut System,
        batches: &[DpuBatch],
        dpu: u32,
        max_spans: usize,
    ) -> Result<(LaunchReport, TaskletTimeline), LaunchError>;
}

/// Evaluates a whole batch with `policy`: every DPU in one launch.
pub fn evaluate(
    policy: &dyn EvaluationPolicy,
    env: &BatchEnv,
    system: &mut System,
    batches: &[DpuBatch],
) -> Result<Evaluated, LaunchError> {
    let part = policy.evaluate(env, system, batches, 0..batches.len())?;
    Ok(Evaluated::of(policy, system, part.results, &part.reports))
}

impl Evaluated {
    /// The stage's result over launches one after another on every DPU (a batch whose
    /// share of a DPU is split to fit MRAM): each DPU's results in launch order, its kernel
    /// times summed, and each metric summed over the launches (the slowest DPU's cycles
    /// becomes the sum of each launch's slowest, the kernel stage's critical path).
    pub fn in_sequence(launches: Vec<Evaluated>) -> Evaluated {
        let mut launches = launches.into_iter();
        let mut all = launches.next().expect("at least one launch");
        for l in launches {
            for (r, more) in all.results.iter_mut().zip(l.results) {
                r.extend(more);
            }
            for (t, more) in all.per_dpu.iter_mut().zip(l.per_dpu) {
                *t += more;
            }
            all.events += l.events;
            for ((key, v), (more_key, more)) in all.metrics.iter_mut().zip(l.metrics) {
                assert_eq!(*key, more_key, "one policy's metrics, in one order");
                *v += more;
            }
        }
        all
    }

    /// The stage's result from every DPU's results and launch report, in DPU order.
    pub fn of(
        policy: &dyn EvaluationPolicy,
        system: &System,
        results: Vec<Vec<Answer>>,
        reports: &[LaunchReport],
    ) -> Evaluated {
        assert_eq!(reports.len(), system.dpus().len(), "one report per DPU");
        Evaluated {
            results,
            per_dpu: system
                .dpus()
                .iter()
                .zip(reports)
                .map(|(d, r)| d.duration(r))
                .collect(),
            events: reports.iter().map(|r| r.stats.events).sum(),
            metrics: policy.metrics(reports),
        }
    }
}

pub trait PostprocessingPolicy: Send + Sync {
    fn name(&self) -> &'static str;
    /// One answer per query of the batch (`queries` of them), from every DPU's partial
    /// results.
    fn merge(
        &self,
        env: &BatchEnv,
        batches: &[DpuBatch],
        results: &[Vec<Answer>],
        queries: usize,
    ) -> Vec<Answer>;
    /// The host work of merging a batch of `shape`, and each DPU's result buffer bytes.
    fn cost(&self, env: &BatchEnv, shape: &Shape) -> Cost;
}

/// Merges a batch's results with `policy`, and prices it.
pub fn postprocess(
    policy: &dyn PostprocessingPolicy,
    env: &BatchEnv,
    routed: &Routed,
    evaluated: &Evaluated,
    queries: usize,
) -> Postprocessed {
    let cost = policy.cost(env, &Shape::of(queries as u64, &routed.batches));
    Postprocessed {
        answers: policy.merge(env, &routed.batches, &evaluated.results, queries),
        pull_bytes: cost.bytes,
        work: cost.work,
        metrics: cost.metrics,
    }
}

pub fn routing_policies() -> Vec<Box<dyn RoutingPolicy>> {
    vec![Box::new(HostBinarySearch)]
}

pub fn evaluation_policies() -> Vec<Box<dyn EvaluationPolicy>> {
    vec![
        Box::new(TaskletEvaluation {
            name: "tasklet-static",
            split: WorkSplit::Static,
        }),
        Box::new(TaskletEvaluation {
            name: "tasklet-dynamic",
            split: WorkSplit::Dynamic,
        }),
    ]
}

pub fn postprocessing_policies() -> Vec<Box<dyn PostprocessingPolicy>> {
    vec![Box::new(HostMerge)]
}

/// The host routes: binary search of each query's lower end in the routing table, a walk
/// to the right for ranges, per-DPU buffers packed by all host threads, then one parallel
/// transfer per rank (each rank padded to its largest buffer).
pub struct HostBinarySearch;

impl RoutingPolicy for HostBinarySearch {
    fn name(&self) -> &'static str {
        "host-binary-search"
    }

    fn route(&self, env: &BatchEnv, queries: &[Query]) -> Vec<DpuBatch> {
        route_batch(env.table, queries, env.machine.dpus).0
    }

    fn cost(&self, env: &BatchEnv, shape: &Shape) -> Cost {
        let push_bytes: Vec<u64> = shape
            .fragments
            .iter()
            .map(|&n| query_buffer_bytes(env.kind, n))
            .collect();
        let bytes: u64 = push_bytes.iter().sum();
        let moved = moved_bytes(env.machine, TransferKind::Parallel, &push_bytes);
        let fragments = shape.total_fragments();
        Cost {
            work: HostWork {
                queries_routed: shape.queries,
                results_merged: 0,
                bytes_packed: bytes,
                ..HostWork::default()
            },
            bytes: push_bytes,
            metrics: vec![
                ("fragments", fragments as f64),
                (
                    "fragments_per_query",
                    fragments as f64 / shape.queries.max(1) as f64,
                ),
                ("bytes_sent", bytes as f64),
                ("bytes_moved_with_padding", moved as f64),
            ],
        }
    }
}

/// The paper's DPU kernel with `tasklets` tasklets; the work split is the policy's.
pub struct TaskletEvaluation {
    name: &'static str,
    split: WorkSplit,
}

impl TaskletEvaluation {
    fn kernel(&self, env: &BatchEnv, batches: &[DpuBatch]) -> ForestKernel {
        ForestKernel {
            kind: env.kind,
            split: self.split,
            dpus: env
                .layouts
                .iter()
                .zip(env.trees)
                .zip(batches)
                .map(|((l, t), b)| l.args(t, env.kind, b.len() as u64))
                .collect(),
        }
    }
}

impl EvaluationPolicy for TaskletEvaluation {
    fn name(&self) -> &'static str {
        self.name
    }

    fn instruction_keys(&self) -> Option<Vec<&'static str>> {
        Some(crate::forest::kernel::instruction_keys(self.split))
    }

    fn record(
        &self,
        env: &BatchEnv,
        system: &mut System,
        batches: &[DpuBatch],
        dpu: u32,
        max_spans: usize,
    ) -> Result<(LaunchReport, TaskletTimeline), LaunchError> {
        let kernel = self.kernel(env, batches);
        system.dpus_mut()[dpu as usize]
            .launch_recorded(&kernel, env.tasklets, max_spans)
            .map_err(|error| LaunchError { dpu, error })
    }

    fn evaluate(
        &self,
        env: &BatchEnv,
        system: &mut System,
        batches: &[DpuBatch],
        dpus: Range<usize>,
    ) -> Result<Part, LaunchError> {
        let layouts = &env.layouts[dpus.clone()];
        let mine = &batches[dpus.clone()];
        (system.dpus_mut()[dpus.clone()].par_iter_mut())
            .zip(layouts)
            .zip(mine)
            .for_each(|((dpu, layout), batch)| {
                dpu.mram_mut()
                    .write(layout.query_base, &query_buffer(env.kind, batch));
            });
        let reports =
            system.launch_range(&self.kernel(env, batches), env.tasklets, dpus.clone())?;
        let results = (system.dpus()[dpus].par_iter())
            .zip(layouts)
            .zip(mine)
            .map(|((d, l), b)| read_results(d.mram(), l, env.kind, b.len() as u64))
            .collect();
        Ok(Part { results, reports })
    }

    fn metrics(&self, reports: &[LaunchReport]) -> Metrics {
        // The first of the DPUs whose launch took the most cycles: what bound it.
        let slowest = reports.iter().rev().max_by_key(|r| r.cycles);
        let of_slowest = |f: fn(&LaunchReport) -> u64| slowest.map_or(0, f);
        let events: u64 = reports.iter().map(|r| r.stats.events).sum();
        let dma: u64 = reports
            .iter()
            .map(|r| r.stats.dma_reads + r.stats.dma_writes)
            .sum();
        vec![
            ("slowest_dpu_cycles", of_slowest(|r| r.cycles) as f64),
            (
                "slowest_dpu_instructions",
                of_slowest(|r| r.stats.instructions) as f64,
            ),
            (
                "slowest_dpu_dma_busy_cycles",
                of_slowest(|r| r.stats.dma_busy_cycles) as f64,
            ),
            ("events", events as f64),
            ("dma_requests", dma as f64),
        ]
    }
}

/// The host reads every DPU's results back with one parallel transfer per rank (the first
/// read after the launch pays the MRAM ownership switch) and merges the fragments into one
/// answer per query: copy for get, sum for count, max for max.
pub struct HostMerge;

impl PostprocessingPolicy for HostMerge {
    fn name(&self) -> &'static str {
        "host-merge"
    }

    fn merge(
        &self,
        env: &BatchEnv,
        batches: &[DpuBatch],
        results: &[Vec<Answer>],
        queries: usize,
    ) -> Vec<Answer> {
        merge_parallel(env.kind, batches, results, queries)
    }

    fn cost(&self, env: &BatchEnv, shape: &Shape) -> Cost {
        let pull_bytes: Vec<u64> = shape
            .fragments
            .iter()
            .map(|&n| result_buffer_bytes(env.kind, n))
            .collect();
        let received: u64 = pull_bytes.iter().sum();
        let moved = moved_bytes(env.machine, TransferKind::Parallel, &pull_bytes);
        Cost {
            work: HostWork {
                queries_routed: 0,
                results_merged: shape.total_fragments(),
                bytes_packed: 0,
                ..HostWork::default()
            },
            bytes: pull_bytes,
            metrics: vec![
                ("bytes_received", received as f64),
                ("bytes_moved_with_padding", moved as f64),
            ],
        }
    }
}
