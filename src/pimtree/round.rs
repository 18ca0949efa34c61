//! One round of PIM-tree's ordered searches on one DPU: blocks of tasks, one task type per
//! block (PB:`include/dpu/driver.h`), the replies each task must produce, and the byte
//! formats of both in MRAM. The one place for the task types, their words and their sizes.
//!
//! **Task buffer** (at [`Layout::tasks_base`]): the block count, then per block its type,
//! task count, and the word offsets of its tasks and of its offset table (variable-length
//! types only), then each block's task words and offset table.
//!
//! **Replies**: each tasklet writes its replies, in task order, block after block, into
//! its own part of the reply-buffer region; a variable-length reply starts with its word
//! count. (PIM-tree then compacts the tasklets' parts into one buffer; that copy is not
//! modelled.)
//!
//! Bytes on the wire follow PIM-tree's task structs (PT:`common/task_base.h`,
//! `common/task.h`): 8 bytes per key or pointer, a variable-length task or reply carries
//! an 8-byte offset, every buffer a 24-byte header and each block a 24-byte header.

use super::image::Layout;
use super::{BLOCK_HEADER_BYTES, BUFFER_HEADER_BYTES, MAX_TASKS_PER_DPU};
use crate::dpu::Mram;

/// What a task asks a DPU to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskType {
    /// \[key\] -> \[the level-2 node covering it\], searched in the replicated top
    /// (`L3_search_task`).
    TopSearch = 1,
    /// \[lo, hi\] -> \[the level-2 nodes meeting the range\] (`L3_scan_task`).
    TopScan = 2,
    /// \[node, n, n keys\] -> \[per key, the child covering it, descending through the
    /// node's shadow copy when it has one\] (`b_search_task`).
    Push = 3,
    /// \[node, key\] -> \[the child covering it\] (`b_fixed_search_task`).
    PushOne = 4,
    /// \[node\] -> \[its keys, then its pointers\] (`b_get_node_task`).
    Pull = 5,
    /// \[node, lo, hi\] -> \[its children meeting the range; at level 0 the data nodes of
    /// the keys in it] (`b_scan_search_task`).
    ScanSearch = 6,
    /// \[node\] -> \[every child pointer\] (`b_fetch_child_task`).
    Children = 7,
    /// [data node address] -> [key, value] (`p_get_key_task`).
    GetKey = 8,
}

impl TaskType {
    pub const ALL: [TaskType; 8] = [
        TaskType::TopSearch,
        TaskType::TopScan,
        TaskType::Push,
        TaskType::PushOne,
        TaskType::Pull,
        TaskType::ScanSearch,
        TaskType::Children,
        TaskType::GetKey,
    ];

    /// The type's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            TaskType::TopSearch => "top-search",
            TaskType::TopScan => "top-scan",
            TaskType::Push => "push",
            TaskType::PushOne => "single-key push",
            TaskType::Pull => "pull",
            TaskType::ScanSearch => "scan-search",
            TaskType::Children => "child-fetch",
            TaskType::GetKey => "get-key",
        }
    }

    pub fn from_word(w: u64) -> Option<TaskType> {
        TaskType::ALL.into_iter().find(|t| *t as u64 == w)
    }

    /// Words of every task of this type; `None`: variable (an offset table follows).
    pub fn task_words(self) -> Option<u64> {
        match self {
            TaskType::TopSearch | TaskType::Pull | TaskType::Children | TaskType::GetKey => Some(1),
            TaskType::TopScan | TaskType::PushOne => Some(2),
            TaskType::ScanSearch => Some(3),
            TaskType::Push => None,
        }
    }

    /// Words of every reply of this type; `None`: variable (a count word leads).
    pub fn reply_words(self) -> Option<u64> {
        match self {
            TaskType::TopSearch | TaskType::PushOne => Some(1),
            TaskType::GetKey => Some(2),
            _ => None,
        }
    }
}

/// The tasks of one type one DPU gets in a round, and what each must answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub kind: TaskType,
    words: Vec<u64>,
    /// Task `i` is `words[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    expect: Vec<u64>,
    expect_starts: Vec<u32>,
    /// Pulls of level-0 nodes: the host knows only some entries of such a node, so each
    /// expectation is [entries, then (key, pointer) pairs the reply must hold].
    pub partial: bool,
}

impl Block {
    pub fn new(kind: TaskType) -> Block {
        Block {
            kind,
            words: Vec::new(),
            starts: vec![0],
            expect: Vec::new(),
            expect_starts: vec![0],
            partial: false,
        }
    }

    /// Adds a task and the reply it must produce.
    pub fn push(&mut self, task: &[u64], expect: &[u64]) {
        if let Some(w) = self.kind.task_words() {
            assert_eq!(task.len() as u64, w, "{:?} task", self.kind);
        }
        self.words.extend_from_slice(task);
        self.starts.push(self.words.len() as u32);
        self.expect.extend_from_slice(expect);
        self.expect_starts.push(self.expect.len() as u32);
    }

    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn task(&self, i: usize) -> &[u64] {
        &self.words[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    pub fn expected(&self, i: usize) -> &[u64] {
        &self.expect[self.expect_starts[i] as usize..self.expect_starts[i + 1] as usize]
    }

    /// Bytes of this block in the task buffer PIM-tree sends.
    pub fn task_bytes(&self) -> u64 {
        let offsets = if self.kind.task_words().is_none() {
            8
        } else {
            0
        };
        BLOCK_HEADER_BYTES + 8 * self.words.len() as u64 + offsets * self.len() as u64
    }

    /// Bytes of this block's replies PIM-tree reads back.
    pub fn reply_bytes(&self) -> u64 {
        let payload: u64 = (0..self.len()).map(|i| self.reply_len(i)).sum();
        let offsets = if self.kind.reply_words().is_none() {
            8
        } else {
            0
        };
        BLOCK_HEADER_BYTES + 8 * payload + offsets * self.len() as u64
    }

    /// Words of task `i`'s reply.
    pub fn reply_len(&self, i: usize) -> u64 {
        let e = self.expected(i);
        if self.partial {
            2 * e[0]
        } else {
            e.len() as u64
        }
    }

    /// Checks task `i`'s reply; the reason when it is wrong.
    pub fn check(&self, i: usize, reply: &[u64]) -> Result<(), String> {
        let want = self.expected(i);
        if !self.partial {
            return if reply == want {
                Ok(())
            } else {
                Err(format!("replied {reply:?}, expected {want:?}"))
            };
        }
        let len = want[0] as usize;
        if reply.len() != 2 * len {
            return Err(format!(
                "returned {} words for a node of {len} entries",
                reply.len()
            ));
        }
        let (keys, ptrs) = reply.split_at(len);
        for pair in want[1..].chunks_exact(2) {
            match keys.iter().position(|&k| k == pair[0]) {
                Some(j) if ptrs[j] == pair[1] => {}
                _ => {
                    return Err(format!(
                        "no entry ({}, {:#x}) in {reply:?}",
                        pair[0], pair[1]
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The blocks one DPU runs in one round.
pub type DpuRound = Vec<Block>;

/// Bytes of a DPU's task buffer and of its replies for a round (0 and 0 when idle: the
/// DPU still takes part in the padded transfer).
pub fn buffer_bytes(round: &DpuRound) -> (u64, u64) {
    let tasks: u64 = round.iter().map(Block::task_bytes).sum();
    let replies: u64 = round.iter().map(Block::reply_bytes).sum();
    (BUFFER_HEADER_BYTES + tasks, BUFFER_HEADER_BYTES + replies)
}

/// Words of the buffer header: the block count and four words per block.
pub fn header_words(blocks: usize) -> usize {
    1 + 4 * blocks
}

/// Most blocks of one round (PB:`include/common/task_framework_common.h`, `MAX_IO_BLOCKS`).
pub const MAX_BLOCKS: usize = 10;

/// Writes a round's task buffer at the layout's task address.
pub fn write_round(mram: &mut Mram, layout: &Layout, round: &DpuRound) {
    assert!(round.len() <= MAX_BLOCKS);
    let mut words = vec![round.len() as u64];
    let mut body = Vec::new();
    let base = header_words(round.len());
    for block in round {
        let tasks_at = base + body.len();
        body.extend_from_slice(&block.words);
        let offsets_at = base + body.len();
        if block.kind.task_words().is_none() {
            body.extend(block.starts.iter().map(|&s| tasks_at as u64 + s as u64));
        }
        words.extend_from_slice(&[
            block.kind as u64,
            block.len() as u64,
            tasks_at as u64,
            offsets_at as u64,
        ]);
    }
    words.extend_from_slice(&body);
    mram.write_u64s(layout.tasks_base, &words);
}

/// Tasks `[from, to)` of a block of `count` a tasklet takes: contiguous equal shares.
pub fn share(count: u64, tasklet: u32, tasklets: u32) -> (u64, u64) {
    let (id, n) = (tasklet as u64, tasklets as u64);
    (count * id / n, count * (id + 1) / n)
}

/// Bytes of one tasklet's part of the reply-buffer region.
pub fn tasklet_reply_bytes(layout: &Layout, tasklets: u32) -> u64 {
    layout.reply_buffers.bytes / tasklets as u64 / 8 * 8
}

/// Reads every reply of a round back (per block, per task) and checks it; the first wrong
/// reply is an error naming the block and task.
pub fn read_and_check(
    mram: &Mram,
    layout: &Layout,
    round: &DpuRound,
    tasklets: u32,
    mut keep: impl FnMut(usize, usize, &[u64]),
) -> Result<(), String> {
    let part = tasklet_reply_bytes(layout, tasklets);
    for t in 0..tasklets {
        let mut at = layout.reply_buffers.base + t as u64 * part;
        for (b, block) in round.iter().enumerate() {
            let (from, to) = share(block.len() as u64, t, tasklets);
            for i in from as usize..to as usize {
                let n = match block.kind.reply_words() {
                    Some(n) => n,
                    None => {
                        let n = mram.read_u64s(at, 1)[0];
                        at += 8;
                        n
                    }
                };
                let reply = mram.read_u64s(at, n as usize);
                at += 8 * n;
                block
                    .check(i, &reply)
                    .map_err(|e| format!("block {b} ({:?}), task {i}: {e}", block.kind))?;
                keep(b, i, &reply);
            }
        }
    }
    Ok(())
}

/// Which of PIM-tree's limits a round passed: the DPU's tasks (their count or bytes), or
/// one tasklet's replies, whose part of the buffers shrinks with the tasklets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundLimit {
    Tasks,
    TaskletReplies,
}

/// Why a round cannot run on PIM-tree's buffers: too many tasks of one type, a task buffer
/// or a tasklet's replies too large for their regions.
pub fn check_limits(
    round: &DpuRound,
    layout: &Layout,
    tasklets: u32,
) -> Result<(), (RoundLimit, String)> {
    let tasks = |reason: String| Err((RoundLimit::Tasks, reason));
    if round.len() > MAX_BLOCKS {
        return tasks(format!(
            "{} task types in one round, at most {MAX_BLOCKS}",
            round.len()
        ));
    }
    for block in round {
        if block.len() as u64 > MAX_TASKS_PER_DPU {
            return tasks(format!(
                "{} {} tasks, at most {MAX_TASKS_PER_DPU} per DPU per round (MAX_TASK_COUNT_PER_DPU_PER_BLOCK)",
                block.len(),
                block.kind.name()
            ));
        }
    }
    let (task_bytes, _) = buffer_bytes(round);
    let limit = layout.replies_base - layout.tasks_base;
    if task_bytes > limit {
        return tasks(format!(
            "a task buffer of {task_bytes} bytes, at most {limit}"
        ));
    }
    let part = tasklet_reply_bytes(layout, tasklets);
    for t in 0..tasklets {
        let mut bytes = 0;
        for block in round {
            let (from, to) = share(block.len() as u64, t, tasklets);
            let lead = u64::from(block.kind.reply_words().is_none());
            bytes += (from..to)
                .map(|i| 8 * (lead + block.reply_len(i as usize)))
                .sum::<u64>();
        }
        if bytes > part {
            return Err((
                RoundLimit::TaskletReplies,
                format!(
                    "tasklet {t} writes {bytes} bytes of replies, its part of the reply buffers holds {part}"
                ),
            ));
        }
    }
    Ok(())
}
