//! The command line: a thin layer that parses flags, loads files, calls an experiment and
//! prints its report. Errors are printed as ``error: <origin>: key `<key>`: <reason>`` and
//! turned into exit codes (2 for bad input, 3 for a simulator bug; see [`crate::error`]).

mod calibrate;
mod compare;
mod defaults;
mod experiment;
mod microbench;
mod output;
mod progress;
mod run;
mod sensitivity;
mod soak;
mod sweep;
mod table;

use crate::config::Override;
use crate::error::{Error, InputError};
use crate::experiments::estimate::{Limits, check_partition, long_note};
use crate::experiments::partition::{choose_partitioner, run_partition};
use crate::machine::Machine;
use crate::output::OutputTarget;
use crate::workload::Workload;
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};

pub(crate) use output::write_stdout;

#[derive(Debug, Parser)]
#[command(
    name = "pimdes",
    version = env!("PIMDES_VERSION_LINE"),
    about = "A discrete-event simulator of UPMEM processing-in-memory hardware, with B+-Forest, its partitioners and PIM-tree on it (without a command: the main job, about 13 s)",
    long_about = "A discrete-event simulator of UPMEM processing-in-memory hardware, with B+-Forest, its partitioners and PIM-tree on it.\n\nWithout a command, pimdes runs its main job on embedded defaults: a scaled-down comparison of the partitioners of the B+-Forest paper (about 13 s and 1.2 GiB)."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Partition the data with one partitioner and report data and query imbalance (no timing).
    Partition(PartitionArgs),
    /// Run an index (B+-Forest or PIM-tree) end to end on the machine model: initialisation, warm-up and measured
    /// batches, every answer checked against a plain reference.
    Run(run::RunArgs),
    /// Run a PrIM microbenchmark suite on the machine model: arithmetic, mram, stream, transfer,
    /// a PrIM application (prim-va, prim-red, prim-bs, prim-gemv, prim-sel, prim-uni), apps
    /// (every application) or all.
    Microbench(microbench::MicrobenchArgs),
    /// Compare two results (or two sweep directories) metric by metric: exit 0 when every
    /// metric is within tolerance, 1 when one is not, 2 on bad input or different
    /// configurations (unless --what-if).
    Compare(compare::CompareArgs),
    /// Run every point of a manifest (a grid of `--set` values) into one result file each,
    /// resumably; list the points as command lines; or collect them into CSV and JSON Lines.
    #[command(
        override_usage = "pimdes sweep MANIFEST --out DIR [--jobs N] [--quiet]\n       \
                                pimdes sweep MANIFEST --out DIR --list\n       \
                                pimdes sweep MANIFEST --out DIR --point I [--quiet]\n       \
                                pimdes sweep --collect DIR"
    )]
    Sweep(sweep::SweepArgs),
    /// Draw random small machines, workloads, indexes, partitioners, evaluation policies and
    /// protocols from a seed, run each on one thread and on two, and check the invariants
    /// (answers verified, breakdown adds up, times ordered, IF >= 1, same report).
    Soak(soak::SoakArgs),
    /// Run one of the paper's experiments (its sweeps at a scale), collect the results and
    /// draw its figures (SVG and Markdown); `--list` names them.
    #[command(
        override_usage = "pimdes experiment NAME [--scale quick|paper] [--out DIR] [--jobs N] [--quiet]\n       \
                                pimdes experiment --list"
    )]
    Experiment(experiment::ExperimentArgs),
    /// Redraw a sweep's figures from its collected results (no simulation).
    Plot(experiment::PlotArgs),
    /// Move every `[est]` parameter of the machine file in turn (by default to half and to
    /// twice its value), rerun, and report how the batch time moves: which unknowns matter.
    Sensitivity(sensitivity::SensitivityArgs),
    /// Calibration: measure the host-CPU costs of the indexes' own host code on this machine
    /// (`calibrate host`, a `[host]` machine-file fragment), or check the transfer model
    /// against the published figures it was fitted on and those held out (`calibrate transfer`).
    Calibrate {
        #[command(subcommand)]
        what: calibrate::CalibrateWhat,
    },
    /// Print the JSON Schema of a JSON output (run, partition, microbench, sensitivity, a
    /// sweep's index or refused point) or of an input file (machine, workload); docs/schema/
    /// holds the same files.
    Schema {
        /// The output or input whose schema is printed.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(crate::experiments::schema::NAMES))]
        name: String,
    },
    /// Print a shell completion script: `pimdes completions bash > ~/.local/share/bash-completion/completions/pimdes`.
    Completions {
        /// The shell (bash and zsh complete names too; see the README).
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
struct CommonArgs {
    /// Machine description (TOML), e.g. machines/paper-1012.toml.
    #[arg(long, value_name = "FILE")]
    machine: PathBuf,
    /// Workload description (TOML), e.g. workloads/paper-raq.toml.
    #[arg(long, value_name = "FILE")]
    workload: PathBuf,
    /// Override a key: `queries.skew=1.2` (workload) or `machine.ranks=20` (machine).
    /// Repeatable; validated exactly like the files.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct PartitionArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Partitioner: data-balanced, query-balanced, ccp-capped, qdd-greedy or qdd-double-scan.
    /// Defaults to the workload's `partition.partitioner`.
    #[arg(long, value_name = "NAME", value_parser = Completes(crate::partition::names), hide_possible_values = true)]
    partitioner: Option<String>,
    /// Also write the JSON report to FILE (atomically: all of it or nothing).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// No progress on stderr (otherwise, for a long run, the elapsed time every second on a terminal, every 5 s elsewhere).
    #[arg(long)]
    quiet: bool,
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_failure(e),
    };
    if let Err(e) = crate::output::remove_temporaries_on_signals() {
        eprintln!(
            "warning: cannot install signal handlers ({e}); a temporary output file may be left if pimdes is interrupted"
        );
    }
    // `compare` has its own success codes (1: something moved beyond the tolerance).
    let mut compare_code = 0;
    let result = output::check_stdout_open().and_then(|()| match cli.command {
        None => defaults::run_default(),
        Some(Command::Partition(args)) => partition_command(args),
        Some(Command::Microbench(args)) => microbench::run(args),
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Sweep(args)) => sweep::run(args),
        Some(Command::Soak(args)) => soak::run(args),
        Some(Command::Experiment(args)) => experiment::experiment(args),
        Some(Command::Plot(args)) => experiment::plot(args),
        Some(Command::Completions { shell }) => completions(shell),
        Some(Command::Calibrate { what }) => calibrate::run(what),
        Some(Command::Sensitivity(args)) => sensitivity::run(args),
        Some(Command::Schema { name }) => {
            write_stdout(&crate::experiments::schema::schema(&name).expect("clap checked the name"))
        }
        Some(Command::Compare(args)) => compare::run(args).map(|code| compare_code = code),
    });
    match result {
        Ok(()) => compare_code,
        Err(e) => {
            // Commands that know their workload's seed attach it; this is the fallback.
            let e = e.reproducible(command_line, None);
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// The exit code of a command line clap did not run: help and the version go to stdout,
/// checked as every report is (a stdout that cannot take them exits 1, not 0, as
/// docs/reliability.md says); clap prints the rest itself, usage errors exiting 2.
fn parse_failure(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return match e.print() {
            Ok(()) => e.exit_code(),
            Err(_) => 1,
        };
    }
    // Styled on a terminal, as clap prints it (unless NO_COLOR is set); plain into a file
    // or pipe.
    let styled = std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let text = match styled {
        true => e.render().ansi().to_string(),
        false => e.render().to_string(),
    };
    match output::check_stdout_open().and_then(|()| write_stdout(&text)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// The completion script of `shell` on stdout.
fn completions(shell: clap_complete::Shell) -> Result<(), Error> {
    let mut script = Vec::new();
    clap_complete::generate(
        shell,
        &mut <Cli as clap::CommandFactory>::command(),
        "pimdes",
        &mut script,
    );
    write_stdout(&String::from_utf8_lossy(&script))
}

/// This process's command line as a shell command that reproduces it: `pimdes` and the
/// arguments, each quoted when a POSIX shell would split or expand it.
pub(crate) fn command_line() -> String {
    let args = std::env::args_os()
        .skip(1)
        .map(|a| shell_quote(&a.to_string_lossy()));
    std::iter::once("pimdes".to_owned())
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` as is when it is made of characters a shell leaves alone, else single-quoted.
fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A workload error about a `--set` key the workload lacks but the machine has (the user
/// left out `machine.`), with the key as it should be written.
fn machine_key_hint(mut e: InputError, overrides: &[Override]) -> InputError {
    let Some(key) = e.key.clone() else {
        return e;
    };
    let unprefixed = overrides.iter().any(|o| o.key == key);
    let machine_key = crate::config::has_key::<crate::machine::RawMachine>(&key);
    if unprefixed && machine_key && e.reason.starts_with("unknown field") {
        e.reason = format!(
            "{}; `{key}` is a machine key: did you mean `machine.{key}`?",
            e.reason
        );
    }
    e
}

fn load_inputs(common: &CommonArgs) -> Result<(Machine, Workload), Error> {
    let overrides = common
        .set
        .iter()
        .map(|s| Override::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let machine = Machine::load(&common.machine, &overrides)?;
    let workload = (Workload::load(&common.workload, &overrides))
        .map_err(|e| machine_key_hint(e, &overrides))?;
    // Printed now, so that they come with an error of the command too; `run` and
    // `partition` reports also carry them (see `print_report_warnings`).
    for w in machine.warnings() {
        eprintln!("warning: {w}");
    }
    Ok((machine, workload))
}

/// Prints a report's warnings on stderr, but the machine's, printed when it was loaded.
fn print_report_warnings(machine: &Machine, warnings: &[String]) {
    let printed = machine.warnings();
    for w in warnings.iter().filter(|w| !printed.contains(w)) {
        eprintln!("warning: {w}");
    }
}

/// The output files the flags name (`("--out", path)`, ...), checked against each other
/// and the input files before anything is loaded or simulated.
fn check_outputs(
    outputs: &[(&'static str, Option<&Path>)],
    common: &CommonArgs,
) -> Result<(), InputError> {
    let inputs = [
        ("--machine", common.machine.as_path()),
        ("--workload", common.workload.as_path()),
    ];
    check_output_paths(outputs, &inputs)
}

/// Checks the output flags given (`None`: flag absent) against each other and the input
/// files, before anything runs.
fn check_output_paths(
    outputs: &[(&'static str, Option<&Path>)],
    inputs: &[(&'static str, &Path)],
) -> Result<(), InputError> {
    let targets: Vec<OutputTarget> = outputs
        .iter()
        .filter_map(|&(flag, path)| path.map(|path| OutputTarget { flag, path }))
        .collect();
    crate::output::check_targets(&targets, inputs)
}

/// A report as pretty JSON with a final newline, also written to `--out FILE` when given
/// (atomically).
fn json_with_out(report: &impl serde::Serialize, out: Option<&Path>) -> Result<String, Error> {
    let mut json = serde_json::to_string_pretty(report).expect("reports serialise");
    json.push('\n');
    if let Some(path) = out {
        let target = OutputTarget {
            flag: "--out",
            path,
        };
        crate::output::write_atomically(target, json.as_bytes())?;
    }
    Ok(json)
}

fn partition_command(args: PartitionArgs) -> Result<(), Error> {
    check_outputs(&[("--out", args.out.as_deref())], &args.common)?;
    let (machine, workload) = load_inputs(&args.common)?;
    let partitioner = choose_partitioner(&args.partitioner, &workload)?;
    let wall_s = check_partition(&machine, &workload, &Limits::host())?;
    if let Some(note) = long_note(wall_s).filter(|_| !args.quiet) {
        eprintln!("{note}");
    }
    let progress = progress::heartbeat("pimdes partition", args.quiet, "partitioning");
    let mut report = run_partition(&machine, &workload, partitioner.as_ref())?;
    report.command_line = Some(command_line());
    drop(progress);
    print_report_warnings(&machine, &report.warnings);
    let json = json_with_out(&report, args.out.as_deref())?;
    let text = if args.common.json {
        json
    } else {
        table::partition_report(&report)
    };
    write_stdout(&text)
}

/// A value parser that takes any text (the command checks it and names the choices in its
/// own error) but gives shell completions the names it accepts: `pimdes microbench <TAB>`.
/// Pair it with `hide_possible_values = true`, so `--help` keeps its own words.
#[derive(Clone)]
struct Completes(fn() -> Vec<&'static str>);

impl clap::builder::TypedValueParser for Completes {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let names = (self.0)().into_iter();
        Some(Box::new(names.map(clap::builder::PossibleValue::new)))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn quotes_only_words_a_shell_would_change() {
        assert_eq!(
            shell_quote("machine.dpu.wram_size_bytes=64"),
            "machine.dpu.wram_size_bytes=64"
        );
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(
            shell_quote("queries.kind=\"get\""),
            "'queries.kind=\"get\"'"
        );
    }
}
