//! The simulated machine at system level: the DPUs ([`System`], launched together and
//! simulated in parallel), batch programs ([`program`]) and the executor that runs them on
//! the host, the host's memory system and the ranks ([`exec`]), all on one clock.

mod dpus;
pub mod exec;
pub mod program;

pub use dpus::{BatchReport, System};
