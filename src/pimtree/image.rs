//! A DPU's MRAM under PIM-tree: the regions its DPU program declares, in declaration order
//! (PT:`dpu/storage.h`), then the task framework's buffers after the MRAM heap pointer
//! (PB:`include/dpu/task_framework_dpu.h`). Gets fill two regions: the data nodes and the
//! hash table ([`write_image`]).

use super::{DATA_NODE_BYTES, HASH_SLOTS, SLOT_BYTES, hash64, home_slot};
use crate::dpu::Mram;

const MIB: u64 = 1 << 20;
/// How an error names a region's size: PIM-tree declares each region's bytes, and a larger
/// MRAM does not grow them.
pub const FIXED_REGION: &str = "a size fixed in PIM-tree's source, whatever the MRAM";
const KIB: u64 = 1 << 10;

/// Bytes of a chunked skip-list node header (PT:`dpu/node_dpu.h`, `Bnode`: height, length,
/// three `pptr` links of 8 B, four MRAM pointers of 4 B; our count of its fields).
pub const BNODE_BYTES: u64 = 48;
/// Bytes of a data block: an 8-byte header and 16 int64 entries (PT:`dpu/data_block.h`).
pub const DATA_BLOCK_BYTES: u64 = 136;
/// Bytes of a node of the replicated top (PT:`dpu/node_dpu.h`, `L3Bnode`: up, right,
/// height, size, 16 keys, 16 `pptr`).
pub const L3_NODE_BYTES: u64 = 288;
/// \[est\] Bytes of the DPU globals a launch loads and saves (PT:`dpu/storage.h`, `WRAMHeap`:
/// about thirty 4- and 8-byte fields, two pointers per tasklet and five free lists); the
/// region holds two copies.
pub const SAVED_GLOBALS_BYTES: u64 = 256;
/// Gap between the MRAM heap pointer and the task buffer
/// (PB:`include/common/task_framework_common.h`, `DPU_MRAM_HEAP_START_SAFE_BUFFER` = 40 << 5).
const HEAP_SAFE_GAP_BYTES: u64 = 1280;
/// Largest task buffer of one DPU, and the distance from it to the reply buffer
/// (PT:`common/common.h`, `MAX_TASK_BUFFER_SIZE_PER_DPU` = 800 << 13).
pub const MAX_TASK_BUFFER_BYTES: u64 = 800 << 13;

/// One declared region: its name, MRAM address and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub name: &'static str,
    pub base: u64,
    pub bytes: u64,
}

/// Where everything lives in a DPU's MRAM (the same on every DPU).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub regions: Vec<Region>,
    /// Data nodes: slot 0 is never used (PT:`dpu/pnode.h`, `alloc_pn` starts at 1).
    pub data_nodes: Region,
    pub hash_table: Region,
    /// Chunked-node headers, data blocks and the replicated top (the skip list).
    pub headers: Region,
    pub blocks: Region,
    pub top: Region,
    /// The per-tasklet reply buffers of variable-length replies.
    pub reply_buffers: Region,
    pub saved_globals: Region,
    /// The round's tasks (headers first).
    pub tasks_base: u64,
    /// The round's replies (headers first).
    pub replies_base: u64,
    /// One past the last byte used.
    pub end: u64,
}

/// Data nodes a DPU can hold: the region's nodes but slot 0.
pub fn data_node_capacity(layout: &Layout) -> u64 {
    layout.data_nodes.bytes / DATA_NODE_BYTES - 1
}

impl Layout {
    /// The layout for `tasklets` tasklets (the per-tasklet reply regions are split by it).
    pub fn new(tasklets: u32) -> Layout {
        let t = tasklets.max(1) as u64;
        // (name, bytes): region sizes are whole records of the declared byte counts
        // (PT:`common/common.h`: B_BUFFER_SIZE 1.5 MiB, CACHE_INIT_RECORD_SIZE 300 KiB,
        // DB_BUFFER_SIZE 17 MiB, L3_BUFFER_SIZE 6 MiB, P_BUFFER_SIZE 7.5 MiB).
        let declared = [
            ("chunked nodes", (3 * MIB / 2) / BNODE_BYTES * BNODE_BYTES),
            ("shadow-copy records", 300 * KIB),
            (
                "data blocks",
                17 * MIB / DATA_BLOCK_BYTES * DATA_BLOCK_BYTES,
            ),
            ("replicated top", 6 * MIB / L3_NODE_BYTES * L3_NODE_BYTES),
            (
                "data nodes",
                (15 * MIB / 2) / DATA_NODE_BYTES * DATA_NODE_BYTES,
            ),
            ("hash table", HASH_SLOTS * SLOT_BYTES),
            // send_varlen_offset[NR_TASKLETS][MAX_TASK_COUNT_PER_TASKLET_PER_BLOCK] of int64.
            ("reply offsets", t * (super::MAX_TASKS_PER_DPU / t) * 8),
            // send_varlen_buffer[NR_TASKLETS][MAX_TASK_BUFFER_SIZE_PER_TASKLET].
            ("reply buffers", t * (MAX_TASK_BUFFER_BYTES / t)),
            ("saved globals", 2 * SAVED_GLOBALS_BYTES),
        ];
        let mut regions = Vec::with_capacity(declared.len());
        let mut at = 0u64;
        for (name, bytes) in declared {
            regions.push(Region {
                name,
                base: at,
                bytes,
            });
            at = (at + bytes).next_multiple_of(8);
        }
        let find = |name: &str| *regions.iter().find(|r| r.name == name).expect("declared");
        let tasks_base = at + HEAP_SAFE_GAP_BYTES;
        let replies_base = tasks_base + MAX_TASK_BUFFER_BYTES;
        Layout {
            data_nodes: find("data nodes"),
            hash_table: find("hash table"),
            headers: find("chunked nodes"),
            blocks: find("data blocks"),
            top: find("replicated top"),
            reply_buffers: find("reply buffers"),
            saved_globals: find("saved globals"),
            regions,
            tasks_base,
            replies_base,
            end: replies_base + MAX_TASK_BUFFER_BYTES,
        }
    }

    /// MRAM address of data node `i` (1-based).
    pub fn data_node_addr(&self, i: u64) -> u64 {
        self.data_nodes.base + i * DATA_NODE_BYTES
    }
}

/// What placing one DPU's keys produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImageStats {
    pub keys: u64,
    /// Slots probed to insert every key (one per key when nothing collides).
    pub insert_probes: u64,
}

/// A key's height, drawn as PIM-tree's insert does (PT:`host/operation.hpp`): t = trailing
/// zeros of a random 32-bit word + 1; height (t - 1) / 4 + 1 up to t = 12, else t - 9,
/// at most 17. The word is a seeded hash of the key, so heights do not depend on threads.
pub fn key_height(seed: u64, key: u64) -> u64 {
    let word = hash64(key ^ hash64(seed)) as u32;
    let t = word.trailing_zeros() as u64 + 1;
    if t <= 12 {
        (t - 1) / 4 + 1
    } else {
        (t - 9).min(17)
    }
}

/// Writes the data nodes of `pairs` (key order, distinct keys, at most the capacity) and
/// the hash table pointing at them, inserting in key order with linear probing
/// (PT:`dpu/hashtable_l3size.h`, `ht_insert`). The caller checked the capacity.
pub fn write_image(
    mram: &mut Mram,
    layout: &Layout,
    seed: u64,
    pairs: &[(u64, u64)],
) -> ImageStats {
    assert!(
        (pairs.len() as u64) <= data_node_capacity(layout),
        "the caller checks the data-node capacity"
    );
    let mut nodes = Vec::with_capacity(pairs.len() * 3);
    let mut slots = vec![0u64; HASH_SLOTS as usize];
    let mut probes = 0u64;
    for (i, &(key, value)) in pairs.iter().enumerate() {
        nodes.extend_from_slice(&[key, value, key_height(seed, key)]);
        let addr = layout.data_node_addr(i as u64 + 1);
        let home = home_slot(key);
        let mut slot = home;
        // Terminates: fewer keys than slots (the capacity is below the table size).
        while slots[slot as usize] != 0 {
            slot = (slot + 1) & (HASH_SLOTS - 1);
            probes += 1;
        }
        probes += 1;
        // ht_slot { pos: u32, v: u32 } in little-endian order.
        slots[slot as usize] = home | (addr << 32);
    }
    mram.write_u64s(layout.data_node_addr(1), &nodes);
    mram.write_u64s(layout.hash_table.base, &slots);
    ImageStats {
        keys: pairs.len() as u64,
        insert_probes: probes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_follows_the_declared_sizes_and_fits_64_mib() {
        let l = Layout::new(11);
        assert_eq!(l.hash_table.bytes, 4 * MIB);
        assert_eq!(data_node_capacity(&l), 327_679);
        assert_eq!(l.replies_base - l.tasks_base, 6_553_600);
        // Regions do not overlap and are 8-aligned.
        for w in l.regions.windows(2) {
            assert!(w[0].base + w[0].bytes <= w[1].base);
            assert_eq!(w[1].base % 8, 0);
        }
        assert!(l.end <= 64 * MIB, "{} bytes", l.end);
        assert!(l.end > 55 * MIB, "{} bytes", l.end);
    }

    #[test]
    fn heights_follow_the_geometric_law() {
        let n = 1 << 20;
        let mut above = [0u64; 4];
        for k in 0..n {
            let h = key_height(7, k);
            assert!((1..=17).contains(&h));
            for (i, c) in above.iter_mut().enumerate() {
                *c += (h > i as u64) as u64;
            }
        }
        // above[i]: keys of height above i. 1/16 of keys reach height 2, 1/256 height 3,
        // 1/4096 height 4.
        assert_eq!(above[0], n);
        let share = |c: u64| c as f64 / n as f64;
        assert!((share(above[1]) - 1.0 / 16.0).abs() < 0.003);
        assert!((share(above[2]) - 1.0 / 256.0).abs() < 0.0005);
        assert!((share(above[3]) - 1.0 / 4096.0).abs() < 0.0001);
    }

    #[test]
    fn colliding_keys_probe_the_next_slots() {
        let l = Layout::new(4);
        let mut mram = Mram::new(64 * MIB);
        // Three keys with the same low 19 bits, and one in the slot after.
        let pairs = [
            (5, 50),
            (5 + HASH_SLOTS, 51),
            (6, 60),
            (5 + 2 * HASH_SLOTS, 52),
        ];
        let stats = write_image(&mut mram, &l, 1, &pairs);
        // 5 -> slot 5; 5+2^19 -> 6; 6 -> 7 (after one collision); 5+2^20 -> 8.
        assert_eq!(stats.insert_probes, 1 + 2 + 2 + 4);
        let slot = |s: u64| mram.read_u64s(l.hash_table.base + 8 * s, 1)[0];
        assert_eq!(slot(5), 5 | (l.data_node_addr(1) << 32));
        assert_eq!(slot(7), 6 | (l.data_node_addr(3) << 32));
        assert_eq!(slot(8), 5 | (l.data_node_addr(4) << 32));
        assert_eq!(
            mram.read_u64s(l.data_node_addr(4), 2),
            vec![5 + 2 * HASH_SLOTS, 52]
        );
    }
}
