//! B+-Forest's evaluation kernel on the DPU model: the DPU program that answers one batch.
//!
//! MRAM of a DPU (addresses 8-byte aligned): `[cold tree][hot tree][query buffer][result
//! buffer]`. The query buffer is a 16-byte header (task, cold count, hot count, result
//! offset; u32 each) and the cold then the hot query records; results are written in the
//! same order.
//!
//! Per launch: tasklet 0 reads the header and caches the roots of both trees in WRAM, then
//! all tasklets meet at a barrier. Each query is answered by descending from the cached root
//! with one MRAM read per lower level (sized by the link's occupancy), then reading leaves
//! one at a time along the sibling links until a key beyond the range appears. Queries are
//! read from MRAM and results written back in blocks.
//!
//! Two work splits ([`WorkSplit`]): `static` gives each tasklet an equal contiguous share
//! (by count) of the cold queries, then of the hot ones, as the paper's kernel does;
//! `dynamic` has tasklets take blocks from a mutex-protected counter.
//!
//! The code's basic blocks are estimates \[est\] of the compiled DPU C code, written as the
//! operations each performs ([`OpMix`]) and priced by the machine's `[dpu.instructions]`
//! table; each constant below says what it stands for.

use crate::dpu::{Kernel, KernelError, Op, OpMix, Tasklet};
use crate::forest::batch::{HEADER_BYTES, decode_query, query_record_bytes, result_record_bytes};
use crate::forest::layout::NODE_BYTES;
use crate::forest::tree::{Internal, Leaf, Link, NO_LINK, internal_read_bytes, leaf_read_bytes};
use crate::workload::{Query, QueryKind};

/// Queries read (and results written) per DMA.
pub const BLOCK_QUERIES: u32 = 16;
/// Mutex guarding the shared work counter of the dynamic split.
const COUNTER_MUTEX: u32 = 0;
/// Barrier after tasklet 0 has read the header and roots.
const START_BARRIER: u32 = 0;

/// [est] Per query outside the tree walk: one loop iteration, loading the record's words
/// from the WRAM block and storing the result (five accesses at most), the dispatch on the
/// query's kind and the call (8 instructions). 16 instructions at the shipped costs.
const PER_QUERY: OpMix = OpMix(&[(Op::LoopIteration, 1), (Op::WramAccess, 5), (Op::Alu, 8)]);
/// [est] Per node visited besides its key comparisons: decode the link (shift, mask),
/// compute the node's address and DMA size, set up the call; 32-bit operations (MRAM
/// addresses fit in 32 bits). 8 instructions at the shipped costs.
const PER_NODE: OpMix = OpMix(&[(Op::Alu, 8)]);
/// [est] One key compared in an internal node: load it, compare (a 64-bit subtract),
/// branch. 4 instructions at the shipped costs.
const PER_KEY: OpMix = OpMix(&[(Op::WramAccess, 1), (Op::SubI64, 1), (Op::Alu, 1)]);
/// [est] One pair scanned in a leaf: load the key, compare it with both ends, load the
/// value and test or add it. 10 instructions at the shipped costs.
const PER_PAIR: OpMix = OpMix(&[
    (Op::WramAccess, 2),
    (Op::SubI64, 2),
    (Op::Alu, 2),
    (Op::AddI64, 1),
]);
/// [est] The dynamic split's counter update: load, add, store (the count fits in 32 bits).
/// 3 instructions at the shipped costs.
const COUNTER_UPDATE: OpMix = OpMix(&[(Op::WramAccess, 2), (Op::AddI32, 1)]);

/// Where one tree lives in a DPU's MRAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeArgs {
    /// MRAM address of node 0.
    pub base: u64,
    pub root: Link,
    pub height: u32,
}

/// One DPU's arguments (its global variables, set by the host before the launch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpuArgs {
    pub cold: TreeArgs,
    pub hot: Option<TreeArgs>,
    /// MRAM address of the query buffer (its header first).
    pub query_base: u64,
    /// MRAM address of the result buffer.
    pub result_base: u64,
}

/// How tasklets share a DPU's queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkSplit {
    /// Equal contiguous shares by count, cold queries then hot ones.
    Static,
    /// Blocks of [`BLOCK_QUERIES`] taken from a mutex-protected counter.
    Dynamic,
}

/// The kernel of one launch on every DPU.
pub struct ForestKernel {
    pub kind: QueryKind,
    pub split: WorkSplit,
    /// Indexed by global DPU index.
    pub dpus: Vec<DpuArgs>,
}

/// WRAM addresses shared by all tasklets of a DPU.
struct Shared {
    header: u32,
    cold_root: u32,
    hot_root: u32,
    counter: u32,
}

impl Shared {
    /// The program's globals (header copy, cached roots, work counter) at the start of
    /// WRAM's data section, `globals`, as a C program's global variables would be.
    fn at(globals: u32) -> Shared {
        let g = globals;
        Shared {
            header: g,
            cold_root: g + HEADER_BYTES as u32,
            hot_root: g + HEADER_BYTES as u32 + NODE_BYTES as u32,
            counter: g + HEADER_BYTES as u32 + 2 * NODE_BYTES as u32,
        }
    }

    /// Tasklet 0's set-up: reads the buffer's header and both roots, zeroes the counter.
    async fn load(&self, t: &Tasklet, args: &DpuArgs) -> Result<(), KernelError> {
        t.mram_read(args.query_base, self.header, HEADER_BYTES as u32)
            .await?;
        read_node(t, &args.cold, args.cold.root, self.cold_root).await?;
        if let Some(hot) = &args.hot {
            read_node(t, hot, hot.root, self.hot_root).await?;
        }
        t.wram_write_u64(self.counter, 0)
    }
}

/// WRAM addresses owned by one tasklet.
struct Own {
    node: u32,
    queries: u32,
    results: u32,
}

/// Bytes of the program's global variables: header copy, two cached roots, the counter.
const GLOBALS_BYTES: u32 = HEADER_BYTES as u32 + 2 * NODE_BYTES as u32 + 8;

impl Kernel for ForestKernel {
    fn wram_globals_bytes(&self) -> u32 {
        GLOBALS_BYTES
    }

    fn iram_instructions(&self) -> u32 {
        // [est] descent, leaf scan, block I/O and the three query kinds: about 1,500
        // instructions of compiled C, well within the 4,096 of IRAM.
        1500
    }

    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let args = &self.dpus[t.dpu() as usize];
        let rec = query_record_bytes(self.kind) as u32;
        let res = result_record_bytes(self.kind) as u32;
        let shared = Shared::at(t.globals());
        if t.id() == 0 {
            shared.load(t, args).await?;
        }
        t.barrier_wait(START_BARRIER).await?;
        let own = Own {
            node: t.mem_alloc(NODE_BYTES as u32)?,
            queries: t.mem_alloc(BLOCK_QUERIES * rec)?,
            results: t.mem_alloc(BLOCK_QUERIES * res)?,
        };
        let n_cold = t.wram_read_u32(shared.header + 4)? as u64;
        let n_hot = t.wram_read_u32(shared.header + 8)? as u64;
        let ctx = Ctx {
            kernel: self,
            args,
            shared: &shared,
            own: &own,
            rec,
            res,
            n_cold,
            costs: Costs::of(t),
        };
        match self.split {
            WorkSplit::Static => {
                let share = |n: u64| {
                    let (id, tl) = (t.id() as u64, t.tasklets() as u64);
                    (n * id / tl, n * (id + 1) / tl)
                };
                let (a, b) = share(n_cold);
                ctx.answer_range(t, a, b).await?;
                let (a, b) = share(n_hot);
                ctx.answer_range(t, n_cold + a, n_cold + b).await?;
            }
            WorkSplit::Dynamic => loop {
                t.mutex_lock(COUNTER_MUTEX).await?;
                let next = t.wram_read_u64(shared.counter)?;
                t.wram_write_u64(shared.counter, next + BLOCK_QUERIES as u64)?;
                t.compute(ctx.costs.counter).await?;
                t.mutex_unlock(COUNTER_MUTEX).await?;
                let total = n_cold + n_hot;
                if next >= total {
                    break;
                }
                let end = (next + BLOCK_QUERIES as u64).min(total);
                // A block never mixes trees: cut it at the cold/hot boundary.
                if next < n_cold && end > n_cold {
                    ctx.answer_range(t, next, n_cold).await?;
                    ctx.answer_range(t, n_cold, end).await?;
                } else {
                    ctx.answer_range(t, next, end).await?;
                }
            },
        }
        Ok(())
    }
}

/// Reads the node `link` points to into WRAM `to`: one DMA of its used bytes.
async fn read_node(t: &Tasklet, tree: &TreeArgs, link: Link, to: u32) -> Result<(), KernelError> {
    // Only roots are read this way; a root is a leaf only in a one-level tree.
    let size = node_read_bytes(link, tree.height == 1);
    t.mram_read(tree.base + link.offset_bytes(), to, size).await
}

struct Ctx<'a> {
    kernel: &'a ForestKernel,
    args: &'a DpuArgs,
    shared: &'a Shared,
    own: &'a Own,
    rec: u32,
    res: u32,
    n_cold: u64,
    costs: Costs,
}

/// Instructions of the kernel's blocks on this machine, priced once per tasklet.
struct Costs {
    query: u64,
    node: u64,
    key: u64,
    pair: u64,
    counter: u64,
}

impl Costs {
    fn of(t: &Tasklet) -> Costs {
        Costs {
            query: t.instructions(PER_QUERY),
            node: t.instructions(PER_NODE),
            key: t.instructions(PER_KEY),
            pair: t.instructions(PER_PAIR),
            counter: t.instructions(COUNTER_UPDATE),
        }
    }
}

impl Ctx<'_> {
    /// Answers records `[from, to)` of the query buffer (all cold or all hot).
    async fn answer_range(&self, t: &Tasklet, from: u64, to: u64) -> Result<(), KernelError> {
        let mut at = from;
        while at < to {
            let n = (to - at).min(BLOCK_QUERIES as u64) as u32;
            let q_addr = self.args.query_base + HEADER_BYTES + at * self.rec as u64;
            t.mram_read(q_addr, self.own.queries, n * self.rec).await?;
            for i in 0..n {
                let words = self.rec / 8;
                let mut q = [0u64; 3];
                t.wram_read_u64s(self.own.queries + i * self.rec, &mut q[..words as usize])?;
                let hot = at >= self.n_cold;
                let answer = self.answer(t, hot, q).await?;
                let r_addr = self.own.results + i * self.res;
                t.wram_write_u64(r_addr, answer.0)?;
                if self.res == 16 {
                    t.wram_write_u64(r_addr + 8, answer.1)?;
                }
                t.compute(self.costs.query).await?;
            }
            let r_addr = self.args.result_base + at * self.res as u64;
            t.mram_write(self.own.results, r_addr, n * self.res).await?;
            at += n as u64;
        }
        Ok(())
    }

    /// The tree a query goes to, and where its root is cached in WRAM.
    fn tree(&self, t: &Tasklet, hot: bool) -> Result<(&TreeArgs, u32), KernelError> {
        if !hot {
            return Ok((&self.args.cold, self.shared.cold_root));
        }
        let tree = (self.args.hot.as_ref())
            .ok_or_else(|| t.fail("a hot query arrived on a DPU without a hot tree"))?;
        Ok((tree, self.shared.hot_root))
    }

    /// One query on one tree: (answer word, second word of a 16-byte result).
    async fn answer(&self, t: &Tasklet, hot: bool, q: [u64; 3]) -> Result<(u64, u64), KernelError> {
        let kind = self.kernel.kind;
        let query = decode_query(kind, q);
        let lo = query.lo;
        let (tree, root_wram) = self.tree(t, hot)?;
        // Descend: the root from WRAM, each lower level with one MRAM read.
        let mut link = tree.root;
        let mut node_wram = root_wram;
        for level in 1..tree.height {
            let (child, compared) =
                t.with_wram(node_wram, internal_read_bytes(link.used()) as u32, |b| {
                    Internal::new(b, link.used()).child_for(lo)
                })?;
            link = child;
            node_wram = self.own.node;
            let size = node_read_bytes(link, level + 1 == tree.height);
            let addr = tree.base + link.offset_bytes();
            // The child's address is known: let the host fetch it during the compute.
            t.prefetch_mram(addr, size);
            let compare = self.costs.node + self.costs.key * compared as u64;
            t.compute_then_mram_read(compare, addr, node_wram, size)
                .await?;
        }
        // Scan leaves from the one holding `lo` until a key beyond `hi`.
        let mut acc = RangeAcc::default();
        loop {
            let size = node_read_bytes(link, true);
            let LeafScan {
                next,
                done,
                examined,
                found,
            } = t.with_wram(node_wram, size, |b| {
                scan_leaf(&Leaf::new(b), kind, &query, &mut acc)
            })?;
            let scan = self.costs.node + self.costs.pair * examined;
            debug_assert!(found.is_none() || done, "a get that found its key is done");
            if done || next == NO_LINK {
                t.compute(scan).await?;
                if let Some(v) = found {
                    return Ok((v, 1));
                }
                break;
            }
            let addr = tree.base + next.offset_bytes();
            let next_size = node_read_bytes(next, true);
            t.prefetch_mram(addr, next_size);
            t.compute_then_mram_read(scan, addr, self.own.node, next_size)
                .await?;
            node_wram = self.own.node;
            link = next;
        }
        match kind {
            QueryKind::Get | QueryKind::Predecessor => {
                Err(t.fail(format!("get of key {lo}: the key is not in its tree")))
            }
            QueryKind::RangeCountIf => Ok((acc.count, 0)),
            QueryKind::RangeMax => Ok((acc.max, acc.seen)),
        }
    }
}

/// The `[dpu.instructions]` keys this kernel reads under `split`: its blocks' operations,
/// the start barrier's and, under the dynamic split, the counter's update and mutex.
pub fn instruction_keys(split: WorkSplit) -> Vec<&'static str> {
    let mut mixes = vec![PER_QUERY, PER_NODE, PER_KEY, PER_PAIR];
    let mut sync = vec!["barrier_wait"];
    if split == WorkSplit::Dynamic {
        mixes.push(COUNTER_UPDATE);
        sync.extend(["mutex_lock", "mutex_unlock"]);
    }
    [OpMix::keys(&mixes), sync].concat()
}

/// Bytes one DMA reads of the node `link` points to: its used part.
fn node_read_bytes(link: Link, leaf: bool) -> u32 {
    let bytes = if leaf {
        leaf_read_bytes(link.used())
    } else {
        internal_read_bytes(link.used())
    };
    bytes as u32
}

/// What a range query has gathered over the leaves scanned so far.
#[derive(Debug, Default, Clone, Copy)]
struct RangeAcc {
    /// Range-count-if: pairs in range whose value matched.
    count: u64,
    /// Range-max: the largest value in range, and the pairs in range.
    max: u64,
    seen: u64,
}

/// One leaf's part of a query's scan.
struct LeafScan {
    next: Link,
    /// A key beyond the range ended the scan (or a get found its key).
    done: bool,
    /// Pairs examined, the one beyond the range included.
    examined: u64,
    /// A get's value.
    found: Option<u64>,
}

/// Scans `leaf` for `query` from its first pair until a key beyond `query.hi`, adding the
/// pairs in range to `acc`. A plain function, not part of the kernel's future, so that the
/// accumulators stay in registers (in the future they were stored back on every pair).
fn scan_leaf(leaf: &Leaf, kind: QueryKind, query: &Query, acc: &mut RangeAcc) -> LeafScan {
    let mut a = *acc;
    let (mut examined, mut done, mut found) = (0u64, false, None);
    for (k, v) in leaf.pairs_iter() {
        examined += 1;
        if k > query.hi {
            done = true;
            break;
        }
        let inside = k >= query.lo;
        match kind {
            QueryKind::Get | QueryKind::Predecessor => {
                if inside {
                    (found, done) = (Some(v), true);
                    break;
                }
            }
            QueryKind::RangeCountIf => a.count += (inside & (v == query.value)) as u64,
            QueryKind::RangeMax => {
                if inside {
                    a.max = a.max.max(v);
                    a.seen += 1;
                }
            }
        }
    }
    *acc = a;
    LeafScan {
        next: leaf.next(),
        done,
        examined,
        found,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instructions each block stood for as one fixed count (or, for the walk's steps,
    /// as a sum of `t.cost` terms) before the blocks were written as operations: at the
    /// shipped costs, no B+-Forest result moved.
    #[test]
    fn blocks_cost_their_former_counts_at_the_shipped_costs() {
        let blocks = [PER_QUERY, PER_NODE, PER_KEY, PER_PAIR, COUNTER_UPDATE];
        assert_eq!(OpMix::at_shipped_costs(&blocks), [16, 8, 4, 10, 3]);
    }

    #[test]
    fn the_dynamic_split_adds_the_counters_keys() {
        let keys = ["alu", "wram_access", "loop_iteration", "add_i64", "sub_i64"];
        let stat = [&keys[..], &["barrier_wait"]].concat();
        assert_eq!(instruction_keys(WorkSplit::Static), stat);
        let dynamic = [
            "alu",
            "wram_access",
            "loop_iteration",
            "add_i32",
            "add_i64",
            "sub_i64",
        ];
        let sync = ["barrier_wait", "mutex_lock", "mutex_unlock"];
        assert_eq!(
            instruction_keys(WorkSplit::Dynamic),
            [&dynamic[..], &sync].concat()
        );
    }
}
