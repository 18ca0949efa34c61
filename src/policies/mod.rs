//! The three stages of a B+-Forest batch as pluggable policies, chosen by name:
//! routing (host), evaluation (the DPU kernel and its work split) and postprocessing (host).
//!
//! Each stage computes its part of the batch functionally and says what it costs in the
//! machine's terms (host work, bytes per DPU, each DPU's kernel time); the index turns that
//! into the batch's program, and the system executor times it. Every stage also returns
//! named metrics, so every implementation reports in one schema; `pimdes run` averages them
//! over the measured batches under `policies.<stage>.metrics`.

use crate::dpu::{LaunchError, LaunchReport, TaskletTimeline};
use crate::engine::Time;
use crate::forest::batch::{DpuBatch, merge, query_buffer_bytes, result_buffer_bytes, route_batch};
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
    fn route(&self, env: &BatchEnv, queries: &[Query]) -> Routed;
}

pub trait EvaluationPolicy: Send + Sync {
    fn name(&self) -> &'static str;
    fn evaluate(
        &self,
        env: &BatchEnv,
        system: &mut System,
        routed: &Routed,
    ) -> Result<Evaluated, LaunchError>;

    /// Runs DPU `dpu`'s kernel of the batch just evaluated again, recording its tasklets'
    /// activity (at most `max_spans` spans), for a trace. The kernel only reads its query
    /// buffer and trees and rewrites its results, so the rerun is the same launch: its
    /// report is returned for the caller to check.
    fn record(
        &self,
        env: &BatchEnv,
        system: &mut System,
        routed: &Routed,
        dpu: u32,
        max_spans: usize,
    ) -> Result<(LaunchReport, TaskletTimeline), LaunchError>;
}

pub trait PostprocessingPolicy: Send + Sync {
    fn name(&self) -> &'static str;
    fn postprocess(
        &self,
        env: &BatchEnv,
        routed: &Routed,
        evaluated: &Evaluated,
        queries: usize,
    ) -> Postprocessed;
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

    fn route(&self, env: &BatchEnv, queries: &[Query]) -> Routed {
        let (batches, stats) = route_batch(env.table, queries, env.machine.dpus);
        let push_bytes: Vec<u64> = batches
            .iter()
            .map(|b| query_buffer_bytes(env.kind, b))
            .collect();
        let bytes: u64 = push_bytes.iter().sum();
        let moved = moved_bytes(env.machine, TransferKind::Parallel, &push_bytes);
        Routed {
            batches,
            work: HostWork {
                queries_routed: stats.queries,
                results_merged: 0,
                bytes_packed: bytes,
                ..HostWork::default()
            },
            push_bytes,
            metrics: vec![
                ("fragments", stats.fragments as f64),
                (
                    "fragments_per_query",
                    stats.fragments as f64 / stats.queries.max(1) as f64,
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
    fn kernel(&self, env: &BatchEnv, routed: &Routed) -> ForestKernel {
        ForestKernel {
            kind: env.kind,
            split: self.split,
            dpus: env
                .layouts
                .iter()
                .zip(env.trees)
                .zip(&routed.batches)
                .map(|((l, t), b)| l.args(t, env.kind, b.len() as u64))
                .collect(),
        }
    }
}

impl EvaluationPolicy for TaskletEvaluation {
    fn name(&self) -> &'static str {
        self.name
    }

    fn record(
        &self,
        env: &BatchEnv,
        system: &mut System,
        routed: &Routed,
        dpu: u32,
        max_spans: usize,
    ) -> Result<(LaunchReport, TaskletTimeline), LaunchError> {
        let kernel = self.kernel(env, routed);
        system.dpus_mut()[dpu as usize]
            .launch_recorded(&kernel, env.tasklets, max_spans)
            .map_err(|error| LaunchError { dpu, error })
    }

    fn evaluate(
        &self,
        env: &BatchEnv,
        system: &mut System,
        routed: &Routed,
    ) -> Result<Evaluated, LaunchError> {
        for ((dpu, layout), batch) in system
            .dpus_mut()
            .iter_mut()
            .zip(env.layouts)
            .zip(&routed.batches)
        {
            dpu.mram_mut()
                .write(layout.query_base, &query_buffer(env.kind, batch));
        }
        let report = system.launch(&self.kernel(env, routed), env.tasklets)?;
        let results = system
            .dpus()
            .iter()
            .zip(env.layouts)
            .zip(&routed.batches)
            .map(|((d, l), b)| read_results(d.mram(), l, env.kind, b.len() as u64))
            .collect();
        let per_dpu: Vec<Time> = system
            .dpus()
            .iter()
            .zip(&report.per_dpu)
            .map(|(d, r)| d.duration(r))
            .collect();
        let dma: u64 = report
            .per_dpu
            .iter()
            .map(|r| r.stats.dma_reads + r.stats.dma_writes)
            .sum();
        Ok(Evaluated {
            results,
            per_dpu,
            events: report.events,
            metrics: vec![
                ("slowest_dpu_cycles", report.slowest_cycles as f64),
                ("events", report.events as f64),
                ("dma_requests", dma as f64),
            ],
        })
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

    fn postprocess(
        &self,
        env: &BatchEnv,
        routed: &Routed,
        evaluated: &Evaluated,
        queries: usize,
    ) -> Postprocessed {
        let pull_bytes: Vec<u64> = routed
            .batches
            .iter()
            .map(|b| result_buffer_bytes(env.kind, b))
            .collect();
        let received: u64 = pull_bytes.iter().sum();
        let fragments: u64 = routed.batches.iter().map(|b| b.len() as u64).sum();
        Postprocessed {
            answers: merge(env.kind, &routed.batches, &evaluated.results, queries),
            pull_bytes,
            work: HostWork {
                queries_routed: 0,
                results_merged: fragments,
                bytes_packed: 0,
                ..HostWork::default()
            },
            metrics: vec![("bytes_received", received as f64)],
        }
    }
}
