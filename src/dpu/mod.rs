//! One UPMEM DPU: its MRAM ([`Mram`]), and [`Dpu::launch`], which runs a [`Kernel`]'s
//! tasklets under the timing model of the `core` module (revolver pipeline, DMA engine, mutexes,
//! barriers) on real bytes in WRAM and MRAM.
//!
//! A kernel is an `async` tasklet body that reads like the DPU C code it stands for:
//!
//! ```
//! use pimdes::dpu::{Dpu, Kernel, KernelError, Op, Tasklet};
//! # let machine = pimdes::machine::Machine::from_toml_str(
//! #     "m.toml", include_str!("../../machines/upmem-2556-350mhz.toml"), &[]).unwrap();
//!
//! /// Adds 1 to every 64-bit word of an MRAM array, blocks of 256 words per tasklet in turn.
//! struct Increment { words: u64 }
//!
//! impl Kernel for Increment {
//!     async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
//!         const BLOCK: u32 = 2048;
//!         let buf = t.mem_alloc(BLOCK)?;
//!         let mut words = vec![0u64; (BLOCK / 8) as usize];
//!         let mut block = t.id() as u64;
//!         while block * (BLOCK as u64 / 8) < self.words {
//!             let addr = block * BLOCK as u64;
//!             t.mram_read(addr, buf, BLOCK).await?;
//!             t.wram_read_u64s(buf, &mut words)?;
//!             for w in &mut words { *w += 1; }
//!             t.wram_write_u64s(buf, &words)?;
//!             // Per word: load, 64-bit add, store, loop overhead.
//!             let per_word = 2 * t.cost(Op::WramAccess) + t.cost(Op::AddI64) + t.cost(Op::LoopIteration);
//!             t.compute(per_word * words.len() as u64).await?;
//!             t.mram_write(buf, addr, BLOCK).await?;
//!             block += t.tasklets() as u64;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let mut dpu = Dpu::new(&machine.dpu, 0);
//! dpu.mram_mut().write_u64s(0, &vec![41; 4096]);
//! let report = dpu.launch(&Increment { words: 4096 }, 16).unwrap();
//! assert_eq!(dpu.mram().read_u64s(0, 4096), vec![42; 4096]);
//! assert!(report.cycles > 0);
//! ```

mod core;
mod error;
mod mram;
mod pages;
mod tasklet;

pub use self::core::{
    LaunchStats, MAX_COMPUTE_INSTRUCTIONS, MAX_EVENTS_PER_LAUNCH, MAX_FREE_OPERATIONS_PER_LAUNCH,
    MAX_LAUNCH_CYCLES, TaskletActivity, TaskletSpan, TaskletTimeline,
};
pub use error::{KernelError, LaunchError, SyncKind, TaskletWait};
pub use mram::{Mram, MramOverflow};
pub use tasklet::{ComputeThenDma, Tasklet, Wait};

use self::core::{Core, Observer, Recorder};
use crate::engine::{Cycles, Time};
use crate::machine::DpuParams;
pub use crate::machine::{Op, OpMix};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A DPU program: the body every tasklet runs (the SDK's `main`), plus its IRAM footprint.
///
/// Implement it with `async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError>`.
/// Per-DPU arguments live in the kernel value (index them with [`Tasklet::dpu`]).
pub trait Kernel: Sync {
    /// Instructions the program occupies in IRAM; a launch fails if the DPU has fewer.
    fn iram_instructions(&self) -> u32 {
        256
    }

    /// Bytes of WRAM for the program's globals (C's `.data`/`.bss`), shared by all tasklets
    /// at [`Tasklet::globals`], zeroed at launch.
    fn wram_globals_bytes(&self) -> u32 {
        0
    }

    /// The body of tasklet `t`.
    fn tasklet(&self, t: &Tasklet) -> impl Future<Output = Result<(), KernelError>>;
}

/// What one launch cost on one DPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LaunchReport {
    /// Cycles from launch to the last tasklet's end.
    pub cycles: u64,
    /// The cycle at which each tasklet ended.
    pub tasklet_cycles: Vec<u64>,
    #[serde(flatten)]
    pub stats: LaunchStats,
}

/// One DPU: identity, parameters and the MRAM contents that persist across launches.
#[derive(Debug, Clone)]
pub struct Dpu {
    params: DpuParams,
    index: u32,
    mram: Mram,
}

impl Dpu {
    pub fn new(params: &DpuParams, index: u32) -> Dpu {
        Dpu {
            params: params.clone(),
            index,
            mram: Mram::new(params.mram_size_bytes),
        }
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn params(&self) -> &DpuParams {
        &self.params
    }

    /// The MRAM, for host-side reads (functional; transfer timing is [`crate::host`]'s).
    pub fn mram(&self) -> &Mram {
        &self.mram
    }

    pub fn mram_mut(&mut self) -> &mut Mram {
        &mut self.mram
    }

    /// The simulated duration of `report` on this DPU's clock.
    pub fn duration(&self, report: &LaunchReport) -> Time {
        self.params.clock.to_time(Cycles(report.cycles))
    }

    /// Runs `kernel` on `tasklets` tasklets until every tasklet returns. Deterministic: the
    /// same kernel, tasklet count and MRAM contents give the same report and MRAM.
    ///
    /// Tasklets start at cycle 0 in id order; afterwards they run when the model wakes them:
    /// events in time order; at equal times the queue's DMA completions and wake-ups first,
    /// in the order they were scheduled, then the pipeline's completions, in (finish,
    /// tasklet id) order. A tasklet runs its Rust code between two awaits in zero simulated
    /// time; the instructions it stands for are what it charges with [`Tasklet::compute`]
    /// and [`Tasklet::op`].
    pub fn launch<K: Kernel>(
        &mut self,
        kernel: &K,
        tasklets: u32,
    ) -> Result<LaunchReport, KernelError> {
        self.launch_observed(kernel, tasklets, &mut ())
    }

    /// [`Dpu::launch`], also recording what each tasklet did when (for a trace). At most
    /// `max_spans` spans are kept, so a long launch cannot exhaust memory; past the bound
    /// the timeline is marked truncated. The report and MRAM are exactly `launch`'s.
    pub fn launch_recorded<K: Kernel>(
        &mut self,
        kernel: &K,
        tasklets: u32,
        max_spans: usize,
    ) -> Result<(LaunchReport, TaskletTimeline), KernelError> {
        // Capped so that a bad tasklet count is reported by the launch, not paid for here.
        let mut recorder = Recorder::new(tasklets.min(self.params.max_tasklets), max_spans);
        let report = self.launch_observed(kernel, tasklets, &mut recorder)?;
        Ok((report, recorder.into_timeline()))
    }

    /// The launch itself, generic over the observer so that `launch` compiles to the
    /// executor without any recording code.
    fn launch_observed<K: Kernel, O: Observer>(
        &mut self,
        kernel: &K,
        tasklets: u32,
        observer: &mut O,
    ) -> Result<LaunchReport, KernelError> {
        let p = &self.params;
        if tasklets == 0 || tasklets > p.max_tasklets {
            return Err(KernelError::TooManyTasklets {
                requested: tasklets,
                max: p.max_tasklets,
            });
        }
        if kernel.iram_instructions() > p.iram_instructions {
            return Err(KernelError::IramOverflow {
                instructions: kernel.iram_instructions(),
                capacity: p.iram_instructions,
            });
        }
        let stacks = tasklets as u64 * p.stack_bytes_per_tasklet as u64;
        let globals = (kernel.wram_globals_bytes() as u64).next_multiple_of(8);
        if stacks + globals > p.wram_size_bytes as u64 {
            return Err(KernelError::WramOverflow {
                what: format!(
                    "the stacks of {} ({} bytes each) and {globals} bytes of globals",
                    crate::config::counted(tasklets, "tasklet"),
                    p.stack_bytes_per_tasklet
                ),
                requested_bytes: stacks + globals,
                available_bytes: p.wram_size_bytes as u64,
                wram_size_bytes: p.wram_size_bytes,
            });
        }
        let mram = std::mem::take(&mut self.mram);
        let mut core = Core::new(p, self.index, tasklets, mram);
        // WRAM layout: stacks, then globals, then the mem_alloc heap.
        core.globals = stacks as u32;
        core.heap_next = stacks + globals;
        let core = Rc::new(RefCell::new(core));
        let result = run(kernel, &core, tasklets, observer);
        let core = Rc::into_inner(core).expect("every tasklet future is dropped by now");
        let core = core.into_inner();
        self.mram = core.mram;
        let (cycles, stats, finish) = result?;
        Ok(LaunchReport {
            cycles,
            tasklet_cycles: finish,
            stats,
        })
    }
}

/// Polls tasklet `t`'s future, if it has not finished; marks it finished when it returns.
fn poll_tasklet<F: Future<Output = Result<(), KernelError>>>(
    slot: &mut Option<Pin<Box<F>>>,
    cx: &mut Context<'_>,
    core: &RefCell<Core>,
    t: u32,
) -> Result<(), KernelError> {
    let Some(future) = slot.as_mut() else {
        return Ok(());
    };
    match future.as_mut().poll(cx) {
        Poll::Pending => Ok(()),
        Poll::Ready(result) => {
            *slot = None;
            let finished = core.borrow_mut().finish(t);
            result.and(finished)
        }
    }
}

/// What one step of the executor did.
enum Step {
    /// A queued event woke this tasklet.
    Woken(u32),
    /// The pipeline's completion finished the computes in `done`; `then_dma` if one of
    /// their tasklets may have asked for a DMA after its compute ([`Core::folds`]).
    Computed { then_dma: bool },
}

/// The deterministic single-threaded executor of one launch.
fn run<K: Kernel, O: Observer>(
    kernel: &K,
    core: &Rc<RefCell<Core>>,
    tasklets: u32,
    observer: &mut O,
) -> Result<(u64, LaunchStats, Vec<u64>), KernelError> {
    let handles = tasklet_handles(core, tasklets);
    // The kernel's own future type, not a trait object: each poll is a direct call.
    let mut futures: Vec<Option<Pin<Box<_>>>> = handles
        .iter()
        .map(|t| Some(Box::pin(kernel.tasklet(t))))
        .collect();
    let mut cx = Context::from_waker(Waker::noop());
    let mut poll = |t: u32, futures: &mut Vec<Option<Pin<Box<_>>>>| {
        poll_tasklet(&mut futures[t as usize], &mut cx, core, t)
    };
    for t in 0..tasklets {
        poll(t, &mut futures)?;
    }
    observer.after_step(core);
    let mut events = 0u64;
    let mut done = Vec::with_capacity(tasklets as usize);
    loop {
        // A statement of its own, so that the core's borrow ends with it.
        let step = next_step(&mut core.borrow_mut(), &mut done, &mut events)?;
        let Some(step) = step else {
            break;
        };
        match step {
            Step::Woken(t) => poll(t, &mut futures)?,
            Step::Computed { then_dma: false } => {
                for &t in &done {
                    poll(t, &mut futures)?;
                }
            }
            Step::Computed { then_dma: true } => {
                // In finish order, each finisher goes on: by the DMA it asked for after its
                // compute, or by a poll.
                for &t in &done {
                    let issued = core.borrow_mut().take_then_dma(t);
                    if !issued {
                        poll(t, &mut futures)?;
                    }
                }
            }
        }
        observer.after_step(core);
    }
    drop(futures);
    drop(handles);
    launch_outcome(&mut core.borrow_mut(), events)
}

/// Takes the earlier of the queue's next event and the pipeline's next completion (the
/// queue first at equal times) and moves the clock to it: `None` once neither is left.
#[inline(always)]
fn next_step(
    c: &mut Core,
    done: &mut Vec<u32>,
    events: &mut u64,
) -> Result<Option<Step>, KernelError> {
    let queued = c.queue.peek_time();
    let pipeline = c.pipeline_next;
    let from_queue = match (queued, pipeline) {
        (None, None) => return Ok(None),
        (Some(q), Some(p)) => q <= p,
        (Some(_), None) => true,
        (None, Some(_)) => false,
    };
    *events += 1;
    if *events > MAX_EVENTS_PER_LAUNCH {
        return Err(KernelError::EventLimit {
            limit: MAX_EVENTS_PER_LAUNCH,
        });
    }
    if from_queue {
        let (time, t) = c.queue.pop().expect("peeked");
        assert!(time >= c.now, "time went backwards");
        c.now = time;
        c.resume(t);
        return Ok(Some(Step::Woken(t)));
    }
    let time = pipeline.expect("checked");
    assert!(time >= c.now, "time went backwards");
    c.now = time;
    c.finish_computes(done);
    Ok(Some(Step::Computed { then_dma: c.folds }))
}

/// The handles of a launch's `tasklets` tasklets on `core`.
fn tasklet_handles(core: &Rc<RefCell<Core>>, tasklets: u32) -> Vec<Tasklet> {
    let dpu = core.borrow().dpu;
    (0..tasklets)
        .map(|id| Tasklet {
            core: Rc::clone(core),
            id,
            tasklets,
            dpu,
        })
        .collect()
}

/// A launch's cycles, counters and per-tasklet finish cycles once no event is left, or the
/// deadlock that left tasklets waiting.
fn launch_outcome(c: &mut Core, events: u64) -> Result<(u64, LaunchStats, Vec<u64>), KernelError> {
    if c.now >= MAX_LAUNCH_CYCLES {
        return Err(KernelError::CycleLimit {
            limit: MAX_LAUNCH_CYCLES,
        });
    }
    if (0..c.tasklets).any(|t| !c.is_finished(t)) {
        return Err(KernelError::Deadlock {
            cycle: c.now,
            waits: c.waits(),
        });
    }
    c.stats.events = events;
    let cycles = c.finish_cycle.iter().copied().max().unwrap_or(0);
    Ok((cycles, c.stats.clone(), c.finish_cycle.clone()))
}

/// Tasklet timelines as trace events. A module of its own so that this cold code is
/// compiled apart from the executor: written directly in this module, it cost 8-10% of
/// `cargo bench --bench engine`'s events per second (a code-placement effect; the
/// executor's code was the same), and here it costs nothing measurable.
mod timeline_trace {
    use super::{TaskletActivity, TaskletTimeline};
    use crate::engine::{Clock, Cycles, Time};
    use crate::trace::{ArgValue, Trace};

    impl TaskletActivity {
        /// The activity's event name in a trace (ids go in the event's arguments, so that a
        /// viewer colours all waits on mutexes alike).
        pub fn label(self) -> &'static str {
            match self {
                TaskletActivity::Running => "running",
                TaskletActivity::Dma => "dma",
                TaskletActivity::Mutex { .. } => "mutex",
                TaskletActivity::Barrier { .. } => "barrier",
            }
        }
    }

    impl TaskletTimeline {
        /// Adds the spans to `trace` as events of process `pid`, tasklet `t` on thread
        /// `first_tid + t` (naming those threads is the caller's), category `"tasklet"`, for
        /// a launch that began at `launch_start` on `clock`. Cycle boundaries go through
        /// [`Clock::to_time`], so adjacent spans still meet exactly. A truncated timeline ends
        /// with an instant saying so on the first tasklet's thread. Returns false if the
        /// trace's bound refused some of them when offered (a later event that starts
        /// earlier may still displace one that was kept).
        pub fn add_to_trace(
            &self,
            trace: &mut Trace,
            pid: u32,
            first_tid: u32,
            clock: Clock,
            launch_start: Time,
        ) -> bool {
            let at = |cycle: u64| launch_start + clock.to_time(Cycles(cycle));
            let mut all_kept = true;
            for s in &self.spans {
                let mut args = vec![
                    ("start_cycle", ArgValue::U64(s.start_cycle)),
                    ("end_cycle", ArgValue::U64(s.end_cycle)),
                ];
                if let TaskletActivity::Mutex { id } | TaskletActivity::Barrier { id } = s.activity
                {
                    args.push(("id", ArgValue::U64(id as u64)));
                }
                let (start, end) = (at(s.start_cycle), at(s.end_cycle));
                let tid = first_tid.saturating_add(s.tasklet);
                // Past the trace's cut a span is dropped; an earlier one of another
                // tasklet may still be kept, so every span is offered.
                all_kept &= trace.span(pid, tid, s.activity.label(), "tasklet", start, end, &args);
            }
            if self.truncated {
                let last = self.spans.iter().map(|s| s.end_cycle).max().unwrap_or(0);
                let name = format!("tasklet timeline cut at {} spans", self.spans.len());
                all_kept &= trace.instant(pid, first_tid, &name, "tasklet", at(last), &[]);
            }
            all_kept
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tasklet 0 sets a WRAM flag after a DMA; tasklet 1 waits for it, charging
    /// `instructions` per test of the flag.
    struct Spins {
        instructions: u64,
    }

    impl Kernel for Spins {
        fn wram_globals_bytes(&self) -> u32 {
            16
        }

        async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
            let flag = t.globals();
            if t.id() == 0 {
                t.mram_read(0, flag + 8, 8).await?;
                return t.wram_write_u64(flag, 1);
            }
            while t.wram_read_u64(flag)? == 0 {
                t.compute(self.instructions).await?;
            }
            Ok(())
        }
    }

    #[test]
    fn a_tasklet_spinning_on_free_operations_is_stopped() {
        let text = include_str!("../../machines/upmem-2556-350mhz.toml");
        let machine = crate::machine::Machine::from_toml_str("m.toml", text, &[]).unwrap();
        let mut dpu = Dpu::new(&machine.dpu, 0);
        let e = dpu.launch(&Spins { instructions: 0 }, 2).unwrap_err();
        assert_eq!(
            e,
            KernelError::FreeOperationLimit {
                tasklet: 1,
                limit: MAX_FREE_OPERATIONS_PER_LAUNCH
            }
        );
        // Charging the spin lets time pass, tasklet 0 sets the flag, and the launch ends.
        let r = dpu.launch(&Spins { instructions: 3 }, 2).unwrap();
        assert!(r.stats.instructions > 0 && r.cycles > 0, "{r:?}");
    }
}
