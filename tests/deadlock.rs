//! Deadlock: when every unfinished tasklet is blocked, the launch stops with what each
//! tasklet waits on (which mutex and its holder, which barrier and how many arrived).

mod common;

use pimdes::dpu::{Dpu, Kernel, KernelError, LaunchReport, Tasklet, TaskletWait};

fn launch<K: Kernel>(kernel: &K, tasklets: u32) -> Result<LaunchReport, KernelError> {
    let m = common::machine(&[]);
    Dpu::new(&m.dpu, 0).launch(kernel, tasklets)
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
