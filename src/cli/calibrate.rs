//! `pimdes calibrate host`: the `[host]` constants of the machine pimdes runs on.

use super::{CommonArgs, write_stdout};
use crate::error::Error;
use crate::experiments::calibrate;
use crate::experiments::estimate::{Limits, check_partition};
use crate::experiments::partition::choose_partitioner;
use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum CalibrateWhat {
    /// Time the project's own host code (routing, packing, merging; PIM-tree's sort,
    /// deduplication, hashing, bucketing, fill) on this machine, one thread, and print a
    /// `[host]` machine-file fragment with the measured constants and their source. For the
    /// paper's configuration: `--machine machines/paper-1012.toml --workload workloads/paper-raq.toml`.
    Host(HostArgs),
}

#[derive(Debug, Args)]
pub struct HostArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The partitioner whose routing table is timed (default: the workload's).
    #[arg(long, value_name = "NAME")]
    partitioner: Option<String>,
    /// Runs of each step; the fastest counts (1 to 100).
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(calibrate::MAX_RUNS)))]
    runs: u32,
}

pub fn run(what: CalibrateWhat) -> Result<(), Error> {
    let CalibrateWhat::Host(args) = what;
    let (machine, workload) = super::load_inputs(&args.common)?;
    let partitioner = choose_partitioner(&args.partitioner, &workload)?;
    check_partition(&machine, &workload, &Limits::host())?;
    let measured = calibrate::host(&machine, &workload, partitioner.as_ref(), args.runs)?;
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let text = calibrate::fragment(&cpu_model(), threads, args.runs, &measured);
    write_stdout(&text)
}

/// The first `model name` of /proc/cpuinfo, or `unknown`.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
