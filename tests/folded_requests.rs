//! `Tasklet::compute_then_mram_read` is `compute(n).await` then `mram_read(..).await` in one
//! request: the launch's report (cycles, every tasklet's finish, counters and events), its
//! recorded timeline and the MRAM it leaves must be those of the two requests, whichever
//! tasklets fold and whatever else runs beside them. Random programs, against the same
//! programs unfolded; hand-worked numbers and the errors beside them.

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, LaunchReport, Tasklet, TaskletTimeline};
use proptest::prelude::*;

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

/// Every tasklet runs its own program; tasklet `t` folds its compute-then-read steps if
/// `fold[t]`.
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
        for step in &self.steps[id] {
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
        Ok(())
    }
}

/// A DPU whose first 64 KiB of MRAM hold distinct words.
fn dpu() -> Dpu {
    let m = common::machine(&[]);
    let mut dpu = Dpu::new(&m.dpu, 0);
    let words: Vec<u64> = (0..8192u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9) + 1)
        .collect();
    dpu.mram_mut().write_u64s(0, &words);
    dpu
}

/// The launch's report and timeline, and the first 64 KiB of MRAM after it.
fn run(programs: &Programs) -> (LaunchReport, TaskletTimeline, Vec<u64>) {
    let mut dpu = dpu();
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
    fn a_folded_compute_and_read_is_the_two_requests(p in programs()) {
        let folded = run(&p);
        let plain = run(&Programs { fold: vec![false; p.fold.len()], ..p.clone() });
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
    let round = |t: usize| Step::ComputeRead {
        instructions: 20,
        addr: 64 * t as u64,
        size_bytes: 64,
    };
    let steps: Vec<Vec<Step>> = (0..16).map(|t| vec![round(t); 8]).collect();
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
    assert_eq!(folded.0.stats.dma_reads, 128);
    assert!(folded.0.cycles >= 128 * 48, "{}", folded.0.cycles);
}

/// One tasklet: 10 instructions (110 cycles) then an 8-byte read (77 + 0.5 x 8 = 81 cycles),
/// as the two requests take (tests/tasklet_timeline.rs); and with no instructions, the
/// read alone.
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
    assert_eq!(report.cycles, 191);
    assert_eq!((report.stats.instructions, report.stats.dma_reads), (10, 1));
    // The pipeline's completion and the DMA's: two events, as unfolded.
    assert_eq!(report.stats.events, 2);
    let (report, _, _) = run(&one(0));
    assert_eq!((report.cycles, report.stats.events), (81, 1));
}

/// A read the machine refuses fails the launch with the error the plain read gives, whether
/// it is issued after a compute or at once (no instructions).
#[test]
fn a_bad_folded_read_is_the_plain_reads_error() {
    for instructions in [0, 12] {
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
