//! The sweep manifest: a strict TOML file naming the inputs, the command and the axes, and
//! its expansion into points. Errors name the manifest and the key, like machine and
//! workload files.

use crate::config::{InputError, Override, Source, read_toml_file};
use crate::experiments::plot::{PlotSpec, check_specs};
use crate::rng;
use serde::Deserialize;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

/// The command every point runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SweepCommand {
    Run,
    Partition,
}

impl SweepCommand {
    pub fn name(self) -> &'static str {
        match self {
            SweepCommand::Run => "run",
            SweepCommand::Partition => "partition",
        }
    }
}

fn one() -> NonZeroU32 {
    NonZeroU32::MIN
}

/// The manifest as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawManifest {
    #[serde(default)]
    pub description: String,
    /// Machine file, relative to the manifest's directory.
    pub machine: String,
    /// Workload file, relative to the manifest's directory.
    pub workload: String,
    pub command: SweepCommand,
    /// `--partitioner` of every point (else the workload's `partition.partitioner`).
    pub partitioner: Option<String>,
    /// Runs of each point with derived seeds (see [`repetition_seed`]).
    #[serde(default = "one")]
    pub repetitions: NonZeroU32,
    /// `--set` overrides of every point.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub set: toml::Table,
    /// Axes of the cartesian product: `--set` key = list of values.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub grid: toml::Table,
    /// Lists of equal length that move together, as one axis.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub zip: toml::Table,
    /// Grid axes of consecutive integers: `--set` key = [first, last] or [first, last, step].
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub ranges: toml::Table,
    /// Figures `pimdes plot` draws from the collected results (`[[plot]]` tables).
    #[serde(default)]
    pub plot: Vec<PlotSpec>,
    /// Record a point the simulator refuses (its data does not fit in MRAM, a kernel
    /// exceeds the machine) as a refused result and go on, instead of stopping the sweep.
    #[serde(default)]
    pub record_refused: bool,
}

/// One point of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub index: usize,
    /// The result file's name in the sweep directory, made of the parameters.
    pub file: String,
    /// The point's parameters in axis order: grid axes, zipped keys, then `repetition` and
    /// `seed` when there are repetitions.
    pub params: Vec<(String, toml::Value)>,
    /// Every `--set` of the point: the manifest's `set`, then the parameters.
    pub sets: Vec<String>,
}

/// A manifest, checked and expanded.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub origin: String,
    /// The manifest's file and the directory holding it (`get-vs-pim-tree/quick-run.toml`),
    /// from its absolute path: how a sweep directory tells its manifest from another of
    /// the same shape.
    pub name: String,
    pub machine: PathBuf,
    pub workload: PathBuf,
    pub command: SweepCommand,
    pub partitioner: Option<String>,
    pub param_names: Vec<String>,
    pub points: Vec<Point>,
    pub plots: Vec<PlotSpec>,
    /// See [`RawManifest::record_refused`].
    pub record_refused: bool,
}

/// The seed of repetition `k` of a workload whose seed is `seed`: repetition 0 keeps the
/// seed, so its point equals a plain run; the others draw from the rng module's
/// `Repetition` stream number `k`, keeping 63 bits so the seed stays a TOML integer.
pub fn repetition_seed(seed: u64, k: u32) -> u64 {
    if k == 0 {
        return seed;
    }
    let mut stream = rng::stream(seed, rng::Purpose::Repetition, u64::from(k));
    rand::Rng::next_u64(&mut stream) >> 1
}

/// Dotted keys and values of a table, nested tables flattened (`[grid] queries.skew = [..]`
/// and `[grid] "queries.skew" = [..]` are the same axis).
fn flatten(table: &toml::Table, prefix: &str, out: &mut Vec<(String, toml::Value)>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => flatten(t, &key, out),
            other => out.push((key, other.clone())),
        }
    }
}

/// `value` as a `--set` value: bare when it reads back as the same string, else TOML.
pub fn set_value(key: &str, value: &toml::Value) -> String {
    if let toml::Value::String(s) = value {
        let bare = Override::parse(&format!("{key}={s}"));
        if bare.is_ok_and(|o| o.value == *value && !s.contains(char::is_whitespace)) {
            return s.clone();
        }
    }
    value.to_string()
}

/// A value in a file name: its text with anything but letters, digits, `.`, `+` and `-`
/// replaced by `_`.
fn name_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".+-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn value_text(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Float(x) => format!("{x}"),
        other => other.to_string(),
    }
}

/// The longest file name a point may get; longer names fail on common file systems.
const MAX_FILE_NAME: usize = 200;

fn file_name(params: &[(String, toml::Value)]) -> String {
    if params.is_empty() {
        return "point.json".to_owned();
    }
    let parts: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", name_part(k), name_part(&value_text(v))))
        .collect();
    format!("{}.json", parts.join(","))
}

/// Reads a workload's seed under some overrides (only asked when there are repetitions).
pub type SeedOf<'a> = &'a dyn Fn(&Path, &[Override]) -> Result<u64, InputError>;

/// The manifest's `machine` or `workload` must name a file: an error names the manifest
/// and the key (the loader would name only the path, or a directory for `""`).
fn check_input_file(key: &str, file: &Path, origin: &str) -> Result<(), InputError> {
    let reason = match std::fs::metadata(file) {
        Ok(m) if m.is_file() => return Ok(()),
        Ok(_) => "is not a file".to_owned(),
        Err(e) => format!("cannot be read: {e}"),
    };
    let shown = file.display();
    Err(InputError::key(origin, key, format!("`{shown}` {reason}")))
}

/// The last two parts of `path` made absolute (the file's own name alone at the root).
fn manifest_name(path: &Path) -> String {
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let parts: Vec<String> = (absolute.components().rev())
        .filter_map(|c| match c {
            std::path::Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            _ => None,
        })
        .take(2)
        .collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

/// Reads and checks a manifest and expands it into points.
pub fn load(path: &Path, seed_of: SeedOf) -> Result<Manifest, InputError> {
    let origin = path.display().to_string();
    let table = read_toml_file(path)?;
    // Before the fields are read: a required key written below a table is missing above.
    check_misplaced(&table, &origin)?;
    let source = Source::new(origin.clone(), table, &[], None, &[])?;
    let raw: RawManifest = source.deserialize_bounded()?;
    let dir = path.parent().unwrap_or(Path::new(""));
    // Absolute when the file exists, so `--list` lines run from any directory; a missing
    // file keeps its joined path, which the machine or workload loader then names.
    let resolve = |p: &str| {
        let joined = dir.join(p);
        std::fs::canonicalize(&joined).unwrap_or(joined)
    };
    let (machine, workload) = (resolve(&raw.machine), resolve(&raw.workload));
    for (key, file) in [("machine", &machine), ("workload", &workload)] {
        check_input_file(key, file, &origin)?;
    }
    check_partitioner(&raw, &origin)?;
    let mut fixed = Vec::new();
    flatten(&raw.set, "", &mut fixed);
    let axes = axes(&raw, &origin)?;
    check_keys(&raw, &fixed, &axes, &origin)?;
    let fixed_sets = sets(&fixed, &origin, "set")?;
    let repetitions = raw.repetitions.get();
    let base_seed = if repetitions > 1 {
        seed_of(&workload, &overrides(&fixed_sets)?)?
    } else {
        0
    };
    let mut param_names: Vec<String> = axes.iter().flat_map(|a| a.keys.clone()).collect();
    if repetitions > 1 {
        param_names.extend(["repetition".to_owned(), "seed".to_owned()]);
    }
    let points = expand(&axes, repetitions, base_seed, &fixed_sets, &origin)?;
    check_specs(&raw.plot, raw.command.name(), &param_names, &origin)?;
    Ok(Manifest {
        name: manifest_name(path),
        origin,
        machine,
        workload,
        command: raw.command,
        partitioner: raw.partitioner,
        param_names,
        points,
        plots: raw.plot,
        record_refused: raw.record_refused,
    })
}

/// A line figure's x, when it is a parameter, takes numbers at every point: text (a
/// partitioner's name) has no place on its axis, and such a figure came out empty. Checked
/// after the points' own inputs, so that a value a key refuses is named as such first.
pub(super) fn check_line_x(
    plots: &[PlotSpec],
    points: &[Point],
    origin: &str,
) -> Result<(), InputError> {
    for (i, spec) in plots.iter().enumerate().filter(|(_, s)| !s.stacked) {
        let values = points.iter().flat_map(|p| &p.params);
        let text = values.filter(|(k, v)| *k == spec.x && !(v.is_integer() || v.is_float()));
        if let Some((_, v)) = text.into_iter().next() {
            let reason = format!(
                "`{}` takes {v}, not a number, and a line figure needs numbers on x; draw bars (stacked = true), or put the parameter in series and a number column on x",
                spec.x
            );
            return Err(InputError::key(origin, &format!("plot[{i}].x"), reason));
        }
    }
    Ok(())
}

/// The manifest's own keys besides its tables of `--set`s (not `description`, which a
/// workload has too).
const MANIFEST_KEYS: [&str; 7] = [
    "machine",
    "workload",
    "command",
    "partitioner",
    "repetitions",
    "record_refused",
    "plot",
];

/// A manifest key written below `[set]`, `[grid]`, `[zip]` or `[ranges]` (TOML puts it in
/// that table), named as such rather than as an unknown workload key.
fn check_misplaced(manifest: &toml::Table, origin: &str) -> Result<(), InputError> {
    for name in ["set", "grid", "zip", "ranges"] {
        let Some(table) = manifest.get(name).and_then(toml::Value::as_table) else {
            continue;
        };
        // `machine.KEY` is how machine keys are set.
        let misplaced = |(k, v): &(&String, &toml::Value)| {
            MANIFEST_KEYS.contains(&k.as_str()) && !(*k == "machine" && v.is_table())
        };
        if let Some((key, _)) = table.iter().find(misplaced) {
            let reason = format!(
                "`{key}` is a key of the manifest, not a `--set`: written after `[{name}]`, TOML puts it in that table; move it above the first table"
            );
            return Err(InputError::key(origin, &format!("{name}.{key}"), reason));
        }
    }
    Ok(())
}

fn check_partitioner(raw: &RawManifest, origin: &str) -> Result<(), InputError> {
    match &raw.partitioner {
        Some(name) if crate::partition::by_name(name).is_none() => {
            let names = crate::partition::names().join(", ");
            Err(InputError::key(
                origin,
                "partitioner",
                format!("unknown partitioner `{name}`; expected one of: {names}"),
            ))
        }
        _ => Ok(()),
    }
}

fn overrides(sets: &[String]) -> Result<Vec<Override>, InputError> {
    sets.iter().map(|s| Override::parse(s)).collect()
}

/// `key=value` texts, each checked to parse back as an override of that value.
fn sets(
    pairs: &[(String, toml::Value)],
    origin: &str,
    section: &str,
) -> Result<Vec<String>, InputError> {
    pairs
        .iter()
        .map(|(k, v)| {
            let text = format!("{k}={}", set_value(k, v));
            Override::parse(&text)
                .map_err(|e| InputError::key(origin, &format!("{section}.{k}"), e.reason))?;
            Ok(text)
        })
        .collect()
}

/// One axis of the product: one grid key, or every zipped key moving together.
#[derive(Debug, Clone)]
struct Axis {
    keys: Vec<String>,
    /// values[i] holds one value per key.
    values: Vec<Vec<toml::Value>>,
}

fn list<'a>(
    origin: &str,
    key: &str,
    value: &'a toml::Value,
) -> Result<&'a Vec<toml::Value>, InputError> {
    match value {
        toml::Value::Array(items) if !items.is_empty() => Ok(items),
        _ => Err(InputError::key(
            origin,
            key,
            "expected a non-empty list of values, such as [0.6, 1.0]",
        )),
    }
}

/// Most points a manifest may expand to, and most values of one `ranges` axis.
pub const MAX_POINTS: u64 = 100_000;

/// The integers of a `ranges` axis: `[first, last]` or `[first, last, step]`, both ends
/// included.
fn range_values(origin: &str, key: &str, value: &toml::Value) -> Result<toml::Value, InputError> {
    let bad = |reason: String| InputError::key(origin, &format!("ranges.{key}"), reason);
    let ints: Option<Vec<i64>> = value
        .as_array()
        .map(|a| a.iter().map(toml::Value::as_integer).collect())
        .and_then(|v: Option<Vec<i64>>| v);
    let (first, last, step) = match ints.as_deref() {
        Some(&[first, last]) => (first, last, 1),
        Some(&[first, last, step]) => (first, last, step),
        _ => {
            return Err(bad(
                "expected [first, last] or [first, last, step] integers, such as [0, 127]".into(),
            ));
        }
    };
    if step < 1 || last < first {
        return Err(bad(format!(
            "needs first <= last and a step of at least 1 (got {value})"
        )));
    }
    let span = last.abs_diff(first) / step.unsigned_abs();
    let count = span.saturating_add(1);
    if span >= MAX_POINTS {
        return Err(bad(format!(
            "has {count} values; at most {MAX_POINTS} (give a larger step)"
        )));
    }
    let values = (0..count).map(|i| toml::Value::Integer(first + i as i64 * step));
    Ok(toml::Value::Array(values.collect()))
}

fn axes(raw: &RawManifest, origin: &str) -> Result<Vec<Axis>, InputError> {
    let mut grid = Vec::new();
    flatten(&raw.grid, "", &mut grid);
    let mut ranged = Vec::new();
    flatten(&raw.ranges, "", &mut ranged);
    for (k, v) in ranged {
        let values = range_values(origin, &k, &v)?;
        grid.push((k, values));
    }
    // Grid and range axes together, in key order (a key given in both is refused later).
    grid.sort_by(|a, b| a.0.cmp(&b.0));
    let mut axes = Vec::new();
    for (k, v) in &grid {
        let items = list(origin, &format!("grid.{k}"), v)?;
        let axis = Axis {
            keys: vec![k.clone()],
            values: items.iter().map(|x| vec![x.clone()]).collect(),
        };
        check_distinct(&axis, origin, "grid")?;
        axes.push(axis);
    }
    let mut zip = Vec::new();
    flatten(&raw.zip, "", &mut zip);
    let mut zipped = Axis {
        keys: Vec::new(),
        values: Vec::new(),
    };
    for (k, v) in &zip {
        let items = list(origin, &format!("zip.{k}"), v)?;
        if zipped.keys.is_empty() {
            zipped.values = vec![Vec::new(); items.len()];
        } else if items.len() != zipped.values.len() {
            return Err(InputError::key(
                origin,
                &format!("zip.{k}"),
                format!(
                    "has {} values but `zip.{}` has {}: zipped lists move together, so they need the same length",
                    items.len(),
                    zipped.keys[0],
                    zipped.values.len()
                ),
            ));
        }
        zipped.keys.push(k.clone());
        for (row, x) in zipped.values.iter_mut().zip(items) {
            row.push(x.clone());
        }
    }
    if !zipped.keys.is_empty() {
        check_distinct(&zipped, origin, "zip")?;
        axes.push(zipped);
    }
    Ok(axes)
}

/// Refuses an axis that lists one value (or zipped row) twice, by value (`1` and `1.0` are
/// one skew): the two points would run the same configuration.
fn check_distinct(axis: &Axis, origin: &str, section: &str) -> Result<(), InputError> {
    let mut seen = std::collections::BTreeMap::new();
    for (i, row) in axis.values.iter().enumerate() {
        let canonical: Vec<String> = row.iter().map(canonical).collect();
        if let Some(first) = seen.insert(canonical, i) {
            let what = match axis.keys.len() {
                1 => format!(
                    "lists one value twice: {} (value {first}) and {} (value {i})",
                    axis.values[first][0], row[0]
                ),
                _ => {
                    let pairs = axis.keys.iter().zip(row);
                    let shown: Vec<String> = pairs.map(|(k, v)| format!("{k} = {v}")).collect();
                    format!("has rows {first} and {i} alike ({})", shown.join(", "))
                }
            };
            return Err(InputError::key(
                origin,
                &format!("{section}.{}", axis.keys[0]),
                format!("{what}; each makes a point, so two points would run one configuration"),
            ));
        }
    }
    Ok(())
}

/// A value's text with numbers by value, so that `1` and `1.0` (and `0.0` and `-0.0`)
/// read alike, and integers exactly (two seeds beyond 2^53 stay apart).
fn canonical(value: &toml::Value) -> String {
    match value {
        toml::Value::Integer(i) => i.to_string(),
        // A whole float in i64's range is that integer (the bound is exactly 2^63).
        toml::Value::Float(x) if x.fract() == 0.0 && x.abs() < 9_223_372_036_854_775_808.0 => {
            (*x as i64).to_string()
        }
        toml::Value::Float(x) => format!("{x:?}"),
        toml::Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

/// Every key is set once, and repetitions own the seed.
fn check_keys(
    raw: &RawManifest,
    fixed: &[(String, toml::Value)],
    axes: &[Axis],
    origin: &str,
) -> Result<(), InputError> {
    let mut seen: Vec<&str> = Vec::new();
    let keys = fixed
        .iter()
        .map(|(k, _)| k.as_str())
        .chain(axes.iter().flat_map(|a| a.keys.iter().map(String::as_str)));
    for key in keys {
        // The key becomes the text of a `--set key=value`: an `=`, a space or a `#` in it
        // would change what the point runs (`"queries.skew=1.2 #"` ran skew 1.2 whatever
        // the grid said), and spaces would make one key look like two.
        let part_ok = |p: &str| {
            !p.is_empty()
                && (p.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        if !key.split('.').all(part_ok) {
            return Err(InputError::key(
                origin,
                key,
                "is not a key: give dotted names of letters, digits, `_` and `-` (such as `queries.skew`)",
            ));
        }
        if seen.contains(&key) {
            return Err(InputError::key(
                origin,
                key,
                "is given more than once among `set`, `grid`, `ranges` and `zip`",
            ));
        }
        if raw.partitioner.is_some() && key == "partition.partitioner" {
            return Err(InputError::key(
                origin,
                key,
                "would be overridden by the manifest's `partitioner` (its --partitioner); give one of them",
            ));
        }
        if raw.repetitions.get() > 1 && (key == "seed" || key == "repetition") {
            return Err(InputError::key(
                origin,
                key,
                "is derived from the repetitions; drop `repetitions` or this key",
            ));
        }
        seen.push(key);
    }
    Ok(())
}

/// The cartesian product of the axes (the last varies fastest), each point repeated.
fn expand(
    axes: &[Axis],
    repetitions: u32,
    base_seed: u64,
    fixed_sets: &[String],
    origin: &str,
) -> Result<Vec<Point>, InputError> {
    let count = axes
        .iter()
        .try_fold(u64::from(repetitions), |n, a| {
            n.checked_mul(a.values.len() as u64)
        })
        .filter(|&n| n <= MAX_POINTS);
    if count.is_none() {
        return Err(InputError::plain(
            origin,
            format!(
                "the axes and repetitions make more than {MAX_POINTS} points: use fewer values"
            ),
        ));
    }
    let mut combos: Vec<Vec<(String, toml::Value)>> = vec![Vec::new()];
    for axis in axes {
        combos = combos
            .iter()
            .flat_map(|c| {
                axis.values.iter().map(move |row| {
                    let mut next = c.clone();
                    next.extend(axis.keys.iter().cloned().zip(row.iter().cloned()));
                    next
                })
            })
            .collect();
    }
    let mut points: Vec<Point> = Vec::new();
    let mut files = std::collections::BTreeMap::new();
    for combo in combos {
        for k in 0..repetitions {
            let mut params = combo.clone();
            if repetitions > 1 {
                let seed = repetition_seed(base_seed, k);
                params.push(("repetition".to_owned(), toml::Value::Integer(k.into())));
                params.push(("seed".to_owned(), toml::Value::Integer(seed as i64)));
            }
            let file = file_name(&params);
            check_file(&files, points.len(), &file, origin)?;
            files.insert(file.clone(), points.len());
            let mut sets = fixed_sets.to_vec();
            for (key, v) in &params {
                if key != "repetition" {
                    sets.push(format!("{key}={}", set_value(key, v)));
                }
            }
            points.push(Point {
                index: points.len(),
                file,
                params,
                sets,
            });
        }
    }
    Ok(points)
}

/// A point's file name is short enough and not another point's (`files`: name to point).
fn check_file(
    files: &std::collections::BTreeMap<String, usize>,
    point: usize,
    file: &str,
    origin: &str,
) -> Result<(), InputError> {
    if file.len() > MAX_FILE_NAME {
        return Err(InputError::plain(
            origin,
            format!(
                "the parameters make a result file name of {} characters (at most {MAX_FILE_NAME}): use fewer axes or shorter values",
                file.len()
            ),
        ));
    }
    match files.get(file) {
        Some(earlier) => Err(InputError::plain(
            origin,
            format!(
                "points {earlier} and {point} would both write `{file}`: make their values differ in letters, digits, `.`, `+` or `-`"
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MANIFEST_KEYS` and the five other keys are every field of the manifest: serde's
    /// error for an unknown key lists the fields it expected.
    #[test]
    fn manifest_keys_are_every_field_but_the_tables_and_description() {
        let e = toml::from_str::<RawManifest>("zzz = 1")
            .unwrap_err()
            .to_string();
        let expected = e
            .split("expected one of")
            .nth(1)
            .expect("serde lists the fields");
        let mut fields: Vec<&str> = expected
            .split(',')
            .map(|f| f.trim().trim_matches('`'))
            .collect();
        fields.sort_unstable();
        let mut keys = MANIFEST_KEYS.to_vec();
        keys.extend(["description", "set", "grid", "zip", "ranges"]);
        keys.sort_unstable();
        assert_eq!(fields, keys, "{e}");
    }

    #[test]
    fn values_are_alike_by_value_and_integers_exactly() {
        use toml::Value::{Float, Integer};
        let same = |a: toml::Value, b: toml::Value| canonical(&a) == canonical(&b);
        assert!(same(Integer(1), Float(1.0)));
        assert!(same(Float(-0.0), Integer(0)));
        assert!(!same(Integer(1 << 53), Integer((1 << 53) + 1)));
        assert!(!same(Float(0.6), Float(0.6000000000000001)));
        assert!(same(Float(1e300), Float(1e300)));
    }

    #[test]
    fn ranges_are_grid_axes_of_every_integer_in_key_order() {
        let raw: RawManifest = toml::from_str(
            "machine = \"m\"\nworkload = \"w\"\ncommand = \"run\"\n[grid]\nqueries.skew = [1.0]\n[ranges]\ndeviation.base_partition = [3, 9, 3]\nseed = [1, 2]",
        )
        .unwrap();
        let axes = axes(&raw, "m.toml").unwrap();
        let keys: Vec<&str> = axes.iter().map(|a| a.keys[0].as_str()).collect();
        assert_eq!(keys, ["deviation.base_partition", "queries.skew", "seed"]);
        let ints = |a: &Axis| -> Vec<i64> {
            a.values
                .iter()
                .map(|v| v[0].as_integer().unwrap())
                .collect()
        };
        assert_eq!(ints(&axes[0]), [3, 6, 9]);
        assert_eq!(ints(&axes[2]), [1, 2]);
    }

    #[test]
    fn repetition_zero_keeps_the_seed_and_the_others_fit_toml() {
        assert_eq!(repetition_seed(7, 0), 7);
        let s1 = repetition_seed(7, 1);
        assert_ne!(s1, 7);
        assert_eq!(s1, repetition_seed(7, 1));
        assert_ne!(s1, repetition_seed(7, 2));
        assert!(s1 <= i64::MAX as u64);
    }

    #[test]
    fn strings_are_bare_when_they_read_back() {
        let s = |v: &str| set_value("k", &toml::Value::String(v.into()));
        assert_eq!(s("qdd-greedy"), "qdd-greedy");
        assert_eq!(s("true"), "\"true\"");
        assert_eq!(s("1.5"), "\"1.5\"");
        assert_eq!(set_value("k", &toml::Value::Float(1.0)), "1.0");
        assert_eq!(
            file_name(&[("a.b".into(), toml::Value::Float(1.0))]),
            "a.b=1.json"
        );
    }
}
