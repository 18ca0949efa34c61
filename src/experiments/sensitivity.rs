//! `pimdes sensitivity`: which unknowns matter. Every machine-file parameter tagged `[est]`
//! (an estimate, by the machine files' own convention) is moved by each factor (by default
//! -50 % and +100 %), one at a time, and the run is repeated; the report says how the batch
//! time and its breakdown move against the unchanged run. A variant the simulator refuses
//! (a value out of range, data that no longer fits) is reported with its reason.

use crate::config::{InputError, Override};
use crate::error::Error;
use crate::experiments::estimate::{Limits, check_run};
use crate::experiments::run::{Named, RunReport, Silent, run};
use crate::machine::Machine;
use crate::partition::Partitioner;
use crate::workload::Workload;
use serde::Serialize;
use std::path::Path;

/// Most parameters and most factors one study takes.
pub const MAX_KEYS: usize = 200;
pub const MAX_FACTORS: usize = 8;

/// The dotted keys of `text` (a machine file) whose line carries an `[est]` tag in its
/// comment, table by table (a nested table's keys within its parent's), with their numeric
/// values; keys of other types are skipped, and so
/// is a file that is not TOML (its loading reports that). Read with `toml_edit`, which keeps
/// each value's comment: any key TOML allows (quoted, dotted) is found.
pub fn estimated_keys(text: &str) -> Vec<(String, toml::Value)> {
    let mut keys = Vec::new();
    if let Ok(doc) = text.parse::<toml_edit::DocumentMut>() {
        visit_table(doc.as_table(), "", &mut keys);
    }
    keys
}

/// Adds the `[est]` keys of `table` (at dotted `path`) and of its sub-tables to `keys`.
fn visit_table(table: &toml_edit::Table, path: &str, keys: &mut Vec<(String, toml::Value)>) {
    for (key, item) in table.iter() {
        let dotted = match path {
            "" => key.to_owned(),
            _ => format!("{path}.{key}"),
        };
        match item {
            toml_edit::Item::Table(sub) => visit_table(sub, &dotted, keys),
            toml_edit::Item::Value(value) => visit_value(value, dotted, keys),
            _ => {}
        }
    }
}

/// Adds `value` at `dotted` to `keys` when it is a number whose comment is tagged `[est]`,
/// or the `[est]` keys of an inline table.
fn visit_value(value: &toml_edit::Value, dotted: String, keys: &mut Vec<(String, toml::Value)>) {
    let tagged = || {
        let comment = value.decor().suffix().and_then(|s| s.as_str());
        comment.is_some_and(|c| c.contains("[est]"))
    };
    match value {
        toml_edit::Value::Integer(i) if tagged() => {
            keys.push((dotted, toml::Value::Integer(*i.value())));
        }
        toml_edit::Value::Float(x) if tagged() => {
            keys.push((dotted, toml::Value::Float(*x.value())))
        }
        toml_edit::Value::InlineTable(t) => {
            for (key, v) in t.iter() {
                visit_value(v, format!("{dotted}.{key}"), keys);
            }
        }
        _ => {}
    }
}

/// How a machine key's value moves: in whole steps of an integer, in steps of a decimal
/// (the per-byte cycle costs, in thousandths), or freely.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Integer(u64),
    Decimal(f64),
    Free,
}

impl Step {
    fn of(key: &str, integer: bool) -> Step {
        match (integer, crate::machine::decimal_step(key)) {
            (true, _) => Step::Integer(crate::machine::integer_step(key)),
            (false, Some(step)) => Step::Decimal(step),
            (false, None) => Step::Free,
        }
    }
}

/// `value` times `factor`, as the machine's field takes it: rounded to a whole number of
/// its step and at least one step, or (a free number) to 9 significant digits, so that
/// 350 x 0.001 is 0.35 and not 0.35000000000000003 (a file may write `1` for 1.0).
fn scaled(value: &toml::Value, factor: f64, step: Step) -> toml::Value {
    let x = value
        .as_float()
        .or_else(|| value.as_integer().map(|i| i as f64))
        .unwrap_or(0.0)
        * factor;
    // The factor 1, and a zero (which no factor moves), leave the value as it was.
    if factor == 1.0 || x == 0.0 {
        return value.clone();
    }
    match step {
        Step::Integer(s) => {
            let s = s as f64;
            toml::Value::Integer(((x / s).round().max(1.0) * s) as i64)
        }
        Step::Decimal(s) => toml::Value::Float(((x / s).round().max(1.0) * s * 1e9).round() / 1e9),
        Step::Free => toml::Value::Float(format!("{x:.8e}").parse().unwrap_or(x)),
    }
}

/// The effective machine's value at dotted `key` (after every `--set`), and whether the field
/// is an integer (integer fields serialise as integers, the others as floats); `None` when
/// the key is not a numeric field.
fn effective_value(machine: &Machine, key: &str) -> Option<(toml::Value, bool)> {
    let raw = serde_json::to_value(&machine.raw).unwrap_or_default();
    let v = key.split('.').try_fold(&raw, |v, k| v.get(k))?;
    match (v.as_i64(), v.as_f64()) {
        (Some(i), _) => Some((toml::Value::Integer(i), true)),
        (None, Some(x)) => Some((toml::Value::Float(x), false)),
        _ => None,
    }
}

/// The figures of one run that the study compares.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Figures {
    pub batch_time_us: f64,
    pub breakdown_us: Named,
}

impl Figures {
    fn of(report: &RunReport) -> Figures {
        Figures {
            batch_time_us: report.batch_time_us.mean,
            breakdown_us: report.breakdown_us.clone(),
        }
    }
}

/// One parameter moved by one factor.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Variant {
    pub key: String,
    /// The effective value (a number).
    #[schemars(with = "f64")]
    pub base_value: toml::Value,
    pub factor: f64,
    /// The value this variant ran with (a number).
    #[schemars(with = "f64")]
    pub value: toml::Value,
    /// `None` when the variant did not run: the simulator refused it (see `refused`), or
    /// its value is the base value (see `unchanged`).
    pub figures: Option<Figures>,
    /// Batch time against the baseline, in percent.
    pub batch_time_change_pct: Option<f64>,
    pub refused: Option<String>,
    /// The factor left the value where it was (an integer field rounds, and is at least 1),
    /// so there was nothing to run: no figures, rather than a change of 0 that was never
    /// measured.
    pub unchanged: bool,
    /// What the variant's machine warns of (such as `ranks` moved while the file's
    /// `usable_dpus` stays, so the DPU count does not move with it), and what its run warns
    /// of beyond the baseline's warnings (such as a key the run does not read: `--set
    /// machine.KEY=V changes nothing in this run: ...`).
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Study {
    /// The version of the report's format (`crate::experiments::REPORT_SCHEMA_VERSION`): a
    /// reader compares it before reading the rest.
    pub schema_version: u32,
    pub baseline: Figures,
    /// What the baseline run warns of (every variant shares its inputs, so these hold for
    /// them too, as far as the moved key leaves them).
    pub warnings: Vec<String>,
    pub factors: Vec<f64>,
    /// Every variant, parameters in file order, factors in the given order.
    pub variants: Vec<Variant>,
    pub version: &'static str,
    /// The git commit of the build (`-dirty` with uncommitted changes); null outside git.
    pub git_commit: Option<&'static str>,
    /// The command line that made the study, when a command made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_line: Option<String>,
    /// FNV-1a (64 bits, hex) of `config` as compact JSON with sorted keys: equal exactly
    /// when the configurations are.
    pub config_fnv1a64: String,
    /// The unchanged run's effective configuration.
    pub config: crate::experiments::partition::EffectiveConfig,
}

/// What a study runs: the inputs as the user gave them, and the keys to move.
pub struct Inputs<'a> {
    pub machine_path: &'a Path,
    pub workload_path: &'a Path,
    /// The user's own `--set` overrides, applied to every run.
    pub overrides: &'a [Override],
    pub partitioner: &'a dyn Partitioner,
    /// Dotted machine keys (see [`keys_to_move`]).
    pub keys: Vec<String>,
    pub factors: Vec<f64>,
}

/// Runs the baseline, then every key at every factor (one at a time). `done` hears of each
/// variant as it finishes.
pub fn study(inputs: &Inputs, done: &mut dyn FnMut(&Variant)) -> Result<Study, Error> {
    let (machine, workload) = load(inputs, None)?;
    // Every key resolved before anything runs, so a wrong key fails at once.
    let keys = inputs
        .keys
        .iter()
        .map(|key| {
            let (value, integer) = effective_value(&machine, key).ok_or_else(|| {
                InputError::key(
                    inputs.machine_path.display().to_string(),
                    key,
                    "not a numeric key of the machine",
                )
            })?;
            Ok((key, value, integer))
        })
        .collect::<Result<Vec<_>, InputError>>()?;
    let base = run(&machine, &workload, inputs.partitioner, &mut Silent)?;
    let baseline = Figures::of(&base);
    let mut variants = Vec::new();
    for (key, base_value, integer) in &keys {
        for &factor in &inputs.factors {
            let value = scaled(base_value, factor, Step::of(key, *integer));
            let variant = if value == *base_value {
                unchanged(key, base_value, factor)
            } else {
                run_variant(inputs, &base, (key, base_value), factor, value)?
            };
            done(&variant);
            variants.push(variant);
        }
    }
    let config = crate::experiments::partition::EffectiveConfig::of(
        &machine,
        &workload,
        inputs.partitioner.name(),
    );
    Ok(Study {
        schema_version: super::REPORT_SCHEMA_VERSION,
        baseline,
        warnings: base.warnings.clone(),
        factors: inputs.factors.clone(),
        variants,
        version: super::VERSION,
        git_commit: super::git_commit(),
        command_line: None,
        config_fnv1a64: super::config_fnv1a64(&config),
        config,
    })
}

/// The variant of `key` whose factor leaves it at `base_value`: not run.
fn unchanged(key: &str, base_value: &toml::Value, factor: f64) -> Variant {
    Variant {
        key: key.to_owned(),
        base_value: base_value.clone(),
        factor,
        value: base_value.clone(),
        figures: None,
        batch_time_change_pct: None,
        refused: None,
        unchanged: true,
        warnings: Vec::new(),
    }
}

/// Runs `key` at `value` (its base times `factor`); a refusal of the simulator is the
/// variant's result, a host limit or a simulator bug stops the study.
fn run_variant(
    inputs: &Inputs,
    base: &RunReport,
    (key, base_value): (&str, &toml::Value),
    factor: f64,
    value: toml::Value,
) -> Result<Variant, Error> {
    let mut warnings = Vec::new();
    // Said by the baseline, or below in the variant's own words.
    let mut known = base.warnings.clone();
    let outcome = match load(inputs, Some((key, &value))) {
        Ok((m, w)) => {
            // A study moves one key at a time, so the advice to set usable_dpus beside it
            // cannot be taken here: say what the variant then measures instead.
            let resized = m.resized_keeping_usable();
            warnings = (resized.iter())
                .map(|w| format!("{w}; this variant measures the same DPUs over other ranks"))
                .collect();
            // The run repeats the machine's warnings (the resize with its advice).
            known.extend(m.warnings());
            // This host's limits stop the study (another host could run it).
            check_run(&m, &w, &Limits::host())?;
            // A kernel's machine limit is named by the key that set it, as `run` names it.
            run(&m, &w, inputs.partitioner, &mut Silent)
                .map_err(|e| e.attributed(&m.attribution, Some(&w.attribution)))
        }
        Err(e) => Err(e),
    };
    let (figures, refused) = match outcome {
        Ok(report) => {
            let new = report.warnings.iter().filter(|w| !known.contains(w));
            warnings.extend(new.cloned());
            (Some(Figures::of(&report)), None)
        }
        Err(e) if e.exit_code() == crate::error::EXIT_BAD_INPUT => (None, Some(e.to_string())),
        Err(e) => return Err(e),
    };
    let batch_time_change_pct = figures
        .as_ref()
        .map(|f| 100.0 * (f.batch_time_us / base.batch_time_us.mean - 1.0));
    Ok(Variant {
        key: key.to_owned(),
        base_value: base_value.clone(),
        factor,
        value,
        figures,
        batch_time_change_pct,
        refused,
        unchanged: false,
        warnings,
    })
}

/// The machine and workload with the user's overrides, and `moved` (machine key, value)
/// after them.
fn load(
    inputs: &Inputs,
    moved: Option<(&str, &toml::Value)>,
) -> Result<(Machine, Workload), Error> {
    let mut overrides = inputs.overrides.to_vec();
    if let Some((key, value)) = moved {
        overrides.push(Override {
            key: format!("machine.{key}"),
            text: format!("machine.{key}={value}"),
            value: value.clone(),
        });
    }
    let machine = Machine::load(inputs.machine_path, &overrides)?;
    let workload = Workload::load(inputs.workload_path, &overrides)?;
    Ok((machine, workload))
}

/// The keys to move: `given` (dotted machine keys, each a number of the machine after its
/// `--set`s, so a key the file leaves to its default or to an override counts), or else every
/// `[est]` key of `text` (the machine file, already loaded as `machine`, so valid TOML).
/// `origin` names the file in errors.
pub fn keys_to_move(
    text: &str,
    origin: &str,
    given: &[String],
    machine: &Machine,
) -> Result<Vec<String>, InputError> {
    // `machine.` as `--set` writes it is taken too; so are spaces around the commas.
    let typed = given;
    let given: Vec<String> = typed
        .iter()
        .map(|k| {
            let k = k.trim();
            k.strip_prefix("machine.").unwrap_or(k).to_owned()
        })
        .collect();
    let keys: Vec<String> = if given.is_empty() {
        estimated_keys(text).into_iter().map(|(k, _)| k).collect()
    } else {
        if given.iter().any(String::is_empty) {
            return Err(InputError::plain("--keys", "an empty key in the list"));
        }
        if let Some(key) = crate::config::first_repeated(&given) {
            let reason = format!("{key} is listed twice");
            return Err(InputError::plain("--keys", reason));
        }
        for (key, typed) in given.iter().zip(typed) {
            if effective_value(machine, key).is_none() {
                let reason = format!(
                    "`{}` is not a number of the machine {origin} (give dotted keys such as transfer.host_cap_cpu_dpu_gb_per_s)",
                    typed.trim()
                );
                return Err(InputError::plain("--keys", reason));
            }
        }
        given.clone()
    };
    if keys.is_empty() {
        return Err(InputError::plain(
            origin,
            "no parameter is tagged [est] in its comment; name the parameters with --keys",
        ));
    }
    if keys.len() > MAX_KEYS {
        let (blamed, remedy) = match given.is_empty() {
            true => (origin, "name fewer with --keys"),
            false => ("--keys", "name fewer"),
        };
        let reason = format!(
            "{} parameters; at most {MAX_KEYS} per study ({remedy})",
            keys.len()
        );
        return Err(InputError::plain(blamed, reason));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_are_the_numeric_keys_tagged_est() {
        let text = "# [est] in a header comment is not a key\nranks = 2 # [est] scaled\nname = \"x\" # [est] not a number\n[dpu]\nclock_mhz = 350 # [meas] measured\n[dpu.dma]\nfixed = 16   # [est] busy\n[host]\npack = 0.25 # [est]\n";
        let keys: Vec<String> = estimated_keys(text).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["ranks", "dpu.dma.fixed", "host.pack"]);
        // Any key TOML allows: quoted, dotted, in a header with a comment.
        let text = "[host] # the host\n\"threads\" = 64 # [est] assumed\ndma.fixed = 3 # [est]\n";
        let keys: Vec<String> = estimated_keys(text).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["host.threads", "host.dma.fixed"]);
    }

    #[test]
    fn scaling_follows_the_fields_type_and_integers_stay_positive() {
        use toml::Value::{Float, Integer};
        let one = Step::Integer(1);
        assert_eq!(scaled(&Integer(3), 0.5, one), Integer(2));
        assert_eq!(scaled(&Integer(1), 0.1, one), Integer(1));
        assert_eq!(scaled(&Integer(1), 0.5, Step::Free), Float(0.5));
        assert_eq!(scaled(&Float(0.25), 2.0, Step::Free), Float(0.5));
        // No float noise: 350 x 0.001 is 0.35 (it came out 0.35000000000000003).
        assert_eq!(scaled(&Float(350.0), 0.001, Step::Free), Float(0.35));
        assert_eq!(scaled(&Float(7.0), 0.999999, Step::Free), Float(6.999993));
        // The per-byte cycle costs move in thousandths, at least one: 0.5 x 0.001 would
        // be refused as 0.0005; 0.5 x 0.3 is 0.15.
        let dma = Step::of("dma.latency_cycles_per_byte", false);
        assert_eq!(dma, Step::Decimal(0.001));
        assert_eq!(scaled(&Float(0.5), 0.001, dma), Float(0.001));
        assert_eq!(scaled(&Float(0.5), 0.3, dma), Float(0.15));
        // A zero stays (no factor moves it), and the factor 1 leaves a full-precision value
        // exact, so both read as unchanged rather than as a run of a rounded value.
        assert_eq!(scaled(&Float(0.0), 2.0, dma), Float(0.0));
        let fine = Float(12.345678901234);
        assert_eq!(scaled(&fine, 1.0, Step::Free), fine);
        // Memory sizes stay whole words: 0.3 x 64 MiB is 20,132,659.2, 20,132,656 in words.
        let mram = Step::of("dpu.mram_size_bytes", true);
        assert_eq!(mram, Step::Integer(8));
        assert_eq!(scaled(&Integer(64 << 20), 0.3, mram), Integer(20_132_656));
        assert_eq!(scaled(&Integer(8), 0.1, mram), Integer(8));
        let machine = crate::machine::Machine::from_toml_str(
            "paper-2rank.toml",
            include_str!("../../machines/paper-2rank.toml"),
            &[],
        )
        .unwrap();
        let value = |k: &str| effective_value(&machine, k);
        assert_eq!(
            value("dma.occupancy_fixed_cycles"),
            Some((Integer(16), true))
        );
        assert_eq!(value("host.scan_ns_per_element"), Some((Float(1.0), false)));
        assert_eq!(
            value("transfer.host_cap_cpu_dpu_gb_per_s"),
            Some((Float(7.0), false))
        );
        assert_eq!(value("transfer.host_cap_gb_per_s"), None);
        assert_eq!(value("host.cpu"), None);
    }
}
