//! PIM-tree's predecessor and scan batches as an [`Index`](super::Index) (range-count-if
//! and range-max are answered by a scan and a host pass over each range's pairs). The plans
//! and the kernel are in [`crate::pimtree::ordered`] and [`crate::pimtree::search`].
//!
//! Every round of every batch is planned before any DPU runs, on the host's mirror of the
//! skip list, with the reply each task must give; then the DPUs are simulated DPU-major in
//! groups (as the get path does): each DPU's image (data nodes, hash table, its nodes,
//! the replicated top) is built, runs every round of every batch, checks each reply, and
//! is dropped. The answers are read from the data rounds' replies and checked against the
//! plain reference.
//!
//! The program of a batch: `sort` (cpu), then per round `task_generation` (cpu),
//! `cpu_to_dpu`, `dpu_kernel`, `dpu_to_cpu`, `task_generation` again for the host's work
//! on the replies, and at the end `fill` (cpu). The whole batch holds the DPUs (PIM-tree
//! takes its DPU lock per round, so two batches' rounds could interleave there).

use super::pimtree::{ChunkVisit, PimTreeFields, STAGES, dpu_groups, group_count, walk_chunks};
use super::{BatchWork, IndexError, MramNeed, Record, busiest, host_step, verify};
use crate::config::InputError;
use crate::dpu::{Dpu, LaunchError};
use crate::engine::Time;
use crate::forest::reference::{Answer, Reference};
use crate::host::{HostUnit, moved_bytes};
use crate::machine::Machine;
use crate::pimtree::image::{FIXED_REGION, Layout, data_node_capacity, key_height, write_image};
use crate::pimtree::nodes::{Top, capacity, write_nodes};
use crate::pimtree::ordered::{Plan, Wanted, merge_ranges, plan_predecessor, plan_scan};
use crate::pimtree::round::{RoundLimit, buffer_bytes, check_limits, read_and_check, write_round};
use crate::pimtree::search::SearchKernel;
use crate::pimtree::skiplist::{Skeleton, SkipList, pptr};
use crate::pimtree::{DATA_NODE_BYTES, hash_to_dpu};
use crate::system::program::{Direction, Program, Step, TransferKind};
use crate::workload::{DataSet, Query, QueryGenerator, QueryKind, Workload};
use rayon::prelude::*;
use std::ops::Range;

/// One DPU's part of every batch: per batch, per round, (time, events, data values).
/// One DPU's hash-table insert probes, and each batch's rounds: (kernel time, events,
/// values).
type DpuRuns = (u64, Vec<Vec<(Time, u64, Vec<u64>)>>);

/// What the DPUs did in one batch.
#[derive(Debug, Clone, Default)]
struct BatchResult {
    /// Per round, each DPU's kernel time.
    kernel: Vec<Vec<Time>>,
    events: u64,
    /// Per round, each DPU's data replies (values), in task order.
    values: Vec<Vec<Vec<u64>>>,
}

/// A DPU group's share of a pass: its pairs and its level-0 nodes' entries.
struct GroupData {
    range: Range<u32>,
    pairs: Vec<Vec<(u64, u64)>>,
    level0: Vec<Vec<Vec<(u64, u64)>>>,
}

impl GroupData {
    fn new(range: Range<u32>) -> GroupData {
        GroupData {
            pairs: vec![Vec::new(); range.len()],
            level0: vec![Vec::new(); range.len()],
            range,
        }
    }
}

/// PIM-tree's skip list on a machine, with every batch's rounds simulated.
pub struct PimTreeOrdered {
    machine: Machine,
    kind: QueryKind,
    tasklets: u32,
    seed: u64,
    layout: Layout,
    data: DataSet,
    list: SkipList,
    top: Top,
    plans: Vec<Plan>,
    /// Count-if's compared values, per batch.
    values: Vec<Vec<u64>>,
    reference: Reference,
    results: Vec<BatchResult>,
    keys_per_dpu: Vec<u64>,
    /// Slots probed to fill every DPU's hash table.
    insert_probes: u64,
    groups: u32,
    sim_wall_s: f64,
    protocol_note: Option<String>,
    tally: Tally,
}

/// Measured batches' sums.
#[derive(Debug, Clone, Default)]
struct Tally {
    batches: u64,
    queries: u64,
    distinct: u64,
    rounds: u64,
    pushes: u64,
    pulls: u64,
    skewed: u64,
    max_tasks: u64,
    payload_bytes: u64,
    moved_bytes: u64,
}

impl PimTreeOrdered {
    /// Generates the data and batches, builds the skip list, plans every round, checks
    /// MRAM and PIM-tree's limits, and simulates every DPU.
    pub fn new(
        machine: &Machine,
        workload: &Workload,
        progress: &mut crate::meter::Phases<'_>,
    ) -> Result<PimTreeOrdered, IndexError> {
        let layout = Layout::new(workload.tasklets);
        let data = DataSet::generate(workload);
        let generator = QueryGenerator::new(workload, &data, machine.dpus);
        progress.phase("generating batches");
        let batches: Vec<Vec<Query>> = (0..workload.total_batches())
            .map(|b| generator.batch(b))
            .collect();
        let views: Vec<&[Query]> = batches.iter().map(|b| b.as_slice()).collect();
        let reference_kind = if workload.kind.is_range() {
            workload.kind
        } else {
            QueryKind::Get
        };
        let reference = Reference::new(reference_kind, &views);
        let mut wanted = wanted(workload.kind, &batches);
        // A group holds its pairs and its level-0 nodes' entries: 32 bytes per pair.
        let groups = dpu_groups(machine.dpus, group_count(workload.pairs.saturating_mul(2)));
        progress.phase("building the skip list");
        let mut first = GroupData::new(groups[0].clone());
        let (skeleton, keys_per_dpu) = pass(
            &data,
            (&layout, workload.seed),
            machine.dpus,
            &mut first,
            &|lo, hi, pairs| reference.visit(lo, hi, pairs),
            &mut |f| wanted.see(f),
        );
        wanted.finish();
        let list = SkipList::new(workload.seed, machine.dpus, skeleton);
        let top = Top::build(&layout, &list);
        check_capacity(machine, workload, &layout, &list, &top, &keys_per_dpu)?;
        progress.phase("planning rounds");
        let plans = plan_all(workload.kind, &layout, &list, &wanted, &batches);
        drop(wanted);
        check_rounds(machine, workload, &layout, &plans)?;
        let values = batches
            .iter()
            .map(|b| match workload.kind {
                QueryKind::RangeCountIf => b.iter().map(|q| q.value).collect(),
                _ => Vec::new(),
            })
            .collect();
        let mut index = PimTreeOrdered {
            machine: machine.clone(),
            kind: workload.kind,
            tasklets: workload.tasklets,
            seed: workload.seed,
            layout,
            data,
            list,
            top,
            results: vec![BatchResult::default(); plans.len()],
            plans,
            values,
            reference,
            keys_per_dpu,
            insert_probes: 0,
            groups: groups.len() as u32,
            sim_wall_s: 0.0,
            protocol_note: super::pimtree::protocol_note(workload),
            tally: Tally::default(),
        };
        index.simulate(groups, first, progress)?;
        Ok(index)
    }

    /// Simulates the DPUs group by group; the first group's data came with the first pass.
    fn simulate(
        &mut self,
        groups: Vec<Range<u32>>,
        first: GroupData,
        progress: &mut crate::meter::Phases<'_>,
    ) -> Result<(), IndexError> {
        let p = self.machine.dpus as usize;
        for (r, plan) in self.results.iter_mut().zip(&self.plans) {
            r.kernel = vec![vec![Time::ZERO; p]; plan.rounds.len()];
            r.values = vec![vec![Vec::new(); p]; plan.rounds.len()];
        }
        let mut first = Some(first);
        for (g, range) in groups.iter().enumerate() {
            progress.phase(&format!(
                "simulating DPUs {} to {} (group {} of {})",
                range.start,
                range.end - 1,
                g + 1,
                groups.len()
            ));
            let group = match first.take() {
                Some(group) => group,
                None => {
                    let mut group = GroupData::new(range.clone());
                    pass(
                        &self.data,
                        (&self.layout, self.seed),
                        self.machine.dpus,
                        &mut group,
                        &|_, _, _| {},
                        &mut |_| {},
                    );
                    group
                }
            };
            let started = std::time::Instant::now();
            let runs: Vec<Result<DpuRuns, LaunchError>> = (0..range.len())
                .into_par_iter()
                .map(|i| {
                    self.simulate_dpu(range.start + i as u32, &group.pairs[i], &group.level0[i])
                })
                .collect();
            self.sim_wall_s += started.elapsed().as_secs_f64();
            for (i, runs) in runs.into_iter().enumerate() {
                let d = range.start as usize + i;
                let (probes, runs) = runs?;
                self.insert_probes += probes;
                for (result, batch) in self.results.iter_mut().zip(runs) {
                    for (r, (time, events, values)) in batch.into_iter().enumerate() {
                        result.kernel[r][d] = time;
                        result.events += events;
                        result.values[r][d] = values;
                    }
                }
            }
        }
        Ok(())
    }

    /// Every round of every batch on DPU `d`, whose image is built from its pairs and the
    /// entries of its level-0 nodes.
    fn simulate_dpu(
        &self,
        d: u32,
        pairs: &[(u64, u64)],
        level0: &[Vec<(u64, u64)>],
    ) -> Result<DpuRuns, LaunchError> {
        let mut dpu = Dpu::new(&self.machine.dpu, d);
        let image = write_image(dpu.mram_mut(), &self.layout, self.seed, pairs);
        write_nodes(
            dpu.mram_mut(),
            &self.layout,
            &self.list,
            d,
            level0,
            &self.top,
        );
        let kernel = SearchKernel {
            layout: self.layout.clone(),
        };
        let mut out = Vec::with_capacity(self.plans.len());
        for (b, plan) in self.plans.iter().enumerate() {
            let mut rounds = Vec::with_capacity(plan.rounds.len());
            for (r, round) in plan.rounds.iter().enumerate() {
                let blocks = &round.dpus[d as usize];
                write_round(dpu.mram_mut(), &self.layout, blocks);
                let report = dpu
                    .launch(&kernel, self.tasklets)
                    .map_err(|error| LaunchError { dpu: d, error })?;
                // The data round's one block: each task's value, by task.
                let data = round.name == "data";
                let mut values = vec![
                    0;
                    if data {
                        blocks.first().map_or(0, |b| b.len())
                    } else {
                        0
                    }
                ];
                read_and_check(
                    dpu.mram(),
                    &self.layout,
                    blocks,
                    self.tasklets,
                    |_, i, reply| {
                        if data {
                            values[i] = reply[1];
                        }
                    },
                )
                .map_err(|e| LaunchError {
                    dpu: d,
                    error: crate::dpu::KernelError::Kernel {
                        tasklet: 0,
                        reason: format!("batch {b}, round {r} ({}): {e}", round.name),
                    },
                })?;
                rounds.push((dpu.duration(&report), report.stats.events, values));
            }
            out.push(rounds);
        }
        Ok((image.insert_probes, out))
    }

    /// The answers of batch `b` from its data rounds' replies.
    fn answers(&self, b: usize) -> Vec<Answer> {
        let plan = &self.plans[b];
        let result = &self.results[b];
        let value =
            |&(r, d, t): &(u32, u32, u32)| result.values[r as usize][d as usize][t as usize];
        plan.answer_spans
            .iter()
            .enumerate()
            .map(|(i, &(a, z))| {
                let fetched = &plan.fetched[a as usize..z as usize];
                match self.kind {
                    QueryKind::RangeCountIf => {
                        let want = self.values[b][i];
                        Some(fetched.iter().filter(|t| value(t) == want).count() as u64)
                    }
                    QueryKind::RangeMax => fetched.iter().map(value).max(),
                    QueryKind::Get | QueryKind::Predecessor => fetched.first().map(value),
                }
            })
            .collect()
    }

    /// Checks that each predecessor query of batch `b` was answered from the pair the
    /// reference resolved it to, not only with an equal value (values repeat when the
    /// value domain is small). The key is the one the plan expected of the data reply,
    /// which the DPU's reply was checked against.
    fn verify_keys(&self, b: usize, want: &[Answer]) -> Result<(), IndexError> {
        let plan = &self.plans[b];
        let resolved = self.reference.resolved_keys(b);
        for (i, &(a, z)) in plan.answer_spans.iter().enumerate() {
            let Some(&(r, d, t)) = plan.fetched[a as usize..z as usize].first() else {
                continue;
            };
            let data = &plan.rounds[r as usize].dpus[d as usize][0];
            let key = data.expected(t as usize)[0];
            if want[i].is_some() && key != resolved[i] {
                return Err(IndexError::Verification(format!(
                    "batch {b}, query {i} (predecessor): answered from key {key}, the reference's predecessor is key {}",
                    resolved[i]
                )));
            }
        }
        Ok(())
    }

    /// Batch `b`'s program, with its buffers' payload bytes and the bytes moved.
    fn program(&self, b: usize) -> (Program, u64, u64) {
        let plan = &self.plans[b];
        let m = &self.machine;
        let mut steps = vec![host_step(m, 0, "sort", plan.load)];
        let (mut payload, mut moved) = (0, 0);
        for (r, round) in plan.rounds.iter().enumerate() {
            let (push, pull): (Vec<u64>, Vec<u64>) = round.dpus.iter().map(buffer_bytes).unzip();
            payload += push.iter().chain(&pull).sum::<u64>();
            moved += moved_bytes(m, TransferKind::ParallelAll, &push)
                + moved_bytes(m, TransferKind::ParallelAll, &pull);
            let transfer = |stage, direction, sizes_bytes| Step::Transfer {
                stage,
                direction,
                kind: TransferKind::ParallelAll,
                sizes_bytes,
            };
            steps.push(host_step(m, 1, round.name, round.prepare));
            steps.push(transfer(2, Direction::CpuDpu, push));
            steps.push(Step::Launch {
                stage: 3,
                dpu_time: self.results[b].kernel[r].clone(),
            });
            steps.push(transfer(4, Direction::DpuCpu, pull));
            steps.push(host_step(m, 1, round.name, round.finish));
        }
        steps.push(host_step(m, 5, "fill", plan.fill));
        let program = Program {
            stages: STAGES.to_vec(),
            steps,
        };
        (program, payload, moved)
    }

    fn count(&mut self, b: usize, queries: u64, payload: u64, moved: u64) {
        let plan = &self.plans[b];
        let t = &mut self.tally;
        t.batches += 1;
        t.queries += queries;
        t.distinct += plan.distinct;
        t.rounds += plan.rounds.len() as u64;
        t.pushes += plan.pushes;
        t.pulls += plan.pulls;
        t.skewed += plan.skewed_rounds;
        t.max_tasks += plan
            .rounds
            .iter()
            .flat_map(|r| {
                r.dpus
                    .iter()
                    .map(|d| d.iter().map(|b| b.len() as u64).sum::<u64>())
            })
            .max()
            .unwrap_or(0);
        t.payload_bytes += payload;
        t.moved_bytes += moved;
    }
}

impl super::Index for PimTreeOrdered {
    fn name(&self) -> &'static str {
        super::pimtree::NAME
    }

    fn init_programs(&self) -> Vec<(&'static str, Program)> {
        vec![(
            "build",
            super::pimtree::build_program(&self.machine, &self.keys_per_dpu),
        )]
    }

    fn mram(&self) -> MramNeed {
        MramNeed {
            available_bytes: self.machine.mram_size_bytes,
            max_needed_bytes: self.layout.end,
            max_needed_dpu: busiest(&self.keys_per_dpu) as u32,
            launches_per_batch: 1,
        }
    }

    fn run_batch(
        &mut self,
        batch: u64,
        queries: u64,
        measured: bool,
        _record: &Record,
    ) -> Result<BatchWork, IndexError> {
        let b = batch as usize;
        let planned = self.plans[b].answer_spans.len() as u64;
        if queries != planned {
            return Err(IndexError::Verification(format!(
                "batch {b}: {queries} queries asked for, {planned} planned (PIM-tree runs closed arrivals only)"
            )));
        }
        let answers = self.answers(b);
        let want = self.reference.answers(b);
        let verified = verify(self.kind, batch, &answers, &want)?;
        if self.kind == QueryKind::Predecessor {
            self.verify_keys(b, &want)?;
        }
        let (program, payload, moved) = self.program(b);
        if measured {
            self.count(b, queries, payload, moved);
        }
        let result = &self.results[b];
        let p = self.machine.dpus as usize;
        let dpu_kernel = (0..p)
            .map(|d| {
                result
                    .kernel
                    .iter()
                    .map(|r| r[d])
                    .fold(Time::ZERO, |a, t| a + t)
            })
            .collect();
        Ok(BatchWork {
            program,
            dpu_kernel,
            events: result.events,
            kernel_wall_s: self.sim_wall_s / self.plans.len() as f64,
            answers_verified: verified,
            timelines: Vec::new(),
        })
    }

    fn report(&self) -> serde_json::Map<String, serde_json::Value> {
        let t = &self.tally;
        let per_batch = |x: u64| x as f64 / t.batches.max(1) as f64;
        let per_query = |x: u64| x as f64 / t.queries.max(1) as f64;
        let keys: u64 = self.keys_per_dpu.iter().sum();
        let pim_tree = PimTreeFields {
            operation: if self.kind.is_range() {
                "scan"
            } else {
                "predecessor"
            },
            rounds_per_batch: per_batch(t.rounds),
            distinct_keys_per_batch: per_batch(t.distinct),
            queries_per_distinct_key: t.queries as f64 / t.distinct.max(1) as f64,
            max_tasks_per_dpu: per_batch(t.max_tasks),
            task_imbalance: None,
            payload_bytes_per_query: per_query(t.payload_bytes),
            moved_bytes_per_query: per_query(t.moved_bytes),
            max_keys_per_dpu: self.keys_per_dpu[busiest(&self.keys_per_dpu)],
            insert_probes_per_key: self.insert_probes as f64 / keys.max(1) as f64,
            mram_layout_bytes: self.layout.end,
            dpu_groups: self.groups,
            pushes_per_batch: Some(per_batch(t.pushes)),
            pulls_per_batch: Some(per_batch(t.pulls)),
            // Only predecessor rounds have a push-pull plan.
            skewed_rounds_per_batch: (!self.kind.is_range()).then(|| per_batch(t.skewed)),
        };
        pim_tree.into_report()
    }

    fn table_rows(&self) -> Vec<(String, String)> {
        let t = &self.tally;
        let n = t.batches.max(1) as f64;
        vec![
            (
                "rounds / batch".to_owned(),
                format!("{:.1}", t.rounds as f64 / n),
            ),
            (
                "pushes, pulls / batch".to_owned(),
                format!("{:.0}, {:.0}", t.pushes as f64 / n, t.pulls as f64 / n),
            ),
            (
                "bytes moved / query".to_owned(),
                format!("{:.1}", t.moved_bytes as f64 / t.queries.max(1) as f64),
            ),
        ]
    }

    fn warnings(&self) -> Vec<String> {
        self.protocol_note.iter().cloned().collect()
    }

    fn instruction_keys(&self) -> Option<Vec<&'static str>> {
        Some(crate::pimtree::costs::instruction_keys())
    }

    /// Ordered queries go to the DPUs by key range, never by hash.
    fn host_units(&self) -> &'static [HostUnit] {
        use HostUnit::*;
        &[Sort, Scan, Bucket, Fill]
    }

    fn units_of_other_kinds(&self) -> &'static [(HostUnit, &'static str)] {
        &[(HostUnit::Hash, "only gets hash")]
    }
}

/// Every batch's rounds.
fn plan_all(
    kind: QueryKind,
    layout: &Layout,
    list: &SkipList,
    wanted: &Wanted,
    batches: &[Vec<Query>],
) -> Vec<Plan> {
    batches
        .par_iter()
        .map(|b| match kind.is_range() {
            true => plan_scan(layout, list, wanted, b),
            false => plan_predecessor(layout, list, wanted, &keys_of(b)),
        })
        .collect()
}

fn keys_of(batch: &[Query]) -> Vec<u64> {
    batch.iter().map(|q| q.lo).collect()
}

/// The data the plans need: the predecessor of every drawn key, or the keys of every
/// merged scan range.
fn wanted(kind: QueryKind, batches: &[Vec<Query>]) -> Wanted {
    if !kind.is_range() {
        return Wanted::new(
            batches.iter().flat_map(|b| keys_of(b)).collect(),
            Vec::new(),
        );
    }
    let ranges = batches
        .iter()
        .flat_map(|b| {
            b.chunks(crate::pimtree::ordered::SCAN_SUB_BATCH)
                .flat_map(merge_ranges)
                .collect::<Vec<_>>()
        })
        .collect();
    Wanted::new(Vec::new(), ranges)
}

/// One pass over the data in key order: the skeleton of the skip list and every DPU's key
/// count; `found` sees every key with its value and data-node pointer; `group` collects
/// its DPUs' pairs and level-0 entries; `visit` sees every chunk (first key, last key,
/// pairs).
fn pass(
    data: &DataSet,
    (layout, seed): (&Layout, u64),
    dpus: u32,
    group: &mut GroupData,
    visit: ChunkVisit,
    found: &mut dyn FnMut((u64, u64, u64)),
) -> (Skeleton, Vec<u64>) {
    let mut skeleton = Skeleton::default();
    let mut counts = vec![0u64; dpus as usize];
    let mut node_dpu = 0u32;
    let tag = |key| (hash_to_dpu(key, 0, dpus), key_height(seed, key));
    walk_chunks(data, visit, tag, |(d, height), (key, value)| {
        let rank = counts[d as usize];
        counts[d as usize] += 1;
        let ptr = pptr(d, layout.data_node_addr(rank + 1));
        let heads = skeleton.heads.len();
        skeleton.push(key, height);
        if skeleton.heads.len() > heads {
            // This key heads a level-0 node, on the DPU of its data node.
            node_dpu = d;
            if group.range.contains(&d) {
                group.level0[(d - group.range.start) as usize].push(Vec::new());
            }
        }
        if group.range.contains(&node_dpu) {
            let nodes = &mut group.level0[(node_dpu - group.range.start) as usize];
            nodes
                .last_mut()
                .expect("opened at its head")
                .push((key, ptr));
        }
        if group.range.contains(&d) {
            group.pairs[(d - group.range.start) as usize].push((key, value));
        }
        found((key, value, ptr));
    });
    (skeleton, counts)
}

/// Refuses, before any DPU runs, a DPU whose data nodes, node headers or data blocks do not
/// fit their regions, or a top too large for its region.
fn check_capacity(
    machine: &Machine,
    workload: &Workload,
    layout: &Layout,
    list: &SkipList,
    top: &Top,
    keys_per_dpu: &[u64],
) -> Result<(), InputError> {
    let fail = |reason: String| {
        Err(workload.blame_with_dpus(&["data.pairs"], &machine.attribution, reason))
    };
    let d = busiest(keys_per_dpu);
    let capacity_keys = data_node_capacity(layout);
    if keys_per_dpu[d] > capacity_keys {
        return fail(format!(
            "the data does not fit in PIM-tree's data-node region: DPU {d} holds {} keys, {} bytes of data nodes, but the region holds {capacity_keys} ({} bytes, {FIXED_REGION}); use less data or more DPUs",
            keys_per_dpu[d],
            keys_per_dpu[d] * DATA_NODE_BYTES,
            layout.data_nodes.bytes
        ));
    }
    let (headers, blocks) = capacity(layout);
    let d = busiest(&list.headers);
    if list.headers[d] > headers {
        return fail(format!(
            "the skip list does not fit in its region: DPU {d} holds {} chunked nodes, {} bytes of headers, but the region holds {headers} ({} bytes, {FIXED_REGION}); use less data or more DPUs",
            list.headers[d],
            list.headers[d] * crate::pimtree::image::BNODE_BYTES,
            layout.headers.bytes
        ));
    }
    let d = busiest(&list.blocks);
    if list.blocks[d] > blocks {
        return fail(format!(
            "the skip list does not fit in its region: DPU {d} needs {} data blocks, {} bytes, but the region holds {blocks} ({} bytes, {FIXED_REGION}); use less data or more DPUs",
            list.blocks[d],
            list.blocks[d] * crate::pimtree::image::DATA_BLOCK_BYTES,
            layout.blocks.bytes
        ));
    }
    let top_bytes = top.words.len() as u64 * 8;
    if top_bytes > layout.top.bytes {
        // Every DPU holds the whole top: only less data makes it smaller.
        let reason = format!(
            "the replicated top does not fit in its region: {} nodes, {top_bytes} bytes on every DPU, but the region holds {} bytes ({FIXED_REGION}); use less data",
            top.nodes, layout.top.bytes
        );
        return Err(workload.attribution.error_at("data.pairs", reason));
    }
    Ok(())
}

/// Refuses a round PIM-tree's buffers cannot carry, naming the batch, round and DPU, and
/// every `--set` of what decides a DPU's tasks: the batch, its ranges and skew, and the DPUs.
fn check_rounds(
    machine: &Machine,
    workload: &Workload,
    layout: &Layout,
    plans: &[Plan],
) -> Result<(), InputError> {
    for (b, plan) in plans.iter().enumerate() {
        for (r, round) in plan.rounds.iter().enumerate() {
            for (d, blocks) in round.dpus.iter().enumerate() {
                if let Err((limit, reason)) = check_limits(blocks, layout, workload.tasklets) {
                    let ranges = match workload.kind.is_range() {
                        true => ", shorter ranges",
                        false => "",
                    };
                    let reason = format!(
                        "batch {b}, round {r} ({}) sends DPU {d} {reason}; use smaller batches{ranges} or more DPUs",
                        round.name
                    );
                    // What decides a DPU's tasks, and for a tasklet's replies its share.
                    let mut work = vec!["queries.batch_size", "queries.skew"];
                    if workload.kind.is_range() {
                        work.push("queries.range_pairs");
                    }
                    work.extend(["queries.kind", "data.pairs"]);
                    if limit == RoundLimit::TaskletReplies {
                        work.push("run.tasklets");
                    }
                    return Err(workload.blame_with_dpus(&work, &machine.attribution, reason));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Override;
    use crate::index::Index;

    /// A predecessor run on one rank of 16 DPUs where every pair has the same value.
    fn index() -> PimTreeOrdered {
        let parse = |sets: &[&str]| -> Vec<Override> {
            sets.iter().map(|s| Override::parse(s).unwrap()).collect()
        };
        let machine = Machine::from_toml_str(
            "paper-2rank.toml",
            include_str!("../../machines/paper-2rank.toml"),
            &parse(&["machine.ranks=1", "machine.usable_dpus=16"]),
        )
        .unwrap();
        let sets = [
            "queries.kind=predecessor",
            "data.pairs=120000",
            "data.value_domain=1",
            "queries.batch_size=3000",
            "batches.warmup=1",
            "batches.measured=1",
        ];
        let workload = Workload::from_toml_str(
            "pim-tree-get.toml",
            include_str!("../../workloads/pim-tree-get.toml"),
            &parse(&sets),
        )
        .unwrap();
        crate::meter::quietly(|p| PimTreeOrdered::new(&machine, &workload, p)).unwrap()
    }

    /// With one value for all pairs, a query answered from another query's pair has the
    /// right value: only the key check catches it.
    #[test]
    fn a_predecessor_answered_from_the_wrong_key_fails_the_check() {
        let mut index = index();
        let queries = index.plans[0].answer_spans.len() as u64;
        let first_of = |index: &PimTreeOrdered, i: usize| {
            let (a, z) = index.plans[0].answer_spans[i];
            (a < z).then_some(a as usize)
        };
        let resolved = index.reference.resolved_keys(0);
        // Two answered queries resolved to different keys.
        let (i, j) = (0..queries as usize)
            .filter_map(|i| first_of(&index, i).map(|_| i))
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| (w[0], w[1]))
            .find(|&(i, j)| resolved[i] != resolved[j])
            .expect("two queries with different predecessors");
        let (fi, fj) = (first_of(&index, i).unwrap(), first_of(&index, j).unwrap());
        let fetched = &mut index.plans[0].fetched;
        fetched[fi] = fetched[fj];
        let e = index
            .run_batch(0, queries, true, &Record::Nothing)
            .expect_err("the wrong key is caught");
        let reason = e.to_string();
        let expected = format!("batch 0, query {i} (predecessor): answered from key");
        assert!(reason.starts_with(&expected), "{reason}");
    }
}
