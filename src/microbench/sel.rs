//! PrIM SEL, stream compaction of uint64 (CMU-SAFARI/prim-benchmarks `SEL/dpu/task.c`,
//! `SEL/host/app.c`, `SEL/Makefile`: 16 tasklets, `BL` = 10, so 1,024-byte blocks of 128
//! elements), at the sizes of the published real-hardware runs (the whole input, strong
//! scaling).
//!
//! The host fills `A[i] = i + 1` and pads with zeros; the predicate removes even values, so
//! a DPU keeps its odd ones, in order. Each DPU holds `S` elements: the input divided by the
//! DPUs, rounded up to a multiple of 16 x 128 so that every tasklet runs the same number of
//! rounds. Per round each tasklet reads one block, compacts the kept elements into a WRAM
//! buffer, learns how many the tasklets before it kept (PrIM's `handshake_sync`, a chain in
//! tasklet order), meets the others at a barrier, and writes its kept elements to the
//! output region after the input at the running offset.
//!
//! Two things are modelled differently from the code, without changing the work done:
//! - the handshake chain (`handshake_wait_for` / `handshake_notify`) is built from the
//!   machine's mutexes, one per tasklet, at their cost: tasklet t waits on the mutex
//!   t - 1 holds until t - 1 has passed its count on, as the real tasklet waits;
//! - the last tasklet advances the running offset before the round's barrier, not after it
//!   (where PrIM's code races, harmlessly on hardware, with the other tasklets' reads).
//!
//! A block with nothing kept (only padding) writes nothing; PrIM issues a DMA of its
//! (zero) size there, which the hardware treats as 8 bytes. Every DPU is simulated and
//! its output checked.

use super::apps::{AppRecord, record};
use crate::dpu::{Kernel, KernelError, Op, Tasklet};
use crate::error::Error;
use crate::machine::Machine;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// PrIM SEL's defaults (`SEL/Makefile`).
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

struct Select {
    share_bytes: u64,
    /// What each tasklet receives from the one before it in the round's chain.
    prefix: Vec<AtomicU64>,
    /// The output offset (elements) of each round, set by the last tasklet of the round
    /// before.
    bases: Vec<AtomicU64>,
    /// The DPU's count of kept elements (PrIM's `t_count`).
    total: AtomicU64,
}

impl Select {
    /// The round's chain: waits for the tasklet before (mutex `id - 1`), passes the count
    /// so far on to the one after (releasing mutex `id`); returns the count before `id`.
    async fn handshake(&self, t: &Tasklet, count: u64) -> Result<u64, KernelError> {
        let id = t.id();
        let before = if id > 0 {
            t.mutex_lock(id - 1).await?;
            let p = self.prefix[id as usize].load(Relaxed);
            t.mutex_unlock(id - 1).await?;
            p
        } else {
            0
        };
        t.op(Op::WramAccess, 1).await?;
        if id + 1 < t.tasklets() {
            self.prefix[id as usize + 1].store(before + count, Relaxed);
            t.mutex_unlock(id).await?;
        }
        Ok(before)
    }

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
        let a = t.mem_alloc(BLOCK_BYTES)?;
        let b = t.mem_alloc(BLOCK_BYTES)?;
        // Each tasklet but the last holds its mutex until it has passed its count on.
        if id < last {
            t.mutex_lock(id).await?;
        }
        t.barrier_wait(0).await?;
        let stride = u64::from(BLOCK_BYTES) * u64::from(t.tasklets());
        let mut at = u64::from(id) * u64::from(BLOCK_BYTES);
        let mut round = 0;
        while at < self.share_bytes {
            t.mram_read(at, a, BLOCK_BYTES).await?;
            let count = self.select(t, a, b).await?;
            let before = self.handshake(t, count).await?;
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
            at += stride;
            round += 1;
            if id < last && at < self.share_bytes {
                t.mutex_lock(id).await?;
            }
        }
        Ok(())
    }
}

/// One SEL run: `elements` in all on `dpus` DPUs, every DPU simulated and its output
/// checked; the record of the slowest DPU.
pub fn sel(machine: &Machine, dpus: u32, elements: u64) -> Result<AppRecord, Error> {
    let share = sel_share(elements, dpus);
    let rounds = share / BLOCK_ELEMENTS / u64::from(SEL_TASKLETS);
    let mut slowest = 0;
    for d in 0..u64::from(dpus) {
        let kernel = Select {
            share_bytes: share * ELEMENT_BYTES,
            prefix: (0..SEL_TASKLETS).map(|_| AtomicU64::new(0)).collect(),
            bases: (0..=rounds).map(|_| AtomicU64::new(0)).collect(),
            total: AtomicU64::new(0),
        };
        let values: Vec<u64> = (d * share..(d + 1) * share)
            .map(|i| input(i, elements))
            .collect();
        let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
        let (report, dpu) = super::launch_one(machine, &kernel, SEL_TASKLETS, |m| {
            m.mram_mut().write(0, &bytes);
        })?;
        let want: Vec<u64> = values.into_iter().filter(|&x| kept(x)).collect();
        let count = kernel.total.load(Relaxed);
        let mut out = vec![0u8; (count * ELEMENT_BYTES) as usize];
        dpu.mram().read(share * ELEMENT_BYTES, &mut out);
        let got: Vec<u64> = out
            .chunks_exact(8)
            .map(|x| u64::from_le_bytes(x.try_into().expect("8 bytes")))
            .collect();
        if got != want {
            return Err(Error::Verification(format!(
                "SEL on {dpus} DPUs: DPU {d} kept {count} elements, expected {}",
                want.len()
            )));
        }
        slowest = slowest.max(report.cycles);
    }
    record(
        machine,
        ("sel", SEL_TASKLETS),
        dpus,
        elements,
        share,
        slowest,
    )
}

/// Elements DPU `d` keeps (what the host retrieves from it): its odd values.
pub fn sel_kept(elements: u64, dpus: u32, d: u32) -> u64 {
    let share = sel_share(elements, dpus);
    let first = u64::from(d) * share;
    let end = (first + share).min(elements).max(first);
    // Values i + 1 for i in first..end, odd when i is even; [0, x) holds ceil(x / 2) evens.
    end.div_ceil(2) - first.div_ceil(2)
}
