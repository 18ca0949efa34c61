//! Figures of a sweep with repetitions (`repetitions` in the manifest): each point is drawn
//! once, at the mean of its measured repetitions, with their standard deviation as its error
//! bar, instead of one marker (or bar) per repetition at the same place.

use super::{PlotSpec, as_label, as_number, cell, format_cell, refused};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The parameters that repetitions add to each point (docs/sweeps.md).
const REPEATED: [&str; 2] = ["repetition", "seed"];

/// The column of a merged row that counts the repetitions measured.
const MEASURED: &str = "repetitions measured";

/// What a figure draws when its points are repeated: the spec with an error column per y
/// (the standard deviation over the repetitions), one row per point, and the most
/// repetitions a point has.
pub struct Merged {
    pub spec: PlotSpec,
    pub rows: Vec<Value>,
    pub repetitions: usize,
}

/// The figure's points with their repetitions merged; `None` when the sweep has no
/// repetitions or the figure shows them apart (on x or as its series).
pub fn merged(spec: &PlotSpec, rows: &[Value], params: &[String]) -> Option<Merged> {
    let repeated = |c: &String| REPEATED.contains(&c.as_str());
    // A point's index differs between its repetitions: on x it draws them apart too.
    let apart =
        repeated(&spec.x) || spec.x == super::POINT || spec.series.as_ref().is_some_and(repeated);
    if apart || !params.iter().any(|p| p == REPEATED[0]) {
        return None;
    }
    // A point is its parameters but the repetition's own.
    let point: Vec<&String> = params.iter().filter(|p| !repeated(p)).collect();
    let mut groups: Vec<Vec<&Value>> = Vec::new();
    let mut group_of: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for row in rows {
        let key = point.iter().map(|p| as_label(cell(row, p))).collect();
        let g = *group_of.entry(key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(row);
    }
    let mut merged = spec.clone();
    merged.error = (spec.y.iter())
        .map(|y| format!("{y} (sd over repetitions)"))
        .collect();
    let rows = groups
        .iter()
        .map(|g| merge(spec, &merged.error, g, params))
        .collect();
    let repetitions = groups.iter().map(Vec::len).max().unwrap_or(0);
    Some(Merged {
        spec: merged,
        rows,
        repetitions,
    })
}

/// One point's row: the first measured repetition's, with each y column (and x, when it is
/// a result) replaced by its mean over the measured repetitions, and the standard
/// deviation of each y in `errors`. A point refused in every repetition stays refused.
fn merge(spec: &PlotSpec, errors: &[String], group: &[&Value], params: &[String]) -> Value {
    let measured: Vec<&Value> = group.iter().copied().filter(|r| !refused(r)).collect();
    let Some(first) = measured.first().and_then(|r| r.as_object()) else {
        return group[0].clone();
    };
    let mut row: Map<String, Value> = first.clone();
    row.insert(MEASURED.to_owned(), measured.len().into());
    if !params.contains(&spec.x)
        && let Some((mean, _)) = mean_and_sd(&measured, &spec.x)
    {
        row.insert(spec.x.clone(), mean.into());
    }
    for (y, error) in spec.y.iter().zip(errors) {
        if let Some((mean, sd)) = mean_and_sd(&measured, y) {
            row.insert(y.clone(), mean.into());
            row.insert(error.clone(), sd.into());
        }
    }
    Value::Object(row)
}

/// The Markdown table of what a figure of repeated points draws: each point's x (and
/// series), its repetitions measured, and each y's mean and standard deviation.
pub fn drawn_table(m: &Merged) -> String {
    let spec = &m.spec;
    let mut columns = vec![spec.x.clone()];
    columns.extend(spec.series.iter().cloned());
    columns.push(MEASURED.to_owned());
    for (y, sd) in spec.y.iter().zip(&spec.error) {
        columns.extend([y.clone(), sd.clone()]);
    }
    let mut md =
        "\n## Drawn: each point's mean and standard deviation over its measured repetitions\n\n"
            .to_owned();
    md.push_str(&format!(
        "| {} |\n|{}\n",
        columns.join(" | "),
        "---|".repeat(columns.len())
    ));
    for row in &m.rows {
        let cells: Vec<String> = columns.iter().map(|c| format_cell(cell(row, c))).collect();
        md.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    md
}

/// The mean of `column` over the rows that hold a number there, and the sample standard
/// deviation (0 for a single value); `None` if no row does.
fn mean_and_sd(rows: &[&Value], column: &str) -> Option<(f64, f64)> {
    let values: Vec<f64> = rows
        .iter()
        .filter_map(|r| as_number(cell(r, column)))
        .collect();
    let n = values.len() as f64;
    if values.is_empty() {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n;
    let sd = match values.len() {
        1 => 0.0,
        _ => (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt(),
    };
    Some((mean, sd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> PlotSpec {
        PlotSpec {
            name: "f".into(),
            title: "t".into(),
            x: "queries.skew".into(),
            y: vec!["batch_time_us.mean".into()],
            y_names: vec![],
            error: vec!["batch_time_us.stddev".into()],
            series: Some("partition.partitioner".into()),
            x_label: None,
            y_label: Some("us".into()),
            stacked: false,
        }
    }

    fn row(skew: f64, partitioner: &str, repetition: u32, time: f64) -> Value {
        json!({"queries.skew": skew, "partition.partitioner": partitioner,
               "repetition": repetition, "seed": 100 + repetition,
               "batch_time_us.mean": time, "batch_time_us.stddev": 1.0})
    }

    #[test]
    fn repetitions_merge_into_their_mean_and_standard_deviation() {
        let params: Vec<String> = [
            "queries.skew",
            "partition.partitioner",
            "repetition",
            "seed",
        ]
        .map(String::from)
        .to_vec();
        let rows = vec![
            row(0.6, "a", 0, 10.0),
            row(0.6, "a", 1, 14.0),
            row(0.6, "b", 0, 5.0),
            row(0.6, "b", 1, 5.0),
            row(1.0, "a", 0, 20.0),
            json!({"queries.skew": 1.0, "partition.partitioner": "a", "repetition": 1,
                   "seed": 101, "refused.reason": "does not fit"}),
        ];
        let m = merged(&spec(), &rows, &params).expect("the sweep repeats");
        assert_eq!(m.repetitions, 2);
        assert_eq!(m.rows.len(), 3, "one row per point");
        let sd = &m.spec.error[0];
        let at = |i: usize, c: &str| m.rows[i][c].as_f64().unwrap();
        // 10 and 14: mean 12, sample sd sqrt(8).
        assert_eq!(at(0, "batch_time_us.mean"), 12.0);
        assert_eq!(at(0, sd), 8f64.sqrt());
        assert_eq!((at(1, "batch_time_us.mean"), at(1, sd)), (5.0, 0.0));
        // The refused repetition is left out: one measured value, no spread.
        assert_eq!((at(2, "batch_time_us.mean"), at(2, sd)), (20.0, 0.0));
        // Drawn apart when the figure asks for it, and untouched without repetitions.
        let mut apart = spec();
        apart.series = Some("seed".into());
        assert!(merged(&apart, &rows, &params).is_none());
        let mut by_point = spec();
        by_point.x = "point".into();
        assert!(merged(&by_point, &rows, &params).is_none());
        assert!(merged(&spec(), &rows, &params[..2]).is_none());
        // Drawn: one marker per measured point, each repetition a row of the table.
        let (svg, md) = super::super::draw(&spec(), &rows, &params);
        assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
        assert!(svg.contains("t, mean of 2 repetitions (1 of 6 runs refused, see the table)"));
        assert!(md.contains("| queries.skew | partition.partitioner | repetition |"));
        // Every run, then every point as drawn, with its repetitions measured.
        assert_eq!(
            md.lines().filter(|l| l.starts_with("| 0.6 ")).count(),
            4 + 2
        );
        assert!(md.contains("| 0.6 | a | 2 | 12 | 2.8284 |"), "{md}");
        assert!(md.contains("| 1 | a | 1 | 20 | 0 |"), "{md}");
    }
}
