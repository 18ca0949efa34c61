//! The machine description: `RawMachine` mirrors the TOML file; [`Machine`] is the
//! validated model with derived quantities (usable DPUs per rank) and every timing
//! parameter turned into integers ([`DpuParams`], [`TransferParams`], [`HostParams`]).
//! `docs/machine-model.md` explains each parameter.

use crate::config::{Attribution, InputError, Override, Source, parse_toml, read_toml_file, shown};
use crate::engine::{Clock, Time};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Upper bound on simulated DPUs: 2^16, 25 times the largest UPMEM system built (40 ranks,
/// 2,560 DPUs). Each DPU keeps its own state and touched MRAM pages, about 65 KiB at the
/// smallest data (one 64 KiB MRAM page; see `experiments::estimate`), so 2^16 DPUs fit in a
/// few GiB of host memory, where the former 2^20 ran a 24 GiB machine out of memory.
pub const MAX_DPUS: u64 = 1 << 16;

/// Upper bound on `dpu.max_tasklets` (UPMEM DPUs run at most 24).
pub const MAX_DPU_TASKLETS: u64 = 32;

/// Bounds of the machine's decimal keys (the schema states them too): the DPU clock in MHz,
/// per-byte DMA cycles, durations in us and ns, and rates in GB/s (positive).
pub const MIN_CLOCK_MHZ: f64 = 1.0;
pub const MAX_CLOCK_MHZ: f64 = 10_000.0;
pub const MAX_CYCLES_PER_BYTE: f64 = 1000.0;
pub const MAX_US: f64 = 1e9;
pub const MAX_NS: f64 = 1e9;
pub const MIN_GB_PER_S: f64 = 1e-6;
pub const MAX_GB_PER_S: f64 = 1e6;

/// Upper bound on `host.threads`.
pub const MAX_HOST_THREADS: u64 = 4096;

/// Upper bound on `dpu.wram_size_bytes` (1 GiB).
pub const MAX_WRAM_BYTES: u64 = 1 << 30;

/// Upper bound on `dpu.atomic_bits`.
pub const MAX_ATOMIC_BITS: u64 = 4096;

/// Upper bound on `dma.alignment_bytes`.
pub const MAX_DMA_ALIGNMENT_BYTES: u64 = 4096;

/// Upper bound on `dma.min_size_bytes` and `dma.max_size_bytes` (1 MiB).
pub const MAX_DMA_BYTES: u64 = 1 << 20;

/// Most instructions a DPU's IRAM may hold (`dpu.iram_instructions`).
pub const MAX_IRAM_INSTRUCTIONS: u64 = 1 << 30;

/// Most stack bytes per tasklet (`dpu.stack_bytes_per_tasklet`).
pub const MAX_STACK_BYTES: u64 = 1 << 20;

/// Most cycles between two instructions of one tasklet
/// (`dpu.pipeline.tasklet_issue_interval_cycles`).
pub const MAX_ISSUE_INTERVAL_CYCLES: u64 = 1024;

/// Most instructions the pipeline issues per cycle (`dpu.pipeline.issue_slots_per_cycle`).
pub const MAX_ISSUE_SLOTS: u64 = 64;

/// The largest instruction count of one operation (`dpu.instructions.*`).
pub const MAX_INSTRUCTION_COST: u64 = 1_000_000;

/// The largest fixed DMA cost in cycles (`dma.*_fixed_cycles`).
pub const MAX_DMA_FIXED_CYCLES: u64 = 1 << 20;

/// Most DPUs of one rank (`dpus_per_rank`).
pub const MAX_DPUS_PER_RANK: u64 = 256;

/// The machine file as written (after `--set machine.*` overrides).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMachine {
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[schemars(range(min = 1))]
    pub ranks: u64,
    #[schemars(range(min = 1, max = MAX_DPUS_PER_RANK))]
    pub dpus_per_rank: u64,
    /// DPUs that work; the rest are faulty and disabled. Defaults to all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub usable_dpus: Option<u64>,
    pub dpu: RawDpu,
    pub dma: RawDma,
    pub transfer: RawTransfer,
    pub host: RawHost,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDpu {
    #[schemars(range(min = WORD_BYTES, max = MAX_MRAM_SIZE_BYTES))]
    pub mram_size_bytes: u64,
    #[schemars(range(min = MIN_CLOCK_MHZ, max = MAX_CLOCK_MHZ))]
    pub clock_mhz: f64,
    #[schemars(range(min = 1, max = MAX_DPU_TASKLETS))]
    pub max_tasklets: u64,
    #[schemars(range(min = WORD_BYTES, max = MAX_WRAM_BYTES))]
    pub wram_size_bytes: u64,
    #[schemars(range(min = 1, max = MAX_IRAM_INSTRUCTIONS))]
    pub iram_instructions: u64,
    #[schemars(range(min = 1, max = MAX_ATOMIC_BITS))]
    pub atomic_bits: u64,
    #[schemars(range(max = MAX_STACK_BYTES))]
    pub stack_bytes_per_tasklet: u64,
    pub pipeline: RawPipeline,
    pub instructions: RawInstructions,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    /// Cycles between two instructions of one tasklet (the revolver rule).
    #[schemars(range(min = 1, max = MAX_ISSUE_INTERVAL_CYCLES))]
    pub tasklet_issue_interval_cycles: u64,
    /// Instructions the pipeline issues per cycle, over all tasklets.
    #[schemars(range(min = 1, max = MAX_ISSUE_SLOTS))]
    pub issue_slots_per_cycle: u64,
}

/// Instructions per operation (the instruction-cost table).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawInstructions {
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub alu: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub wram_access: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub loop_iteration: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub add_i32: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub sub_i32: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub mul_i32: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub div_i32: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub add_i64: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub sub_i64: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub mul_i64: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub div_i64: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub add_f32: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub sub_f32: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub mul_f32: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub div_f32: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub add_f64: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub sub_f64: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub mul_f64: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub div_f64: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub mutex_lock: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub mutex_unlock: u64,
    #[schemars(range(max = MAX_INSTRUCTION_COST))]
    pub barrier_wait: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDma {
    #[schemars(range(min = 1, max = MAX_DMA_BYTES))]
    pub min_size_bytes: u64,
    #[schemars(range(min = 1, max = MAX_DMA_BYTES))]
    pub max_size_bytes: u64,
    #[schemars(range(min = 1, max = MAX_DMA_ALIGNMENT_BYTES))]
    pub alignment_bytes: u64,
    #[schemars(range(max = MAX_DMA_FIXED_CYCLES))]
    pub read_latency_fixed_cycles: u64,
    #[schemars(range(max = MAX_DMA_FIXED_CYCLES))]
    pub write_latency_fixed_cycles: u64,
    #[schemars(range(min = 0.0, max = MAX_CYCLES_PER_BYTE))]
    pub latency_cycles_per_byte: f64,
    #[schemars(range(max = MAX_DMA_FIXED_CYCLES))]
    pub occupancy_fixed_cycles: u64,
    #[schemars(range(min = 0.0, max = MAX_CYCLES_PER_BYTE))]
    pub occupancy_cycles_per_byte: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTransfer {
    #[schemars(range(min = 0.0, max = MAX_US))]
    pub call_fixed_us: f64,
    #[schemars(range(min = 0.0, max = MAX_US))]
    pub launch_fixed_us: f64,
    #[schemars(range(min = 0.0, max = MAX_US))]
    pub ownership_switch_us_per_rank: f64,
    /// How often the host checks for finished ranks after an asynchronous launch.
    #[schemars(range(min = 0.0, max = MAX_US))]
    pub poll_interval_us: f64,
    #[schemars(range(min = MIN_GB_PER_S, max = MAX_GB_PER_S))]
    pub cpu_dpu_gb_per_s_per_dpu: f64,
    #[schemars(range(min = MIN_GB_PER_S, max = MAX_GB_PER_S))]
    pub cpu_dpu_gb_per_s_per_rank: f64,
    #[schemars(range(min = MIN_GB_PER_S, max = MAX_GB_PER_S))]
    pub dpu_cpu_gb_per_s_per_dpu: f64,
    #[schemars(range(min = MIN_GB_PER_S, max = MAX_GB_PER_S))]
    pub dpu_cpu_gb_per_s_per_rank: f64,
    #[schemars(range(min = MIN_GB_PER_S, max = MAX_GB_PER_S))]
    pub broadcast_gb_per_s_per_rank: f64,
    /// The host's cap for both directions; each direction's own key, when given, replaces
    /// it (at least one of the three is needed for each direction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = MIN_GB_PER_S, max = MAX_GB_PER_S))]
    pub host_cap_gb_per_s: Option<f64>,
    /// Fixed cost of a transfer call per rank it involves, on top of `call_fixed_us`
    /// (0 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = MAX_US))]
    pub rank_fixed_us: Option<f64>,
    /// Fixed cost of a launch per rank it starts, on top of `launch_fixed_us` (0 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = MAX_US))]
    pub launch_per_rank_us: Option<f64>,
    /// Whether the ranks' MRAM ownership switches run one after another on the host
    /// (`serial`, the default) or side by side (`concurrent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership_switch: Option<SwitchMode>,
    /// The host's cap for each direction (`host_cap_gb_per_s` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = MIN_GB_PER_S, max = MAX_GB_PER_S))]
    pub host_cap_cpu_dpu_gb_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = MIN_GB_PER_S, max = MAX_GB_PER_S))]
    pub host_cap_dpu_cpu_gb_per_s: Option<f64>,
    /// Host threads the SDK gives each rank's transfers (its `nrThreadPerPool`); with
    /// `transpose_gb_per_s_per_thread` (both or neither; not modelled when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_THREADS_PER_RANK))]
    pub threads_per_rank: Option<u32>,
    /// Bytes one host thread transposes per second (the SDK's 8 x 8 byte interleaving).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = MIN_GB_PER_S, max = MAX_GB_PER_S))]
    pub transpose_gb_per_s_per_thread: Option<f64>,
}

/// How the MRAM ownership switches of several ranks are done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchMode {
    Serial,
    Concurrent,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHost {
    pub cpu: String,
    #[schemars(range(min = 1, max = MAX_HOST_THREADS))]
    pub threads: u64,
    #[schemars(range(min = 0.0, max = MAX_NS))]
    pub route_ns_per_query: f64,
    #[schemars(range(min = 0.0, max = MAX_NS))]
    pub merge_ns_per_result: f64,
    #[schemars(range(min = 0.0, max = MAX_NS))]
    pub pack_ns_per_byte: f64,
    #[schemars(range(min = 0.0, max = MAX_NS))]
    pub sort_ns_per_element: f64,
    #[schemars(range(min = 0.0, max = MAX_NS))]
    pub scan_ns_per_element: f64,
    #[schemars(range(min = 0.0, max = MAX_NS))]
    pub hash_ns_per_key: f64,
    #[schemars(range(min = 0.0, max = MAX_NS))]
    pub bucket_ns_per_task: f64,
    #[schemars(range(min = 0.0, max = MAX_NS))]
    pub fill_ns_per_result: f64,
}

/// The validated machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub name: String,
    pub ranks: u32,
    pub dpus_per_rank: u32,
    /// Usable DPUs in the whole system.
    pub dpus: u32,
    /// Usable DPUs of each rank; faulty DPUs are spread evenly (rank `r` of `R` keeps
    /// `floor(u(r+1)/R) - floor(ur/R)` of the `u` usable ones), so ranks differ by at most one.
    pub usable_dpus_per_rank: Vec<u32>,
    pub mram_size_bytes: u64,
    /// One DPU: clock, pipeline, memories, instruction costs, DMA engine.
    pub dpu: DpuParams,
    /// Host <-> DPU transfers and launches.
    pub transfer: TransferParams,
    /// The host CPU's analytic cost model.
    pub host: HostParams,
    /// The configuration this machine was built from, for the effective-config dump.
    pub raw: RawMachine,
    /// Where each key came from, so errors found later (a layout that does not fit) can
    /// blame the `--set` that changed the key rather than the file.
    pub attribution: Attribution,
}

/// The instruction-cost table: instructions per operation (see [`Op`]).
pub type InstructionCosts = RawInstructions;

impl RawInstructions {
    /// Every entry of the table by its key in `[dpu.instructions]`: the operations, then the
    /// synchronisation calls.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let sync = [
            ("mutex_lock", self.mutex_lock),
            ("mutex_unlock", self.mutex_unlock),
            ("barrier_wait", self.barrier_wait),
        ];
        Op::ALL
            .iter()
            .map(|op| (op.key(), op.cost(self)))
            .chain(sync)
    }
}

/// An operation of the instruction-cost table (`[dpu.instructions]` of the machine file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// 32-bit logic, compare or branch.
    Alu,
    /// One WRAM load or store.
    WramAccess,
    /// The overhead of one iteration of a simple loop (index, address, compare-and-branch).
    LoopIteration,
    AddI32,
    SubI32,
    MulI32,
    DivI32,
    AddI64,
    SubI64,
    MulI64,
    DivI64,
    AddF32,
    SubF32,
    MulF32,
    DivF32,
    AddF64,
    SubF64,
    MulF64,
    DivF64,
}

impl Op {
    /// Every operation, in the table's order.
    pub const ALL: [Op; 19] = [
        Op::Alu,
        Op::WramAccess,
        Op::LoopIteration,
        Op::AddI32,
        Op::SubI32,
        Op::MulI32,
        Op::DivI32,
        Op::AddI64,
        Op::SubI64,
        Op::MulI64,
        Op::DivI64,
        Op::AddF32,
        Op::SubF32,
        Op::MulF32,
        Op::DivF32,
        Op::AddF64,
        Op::SubF64,
        Op::MulF64,
        Op::DivF64,
    ];

    /// The operation's key in a machine file's `[dpu.instructions]`.
    pub fn key(self) -> &'static str {
        match self {
            Op::Alu => "alu",
            Op::WramAccess => "wram_access",
            Op::LoopIteration => "loop_iteration",
            Op::AddI32 => "add_i32",
            Op::SubI32 => "sub_i32",
            Op::MulI32 => "mul_i32",
            Op::DivI32 => "div_i32",
            Op::AddI64 => "add_i64",
            Op::SubI64 => "sub_i64",
            Op::MulI64 => "mul_i64",
            Op::DivI64 => "div_i64",
            Op::AddF32 => "add_f32",
            Op::SubF32 => "sub_f32",
            Op::MulF32 => "mul_f32",
            Op::DivF32 => "div_f32",
            Op::AddF64 => "add_f64",
            Op::SubF64 => "sub_f64",
            Op::MulF64 => "mul_f64",
            Op::DivF64 => "div_f64",
        }
    }

    /// Instructions of one such operation under `costs`.
    pub fn cost(self, costs: &InstructionCosts) -> u64 {
        match self {
            Op::Alu => costs.alu,
            Op::WramAccess => costs.wram_access,
            Op::LoopIteration => costs.loop_iteration,
            Op::AddI32 => costs.add_i32,
            Op::SubI32 => costs.sub_i32,
            Op::MulI32 => costs.mul_i32,
            Op::DivI32 => costs.div_i32,
            Op::AddI64 => costs.add_i64,
            Op::SubI64 => costs.sub_i64,
            Op::MulI64 => costs.mul_i64,
            Op::DivI64 => costs.div_i64,
            Op::AddF32 => costs.add_f32,
            Op::SubF32 => costs.sub_f32,
            Op::MulF32 => costs.mul_f32,
            Op::DivF32 => costs.div_f32,
            Op::AddF64 => costs.add_f64,
            Op::SubF64 => costs.sub_f64,
            Op::MulF64 => costs.mul_f64,
            Op::DivF64 => costs.div_f64,
        }
    }
}

/// A basic block's instructions as a count of each operation it performs. Its instructions
/// on a machine come from that machine's `[dpu.instructions]` table, so a change of one
/// operation's cost reaches every block that performs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpMix(pub &'static [(Op, u64)]);

impl OpMix {
    /// Instructions of the block under `costs`.
    pub fn instructions(self, costs: &InstructionCosts) -> u64 {
        self.0.iter().map(|&(op, n)| n * op.cost(costs)).sum()
    }

    /// Each of `mixes`' instructions at the costs of the shipped machine files (all five
    /// have the same table), for tests that hold a block to its documented count.
    #[cfg(test)]
    pub(crate) fn at_shipped_costs(mixes: &[OpMix]) -> Vec<u64> {
        let text = include_str!("../machines/paper-1012.toml");
        let machine = Machine::from_toml_str("m.toml", text, &[]).expect("a shipped machine");
        mixes
            .iter()
            .map(|m| m.instructions(&machine.dpu.costs))
            .collect()
    }

    /// The `[dpu.instructions]` keys some block of `mixes` reads, in the table's order.
    pub fn keys(mixes: &[OpMix]) -> Vec<&'static str> {
        let used = |op: &Op| {
            mixes
                .iter()
                .any(|m| m.0.iter().any(|&(o, n)| o == *op && n > 0))
        };
        Op::ALL
            .iter()
            .filter(|op| used(op))
            .map(|op| op.key())
            .collect()
    }
}

/// One DPU, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct DpuParams {
    pub clock: Clock,
    pub mram_size_bytes: u64,
    pub max_tasklets: u32,
    pub wram_size_bytes: u32,
    pub iram_instructions: u32,
    /// Hardware atomic bits; mutex and barrier ids must be below it.
    pub atomic_bits: u32,
    pub stack_bytes_per_tasklet: u32,
    pub tasklet_issue_interval_cycles: u64,
    pub issue_slots_per_cycle: u64,
    pub costs: InstructionCosts,
    pub dma: DmaParams,
}

impl DpuParams {
    /// The fewest cycles in which `tasklets` tasklets can issue `instructions`: the
    /// pipeline at its rate with that many ready, `min(tasklets / interval, slots)`
    /// instructions per cycle (`dpu.pipeline`; the sum of the per-tasklet rates
    /// `min(1 / interval, slots / tasklets)` that `dpu::core` gives them).
    pub fn pipeline_floor_cycles(&self, instructions: u64, tasklets: u32) -> f64 {
        assert!(tasklets > 0, "a pipeline floor of no tasklets");
        let interval = self.tasklet_issue_interval_cycles as f64;
        let rate = (tasklets as f64 / interval).min(self.issue_slots_per_cycle as f64);
        instructions as f64 / rate
    }
}

/// Direction of an MRAM <-> WRAM transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DmaDirection {
    /// `mram_read`: MRAM to WRAM.
    Read,
    /// `mram_write`: WRAM to MRAM.
    Write,
}

impl DmaDirection {
    /// The DPU SDK's call for a transfer in this direction.
    pub fn sdk_call(self) -> &'static str {
        match self {
            DmaDirection::Read => "mram_read",
            DmaDirection::Write => "mram_write",
        }
    }
}

/// The DMA engine of one DPU. Per-byte costs are kept in thousandths of a cycle so that
/// 0.5 cycle per byte stays exact.
#[derive(Debug, Clone, PartialEq)]
pub struct DmaParams {
    pub min_size_bytes: u32,
    pub max_size_bytes: u32,
    pub alignment_bytes: u32,
    pub read_latency_fixed_cycles: u64,
    pub write_latency_fixed_cycles: u64,
    pub latency_millicycles_per_byte: u64,
    pub occupancy_fixed_cycles: u64,
    pub occupancy_millicycles_per_byte: u64,
}

impl DmaParams {
    /// Cycles from issue to completion on an idle engine: alpha + beta x size (rounded up).
    pub fn latency_cycles(&self, direction: DmaDirection, size_bytes: u32) -> u64 {
        let fixed = match direction {
            DmaDirection::Read => self.read_latency_fixed_cycles,
            DmaDirection::Write => self.write_latency_fixed_cycles,
        };
        fixed + (size_bytes as u64 * self.latency_millicycles_per_byte).div_ceil(1000)
    }

    /// Cycles the engine is busy with one request, which bounds its throughput.
    pub fn occupancy_cycles(&self, size_bytes: u32) -> u64 {
        self.occupancy_fixed_cycles
            + (size_bytes as u64 * self.occupancy_millicycles_per_byte).div_ceil(1000)
    }
}

/// Host <-> DPU transfers, validated: durations in picoseconds, rates in bytes per second.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferParams {
    pub call_fixed: Time,
    pub launch_fixed: Time,
    pub ownership_switch_per_rank: Time,
    pub poll_interval: Time,
    pub cpu_dpu_bytes_per_s_per_dpu: u64,
    pub cpu_dpu_bytes_per_s_per_rank: u64,
    pub dpu_cpu_bytes_per_s_per_dpu: u64,
    pub dpu_cpu_bytes_per_s_per_rank: u64,
    pub broadcast_bytes_per_s_per_rank: u64,
    /// The host's cap for CPU -> DPU and for DPU -> CPU transfers.
    pub host_cap_bytes_per_s: [u64; 2],
    pub rank_fixed: Time,
    pub launch_per_rank: Time,
    pub switch: SwitchMode,
    /// The host threads that transpose the bytes of a transfer, when modelled.
    pub transpose: Option<Transpose>,
}

/// The SDK's byte transposition on the host: each rank's part of a call runs on its own
/// pool of threads, and all pools share the host's hardware threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transpose {
    pub threads_per_rank: u32,
    pub bytes_per_s_per_thread: u64,
}

impl TransferParams {
    /// Bytes per second `threads` host threads transpose (unlimited when not modelled).
    pub fn transpose_limit(&self, threads: u64) -> u64 {
        self.transpose.map_or(u64::MAX, |t| {
            t.bytes_per_s_per_thread.saturating_mul(threads)
        })
    }
}

/// The host CPU's analytic cost model, validated: costs in picoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct HostParams {
    pub cpu: String,
    pub threads: u32,
    pub route_ps_per_query: u64,
    pub merge_ps_per_result: u64,
    pub pack_ps_per_byte: u64,
    /// PIM-tree's host work: a comparison sort, per element of a batch.
    pub sort_ps_per_element: u64,
    /// One sequential pass (flag, pack, split), per element.
    pub scan_ps_per_element: u64,
    /// Hashing a key to its DPU.
    pub hash_ps_per_key: u64,
    /// Placing a task into its DPU's buffer (counting sort).
    pub bucket_ps_per_task: u64,
    /// Copying a reply to one original query.
    pub fill_ps_per_result: u64,
}

impl Machine {
    /// Reads a machine file and applies the `--set machine.*` overrides.
    pub fn load(path: &Path, overrides: &[Override]) -> Result<Machine, InputError> {
        let table = read_toml_file(path)?;
        Self::from_table(path.display().to_string(), table, overrides)
    }

    /// Parses machine TOML text (for embedded defaults); `origin` names it in errors.
    pub fn from_toml_str(
        origin: &str,
        text: &str,
        overrides: &[Override],
    ) -> Result<Machine, InputError> {
        let table = parse_toml(origin, text)?;
        Self::from_table(origin.to_owned(), table, overrides)
    }

    fn from_table(
        origin: String,
        table: toml::Table,
        overrides: &[Override],
    ) -> Result<Machine, InputError> {
        let workload = ("workload", &["data", "queries", "batches"][..]);
        crate::config::check_kind(&origin, &table, "machine", &["dpu", "ranks"], workload)?;
        let source = Source::new(origin, table, overrides, Some("machine"), &[])?;
        let raw: RawMachine = source.deserialize_bounded()?;
        Self::validate(raw, &source)
    }

    fn validate(raw: RawMachine, source: &Source) -> Result<Machine, InputError> {
        let s = &raw;
        // The name heads every report and table: an empty one leaves them unlabelled.
        if s.name.trim().is_empty() {
            return Err(source.error_at("name", "is empty: name the machine"));
        }
        if s.ranks == 0 {
            return Err(source.error_at("ranks", "must be at least 1"));
        }
        if s.dpus_per_rank == 0 || s.dpus_per_rank > MAX_DPUS_PER_RANK {
            let reason = format!("must be between 1 and {MAX_DPUS_PER_RANK}");
            return Err(source.error_at("dpus_per_rank", reason));
        }
        let total = s.ranks.saturating_mul(s.dpus_per_rank);
        if total > MAX_DPUS {
            // The exact product (u128 holds any), not the saturated one.
            let product = u128::from(s.ranks) * u128::from(s.dpus_per_rank);
            return Err(source.error_at_any(
                &["ranks", "dpus_per_rank"],
                format!(
                    "ranks x dpus_per_rank = {product} DPUs in all is above the supported {MAX_DPUS} (25 times the largest UPMEM system; more would exhaust host memory)"
                ),
            ));
        }
        let usable = s.usable_dpus.unwrap_or(total);
        if usable == 0 || usable > total {
            return Err(source.error_at_any(
                &["usable_dpus", "ranks", "dpus_per_rank"],
                format!(
                    "usable_dpus = {usable} is not between 1 and ranks x dpus_per_rank = {} x {} = {total}{}",
                    s.ranks,
                    s.dpus_per_rank,
                    shrunk_advice(source, total)
                ),
            ));
        }
        // A rank with no usable DPU would be odd but harmless; spreading keeps ranks even.
        let ranks = s.ranks as u32;
        let per_rank: Vec<u32> = (0..s.ranks)
            .map(|r| ((usable * (r + 1)) / s.ranks - (usable * r) / s.ranks) as u32)
            .collect();
        let mram = raw.dpu.mram_size_bytes;
        if mram == 0 || mram > MAX_MRAM_SIZE_BYTES {
            return Err(source.error_at(
                "dpu.mram_size_bytes",
                format!(
                    "{mram} must be a positive multiple of {WORD_BYTES}, at most {MAX_MRAM_SIZE_BYTES} (1 TiB)"
                ),
            ));
        }
        check_words(source, "dpu.mram_size_bytes", mram)?;
        let dpu = validate_dpu(&raw, source)?;
        let transfer = validate_transfer(&raw.transfer, source)?;
        let host = validate_host(&raw.host, source)?;
        check_transfer_products(&transfer, usable, mram, source)?;
        Ok(Machine {
            name: raw.name.clone(),
            ranks,
            dpus_per_rank: s.dpus_per_rank as u32,
            dpus: usable as u32,
            usable_dpus_per_rank: per_rank,
            mram_size_bytes: mram,
            dpu,
            transfer,
            host,
            raw,
            attribution: source.attribution.clone(),
        })
    }

    /// What the user should know about this machine: an override of `ranks` or
    /// `dpus_per_rank` that leaves the file's `usable_dpus` in place keeps that DPU count,
    /// which is rarely what was meant.
    pub fn warnings(&self) -> Vec<String> {
        let total = self.ranks * self.dpus_per_rank;
        let advice =
            format!("; set machine.usable_dpus too (machine.usable_dpus={total} for all of them)");
        self.resized_keeping_usable()
            .map(|w| w + &advice)
            .into_iter()
            .collect()
    }

    /// [`Machine::warnings`] and, for the commands that time the machine, what a change of
    /// the DPU clock also changes: every DMA cost is in DPU cycles, so unless a DMA cost
    /// was changed too, MRAM's speed scales with the core's.
    pub fn timing_warnings(&self) -> Vec<String> {
        let a = &self.attribution;
        let dma_changed = (a.overrides.iter()).any(|(key, _)| {
            key.starts_with("dma.") && key.contains("cycles") && a.changed(key).is_some()
        });
        let clock = a.changed("dpu.clock_mhz").filter(|_| !dma_changed).map(|set| {
            format!(
                "--set {set} scales MRAM's speed with the core's: every DMA cost is in DPU cycles; for another core clock on the same DRAM, scale the DMA's cycle counts with the clock too (machine.dma.occupancy_fixed_cycles at least; docs/machine-model.md)"
            )
        });
        self.warnings().into_iter().chain(clock).collect()
    }

    /// Whether a `--set` of `ranks` or `dpus_per_rank` resized the machine while the file's
    /// `usable_dpus` stayed (so the DPU count did not move), said as a fact without advice.
    pub fn resized_keeping_usable(&self) -> Option<String> {
        let a = &self.attribution;
        // An override that sets the file's own value resizes nothing.
        let resized = a.changed("ranks").or_else(|| a.changed("dpus_per_rank"));
        let (Some(set), None, Some(usable)) =
            (resized, a.override_of("usable_dpus"), self.raw.usable_dpus)
        else {
            return None;
        };
        let total = self.ranks * self.dpus_per_rank;
        (usable != u64::from(total)).then(|| {
            format!(
                "--set {set} resizes the machine, but its file's usable_dpus = {usable} stays: {usable} usable DPUs over {} ranks of {} ({total} in all)",
                self.ranks, self.dpus_per_rank
            )
        })
    }

    /// The machine as a program sees it once it has allocated the first `dpus` usable DPUs,
    /// rank by rank (the SDK's `dpu_alloc`): the later ranks keep no usable DPU, so its
    /// launches and transfers leave them out.
    pub fn allocated(&self, dpus: u32) -> Machine {
        assert!(
            (1..=self.dpus).contains(&dpus),
            "allocating {dpus} of {} DPUs",
            self.dpus
        );
        let mut left = dpus;
        let per_rank = self
            .usable_dpus_per_rank
            .iter()
            .map(|&n| {
                let kept = n.min(left);
                left -= kept;
                kept
            })
            .collect();
        Machine {
            dpus,
            usable_dpus_per_rank: per_rank,
            ..self.clone()
        }
    }

    pub fn first_dpu_of_rank(&self, rank: u32) -> u32 {
        self.usable_dpus_per_rank[..rank as usize].iter().sum()
    }

    /// The rank that holds global DPU index `dpu` (DPUs are numbered rank by rank).
    pub fn rank_of(&self, dpu: u32) -> u32 {
        let mut first = 0u32;
        for (rank, &n) in self.usable_dpus_per_rank.iter().enumerate() {
            if dpu < first + n {
                return rank as u32;
            }
            first += n;
        }
        panic!("DPU {dpu} is beyond the machine's {} DPUs", self.dpus)
    }
}

/// An integer in `lo..=hi`, or an error naming `key`.
fn in_range(source: &Source, key: &str, value: u64, lo: u64, hi: u64) -> Result<u64, InputError> {
    if value < lo || value > hi {
        return Err(source.error_at(key, format!("{value} is not between {lo} and {hi}")));
    }
    Ok(value)
}

/// A finite decimal in `lo..=hi`, or an error naming `key`.
fn in_range_f64(
    source: &Source,
    key: &str,
    value: f64,
    lo: f64,
    hi: f64,
) -> Result<f64, InputError> {
    if !value.is_finite() || value < lo || value > hi {
        let (value, lo, hi) = (shown(value), shown(lo), shown(hi));
        return Err(source.error_at(key, format!("{value} is not between {lo} and {hi}")));
    }
    Ok(value)
}

/// The per-byte cycle costs, kept exactly in thousandths of a cycle: a value is a whole
/// number of them (see [`decimal_step`]).
const MILLICYCLE_KEYS: [&str; 2] = [
    "dma.latency_cycles_per_byte",
    "dma.occupancy_cycles_per_byte",
];

/// The step a fractional machine key moves in (dotted, without `machine.`), if it has one:
/// 0.001 for the per-byte cycle costs, a picosecond for the durations in ns and us, `None`
/// for a number taken as given.
pub fn decimal_step(key: &str) -> Option<f64> {
    if MILLICYCLE_KEYS.contains(&key) || key.ends_with("_ns") || key.contains("_ns_per_") {
        return Some(0.001);
    }
    (key.ends_with("_us") || key.contains("_us_per_")).then_some(0.000001)
}

/// A per-byte cycle cost, kept exactly in thousandths of a cycle.
fn millicycles(source: &Source, key: &str, value: f64) -> Result<u64, InputError> {
    debug_assert!(
        MILLICYCLE_KEYS.contains(&key),
        "{key} is not in thousandths"
    );
    let value = in_range_f64(source, key, value, 0.0, MAX_CYCLES_PER_BYTE)?;
    let milli = (value * 1000.0).round();
    if (value * 1000.0 - milli).abs() > 1e-6 {
        let value = shown(value);
        return Err(source.error_at(key, format!("{value} must be a multiple of 0.001 cycle")));
    }
    Ok(milli as u64)
}

/// Microseconds -> picoseconds, the simulation's resolution: a value of a fraction of a
/// picosecond is refused, not rounded (0.0000001 us had become 0 unsaid).
fn us_to_time(source: &Source, key: &str, value: f64) -> Result<Time, InputError> {
    let value = in_range_f64(source, key, value, 0.0, MAX_US)?;
    whole_ps(source, key, value, 1e6, "0.000001 us").map(Time)
}

/// `value` times `ps_per_unit`, which must be a whole number of picoseconds (to float
/// precision); `step` says the unit's smallest step in the error.
pub(crate) fn whole_ps(
    source: &Source,
    key: &str,
    value: f64,
    ps_per_unit: f64,
    step: &str,
) -> Result<u64, InputError> {
    let ps = value * ps_per_unit;
    let fraction = (ps - ps.round()).abs() > 1e-6_f64.max(ps * 1e-15);
    if fraction || (ps > 0.0 && ps.round() == 0.0) {
        let reason = format!(
            "{} is not a whole number of picoseconds, the simulation's resolution: give it in steps of {step}",
            shown(value)
        );
        return Err(source.error_at(key, reason));
    }
    Ok(ps.round() as u64)
}

/// GB/s (10^9 bytes per second) -> bytes per second; must be positive.
fn gb_per_s(source: &Source, key: &str, value: f64) -> Result<u64, InputError> {
    let value = in_range_f64(source, key, value, MIN_GB_PER_S, MAX_GB_PER_S)?;
    Ok((value * 1e9).round() as u64)
}

/// Nanoseconds -> picoseconds (a fraction of a picosecond refused, as in [`us_to_time`]).
fn ns_to_ps(source: &Source, key: &str, value: f64) -> Result<u64, InputError> {
    let value = in_range_f64(source, key, value, 0.0, MAX_NS)?;
    whole_ps(source, key, value, 1e3, "0.001 ns")
}

/// Advice for a `--set` of `ranks` or `dpus_per_rank` that left the file's `usable_dpus`
/// above the new total: set that key too. Empty when `usable_dpus` was set as well.
fn shrunk_advice(source: &Source, total: u64) -> String {
    let a = &source.attribution;
    let resized = a.changed("ranks").or_else(|| a.changed("dpus_per_rank"));
    match (resized, a.override_of("usable_dpus")) {
        (Some(_), None) => format!(
            "; the file's usable_dpus stays unless it is set too (machine.usable_dpus={total} for all of them)"
        ),
        _ => String::new(),
    }
}

/// `n` DPUs in words: "1 DPU", "2 DPUs" (for messages and table headers; a machine may
/// have one DPU).
pub fn dpus_phrase(n: impl Into<u64>) -> String {
    crate::config::counted(n, "DPU")
}

/// The memory sizes a machine file gives in whole 8-byte words (the DPU's 64-bit word;
/// WRAM and MRAM are addressed by DMA in 8-byte units): `dpu.mram_size_bytes`,
/// `dpu.wram_size_bytes` and `dpu.stack_bytes_per_tasklet` are multiples of it.
pub const WORD_BYTES: u64 = 8;
const WORD_KEYS: [&str; 3] = [
    "dpu.mram_size_bytes",
    "dpu.wram_size_bytes",
    "dpu.stack_bytes_per_tasklet",
];

/// The step an integer machine key moves in (dotted, without `machine.`): [`WORD_BYTES`]
/// for the word-sized memories, else 1.
pub fn integer_step(key: &str) -> u64 {
    if WORD_KEYS.contains(&key) {
        WORD_BYTES
    } else {
        1
    }
}

/// Refuses a value of one of [`WORD_KEYS`] that is not whole words.
fn check_words(source: &Source, key: &str, value: u64) -> Result<(), InputError> {
    debug_assert!(WORD_KEYS.contains(&key), "{key} is not a word-sized key");
    if value.is_multiple_of(WORD_BYTES) {
        return Ok(());
    }
    Err(source.error_at(key, format!("{value} must be a multiple of {WORD_BYTES}")))
}

/// The DPU's clock, from `dpu.clock_mhz`.
fn dpu_clock(d: &RawDpu, source: &Source) -> Result<Clock, InputError> {
    let (lo, hi) = (MIN_CLOCK_MHZ, MAX_CLOCK_MHZ);
    let mhz = in_range_f64(source, "dpu.clock_mhz", d.clock_mhz, lo, hi)?;
    Ok(Clock::from_hz((mhz * 1e6).round() as u64))
}

fn validate_dpu(raw: &RawMachine, source: &Source) -> Result<DpuParams, InputError> {
    let d = &raw.dpu;
    let clock = dpu_clock(d, source)?;
    // At most 32: the pipeline's exact arithmetic works in units of 1/lcm(11, 1..=tasklets)
    // instruction, which must stay far from u128 overflow (UPMEM DPUs have 24 or 16).
    let max_tasklets = in_range(
        source,
        "dpu.max_tasklets",
        d.max_tasklets,
        1,
        MAX_DPU_TASKLETS,
    )?;
    let wram = in_range(
        source,
        "dpu.wram_size_bytes",
        d.wram_size_bytes,
        WORD_BYTES,
        MAX_WRAM_BYTES,
    )?;
    check_words(source, "dpu.wram_size_bytes", wram)?;
    let iram = in_range(
        source,
        "dpu.iram_instructions",
        d.iram_instructions,
        1,
        MAX_IRAM_INSTRUCTIONS,
    )?;
    let atomic = in_range(source, "dpu.atomic_bits", d.atomic_bits, 1, MAX_ATOMIC_BITS)?;
    let stack = in_range(
        source,
        "dpu.stack_bytes_per_tasklet",
        d.stack_bytes_per_tasklet,
        0,
        MAX_STACK_BYTES,
    )?;
    check_words(source, "dpu.stack_bytes_per_tasklet", stack)?;
    let interval = in_range(
        source,
        "dpu.pipeline.tasklet_issue_interval_cycles",
        d.pipeline.tasklet_issue_interval_cycles,
        1,
        MAX_ISSUE_INTERVAL_CYCLES,
    )?;
    let slots = in_range(
        source,
        "dpu.pipeline.issue_slots_per_cycle",
        d.pipeline.issue_slots_per_cycle,
        1,
        MAX_ISSUE_SLOTS,
    )?;
    let c = &d.instructions;
    check_instruction_costs(c, source)?;
    let dma = validate_dma(&raw.dma, source)?;
    Ok(DpuParams {
        clock,
        mram_size_bytes: d.mram_size_bytes,
        max_tasklets: max_tasklets as u32,
        wram_size_bytes: wram as u32,
        iram_instructions: iram as u32,
        atomic_bits: atomic as u32,
        stack_bytes_per_tasklet: stack as u32,
        tasklet_issue_interval_cycles: interval,
        issue_slots_per_cycle: slots,
        costs: c.clone(),
        dma,
    })
}

/// Every instruction cost of `dpu.instructions`, within bounds.
fn check_instruction_costs(c: &RawInstructions, source: &Source) -> Result<(), InputError> {
    for (name, value) in c.named() {
        in_range(
            source,
            &format!("dpu.instructions.{name}"),
            value,
            0,
            MAX_INSTRUCTION_COST,
        )?;
    }
    Ok(())
}

/// The `[dma]` table: sizes, alignment, latency and occupancy, checked for consistency.
/// The DMA's (min, max, alignment) sizes in bytes: the alignment a power of two, both sizes
/// multiples of it, min at most max.
fn dma_sizes(m: &RawDma, source: &Source) -> Result<(u64, u64, u64), InputError> {
    let align = in_range(
        source,
        "dma.alignment_bytes",
        m.alignment_bytes,
        1,
        MAX_DMA_ALIGNMENT_BYTES,
    )?;
    if !align.is_power_of_two() {
        return Err(source.error_at(
            "dma.alignment_bytes",
            format!("{align} is not a power of two"),
        ));
    }
    let min = in_range(
        source,
        "dma.min_size_bytes",
        m.min_size_bytes,
        1,
        MAX_DMA_BYTES,
    )?;
    let max = in_range(
        source,
        "dma.max_size_bytes",
        m.max_size_bytes,
        1,
        MAX_DMA_BYTES,
    )?;
    let (min_key, max_key, align_key) = (
        "dma.min_size_bytes",
        "dma.max_size_bytes",
        "dma.alignment_bytes",
    );
    if max < min {
        return Err(source.error_at_any(
            &[max_key, min_key],
            format!("dma.max_size_bytes = {max} is below dma.min_size_bytes = {min}"),
        ));
    }
    if min % align != 0 || max % align != 0 {
        // The size that fails, and the alignment.
        let size_key = if min % align != 0 { min_key } else { max_key };
        return Err(source.error_at_any(
            &[size_key, align_key],
            format!(
                "dma.min_size_bytes = {min} and dma.max_size_bytes = {max} must be multiples of dma.alignment_bytes = {align}"
            ),
        ));
    }
    Ok((min, max, align))
}

fn validate_dma(m: &RawDma, source: &Source) -> Result<DmaParams, InputError> {
    let (min, max, align) = dma_sizes(m, source)?;
    let dma = DmaParams {
        min_size_bytes: min as u32,
        max_size_bytes: max as u32,
        alignment_bytes: align as u32,
        read_latency_fixed_cycles: in_range(
            source,
            "dma.read_latency_fixed_cycles",
            m.read_latency_fixed_cycles,
            0,
            MAX_DMA_FIXED_CYCLES,
        )?,
        write_latency_fixed_cycles: in_range(
            source,
            "dma.write_latency_fixed_cycles",
            m.write_latency_fixed_cycles,
            0,
            MAX_DMA_FIXED_CYCLES,
        )?,
        latency_millicycles_per_byte: millicycles(
            source,
            "dma.latency_cycles_per_byte",
            m.latency_cycles_per_byte,
        )?,
        occupancy_fixed_cycles: in_range(
            source,
            "dma.occupancy_fixed_cycles",
            m.occupancy_fixed_cycles,
            0,
            MAX_DMA_FIXED_CYCLES,
        )?,
        occupancy_millicycles_per_byte: millicycles(
            source,
            "dma.occupancy_cycles_per_byte",
            m.occupancy_cycles_per_byte,
        )?,
    };
    check_dma_timing(&dma, source)?;
    Ok(dma)
}

/// The keys of a DMA's occupancy and of its latency in `direction` at `size`, for errors.
fn dma_timing_keys(direction: DmaDirection, size: &'static str) -> [&'static str; 5] {
    let latency = match direction {
        DmaDirection::Read => "dma.read_latency_fixed_cycles",
        DmaDirection::Write => "dma.write_latency_fixed_cycles",
    };
    [
        "dma.occupancy_fixed_cycles",
        "dma.occupancy_cycles_per_byte",
        latency,
        "dma.latency_cycles_per_byte",
        size,
    ]
}

/// A DMA keeps the engine busy for at least one cycle, and never for longer than its
/// latency, at both ends of the size range and in both directions.
fn check_dma_timing(dma: &DmaParams, source: &Source) -> Result<(), InputError> {
    if dma.occupancy_cycles(dma.min_size_bytes) == 0 {
        return Err(source.error_at_any(
            &[
                "dma.occupancy_cycles_per_byte",
                "dma.occupancy_fixed_cycles",
                "dma.min_size_bytes",
            ],
            "the engine must be busy for at least one cycle per request",
        ));
    }
    for dir in [DmaDirection::Read, DmaDirection::Write] {
        let ends = [
            (dma.min_size_bytes, "dma.min_size_bytes"),
            (dma.max_size_bytes, "dma.max_size_bytes"),
        ];
        for (size, size_key) in ends {
            if dma.occupancy_cycles(size) > dma.latency_cycles(dir, size) {
                let keys = dma_timing_keys(dir, size_key);
                return Err(source.error_at_any(&keys, occupancy_over_latency(dma, dir, size)));
            }
        }
    }
    Ok(())
}

/// "a" or "an" before the number `n` read aloud in English ("an 8-byte", "an 11-byte",
/// "a 16-byte").
fn article(n: u32) -> &'static str {
    let digits = n.to_string();
    let lead = &digits[..(digits.len() - 1) % 3 + 1];
    if lead.starts_with('8') || lead == "11" || lead == "18" {
        "an"
    } else {
        "a"
    }
}

/// Why a DMA's occupancy above its latency is refused, with the values of both sides, so
/// that whoever changed one side sees which keys to change with it.
fn occupancy_over_latency(dma: &DmaParams, dir: DmaDirection, size: u32) -> String {
    let (name, fixed_key, fixed) = match dir {
        DmaDirection::Read => ("read", "read", dma.read_latency_fixed_cycles),
        DmaDirection::Write => ("write", "write", dma.write_latency_fixed_cycles),
    };
    let per_byte = |millicycles: u64| millicycles as f64 / 1000.0;
    format!(
        "{} {size}-byte {name} would keep the engine busy for longer than its latency ({} > {} cycles): \
         the occupancy (dma.occupancy_fixed_cycles = {}, dma.occupancy_cycles_per_byte = {}) may not \
         exceed the latency (dma.{fixed_key}_latency_fixed_cycles = {fixed}, dma.latency_cycles_per_byte = {}); \
         change the two together",
        article(size),
        dma.occupancy_cycles(size),
        dma.latency_cycles(dir, size),
        dma.occupancy_fixed_cycles,
        per_byte(dma.occupancy_millicycles_per_byte),
        per_byte(dma.latency_millicycles_per_byte),
    )
}

fn validate_transfer(t: &RawTransfer, source: &Source) -> Result<TransferParams, InputError> {
    Ok(TransferParams {
        call_fixed: us_to_time(source, "transfer.call_fixed_us", t.call_fixed_us)?,
        launch_fixed: us_to_time(source, "transfer.launch_fixed_us", t.launch_fixed_us)?,
        ownership_switch_per_rank: us_to_time(
            source,
            "transfer.ownership_switch_us_per_rank",
            t.ownership_switch_us_per_rank,
        )?,
        poll_interval: us_to_time(source, "transfer.poll_interval_us", t.poll_interval_us)?,
        cpu_dpu_bytes_per_s_per_dpu: gb_per_s(
            source,
            "transfer.cpu_dpu_gb_per_s_per_dpu",
            t.cpu_dpu_gb_per_s_per_dpu,
        )?,
        cpu_dpu_bytes_per_s_per_rank: gb_per_s(
            source,
            "transfer.cpu_dpu_gb_per_s_per_rank",
            t.cpu_dpu_gb_per_s_per_rank,
        )?,
        dpu_cpu_bytes_per_s_per_dpu: gb_per_s(
            source,
            "transfer.dpu_cpu_gb_per_s_per_dpu",
            t.dpu_cpu_gb_per_s_per_dpu,
        )?,
        dpu_cpu_bytes_per_s_per_rank: gb_per_s(
            source,
            "transfer.dpu_cpu_gb_per_s_per_rank",
            t.dpu_cpu_gb_per_s_per_rank,
        )?,
        broadcast_bytes_per_s_per_rank: gb_per_s(
            source,
            "transfer.broadcast_gb_per_s_per_rank",
            t.broadcast_gb_per_s_per_rank,
        )?,
        host_cap_bytes_per_s: host_caps(t, source)?,
        rank_fixed: us_to_time(
            source,
            "transfer.rank_fixed_us",
            t.rank_fixed_us.unwrap_or(0.0),
        )?,
        launch_per_rank: us_to_time(
            source,
            "transfer.launch_per_rank_us",
            t.launch_per_rank_us.unwrap_or(0.0),
        )?,
        switch: t.ownership_switch.unwrap_or(SwitchMode::Serial),
        transpose: transpose(t, source)?,
    })
}

/// The transposition term: `threads_per_rank` and `transpose_gb_per_s_per_thread`, both or
/// neither.
fn transpose(t: &RawTransfer, source: &Source) -> Result<Option<Transpose>, InputError> {
    match (t.threads_per_rank, t.transpose_gb_per_s_per_thread) {
        (None, None) => Ok(None),
        (Some(threads), Some(rate)) => Ok(Some(Transpose {
            threads_per_rank: in_range(
                source,
                "transfer.threads_per_rank",
                u64::from(threads),
                1,
                MAX_THREADS_PER_RANK,
            )? as u32,
            bytes_per_s_per_thread: gb_per_s(source, "transfer.transpose_gb_per_s_per_thread", rate)?,
        })),
        (Some(_), None) => Err(source.error_at(
            "transfer.transpose_gb_per_s_per_thread",
            "missing: transfer.threads_per_rank is given, and the transposition term needs both (or neither)".to_owned(),
        )),
        (None, Some(_)) => Err(source.error_at(
            "transfer.threads_per_rank",
            "missing: transfer.transpose_gb_per_s_per_thread is given, and the transposition term needs both (or neither)".to_owned(),
        )),
    }
}

/// Most host threads one rank's transfers may take (`transfer.threads_per_rank`).
pub const MAX_THREADS_PER_RANK: u64 = 256;

/// The host's cap for each direction: its own key, or `host_cap_gb_per_s`.
fn host_caps(t: &RawTransfer, source: &Source) -> Result<[u64; 2], InputError> {
    let shared = t
        .host_cap_gb_per_s
        .map(|v| gb_per_s(source, "transfer.host_cap_gb_per_s", v))
        .transpose()?;
    if shared.is_some()
        && t.host_cap_cpu_dpu_gb_per_s.is_some()
        && t.host_cap_dpu_cpu_gb_per_s.is_some()
    {
        return Err(source.error_at(
            "transfer.host_cap_gb_per_s",
            "has no effect: transfer.host_cap_cpu_dpu_gb_per_s and transfer.host_cap_dpu_cpu_gb_per_s are both given; set those instead".to_owned(),
        ));
    }
    let own = |key: &str, v: Option<f64>| {
        match (v, shared) {
        (Some(v), _) => gb_per_s(source, key, v),
        (None, Some(shared)) => Ok(shared),
        (None, None) => Err(source.error_at(
            key,
            "missing: give the host's cap for this direction, or transfer.host_cap_gb_per_s for both".to_owned(),
        )),
    }
    };
    Ok([
        own(
            "transfer.host_cap_cpu_dpu_gb_per_s",
            t.host_cap_cpu_dpu_gb_per_s,
        )?,
        own(
            "transfer.host_cap_dpu_cpu_gb_per_s",
            t.host_cap_dpu_cpu_gb_per_s,
        )?,
    ])
}

/// The longest simulated time, in seconds, that each term of the largest transfer may take
/// (its bytes at any one rate; its per-call fixed costs, one per DPU when serial; every
/// rank's ownership switch). Three such terms together stay below the simulator's time
/// ceiling ([`crate::engine::CEILING`], about 4.6 x 10^6 s), so pricing one transfer never
/// reaches it; no real machine comes near (PrIM's 2,556 DPUs move all their MRAM in under a
/// second). A run of many such transfers stops at the ceiling with an error.
pub const MAX_FULL_TRANSFER_S: u64 = 1_000_000;
const _: () = assert!(
    3 * MAX_FULL_TRANSFER_S * crate::engine::PS_PER_S < crate::engine::CEILING.ps(),
    "one transfer's terms must stay below the time ceiling"
);

/// Upper bound on `dpu.mram_size_bytes`: 16,384 times a real DPU's 64 MiB, room for any
/// what-if while keeping every product of it with the DPU count and the rates in range.
pub const MAX_MRAM_SIZE_BYTES: u64 = 1 << 40;

/// The bytes per DPU of the largest transfer a command makes: one MRAM, and at least a real
/// DPU's 64 MiB, since the transfer microbenchmark moves up to 32 MiB whatever the MRAM size.
fn largest_transfer_per_dpu_bytes(mram_size_bytes: u64) -> u64 {
    mram_size_bytes.max(64 << 20)
}

/// Each rate checked with the other keys it multiplies: the largest transfer to every DPU,
/// one DPU after another, at that rate alone must fit in [`MAX_FULL_TRANSFER_S`]. Checking
/// each rate alone let a tiny rate pass and then overflow simulated time mid-simulation.
fn check_transfer_products(
    t: &TransferParams,
    dpus: u64,
    mram_size_bytes: u64,
    source: &Source,
) -> Result<(), InputError> {
    let bytes = u128::from(largest_transfer_per_dpu_bytes(mram_size_bytes)) * u128::from(dpus);
    let rates = [
        (
            "transfer.cpu_dpu_gb_per_s_per_dpu",
            t.cpu_dpu_bytes_per_s_per_dpu,
        ),
        (
            "transfer.cpu_dpu_gb_per_s_per_rank",
            t.cpu_dpu_bytes_per_s_per_rank,
        ),
        (
            "transfer.dpu_cpu_gb_per_s_per_dpu",
            t.dpu_cpu_bytes_per_s_per_dpu,
        ),
        (
            "transfer.dpu_cpu_gb_per_s_per_rank",
            t.dpu_cpu_bytes_per_s_per_rank,
        ),
        (
            "transfer.broadcast_gb_per_s_per_rank",
            t.broadcast_bytes_per_s_per_rank,
        ),
        (
            "transfer.host_cap_cpu_dpu_gb_per_s",
            t.host_cap_bytes_per_s[0],
        ),
        (
            "transfer.host_cap_dpu_cpu_gb_per_s",
            t.host_cap_bytes_per_s[1],
        ),
        // One thread alone (a serial call) at the transposition rate.
        (
            "transfer.transpose_gb_per_s_per_thread",
            t.transpose_limit(1),
        ),
    ];
    check_per_dpu_costs(t, dpus, source)?;
    for (key, bytes_per_s) in rates {
        let seconds = bytes.div_ceil(u128::from(bytes_per_s.max(1)));
        if seconds > u128::from(MAX_FULL_TRANSFER_S) {
            let min_gb_per_s = bytes as f64 / MAX_FULL_TRANSFER_S as f64 / 1e9;
            let keys = full_transfer_keys(key);
            return Err(source.error_at_any(
                &keys,
                format!(
                    "too slow for this machine: moving {} bytes to each of {} (dpu.mram_size_bytes, at least 64 MiB, times the usable DPUs of ranks x dpus_per_rank) would take {seconds} s of simulated time, above the {MAX_FULL_TRANSFER_S} s limit; give at least {min_gb_per_s:.6} GB/s, a smaller dpu.mram_size_bytes or fewer DPUs",
                    largest_transfer_per_dpu_bytes(mram_size_bytes),
                    dpus_phrase(dpus)
                ),
            ));
        }
    }
    Ok(())
}

/// The keys of the rule that a full transfer at the rate of `key` stays below the time
/// limit: the rate, its fallback (a direction's host cap falls back to
/// `host_cap_gb_per_s`), the MRAM size and the DPU count.
fn full_transfer_keys(key: &'static str) -> [&'static str; 6] {
    let cap = key.starts_with("transfer.host_cap_");
    let fallback = if cap {
        "transfer.host_cap_gb_per_s"
    } else {
        key
    };
    [
        key,
        fallback,
        "dpu.mram_size_bytes",
        "usable_dpus",
        "ranks",
        "dpus_per_rank",
    ]
}

/// The costs paid once per DPU (at most) one after another: every rank's ownership switch
/// (a machine has at most `dpus` ranks) and a serial transfer's calls, one per DPU. Each
/// must fit in [`MAX_FULL_TRANSFER_S`].
fn check_per_dpu_costs(t: &TransferParams, dpus: u64, source: &Source) -> Result<(), InputError> {
    let max_ps = u128::from(MAX_FULL_TRANSFER_S) * u128::from(crate::engine::PS_PER_S);
    let per_dpu = [
        (
            "transfer.ownership_switch_us_per_rank",
            t.ownership_switch_per_rank,
            "switching the MRAM of every rank",
            "switch cost",
        ),
        (
            "transfer.call_fixed_us",
            t.call_fixed,
            "a serial transfer's calls, one per DPU",
            "call cost",
        ),
        (
            "transfer.rank_fixed_us",
            t.rank_fixed,
            "a transfer call's per-rank costs",
            "per-rank cost",
        ),
        (
            "transfer.launch_per_rank_us",
            t.launch_per_rank,
            "a launch's per-rank costs",
            "per-rank cost",
        ),
    ];
    for (key, cost, what, name) in per_dpu {
        if u128::from(cost.ps()) * u128::from(dpus) > max_ps {
            return Err(source.error_at_any(
                &[key, "usable_dpus", "ranks", "dpus_per_rank"],
                format!(
                    "{what}, {} at most, would take over {MAX_FULL_TRANSFER_S} s of simulated time; give a smaller {name}",
                    dpus_phrase(dpus)
                ),
            ));
        }
    }
    Ok(())
}

fn validate_host(h: &RawHost, source: &Source) -> Result<HostParams, InputError> {
    Ok(HostParams {
        cpu: h.cpu.clone(),
        threads: in_range(source, "host.threads", h.threads, 1, MAX_HOST_THREADS)? as u32,
        route_ps_per_query: ns_to_ps(source, "host.route_ns_per_query", h.route_ns_per_query)?,
        merge_ps_per_result: ns_to_ps(source, "host.merge_ns_per_result", h.merge_ns_per_result)?,
        pack_ps_per_byte: ns_to_ps(source, "host.pack_ns_per_byte", h.pack_ns_per_byte)?,
        sort_ps_per_element: ns_to_ps(source, "host.sort_ns_per_element", h.sort_ns_per_element)?,
        scan_ps_per_element: ns_to_ps(source, "host.scan_ns_per_element", h.scan_ns_per_element)?,
        hash_ps_per_key: ns_to_ps(source, "host.hash_ns_per_key", h.hash_ns_per_key)?,
        bucket_ps_per_task: ns_to_ps(source, "host.bucket_ns_per_task", h.bucket_ns_per_task)?,
        fill_ps_per_result: ns_to_ps(source, "host.fill_ns_per_result", h.fill_ns_per_result)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = include_str!("../machines/paper-1012.toml");

    /// `Op::key` and `RawInstructions::named` give the machine file's keys, each with its own
    /// field's value: every field gets a different value, and the named entries must be the
    /// table serde reads, exactly.
    #[test]
    fn instruction_keys_are_the_fields_names() {
        let costs = Machine::from_toml_str("m.toml", TEXT, &[])
            .unwrap()
            .dpu
            .costs;
        let keys: toml::Table = toml::Value::try_from(&costs).unwrap().try_into().unwrap();
        let table: toml::Table = (keys.keys().enumerate())
            .map(|(i, key)| (key.clone(), toml::Value::Integer(1000 + i as i64)))
            .collect();
        let costs: RawInstructions = toml::Value::Table(table.clone()).try_into().unwrap();
        let named: toml::Table = (costs.named())
            .map(|(key, value)| (key.to_owned(), toml::Value::Integer(value as i64)))
            .collect();
        assert_eq!(named.len(), costs.named().count(), "a key named twice");
        assert_eq!(named, table);
    }

    /// `OpMix::at_shipped_costs` prices on one file for all: they share one table.
    #[test]
    fn the_shipped_machines_share_one_instruction_table() {
        let files = [
            include_str!("../machines/paper-1012.toml"),
            include_str!("../machines/paper-2rank.toml"),
            include_str!("../machines/upmem-2538.toml"),
            include_str!("../machines/upmem-2556-350mhz.toml"),
            include_str!("../machines/upmem-v1b-400mhz.toml"),
        ];
        let costs = |text| {
            Machine::from_toml_str("m.toml", text, &[])
                .unwrap()
                .dpu
                .costs
        };
        for text in files {
            assert_eq!(costs(text), costs(files[0]));
        }
    }

    /// Hand-worked: 11 cycles between a tasklet's issues, one issue per cycle.
    #[test]
    fn the_pipeline_floor_is_its_rate_with_that_many_tasklets() {
        let dpu = Machine::from_toml_str("m.toml", TEXT, &[]).unwrap().dpu;
        assert_eq!(dpu.tasklet_issue_interval_cycles, 11);
        assert_eq!(dpu.issue_slots_per_cycle, 1);
        assert_eq!(dpu.pipeline_floor_cycles(100, 1), 1100.0);
        assert_eq!(dpu.pipeline_floor_cycles(100, 4), 275.0);
        assert_eq!(dpu.pipeline_floor_cycles(100, 11), 100.0);
        assert_eq!(dpu.pipeline_floor_cycles(100, 24), 100.0);
    }

    #[test]
    fn one_dpu_is_not_plural() {
        assert_eq!(dpus_phrase(1u32), "1 DPU");
        assert_eq!(dpus_phrase(0u32), "0 DPUs");
        assert_eq!(dpus_phrase(2556u64), "2556 DPUs");
    }

    #[test]
    fn faulty_dpus_are_spread_over_ranks() {
        let m = Machine::from_toml_str("t.toml", TEXT, &[]).unwrap();
        assert_eq!(
            m.dpu.dma.latency_cycles(DmaDirection::Read, 2048),
            77 + 1024
        );
        assert_eq!(m.dpus, 1012);
        assert_eq!(m.usable_dpus_per_rank.iter().sum::<u32>(), 1012);
        assert!(m.usable_dpus_per_rank.iter().all(|&n| n == 63 || n == 64));
        // The ranks that keep the extra DPUs, as file-formats.md says.
        let full: Vec<usize> = (m.usable_dpus_per_rank.iter().enumerate())
            .filter(|&(_, &n)| n == 64)
            .map(|(r, _)| r)
            .collect();
        assert_eq!(full, [3, 7, 11, 15]);
        assert_eq!(m.rank_of(0), 0);
        assert_eq!(m.rank_of(1011), 15);
    }

    #[test]
    fn only_an_override_that_resizes_the_machine_warns_of_its_usable_dpus() {
        let text = include_str!("../machines/upmem-2556-350mhz.toml");
        let load = |set: &str| {
            let o = [Override::parse(set).unwrap()];
            Machine::from_toml_str("m.toml", text, &o).unwrap()
        };
        // The file's own 40 ranks of 64 with 2,556 usable: setting them again resizes nothing.
        assert!(load("machine.ranks=40").warnings().is_empty());
        assert!(load("machine.dpus_per_rank=64").warnings().is_empty());
        let w = load("machine.ranks=41").warnings();
        assert!(
            w[0].contains("--set machine.ranks=41 resizes the machine"),
            "{w:?}"
        );
    }

    #[test]
    fn overrides_apply_and_are_named_in_errors() {
        let o = [Override::parse("machine.ranks=2").unwrap()];
        let err = Machine::from_toml_str("t.toml", TEXT, &o).unwrap_err();
        // The file's usable_dpus stops fitting because of the override, which is named.
        assert_eq!(err.origin, "--set machine.ranks=2");
        assert_eq!(err.key.as_deref(), Some("ranks"));
        assert!(err.reason.contains("usable_dpus ="), "{err}");
        let o = [Override::parse("machine.rank=2").unwrap()];
        let err = Machine::from_toml_str("t.toml", TEXT, &o).unwrap_err();
        assert_eq!(err.origin, "--set machine.rank=2", "{err}");
    }
}
