//! PrIM BS, binary search (CMU-SAFARI/prim-benchmarks `BS/dpu/task.c`, `BS/host/app.c`,
//! `BS/support/common.h`; defaults: 16 tasklets, 256-byte blocks, int64), at the sizes of
//! the published real-hardware runs.
//!
//! Every DPU holds the whole sorted vector (`input[i] = i + 1`) and a slice of the queries
//! (`query[j] = j`, the query count padded to a multiple of DPUs x tasklets); each tasklet
//! takes an equal contiguous share of its DPU's slice. Per query it reads the query (8 B),
//! the vector's first block and a block 2,048 bytes before its end, then halves an MRAM
//! address range, reading one 256-byte block per step and scanning it in WRAM, until the
//! block holds the query or the range reaches an end of the vector (read and scanned once
//! more). Every query ends in a `printf` (found or not found). The launch ends with the
//! slowest DPU, so every DPU is simulated.
//!
//! uPIMulator's data sheet (`tools/upmem_reg_model/src/benchmark/bs.py`) sizes a run by one
//! parameter p: a vector of p elements on every DPU and p / 8 queries in all.

use super::apps::{AppRecord, record};
use crate::dpu::{Kernel, KernelError, Op, Tasklet};
use crate::error::Error;
use crate::machine::Machine;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

/// PrIM BS's defaults (`BS/Makefile`, `BS/support/common.h`: `BL` = 8).
pub const BS_TASKLETS: u32 = 16;
const BLOCK_BYTES: u64 = 256;
const ELEMENT_BYTES: u64 = 8;

/// [est] Per query outside the steps: the loop, the query's address, resetting the range
/// (three address computations), the first midpoint.
const PER_QUERY_INSTRUCTIONS: u64 = 20;
/// [est] Per step: the `found` tests, the new midpoint (add, shift, mask), the two boundary
/// tests.
const PER_STEP_INSTRUCTIONS: u64 = 12;
/// [est] The DPU runtime's `printf`: it copies the format's address and the arguments into
/// the log buffer in WRAM under a mutex (the host formats them); about this many
/// instructions, not measured.
const PRINTF_INSTRUCTIONS: u64 = 150;

/// Whether PrIM's search answers every query of a vector of `p` elements. It halves byte
/// addresses and reads whole blocks: near the start of a vector whose size is not a power
/// of two it reads the block at the midpoint, not at the vector's start, and misses the
/// queries before it; and the first block it reads, at the middle, runs past the end of a
/// vector shorter than two blocks (into the queries). PrIM ran powers of two, and so does
/// pimdes (a wrong answer would fail the run's check).
pub fn bs_answers_every_query(p: u64) -> bool {
    p.is_power_of_two() && p >= 2 * BLOCK_BYTES / ELEMENT_BYTES
}

/// Queries in all, padded as PrIM's host pads them.
pub fn bs_queries(p: u64, dpus: u32) -> u64 {
    let unit = u64::from(dpus) * u64::from(BS_TASKLETS);
    (p / 8).next_multiple_of(unit)
}

/// MRAM a DPU needs: the vector and its slice of the queries.
pub fn bs_mram_bytes(p: u64, dpus: u32) -> u64 {
    (p + bs_queries(p, dpus) / u64::from(dpus)) * ELEMENT_BYTES
}

struct BinarySearch {
    elements: u64,
    slice: u64,
    /// The index each query was found at (-1: not found), by query of the slice.
    found: Vec<AtomicI64>,
}

impl BinarySearch {
    /// Scans the block at `addr`: the index of `x` in it, -1 when its first element is at or
    /// below `x` but `x` is not there, -2 when `x` is below it (PrIM's `search`).
    async fn scan(&self, t: &Tasklet, block: u32, addr: u64, x: i64) -> Result<i64, KernelError> {
        t.mram_read(addr, block, BLOCK_BYTES as u32).await?;
        let per_element = t.cost(Op::WramAccess) + 2 * t.cost(Op::Alu) + t.cost(Op::LoopIteration);
        let mut values = [0u64; (BLOCK_BYTES / ELEMENT_BYTES) as usize];
        t.wram_read_u64s(block, &mut values)?;
        if (values[0] as i64) > x {
            t.compute(per_element).await?;
            return Ok(-2);
        }
        let at = values.iter().position(|&v| v as i64 == x);
        let scanned = at.map_or(values.len(), |i| i + 1) as u64;
        t.compute(per_element * scanned).await?;
        Ok(at.map_or(-1, |i| i as i64))
    }

    /// One query, as PrIM's loop runs it: the index found, or -1.
    async fn query(&self, t: &Tasklet, block: u32, x: i64) -> Result<i64, KernelError> {
        let vector_end = self.elements * ELEMENT_BYTES;
        // The first block and one 2,048 bytes before the end (`BLOCK_SIZE * sizeof(DTYPE)`).
        t.mram_read(0, block, BLOCK_BYTES as u32).await?;
        let tail = vector_end.saturating_sub(BLOCK_BYTES * ELEMENT_BYTES);
        t.mram_read(tail, block, BLOCK_BYTES as u32).await?;
        t.compute(PER_QUERY_INSTRUCTIONS).await?;
        let (mut start, mut end) = (0u64, vector_end);
        let mut cur = ((start + end) / 2) & !7;
        // The range halves every step: 64 steps cover any MRAM.
        for _ in 0..64 {
            let found = self.scan(t, block, cur, x).await?;
            t.compute(PER_STEP_INSTRUCTIONS).await?;
            if found > -1 {
                return Ok(found + (cur / ELEMENT_BYTES) as i64);
            }
            if found == -2 {
                end = cur;
                cur = ((cur + start) / 2) & !7;
            } else {
                start = cur;
                cur = ((cur + end) / 2) & !7;
            }
            let mut result = None;
            if cur < BLOCK_BYTES {
                let f = self.scan(t, block, cur, x).await?;
                result = Some(if f > -1 {
                    f + (cur / ELEMENT_BYTES) as i64
                } else {
                    -1
                });
            }
            if cur > end.saturating_sub(BLOCK_BYTES) {
                let at = end.saturating_sub(BLOCK_BYTES);
                let f = self.scan(t, block, at, x).await?;
                // PrIM reports this index relative to `cur`; the block's own index is kept
                // here so that the answer can be checked (the timing is the same).
                result = Some(if f > -1 {
                    f + (at / ELEMENT_BYTES) as i64
                } else {
                    -1
                });
            }
            if let Some(r) = result {
                return Ok(r);
            }
        }
        Err(t.fail(format!("the search for {x} did not end in 64 steps")))
    }
}

impl Kernel for BinarySearch {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.barrier_wait(0).await?;
        let block = t.mem_alloc(BLOCK_BYTES as u32)?;
        let word = t.mem_alloc(8)?;
        let per_tasklet = self.slice / u64::from(t.tasklets());
        let queries_at = self.elements * ELEMENT_BYTES;
        for k in 0..per_tasklet {
            let j = u64::from(t.id()) * per_tasklet + k;
            t.mram_read(queries_at + j * ELEMENT_BYTES, word, 8).await?;
            let x = t.wram_read_u64(word)? as i64;
            let found = self.query(t, block, x).await?;
            t.compute(PRINTF_INSTRUCTIONS).await?;
            self.found[j as usize].store(found, Relaxed);
        }
        Ok(())
    }
}

/// One BS run: p elements on each of `dpus` DPUs and p / 8 queries in all, every answer
/// checked; the record of the slowest DPU.
pub fn bs(machine: &Machine, dpus: u32, p: u64) -> Result<AppRecord, Error> {
    let slice = bs_queries(p, dpus) / u64::from(dpus);
    let vector: Vec<u8> = (0..p).flat_map(|i| (i as i64 + 1).to_le_bytes()).collect();
    let mut slowest = 0;
    for d in 0..dpus {
        let kernel = BinarySearch {
            elements: p,
            slice,
            found: (0..slice).map(|_| AtomicI64::new(i64::MIN)).collect(),
        };
        let first = u64::from(d) * slice;
        let queries: Vec<u8> = (first..first + slice)
            .flat_map(|j| (j as i64).to_le_bytes())
            .collect();
        let (report, _) = super::launch_one(machine, &kernel, BS_TASKLETS, |dpu| {
            dpu.mram_mut().write(0, &vector);
            dpu.mram_mut().write(p * ELEMENT_BYTES, &queries);
        })?;
        check(&kernel, first, p, dpus)?;
        slowest = slowest.max(report.cycles);
    }
    record(machine, ("bs", BS_TASKLETS), dpus, p, slice, slowest)
}

/// Each query j of the slice starting at `first` must be found at j - 1 (the vector holds
/// 1 ..= p); query 0 and queries beyond p are not found.
fn check(kernel: &BinarySearch, first: u64, p: u64, dpus: u32) -> Result<(), Error> {
    for (k, found) in kernel.found.iter().enumerate() {
        let x = first + k as u64;
        let want = if (1..=p).contains(&x) {
            x as i64 - 1
        } else {
            -1
        };
        let got = found.load(Relaxed);
        if got != want {
            return Err(Error::Verification(format!(
                "BS on {dpus} DPUs: query {x} answered {got}, expected {want}"
            )));
        }
    }
    Ok(())
}
