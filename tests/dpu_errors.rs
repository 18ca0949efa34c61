//! Every way a kernel can go wrong is an error that names the tasklet and the values, never
//! a panic: bad DMA sizes and alignment, WRAM and MRAM overflow, too many tasklets, IRAM
//! overflow, bad mutex use, and deadlock (reported with what each tasklet waits on).

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, LaunchReport, SyncKind, Tasklet, TaskletWait};
use pimdes::machine::DmaDirection;
use pimdes::system::System;

fn launch<K: Kernel>(kernel: &K, tasklets: u32) -> Result<LaunchReport, KernelError> {
    let m = common::machine(&[]);
    Dpu::new(&m.dpu, 0).launch(kernel, tasklets)
}

/// One DMA with the given parameters from tasklet 0.
struct Dma {
    direction: DmaDirection,
    mram_addr: u64,
    wram_offset: u32,
    size: u32,
}

impl Kernel for Dma {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(4096)? + self.wram_offset;
        match self.direction {
            DmaDirection::Read => t.mram_read(self.mram_addr, buf, self.size).await,
            DmaDirection::Write => t.mram_write(buf, self.mram_addr, self.size).await,
        }
    }
}

fn dma(direction: DmaDirection, mram_addr: u64, wram_offset: u32, size: u32) -> KernelError {
    launch(
        &Dma {
            direction,
            mram_addr,
            wram_offset,
            size,
        },
        1,
    )
    .unwrap_err()
}

#[test]
fn dma_size_not_a_multiple_of_8_is_an_error() {
    let e = dma(DmaDirection::Read, 0, 0, 12);
    assert!(
        matches!(
            e,
            KernelError::DmaSize {
                size_bytes: 12,
                tasklet: 0,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("multiple of 8"), "{e}");
}

#[test]
fn dma_size_above_2048_or_zero_is_an_error() {
    let e = dma(DmaDirection::Write, 0, 0, 4096);
    assert!(
        matches!(
            e,
            KernelError::DmaSize {
                size_bytes: 4096,
                max: 2048,
                ..
            }
        ),
        "{e}"
    );
    let e = dma(DmaDirection::Read, 0, 0, 0);
    assert!(
        matches!(e, KernelError::DmaSize { size_bytes: 0, .. }),
        "{e}"
    );
}

#[test]
fn misaligned_dma_addresses_are_errors() {
    let e = dma(DmaDirection::Read, 4, 0, 8);
    assert!(
        matches!(e, KernelError::DmaAlignment { mram_addr: 4, .. }),
        "{e}"
    );
    let e = dma(DmaDirection::Write, 0, 4, 8);
    assert!(
        matches!(e, KernelError::DmaAlignment { alignment: 8, .. }),
        "{e}"
    );
}

#[test]
fn dma_beyond_mram_is_an_error() {
    let e = dma(DmaDirection::Read, (64 << 20) - 8, 0, 16);
    assert!(
        matches!(
            e,
            KernelError::MramOutOfRange {
                mram_size_bytes: 67_108_864,
                ..
            }
        ),
        "{e}"
    );
}

/// Allocates `bytes` of WRAM heap.
struct Alloc {
    bytes: u32,
}

impl Kernel for Alloc {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.mem_alloc(self.bytes).map(|_| ())
    }
}

#[test]
fn wram_overflow_is_an_error() {
    // 64 KiB WRAM minus 1 KiB of stack: 64,512 bytes of heap.
    assert!(launch(&Alloc { bytes: 64_512 }, 1).is_ok());
    let e = launch(&Alloc { bytes: 64_520 }, 1).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::WramOverflow {
                requested_bytes: 64_520,
                available_bytes: 64_512,
                ..
            }
        ),
        "{e}"
    );
    // The stacks alone can overflow WRAM.
    let m = common::machine(&["dpu.stack_bytes_per_tasklet=4096"]);
    let e = Dpu::new(&m.dpu, 0)
        .launch(&Alloc { bytes: 8 }, 24)
        .unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::WramOverflow {
                requested_bytes: 98_304,
                ..
            }
        ),
        "{e}"
    );
}

/// WRAM accessors out of range or misaligned.
struct BadWram {
    addr: u32,
}

impl Kernel for BadWram {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.wram_write_u64(self.addr, 1)
    }
}

#[test]
fn wram_access_out_of_range_or_misaligned_is_an_error() {
    let e = launch(&BadWram { addr: 65_536 }, 1).unwrap_err();
    assert!(
        matches!(e, KernelError::WramOutOfRange { addr: 65_536, .. }),
        "{e}"
    );
    let e = launch(&BadWram { addr: 12 }, 1).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::WramMisaligned {
                addr: 12,
                size_bytes: 8,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn more_tasklets_than_the_machine_has_is_an_error() {
    let e = launch(&Alloc { bytes: 8 }, 25).unwrap_err();
    assert_eq!(
        e,
        KernelError::TooManyTasklets {
            requested: 25,
            max: 24
        }
    );
    assert!(e.to_string().contains("dpu.max_tasklets"), "{e}");
    assert!(launch(&Alloc { bytes: 8 }, 0).is_err());
    // A v1B-like machine has 16.
    let m = common::machine(&["dpu.max_tasklets=16"]);
    let e = Dpu::new(&m.dpu, 0)
        .launch(&Alloc { bytes: 8 }, 17)
        .unwrap_err();
    assert_eq!(
        e,
        KernelError::TooManyTasklets {
            requested: 17,
            max: 16
        }
    );
}

struct Big;

impl Kernel for Big {
    fn iram_instructions(&self) -> u32 {
        5000
    }
    async fn tasklet(&self, _t: &Tasklet) -> Result<(), KernelError> {
        Ok(())
    }
}

#[test]
fn a_kernel_larger_than_iram_is_an_error() {
    let e = launch(&Big, 1).unwrap_err();
    assert_eq!(
        e,
        KernelError::IramOverflow {
            instructions: 5000,
            capacity: 4096
        }
    );
}

/// Tasklets 0 and 1 take mutexes 0 and 1 in opposite orders.
struct LockOrder;

impl Kernel for LockOrder {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let (first, second) = if t.id() == 0 { (0, 1) } else { (1, 0) };
        t.mutex_lock(first).await?;
        t.compute(100).await?;
        t.mutex_lock(second).await?;
        t.mutex_unlock(second).await?;
        t.mutex_unlock(first).await
    }
}

#[test]
fn a_lock_order_deadlock_is_reported_with_each_tasklets_wait() {
    let e = launch(&LockOrder, 2).unwrap_err();
    let KernelError::Deadlock { waits, .. } = &e else {
        panic!("expected a deadlock, got {e}");
    };
    assert_eq!(
        waits,
        &vec![
            TaskletWait::Mutex {
                id: 1,
                holder: Some(1)
            },
            TaskletWait::Mutex {
                id: 0,
                holder: Some(0)
            },
        ]
    );
    let text = e.to_string();
    assert!(
        text.contains("tasklet 0 waits for mutex 1, held by tasklet 1"),
        "{text}"
    );
    assert!(
        text.contains("tasklet 1 waits for mutex 0, held by tasklet 0"),
        "{text}"
    );
}

/// Tasklet 0 returns early; the others wait at a barrier forever.
struct MissingArrival;

impl Kernel for MissingArrival {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        if t.id() == 0 {
            return Ok(());
        }
        t.barrier_wait(3).await
    }
}

#[test]
fn a_barrier_that_never_fills_is_a_deadlock() {
    let e = launch(&MissingArrival, 3).unwrap_err();
    let KernelError::Deadlock { waits, .. } = &e else {
        panic!("expected a deadlock, got {e}");
    };
    assert_eq!(waits[0], TaskletWait::Finished);
    assert_eq!(
        waits[2],
        TaskletWait::Barrier {
            id: 3,
            arrived: 2,
            expected: 3
        }
    );
    assert!(
        e.to_string()
            .contains("waits at barrier 3 (2 of 3 arrived)"),
        "{e}"
    );
}

/// Unlocks a mutex it never locked; or uses an id beyond the atomic bits.
struct BadMutex {
    id: u32,
    lock_first: bool,
}

impl Kernel for BadMutex {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        if self.lock_first {
            t.mutex_lock(self.id).await?;
        }
        t.mutex_unlock(self.id).await
    }
}

#[test]
fn mutex_misuse_is_an_error() {
    let e = launch(
        &BadMutex {
            id: 2,
            lock_first: false,
        },
        1,
    )
    .unwrap_err();
    assert_eq!(
        e,
        KernelError::MutexNotHeld {
            tasklet: 0,
            id: 2,
            holder: None
        }
    );
    let e = launch(
        &BadMutex {
            id: 256,
            lock_first: true,
        },
        1,
    )
    .unwrap_err();
    assert_eq!(
        e,
        KernelError::SyncId {
            tasklet: 0,
            kind: SyncKind::Mutex,
            id: 256,
            limit: 256
        }
    );
}

/// DPU 2 reads beyond MRAM; the others work.
struct FailsOnDpu2;

impl Kernel for FailsOnDpu2 {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(8)?;
        let addr = if t.dpu() >= 2 { 1 << 40 } else { 0 };
        t.mram_read(addr, buf, 8).await
    }
}

#[test]
fn a_system_launch_reports_the_lowest_failing_dpu() {
    let m = common::machine(&["ranks=1", "usable_dpus=8"]);
    let mut system = System::new(&m);
    let e = system.launch(&FailsOnDpu2, 4).unwrap_err();
    assert_eq!(e.dpu, 2);
    assert!(
        e.to_string().starts_with("DPU 2: tasklet 0: MRAM access"),
        "{e}"
    );
}
