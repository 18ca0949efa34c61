//! `Tasklet::compute_then_mram_read` is `compute(n).await` then `mram_read(..).await` in one
//! request: the launch's report (cycles, every tasklet's finish, counters and events), its
//! recorded timeline and the MRAM it leaves must be those of the two requests, whichever
//! tasklets fold and whatever else runs beside them. Random programs, against the same
//! programs unfolded; hand-worked numbers and the errors beside them.

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, LaunchReport, Tasklet, TaskletTimeline};
use proptest::prelude::*;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

/// One step of a tasklet's program.
#[derive(Debug, Clone)]
enum Step {
    /// Compute, then read `size_bytes` at MRAM `addr` and fold the first word into the
    /// buffer (so that what was read reaches the MRAM through later writes).
    ComputeRead {
        instructions: u64,
        addr: u64,
        size_bytes: u32,
    },
    /// Write the buffer's first `size_bytes` to MRAM `addr`.
    Write { addr: u64, size_bytes: u32 },
    /// Compute under mutex 0.
    Locked { instructions: u64 },
}

/// Every tasklet runs its own program, waiting at barrier 1 once halfway through it;
/// tasklet `t` folds its compute-then-read steps if `fold[t]`.
#[derive(Debug, Clone)]
struct Programs {
    steps: Vec<Vec<Step>>,
    fold: Vec<bool>,
}

const BUFFER_BYTES: u32 = 256;

impl Kernel for Programs {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(BUFFER_BYTES)?;
        let id = t.id() as usize;
        let steps = &self.steps[id];
        for (i, step) in steps.iter().enumerate() {
            if i == steps.len() / 2 {
                t.barrier_wait(1).await?;
            }
            match *step {
                Step::ComputeRead {
                    instructions,
                    addr,
                    size_bytes,
                } => {
                    let word = t.wram_read_u64(buf)?;
                    if self.fold[id] {
                        t.compute_then_mram_read(instructions, addr, buf, size_bytes)
                            .await?;
                    } else {
                        t.compute(instructions).await?;
                        t.mram_read(addr, buf, size_bytes).await?;
                    }
                    let read = t.wram_read_u64(buf)?;
                    t.wram_write_u64(buf, read.wrapping_mul(31).wrapping_add(word ^ id as u64))?;
                }
                Step::Write { addr, size_bytes } => t.mram_write(buf, addr, size_bytes).await?,
                Step::Locked { instructions } => {
                    t.mutex_lock(0).await?;
                    t.compute(instructions).await?;
                    t.mutex_unlock(0).await?;
                }
            }
        }
        if steps.is_empty() {
            t.barrier_wait(1).await?;
        }
        Ok(())
    }
}

/// The PrIM machine's DPU, or one whose mutexes and barriers cost nothing (so that the
/// tasklets they release resume at the cycle they are released).
fn machine(free_sync: bool) -> pimdes::machine::Machine {
    let free = [
        "dpu.instructions.mutex_lock=0",
        "dpu.instructions.mutex_unlock=0",
        "dpu.instructions.barrier_wait=0",
    ];
    common::machine(if free_sync { &free } else { &[] })
}

/// A DPU whose first 64 KiB of MRAM hold distinct words.
fn dpu() -> Dpu {
    dpu_of(false)
}

fn dpu_of(free_sync: bool) -> Dpu {
    let m = machine(free_sync);
    let mut dpu = Dpu::new(&m.dpu, 0);
    let words: Vec<u64> = (0..8192u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9) + 1)
        .collect();
    dpu.mram_mut().write_u64s(0, &words);
    dpu
}

/// The launch's report and timeline, and the first 64 KiB of MRAM after it.
fn run(programs: &Programs) -> (LaunchReport, TaskletTimeline, Vec<u64>) {
    run_on(programs, false)
}

fn run_on(programs: &Programs, free_sync: bool) -> (LaunchReport, TaskletTimeline, Vec<u64>) {
    let mut dpu = dpu_of(free_sync);
    let tasklets = programs.steps.len() as u32;
    let (report, timeline) = dpu.launch_recorded(programs, tasklets, 1 << 20).unwrap();
    (report, timeline, dpu.mram().read_u64s(0, 8192))
}

fn step() -> impl Strategy<Value = Step> {
    // Few distinct compute lengths, so that tasklets often finish at the same event.
    let instructions = prop_oneof![Just(0u64), Just(8), Just(20), 1u64..60];
    let addr = (0u64..(65536 - BUFFER_BYTES as u64) / 8).prop_map(|w| w * 8);
    let size = (1u32..=BUFFER_BYTES / 8).prop_map(|w| w * 8);
    prop_oneof![
        6 => (instructions.clone(), addr.clone(), size.clone()).prop_map(
            |(instructions, addr, size_bytes)| Step::ComputeRead { instructions, addr, size_bytes }
        ),
        2 => (addr, size).prop_map(|(addr, size_bytes)| Step::Write { addr, size_bytes }),
        1 => instructions.prop_map(|instructions| Step::Locked { instructions }),
    ]
}

fn programs() -> impl Strategy<Value = Programs> {
    (1usize..=16).prop_flat_map(|tasklets| {
        (
            prop::collection::vec(prop::collection::vec(step(), 0..24), tasklets),
            prop::collection::vec(any::<bool>(), tasklets),
        )
            .prop_map(|(steps, fold)| Programs { steps, fold })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_folded_compute_and_read_is_the_two_requests(p in programs(), free_sync: bool) {
        let folded = run_on(&p, free_sync);
        let plain = run_on(&Programs { fold: vec![false; p.fold.len()], ..p.clone() }, free_sync);
        prop_assert_eq!(&folded.0, &plain.0, "report");
        prop_assert_eq!(&folded.1, &plain.1, "timeline");
        prop_assert!(folded.2 == plain.2, "MRAM");
    }
}

/// Sixteen tasklets, every other one folding (or none), with computes of one length: every
/// compute of a round finishes at one event, and the reads queue at the DMA engine in
/// tasklet order, folded or not.
#[test]
fn tasklets_finishing_together_read_in_the_same_order_folded_or_not() {
    let read = |t: usize| Step::ComputeRead {
        instructions: 20,
        addr: 64 * t as u64,
        size_bytes: 64,
    };
    // Each round's write carries what the reads brought into MRAM.
    let write = |t: usize| Step::Write {
        addr: 4096 + 8 * t as u64,
        size_bytes: 8,
    };
    let steps: Vec<Vec<Step>> = (0..16)
        .map(|t| (0..8).flat_map(|_| [read(t), write(t)]).collect())
        .collect();
    let fold = |f: bool| Programs {
        steps: steps.clone(),
        fold: (0..16).map(|t| f && t % 2 == 0).collect(),
    };
    let (folded, plain) = (run(&fold(true)), run(&fold(false)));
    assert_eq!(folded.0, plain.0);
    assert_eq!(folded.1, plain.1);
    assert!(folded.2 == plain.2);
    // Per round, 16 reads of 64 bytes at 16 + 0.5 x 64 = 48 cycles of occupancy each
    // serialise on the engine: the reads, not the pipeline, set the pace.
    assert_eq!(
        (folded.0.stats.dma_reads, folded.0.stats.dma_writes),
        (128, 128)
    );
    assert!(folded.0.cycles >= 128 * 48, "{}", folded.0.cycles);
    let before = dpu().mram().read_u64s(0, 8192);
    assert!(
        folded.2[512..528] != before[512..528],
        "the writes changed the MRAM"
    );
}

/// One tasklet: its barrier (10 instructions, 110 cycles), then 10 instructions (110 cycles)
/// and an 8-byte read (77 + 0.5 x 8 = 81 cycles), as the two requests take
/// (tests/tasklet_timeline.rs); with no instructions, the barrier and the read alone.
#[test]
fn one_folded_step_takes_the_compute_then_the_read() {
    let one = |instructions: u64| Programs {
        steps: vec![vec![Step::ComputeRead {
            instructions,
            addr: 0,
            size_bytes: 8,
        }]],
        fold: vec![true],
    };
    let (report, _, _) = run(&one(10));
    assert_eq!(report.cycles, 110 + 110 + 81);
    assert_eq!((report.stats.instructions, report.stats.dma_reads), (20, 1));
    // The barrier's and the compute's pipeline completions and the DMA's: three events,
    // as unfolded.
    assert_eq!(report.stats.events, 3);
    let (report, _, _) = run(&one(0));
    assert_eq!((report.cycles, report.stats.events), (110 + 81, 2));
}

/// A read the machine refuses fails the launch with the error the plain read gives, whether
/// it is issued after a compute or at once (no instructions); so does a compute too long.
#[test]
fn a_bad_folded_read_is_the_plain_reads_error() {
    for instructions in [0, 12, 1 << 41] {
        for (addr, size_bytes) in [(0, 12), (4, 8), (0, 4096), (64 << 20, 8)] {
            let programs = |fold: bool| Programs {
                steps: vec![
                    vec![],
                    vec![Step::ComputeRead {
                        instructions,
                        addr,
                        size_bytes,
                    }],
                ],
                fold: vec![fold; 2],
            };
            let folded = dpu().launch(&programs(true), 2).unwrap_err();
            let plain = dpu().launch(&programs(false), 2).unwrap_err();
            assert_eq!(
                folded, plain,
                "{instructions} instructions, {size_bytes} bytes at {addr}"
            );
        }
    }
}

/// One read of `size_bytes` after 12 instructions, folded or not; whether it failed is
/// written to MRAM word 100 (a kernel that handles the error instead of passing it on).
struct Catches {
    fold: bool,
    size_bytes: u32,
}

impl Kernel for Catches {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(16)?;
        let read = if self.fold {
            t.compute_then_mram_read(12, 0, buf, self.size_bytes).await
        } else {
            match t.compute(12).await {
                Ok(()) => t.mram_read(0, buf, self.size_bytes).await,
                e => e,
            }
        };
        t.wram_write_u64(buf, read.is_err() as u64)?;
        t.mram_write(buf, 800, 8).await
    }
}

#[test]
fn a_kernel_sees_its_folded_reads_error_as_it_sees_a_plain_reads() {
    for size_bytes in [8, 12] {
        let run = |fold: bool| {
            let mut dpu = dpu();
            let report = dpu.launch(&Catches { fold, size_bytes }, 1).unwrap();
            (report, dpu.mram().read_u64s(800, 1)[0])
        };
        let (folded, plain) = (run(true), run(false));
        assert_eq!(folded, plain, "{size_bytes} bytes");
        assert_eq!(folded.1, (size_bytes == 12) as u64, "{size_bytes} bytes");
    }
}

/// Counts the polls of the future it wraps.
struct Counted<'a, F> {
    inner: Pin<Box<F>>,
    polls: &'a AtomicU32,
}

impl<F: Future> Future for Counted<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        self.inner.as_mut().poll(cx)
    }
}

fn counted<F>(inner: F, polls: &AtomicU32) -> Counted<'_, F> {
    Counted {
        inner: Box::pin(inner),
        polls,
    }
}

/// A compute then a read, folded or not, every poll of the operations counted.
struct CountsPolls {
    fold: bool,
    polls: AtomicU32,
}

impl Kernel for CountsPolls {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(8)?;
        let polls = &self.polls;
        if self.fold {
            return counted(t.compute_then_mram_read(10, 0, buf, 8), polls).await;
        }
        counted(t.compute(10), polls).await?;
        counted(t.mram_read(0, buf, 8), polls).await
    }
}

/// The point of folding: the tasklet is resumed once (an issuing poll and a finishing one),
/// not twice as for the two requests.
#[test]
fn a_folded_step_is_polled_twice_and_the_two_requests_four_times() {
    for (fold, polls) in [(true, 2), (false, 4)] {
        let kernel = CountsPolls {
            fold,
            polls: AtomicU32::new(0),
        };
        dpu().launch(&kernel, 1).unwrap();
        assert_eq!(kernel.polls.into_inner(), polls, "fold: {fold}");
    }
}
