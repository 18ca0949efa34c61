//! `pimdes sensitivity`: each `[est]` parameter of the machine file moved in turn.

use super::{CommonArgs, write_stdout};
use crate::config::{InputError, Override};
use crate::error::Error;
use crate::experiments::estimate::{Limits, check_run, note};
use crate::experiments::partition::choose_partitioner;
use crate::experiments::sensitivity::{Inputs, MAX_FACTORS, Study, Variant, keys_to_move, study};
use clap::Args;
use std::fmt::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SensitivityArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Partitioner (default: the workload's).
    #[arg(long, value_name = "NAME", value_parser = super::Completes(crate::partition::names), hide_possible_values = true)]
    partitioner: Option<String>,
    /// Machine keys to move, comma-separated (`transfer.host_cap_cpu_dpu_gb_per_s,host.threads`).
    /// Default: every numeric key whose comment in the machine file carries `[est]`.
    #[arg(long, value_name = "KEYS", value_delimiter = ',')]
    keys: Vec<String>,
    /// Factors each key is multiplied by, comma-separated, 1 to 8 distinct ones from 0.001 to
    /// 1000 (integers are rounded, at least 1; memory sizes to whole 8-byte words).
    #[arg(long, value_name = "F", value_delimiter = ',', default_value = "0.5,2",
          value_parser = factor, allow_hyphen_values = true)]
    factors: Vec<f64>,
    /// Also write the JSON study to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// No progress on stderr.
    #[arg(long)]
    quiet: bool,
}

pub fn run(args: SensitivityArgs) -> Result<(), Error> {
    super::check_outputs(&[("--out", args.out.as_deref())], &args.common)?;
    check_factors(&args.factors)?;
    let (machine, workload) = super::load_inputs(&args.common)?;
    let partitioner = choose_partitioner(&args.partitioner, &workload)?;
    let origin = args.common.machine.display().to_string();
    let text = std::fs::read_to_string(&args.common.machine)
        .map_err(|e| InputError::plain(&origin, format!("cannot read the file: {e}")))?;
    let keys = keys_to_move(&text, &origin, &args.keys, &machine)?;
    let estimate = check_run(&machine, &workload, &Limits::host())?;
    let runs = 1 + keys.len() * args.factors.len();
    let what = format!("the study ({runs} runs)");
    if let Some(note) = note(&what, estimate.wall_s * runs as f64).filter(|_| !args.quiet) {
        eprintln!("{note}");
    }
    let overrides = args
        .common
        .set
        .iter()
        .map(|s| Override::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let inputs = Inputs {
        machine_path: &args.common.machine,
        workload_path: &args.common.workload,
        overrides: &overrides,
        partitioner: partitioner.as_ref(),
        keys,
        factors: args.factors.clone(),
    };
    let (mut count, quiet) = (0, args.quiet);
    let mut s = study(&inputs, &mut |v: &Variant| {
        count += 1;
        if !quiet {
            eprintln!(
                "pimdes sensitivity: {count} of {} variants: {} x {}",
                runs - 1,
                v.key,
                v.factor
            );
        }
    })?;
    // The baseline's warnings go to stderr, as a run's do; each variant's are in the table.
    super::print_report_warnings(&machine, &s.warnings);
    s.command_line = Some(super::command_line());
    let json = super::json_with_out(&s, args.out.as_deref())?;
    write_stdout(&if args.common.json { json } else { table(&s) })
}

/// A factor, spaces around it allowed (`--factors "0.5, 2"`).
fn factor(text: &str) -> Result<f64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))
}

fn check_factors(factors: &[f64]) -> Result<(), InputError> {
    let bad = |reason: &str| InputError::plain("--factors", reason);
    if factors.is_empty() || factors.len() > MAX_FACTORS {
        return Err(bad(&format!("give 1 to {MAX_FACTORS} factors")));
    }
    if factors
        .iter()
        .any(|f| !(f.is_finite() && *f >= 0.001 && *f <= 1000.0))
    {
        return Err(bad("each factor must be a number from 0.001 to 1000"));
    }
    if let Some(f) = crate::config::first_repeated(factors) {
        return Err(bad(&format!("{f} is listed twice")));
    }
    Ok(())
}

/// The table's first line: what the study moves the parameters of (the partitioner only for
/// B+-Forest: PIM-tree places its data by hash).
fn heading(s: &Study) -> String {
    let (m, w) = (&s.config.machine, &s.config.workload);
    let partitioner = match w.run.index.as_str() {
        crate::index::pimtree::NAME => String::new(),
        _ => format!(", partitioner {}", w.partition.partitioner),
    };
    format!(
        "sensitivity of {} on {}{partitioner}: {} pairs, {} {} queries per batch, skew {}, seed {}\n",
        w.run.index,
        m.name,
        w.data.pairs,
        w.queries.batch_size,
        w.queries.kind.name(),
        crate::config::shown(w.queries.skew),
        w.seed
    )
}

/// The keys the run reads (none of `not_read`) whose every variant that ran moved the
/// batch time by less than 0.05%, in the study's order.
fn keys_without_effect<'s>(s: &'s Study, not_read: &[&str]) -> Vec<&'s str> {
    let mut out: Vec<&str> = Vec::new();
    for v in &s.variants {
        let key = v.key.as_str();
        if out.contains(&key) || not_read.contains(&key) {
            continue;
        }
        let ran = s.variants.iter().filter(|w| w.key == key);
        let changes: Vec<f64> = ran.filter_map(|w| w.batch_time_change_pct).collect();
        if !changes.is_empty() && changes.iter().all(|c| c.abs() < 0.05) {
            out.push(key);
        }
    }
    out
}

/// The keys whose values below and above the file's both moved the batch time the same
/// way, each by 0.05% or more: no trend to read off the two, in the study's order.
fn keys_not_monotonic(variants: &[Variant]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for v in variants {
        let key = v.key.as_str();
        if out.contains(&key) {
            continue;
        }
        let ran: Vec<(f64, f64)> = (variants.iter().filter(|w| w.key == key))
            .filter_map(|w| Some((w.factor, w.batch_time_change_pct?)))
            .collect();
        let sides = ran.iter().any(|r| r.0 < 1.0) && ran.iter().any(|r| r.0 > 1.0);
        let moved = ran.iter().all(|r| r.1.abs() >= 0.05);
        let same = ran.iter().all(|r| r.1 > 0.0) || ran.iter().all(|r| r.1 < 0.0);
        if sides && moved && same {
            out.push(key);
        }
    }
    out
}

/// The lines after the table: refused variants, keys the run does not read, other
/// warnings, keys without effect or without a trend, factors that changed nothing.
fn notes(s: &Study, t: &mut String) {
    let mut not_read: Vec<&str> = Vec::new();
    for v in &s.variants {
        if let Some(reason) = &v.refused {
            let _ = writeln!(t, "refused: {} = {}: {reason}", v.key, v.value);
        }
        for w in &v.warnings {
            // A key the run does not read is said once, not once per factor.
            match w.split_once(crate::index::NOT_READ) {
                Some((_, why)) if !not_read.contains(&v.key.as_str()) => {
                    not_read.push(&v.key);
                    let _ = writeln!(t, "not read: {}: {why}", v.key);
                }
                Some(_) => {}
                None => {
                    let _ = writeln!(t, "warning: {} = {}: {w}", v.key, v.value);
                }
            }
        }
    }
    for key in keys_without_effect(s, &not_read) {
        let _ = writeln!(
            t,
            "no effect: {key}: the run reads it, but no factor moved the batch time by 0.05% (its share of the batch is that small, or the batch is bound elsewhere: by another stage or, with async launches, by the host's polling interval)"
        );
    }
    for key in keys_not_monotonic(&s.variants) {
        let _ = writeln!(
            t,
            "not monotonic: {key}: a smaller and a larger value both moved the batch time the same way, so the two give no trend (the file's value is a best or worst point, or, for changes under 1%, the schedule's discreteness: tasklets and DMAs falling into another order); other --factors tell which"
        );
    }
    if s.variants.iter().any(|v| v.unchanged) {
        t.push_str("unchanged: the factor left the value as it was (integers round, and stay at least 1); not run\n");
    }
}

/// The study as a table: one line per key, the keys that move the batch time most first.
fn table(s: &Study) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for v in &s.variants {
        if !keys.contains(&v.key.as_str()) {
            keys.push(&v.key);
        }
    }
    fn of<'s>(s: &'s Study, key: &'s str) -> impl Iterator<Item = &'s Variant> {
        s.variants.iter().filter(move |v| v.key == key)
    }
    let largest = |key: &str| {
        of(s, key)
            .filter_map(|v| v.batch_time_change_pct)
            .fold(0.0f64, |m, c| m.max(c.abs()))
    };
    keys.sort_by(|a, b| largest(b).total_cmp(&largest(a)));
    let mut t = heading(s);
    let _ = write!(
        t,
        "baseline batch time {:.1} us; change of the batch time with each parameter times",
        s.baseline.batch_time_us
    );
    for f in &s.factors {
        let _ = write!(t, " {f}");
    }
    t.push('\n');
    for key in keys {
        let _ = write!(t, "  {key:<45}");
        for v in of(s, key) {
            let cell = match (v.batch_time_change_pct, v.unchanged) {
                // A change that rounds to zero is shown without a sign.
                (Some(c), _) if c.abs() < 0.05 => format!("{} -> 0.0%", v.value),
                (Some(c), _) => format!("{} -> {c:+.1}%", v.value),
                (None, true) => format!("{} -> unchanged", v.value),
                (None, false) => format!("{} -> refused", v.value),
            };
            let _ = write!(t, " {cell:>22}");
        }
        t.push('\n');
    }
    notes(s, &mut t);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(key: &str, factor: f64, change: Option<f64>) -> Variant {
        Variant {
            key: key.to_owned(),
            base_value: toml::Value::Integer(10),
            factor,
            value: toml::Value::Float(10.0 * factor),
            figures: None,
            batch_time_change_pct: change,
            refused: None,
            unchanged: change.is_none(),
            warnings: Vec::new(),
        }
    }

    /// Same-signed moves on both sides are named; a trend, a move under 0.05%, one side
    /// only (the other refused or unchanged), or two factors on one side are not.
    #[test]
    fn only_keys_moved_the_same_way_on_both_sides_are_not_monotonic() {
        let variants = [
            variant("both_down", 0.5, Some(-0.2)),
            variant("both_down", 2.0, Some(-0.1)),
            variant("optimum", 0.5, Some(3.0)),
            variant("optimum", 2.0, Some(1.0)),
            variant("trend", 0.5, Some(-4.1)),
            variant("trend", 2.0, Some(9.1)),
            variant("tiny", 0.5, Some(-0.2)),
            variant("tiny", 2.0, Some(-0.01)),
            variant("one_side", 0.5, Some(-0.2)),
            variant("one_side", 2.0, None),
            variant("below", 0.25, Some(-0.2)),
            variant("below", 0.5, Some(-0.1)),
        ];
        assert_eq!(keys_not_monotonic(&variants), ["both_down", "optimum"]);
    }
}
