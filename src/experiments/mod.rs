//! Experiments: what the CLI's commands run, built from the workload, the partitioners and
//! the machine, each returning a typed report.

/// The version of the JSON reports' shape (`schema_version`, first in every `run` and
/// `partition` report): raised when a field is renamed, removed or changes its type or
/// meaning; new fields alone keep it. Scripts check it before reading.
///
/// 2: `pimdes partition`'s `measured_batches` is the count, as in `pimdes run` (it was the
/// list of batch indices, now `measured_batch_indices`); `pimdes microbench --json` is one
/// object with `records` (it was an array of records).
///
/// 3: the `apps` records of `pimdes microbench` became the `prim-*` suites' records.
///
/// 4: `pimdes run`'s `launches_per_batch` (B+-Forest) is the most launches a measured batch
/// took, each batch taking the fewest its own shares fit in (it was the run's bound, taken
/// by every batch).
pub const REPORT_SCHEMA_VERSION: u32 = 4;

/// pimdes's version, the `version` of every report.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the binary was built from, with `-dirty` when tracked files differed from
/// it (see `build.rs`); `None` outside a git checkout. The `git_commit` of every report.
pub fn git_commit() -> Option<&'static str> {
    let commit = env!("PIMDES_GIT_COMMIT");
    (!commit.is_empty()).then_some(commit)
}

/// FNV-1a (64 bits, hex) of an effective configuration as compact JSON with sorted keys:
/// the `config_fnv1a64` of reports and sweep indexes, equal exactly when the configurations
/// are.
pub fn config_fnv1a64(config: &impl serde::Serialize) -> String {
    let value = serde_json::to_value(config).unwrap_or_default();
    sweep::config_hash(&value)
}

pub mod calibrate;
pub mod catalog;
pub mod compare;
pub mod estimate;
pub mod microbench;
pub mod partition;
pub mod plot;
pub mod run;
pub mod schema;
pub mod sensitivity;
pub mod soak;
pub mod sweep;
pub mod timeline;
pub mod validate;
