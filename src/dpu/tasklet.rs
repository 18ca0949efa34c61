//! [`Tasklet`]: what a kernel's tasklet body sees — the DPU C API, as `async` methods.
//!
//! Every method that takes simulated time returns a future to `.await`; it completes when
//! the model says the operation is done, while the other tasklets run. Data accessors
//! (WRAM reads and writes, `mem_alloc`) take no time by themselves: charge the instructions
//! of the code you stand for with [`Tasklet::compute`] or [`Tasklet::op`].

use super::Op;
use super::core::{Core, Dma, Request};
use super::error::KernelError;
use crate::machine::{DmaDirection, OpMix};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// One tasklet's handle on its DPU (`me()`, `NR_TASKLETS`, DMA, WRAM, mutexes, barriers).
pub struct Tasklet {
    pub(crate) core: Rc<RefCell<Core>>,
    pub(crate) id: u32,
    pub(crate) tasklets: u32,
    pub(crate) dpu: u32,
}

/// A pending operation of a tasklet; resolves when the model completes it.
#[must_use = "an operation does nothing until it is awaited"]
pub struct Wait<'a> {
    tasklet: &'a Tasklet,
    request: Request,
    /// Whether the request went to the core (the first poll issues it).
    issued: bool,
}

impl Future for Wait<'_> {
    type Output = Result<(), KernelError>;

    // Compiled into the kernels' futures at each await: as a call of its own it cost
    // about a tenth of the engine benchmark's time (docs/performance.md).
    #[inline]
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut core = this.tasklet.core.borrow_mut();
        if !this.issued {
            this.issued = true;
            // By reference: the core reads the fields it needs, which is cheaper than
            // copying the request out of the future that just wrote it.
            return match core.issue(this.tasklet.id, &this.request) {
                Ok(true) => Poll::Ready(Ok(())),
                Ok(false) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            };
        }
        let woken = &mut core.woken[this.tasklet.id as usize];
        if std::mem::take(woken) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

/// A compute and then a DMA, pending ([`Tasklet::compute_then_mram_read`]); resolves when
/// the DMA completes.
#[must_use = "an operation does nothing until it is awaited"]
pub struct ComputeThenDma<'a> {
    tasklet: &'a Tasklet,
    instructions: u64,
    dma: Dma,
    issued: bool,
}

impl Future for ComputeThenDma<'_> {
    type Output = Result<(), KernelError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let id = this.tasklet.id;
        let mut core = this.tasklet.core.borrow_mut();
        if !this.issued {
            this.issued = true;
            return match core.issue_compute_then_dma(id, this.instructions, &this.dma) {
                Ok(true) => Poll::Ready(Ok(())),
                Ok(false) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            };
        }
        core.wait_outcome(id)
    }
}

impl Tasklet {
    fn wait(&self, request: Request) -> Wait<'_> {
        Wait {
            tasklet: self,
            request,
            issued: false,
        }
    }

    /// This tasklet's id, `0..tasklets()` (the SDK's `me()`).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Tasklets of this launch (the SDK's `NR_TASKLETS`).
    pub fn tasklets(&self) -> u32 {
        self.tasklets
    }

    /// Global index of the DPU this tasklet runs on.
    pub fn dpu(&self) -> u32 {
        self.dpu
    }

    /// WRAM address of the kernel's globals ([`super::Kernel::wram_globals_bytes`] bytes,
    /// 8-byte aligned, shared by all tasklets: guard them with a mutex).
    pub fn globals(&self) -> u32 {
        self.core.borrow().globals
    }

    /// The current cycle of this DPU (the SDK's `perfcounter_get()`).
    pub fn cycle(&self) -> u64 {
        self.core.borrow().now
    }

    /// Executes `instructions` instructions under the revolver pipeline.
    pub fn compute(&self, instructions: u64) -> Wait<'_> {
        self.wait(Request::Compute(instructions))
    }

    /// Executes `count` operations `op`, at the machine's instruction cost of `op`.
    pub fn op(&self, op: Op, count: u64) -> Wait<'_> {
        let per_op = op.cost(&self.core.borrow().params.costs);
        self.wait(Request::Compute(per_op.saturating_mul(count)))
    }

    /// Instructions of one `op` on this machine (to sum a basic block's cost).
    pub fn cost(&self, op: Op) -> u64 {
        op.cost(&self.core.borrow().params.costs)
    }

    /// Instructions of the basic block `mix` on this machine.
    pub fn instructions(&self, mix: OpMix) -> u64 {
        mix.instructions(&self.core.borrow().params.costs)
    }

    /// `mram_read(from, to, size)`: copies `size_bytes` from MRAM to WRAM; blocks this
    /// tasklet for the DMA's latency.
    pub fn mram_read(&self, mram_addr: u64, wram_addr: u32, size_bytes: u32) -> Wait<'_> {
        self.wait(Request::Dma(Dma {
            direction: DmaDirection::Read,
            mram_addr,
            wram_addr,
            size_bytes,
        }))
    }

    /// `compute(instructions).await` and then `mram_read(mram_addr, wram_addr,
    /// size_bytes).await`, as one operation: the same simulated time, data and counters, and
    /// the DMA is issued when the compute finishes, but the simulator resumes the tasklet
    /// once instead of twice (a tree descent's step: compare keys, then fetch the child).
    /// An error of the read comes back from this operation, as from the plain read.
    pub fn compute_then_mram_read(
        &self,
        instructions: u64,
        mram_addr: u64,
        wram_addr: u32,
        size_bytes: u32,
    ) -> ComputeThenDma<'_> {
        ComputeThenDma {
            tasklet: self,
            instructions,
            dma: Dma {
                direction: DmaDirection::Read,
                mram_addr,
                wram_addr,
                size_bytes,
            },
            issued: false,
        }
    }

    /// A hint to the host, not a DPU operation: the kernel will soon read `size_bytes` at
    /// MRAM `mram_addr`, so the host CPU may fetch them into its caches now. Nothing
    /// simulated changes (no time, no event, no stats).
    pub fn prefetch_mram(&self, mram_addr: u64, size_bytes: u32) {
        self.core
            .borrow()
            .mram
            .prefetch(mram_addr, size_bytes as u64);
    }

    /// `mram_write(from, to, size)`: copies `size_bytes` from WRAM to MRAM.
    pub fn mram_write(&self, wram_addr: u32, mram_addr: u64, size_bytes: u32) -> Wait<'_> {
        self.wait(Request::Dma(Dma {
            direction: DmaDirection::Write,
            mram_addr,
            wram_addr,
            size_bytes,
        }))
    }

    /// `mutex_lock(id)`: blocks until this tasklet holds mutex `id` (FIFO hand-over).
    pub fn mutex_lock(&self, id: u32) -> Wait<'_> {
        self.wait(Request::Lock(id))
    }

    /// `mutex_unlock(id)`: releases mutex `id`, which this tasklet must hold.
    pub fn mutex_unlock(&self, id: u32) -> Wait<'_> {
        self.wait(Request::Unlock(id))
    }

    /// `barrier_wait(id)`: blocks until every tasklet of the launch reached barrier `id`.
    pub fn barrier_wait(&self, id: u32) -> Wait<'_> {
        self.wait(Request::Barrier(id))
    }

    /// `mem_alloc(size)`: reserves `size_bytes` of WRAM heap (8-byte aligned, shared by all
    /// tasklets, never freed during the launch); returns its WRAM address.
    pub fn mem_alloc(&self, size_bytes: u32) -> Result<u32, KernelError> {
        let mut core = self.core.borrow_mut();
        let start = core.heap_next.next_multiple_of(8);
        let wram = core.params.wram_size_bytes;
        let end = start + size_bytes as u64;
        if end > wram as u64 {
            return Err(KernelError::WramOverflow {
                what: format!(
                    "tasklet {}: mem_alloc({size_bytes}) on the heap after {} tasklet stack(s) of {} bytes, globals and earlier allocations",
                    self.id, self.tasklets, core.params.stack_bytes_per_tasklet
                ),
                requested_bytes: size_bytes as u64,
                available_bytes: (wram as u64).saturating_sub(start),
                wram_size_bytes: wram,
            });
        }
        core.heap_next = end;
        Ok(start as u32)
    }

    fn checked<const N: usize>(&self, core: &Core, addr: u32) -> Result<usize, KernelError> {
        if !(addr as usize).is_multiple_of(N) {
            return Err(KernelError::WramMisaligned {
                tasklet: self.id,
                addr,
                size_bytes: N as u32,
            });
        }
        Ok(core.wram_range(self.id, addr as u64, N as u64)?.start)
    }

    /// Loads the 64-bit word at WRAM `addr` (8-byte aligned).
    pub fn wram_read_u64(&self, addr: u32) -> Result<u64, KernelError> {
        let core = self.core.borrow();
        let at = self.checked::<8>(&core, addr)?;
        Ok(u64::from_le_bytes(
            core.wram[at..at + 8].try_into().expect("8 bytes"),
        ))
    }

    /// Stores a 64-bit word at WRAM `addr` (8-byte aligned).
    pub fn wram_write_u64(&self, addr: u32, value: u64) -> Result<(), KernelError> {
        let mut core = self.core.borrow_mut();
        let at = self.checked::<8>(&core, addr)?;
        core.wram[at..at + 8].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    /// Loads the 32-bit word at WRAM `addr` (4-byte aligned).
    pub fn wram_read_u32(&self, addr: u32) -> Result<u32, KernelError> {
        let core = self.core.borrow();
        let at = self.checked::<4>(&core, addr)?;
        Ok(u32::from_le_bytes(
            core.wram[at..at + 4].try_into().expect("4 bytes"),
        ))
    }

    /// Stores a 32-bit word at WRAM `addr` (4-byte aligned).
    pub fn wram_write_u32(&self, addr: u32, value: u32) -> Result<(), KernelError> {
        let mut core = self.core.borrow_mut();
        let at = self.checked::<4>(&core, addr)?;
        core.wram[at..at + 4].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    /// Loads `out.len()` consecutive 64-bit words from WRAM `addr` (8-byte aligned).
    pub fn wram_read_u64s(&self, addr: u32, out: &mut [u64]) -> Result<(), KernelError> {
        let core = self.core.borrow();
        let at = self.checked::<8>(&core, addr)?;
        let range = core.wram_range(self.id, at as u64, out.len() as u64 * 8)?;
        for (w, chunk) in out.iter_mut().zip(core.wram[range].chunks_exact(8)) {
            *w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        Ok(())
    }

    /// Stores consecutive 64-bit words at WRAM `addr` (8-byte aligned).
    pub fn wram_write_u64s(&self, addr: u32, words: &[u64]) -> Result<(), KernelError> {
        let mut core = self.core.borrow_mut();
        let at = self.checked::<8>(&core, addr)?;
        let range = core.wram_range(self.id, at as u64, words.len() as u64 * 8)?;
        for (chunk, w) in core.wram[range].chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        Ok(())
    }

    /// Runs `f` on the WRAM bytes `addr..addr + len` (for kernels that reinterpret bytes).
    /// `f` may call any other method of the tasklet (`cost`, `cycle`, `fail`, ...) except
    /// the WRAM accessors, which return [`KernelError::WramInUse`] while `f` runs: use the
    /// bytes `f` is given instead.
    pub fn with_wram<R>(
        &self,
        addr: u32,
        len: u32,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, KernelError> {
        // The WRAM bytes are moved out of the core for the duration (a Vec header, no copy
        // and no allocation), so no borrow of the core is held while `f` runs. Copying the
        // range out and back would cost a tree node's bytes twice per call on the index
        // kernel's hottest loop; a separate RefCell for WRAM would put a second borrow on
        // every DMA. The loan puts the bytes back when dropped, also if `f` panics.
        let (range, bytes) = {
            let mut core = self.core.borrow_mut();
            let range = core.wram_range(self.id, addr as u64, len as u64)?;
            (range, std::mem::take(&mut core.wram))
        };
        let mut loan = WramLoan {
            core: &self.core,
            bytes,
        };
        Ok(f(&mut loan.bytes[range]))
    }

    /// A failure found by the kernel itself; stops the launch.
    pub fn fail(&self, reason: impl Into<String>) -> KernelError {
        KernelError::Kernel {
            tasklet: self.id,
            reason: reason.into(),
        }
    }
}

/// The WRAM bytes of a core, lent to a [`Tasklet::with_wram`] closure; dropping the loan
/// returns them.
struct WramLoan<'a> {
    core: &'a RefCell<Core>,
    bytes: Vec<u8>,
}

impl Drop for WramLoan<'_> {
    fn drop(&mut self) {
        // A borrow can only be outstanding here while a panic unwinds out of a tasklet
        // method; the launch is lost then, and a second panic would abort.
        if let Ok(mut core) = self.core.try_borrow_mut() {
            core.wram = std::mem::take(&mut self.bytes);
        }
    }
}
