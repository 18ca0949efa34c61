//! Tasklet and synchronisation faults: more tasklets than the DPU has, mutex misuse, and
//! how a failing DPU is named in a system launch.

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, LaunchReport, SyncKind, Tasklet};
use pimdes::system::System;

fn launch<K: Kernel>(kernel: &K, tasklets: u32) -> Result<LaunchReport, KernelError> {
    let m = common::machine(&[]);
    Dpu::new(&m.dpu, 0).launch(kernel, tasklets)
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
