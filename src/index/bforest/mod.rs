//! B+-Forest as an [`Index`]: the partitioner places chunks (bottom-level subtrees) on DPUs,
//! each DPU keeps a cold and a hot B+-tree in MRAM, and a batch runs through the three
//! policies (routing, evaluation, postprocessing). Its program:
//!
//! | stage | class | step |
//! |---|---|---|
//! | `routing` | cpu | route and pack on all host threads |
//! | `cpu_to_dpu` | communication | parallel push of the query buffers |
//! | `dpu_kernel` | pim | launch, the kernel on every DPU |
//! | `dpu_to_cpu` | communication | ownership switch, parallel pull of the result buffers |
//! | `postprocessing` | cpu | merge on all host threads |
//!
//! A run's batches are generated and held up front, with their reference answers filled in
//! while the trees are built; or, when they are too many queries to hold (see
//! [`Workload::streams`]), each batch is streamed ([`stream`]).

pub mod stream;

use super::{
    BatchWork, Index, IndexError, MramNeed, Record, Recording, busiest, check_tasklets, host_step,
    streaming_time,
};
use crate::config::{Attribution, InputError, blame_rule};
use crate::dpu::TaskletTimeline;
use crate::engine::Time;
use crate::forest::batch::{DpuBatch, largest_launch_records, launch_parts_of, launch_records};
use crate::forest::build::{
    DpuTrees, TreeScratch, build_dpu_trees_into, chunk_key_range, chunks_per_dpu,
};
use crate::forest::image::{DpuLayout, mram_need_bytes, write_trees};
use crate::forest::layout::{PAIR_BYTES, tree_bytes};
use crate::forest::reference::Reference;
use crate::host::{HostUnit, HostWork};
use crate::machine::Machine;
use crate::partition::prepared::{Prepared, imbalance_factor};
use crate::partition::{Partitioner, Partitioning, RoutingTable};
use crate::policies::{
    self, BatchEnv, EvaluationPolicy, Metrics, PostprocessingPolicy, RoutingPolicy, Shape,
    evaluation_policies, postprocessing_policies, routing_policies,
};
use crate::system::System;
use crate::system::program::{Class, Direction, Program, Stage, Step, TransferKind};
use crate::workload::{Query, QueryKind, Workload};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// The name `run.index` selects B+-Forest by.
pub const NAME: &str = "b+forest";

pub(super) const STAGES: [Stage; 5] = [
    Stage {
        name: "routing",
        class: Class::Cpu,
    },
    Stage {
        name: "cpu_to_dpu",
        class: Class::Communication,
    },
    Stage {
        name: "dpu_kernel",
        class: Class::Pim,
    },
    Stage {
        name: "dpu_to_cpu",
        class: Class::Communication,
    },
    Stage {
        name: "postprocessing",
        class: Class::Cpu,
    },
];

/// The policy of each stage of a batch.
pub struct Policies {
    pub routing: Box<dyn RoutingPolicy>,
    pub evaluation: Box<dyn EvaluationPolicy>,
    pub postprocessing: Box<dyn PostprocessingPolicy>,
}

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

impl Policies {
    /// The three policies the workload names.
    pub fn of(workload: &Workload) -> Result<Policies, InputError> {
        Ok(Policies {
            routing: pick(
                routing_policies(),
                &workload.routing,
                "run.routing",
                workload,
                |p| p.name(),
            )?,
            evaluation: pick(
                evaluation_policies(),
                &workload.evaluation,
                "run.evaluation",
                workload,
                |p| p.name(),
            )?,
            postprocessing: pick(
                postprocessing_policies(),
                &workload.postprocessing,
                "run.postprocessing",
                workload,
                |p| p.name(),
            )?,
        })
    }
}

/// B+-Forest's own measurements, over the measured batches.
#[derive(Debug, Clone, Default)]
struct Tally {
    batches: u64,
    /// The most launches a measured batch took.
    most_launches: u32,
    if_q_sum: f64,
    metric_sums: [BTreeMap<&'static str, f64>; 3],
}

/// A run's batches: held with their reference answers, or counted for streaming.
enum Batches {
    Held {
        queries: Vec<Vec<Query>>,
        reference: Reference,
    },
    Streamed {
        counted: Vec<stream::Counted>,
        /// Each DPU's cold and hot chunks, for the reference.
        chunks: (Vec<Vec<usize>>, Vec<Vec<usize>>),
    },
}

/// B+-Forest placed on a machine, with its reference answers.
pub struct BForest {
    forest: Forest,
    partitioner: String,
    policies: Policies,
    prepared: Prepared,
    partitioning: Partitioning,
    batches: Batches,
    system: System,
    mram: MramNeed,
    /// (cold, hot) pairs in each DPU's trees, for each batch's MRAM split.
    dpu_pairs: Vec<(u64, u64)>,
    tally: Tally,
    count_both_ends: bool,
    batch_size: u64,
    stream_fragments: u64,
    /// How far a streamed batch has come (its fragments evaluated), for progress lines.
    meter: std::sync::Arc<crate::meter::Meter>,
}

/// The forest as placed on the machine: what every stage of a batch looks at (its
/// [`BatchEnv`]). A field of its own, so that the env borrows it alone while the batch
/// runs on `&mut` [`System`].
struct Forest {
    machine: Machine,
    kind: QueryKind,
    tasklets: u32,
    table: RoutingTable,
    layouts: Vec<DpuLayout>,
    trees: Vec<DpuTrees>,
}

impl Forest {
    fn env(&self) -> BatchEnv<'_> {
        BatchEnv {
            kind: self.kind,
            machine: &self.machine,
            tasklets: self.tasklets,
            table: &self.table,
            layouts: &self.layouts,
            trees: &self.trees,
        }
    }
}

impl BForest {
    /// Partitions the workload's data, checks MRAM, builds every DPU's trees into its MRAM
    /// and prepares the reference answers of every batch it holds (a streamed batch's are
    /// worked out window by window as it runs; see [`stream`]).
    pub fn new(
        machine: &Machine,
        workload: &Workload,
        partitioner: &dyn Partitioner,
        progress: &mut crate::meter::Phases<'_>,
    ) -> Result<BForest, IndexError> {
        Self::with_policies(
            machine,
            workload,
            partitioner,
            Policies::of(workload)?,
            progress,
        )
    }

    /// As [`BForest::new`], with policies given by the caller (for example a policy under
    /// test that is not in the registry).
    pub fn with_policies(
        machine: &Machine,
        workload: &Workload,
        partitioner: &dyn Partitioner,
        policies: Policies,
        progress: &mut crate::meter::Phases<'_>,
    ) -> Result<BForest, IndexError> {
        check_tasklets(machine, workload)?;
        check_streaming(workload, false)?;
        check_granularity(workload)?;
        progress.phase("partitioning");
        let prepared = Prepared::new(machine, workload)?;
        let partitioning = prepared.partition(partitioner, workload)?;
        // The reference sees the chunks the partitioning places, as the trees do: a chunk
        // it left out would be missing from both, and range answers would still agree.
        partitioning
            .check(prepared.loads.chunks())
            .map_err(|e| IndexError::Verification(format!("the partitioning: {e}")))?;
        let table = RoutingTable::new(&partitioning, &prepared.data);
        let streams = workload.streams();
        progress.phase(if streams {
            "counting batches"
        } else {
            "generating batches"
        });
        let (held, counted, records) =
            batches_up_front(machine, workload, &policies, &prepared, &table);
        let mram = check_mram(machine, workload, &partitioning, &prepared, &records)?;
        progress.phase("building trees");
        progress.meter.start(prepared.data.chunks() as u64);
        let mut system = System::new(machine);
        let (batches, layouts, trees) = build_batches(
            &mut system,
            (workload, &progress.meter),
            (&prepared, &partitioning),
            (held, counted),
        );
        let dpu_pairs = partitioning.pairs_per_dpu(&prepared.loads);
        Ok(BForest {
            forest: Forest {
                machine: machine.clone(),
                kind: workload.kind,
                tasklets: workload.tasklets,
                table,
                layouts,
                trees,
            },
            partitioner: partitioner.name().to_owned(),
            policies,
            prepared,
            partitioning,
            batches,
            system,
            mram,
            dpu_pairs,
            tally: Tally::default(),
            count_both_ends: workload.count_both_ends,
            batch_size: workload.batch_size,
            stream_fragments: workload.stream_fragments,
            meter: std::sync::Arc::clone(&progress.meter),
        })
    }

    /// The first `queries` of a held batch (fewer if it holds fewer: open arrivals take part
    /// of one), routed: the routed batch and its number of queries.
    fn route_held(
        &self,
        env: &BatchEnv,
        held: &[Query],
        queries: u64,
    ) -> (policies::Routed, usize) {
        let n = (queries as usize).min(held.len());
        (policies::route(&*self.policies.routing, env, &held[..n]), n)
    }

    /// The launches a batch of `shape` takes so that every DPU's share fits in MRAM.
    fn launches(&self, shape: &Shape) -> Result<u32, IndexError> {
        let machine = &self.forest.machine;
        launches_for(
            machine,
            self.forest.kind,
            &self.dpu_pairs,
            shape,
            &self.mram,
        )
    }

    /// A held batch: routed whole, evaluated on every DPU at once, merged and checked
    /// against the reference's answers.
    fn run_held(
        &mut self,
        batch: u64,
        queries: u64,
        measured: bool,
        record: &Record,
    ) -> Result<BatchWork, IndexError> {
        let Batches::Held {
            queries: held,
            reference,
        } = &self.batches
        else {
            unreachable!("a held batch")
        };
        let env = self.forest.env();
        let (routed, n) = self.route_held(&env, &held[batch as usize], queries);
        let shape = Shape::of(n as u64, &routed.batches);
        let launches = self.launches(&shape)?;
        let started = std::time::Instant::now();
        let per_launch = evaluate_launches(
            &*self.policies.evaluation,
            &env,
            &mut self.system,
            &routed.batches,
            launches,
        )?;
        let kernel_wall_s = started.elapsed().as_secs_f64();
        let kernel: Vec<Vec<Time>> = per_launch.iter().map(|e| e.per_dpu.clone()).collect();
        let evaluated = policies::Evaluated::in_sequence(per_launch);
        let post =
            policies::postprocess(&*self.policies.postprocessing, &env, &routed, &evaluated, n);
        // Open arrivals may take fewer queries than the batch holds: its first `n`.
        let want = reference.answers(batch as usize);
        let verified = super::verify(env.kind, batch, &post.answers, &want[..n])?;
        let timelines = record_dpus(
            &*self.policies.evaluation,
            (&env, &mut self.system),
            &routed.batches,
            (&kernel, &evaluated.per_dpu),
            record,
        )?;
        let program = self.program([routed.work, post.work], &env, &shape, &kernel);
        if measured {
            let served: Vec<u64> = routed.batches.iter().map(distinct_queries).collect();
            self.tally(
                (&served, kernel.len() as u32),
                [&routed.metrics, &evaluated.metrics, &post.metrics],
            );
        }
        Ok(BatchWork {
            program,
            dpu_kernel: evaluated.per_dpu,
            events: evaluated.events,
            kernel_wall_s,
            answers_verified: verified,
            timelines,
        })
    }

    /// A streamed batch (see [`stream`]): priced from its counted shape, evaluated a group
    /// of DPUs at a time, each DPU's partial answers checked.
    fn run_streamed(
        &mut self,
        batch: u64,
        queries: u64,
        measured: bool,
        record: &Record,
    ) -> Result<BatchWork, IndexError> {
        let Batches::Streamed { counted, chunks } = &self.batches else {
            unreachable!("a streamed batch")
        };
        let counted = &counted[batch as usize];
        assert_eq!(queries, counted.shape.queries, "streamed batches are whole");
        assert_eq!(*record, Record::Nothing, "streamed batches are not traced");
        let env = self.forest.env();
        let streamer = stream::Streamer {
            env: &env,
            routing: &*self.policies.routing,
            evaluation: &*self.policies.evaluation,
            prepared: &self.prepared,
            partitioning: &self.partitioning,
            chunks,
            batch,
            budget: stream::Budget::new(self.stream_fragments),
            launches: self.launches(&counted.shape)?,
        };
        let started = std::time::Instant::now();
        let reports = streamer.evaluate(&mut self.system, counted, &self.meter)?;
        let kernel_wall_s = started.elapsed().as_secs_f64();
        let evaluation = &*self.policies.evaluation;
        let per_launch: Vec<policies::Evaluated> = reports
            .iter()
            .map(|r| policies::Evaluated::of(evaluation, &self.system, Vec::new(), r))
            .collect();
        let kernel: Vec<Vec<Time>> = per_launch.iter().map(|e| e.per_dpu.clone()).collect();
        let evaluated = policies::Evaluated::in_sequence(per_launch);
        let route = self.policies.routing.cost(&env, &counted.shape);
        let post = self.policies.postprocessing.cost(&env, &counted.shape);
        let program = self.program([route.work, post.work], &env, &counted.shape, &kernel);
        if measured {
            let served = counted.served.clone();
            let launches = kernel.len() as u32;
            self.tally(
                (&served, launches),
                [&route.metrics, &evaluated.metrics, &post.metrics],
            );
        }
        Ok(BatchWork {
            program,
            dpu_kernel: evaluated.per_dpu,
            events: evaluated.events,
            kernel_wall_s,
            // `Streamer::evaluate` checked the partial answer of every one of the batch's
            // fragments (it counts them) and that the fragments cover every query's range
            // once (`Coverage`), which is how a streamed batch checks its queries: their
            // merged answers are never held. Either failing stopped the run.
            answers_verified: queries,
            timelines: Vec::new(),
        })
    }

    /// A batch's program: route and pack; push, launch, pull for each launch (`kernel`
    /// holds each launch's kernel time on every DPU); merge. Each launch's buffers are
    /// priced by the routing and postprocessing policies from that launch's share of
    /// `shape`.
    fn program(
        &self,
        [route, merge]: [HostWork; 2],
        env: &BatchEnv,
        shape: &Shape,
        kernel: &[Vec<Time>],
    ) -> Program {
        let launches = kernel.len() as u32;
        let mut steps = vec![host_step(&self.forest.machine, 0, "route and pack", route)];
        for (l, dpu_time) in kernel.iter().enumerate() {
            let part = launch_shape(shape, l as u32, launches);
            let push = self.policies.routing.cost(env, &part).bytes;
            let pull = self.policies.postprocessing.cost(env, &part).bytes;
            steps.push(Self::transfer(1, Direction::CpuDpu, push));
            steps.push(Step::Launch {
                stage: 2,
                dpu_time: dpu_time.clone(),
            });
            steps.push(Self::transfer(3, Direction::DpuCpu, pull));
        }
        steps.push(host_step(&self.forest.machine, 4, "merge", merge));
        Program {
            stages: STAGES.to_vec(),
            steps,
        }
    }

    fn transfer(stage: usize, direction: Direction, sizes_bytes: Vec<u64>) -> Step {
        Step::Transfer {
            stage,
            direction,
            kind: TransferKind::Parallel,
            sizes_bytes,
        }
    }

    /// IF_d of the placement, and IF_q's mean over the measured batches.
    fn imbalance(&self) -> RunImbalance {
        let totals: Vec<u64> = self
            .partitioning
            .pairs_per_dpu(&self.prepared.loads)
            .iter()
            .map(|&(c, h)| c + h)
            .collect();
        RunImbalance {
            data: imbalance_factor(&totals),
            queries: self.tally.if_q_sum / self.tally.batches.max(1) as f64,
            chunk_floor: self.prepared.loads.chunk_floor(self.prepared.params.dpus),
        }
    }

    /// The bytes each direction's transfers carried, against those they moved: a parallel
    /// transfer moves each rank's largest buffer to or from each DPU of the rank that has a
    /// buffer (means over the measured batches, each batch's push and pull taken as one
    /// transfer).
    fn padding_row(&self) -> Option<(String, String)> {
        let [push, _, pull] = &self.tally.metric_sums;
        let batches = self.tally.batches.max(1) as f64;
        let mb = |m: &BTreeMap<&str, f64>, key: &str| Some(*m.get(key)? / batches / 1e6);
        let text = format!(
            "CPU -> DPU {:.2} / {:.2} MB, DPU -> CPU {:.2} / {:.2} MB (batch mean)",
            mb(push, "bytes_sent")?,
            mb(push, "bytes_moved_with_padding")?,
            mb(pull, "bytes_received")?,
            mb(pull, "bytes_moved_with_padding")?,
        );
        Some(("bytes: carried / moved".to_owned(), text))
    }

    /// What kept the slowest DPU busy: the share of its cycles its instructions need at the
    /// rate its tasklets can issue, and the share its DMA engine was busy (means over the
    /// measured batches; the two overlap). Near 100 % is what bound it; neither near it
    /// means waiting.
    fn bound_row(&self) -> Option<(String, String)> {
        let m = &self.tally.metric_sums[1];
        let cycles = *m.get("slowest_dpu_cycles")?;
        let instructions = *m.get("slowest_dpu_instructions")?;
        let dma = *m.get("slowest_dpu_dma_busy_cycles")?;
        if cycles <= 0.0 {
            return None;
        }
        let dpu = &self.forest.machine.dpu;
        let pipeline = dpu.pipeline_floor_cycles(1, self.forest.tasklets) * instructions;
        Some((
            "slowest DPU: pipeline / DMA".to_owned(),
            format!(
                "{:.0} % needed / {:.0} % busy, of its {:.0} cycles (batch mean)",
                100.0 * pipeline / cycles,
                100.0 * dma / cycles,
                cycles / self.tally.batches.max(1) as f64
            ),
        ))
    }

    /// Adds a measured batch: the queries each DPU served, its launches, and each stage's
    /// metrics.
    fn tally(&mut self, (served, launches): (&[u64], u32), metrics: [&Metrics; 3]) {
        self.tally.if_q_sum += imbalance_factor(served);
        self.tally.batches += 1;
        self.tally.most_launches = self.tally.most_launches.max(launches);
        for (acc, m) in self.tally.metric_sums.iter_mut().zip(metrics) {
            for &(k, v) in m {
                *acc.entry(k).or_insert(0.0) += v;
            }
        }
    }
}

impl Index for BForest {
    fn name(&self) -> &'static str {
        NAME
    }

    fn init_programs(&self) -> Vec<(&'static str, Program)> {
        init_programs(
            &self.forest.machine,
            &self.prepared,
            &self.partitioning,
            self.batch_size,
            self.count_both_ends,
        )
    }

    fn mram(&self) -> MramNeed {
        self.mram.clone()
    }

    fn run_batch(
        &mut self,
        batch: u64,
        queries: u64,
        measured: bool,
        record: &Record,
    ) -> Result<BatchWork, IndexError> {
        match self.batches {
            Batches::Held { .. } => self.run_held(batch, queries, measured, record),
            Batches::Streamed { .. } => self.run_streamed(batch, queries, measured, record),
        }
    }

    fn skip_batch(&mut self, batch: u64, queries: u64) -> Result<Program, IndexError> {
        let env = self.forest.env();
        let shape = match &self.batches {
            Batches::Held { queries: held, .. } => {
                let (routed, n) = self.route_held(&env, &held[batch as usize], queries);
                Shape::of(n as u64, &routed.batches)
            }
            Batches::Streamed { counted, .. } => counted[batch as usize].shape.clone(),
        };
        let launches = self.launches(&shape)?;
        // The prices of the routed batch, as `run_held` and `run_streamed` take them.
        let route = self.policies.routing.cost(&env, &shape);
        let post = self.policies.postprocessing.cost(&env, &shape);
        let idle = vec![vec![Time::ZERO; self.forest.machine.dpus as usize]; launches as usize];
        Ok(self.program([route.work, post.work], &env, &shape, &idle))
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let n = self.tally.batches.max(1) as f64;
        let policy = |name: &str, sums: &BTreeMap<&'static str, f64>| PolicyReport {
            name: name.to_owned(),
            metrics: sums.iter().map(|(k, v)| (k.to_string(), v / n)).collect(),
        };
        let s = &self.tally.metric_sums;
        let fields = ForestFields {
            partitioner: self.partitioner.clone(),
            streamed: matches!(self.batches, Batches::Streamed { .. }),
            launches_per_batch: self.tally.most_launches.max(1),
            imbalance: self.imbalance(),
            policies: PoliciesReport {
                routing: policy(self.policies.routing.name(), &s[0]),
                evaluation: policy(self.policies.evaluation.name(), &s[1]),
                postprocessing: policy(self.policies.postprocessing.name(), &s[2]),
            },
        };
        match serde_json::to_value(fields) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => unreachable!("a struct serialises to an object"),
        }
    }

    fn table_rows(&self) -> Vec<(String, String)> {
        let i = self.imbalance();
        let mut rows = vec![(
            "IF_q / IF_d / chunk floor".to_owned(),
            format!("{:.3} / {:.3} / {:.2}", i.queries, i.data, i.chunk_floor),
        )];
        rows.extend(self.padding_row());
        rows.extend(self.bound_row());
        let launches = self.tally.most_launches;
        if launches > 1 {
            rows.push((
                "launches per batch".to_owned(),
                format!("up to {launches} (each DPU's buffers split to fit MRAM)"),
            ));
        }
        rows
    }

    fn warnings(&self) -> Vec<String> {
        self.partitioning.warnings.clone()
    }

    fn host_units(&self) -> &'static [HostUnit] {
        &[HostUnit::Route, HostUnit::Merge, HostUnit::Pack]
    }

    fn instruction_keys(&self) -> Option<Vec<&'static str>> {
        self.policies.evaluation.instruction_keys()
    }
}

/// The schema of B+-Forest's keys of the run report.
pub fn report_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<ForestFields>()
}

/// The B+-Forest keys of the run report.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
struct ForestFields {
    partitioner: String,
    /// Whether the batches were streamed (see `batches.streaming`) rather than held.
    streamed: bool,
    /// The most launches a measured batch took so that each DPU's share fit in MRAM beside
    /// its trees (at most `batches.max_launches`; 1 unless a batch had to be split).
    launches_per_batch: u32,
    imbalance: RunImbalance,
    policies: PoliciesReport,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunImbalance {
    pub data: f64,
    /// Mean over the measured batches of IF_q (a query counts once per DPU it reaches).
    pub queries: f64,
    /// The busiest chunk's reference queries over Q/P: a floor under its DPU's load that
    /// no partitioner can lower, since a chunk is never split (docs/workloads.md).
    pub chunk_floor: f64,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PolicyReport {
    pub name: String,
    /// Each metric's mean over the measured batches.
    pub metrics: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
struct PoliciesReport {
    routing: PolicyReport,
    evaluation: PolicyReport,
    postprocessing: PolicyReport,
}

/// Builds the trees (see [`build`]) and keeps what the batches will need: held batches
/// with their reference answers (gets resolved to the keys they find), or streamed
/// batches' counted shapes with each DPU's chunks.
fn build_batches(
    system: &mut System,
    (workload, meter): (&Workload, &crate::meter::Meter),
    (prepared, partitioning): (&Prepared, &Partitioning),
    (mut held, counted): (Vec<Vec<Query>>, Vec<stream::Counted>),
) -> (Batches, Vec<DpuLayout>, Vec<DpuTrees>) {
    let kind = workload.kind;
    let (reference, layouts, trees) = build(system, (kind, meter), prepared, partitioning, &held);
    if !kind.is_range() {
        for (b, batch) in held.iter_mut().enumerate() {
            reference.resolved_gets(b, batch);
        }
    }
    let batches = if workload.streams() {
        Batches::Streamed {
            counted,
            chunks: chunks_per_dpu(partitioning),
        }
    } else {
        Batches::Held {
            queries: held,
            reference,
        }
    };
    (batches, layouts, trees)
}

/// Builds every DPU's trees straight into its MRAM (only their shape is kept on the side, so
/// the tree bytes exist once) and fills the reference from each chunk's pairs meanwhile.
fn build(
    system: &mut System,
    (kind, meter): (QueryKind, &crate::meter::Meter),
    prepared: &Prepared,
    partitioning: &Partitioning,
    batches: &[Vec<Query>],
) -> (Reference, Vec<DpuLayout>, Vec<DpuTrees>) {
    let views: Vec<&[Query]> = batches.iter().map(|b| b.as_slice()).collect();
    let reference = Reference::new(kind, &views);
    let visit = |c: usize, pairs: &[(u64, u64)]| {
        let (first, last) = chunk_key_range(&prepared.data, c);
        reference.visit(first, last, pairs);
        meter.add(1);
    };
    let (cold_chunks, hot_chunks) = chunks_per_dpu(partitioning);
    // Each worker builds into two buffers it takes from this pool and gives back, DPU after
    // DPU, so an image's bytes are allocated and touched once per worker, not once per DPU.
    let scratches = std::sync::Mutex::new(Vec::<TreeScratch>::new());
    let built: Vec<(DpuLayout, DpuTrees)> = system
        .dpus_mut()
        .par_iter_mut()
        // One DPU per rayon job, so that the build ends on every thread together.
        .with_max_len(1)
        .enumerate()
        .map(|(d, dpu)| {
            let mut scratch = lock(&scratches).pop().unwrap_or_default();
            let chunks = (cold_chunks[d].as_slice(), hot_chunks[d].as_slice());
            let mut t = build_dpu_trees_into(&prepared.data, chunks, &visit, &mut scratch);
            let layout = DpuLayout::new(&t);
            write_trees(dpu.mram_mut(), &layout, &t);
            scratch.reclaim(&mut t);
            lock(&scratches).push(scratch);
            (layout, t)
        })
        .collect();
    let (layouts, trees) = built.into_iter().unzip();
    (reference, layouts, trees)
}

/// The pool's list, also after a worker panicked holding it (a list of spare buffers stays
/// valid).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records the tasklets of the DPUs `record` asks for, launch by launch (`kernel` holds each
/// launch's kernel time on every DPU, `per_dpu` their sums), by running those DPUs again.
/// The trace's bound on a recording's spans is shared among its launches.
fn record_dpus(
    evaluation: &dyn EvaluationPolicy,
    (env, system): (&BatchEnv, &mut System),
    batches: &[DpuBatch],
    (kernel, per_dpu): (&[Vec<Time>], &[Time]),
    record: &Record,
) -> Result<Vec<Recording>, IndexError> {
    let Some((dpus, max_spans)) = record.dpus(per_dpu) else {
        return Ok(Vec::new());
    };
    let launches = kernel.len() as u32;
    let spans = (max_spans / launches as usize).max(1);
    let mut out = Vec::with_capacity(dpus.len());
    for dpu in dpus {
        let timelines = (0..launches)
            .map(|l| {
                let first = kernel[l as usize][dpu as usize];
                let launch = (dpu, l, launches);
                record_launch(
                    evaluation,
                    (env, &mut *system),
                    batches,
                    launch,
                    first,
                    spans,
                )
            })
            .collect::<Result<_, _>>()?;
        out.push(Recording {
            dpu,
            launches: timelines,
        });
    }
    Ok(out)
}

/// Runs launch `l` of `launches` of DPU `dpu` again, recording its tasklets; the rerun must
/// take the `first` run's time.
fn record_launch(
    evaluation: &dyn EvaluationPolicy,
    (env, system): (&BatchEnv, &mut System),
    batches: &[DpuBatch],
    (dpu, l, launches): (u32, u32, u32),
    first: Time,
    max_spans: usize,
) -> Result<TaskletTimeline, IndexError> {
    let d = dpu as usize;
    let part: Vec<DpuBatch>;
    let batches = if launches == 1 {
        // Its buffers are still in MRAM.
        batches
    } else {
        // The later launches overwrote its buffers: this DPU's part of launch `l` is
        // evaluated alone first, which writes them again.
        part = launch_parts_of(batches, d..d + 1, l, launches);
        evaluation.evaluate(env, system, &part, d..d + 1)?;
        &part
    };
    let (report, timeline) = evaluation.record(env, system, batches, dpu, max_spans)?;
    let again = system.dpus()[d].duration(&report);
    if again != first {
        return Err(IndexError::Verification(format!(
            "DPU {dpu}: the recorded rerun of launch {l} of {launches} took {again:?}, the first run {first:?}"
        )));
    }
    Ok(timeline)
}

/// Evaluates a routed batch in `launches` launches, one after another on every DPU: each
/// launch's result.
fn evaluate_launches(
    evaluation: &dyn EvaluationPolicy,
    env: &BatchEnv,
    system: &mut System,
    batches: &[DpuBatch],
    launches: u32,
) -> Result<Vec<policies::Evaluated>, crate::dpu::LaunchError> {
    if launches == 1 {
        return Ok(vec![policies::evaluate(evaluation, env, system, batches)?]);
    }
    (0..launches)
        .map(|l| {
            let part = launch_parts_of(batches, 0..batches.len(), l, launches);
            policies::evaluate(evaluation, env, system, &part)
        })
        .collect()
}

/// The shape of launch `launch` of `launches`: every DPU's records in it, and the batch's
/// queries (host work is priced on the whole batch, not per launch).
fn launch_shape(shape: &Shape, launch: u32, launches: u32) -> Shape {
    Shape {
        queries: shape.queries,
        fragments: shape
            .fragments
            .iter()
            .map(|&n| launch_records(n as usize, launch, launches).len() as u64)
            .collect(),
    }
}

/// Queries each DPU serves in a routed batch, a query counted once per DPU.
fn distinct_queries(batch: &DpuBatch) -> u64 {
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

const INIT_STAGES: [Stage; 3] = [
    Stage {
        name: "transfer",
        class: Class::Communication,
    },
    Stage {
        name: "kernel",
        class: Class::Pim,
    },
    Stage {
        name: "host",
        class: Class::Cpu,
    },
];

/// [est] The one-off programs. Build: a parallel push of each DPU's base partition (16 bytes
/// per pair), then a launch that streams the pairs in and the tree nodes out through the DMA
/// engine. Partition: the host counts the reference batch per chunk (one lookup per query
/// end) and scans the chunks once, on one thread. Exchange: a parallel pull of the hot pairs
/// from their home DPUs (after the ownership switch), a parallel push to their new DPUs, and
/// a launch that builds the hot trees.
fn init_programs(
    machine: &Machine,
    prepared: &Prepared,
    partitioning: &Partitioning,
    batch_size: u64,
    count_both_ends: bool,
) -> Vec<(&'static str, Program)> {
    let p = machine.dpus as usize;
    let base: Vec<u64> = (0..p)
        .map(|j| {
            let (a, b) = prepared.loads.base_partition(j, p);
            prepared.loads.size(a, b - 1)
        })
        .collect();
    let launch_of = |bytes: &[u64], trees: &dyn Fn(u64) -> u64| Step::Launch {
        stage: 1,
        dpu_time: bytes
            .iter()
            .map(|&b| streaming_time(machine, b + trees(b)))
            .collect(),
    };
    let pair_bytes: Vec<u64> = base.iter().map(|n| n * PAIR_BYTES).collect();
    let build = vec![
        BForest::transfer(0, Direction::CpuDpu, pair_bytes.clone()),
        launch_of(&pair_bytes, &|b| tree_bytes(b / PAIR_BYTES)),
    ];
    let ends = if count_both_ends { 2 } else { 1 };
    let work = HostWork {
        queries_routed: batch_size * ends + prepared.loads.chunks() as u64,
        results_merged: 0,
        bytes_packed: 0,
        ..HostWork::default()
    };
    let partition = vec![Step::Host {
        stage: 2,
        label: "count and partition",
        work_ps: work.single_thread_ps(&machine.host),
        threads: 1,
    }];
    let (out, into) = hot_pair_moves(prepared, partitioning, p);
    let exchange = if into.iter().all(|&b| b == 0) {
        Vec::new()
    } else {
        vec![
            BForest::transfer(0, Direction::DpuCpu, out),
            BForest::transfer(0, Direction::CpuDpu, into.clone()),
            launch_of(&into, &|b| tree_bytes(b / PAIR_BYTES)),
        ]
    };
    [
        ("build", build),
        ("partition", partition),
        ("exchange", exchange),
    ]
    .into_iter()
    .map(|(name, steps)| {
        let program = Program {
            stages: INIT_STAGES.to_vec(),
            steps,
        };
        (name, program)
    })
    .collect()
}

/// Bytes of hot pairs each DPU sends (from its base partition) and receives.
fn hot_pair_moves(
    prepared: &Prepared,
    partitioning: &Partitioning,
    p: usize,
) -> (Vec<u64>, Vec<u64>) {
    let mut out = vec![0u64; p];
    let mut into = vec![0u64; p];
    for part in partitioning.parts.iter().filter(|x| x.hot) {
        let pairs = prepared.loads.size(part.chunks.start, part.chunks.end - 1);
        // Base partitions are consecutive runs of chunks: the first whose end is beyond.
        let home = (0..p)
            .find(|&j| prepared.loads.base_partition(j, p).1 > part.chunks.start)
            .unwrap_or(p - 1);
        out[home] += pairs * PAIR_BYTES;
        into[part.dpu as usize] += pairs * PAIR_BYTES;
    }
    (out, into)
}

/// B+-Forest's trees are built from whole chunks.
fn check_granularity(workload: &Workload) -> Result<(), InputError> {
    if workload.granularity != crate::workload::spec::Granularity::Pair {
        return Ok(());
    }
    let reason = "B+-Forest's trees are built from chunks; `pair` granularity is for `pimdes partition` with data-balanced or query-balanced";
    Err(workload
        .attribution
        .error_at("partition.granularity", reason))
}

/// A streamed run (see [`Workload::streams`]) takes whole batches, one after another, and
/// records no tasklet timelines: refuses open arrivals and a trace (`traced`).
pub fn check_streaming(workload: &Workload, traced: bool) -> Result<(), InputError> {
    if !workload.streams() {
        return Ok(());
    }
    let why = if workload.arrival == crate::workload::spec::ArrivalMode::Open {
        "open arrivals (run.arrival) take part of a batch, which a streamed batch cannot"
    } else if traced {
        "a streamed batch records no tasklet timelines, so it cannot be traced (--trace)"
    } else {
        return Ok(());
    };
    let (streams, remedy) = match workload.streaming {
        crate::workload::spec::Streaming::Always => {
            ("batches.streaming = \"always\"".to_owned(), "")
        }
        _ => (
            format!(
                "{} queries in all; streamed above {} unless batches.streaming = \"never\"",
                workload.total_batches() * workload.batch_size,
                crate::workload::spec::STREAM_ABOVE_QUERIES
            ),
            " or run fewer queries",
        ),
    };
    // A rule between the keys that make the run stream and what streaming cannot take:
    // every override of one of them is named (the file when none was).
    let mut keys = vec![
        "batches.streaming",
        "queries.batch_size",
        "batches.warmup",
        "batches.measured",
    ];
    if workload.arrival == crate::workload::spec::ArrivalMode::Open {
        keys.push("run.arrival");
    }
    Err(workload.attribution.error_at_any(
        &keys,
        format!(
            "this run streams its batches ({streams}), and {why}; hold them with batches.streaming = \"never\"{remedy}"
        ),
    ))
}

/// What the run knows of its batches before the trees are built: held, every batch
/// generated; streamed, every batch counted. And the most records each DPU receives in a
/// batch.
fn batches_up_front(
    machine: &Machine,
    workload: &Workload,
    policies: &Policies,
    prepared: &Prepared,
    table: &RoutingTable,
) -> (Vec<Vec<Query>>, Vec<stream::Counted>, Vec<u64>) {
    if workload.streams() {
        let counted = count_batches(machine, workload, policies, prepared, table);
        let records = (0..machine.dpus as usize)
            .map(|d| {
                let batches = counted.iter();
                batches.map(|c| c.shape.fragments[d]).max().unwrap_or(0)
            })
            .collect();
        (Vec::new(), counted, records)
    } else {
        // Each batch has its own stream, so drawing them on several threads draws the same
        // queries.
        let queries: Vec<Vec<Query>> = (0..workload.total_batches())
            .into_par_iter()
            .map(|b| prepared.queries.batch(b))
            .collect();
        let records = most_records(table, &queries, machine.dpus);
        (queries, Vec::new(), records)
    }
}

/// The most records each DPU receives in any of `batches` (batches counted in parallel).
fn most_records(table: &RoutingTable, batches: &[Vec<Query>], dpus: u32) -> Vec<u64> {
    let per_batch = |batch: &Vec<Query>| {
        let mut count = vec![0u64; dpus as usize];
        for q in batch {
            table.route(q.lo, q.hi, |e| count[table.target(e).dpu as usize] += 1);
        }
        count
    };
    let most = |mut a: Vec<u64>, b: Vec<u64>| {
        a.iter_mut().zip(&b).for_each(|(a, &b)| *a = (*a).max(b));
        a
    };
    batches
        .par_iter()
        .map(per_batch)
        .reduce(|| vec![0u64; dpus as usize], most)
}

/// Counts every batch of the run for streaming (see [`stream::count`]). Routing looks only
/// at the routing table: the trees are not built yet.
fn count_batches(
    machine: &Machine,
    workload: &Workload,
    policies: &Policies,
    prepared: &Prepared,
    table: &RoutingTable,
) -> Vec<stream::Counted> {
    let env = BatchEnv {
        kind: workload.kind,
        machine,
        tasklets: workload.tasklets,
        table,
        layouts: &[],
        trees: &[],
    };
    (0..workload.total_batches())
        .map(|b| {
            let slab = stream::Budget::new(workload.stream_fragments).slab_queries;
            stream::count(&prepared.queries, b, &*policies.routing, &env, slab)
        })
        .collect()
}

/// The fewest launches in which every DPU's share of a batch of `shape` fits in MRAM beside
/// its trees (`dpu_pairs`): at most the run's bound `mram.launches_per_batch`, which fits
/// each DPU's largest share of any batch. A batch may need fewer: open arrivals take part
/// of one, and the DPUs' largest shares may come from different batches.
fn launches_for(
    machine: &Machine,
    kind: QueryKind,
    dpu_pairs: &[(u64, u64)],
    shape: &Shape,
    mram: &MramNeed,
) -> Result<u32, IndexError> {
    let bound = mram.launches_per_batch;
    let fits = |launches: u32| {
        dpu_pairs
            .iter()
            .zip(&shape.fragments)
            .all(|(&(cold, hot), &n)| {
                let share = largest_launch_records(n, launches);
                mram_need_bytes(kind, cold, hot, share) <= machine.mram_size_bytes
            })
    };
    match (1..=bound).find(|&l| fits(l)) {
        Some(launches) => Ok(launches),
        // The bound was chosen to fit each DPU's largest share counted up front; a routing
        // policy that gives more fragments than that count broke it.
        None => Err(IndexError::Verification(format!(
            "a batch's shares do not fit in MRAM in the run's {bound} launches, which fit the shares counted before the run: the routing policy gave more fragments than counted"
        ))),
    }
}

/// The refusal of data that does not fit in MRAM, a rule between the files: every `--set`
/// of the MRAM, the DPUs, the data or the batches is named, the MRAM's first (the likelier
/// cause than the data the files were written for).
fn mram_refusal(machine: &Machine, workload: &Workload, reason: String) -> InputError {
    let mram_key = "dpu.mram_size_bytes";
    let reason = match machine.attribution.override_of(mram_key) {
        Some(_) => format!("{reason}, or a larger {mram_key}"),
        None => reason,
    };
    let machine_keys = [mram_key, "usable_dpus", "ranks", "dpus_per_rank"];
    let work = ["data.pairs", "queries.batch_size", "batches.max_launches"];
    let parts: [(&Attribution, &[&str]); 2] = [
        (&machine.attribution, &machine_keys),
        (&workload.attribution, &work),
    ];
    blame_rule(&parts, (&workload.attribution, "data.pairs"), reason)
}

/// Checks, before anything is simulated, that every DPU's trees and its largest query and
/// result buffers fit in MRAM, with each DPU's share of a batch split over the fewest
/// launches (at most `batches.max_launches`) that make them fit. The error names the DPU
/// and the bytes.
fn check_mram(
    machine: &Machine,
    workload: &Workload,
    partitioning: &Partitioning,
    prepared: &Prepared,
    records: &[u64],
) -> Result<MramNeed, InputError> {
    let pairs = partitioning.pairs_per_dpu(&prepared.loads);
    let need_with = |launches: u32| -> Vec<u64> {
        pairs
            .iter()
            .zip(records)
            .map(|(&(cold, hot), &n)| {
                let share = largest_launch_records(n, launches);
                mram_need_bytes(workload.kind, cold, hot, share)
            })
            .collect()
    };
    let fits = |need: &[u64]| need.iter().all(|&b| b <= machine.mram_size_bytes);
    // Fewer launches never need less MRAM, so the first that fits is the fewest.
    let launches = (1..=workload.max_launches)
        .find(|&l| fits(&need_with(l)))
        .unwrap_or(workload.max_launches);
    let need = need_with(launches);
    let dpu = busiest(&need);
    let max = need.get(dpu).copied().unwrap_or(0);
    if max > machine.mram_size_bytes {
        let (cold, hot) = pairs[dpu];
        let share = largest_launch_records(records[dpu], launches);
        let split = match launches {
            1 => String::new(),
            l => format!(" of its {} in each of {l} launches", records[dpu]),
        };
        // More launches shrink the buffers only; say so only if the trees alone fit.
        let trees_fit = mram_need_bytes(workload.kind, cold, hot, 0) <= machine.mram_size_bytes;
        let remedy = if trees_fit {
            "more DPUs or a larger batches.max_launches"
        } else {
            "or more DPUs"
        };
        let reason = format!(
            "the data does not fit in MRAM: DPU {dpu} needs {max} bytes ({cold} cold and {hot} hot pairs in trees, and buffers for up to {share} queries{split}) but has {} (dpu.mram_size_bytes); choose another partitioner, less data, {remedy}",
            machine.mram_size_bytes
        );
        return Err(mram_refusal(machine, workload, reason));
    }
    Ok(MramNeed {
        available_bytes: machine.mram_size_bytes,
        max_needed_bytes: max,
        max_needed_dpu: dpu as u32,
        launches_per_batch: launches,
    })
}
