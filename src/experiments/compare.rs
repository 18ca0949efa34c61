//! `pimdes compare`: two results of the same configuration, metric by metric, with a
//! tolerance. Results are deterministic, so the default tolerance is zero: any change is a
//! change of the simulator or of its inputs, and CI should hear about it.
//!
//! A result is the JSON object of `pimdes run --json` or `pimdes partition --json`; a sweep
//! directory (see [`super::sweep`]) is compared point by point.

use crate::config::InputError;
use serde_json::Value;
use std::path::Path;

/// Keys of a result that are never compared: `host` describes the simulating machine (wall
/// time, memory), `config` is checked for equality before anything is compared, and
/// `git_commit` names the build (null outside a git checkout), and `schema_version` is
/// checked for equality first.
const IGNORED_KEYS: [&str; 4] = ["host", "config", "git_commit", "schema_version"];

/// How far a metric may move: |new - old| <= atol + rtol * |old|.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

impl Tolerance {
    /// The largest change allowed from `old`.
    pub fn allowed(&self, old: f64) -> f64 {
        self.atol + self.rtol * old.abs()
    }
}

/// A comparable leaf of a result: numbers by tolerance, the rest by equality. Strings
/// (names, the version, warnings) are not compared: they are not measurements, except a
/// refusal's text (a refused point's key and reason, a sensitivity variant's `refused`),
/// which is all it has to say.
#[derive(Debug, Clone, PartialEq)]
pub enum Leaf {
    Number(f64),
    /// A whole number beyond 2^53, which a double would round: compared exactly.
    Integer(i128),
    Bool(bool),
    /// A number that could not be computed (NaN is written as null).
    Null,
    /// A refusal's text (`refused.key`, `refused.reason`, `variants[i].refused`).
    Text(String),
}

impl Leaf {
    /// The leaf as a double, when it is a number.
    fn number(&self) -> Option<f64> {
        match self {
            Leaf::Number(x) => Some(*x),
            Leaf::Integer(i) => Some(*i as f64),
            _ => None,
        }
    }
}

impl std::fmt::Display for Leaf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Exact either way (the shortest digits that read back as `x`); a number past
            // 1e16 or below 1e-6 in the exponent's form, not hundreds of zeros.
            Leaf::Number(x) if *x != 0.0 && !(1e-6..1e16).contains(&x.abs()) => write!(f, "{x:e}"),
            Leaf::Number(x) => write!(f, "{x}"),
            Leaf::Integer(i) => write!(f, "{i}"),
            Leaf::Bool(b) => write!(f, "{b}"),
            Leaf::Null => f.write_str("null"),
            Leaf::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// One metric that moved.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    /// The sweep point's file, when comparing sweeps.
    pub point: Option<String>,
    /// Dotted path, with `[i]` for array elements: `imbalance.queries_per_batch[0]`.
    pub path: String,
    /// What the microbenchmark record or sensitivity variant the path lies in measured
    /// (`op=add tasklets=1 type=int32`), when it lies in one.
    pub item: Option<String>,
    pub old: Leaf,
    /// `None` when NEW lacks the metric.
    pub new: Option<Leaf>,
    /// The largest change allowed, for numbers.
    pub allowed: Option<f64>,
    pub within: bool,
}

impl Moved {
    /// The relative change in percent, when both sides are numbers and old is not zero.
    pub fn change_percent(&self) -> Option<f64> {
        match (&self.old, &self.new) {
            (o, Some(n)) => match (o.number(), n.number()) {
                // Divided before scaling, and by parts when the difference overflows: two
                // finite numbers near f64::MAX change by a finite percentage.
                (Some(o), Some(n)) if o != 0.0 => Some(match n - o {
                    d if d.is_finite() => d / o.abs() * 100.0,
                    _ => (n / o.abs() - o.signum()) * 100.0,
                }),
                _ => None,
            },
            _ => None,
        }
    }
}

/// What a comparison found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    /// Metrics compared (over all points).
    pub compared: usize,
    /// Points compared (1 for two result files).
    pub points: usize,
    /// Metrics that changed at all, in the order of the results.
    pub moved: Vec<Moved>,
    /// Metrics NEW has and BASE lacks (not compared), as `point: path` for sweeps.
    pub added: Vec<String>,
    /// With [`Configs::MayDiffer`]: the configuration keys on which the two sides differ
    /// (once each, over all points of a sweep).
    pub config_changes: Vec<ConfigChange>,
}

/// A configuration key that differs between BASE and NEW, with its value on each side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigChange {
    pub key: String,
    pub old: String,
    pub new: String,
}

/// Whether two results must share their configuration (a regression check: the default)
/// or may differ in it (a what-if: the differences are listed with the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Configs {
    Same,
    MayDiffer,
}

impl Comparison {
    /// Metrics outside their tolerance.
    pub fn regressions(&self) -> usize {
        self.moved.iter().filter(|m| !m.within).count()
    }
}

/// Reads a result file: a JSON object with a `config` and a `version`, as every pimdes
/// result has.
pub fn load_result(path: &Path) -> Result<Value, InputError> {
    let origin = path.display().to_string();
    let text = crate::config::read_json_file(path).map_err(|e| InputError::plain(&origin, e))?;
    // A byte-order mark, which some editors write, is not JSON but says nothing: skipped.
    let json = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let value: Value = serde_json::from_str(json)
        .map_err(|e| InputError::plain(&origin, format!("not JSON: {e}")))?;
    let is_result = value.get("config").is_some_and(Value::is_object)
        && value.get("version").is_some_and(Value::is_string);
    if !is_result {
        return Err(InputError::plain(
            &origin,
            "not a pimdes result: expected the JSON object of `pimdes run`, `partition`, `microbench` or `sensitivity` (`--json`), or a sweep's refused point (with `config` and `version`)",
        ));
    }
    check_schema(&origin, &value)?;
    Ok(value)
}

/// Each kind of result ([`kind`]) and the name of its schema ([`super::schema::NAMES`]).
const SCHEMA_OF_KIND: [(&str, &str); 5] = [
    ("pimdes run", "run"),
    ("pimdes partition", "partition"),
    ("pimdes microbench", "microbench"),
    ("pimdes sensitivity", "sensitivity"),
    ("a refused point", "sweep-refused"),
];

/// The schema of a result's kind.
fn schema_name(result: &Value) -> Option<&'static str> {
    let kind = kind(result);
    SCHEMA_OF_KIND
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, name)| *name)
}

/// Refuses a result of this pimdes's report version that breaks its schema, such as a
/// metric written as a string: it would go uncompared, and a corrupt snapshot pass. Absent
/// keys pass (a field may be added without a new version; `compare` lists a metric only NEW
/// has), and so does the configuration, which is compared as this pimdes reads it
/// ([`measured_config`]). A result of another version is refused by [`check_comparable`].
fn check_schema(origin: &str, result: &Value) -> Result<(), InputError> {
    let current = Value::from(super::REPORT_SCHEMA_VERSION);
    let name = schema_name(result).filter(|_| result.get("schema_version") == Some(&current));
    let Some((name, schema)) = name.and_then(|n| Some((n, report_schema(n)?))) else {
        return Ok(());
    };
    let broken = super::validate::validate_present(schema, result);
    let Some(first) = broken.first() else {
        return Ok(());
    };
    let more = match broken.len() - 1 {
        0 => String::new(),
        n => format!(
            " (and {})",
            crate::config::counted(n as u64, "more violation")
        ),
    };
    Err(InputError::plain(
        origin,
        format!(
            "not a valid result of {}: {first}{more}; the schema is `pimdes schema {name}`",
            kind(result)
        ),
    ))
}

/// The schema of the report called `name` with its `config` left unchecked, made once per
/// process (a sweep checks every point's file).
fn report_schema(name: &str) -> Option<&'static Value> {
    static SCHEMAS: std::sync::OnceLock<Vec<(&str, Value)>> = std::sync::OnceLock::new();
    let all = SCHEMAS.get_or_init(|| {
        let mut all = Vec::new();
        for (_, n) in SCHEMA_OF_KIND {
            let mut schema = super::schema::schema_value(n).expect("a report's schema");
            if let Some(fields) = schema.get_mut("properties").and_then(Value::as_object_mut) {
                fields.insert("config".to_owned(), Value::Bool(true));
            }
            all.push((n, schema));
        }
        all
    });
    all.iter().find(|(n, _)| *n == name).map(|(_, s)| s)
}

/// The first dotted key at which two JSON values differ, if any.
pub fn first_difference(a: &Value, b: &Value, prefix: &str) -> Option<String> {
    let mut found = Vec::new();
    differences(a, b, prefix, 1, &mut found);
    found.pop()
}

/// Pushes onto `out` the dotted keys at which two JSON values differ, in key order, until
/// it holds `limit`; a key one side lacks, or an array of another length, is one
/// difference.
fn differences(a: &Value, b: &Value, prefix: &str, limit: usize, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                if out.len() >= limit {
                    break;
                }
                let path = join(prefix, k);
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => differences(u, v, &path, limit, out),
                    _ => out.push(path),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                if out.len() < limit {
                    differences(u, v, &format!("{prefix}[{i}]"), limit, out);
                }
            }
        }
        (Value::Number(x), Value::Number(y)) if same_number(x, y) => {}
        (Value::Number(_), Value::Number(_)) => out.push(prefix.to_owned()),
        _ if a != b => out.push(prefix.to_owned()),
        _ => {}
    }
}

/// Every configuration key on which two comparable results differ, with its value on each
/// side (`absent` where a side lacks it), for a comparison across configurations.
fn config_changes(base: &Value, new: &Value) -> Vec<ConfigChange> {
    let (a, b) = (measured_config(base), measured_config(new));
    let mut keys = Vec::new();
    differences(&a, &b, "config", usize::MAX, &mut keys);
    keys.into_iter()
        .map(|key| ConfigChange {
            old: config_value(&a, &key),
            new: config_value(&b, &key),
            key,
        })
        .collect()
}

/// The value at a dotted `config.a.b[2]` key of a configuration, as JSON text, or
/// `absent`.
fn config_value(config: &Value, key: &str) -> String {
    (config.pointer(&config_pointer(key))).map_or("absent".to_owned(), |v| v.to_string())
}

/// Whether two JSON numbers have the same value, however written: `350.0` and `350` are
/// one clock (a tool such as jq 1.6 rewrites the one as the other). Two integers compare
/// exactly (seeds use all 63 bits), anything else as doubles.
fn same_number(x: &serde_json::Number, y: &serde_json::Number) -> bool {
    let integer = |n: &serde_json::Number| {
        (n.as_i64().map(i128::from)).or_else(|| n.as_u64().map(i128::from))
    };
    match (integer(x), integer(y)) {
        (Some(a), Some(b)) => a == b,
        _ => x.as_f64() == y.as_f64(),
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Whether the text at `path` says why something was refused: a refused point's
/// `refused.key` and `refused.reason`, a sensitivity variant's `variants[i].refused`.
fn is_refusal(path: &str) -> bool {
    path.starts_with("refused.") || path.ends_with(".refused")
}

/// Every comparable leaf under `value`, with its path, in the value's (sorted) key order.
fn leaves(value: &Value, prefix: &str, out: &mut Vec<(String, Leaf)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if prefix.is_empty() && IGNORED_KEYS.contains(&k.as_str()) {
                    continue;
                }
                leaves(v, &join(prefix, k), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                leaves(v, &format!("{prefix}[{i}]"), out);
            }
        }
        Value::Number(n) => out.push((prefix.to_owned(), number_leaf(n))),
        Value::Bool(b) => out.push((prefix.to_owned(), Leaf::Bool(*b))),
        Value::Null => out.push((prefix.to_owned(), Leaf::Null)),
        Value::String(t) if is_refusal(prefix) => {
            out.push((prefix.to_owned(), Leaf::Text(t.clone())));
        }
        Value::String(_) => {}
    }
}

/// A JSON number as a leaf: a double, or exactly when it is a whole number a double would
/// round (beyond 2^53).
fn number_leaf(n: &serde_json::Number) -> Leaf {
    let whole = (n.as_i64().map(i128::from)).or_else(|| n.as_u64().map(i128::from));
    match whole {
        Some(i) if i.unsigned_abs() > 1 << 53 => Leaf::Integer(i),
        _ => n.as_f64().map_or(Leaf::Null, Leaf::Number),
    }
}

/// Whether `path` is selected by `metric`: the metric itself, or a leaf below it.
fn selected(path: &str, metric: &str) -> bool {
    path.strip_prefix(metric)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

/// Compares one metric; `None` when it did not move at all.
fn compare_leaf(path: &str, old: &Leaf, new: Option<&Leaf>, tol: Tolerance) -> Option<Moved> {
    let (within, allowed) = match (old, new) {
        (_, None) => (false, None),
        (Leaf::Integer(o), Some(Leaf::Integer(n))) => {
            let allowed = tol.allowed(*o as f64);
            if o == n {
                return None;
            }
            ((n - o).unsigned_abs() as f64 <= allowed, Some(allowed))
        }
        (o, Some(n)) if o.number().is_some() && n.number().is_some() => {
            let (o, n) = (o.number().unwrap_or(0.0), n.number().unwrap_or(0.0));
            let allowed = tol.allowed(o);
            if o == n {
                return None;
            }
            ((n - o).abs() <= allowed, Some(allowed))
        }
        (o, Some(n)) if o == n => return None,
        _ => (false, None),
    };
    Some(Moved {
        point: None,
        path: path.to_owned(),
        item: None,
        old: old.clone(),
        new: new.cloned(),
        allowed,
        within,
    })
}

/// The command a result came from, by a key only its report has: `pimdes run` its batch
/// times, `pimdes partition` the largest DPU's pairs, `pimdes microbench` its records,
/// `pimdes sensitivity` its variants.
pub(crate) fn kind(result: &Value) -> &'static str {
    let has = |key: &str| result.get(key).is_some();
    if has("refused") {
        "a refused point"
    } else if has("batch_time_us") {
        "pimdes run"
    } else if has("max_pairs_per_dpu") {
        "pimdes partition"
    } else if has("records") {
        "pimdes microbench"
    } else if has("variants") {
        "pimdes sensitivity"
    } else {
        "an incomplete result (none of `batch_time_us`, `max_pairs_per_dpu`, `records`, `variants`)"
    }
}

/// What a result measured beside its configuration, as (name, value): a microbenchmark's
/// suite, a sensitivity study's factors and the keys of its variants. Records and variants
/// are compared by position, so two results that differ here would pair unrelated ones.
fn measured(result: &Value) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    if let Some(suite) = result.get("suite") {
        out.push(("suite", suite.clone()));
    }
    if let Some(factors) = result.get("factors") {
        out.push(("factors", factors.clone()));
    }
    if let Some(Value::Array(variants)) = result.get("variants") {
        let keys = variants.iter().map(|v| v["key"].clone()).collect();
        out.push(("the variants' keys", Value::Array(keys)));
    }
    out
}

/// A result's configuration as this pimdes reads it, without the keys that change no
/// measured figure. The machine and the workload are read and written again, so a key a
/// later pimdes added with its default compares equal to its absence (a snapshot written
/// before the key existed stays comparable); a part this pimdes cannot read is compared as
/// written. Left out: whether warm-up batches were simulated (docs/run.md), so a run may
/// be compared with one that left them unsimulated, and the free-text descriptions.
fn measured_config(result: &Value) -> Value {
    let mut config = result["config"].clone();
    normalised::<crate::machine::RawMachine>(&mut config, "machine");
    normalised::<crate::workload::spec::RawWorkload>(&mut config, "workload");
    if let Some(batches) = config
        .pointer_mut("/workload/batches")
        .and_then(Value::as_object_mut)
    {
        batches.remove("simulate_warmup");
    }
    for part in ["machine", "workload"] {
        if let Some(map) = config.get_mut(part).and_then(Value::as_object_mut) {
            map.remove("description");
        }
    }
    config
}

/// Replaces `config[part]` by itself read as a `T` and written again (defaults filled in),
/// when it reads as one.
fn normalised<T: serde::de::DeserializeOwned + serde::Serialize>(config: &mut Value, part: &str) {
    let Some(value) = config.get_mut(part) else {
        return;
    };
    let read = serde_json::from_value::<T>(value.clone()).ok();
    if let Some(again) = read.and_then(|t| serde_json::to_value(t).ok()) {
        *value = again;
    }
}

/// Refuses two results that cannot be compared metric by metric: different commands,
/// suites or studies, configurations or report versions (the command first: two commands'
/// configurations differ anyway).
fn check_comparable(
    base: (&str, &Value),
    new: (&str, &Value),
    configs: Configs,
) -> Result<(), InputError> {
    // A point refused on one side only is a change of the point, compared as such; the
    // other side must be a result of a command a sweep runs (the refused point's record
    // does not say which: `run` and `partition` share the configuration's shape).
    let ran = |r: &Value| is_result_of(r, "run") || is_result_of(r, "partition");
    let refused_once = (is_refused(base.1) && ran(new.1)) || (ran(base.1) && is_refused(new.1));
    if kind(base.1) != kind(new.1) && !refused_once {
        return Err(InputError::plain(
            format!("{} and {}", base.0, new.0),
            format!(
                "the results are of different commands ({} and {}); compare results of the same command",
                kind(base.1),
                kind(new.1)
            ),
        ));
    }
    let (a, b) = (measured(base.1), measured(new.1));
    let value = |list: &[(&str, Value)], name: &str| {
        let found = list.iter().find(|(n, _)| *n == name);
        found.map_or(Value::Null, |(_, v)| v.clone())
    };
    let names = a.iter().chain(&b).map(|(name, _)| *name);
    let differ = |n: &&str| first_difference(&value(&a, n), &value(&b, n), "").is_some();
    if let Some(what) = names.into_iter().find(differ) {
        return Err(InputError::plain(
            format!("{} and {}", base.0, new.0),
            format!(
                "the results measured different things ({what}: {} and {}); compare results of the same {}",
                value(&a, what),
                value(&b, what),
                if what == "suite" { "suite" } else { "study" }
            ),
        ));
    }
    let (a, b) = (measured_config(base.1), measured_config(new.1));
    let differs = first_difference(&a, &b, "config");
    if let Some(key) = differs.filter(|_| configs == Configs::Same) {
        return Err(InputError::plain(
            format!("{} and {}", base.0, new.0),
            format!(
                "the results have different configurations (first difference: `{key}`, {} in BASE and {} in NEW); compare results of the same configuration, or pass --what-if to list the differences and what they moved",
                config_value(&a, &key),
                config_value(&b, &key)
            ),
        ));
    }
    if base.1.get("schema_version") != new.1.get("schema_version") {
        return Err(InputError::plain(
            format!("{} and {}", base.0, new.0),
            format!(
                "the results have different report versions (schema_version {} and {}); rerun {} with this pimdes (for a CI snapshot: refresh it) before comparing",
                base.1.get("schema_version").unwrap_or(&Value::Null),
                new.1.get("schema_version").unwrap_or(&Value::Null),
                not_current(base.1, new.1)
            ),
        ));
    }
    Ok(())
}

/// The JSON pointer into a configuration of a dotted `config.a.b[2]` path.
fn config_pointer(key: &str) -> String {
    let rest = key.strip_prefix("config").unwrap_or(key);
    rest.replace(['.', '['], "/").replace(']', "")
}

/// Which of two results of different report versions this pimdes did not write: the one
/// to rerun.
fn not_current(base: &Value, new: &Value) -> &'static str {
    let current = Value::from(super::REPORT_SCHEMA_VERSION);
    let is_current = |r: &Value| r.get("schema_version") == Some(&current);
    match (is_current(base), is_current(new)) {
        (false, true) => "BASE",
        (true, false) => "NEW",
        _ => "both",
    }
}

/// Which `--metric`s BASE's results hold: marks in `held` those `result` holds, and
/// returns every metric path `result` has (for [`check_metrics`]' suggestions).
pub fn mark_metrics(result: &Value, metrics: &[String], held: &mut [bool]) -> Vec<String> {
    let mut all = Vec::new();
    leaves(result, "", &mut all);
    for (m, h) in metrics.iter().zip(held.iter_mut()) {
        *h = *h || all.iter().any(|(p, _)| selected(p, m));
    }
    all.into_iter().map(|(path, _)| path).collect()
}

/// What a `--metric` that nothing holds may have meant: the metrics one level below its
/// longest section that `known` (metric paths) has, else `known`'s top-level sections (an
/// array such as `records` whole), those holding the metric's last name first.
fn metric_suggestions(metric: &str, known: &[String]) -> String {
    const SHOWN: usize = 12;
    let mut prefix = metric;
    let mut found = std::collections::BTreeSet::new();
    while let Some((parent, _)) = prefix.rsplit_once('.') {
        let under = known
            .iter()
            .filter_map(|p| p.strip_prefix(&format!("{parent}.")));
        let next =
            |rest: &str| format!("{parent}.{}", rest.split(['.', '[']).next().unwrap_or(rest));
        found.extend(under.map(next));
        if !found.is_empty() {
            break;
        }
        prefix = parent;
    }
    if found.is_empty() {
        let top = known
            .iter()
            .map(|p| p.split(['.', '[']).next().unwrap_or(p).to_owned());
        found.extend(top);
    }
    if found.is_empty() {
        return "no metric at all".to_owned();
    }
    let name = metric.rsplit('.').next().unwrap_or(metric);
    let mut found: Vec<String> = found.into_iter().collect();
    found.sort_by_key(|p| !p.contains(name));
    let shown: Vec<String> = found.iter().take(SHOWN).map(|p| format!("`{p}`")).collect();
    let more = found.len().saturating_sub(SHOWN);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("{}{tail}", shown.join(", "))
}

/// Refuses a `--metric` that BASE's results did not hold (`held`, from [`mark_metrics`]
/// over one file, or over a sweep's points other than the refused ones, which have no
/// metrics); `base` names them.
pub fn check_metrics(
    base: &str,
    metrics: &[String],
    held: &[bool],
    known: &[String],
) -> Result<(), InputError> {
    match metrics.iter().zip(held).find(|(_, h)| !**h) {
        None => Ok(()),
        Some((m, _)) => Err(InputError::plain(
            format!("--metric {m}"),
            format!(
                "`{m}` is not a metric of {base} (give a dotted path such as `batch_time_us.mean`; it has {})",
                metric_suggestions(m, known)
            ),
        )),
    }
}

/// Whether `result` is a sweep's record of a point the simulator refused.
pub fn is_refused(result: &Value) -> bool {
    kind(result) == "a refused point"
}

/// Whether `result` is a complete result of `pimdes {command}` (`run`, `partition`).
pub fn is_result_of(result: &Value, command: &str) -> bool {
    kind(result).strip_prefix("pimdes ") == Some(command)
}

/// Compares two loaded results metric by metric, their configurations the same or allowed
/// to differ (`configs`). `metrics` (dotted paths) limits the comparison to those metrics
/// and what lies below them; the caller has checked them with [`check_metrics`] (a metric
/// nothing holds would compare nothing).
pub(crate) fn compare_across(
    base: (&str, &Value),
    new: (&str, &Value),
    tol: Tolerance,
    metrics: &[String],
    configs: Configs,
) -> Result<Comparison, InputError> {
    check_comparable(base, new, configs)?;
    let config_changes = match configs {
        Configs::Same => Vec::new(),
        Configs::MayDiffer => config_changes(base.1, new.1),
    };
    if is_refused(base.1) != is_refused(new.1) {
        return Ok(Comparison {
            config_changes,
            ..refused_once(base.1, new.1)
        });
    }
    check_items(base, new)?;
    let mut old = Vec::new();
    leaves(base.1, "", &mut old);
    let mut fresh = Vec::new();
    leaves(new.1, "", &mut fresh);
    let fresh: std::collections::BTreeMap<String, Leaf> = fresh.into_iter().collect();
    let mut out = Comparison {
        points: 1,
        config_changes,
        ..Comparison::default()
    };
    let wanted = |path: &str| metrics.is_empty() || metrics.iter().any(|m| selected(path, m));
    for (path, leaf) in &old {
        if !wanted(path) {
            continue;
        }
        out.compared += 1;
        out.moved.extend(
            compare_leaf(path, leaf, fresh.get(path), tol).map(|m| Moved {
                item: item_of(base.1, path),
                ..m
            }),
        );
    }
    let known: std::collections::BTreeSet<&str> = old.iter().map(|(p, _)| p.as_str()).collect();
    out.added = (fresh.keys())
        .filter(|p| wanted(p) && !known.contains(p.as_str()))
        .cloned()
        .collect();
    Ok(out)
}

/// The arrays whose elements are paired by position: a microbenchmark's records, a
/// sensitivity study's variants.
const ITEMS: [&str; 2] = ["records", "variants"];

/// What an element of [`ITEMS`] measured: a record's text and whole-number fields but its
/// suite and bound (`direction=read size_bytes=8 tasklets=1`), a variant's key and factor.
fn identity(item: &Value) -> String {
    let Some(map) = item.as_object() else {
        return String::new();
    };
    let shown = |(k, v): (&String, &Value)| match v {
        Value::String(t) if k != "suite" && k != "bound" && k != "refused" => {
            Some(format!("{k}={t}"))
        }
        Value::Number(n) if n.is_u64() && k != "value" => Some(format!("{k}={n}")),
        Value::Number(n) if k == "factor" => Some(format!("{k}={n}")),
        _ => None,
    };
    map.iter().filter_map(shown).collect::<Vec<_>>().join(" ")
}

/// The identity of the element of [`ITEMS`] that `path` lies in, if it does.
fn item_of(result: &Value, path: &str) -> Option<String> {
    let (array, rest) = path.split_once('[')?;
    let index: usize = rest.split_once(']')?.0.parse().ok()?;
    ITEMS
        .contains(&array)
        .then(|| identity(&result[array][index]))
}

/// Refuses two results whose records or variants at one position measured different
/// things: they are paired by position, so their numbers would be compared across.
fn check_items(base: (&str, &Value), new: (&str, &Value)) -> Result<(), InputError> {
    for array in ITEMS {
        let (Some(a), Some(b)) = (base.1[array].as_array(), new.1[array].as_array()) else {
            continue;
        };
        let differ = (a.iter().zip(b).enumerate()).find(|(_, (x, y))| identity(x) != identity(y));
        let count = (a.len() != b.len()).then(|| format!("{} and {} {array}", a.len(), b.len()));
        let what = differ
            .map(|(i, (x, y))| format!("{array}[{i}] is `{}` and `{}`", identity(x), identity(y)))
            .or(count);
        if let Some(what) = what {
            return Err(InputError::plain(
                format!("{} and {}", base.0, new.0),
                format!(
                    "the results measured different things ({what}); compare results of the same suite or study"
                ),
            ));
        }
    }
    Ok(())
}

/// The comparison of a point that ran on one side and was refused on the other: one
/// metric, `refused.reason`, moved (the run's side reads "(ran)").
fn refused_once(base: &Value, new: &Value) -> Comparison {
    let reason = |r: &Value| match r.pointer("/refused/reason").and_then(Value::as_str) {
        Some(text) => Leaf::Text(text.to_owned()),
        None => Leaf::Text("(ran)".to_owned()),
    };
    Comparison {
        compared: 1,
        points: 1,
        moved: vec![Moved {
            point: None,
            path: "refused.reason".to_owned(),
            item: None,
            old: reason(base),
            new: Some(reason(new)),
            allowed: None,
            within: false,
        }],
        added: Vec::new(),
        config_changes: Vec::new(),
    }
}

/// Refuses a comparison that compared no metric: BASE held none (a snapshot cut down to its
/// configuration, say), and a CI check that compares nothing would pass.
pub fn check_compared(c: &Comparison, base: &Path) -> Result<(), InputError> {
    if c.compared > 0 {
        return Ok(());
    }
    Err(InputError::plain(
        base.display().to_string(),
        format!(
            "no metric was compared: BASE holds none outside `{}` (NEW has {}); a CI check that compares nothing would pass, so refresh BASE",
            IGNORED_KEYS.join("`, `"),
            crate::config::counted(c.added.len() as u64, "metric")
        ),
    ))
}

/// Compares two result files.
pub fn compare_files(
    base: &Path,
    new: &Path,
    tol: Tolerance,
    metrics: &[String],
    configs: Configs,
) -> Result<Comparison, InputError> {
    let a = load_result(base)?;
    let b = load_result(new)?;
    // A metric is asked of the side that has metrics when BASE is a refused point (which
    // has none), so that the order of the files does not decide the exit code.
    let mut held = vec![false; metrics.len()];
    let asked = if is_refused(&a) && !is_refused(&b) {
        (&b, new)
    } else {
        (&a, base)
    };
    let known = mark_metrics(asked.0, metrics, &mut held);
    check_metrics(&asked.1.display().to_string(), metrics, &held, &known)?;
    let c = compare_across(
        (&base.display().to_string(), &a),
        (&new.display().to_string(), &b),
        tol,
        metrics,
        configs,
    )?;
    check_compared(&c, base)?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compare_results(
        base: (&str, &Value),
        new: (&str, &Value),
        tol: Tolerance,
        metrics: &[String],
    ) -> Result<Comparison, InputError> {
        compare_across(base, new, tol, metrics, Configs::Same)
    }

    #[test]
    fn numbers_print_exactly_and_huge_or_tiny_ones_with_an_exponent() {
        let shown = |x: f64| Leaf::Number(x).to_string();
        assert_eq!(shown(1.7e308), "1.7e308");
        assert_eq!(shown(-2.5e-9), "-2.5e-9");
        assert_eq!(shown(12463.1046717), "12463.1046717");
        assert_eq!(shown(0.0), "0");
        for x in [1.7e308, 3.0e16, 9.999e15, 1.234_567_890_123e-7, 0.1 + 0.2] {
            assert_eq!(shown(x).parse::<f64>().unwrap(), x, "{x} reads back");
        }
    }

    fn result(mean: f64) -> Value {
        json!({"version": "0", "config": {"a": {"b": 1}}, "host": {"wall_s": mean},
               "batch_time_us": {"mean": mean, "stddev": 1.0}, "answers_verified": true,
               "per_batch": [1.0, 2.0], "name": "x"})
    }

    #[test]
    fn a_change_between_huge_numbers_is_a_finite_percentage() {
        let moved = |old: f64, new: f64| Moved {
            point: None,
            path: "x".into(),
            item: None,
            old: Leaf::Number(old),
            new: Some(Leaf::Number(new)),
            allowed: None,
            within: false,
        };
        assert_eq!(moved(1.7e308, 0.0).change_percent(), Some(-100.0));
        assert_eq!(moved(1.7e308, -1.7e308).change_percent(), Some(-200.0));
        assert_eq!(moved(200.0, 202.0).change_percent(), Some(1.0));
        assert_eq!(moved(-4.0, -2.0).change_percent(), Some(50.0));
    }

    #[test]
    fn configurations_differ_by_value_not_by_how_a_number_is_written() {
        let diff = |a: Value, b: Value| first_difference(&a, &b, "config");
        let big = (1u64 << 63) - 1;
        let a = json!({"clock_mhz": 350.0, "seed": big, "skew": [1.0, 1.2]});
        let b = json!({"clock_mhz": 350, "seed": big, "skew": [1, 1.2]});
        assert_eq!(diff(a.clone(), b), None);
        // Integers compare exactly, beyond a double's 53 bits.
        let b = json!({"clock_mhz": 350, "seed": big - 1, "skew": [1.0, 1.2]});
        assert_eq!(diff(a.clone(), b).as_deref(), Some("config.seed"));
        let b = json!({"clock_mhz": 350.5, "seed": big, "skew": [1.0, 1.2]});
        assert_eq!(diff(a.clone(), b).as_deref(), Some("config.clock_mhz"));
        let b = json!({"clock_mhz": "350", "seed": big, "skew": [1.0, 1.2]});
        assert_eq!(diff(a, b).as_deref(), Some("config.clock_mhz"));
    }

    #[test]
    fn tolerance_is_absolute_plus_relative() {
        let t = Tolerance {
            rtol: 0.01,
            atol: 0.5,
        };
        assert_eq!(t.allowed(-100.0), 1.5);
        let moved = compare_results(("a", &result(100.0)), ("b", &result(101.4)), t, &[]).unwrap();
        assert_eq!(moved.compared, 5);
        assert_eq!(moved.moved.len(), 1);
        assert!(moved.moved[0].within);
        let moved = compare_results(("a", &result(100.0)), ("b", &result(101.6)), t, &[]).unwrap();
        assert_eq!(moved.regressions(), 1);
    }

    #[test]
    fn metrics_select_subtrees_and_must_exist() {
        let t = Tolerance {
            rtol: 0.0,
            atol: 0.0,
        };
        let sel =
            |m: &str| compare_results(("a", &result(1.0)), ("b", &result(2.0)), t, &[m.to_owned()]);
        assert_eq!(sel("batch_time_us").unwrap().compared, 2);
        assert_eq!(sel("per_batch").unwrap().compared, 2);
        assert_eq!(sel("batch_time_us.mean").unwrap().regressions(), 1);
        assert_eq!(sel("batch_time").unwrap().compared, 0);
        let held = |m: &str| {
            let metrics = [m.to_owned()];
            let mut held = [false];
            let known = mark_metrics(&result(1.0), &metrics, &mut held);
            check_metrics("a", &metrics, &held, &known)
        };
        assert!(held("batch_time_us.mean").is_ok());
        assert!(held("batch_time").is_err());
    }

    #[test]
    fn commands_must_match() {
        let mut partition = result(1.0);
        let fields = partition.as_object_mut().unwrap();
        fields.remove("batch_time_us");
        let t = Tolerance {
            rtol: 1.0,
            atol: 1.0,
        };
        // A run result that lost its batch times is not taken for a partition result.
        let e = compare_results(("a", &result(1.0)), ("b", &partition), t, &[]).unwrap_err();
        assert!(e.reason.contains("an incomplete result"), "{e}");
        let fields = partition.as_object_mut().unwrap();
        fields.insert("max_pairs_per_dpu".into(), 10.into());
        let e = compare_results(("a", &result(1.0)), ("b", &partition), t, &[]).unwrap_err();
        assert!(
            e.reason.contains("(pimdes run and pimdes partition)"),
            "{e}"
        );
    }

    #[test]
    fn suites_and_studies_must_match() {
        let t = Tolerance {
            rtol: 1.0,
            atol: 1.0,
        };
        let bench = |suite: &str| json!({"config": {}, "suite": suite, "records": [{"x": 1}]});
        let e = compare_results(("a", &bench("mram")), ("b", &bench("arithmetic")), t, &[])
            .unwrap_err();
        assert!(
            e.reason.contains(
                "(suite: \"mram\" and \"arithmetic\"); compare results of the same suite"
            ),
            "{e}"
        );
        let study = |key: &str, factor: f64| {
            json!({"config": {}, "factors": [factor],
                   "variants": [{"key": key, "factor": factor, "batch_time_change_pct": 1.0}]})
        };
        let e = compare_results(("a", &study("ranks", 2.0)), ("b", &study("x", 2.0)), t, &[])
            .unwrap_err();
        assert!(
            e.reason
                .contains("the variants' keys: [\"ranks\"] and [\"x\"]"),
            "{e}"
        );
        let e =
            compare_results(("a", &study("x", 2.0)), ("b", &study("x", 3.0)), t, &[]).unwrap_err();
        assert!(e.reason.contains("(factors: [2.0] and [3.0])"), "{e}");
        assert!(compare_results(("a", &study("x", 2.0)), ("b", &study("x", 2.0)), t, &[]).is_ok());
        // A variant's refusal is compared by its text, as a refused point's.
        let refused = |reason: &str| {
            json!({"config": {}, "factors": [2.0],
                   "variants": [{"key": "x", "factor": 2.0, "refused": reason}]})
        };
        let c = compare_results(("a", &refused("DPU 14")), ("b", &refused("DPU 3")), t, &[]);
        let moved = c.unwrap().moved;
        assert_eq!(moved.len(), 1, "{moved:?}");
        assert_eq!(moved[0].path, "variants[0].refused");
        assert_eq!(moved[0].new, Some(Leaf::Text("DPU 3".into())));
        assert_eq!(moved[0].item.as_deref(), Some("factor=2.0 key=x"));
    }

    #[test]
    fn integers_beyond_doubles_compare_exactly() {
        let t = Tolerance {
            rtol: 0.0,
            atol: 0.0,
        };
        let r = |n: u64| json!({"config": {}, "max_pairs_per_dpu": n});
        let (a, b) = (r(u64::MAX), r(u64::MAX - 1));
        let moved = compare_results(("a", &a), ("b", &b), t, &[]).unwrap().moved;
        assert_eq!(
            moved.len(),
            1,
            "2^64 - 1 and 2^64 - 2 are one double, two integers"
        );
        assert_eq!(moved[0].old, Leaf::Integer(u64::MAX.into()));
        assert!(!moved[0].within);
        let same = compare_results(("a", &a), ("b", &a), t, &[]).unwrap().moved;
        assert!(same.is_empty());
    }

    #[test]
    fn records_are_paired_by_what_they_measured() {
        let t = Tolerance {
            rtol: 0.0,
            atol: 0.0,
        };
        let bench = |op: &str, mops: f64| {
            json!({"config": {}, "suite": "arithmetic", "records": [
                {"suite": "arithmetic", "op": "add", "type": "int32", "tasklets": 1, "mops": 5.0},
                {"suite": "arithmetic", "op": op, "type": "int32", "tasklets": 1, "mops": mops}]})
        };
        // A moved number names the record it lies in.
        let c = compare_results(("a", &bench("sub", 4.0)), ("b", &bench("sub", 4.5)), t, &[]);
        let moved = c.unwrap().moved;
        assert_eq!(moved[0].path, "records[1].mops");
        assert_eq!(
            moved[0].item.as_deref(),
            Some("op=sub tasklets=1 type=int32")
        );
        // Records of other operations at one position are not compared across.
        let e = compare_results(("a", &bench("sub", 4.0)), ("b", &bench("mul", 4.0)), t, &[]);
        let reason = e.unwrap_err().reason;
        let want =
            "records[1] is `op=sub tasklets=1 type=int32` and `op=mul tasklets=1 type=int32`";
        assert!(reason.contains(want), "{reason}");
        let mut short = bench("sub", 4.0);
        short["records"].as_array_mut().unwrap().pop();
        let e = compare_results(("a", &bench("sub", 4.0)), ("b", &short), t, &[]);
        assert!(e.unwrap_err().reason.contains("(2 and 1 records)"));
    }

    #[test]
    fn configurations_must_match() {
        let mut other = result(1.0);
        other["config"]["a"]["c"] = json!(2);
        let t = Tolerance {
            rtol: 1.0,
            atol: 1.0,
        };
        let e = compare_results(("a", &result(1.0)), ("b", &other), t, &[]).unwrap_err();
        assert!(e.reason.contains("`config.a.c`"), "{e}");
    }
}
