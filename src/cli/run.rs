//! `pimdes run`.

use super::{CommonArgs, choose_partitioner, command_line, load_inputs, table, write_stdout};
use crate::error::Error;
use crate::experiments::run::{Progress, RunReport, Silent, run as run_experiment};
use clap::Args;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Partitioner (see `pimdes partition --help`). Defaults to the workload's
    /// `partition.partitioner`.
    #[arg(long, value_name = "NAME")]
    partitioner: Option<String>,
    /// Also write the JSON report to FILE (atomically: all of it or nothing).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// No progress on stderr (it is only shown when stderr is a terminal anyway).
    #[arg(long)]
    quiet: bool,
}

/// Progress on stderr, one line rewritten in place.
struct Stderr;

impl Progress for Stderr {
    fn batch(&mut self, done: u64, total: u64) {
        eprint!("\rpimdes run: batch {}/{total}   ", done + 1);
        let _ = std::io::stderr().flush();
    }

    fn phase(&mut self, what: &str) {
        eprint!("\rpimdes run: {what}...            ");
        if what == "done" {
            eprintln!();
        }
        let _ = std::io::stderr().flush();
    }
}

/// Writes `text` to `path` through a temporary file in the same directory and a rename, so a
/// failure never leaves half a file.
fn write_atomically(path: &Path, text: &str) -> Result<(), Error> {
    let fail = |e: std::io::Error| Error::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

pub fn run(args: RunArgs) -> Result<(), Error> {
    let (machine, workload) = load_inputs(&args.common)?;
    let partitioner = choose_partitioner(&args.partitioner, &workload)?;
    let show_progress = !args.quiet && std::io::stderr().is_terminal();
    let mut progress: Box<dyn Progress> = if show_progress {
        Box::new(Stderr)
    } else {
        Box::new(Silent)
    };
    let report = run_experiment(&machine, &workload, partitioner.as_ref(), progress.as_mut())
        .map_err(|e| e.reproducible(command_line, Some(workload.seed)))?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    let json = report_json(&report);
    if let Some(out) = &args.out {
        write_atomically(out, &json)?;
    }
    if args.common.json {
        write_stdout(&json)
    } else {
        write_stdout(&table::run_report(&report))
    }
}

pub fn report_json(report: &RunReport) -> String {
    let mut s = serde_json::to_string_pretty(report).expect("reports serialise");
    s.push('\n');
    s
}
