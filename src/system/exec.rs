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
//! `launch = async`: the host polls every `transfer.poll_interval_us` from the launch on; a
//! rank seen finished is read at once (its ownership switch, then its own transfer call),
//! while the others run. The DPU phase of a batch (its first rank step to its last) holds
//! the DPUs: phases run one at a time, in batch order.

use super::program::{Direction, Program, Stage, Step, TransferKind};
use crate::engine::{EventQueue, FluidShare, PS_PER_S, Time};
use crate::machine::Machine;
use std::collections::VecDeque;

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
}

impl Protocol {
    /// One batch at a time, synchronous launches, closed arrivals.
    pub fn sequential(batch_size: u64) -> Protocol {
        Protocol {
            launch: LaunchMode::Sync,
            batches_in_flight: 1,
            arrival: Arrival::Closed,
            batch_size,
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
    pub stage: usize,
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
            Time(u64::try_from(fs / 1000).expect("arrival times fit u64 picoseconds"))
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
    Memory,
    Lane(u32),
    Detect(u32),
    Start(u32),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum LaneWork {
    Fixed(Time),
    Flow { bytes: u64, limit_bytes_per_s: u64 },
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
    /// The rank whose read ended last so far.
    last: Option<u32>,
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
}

#[derive(Debug, Default)]
struct Slot {
    active: Option<Active>,
    control: VecDeque<HostTask>,
    running: Option<(HostTask, Time)>,
}

/// The components' parameters, from the machine file.
struct Params {
    call_fixed: Time,
    launch_fixed: Time,
    switch_per_rank: Time,
    poll_interval: Time,
    rates: [(u64, u64); 2],
    broadcast_rank: u64,
    threads: u32,
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
            launch_fixed: t.launch_fixed,
            switch_per_rank: t.ownership_switch_per_rank,
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

    fn rates(&self, d: Direction) -> (u64, u64) {
        self.rates[matches!(d, Direction::DpuCpu) as usize]
    }
}

/// Upper bound on the executor's events per batch step and rank, to stop a runaway model.
const MAX_EVENTS_PER_BATCH: u64 = 1 << 24;

/// The machine's system-level components running batches.
pub struct Executor<'p, E> {
    p: Params,
    protocol: Protocol,
    total_batches: u64,
    queue: EventQueue<Key, Time>,
    pool: FluidShare<u32>,
    memory: FluidShare<u32>,
    lanes: Vec<Lane>,
    slots: Vec<Slot>,
    /// The slot whose batch holds the DPUs, and the next batch allowed to take them.
    dpu_holder: Option<u32>,
    dpu_turn: u64,
    next_batch: u64,
    /// Queries taken by batches so far (open arrivals).
    consumed: u64,
    timeline: Timeline,
    prepare: Box<dyn FnMut(u64, u64) -> Result<Program, E> + 'p>,
    done: Vec<u32>,
}

/// Which part of a step a lane job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    Transfer,
    Launch,
    /// Async: the read of one rank after its completion was seen.
    Read,
}

impl<'p, E> Executor<'p, E> {
    /// Runs `total_batches` batches under `protocol`. `prepare(b, n)` computes batch `b`
    /// with its first `n` queries functionally and returns its program; it is called when
    /// the batch starts, in batch order.
    pub fn run(
        machine: &Machine,
        protocol: Protocol,
        total_batches: u64,
        prepare: impl FnMut(u64, u64) -> Result<Program, E> + 'p,
    ) -> Result<Timeline, E> {
        assert!(
            protocol.batches_in_flight >= 1,
            "at least one batch in flight"
        );
        let p = Params::new(machine);
        let ranks = p.dpus_per_rank.len();
        let slots = protocol.batches_in_flight as usize;
        let mut ex = Executor {
            queue: EventQueue::new(2 + 2 * ranks + slots),
            pool: FluidShare::new(p.threads as u64 * 1000, slots),
            memory: FluidShare::new(machine.transfer.host_cap_bytes_per_s, ranks),
            lanes: (0..ranks).map(|_| Lane::default()).collect(),
            slots: (0..slots).map(|_| Slot::default()).collect(),
            p,
            protocol,
            total_batches,
            dpu_holder: None,
            dpu_turn: 0,
            next_batch: 0,
            consumed: 0,
            timeline: Timeline::default(),
            prepare: Box::new(prepare),
            done: Vec::new(),
        };
        for s in 0..slots as u32 {
            ex.slot_free(s, Time::ZERO)?;
        }
        let limit = MAX_EVENTS_PER_BATCH.saturating_mul(total_batches + 1);
        let mut events = 0u64;
        while let Some((now, key)) = ex.queue.pop() {
            events += 1;
            assert!(
                events <= limit,
                "the system model ran away: {events} events"
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
            Key::Memory => {
                let mut done = std::mem::take(&mut self.done);
                self.memory.take_completed(now, &mut done);
                for &r in &done {
                    self.lane_op_done(r, now)?;
                }
                self.done = done;
                self.reschedule(Key::Memory);
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
            Key::Memory => self.memory.next_completion(),
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

    fn span(&mut self, s: u32, track: Track, what: (&'static str, usize), at: (Time, Time)) {
        let batch = self.active(s).timing.batch;
        self.timeline.spans.push(Span {
            batch,
            track,
            name: what.0,
            stage: what.1,
            start: at.0,
            end: at.1,
            bytes: 0,
            threads: 0,
        });
    }

    // ---- batches and slots ----

    fn slot_free(&mut self, s: u32, now: Time) -> Result<(), E> {
        if self.next_batch >= self.total_batches {
            return Ok(());
        }
        let n = match self.protocol.arrival {
            Arrival::Closed => self.protocol.batch_size,
            Arrival::Open { fs_per_query } => {
                let waiting = arrived_by(fs_per_query, now).saturating_sub(self.consumed);
                if waiting == 0 {
                    let next = arrival_time(self.protocol.arrival, self.consumed);
                    self.schedule(Key::Start(s), next.max(now));
                    return Ok(());
                }
                waiting.min(self.protocol.batch_size)
            }
        };
        self.start_batch(s, now, n)
    }

    fn start_batch(&mut self, s: u32, now: Time, queries: u64) -> Result<(), E> {
        let batch = self.next_batch;
        self.next_batch += 1;
        let program = (self.prepare)(batch, queries)?;
        program.assert_valid(self.p.dpus);
        let first_query = self.consumed;
        self.consumed += queries;
        self.slots[s as usize].active = Some(Active {
            timing: BatchTiming {
                batch,
                slot: s,
                queries,
                first_query,
                start: now,
                end: now,
                stages: program.stages.clone(),
                segments: Vec::new(),
            },
            program,
            pc: 0,
            outstanding: 0,
            step_start: now,
            holds_dpus: false,
            waiting_since: None,
            plan: Vec::new(),
            serial: VecDeque::new(),
            fused: None,
        });
        self.skip_turns_without_phase();
        self.issue_step(s, now)
    }

    fn finish_batch(&mut self, s: u32, now: Time) -> Result<(), E> {
        let mut active = self.slots[s as usize]
            .active
            .take()
            .expect("the slot runs a batch");
        active.timing.end = now;
        let t = &active.timing;
        let mut at = t.start;
        for seg in &t.segments {
            assert_eq!(seg.start, at, "segments of batch {} tile its time", t.batch);
            at = seg.end;
        }
        assert_eq!(at, t.end, "segments of batch {} end with it", t.batch);
        self.timeline.batches.push(active.timing);
        self.slot_free(s, now)
    }

    /// Batches without a DPU phase do not take a turn on the DPUs.
    fn skip_turns_without_phase(&mut self) {
        loop {
            let turn = self.dpu_turn;
            let without = self.slots.iter().any(|sl| {
                sl.active
                    .as_ref()
                    .is_some_and(|a| a.timing.batch == turn && a.program.dpu_phase().is_none())
            });
            if !without {
                return;
            }
            self.dpu_turn += 1;
        }
    }

    /// Starts the step at the slot's program counter (or ends the batch).
    fn issue_step(&mut self, s: u32, now: Time) -> Result<(), E> {
        let a = self.active(s);
        if a.pc == a.program.steps.len() {
            return self.finish_batch(s, now);
        }
        let phase_start = a.program.dpu_phase().map(|(first, _)| first);
        if phase_start == Some(a.pc) && !a.holds_dpus {
            let batch = a.timing.batch;
            if self.dpu_holder.is_some() || self.dpu_turn != batch {
                self.active(s).waiting_since = Some(now);
                return Ok(());
            }
            self.dpu_holder = Some(s);
            self.active(s).holds_dpus = true;
        }
        let a = self.active(s);
        a.step_start = now;
        match a.program.steps[a.pc].clone() {
            Step::Host {
                stage,
                label,
                work_ps,
                threads,
            } => {
                let task = HostTask {
                    stage,
                    name: label,
                    work_ps,
                    threads,
                    then: Then::StepDone,
                };
                self.slots[s as usize].control.push_back(task);
                self.run_control(s, now);
                Ok(())
            }
            Step::Transfer { .. } => self.begin_transfer(s, now),
            Step::Launch { stage, dpu_time } => self.begin_launch(s, now, stage, &dpu_time),
        }
    }

    /// The current step (or fused pair) is complete at `now`.
    fn step_done(&mut self, s: u32, now: Time) -> Result<(), E> {
        let a = self.active(s);
        let stage = a.program.steps[a.pc].stage();
        let start = a.step_start;
        match a.fused.take() {
            Some(f) => {
                let read_stage = a.program.steps[a.pc + 1].stage();
                let split = f
                    .last
                    .and_then(|r| f.detected[r as usize])
                    .unwrap_or(now)
                    .clamp(start, now);
                a.timing.segments.push(Segment {
                    stage: Some(f.launch_stage),
                    start,
                    end: split,
                });
                a.timing.segments.push(Segment {
                    stage: Some(read_stage),
                    start: split,
                    end: now,
                });
                a.pc += 2;
            }
            None => {
                a.timing.segments.push(Segment {
                    stage: Some(stage),
                    start,
                    end: now,
                });
                a.pc += 1;
            }
        }
        let phase_end = a.program.dpu_phase().map(|(_, end)| end);
        if a.holds_dpus && phase_end == Some(a.pc) {
            a.holds_dpus = false;
            self.release_dpus(now)?;
        }
        self.issue_step(s, now)
    }

    fn release_dpus(&mut self, now: Time) -> Result<(), E> {
        self.dpu_holder = None;
        self.dpu_turn += 1;
        self.skip_turns_without_phase();
        let turn = self.dpu_turn;
        let next = (0..self.slots.len() as u32).find(|&s| {
            self.slots[s as usize]
                .active
                .as_ref()
                .is_some_and(|a| a.timing.batch == turn && a.waiting_since.is_some())
        });
        if let Some(s) = next {
            let since = self.active(s).waiting_since.take().expect("found waiting");
            self.active(s).timing.segments.push(Segment {
                stage: None,
                start: since,
                end: now,
            });
            if since < now {
                self.span(s, Track::Slot(s), ("waiting for the DPUs", 0), (since, now));
            }
            self.issue_step(s, now)?;
        }
        Ok(())
    }

    // ---- host work ----

    fn run_control(&mut self, s: u32, now: Time) {
        let slot = &mut self.slots[s as usize];
        if slot.running.is_some() {
            return;
        }
        let Some(task) = slot.control.pop_front() else {
            return;
        };
        slot.running = Some((task, now));
        let threads = task.threads.clamp(1, self.p.threads) as u64;
        self.pool
            .add(now, s, task.work_ps as u128 * 1000, threads * 1000);
        self.reschedule(Key::Pool);
    }

    fn host_task_done(&mut self, s: u32, now: Time) -> Result<(), E> {
        let (task, start) = self.slots[s as usize]
            .running
            .take()
            .expect("a host task was running");
        self.span(s, Track::Slot(s), (task.name, task.stage), (start, now));
        if let Some(span) = self.timeline.spans.last_mut() {
            span.threads = task.threads;
        }
        match task.then {
            Then::StepDone => self.step_done(s, now)?,
            Then::Transfer => self.start_transfer_lanes(s, now)?,
            Then::ReadRank(r) => self.read_rank(s, r, now),
        }
        self.run_control(s, now);
        Ok(())
    }

    fn switch_task(&self, stage: usize, ranks: u64, then: Then) -> HostTask {
        HostTask {
            stage,
            name: "ownership switch",
            work_ps: self.p.switch_per_rank.ps() * ranks,
            threads: 1,
            then,
        }
    }
}

impl<'p, E> Executor<'p, E> {
    // ---- transfers ----

    /// Per rank of a parallel or broadcast transfer: bytes moved (padded) and rate limit.
    fn rank_plan(
        &self,
        direction: Direction,
        kind: TransferKind,
        sizes: &[u64],
    ) -> Vec<(u32, u64, u64)> {
        let (dpu_rate, rank_rate) = self.p.rates(direction);
        let mut plan = Vec::new();
        for r in 0..self.p.dpus_per_rank.len() {
            let sizes = &sizes[self.p.rank_dpus(r)];
            match kind {
                TransferKind::Serial => {
                    plan.extend(
                        sizes
                            .iter()
                            .filter(|&&b| b > 0)
                            .map(|&b| (r as u32, b, dpu_rate)),
                    );
                }
                TransferKind::Parallel | TransferKind::Broadcast => {
                    let n = sizes.iter().filter(|&&b| b > 0).count() as u64;
                    let max = sizes.iter().copied().max().unwrap_or(0);
                    if n == 0 {
                        continue;
                    }
                    let rank_rate = match kind {
                        TransferKind::Broadcast => self.p.broadcast_rank,
                        _ => rank_rate,
                    };
                    let limit = rank_rate.min(dpu_rate.saturating_mul(n));
                    plan.push((r as u32, n * max, limit));
                }
            }
        }
        plan
    }

    fn begin_transfer(&mut self, s: u32, now: Time) -> Result<(), E> {
        let (stage, plan) = {
            let a = self.slots[s as usize]
                .active
                .as_ref()
                .expect("the slot runs a batch");
            let Step::Transfer {
                stage,
                direction,
                kind,
                sizes_bytes,
            } = &a.program.steps[a.pc]
            else {
                unreachable!("begin_transfer on a transfer step")
            };
            assert!(
                *kind != TransferKind::Broadcast || *direction == Direction::CpuDpu,
                "a broadcast goes from the host to the DPUs"
            );
            (*stage, self.rank_plan(*direction, *kind, sizes_bytes))
        };
        if plan.is_empty() {
            return self.step_done(s, now);
        }
        let mut owned: Vec<u32> = plan.iter().map(|&(r, _, _)| r).collect();
        owned.dedup();
        owned.retain(|&r| self.lanes[r as usize].dpus_own_mram);
        self.active(s).plan = plan;
        if owned.is_empty() {
            return self.start_transfer_lanes(s, now);
        }
        for &r in &owned {
            self.lanes[r as usize].dpus_own_mram = false;
        }
        let task = self.switch_task(stage, owned.len() as u64, Then::Transfer);
        self.slots[s as usize].control.push_back(task);
        self.run_control(s, now);
        Ok(())
    }
}

impl<'p, E> Executor<'p, E> {
    /// The current transfer step's (name, stage, kind) for its lane ops.
    fn transfer_of(&mut self, s: u32) -> (&'static str, usize, TransferKind) {
        let a = self.active(s);
        match &a.program.steps[a.pc] {
            Step::Transfer {
                stage,
                direction,
                kind,
                ..
            } => {
                let name = match (kind, direction) {
                    (TransferKind::Broadcast, _) => "broadcast",
                    (TransferKind::Parallel, Direction::CpuDpu) => "push",
                    (TransferKind::Parallel, Direction::DpuCpu) => "pull",
                    (TransferKind::Serial, Direction::CpuDpu) => "copy to",
                    (TransferKind::Serial, Direction::DpuCpu) => "copy from",
                };
                (name, *stage, *kind)
            }
            _ => unreachable!("a transfer step"),
        }
    }

    fn start_transfer_lanes(&mut self, s: u32, now: Time) -> Result<(), E> {
        let (name, stage, kind) = self.transfer_of(s);
        let plan = std::mem::take(&mut self.active(s).plan);
        if kind == TransferKind::Serial {
            self.active(s).serial = plan.into();
            self.active(s).outstanding = 1;
            self.next_serial(s, now);
            return Ok(());
        }
        self.active(s).outstanding = plan.len() as u32;
        for (r, bytes, limit) in plan {
            self.push_transfer_ops(s, r, (name, stage), (bytes, limit), Job::Transfer, now);
        }
        Ok(())
    }

    /// Starts the next call of a serial transfer; false when none is left.
    fn next_serial(&mut self, s: u32, now: Time) -> bool {
        let (name, stage, _) = self.transfer_of(s);
        let Some((r, bytes, limit)) = self.active(s).serial.pop_front() else {
            return false;
        };
        self.push_transfer_ops(s, r, (name, stage), (bytes, limit), Job::Transfer, now);
        true
    }

    /// One SDK call on rank `r`: its fixed cost, then its bytes through the memory system.
    fn push_transfer_ops(
        &mut self,
        s: u32,
        r: u32,
        what: (&'static str, usize),
        flow: (u64, u64),
        job: Job,
        now: Time,
    ) {
        let lane = &mut self.lanes[r as usize];
        lane.queue.push_back(LaneOp {
            slot: s,
            stage: what.1,
            name: "call",
            work: LaneWork::Fixed(self.p.call_fixed),
            ends_job: false,
            job,
        });
        lane.queue.push_back(LaneOp {
            slot: s,
            stage: what.1,
            name: what.0,
            work: LaneWork::Flow {
                bytes: flow.0,
                limit_bytes_per_s: flow.1,
            },
            ends_job: true,
            job,
        });
        self.kick_lane(r, now);
    }

    // ---- launches ----

    fn begin_launch(
        &mut self,
        s: u32,
        now: Time,
        stage: usize,
        dpu_time: &[Time],
    ) -> Result<(), E> {
        let fused_reads = self.fused_reads(s);
        let ranks = self.p.dpus_per_rank.len();
        if let Some(reads) = fused_reads {
            self.active(s).fused = Some(Fused {
                launch_stage: stage,
                detected: vec![None; ranks],
                last: None,
                reads,
            });
        }
        let mut launched = 0;
        for r in 0..ranks {
            let range = self.p.rank_dpus(r);
            if range.is_empty() {
                continue;
            }
            let kernel = dpu_time[range].iter().copied().max().unwrap_or(Time::ZERO);
            let lane = &mut self.lanes[r];
            for (name, work, ends_job) in [
                ("launch", LaneWork::Fixed(self.p.launch_fixed), false),
                ("kernel", LaneWork::Kernel(kernel), true),
            ] {
                lane.queue.push_back(LaneOp {
                    slot: s,
                    stage,
                    name,
                    work,
                    ends_job,
                    job: Job::Launch,
                });
            }
            launched += 1;
            self.kick_lane(r as u32, now);
        }
        self.active(s).outstanding = launched;
        if launched == 0 {
            return self.step_done(s, now);
        }
        Ok(())
    }

    /// In async mode, a launch followed by a parallel read is done as one: each rank is
    /// read as soon as the host sees it finished. The reads' plan per rank, if so.
    fn fused_reads(&mut self, s: u32) -> Option<Vec<Option<(u64, u64)>>> {
        if self.protocol.launch != LaunchMode::Async {
            return None;
        }
        let a = self.slots[s as usize]
            .active
            .as_ref()
            .expect("the slot runs a batch");
        let Some(Step::Transfer {
            direction: Direction::DpuCpu,
            kind: TransferKind::Parallel,
            sizes_bytes,
            ..
        }) = a.program.steps.get(a.pc + 1)
        else {
            return None;
        };
        let mut reads = vec![None; self.p.dpus_per_rank.len()];
        for (r, bytes, limit) in
            self.rank_plan(Direction::DpuCpu, TransferKind::Parallel, sizes_bytes)
        {
            reads[r as usize] = Some((bytes, limit));
        }
        Some(reads)
    }

    /// When the host, polling from the launch on, sees a rank that finished at `done`.
    fn seen_at(&self, launched: Time, done: Time) -> Time {
        let interval = self.p.poll_interval.ps();
        if interval == 0 {
            return done;
        }
        let polls = (done - launched).ps().div_ceil(interval);
        launched + Time(polls * interval)
    }

    // ---- lanes ----

    fn kick_lane(&mut self, r: u32, now: Time) {
        let lane = &mut self.lanes[r as usize];
        if lane.running.is_some() {
            return;
        }
        let Some(op) = lane.queue.pop_front() else {
            return;
        };
        lane.running = Some((op, now));
        match op.work {
            LaneWork::Fixed(d) => self.schedule(Key::Lane(r), now + d),
            LaneWork::Kernel(d) => {
                lane.dpus_own_mram = true;
                self.schedule(Key::Lane(r), now + d);
            }
            LaneWork::Flow {
                bytes,
                limit_bytes_per_s,
            } => {
                let units = bytes as u128 * PS_PER_S as u128;
                self.memory.add(now, r, units, limit_bytes_per_s);
                self.reschedule(Key::Memory);
            }
        }
    }

    fn lane_op_done(&mut self, r: u32, now: Time) -> Result<(), E> {
        let (op, start) = self.lanes[r as usize]
            .running
            .take()
            .expect("an op was running on the lane");
        self.span(op.slot, Track::Rank(r), (op.name, op.stage), (start, now));
        if let (LaneWork::Flow { bytes, .. }, Some(span)) =
            (op.work, self.timeline.spans.last_mut())
        {
            span.bytes = bytes;
        }
        if op.ends_job {
            self.job_done(op.slot, r, op.job, now)?;
        }
        self.kick_lane(r, now);
        Ok(())
    }

    fn job_done(&mut self, s: u32, r: u32, job: Job, now: Time) -> Result<(), E> {
        match job {
            Job::Transfer => {
                if self.next_serial(s, now) {
                    return Ok(());
                }
            }
            Job::Launch if self.protocol.launch == LaunchMode::Async => {
                let launched = self.active(s).step_start;
                let at = self.seen_at(launched, now);
                self.schedule(Key::Detect(r), at);
                return Ok(());
            }
            Job::Launch => {}
            Job::Read => {
                let f = self
                    .active(s)
                    .fused
                    .as_mut()
                    .expect("reads belong to a fused launch");
                f.last = Some(r);
            }
        }
        self.one_job_less(s, now)
    }

    fn one_job_less(&mut self, s: u32, now: Time) -> Result<(), E> {
        let a = self.active(s);
        a.outstanding -= 1;
        if a.outstanding == 0 {
            return self.step_done(s, now);
        }
        Ok(())
    }

    /// Async: the host has seen rank `r` finished.
    fn detected(&mut self, r: u32, now: Time) -> Result<(), E> {
        let s = self
            .dpu_holder
            .expect("a batch holds the DPUs while they run");
        let a = self.active(s);
        let read = match a.fused.as_mut() {
            None => None,
            Some(f) => {
                f.detected[r as usize] = Some(now);
                let read = f.reads[r as usize];
                if read.is_none() {
                    f.last = Some(r);
                }
                read
            }
        };
        if read.is_none() {
            return self.one_job_less(s, now);
        }
        let stage = {
            let a = self.active(s);
            a.program.steps[a.pc + 1].stage()
        };
        self.lanes[r as usize].dpus_own_mram = false;
        let task = self.switch_task(stage, 1, Then::ReadRank(r));
        self.slots[s as usize].control.push_back(task);
        self.run_control(s, now);
        Ok(())
    }

    fn read_rank(&mut self, s: u32, r: u32, now: Time) {
        let a = self.active(s);
        let stage = a.program.steps[a.pc + 1].stage();
        let read = a.fused.as_ref().and_then(|f| f.reads[r as usize]);
        let (bytes, limit) = read.expect("only ranks with results are read");
        self.push_transfer_ops(s, r, ("pull", stage), (bytes, limit), Job::Read, now);
    }
}
