//! Tasklet and synchronisation faults: more tasklets than the DPU has, mutex misuse, WRAM
//! accessed from inside `with_wram`, and how a failing DPU is named in a system launch.

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, LaunchReport, Op, SyncKind, Tasklet};
use pimdes::system::System;
use std::sync::Mutex;

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

/// What a `with_wram` closure saw, next to the same values read outside it.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    alu_cost_inside: u64,
    alu_cost_outside: u64,
    cycle_inside: u64,
    cycle_outside: u64,
    word_after: u64,
    buffer_addr: u32,
    nested: Option<Result<u64, KernelError>>,
}

/// Calls `cost` and `cycle` inside a `with_wram` closure that also writes the bytes, then
/// tries a WRAM accessor inside one.
struct MethodsInsideWithWram {
    seen: Mutex<Seen>,
}

impl Kernel for MethodsInsideWithWram {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(16)?;
        t.wram_write_u64(buf, 41)?;
        t.compute(10).await?;
        let (alu, cycle) = t.with_wram(buf, 16, |b| {
            b[0] += 1;
            (t.cost(Op::Alu), t.cycle())
        })?;
        let nested = t.with_wram(buf, 8, |_| t.wram_read_u64(buf))?;
        let mut seen = self.seen.lock().map_err(|_| t.fail("poisoned"))?;
        *seen = Seen {
            alu_cost_inside: alu,
            alu_cost_outside: t.cost(Op::Alu),
            cycle_inside: cycle,
            cycle_outside: t.cycle(),
            word_after: t.wram_read_u64(buf)?,
            buffer_addr: buf,
            nested: Some(nested),
        };
        Ok(())
    }
}

#[test]
fn a_with_wram_closure_may_call_other_tasklet_methods() {
    let kernel = MethodsInsideWithWram {
        seen: Mutex::default(),
    };
    launch(&kernel, 1).unwrap();
    let seen = kernel.seen.into_inner().unwrap();
    assert_eq!(seen.alu_cost_inside, seen.alu_cost_outside);
    assert!(seen.cycle_inside > 0, "after 10 instructions");
    assert_eq!(seen.cycle_inside, seen.cycle_outside);
    assert_eq!(seen.word_after, 42, "the closure's write reached WRAM");
    assert_eq!(
        seen.nested,
        Some(Err(KernelError::WramInUse {
            tasklet: 0,
            addr: seen.buffer_addr as u64,
            size_bytes: 8
        }))
    );
}

/// Charges `instructions` once, or `times` times.
struct Charges {
    instructions: u64,
    times: u64,
}

impl Kernel for Charges {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        for _ in 0..self.times {
            t.compute(self.instructions).await?;
        }
        Ok(())
    }
}

#[test]
fn a_compute_beyond_the_bound_and_a_launch_beyond_the_cycle_limit_are_errors() {
    let most = pimdes::dpu::MAX_COMPUTE_INSTRUCTIONS;
    let once = |instructions| Charges {
        instructions,
        times: 1,
    };
    // One tasklet issues an instruction every 11 cycles.
    assert_eq!(launch(&once(most), 1).unwrap().cycles, 11 * most);
    for instructions in [most + 1, u64::MAX] {
        let e = launch(&once(instructions), 1).unwrap_err();
        assert_eq!(
            e,
            KernelError::ComputeTooLong {
                tasklet: 0,
                instructions,
                limit: most
            }
        );
    }
    // 11 x 2^40 cycles a compute: 2^62 cycles after about 381,000 of them.
    let long = Charges {
        instructions: most,
        times: 400_000,
    };
    let limit = pimdes::dpu::MAX_LAUNCH_CYCLES;
    assert_eq!(launch(&long, 1), Err(KernelError::CycleLimit { limit }));
}

/// Starts a compute, polls it once by hand and returns without awaiting its end.
struct DropsAnOperation;

impl Kernel for DropsAnOperation {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let mut wait = std::pin::pin!(t.compute(100));
        std::future::poll_fn(|cx| {
            let _ = std::future::Future::poll(wait.as_mut(), cx);
            std::task::Poll::Ready(())
        })
        .await;
        Ok(())
    }
}

#[test]
fn a_tasklet_returning_with_an_operation_pending_is_an_error() {
    let e = launch(&DropsAnOperation, 2).unwrap_err();
    match e {
        KernelError::Kernel { tasklet: 0, reason } => {
            assert!(
                reason.contains("operation it started was pending"),
                "{reason}"
            )
        }
        other => panic!("expected the pending operation named, got {other:?}"),
    }
}
