//! pimdes: a discrete-event simulator of UPMEM processing-in-memory hardware, with
//! B+-Forest and its query density-driven partitioner on top.
//!
//! Dependency direction: `cli` -> `experiments`, `microbench` -> `error` -> `index` ->
//! `policies` -> `forest`, `pimtree`, `partition`, `workload` -> `host` -> `system` -> `dpu` ->
//! `trace`, `machine` -> `engine`, `config`, `rng`, `meter` (progress of long phases),
//! `cache` (host cache hints); `output` (safe output files) serves `cli` and `experiments`.
//! `error` is the commands' top-level error (exit codes); input errors live in `config`. The
//! system executor runs the batch programs that indexes write; `host` prices single
//! operations on it.

pub mod cache;
pub mod cli;
pub mod config;
pub mod dpu;
pub mod engine;
pub mod error;
pub mod experiments;
pub mod forest;
pub mod host;
pub mod index;
pub mod machine;
pub mod meter;
pub mod microbench;
pub mod output;
pub mod partition;
pub mod pimtree;
pub mod policies;
pub mod rng;
pub mod system;
pub mod trace;
pub mod workload;
