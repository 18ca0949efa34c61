//! The host side of a UPMEM system: the host CPU's analytic cost model ([`HostWork`] ->
//! picoseconds of one thread), and [`Host`], which prices single operations (one transfer,
//! one launch, one host task) by running them as one-step programs on the system executor
//! ([`crate::system::exec`]). There is one transfer model, the executor's; `Host` only asks
//! it one question at a time, for the transfer microbenchmarks and the hand-worked tests.
//!
//! # Transfer model (see the executor for the components)
//!
//! - **Parallel** (`dpu_push_xfer`): within a rank every DPU of the set receives the same
//!   size, so a rank moves `n_r x max_r` bytes (`n_r` DPUs of the set, `max_r` the largest
//!   buffer among them), at most at `min(rank_rate, n_r x dpu_rate)`; ranks run concurrently
//!   and share the host's memory system (`host_cap`). Each rank's part starts after the
//!   call's fixed cost.
//! - **Serial** (`dpu_copy_to` per DPU): one call per DPU, one after the other:
//!   `sum (call_fixed + size_i / dpu_rate)`.
//! - **Broadcast**: the same buffer to every DPU of the set; a rank moves `n_r x size` at most
//!   at `min(broadcast_rate, n_r x dpu_rate)`.
//! - **Launch**: `launch_fixed`, then each rank runs until its slowest DPU ends. The first
//!   host access to a rank after a launch pays the MRAM ownership switch,
//!   `ownership_switch_per_rank` of host time per rank.

use crate::engine::{Cycles, Time};
use crate::machine::{HostParams, Machine};
use crate::system::exec::{Executor, PastCeiling, Protocol};
use crate::system::program::{Class, Program, Stage, Step, TransferKind};
use serde::Serialize;

pub use crate::system::program::Direction;

/// The cost of one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TransferCost {
    pub time: Time,
    /// Bytes the caller asked to move.
    pub payload_bytes: u64,
    /// Bytes actually moved, with the per-rank padding of parallel transfers and one copy
    /// per DPU of a broadcast.
    pub moved_bytes: u64,
}

/// Host-CPU work of one step, counted by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct HostWork {
    pub queries_routed: u64,
    pub results_merged: u64,
    pub bytes_packed: u64,
    /// PIM-tree's host work (see [`HostParams`] for each unit).
    pub elements_sorted: u64,
    pub elements_scanned: u64,
    pub keys_hashed: u64,
    pub tasks_bucketed: u64,
    pub results_filled: u64,
}

impl std::ops::Add for HostWork {
    type Output = HostWork;
    fn add(self, o: HostWork) -> HostWork {
        HostWork {
            queries_routed: self.queries_routed + o.queries_routed,
            results_merged: self.results_merged + o.results_merged,
            bytes_packed: self.bytes_packed + o.bytes_packed,
            elements_sorted: self.elements_sorted + o.elements_sorted,
            elements_scanned: self.elements_scanned + o.elements_scanned,
            keys_hashed: self.keys_hashed + o.keys_hashed,
            tasks_bucketed: self.tasks_bucketed + o.tasks_bucketed,
            results_filled: self.results_filled + o.results_filled,
        }
    }
}

impl std::ops::AddAssign for HostWork {
    fn add_assign(&mut self, o: HostWork) {
        *self = *self + o;
    }
}

/// One unit of [`HostWork`] and the machine key that prices it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostUnit {
    Route,
    Merge,
    Pack,
    Sort,
    Scan,
    Hash,
    Bucket,
    Fill,
}

impl HostUnit {
    pub const ALL: [HostUnit; 8] = [
        HostUnit::Route,
        HostUnit::Merge,
        HostUnit::Pack,
        HostUnit::Sort,
        HostUnit::Scan,
        HostUnit::Hash,
        HostUnit::Bucket,
        HostUnit::Fill,
    ];

    /// The machine-file key of its cost (dotted, without `machine.`).
    pub fn key(self) -> &'static str {
        match self {
            HostUnit::Route => "host.route_ns_per_query",
            HostUnit::Merge => "host.merge_ns_per_result",
            HostUnit::Pack => "host.pack_ns_per_byte",
            HostUnit::Sort => "host.sort_ns_per_element",
            HostUnit::Scan => "host.scan_ns_per_element",
            HostUnit::Hash => "host.hash_ns_per_key",
            HostUnit::Bucket => "host.bucket_ns_per_task",
            HostUnit::Fill => "host.fill_ns_per_result",
        }
    }

    /// The host work it counts, in words, as a warning says it: "does no {what} on the
    /// host".
    pub fn what(self) -> &'static str {
        match self {
            HostUnit::Route => "routing of queries",
            HostUnit::Merge => "merging of results",
            HostUnit::Pack => "packing of bytes",
            HostUnit::Sort => "comparison sort",
            HostUnit::Scan => "sequential pass over batch arrays",
            HostUnit::Hash => "hashing of keys",
            HostUnit::Bucket => "bucketing of tasks",
            HostUnit::Fill => "filling of replies",
        }
    }

    /// This unit's count in `work`, and its cost in `host`.
    fn of(self, work: &HostWork, host: &HostParams) -> (u64, u64) {
        match self {
            HostUnit::Route => (work.queries_routed, host.route_ps_per_query),
            HostUnit::Merge => (work.results_merged, host.merge_ps_per_result),
            HostUnit::Pack => (work.bytes_packed, host.pack_ps_per_byte),
            HostUnit::Sort => (work.elements_sorted, host.sort_ps_per_element),
            HostUnit::Scan => (work.elements_scanned, host.scan_ps_per_element),
            HostUnit::Hash => (work.keys_hashed, host.hash_ps_per_key),
            HostUnit::Bucket => (work.tasks_bucketed, host.bucket_ps_per_task),
            HostUnit::Fill => (work.results_filled, host.fill_ps_per_result),
        }
    }
}

impl HostWork {
    /// Picoseconds of one host thread this work takes under the host cost model, saturated
    /// at `u64::MAX` (the executor stops at [`crate::engine::CEILING`] with an error).
    pub fn single_thread_ps(&self, host: &HostParams) -> u64 {
        let terms = HostUnit::ALL.map(|u| u.of(self, host));
        let ps: u128 = terms.iter().map(|&(n, c)| n as u128 * c as u128).sum();
        u64::try_from(ps).unwrap_or(u64::MAX)
    }
}

/// Bytes a transfer moves (padded per rank for parallel, over the set for parallel-all, one
/// copy per DPU for broadcast).
pub fn moved_bytes(machine: &Machine, kind: TransferKind, sizes: &[u64]) -> u64 {
    let set_max = sizes.iter().copied().max().unwrap_or(0);
    let mut first = 0usize;
    let mut moved = 0u64;
    for &n in &machine.usable_dpus_per_rank {
        moved += kind
            .rank_bytes(&sizes[first..first + n as usize], set_max)
            .1;
        first += n as usize;
    }
    moved
}

/// Prices single operations on one machine.
#[derive(Debug, Clone)]
pub struct Host {
    machine: Machine,
}

const STAGE: [Stage; 1] = [Stage {
    name: "operation",
    class: Class::Communication,
}];

impl Host {
    pub fn new(machine: &Machine) -> Host {
        Host {
            machine: machine.clone(),
        }
    }

    /// The simulated time of `step` alone on an idle machine (ranks owned by the host).
    fn time_of(&self, step: Step) -> Result<Time, PastCeiling> {
        let program = Program {
            stages: STAGE.to_vec(),
            steps: vec![step],
        };
        let timeline =
            Executor::<PastCeiling>::run(&self.machine, Protocol::sequential(1), 1, |_, _| {
                Ok(program.clone())
            })?;
        Ok(timeline.batches[0].end)
    }

    /// A transfer of any kind: `sizes[i]` bytes for global DPU `i` (0: not in the set).
    pub fn transfer(
        &self,
        direction: Direction,
        kind: TransferKind,
        sizes: &[u64],
    ) -> TransferCost {
        assert_eq!(
            sizes.len(),
            self.machine.dpus as usize,
            "one size per usable DPU of the machine (0 for DPUs outside the set)"
        );
        let time = self
            .time_of(Step::Transfer {
                stage: 0,
                direction,
                kind,
                sizes_bytes: sizes.to_vec(),
            })
            // Machine validation bounds every rate so that all of every DPU's MRAM moves in at
            // most 10^6 s, far below the ceiling (about 4.6 x 10^6 s).
            .expect("validated transfer rates keep one transfer below the time ceiling");
        TransferCost {
            time,
            payload_bytes: match kind {
                TransferKind::Broadcast => sizes.iter().copied().max().unwrap_or(0),
                _ => sizes.iter().sum(),
            },
            moved_bytes: moved_bytes(&self.machine, kind, sizes),
        }
    }

    /// A parallel transfer: `sizes[i]` bytes for global DPU `i` (0: not in the set).
    pub fn parallel(&self, direction: Direction, sizes: &[u64]) -> TransferCost {
        self.transfer(direction, TransferKind::Parallel, sizes)
    }

    /// `dpu_push_xfer` to DPUs: CPU -> DPU parallel transfer.
    pub fn push_parallel(&self, sizes: &[u64]) -> TransferCost {
        self.parallel(Direction::CpuDpu, sizes)
    }

    /// `dpu_push_xfer` from DPUs (the host owns the MRAM: no ownership switch).
    pub fn pull_parallel(&self, sizes: &[u64]) -> TransferCost {
        self.parallel(Direction::DpuCpu, sizes)
    }

    /// Serial transfers: one SDK call per DPU of the set, one after the other.
    pub fn serial(&self, direction: Direction, sizes: &[u64]) -> TransferCost {
        self.transfer(direction, TransferKind::Serial, sizes)
    }

    /// Broadcast of one `size_bytes` buffer to every DPU with `in_set[i]`.
    pub fn broadcast(&self, in_set: &[bool], size_bytes: u64) -> TransferCost {
        let sizes: Vec<u64> = in_set
            .iter()
            .map(|&b| if b { size_bytes } else { 0 })
            .collect();
        self.transfer(Direction::CpuDpu, TransferKind::Broadcast, &sizes)
    }

    /// The first parallel read of `sizes` after an empty launch (its MRAM ownership switch
    /// included): the launch and the read, less the launch alone.
    pub fn pull_after_launch(&self, sizes: &[u64]) -> Time {
        let launch = Step::Launch {
            stage: 0,
            dpu_time: vec![Time::ZERO; sizes.len()],
        };
        let read = Step::Transfer {
            stage: 0,
            direction: Direction::DpuCpu,
            kind: TransferKind::Parallel,
            sizes_bytes: sizes.to_vec(),
        };
        let program = Program {
            stages: STAGE.to_vec(),
            steps: vec![launch.clone(), read],
        };
        let both =
            Executor::<PastCeiling>::run(&self.machine, Protocol::sequential(1), 1, |_, _| {
                Ok(program.clone())
            })
            .expect("one launch and one read stay below the ceiling")
            .batches[0]
                .end;
        let alone = self
            .time_of(launch)
            .expect("one launch stays below the ceiling");
        both - alone
    }

    /// A launch in which DPU `i` runs `cycles[i]` cycles: the fixed launch cost plus the
    /// slowest DPU (a batch is only as fast as its slowest DPU).
    pub fn launch(&self, cycles: &[u64]) -> Result<Time, PastCeiling> {
        let dpu_time = cycles
            .iter()
            .map(|&c| self.machine.dpu.clock.to_time(Cycles(c)))
            .collect();
        self.time_of(Step::Launch { stage: 0, dpu_time })
    }

    /// The MRAM ownership switch of `ranks` ranks: one after another by one thread, or
    /// side by side (`transfer.ownership_switch = "concurrent"`).
    pub fn ownership_switch(&self, ranks: u32) -> Time {
        let t = &self.machine.transfer;
        let n = match t.switch {
            crate::machine::SwitchMode::Serial => ranks,
            crate::machine::SwitchMode::Concurrent => ranks.min(1),
        };
        Time(t.ownership_switch_per_rank.ps() * n as u64)
    }

    /// Host CPU time of `work` spread over `threads` threads (at most the host's).
    pub fn cpu(&self, work: HostWork, threads: u32) -> Result<Time, PastCeiling> {
        self.time_of(Step::Host {
            stage: 0,
            label: "host work",
            work_ps: work.single_thread_ps(&self.machine.host),
            threads,
        })
    }
}
