//! Workloads: the workload file, the data set, key distributions and query batches.

pub mod data;
pub mod keys;
pub mod queries;
pub mod spec;

pub use data::DataSet;
pub use queries::{Query, QueryGenerator};
pub use spec::{QueryKind, Workload};
