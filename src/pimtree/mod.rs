//! PIM-tree's per-DPU data and get kernel (Kang et al., PVLDB 16(4); code: GitHub
//! cmuparlay/PIM-tree, with the host/DPU task framework cmuparlay/pim_base). What gets
//! touch: every key's data node (key, value, height) on the DPU `hash_to_dpu(key, 0)`, and
//! that DPU's linear-probing hash table, keyed by the key's low bits, pointing at the data
//! nodes. The regions of the skip list (its chunked nodes, data blocks, shadow copies and
//! the replicated top) are laid out at their declared sizes ([`image::Layout`]) but left
//! empty: gets never read them.
//!
//! Constants cite the file of cmuparlay/PIM-tree (`PT:`) or cmuparlay/pim_base (`PB:`)
//! they come from; `docs/pimtree-design.md` gives the commits and line numbers.

pub mod costs;
pub mod gets;
pub mod image;
pub mod kernel;
pub mod nodes;
pub mod ordered;
pub mod round;
pub mod search;
pub mod skiplist;

/// Slots of a DPU's hash table (PT:`common/common.h`, `LX_HASHTABLE_SIZE` = (4 << 20) >> 3).
pub const HASH_SLOTS: u64 = 1 << 19;
/// Bytes of a hash-table slot: ideal position (u32) and data-node address (u32)
/// (PT:`dpu/hashtable_l3size.h`, `ht_slot`).
pub const SLOT_BYTES: u64 = 8;
/// Bytes of a data node: key, value, height as three int64 (PT:`dpu/node_dpu.h`, `Pnode`).
pub const DATA_NODE_BYTES: u64 = 24;

/// Bytes of a get task, the key (PT:`common/task_base.h`, `p_get_task`).
pub const GET_TASK_BYTES: u64 = 8;
/// Bytes of a get reply, key and value (PT:`common/task_base.h`, `p_get_reply`).
pub const GET_REPLY_BYTES: u64 = 16;
/// Most tasks of one type one DPU may receive in one round; the host asserts it
/// (PT:`common/common.h`, `MAX_TASK_COUNT_PER_DPU_PER_BLOCK` = (100 << 10) >> 3).
pub const MAX_TASKS_PER_DPU: u64 = 12_800;

/// Bytes of the buffer header before a round's tasks and replies: three words (epoch or
/// state, block count, size) (PB:`include/common/task_framework_common.h`, `CPU_DPU_HEADER`
/// and `DPU_CPU_HEADER`).
pub const BUFFER_HEADER_BYTES: u64 = 24;
/// Bytes of a block header: type, count, size (`CPU_DPU_BLOCK_HEADER`,
/// `DPU_CPU_BLOCK_HEADER`, same file).
pub const BLOCK_HEADER_BYTES: u64 = 24;
/// Bytes of the block-offset table of a one-block buffer (one word per block).
pub const BLOCK_OFFSETS_BYTES: u64 = 8;

/// The mixer parlaylib's `hash64` applies (a multiply-add, three xor-shifts, a multiply,
/// three xor-shifts; constants from Numerical Recipes, as in parlaylib
/// `include/parlay/utilities.h`).
pub fn hash64(u: u64) -> u64 {
    let mut v = u
        .wrapping_mul(3_935_559_000_370_003_845)
        .wrapping_add(2_691_343_689_449_507_681);
    v ^= v >> 21;
    v ^= v << 37;
    v ^= v >> 4;
    v = v.wrapping_mul(4_768_777_513_237_032_717);
    v ^= v << 20;
    v ^= v >> 41;
    v ^= v << 5;
    v
}

/// The DPU of a key's node of height `height` (0: its data node and level-0 node):
/// `hash64(hash64(key) + height) mod dpus` (PT:`host/operation.hpp`, `hash_to_dpu`).
pub fn hash_to_dpu(key: u64, height: u64, dpus: u32) -> u32 {
    (hash64(hash64(key).wrapping_add(height)) % dpus as u64) as u32
}

/// The slot a key's probe starts at: its low 19 bits (PT:`common/common.h`, `hash_to_addr`).
pub fn home_slot(key: u64) -> u64 {
    key & (HASH_SLOTS - 1)
}

/// Bytes the host sends DPU `d` for a get round of `tasks` tasks: buffer header, the
/// block offsets, block header, the tasks (the order of [`kernel::write_tasks`]).
pub fn get_task_buffer_bytes(tasks: u64) -> u64 {
    BUFFER_HEADER_BYTES + BLOCK_HEADER_BYTES + tasks * GET_TASK_BYTES + BLOCK_OFFSETS_BYTES
}

/// Bytes the host reads back from a DPU for a get round of `tasks` tasks.
pub fn get_reply_buffer_bytes(tasks: u64) -> u64 {
    BUFFER_HEADER_BYTES + BLOCK_HEADER_BYTES + tasks * GET_REPLY_BYTES + BLOCK_OFFSETS_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash64_and_placement_match_an_independent_implementation() {
        // Computed with a separate Python implementation of the same mixer.
        assert_eq!(hash64(0), 8_882_115_565_503_647_203);
        assert_eq!(hash64(1), 13_738_603_025_981_410_947);
        assert_eq!(
            hash64(12_345_678_901_234_567_890),
            10_813_376_485_347_959_614
        );
        assert_eq!(hash_to_dpu(42, 0, 2538), 1134);
        assert_eq!(hash_to_dpu(42, 1, 2538), 21);
    }

    #[test]
    fn placement_spreads_keys_evenly() {
        let dpus = 64;
        let mut count = vec![0u32; dpus as usize];
        for k in 0..64_000u64 {
            count[hash_to_dpu(k * 7919, 0, dpus) as usize] += 1;
        }
        // 1,000 per DPU expected; 6 sigma is about 190.
        assert!(
            count.iter().all(|&c| (810..=1190).contains(&c)),
            "{count:?}"
        );
    }

    #[test]
    fn buffers_have_headers_and_fixed_size_records() {
        assert_eq!(get_task_buffer_bytes(0), 56);
        assert_eq!(get_task_buffer_bytes(10), 136);
        assert_eq!(get_reply_buffer_bytes(10), 216);
        assert_eq!(home_slot(u64::MAX), HASH_SLOTS - 1);
    }
}
