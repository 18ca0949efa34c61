//! The executor: runs batch programs on the system-level components, on one clock.
//!
//! # Components
//!
//! - **Host thread pool** (`host.threads`): host tasks share it as a [`FluidShare`] (a task
//!   asking for `k` threads gets `min(k, fair share)`), so two batches' host stages slow each
//!   other only when together they ask for more threads than there are.
//! - **Top-level host threads ("slots")**, one per batch in flight: each runs one batch's
//!   program, one step after another; its own host work (including the MRAM ownership
//!   switch before a read) is done on the pool.
//! - **Host memory system** (`transfer.host_cap_gb_per_s`): concurrent rank transfers share
//!   it as a [`FluidShare`], each also bounded by its rank's rate.
//! - **Ranks**: each has a lane on which its transfers and launches run one after another
//!   (a transfer: the SDK call's fixed cost, then its bytes; a launch: the launch's fixed
//!   cost, then the kernel until the rank's slowest DPU ends), and an MRAM owner (host or
//!   DPUs): the first host access after a launch pays `ownership_switch_us_per_rank`.
//! - **DPUs**: simulated event by event before the program runs (they are independent from
//!   launch to completion); a launch step carries each DPU's kernel time, and each rank's
//!   completion is an event on this clock.
//!
//! # Ordering contract
//!
//! Events are ordered by (time, insertion sequence), as in every pimdes queue: equal times
//! come out first-in first-out. Within one event, the work it unblocks is started in a
//! fixed order (ranks in index order, slots in index order). The DPU level meets this one at
//! launches: a DPU's kernel time is converted from cycles to picoseconds once
//! ([`crate::engine::Clock::to_time`], rounded up), and the kernel starts on its rank's lane
//! when the launch's fixed cost has elapsed. Nothing here depends on wall time or threads.
//!
//! # Protocol
//!
//! `launch = sync`: the host waits for every rank, then reads them all in one call.
//! `launch = async`: the host polls every `transfer.poll_interval_us` (or the run's
//! `poll_interval_us`) from the launch on; a rank seen finished is read at once (its
//! ownership switch, then its own transfer call), while the others run, when the read is a
//! per-rank parallel one; before any other read (a `ParallelAll` one, say) the host waits
//! until it has seen every rank. The DPU phase of a batch (its first rank step to its last) holds
//! the DPUs: phases run one at a time, in batch order.

use super::program::{Direction, Program, Stage, Step, TransferKind};
use crate::engine::{CEILING, EventQueue, FluidShare, PS_PER_S, Time};
use crate::machine::Machine;
use std::collections::VecDeque;

/// The simulation reached [`CEILING`] (about 53 days of simulated time): the
/// configuration's costs are too large for its number of batches. Every executor's error
/// type converts from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "simulated time passed {} s (2^62 ps, the simulator's ceiling) in batch {batch}",
    CEILING.ps() / PS_PER_S
)]
pub struct PastCeiling {
    /// The earliest batch not finished when the first event past the ceiling came.
    pub batch: u64,
}

/// When the host starts reading after a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaunchMode {
    Sync,
    Async,
}

/// When batches start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// A batch starts as soon as a top-level host thread is free, with `batch_size` queries.
    Closed,
    /// Query `j` arrives at `j x fs_per_query` femtoseconds; a free top-level thread starts
    /// a batch with every waiting query (at most `batch_size`) as soon as one waits.
    Open { fs_per_query: u64 },
}

/// How the host drives the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocol {
    pub launch: LaunchMode,
    pub batches_in_flight: u32,
    pub arrival: Arrival,
    pub batch_size: u64,
    /// How often the host polls after an async launch; `None`: the machine's
    /// `transfer.poll_interval_us` (an index's host loop may poll less often than the SDK).
    pub poll_interval: Option<Time>,
}

impl Protocol {
    /// One batch at a time, synchronous launches, closed arrivals.
    pub fn sequential(batch_size: u64) -> Protocol {
        Protocol {
            launch: LaunchMode::Sync,
            batches_in_flight: 1,
            arrival: Arrival::Closed,
            batch_size,
            poll_interval: None,
        }
    }
}

/// Where a span ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Track {
    /// A top-level host thread (its host work on the pool, and its waits).
    Slot(u32),
    Rank(u32),
}

/// Something a component did for a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub batch: u64,
    pub track: Track,
    pub name: &'static str,
    /// The program's stage, or `None` for a wait for the DPUs.
    pub stage: Option<usize>,
    pub start: Time,
    pub end: Time,
    /// Bytes moved (transfers), 0 otherwise.
    pub bytes: u64,
    /// Threads asked for (host tasks), 0 otherwise.
    pub threads: u32,
}

/// A piece of a batch's critical path: its stage, or `None` for waiting for the DPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub stage: Option<usize>,
    pub start: Time,
    pub end: Time,
}

/// One batch as it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchTiming {
    pub batch: u64,
    pub slot: u32,
    /// Queries the batch took, and the arrival index of its first one.
    pub queries: u64,
    pub first_query: u64,
    pub start: Time,
    pub end: Time,
    pub stages: Vec<Stage>,
    /// The critical path, in order; it tiles `start..end` exactly.
    pub segments: Vec<Segment>,
    /// Each launch the batch made, in order: how its share of the critical path splits.
    pub launches: Vec<LaunchTiming>,
}

/// One launch's share of its batch's critical path (its segment of stage `stage`): the
/// launch's fixed cost, then the slowest DPU's kernel, then the rest, `until_seen`: from the
/// last rank's end until the host saw it (an async launch's polling; zero for a sync one).
/// Nothing else can come between: the ranks are free when a launch starts (a batch's DPU
/// phase holds them), and the switches and reads after it are the next stage's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchTiming {
    pub stage: usize,
    pub fixed: Time,
    pub slowest_dpu: Time,
    pub until_seen: Time,
}

/// What a run of the executor produced.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub batches: Vec<BatchTiming>,
    pub spans: Vec<Span>,
    /// Queries that had arrived but were not taken when the last batch ended.
    pub backlog_at_end: u64,
}

/// Arrival time of query `j`.
pub fn arrival_time(arrival: Arrival, j: u64) -> Time {
    match arrival {
        Arrival::Closed => Time::ZERO,
        Arrival::Open { fs_per_query } => {
            let fs = j as u128 * fs_per_query as u128;
            // Saturates (see `engine::CEILING`): the executor stops before such a time.
            Time(u64::try_from(fs / 1000).unwrap_or(u64::MAX))
        }
    }
}

/// Queries arrived by `t` (inclusive) under open arrivals.
fn arrived_by(fs_per_query: u64, t: Time) -> u64 {
    let num = (t.ps() as u128 + 1) * 1000;
    u64::try_from(num.div_ceil(fs_per_query as u128)).unwrap_or(u64::MAX)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Pool,
    /// The host's memory system for one direction (0: CPU -> DPU, 1: DPU -> CPU).
    Memory(u8),
    Lane(u32),
    Detect(u32),
    Start(u32),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum LaneWork {
    Fixed(Time),
    Flow {
        bytes: u64,
        limit_bytes_per_s: u64,
        direction: Direction,
    },
    Kernel(Time),
}

/// An operation queued on a rank's lane.
#[derive(Debug, Clone, Copy)]
struct LaneOp {
    slot: u32,
    stage: usize,
    name: &'static str,
    work: LaneWork,
    /// The last op of the rank's part of the step.
    ends_job: bool,
    job: Job,
}

#[derive(Debug, Default)]
struct Lane {
    queue: VecDeque<LaneOp>,
    running: Option<(LaneOp, Time)>,
    dpus_own_mram: bool,
}

/// What follows a host task of a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    StepDone,
    /// The ownership switch before a transfer is done: start the transfer.
    Transfer,
    /// Async: rank `r`'s switch is done: read it.
    ReadRank(u32),
}

#[derive(Debug, Clone, Copy)]
struct HostTask {
    stage: usize,
    name: &'static str,
    work_ps: u64,
    threads: u32,
    then: Then,
}

/// The launch and read of an async batch, done together.
#[derive(Debug)]
struct Fused {
    launch_stage: usize,
    detected: Vec<Option<Time>>,
    /// Per rank: the read's bytes and rate limit, if it has anything to read.
    reads: Vec<Option<(u64, u64)>>,
}

#[derive(Debug)]
struct Active {
    timing: BatchTiming,
    program: Program,
    pc: usize,
    /// Jobs of the current step still running.
    outstanding: u32,
    step_start: Time,
    holds_dpus: bool,
    waiting_since: Option<Time>,
    /// The transfer waiting for its ownership switch: (rank, bytes, rate limit) per call.
    plan: Vec<(u32, u64, u64)>,
    /// Serial transfers still to make, one DPU each.
    serial: VecDeque<(u32, u64, u64)>,
    fused: Option<Fused>,
    /// The current launch step's fixed cost and slowest DPU, until the step is done.
    launch: Option<(Time, Time)>,
}

#[derive(Debug, Default)]
struct Slot {
    active: Option<Active>,
    control: VecDeque<HostTask>,
    running: Option<(HostTask, Time)>,
}

/// One rank's part of a transfer (one DPU's, for serial transfers): the bytes it moves and
/// the rate that limits it, with which term of the transfer model that rate is.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RankPart {
    rank: u32,
    moved_bytes: u64,
    limit_bytes_per_s: u64,
    limited_by: TransferBound,
    /// Bytes that cross the host's memory system: the moved bytes, but a broadcast's
    /// buffer once per rank.
    host_bytes: u64,
}

impl RankPart {
    /// The part as a flow through the host's memory system: (bytes, rate limit), the
    /// limit scaled so that the flow ends when the moved bytes would at their rate.
    fn host_flow(&self) -> (u64, u64) {
        if self.host_bytes == self.moved_bytes || self.moved_bytes == 0 {
            return (self.moved_bytes, self.limit_bytes_per_s);
        }
        let limit = u128::from(self.limit_bytes_per_s) * u128::from(self.host_bytes)
            / u128::from(self.moved_bytes);
        (self.host_bytes, (limit as u64).max(1))
    }
}

/// The term of the transfer model that sets a transfer's time (`bound` of `pimdes
/// microbench transfer`): the largest of the call's fixed cost, the slowest rank's bytes at
/// its rate, and every rank's bytes through the host's memory system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TransferBound {
    /// `transfer.call_fixed_us` (per call; a serial transfer makes one call per DPU).
    PerCall,
    /// `transfer.rank_fixed_us` times the ranks the call involves.
    PerRank,
    /// `transfer.*_gb_per_s_per_dpu`: DPUs x the per-DPU rate is below the rank's rate.
    PerDpuRate,
    /// `transfer.*_gb_per_s_per_rank` (`broadcast_gb_per_s_per_rank` for broadcasts).
    PerRankRate,
    /// The host's cap for the direction (`transfer.host_cap_*`), shared by the ranks.
    HostCap,
    /// The host threads transposing the bytes: `transfer.threads_per_rank` (a rank's part;
    /// one thread for a serial call) or `host.threads` (all ranks together), times
    /// `transfer.transpose_gb_per_s_per_thread`.
    Transposition,
}

/// The parts of a transfer, rank by rank (DPU by DPU for serial transfers).
fn rank_parts(
    p: &Params,
    direction: Direction,
    kind: TransferKind,
    sizes: &[u64],
) -> Vec<RankPart> {
    let (dpu_rate, rank_rate) = p.rates(direction);
    let set_max = sizes.iter().copied().max().unwrap_or(0);
    let mut parts = Vec::new();
    for r in 0..p.dpus_per_rank.len() {
        let sizes = &sizes[p.rank_dpus(r)];
        match kind {
            TransferKind::Serial => {
                // A serial call is one DPU's bytes, transposed on one thread.
                let (limit, limited_by) = lowest([
                    (dpu_rate, TransferBound::PerDpuRate),
                    (p.transpose_one, TransferBound::Transposition),
                ]);
                parts.extend(sizes.iter().filter(|&&b| b > 0).map(|&b| RankPart {
                    rank: r as u32,
                    moved_bytes: b,
                    limit_bytes_per_s: limit,
                    limited_by,
                    host_bytes: b,
                }));
            }
            TransferKind::Parallel | TransferKind::ParallelAll | TransferKind::Broadcast => {
                let (n, moved) = kind.rank_bytes(sizes, set_max);
                if n == 0 {
                    continue;
                }
                let rank_rate = match kind {
                    TransferKind::Broadcast => p.broadcast_rank,
                    _ => rank_rate,
                };
                let host_bytes = match kind {
                    TransferKind::Broadcast => sizes.iter().copied().max().unwrap_or(0),
                    _ => moved,
                };
                // The rank's threads transpose the bytes that cross host memory; as a
                // limit on the moved bytes, scaled by moved / crossing.
                let transpose = u128::from(p.transpose_rank) * u128::from(moved)
                    / u128::from(host_bytes.max(1));
                let (limit, limited_by) = lowest([
                    (rank_rate, TransferBound::PerRankRate),
                    (dpu_rate.saturating_mul(n), TransferBound::PerDpuRate),
                    (
                        u64::try_from(transpose).unwrap_or(u64::MAX),
                        TransferBound::Transposition,
                    ),
                ]);
                parts.push(RankPart {
                    rank: r as u32,
                    moved_bytes: moved,
                    limit_bytes_per_s: limit,
                    limited_by,
                    host_bytes,
                });
            }
        }
    }
    parts
}

/// The lowest rate of `terms`; ties go to the earlier.
fn lowest<const N: usize>(terms: [(u64, TransferBound); N]) -> (u64, TransferBound) {
    let mut low = terms[0];
    for t in &terms[1..] {
        if t.0 < low.0 {
            low = *t;
        }
    }
    low
}

/// Which term sets the time of one transfer of `sizes` (bytes per DPU) on `machine`: the
/// largest of its fixed costs (one call, or one per DPU for serial transfers), its slowest
/// part at that part's rate (all of them for serial transfers, which run one after
/// another), and all its bytes at the host's cap. Ties go to the earlier in that order.
pub fn transfer_bound(
    machine: &Machine,
    direction: Direction,
    kind: TransferKind,
    sizes: &[u64],
) -> TransferBound {
    let p = Params::new(machine);
    let parts = rank_parts(&p, direction, kind, sizes);
    let seconds = |bytes: u64, rate: u64| bytes as f64 / rate.max(1) as f64;
    let slowest = parts.iter().max_by(|a, b| {
        seconds(a.moved_bytes, a.limit_bytes_per_s)
            .total_cmp(&seconds(b.moved_bytes, b.limit_bytes_per_s))
    });
    let (calls, rate_s, rate_bound) = if kind == TransferKind::Serial {
        let total: f64 = parts
            .iter()
            .map(|x| seconds(x.moved_bytes, x.limit_bytes_per_s))
            .sum();
        // The serial parts run one after another: the slowest one's limit names the bound.
        let bound = slowest.map_or(TransferBound::PerDpuRate, |x| x.limited_by);
        (parts.len() as f64, total, bound)
    } else {
        slowest.map_or((1.0, 0.0, TransferBound::PerRankRate), |x| {
            (
                1.0,
                seconds(x.moved_bytes, x.limit_bytes_per_s),
                x.limited_by,
            )
        })
    };
    // One call on every rank of a parallel transfer; one call on one rank per DPU of a
    // serial one.
    let ranks = if kind == TransferKind::Serial {
        1
    } else {
        parts.len() as u64
    };
    let to_s = |t: Time| calls * t.ps() as f64 / PS_PER_S as f64;
    let call_s = to_s(p.call_fixed);
    let rank_s = to_s(Time(p.rank_fixed.ps() * ranks));
    let host_bytes: u64 = parts.iter().map(|x| x.host_bytes).sum();
    let (cap, cap_bound) = p.memory_cap(direction);
    let cap_s = seconds(host_bytes, cap);
    let mut bound = (call_s, TransferBound::PerCall);
    for (s, b) in [
        (rank_s, TransferBound::PerRank),
        (rate_s, rate_bound),
        (cap_s, cap_bound),
    ] {
        if s > bound.0 {
            bound = (s, b);
        }
    }
    bound.1
}

/// The components' parameters, from the machine file.
struct Params {
    call_fixed: Time,
    rank_fixed: Time,
    launch_fixed: Time,
    launch_per_rank: Time,
    switch_per_rank: Time,
    switch_concurrent: bool,
    poll_interval: Time,
    rates: [(u64, u64); 2],
    broadcast_rank: u64,
    threads: u32,
    /// What one rank's transfer threads, and one thread, transpose per second.
    transpose_rank: u64,
    transpose_one: u64,
    /// The host's memory system per direction: the lower of its cap and what all host
    /// threads transpose, and which of the two it is.
    memory_caps: [(u64, TransferBound); 2],
    first_dpu: Vec<usize>,
    dpus_per_rank: Vec<usize>,
    dpus: usize,
}

impl Params {
    fn new(machine: &Machine) -> Params {
        let t = &machine.transfer;
        let mut first = 0;
        let first_dpu = machine
            .usable_dpus_per_rank
            .iter()
            .map(|&n| {
                let f = first;
                first += n as usize;
                f
            })
            .collect();
        Params {
            call_fixed: t.call_fixed,
            rank_fixed: t.rank_fixed,
            launch_fixed: t.launch_fixed,
            launch_per_rank: t.launch_per_rank,
            switch_per_rank: t.ownership_switch_per_rank,
            switch_concurrent: t.switch == crate::machine::SwitchMode::Concurrent,
            poll_interval: t.poll_interval,
            rates: [
                (
                    t.cpu_dpu_bytes_per_s_per_dpu,
                    t.cpu_dpu_bytes_per_s_per_rank,
                ),
                (
                    t.dpu_cpu_bytes_per_s_per_dpu,
                    t.dpu_cpu_bytes_per_s_per_rank,
                ),
            ],
            broadcast_rank: t.broadcast_bytes_per_s_per_rank,
            threads: machine.host.threads,
            transpose_rank: t
                .transpose_limit(t.transpose.map_or(1, |x| u64::from(x.threads_per_rank))),
            transpose_one: t.transpose_limit(1),
            memory_caps: t.host_cap_bytes_per_s.map(|cap| {
                lowest([
                    (cap, TransferBound::HostCap),
                    (
                        t.transpose_limit(u64::from(machine.host.threads)),
                        TransferBound::Transposition,
                    ),
                ])
            }),
            first_dpu,
            dpus_per_rank: machine
                .usable_dpus_per_rank
                .iter()
                .map(|&n| n as usize)
                .collect(),
            dpus: machine.dpus as usize,
        }
    }

    fn rank_dpus(&self, r: usize) -> std::ops::Range<usize> {
        self.first_dpu[r]..self.first_dpu[r] + self.dpus_per_rank[r]
    }

    /// The fixed cost of one transfer call on `ranks` ranks.
    fn call_cost(&self, ranks: u64) -> Time {
        self.call_fixed + Time(self.rank_fixed.ps() * ranks)
    }

    /// The fixed cost of a launch on `ranks` ranks.
    fn launch_cost(&self, ranks: u64) -> Time {
        self.launch_fixed + Time(self.launch_per_rank.ps() * ranks)
    }

    fn rates(&self, d: Direction) -> (u64, u64) {
        self.rates[matches!(d, Direction::DpuCpu) as usize]
    }

    /// The host memory system's limit for `d` and the term that sets it.
    fn memory_cap(&self, d: Direction) -> (u64, TransferBound) {
        self.memory_caps[matches!(d, Direction::DpuCpu) as usize]
    }
}

/// Events any batch may take beside its program's allowance ([`program_events_bound`]),
/// to stop a runaway model. Smaller in the crate's unit tests, so that a program's
/// allowance shows there.
const MAX_EVENTS_PER_BATCH: u64 = if cfg!(test) { 1 << 10 } else { 1 << 24 };

/// Events one step may cause per DPU (or per rank) it involves: a call and its bytes, a
/// memory-system share, an ownership switch, a launch, its detection and a read per rank,
/// each at most twice with rescheduling; 16 leaves room.
const MAX_EVENTS_PER_STEP_AND_DPU: u64 = 16;

/// An upper bound on the events `program` causes: a batch's events grow with its steps
/// and the DPUs each involves (a PIM-tree scan runs thousands of rounds on every rank), so
/// a fixed number per batch would stop valid runs on many ranks.
fn program_events_bound(program: &Program) -> u64 {
    let per_step = |step: &Step| {
        let dpus = match step {
            Step::Host { .. } => 0,
            Step::Transfer { sizes_bytes, .. } => sizes_bytes.len(),
            Step::Launch { dpu_time, .. } => dpu_time.len(),
        };
        MAX_EVENTS_PER_STEP_AND_DPU.saturating_mul(dpus as u64 + 1)
    };
    (program.steps.iter()).fold(0u64, |sum, step| sum.saturating_add(per_step(step)))
}

/// The machine's system-level components running batches.
pub struct Executor<'p, E> {
    p: Params,
    protocol: Protocol,
    total_batches: u64,
    queue: EventQueue<Key, Time>,
    pool: FluidShare<u32>,
    /// The host's memory system, one share per direction (its own cap each).
    memory: [FluidShare<u32>; 2],
    lanes: Vec<Lane>,
    slots: Vec<Slot>,
    /// The slot whose batch holds the DPUs, and the next batch allowed to take them.
    dpu_holder: Option<u32>,
    dpu_turn: u64,
    /// Batches whose spans are kept.
    keep_spans: std::ops::Range<u64>,
    /// Started batches that never use the DPUs and whose turn has not come yet.
    without_phase: std::collections::BTreeSet<u64>,
    next_batch: u64,
    /// Queries taken by batches so far (open arrivals).
    consumed: u64,
    timeline: Timeline,
    prepare: Box<dyn FnMut(u64, u64) -> Result<Program, E> + 'p>,
    done: Vec<u32>,
    /// Events the batches started so far may take in all ([`program_events_bound`]).
    events_allowed: u64,
}

/// Which part of a step a lane job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    Transfer,
    Launch,
    /// Async: the read of one rank after its completion was seen.
    Read,
}

impl<'p, E: From<PastCeiling>> Executor<'p, E> {
    /// Runs `total_batches` batches under `protocol`. `prepare(b, n)` computes batch `b`
    /// with its first `n` queries functionally and returns its program; it is called when
    /// the batch starts, in batch order.
    pub fn run(
        machine: &Machine,
        protocol: Protocol,
        total_batches: u64,
        prepare: impl FnMut(u64, u64) -> Result<Program, E> + 'p,
    ) -> Result<Timeline, E> {
        Self::run_keeping(machine, protocol, total_batches, 0..u64::MAX, prepare)
    }

    /// As [`Executor::run`], keeping the spans of the batches in `keep_spans` only (spans
    /// are for traces; a long run without a trace keeps none).
    pub fn run_keeping(
        machine: &Machine,
        protocol: Protocol,
        total_batches: u64,
        keep_spans: std::ops::Range<u64>,
        prepare: impl FnMut(u64, u64) -> Result<Program, E> + 'p,
    ) -> Result<Timeline, E> {
        assert!(
            protocol.batches_in_flight >= 1,
            "at least one batch in flight"
        );
        let mut p = Params::new(machine);
        if let Some(interval) = protocol.poll_interval {
            p.poll_interval = interval;
        }
        let ranks = p.dpus_per_rank.len();
        let slots = protocol.batches_in_flight as usize;
        let mut ex = Executor {
            queue: EventQueue::new(3 + 2 * ranks + slots),
            pool: FluidShare::new(p.threads as u64 * 1000, slots),
            memory: p.memory_caps.map(|(cap, _)| FluidShare::new(cap, ranks)),
            lanes: (0..ranks).map(|_| Lane::default()).collect(),
            slots: (0..slots).map(|_| Slot::default()).collect(),
            p,
            protocol,
            total_batches,
            dpu_holder: None,
            dpu_turn: 0,
            without_phase: std::collections::BTreeSet::new(),
            keep_spans,
            next_batch: 0,
            consumed: 0,
            timeline: Timeline::default(),
            prepare: Box::new(prepare),
            done: Vec::new(),
            events_allowed: MAX_EVENTS_PER_BATCH,
        };
        for s in 0..slots as u32 {
            ex.slot_free(s, Time::ZERO)?;
        }
        let mut events = 0u64;
        while let Some((now, key)) = ex.queue.pop() {
            if now > CEILING {
                return Err(E::from(PastCeiling {
                    batch: ex.earliest_unfinished_batch(),
                }));
            }
            events += 1;
            assert!(
                events <= ex.events_allowed,
                "the system model ran away: {events} events, {} allowed",
                ex.events_allowed
            );
            ex.handle(now, key)?;
        }
        assert!(
            ex.slots.iter().all(|s| s.active.is_none()),
            "every batch ran to its end"
        );
        assert_eq!(ex.next_batch, total_batches, "every batch started");
        let end = ex.timeline.batches.last().map_or(Time::ZERO, |b| b.end);
        ex.timeline.backlog_at_end = match protocol.arrival {
            Arrival::Closed => 0,
            Arrival::Open { fs_per_query } => {
                arrived_by(fs_per_query, end).saturating_sub(ex.consumed)
            }
        };
        Ok(ex.timeline)
    }

    /// The earliest batch still running, or else the next to start: the one that passed
    /// the ceiling (every batch still running has, and with batches in flight a later one
    /// may have started before an earlier one ended).
    fn earliest_unfinished_batch(&self) -> u64 {
        let running = self.slots.iter().filter_map(|s| s.active.as_ref());
        running
            .map(|a| a.timing.batch)
            .min()
            .unwrap_or(self.next_batch)
            .min(self.total_batches.saturating_sub(1))
    }

    fn handle(&mut self, now: Time, key: Key) -> Result<(), E> {
        match key {
            Key::Pool => {
                let mut done = std::mem::take(&mut self.done);
                self.pool.take_completed(now, &mut done);
                for &s in &done {
                    self.host_task_done(s, now)?;
                }
                self.done = done;
                self.reschedule(Key::Pool);
            }
            Key::Memory(d) => {
                let mut done = std::mem::take(&mut self.done);
                self.memory[d as usize].take_completed(now, &mut done);
                for &r in &done {
                    self.lane_op_done(r, now)?;
                }
                self.done = done;
                self.reschedule(Key::Memory(d));
            }
            Key::Lane(r) => self.lane_op_done(r, now)?,
            Key::Detect(r) => self.detected(r, now)?,
            Key::Start(s) => self.slot_free(s, now)?,
        }
        Ok(())
    }

    fn reschedule(&mut self, key: Key) {
        let next = match key {
            Key::Pool => self.pool.next_completion(),
            Key::Memory(d) => self.memory[d as usize].next_completion(),
            _ => unreachable!("only shared resources are rescheduled"),
        };
        match next {
            Some(at) => self.schedule(key, at),
            None => {
                self.queue.cancel(&key);
            }
        }
    }

    fn schedule(&mut self, key: Key, at: Time) {
        self.queue
            .schedule(key, at)
            .expect("the system queue holds one event per component");
    }

    fn active(&mut self, s: u32) -> &mut Active {
        self.slots[s as usize]
            .active
            .as_mut()
            .expect("the slot runs a batch")
    }

    /// Keeps `span` if its batch is among those whose spans are kept.
    fn span(&mut self, span: Span) {
        if self.keep_spans.contains(&span.batch) {
            self.timeline.spans.push(span);
        }
    }
}

mod batches;
mod ranks;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::program::Class;

    /// A batch of many rounds on many ranks takes more events than the fixed allowance per
    /// batch (1,024 in unit tests); its program's allowance lets it run to its end.
    #[test]
    fn a_batch_of_many_rounds_on_many_ranks_is_not_a_runaway() {
        let machine = Machine::from_toml_str(
            "upmem-2556-350mhz.toml",
            include_str!("../../../machines/upmem-2556-350mhz.toml"),
            &[],
        )
        .unwrap();
        let dpus = machine.dpus as usize;
        let stages = vec![
            Stage {
                name: "transfer",
                class: Class::Communication,
            },
            Stage {
                name: "kernel",
                class: Class::Pim,
            },
        ];
        let round = [
            Step::Transfer {
                stage: 0,
                direction: Direction::CpuDpu,
                kind: TransferKind::Parallel,
                sizes_bytes: vec![8; dpus],
            },
            Step::Launch {
                stage: 1,
                dpu_time: vec![Time(1_000_000); dpus],
            },
        ];
        let program = Program {
            stages,
            steps: round.iter().cycle().take(40).cloned().collect(),
        };
        let bound = program_events_bound(&program);
        let timeline =
            Executor::<PastCeiling>::run(&machine, Protocol::sequential(1), 2, |_, _| {
                Ok(program.clone())
            })
            .unwrap();
        assert_eq!(timeline.batches.len(), 2);
        // 2 batches x 20 rounds x 40 ranks x (a call, its bytes, a launch, ...) is beyond
        // the fixed allowance of 3 x 1,024 events (which stopped such runs before); the
        // programs' allowance is far above the events.
        assert!(bound > 10 * MAX_EVENTS_PER_BATCH, "{bound}");
    }
}
