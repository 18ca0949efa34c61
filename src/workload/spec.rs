//! The workload file: `RawWorkload` mirrors the TOML; [`Workload`] is validated.

use crate::config::{
    Attribution, InputError, Override, Source, blame_rule, parse_toml, read_toml_file, shown,
};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Upper bounds that keep every loop and allocation bounded.
pub const MAX_PAIRS: u64 = 1 << 36;
pub const MAX_BATCH_SIZE: u64 = 1_100_000_000;

/// Upper bound on `run.tasklets` before the machine's own `dpu.max_tasklets` applies: the
/// most any machine file may give.
pub const MAX_RUN_TASKLETS: u64 = crate::machine::MAX_DPU_TASKLETS;

/// Upper bound on `queries.prefix_bits` (2^24 key prefixes).
pub const MAX_PREFIX_BITS: u32 = 24;
// A fragment's origin (its query's index in the batch) is a u32.
const _: () = assert!(MAX_BATCH_SIZE <= u32::MAX as u64);
pub const MAX_BATCHES: u64 = 100_000;
/// Most pairs all range queries of a run may cover, summed: about 25 minutes at the
/// measured 15 ns per covered pair (DPU kernel plus reference), and 30 times the paper's
/// workload (100 pairs x 10^6 queries x 30 batches).
/// Pairs all ranges of a run may cover: the paper's largest batch (1.1 G ranges of about 100
/// pairs) with its warm-up batch, and a little more.
pub const MAX_RANGE_PAIR_VISITS: u64 = 250_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum QueryKind {
    /// The existing key at or below the drawn key; PIM-tree resolves it on the host and
    /// looks the key up in its hash tables.
    Get,
    /// The same answer; PIM-tree searches its skip list for it (B+-Forest runs it as a get).
    Predecessor,
    RangeCountIf,
    RangeMax,
}

impl QueryKind {
    pub fn name(self) -> &'static str {
        match self {
            QueryKind::Get => "get",
            QueryKind::Predecessor => "predecessor",
            QueryKind::RangeCountIf => "range-count-if",
            QueryKind::RangeMax => "range-max",
        }
    }

    pub fn is_range(self) -> bool {
        !matches!(self, QueryKind::Get | QueryKind::Predecessor)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    pub seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub data: RawData,
    pub queries: RawQueries,
    pub batches: RawBatches,
    pub partition: RawPartition,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation: Option<RawDeviation>,
    #[serde(default)]
    pub run: RawRun,
}

/// `run.tasklets` when the workload does not set it.
pub const DEFAULT_TASKLETS: u64 = 16;

fn default_tasklets() -> u64 {
    DEFAULT_TASKLETS
}

fn default_routing() -> String {
    "host-binary-search".to_owned()
}

fn default_evaluation() -> String {
    "tasklet-static".to_owned()
}

fn default_postprocessing() -> String {
    "host-merge".to_owned()
}

fn default_index() -> String {
    "b+forest".to_owned()
}

fn default_in_flight() -> u64 {
    1
}

/// When the host reads the ranks after a launch.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LaunchMode {
    /// Launch every rank, wait for all, then read all.
    #[default]
    Sync,
    /// Read each rank as soon as the host's polling sees it finished.
    Async,
}

/// How batches are formed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalMode {
    /// A batch of `batch_size` queries starts when the previous one ends.
    #[default]
    Closed,
    /// Queries arrive at `run.queries_per_s`; a batch takes what is waiting.
    Open,
}

/// Upper bound on `run.poll_interval_us` (one simulated second).
pub const MAX_POLL_INTERVAL_US: f64 = 1e6;

/// Upper bound on `run.batches_in_flight`.
pub const MAX_BATCHES_IN_FLIGHT: u64 = 4;

/// How `pimdes run` executes batches: the index, tasklets per DPU, the policy of each stage
/// and the host's protocol.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    #[serde(default = "default_index")]
    pub index: String,
    #[serde(default = "default_tasklets")]
    #[schemars(range(min = 1, max = MAX_RUN_TASKLETS))]
    pub tasklets: u64,
    #[serde(default = "default_routing")]
    pub routing: String,
    #[serde(default = "default_evaluation")]
    pub evaluation: String,
    #[serde(default = "default_postprocessing")]
    pub postprocessing: String,
    #[serde(default)]
    pub launch: LaunchMode,
    #[serde(default = "default_in_flight")]
    #[schemars(range(min = 1, max = MAX_BATCHES_IN_FLIGHT))]
    pub batches_in_flight: u64,
    #[serde(default)]
    pub arrival: ArrivalMode,
    /// Arrival rate of open arrivals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queries_per_s: Option<f64>,
    /// How often the host polls after an async launch, if not the machine's
    /// `transfer.poll_interval_us` (PIM-tree's host sleeps 100 us between polls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_us: Option<f64>,
}

impl Default for RawRun {
    fn default() -> Self {
        RawRun {
            index: default_index(),
            launch: LaunchMode::default(),
            batches_in_flight: default_in_flight(),
            arrival: ArrivalMode::default(),
            queries_per_s: None,
            poll_interval_us: None,
            tasklets: default_tasklets(),
            routing: default_routing(),
            evaluation: default_evaluation(),
            postprocessing: default_postprocessing(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawData {
    #[schemars(range(min = 1, max = MAX_PAIRS))]
    pub pairs: u64,
    /// Values are uniform in [0, value_domain); absent means the full 64-bit range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub value_domain: Option<u64>,
}

/// How query keys are drawn.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum KeyLaw {
    /// Zipf(skew) over the 2^prefix_bits key prefixes, rank r at prefix r (the B+-Forest
    /// paper's workload).
    #[default]
    ZipfComposite,
    /// PIM-tree's generator: the key space cut into one slice per DPU, Zipf(skew) over the
    /// slices in an order drawn afresh for every batch, keys uniform inside a slice.
    ZipfSlices,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQueries {
    pub kind: QueryKind,
    #[schemars(range(min = 1, max = MAX_BATCH_SIZE))]
    pub batch_size: u64,
    pub skew: f64,
    #[schemars(range(max = MAX_PREFIX_BITS))]
    pub prefix_bits: u32,
    #[serde(default)]
    pub distribution: KeyLaw,
    /// Mean number of pairs a range covers; ignored for get.
    pub range_pairs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBatches {
    #[schemars(range(min = 1))]
    pub warmup: u64,
    #[schemars(range(min = 1))]
    pub measured: u64,
    #[serde(default)]
    pub streaming: Streaming,
    /// Streamed batches: fragments a group of DPUs holds at once (host memory is about 55
    /// bytes per fragment of this; see `index::bforest::stream`).
    #[serde(default = "default_stream_fragments")]
    #[schemars(range(min = 1, max = MAX_STREAM_FRAGMENTS))]
    pub stream_fragments: u64,
    /// B+-Forest: the most launches a DPU's share of one batch may be split into when its
    /// query and result buffers do not fit in MRAM beside its trees (1: never split, such a
    /// batch is refused).
    #[serde(default = "default_max_launches")]
    #[schemars(range(min = 1, max = MAX_LAUNCHES))]
    pub max_launches: u32,
    /// Whether warm-up batches' DPUs are simulated (`false`: each is drawn, routed and run
    /// on the system model with kernels that take no time; the first still feeds the
    /// partitioner). Written out only when `false`, so a configuration that leaves it alone
    /// keeps its hash.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    #[schemars(extend("default" = true))]
    pub simulate_warmup: bool,
}

fn default_true() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn default_stream_fragments() -> u64 {
    80 << 20
}

/// `batches.max_launches` when the file does not say: a batch is never split.
pub const DEFAULT_MAX_LAUNCHES: u32 = 1;

fn default_max_launches() -> u32 {
    DEFAULT_MAX_LAUNCHES
}

/// Upper bound on `batches.max_launches`.
pub const MAX_LAUNCHES: u32 = 1024;

/// Upper bound on `batches.stream_fragments` (about 230 GB of host memory).
pub const MAX_STREAM_FRAGMENTS: u64 = 1 << 32;

/// Whether B+-Forest holds a run's batches in memory or streams them (`Workload::streams`
/// decides).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Streaming {
    /// Stream when the run's queries (all batches) exceed 64 Mi (`STREAM_ABOVE_QUERIES`).
    #[default]
    Auto,
    /// Always stream: each batch is drawn again for each group of DPUs.
    Always,
    /// Never stream: every batch is generated and held up front.
    Never,
}

/// Under `batches.streaming = "auto"`, a run whose batches hold more queries than this in
/// all streams them. Held, 64 Mi queries take about 5.5 GiB of host memory.
pub const STREAM_ABOVE_QUERIES: u64 = 64 << 20;

fn default_chunk_pairs() -> u64 {
    300
}

/// The partitioner of a workload that names none.
pub const DEFAULT_PARTITIONER: &str = "qdd-double-scan";

fn default_partitioner() -> String {
    DEFAULT_PARTITIONER.to_owned()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPartition {
    /// Partitioner used when no `--partitioner` flag is given.
    #[serde(default = "default_partitioner")]
    pub partitioner: String,
    #[schemars(range(min = 1))]
    pub alpha: u64,
    pub data_cap: f64,
    #[serde(default = "default_chunk_pairs")]
    #[schemars(range(min = 1))]
    pub chunk_pairs: u64,
    /// Count a range query at both of its ends (+1 each), as the authors' code does.
    #[serde(default)]
    pub count_both_ends: bool,
    /// The authors' later gates on the double scan (scan only while the cold load is high).
    #[serde(default)]
    pub double_scan_gates: bool,
    /// What the one-dimensional baselines cut: chunks (the default, as B+-Forest's
    /// partitioners) or single pairs (`pimdes partition` only).
    #[serde(default, skip_serializing_if = "Granularity::is_chunk")]
    pub granularity: Granularity,
}

/// The unit a partitioner's boundaries fall between.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Granularity {
    /// Chunks of `chunk_pairs` consecutive pairs (height-1 subtrees).
    #[default]
    Chunk,
    /// Single pairs: `data-balanced` and `query-balanced` may cut between any two keys.
    Pair,
}

impl Granularity {
    fn is_chunk(&self) -> bool {
        *self == Granularity::Chunk
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDeviation {
    /// 0-based index of the base partition whose query probability is amplified.
    pub base_partition: u64,
    pub factor: f64,
}

/// The validated workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub seed: u64,
    pub pairs: u64,
    pub value_domain: Option<u64>,
    pub kind: QueryKind,
    pub batch_size: u64,
    pub skew: f64,
    pub prefix_bits: u32,
    pub distribution: KeyLaw,
    pub range_pairs: u64,
    pub warmup_batches: u64,
    pub measured_batches: u64,
    pub streaming: Streaming,
    pub stream_fragments: u64,
    pub max_launches: u32,
    /// `batches.simulate_warmup`; see [`Workload::simulated_batches`].
    pub simulate_warmup: bool,
    pub partitioner: String,
    pub alpha: u64,
    pub data_cap: f64,
    pub chunk_pairs: u64,
    pub count_both_ends: bool,
    pub double_scan_gates: bool,
    pub granularity: Granularity,
    pub deviation: Option<Deviation>,
    /// Tasklets per DPU in `pimdes run` (checked against the machine when it runs).
    pub tasklets: u32,
    /// The index `pimdes run` runs (checked by the index registry).
    pub index: String,
    pub launch: LaunchMode,
    /// The run's own poll interval after async launches (`None`: the machine's).
    pub poll_interval_us: Option<f64>,
    pub batches_in_flight: u32,
    pub arrival: ArrivalMode,
    /// Open arrivals only.
    pub queries_per_s: Option<f64>,
    /// Policy names of the three stages of a batch (checked by the run's registries).
    pub routing: String,
    pub evaluation: String,
    pub postprocessing: String,
    /// The configuration this workload was built from, for the effective-config dump.
    pub raw: RawWorkload,
    /// Where each key came from, to name it in errors found later.
    pub attribution: Attribution,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Deviation {
    pub base_partition: u64,
    pub factor: f64,
}

/// The `[data]` and `[queries]` checks.
fn check_data_and_queries(raw: &RawWorkload, source: &Source) -> Result<(), InputError> {
    let err = |key: &str, reason: String| Err(source.error_at(key, reason));
    let d = &raw.data;
    if d.pairs == 0 || d.pairs > MAX_PAIRS {
        return err(
            "data.pairs",
            format!("{} is not between 1 and {MAX_PAIRS}", d.pairs),
        );
    }
    if d.value_domain == Some(0) {
        return err("data.value_domain", "must be at least 1".into());
    }
    let q = &raw.queries;
    if q.batch_size == 0 || q.batch_size > MAX_BATCH_SIZE {
        return err(
            "queries.batch_size",
            format!("{} is not between 1 and {MAX_BATCH_SIZE}", q.batch_size),
        );
    }
    if !q.skew.is_finite() || q.skew < 0.0 {
        return err(
            "queries.skew",
            format!(
                "{} must be a finite number >= 0 (0 = uniform)",
                shown(q.skew)
            ),
        );
    }
    if q.prefix_bits > MAX_PREFIX_BITS {
        return err(
            "queries.prefix_bits",
            format!("{} must be between 0 and {MAX_PREFIX_BITS}", q.prefix_bits),
        );
    }
    if q.kind.is_range() && q.range_pairs == 0 {
        return err("queries.range_pairs", "must be at least 1".into());
    }
    Ok(())
}

/// The `[batches]` checks.
fn check_batches(b: &RawBatches, source: &Source) -> Result<(), InputError> {
    let err = |key: &str, reason: String| Err(source.error_at(key, reason));
    if b.warmup == 0 {
        return err(
            "batches.warmup",
            "must be at least 1: the first warm-up batch is the reference workload".into(),
        );
    }
    if b.stream_fragments == 0 || b.stream_fragments > MAX_STREAM_FRAGMENTS {
        return err(
            "batches.stream_fragments",
            format!(
                "{} is not between 1 and {MAX_STREAM_FRAGMENTS}",
                b.stream_fragments
            ),
        );
    }
    if b.max_launches == 0 || b.max_launches > MAX_LAUNCHES {
        return err(
            "batches.max_launches",
            format!("{} is not between 1 and {MAX_LAUNCHES}", b.max_launches),
        );
    }
    if b.warmup >= MAX_BATCHES {
        return err(
            "batches.warmup",
            format!("must be below {MAX_BATCHES}, with warmup + measured at most {MAX_BATCHES}"),
        );
    }
    if b.measured == 0 {
        return err("batches.measured", "must be at least 1".to_owned());
    }
    // Both are at most 2^63 - 1 (TOML's integers), so the sum does not overflow.
    if b.warmup + b.measured > MAX_BATCHES {
        // Whichever of the two a `--set` raised is to blame.
        return Err(source.error_at_any(
            &["batches.measured", "batches.warmup"],
            format!(
                "warmup + measured is {} + {} = {}, more than {MAX_BATCHES}",
                b.warmup,
                b.measured,
                b.warmup + b.measured
            ),
        ));
    }
    Ok(())
}

/// The `[partition]` checks.
fn check_partition(p: &RawPartition, source: &Source) -> Result<(), InputError> {
    let err = |key: &str, reason: String| Err(source.error_at(key, reason));
    if p.alpha == 0 {
        return err(
            "partition.alpha",
            "must be a positive integer (1 favours query balance, large favours data balance)"
                .into(),
        );
    }
    if !p.data_cap.is_finite() || p.data_cap < 1.0 {
        return err(
            "partition.data_cap",
            format!(
                "{} must be at least 1 (a part may hold data_cap x D/P pairs)",
                p.data_cap
            ),
        );
    }
    if p.chunk_pairs == 0 {
        return err("partition.chunk_pairs", "must be at least 1".into());
    }
    // A chunk is never split across DPUs, and 2^32 pairs of at least 8 bytes each are far
    // beyond any DPU's MRAM, so this bound rejects nothing that could run.
    if p.chunk_pairs > u64::from(u32::MAX) {
        return err(
            "partition.chunk_pairs",
            format!(
                "{} is above the largest chunk, 2^32-1 = {} pairs",
                p.chunk_pairs,
                u32::MAX
            ),
        );
    }
    Ok(())
}

/// The `[deviation]` table, checked.
fn checked_deviation(
    deviation: Option<&RawDeviation>,
    source: &Source,
) -> Result<Option<Deviation>, InputError> {
    let err = |key: &str, reason: String| Err(source.error_at(key, reason));
    match deviation {
        None => Ok(None),
        Some(dev) => {
            if !dev.factor.is_finite() || dev.factor <= 0.0 {
                return err(
                    "deviation.factor",
                    format!("{} must be a positive number", shown(dev.factor)),
                );
            }
            Ok(Some(Deviation {
                base_partition: dev.base_partition,
                factor: dev.factor,
            }))
        }
    }
}

/// The `[run]` checks; the arrival rate of an open-loop run.
fn check_run(r: &RawRun, source: &Source) -> Result<Option<f64>, InputError> {
    let err = |key: &str, reason: String| Err(source.error_at(key, reason));
    if r.tasklets == 0 || r.tasklets > MAX_RUN_TASKLETS {
        return err(
            "run.tasklets",
            format!(
                "{} is not between 1 and {MAX_RUN_TASKLETS} (and a run takes at most the machine's dpu.max_tasklets)",
                r.tasklets
            ),
        );
    }
    let queries_per_s = validate_arrival(r, source)?;
    if r.batches_in_flight == 0 || r.batches_in_flight > MAX_BATCHES_IN_FLIGHT {
        return err(
            "run.batches_in_flight",
            format!(
                "{} is not between 1 and {MAX_BATCHES_IN_FLIGHT}",
                r.batches_in_flight
            ),
        );
    }
    if r.poll_interval_us.is_some() && r.launch == LaunchMode::Sync {
        // A rule between two keys: an override of either that broke it is named.
        return Err(source.error_at_any(
            &["run.poll_interval_us", "run.launch"],
            "only async launches poll; set run.launch = \"async\" or remove run.poll_interval_us (a --set cannot remove a key: use a copy of the workload file without it)",
        ));
    }
    if let Some(us) = r.poll_interval_us
        && !(us.is_finite() && (0.0..=MAX_POLL_INTERVAL_US).contains(&us))
    {
        return err(
            "run.poll_interval_us",
            format!(
                "{} is not between 0 and {MAX_POLL_INTERVAL_US} microseconds",
                shown(us)
            ),
        );
    }
    if let Some(us) = r.poll_interval_us {
        // Whole picoseconds, as the machine's durations: 1e-7 us had polled every 0 ps.
        crate::machine::whole_ps(source, "run.poll_interval_us", us, 1e6, "0.000001 us")?;
    }
    Ok(queries_per_s)
}

/// `run.queries_per_s` is required by open arrivals and refused otherwise. A rule between
/// two keys: an override of either that broke it is named.
fn validate_arrival(r: &RawRun, source: &Source) -> Result<Option<f64>, InputError> {
    let pair = ["run.queries_per_s", "run.arrival"];
    match (r.arrival, r.queries_per_s) {
        (ArrivalMode::Closed, None) => Ok(None),
        (ArrivalMode::Closed, Some(_)) => Err(source.error_at_any(
            &pair,
            "only open arrivals have a rate; set run.arrival = \"open\" or remove run.queries_per_s (a --set cannot remove a key: use a copy of the workload file without it)",
        )),
        (ArrivalMode::Open, None) => {
            Err(source.error_at_any(&pair, "open arrivals need a rate (queries per second)"))
        }
        (ArrivalMode::Open, Some(rate)) if rate.is_finite() && (1.0..=1e12).contains(&rate) => {
            Ok(Some(rate))
        }
        (ArrivalMode::Open, Some(rate)) => Err(source.error_at(
            "run.queries_per_s",
            format!(
                "{} is not between 1 and 1e12 queries per second",
                shown(rate)
            ),
        )),
    }
}

/// The cool-down batches of a run with `batches_in_flight` batches in flight
/// ([`Workload::cooldown_batches`]).
fn cooldown_batches(batches_in_flight: u64) -> u64 {
    batches_in_flight.saturating_sub(1)
}

/// A range covers at most all the data, and all ranges of a run together at most
/// [`MAX_RANGE_PAIR_VISITS`] pairs: without the bound, a huge `range_pairs` passed and then
/// ran for minutes on the tiniest data (a run scans every pair a range covers; `partition`
/// and `calibrate host` route each range to every DPU it reaches).
fn check_range_work(raw: &RawWorkload, source: &Source) -> Result<(), InputError> {
    let q = &raw.queries;
    if !q.kind.is_range() {
        return Ok(());
    }
    if q.range_pairs > raw.data.pairs {
        return Err(source.error_at_any(
            &["queries.range_pairs", "data.pairs"],
            format!(
                "queries.range_pairs = {} is more than the {} pairs of the data (data.pairs); a range covers at most all of them",
                q.range_pairs, raw.data.pairs
            ),
        ));
    }
    let cooldown = cooldown_batches(raw.run.batches_in_flight);
    let batches = raw.batches.warmup + raw.batches.measured + cooldown;
    let visits = u128::from(q.range_pairs) * u128::from(q.batch_size) * u128::from(batches);
    if visits > u128::from(MAX_RANGE_PAIR_VISITS) {
        let keys = [
            "queries.range_pairs",
            "queries.batch_size",
            "batches.measured",
            "batches.warmup",
            "run.batches_in_flight",
        ];
        let cooldown = match cooldown {
            0 => String::new(),
            n => format!(" + {n} cool-down (run.batches_in_flight)"),
        };
        return Err(source.error_at_any(
            &keys,
            format!(
                "{} pairs per range x {} queries per batch (queries.batch_size) x {batches} batches (batches.warmup + batches.measured{cooldown}) = {visits} pairs covered, above the limit of {MAX_RANGE_PAIR_VISITS} (about an hour of a run); lower one of them",
                q.range_pairs, q.batch_size
            ),
        ));
    }
    Ok(())
}

/// The machine keys that decide its DPU count (relative to the machine file).
const DPU_COUNT_KEYS: [&str; 3] = ["usable_dpus", "ranks", "dpus_per_rank"];

impl Workload {
    /// What the user should know about the key law: a skew that moves nothing (one key
    /// prefix), and a prefix count set for the law that reads none.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.distribution {
            KeyLaw::ZipfComposite if self.prefix_bits == 0 && self.skew != 0.0 => {
                out.push(format!(
                    "queries.skew = {} has no effect: queries.prefix_bits = 0 leaves one key prefix, so every key is drawn uniformly (docs/workloads.md)",
                    crate::config::shown(self.skew)
                ));
            }
            KeyLaw::ZipfSlices => {
                if let Some(set) = self.attribution.override_of("queries.prefix_bits") {
                    out.push(format!(
                        "--set {set} had no effect: queries.distribution = \"zipf-slices\" draws a slice per DPU and reads no prefix_bits"
                    ));
                }
            }
            KeyLaw::ZipfComposite => {}
        }
        out
    }

    /// Reads a workload file and applies the overrides that are not `machine.*`.
    pub fn load(path: &Path, overrides: &[Override]) -> Result<Workload, InputError> {
        let table = read_toml_file(path)?;
        Self::from_table(path.display().to_string(), table, overrides)
    }

    pub fn from_toml_str(
        origin: &str,
        text: &str,
        overrides: &[Override],
    ) -> Result<Workload, InputError> {
        let table = parse_toml(origin, text)?;
        Self::from_table(origin.to_owned(), table, overrides)
    }

    fn from_table(
        origin: String,
        table: toml::Table,
        overrides: &[Override],
    ) -> Result<Workload, InputError> {
        let machine = ("machine", &["dpu", "dma", "transfer"][..]);
        let own = ["data", "queries", "batches"];
        crate::config::check_kind(&origin, &table, "workload", &own, machine)?;
        let source = Source::new(origin, table, overrides, None, &["machine"])?;
        let raw: RawWorkload = source.deserialize_bounded()?;
        Self::validate(raw, &source)
    }

    fn validate(raw: RawWorkload, source: &Source) -> Result<Workload, InputError> {
        // One table after another; the first bad key found is the one reported.
        check_data_and_queries(&raw, source)?;
        check_batches(&raw.batches, source)?;
        check_range_work(&raw, source)?;
        check_partition(&raw.partition, source)?;
        let deviation = checked_deviation(raw.deviation.as_ref(), source)?;
        let queries_per_s = check_run(&raw.run, source)?;
        let (r, d, q, b, p) = (
            &raw.run,
            &raw.data,
            &raw.queries,
            &raw.batches,
            &raw.partition,
        );
        Ok(Workload {
            index: r.index.clone(),
            poll_interval_us: r.poll_interval_us,
            launch: r.launch,
            batches_in_flight: r.batches_in_flight as u32,
            arrival: r.arrival,
            queries_per_s,
            tasklets: r.tasklets as u32,
            routing: r.routing.clone(),
            evaluation: r.evaluation.clone(),
            postprocessing: r.postprocessing.clone(),
            seed: raw.seed,
            pairs: d.pairs,
            value_domain: d.value_domain,
            kind: q.kind,
            batch_size: q.batch_size,
            skew: q.skew,
            prefix_bits: q.prefix_bits,
            distribution: q.distribution,
            range_pairs: q.range_pairs,
            warmup_batches: b.warmup,
            measured_batches: b.measured,
            streaming: b.streaming,
            stream_fragments: b.stream_fragments,
            max_launches: b.max_launches,
            simulate_warmup: b.simulate_warmup,
            partitioner: p.partitioner.clone(),
            alpha: p.alpha,
            data_cap: p.data_cap,
            chunk_pairs: p.chunk_pairs,
            count_both_ends: p.count_both_ends,
            double_scan_gates: p.double_scan_gates,
            granularity: p.granularity,
            deviation,
            raw,
            attribution: source.attribution.clone(),
        })
    }

    /// Number of chunks the data is cut into.
    pub fn chunks(&self) -> u64 {
        self.pairs.div_ceil(self.chunk_pairs)
    }

    /// Total batches: warm-up, measured, then cool-down. Batch 0 is the reference batch.
    pub fn total_batches(&self) -> u64 {
        self.warmup_batches + self.measured_batches + self.cooldown_batches()
    }

    /// Batches run after the measured ones and not measured: with `k` batches in flight,
    /// `k - 1`, so that the last measured batch shares the machine with the batches after
    /// it as every other measured batch does (without them it ends early, since none
    /// follows it: 8 % on the tiny workload with one host thread and 2 in flight).
    pub fn cooldown_batches(&self) -> u64 {
        cooldown_batches(self.batches_in_flight.into())
    }

    /// Whether batch `b` is measured.
    pub fn measures(&self, b: u64) -> bool {
        self.measured_batch_indices().contains(&b)
    }

    /// Whether B+-Forest streams this run's batches instead of holding them.
    pub fn streams(&self) -> bool {
        match self.streaming {
            Streaming::Always => true,
            Streaming::Never => false,
            Streaming::Auto => self.total_batches() * self.batch_size > STREAM_ABOVE_QUERIES,
        }
    }

    /// Batches the simulated machine runs: every batch, or only the measured ones when
    /// `batches.simulate_warmup` is false.
    pub fn simulated_batches(&self) -> u64 {
        match self.simulate_warmup {
            true => self.total_batches(),
            false => self.total_batches() - self.warmup_batches,
        }
    }

    /// Whether batch `b` runs on the simulated machine.
    pub fn simulates(&self, b: u64) -> bool {
        self.simulate_warmup || b >= self.warmup_batches
    }

    /// What makes this run's warm-up batches shape its measured ones, if anything, as (the
    /// key, why, another way out than simulating them): a warm-up batch still in flight when
    /// the first measured one starts, or a queue of arrived queries carried over. Such a
    /// run must simulate them.
    pub fn warmup_shapes_measured(&self) -> Option<(&'static str, String, &'static str)> {
        if self.batches_in_flight > 1 {
            let why = format!(
                "with {} batches in flight the last warm-up batches share the machine with the first measured ones",
                self.batches_in_flight
            );
            Some((
                "run.batches_in_flight",
                why,
                ", or run.batches_in_flight = 1",
            ))
        } else if self.arrival == ArrivalMode::Open {
            let why = "with open arrivals the warm-up batches leave the queue of waiting queries the measured ones start from";
            Some(("run.arrival", why.to_owned(), ""))
        } else {
            None
        }
    }

    /// Refuses `batches.simulate_warmup = false` where the warm-up batches shape the
    /// measured ones (a rule between keys: an override of either that broke it is named).
    pub fn check_warmup_skip(&self) -> Result<(), InputError> {
        if self.simulate_warmup {
            return Ok(());
        }
        let Some((key, why, fix)) = self.warmup_shapes_measured() else {
            return Ok(());
        };
        Err(self.attribution.error_at_any(
            &["batches.simulate_warmup", key],
            format!(
                "warm-up batches must be simulated: {why}; set batches.simulate_warmup = true{fix}"
            ),
        ))
    }

    /// Indices of the measured batches.
    pub fn measured_batch_indices(&self) -> std::ops::Range<u64> {
        self.warmup_batches..self.warmup_batches + self.measured_batches
    }

    /// Checks the rules that need the machine: enough data for every DPU, and a deviation
    /// that names an existing base partition. `machine` is where the machine's DPU count
    /// came from: an override of it that broke a rule is named beside the workload's.
    pub fn check_against_dpus(&self, dpus: u32, machine: &Attribution) -> Result<(), InputError> {
        let blame = |keys: &[&str], reason| self.blame_with_dpus(keys, machine, reason);
        if self.pairs < dpus as u64 {
            let reason = format!(
                "{} pairs are fewer than the machine's {dpus} DPUs",
                self.pairs
            );
            return Err(blame(&["data.pairs"], reason));
        }
        if self.chunks() < dpus as u64 {
            let reason = format!(
                "{} pairs in chunks of {} make {}, fewer than the machine's {dpus} DPUs; lower chunk_pairs, raise data.pairs or use fewer DPUs",
                self.pairs,
                self.chunk_pairs,
                crate::config::counted(self.chunks(), "chunk")
            );
            return Err(blame(&["partition.chunk_pairs", "data.pairs"], reason));
        }
        self.check_deviation(dpus, machine)
    }

    /// The error of a rule between the workload's `keys` and the machine's DPU count: every
    /// `--set` of either side that decided it is named, else the file at `keys[0]`.
    pub(crate) fn blame_with_dpus(
        &self,
        keys: &[&str],
        machine: &Attribution,
        reason: String,
    ) -> InputError {
        let parts: [(&Attribution, &[&str]); 2] =
            [(&self.attribution, keys), (machine, &DPU_COUNT_KEYS)];
        blame_rule(&parts, (&self.attribution, keys[0]), reason)
    }

    /// A deviation must name a base partition of the machine's `dpus` that holds at least
    /// one chunk (the chunks are cut into one base partition per DPU; with fewer chunks than
    /// DPUs, which PIM-tree allows, some hold none and have no keys to amplify).
    pub fn check_deviation(&self, dpus: u32, machine: &Attribution) -> Result<(), InputError> {
        let Some(dev) = &self.deviation else {
            return Ok(());
        };
        let (p, dpus) = (dev.base_partition, u64::from(dpus));
        if p >= dpus {
            let reason = format!(
                "{p} is out of range: base partitions are numbered 0 to {} (one per DPU)",
                dpus - 1
            );
            return Err(self.blame_with_dpus(&["deviation.base_partition"], machine, reason));
        }
        let chunks = self.chunks();
        let holds = |q: u64| (q + 1) * chunks / dpus > q * chunks / dpus;
        if !holds(p) {
            // Fewer chunks than DPUs (PIM-tree needs no chunk per DPU): some partition holds one.
            let below = (0..p).rev().find(|&q| holds(q));
            let above = (p + 1..dpus).find(|&q| holds(q));
            let nearest: Vec<String> = below
                .into_iter()
                .chain(above)
                .map(|q| q.to_string())
                .collect();
            let reason = format!(
                "base partition {p} holds no chunk: {} pairs in chunks of {} make {chunks} chunks for {dpus} DPUs, so some base partitions are empty; choose another ({} the nearest that hold one), or more chunks",
                self.pairs,
                self.chunk_pairs,
                match nearest.len() {
                    1 => format!("{} is", nearest[0]),
                    _ => format!("{} are", nearest.join(" and ")),
                }
            );
            let keys = [
                "deviation.base_partition",
                "data.pairs",
                "partition.chunk_pairs",
            ];
            return Err(self.blame_with_dpus(&keys, machine, reason));
        }
        Ok(())
    }
}
