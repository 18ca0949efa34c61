//! The host side of a UPMEM system: host <-> DPU transfers, kernel launches and the host
//! CPU, each an analytic, deterministic cost in [`Time`] from the machine file's
//! `[transfer]` and `[host]` sections.
//!
//! # Transfer model
//!
//! - **Parallel** (`dpu_push_xfer`): within a rank every DPU of the set receives the same
//!   size, so a rank moves `n_r x max_r` bytes (`n_r` DPUs of the set, `max_r` the largest
//!   buffer among them). A rank takes `max(max_r / dpu_rate, n_r x max_r / rank_rate)`:
//!   a few DPUs are bound by the per-DPU rate, a full rank by the rank's rate. Ranks run
//!   concurrently; the host's memory system caps the aggregate
//!   (`sum of padded bytes / host_cap`). Total: `call_fixed + max(slowest rank, cap term)`.
//! - **Serial** (`dpu_copy_to` per DPU): one call per DPU, one after the other:
//!   `sum (call_fixed + size_i / dpu_rate)`.
//! - **Broadcast**: the same buffer to every DPU of the set: per rank
//!   `max(size / dpu_rate, n_r x size / broadcast_rate)`. The cap applies to the bytes
//!   delivered, as for the other transfers (every DPU's copy crosses the memory bus).
//! - **Launch**: `launch_fixed + the slowest DPU's cycles`. The first host read after a
//!   launch pays the MRAM ownership switch, `ownership_switch_per_rank x ranks read`
//!   ([`Host::ownership_switch`]); callers add it where their protocol pays it.

use crate::engine::{Clock, Cycles, Time};
use crate::machine::{HostParams, Machine, TransferParams};
use serde::Serialize;

/// Which way bytes move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    CpuDpu,
    DpuCpu,
}

/// The cost of one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TransferCost {
    pub time: Time,
    /// Bytes the caller asked to move.
    pub payload_bytes: u64,
    /// Bytes actually moved, with the per-rank padding of parallel transfers.
    pub moved_bytes: u64,
}

/// Host-CPU work of one step, counted by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct HostWork {
    pub queries_routed: u64,
    pub results_merged: u64,
    pub bytes_packed: u64,
}

/// The host of one machine.
#[derive(Debug, Clone)]
pub struct Host {
    transfer: TransferParams,
    cpu: HostParams,
    dpu_clock: Clock,
    /// Usable DPUs of each rank (DPUs are numbered rank by rank).
    dpus_per_rank: Vec<u32>,
    dpus: usize,
}

impl Host {
    pub fn new(machine: &Machine) -> Host {
        Host {
            transfer: machine.transfer.clone(),
            cpu: machine.host.clone(),
            dpu_clock: machine.dpu.clock,
            dpus_per_rank: machine.usable_dpus_per_rank.clone(),
            dpus: machine.dpus as usize,
        }
    }

    pub fn threads(&self) -> u32 {
        self.cpu.threads
    }

    fn rates(&self, direction: Direction) -> (u64, u64) {
        let t = &self.transfer;
        match direction {
            Direction::CpuDpu => (
                t.cpu_dpu_bytes_per_s_per_dpu,
                t.cpu_dpu_bytes_per_s_per_rank,
            ),
            Direction::DpuCpu => (
                t.dpu_cpu_bytes_per_s_per_dpu,
                t.dpu_cpu_bytes_per_s_per_rank,
            ),
        }
    }

    /// Calls `f(rank, sizes of that rank's DPUs)` for each rank.
    fn per_rank<'a>(&self, sizes: &'a [u64]) -> impl Iterator<Item = &'a [u64]> + 'a {
        assert_eq!(
            sizes.len(),
            self.dpus,
            "one size per usable DPU of the machine (0 for DPUs outside the set)"
        );
        let mut rest = sizes;
        self.dpus_per_rank.clone().into_iter().map(move |n| {
            let (rank, tail) = rest.split_at(n as usize);
            rest = tail;
            rank
        })
    }

    /// A parallel transfer: `sizes[i]` bytes for global DPU `i` (0: not in the set).
    pub fn parallel(&self, direction: Direction, sizes: &[u64]) -> TransferCost {
        let (dpu_rate, rank_rate) = self.rates(direction);
        let mut slowest = Time::ZERO;
        let mut moved = 0u64;
        let mut payload = 0u64;
        for rank in self.per_rank(sizes) {
            let n = rank.iter().filter(|&&s| s > 0).count() as u64;
            let max = rank.iter().copied().max().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let padded = n * max;
            moved += padded;
            payload += rank.iter().sum::<u64>();
            let t = Time::for_bytes(max, dpu_rate).max(Time::for_bytes(padded, rank_rate));
            slowest = slowest.max(t);
        }
        if moved == 0 {
            return TransferCost {
                time: Time::ZERO,
                payload_bytes: 0,
                moved_bytes: 0,
            };
        }
        let cap = Time::for_bytes(moved, self.transfer.host_cap_bytes_per_s);
        TransferCost {
            time: self.transfer.call_fixed + slowest.max(cap),
            payload_bytes: payload,
            moved_bytes: moved,
        }
    }

    /// `dpu_push_xfer` to DPUs: CPU -> DPU parallel transfer.
    pub fn push_parallel(&self, sizes: &[u64]) -> TransferCost {
        self.parallel(Direction::CpuDpu, sizes)
    }

    /// `dpu_push_xfer` from DPUs: DPU -> CPU parallel transfer (without the ownership
    /// switch; see [`Host::ownership_switch`]).
    pub fn pull_parallel(&self, sizes: &[u64]) -> TransferCost {
        self.parallel(Direction::DpuCpu, sizes)
    }

    /// Serial transfers: one SDK call per DPU of the set, one after the other.
    pub fn serial(&self, direction: Direction, sizes: &[u64]) -> TransferCost {
        let (dpu_rate, _) = self.rates(direction);
        let mut time = Time::ZERO;
        let mut bytes = 0;
        for &s in self.per_rank(sizes).flatten() {
            if s > 0 {
                time += self.transfer.call_fixed + Time::for_bytes(s, dpu_rate);
                bytes += s;
            }
        }
        TransferCost {
            time,
            payload_bytes: bytes,
            moved_bytes: bytes,
        }
    }

    /// Broadcast of one `size_bytes` buffer to every DPU with `in_set[i]`.
    pub fn broadcast(&self, in_set: &[bool], size_bytes: u64) -> TransferCost {
        let sizes: Vec<u64> = in_set
            .iter()
            .map(|&b| if b { size_bytes } else { 0 })
            .collect();
        let dpu_rate = self.transfer.cpu_dpu_bytes_per_s_per_dpu;
        let rank_rate = self.transfer.broadcast_bytes_per_s_per_rank;
        let mut slowest = Time::ZERO;
        let mut delivered = 0u64;
        for rank in self.per_rank(&sizes) {
            let n = rank.iter().filter(|&&s| s > 0).count() as u64;
            if n == 0 || size_bytes == 0 {
                continue;
            }
            delivered += n * size_bytes;
            let t = Time::for_bytes(size_bytes, dpu_rate)
                .max(Time::for_bytes(n * size_bytes, rank_rate));
            slowest = slowest.max(t);
        }
        if delivered == 0 {
            return TransferCost {
                time: Time::ZERO,
                payload_bytes: 0,
                moved_bytes: 0,
            };
        }
        let cap = Time::for_bytes(delivered, self.transfer.host_cap_bytes_per_s);
        TransferCost {
            time: self.transfer.call_fixed + slowest.max(cap),
            payload_bytes: size_bytes,
            moved_bytes: delivered,
        }
    }

    /// A launch whose DPUs ran `cycles[i]` cycles each: the fixed launch cost plus the
    /// slowest DPU (a batch is only as fast as its slowest DPU).
    pub fn launch(&self, cycles: &[u64]) -> Time {
        let slowest = cycles.iter().copied().max().unwrap_or(0);
        self.transfer.launch_fixed + self.dpu_clock.to_time(Cycles(slowest))
    }

    /// The MRAM ownership switch paid by the first host access after a launch.
    pub fn ownership_switch(&self, ranks: u32) -> Time {
        Time(self.transfer.ownership_switch_per_rank.ps() * ranks as u64)
    }

    /// Host CPU time of `work` spread over `threads` threads (at most the host's).
    pub fn cpu(&self, work: HostWork, threads: u32) -> Time {
        let threads = threads.clamp(1, self.cpu.threads) as u128;
        let total_ps = work.queries_routed as u128 * self.cpu.route_ps_per_query as u128
            + work.results_merged as u128 * self.cpu.merge_ps_per_result as u128
            + work.bytes_packed as u128 * self.cpu.pack_ps_per_byte as u128;
        Time(u64::try_from(total_ps.div_ceil(threads)).expect("host time fits u64 ps"))
    }
}
