//! `pimdes partition`: run a partitioner on the reference batch and measure the imbalance it
//! leaves on the measured batches, without timing.

use crate::config::InputError;
use crate::error::Error;
use crate::forest::layout::dpu_trees_bytes;
use crate::machine::{Machine, RawMachine};
use crate::partition::keys;
pub use crate::partition::prepared::{Prepared, imbalance_factor};
use crate::partition::{Partitioner, Partitioning, RoutingTable};
use crate::workload::spec::Granularity;
use crate::workload::spec::RawWorkload;
use crate::workload::{DataSet, QueryGenerator, Workload};
use rayon::prelude::*;
use serde::Serialize;

/// The effective configuration a result was computed from.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EffectiveConfig {
    pub machine: RawMachine,
    pub workload: RawWorkload,
}

impl EffectiveConfig {
    /// The machine and workload as given, with the partitioner that actually ran (a
    /// `--partitioner` flag overrides the workload's).
    pub fn of(machine: &Machine, workload: &Workload, partitioner: &str) -> EffectiveConfig {
        let mut raw = workload.raw.clone();
        raw.partition.partitioner = partitioner.to_owned();
        EffectiveConfig {
            machine: machine.raw.clone(),
            workload: raw,
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Imbalance {
    /// IF_d: largest pairs on a DPU over the mean.
    pub data: f64,
    /// IF_q: mean over the measured batches of (largest queries on a DPU over the mean).
    pub queries: f64,
    /// IF_q of each measured batch.
    pub queries_per_batch: Vec<f64>,
    /// IF_q on the reference batch, the one the partitioner saw.
    pub queries_reference: f64,
    /// The floor chunk granularity sets under the busiest DPU's load: the reference
    /// queries of the busiest chunk over Q/P, a DPU's mean share (a chunk is never split).
    /// `null` when the partitioning cuts between keys (`partition.granularity = "pair"`).
    pub chunk_floor: Option<f64>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MramUse {
    /// MRAM per DPU.
    pub available_bytes: u64,
    /// Largest tree bytes (cold + hot) on one DPU.
    pub max_needed_bytes: u64,
    /// The DPU that needs the most.
    pub max_needed_dpu: u32,
    /// DPUs whose trees do not fit.
    pub dpus_over: u32,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PartitionReport {
    /// The version of the report's format (`crate::experiments::REPORT_SCHEMA_VERSION`): a
    /// reader compares it before reading the rest.
    pub schema_version: u32,
    pub partitioner: String,
    pub dpus: u32,
    pub chunks: usize,
    /// Routing-table entries: contiguous key ranges with one DPU and tree each.
    pub partitions: usize,
    pub hot_partitions: u32,
    pub imbalance: Imbalance,
    pub max_pairs_per_dpu: u64,
    pub mean_pairs_per_dpu: f64,
    /// Largest queries on one DPU in any measured batch (a query counts once per DPU).
    pub max_queries_per_dpu: u64,
    /// Mean queries per DPU per measured batch.
    pub mean_queries_per_dpu: f64,
    /// Mean over the measured batches of the share of the most loaded DPU's queries that
    /// reach its hot tree: near 1, hot partitions are the bottleneck; near 0, cold ones.
    pub bottleneck_hot_share: f64,
    pub fits_in_mram: bool,
    pub mram: MramUse,
    pub reference_batch: u64,
    /// How many batches were measured (as in `pimdes run`'s report).
    pub measured_batches: u64,
    /// Which: their indices in the workload's batch sequence.
    pub measured_batch_indices: Vec<u64>,
    pub warnings: Vec<String>,
    pub seed: u64,
    pub version: &'static str,
    /// The git commit of the build (`-dirty` with uncommitted changes); null outside git.
    pub git_commit: Option<&'static str>,
    /// The command line that made the report, when a command made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_line: Option<String>,
    /// FNV-1a (64 bits, hex) of `config` as compact JSON with sorted keys: equal exactly
    /// when the configurations are.
    pub config_fnv1a64: String,
    pub config: EffectiveConfig,
}

/// Queries each DPU serves in one batch.
pub struct DpuLoads {
    /// Each query counts once on every DPU it reaches.
    pub queries: Vec<u64>,
    /// Of those, the queries that reach the DPU's hot tree.
    pub hot: Vec<u64>,
}

impl DpuLoads {
    /// The share of the most loaded DPU's queries that reach its hot tree (the lowest DPU
    /// index among equals); 0 when no DPU has queries.
    pub fn bottleneck_hot_share(&self) -> f64 {
        let (dpu, &max) = self
            .queries
            .iter()
            .enumerate()
            .max_by_key(|&(i, q)| (*q, std::cmp::Reverse(i)))
            .expect("at least one DPU");
        if max == 0 {
            0.0
        } else {
            self.hot[dpu] as f64 / max as f64
        }
    }
}

/// Queries per DPU in batch `index`.
pub fn queries_per_dpu(
    table: &RoutingTable,
    queries: &QueryGenerator,
    index: u64,
    dpus: u32,
) -> DpuLoads {
    let mut loads = DpuLoads {
        queries: vec![0u64; dpus as usize],
        hot: vec![0u64; dpus as usize],
    };
    // A query counts once on each DPU it reaches: each DPU keeps the number (from 1) of the
    // last query counted on it, so a wide range costs one step per entry, not per pair of
    // DPUs it reaches.
    let mut last = vec![0u64; dpus as usize];
    let mut number = 0u64;
    queries.for_each(index, |q| {
        number += 1;
        table.route(q.lo, q.hi, |entry| {
            let t = table.target(entry);
            let dpu = t.dpu as usize;
            if t.hot {
                loads.hot[dpu] += 1;
            }
            if last[dpu] != number {
                last[dpu] = number;
                loads.queries[dpu] += 1;
            }
        });
    });
    loads
}

/// The partitioner named by `--partitioner`, else by the workload's `partition.partitioner`;
/// an unknown name is an error naming whichever gave it.
pub fn choose_partitioner(
    flag: &Option<String>,
    workload: &Workload,
) -> Result<Box<dyn Partitioner>, InputError> {
    let name = flag.as_deref().unwrap_or(&workload.partitioner);
    crate::partition::by_name(name).ok_or_else(|| {
        let reason = format!(
            "unknown partitioner `{name}`; expected one of: {}",
            crate::partition::names().join(", ")
        );
        match flag {
            Some(_) => InputError::plain("--partitioner", reason),
            None => workload
                .attribution
                .error_at("partition.partitioner", reason),
        }
    })
}

pub fn run_partition(
    machine: &Machine,
    workload: &Workload,
    partitioner: &dyn Partitioner,
) -> Result<PartitionReport, Error> {
    crate::index::check_choices(machine, workload)?;
    if workload.granularity == Granularity::Pair {
        return run_key_partition(machine, workload, partitioner.name());
    }
    let prepared = Prepared::new(machine, workload)?;
    let partitioning = prepared.partition(partitioner, workload)?;
    Ok(evaluate(
        machine,
        workload,
        &prepared,
        &partitioning,
        partitioner.name(),
    ))
}

/// What a partitioning leaves on each DPU: its pairs and the queries of every batch that
/// matters, with the partitioning's own facts, whatever the granularity.
struct Placed {
    /// (cold, hot) pairs of each DPU.
    pairs: Vec<(u64, u64)>,
    /// Queries of each DPU in the reference batch.
    reference: Vec<u64>,
    /// Loads of each measured batch, in batch order.
    loads: Vec<DpuLoads>,
    partitions: usize,
    hot_partitions: u32,
    /// The chunk floor ([`Imbalance::chunk_floor`]); `None` for a cut between keys.
    chunk_floor: Option<f64>,
    warnings: Vec<String>,
}

/// `partition.granularity = "pair"`: a one-dimensional baseline cut between keys (see
/// [`crate::partition::keys`]), measured as the chunk partitionings are.
fn run_key_partition(
    machine: &Machine,
    workload: &Workload,
    name: &str,
) -> Result<PartitionReport, Error> {
    let dpus = machine.dpus;
    workload.check_against_dpus(dpus, &machine.attribution)?;
    let data = DataSet::generate(workload);
    let queries = QueryGenerator::new(workload, &data, dpus);
    let placement = match name {
        "data-balanced" => keys::data_balanced(&data, dpus),
        "query-balanced" => {
            let mut counted = Vec::new();
            queries.for_each(0, |q| {
                counted.push(q.lo);
                if workload.count_both_ends {
                    counted.push(q.hi);
                }
            });
            keys::query_balanced(&data, counted, dpus)
        }
        other => {
            return Err(workload
                .attribution
                .error_at(
                    "partition.granularity",
                    format!(
                        "`pair` applies to the one-dimensional baselines data-balanced and query-balanced; {other} partitions chunks (use partition.granularity = \"chunk\")"
                    ),
                )
                .into());
        }
    };
    let measured: Vec<u64> = workload.measured_batch_indices().collect();
    let placed = Placed {
        pairs: placement.pairs.iter().map(|&p| (p, 0)).collect(),
        reference: key_loads(&placement, &queries, 0).queries,
        loads: measured
            .par_iter()
            .map(|&b| key_loads(&placement, &queries, b))
            .collect(),
        // A routing entry per DPU that holds pairs: a DPU without any owns no key.
        partitions: placement.pairs.iter().filter(|&&p| p > 0).count().max(1),
        hot_partitions: 0,
        chunk_floor: None,
        warnings: Vec::new(),
    };
    Ok(report(machine, workload, name, data.chunks(), placed))
}

/// Queries per DPU in batch `index` under a key partitioning: a query counts once on every
/// DPU whose key range it overlaps.
fn key_loads(placement: &keys::KeyPartitioning, queries: &QueryGenerator, index: u64) -> DpuLoads {
    let dpus = placement.pairs.len();
    let mut loads = DpuLoads {
        queries: vec![0u64; dpus],
        hot: vec![0u64; dpus],
    };
    queries.for_each(index, |q| {
        for dpu in placement.reached(q.lo, q.hi) {
            loads.queries[dpu] += 1;
        }
    });
    loads
}

/// Measures a partitioning of chunks on the reference and measured batches.
pub fn evaluate(
    machine: &Machine,
    workload: &Workload,
    prepared: &Prepared,
    partitioning: &Partitioning,
    name: &str,
) -> PartitionReport {
    debug_assert_eq!(partitioning.check(prepared.loads.chunks()), Ok(()));
    let dpus = machine.dpus;
    let table = RoutingTable::new(partitioning, &prepared.data);
    let measured: Vec<u64> = workload.measured_batch_indices().collect();
    let placed = Placed {
        pairs: partitioning.pairs_per_dpu(&prepared.loads),
        reference: queries_per_dpu(&table, &prepared.queries, 0, dpus).queries,
        loads: measured
            .par_iter()
            .map(|&b| queries_per_dpu(&table, &prepared.queries, b, dpus))
            .collect(),
        partitions: table.len(),
        hot_partitions: partitioning.hot_partitions,
        chunk_floor: Some(prepared.loads.chunk_floor(dpus)),
        warnings: partitioning.warnings.clone(),
    };
    report(machine, workload, name, prepared.loads.chunks(), placed)
}

/// The MRAM the DPUs' trees need, against what each has.
fn mram_use(machine: &Machine, pairs: &[(u64, u64)]) -> MramUse {
    let needed: Vec<u64> = pairs
        .iter()
        .map(|&(cold, hot)| dpu_trees_bytes(cold, hot))
        .collect();
    let (max_needed_dpu, &max_needed_bytes) = needed
        .iter()
        .enumerate()
        .max_by_key(|&(i, b)| (*b, std::cmp::Reverse(i)))
        .expect("at least one DPU");
    MramUse {
        available_bytes: machine.mram_size_bytes,
        max_needed_bytes,
        max_needed_dpu: max_needed_dpu as u32,
        dpus_over: needed
            .iter()
            .filter(|&&b| b > machine.mram_size_bytes)
            .count() as u32,
    }
}

/// The warning of a partition that does not fit in MRAM (`totals`: each DPU's pairs).
fn overflow_warning(machine: &Machine, mram: &MramUse, totals: &[u64]) -> Option<String> {
    (mram.dpus_over > 0).then(|| {
        format!(
            "the partition does not fit in MRAM: {} {} more than {} bytes; DPU {} needs {} bytes for {} pairs",
            crate::machine::dpus_phrase(mram.dpus_over),
            if mram.dpus_over == 1 { "needs" } else { "need" },
            machine.mram_size_bytes,
            mram.max_needed_dpu,
            mram.max_needed_bytes,
            totals[mram.max_needed_dpu as usize]
        )
    })
}

/// The machine keys `partition` reads (relative to the machine file): it does no timing.
const READ_MACHINE_KEYS: [&str; 7] = [
    "name",
    "description",
    "ranks",
    "dpus_per_rank",
    "usable_dpus",
    "dpu.mram_size_bytes",
    "dpu.max_tasklets",
];

/// The workload keys of a run alone (`run.index` aside, which `partition` warns of itself).
const RUN_ONLY_KEYS: [&str; 5] = [
    "run",
    "batches.streaming",
    "batches.stream_fragments",
    "batches.max_launches",
    "batches.simulate_warmup",
];

/// A warning for each `--set` that changes nothing in `partition`: a machine key beside the
/// DPU count and MRAM size (no timing is done), a run's own workload key.
fn unread_overrides(machine: &Machine, workload: &Workload) -> Vec<String> {
    use crate::config::covers;
    let machine_sets = (machine.attribution.overrides.iter()).filter(|(k, _)| {
        !READ_MACHINE_KEYS
            .iter()
            .any(|r| covers(r, k) || covers(k, r))
    });
    let machine_why = "partition does no timing: of the machine it reads the DPU count, the MRAM size and the tasklet limit";
    let run_sets = (workload.attribution.overrides.iter())
        .filter(|(k, _)| RUN_ONLY_KEYS.iter().any(|r| covers(r, k)) && !covers("run.index", k));
    let run_why =
        "partition does no run: it reads the data, the queries and the partitioner's keys";
    (machine_sets.map(|(_, text)| (text, machine_why)))
        .chain(run_sets.map(|(_, text)| (text, run_why)))
        .map(|(text, why)| format!("--set {text} changes nothing here: {why}"))
        .collect()
}

/// The report of a placement: imbalance factors, loads and the MRAM each DPU needs.
fn report(
    machine: &Machine,
    workload: &Workload,
    name: &str,
    chunks: usize,
    placed: Placed,
) -> PartitionReport {
    let dpus = machine.dpus;
    let totals: Vec<u64> = placed.pairs.iter().map(|&(c, h)| c + h).collect();
    let mram = mram_use(machine, &placed.pairs);
    let mut warnings = machine.warnings();
    warnings.extend(workload.warnings());
    if workload.index == crate::index::pimtree::NAME {
        warnings.push(
            "the workload's index is pim-tree, which places its data by hash: this is B+-Forest's partitioning of the same data and queries, not pim-tree's placement".to_owned(),
        );
    }
    warnings.extend(placed.warnings);
    warnings.extend(unread_overrides(machine, workload));
    warnings.extend(overflow_warning(machine, &mram, &totals));
    let measured: Vec<u64> = workload.measured_batch_indices().collect();
    let hot_share = placed
        .loads
        .iter()
        .map(DpuLoads::bottleneck_hot_share)
        .sum::<f64>()
        / placed.loads.len() as f64;
    let per_batch: Vec<Vec<u64>> = placed.loads.into_iter().map(|l| l.queries).collect();
    let if_per_batch: Vec<f64> = per_batch.iter().map(|c| imbalance_factor(c)).collect();
    let if_q = if_per_batch.iter().sum::<f64>() / if_per_batch.len() as f64;
    let max_queries = per_batch
        .iter()
        .flat_map(|c| c.iter().copied())
        .max()
        .unwrap_or(0);
    let total_queries: u64 = per_batch.iter().flat_map(|c| c.iter()).sum();
    let config = EffectiveConfig::of(machine, workload, name);
    PartitionReport {
        schema_version: super::REPORT_SCHEMA_VERSION,
        partitioner: name.to_owned(),
        dpus,
        chunks,
        partitions: placed.partitions,
        hot_partitions: placed.hot_partitions,
        imbalance: Imbalance {
            data: imbalance_factor(&totals),
            queries: if_q,
            queries_per_batch: if_per_batch,
            queries_reference: imbalance_factor(&placed.reference),
            chunk_floor: placed.chunk_floor,
        },
        max_pairs_per_dpu: *totals.iter().max().expect("at least one DPU"),
        mean_pairs_per_dpu: workload.pairs as f64 / dpus as f64,
        max_queries_per_dpu: max_queries,
        mean_queries_per_dpu: total_queries as f64 / (dpus as f64 * measured.len() as f64),
        bottleneck_hot_share: hot_share,
        fits_in_mram: mram.dpus_over == 0,
        mram,
        reference_batch: 0,
        measured_batches: measured.len() as u64,
        measured_batch_indices: measured,
        warnings,
        seed: workload.seed,
        version: super::VERSION,
        git_commit: super::git_commit(),
        command_line: None,
        config_fnv1a64: super::config_fnv1a64(&config),
        config,
    }
}
