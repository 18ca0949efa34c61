//! The discrete-event core: integer simulated time and an event queue ordered by
//! (time, insertion sequence).
//!
//! # Time scheme
//!
//! Simulated time is never a float. Inside one DPU everything happens on the DPU clock, so a
//! DPU simulation counts [`Cycles`] (`u64`). Everything that spans clock domains (host
//! transfers, launches, host CPU work, the end of a batch of DPUs) is counted in [`Time`],
//! integer **picoseconds** (`u64`, enough for 213 days). UPMEM clocks are not whole
//! picoseconds (one cycle at 350 MHz is 2,857.142... ps), so a cycle count is converted to
//! picoseconds only at a domain boundary, once, by [`Clock::to_time`], which rounds **up**:
//! a result is never available before the hardware could have produced it, and the error is
//! below one picosecond per conversion. Rates given in a machine file as decimals (GB/s,
//! microseconds) are turned into integers when the file is validated (see
//! `docs/machine-model.md`).

mod fluid;
mod queue;
mod ring;
mod slots;
mod time;

pub use fluid::FluidShare;
pub use queue::{EventQueue, QueueFull};
pub use ring::{RING_CAPACITY, SortedRing};
pub use slots::SlotQueue;
pub use time::{CEILING, Clock, Cycles, PS_PER_S, Time};
