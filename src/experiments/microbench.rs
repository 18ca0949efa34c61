//! `pimdes microbench --json`: the records of a suite with what made them (the effective
//! machine, the version and commit, the command line), in the reports' common envelope.

use crate::machine::{Machine, RawMachine};
use crate::microbench::{PrimSweep, Record, TransferSweep};
use serde::Serialize;

/// The effective configuration of a microbenchmark: the machine, and the sweeps of the
/// suites that ran and take one (transfer, the PrIM applications).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MachineConfig {
    pub machine: RawMachine,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer: Option<TransferSweep>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prim: Option<PrimSweep>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MicrobenchReport {
    /// The version of the report's format (`crate::experiments::REPORT_SCHEMA_VERSION`): a
    /// reader compares it before reading the rest.
    pub schema_version: u32,
    /// The suite asked for (`all` for every suite; each record names its own).
    pub suite: String,
    pub records: Vec<Record>,
    pub version: &'static str,
    /// The git commit of the build (`-dirty` with uncommitted changes); null outside git.
    pub git_commit: Option<&'static str>,
    /// The command line that made the report, when a command made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_line: Option<String>,
    /// FNV-1a (64 bits, hex) of `config` as compact JSON with sorted keys: equal exactly
    /// when the configurations are.
    pub config_fnv1a64: String,
    pub config: MachineConfig,
    /// What the user should know, also printed on stderr: the machine's warnings (a
    /// `--set` that resized it but kept its DPU count) and published PrIM runs skipped.
    pub warnings: Vec<String>,
}

impl MicrobenchReport {
    pub fn new(
        suite: &str,
        machine: &Machine,
        (transfer, prim): (Option<TransferSweep>, Option<PrimSweep>),
        records: Vec<Record>,
    ) -> MicrobenchReport {
        let config = MachineConfig {
            machine: machine.raw.clone(),
            transfer,
            prim,
        };
        MicrobenchReport {
            schema_version: super::REPORT_SCHEMA_VERSION,
            suite: suite.to_owned(),
            records,
            version: super::VERSION,
            git_commit: super::git_commit(),
            command_line: None,
            config_fnv1a64: super::config_fnv1a64(&config),
            config,
            warnings: machine.timing_warnings(),
        }
    }
}
