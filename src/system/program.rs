//! A batch as a small program of operations on the machine's components. An index writes
//! the program of each batch (after computing the batch's answers functionally); the
//! executor ([`super::exec`]) decides when each operation runs, so overlap, contention,
//! the breakdown and the trace all come from one place.
//!
//! Steps run in order, each after the previous one has completed. The steps that touch the
//! ranks (transfers and launches), and everything between the first and the last of them,
//! form the batch's **DPU phase**: the DPUs serve one batch at a time, in batch order.

use crate::engine::Time;

/// The paper's split of a batch's time, used to compare indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Host CPU work.
    Cpu,
    /// Host <-> DPU transfers (and the MRAM ownership switch).
    Communication,
    /// Launches and kernels.
    Pim,
}

impl Class {
    pub const ALL: [Class; 3] = [Class::Cpu, Class::Communication, Class::Pim];

    /// The key of the class's total under a run's `breakdown_us`.
    pub fn key(self) -> &'static str {
        match self {
            Class::Cpu => "cpu",
            Class::Communication => "communication",
            Class::Pim => "pim",
        }
    }
}

/// A named stage of an index's batch; every step belongs to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    /// The key under `breakdown_us` (snake_case).
    pub name: &'static str,
    pub class: Class,
}

/// Which way a transfer moves bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    CpuDpu,
    DpuCpu,
}

/// How the SDK moves a transfer's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransferKind {
    /// `dpu_push_xfer`: one buffer per DPU, each rank padded to its largest buffer.
    Parallel,
    /// `dpu_push_xfer` on the whole DPU set with one size for all: every DPU of the set
    /// moves the largest buffer over the set (PIM-tree's transfers).
    ParallelAll,
    /// `dpu_copy_to` / `dpu_copy_from`, one DPU after another.
    Serial,
    /// `dpu_broadcast_to`: one buffer, the same to every DPU of the set (CPU -> DPU only).
    Broadcast,
}

impl TransferKind {
    /// What one rank moves for a transfer whose buffers on that rank are `sizes` (0: DPU
    /// not in the set) and whose largest buffer over the whole set is `set_max_bytes`:
    /// (DPUs in the set, bytes moved). Parallel and broadcast transfers give every DPU of
    /// the set the rank's largest buffer, `ParallelAll` the set's largest; serial ones move
    /// each buffer as it is. The one place for the padding rule.
    pub fn rank_bytes(self, sizes: &[u64], set_max_bytes: u64) -> (u64, u64) {
        let n = sizes.iter().filter(|&&b| b > 0).count() as u64;
        match self {
            TransferKind::Serial => (n, sizes.iter().sum()),
            TransferKind::Parallel | TransferKind::Broadcast => {
                (n, n * sizes.iter().copied().max().unwrap_or(0))
            }
            TransferKind::ParallelAll => (n, n * set_max_bytes),
        }
    }
}

/// Host transfers move whole words: the SDK's transfer functions (`dpu_copy_to`,
/// `dpu_copy_from`, `dpu_broadcast_to`, `dpu_push_xfer`) return an error unless the address
/// and length are multiples of 8 bytes for MRAM (and IRAM) and of 4 bytes for WRAM (UPMEM
/// SDK documentation, "Communication with host applications", section "Memory Interface";
/// PrIM's hosts round their MRAM buffers up to 8 bytes, CMU-SAFARI/prim-benchmarks, e.g.
/// `VA/host/app.c`). A [`Step::Transfer`] does not say which memory it targets (PrIM's
/// argument structs go to WRAM), so programs are held to the WRAM word.
pub const MRAM_TRANSFER_WORD_BYTES: u64 = 8;
/// See [`MRAM_TRANSFER_WORD_BYTES`].
pub const WRAM_TRANSFER_WORD_BYTES: u64 = 4;

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Host computation: `work_ps` picoseconds of one thread, spread over up to `threads`
    /// threads of the host's pool (its cost comes from the host cost model).
    Host {
        stage: usize,
        label: &'static str,
        work_ps: u64,
        threads: u32,
    },
    /// A transfer; `sizes_bytes[i]` for global DPU `i` (0: not in the set).
    Transfer {
        stage: usize,
        direction: Direction,
        kind: TransferKind,
        sizes_bytes: Vec<u64>,
    },
    /// A launch on every DPU; DPU `i` runs for `dpu_time[i]` (simulated beforehand on the
    /// DPU model). The step ends when the host knows every rank has finished.
    Launch { stage: usize, dpu_time: Vec<Time> },
}

impl Step {
    pub fn stage(&self) -> usize {
        match self {
            Step::Host { stage, .. }
            | Step::Transfer { stage, .. }
            | Step::Launch { stage, .. } => *stage,
        }
    }

    /// Whether the step uses the ranks (and so belongs to the DPU phase).
    pub fn uses_ranks(&self) -> bool {
        !matches!(self, Step::Host { .. })
    }
}

/// The program of one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub stages: Vec<Stage>,
    pub steps: Vec<Step>,
}

impl Program {
    /// Checks the program's shape (stage indices, one size per DPU); a bad program is an
    /// index bug, so this panics with what is wrong.
    pub fn assert_valid(&self, dpus: usize) {
        for (i, step) in self.steps.iter().enumerate() {
            assert!(
                step.stage() < self.stages.len(),
                "step {i} names stage {} of {}",
                step.stage(),
                self.stages.len()
            );
            let n = match step {
                Step::Host { threads, .. } => {
                    assert!(*threads > 0, "step {i}: a host task needs a thread");
                    dpus
                }
                Step::Transfer { sizes_bytes, .. } => {
                    let odd = sizes_bytes
                        .iter()
                        .position(|b| !b.is_multiple_of(WRAM_TRANSFER_WORD_BYTES));
                    if let Some(dpu) = odd {
                        panic!(
                            "step {i}: DPU {dpu}'s transfer of {} bytes is not whole {WRAM_TRANSFER_WORD_BYTES}-byte words",
                            sizes_bytes[dpu]
                        );
                    }
                    sizes_bytes.len()
                }
                Step::Launch { dpu_time, .. } => dpu_time.len(),
            };
            assert_eq!(n, dpus, "step {i}: one entry per DPU");
        }
        for (a, s) in self.stages.iter().enumerate() {
            for t in &self.stages[a + 1..] {
                assert_ne!(s.name, t.name, "stage names are unique");
            }
        }
    }

    /// The index of the first and one past the last rank step: the DPU phase.
    pub fn dpu_phase(&self) -> Option<(usize, usize)> {
        let first = self.steps.iter().position(Step::uses_ranks)?;
        let last = self.steps.iter().rposition(Step::uses_ranks)?;
        Some((first, last + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(sizes_bytes: Vec<u64>) -> Program {
        Program {
            stages: vec![Stage {
                name: "cpu_to_dpu",
                class: Class::Communication,
            }],
            steps: vec![Step::Transfer {
                stage: 0,
                direction: Direction::CpuDpu,
                kind: TransferKind::Parallel,
                sizes_bytes,
            }],
        }
    }

    #[test]
    fn whole_words_pass() {
        push(vec![8, 0, 12]).assert_valid(3);
    }

    #[test]
    #[should_panic(expected = "step 0: DPU 1's transfer of 6 bytes is not whole 4-byte words")]
    fn a_transfer_of_part_of_a_word_is_an_index_bug() {
        push(vec![8, 6, 12]).assert_valid(3);
    }
}
