//! `pimdes compare`: the table of what moved, and an exit code CI can act on.

use super::write_stdout;
use crate::config::InputError;
use crate::error::Error;
use crate::experiments::compare::{Comparison, Configs, Moved, Tolerance, compare_files};
use crate::experiments::sweep::compare_sweeps;
use clap::Args;
use std::path::{Path, PathBuf};

/// Exit code when some metric moved outside its tolerance.
pub const EXIT_REGRESSION: i32 = 1;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The reference: a result file (the JSON of `pimdes run`, `partition`, `microbench` or
    /// `sensitivity`, or a sweep's refused point) or a sweep directory (`pimdes sweep --out`).
    #[arg(value_name = "BASE")]
    base: PathBuf,
    /// The result or sweep directory to check against BASE.
    #[arg(value_name = "NEW")]
    new: PathBuf,
    /// Relative tolerance: a metric may move by rtol * |old| (plus atol).
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    rtol: f64,
    /// Absolute tolerance: a metric may move by atol (plus rtol * |old|).
    #[arg(
        long,
        value_name = "A",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    atol: f64,
    /// Compare only this metric (a dotted path such as `batch_time_us.mean`, or a section such
    /// as `breakdown_us`). Repeatable; default: every number and flag outside `host`,
    /// `config`, `git_commit` and `schema_version`.
    #[arg(long = "metric", value_name = "PATH")]
    metrics: Vec<String>,
    /// Compare results of different configurations (a baseline and a what-if): list the
    /// configuration keys that differ, then the metrics that moved. The exit code still
    /// says whether a metric moved beyond the tolerances.
    #[arg(long)]
    what_if: bool,
}

fn tolerance(args: &CompareArgs) -> Result<Tolerance, InputError> {
    for (flag, v) in [("--rtol", args.rtol), ("--atol", args.atol)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(InputError::plain(
                flag,
                format!("{v} is not a finite number, 0 or more"),
            ));
        }
    }
    Ok(Tolerance {
        rtol: args.rtol,
        atol: args.atol,
    })
}

/// Runs the comparison; `Ok` carries the exit code: 0 when everything is within tolerance,
/// [`EXIT_REGRESSION`] when something is not.
pub fn run(args: CompareArgs) -> Result<i32, Error> {
    let tol = tolerance(&args)?;
    // A missing path is left to the loaders, which say so.
    let both_exist = args.base.exists() && args.new.exists();
    if both_exist && args.base.is_dir() != args.new.is_dir() {
        let (dir, file) = match args.base.is_dir() {
            true => (&args.base, &args.new),
            false => (&args.new, &args.base),
        };
        let reason = format!(
            "{} is a directory and {} is not; compare two results, or two sweep directories",
            dir.display(),
            file.display()
        );
        return Err(InputError::plain(
            format!("{} and {}", args.base.display(), args.new.display()),
            reason,
        )
        .into());
    }
    let configs = match args.what_if {
        true => Configs::MayDiffer,
        false => Configs::Same,
    };
    let comparison = if args.base.is_dir() {
        compare_sweeps(&args.base, &args.new, tol, &args.metrics, configs)?
    } else {
        compare_files(&args.base, &args.new, tol, &args.metrics, configs)?
    };
    write_stdout(&report(&comparison, &args.base, &args.new))?;
    Ok(if comparison.regressions() > 0 {
        EXIT_REGRESSION
    } else {
        0
    })
}

fn number(x: f64) -> String {
    if x == 0.0 || (1e-3..1e9).contains(&x.abs()) {
        format!("{}", (x * 1e6).round() / 1e6)
    } else {
        format!("{x:.6e}")
    }
}

fn row(m: &Moved) -> [String; 6] {
    let mut path = match &m.point {
        Some(p) => format!("{p}: {}", m.path),
        None => m.path.clone(),
    };
    if let Some(item) = &m.item {
        path.push_str(&format!(" ({item})"));
    }
    [
        path,
        m.old.to_string(),
        m.new
            .as_ref()
            .map_or("absent".to_owned(), |n| n.to_string()),
        m.change_percent()
            .map_or("-".to_owned(), |c| format!("{c:+.3}%")),
        m.allowed
            .map_or("exact".to_owned(), |a| format!("±{}", number(a))),
        if m.within { "ok" } else { "OUTSIDE" }.to_owned(),
    ]
}

/// The table of metrics that moved, then one line of totals.
fn report(c: &Comparison, base: &Path, new: &Path) -> String {
    let header = ["metric", "old", "new", "change", "tolerance", ""].map(str::to_owned);
    let rows: Vec<[String; 6]> = std::iter::once(header)
        .chain(c.moved.iter().map(row))
        .collect();
    let mut widths = [0usize; 6];
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    if !c.config_changes.is_empty() {
        out.push_str("configuration (BASE -> NEW):\n");
        for change in &c.config_changes {
            let key = change.key.strip_prefix("config.").unwrap_or(&change.key);
            out.push_str(&format!("  {key}: {} -> {}\n", change.old, change.new));
        }
    }
    if !c.moved.is_empty() {
        for r in &rows {
            let cells: Vec<String> = r
                .iter()
                .zip(widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
    }
    if !c.added.is_empty() {
        const SHOWN: usize = 5;
        let mut names = c.added[..c.added.len().min(SHOWN)].join(", ");
        if c.added.len() > SHOWN {
            names.push_str(&format!(" and {} more", c.added.len() - SHOWN));
        }
        out.push_str(&format!(
            "{} only in NEW, not compared: {names}\n",
            crate::config::counted(c.added.len() as u64, "metric")
        ));
    }
    out.push_str(&format!(
        "{} vs {}: {} over {} compared, {} moved, {} outside tolerance\n",
        base.display(),
        new.display(),
        crate::config::counted(c.compared as u64, "metric"),
        crate::config::counted(c.points as u64, "point"),
        c.moved.len(),
        c.regressions()
    ));
    out
}
