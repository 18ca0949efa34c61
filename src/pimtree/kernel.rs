//! PIM-tree's get kernel on the DPU model (PT:`dpu/dpu.c`, `P_GET_TSK`, run by the task
//! framework of PB:`include/dpu/task_framework_dpu.h`).
//!
//! The task buffer (at [`Layout::tasks_base`]) is the buffer header (epoch, blocks, bytes),
//! the block-offset word, the block header (type, count, bytes), then `count` 8-byte keys.
//! The reply buffer (at [`Layout::replies_base`]) has the same headers, then one 16-byte
//! reply (key, value) per task, in task order; an absent key answers `INT64_MIN` twice.
//!
//! Per launch: tasklet 0 loads the saved globals and the headers, then all meet at a
//! barrier; each tasklet takes a contiguous equal slice of the tasks (PB:
//! `include/dpu/driver.h`) and reads it through the SDK's sequential reader; per task it
//! probes the hash table with 8-byte reads (a slot, then the key of the data node it points
//! at), reads key and value on a hit, and writes the reply; after a second barrier
//! tasklet 0 writes the reply headers and saves the globals.
//!
//! Its basic blocks' instructions are priced in [`super::costs`].

use super::costs::Costs;
use super::image::{Layout, SAVED_GLOBALS_BYTES};
use super::{
    BLOCK_HEADER_BYTES, BLOCK_OFFSETS_BYTES, BUFFER_HEADER_BYTES, GET_REPLY_BYTES, GET_TASK_BYTES,
    HASH_SLOTS, home_slot,
};
use crate::dpu::{Kernel, KernelError, Mram, Tasklet};

/// The reply of an absent key (PT:`dpu/dpu.c`: `INT64_MIN` for key and value).
pub const ABSENT: u64 = 1 << 63;
/// Bytes of the headers before the records of a one-block buffer.
pub const HEADERS_BYTES: u64 = BUFFER_HEADER_BYTES + BLOCK_OFFSETS_BYTES + BLOCK_HEADER_BYTES;
/// Bytes the SDK's sequential reader fetches per page (its cache holds two pages of
/// `SEQREAD_CACHE_SIZE` = 256 B, refilled when the cursor leaves the first; UPMEM SDK
/// syslib `seqread`).
pub(super) const SEQREAD_PAGE_BYTES: u64 = 256;
pub(super) const SEQREAD_FETCH_BYTES: u32 = 512;
const START_BARRIER: u32 = 0;
const END_BARRIER: u32 = 1;

/// The get kernel; the same on every DPU (the task count is read from MRAM).
pub struct GetKernel {
    pub layout: Layout,
}

/// Writes a get round's task buffer into `mram`.
pub fn write_tasks(mram: &mut Mram, layout: &Layout, keys: &[u64]) {
    let n = keys.len() as u64;
    let bytes = super::get_task_buffer_bytes(n);
    let mut words = vec![0, 1, bytes, 0, 0, n, n * GET_TASK_BYTES];
    words.extend_from_slice(keys);
    mram.write_u64s(layout.tasks_base, &words);
}

/// Reads a get round's replies (key, value) back from `mram`.
pub fn read_replies(mram: &Mram, layout: &Layout, tasks: usize) -> Vec<(u64, u64)> {
    let words = mram.read_u64s(layout.replies_base + HEADERS_BYTES, 2 * tasks);
    words.chunks_exact(2).map(|w| (w[0], w[1])).collect()
}

impl Kernel for GetKernel {
    fn wram_globals_bytes(&self) -> u32 {
        (SAVED_GLOBALS_BYTES + HEADERS_BYTES) as u32
    }

    fn iram_instructions(&self) -> u32 {
        // [est] the task framework's loop and the get path of PIM-tree's kernel (its full
        // program, with every task type, fills most of IRAM; `IRAM_FRIENDLY` exists for that).
        3000
    }

    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let l = &self.layout;
        let headers = t.globals() + SAVED_GLOBALS_BYTES as u32;
        let costs = Costs::of(t);
        if t.id() == 0 {
            t.mram_read(
                l.saved_globals.base,
                t.globals(),
                SAVED_GLOBALS_BYTES as u32,
            )
            .await?;
            t.mram_read(l.tasks_base, headers, HEADERS_BYTES as u32)
                .await?;
            t.compute(costs.launch_half).await?;
        }
        t.barrier_wait(START_BARRIER).await?;
        let count = t.wram_read_u64(headers + 40)?;
        let (id, tl) = (t.id() as u64, t.tasklets() as u64);
        let (from, to) = (count * id / tl, count * (id + 1) / tl);
        let bufs = Buffers {
            page: t.mem_alloc(SEQREAD_FETCH_BYTES)?,
            word: t.mem_alloc(8)?,
            reply: t.mem_alloc(GET_REPLY_BYTES as u32)?,
            costs,
        };
        let mut page_at = None;
        for i in from..to {
            let task_addr = l.tasks_base + HEADERS_BYTES + i * GET_TASK_BYTES;
            let page = task_addr - task_addr % SEQREAD_PAGE_BYTES;
            if page_at != Some(page) {
                t.mram_read(page, bufs.page, SEQREAD_FETCH_BYTES).await?;
                page_at = Some(page);
            }
            let key = t.wram_read_u64(bufs.page + (task_addr - page) as u32)?;
            t.compute(costs.task).await?;
            let value = self.probe(t, &bufs, key).await?;
            let (k, v) = value.map_or((ABSENT, ABSENT), |v| (key, v));
            t.wram_write_u64s(bufs.reply, &[k, v])?;
            t.compute(costs.reply).await?;
            let reply_addr = l.replies_base + HEADERS_BYTES + i * GET_REPLY_BYTES;
            t.mram_write(bufs.reply, reply_addr, GET_REPLY_BYTES as u32)
                .await?;
        }
        t.barrier_wait(END_BARRIER).await?;
        if t.id() == 0 {
            let bytes = super::get_reply_buffer_bytes(count);
            let words = [0, 1, bytes, 0, 0, count, count * GET_REPLY_BYTES];
            t.wram_write_u64s(headers, &words)?;
            t.compute(costs.launch_half).await?;
            t.mram_write(headers, l.replies_base, HEADERS_BYTES as u32)
                .await?;
            t.mram_write(
                t.globals(),
                l.saved_globals.base,
                SAVED_GLOBALS_BYTES as u32,
            )
            .await?;
        }
        Ok(())
    }
}

/// One tasklet's WRAM buffers, and its blocks' instructions.
struct Buffers {
    page: u32,
    word: u32,
    reply: u32,
    costs: Costs,
}

impl GetKernel {
    /// Linear probing from the key's home slot: the value, or `None` at an empty slot.
    async fn probe(&self, t: &Tasklet, b: &Buffers, key: u64) -> Result<Option<u64>, KernelError> {
        let l = &self.layout;
        let mut slot = home_slot(key);
        for _ in 0..HASH_SLOTS {
            t.mram_read(l.hash_table.base + slot * 8, b.word, 8).await?;
            let node = t.wram_read_u64(b.word)? >> 32;
            if node == 0 {
                t.compute(b.costs.probe).await?;
                return Ok(None);
            }
            // The compute and the read of the node it found, in one request.
            t.compute_then_mram_read(b.costs.probe, node, b.word, 8)
                .await?;
            if t.wram_read_u64(b.word)? == key {
                // p_get_key and p_get_value read the node's words separately.
                t.mram_read(node, b.word, 8).await?;
                t.mram_read(node + 8, b.word, 8).await?;
                return Ok(Some(t.wram_read_u64(b.word)?));
            }
            slot = (slot + 1) & (HASH_SLOTS - 1);
        }
        Err(t.fail("the hash table is full and does not hold the key"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpu::Dpu;
    use crate::machine::Machine;
    use crate::pimtree::image::write_image;

    fn machine() -> Machine {
        Machine::from_toml_str(
            "m.toml",
            include_str!("../../machines/upmem-2538.toml"),
            &[],
        )
        .unwrap()
    }

    #[test]
    fn answers_present_and_absent_keys_through_collisions() {
        let m = machine();
        let layout = Layout::new(11);
        let mut dpu = Dpu::new(&m.dpu, 0);
        let pairs: Vec<(u64, u64)> = (0..5000u64)
            .map(|i| (i * 3 + (i % 7) * HASH_SLOTS, i + 1000))
            .collect();
        write_image(dpu.mram_mut(), &layout, 3, &pairs);
        let mut keys: Vec<u64> = pairs.iter().step_by(3).map(|p| p.0).collect();
        // Never keys (i * 3 < 2^19 for every i here, so neither can be written as a key).
        keys.push(1);
        keys.push(HASH_SLOTS * 9 + 3);
        write_tasks(dpu.mram_mut(), &layout, &keys);
        let kernel = GetKernel {
            layout: layout.clone(),
        };
        let report = dpu.launch(&kernel, 11).unwrap();
        let replies = read_replies(dpu.mram(), &layout, keys.len());
        for (i, &k) in keys.iter().enumerate() {
            let want = pairs
                .iter()
                .find(|p| p.0 == k)
                .map_or((ABSENT, ABSENT), |p| *p);
            assert_eq!(replies[i], want, "task {i}, key {k}");
        }
        // Reply header: count and bytes.
        let header = dpu.mram().read_u64s(layout.replies_base, 7);
        assert_eq!(header[5], keys.len() as u64);
        assert!(report.cycles > 0);
    }

    #[test]
    fn more_probes_take_longer() {
        let m = machine();
        let layout = Layout::new(11);
        let run = |pairs: &[(u64, u64)], keys: &[u64]| {
            let mut dpu = Dpu::new(&m.dpu, 0);
            write_image(dpu.mram_mut(), &layout, 3, pairs);
            write_tasks(dpu.mram_mut(), &layout, keys);
            let kernel = GetKernel {
                layout: layout.clone(),
            };
            dpu.launch(&kernel, 11).unwrap().cycles
        };
        // 1,100 keys in distinct home slots, against 1,100 keys in one home slot's chain
        // (the last ones probe far): asking the first 110 of each.
        let spread: Vec<(u64, u64)> = (0..1100u64).map(|i| (i, i)).collect();
        let chained: Vec<(u64, u64)> = (0..1100u64).map(|i| (i * HASH_SLOTS, i)).collect();
        let ask = |p: &[(u64, u64)]| p.iter().rev().take(110).map(|x| x.0).collect::<Vec<_>>();
        assert!(run(&chained, &ask(&chained)) > 10 * run(&spread, &ask(&spread)));
    }
}
