//! `pimdes run`.

use super::{CommonArgs, command_line, load_inputs, table, write_stdout};
use crate::config::InputError;
use crate::error::Error;
use crate::experiments::estimate::{Limits, check_run};
use crate::experiments::partition::choose_partitioner;
use crate::experiments::run::{Progress, RunReport, Silent, run_traced};
use crate::experiments::timeline::{
    MAX_TRACE_EVENTS, MAX_TRACED_DPU_BATCHES, TraceDpus, TraceRequest,
};
use crate::machine::Machine;
use crate::output::{OutputTarget, write_all_atomically};
use crate::trace::Trace;
use crate::workload::Workload;
use clap::Args;
use std::io::IsTerminal;
use std::ops::Range;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
#[command(after_help = names_help())]
pub struct RunArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Partitioner (see `pimdes partition --help`). Defaults to the workload's
    /// `partition.partitioner`.
    #[arg(long, value_name = "NAME", value_parser = super::Completes(crate::partition::names), hide_possible_values = true)]
    partitioner: Option<String>,
    /// Also write the JSON report to FILE (atomically: all of it or nothing).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// No progress on stderr (otherwise a line rewritten every second on a terminal, a plain line every 5 s elsewhere).
    #[arg(long)]
    quiet: bool,
    /// Write a timeline of the traced batches to FILE as Chrome trace-event JSON (open it
    /// in ui.perfetto.dev or chrome://tracing), timestamps in simulated microseconds.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// DPUs shown tasklet by tasklet in the trace: `busiest` (the DPU with the longest
    /// kernel of each traced batch) or a comma-separated list of at most 64 DPU numbers; at
    /// most 64 DPU timelines in all (DPUs x traced batches).
    #[arg(long, value_name = "LIST|busiest", requires = "trace")]
    trace_dpus: Option<String>,
    /// Batches in the trace: `A..B` (A up to B, B excluded) or one batch `A`, numbered from
    /// 0: warm-up, measured, then cool-down batches (the progress line counts from 1).
    /// Default: the first measured batch.
    #[arg(long, value_name = "A..B", requires = "trace")]
    trace_batches: Option<String>,
}

/// The names `run` accepts, for `--help`: indexes, partitioners and policies.
fn names_help() -> String {
    use crate::policies::{evaluation_policies, postprocessing_policies, routing_policies};
    let routing: Vec<&str> = routing_policies().iter().map(|p| p.name()).collect();
    let evaluation: Vec<&str> = evaluation_policies().iter().map(|p| p.name()).collect();
    let post: Vec<&str> = postprocessing_policies().iter().map(|p| p.name()).collect();
    format!(
        "Names (set in the workload file or with --set):\n  run.index           {}\n  --partitioner       {}\n  run.routing         {}\n  run.evaluation      {}\n  run.postprocessing  {}\n\nEvery key of the machine and workload files, and what --set takes: docs/file-formats.md.",
        crate::index::names().join(", "),
        crate::partition::names().join(", "),
        routing.join(", "),
        evaluation.join(", "),
        post.join(", ")
    )
}

/// At most this many DPUs in `--trace-dpus`.
const MAX_TRACED_DPUS: usize = 64;

fn trace_dpus(flag: &Option<String>, dpus: u32) -> Result<TraceDpus, InputError> {
    let Some(text) = flag.as_deref() else {
        return Ok(TraceDpus::Busiest);
    };
    if text == "busiest" {
        return Ok(TraceDpus::Busiest);
    }
    let bad = |reason: String| InputError::plain("--trace-dpus", reason);
    let mut list = Vec::new();
    for part in text.split(',') {
        let d: u32 = part.trim().parse().map_err(|_| {
            bad(match part.trim() {
                "busiest" => {
                    "`busiest` stands alone: give `busiest`, or DPU numbers like `0,17`".to_owned()
                }
                _ => format!("`{part}` is not a DPU number; give `busiest` or numbers like `0,17`"),
            })
        })?;
        if d >= dpus {
            return Err(bad(format!(
                "DPU {d} does not exist: the machine has DPUs 0 to {}",
                dpus - 1
            )));
        }
        if !list.contains(&d) {
            list.push(d);
        }
    }
    if list.len() > MAX_TRACED_DPUS {
        return Err(bad(format!("at most {MAX_TRACED_DPUS} DPUs")));
    }
    Ok(TraceDpus::List(list))
}

/// Which of a run's batches are warm-up, measured and cool-down, for a message.
fn batch_order(workload: &Workload) -> String {
    let (w, m) = (workload.warmup_batches, workload.measured_batches);
    let span = |a: u64, n: u64| match n {
        1 => format!("{a}"),
        _ => format!("{a} to {}", a + n - 1),
    };
    let mut order = Vec::new();
    if w > 0 {
        order.push(format!("warm-up {}", span(0, w)));
    }
    order.push(format!("measured {}", span(w, m)));
    let c = workload.cooldown_batches();
    if c > 0 {
        order.push(format!("cool-down {}", span(w + m, c)));
    }
    order.join(", ")
}

fn trace_batches(flag: &Option<String>, workload: &Workload) -> Result<Range<u64>, InputError> {
    let total = workload.total_batches();
    let Some(text) = flag.as_deref() else {
        return Ok(workload.warmup_batches..workload.warmup_batches + 1);
    };
    let bad = |reason: String| InputError::plain("--trace-batches", reason);
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| bad(format!("`{s}` is not a batch number; give `A..B` or `A`")))
    };
    let range = match text.split_once("..") {
        Some((a, b)) => number(a)?..number(b)?,
        None => {
            let a = number(text)?;
            a..a.saturating_add(1)
        }
    };
    let last = total - 1;
    let ranges = format!(
        "give one batch `A` or a range `A..B` of batches A to B - 1, such as `0..{total}` for all"
    );
    // An empty or reversed range first: its start may lie past the end for that reason alone.
    if range.start >= range.end && text.contains("..") {
        return Err(bad(format!(
            "`{text}` holds no batch: `A..B` is batches A to B - 1, such as `0..{total}` for all of the run's batches 0 to {last}"
        )));
    }
    if range.start >= total {
        return Err(bad(format!(
            "`{text}` is not among the run's batches 0 to {last} ({}): {ranges}",
            batch_order(workload)
        )));
    }
    if range.end > total {
        return Err(bad(format!(
            "`{text}` reaches past the run's last batch, {last} ({}): {ranges}",
            batch_order(workload)
        )));
    }
    if !workload.simulates(range.start) {
        return Err(bad(format!(
            "`{text}` holds warm-up batch {}, which this run does not simulate (batches.simulate_warmup = false): trace batches {} to {last}",
            range.start, workload.warmup_batches
        )));
    }
    Ok(range)
}

/// The trace the flags ask for, checked against the machine and the workload.
fn trace_request(
    args: &RunArgs,
    machine: &Machine,
    workload: &Workload,
) -> Result<Option<TraceRequest>, InputError> {
    if args.trace.is_none() {
        return Ok(None);
    }
    let request = TraceRequest {
        batches: trace_batches(&args.trace_batches, workload)?,
        dpus: trace_dpus(&args.trace_dpus, machine.dpus)?,
        max_events: MAX_TRACE_EVENTS,
    };
    // The cap is on tasklet timelines: a run that records none traces any batches.
    if crate::index::records_timelines(workload) && request.recordings() > MAX_TRACED_DPU_BATCHES {
        return Err(InputError::plain(
            "--trace-batches",
            format!(
                "{} x {} is {} DPU timelines; a trace holds at most {MAX_TRACED_DPU_BATCHES}: trace fewer batches (--trace-batches) or DPUs (--trace-dpus)",
                crate::config::counted(request.batches.end - request.batches.start, "batch"),
                crate::config::counted(
                    request.recordings() / (request.batches.end - request.batches.start).max(1),
                    "DPU"
                ),
                request.recordings()
            ),
        ));
    }
    Ok(Some(request))
}

/// The trace's bytes.
fn trace_bytes(path: &Path, trace: &Trace) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::new();
    trace.write_to(&mut bytes).map_err(|e| Error::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(bytes)
}

/// Writes the report (`--out`) and the trace (`--trace`) asked for, both or neither, and
/// says whether the trace was cut.
fn write_outputs(args: &RunArgs, json: &str, timeline: Option<&Trace>) -> Result<(), Error> {
    let trace = match (&args.trace, timeline) {
        (Some(path), Some(t)) => Some((path, t, trace_bytes(path, t)?)),
        _ => None,
    };
    let mut outputs = Vec::new();
    if let Some((path, _, bytes)) = &trace {
        let target = OutputTarget {
            flag: "--trace",
            path,
        };
        outputs.push((target, bytes.as_slice()));
    }
    if let Some(path) = &args.out {
        outputs.push((
            OutputTarget {
                flag: "--out",
                path,
            },
            json.as_bytes(),
        ));
    }
    write_all_atomically(&outputs)?;
    Ok(())
}

pub fn run(args: RunArgs) -> Result<(), Error> {
    let outputs = [
        ("--out", args.out.as_deref()),
        ("--trace", args.trace.as_deref()),
    ];
    super::check_outputs(&outputs, &args.common)?;
    let (machine, workload) = load_inputs(&args.common)?;
    let partitioner = choose_partitioner(&args.partitioner, &workload)?;
    let estimate = check_run(&machine, &workload, &Limits::host())?;
    let mut progress: Box<dyn Progress> = if args.quiet {
        Box::new(Silent)
    } else {
        let terminal = std::io::stderr().is_terminal();
        let mut p = super::progress::StderrProgress::new("pimdes run", terminal);
        let wall = std::time::Duration::try_from_secs_f64(estimate.wall_s);
        p.estimate_from_now(wall.unwrap_or(std::time::Duration::MAX));
        if let Some(note) = estimate.long() {
            p.note_at_first_batch(note);
        }
        Box::new(p)
    };
    let trace = trace_request(&args, &machine, &workload)?;
    let (mut report, timeline) = run_traced(
        &machine,
        &workload,
        partitioner.as_ref(),
        progress.as_mut(),
        trace.as_ref(),
    )
    .map_err(|e| {
        e.attributed(&machine.attribution, Some(&workload.attribution))
            .reproducible(command_line, Some(workload.seed))
    })?;
    // The progress line ends before anything else is printed.
    drop(progress);
    report.command_line = Some(command_line());
    super::print_report_warnings(&machine, &report.warnings);
    let json = report_json(&report);
    write_outputs(&args, &json, timeline.as_ref())?;
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
