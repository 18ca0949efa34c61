//! `pimdes calibrate host`: the `[host]` constants of the machine pimdes runs on.

use super::{CommonArgs, write_stdout};
use crate::config::InputError;
use crate::error::Error;
use crate::experiments::calibrate;
use crate::experiments::estimate::{Limits, check_calibrate};
use crate::experiments::partition::choose_partitioner;
use crate::experiments::sensitivity::estimated_keys;
use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum CalibrateWhat {
    /// Time the project's own host code (routing, packing, merging; PIM-tree's sort,
    /// deduplication, hashing, bucketing, fill) on this machine, one thread, and print a
    /// `[host]` machine-file fragment with the measured constants and their source. For the
    /// paper's configuration: `--machine machines/paper-1012.toml --workload workloads/paper-raq.toml`.
    Host(HostArgs),
    /// Compare the transfer model with the published host <-> DPU figures it was fitted
    /// on and those held out (docs/validation.md): per figure, the measured and the modelled
    /// time, and the mean absolute error of each set and source.
    Transfer(TransferArgs),
}

#[derive(Debug, Args)]
pub struct TransferArgs {
    /// The machine whose transfer model is compared (default: machines/upmem-2538.toml,
    /// embedded); it is cut or grown to each figure's DPUs in ranks of 64.
    #[arg(long, value_name = "FILE")]
    machine: Option<std::path::PathBuf>,
    /// Override a machine key (machine.KEY=VALUE), e.g. a transfer parameter to try; not the
    /// machine's size (ranks, dpus_per_rank, usable_dpus), which each figure sets.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Print the figures as JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

/// The run's inputs as `pimdes run` takes them, without `--json`: the output is a TOML
/// fragment for a machine file.
#[derive(Debug, Args)]
pub struct HostArgs {
    /// Machine description (TOML), e.g. machines/paper-1012.toml.
    #[arg(long, value_name = "FILE")]
    machine: std::path::PathBuf,
    /// Workload description (TOML), e.g. workloads/paper-raq.toml.
    #[arg(long, value_name = "FILE")]
    workload: std::path::PathBuf,
    /// Override a key: `queries.skew=1.2` (workload) or `machine.ranks=20` (machine).
    /// Repeatable; validated exactly like the files.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// The partitioner whose routing table is timed (default: the workload's).
    #[arg(long, value_name = "NAME", value_parser = super::Completes(crate::partition::names), hide_possible_values = true)]
    partitioner: Option<String>,
    /// Runs of each step; the fastest counts (1 to 100).
    #[arg(long, value_name = "N", default_value_t = 5, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(calibrate::MAX_RUNS)))]
    runs: u32,
}

pub fn run(what: CalibrateWhat) -> Result<(), Error> {
    let args = match what {
        CalibrateWhat::Host(args) => args,
        CalibrateWhat::Transfer(args) => return transfer(args),
    };
    let inputs = CommonArgs {
        machine: args.machine,
        workload: args.workload,
        set: args.set,
        json: false,
    };
    let (machine, workload) = super::load_inputs(&inputs)?;
    let partitioner = choose_partitioner(&args.partitioner, &workload)?;
    check_calibrate(&machine, &workload, &Limits::host())?;
    if workload.batch_size < FEW_QUERIES {
        eprintln!(
            "warning: batch 0 holds {} (queries.batch_size): timings of so few are mostly fixed costs and the clock's resolution, not a per-query cost; time {FEW_QUERIES} or more",
            crate::config::counted(workload.batch_size, "query")
        );
    }
    let origin = inputs.machine.display().to_string();
    let machine_text = std::fs::read_to_string(&inputs.machine)
        .map_err(|e| InputError::plain(&origin, format!("cannot read the file: {e}")))?;
    let measured = calibrate::host(&machine, &workload, partitioner.as_ref(), args.runs)?;
    let threads = calibrate::Threads {
        simulated: machine.host.threads,
        here: std::thread::available_parallelism().map_or(1, usize::from),
        estimated: estimated_keys(&machine_text)
            .iter()
            .any(|(k, _)| k == "host.threads"),
    };
    let text = calibrate::fragment(&cpu_model(), threads, args.runs, &measured);
    write_stdout(&text)
}

/// Below this batch size a timing per query says little (warned of). [est] A judgement, not
/// a measurement: the steps cost tens of nanoseconds a query, so 100,000 queries time a step
/// over milliseconds, far above the clock's resolution and a call's fixed costs; the
/// shipped constants were measured on 1 M.
const FEW_QUERIES: u64 = 100_000;

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

const DEFAULT_MACHINE: &str = include_str!("../../machines/upmem-2538.toml");
const DEFAULT_MACHINE_NAME: &str = "machines/upmem-2538.toml (embedded)";

/// The machine keys the transfer figures read (each with what lies below it): the transfer
/// model's, and the host threads that bound the SDK's transposes.
const TRANSFER_KEYS: [&str; 2] = ["transfer", "host.threads"];
/// The one transfer key the figures never read: the host's polling of an asynchronous run.
const UNREAD_TRANSFER_KEY: &str = "transfer.poll_interval_us";

fn transfer(args: TransferArgs) -> Result<(), Error> {
    use crate::config::Override;
    use crate::machine::Machine;
    use crate::microbench::transfer_data;
    let (mut sets, mut warnings) = (Vec::new(), Vec::new());
    for text in &args.set {
        let o = Override::parse(text)?;
        let Some(key) = o.strip_prefix("machine") else {
            let reason = "calibrate transfer takes machine keys (machine.*)";
            return Err(InputError::key(format!("--set {text}"), &o.key, reason).into());
        };
        // Each figure sets the machine's size itself: the override would be replaced, or
        // would break the cut with an error naming settings the user never gave.
        if ["ranks", "dpus_per_rank", "usable_dpus"].contains(&key) {
            let reason = "calibrate transfer cuts the machine to each figure's DPUs in ranks of 64, as they were measured; its size cannot be set";
            return Err(InputError::key(format!("--set {text}"), key, reason).into());
        }
        let read = |k: &&str| crate::config::covers(k, key) || crate::config::covers(key, k);
        if key == UNREAD_TRANSFER_KEY {
            warnings.push(format!(
                "warning: --set {text} changes nothing here: the figures' transfers are synchronous, and only an asynchronous run polls"
            ));
        } else if !TRANSFER_KEYS.iter().any(read) {
            warnings.push(format!(
                "warning: --set {text} changes nothing here: the transfer figures read only the machine's transfer.* keys (except poll_interval_us) and host.threads"
            ));
        }
        sets.push(o);
    }
    let load = |cut: &[Override]| {
        let all: Vec<Override> = sets.iter().chain(cut).cloned().collect();
        match &args.machine {
            Some(path) => Machine::load(path, &all),
            None => Machine::from_toml_str(DEFAULT_MACHINE_NAME, DEFAULT_MACHINE, &all),
        }
    };
    // The machine as given must load before it is cut (and before any warning on its keys).
    let name = load(&[])?.name;
    for w in warnings {
        eprintln!("{w}");
    }
    let rows = transfer_data::compare(&load)?;
    if args.json {
        let mut text = String::new();
        for r in &rows {
            text.push_str(&serde_json::to_string(r).expect("plain data"));
            text.push('\n');
        }
        return write_stdout(&text);
    }
    let heading = format!(
        "machine {name}: its transfer model against the published host <-> DPU figures (docs/validation.md), cut to each figure's DPUs in ranks of 64\n\n"
    );
    write_stdout(&(heading + &transfer_table(&rows)))
}

/// Every figure beside the model, then the mean absolute error of each set and source.
fn transfer_table(rows: &[crate::microbench::transfer_data::Compared]) -> String {
    use crate::microbench::transfer_data::{Set, mean_abs_error};
    let mut text = String::from(
        "source  set       op                   DPUs   bytes/DPU    measured us     model us    error\n",
    );
    for r in rows {
        let f = &r.figure;
        text.push_str(&format!(
            "{:<7} {:<9} {:<20} {:>5} {:>11} {:>14.1} {:>12.1} {:>+8.1}%\n",
            f.source,
            serde_name(&f.set),
            serde_name(&f.op),
            f.dpus,
            f.size_per_dpu_bytes,
            f.measured_us,
            r.model_us,
            100.0 * r.error
        ));
    }
    text.push_str("\nmean absolute error\n");
    for set in [Set::Fit, Set::HoldOut] {
        let name = serde_name(&set);
        let (mae, n) = mean_abs_error(rows, |r| r.figure.set == set);
        text.push_str(&format!(
            "  {name:<9} all      {:>6.1}% over {n}\n",
            100.0 * mae
        ));
        for source in ["LK", "BPF-T", "BPF-B", "DERF", "PrIM"] {
            let (mae, n) =
                mean_abs_error(rows, |r| r.figure.set == set && r.figure.source == source);
            if n > 0 {
                text.push_str(&format!(
                    "  {name:<9} {source:<8} {:>6.1}% over {n}\n",
                    100.0 * mae
                ));
            }
        }
    }
    text
}

/// The kebab-case name serde gives a unit variant.
fn serde_name<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
