//! PrIM GEMV, matrix-vector product of uint32 (CMU-SAFARI/prim-benchmarks `GEMV/dpu/task.c`,
//! `GEMV/host/app.c`, `GEMV/Makefile`: 16 tasklets, `BL` = 10, so 1,024-byte blocks), at the
//! sizes of the published real-hardware runs: m rows of 64 columns (uPIMulator
//! `tools/upmem_reg_model/src/benchmark/gemv.py`: a matrix of p x 64, a vector of 64).
//!
//! Each DPU holds its rows (m / DPUs; the runs divide evenly), then the vector, then the
//! results. Tasklets take rows two at a time (one 8-byte result write per pair) in PrIM's
//! split. A row of 64 columns is shorter than a block, so per row the kernel reads one block
//! from the row's start (1,024 bytes, of which 256 are the row) and the block of the vector,
//! then multiplies and accumulates 64 elements. Rows of 256 bytes stay 8-byte aligned, so
//! PrIM's realignment path (`offset`) never runs. Every result is checked.

use super::apps::{AppRecord, record};
use crate::dpu::{Kernel, KernelError, Op, Tasklet};
use crate::error::Error;
use crate::machine::Machine;

/// PrIM GEMV's defaults (`GEMV/Makefile`).
pub const GEMV_TASKLETS: u32 = 16;
const BLOCK_BYTES: u32 = 1 << 10;
/// Columns of uPIMulator's runs.
const COLUMNS: u64 = 64;
const ELEMENT_BYTES: u64 = 4;
/// Rows a tasklet handles per result write (`8 / sizeof(T)`).
const ROWS_PER_WRITE: u64 = 2;

/// [est] Per pair of rows: the row loop, clearing the two partial results, the addresses.
const PER_PAIR_INSTRUCTIONS: u64 = 16;
/// [est] Per row: the bounds test, the loop set-up, the address updates after the row.
const PER_ROW_INSTRUCTIONS: u64 = 14;

/// MRAM a DPU needs for `rows` rows: the rows, the vector, the results (and the one block
/// the last row's read runs past its end).
pub fn gemv_mram_bytes(rows: u64, dpus: u32) -> u64 {
    let per_dpu = rows.div_ceil(u64::from(dpus)).next_multiple_of(2);
    (per_dpu + 1) * COLUMNS * ELEMENT_BYTES + per_dpu * ELEMENT_BYTES + u64::from(BLOCK_BYTES)
}

struct Gemv {
    rows: u64,
    vector_at: u64,
    results_at: u64,
}

impl Gemv {
    /// Tasklet `id`'s first row and row count, as PrIM splits `rows` in pairs.
    fn share(&self, id: u64, tasklets: u64) -> (u64, u64) {
        let unit = tasklets * ROWS_PER_WRITE;
        let whole = self.rows / unit * ROWS_PER_WRITE;
        let rest = self.rows % unit;
        let extra = u64::from(id * ROWS_PER_WRITE < rest) * ROWS_PER_WRITE;
        let start = if rest == 0 {
            id * whole
        } else if id * ROWS_PER_WRITE < rest {
            id * (whole + ROWS_PER_WRITE)
        } else if !rest.is_multiple_of(ROWS_PER_WRITE) {
            (rest / ROWS_PER_WRITE * ROWS_PER_WRITE + ROWS_PER_WRITE) + id * whole
        } else {
            rest + id * whole
        };
        (start, whole + extra)
    }
}

impl Kernel for Gemv {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.barrier_wait(0).await?;
        let a = t.mem_alloc(BLOCK_BYTES + 8)?;
        let b = t.mem_alloc(BLOCK_BYTES)?;
        let c = t.mem_alloc(8)?;
        // Per element: load A[j] and B[j], the 32-bit multiply, the add into the partial
        // result through its pointer (a load and a store), the loop.
        let per_element = 4 * t.cost(Op::WramAccess)
            + t.cost(Op::MulI32)
            + t.cost(Op::AddI32)
            + t.cost(Op::LoopIteration);
        let (start, count) = self.share(u64::from(t.id()), u64::from(t.tasklets()));
        let mut out = self.results_at + start * ELEMENT_BYTES;
        for i in (start..start + count).step_by(ROWS_PER_WRITE as usize) {
            t.compute(PER_PAIR_INSTRUCTIONS).await?;
            let mut sums = [0u32; ROWS_PER_WRITE as usize];
            for (pos, sum) in sums.iter_mut().enumerate() {
                let row = i + pos as u64;
                if row >= self.rows {
                    break;
                }
                t.mram_read(row * COLUMNS * ELEMENT_BYTES, a, BLOCK_BYTES)
                    .await?;
                t.mram_read(self.vector_at, b, BLOCK_BYTES).await?;
                let mut x = vec![0u64; (COLUMNS / 2) as usize];
                let mut y = vec![0u64; (COLUMNS / 2) as usize];
                t.wram_read_u64s(a, &mut x)?;
                t.wram_read_u64s(b, &mut y)?;
                *sum = dot(&x, &y);
                t.compute(PER_ROW_INSTRUCTIONS + per_element * COLUMNS)
                    .await?;
            }
            let word = u64::from(sums[0]) | (u64::from(sums[1]) << 32);
            t.wram_write_u64(c, word)?;
            t.mram_write(c, out, 8).await?;
            out += 8;
        }
        Ok(())
    }
}

/// The uint32 dot product of two rows packed two elements to a word (wrapping, as in C).
fn dot(x: &[u64], y: &[u64]) -> u32 {
    let halves = |w: &u64| [*w as u32, (*w >> 32) as u32];
    x.iter()
        .flat_map(halves)
        .zip(y.iter().flat_map(halves))
        .fold(0u32, |s, (p, q)| s.wrapping_add(p.wrapping_mul(q)))
}

/// Element `i` of the matrix (`j` of the vector with `vector`), below 50 as PrIM's inputs.
fn input(vector: bool, i: u64) -> u32 {
    (i.wrapping_mul(2_654_435_761)
        .wrapping_add(u64::from(vector) * 7)
        % 50) as u32
}

/// One GEMV run: `rows` x 64 on `dpus` DPUs (equal shares), every result checked.
pub fn gemv(machine: &Machine, dpus: u32, rows: u64) -> Result<AppRecord, Error> {
    let per_dpu = rows.div_ceil(u64::from(dpus));
    let padded = per_dpu.next_multiple_of(2);
    let kernel = Gemv {
        rows: per_dpu,
        vector_at: padded * COLUMNS * ELEMENT_BYTES,
        results_at: (padded + 1) * COLUMNS * ELEMENT_BYTES,
    };
    let matrix: Vec<u8> = (0..per_dpu * COLUMNS)
        .flat_map(|i| input(false, i).to_le_bytes())
        .collect();
    let vector: Vec<u8> = (0..COLUMNS)
        .flat_map(|j| input(true, j).to_le_bytes())
        .collect();
    let (report, dpu) = super::launch_one(machine, &kernel, GEMV_TASKLETS, |d| {
        d.mram_mut().write(0, &matrix);
        d.mram_mut().write(kernel.vector_at, &vector);
    })?;
    let mut out = vec![0u8; (per_dpu * ELEMENT_BYTES) as usize];
    dpu.mram().read(kernel.results_at, &mut out);
    for (r, got) in out.chunks_exact(4).enumerate() {
        let want = (0..COLUMNS).fold(0u32, |s, j| {
            s.wrapping_add(input(false, r as u64 * COLUMNS + j).wrapping_mul(input(true, j)))
        });
        if u32::from_le_bytes(got.try_into().expect("4 bytes")) != want {
            return Err(Error::Verification(format!(
                "GEMV on {dpus} DPUs: row {r} wrong"
            )));
        }
    }
    record(
        machine,
        ("gemv", GEMV_TASKLETS),
        dpus,
        rows,
        per_dpu,
        report.cycles,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rows_are_split_in_pairs_without_gap_or_overlap() {
        for rows in [32u64, 512, 2048, 34, 50, 7] {
            let g = Gemv {
                rows,
                vector_at: 0,
                results_at: 0,
            };
            let mut next = 0;
            for id in 0..16 {
                let (start, count) = g.share(id, 16);
                assert_eq!(start, next, "rows {rows}, tasklet {id}");
                next = start + count;
            }
            assert!(next >= rows && next < rows + 2, "rows {rows}: {next}");
        }
    }
}
