//! Experiments: what the CLI's commands run, built from the workload, the partitioners and
//! the machine, each returning a typed report.

pub mod catalog;
pub mod compare;
pub mod estimate;
pub mod partition;
pub mod plot;
pub mod run;
pub mod soak;
pub mod sweep;
pub mod timeline;
