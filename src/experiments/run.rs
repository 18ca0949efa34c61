//! `pimdes run`: one index end to end on the simulated machine. The index places its data
//! (timed once by its init programs), then every batch is computed functionally by the
//! index (answers checked against its plain reference) and timed by the system executor
//! under the workload's host protocol; the report is measured from the executor's spans.

use crate::config::{InputError, covers, joined_sets};
use crate::engine::Time;
use crate::error::Error;
use crate::experiments::partition::EffectiveConfig;
use crate::experiments::timeline::{TraceDpus, TraceRequest, build_trace};
use crate::index::{self, BatchWork, Index, IndexError, MramNeed, Record, Recording};
use crate::machine::Machine;
use crate::partition::Partitioner;
use crate::system::exec::{
    Arrival, BatchTiming, Executor, LaunchMode, PastCeiling, Protocol, Timeline, transfer_bound,
};
use crate::system::program::{Class, Program, Step};
use crate::trace::Trace;
use crate::workload::Workload;
use crate::workload::spec::{ArrivalMode, LaunchMode as RawLaunch};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde::ser::SerializeMap;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MeanStd {
    #[schemars(range(min = 0.0))]
    pub mean: f64,
    #[schemars(range(min = 0.0))]
    pub stddev: f64,
}

/// Named figures in a fixed order, serialised as one JSON object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Named(pub Vec<(String, f64)>);

impl Named {
    /// The figure called `name`, or 0 when there is none.
    pub fn get(&self, name: &str) -> f64 {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0.0, |&(_, v)| v)
    }

    fn add(&mut self, name: &str, value: f64) {
        match self.0.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v += value,
            None => self.0.push((name.to_owned(), value)),
        }
    }
}

impl schemars::JsonSchema for Named {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Named".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Named figures in a fixed order (stages, then classes)",
            "type": "object",
            "additionalProperties": {"type": "number"}
        })
    }
}

impl Serialize for Named {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Spread {
    #[schemars(range(min = 0.0))]
    pub min: f64,
    #[schemars(range(min = 0.0))]
    pub p50: f64,
    #[schemars(range(min = 0.0))]
    pub p99: f64,
    #[schemars(range(min = 0.0))]
    pub max: f64,
}

/// A launching stage's time, split (means over the measured batches).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LaunchSplit {
    /// Launches per batch in the stage (PIM-tree: one per round).
    #[schemars(range(min = 0.0))]
    pub launches: f64,
    /// The launches' fixed cost (`transfer.launch_fixed_us` plus `launch_per_rank_us` per rank).
    #[schemars(range(min = 0.0))]
    pub launch_us: f64,
    /// The slowest DPU's kernel, summed over the launches.
    #[schemars(range(min = 0.0))]
    pub slowest_dpu_us: f64,
    /// From the last rank's end until the host saw it: an async launch's wait for its next
    /// poll (every `run.poll_interval_us`, else the machine's `transfer.poll_interval_us`);
    /// zero for sync launches.
    #[schemars(range(min = 0.0))]
    pub until_seen_us: f64,
}

/// Per-query latency, arrival to answer (closed arrivals: the batch's start to its end).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Latency {
    #[schemars(range(min = 0.0))]
    pub p50: f64,
    #[schemars(range(min = 0.0))]
    pub p90: f64,
    #[schemars(range(min = 0.0))]
    pub p99: f64,
    #[schemars(range(min = 0.0))]
    pub p999: f64,
    #[schemars(range(min = 0.0))]
    pub max: f64,
}

/// The host protocol the run used.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ProtocolReport {
    pub launch: RawLaunch,
    pub batches_in_flight: u32,
    /// Batches run after the measured ones, unmeasured: `batches_in_flight - 1`, so that
    /// the last measured batch has batches after it as the others do (absent when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub cooldown_batches: u64,
    pub arrival: ArrivalMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queries_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_interval_us: Option<f64>,
}

/// Facts about the simulating host; determinism comparisons ignore this block.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HostFacts {
    pub wall_s: f64,
    pub peak_rss_bytes: Option<u64>,
    /// Events of the DPU simulations (every simulated batch: warm-up included unless
    /// `batches.simulate_warmup` is false).
    pub simulated_events: u64,
    /// Wall time spent simulating the DPUs.
    pub kernel_wall_s: f64,
    /// Simulated events per wall second of the DPU simulations, over all threads.
    pub simulated_events_per_s: f64,
    pub threads: usize,
    /// Where the wall time went: the index build's phases in order, then `batches` (every
    /// batch, warm-up included, with the simulated ones' answer checks).
    pub phases: Vec<PhaseWall>,
}

/// The wall time of one phase of a run.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PhaseWall {
    /// The phase as the progress line names it (`setup` and `batches` at the ends).
    pub phase: String,
    /// Wall seconds from the phase's start to the next phase's.
    pub wall_s: f64,
}

/// A run's wall clock: when it started, and when each phase began.
pub struct WallClock {
    start: std::time::Instant,
    laps: Vec<(String, std::time::Instant)>,
}

impl WallClock {
    pub fn start() -> WallClock {
        WallClock {
            start: std::time::Instant::now(),
            laps: Vec::new(),
        }
    }

    /// Notes that phase `what` begins now (and the one before ends).
    pub fn lap(&mut self, what: &str) {
        self.laps.push((what.to_owned(), std::time::Instant::now()));
    }

    /// Each phase's wall time up to `now`; time before the first phase counts as `setup`.
    fn phases(&self, now: std::time::Instant) -> Vec<PhaseWall> {
        let setup = ("setup", self.start);
        let starts = [setup]
            .into_iter()
            .chain(self.laps.iter().map(|l| (l.0.as_str(), l.1)));
        let ends = self.laps.iter().map(|l| l.1).chain([now]);
        starts
            .zip(ends)
            .map(|((phase, from), to)| PhaseWall {
                phase: phase.to_owned(),
                wall_s: (to - from).as_secs_f64(),
            })
            .collect()
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunReport {
    /// The version of the report's format (`crate::experiments::REPORT_SCHEMA_VERSION`): a
    /// reader compares it before reading the rest.
    #[schemars(extend("const" = super::REPORT_SCHEMA_VERSION))]
    pub schema_version: u32,
    #[schemars(extend("enum" = crate::index::names()))]
    pub index: String,
    /// The index's own keys (B+-Forest: `partitioner`, `imbalance`, `policies`).
    #[serde(flatten)]
    pub index_fields: serde_json::Map<String, serde_json::Value>,
    /// The index's lines of the text table.
    #[serde(skip)]
    pub index_rows: Vec<(String, String)>,
    #[schemars(range(min = 1))]
    pub dpus: u32,
    #[schemars(range(min = 1))]
    pub tasklets: u32,
    /// The configured batch size: every batch's with closed arrivals, the most a batch
    /// takes with open ones.
    pub queries_per_batch: u64,
    /// Queries each measured batch held (with closed arrivals, `queries_per_batch` with no
    /// spread; with open ones, as many as had arrived when it started).
    pub queries_per_measured_batch: MeanStd,
    pub measured_batches: u64,
    pub protocol: ProtocolReport,
    /// Each measured batch from its start to its end.
    pub batch_time_us: MeanStd,
    /// Every measured batch's time, in batch order.
    #[schemars(inner(range(min = 0.0)))]
    pub batch_times_us: Vec<f64>,
    /// Between the ends of consecutive batches (equal to the batch time when batches run
    /// one after another).
    pub batch_interval_us: MeanStd,
    /// Means over the measured batches of the critical path per stage, then `waiting` (for
    /// the DPUs), then the same time split as `cpu`, `communication`, `pim`; the stages plus
    /// `waiting` add up to `batch_time_us.mean`, and so do `cpu + communication + pim +
    /// waiting`.
    pub breakdown_us: Named,
    /// For each stage that launches the DPUs (both indexes: `dpu_kernel`), how its time in
    /// `breakdown_us` splits, means over the measured batches: `launch_us + slowest_dpu_us +
    /// until_seen_us` is the stage's entry.
    pub launch_split: BTreeMap<String, LaunchSplit>,
    pub init_us: Named,
    /// Measured queries over the measured window (end of the last warm-up batch to the end
    /// of the last batch).
    #[schemars(range(min = 0.0))]
    pub throughput_queries_per_s: f64,
    pub latency_us: Latency,
    /// Open arrivals came faster than the machine served them.
    pub saturated: bool,
    /// Kernel time of every DPU in every measured batch.
    pub dpu_kernel_us: Spread,
    /// For each stage that moves bytes, how many of the measured batches' transfers each
    /// term of the transfer model bounds (`per-call`, `per-rank`, `per-dpu-rate`,
    /// `per-rank-rate`, `host-cap`, `transposition`: `bound` of `pimdes microbench
    /// transfer`), each transfer taken alone: it tells which key would shorten the stage.
    /// (With several batches in flight, transfers of different batches may also share the
    /// host's cap.)
    pub transfer_bounds: BTreeMap<String, BTreeMap<String, u64>>,
    /// Every answer of every simulated batch (warm-up included unless
    /// `batches.simulate_warmup` is false) was checked against the plain reference (a run
    /// with a wrong or unchecked answer fails with exit code 3 instead).
    pub answers_verified: bool,
    /// Things the user should know, such as the partitioner's warnings.
    pub warnings: Vec<String>,
    pub mram: MramNeed,
    pub seed: u64,
    pub version: &'static str,
    /// The git commit of the build (`-dirty` with uncommitted changes); null outside git.
    pub git_commit: Option<&'static str>,
    /// The command line that made the report, when a command (not a library call or a sweep
    /// point) made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_line: Option<String>,
    /// FNV-1a (64 bits, hex) of `config` as compact JSON with sorted keys: equal exactly
    /// when the configurations are.
    pub config_fnv1a64: String,
    pub config: EffectiveConfig,
    pub host: HostFacts,
}

impl RunReport {
    /// A number among the index's keys, by path (`["imbalance", "queries"]`); NaN if absent.
    pub fn index_f64(&self, path: &[&str]) -> f64 {
        let mut v = self.index_fields.get(path[0]);
        for p in &path[1..] {
            v = v.and_then(|x| x.get(p));
        }
        v.and_then(|x| x.as_f64()).unwrap_or(f64::NAN)
    }

    /// A string among the index's keys; empty if absent.
    pub fn index_str(&self, key: &str) -> &str {
        self.index_fields
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("")
    }
}

/// Progress reporting, decided by the caller (a terminal, not `--quiet`).
pub trait Progress {
    /// Batch `done` of `total` starts, counting the simulated batches only: the first
    /// `unsimulated` of the run's batches (warm-up ones left unsimulated) come before them,
    /// for a label that numbers batches as the run and its trace do.
    fn batch(&mut self, _done: u64, _total: u64, _unsimulated: u64) {}
    fn phase(&mut self, _what: &str) {}
    /// Where the index build reports how far a long phase has come (read by the ticker).
    fn meter(&self) -> std::sync::Arc<crate::meter::Meter> {
        std::sync::Arc::default()
    }
}

/// No progress output.
pub struct Silent;
impl Progress for Silent {}

impl From<IndexError> for Error {
    fn from(e: IndexError) -> Error {
        match e {
            IndexError::Input(e) => Error::Input(e),
            IndexError::Kernel(e) => Error::from(e),
            IndexError::Verification(s) => Error::Verification(s),
        }
    }
}

/// The executor's protocol from the workload's `[run]` keys.
pub fn protocol_of(workload: &Workload) -> Protocol {
    Protocol {
        launch: match workload.launch {
            RawLaunch::Sync => LaunchMode::Sync,
            RawLaunch::Async => LaunchMode::Async,
        },
        batches_in_flight: workload.batches_in_flight,
        arrival: match (workload.arrival, workload.queries_per_s) {
            (ArrivalMode::Open, Some(rate)) => Arrival::Open {
                fs_per_query: ((1e15 / rate).round() as u64).max(1),
            },
            _ => Arrival::Closed,
        },
        batch_size: workload.batch_size,
        poll_interval: workload.poll_interval_us.map(|_| Time(poll_ps(workload))),
    }
}

/// Runs the whole experiment with the index the workload names.
pub fn run(
    machine: &Machine,
    workload: &Workload,
    partitioner: &dyn Partitioner,
    progress: &mut dyn Progress,
) -> Result<RunReport, Error> {
    Ok(run_traced(machine, workload, partitioner, progress, None)?.0)
}

/// As [`run`], with the trace `trace` asks for.
pub fn run_traced(
    machine: &Machine,
    workload: &Workload,
    partitioner: &dyn Partitioner,
    progress: &mut dyn Progress,
    trace: Option<&TraceRequest>,
) -> Result<(RunReport, Option<Trace>), Error> {
    let mut clock = WallClock::start();
    index::check_choices(machine, workload)?;
    check_fixed_costs(machine, workload)?;
    // Only B+-Forest leaves warm-up batches unsimulated; PIM-tree refuses it as such.
    if workload.index == index::bforest::NAME {
        workload.check_warmup_skip()?;
        index::bforest::check_streaming(workload, trace.is_some())?;
    }
    let meter = progress.meter();
    let mut on_phase = |p: &str| {
        clock.lap(p);
        progress.phase(p)
    };
    let mut phases = crate::meter::Phases::new(&mut on_phase, meter);
    let mut index = index::build(machine, workload, partitioner, &mut phases)?;
    drop(phases);
    let config = EffectiveConfig::of(machine, workload, partitioner.name());
    drive(
        machine,
        workload,
        index.as_mut(),
        config,
        progress,
        clock,
        trace,
    )
}

/// Simulated time the batches' fixed costs may add up to (u64 picoseconds hold about
/// 1.8e7 s; the rest is left for the kernels and transfers).
const MAX_FIXED_COSTS_S: u128 = 1_000_000;

/// Refuses, before anything is built, a run whose fixed costs alone (two SDK calls, a
/// launch, a poll after an async launch and every rank's ownership switch per batch) would
/// overflow simulated time.
fn check_fixed_costs(machine: &Machine, workload: &Workload) -> Result<(), InputError> {
    let t = &machine.transfer;
    // Only async launches poll (so a sync run reads no poll interval).
    let poll = match workload.launch {
        RawLaunch::Sync => 0,
        RawLaunch::Async => {
            (workload.poll_interval_us).map_or(t.poll_interval.ps(), |_| poll_ps(workload))
        }
    };
    let per_batch_ps = 2 * t.call_fixed.ps() as u128
        + t.launch_fixed.ps() as u128
        + poll as u128
        + t.ownership_switch_per_rank.ps() as u128 * machine.ranks as u128;
    let total_s = per_batch_ps * workload.total_batches() as u128 / crate::engine::PS_PER_S as u128;
    if total_s <= MAX_FIXED_COSTS_S {
        return Ok(());
    }
    Err(workload.attribution.error_at(
        "batches.measured",
        format!(
            "{} batches would spend {total_s} s of simulated time on fixed costs alone (transfer.call_fixed_us, launch_fixed_us, poll_interval_us and ownership_switch_us_per_rank x {} ranks), above the {MAX_FIXED_COSTS_S} s limit; run fewer batches or give smaller fixed costs",
            workload.total_batches(),
            machine.ranks
        ),
    ))
}

/// The run's own poll interval, picoseconds (0 when it uses the machine's; a whole number of
/// them, as validated).
fn poll_ps(workload: &Workload) -> u64 {
    workload
        .poll_interval_us
        .map_or(0, |us| (us * 1e6).round() as u64)
}

/// What the driver gathers while the batches run.
struct Gathered {
    kernel_ns: Histogram<u64>,
    events: u64,
    kernel_wall_s: f64,
    /// Queries asked of the index, and those whose answers it checked, over every simulated
    /// batch.
    asked: u64,
    verified: u64,
    /// Recorded DPUs, by batch.
    tasklets: Vec<(u64, Recording)>,
    /// See [`RunReport::transfer_bounds`].
    transfer_bounds: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Gathered {
    fn new() -> Gathered {
        Gathered {
            kernel_ns: histogram_ns(),
            events: 0,
            kernel_wall_s: 0.0,
            asked: 0,
            verified: 0,
            tasklets: Vec::new(),
            transfer_bounds: BTreeMap::new(),
        }
    }

    /// Takes in batch `b`'s work for its `n` queries (every answer checked, or the run
    /// stops), and when `measured` its kernel times and transfer bounds; gives back its
    /// program.
    fn add(
        &mut self,
        machine: &Machine,
        (b, n): (u64, u64),
        measured: bool,
        work: BatchWork,
    ) -> Result<Program, Error> {
        check_verified(b, n, work.answers_verified)?;
        self.verified += work.answers_verified;
        self.asked += n;
        self.tasklets
            .extend(work.timelines.into_iter().map(|r| (b, r)));
        self.events += work.events;
        self.kernel_wall_s += work.kernel_wall_s;
        if measured {
            count_transfer_bounds(machine, &work.program, &mut self.transfer_bounds);
            for t in &work.dpu_kernel {
                self.kernel_ns
                    .saturating_record(t.ps().div_ceil(1000).max(1));
            }
        }
        Ok(work.program)
    }
}

/// What the index should record of batch `b` for `trace`.
fn record_for(trace: Option<&TraceRequest>, b: u64) -> Record {
    match trace {
        Some(t) if t.batches.contains(&b) => match &t.dpus {
            TraceDpus::Busiest => Record::Busiest {
                max_spans: t.spans_per_recording(),
            },
            TraceDpus::List(dpus) => Record::Dpus {
                dpus: dpus.clone(),
                max_spans: t.spans_per_recording(),
            },
        },
        _ => Record::Nothing,
    }
}

/// Runs every batch of `workload` through `index` on the machine (a warm-up batch left
/// unsimulated through [`Index::skip_batch`]); generic over the index.
pub fn drive(
    machine: &Machine,
    workload: &Workload,
    index: &mut dyn Index,
    config: EffectiveConfig,
    progress: &mut dyn Progress,
    mut clock: WallClock,
    trace: Option<&TraceRequest>,
) -> Result<(RunReport, Option<Trace>), Error> {
    clock.lap("batches");
    let init =
        time_init(machine, index.init_programs()).map_err(|p| init_past_ceiling(p, workload))?;
    let total = workload.total_batches();
    // Progress counts the simulated batches: an unsimulated warm-up batch takes no time.
    let skipped = total - workload.simulated_batches();
    let mut g = Gathered::new();
    let keep_spans = trace.map_or(0..0, |t| t.batches.clone());
    let timeline =
        Executor::run_keeping(machine, protocol_of(workload), total, keep_spans, |b, n| {
            if !workload.simulates(b) {
                progress.phase(&format!("warm-up batch {} (not simulated)", b + 1));
                return Ok(index.skip_batch(b, n)?);
            }
            progress.batch(b - skipped, total - skipped, skipped);
            let measured = workload.measures(b);
            let work = index.run_batch(b, n, measured, &record_for(trace, b))?;
            g.add(machine, (b, n), measured, work)
        })
        .map_err(|e| match e {
            Error::PastCeiling(p) => past_ceiling(p, machine, workload),
            other => other,
        })?;
    progress.phase(if trace.is_some() {
        "building the trace"
    } else {
        "done"
    });
    let trace = trace.map(|t| {
        let mut trace = build_trace(machine, t, &timeline, &g.tasklets);
        note_unsimulated_warmup(&mut trace, workload);
        trace
    });
    let cut = cut_timelines(&g.tasklets);
    let bound = trace.as_ref().filter(|t| t.truncated());
    let bounded = bound.map(|t| format!("{}; trace fewer batches or DPUs", t.truncation_note()));
    let unrecorded = (trace.is_some() && !index::records_timelines(workload)).then(|| {
        format!(
            "the trace has no tasklet timelines: {} records none for {} queries (of PIM-tree's kernels only the gets' are recorded, pim-tree.md){}",
            index.name(),
            workload.kind.name(),
            if bound.is_some() { "" } else { "; its batch, host and rank tracks are whole" }
        )
    });
    let mut report = report(machine, workload, index, config, init, &timeline, g, &clock);
    report
        .warnings
        .extend(cut.into_iter().chain(unrecorded).chain(bounded));
    Ok((report, trace))
}

/// Tells in `trace`'s `otherData.warmup` that the warm-up batches were not simulated, when
/// so: its spans are earlier than a run's that simulated them.
fn note_unsimulated_warmup(trace: &mut Trace, workload: &Workload) {
    if workload.simulate_warmup {
        return;
    }
    let note = format!(
        "warm-up batches 0 to {} were routed and run with idle kernels, not simulated (batches.simulate_warmup = false): every span is earlier by the time their kernels would have taken",
        workload.warmup_batches - 1
    );
    trace.set_other("warmup", note.as_str().into());
}

/// Adds to `bounds` the term that bounds each of `program`'s transfers, by stage (see
/// [`RunReport::transfer_bounds`]).
fn count_transfer_bounds(
    machine: &Machine,
    program: &Program,
    bounds: &mut BTreeMap<String, BTreeMap<String, u64>>,
) {
    for step in &program.steps {
        let Step::Transfer {
            stage,
            direction,
            kind,
            sizes_bytes,
        } = step
        else {
            continue;
        };
        // The executor skips a transfer with no bytes: it costs nothing and binds nothing.
        if sizes_bytes.iter().all(|&b| b == 0) {
            continue;
        }
        let bound = transfer_bound(machine, *direction, *kind, sizes_bytes);
        let name = serde_json::to_value(bound).map(|v| v.as_str().map(str::to_owned));
        let name = name.ok().flatten().unwrap_or_default();
        let stage = program.stages[*stage].name.to_owned();
        *bounds.entry(stage).or_default().entry(name).or_insert(0) += 1;
    }
}

/// Refuses a batch in which the index checked fewer (or more) answers than the `queries`
/// it was asked for: every answer of a run is checked against the reference.
fn check_verified(batch: u64, queries: u64, verified: u64) -> Result<(), IndexError> {
    if verified == queries {
        return Ok(());
    }
    Err(IndexError::Verification(format!(
        "batch {batch}: {queries} queries asked for, the answers of {verified} checked against the reference"
    )))
}

/// A warning when a recorded tasklet timeline reached its bound of spans and was cut (its
/// track in the trace ends with an event saying so).
fn cut_timelines(recorded: &[(u64, Recording)]) -> Option<String> {
    let launches = recorded.iter().flat_map(|(_, r)| &r.launches);
    let spans = launches
        .filter(|t| t.truncated)
        .map(|t| t.spans.len())
        .max()?;
    let cut = recorded.iter().filter(|(_, r)| r.cut()).count();
    // The recordings share the trace's bound: fewer of them get more each, up to the whole
    // share of one. A single cut recording can only be made whole by a shorter launch.
    let advice = if recorded.len() > 1 {
        "trace fewer batches or DPUs (they share the trace's bound) or shorten the launches (a smaller queries.batch_size) to see them whole"
    } else {
        "one DPU batch already has the trace's whole share; shorten the launch (a smaller queries.batch_size) to see it whole"
    };
    Some(format!(
        "the trace's tasklet timelines of {cut} of its {} DPU batches were cut at their bound (up to {spans} spans per launch); {advice}",
        recorded.len()
    ))
}

/// The input error for a run whose simulated time passed the ceiling: its costs are too
/// large for its batches.
fn past_ceiling(p: PastCeiling, machine: &Machine, workload: &Workload) -> Error {
    let reason = format!(
        "{p}: the configuration's costs (host.*_ns_per_*, transfer.* rates and fixed costs, dpu.clock_mhz, dpu.instructions.*, dpu.pipeline.*, dma.*) are too large for its work (data.pairs, queries.batch_size, queries.range_pairs, batches.warmup and batches.measured); lower some of them"
    );
    // Past the ceiling in a warm-up batch, fewer measured batches would not help.
    let work: &[&str] = if p.batch < workload.warmup_batches {
        &["queries.batch_size", "batches.warmup"]
    } else {
        &["batches.measured", "queries.batch_size"]
    };
    // A rule between the costs and the work: every override of either is named, the
    // machine's costs first, at the first overridden key; the workload file when none was.
    // An override decides a cost when it set one or a section holding one, or set a key
    // inside a cost section.
    let is_cost = |key: &str| COST_KEYS.iter().any(|c| covers(key, c) || covers(c, key));
    let costs = machine
        .attribution
        .overrides
        .iter()
        .filter(|(key, _)| is_cost(key));
    let works = work.iter().filter_map(|&key| {
        let text = workload.attribution.override_of(key)?;
        Some((key.to_owned(), text.to_owned()))
    });
    let named: Vec<(String, String)> = costs.cloned().chain(works).collect();
    match named.first() {
        None => Error::Input(workload.attribution.error_at(work[0], reason)),
        Some((key, _)) => {
            let sets = joined_sets(named.iter().map(|(_, text)| text.as_str()));
            Error::Input(InputError::key(sets, key, reason))
        }
    }
}

/// The machine keys (and sections of keys) that are costs: simulated time per unit of work.
const COST_KEYS: [&str; 6] = [
    "host",
    "transfer",
    "dma",
    "dpu.clock_mhz",
    "dpu.instructions",
    "dpu.pipeline",
];

/// As [`past_ceiling`], for the index's setup (its init programs, timed as batches).
fn init_past_ceiling(p: PastCeiling, workload: &Workload) -> Error {
    Error::Input(workload.attribution.error_at(
        "data.pairs",
        format!(
            "the index's setup (build, partition, exchange; step {} of its init) passed the simulator's time ceiling of {} s: the host costs (host.*_ns_per_*), transfer.* rates and fixed costs are too large for data.pairs and the reference batch (queries.batch_size); lower some of them",
            p.batch + 1,
            crate::engine::CEILING.ps() / crate::engine::PS_PER_S
        ),
    ))
}

/// Times the index's init programs one after another on an idle machine.
fn time_init(
    machine: &Machine,
    programs: Vec<(&'static str, Program)>,
) -> Result<Named, PastCeiling> {
    let n = programs.len() as u64;
    let timeline = Executor::<PastCeiling>::run(machine, Protocol::sequential(1), n, |b, _| {
        Ok(programs[b as usize].1.clone())
    })?;
    let mut init = Named::default();
    for (b, (name, _)) in timeline.batches.iter().zip(&programs) {
        init.add(name, (b.end - b.start).as_us_f64());
    }
    Ok(init)
}

/// A histogram of nanoseconds from 1 ns to about 13 days, three significant figures;
/// values beyond are clamped to its range.
fn histogram_ns() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1 << 50, 3).expect("valid histogram bounds")
}

fn mean_std(xs: &[f64]) -> MeanStd {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    MeanStd {
        mean,
        stddev: var.sqrt(),
    }
}

/// The critical path of the measured batches, per stage, then waiting, then per class.
fn breakdown(measured: &[&BatchTiming]) -> Named {
    let n = measured.len().max(1) as f64;
    let mut stages = Named::default();
    let mut classes = [0f64; 3];
    let mut waiting = 0f64;
    if let Some(first) = measured.first() {
        for s in &first.stages {
            stages.add(s.name, 0.0);
        }
    }
    for b in measured {
        for seg in &b.segments {
            let us = (seg.end - seg.start).as_us_f64() / n;
            match seg.stage {
                Some(i) => {
                    let stage = b.stages[i];
                    stages.add(stage.name, us);
                    classes[stage.class as usize] += us;
                }
                None => waiting += us,
            }
        }
    }
    stages.add(WAITING, waiting);
    for (class, v) in Class::ALL.into_iter().zip(classes) {
        stages.add(class.key(), v);
    }
    stages
}

/// How each launching stage's time splits, means over the measured batches.
fn launch_split(measured: &[&BatchTiming]) -> BTreeMap<String, LaunchSplit> {
    let n = measured.len().max(1) as f64;
    let mut split = BTreeMap::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for b in measured {
        for l in &b.launches {
            let name = b.stages[l.stage].name.to_owned();
            *counts.entry(name.clone()).or_default() += 1;
            let s = split.entry(name).or_insert(LaunchSplit {
                launches: 0.0,
                launch_us: 0.0,
                slowest_dpu_us: 0.0,
                until_seen_us: 0.0,
            });
            s.launch_us += l.fixed.as_us_f64() / n;
            s.slowest_dpu_us += l.slowest_dpu.as_us_f64() / n;
            s.until_seen_us += l.until_seen.as_us_f64() / n;
        }
    }
    // Counted whole and divided once: 1 / n added n times need not make 1.
    for (name, count) in counts {
        split.get_mut(&name).expect("counted").launches = count as f64 / n;
    }
    split
}

/// The key under `breakdown_us` of the time no stage was on the critical path.
const WAITING: &str = "waiting";

/// Every key a run's `breakdown_us` can have: each index's stages, the waiting time and the
/// classes' totals.
pub fn breakdown_keys() -> Vec<&'static str> {
    let mut keys = crate::index::stage_names();
    keys.push(WAITING);
    keys.extend(Class::ALL.map(Class::key));
    keys
}

fn latency(protocol: &Protocol, measured: &[&BatchTiming]) -> Latency {
    let mut h = histogram_ns();
    for b in measured {
        match protocol.arrival {
            Arrival::Closed => {
                h.saturating_record_n((b.end - b.start).ps().div_ceil(1000).max(1), b.queries)
            }
            Arrival::Open { .. } => {
                for j in b.first_query..b.first_query + b.queries {
                    let arrived = crate::system::exec::arrival_time(protocol.arrival, j);
                    h.saturating_record((b.end - arrived).ps().div_ceil(1000).max(1));
                }
            }
        }
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    Latency {
        p50: us(h.value_at_quantile(0.5)),
        p90: us(h.value_at_quantile(0.9)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
    }
}

/// The measured batches' timing figures.
struct Timing {
    queries_per_batch: MeanStd,
    batch_time: MeanStd,
    batch_times: Vec<f64>,
    batch_interval: MeanStd,
    throughput_queries_per_s: f64,
    breakdown: Named,
    launch_split: BTreeMap<String, LaunchSplit>,
    latency: Latency,
}

/// Timing of the measured batches (after the warm-up ones, before the cool-down ones),
/// over the window from the last warm-up batch's end to the last measured batch's end.
fn timing(workload: &Workload, timeline: &Timeline) -> Timing {
    let warmup = workload.warmup_batches as usize;
    let mut by_batch: Vec<&BatchTiming> = timeline.batches.iter().collect();
    by_batch.sort_by_key(|b| b.batch);
    let measured: Vec<&BatchTiming> =
        by_batch[warmup..warmup + workload.measured_batches as usize].to_vec();
    let times: Vec<f64> = measured
        .iter()
        .map(|b| (b.end - b.start).as_us_f64())
        .collect();
    let window_start = by_batch[..warmup].iter().map(|b| b.end).max();
    let window_start = window_start.unwrap_or(Time::ZERO);
    let window_end = measured.iter().map(|b| b.end).max().unwrap_or(window_start);
    let window = window_end - window_start;
    // The window holds the batches that end in it: with several batches in flight a
    // measured batch could end before the last warm-up one, and is then left out (and a
    // cool-down batch ending before the last measured one is counted).
    let in_window: Vec<&&BatchTiming> = (by_batch.iter())
        .filter(|b| b.end > window_start && b.end <= window_end)
        .collect();
    let mut ends: Vec<Time> = in_window.iter().map(|b| b.end).collect();
    if warmup > 0 {
        ends.push(window_start);
    }
    ends.sort();
    let intervals: Vec<f64> = ends.windows(2).map(|w| (w[1] - w[0]).as_us_f64()).collect();
    let queries: u64 = in_window.iter().map(|b| b.queries).sum();
    let held: Vec<f64> = measured.iter().map(|b| b.queries as f64).collect();
    Timing {
        queries_per_batch: mean_std(&held),
        batch_time: mean_std(&times),
        batch_times: times,
        batch_interval: MeanStd {
            mean: window.as_us_f64() / in_window.len().max(1) as f64,
            stddev: mean_std(&intervals).stddev,
        },
        throughput_queries_per_s: queries as f64 / window.as_s_f64().max(1e-12),
        breakdown: breakdown(&measured),
        launch_split: launch_split(&measured),
        latency: latency(&protocol_of(workload), &measured),
    }
}

/// A warning when fewer warm-up batches than batches in flight leave the pipeline's start
/// in the measurement: the first batches start together and wait for one another, so the
/// first measured ones take longer than the run's steady state (2 in flight with 1 warm-up
/// batch on the tiny workload at skew 0 with one host thread: 5,706 us against 3,200 us for
/// the next ones).
fn pipeline_start(workload: &Workload) -> Option<String> {
    let in_flight = u64::from(workload.batches_in_flight);
    (in_flight > 1 && workload.warmup_batches < in_flight).then(|| {
        format!(
            "batches.warmup = {} is below run.batches_in_flight = {in_flight}: the first measured batches start while the pipeline fills and take longer than its steady state; give at least {in_flight} warm-up batches (more with more in flight; batch_times_us shows when the times settle)",
            workload.warmup_batches
        )
    })
}

/// Whether open arrivals outpaced the machine, with the warning that says so: at the end, a
/// full batch was waiting for each top-level thread. (A run that keeps up ends with the
/// queries that arrived during its last batch waiting, and with `k` batches in flight a
/// batch lasts about `k` intervals: about `k` times its batch size (Little's law), below
/// `k` full batches while its batches are not full.)
fn saturation(workload: &Workload, timeline: &Timeline) -> Option<String> {
    let protocol = protocol_of(workload);
    let open = matches!(protocol.arrival, Arrival::Open { .. });
    let full = workload
        .batch_size
        .saturating_mul(protocol.batches_in_flight.into());
    (open && timeline.backlog_at_end >= full).then(|| {
        format!(
            "saturated: queries arrive at {} per second, faster than the machine serves them; {} queries were still waiting at the end",
            per_second(workload.queries_per_s.unwrap_or(0.0)),
            timeline.backlog_at_end
        )
    })
}

/// With open arrivals, whether the measured batches served fewer queries than arrived, with
/// the warning that says so. A run starts with small batches (the first takes one query)
/// that grow towards the arrival rate's size, and a measurement taken before they settle
/// describes the ramp, not the steady state; arrivals are evenly spaced, so a settled run
/// serves the rate. A shortfall counts above a tenth of the rate and [`MIN_SHORTFALL`]
/// queries (a handful of queries shows a rate only to within a query); a saturated run (full
/// batches) is said so by [`saturation`] instead. (Growth of the batches alone, the rule
/// before, missed a 24 % shortfall whose batches grew by less than half, and warned on
/// batches of 1 to 2 queries that served the rate.)
fn ramp(workload: &Workload, timeline: &Timeline, served_per_s: f64) -> Option<String> {
    let Arrival::Open { .. } = protocol_of(workload).arrival else {
        return None;
    };
    let rate = workload.queries_per_s?;
    let mut measured: Vec<&BatchTiming> = (timeline.batches.iter())
        .filter(|b| workload.measures(b.batch))
        .collect();
    measured.sort_by_key(|b| b.batch);
    let (first, last) = (measured.first()?.queries, measured.last()?.queries);
    let served: u64 = measured.iter().map(|b| b.queries).sum();
    let shortfall = served as f64 * (rate / served_per_s.max(1e-12) - 1.0);
    (served_per_s < 0.9 * rate && shortfall >= MIN_SHORTFALL).then(|| {
        format!(
            "the measured batches served {} queries per second, {:.0} % below the {} that arrive ({} in the first batch, {last} in the last): open arrivals start with small batches, and this run measured them before they settled, or the machine cannot serve the rate (its batches then grow until full: saturated); add warm-up batches (batches.warmup) to tell",
            per_second(served_per_s),
            (1.0 - served_per_s / rate) * 100.0,
            per_second(rate),
            crate::config::counted(first, "query")
        )
    })
}

/// A rate in a warning: whole from 100 per second up (a rate derived from a measurement
/// carries a dozen digits nobody reads), as written below.
fn per_second(rate: f64) -> String {
    match rate >= 100.0 {
        true => format!("{rate:.0}"),
        false => crate::config::shown(rate),
    }
}

/// The fewest queries short of the arrivals that [`ramp`] reports.
const MIN_SHORTFALL: f64 = 3.0;

fn spread_us(h: &Histogram<u64>) -> Spread {
    let us = |ns: u64| ns as f64 / 1000.0;
    Spread {
        min: us(h.min()),
        p50: us(h.value_at_quantile(0.5)),
        p99: us(h.value_at_quantile(0.99)),
        max: us(h.max()),
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ProtocolReport {
    fn of(workload: &Workload) -> ProtocolReport {
        ProtocolReport {
            launch: workload.launch,
            batches_in_flight: workload.batches_in_flight,
            cooldown_batches: workload.cooldown_batches(),
            arrival: workload.arrival,
            queries_per_s: workload.queries_per_s,
            poll_interval_us: workload.poll_interval_us,
        }
    }
}

/// The run report's own keys, which an index's keys must not shadow.
pub const RESERVED_KEYS: [&str; 29] = [
    "schema_version",
    "index",
    "dpus",
    "tasklets",
    "queries_per_batch",
    "queries_per_measured_batch",
    "measured_batches",
    "protocol",
    "batch_time_us",
    "batch_times_us",
    "batch_interval_us",
    "breakdown_us",
    "launch_split",
    "init_us",
    "throughput_queries_per_s",
    "latency_us",
    "saturated",
    "dpu_kernel_us",
    "transfer_bounds",
    "answers_verified",
    "warnings",
    "mram",
    "seed",
    "version",
    "git_commit",
    "command_line",
    "config_fnv1a64",
    "config",
    "host",
];

/// The index's own keys of the report, none of them a key of the report itself.
fn index_fields(index: &dyn Index) -> serde_json::Map<String, serde_json::Value> {
    let fields = index.report();
    for key in fields.keys() {
        assert!(
            !RESERVED_KEYS.contains(&key.as_str()),
            "index {} reports `{key}`, a key of the run report itself",
            index.name()
        );
    }
    fields
}

/// What the user should know of the run's setup: the machine's, the workload's and the
/// index's warnings, and the keys and choices the run did not read.
fn setup_warnings(
    machine: &Machine,
    workload: &Workload,
    index: &dyn Index,
    config: &EffectiveConfig,
) -> Vec<String> {
    let mut warnings = machine.timing_warnings();
    warnings.extend(workload.warnings());
    warnings.extend(pipeline_start(workload));
    warnings.extend(index.warnings());
    warnings.extend(index::unused_machine_keys(index, machine, workload));
    let partitioner = &config.workload.partition.partitioner;
    warnings.extend(index::unused_choices(workload, partitioner));
    warnings
}

#[allow(clippy::too_many_arguments)]
fn report(
    machine: &Machine,
    workload: &Workload,
    index: &dyn Index,
    config: EffectiveConfig,
    init: Named,
    timeline: &Timeline,
    g: Gathered,
    clock: &WallClock,
) -> RunReport {
    let now = std::time::Instant::now();
    let t = timing(workload, timeline);
    let saturated = saturation(workload, timeline);
    let index_fields = index_fields(index);
    let mut warnings = setup_warnings(machine, workload, index, &config);
    // A saturated run's batches are full: a ramp is worth telling only otherwise.
    let served = t.throughput_queries_per_s;
    warnings.extend(
        saturated
            .clone()
            .or_else(|| ramp(workload, timeline, served)),
    );
    RunReport {
        schema_version: super::REPORT_SCHEMA_VERSION,
        index: index.name().to_owned(),
        index_fields,
        index_rows: index.table_rows(),
        dpus: machine.dpus,
        tasklets: workload.tasklets,
        queries_per_batch: workload.batch_size,
        queries_per_measured_batch: t.queries_per_batch,
        measured_batches: workload.measured_batches,
        protocol: ProtocolReport::of(workload),
        batch_time_us: t.batch_time,
        batch_times_us: t.batch_times,
        batch_interval_us: t.batch_interval,
        breakdown_us: t.breakdown,
        launch_split: t.launch_split,
        init_us: init,
        throughput_queries_per_s: t.throughput_queries_per_s,
        latency_us: t.latency,
        saturated: saturated.is_some(),
        dpu_kernel_us: spread_us(&g.kernel_ns),
        transfer_bounds: g.transfer_bounds,
        // Always true: a batch with an unchecked answer stopped the run (`check_verified`).
        answers_verified: g.verified == g.asked,
        warnings,
        mram: index.mram(),
        seed: workload.seed,
        version: super::VERSION,
        git_commit: super::git_commit(),
        command_line: None,
        config_fnv1a64: super::config_fnv1a64(&config),
        config,
        host: HostFacts {
            wall_s: (now - clock.start).as_secs_f64(),
            peak_rss_bytes: peak_rss_bytes(),
            simulated_events: g.events,
            kernel_wall_s: g.kernel_wall_s,
            simulated_events_per_s: g.events as f64 / g.kernel_wall_s.max(1e-9),
            threads: rayon::current_num_threads(),
            phases: clock.phases(now),
        },
    }
}

/// Peak resident set of this process (VmHWM), where the platform reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpu::TaskletTimeline;

    fn recording(truncated: bool) -> (u64, Recording) {
        let timeline = TaskletTimeline {
            spans: Vec::new(),
            truncated,
        };
        let launches = vec![timeline];
        (0, Recording { dpu: 0, launches })
    }

    #[test]
    fn a_cut_timeline_gets_advice_that_can_make_it_whole() {
        assert_eq!(cut_timelines(&[recording(false)]), None);
        let one = cut_timelines(&[recording(true)]).unwrap();
        assert!(one.contains("1 of its 1 DPU batches"), "{one}");
        assert!(!one.contains("fewer batches"), "{one}");
        assert!(one.contains("a smaller queries.batch_size"), "{one}");
        let two = cut_timelines(&[recording(true), recording(false)]).unwrap();
        assert!(two.contains("1 of its 2 DPU batches"), "{two}");
        assert!(two.contains("trace fewer batches or DPUs"), "{two}");
    }
}
