//! `pimdes experiment NAME` (one of the paper's experiments: sweeps, collection, figures)
//! and `pimdes plot DIR` (redraw a sweep's figures from its collected results).

use super::sweep::{check_dir_path, check_sweep, sweep_whole};
use super::write_stdout;
use crate::config::InputError;
use crate::error::Error;
use crate::experiments::catalog::{self, EXPERIMENTS, SCALES};
use crate::experiments::plot::plot_dir;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// The experiment (see --list).
    #[arg(value_name = "NAME", required_unless_present = "list", value_parser = super::Completes(|| EXPERIMENTS.iter().map(|e| e.name).collect()), hide_possible_values = true)]
    name: Option<String>,
    /// quick (seconds each) or paper (the paper's configuration: minutes to hours each, and about 10 GiB; docs/experiments.md).
    #[arg(long, default_value = "quick", value_parser = super::Completes(|| SCALES.to_vec()), hide_possible_values = true)]
    scale: String,
    /// Directory of the results and figures (one sweep directory per part). Default:
    /// results/NAME-SCALE.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Points run at once, at most (threads; a point waits while the points running leave
    /// it too little host memory); the results do not depend on it.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    jobs: usize,
    /// List the experiments and their manifests.
    #[arg(long, conflicts_with_all = ["name", "out", "scale", "jobs", "quiet"])]
    list: bool,
    /// No line per point on stderr (warnings and errors still print).
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A sweep directory whose results are collected (`results.jsonl`).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// The catalog with each manifest's path, those not found marked (and counted at the end).
fn list() -> String {
    let root = catalog::root();
    let mut text = String::new();
    let mut missing = 0;
    for e in &EXPERIMENTS {
        text.push_str(&format!("{:<20} {}\n", e.name, e.about));
        for scale in SCALES {
            for part in e.parts {
                let path = catalog::manifest(&root, e, scale, part);
                let mark = if path.is_file() { "" } else { "   (missing)" };
                missing += usize::from(!mark.is_empty());
                text.push_str(&format!("{:<20}   {}{mark}\n", "", path.display()));
            }
        }
    }
    if missing > 0 {
        text.push_str(&format!(
            "{missing} manifest(s) missing under {}: run pimdes from its checkout's root\n",
            root.display()
        ));
    }
    text
}

pub fn experiment(args: ExperimentArgs) -> Result<(), Error> {
    if args.list {
        return write_stdout(&list());
    }
    let name = args.name.as_deref().unwrap_or_default();
    let Some(e) = catalog::find(name) else {
        let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
        let reason = format!(
            "unknown experiment `{name}`; expected one of: {}",
            names.join(", ")
        );
        return Err(InputError::plain("NAME", reason).into());
    };
    if !SCALES.contains(&args.scale.as_str()) {
        let reason = format!("`{}` is not one of: {}", args.scale, SCALES.join(", "));
        return Err(InputError::plain("--scale", reason).into());
    }
    if args.jobs == 0 {
        return Err(InputError::plain("--jobs", "must be at least 1").into());
    }
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from(format!("results/{}-{}", e.name, args.scale)));
    // The parts' directories go under it: checked as `sweep` checks its own.
    check_dir_path(&out)?;
    let root = catalog::root();
    // Every part's manifest and directory first: a bad --out for a later part must not
    // show after the earlier parts ran and wrote their results.
    for part in e.parts {
        check_sweep(
            &catalog::manifest(&root, e, &args.scale, part),
            &out.join(part),
        )?;
    }
    let mut summary = String::new();
    for part in e.parts {
        let manifest = catalog::manifest(&root, e, &args.scale, part);
        summary.push_str(&sweep_whole(
            &manifest,
            &out.join(part),
            args.jobs,
            args.quiet,
        )?);
    }
    write_stdout(&summary)
}

pub fn plot(args: PlotArgs) -> Result<(), Error> {
    let written = plot_dir(&args.dir)?;
    let text: String = written.iter().map(|figure| format!("{figure}\n")).collect();
    write_stdout(&text)
}
