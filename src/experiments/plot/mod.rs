//! `pimdes plot DIR`: the figures of a sweep, drawn from its collected results alone
//! (`results.jsonl`) by the `[[plot]]` tables its manifest declared (kept in `sweep.json`),
//! so they can be redrawn without rerunning. Each figure is an SVG file and a Markdown table
//! of the same numbers; the same results give the same bytes.

mod repetitions;
pub mod svg;

use crate::config::InputError;
use crate::error::Error;
use crate::experiments::sweep::collect::{JSONL_FILE, NOT_NUMBERS, POINT, possible_columns};
use crate::experiments::sweep::{SweepIndex, read_index, write_atomically};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use svg::{Bar, Labels, Line};

/// One figure of a manifest (`[[plot]]`): which columns of the collected results to draw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    /// File stem of the figure: `DIR/NAME.svg` and `DIR/NAME.md`.
    pub name: String,
    pub title: String,
    /// The x column: a parameter (`queries.skew`) or a result (`imbalance.data`).
    pub x: String,
    /// The y columns (results, such as `batch_time_us.mean`); a line each (times each
    /// series), or the segments of each bar when `stacked`.
    pub y: Vec<String>,
    /// Legend names of the y columns (default: the column names).
    #[serde(default)]
    pub y_names: Vec<String>,
    /// One-sigma columns beside `y` (same length), drawn as error bars.
    #[serde(default)]
    pub error: Vec<String>,
    /// A parameter whose values split the rows into series (a line or bar group each).
    pub series: Option<String>,
    /// The x axis's label (default: the x column's name).
    pub x_label: Option<String>,
    /// The y axis's label (default: the y columns' legend names, joined).
    pub y_label: Option<String>,
    /// Stacked bars (one per row, segments = `y`) instead of lines.
    #[serde(default)]
    pub stacked: bool,
}

impl PlotSpec {
    /// Whether the figure's name is a plain file name (letters, digits, `-` and `_`), so
    /// that its files stay in the sweep's directory.
    pub fn has_plain_name(&self) -> bool {
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_".contains(c);
        !self.name.is_empty() && self.name.chars().all(plain)
    }

    /// Checks the spec's own shape; `origin` names the manifest.
    pub fn check(&self, origin: &str, at: usize) -> Result<(), InputError> {
        let bad =
            |key: &str, reason: &str| InputError::key(origin, &format!("plot[{at}].{key}"), reason);
        if !self.has_plain_name() {
            return Err(bad(
                "name",
                "must be letters, digits, `-` or `_` (a file name)",
            ));
        }
        if self.y.is_empty() {
            return Err(bad("y", "must name at least one column"));
        }
        if !self.error.is_empty() && self.error.len() != self.y.len() {
            return Err(bad("error", "must be empty or as long as `y`"));
        }
        if self.stacked && !self.error.is_empty() {
            return Err(bad(
                "error",
                "a stacked figure draws no error bars; leave `error` out, or draw lines (stacked = false)",
            ));
        }
        if !self.y_names.is_empty() && self.y_names.len() != self.y.len() {
            return Err(bad("y_names", "must be empty or as long as `y`"));
        }
        Ok(())
    }

    /// Checks that `x`, `y` and `error` name columns a sweep of `command` over `params`
    /// collects (a misspelt column would draw an empty figure); `origin` names the manifest.
    pub fn check_columns(
        &self,
        command: &str,
        params: &[String],
        origin: &str,
        at: usize,
    ) -> Result<(), InputError> {
        let results = possible_columns(command);
        let known = |c: &String| c == POINT || params.contains(c) || results.contains(c);
        let named = std::iter::once(("x".to_owned(), &self.x))
            .chain(
                self.y
                    .iter()
                    .enumerate()
                    .map(|(k, c)| (format!("y[{k}]"), c)),
            )
            .chain(
                self.error
                    .iter()
                    .enumerate()
                    .map(|(k, c)| (format!("error[{k}]"), c)),
            );
        for (key, column) in named {
            // Bars take a label on x; every other axis takes numbers.
            let on_axis = !(self.stacked && key == "x");
            if on_axis && NOT_NUMBERS.contains(&column.as_str()) {
                let advice = match key.as_str() {
                    "x" => "draw bars (stacked = true) to put it on x",
                    _ => "y and error take number columns",
                };
                let reason = format!(
                    "`{column}` holds true/false or text, not numbers, so no axis can show it; {advice}"
                );
                return Err(InputError::key(
                    origin,
                    &format!("plot[{at}].{key}"),
                    reason,
                ));
            }
            if !known(column) {
                let expected: Vec<&str> = params
                    .iter()
                    .chain(&results)
                    .map(String::as_str)
                    .chain([POINT])
                    .filter(|c| !on_axis || !NOT_NUMBERS.contains(c))
                    .collect();
                let reason = format!(
                    "`{column}` is neither a parameter of the sweep nor a result of `{command}`; expected one of: {}",
                    expected.join(", ")
                );
                return Err(InputError::key(
                    origin,
                    &format!("plot[{at}].{key}"),
                    reason,
                ));
            }
        }
        Ok(())
    }
}

/// Each figure's own shape, columns a sweep of `command` over `params` collects, unique
/// names, and a series that is one of the parameters: a manifest's figures, and again as
/// `plot` reads them (`origin` names the file).
pub fn check_specs(
    plots: &[PlotSpec],
    command: &str,
    params: &[String],
    origin: &str,
) -> Result<(), InputError> {
    for (i, spec) in plots.iter().enumerate() {
        spec.check(origin, i)?;
        spec.check_columns(command, params, origin, i)?;
        if plots[..i].iter().any(|p| p.name == spec.name) {
            let reason = format!("`{}` names two figures", spec.name);
            return Err(InputError::key(origin, &format!("plot[{i}].name"), reason));
        }
        if let Some(series) = spec.series.as_ref().filter(|s| !params.contains(s)) {
            let reason = format!(
                "`{series}` is not a parameter of the sweep; expected one of: {}",
                params.join(", ")
            );
            return Err(InputError::key(
                origin,
                &format!("plot[{i}].series"),
                reason,
            ));
        }
    }
    Ok(())
}

/// The value of `column` in a collected row: a number, or a label for strings and bools.
fn cell<'a>(row: &'a Value, column: &str) -> Option<&'a Value> {
    row.get(column)
}

fn as_number(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

fn as_label(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(other) => other.to_string(),
    }
}

/// The rows' series values in order of first appearance (one unnamed series without
/// `spec.series`).
fn series_values(spec: &PlotSpec, rows: &[Value]) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    for row in rows {
        let v = match &spec.series {
            Some(s) => as_label(cell(row, s)),
            None => String::new(),
        };
        if !values.contains(&v) {
            values.push(v);
        }
    }
    values
}

/// A series' legend: its value, named by the series key's last part when the value is a
/// number (`pairs = 2500000`; a partitioner's name says what it is).
fn series_label(spec: &PlotSpec, value: &str) -> String {
    match (&spec.series, value.parse::<f64>()) {
        (Some(key), Ok(_)) => {
            let short = key.rsplit('.').next().unwrap_or(key);
            format!("{short} = {value}")
        }
        _ => value.to_owned(),
    }
}

fn in_series(spec: &PlotSpec, row: &Value, value: &str) -> bool {
    spec.series
        .as_ref()
        .is_none_or(|s| as_label(cell(row, s)) == value)
}

/// The y axis's label: `y_label`, else the y columns' legend names.
fn y_axis_label(spec: &PlotSpec) -> String {
    (spec.y_label.clone()).unwrap_or_else(|| {
        let names: Vec<String> = (0..spec.y.len()).map(|k| y_name(spec, k)).collect();
        names.join(", ")
    })
}

fn y_name(spec: &PlotSpec, k: usize) -> String {
    spec.y_names
        .get(k)
        .cloned()
        .unwrap_or_else(|| spec.y[k].clone())
}

/// The lines of a line chart: series x y columns, points sorted by x, rows without a
/// number in a column left out (a refused or failed point).
fn lines(spec: &PlotSpec, rows: &[Value]) -> Vec<Line> {
    let mut out = Vec::new();
    for value in series_values(spec, rows) {
        for k in 0..spec.y.len() {
            let mut points: Vec<(f64, f64, f64)> = rows
                .iter()
                .filter(|r| in_series(spec, r, &value))
                .filter_map(|r| {
                    let x = as_number(cell(r, &spec.x))?;
                    let y = as_number(cell(r, &spec.y[k]))?;
                    let e = spec
                        .error
                        .get(k)
                        .and_then(|c| as_number(cell(r, c)))
                        .unwrap_or(0.0);
                    Some((x, y, e))
                })
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let series = series_label(spec, &value);
            let label = match (value.is_empty(), spec.y.len()) {
                (true, _) => y_name(spec, k),
                (false, 1) => series,
                (false, _) => format!("{series}: {}", y_name(spec, k)),
            };
            out.push(Line { label, points });
        }
    }
    out
}

/// The bars of a stacked chart: one per row that has numbers (not a refused point),
/// labelled by x (and series).
fn bars(spec: &PlotSpec, rows: &[Value]) -> Vec<Bar> {
    rows.iter()
        .filter(|r| !refused(r))
        .map(|r| {
            let mut label = as_label(cell(r, &spec.x));
            if let Some(s) = &spec.series {
                label = format!("{} {label}", as_label(cell(r, s)));
            }
            let segments = spec
                .y
                .iter()
                .map(|c| as_number(cell(r, c)).unwrap_or(0.0).max(0.0))
                .collect();
            Bar { label, segments }
        })
        .collect()
}

/// The Markdown table of a figure: x, series, the repetition if the sweep has them, each y
/// (with its sigma).
fn table(spec: &PlotSpec, rows: &[Value], params: &[String]) -> String {
    let mut columns = vec![spec.x.clone()];
    columns.extend(spec.series.iter().cloned());
    // Every parameter of the sweep, so that each row says which point it is (x may be a
    // result, such as `imbalance.data`, that no parameter shows).
    for p in params {
        if !columns.contains(p) {
            columns.push(p.clone());
        }
    }
    for (k, y) in spec.y.iter().enumerate() {
        columns.push(y.clone());
        if let Some(e) = spec.error.get(k) {
            columns.push(e.clone());
        }
    }
    if rows.iter().any(refused) {
        columns.push(REFUSED.to_owned());
    }
    let mut md = format!("# {}\n\n", spec.title);
    let _ = writeln!(md, "| {} |", columns.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(columns.len()));
    for row in rows {
        let cells: Vec<String> = columns.iter().map(|c| format_cell(cell(row, c))).collect();
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }
    md
}

/// A whole number as it is; another number with at most four decimals, trailing zeros
/// dropped (`0.6`, `1`, `1638.3896`).
fn format_cell(v: Option<&Value>) -> String {
    // Whole numbers as they are (a seed has 19 digits, more than an f64 keeps).
    if let Some(n) = v.filter(|v| v.is_u64() || v.is_i64()) {
        return n.to_string();
    }
    match v.and_then(Value::as_f64) {
        Some(x) if x.abs() < 1e15 => {
            let text = format!("{x:.4}");
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        }
        Some(x) => format!("{x:e}"),
        // A table cell: a `|` (in a refusal's reason) would end it.
        None => as_label(v).replace('|', "\\|"),
    }
}

use crate::experiments::sweep::collect::REFUSED;

fn refused(row: &Value) -> bool {
    cell(row, REFUSED).is_some_and(Value::is_string)
}

/// The SVG and Markdown of one figure of a sweep over `params`. Refused points have no
/// numbers: the SVG's title counts them and the table gives their reasons. A point's
/// repetitions are drawn as one, at their mean (the `repetitions` module); the table keeps
/// each.
pub fn draw(spec: &PlotSpec, rows: &[Value], params: &[String]) -> (String, String) {
    let merged = repetitions::merged(spec, rows, params);
    let mut title = spec.title.clone();
    if let Some(m) = &merged {
        title = format!("{title}, mean of {} repetitions", m.repetitions);
    }
    match (rows.iter().filter(|r| refused(r)).count(), &merged) {
        (0, _) => {}
        (n, None) => title = format!("{title} ({n} refused, see the table)"),
        (n, Some(_)) => {
            title = format!(
                "{title} ({n} of {} runs refused, see the table)",
                rows.len()
            )
        }
    }
    let labels = Labels {
        title,
        x: spec.x_label.clone().unwrap_or_else(|| spec.x.clone()),
        y: y_axis_label(spec),
    };
    let (drawn, drawn_rows) = match &merged {
        Some(m) => (&m.spec, m.rows.as_slice()),
        None => (spec, rows),
    };
    let svg = if spec.stacked {
        let names: Vec<String> = (0..spec.y.len()).map(|k| y_name(spec, k)).collect();
        svg::stacked_bars(&labels, &names, &bars(drawn, drawn_rows))
    } else {
        svg::line_chart(&labels, &lines(drawn, drawn_rows))
    };
    let mut md = table(spec, rows, params);
    if let Some(m) = &merged {
        md.push_str(&repetitions::drawn_table(m));
    }
    (svg, md)
}

/// Reads `DIR/results.jsonl`, one JSON object per line.
fn read_rows(dir: &Path, index: &SweepIndex) -> Result<Vec<Value>, InputError> {
    let path = dir.join(JSONL_FILE);
    let origin = path.display().to_string();
    let text = crate::config::read_json_file(&path).map_err(|e| {
        InputError::plain(
            &origin,
            format!("{e}; run `pimdes sweep --collect DIR` first"),
        )
    })?;
    let rows: Vec<Value> = text
        .lines()
        .enumerate()
        .map(|(i, line)| match serde_json::from_str(line) {
            Ok(row @ Value::Object(_)) => Ok(row),
            Ok(_) => Err(InputError::plain(
                &origin,
                format!("line {}: not a result (a JSON object)", i + 1),
            )),
            Err(e) => Err(InputError::plain(&origin, format!("line {}: {e}", i + 1))),
        })
        .collect::<Result<_, _>>()?;
    if rows.is_empty() {
        let reason = "holds no results; run `pimdes sweep --collect DIR` first";
        return Err(InputError::plain(&origin, reason));
    }
    // One row per point of the index, in its order: a lost or edited row would quietly
    // drop or move a point of every figure.
    let row_of = |r: &Value| (r["point"].as_u64(), r["file"].as_str().map(str::to_owned));
    let want = index
        .points
        .iter()
        .map(|p| (Some(p.point as u64), Some(p.file.clone())));
    if !rows.iter().map(row_of).eq(want) {
        let reason = format!(
            "its {} rows are not the {} points of the sweep's index, in order; run `pimdes sweep --collect DIR` again",
            rows.len(),
            index.points.len()
        );
        return Err(InputError::plain(&origin, reason));
    }
    Ok(rows)
}

/// A line figure's x holds no text in a measured row (the manifest's check knows the
/// columns; this one reads what was collected, which anyone may have edited). A row without
/// a value there is left out of the figure, as a refused point is.
fn check_numbers_on_x(
    spec: &PlotSpec,
    rows: &[Value],
    origin: &str,
    at: usize,
) -> Result<(), InputError> {
    let measured = rows.iter().filter(|r| !refused(r));
    let text = |v: &Option<&Value>| v.is_some_and(|v| !(v.is_number() || v.is_null()));
    match measured.map(|r| cell(r, &spec.x)).find(text) {
        None => Ok(()),
        Some(v) => Err(InputError::key(
            origin,
            &format!("plot[{at}].x"),
            format!(
                "`{}` holds {}, not a number, and a line figure needs numbers on x; draw bars (stacked = true), or take x from a number column",
                spec.x,
                as_label(v)
            ),
        )),
    }
}

/// The y and error columns of a figure hold numbers in every measured row (or nothing: a
/// failed measure), so that no edited row drops out of the figure unseen; `jsonl` is the
/// collected results' file.
fn check_numbers_on_y(spec: &PlotSpec, rows: &[Value], jsonl: &Path) -> Result<(), InputError> {
    let x = (!spec.stacked).then_some(&spec.x);
    for (line, row) in rows.iter().enumerate().filter(|(_, r)| !refused(r)) {
        for column in spec.y.iter().chain(&spec.error).chain(x) {
            let v = cell(row, column);
            let (what, fix) = match v {
                Some(v) if !(v.is_number() || v.is_null()) => {
                    ("not a number", "run `pimdes sweep --collect DIR` again")
                }
                Some(v) if v.as_f64().is_some_and(|f| f.abs() > MAX_DRAWN) => (
                    "beyond what a figure scales (1e300 either way: wider spans overflow the axis)",
                    "leave the column out of the figure",
                ),
                _ => continue,
            };
            let reason = format!(
                "line {}: holds {}, {what}, and figure `{}` draws it; {fix}",
                line + 1,
                as_label(v),
                spec.name
            );
            return Err(InputError::key(jsonl.display().to_string(), column, reason));
        }
    }
    Ok(())
}

/// The largest magnitude a figure draws: the span of two such values, and the sum of a
/// stack of up to 10^8 of them, stay finite.
const MAX_DRAWN: f64 = 1e300;

/// Draws every figure the sweep in `dir` declares; returns their files, each written or
/// found up to date.
pub fn plot_dir(dir: &Path) -> Result<Vec<Figure>, Error> {
    let index = read_index(dir)?;
    let origin = dir
        .join(crate::experiments::sweep::INDEX_FILE)
        .display()
        .to_string();
    if index.plots.is_empty() {
        let reason = "the sweep's manifest declares no figures ([[plot]] tables)";
        return Err(InputError::plain(origin, reason).into());
    }
    // Checked again as read: a figure's name becomes a file name in `dir`.
    check_specs(&index.plots, &index.command, &index.parameters, &origin)?;
    let rows = read_rows(dir, &index)?;
    for (at, spec) in index.plots.iter().enumerate() {
        if !spec.stacked {
            check_numbers_on_x(spec, &rows, &origin, at)?;
        }
        check_numbers_on_y(spec, &rows, &dir.join(JSONL_FILE))?;
    }
    let mut figures = Vec::new();
    for spec in &index.plots {
        let (svg, md) = draw(spec, &rows, &index.parameters);
        for (ext, text) in [("svg", svg), ("md", md)] {
            let path = dir.join(format!("{}.{ext}", spec.name));
            let written = write_atomically(&path, &text)?;
            figures.push(Figure { path, written });
        }
    }
    Ok(figures)
}

/// A figure's file that [`plot_dir`] drew.
#[derive(Debug)]
pub struct Figure {
    pub path: PathBuf,
    /// Written; `false` when the file held these bytes already (left untouched).
    pub written: bool,
}

impl std::fmt::Display for Figure {
    /// The line that tells a user of it: "drew PATH", or "PATH is up to date".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.written {
            true => write!(f, "drew {}", self.path.display()),
            false => write!(f, "{} is up to date", self.path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{PlotSpec, format_cell, series_label, y_axis_label};
    use serde_json::{Value, json};

    #[test]
    fn a_numeric_series_is_named_in_its_legend() {
        let spec: PlotSpec = toml::from_str(
            "name = \"a\"\ntitle = \"t\"\nx = \"queries.skew\"\ny = [\"y\"]\ny_label = \"us\"\nseries = \"data.pairs\"",
        )
        .unwrap();
        assert_eq!(series_label(&spec, "2500000"), "pairs = 2500000");
        assert_eq!(series_label(&spec, "qdd-greedy"), "qdd-greedy");
    }

    #[test]
    fn the_y_label_defaults_to_the_legend_names() {
        let spec = |extra: &str| -> PlotSpec {
            let base = "name = \"a\"\ntitle = \"t\"\nx = \"queries.skew\"\ny = [\"p\", \"q\"]\n";
            toml::from_str(&format!("{base}{extra}")).unwrap()
        };
        assert_eq!(y_axis_label(&spec("")), "p, q");
        assert_eq!(y_axis_label(&spec("y_names = [\"P\", \"Q\"]")), "P, Q");
        assert_eq!(y_axis_label(&spec("y_label = \"us\"")), "us");
    }

    #[test]
    fn table_cells_keep_whole_numbers_exact_and_round_others() {
        let cell = |v: Value| format_cell(Some(&v));
        // A repetition's seed: 19 digits, more than an f64 holds.
        assert_eq!(cell(json!(3921872747796529894u64)), "3921872747796529894");
        assert_eq!(cell(json!(-7)), "-7");
        assert_eq!(cell(json!(0.6)), "0.6");
        assert_eq!(cell(json!(1.0)), "1");
        assert_eq!(cell(json!(1638.38961)), "1638.3896");
        assert_eq!(cell(json!("a|b")), "a\\|b");
        assert_eq!(format_cell(None), "-");
    }
}
