//! PIM-tree's ordered-search kernel on the DPU model: one launch runs a round's blocks
//! (formats in [`super::round`]) on the skip list in MRAM (formats in [`super::nodes`]),
//! as the task framework does (PB:`include/dpu/driver.h`): tasklet 0 loads the saved
//! globals and the buffer header; each block's tasks are split into contiguous equal
//! shares, read through the SDK's sequential reader, and the block ends at a barrier.
//!
//! A node is searched one key at a time: one block of each chain (keys, pointers, and
//! shadow copies where the node has them) per 16 entries, until an entry above the key.
//! The answer is the last entry at or below the key, or the node's first entry when every
//! entry is above (the sentinel's node). PIM-tree's `b_search` (PT:`dpu/bnode.h`) differs:
//! it reads every block of all three chains each node has, with no early stop, once for
//! all the keys of a task (docs/pim-tree.md, "Simplified"). Its basic blocks'
//! instructions are priced in [`super::costs`].

use super::costs::Costs;
use super::image::{Layout, SAVED_GLOBALS_BYTES};
// The sequential reader's pages are the get kernel's.
use super::kernel::{SEQREAD_FETCH_BYTES, SEQREAD_PAGE_BYTES};
use super::nodes::{BLOCK_WORDS, HEADER_WORDS, TOP_FANOUT, TOP_NODE_WORDS};
use super::round::{MAX_BLOCKS, TaskType, header_words, share, tasklet_reply_bytes};
use super::skiplist::{BLOCK_ENTRIES, pptr_addr};
use crate::dpu::{Kernel, KernelError, Tasklet};

/// Reply words staged in WRAM before one MRAM write.
const OUT_WORDS: usize = 32;
const START_BARRIER: u32 = 0;
const BLOCK_BARRIER: u32 = 1;

/// The kernel; the same on every DPU (the round is read from MRAM).
pub struct SearchKernel {
    pub layout: Layout,
}

/// One tasklet's WRAM buffers, and its blocks' instructions.
struct Bufs {
    page: u32,
    header: u32,
    /// A key block, or a top node.
    keys: u32,
    ptrs: u32,
    copies: u32,
    out: u32,
    costs: Costs,
}

/// A searched node: its level and the entry found (pointer, shadow copy).
struct Found {
    level: u64,
    ptr: u64,
    copy: u64,
}

impl Kernel for SearchKernel {
    fn wram_globals_bytes(&self) -> u32 {
        (SAVED_GLOBALS_BYTES + 8 * header_words(MAX_BLOCKS) as u64) as u32
    }

    fn iram_instructions(&self) -> u32 {
        // [est] the task framework and the search, scan and data paths.
        3500
    }

    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let l = &self.layout;
        let header = t.globals() + SAVED_GLOBALS_BYTES as u32;
        let header_bytes = 8 * header_words(MAX_BLOCKS) as u32;
        let costs = Costs::of(t);
        if t.id() == 0 {
            t.mram_read(
                l.saved_globals.base,
                t.globals(),
                SAVED_GLOBALS_BYTES as u32,
            )
            .await?;
            t.mram_read(l.tasks_base, header, header_bytes).await?;
            t.compute(costs.launch_half).await?;
        }
        t.barrier_wait(START_BARRIER).await?;
        let b = Bufs {
            page: t.mem_alloc(SEQREAD_FETCH_BYTES)?,
            header: t.mem_alloc(8 * HEADER_WORDS as u32)?,
            keys: t.mem_alloc(8 * TOP_NODE_WORDS as u32)?,
            ptrs: t.mem_alloc(8 * BLOCK_WORDS as u32)?,
            copies: t.mem_alloc(8 * BLOCK_WORDS as u32)?,
            out: t.mem_alloc(8 * OUT_WORDS as u32)?,
            costs,
        };
        let part = tasklet_reply_bytes(l, t.tasklets());
        let mut out_at = l.reply_buffers.base + t.id() as u64 * part;
        let mut page_at = None;
        let blocks = t.wram_read_u64(header)?.min(MAX_BLOCKS as u64);
        for blk in 0..blocks {
            let d = header + 8 + 32 * blk as u32;
            let kind = t.wram_read_u64(d)?;
            let kind = TaskType::from_word(kind)
                .ok_or_else(|| t.fail(format!("unknown task type {kind}")))?;
            let count = t.wram_read_u64(d + 8)?;
            let (tasks_at, offsets_at) = (t.wram_read_u64(d + 16)?, t.wram_read_u64(d + 24)?);
            let (from, to) = share(count, t.id(), t.tasklets());
            for i in from..to {
                let (start, end) = match kind.task_words() {
                    Some(w) => (tasks_at + i * w, tasks_at + (i + 1) * w),
                    None => (
                        self.word(t, &b, &mut page_at, offsets_at + i).await?,
                        self.word(t, &b, &mut page_at, offsets_at + i + 1).await?,
                    ),
                };
                let mut task = Vec::with_capacity((end - start) as usize);
                for w in start..end {
                    task.push(self.word(t, &b, &mut page_at, w).await?);
                }
                t.compute(costs.task).await?;
                let reply = self.run(t, &b, kind, &task).await?;
                out_at = self.write_reply(t, &b, out_at, kind, &reply).await?;
            }
            t.barrier_wait(BLOCK_BARRIER).await?;
        }
        if t.id() == 0 {
            t.compute(costs.launch_half).await?;
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

impl SearchKernel {
    /// Word `w` of the task buffer, through the sequential reader's pages.
    async fn word(
        &self,
        t: &Tasklet,
        b: &Bufs,
        page_at: &mut Option<u64>,
        w: u64,
    ) -> Result<u64, KernelError> {
        let addr = self.layout.tasks_base + 8 * w;
        let page = addr - addr % SEQREAD_PAGE_BYTES;
        if *page_at != Some(page) {
            t.mram_read(page, b.page, SEQREAD_FETCH_BYTES).await?;
            *page_at = Some(page);
        }
        t.wram_read_u64(b.page + (addr - page) as u32)
    }

    /// Writes one reply after the previous one (a count word first when variable);
    /// returns where the next goes.
    async fn write_reply(
        &self,
        t: &Tasklet,
        b: &Bufs,
        mut at: u64,
        kind: TaskType,
        reply: &[u64],
    ) -> Result<u64, KernelError> {
        let mut words = Vec::with_capacity(reply.len() + 1);
        if kind.reply_words().is_none() {
            words.push(reply.len() as u64);
        }
        words.extend_from_slice(reply);
        t.compute(b.costs.reply + b.costs.entry * reply.len() as u64)
            .await?;
        for piece in words.chunks(OUT_WORDS) {
            t.wram_write_u64s(b.out, piece)?;
            t.mram_write(b.out, at, 8 * piece.len() as u32).await?;
            at += 8 * piece.len() as u64;
        }
        Ok(at)
    }

    async fn run(
        &self,
        t: &Tasklet,
        b: &Bufs,
        kind: TaskType,
        task: &[u64],
    ) -> Result<Vec<u64>, KernelError> {
        Ok(match kind {
            TaskType::TopSearch => vec![self.top_leaf(t, b, task[0]).await?.1],
            TaskType::TopScan => self.top_scan(t, b, task[0], task[1]).await?,
            TaskType::Push => {
                let mut out = Vec::with_capacity(task.len() - 2);
                for &key in &task[2..2 + task[1] as usize] {
                    out.push(self.push(t, b, task[0], key).await?);
                }
                out
            }
            TaskType::PushOne => vec![self.push(t, b, task[0], task[1]).await?],
            TaskType::Pull => self.entries(t, b, pptr_addr(task[0]), true).await?,
            TaskType::Children => self.entries(t, b, pptr_addr(task[0]), false).await?,
            TaskType::ScanSearch => {
                self.scan(t, b, pptr_addr(task[0]), task[1], task[2])
                    .await?
            }
            TaskType::GetKey => {
                t.mram_read(task[0], b.ptrs, 16).await?;
                vec![t.wram_read_u64(b.ptrs)?, t.wram_read_u64(b.ptrs + 8)?]
            }
        })
    }

    /// The child of `node` covering `key`, through the node's shadow copy of that child
    /// when it has one (the copy is on this DPU).
    async fn push(&self, t: &Tasklet, b: &Bufs, node: u64, key: u64) -> Result<u64, KernelError> {
        let found = self.search(t, b, pptr_addr(node), key).await?;
        if found.copy == 0 {
            return Ok(found.ptr);
        }
        let below = self.search(t, b, found.copy, key).await?;
        debug_assert_eq!(below.level + 1, found.level);
        Ok(below.ptr)
    }

    /// Reads the header of the node at `addr`: level, entries, chains.
    async fn header(&self, t: &Tasklet, b: &Bufs, addr: u64) -> Result<[u64; 5], KernelError> {
        t.mram_read(addr, b.header, 8 * HEADER_WORDS as u32).await?;
        let mut h = [0u64; 5];
        t.wram_read_u64s(b.header, &mut h)?;
        Ok(h)
    }

    /// Reads the next block of each chain in use.
    async fn blocks(&self, t: &Tasklet, b: &Bufs, chains: [u64; 3]) -> Result<(), KernelError> {
        let bytes = 8 * BLOCK_WORDS as u32;
        for (addr, buf) in chains.into_iter().zip([b.keys, b.ptrs, b.copies]) {
            if addr != 0 {
                t.mram_read(addr, buf, bytes).await?;
            }
        }
        t.compute(b.costs.block).await
    }

    /// The last entry of the node at `addr` at or below `key` (its first when none is).
    async fn search(
        &self,
        t: &Tasklet,
        b: &Bufs,
        addr: u64,
        key: u64,
    ) -> Result<Found, KernelError> {
        let [level, len, mut kc, mut pc, mut cc] = self.header(t, b, addr).await?;
        let mut found = None;
        let mut seen = 0;
        while seen < len {
            self.blocks(t, b, [kc, pc, cc]).await?;
            let n = (len - seen).min(BLOCK_ENTRIES);
            let mut stop = false;
            for j in 0..n as u32 {
                let k = t.wram_read_u64(b.keys + 8 + 8 * j)?;
                if k > key && (seen > 0 || j > 0) {
                    stop = true;
                    break;
                }
                let copy = if cc != 0 {
                    t.wram_read_u64(b.copies + 8 + 8 * j)?
                } else {
                    0
                };
                found = Some((t.wram_read_u64(b.ptrs + 8 + 8 * j)?, copy));
                if k > key {
                    stop = true;
                    break;
                }
            }
            t.compute(b.costs.entry * n).await?;
            seen += n;
            if stop {
                break;
            }
            kc = t.wram_read_u64(b.keys)?;
            pc = t.wram_read_u64(b.ptrs)?;
            cc = if cc != 0 {
                t.wram_read_u64(b.copies)?
            } else {
                0
            };
        }
        let (ptr, copy) =
            found.ok_or_else(|| t.fail(format!("node at {addr:#x} has no entries")))?;
        Ok(Found { level, ptr, copy })
    }

    /// Every entry of the node at `addr`: keys then pointers (`with_keys`), or the
    /// pointers alone.
    async fn entries(
        &self,
        t: &Tasklet,
        b: &Bufs,
        addr: u64,
        with_keys: bool,
    ) -> Result<Vec<u64>, KernelError> {
        let [_, len, mut kc, mut pc, _] = self.header(t, b, addr).await?;
        if !with_keys {
            kc = 0;
        }
        let (mut keys, mut ptrs) = (Vec::new(), Vec::new());
        let mut seen = 0;
        while seen < len {
            self.blocks(t, b, [kc, pc, 0]).await?;
            let n = (len - seen).min(BLOCK_ENTRIES);
            for j in 0..n as u32 {
                if with_keys {
                    keys.push(t.wram_read_u64(b.keys + 8 + 8 * j)?);
                }
                ptrs.push(t.wram_read_u64(b.ptrs + 8 + 8 * j)?);
            }
            t.compute(b.costs.entry * n).await?;
            seen += n;
            kc = if with_keys {
                t.wram_read_u64(b.keys)?
            } else {
                0
            };
            pc = t.wram_read_u64(b.ptrs)?;
        }
        keys.extend_from_slice(&ptrs);
        Ok(keys)
    }

    /// The entries of the node at `addr` meeting `[lo, hi]`: above level 0, the last entry
    /// at or below `lo` and those in `(lo, hi]`; at level 0 (data keys), those in
    /// `[lo, hi]`.
    async fn scan(
        &self,
        t: &Tasklet,
        b: &Bufs,
        addr: u64,
        lo: u64,
        hi: u64,
    ) -> Result<Vec<u64>, KernelError> {
        let [level, len, mut kc, mut pc, _] = self.header(t, b, addr).await?;
        let (mut cover, mut out) = (None, Vec::new());
        let mut seen = 0;
        'walk: while seen < len {
            self.blocks(t, b, [kc, pc, 0]).await?;
            let n = (len - seen).min(BLOCK_ENTRIES);
            t.compute(b.costs.entry * n).await?;
            for j in 0..n as u32 {
                let k = t.wram_read_u64(b.keys + 8 + 8 * j)?;
                if k > hi {
                    break 'walk;
                }
                let p = t.wram_read_u64(b.ptrs + 8 + 8 * j)?;
                match (level, k.cmp(&lo)) {
                    (0, std::cmp::Ordering::Less) => {}
                    (0, _) | (_, std::cmp::Ordering::Greater) => out.push(p),
                    _ => cover = Some(p),
                }
            }
            seen += n;
            kc = t.wram_read_u64(b.keys)?;
            pc = t.wram_read_u64(b.ptrs)?;
        }
        Ok(cover.into_iter().chain(out).collect())
    }

    /// Descends the top to the leaf covering `key`: (the leaf's address, the level-2
    /// pointer covering the key), leaving the leaf in the key buffer.
    async fn top_leaf(&self, t: &Tasklet, b: &Bufs, key: u64) -> Result<(u64, u64), KernelError> {
        let top = self.layout.top.base;
        t.mram_read(top, b.keys, 16).await?;
        let mut at = t.wram_read_u64(b.keys)?;
        loop {
            t.mram_read(at, b.keys, 8 * TOP_NODE_WORDS as u32).await?;
            let height = t.wram_read_u64(b.keys + 16)?;
            let size = t.wram_read_u64(b.keys + 24)?;
            let mut pos = 0u32;
            for j in 1..size as u32 {
                if t.wram_read_u64(b.keys + 32 + 8 * j)? > key {
                    break;
                }
                pos = j;
            }
            t.compute(b.costs.top_node + b.costs.entry * (pos as u64 + 1))
                .await?;
            let child = t.wram_read_u64(b.keys + 32 + 8 * (TOP_FANOUT as u32 + pos))?;
            if height == 0 {
                return Ok((at, child));
            }
            at = child;
        }
    }

    /// The level-2 pointers meeting `[lo, hi]`: the one covering `lo`, then along the
    /// leaves while the keys stay at or below `hi`.
    async fn top_scan(
        &self,
        t: &Tasklet,
        b: &Bufs,
        lo: u64,
        hi: u64,
    ) -> Result<Vec<u64>, KernelError> {
        self.top_leaf(t, b, lo).await?;
        let (mut cover, mut out) = (None, Vec::new());
        loop {
            let right = t.wram_read_u64(b.keys + 8)?;
            let size = t.wram_read_u64(b.keys + 24)?;
            t.compute(b.costs.top_node + b.costs.entry * size).await?;
            for j in 0..size as u32 {
                let k = t.wram_read_u64(b.keys + 32 + 8 * j)?;
                if k > hi {
                    return Ok(cover.into_iter().chain(out).collect());
                }
                let p = t.wram_read_u64(b.keys + 32 + 8 * (TOP_FANOUT as u32 + j))?;
                if k <= lo {
                    cover = Some(p);
                } else {
                    out.push(p);
                }
            }
            if right == 0 {
                return Ok(cover.into_iter().chain(out).collect());
            }
            t.mram_read(right, b.keys, 8 * TOP_NODE_WORDS as u32)
                .await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpu::Dpu;
    use crate::machine::Machine;
    use crate::pimtree::image::{key_height, write_image};
    use crate::pimtree::nodes::{Top, node_pptr, write_nodes};
    use crate::pimtree::round::{Block, read_and_check, write_round};
    use crate::pimtree::skiplist::{Skeleton, SkipList, pptr};

    /// One DPU holding all of 40,000 keys (10, 20, ...) in a three-level skip list.
    struct OneDpu {
        dpu: Dpu,
        layout: Layout,
        pairs: Vec<(u64, u64)>,
        list: SkipList,
        /// Each level-0 node's (key, data node pointer) entries.
        level0: Vec<Vec<(u64, u64)>>,
    }

    impl OneDpu {
        fn new() -> OneDpu {
            let m = Machine::from_toml_str(
                "m.toml",
                include_str!("../../machines/upmem-2538.toml"),
                &[],
            )
            .unwrap();
            let layout = Layout::new(11);
            let pairs: Vec<(u64, u64)> = (1..=40_000u64).map(|i| (i * 10, i)).collect();
            let mut skeleton = Skeleton::default();
            let mut level0: Vec<Vec<(u64, u64)>> = Vec::new();
            for (i, &(k, _)) in pairs.iter().enumerate() {
                let heads = skeleton.heads.len();
                skeleton.push(k, key_height(3, k));
                if skeleton.heads.len() > heads {
                    level0.push(Vec::new());
                }
                level0.last_mut().unwrap().push((k, data_ptr(&layout, i)));
            }
            let list = SkipList::new(3, 1, skeleton);
            let top = Top::build(&layout, &list);
            let mut dpu = Dpu::new(&m.dpu, 0);
            write_image(dpu.mram_mut(), &layout, 3, &pairs);
            write_nodes(dpu.mram_mut(), &layout, &list, 0, &level0, &top);
            OneDpu {
                dpu,
                layout,
                pairs,
                list,
                level0,
            }
        }
    }

    /// The pointer to the data node of the `i`-th pair.
    fn data_ptr(layout: &Layout, i: usize) -> u64 {
        pptr(0, layout.data_node_addr(i as u64 + 1))
    }

    /// Every task type on one DPU holding all of 40,000 keys, each reply computed here by
    /// brute force over the sorted keys (not by the round planner).
    #[test]
    fn every_task_type_answers_as_a_scan_of_the_sorted_keys_does() {
        let OneDpu {
            mut dpu,
            layout,
            pairs,
            list,
            level0,
        } = OneDpu::new();
        let data_ptr = |i: usize| data_ptr(&layout, i);
        // The predecessor of q (the first key when none is below) by a scan.
        let pred = |q: u64| pairs.iter().rposition(|p| p.0 <= q).unwrap_or(0);
        let node =
            |level: usize, q: u64| list.heads(level).iter().rposition(|&h| h <= q).unwrap_or(0);
        let ptr = |level: usize, i: usize| node_pptr(&layout, &list, level, i);
        let queries = [0u64, 5, 10, 12_345, 200_001, 399_999, 400_000, u64::MAX];
        let mut round = Vec::new();
        let mut b = Block::new(TaskType::TopSearch);
        let mut push = Block::new(TaskType::Push);
        let mut one = Block::new(TaskType::PushOne);
        let mut get = Block::new(TaskType::GetKey);
        for &q in &queries {
            b.push(&[q], &[ptr(2, node(2, q))]);
            push.push(&[ptr(2, node(2, q)), 1, q], &[ptr(0, node(0, q))]);
            one.push(&[ptr(0, node(0, q)), q], &[data_ptr(pred(q))]);
            let p = pairs[pred(q)];
            get.push(&[data_ptr(pred(q)) & 0xffff_ffff], &[p.0, p.1]);
        }
        let mut pull = Block::new(TaskType::Pull);
        let mut children = Block::new(TaskType::Children);
        let mut scan = Block::new(TaskType::ScanSearch);
        let mut top_scan = Block::new(TaskType::TopScan);
        for i in [0, list.nodes(1) / 2, list.nodes(1) - 1] {
            let c = list.children(1, i);
            let mut want: Vec<u64> = c.clone().map(|g| list.head(0, g)).collect();
            want.extend(c.map(|g| ptr(0, g)));
            pull.push(&[ptr(1, i)], &want);
        }
        for (lo, hi) in [(0u64, 95), (12_341, 12_999), (399_000, u64::MAX)] {
            let i = node(0, lo);
            let all: Vec<u64> = level0[i].iter().map(|e| e.1).collect();
            children.push(&[ptr(0, i)], &all);
            let inside: Vec<u64> = level0[i]
                .iter()
                .filter(|e| (lo..=hi).contains(&e.0))
                .map(|e| e.1)
                .collect();
            scan.push(&[ptr(0, i), lo, hi], &inside);
            let last = list.heads(2).iter().rposition(|&h| h <= hi).unwrap_or(0);
            let want: Vec<u64> = (node(2, lo)..=last).map(|j| ptr(2, j)).collect();
            top_scan.push(&[lo, hi], &want);
        }
        round.extend([b, push, one, get, pull, children, scan, top_scan]);
        write_round(dpu.mram_mut(), &layout, &round);
        let kernel = SearchKernel {
            layout: layout.clone(),
        };
        dpu.launch(&kernel, 11).unwrap();
        read_and_check(dpu.mram(), &layout, &round, 11, |_, _, _| {}).unwrap();
    }
}
