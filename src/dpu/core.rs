//! The timing state of one DPU during a launch: the revolver pipeline (a fluid
//! processor-sharing model, exact in integers), the DMA engine, mutexes and barriers, and
//! the WRAM and MRAM bytes. Tasklet code never touches this directly; it goes through
//! [`super::Tasklet`].
//!
//! # Pipeline model
//!
//! With `R` tasklets computing, each progresses at `min(1/I, W/R)` instructions per cycle,
//! where `I` is `dpu.pipeline.tasklet_issue_interval_cycles` (11) and `W` is
//! `dpu.pipeline.issue_slots_per_cycle` (1): one tasklet alone issues every 11 cycles; 11 or
//! more share the one issue slot per cycle round-robin. Progress is tracked as *virtual
//! work* `V` (work units done by every computing tasklet since the launch began) in units
//! of `1/S` instruction, with `S = lcm(I, 1..=max_tasklets)`, so every rate is an integer
//! number of units per cycle and nothing is rounded except a completion time, which is
//! rounded up to a whole cycle. A compute of `n` instructions started when the virtual work
//! was `V0` finishes when `V` reaches `V0 + n*S`; the pipeline keeps one pending completion
//! (`pipeline_next`) for the earliest such finish and moves it whenever `R` changes. It is
//! kept beside the event queue rather than in it (the queue then holds only DMA
//! completions and wake-ups), which halves the queue traffic; the executor takes whichever
//! is earlier, and at equal times the queue's events first. This is the round-robin schedule
//! averaged over a rotation: it gives exactly `11 n` cycles for one tasklet and `R n` cycles
//! for `R >= 11` tasklets of `n` instructions each.
//!
//! # DMA model
//!
//! One engine per DPU serves requests first-come first-served. A request issued at `a`
//! starts at `s = max(a, engine_free)`, keeps the engine busy until
//! `engine_free = s + occupancy(size)` and completes (the tasklet resumes) at
//! `s + latency(size)`, with `latency = alpha + beta x size` and
//! `occupancy = occupancy_fixed + occupancy_per_byte x size <= latency`. One tasklet thus sees
//! the measured latency curve, and many tasklets saturate at `size / occupancy` bytes per
//! cycle. Data moves when the request is issued (a kernel must not race on the buffers of
//! a DMA in flight, as on hardware).

use super::error::{KernelError, SyncKind, TaskletWait};
use super::mram::Mram;
use crate::engine::{SlotQueue, SortedRing};
use crate::machine::{DmaDirection, DpuParams};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::task::Poll;

/// Upper bound on events of one launch (about 4 minutes of simulation at 20 M events/s):
/// a kernel that loops forever is stopped with an error, not hung. Real launches need
/// orders of magnitude fewer.
pub const MAX_EVENTS_PER_LAUNCH: u64 = 1 << 32;

/// Upper bound on the operations of one launch that take no simulated time (a compute of
/// 0 instructions; a free mutex, an unlock or a barrier on a machine that charges them
/// nothing). Such an operation does not return to the executor, so a tasklet spinning on
/// them would never meet the event limit. Smaller in the crate's unit tests, so that
/// reaching it takes a moment there.
pub const MAX_FREE_OPERATIONS_PER_LAUNCH: u64 = if cfg!(test) { 1 << 16 } else { 1 << 32 };

/// Upper bound on the instructions one compute request charges (about 3 simulated hours
/// of one tasklet at 350 MHz); its completion time then fits 64 bits with room to spare.
pub const MAX_COMPUTE_INSTRUCTIONS: u64 = 1 << 40;

/// Upper bound on the cycles of one launch (about 400 years at 350 MHz). Times are added
/// with saturation, so a launch beyond it ends with an error, not a wrapped clock.
pub const MAX_LAUNCH_CYCLES: u64 = 1 << 62;

/// One DMA transfer a tasklet asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dma {
    pub(crate) direction: DmaDirection,
    pub(crate) mram_addr: u64,
    pub(crate) wram_addr: u32,
    pub(crate) size_bytes: u32,
}

/// A blocking request from a tasklet. (A compute followed by a DMA goes through
/// [`Core::issue_compute_then_dma`] instead: kept out of this enum, it leaves the requests
/// of every other await as small as they were.)
#[derive(Debug, Clone, Copy)]
pub(crate) enum Request {
    Compute(u64),
    Dma(Dma),
    Lock(u32),
    Unlock(u32),
    Barrier(u32),
}

// Every await holds a request: keep it three words (the DMA's direction leaves room for the
// tag).
const _: () = assert!(std::mem::size_of::<Request>() == 24);

/// What a tasklet does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Computing,
    Dma,
    Mutex(u32),
    Barrier(u32),
    Finished,
}

/// Counters of one launch.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LaunchStats {
    pub instructions: u64,
    pub dma_reads: u64,
    pub dma_writes: u64,
    pub dma_read_bytes: u64,
    pub dma_write_bytes: u64,
    /// Cycles the DMA engine was busy (sum of occupancies).
    pub dma_busy_cycles: u64,
    /// Events of the launch: DMA completions and wake-ups from the DPU's queue, and the
    /// pipeline's compute completions (one event however many tasklets it finishes).
    pub events: u64,
}

/// What a tasklet spends a span of cycles on, for a timeline. Issuing and waiting for the
/// pipeline are one activity: the pipeline model is a fluid share, so a tasklet between
/// two computes is not separable from one in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum TaskletActivity {
    /// Executing instructions or waiting for its turn in the revolver pipeline.
    Running,
    /// Waiting for a DMA transfer to complete.
    Dma,
    /// Waiting to acquire mutex `id`.
    Mutex { id: u32 },
    /// Waiting at barrier `id` for the other tasklets.
    Barrier { id: u32 },
}

/// One activity of one tasklet over the cycles `start_cycle..end_cycle` (never empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TaskletSpan {
    pub tasklet: u32,
    pub activity: TaskletActivity,
    pub start_cycle: u64,
    pub end_cycle: u64,
}

/// The per-tasklet timeline of one launch ([`super::Dpu::launch_recorded`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TaskletTimeline {
    /// Spans of tasklet 0 in time order, then those of tasklet 1, and so on. Unless
    /// `truncated`, the spans of one tasklet tile `0..` its finish cycle without gaps.
    pub spans: Vec<TaskletSpan>,
    /// The span bound was reached: recording stopped there, so the spans that would have
    /// closed later (including each tasklet's last) are missing.
    pub truncated: bool,
}

/// Sees the DPU after every step of the executor (the initial polls, then each event with
/// the polls it causes). Every state change of a step happens at that step's cycle, so
/// looking after each step misses only zero-length states, which a timeline drops anyway;
/// and the unrecorded launch, observed by `()`, keeps its hot paths untouched.
pub(crate) trait Observer {
    /// Takes the cell, not a borrow, so that `()` costs not even the borrow check.
    fn after_step(&mut self, core: &RefCell<Core>);
}

impl Observer for () {
    #[inline(always)]
    fn after_step(&mut self, _core: &RefCell<Core>) {}
}

/// Collects the spans of a recorded launch, at most `max_spans` of them.
pub(crate) struct Recorder {
    max_spans: usize,
    kept_spans: usize,
    truncated: bool,
    /// Closed spans of each tasklet in time order (per tasklet, so a span can merge with
    /// the tasklet's previous one when a zero-length span between them is dropped).
    closed: Vec<Vec<TaskletSpan>>,
    /// Each tasklet's current activity and the cycle it began; `None` once finished.
    open: Vec<Option<(TaskletActivity, u64)>>,
}

impl Observer for Recorder {
    fn after_step(&mut self, core: &RefCell<Core>) {
        let core = core.borrow();
        for tasklet in 0..core.tasklets {
            self.transition(tasklet, core.activity(tasklet), core.now);
        }
    }
}

impl Recorder {
    pub(crate) fn new(tasklets: u32, max_spans: usize) -> Recorder {
        Recorder {
            max_spans,
            kept_spans: 0,
            truncated: false,
            closed: vec![Vec::new(); tasklets as usize],
            open: vec![Some((TaskletActivity::Running, 0)); tasklets as usize],
        }
    }

    /// Notes that `tasklet` is doing `next` (`None`: finished) at cycle `now`.
    fn transition(&mut self, tasklet: u32, next: Option<TaskletActivity>, now: u64) {
        let t = tasklet as usize;
        let Some((activity, start_cycle)) = self.open[t] else {
            return;
        };
        if self.truncated || next == Some(activity) {
            return;
        }
        if start_cycle == now {
            // A zero-length span: drop it, and resume the previous span if it was `next`.
            let previous = self.closed[t].last().copied();
            self.open[t] = match (previous, next) {
                (Some(p), Some(n)) if p.activity == n && p.end_cycle == now => {
                    self.closed[t].pop();
                    self.kept_spans -= 1;
                    Some((n, p.start_cycle))
                }
                (_, n) => n.map(|n| (n, now)),
            };
            return;
        }
        if self.kept_spans == self.max_spans {
            self.truncated = true;
            return;
        }
        self.kept_spans += 1;
        self.closed[t].push(TaskletSpan {
            tasklet,
            activity,
            start_cycle,
            end_cycle: now,
        });
        self.open[t] = next.map(|n| (n, now));
    }

    /// The closed spans, tasklet by tasklet (a tasklet still open, only after a
    /// truncation, contributes only its closed spans).
    pub(crate) fn into_timeline(self) -> TaskletTimeline {
        TaskletTimeline {
            spans: self.closed.into_iter().flatten().collect(),
            truncated: self.truncated,
        }
    }
}

pub(crate) struct Core {
    pub(crate) params: DpuParams,
    pub(crate) dpu: u32,
    pub(crate) tasklets: u32,
    pub(crate) now: u64,
    /// DMA completions and wake-ups, keyed by tasklet (at most one pending each).
    pub(crate) queue: SlotQueue,
    /// When the earliest computing tasklet finishes (the pipeline's one pending event).
    pub(crate) pipeline_next: Option<u64>,
    // Pipeline (fluid round-robin).
    /// `S`, below 2^58 (see `start_compute`), so every rate and scaled count is one
    /// 64 x 64-bit multiplication.
    scale: u64,
    /// `rates[r]`: work units per cycle of each of `r` computing tasklets.
    rates: Vec<u64>,
    /// Divides by `rates[r]` (`rates[0]`, never a divisor, by 1).
    dividers: Vec<Divider>,
    virtual_work: u128,
    virtual_at: u64,
    /// The computing tasklets as `virtual finish << TASKLET_BITS | tasklet` (one number
    /// orders them by finish, then id), in increasing order: the next to finish is first.
    /// A new compute usually finishes after every pending one, so it is pushed at the back.
    computing: SortedRing<u128>,
    /// The smallest virtual finish in `computing` (its first entry's).
    first_finish: Option<u128>,
    // DMA engine.
    dma_free_at: u64,
    // Synchronisation.
    mutex_owner: Vec<Option<u32>>,
    mutex_waiters: Vec<VecDeque<u32>>,
    barrier_arrived: Vec<Vec<u32>>,
    state: Vec<State>,
    /// Set by the executor just before it polls a tasklet whose wait ended (and cleared
    /// again by [`Core::take_then_dma`], which goes on without a poll).
    pub(crate) woken: Vec<bool>,
    /// The DMA each computing tasklet issues when its compute finishes
    /// ([`Core::issue_compute_then_dma`]).
    then_dma: Vec<Option<Dma>>,
    /// The error of such a DMA, for the tasklet's next poll.
    then_dma_failed: Vec<Option<KernelError>>,
    /// A tasklet of this launch has asked for a DMA after a compute: the executor looks for
    /// such DMAs at each pipeline completion (a launch that never asks tests only this).
    pub(crate) folds: bool,
    pub(crate) finish_cycle: Vec<u64>,
    pub(crate) wram: Vec<u8>,
    pub(crate) heap_next: u64,
    /// WRAM address of the kernel's globals.
    pub(crate) globals: u32,
    pub(crate) mram: Mram,
    pub(crate) stats: LaunchStats,
    /// Operations of this launch that took no simulated time.
    free_operations: u64,
}

/// Exact division by a divisor fixed in advance, by a multiplication and shifts instead of
/// a 64-bit division (which takes tens of cycles). The pipeline divides by one of its few
/// rates on every change of the computing set. This is the round-down method of Granlund
/// and Montgomery ("Division by invariant integers using multiplication", PLDI 1994), in
/// its form without branches: exact for every dividend and every divisor from 1.
#[derive(Debug, Clone, Copy)]
struct Divider {
    multiplier: u64,
    shift_1: u32,
    shift_2: u32,
}

impl Divider {
    fn new(divisor: u64) -> Divider {
        assert!(divisor > 0, "a divider needs a positive divisor");
        // l = ceil(log2(divisor)); the multiplier is floor(2^64 (2^l - d) / d) + 1, below
        // 2^64 since 2^l - d < d.
        let l = 64 - (divisor - 1).leading_zeros();
        let excess = (1u128 << l) - divisor as u128;
        let multiplier = ((excess << 64) / divisor as u128 + 1) as u64;
        Divider {
            multiplier,
            shift_1: l.min(1),
            shift_2: l.saturating_sub(1),
        }
    }

    /// `floor(n / divisor)`.
    #[inline]
    fn div(self, n: u64) -> u64 {
        let t = ((self.multiplier as u128 * n as u128) >> 64) as u64;
        (t + ((n - t) >> self.shift_1)) >> self.shift_2
    }

    /// `ceil(n / divisor)`.
    #[inline]
    fn div_ceil(self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.div(n - 1) + 1 }
    }
}

/// Bits of a tasklet id in a pipeline entry (`dpu.max_tasklets` is at most 32).
const TASKLET_BITS: u32 = 5;
const TASKLET_MASK: u128 = (1 << TASKLET_BITS) - 1;

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Core {
    pub(crate) fn new(params: &DpuParams, dpu: u32, tasklets: u32, mram: Mram) -> Core {
        let mut scale = params.tasklet_issue_interval_cycles as u128;
        for r in 1..=params.max_tasklets as u128 {
            scale = scale / gcd(scale, r) * r;
        }
        let atomics = params.atomic_bits as usize;
        let stacks = tasklets as u64 * params.stack_bytes_per_tasklet as u64;
        let cap = scale / params.tasklet_issue_interval_cycles as u128;
        // Every rate is at most S / I, and S is below 2^58 (see `start_compute`).
        let scale = u64::try_from(scale).expect("the pipeline's scale is below 2^58");
        let rates: Vec<u64> = (0..=tasklets as u128)
            .map(|r| match r {
                0 => 0,
                r => cap.min(scale as u128 * params.issue_slots_per_cycle as u128 / r) as u64,
            })
            .collect();
        let dividers = rates.iter().map(|&r| Divider::new(r.max(1))).collect();
        Core {
            rates,
            dividers,
            params: params.clone(),
            dpu,
            tasklets,
            now: 0,
            // At most one pending wake per tasklet.
            queue: SlotQueue::new(tasklets as usize),
            pipeline_next: None,
            scale,
            virtual_work: 0,
            virtual_at: 0,
            computing: SortedRing::new(),
            first_finish: None,
            dma_free_at: 0,
            mutex_owner: vec![None; atomics],
            mutex_waiters: vec![VecDeque::new(); atomics],
            barrier_arrived: vec![Vec::new(); atomics],
            state: vec![State::Running; tasklets as usize],
            woken: vec![false; tasklets as usize],
            then_dma: vec![None; tasklets as usize],
            then_dma_failed: vec![None; tasklets as usize],
            folds: false,
            finish_cycle: vec![0; tasklets as usize],
            wram: vec![0; params.wram_size_bytes as usize],
            heap_next: stacks,
            globals: stacks as u32,
            mram,
            stats: LaunchStats::default(),
            free_operations: 0,
        }
    }

    /// Work units per cycle of each computing tasklet when `r` compute (precomputed: u128
    /// division is slow).
    fn rate(&self, r: usize) -> u64 {
        self.rates[r]
    }

    /// Brings the virtual work up to `now` at the rate of the current computing set.
    fn advance(&mut self) {
        if !self.computing.is_empty() {
            let dt = (self.now - self.virtual_at) as u128;
            self.virtual_work += dt * self.rate(self.computing.len()) as u128;
        }
        self.virtual_at = self.now;
    }

    /// Moves the pipeline's pending completion to the earliest finish of the computing set
    /// (`first_finish`, kept up to date by the callers).
    fn reschedule_compute(&mut self) {
        self.pipeline_next = self.first_finish.map(|first| {
            let left = first.saturating_sub(self.virtual_work);
            let r = self.computing.len();
            let dt = match u64::try_from(left) {
                Ok(l) => self.dividers[r].div_ceil(l),
                Err(_) => {
                    let cycles = left.div_ceil(self.rate(r) as u128);
                    u64::try_from(cycles).expect("compute time fits u64 cycles")
                }
            };
            self.now.saturating_add(dt)
        });
    }

    fn start_compute(&mut self, tasklet: u32, instructions: u64) -> Result<bool, KernelError> {
        // One comparison for both rare cases: 0 wraps to the largest count.
        if instructions.wrapping_sub(1) >= MAX_COMPUTE_INSTRUCTIONS {
            return self.free_or_too_long(tasklet, instructions);
        }
        self.stats.instructions = self.stats.instructions.saturating_add(instructions);
        self.advance();
        let finish = self.virtual_work + instructions as u128 * self.scale as u128;
        let (before, first_before) = (self.computing.len(), self.first_finish);
        // At most `tasklets` entries: a linear insertion keeps the order cheaply.
        // S = lcm(I, 1..=32) with I at most 1024 is below 2^58, so the virtual work (under
        // 2^64 cycles of at most S units) plus a compute's n x S (n at most 2^40) stays
        // below 2^123, and the shift loses nothing.
        debug_assert!(finish.leading_zeros() >= TASKLET_BITS && tasklet < 1 << TASKLET_BITS);
        let entry = finish << TASKLET_BITS | tasklet as u128;
        self.computing.insert(entry, |e| e > entry);
        // The new entry is the earliest finish if it went to the front.
        if first_before.is_none_or(|first| finish < first) {
            self.first_finish = Some(finish);
        }
        debug_assert_eq!(
            self.first_finish,
            self.computing.front().map(|e| e >> TASKLET_BITS)
        );
        self.state[tasklet as usize] = State::Computing;
        // While fewer tasklets compute than the pipeline interleaves, each keeps its full
        // rate; if the earliest finish is the same too, so is the pending completion
        // (the virtual work grew by exactly the elapsed cycles times that rate), and the
        // division can be skipped.
        let same_rate = before > 0 && self.rate(before) == self.rate(before + 1);
        if !(same_rate && self.first_finish == first_before) {
            self.reschedule_compute();
        }
        Ok(false)
    }

    /// A compute of no instructions, done at once (`Ok(true)`) unless the launch has done
    /// too many such operations, or one of more than [`MAX_COMPUTE_INSTRUCTIONS`].
    #[cold]
    fn free_or_too_long(&mut self, tasklet: u32, instructions: u64) -> Result<bool, KernelError> {
        if instructions > 0 {
            return Err(KernelError::ComputeTooLong {
                tasklet,
                instructions,
                limit: MAX_COMPUTE_INSTRUCTIONS,
            });
        }
        self.free_operations += 1;
        if self.free_operations > MAX_FREE_OPERATIONS_PER_LAUNCH {
            return Err(KernelError::FreeOperationLimit {
                tasklet,
                limit: MAX_FREE_OPERATIONS_PER_LAUNCH,
            });
        }
        Ok(true)
    }

    /// Handles the pipeline's completion: puts the tasklets that finished into `done`, in
    /// the order (finish, tasklet id), and marks them woken.
    pub(crate) fn finish_computes(&mut self, done: &mut Vec<u32>) {
        self.advance();
        let v = self.virtual_work;
        done.clear();
        // The finishers come off the front of the sorted set in (finish, id) order.
        while let Some(e) = self.computing.front() {
            let t = (e & TASKLET_MASK) as u32;
            if e >> TASKLET_BITS > v {
                break;
            }
            self.computing.pop_front();
            done.push(t);
        }
        self.first_finish = self.computing.front().map(|e| e >> TASKLET_BITS);
        self.reschedule_compute();
        for &t in done.iter() {
            self.state[t as usize] = State::Running;
            self.woken[t as usize] = true;
        }
    }

    /// Lets a tasklet whose wait ended (mutex granted, barrier released) go on, paying the
    /// operation's instructions first.
    fn grant(&mut self, tasklet: u32, instructions: u64) -> Result<bool, KernelError> {
        self.state[tasklet as usize] = State::Running;
        self.start_compute(tasklet, instructions)
    }

    fn wake_now(&mut self, tasklet: u32, instructions: u64) -> Result<(), KernelError> {
        if self.grant(tasklet, instructions)? {
            self.queue.schedule(tasklet, self.now)?;
        }
        Ok(())
    }

    fn check_sync_id(&self, tasklet: u32, kind: SyncKind, id: u32) -> Result<(), KernelError> {
        if id >= self.params.atomic_bits {
            return Err(KernelError::SyncId {
                tasklet,
                kind,
                id,
                limit: self.params.atomic_bits,
            });
        }
        Ok(())
    }

    /// Starts a tasklet's request. `Ok(true)`: done already, the tasklet goes on;
    /// `Ok(false)`: it blocks until the executor wakes it.
    pub(crate) fn issue(&mut self, tasklet: u32, request: &Request) -> Result<bool, KernelError> {
        if self.state[tasklet as usize] != State::Running {
            return Err(KernelError::AlreadyWaiting { tasklet });
        }
        match *request {
            Request::Compute(n) => self.start_compute(tasklet, n),
            Request::Dma(dma) => self.start_dma(tasklet, &dma),
            Request::Lock(id) => {
                self.check_sync_id(tasklet, SyncKind::Mutex, id)?;
                let cost = self.params.costs.mutex_lock;
                match self.mutex_owner[id as usize] {
                    None => {
                        self.mutex_owner[id as usize] = Some(tasklet);
                        self.grant(tasklet, cost)
                    }
                    Some(_) => {
                        self.mutex_waiters[id as usize].push_back(tasklet);
                        self.state[tasklet as usize] = State::Mutex(id);
                        Ok(false)
                    }
                }
            }
            Request::Unlock(id) => {
                self.check_sync_id(tasklet, SyncKind::Mutex, id)?;
                let holder = self.mutex_owner[id as usize];
                if holder != Some(tasklet) {
                    return Err(KernelError::MutexNotHeld {
                        tasklet,
                        id,
                        holder,
                    });
                }
                // Hand the mutex to the longest waiter (FIFO; see docs/machine-model.md).
                let next = self.mutex_waiters[id as usize].pop_front();
                self.mutex_owner[id as usize] = next;
                if let Some(w) = next {
                    self.wake_now(w, self.params.costs.mutex_lock)?;
                }
                self.start_compute(tasklet, self.params.costs.mutex_unlock)
            }
            Request::Barrier(id) => {
                self.check_sync_id(tasklet, SyncKind::Barrier, id)?;
                let cost = self.params.costs.barrier_wait;
                self.barrier_arrived[id as usize].push(tasklet);
                if self.barrier_arrived[id as usize].len() < self.tasklets as usize {
                    self.state[tasklet as usize] = State::Barrier(id);
                    return Ok(false);
                }
                let arrived = std::mem::take(&mut self.barrier_arrived[id as usize]);
                for &w in arrived.iter().filter(|&&w| w != tasklet) {
                    self.wake_now(w, cost)?;
                }
                self.grant(tasklet, cost)
            }
        }
    }

    /// Starts a compute of `instructions` and, when it finishes, `dma`: the same as the two
    /// requests one after the other, but the executor issues the DMA itself instead of
    /// resuming the tasklet in between ([`Core::take_then_dma`]). `Ok(true)` and `Ok(false)`
    /// as for [`Core::issue`].
    pub(crate) fn issue_compute_then_dma(
        &mut self,
        tasklet: u32,
        instructions: u64,
        dma: &Dma,
    ) -> Result<bool, KernelError> {
        if self.state[tasklet as usize] != State::Running {
            return Err(KernelError::AlreadyWaiting { tasklet });
        }
        if self.start_compute(tasklet, instructions)? {
            return self.start_dma(tasklet, dma);
        }
        self.then_dma[tasklet as usize] = Some(*dma);
        self.folds = true;
        Ok(false)
    }

    /// Goes on with `tasklet`, whose compute just finished, if it asked for a DMA after
    /// it: issues the DMA, and the tasklet stays blocked, now on the DMA. False if the
    /// tasklet is to be polled instead: it asked for nothing, or the DMA failed (the poll
    /// then hands the kernel the error, as the plain request would).
    pub(crate) fn take_then_dma(&mut self, tasklet: u32) -> bool {
        let Some(dma) = self.then_dma[tasklet as usize].take() else {
            return false;
        };
        match self.start_dma(tasklet, &dma) {
            Ok(blocks) => {
                debug_assert!(!blocks, "a DMA blocks its tasklet until it completes");
                self.woken[tasklet as usize] = false;
                true
            }
            Err(e) => {
                self.then_dma_failed[tasklet as usize] = Some(e);
                false
            }
        }
    }

    /// Whether `tasklet`'s wait has ended, then as [`Future::poll`] would say it: its
    /// compute-then-DMA's error if the DMA failed ([`Core::take_then_dma`]), or done once
    /// woken (clearing the flag).
    pub(crate) fn wait_outcome(&mut self, tasklet: u32) -> Poll<Result<(), KernelError>> {
        let t = tasklet as usize;
        if std::mem::take(&mut self.woken[t]) {
            return Poll::Ready(match self.then_dma_failed[t].take() {
                Some(e) => Err(e),
                None => Ok(()),
            });
        }
        Poll::Pending
    }

    fn start_dma(&mut self, tasklet: u32, dma: &Dma) -> Result<bool, KernelError> {
        let Dma {
            direction,
            mram_addr,
            wram_addr,
            size_bytes,
        } = *dma;
        let d = &self.params.dma;
        // The alignment is a power of two (validated), so a mask replaces a division.
        let mask = d.alignment_bytes - 1;
        if size_bytes < d.min_size_bytes || size_bytes > d.max_size_bytes || size_bytes & mask != 0
        {
            return Err(KernelError::DmaSize {
                tasklet,
                direction,
                size_bytes,
                min: d.min_size_bytes,
                max: d.max_size_bytes,
                multiple: d.alignment_bytes,
            });
        }
        if mram_addr & mask as u64 != 0 || wram_addr & mask != 0 {
            return Err(KernelError::DmaAlignment {
                tasklet,
                direction,
                mram_addr,
                wram_addr,
                alignment: d.alignment_bytes,
            });
        }
        if !self.mram.contains(mram_addr, size_bytes as u64) {
            return Err(KernelError::MramOutOfRange {
                tasklet,
                addr: mram_addr,
                size_bytes: size_bytes as u64,
                mram_size_bytes: self.mram.size_bytes(),
            });
        }
        let range = self.wram_range(tasklet, wram_addr as u64, size_bytes as u64)?;
        match direction {
            DmaDirection::Read => {
                self.mram.read(mram_addr, &mut self.wram[range]);
                self.stats.dma_reads += 1;
                self.stats.dma_read_bytes += size_bytes as u64;
            }
            DmaDirection::Write => {
                self.mram.write(mram_addr, &self.wram[range]);
                self.stats.dma_writes += 1;
                self.stats.dma_write_bytes += size_bytes as u64;
            }
        }
        let d = &self.params.dma;
        let start = self.now.max(self.dma_free_at);
        let occupancy = d.occupancy_cycles(size_bytes);
        self.dma_free_at = start.saturating_add(occupancy);
        self.stats.dma_busy_cycles = self.stats.dma_busy_cycles.saturating_add(occupancy);
        let done = start.saturating_add(d.latency_cycles(direction, size_bytes));
        self.state[tasklet as usize] = State::Dma;
        self.queue.schedule(tasklet, done)?;
        Ok(false)
    }

    /// The WRAM byte range of an access, or an error.
    pub(crate) fn wram_range(
        &self,
        tasklet: u32,
        addr: u64,
        size: u64,
    ) -> Result<std::ops::Range<usize>, KernelError> {
        let end = addr
            .checked_add(size)
            .filter(|&e| e <= self.wram.len() as u64);
        match end {
            Some(end) => Ok(addr as usize..end as usize),
            // An empty WRAM on a DPU that has some: the bytes are lent to a with_wram closure.
            None if self.wram.is_empty() && self.params.wram_size_bytes > 0 => {
                Err(KernelError::WramInUse {
                    tasklet,
                    addr,
                    size_bytes: size,
                })
            }
            None => Err(KernelError::WramOutOfRange {
                tasklet,
                addr,
                size_bytes: size,
                wram_size_bytes: self.params.wram_size_bytes,
            }),
        }
    }

    /// Marks a tasklet whose wait ended as running (DMA completions and grants).
    pub(crate) fn resume(&mut self, tasklet: u32) {
        let s = &mut self.state[tasklet as usize];
        if *s == State::Dma {
            *s = State::Running;
        }
        self.woken[tasklet as usize] = true;
    }

    /// Marks `tasklet` finished; an error if an operation it started is still pending (its
    /// future was dropped unfinished, which only a kernel polling by hand can do).
    pub(crate) fn finish(&mut self, tasklet: u32) -> Result<(), KernelError> {
        let pending = self.state[tasklet as usize] != State::Running;
        self.state[tasklet as usize] = State::Finished;
        self.finish_cycle[tasklet as usize] = self.now;
        if pending {
            return Err(KernelError::Kernel {
                tasklet,
                reason: "returned while an operation it started was pending (await every operation to its end)".into(),
            });
        }
        Ok(())
    }

    /// What `tasklet` does now, for a timeline; `None` once it finished.
    pub(crate) fn activity(&self, tasklet: u32) -> Option<TaskletActivity> {
        match self.state[tasklet as usize] {
            State::Running | State::Computing => Some(TaskletActivity::Running),
            State::Dma => Some(TaskletActivity::Dma),
            State::Mutex(id) => Some(TaskletActivity::Mutex { id }),
            State::Barrier(id) => Some(TaskletActivity::Barrier { id }),
            State::Finished => None,
        }
    }

    pub(crate) fn is_finished(&self, tasklet: u32) -> bool {
        self.state[tasklet as usize] == State::Finished
    }

    /// What each tasklet waits on, for a deadlock report.
    pub(crate) fn waits(&self) -> Vec<TaskletWait> {
        self.state
            .iter()
            .map(|s| match *s {
                State::Running => TaskletWait::Running,
                State::Computing => TaskletWait::Computing,
                State::Dma => TaskletWait::Dma,
                State::Mutex(id) => TaskletWait::Mutex {
                    id,
                    holder: self.mutex_owner[id as usize],
                },
                State::Barrier(id) => TaskletWait::Barrier {
                    id,
                    arrived: self.barrier_arrived[id as usize].len() as u32,
                    expected: self.tasklets,
                },
                State::Finished => TaskletWait::Finished,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{Divider, Recorder, TaskletActivity, TaskletSpan};

    fn span(activity: TaskletActivity, start_cycle: u64, end_cycle: u64) -> TaskletSpan {
        TaskletSpan {
            tasklet: 0,
            activity,
            start_cycle,
            end_cycle,
        }
    }

    #[test]
    fn recorder_drops_zero_length_spans_and_merges_around_them() {
        let dma = Some(TaskletActivity::Dma);
        let mutex = Some(TaskletActivity::Mutex { id: 2 });
        let running = Some(TaskletActivity::Running);
        let mut r = Recorder::new(1, 10);
        r.transition(0, running, 0);
        r.transition(0, dma, 5);
        r.transition(0, running, 9);
        // A wait that ends in the cycle it began leaves Running 9..20 whole.
        r.transition(0, mutex, 12);
        r.transition(0, running, 12);
        r.transition(0, mutex, 20);
        r.transition(0, None, 30);
        r.transition(0, running, 40);
        let timeline = r.into_timeline();
        assert!(!timeline.truncated);
        assert_eq!(
            timeline.spans,
            vec![
                span(TaskletActivity::Running, 0, 5),
                span(TaskletActivity::Dma, 5, 9),
                span(TaskletActivity::Running, 9, 20),
                span(TaskletActivity::Mutex { id: 2 }, 20, 30),
            ]
        );
    }

    #[test]
    fn invariant_division_is_exact() {
        let mut divisors = vec![1u64, 2, 3, 7, 11, 12, 24, 486_748_080, 5_354_228_880];
        divisors.extend([
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            (1 << 63) + 1,
            (1 << 32) + 1,
        ]);
        divisors.extend((0..64).map(|k| 1u64 << k));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x
        };
        for _ in 0..2_000 {
            divisors.push(next() >> (next() % 64));
        }
        divisors.retain(|&d| d > 0);
        for &d in &divisors {
            let divider = Divider::new(d);
            let mut nums = vec![0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1];
            nums.extend([u64::MAX / d * d, (u64::MAX / d * d).wrapping_sub(1)]);
            for _ in 0..200 {
                let r = next();
                nums.extend([r, r >> 11, r >> 40, r / d * d]);
            }
            for &n in &nums {
                assert_eq!(divider.div(n), n / d, "{n} / {d}");
                assert_eq!(divider.div_ceil(n), n.div_ceil(d), "ceil {n} / {d}");
            }
        }
    }
}
