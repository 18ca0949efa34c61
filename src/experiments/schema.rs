//! JSON Schemas (draft 2020-12) of pimdes's JSON outputs and input files, generated from the
//! types that write and read them, so a schema cannot drift from the code: `pimdes schema
//! NAME` prints one, `docs/schema/` holds them (a test keeps those files equal to these).

use super::microbench::MicrobenchReport;
use super::partition::PartitionReport;
use super::run::RunReport;
use crate::machine::RawMachine;
use crate::workload::spec::RawWorkload;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Value, json};

/// What has a schema: four reports (`--json` of `run`, `partition`, `microbench`,
/// `sensitivity`), a sweep directory's `sweep.json` and refused-point files, and the two
/// input files.
pub const NAMES: [&str; 8] = [
    "run",
    "partition",
    "microbench",
    "sensitivity",
    "sweep-index",
    "sweep-refused",
    "machine",
    "workload",
];

/// The schema called `name` (one of [`NAMES`]), as pretty JSON with a final newline.
pub fn schema(name: &str) -> Option<String> {
    let mut text = serde_json::to_string_pretty(&schema_value(name)?).expect("a schema serialises");
    text.push('\n');
    Some(text)
}

/// The schema called `name` (one of [`NAMES`]).
pub fn schema_value(name: &str) -> Option<Value> {
    Some(match name {
        "run" => run_schema(),
        "partition" => output::<PartitionReport>(),
        "microbench" => output::<MicrobenchReport>(),
        "sensitivity" => output::<super::sensitivity::Study>(),
        "sweep-index" => output::<super::sweep::SweepIndex>(),
        "sweep-refused" => output::<super::sweep::RefusedPoint>(),
        "machine" => input::<RawMachine>(),
        "workload" => input::<RawWorkload>(),
        _ => return None,
    })
}

fn output<T: schemars::JsonSchema>() -> Value {
    let generator = SchemaGenerator::new(SchemaSettings::draft2020_12().for_serialize());
    generator.into_root_schema_for::<T>().to_value()
}

fn input<T: schemars::JsonSchema>() -> Value {
    let generator = SchemaGenerator::new(SchemaSettings::draft2020_12().for_deserialize());
    generator.into_root_schema_for::<T>().to_value()
}

/// The run report, with each index's own keys required where `index` names that index.
fn run_schema() -> Value {
    let mut generator = SchemaGenerator::new(SchemaSettings::draft2020_12().for_serialize());
    let by_index: Vec<Value> = crate::index::report_schemas(&mut generator)
        .into_iter()
        .map(|(name, keys)| {
            json!({
                "if": {"properties": {"index": {"const": name}}},
                "then": keys.to_value(),
            })
        })
        .collect();
    let mut root = generator.into_root_schema_for::<RunReport>().to_value();
    root["allOf"] = Value::Array(by_index);
    root
}
