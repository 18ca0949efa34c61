//! PIM-tree as an [`Index`], for get batches: each key's data node and hash-table entry on
//! the DPU its hash names, one round per batch (see [`crate::pimtree`]). Its program:
//!
//! | stage | class | step |
//! |---|---|---|
//! | `sort` | cpu | sort the batch's keys with their positions |
//! | `task_generation` | cpu | deduplicate, hash to DPUs, fill the per-DPU task buffers |
//! | `cpu_to_dpu` | communication | one push, every DPU padded to the largest buffer |
//! | `dpu_kernel` | pim | launch, the get kernel on every DPU |
//! | `dpu_to_cpu` | communication | ownership switch, one pull padded the same way |
//! | `fill` | cpu | copy each reply to every query of its key |
//!
//! **DPU-major evaluation.** A get round's tasks depend on the batch and the placement
//! only, never on what the DPUs did before, and the kernel does not change the structures.
//! So every batch is planned first; then the DPUs are taken in equal groups whose pairs
//! together fit [`GROUP_PAIR_BYTES`] of host memory (one pass over the data set per group;
//! the first pass also counts every DPU's keys and fills the reference): each DPU's image
//! is built, runs every batch's round, and is dropped. Peak memory holds one group's pairs and a few DPU images, not
//! every DPU's MRAM (about 22 GB at 500 M pairs). `run_batch` then assembles the batch
//! from the stored kernel times and replies and checks every answer.

use super::{
    BatchWork, Index, IndexError, MramNeed, Record, Recording, busiest, check_tasklets, host_step,
    streaming_time,
};
use crate::config::InputError;
use crate::dpu::{Dpu, LaunchError, TaskletTimeline};
use crate::engine::Time;
use crate::forest::reference::Reference;
use crate::host::{HostUnit, moved_bytes};
use crate::machine::Machine;
use crate::pimtree::gets::GetRound;
use crate::pimtree::image::{Layout, data_node_capacity, write_image};
use crate::pimtree::kernel::{GetKernel, read_replies, write_tasks};
use crate::pimtree::{
    DATA_NODE_BYTES, MAX_TASKS_PER_DPU, get_reply_buffer_bytes, get_task_buffer_bytes, hash_to_dpu,
};
use crate::system::program::{Class, Direction, Program, Stage, Step, TransferKind};
use crate::workload::spec::{ArrivalMode, DEFAULT_PARTITIONER, LaunchMode};
use crate::workload::{DataSet, Query, QueryGenerator, QueryKind, Workload};
use rayon::prelude::*;
use serde::Serialize;

/// The name `run.index` selects PIM-tree by.
pub const NAME: &str = "pim-tree";

/// Host memory the pairs of one group of DPUs may take while their images are built.
pub const GROUP_PAIR_BYTES: u64 = 4 << 30;
/// DPU images kept for recordings (each a pass over the data to rebuild, about 10 MB to
/// keep): as many as a trace may record.
const RECORDED_DPUS_KEPT: usize = crate::experiments::timeline::MAX_TRACED_DPU_BATCHES as usize;
/// Chunks generated at once while gathering a group's pairs (bounds the scratch memory).
const CHUNKS_PER_STEP: usize = 1 << 14;

pub(super) const STAGES: [Stage; 6] = [
    Stage {
        name: "sort",
        class: Class::Cpu,
    },
    Stage {
        name: "task_generation",
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
        name: "fill",
        class: Class::Cpu,
    },
];

/// One DPU's part of one batch.
#[derive(Debug, Clone)]
struct DpuRun {
    time: Time,
    events: u64,
    replies: Vec<(u64, u64)>,
}

/// What the DPUs did in one batch.
#[derive(Debug, Clone, Default)]
struct BatchResult {
    kernel: Vec<Time>,
    events: u64,
    replies: Vec<Vec<(u64, u64)>>,
}

/// PIM-tree's own measurements, summed over the measured batches.
#[derive(Debug, Clone, Default)]
struct Tally {
    batches: u64,
    queries: u64,
    distinct: u64,
    max_tasks: u64,
    /// Each batch's busiest DPU's tasks over the mean per DPU, summed.
    task_imbalance: f64,
    payload_bytes: u64,
    moved_bytes: u64,
}

/// PIM-tree placed on a machine, with every batch's round simulated.
pub struct PimTree {
    machine: Machine,
    tasklets: u32,
    seed: u64,
    layout: Layout,
    data: DataSet,
    rounds: Vec<GetRound>,
    reference: Reference,
    results: Vec<BatchResult>,
    keys_per_dpu: Vec<u64>,
    insert_probes: u64,
    groups: u32,
    sim_wall_s: f64,
    /// DPUs rebuilt for recordings, the most recent last (at most [`RECORDED_DPUS_KEPT`]).
    recorded: Vec<Dpu>,
    protocol_note: Option<String>,
    tally: Tally,
}

impl PimTree {
    /// Generates the data and batches, checks MRAM, and simulates every DPU's rounds.
    pub fn new(
        machine: &Machine,
        workload: &Workload,
        progress: &mut crate::meter::Phases<'_>,
    ) -> Result<PimTree, IndexError> {
        check_workload(machine, workload)?;
        assert_eq!(
            workload.kind,
            QueryKind::Get,
            "other kinds run on the skip list"
        );
        let layout = Layout::new(workload.tasklets);
        let data = DataSet::generate(workload);
        let generator = QueryGenerator::new(workload, &data, machine.dpus);
        progress.phase("generating batches");
        let mut batches: Vec<Vec<Query>> = (0..workload.total_batches())
            .map(|b| generator.batch(b))
            .collect();
        progress.phase("counting keys per DPU");
        let views: Vec<&[Query]> = batches.iter().map(|b| b.as_slice()).collect();
        let reference = Reference::new(QueryKind::Get, &views);
        let groups = dpu_groups(machine.dpus, group_count(workload.pairs));
        let visit = |lo: u64, hi: u64, pairs: &[(u64, u64)]| reference.visit(lo, hi, pairs);
        let (first_pairs, keys_per_dpu) = gather(&data, machine.dpus, groups[0].clone(), &visit);
        progress.phase("planning batches");
        for (b, batch) in batches.iter_mut().enumerate() {
            reference.resolved_gets(b, batch);
        }
        let rounds: Vec<GetRound> = batches
            .par_iter()
            .map(|b| {
                let keys: Vec<u64> = b.iter().map(|q| q.lo).collect();
                GetRound::plan(&keys, machine.dpus)
            })
            .collect();
        drop(batches);
        check_mram(machine, workload, &layout, &keys_per_dpu, &rounds)?;
        let mut index = PimTree {
            machine: machine.clone(),
            tasklets: workload.tasklets,
            seed: workload.seed,
            layout,
            data,
            results: vec![BatchResult::default(); rounds.len()],
            rounds,
            reference,
            keys_per_dpu,
            insert_probes: 0,
            groups: 0,
            sim_wall_s: 0.0,
            recorded: Vec::new(),
            protocol_note: protocol_note(workload),
            tally: Tally::default(),
        };
        index.simulate(groups, first_pairs, progress)?;
        Ok(index)
    }

    /// Builds every DPU's image group by group and runs all its rounds; the first group's
    /// pairs were gathered already (with the counts).
    fn simulate(
        &mut self,
        groups: Vec<std::ops::Range<u32>>,
        first_pairs: Vec<Vec<(u64, u64)>>,
        progress: &mut crate::meter::Phases<'_>,
    ) -> Result<(), IndexError> {
        let p = self.machine.dpus as usize;
        for r in &mut self.results {
            r.kernel = vec![Time::ZERO; p];
            r.replies = vec![Vec::new(); p];
        }
        self.groups = groups.len() as u32;
        let mut first_pairs = Some(first_pairs);
        for (g, range) in groups.iter().enumerate() {
            progress.phase(&format!(
                "simulating DPUs {} to {} (group {} of {})",
                range.start,
                range.end - 1,
                g + 1,
                groups.len()
            ));
            let pairs = match first_pairs.take() {
                Some(pairs) => pairs,
                None => gather(&self.data, self.machine.dpus, range.clone(), &|_, _, _| {}).0,
            };
            let started = std::time::Instant::now();
            let runs: Vec<Result<(u64, Vec<DpuRun>), LaunchError>> = pairs
                .par_iter()
                .enumerate()
                .map(|(i, pairs)| self.simulate_dpu(range.start + i as u32, pairs))
                .collect();
            self.sim_wall_s += started.elapsed().as_secs_f64();
            for (i, run) in runs.into_iter().enumerate() {
                let (probes, runs) = run?;
                self.insert_probes += probes;
                let d = range.start as usize + i;
                for (result, run) in self.results.iter_mut().zip(runs) {
                    result.kernel[d] = run.time;
                    result.events += run.events;
                    result.replies[d] = run.replies;
                }
            }
        }
        Ok(())
    }

    /// DPU `d` with its image built from its `pairs`.
    fn build_dpu(&self, d: u32, pairs: &[(u64, u64)]) -> (Dpu, u64) {
        let mut dpu = Dpu::new(&self.machine.dpu, d);
        let stats = write_image(dpu.mram_mut(), &self.layout, self.seed, pairs);
        (dpu, stats.insert_probes)
    }

    /// Every batch's round on DPU `d`: (insert probes, one run per batch).
    fn simulate_dpu(
        &self,
        d: u32,
        pairs: &[(u64, u64)],
    ) -> Result<(u64, Vec<DpuRun>), LaunchError> {
        let (mut dpu, probes) = self.build_dpu(d, pairs);
        let kernel = GetKernel {
            layout: self.layout.clone(),
        };
        let mut runs = Vec::with_capacity(self.rounds.len());
        for round in &self.rounds {
            let tasks = &round.tasks[d as usize];
            write_tasks(dpu.mram_mut(), &self.layout, tasks);
            let report = dpu
                .launch(&kernel, self.tasklets)
                .map_err(|error| LaunchError { dpu: d, error })?;
            runs.push(DpuRun {
                time: dpu.duration(&report),
                events: report.stats.events,
                replies: read_replies(dpu.mram(), &self.layout, tasks.len()),
            });
        }
        Ok((probes, runs))
    }

    /// Reruns batch `b` on DPU `d`, recording its tasklets; the rerun must take the cycles
    /// the first run took.
    fn record_dpu(
        &mut self,
        b: usize,
        d: u32,
        max_spans: usize,
    ) -> Result<TaskletTimeline, IndexError> {
        let at = match self.recorded.iter().position(|x| x.index() == d) {
            Some(at) => at,
            None => {
                let pairs = gather(&self.data, self.machine.dpus, d..d + 1, &|_, _, _| {}).0;
                if self.recorded.len() == RECORDED_DPUS_KEPT {
                    self.recorded.remove(0);
                }
                self.recorded.push(self.build_dpu(d, &pairs[0]).0);
                self.recorded.len() - 1
            }
        };
        let dpu = &mut self.recorded[at];
        let tasks = &self.rounds[b].tasks[d as usize];
        write_tasks(dpu.mram_mut(), &self.layout, tasks);
        let kernel = GetKernel {
            layout: self.layout.clone(),
        };
        let (report, timeline) = dpu
            .launch_recorded(&kernel, self.tasklets, max_spans)
            .map_err(|error| LaunchError { dpu: d, error })?;
        let again = dpu.duration(&report);
        let first = self.results[b].kernel[d as usize];
        if again != first {
            return Err(IndexError::Verification(format!(
                "DPU {d}: the recorded rerun of batch {b} took {again:?}, the first run {first:?}"
            )));
        }
        Ok(timeline)
    }

    fn record(&mut self, b: usize, record: &Record) -> Result<Vec<Recording>, IndexError> {
        let Some((dpus, max_spans)) = record.dpus(&self.results[b].kernel) else {
            return Ok(Vec::new());
        };
        dpus.into_iter()
            .map(|dpu| {
                let launches = vec![self.record_dpu(b, dpu, max_spans)?];
                Ok(Recording { dpu, launches })
            })
            .collect()
    }

    /// Batch `b`'s program, with its buffers' payload bytes and the bytes moved.
    fn program(&self, b: usize) -> (Program, u64, u64) {
        let round = &self.rounds[b];
        let push: Vec<u64> = round
            .tasks
            .iter()
            .map(|t| get_task_buffer_bytes(t.len() as u64))
            .collect();
        let pull: Vec<u64> = round
            .tasks
            .iter()
            .map(|t| get_reply_buffer_bytes(t.len() as u64))
            .collect();
        let payload = push.iter().chain(&pull).sum::<u64>();
        let moved = moved_bytes(&self.machine, TransferKind::ParallelAll, &push)
            + moved_bytes(&self.machine, TransferKind::ParallelAll, &pull);
        let (sort, tasks) = round.load_work();
        let transfer = |stage, direction, sizes_bytes| Step::Transfer {
            stage,
            direction,
            kind: TransferKind::ParallelAll,
            sizes_bytes,
        };
        let program = Program {
            stages: STAGES.to_vec(),
            steps: vec![
                host_step(&self.machine, 0, "sort", sort),
                host_step(&self.machine, 1, "deduplicate, hash, bucket", tasks),
                transfer(2, Direction::CpuDpu, push),
                Step::Launch {
                    stage: 3,
                    dpu_time: self.results[b].kernel.clone(),
                },
                transfer(4, Direction::DpuCpu, pull),
                host_step(&self.machine, 5, "fill", round.fill_work()),
            ],
        };
        (program, payload, moved)
    }
}

impl Index for PimTree {
    fn name(&self) -> &'static str {
        NAME
    }

    fn init_programs(&self) -> Vec<(&'static str, Program)> {
        vec![("build", build_program(&self.machine, &self.keys_per_dpu))]
    }

    fn mram(&self) -> MramNeed {
        let dpu = busiest(&self.keys_per_dpu);
        MramNeed {
            available_bytes: self.machine.mram_size_bytes,
            max_needed_bytes: self.layout.end,
            max_needed_dpu: dpu as u32,
            launches_per_batch: 1,
        }
    }

    fn run_batch(
        &mut self,
        batch: u64,
        queries: u64,
        measured: bool,
        record: &Record,
    ) -> Result<BatchWork, IndexError> {
        let b = batch as usize;
        let round = &self.rounds[b];
        if queries != round.key_of_query.len() as u64 {
            return Err(IndexError::Verification(format!(
                "batch {b}: {queries} queries asked for, {} planned (PIM-tree runs closed arrivals only)",
                round.key_of_query.len()
            )));
        }
        let answers = round.fill(&self.results[b].replies);
        let verified = super::verify(QueryKind::Get, batch, &answers, &self.reference.answers(b))?;
        let (program, payload, moved) = self.program(b);
        if measured {
            let round = &self.rounds[b];
            let t = &mut self.tally;
            t.batches += 1;
            t.queries += queries;
            t.distinct += round.distinct.len() as u64;
            t.max_tasks += round.max_tasks();
            t.task_imbalance += round.task_imbalance();
            t.payload_bytes += payload;
            t.moved_bytes += moved;
        }
        let timelines = self.record(b, record)?;
        let result = &self.results[b];
        Ok(BatchWork {
            program,
            dpu_kernel: result.kernel.clone(),
            events: result.events,
            // The DPUs were simulated DPU-major, all batches together (image builds included,
            // the passes over the data not): an equal share each.
            kernel_wall_s: self.sim_wall_s / self.rounds.len() as f64,
            answers_verified: verified,
            timelines,
        })
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let t = &self.tally;
        let per_batch = |x: u64| x as f64 / t.batches.max(1) as f64;
        let per_query = |x: u64| x as f64 / t.queries.max(1) as f64;
        let keys: u64 = self.keys_per_dpu.iter().sum();
        let pim_tree = PimTreeFields {
            operation: "get",
            rounds_per_batch: 1.0,
            distinct_keys_per_batch: per_batch(t.distinct),
            queries_per_distinct_key: t.queries as f64 / t.distinct.max(1) as f64,
            max_tasks_per_dpu: per_batch(t.max_tasks),
            task_imbalance: Some(t.task_imbalance / t.batches.max(1) as f64),
            payload_bytes_per_query: per_query(t.payload_bytes),
            moved_bytes_per_query: per_query(t.moved_bytes),
            max_keys_per_dpu: self.keys_per_dpu[busiest(&self.keys_per_dpu)],
            insert_probes_per_key: self.insert_probes as f64 / keys.max(1) as f64,
            mram_layout_bytes: self.layout.end,
            dpu_groups: self.groups,
            pushes_per_batch: None,
            pulls_per_batch: None,
            skewed_rounds_per_batch: None,
        };
        pim_tree.into_report()
    }

    fn table_rows(&self) -> Vec<(String, String)> {
        let t = &self.tally;
        let n = t.batches.max(1) as f64;
        vec![
            (
                "distinct keys / batch".to_owned(),
                format!("{:.0}", t.distinct as f64 / n),
            ),
            (
                "bytes moved / query".to_owned(),
                format!("{:.1}", t.moved_bytes as f64 / t.queries.max(1) as f64),
            ),
            (
                "task imbalance (busiest DPU / mean)".to_owned(),
                format!("{:.3}", t.task_imbalance / n),
            ),
        ]
    }

    fn warnings(&self) -> Vec<String> {
        self.protocol_note.iter().cloned().collect()
    }

    fn instruction_keys(&self) -> Option<Vec<&'static str>> {
        Some(crate::pimtree::costs::instruction_keys())
    }

    fn host_units(&self) -> &'static [HostUnit] {
        use HostUnit::*;
        &[Sort, Scan, Hash, Bucket, Fill]
    }
}

impl PimTreeFields {
    /// The keys of the run report: these figures under `pim_tree`.
    pub(super) fn into_report(self) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::to_value(PimTreeKeys { pim_tree: self }) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => unreachable!("a struct serialises to an object"),
        }
    }
}

/// The schema of PIM-tree's keys of the run report.
pub fn report_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<PimTreeKeys>()
}

/// PIM-tree's keys of the run report: its figures, under `pim_tree`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
struct PimTreeKeys {
    pim_tree: PimTreeFields,
}

/// PIM-tree's figures in the run report.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(super) struct PimTreeFields {
    /// `get`, `predecessor` or `scan` (range-count-if and range-max).
    pub operation: &'static str,
    pub rounds_per_batch: f64,
    /// Distinct keys (get, predecessor) or merged ranges (scan) sent per batch.
    pub distinct_keys_per_batch: f64,
    /// Queries per distinct key: what query fusion saves.
    pub queries_per_distinct_key: f64,
    /// Tasks of the busiest DPU per batch (get: its round; otherwise its busiest round):
    /// every DPU's transfer is padded to it.
    pub max_tasks_per_dpu: f64,
    /// Gets: the busiest DPU's tasks over the mean per DPU, averaged over the measured
    /// batches: PIM-tree's load imbalance, as `imbalance.queries` is B+-Forest's (whose unit
    /// is a query fragment, PIM-tree's a distinct key). Absent for the other kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_imbalance: Option<f64>,
    /// Bytes of the task and reply buffers, and bytes the padded transfers move.
    pub payload_bytes_per_query: f64,
    pub moved_bytes_per_query: f64,
    pub max_keys_per_dpu: u64,
    /// Slots probed per key when the hash tables were filled (1: no collision; 0 when
    /// the run did not count them).
    pub insert_probes_per_key: f64,
    /// Bytes of MRAM PIM-tree's regions and buffers take (the same on every DPU).
    pub mram_layout_bytes: u64,
    /// Groups the DPUs were simulated in (a fact about host memory, not the machine).
    pub dpu_groups: u32,
    /// Predecessor and scan: tasks pushed (searches sent to a node's DPU) and nodes pulled
    /// to the host, per batch, and rounds run with the skewed (push-pull) plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushes_per_batch: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulls_per_batch: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skewed_rounds_per_batch: Option<f64>,
}

/// What the PIM-tree model runs (every query kind); anything else is refused before work.
pub(super) fn check_workload(machine: &Machine, workload: &Workload) -> Result<(), InputError> {
    let err = |key: &str, reason: String| Err(workload.attribution.error_at(key, reason));
    if workload.granularity == crate::workload::spec::Granularity::Pair {
        return err(
            "partition.granularity",
            "pim-tree places keys by hashing and does not partition; `pair` granularity is for `pimdes partition` with data-balanced or query-balanced".to_owned(),
        );
    }
    if workload.arrival != ArrivalMode::Closed {
        return err(
            "run.arrival",
            "pim-tree plans every batch before simulating its DPUs, so it runs closed arrivals only".to_owned(),
        );
    }
    if !workload.simulate_warmup {
        return err(
            "batches.simulate_warmup",
            "pim-tree simulates every batch's rounds on its DPUs as it is built, warm-up included; set it to true (only b+forest leaves warm-up batches unsimulated)".to_owned(),
        );
    }
    check_tasklets(machine, workload)?;
    workload.check_deviation(machine.dpus, &machine.attribution)?;
    let layout = Layout::new(workload.tasklets);
    if layout.end > machine.mram_size_bytes {
        return Err(machine.attribution.error_at(
            "dpu.mram_size_bytes",
            format!(
                "PIM-tree's MRAM regions and buffers take {} bytes, more than the {} bytes of MRAM",
                layout.end, machine.mram_size_bytes
            ),
        ));
    }
    let capacity = data_node_capacity(&layout);
    let mean = workload.pairs.div_ceil(machine.dpus as u64);
    if mean > capacity {
        return Err(workload.blame_with_dpus(
            &["data.pairs"],
            &machine.attribution,
            format!(
                "the data does not fit in PIM-tree's data-node region: {} pairs over {} is {mean} keys per DPU on average, but the region holds {capacity} ({}); use less data or more DPUs",
                workload.pairs,
                crate::machine::dpus_phrase(machine.dpus),
                crate::pimtree::image::FIXED_REGION
            ),
        ));
    }
    if workload.pairs < machine.dpus as u64 {
        return Err(workload.blame_with_dpus(
            &["data.pairs"],
            &machine.attribution,
            format!(
                "{} pairs are fewer than the machine's {} DPUs",
                workload.pairs, machine.dpus
            ),
        ));
    }
    Ok(())
}

/// PIM-tree's own host protocol, when the run uses another (a note, not an error: a
/// what-if run may want exactly that).
pub(super) fn protocol_note(workload: &Workload) -> Option<String> {
    let mut differ = Vec::new();
    if workload.tasklets != 11 {
        differ.push(format!("run.tasklets = {}", workload.tasklets));
    }
    if workload.launch != LaunchMode::Async {
        differ.push("run.launch = \"sync\"".to_owned());
    }
    if workload.batches_in_flight != 2 {
        differ.push(format!(
            "run.batches_in_flight = {}",
            workload.batches_in_flight
        ));
    }
    match workload.poll_interval_us {
        Some(100.0) => {}
        Some(us) => differ.push(format!("run.poll_interval_us = {us}")),
        None => differ.push("no run.poll_interval_us".to_owned()),
    }
    (!differ.is_empty()).then(|| {
        format!(
            "pim-tree runs here with another host protocol than its own: {} (its own: run.tasklets = 11, as the B+-Forest paper ran it, run.launch = \"async\", run.batches_in_flight = 2, run.poll_interval_us = 100; see workloads/pim-tree-get.toml)",
            differ.join(", ")
        )
    })
}

/// B+-Forest's choices that a PIM-tree run names but does not use (PIM-tree places its data
/// by hash and has one way to route, evaluate and merge): a note, since a sweep over both
/// indexes sets them for every point. The defaults pass without a note.
pub(crate) fn unused_choices_note(workload: &Workload, partitioner: &str) -> Vec<String> {
    let mut notes: Vec<String> = choices_note(workload, partitioner).into_iter().collect();
    notes.extend(unread_partition_keys(workload));
    // `batches.streaming = "always"` is refused; any other value streams nothing either.
    for key in ["batches.streaming", "batches.stream_fragments"] {
        if let Some(set) = workload.attribution.changed(key) {
            notes.push(format!(
                "--set {set} had no effect: pim-tree does not stream its batches (only b+forest does)"
            ));
        }
    }
    notes
}

/// The partitioners' tuning keys a `--set` changed: PIM-tree reads none of them.
/// (`partition.chunk_pairs` it does read: the data set is drawn chunk by chunk.)
fn unread_partition_keys(workload: &Workload) -> Vec<String> {
    let keys = crate::partition::TUNING_KEYS
        .iter()
        .chain(&["partition.count_both_ends"]);
    keys.filter_map(|key| workload.attribution.changed(key))
        .map(|set| {
            format!("--set {set} had no effect: pim-tree places its data by hash and reads no partitioner's key")
        })
        .collect()
}

/// The B+-Forest choices a run names other than the defaults.
fn choices_note(workload: &Workload, partitioner: &str) -> Option<String> {
    let defaults = crate::workload::spec::RawRun::default();
    let chosen = [
        ("the partitioner", partitioner, DEFAULT_PARTITIONER),
        ("run.routing", &workload.routing, &defaults.routing),
        ("run.evaluation", &workload.evaluation, &defaults.evaluation),
        (
            "run.postprocessing",
            &workload.postprocessing,
            &defaults.postprocessing,
        ),
    ];
    let mut unused: Vec<String> = chosen
        .iter()
        .filter(|(_, value, default)| value != default)
        .map(|(key, value, _)| format!("{key} = \"{value}\""))
        .collect();
    if workload.max_launches != crate::workload::spec::DEFAULT_MAX_LAUNCHES {
        unused.push(format!("batches.max_launches = {}", workload.max_launches));
    }
    (!unused.is_empty()).then(|| {
        format!(
            "pim-tree does not use B+-Forest's choices: {} had no effect (it places its data by hash and has its own routing, evaluation, merge and launches)",
            unused.join(", ")
        )
    })
}

/// `groups` consecutive DPU ranges of (nearly) equal size covering all `dpus`.
pub(super) fn dpu_groups(dpus: u32, groups: u32) -> Vec<std::ops::Range<u32>> {
    let g = groups.clamp(1, dpus.max(1)) as u64;
    (0..g)
        .map(|i| (i * dpus as u64 / g) as u32..((i + 1) * dpus as u64 / g) as u32)
        .collect()
}

/// Groups needed for `pairs` pairs of 16 bytes to stay within [`GROUP_PAIR_BYTES`].
pub(super) fn group_count(pairs: u64) -> u32 {
    pairs
        .saturating_mul(16)
        .div_ceil(GROUP_PAIR_BYTES)
        .min(u32::MAX as u64) as u32
}

/// A chunk's tags and pairs, one tag per pair.
type Tagged<T> = (Vec<T>, Vec<(u64, u64)>);
/// What [`walk_chunks`] shows each chunk: its first key, last key and pairs.
pub(super) type ChunkVisit<'a> = &'a (dyn Fn(u64, u64, &[(u64, u64)]) + Sync);

/// Walks the data set in key order, [`CHUNKS_PER_STEP`] chunks at a time: the chunks of a
/// step are generated, shown to `visit` (first key, last key, pairs) and each pair tagged
/// by `tag`, in parallel; then `each` sees every pair with its tag, in key order. Scratch
/// memory is bounded by one step's pairs.
pub(super) fn walk_chunks<T: Send>(
    data: &DataSet,
    visit: ChunkVisit,
    tag: impl Fn(u64) -> T + Sync,
    mut each: impl FnMut(T, (u64, u64)),
) {
    let chunks = data.chunks();
    let mut first = 0;
    while first < chunks {
        let last = (first + CHUNKS_PER_STEP).min(chunks);
        let tagged: Vec<Tagged<T>> = (first..last)
            .into_par_iter()
            .map(|c| {
                let pairs = data.chunk_pairs_of(c);
                let end = if c + 1 < chunks {
                    data.first_key(c + 1) - 1
                } else {
                    u64::MAX
                };
                visit(data.range_start(c), end, &pairs);
                (pairs.iter().map(|p| tag(p.0)).collect(), pairs)
            })
            .collect();
        for (tags, pairs) in tagged {
            for (t, pair) in tags.into_iter().zip(pairs) {
                each(t, pair);
            }
        }
        first = last;
    }
}

/// One pass over the data set: the pairs of DPUs `range` (each DPU's in key order), and
/// the keys of every DPU; `visit` sees every chunk's pairs (chunk, first key, last key).
fn gather(
    data: &DataSet,
    dpus: u32,
    range: std::ops::Range<u32>,
    visit: ChunkVisit,
) -> (Vec<Vec<(u64, u64)>>, Vec<u64>) {
    let mut out = vec![Vec::new(); range.len()];
    let mut counts = vec![0u64; dpus as usize];
    let home = |key| hash_to_dpu(key, 0, dpus);
    walk_chunks(data, visit, home, |d, pair| {
        counts[d as usize] += 1;
        if range.contains(&d) {
            out[(d - range.start) as usize].push(pair);
        }
    });
    (out, counts)
}

/// Refuses, before any DPU is simulated, a DPU with more keys than its data-node region
/// holds, or a round with more tasks than PIM-tree allows (the layout against MRAM is
/// checked before any work, in `check_workload`).
fn check_mram(
    machine: &Machine,
    workload: &Workload,
    layout: &Layout,
    keys_per_dpu: &[u64],
    rounds: &[GetRound],
) -> Result<(), InputError> {
    // Every `--set` of what decided the DPU's keys or tasks is named, the DPUs' included.
    let blame =
        |keys: &[&str], reason| workload.blame_with_dpus(keys, &machine.attribution, reason);
    let dpu = busiest(keys_per_dpu);
    let keys = keys_per_dpu[dpu];
    let capacity = data_node_capacity(layout);
    if keys > capacity {
        return Err(blame(
            &["data.pairs"],
            format!(
                "the data does not fit in PIM-tree's data-node region: DPU {dpu} holds {keys} keys, {} bytes of data nodes, but the region holds {capacity} ({} bytes, {}); use less data or more DPUs",
                keys * DATA_NODE_BYTES,
                layout.data_nodes.bytes,
                crate::pimtree::image::FIXED_REGION
            ),
        ));
    }
    for (b, round) in rounds.iter().enumerate() {
        let most = round.max_tasks();
        if most > MAX_TASKS_PER_DPU {
            let d = round.tasks.iter().position(|t| t.len() as u64 == most);
            return Err(blame(
                &["queries.batch_size", "queries.skew", "data.pairs"],
                format!(
                    "batch {b} sends DPU {} {most} get tasks ({} bytes); PIM-tree allows at most {MAX_TASKS_PER_DPU} per DPU per round (MAX_TASK_COUNT_PER_DPU_PER_BLOCK); use smaller batches or more DPUs",
                    d.unwrap_or(0),
                    get_task_buffer_bytes(most)
                ),
            ));
        }
    }
    Ok(())
}

const INIT_STAGES: [Stage; 2] = [
    Stage {
        name: "transfer",
        class: Class::Communication,
    },
    Stage {
        name: "kernel",
        class: Class::Pim,
    },
];

/// [est] The one-off build: a parallel push of each DPU's pairs (key and value, 16 bytes),
/// then a launch that streams them in and writes the data nodes and the whole hash table.
/// PIM-tree itself builds by batched inserts; this times only the bulk placement.
pub(super) fn build_program(machine: &Machine, keys_per_dpu: &[u64]) -> Program {
    let table = crate::pimtree::HASH_SLOTS * crate::pimtree::SLOT_BYTES;
    Program {
        stages: INIT_STAGES.to_vec(),
        steps: vec![
            Step::Transfer {
                stage: 0,
                direction: Direction::CpuDpu,
                kind: TransferKind::Parallel,
                sizes_bytes: keys_per_dpu.iter().map(|k| k * 16).collect(),
            },
            Step::Launch {
                stage: 1,
                dpu_time: keys_per_dpu
                    .iter()
                    .map(|k| streaming_time(machine, k * (16 + DATA_NODE_BYTES) + table))
                    .collect(),
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cover_every_dpu_once() {
        assert_eq!(dpu_groups(10, 3), vec![0..3, 3..6, 6..10]);
        assert_eq!(dpu_groups(2, 5), vec![0..1, 1..2]);
        assert_eq!(dpu_groups(7, 0), vec![0..7]);
        // 500 M pairs of 16 bytes: 7.45 GiB, two groups of at most 4 GiB.
        assert_eq!(group_count(500_000_000), 2);
        assert_eq!(group_count(1000), 1);
    }
}
