//! The basic blocks of PIM-tree's kernels (get and ordered search) as the operations each
//! performs, priced by the machine's `[dpu.instructions]` table. They are estimates \[est\]
//! of the compiled C (PT:`dpu/dpu.c`, `dpu/bnode.h`; PB:`include/dpu/task_framework_dpu.h`);
//! each says what it stands for and its instructions at the shipped costs (`alu` and
//! `wram_access` 1, `add_i32` 1, `loop_iteration` 3, `sub_i64` and `add_i64` 2).

use crate::dpu::{Op, OpMix, Tasklet};

/// Per task, in the task framework both kernels run: the sequential reader's cursor add
/// and page test, loading the task's words, the dispatch or call into the task's function,
/// with the registers it saves on the stack and restores. 24 instructions.
const TASK: OpMix = OpMix(&[(Op::WramAccess, 8), (Op::AddI32, 1), (Op::Alu, 15)]);
/// Per reply: its words stored in WRAM, its MRAM address (an index shifted and added),
/// the call to push it, one loop iteration. 12 instructions.
const REPLY: OpMix = OpMix(&[
    (Op::WramAccess, 2),
    (Op::AddI32, 1),
    (Op::LoopIteration, 1),
    (Op::Alu, 6),
]);
/// Half of tasklet 0's set-up and wrap-up (one half before the first barrier, one after
/// the last): restoring or saving about thirty globals and reading or writing seven header
/// words, with the tests and calls around them. 100 instructions.
const LAUNCH_HALF: OpMix = OpMix(&[(Op::WramAccess, 40), (Op::Alu, 60)]);
/// Per probe of the hash table: load the slot's word and the data node's key, compare the
/// keys (a 64-bit subtract), test for an empty slot and a match, step to the next slot
/// with wrap-around. 10 instructions.
const PROBE: OpMix = OpMix(&[(Op::WramAccess, 2), (Op::SubI64, 1), (Op::Alu, 6)]);
/// Per block of a node's chains walked: loading the next pointers of up to three chains,
/// one loop iteration. 12 instructions.
const BLOCK: OpMix = OpMix(&[(Op::WramAccess, 3), (Op::LoopIteration, 1), (Op::Alu, 6)]);
/// Per entry compared or copied: load, compare (a 64-bit subtract), branch. 4
/// instructions.
const ENTRY: OpMix = OpMix(&[(Op::WramAccess, 1), (Op::SubI64, 1), (Op::Alu, 1)]);
/// Per node of the replicated top searched: loading its height, size and child, one
/// iteration of the level loop. 12 instructions.
const TOP_NODE: OpMix = OpMix(&[(Op::WramAccess, 3), (Op::LoopIteration, 1), (Op::Alu, 6)]);

/// Every block above.
const BLOCKS: [OpMix; 7] = [TASK, REPLY, LAUNCH_HALF, PROBE, BLOCK, ENTRY, TOP_NODE];

/// The `[dpu.instructions]` keys PIM-tree's kernels read: their blocks' operations and
/// their barriers'.
pub fn instruction_keys() -> Vec<&'static str> {
    [OpMix::keys(&BLOCKS), vec!["barrier_wait"]].concat()
}

/// Instructions of each block on one machine, priced once per tasklet.
#[derive(Debug, Clone, Copy)]
pub(super) struct Costs {
    pub task: u64,
    pub reply: u64,
    pub launch_half: u64,
    pub probe: u64,
    pub block: u64,
    pub entry: u64,
    pub top_node: u64,
}

impl Costs {
    pub fn of(t: &Tasklet) -> Costs {
        Costs {
            task: t.instructions(TASK),
            reply: t.instructions(REPLY),
            launch_half: t.instructions(LAUNCH_HALF),
            probe: t.instructions(PROBE),
            block: t.instructions(BLOCK),
            entry: t.instructions(ENTRY),
            top_node: t.instructions(TOP_NODE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instructions each block stood for as one fixed count before the blocks were
    /// written as operations: at the shipped costs, no PIM-tree result moved.
    #[test]
    fn blocks_cost_their_former_counts_at_the_shipped_costs() {
        assert_eq!(
            OpMix::at_shipped_costs(&BLOCKS),
            [24, 12, 100, 10, 12, 4, 12]
        );
    }

    #[test]
    fn keys_are_the_blocks_operations_and_the_barrier() {
        assert_eq!(
            instruction_keys(),
            [
                "alu",
                "wram_access",
                "loop_iteration",
                "add_i32",
                "sub_i64",
                "barrier_wait"
            ]
        );
    }
}
