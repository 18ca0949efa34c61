//! [`KernelError`]: everything that can go wrong while a DPU runs a kernel. Every variant
//! stops the launch (the DPU's state is then undefined, as on hardware after a fault) and
//! names the tasklet and the values involved.

use crate::engine::QueueFull;
use crate::machine::DmaDirection;
use std::fmt;

/// What a tasklet was doing when a launch stopped (for deadlock reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskletWait {
    /// Not waiting on a pimdes operation (it awaited some other future).
    Running,
    Computing,
    Dma,
    /// Waiting for a mutex held by `holder`.
    Mutex {
        id: u32,
        holder: Option<u32>,
    },
    /// Waiting at a barrier that `arrived` of `expected` tasklets reached.
    Barrier {
        id: u32,
        arrived: u32,
        expected: u32,
    },
    Finished,
}

impl fmt::Display for TaskletWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskletWait::Running => write!(f, "awaits a future that is not a pimdes operation"),
            TaskletWait::Computing => write!(f, "computing"),
            TaskletWait::Dma => write!(f, "waiting for a DMA"),
            TaskletWait::Mutex {
                id,
                holder: Some(h),
            } => {
                write!(f, "waits for mutex {id}, held by tasklet {h}")
            }
            TaskletWait::Mutex { id, holder: None } => write!(f, "waits for mutex {id}"),
            TaskletWait::Barrier {
                id,
                arrived,
                expected,
            } => write!(f, "waits at barrier {id} ({arrived} of {expected} arrived)"),
            TaskletWait::Finished => write!(f, "finished"),
        }
    }
}

/// Which kind of synchronisation object an id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    Mutex,
    Barrier,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    #[error("{requested} tasklets requested; the DPU runs 1 to {max} (dpu.max_tasklets)")]
    TooManyTasklets { requested: u32, max: u32 },

    #[error("the kernel needs {instructions} instructions of IRAM; the DPU has {capacity}")]
    IramOverflow { instructions: u32, capacity: u32 },

    #[error(
        "WRAM overflow: {what}: {requested_bytes} bytes needed, {available_bytes} left of {wram_size_bytes}"
    )]
    WramOverflow {
        what: String,
        requested_bytes: u64,
        available_bytes: u64,
        wram_size_bytes: u32,
    },

    #[error(
        "tasklet {tasklet}: {} of {size_bytes} bytes: the size must be a multiple of {multiple} between {min} and {max}",
        .direction.sdk_call()
    )]
    DmaSize {
        tasklet: u32,
        direction: DmaDirection,
        size_bytes: u32,
        min: u32,
        max: u32,
        multiple: u32,
    },

    #[error(
        "tasklet {tasklet}: {} with MRAM address {mram_addr:#x} and WRAM address {wram_addr:#x}: both must be {alignment}-byte aligned",
        .direction.sdk_call()
    )]
    DmaAlignment {
        tasklet: u32,
        direction: DmaDirection,
        mram_addr: u64,
        wram_addr: u32,
        alignment: u32,
    },

    #[error(
        "tasklet {tasklet}: MRAM access of {size_bytes} bytes at {addr:#x} ends beyond the {mram_size_bytes}-byte MRAM"
    )]
    MramOutOfRange {
        tasklet: u32,
        addr: u64,
        size_bytes: u64,
        mram_size_bytes: u64,
    },

    #[error(
        "tasklet {tasklet}: WRAM access of {size_bytes} bytes at {addr:#x} ends beyond the {wram_size_bytes}-byte WRAM"
    )]
    WramOutOfRange {
        tasklet: u32,
        addr: u64,
        size_bytes: u64,
        wram_size_bytes: u32,
    },

    #[error(
        "tasklet {tasklet}: WRAM access of {size_bytes} bytes at {addr:#x} is not {size_bytes}-byte aligned"
    )]
    WramMisaligned {
        tasklet: u32,
        addr: u32,
        size_bytes: u32,
    },

    #[error("tasklet {tasklet}: {kind:?} id {id} is not below the DPU's {limit} atomic bits")]
    SyncId {
        tasklet: u32,
        kind: SyncKind,
        id: u32,
        limit: u32,
    },

    #[error("tasklet {tasklet}: unlocks mutex {id}, which it does not hold (holder: {holder:?})")]
    MutexNotHeld {
        tasklet: u32,
        id: u32,
        holder: Option<u32>,
    },

    #[error(
        "tasklet {tasklet}: started an operation while another was still pending (await each operation before the next)"
    )]
    AlreadyWaiting { tasklet: u32 },

    #[error("deadlock at cycle {cycle}: every unfinished tasklet is blocked; {}", format_waits(.waits))]
    Deadlock { cycle: u64, waits: Vec<TaskletWait> },

    #[error("the launch exceeded {limit} events; the kernel probably loops forever")]
    EventLimit { limit: u64 },

    /// Operations that take no time (a compute of 0 instructions, or a free mutex or a
    /// barrier on a machine that charges them nothing) never hand control back to the
    /// executor, so the event limit cannot stop a tasklet that spins on them.
    #[error(
        "tasklet {tasklet}: more than {limit} operations of this launch took no simulated time; the kernel probably spins on something only another tasklet can change (charge the spin's instructions)"
    )]
    FreeOperationLimit { tasklet: u32, limit: u64 },

    #[error(
        "tasklet {tasklet}: a compute of {instructions} instructions is above the {limit} one request may charge"
    )]
    ComputeTooLong {
        tasklet: u32,
        instructions: u64,
        limit: u64,
    },

    #[error("the launch ran past cycle {limit}; the kernel probably loops forever")]
    CycleLimit { limit: u64 },

    #[error("{0}")]
    Queue(#[from] QueueFull),

    /// A failure the kernel itself reports (for example a result that fails a check).
    #[error("tasklet {tasklet}: {reason}")]
    Kernel { tasklet: u32, reason: String },

    /// A WRAM access from inside a [`super::Tasklet::with_wram`] closure, which holds the
    /// WRAM bytes while it runs.
    #[error(
        "tasklet {tasklet}: WRAM access of {size_bytes} bytes at {addr:#x} inside a with_wram closure (use the closure's bytes)"
    )]
    WramInUse {
        tasklet: u32,
        addr: u64,
        size_bytes: u64,
    },
}

impl KernelError {
    /// The machine key (dotted, as in a machine file) whose value the kernel could not live
    /// with, when the failure is a limit of the machine description: too few tasklets,
    /// atomic bits, IRAM, WRAM or MRAM, or a DMA size or alignment rule. A kernel that keeps
    /// the SDK's rules (8-byte DMA alignment, sizes of 8 to 2,048 bytes, mem_alloc'd
    /// buffers, MRAM need checked before the launch) meets these only on a machine that is
    /// smaller or stricter than UPMEM's.
    ///
    /// `None` for everything else (a kernel's own failure, a misaligned or out-of-range
    /// WRAM access, mutex misuse, a deadlock, the event limit, a full queue): those are bugs
    /// of the simulator or of its kernels, never the input's fault.
    pub fn machine_key(&self) -> Option<&'static str> {
        match self {
            KernelError::TooManyTasklets { .. } => Some("dpu.max_tasklets"),
            KernelError::IramOverflow { .. } => Some("dpu.iram_instructions"),
            KernelError::WramOverflow { .. } => Some("dpu.wram_size_bytes"),
            KernelError::MramOutOfRange { .. } => Some("dpu.mram_size_bytes"),
            KernelError::SyncId { .. } => Some("dpu.atomic_bits"),
            KernelError::DmaSize {
                size_bytes,
                min,
                max,
                ..
            } => Some(if size_bytes < min {
                "dma.min_size_bytes"
            } else if size_bytes > max {
                "dma.max_size_bytes"
            } else {
                "dma.alignment_bytes"
            }),
            KernelError::DmaAlignment { .. } => Some("dma.alignment_bytes"),
            KernelError::WramOutOfRange { .. }
            | KernelError::WramMisaligned { .. }
            | KernelError::WramInUse { .. }
            | KernelError::MutexNotHeld { .. }
            | KernelError::AlreadyWaiting { .. }
            | KernelError::Deadlock { .. }
            | KernelError::EventLimit { .. }
            | KernelError::FreeOperationLimit { .. }
            | KernelError::ComputeTooLong { .. }
            | KernelError::CycleLimit { .. }
            | KernelError::Queue(_)
            | KernelError::Kernel { .. } => None,
        }
    }
}

impl KernelError {
    /// The other keys of the rule [`machine_key`](Self::machine_key) names, whose values
    /// share the blame: (the machine's, dotted as in a machine file; the workload's). The
    /// WRAM holds every tasklet's stack before the kernel's own buffers.
    pub fn shared_keys(&self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            KernelError::WramOverflow { .. } => {
                (&["dpu.stack_bytes_per_tasklet"], &["run.tasklets"])
            }
            _ => (&[], &[]),
        }
    }
}

fn format_waits(waits: &[TaskletWait]) -> String {
    waits
        .iter()
        .enumerate()
        .map(|(t, w)| format!("tasklet {t} {w}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A kernel error on one DPU of a system.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DPU {dpu}: {error}")]
pub struct LaunchError {
    pub dpu: u32,
    pub error: KernelError,
}
