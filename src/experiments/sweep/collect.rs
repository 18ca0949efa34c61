//! The tidy table of a sweep: one row per point with its parameters and key results, as CSV
//! and as JSON Lines with the same columns, made from the result files alone so it can be
//! remade without rerunning.

use super::{SweepIndex, read_index};
use crate::config::InputError;
use crate::error::Error;
use crate::experiments::compare::{is_refused, is_result_of, kind};
use serde_json::Value;
use std::path::Path;

pub const CSV_FILE: &str = "results.csv";
pub const JSONL_FILE: &str = "results.jsonl";

/// Key results of `pimdes run`, before and after the breakdown entries.
const RUN_FIRST: [&str; 4] = [
    "batch_time_us.mean",
    "batch_time_us.stddev",
    "batch_interval_us.mean",
    "throughput_queries_per_s",
];
const RUN_LAST: [&str; 12] = [
    "latency_us.p50",
    "latency_us.p99",
    "queries_per_measured_batch.mean",
    "saturated",
    "launch_split.dpu_kernel.launch_us",
    "launch_split.dpu_kernel.slowest_dpu_us",
    "launch_split.dpu_kernel.until_seen_us",
    "dpu_kernel_us.max",
    "imbalance.data",
    "imbalance.queries",
    "imbalance.chunk_floor",
    "answers_verified",
];
/// PIM-tree's own figures of a run (docs/pim-tree.md): columns when some point has them.
const PIM_TREE: [&str; 6] = [
    "pim_tree.rounds_per_batch",
    "pim_tree.distinct_keys_per_batch",
    "pim_tree.queries_per_distinct_key",
    "pim_tree.max_tasks_per_dpu",
    "pim_tree.task_imbalance",
    "pim_tree.moved_bytes_per_query",
];
/// Key results of `pimdes partition`.
const PARTITION: [&str; 12] = [
    "imbalance.data",
    "imbalance.queries",
    "imbalance.queries_reference",
    "imbalance.chunk_floor",
    "max_pairs_per_dpu",
    "mean_pairs_per_dpu",
    "max_queries_per_dpu",
    "mean_queries_per_dpu",
    "bottleneck_hot_share",
    "partitions",
    "hot_partitions",
    "fits_in_mram",
];

/// The result columns that hold a flag or text, not a number: no figure draws them on an
/// axis.
pub const NOT_NUMBERS: [&str; 4] = ["answers_verified", "saturated", "fits_in_mram", REFUSED];

/// What `collect` wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    pub points: usize,
    pub columns: Vec<String>,
    /// The sweep's manifest declares figures (`[[plot]]`).
    pub has_figures: bool,
    /// Whether the tables were written (false: they held these bytes already).
    pub written: bool,
}

fn at<'a>(value: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted.split('.').try_fold(value, |v, k| v.get(k))
}

/// The column of a point's number.
pub const POINT: &str = "point";

/// Why a point was refused (see the manifest's `record_refused`): a column only when some
/// point was, empty for the others.
pub const REFUSED: &str = "refused.reason";

/// The result columns: fixed per command, plus every `breakdown_us` entry of a run, plus
/// the refusal's reason when a point was refused.
fn result_columns(command: &str, results: &[Value]) -> Vec<String> {
    let mut columns = metric_columns(command, results);
    if results.iter().any(|r| r.get("refused").is_some()) {
        columns.push(REFUSED.to_owned());
    }
    columns
}

/// Every result column `command`'s points can give, whatever their results: what a
/// figure may draw besides the parameters and `point`.
pub fn possible_columns(command: &str) -> Vec<String> {
    let mut columns: Vec<String> = match command {
        "run" => RUN_FIRST
            .iter()
            .map(|c| c.to_string())
            .chain(
                crate::experiments::run::breakdown_keys()
                    .iter()
                    .map(|k| format!("breakdown_us.{k}")),
            )
            .chain(RUN_LAST.iter().map(|c| c.to_string()))
            .chain(PIM_TREE.iter().map(|c| c.to_string()))
            .collect(),
        _ => PARTITION.map(String::from).to_vec(),
    };
    columns.push(REFUSED.to_owned());
    columns
}

fn metric_columns(command: &str, results: &[Value]) -> Vec<String> {
    if command != "run" {
        return PARTITION.map(String::from).to_vec();
    }
    let mut stages: Vec<&str> = Vec::new();
    for r in results {
        if let Some(Value::Object(b)) = r.get("breakdown_us") {
            for k in b.keys() {
                if !stages.contains(&k.as_str()) {
                    stages.push(k);
                }
            }
        }
    }
    // In the reports' order (a parsed report's keys come sorted by name): the stages of
    // each point's index, the first point's first, then waiting and the classes; a key
    // this pimdes does not know goes last.
    let mut order: Vec<&str> = Vec::new();
    let indexes = results
        .iter()
        .filter_map(|r| r.get("index").and_then(Value::as_str));
    let known = indexes.flat_map(crate::index::stages_of);
    for key in known.chain(super::super::run::breakdown_keys()) {
        if !order.contains(&key) {
            order.push(key);
        }
    }
    stages.sort_by_key(|k| order.iter().position(|o| o == k).unwrap_or(order.len()));
    let mut columns: Vec<String> = RUN_FIRST.map(String::from).to_vec();
    columns.extend(stages.iter().map(|k| format!("breakdown_us.{k}")));
    columns.extend(RUN_LAST.map(String::from));
    if results.iter().any(|r| r.get("pim_tree").is_some()) {
        columns.extend(PIM_TREE.map(String::from));
    }
    columns
}

/// Reads every point's result and checks it is the point's (same configuration).
fn load_points(dir: &Path, index: &SweepIndex) -> Result<Vec<Value>, InputError> {
    let mut results = Vec::new();
    for p in &index.points {
        let path = dir.join(&p.file);
        if !path.exists() {
            return Err(InputError::plain(
                path.display().to_string(),
                format!(
                    "point {} has no result yet: run it (`pimdes sweep MANIFEST --out {} --point {}`, with the manifest that wrote the sweep{}) before collecting",
                    p.point,
                    dir.display(),
                    p.point,
                    index
                        .manifest
                        .as_deref()
                        .map_or(String::new(), |m| format!(", `{m}`"))
                ),
            ));
        }
        let result = super::load_point(dir, p)?;
        if !is_refused(&result) && !is_result_of(&result, &index.command) {
            return Err(InputError::plain(
                path.display().to_string(),
                format!(
                    "the result is of {}, not of the sweep's `pimdes {}`; rerun the sweep",
                    kind(&result),
                    index.command
                ),
            ));
        }
        results.push(result);
    }
    Ok(results)
}

fn csv_cell(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

/// Removes what `index`'s sweep derived from its points in `dir`: the two tables and each
/// figure's `.svg` and `.md`. Called when another index replaces it, so that no table or
/// figure of the old points outlives them (`pimdes plot` would redraw from them); the next
/// collection writes them anew. Files already gone are fine.
pub fn remove_derived(dir: &Path, index: &SweepIndex) -> Result<(), Error> {
    let mut names = vec![CSV_FILE.to_owned(), JSONL_FILE.to_owned()];
    // An index is a file anyone may edit: a figure named outside the directory (`../x`),
    // which `pimdes plot` would refuse, is not the sweep's to remove.
    for plot in index.plots.iter().filter(|p| p.has_plain_name()) {
        names.extend(["svg", "md"].map(|ext| format!("{}.{ext}", plot.name)));
    }
    for name in names {
        let path = dir.join(&name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::Output {
                    path: path.display().to_string(),
                    reason: format!(
                        "cannot remove the stale {name} of the sweep's earlier points: {e}"
                    ),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes `DIR/results.csv` and `DIR/results.jsonl` from `DIR/sweep.json` and the points'
/// result files.
pub fn collect(dir: &Path) -> Result<Collected, Error> {
    let index = read_index(dir)?;
    let results = load_points(dir, &index)?;
    let mut columns = vec![POINT.to_owned(), "file".to_owned()];
    columns.extend(index.parameters.iter().cloned());
    let metrics = result_columns(&index.command, &results);
    columns.extend(metrics.iter().cloned());
    let header: Vec<String> = columns
        .iter()
        .map(|c| csv_cell(&Value::from(c.as_str())))
        .collect();
    let mut csv = header.join(",") + "\n";
    let mut jsonl = String::new();
    for (p, result) in index.points.iter().zip(&results) {
        let mut cells: Vec<Value> = vec![p.point.into(), p.file.clone().into()];
        for name in &index.parameters {
            cells.push(p.parameters.get(name).cloned().unwrap_or(Value::Null));
        }
        for m in &metrics {
            cells.push(at(result, m).cloned().unwrap_or(Value::Null));
        }
        let row: Vec<String> = cells.iter().map(csv_cell).collect();
        csv.push_str(&row.join(","));
        csv.push('\n');
        let fields: Vec<String> = columns
            .iter()
            .zip(&cells)
            .map(|(c, v)| format!("{}:{}", Value::from(c.as_str()), v))
            .collect();
        jsonl.push_str(&format!("{{{}}}\n", fields.join(",")));
    }
    // Both tables or neither: `plot` reads one, a user's script perhaps the other.
    let (csv_path, jsonl_path) = (dir.join(CSV_FILE), dir.join(JSONL_FILE));
    let target = |path| crate::output::OutputTarget {
        flag: super::SWEEP_FILE,
        path,
    };
    let tables = [
        (target(&csv_path), csv.as_bytes()),
        (target(&jsonl_path), jsonl.as_bytes()),
    ];
    // Tables that hold these bytes already are left alone, unchecked (the directory may
    // be read-only); else, as a point's file, one that cannot be replaced is bad input,
    // found before writing (a link never holds the bytes: `holds` takes plain files).
    let written = !tables.iter().all(|(t, bytes)| super::holds(t.path, bytes));
    if written {
        crate::output::check_targets(&[target(&csv_path), target(&jsonl_path)], &[])?;
        crate::output::write_all_atomically(&tables)?;
    }
    Ok(Collected {
        points: results.len(),
        columns,
        has_figures: !index.plots.is_empty(),
        written,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// The breakdown columns follow each index's own stages, whatever order a parsed
    /// report's keys come in.
    #[test]
    fn breakdown_columns_follow_the_index_of_the_points() {
        let breakdown = |keys: &[&str]| {
            let map: serde_json::Map<String, serde_json::Value> =
                keys.iter().map(|k| (k.to_string(), json!(1.0))).collect();
            serde_json::Value::Object(map)
        };
        let pim_tree = [
            "cpu",
            "cpu_to_dpu",
            "dpu_kernel",
            "dpu_to_cpu",
            "fill",
            "sort",
            "task_generation",
            "waiting",
        ];
        let b_forest = [
            "cpu_to_dpu",
            "dpu_kernel",
            "dpu_to_cpu",
            "postprocessing",
            "routing",
        ];
        let results = [
            json!({"index": "pim-tree", "breakdown_us": breakdown(&pim_tree)}),
            json!({"index": "b+forest", "breakdown_us": breakdown(&b_forest)}),
        ];
        let columns = super::metric_columns("run", &results);
        let stages: Vec<&str> = columns
            .iter()
            .filter_map(|c| c.strip_prefix("breakdown_us."))
            .collect();
        let want = [
            "sort",
            "task_generation",
            "cpu_to_dpu",
            "dpu_kernel",
            "dpu_to_cpu",
            "fill",
            "routing",
            "postprocessing",
            "waiting",
            "cpu",
        ];
        assert_eq!(stages, want);
    }

    /// PIM-tree's own figures are columns when a point ran it, and only then.
    #[test]
    fn pim_tree_columns_come_with_a_pim_tree_point() {
        let forest = json!({"index": "b+forest"});
        let tree = json!({"index": "pim-tree", "pim_tree": {"rounds_per_batch": 1.0}});
        let has = |results: &[serde_json::Value]| {
            let columns = super::metric_columns("run", results);
            let pim: Vec<String> = (columns.into_iter())
                .filter(|c| c.starts_with("pim_tree."))
                .collect();
            pim
        };
        assert!(has(std::slice::from_ref(&forest)).is_empty());
        assert_eq!(has(&[forest, tree]), super::PIM_TREE);
    }

    /// The tables are made from the point files read back: a double must read back as the
    /// one written (serde_json's `float_roundtrip`), or a cell, and a parameter joined on
    /// by value, may differ from its point file in the last digit.
    #[test]
    fn a_written_double_reads_back_exactly() {
        for text in [
            "1537.3909496666665",
            "1.0017391304347827",
            "183.24600662528238",
        ] {
            let read: f64 = serde_json::from_str(text).unwrap();
            assert_eq!(read.to_string(), text);
            assert_eq!(read, text.parse::<f64>().unwrap());
        }
    }
}
