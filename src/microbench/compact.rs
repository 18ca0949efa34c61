//! PrIM's two stream compactions of 64-bit elements, SEL and UNI (CMU-SAFARI/prim-benchmarks
//! `SEL/` and `UNI/`, `dpu/task.c`, `host/app.c`, `Makefile`: 16 tasklets, `BL` = 10, so
//! 1,024-byte blocks of 128 elements), at the sizes of the published real-hardware runs (the
//! whole input, strong scaling).
//!
//! **SEL** (select):
//! The host fills `A[i] = i + 1` and pads with zeros; the predicate removes even values, so
//! a DPU keeps its odd ones, in order. Each DPU holds `S` elements: the input divided by the
//! DPUs, rounded up to a multiple of 16 x 128 so that every tasklet runs the same number of
//! rounds. Per round each tasklet reads one block, compacts the kept elements into a WRAM
//! buffer, learns how many the tasklets before it kept (PrIM's `handshake_sync`, a chain in
//! tasklet order), meets the others at a barrier, and writes its kept elements to the
//! output region after the input at the running offset.
//!
//! **UNI** (unique): the host fills `A[i] = i` for even `i` and `i + 1` for odd `i` (so
//! 0, 2, 2, 4, 4, ...) and pads with the last value; each block keeps the first of every
//! run of equal values, and the chain also passes on the last value kept, so that a
//! tasklet whose first value repeats the one before drops it (PrIM counts these in an
//! offset). UNI writes without waiting at a barrier first.
//!
//! Three things are modelled differently from the code, without changing the work done:
//! - the handshake chain (`handshake_wait_for` / `handshake_notify`) is built from the
//!   machine's mutexes, one per tasklet, at their cost: tasklet t waits on the mutex
//!   t - 1 holds until t - 1 has passed its count on, as the real tasklet waits;
//! - the last tasklet advances the running offset before the round's barrier, not after it
//!   (where PrIM's code races, harmlessly on hardware, with the other tasklets' reads);
//! - UNI writes only the values it keeps: PrIM's write, when the first value is dropped,
//!   carries one stale value past them for the next tasklet's write to overwrite, which
//!   depends on the order the writes land in.
//!
//! A block with nothing to write (SEL: only padding) writes nothing; PrIM issues a DMA of
//! its (zero) size there, which the hardware treats as 8 bytes. Every DPU is simulated and
//! its output checked.

use super::apps::{AppRecord, record};
use crate::dpu::{Kernel, KernelError, Op, Tasklet};
use crate::error::Error;
use crate::machine::Machine;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// PrIM SEL's and UNI's defaults (`SEL/Makefile`, `UNI/Makefile`).
pub const SEL_TASKLETS: u32 = 16;
const BLOCK_BYTES: u32 = 1 << 10;
const ELEMENT_BYTES: u64 = 8;
const BLOCK_ELEMENTS: u64 = BLOCK_BYTES as u64 / ELEMENT_BYTES;

/// [est] Per element of the unrolled select loop: the WRAM load, the parity test and its
/// branch.
const PER_ELEMENT_INSTRUCTIONS: u64 = 3;
/// [est] Per kept element: the WRAM store and the output index's increment.
const PER_KEPT_INSTRUCTIONS: u64 = 2;
/// [est] Per round outside the element loop: the loop's test, the block's address, the call.
const PER_ROUND_INSTRUCTIONS: u64 = 10;

/// Elements each DPU holds, as PrIM's host computes them.
pub fn sel_share(elements: u64, dpus: u32) -> u64 {
    let share = elements.div_ceil(u64::from(dpus));
    share.next_multiple_of(u64::from(SEL_TASKLETS) * BLOCK_ELEMENTS)
}

/// MRAM a DPU needs: its input and the output region after it.
pub fn sel_mram_bytes(elements: u64, dpus: u32) -> u64 {
    2 * sel_share(elements, dpus) * ELEMENT_BYTES
}

/// The input: element `i` of `elements` (zero past the end: padding).
fn input(i: u64, elements: u64) -> u64 {
    if i < elements { i + 1 } else { 0 }
}

/// PrIM's predicate: a value is removed when it is even.
fn kept(x: u64) -> bool {
    !x.is_multiple_of(2)
}

/// What a tasklet passes on to the next in a round: the count so far, the last value kept
/// (UNI) and the count of first values dropped so far (UNI).
#[derive(Debug, Clone, Copy, Default)]
struct Message {
    count: u64,
    value: u64,
    offset: u64,
}

/// PrIM's handshake chain (`handshake_wait_for` / `handshake_notify`), from one mutex per
/// tasklet: tasklet t holds mutex t until it has passed its message on; t + 1 waits on it.
/// Slot 0 is what tasklet 0 reads: what the last tasklet left there in the round before.
struct Chain {
    count: Vec<AtomicU64>,
    value: Vec<AtomicU64>,
    offset: Vec<AtomicU64>,
}

impl Chain {
    fn new(tasklets: u32, first: Message) -> Chain {
        let slots = |x: u64| (0..tasklets).map(|_| AtomicU64::new(x)).collect::<Vec<_>>();
        let chain = Chain {
            count: slots(0),
            value: slots(0),
            offset: slots(0),
        };
        chain.put(0, first);
        chain
    }

    fn get(&self, slot: usize) -> Message {
        Message {
            count: self.count[slot].load(Relaxed),
            value: self.value[slot].load(Relaxed),
            offset: self.offset[slot].load(Relaxed),
        }
    }

    fn put(&self, slot: usize, m: Message) {
        self.count[slot].store(m.count, Relaxed);
        self.value[slot].store(m.value, Relaxed);
        self.offset[slot].store(m.offset, Relaxed);
    }

    /// Before the first round: every tasklet but the last takes its own mutex.
    async fn arm(&self, t: &Tasklet) -> Result<(), KernelError> {
        if t.id() + 1 < t.tasklets() {
            t.mutex_lock(t.id()).await?;
        }
        Ok(())
    }

    /// After a round's barrier, when another round follows: every tasklet but the last
    /// takes its mutex again (the next tasklet released it before the barrier).
    async fn rearm(&self, t: &Tasklet, another: bool) -> Result<(), KernelError> {
        if another {
            self.arm(t).await?;
        }
        Ok(())
    }

    /// Waits for the message of the tasklet before (mutex `id - 1`), passes on the one
    /// `next` makes of it (releasing mutex `id`), and returns the message received.
    async fn pass(
        &self,
        t: &Tasklet,
        next: impl FnOnce(Message) -> Message,
    ) -> Result<Message, KernelError> {
        let id = t.id();
        let received = if id > 0 {
            t.mutex_lock(id - 1).await?;
            let m = self.get(id as usize);
            t.mutex_unlock(id - 1).await?;
            m
        } else {
            self.get(0)
        };
        t.op(Op::WramAccess, 1).await?;
        if id + 1 < t.tasklets() {
            self.put(id as usize + 1, next(received));
            t.mutex_unlock(id).await?;
        }
        Ok(received)
    }
}

/// A tasklet's start: its two block buffers, its mutex taken, the others met.
async fn begin(t: &Tasklet, chain: &Chain) -> Result<(u32, u32), KernelError> {
    let a = t.mem_alloc(BLOCK_BYTES)?;
    let b = t.mem_alloc(BLOCK_BYTES)?;
    chain.arm(t).await?;
    t.barrier_wait(0).await?;
    Ok((a, b))
}

/// The MRAM offsets of tasklet `t`'s blocks of a DPU's `share_bytes`, round by round: block
/// `id`, then every `tasklets` blocks.
fn my_blocks(t: &Tasklet, share_bytes: u64) -> Vec<u64> {
    let stride = u64::from(BLOCK_BYTES) * u64::from(t.tasklets());
    (u64::from(t.id()) * u64::from(BLOCK_BYTES)..share_bytes)
        .step_by(stride as usize)
        .collect()
}

struct Select {
    share_bytes: u64,
    chain: Chain,
    /// The output offset (elements) of each round, set by the last tasklet of the round
    /// before.
    bases: Vec<AtomicU64>,
    /// The DPU's count of kept elements (PrIM's `t_count`).
    total: AtomicU64,
}

impl Select {
    /// Compacts the block at WRAM `from` into WRAM `to`; returns the count kept.
    async fn select(&self, t: &Tasklet, from: u32, to: u32) -> Result<u64, KernelError> {
        let mut block = [0u64; BLOCK_ELEMENTS as usize];
        t.wram_read_u64s(from, &mut block)?;
        let out: Vec<u64> = block.iter().copied().filter(|&x| kept(x)).collect();
        t.wram_write_u64s(to, &out)?;
        let n = out.len() as u64;
        t.compute(
            PER_ROUND_INSTRUCTIONS
                + BLOCK_ELEMENTS * PER_ELEMENT_INSTRUCTIONS
                + n * PER_KEPT_INSTRUCTIONS,
        )
        .await?;
        Ok(n)
    }
}

impl Kernel for Select {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let (id, last) = (t.id(), t.tasklets() - 1);
        let (a, b) = begin(t, &self.chain).await?;
        let blocks = my_blocks(t, self.share_bytes);
        for (round, &at) in blocks.iter().enumerate() {
            t.mram_read(at, a, BLOCK_BYTES).await?;
            let count = self.select(t, a, b).await?;
            let before = self
                .chain
                .pass(t, |m| Message {
                    count: m.count + count,
                    ..m
                })
                .await?
                .count;
            let base = self.bases[round].load(Relaxed);
            if id == last {
                self.bases[round + 1].store(base + before + count, Relaxed);
                self.total.store(base + before + count, Relaxed);
                t.op(Op::WramAccess, 2).await?;
            }
            t.barrier_wait(0).await?;
            if count > 0 {
                let to = self.share_bytes + (base + before) * ELEMENT_BYTES;
                t.mram_write(b, to, (count * ELEMENT_BYTES) as u32).await?;
            }
            self.chain.rearm(t, round + 1 < blocks.len()).await?;
        }
        Ok(())
    }
}

/// What a compaction kernel leaves behind: the DPU's count (PrIM's `t_count`).
trait Compaction: Kernel {
    fn total(&self) -> u64;
}

impl Compaction for Select {
    fn total(&self) -> u64 {
        self.total.load(Relaxed)
    }
}

/// Runs a compaction on every DPU (`make` gives DPU d's kernel, `input(i)` element i of the
/// whole input) and checks each DPU's output against `want` of its input; the slowest DPU's
/// cycles.
fn every_dpu<K: Compaction>(
    machine: &Machine,
    (name, dpus, share): (&str, u32, u64),
    input: impl Fn(u64) -> u64,
    make: impl Fn() -> K,
    want: impl Fn(&[u64]) -> Vec<u64>,
) -> Result<u64, Error> {
    let mut slowest = 0;
    for d in 0..u64::from(dpus) {
        let kernel = make();
        let values: Vec<u64> = (d * share..(d + 1) * share).map(&input).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
        let (report, dpu) = super::launch_one(machine, &kernel, SEL_TASKLETS, |m| {
            m.mram_mut().write(0, &bytes);
        })?;
        let want = want(&values);
        let count = kernel.total();
        let mut out = vec![0u8; (count * ELEMENT_BYTES) as usize];
        dpu.mram().read(share * ELEMENT_BYTES, &mut out);
        let got: Vec<u64> = out
            .chunks_exact(8)
            .map(|x| u64::from_le_bytes(x.try_into().expect("8 bytes")))
            .collect();
        if got != want {
            return Err(Error::Verification(format!(
                "{name} on {dpus} DPUs: DPU {d} kept {count} elements, expected {}",
                want.len()
            )));
        }
        slowest = slowest.max(report.cycles);
    }
    Ok(slowest)
}

/// One SEL run: `elements` in all on `dpus` DPUs, every DPU simulated and its output
/// checked; the record of the slowest DPU.
pub fn sel(machine: &Machine, dpus: u32, elements: u64) -> Result<AppRecord, Error> {
    let share = sel_share(elements, dpus);
    let rounds = share / BLOCK_ELEMENTS / u64::from(SEL_TASKLETS);
    let make = || Select {
        share_bytes: share * ELEMENT_BYTES,
        chain: Chain::new(SEL_TASKLETS, Message::default()),
        bases: (0..=rounds).map(|_| AtomicU64::new(0)).collect(),
        total: AtomicU64::new(0),
    };
    let want = |v: &[u64]| v.iter().copied().filter(|&x| kept(x)).collect();
    let slowest = every_dpu(
        machine,
        ("SEL", dpus, share),
        |i| input(i, elements),
        make,
        want,
    )?;
    record(
        machine,
        ("sel", SEL_TASKLETS),
        dpus,
        elements,
        share,
        slowest,
    )
}

/// [est] Per element of the unrolled unique loop: the WRAM load, the 64-bit compare with the
/// previous element and its branch.
const UNI_PER_ELEMENT_INSTRUCTIONS: u64 = 4;
/// [est] UNI per round besides the elements: the first element's copy, the loop, the
/// block's address, the call, the dropped-first test.
const UNI_PER_ROUND_INSTRUCTIONS: u64 = 14;

/// UNI's input: element `i` of `elements`, the last value repeated past the end.
fn uni_input(i: u64, elements: u64) -> u64 {
    let i = i.min(elements.saturating_sub(1));
    if i.is_multiple_of(2) { i } else { i + 1 }
}

/// The first of every run of equal values of `values`.
fn uniques(values: &[u64]) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::with_capacity(values.len());
    for &v in values {
        if out.last() != Some(&v) {
            out.push(v);
        }
    }
    out
}

struct Unique {
    share_bytes: u64,
    chain: Chain,
    bases: Vec<AtomicU64>,
    total: AtomicU64,
}

impl Compaction for Unique {
    fn total(&self) -> u64 {
        self.total.load(Relaxed)
    }
}

impl Unique {
    /// The block at WRAM `from`'s first values of runs, into WRAM `to`.
    async fn unique(&self, t: &Tasklet, from: u32, to: u32) -> Result<Vec<u64>, KernelError> {
        let mut block = [0u64; BLOCK_ELEMENTS as usize];
        t.wram_read_u64s(from, &mut block)?;
        let out = uniques(&block);
        t.wram_write_u64s(to, &out)?;
        t.compute(
            UNI_PER_ROUND_INSTRUCTIONS
                + BLOCK_ELEMENTS * UNI_PER_ELEMENT_INSTRUCTIONS
                + out.len() as u64 * PER_KEPT_INSTRUCTIONS,
        )
        .await?;
        Ok(out)
    }
}

impl Kernel for Unique {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let (id, last) = (t.id(), t.tasklets() - 1);
        let (a, b) = begin(t, &self.chain).await?;
        let blocks = my_blocks(t, self.share_bytes);
        for (round, &at) in blocks.iter().enumerate() {
            t.mram_read(at, a, BLOCK_BYTES).await?;
            let out = self.unique(t, a, b).await?;
            let (first, final_value, n) = (out[0], out[out.len() - 1], out.len() as u64);
            let got = self
                .chain
                .pass(t, |m| Message {
                    count: m.count + n,
                    value: final_value,
                    offset: m.offset + u64::from(m.value == first),
                })
                .await?;
            let dropped = u64::from(got.value == first);
            let base = self.bases[round].load(Relaxed);
            if n > dropped {
                let to = self.share_bytes + (base + got.count - got.offset) * ELEMENT_BYTES;
                let from = b + (dropped * ELEMENT_BYTES) as u32;
                t.mram_write(from, to, ((n - dropped) * ELEMENT_BYTES) as u32)
                    .await?;
            }
            if id == last {
                let total = base + got.count + n - got.offset - dropped;
                self.bases[round + 1].store(total, Relaxed);
                self.total.store(total, Relaxed);
                // The next round's tasklet 0 compares its first value with this one.
                self.chain.put(
                    0,
                    Message {
                        value: final_value,
                        ..Message::default()
                    },
                );
                t.op(Op::WramAccess, 3).await?;
            }
            t.barrier_wait(0).await?;
            self.chain.rearm(t, round + 1 < blocks.len()).await?;
        }
        Ok(())
    }
}

/// A value not in UNI's input, which tasklet 0 compares its first value with in the first
/// round (PrIM's `0xFFFFFFFF`).
const UNI_NONE: u64 = 0xFFFF_FFFF;

/// One UNI run: `elements` in all on `dpus` DPUs, every DPU simulated and its output
/// checked; the record of the slowest DPU.
pub fn uni(machine: &Machine, dpus: u32, elements: u64) -> Result<AppRecord, Error> {
    let share = sel_share(elements, dpus);
    let rounds = share / BLOCK_ELEMENTS / u64::from(SEL_TASKLETS);
    let first = Message {
        value: UNI_NONE,
        ..Message::default()
    };
    let make = || Unique {
        share_bytes: share * ELEMENT_BYTES,
        chain: Chain::new(SEL_TASKLETS, first),
        bases: (0..=rounds).map(|_| AtomicU64::new(0)).collect(),
        total: AtomicU64::new(0),
    };
    let slowest = every_dpu(
        machine,
        ("UNI", dpus, share),
        |i| uni_input(i, elements),
        make,
        uniques,
    )?;
    record(
        machine,
        ("uni", SEL_TASKLETS),
        dpus,
        elements,
        share,
        slowest,
    )
}

/// Values DPU `d` keeps in UNI (what the host retrieves from it): one, and one more at every
/// odd index of its share below the input's end (where a new value starts).
pub fn uni_kept(elements: u64, dpus: u32, d: u32) -> u64 {
    let share = sel_share(elements, dpus);
    let first = u64::from(d) * share;
    let end = (first + share).min(elements).max(first + 1);
    // Odd indices in [first + 1, end): [0, x) holds floor(x / 2) of them, [0, first + 1)
    // ceil(first / 2).
    1 + end / 2 - first.div_ceil(2)
}

/// Elements DPU `d` keeps (what the host retrieves from it): its odd values.
pub fn sel_kept(elements: u64, dpus: u32, d: u32) -> u64 {
    let share = sel_share(elements, dpus);
    let first = u64::from(d) * share;
    let end = (first + share).min(elements).max(first);
    // Values i + 1 for i in first..end, odd when i is even; [0, x) holds ceil(x / 2) evens.
    end.div_ceil(2) - first.div_ceil(2)
}
