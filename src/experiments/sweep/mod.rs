//! `pimdes sweep`: one command over the points of a manifest (see [`manifest`]), each point
//! written to its own result file in the sweep directory, atomically, so a sweep killed at
//! any moment reruns to the same files: a point whose result exists with the point's
//! configuration is not run again.
//!
//! The directory holds `sweep.json` (the index: every point's file, parameters and a hash of
//! its effective configuration), one result file per point (the command's JSON, exactly what
//! `pimdes run --out` writes), and, once collected, `results.csv` and `results.jsonl`.

pub mod collect;
pub mod manifest;

use crate::config::{InputError, Override};
use crate::error::Error;
use crate::experiments::compare::{
    Comparison, Configs, Tolerance, check_metrics, compare_across, is_refused, is_result_of,
    load_result, mark_metrics,
};
use crate::experiments::estimate::{Limits, check_partition, check_run};
use crate::experiments::partition::{EffectiveConfig, run_partition};
use crate::experiments::run::{Silent, run};
use crate::machine::Machine;
use crate::output::{OutputTarget, legacy_temporary_target, temporary_target};
use crate::partition::{self, Partitioner};
use crate::workload::Workload;
pub use manifest::{Manifest, Point, SweepCommand};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// The index file of a sweep directory.
pub const INDEX_FILE: &str = "sweep.json";
/// The version of the index's format.
pub const INDEX_FORMAT: u32 = 1;

/// `sweep.json`: what `--collect` and `compare` need without the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepIndex {
    pub format: u32,
    pub command: String,
    /// The manifest that wrote the sweep: its file and the directory holding it. Absent in
    /// indexes written before 2026-12-06, which are taken for any manifest's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// Parameter names in axis order (the points' `parameters` objects are sorted by key).
    pub parameters: Vec<String>,
    pub points: Vec<IndexPoint>,
    /// The manifest's figures, for `pimdes plot`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plots: Vec<crate::experiments::plot::PlotSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IndexPoint {
    pub point: usize,
    pub file: String,
    pub parameters: serde_json::Map<String, Value>,
    /// FNV-1a (64 bits, hex) of the point's effective configuration as compact JSON with
    /// sorted keys: how `--collect` recognises a stale result.
    pub config_fnv1a64: String,
}

/// FNV-1a, 64 bits: a stable hash with no dependency, enough to tell configurations apart.
pub fn fnv1a64(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The hash of a result's `config` value.
pub fn config_hash(config: &Value) -> String {
    fnv1a64(config.to_string().as_bytes())
}

/// Loads a manifest; the workload's seed (for repetitions) is read with the manifest's `set`.
pub fn load_manifest(path: &Path) -> Result<Manifest, InputError> {
    manifest::load(path, &|workload, sets| {
        Ok(Workload::load(workload, sets)?.seed)
    })
}

/// What one point runs on, and the configuration its result must carry.
pub struct PointInputs {
    pub machine: Machine,
    pub workload: Workload,
    pub partitioner: Box<dyn Partitioner>,
    /// The effective configuration as it reads back from a result file.
    pub config: Value,
}

/// An error of point `p` (a machine limit named by its key first), with an input error
/// that one of the point's `--set`s caused told against the manifest.
fn point_error(m: &Manifest, p: &Point, inputs: &PointInputs, e: Error) -> Error {
    let workload = Some(&inputs.workload.attribution);
    match e.attributed(&inputs.machine.attribution, workload) {
        Error::Input(e) => Error::Input(blamed_on_manifest(m, p, e)),
        other => other,
    }
}

/// An input error that one of point `p`'s `--set`s caused, told against the manifest that
/// wrote it (the user typed no `--set`).
fn blamed_on_manifest(m: &Manifest, p: &Point, e: InputError) -> InputError {
    // A rule over several keys names each `--set` ("--set A and --set B").
    let Some(sets) = e.origin.strip_prefix("--set ") else {
        return e;
    };
    let texts: Vec<&str> = sets.split(" and --set ").collect();
    let key_of = |text: &str| text.split_once('=').map_or(text, |(k, _)| k).to_owned();
    // Each as the point's parameter or the manifest's `[set]`, which every point shares.
    let is_param = |text: &&str| p.params.iter().any(|(k, _)| *k == key_of(text));
    let (params, fixed): (Vec<&str>, Vec<&str>) = texts.into_iter().partition(is_param);
    let mut named: Vec<String> = params.iter().map(|t| format!("`{t}`")).collect();
    named.extend(fixed.iter().map(|t| format!("[set] `{t}`")));
    // The key as the manifest writes it: a machine file's keys below `machine.`.
    let key = e.key.as_deref().map(|k| {
        let machine = format!("machine.{k}");
        match (params.iter().chain(&fixed)).any(|t| crate::config::covers(&key_of(t), &machine)) {
            true => machine,
            false => k.to_owned(),
        }
    });
    let reason = format!("point {} ({}): {}", p.index, named.join(", "), e.reason);
    InputError::new(&m.origin, key.as_deref(), reason)
}

pub fn point_inputs(m: &Manifest, p: &Point) -> Result<PointInputs, Error> {
    let blame = |e| blamed_on_manifest(m, p, e);
    let overrides = p
        .sets
        .iter()
        .map(|s| Override::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(blame)?;
    let machine = Machine::load(&m.machine, &overrides).map_err(blame)?;
    let workload = Workload::load(&m.workload, &overrides).map_err(blame)?;
    let name = m.partitioner.as_deref().unwrap_or(&workload.partitioner);
    let partitioner = partition::by_name(name).ok_or_else(|| {
        let names = partition::names().join(", ");
        blame(workload.attribution.error_at(
            "partition.partitioner",
            format!("unknown partitioner `{name}`; expected one of: {names}"),
        ))
    })?;
    let config = EffectiveConfig::of(&machine, &workload, partitioner.name());
    let config = serde_json::to_string(&config)
        .and_then(|text| serde_json::from_str(&text))
        .map_err(|e| Error::Output {
            path: p.file.clone(),
            reason: format!("cannot serialise the configuration: {e}"),
        })?;
    Ok(PointInputs {
        machine,
        workload,
        partitioner,
        config,
    })
}

/// The index of a manifest's sweep.
pub fn index(m: &Manifest) -> Result<SweepIndex, Error> {
    let mut points = Vec::new();
    for p in &m.points {
        let config = point_inputs(m, p)?.config;
        let parameters = p
            .params
            .iter()
            .map(|(k, v)| Ok((k.clone(), serde_json::to_value(v)?)))
            .collect::<Result<_, serde_json::Error>>()
            .map_err(|e| Error::Output {
                path: INDEX_FILE.into(),
                reason: e.to_string(),
            })?;
        points.push(IndexPoint {
            point: p.index,
            file: p.file.clone(),
            parameters,
            config_fnv1a64: config_hash(&config),
        });
    }
    manifest::check_line_x(&m.plots, &m.points, &m.origin)?;
    Ok(SweepIndex {
        format: INDEX_FORMAT,
        command: m.command.name().to_owned(),
        manifest: Some(m.name.clone()),
        parameters: m.param_names.clone(),
        points,
        plots: m.plots.clone(),
    })
}

/// Reads `DIR/sweep.json`.
pub fn read_index(dir: &Path) -> Result<SweepIndex, InputError> {
    let path = dir.join(INDEX_FILE);
    let origin = path.display().to_string();
    let text = crate::config::read_json_file(&path).map_err(|e| {
        // An experiment's directory holds its sweeps one level down, one per part.
        let parts: Vec<String> = crate::experiments::catalog::all_parts()
            .iter()
            .map(|part| dir.join(part))
            .filter(|sub| sub.join(INDEX_FILE).is_file())
            .map(|sub| sub.display().to_string())
            .collect();
        let hint = match parts.is_empty() {
            true => format!("is {} a sweep directory?", dir.display()),
            false => format!(
                "{} is an experiment's directory; its sweeps are {}",
                dir.display(),
                parts.join(" and ")
            ),
        };
        InputError::plain(&origin, format!("{e}; {hint}"))
    })?;
    let index: SweepIndex = serde_json::from_str(&text)
        .map_err(|e| InputError::plain(&origin, format!("not a sweep index: {e}")))?;
    for p in &index.points {
        let name = std::path::Path::new(&p.file).file_name();
        if name != Some(std::ffi::OsStr::new(&p.file)) || p.file.contains('\\') {
            return Err(InputError::plain(
                &origin,
                format!(
                    "point {}'s file `{}` is not a file name in the sweep's directory",
                    p.point, p.file
                ),
            ));
        }
    }
    Ok(index)
}

/// Point `p`'s result in sweep directory `dir`, checked to be that point's (its
/// configuration's hash is the index's): a stale result of another sweep is refused.
pub(crate) fn load_point(dir: &Path, p: &IndexPoint) -> Result<Value, InputError> {
    let path = dir.join(&p.file);
    let result = load_result(&path)?;
    if config_hash(&result["config"]) != p.config_fnv1a64 {
        return Err(InputError::plain(
            path.display().to_string(),
            format!(
                "the result's configuration is not point {}'s (stale result of another sweep?); rerun the sweep",
                p.point
            ),
        ));
    }
    Ok(result)
}

/// What names a sweep's file in an error about writing it.
pub(crate) const SWEEP_FILE: &str = "the sweep's file";

/// Whether `path` is a plain file that holds `bytes` already (nothing to write).
pub(crate) fn holds(path: &Path, bytes: &[u8]) -> bool {
    let plain_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
    plain_file && std::fs::read(path).is_ok_and(|old| old == bytes)
}

/// Writes `text` to `path` atomically (see [`crate::output::write_atomically`]), unless
/// the file holds those bytes already: a sweep that is up to date rewrites nothing, and so
/// runs in a directory it may only read. Says whether it wrote.
pub fn write_atomically(path: &Path, text: &str) -> Result<bool, Error> {
    if holds(path, text.as_bytes()) {
        return Ok(false);
    }
    let target = OutputTarget {
        flag: SWEEP_FILE,
        path,
    };
    crate::output::write_atomically(target, text.as_bytes())?;
    Ok(true)
}

/// Removes temporary files a killed sweep left beside its points' files, its tables and its
/// figures; not those of a process still running (a `--point` of the same sweep).
pub fn remove_stale_temps(dir: &Path, m: &Manifest) -> Result<(), Error> {
    let fail = |e: std::io::Error| Error::Output {
        path: dir.display().to_string(),
        reason: e.to_string(),
    };
    let mut ours: Vec<String> = m.points.iter().map(|p| p.file.clone()).collect();
    ours.push(INDEX_FILE.to_owned());
    ours.extend(collected_files(m));
    for entry in std::fs::read_dir(dir).map_err(fail)? {
        let entry = entry.map_err(fail)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // `.FILE.tmp-PID-N`, and `FILE.tmp-PID-N` of sweeps written by earlier versions
        // (only with such a tail: `results.csv.tmp-keep` is a user's file).
        let target = temporary_target(&name).or_else(|| legacy_temporary_target(&name));
        let stale = target.is_some_and(|file| ours.iter().any(|o| o == file))
            && !crate::output::written_by_a_live_process(&name);
        if stale {
            std::fs::remove_file(entry.path()).map_err(fail)?;
        }
    }
    Ok(())
}

/// How a point went.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Its result existed with its configuration; `other_build` names the pimdes build that
    /// wrote it when that is not this one (its numbers are that build's).
    UpToDate { other_build: Option<String> },
    /// It ran; the command's warnings.
    Ran { warnings: Vec<String> },
    /// The simulator refused its configuration (the manifest's `record_refused`); the
    /// reason was written as its result.
    Refused { reason: String },
}

/// The result file of a point the simulator refused: why, and the configuration, so that
/// collecting, plotting and comparing see it as that point's result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RefusedPoint {
    pub schema_version: u32,
    pub refused: Refusal,
    pub version: &'static str,
    pub git_commit: Option<&'static str>,
    pub command_line: String,
    pub config_fnv1a64: String,
    pub config: Value,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Refusal {
    /// The key to change, when the error names one.
    pub key: Option<String>,
    pub reason: String,
}

impl Refusal {
    /// The refusal of an exit-2 error (see [`Error::exit_code`]).
    fn of(error: &Error) -> Refusal {
        match error {
            Error::Input(e) => Refusal {
                key: e.key.clone(),
                reason: e.reason.clone(),
            },
            other => Refusal {
                key: None,
                reason: other.to_string(),
            },
        }
    }
}

/// The point's result at `path`, if it is up to date: a complete result of this report
/// version, this configuration and the manifest's command (or the record of its refusal,
/// when the manifest records refusals).
fn up_to_date(path: &Path, config: &Value, m: &Manifest) -> Option<Value> {
    let result = load_result(path).ok()?;
    let current = result["schema_version"] == crate::experiments::REPORT_SCHEMA_VERSION;
    let kind_ok = match is_refused(&result) {
        true => m.record_refused,
        false => is_result_of(&result, m.command.name()),
    };
    (current && result["config"] == *config && kind_ok).then_some(result)
}

/// The pimdes build that wrote `result`, when it is known not to be this one: another
/// version, or another commit when both builds know theirs. (Two builds of one commit with
/// uncommitted changes, `-dirty`, cannot be told apart; flagging every such result would
/// flag every resumed sweep of a working tree.)
pub fn other_build(result: &Value) -> Option<String> {
    let version = result["version"].as_str().unwrap_or("?");
    let commit = result["git_commit"].as_str();
    let ours = crate::experiments::git_commit();
    let differs = version != crate::experiments::VERSION
        || matches!((commit, ours), (Some(a), Some(b)) if a != b);
    differs.then(|| build_name(version, commit))
}

/// A build as `pimdes 0.1.0 at 0050cc631237` (the commit cut to 12 digits, `-dirty` kept).
pub fn build_name(version: &str, commit: Option<&str>) -> String {
    match commit {
        Some(c) => {
            let (hash, dirty) = c.split_once('-').map_or((c, ""), |(h, _)| (h, "-dirty"));
            format!("pimdes {version} at {}{dirty}", &hash[..hash.len().min(12)])
        }
        None => format!("pimdes {version}"),
    }
}

fn pretty(value: &impl Serialize, path: &Path) -> Result<String, Error> {
    let mut s = serde_json::to_string_pretty(value).map_err(|e| Error::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    s.push('\n');
    Ok(s)
}

/// The files a whole sweep writes after its points: its tables, and each figure's SVG and
/// Markdown.
fn collected_files(m: &Manifest) -> Vec<String> {
    let mut files = vec![collect::CSV_FILE.to_owned(), collect::JSONL_FILE.to_owned()];
    for plot in &m.plots {
        files.extend(["svg", "md"].map(|ext| format!("{}.{ext}", plot.name)));
    }
    files
}

/// Refuses, before any point runs, a file that the collection after the points could not
/// replace (a directory or a link where `results.csv` or a figure goes): found now, not
/// after the simulation.
pub fn check_collected_files(m: &Manifest, dir: &Path) -> Result<(), InputError> {
    let paths: Vec<PathBuf> = collected_files(m).iter().map(|f| dir.join(f)).collect();
    let targets: Vec<OutputTarget> = (paths.iter())
        .map(|path| OutputTarget {
            flag: SWEEP_FILE,
            path,
        })
        .collect();
    crate::output::check_file_types(&targets)
}

/// Runs one point unless its result is up to date. `reproduce` names the command line that
/// reruns the point alone, for the report of a simulator bug. `None`: the point did not
/// start, the sweep having stopped while it waited for memory.
pub fn run_point(
    m: &Manifest,
    p: &Point,
    dir: &Path,
    budget: &MemoryBudget,
    reproduce: &dyn Fn(&Point) -> String,
) -> Result<Option<Outcome>, Error> {
    let inputs = point_inputs(m, p)?;
    let path = dir.join(&p.file);
    if let Some(result) = up_to_date(&path, &inputs.config, m) {
        let other_build = other_build(&result);
        return Ok(Some(Outcome::UpToDate { other_build }));
    }
    // A file the result could not replace (a directory, a file this user may not write) is
    // found before the point runs, not after.
    let target = OutputTarget {
        flag: SWEEP_FILE,
        path: &path,
    };
    crate::output::check_targets(&[target], &[])?;
    let seed = Some(inputs.workload.seed);
    let wrap = |e: Error| point_error(m, p, &inputs, e).reproducible(|| reproduce(p), seed);
    let (w, pa) = (&inputs.workload, inputs.partitioner.as_ref());
    // The host's limits refuse a point for this host, not for its configuration: never
    // recorded, always an error. What earlier points freed is returned to the system first.
    crate::experiments::estimate::release_free_memory();
    let result = match m.command {
        SweepCommand::Run => {
            let estimate =
                check_run(&inputs.machine, w, &budget.limits()).map_err(|e| wrap(e.into()))?;
            let Some(_reserved) = budget.reserve(estimate.host_bytes) else {
                return Ok(None);
            };
            run(&inputs.machine, w, pa, &mut Silent).and_then(|mut report| {
                report.command_line = Some(reproduce(p));
                Ok((pretty(&report, &path)?, report.warnings))
            })
        }
        SweepCommand::Partition => {
            check_partition(&inputs.machine, w, &Limits::host()).map_err(|e| wrap(e.into()))?;
            run_partition(&inputs.machine, w, pa).and_then(|mut report| {
                report.command_line = Some(reproduce(p));
                Ok((pretty(&report, &path)?, report.warnings))
            })
        }
    };
    let (text, outcome) = match result {
        Ok((text, warnings)) => (text, Outcome::Ran { warnings }),
        Err(e) if m.record_refused && e.exit_code() == crate::error::EXIT_BAD_INPUT => {
            refused_point(&inputs, e, reproduce(p), &path)?
        }
        Err(e) => return Err(wrap(e)),
    };
    write_atomically(&path, &text)?;
    Ok(Some(outcome))
}

/// The file of a point the simulator refused, and its outcome.
fn refused_point(
    inputs: &PointInputs,
    e: Error,
    command_line: String,
    path: &Path,
) -> Result<(String, Outcome), Error> {
    // A kernel's machine limit is named by the key that set it.
    let e = e.attributed(
        &inputs.machine.attribution,
        Some(&inputs.workload.attribution),
    );
    let refused = RefusedPoint {
        schema_version: crate::experiments::REPORT_SCHEMA_VERSION,
        refused: Refusal::of(&e),
        version: crate::experiments::VERSION,
        git_commit: crate::experiments::git_commit(),
        command_line,
        config_fnv1a64: config_hash(&inputs.config),
        config: inputs.config.clone(),
    };
    let reason = e.to_string();
    Ok((pretty(&refused, path)?, Outcome::Refused { reason }))
}

/// The host memory that the points a sweep runs at once share. A point whose estimate does
/// not fit alone (in the memory available now, plus the estimates of the points running) is
/// refused, as a run would be; one that fits alone but not beside the points running waits
/// until its estimate and theirs fit the memory available when the sweep began, and its
/// own the memory available now. So `--jobs` never puts more at once than the
/// host had. (Checking each point against the memory available as it starts let points
/// that start together, before any has touched its memory, pass together and exhaust it.)
pub struct MemoryBudget {
    /// The memory available when the sweep began; `None` where it cannot be read, and then
    /// nothing waits.
    start_bytes: Option<u64>,
    /// The estimates of the points running, how many run, and whether the sweep stopped.
    held: Mutex<Held>,
    changed: Condvar,
}

/// What the points running hold of a [`MemoryBudget`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Held {
    reserved_bytes: u64,
    running: usize,
    stopped: bool,
}

impl MemoryBudget {
    pub fn of_host() -> MemoryBudget {
        MemoryBudget::starting_with(crate::experiments::estimate::available_bytes())
    }

    fn starting_with(start_bytes: Option<u64>) -> MemoryBudget {
        MemoryBudget {
            start_bytes,
            held: Mutex::new(Held::default()),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The limits a point is checked against alone: the memory available now and what
    /// the points running hold.
    fn limits(&self) -> Limits {
        let reserved = self.lock().reserved_bytes;
        let now = crate::experiments::estimate::available_bytes();
        Limits {
            max_host_bytes: now.map(|a| a.saturating_add(reserved)),
            ..Limits::host()
        }
    }

    /// Holds `bytes` of the budget until the reservation is dropped, waiting while the
    /// points running leave too little (never while none runs); `None` if the sweep
    /// stopped meanwhile.
    fn reserve(&self, bytes: u64) -> Option<Reservation<'_>> {
        let mut held = self.lock();
        loop {
            if held.stopped {
                return None;
            }
            let now = crate::experiments::estimate::available_bytes();
            if fits(*held, bytes, self.start_bytes, now) {
                break;
            }
            // Also woken now and then: other processes change the memory available.
            let wait = std::time::Duration::from_secs(1);
            held = (self.changed.wait_timeout(held, wait))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        held.reserved_bytes = held.reserved_bytes.saturating_add(bytes);
        held.running += 1;
        Some(Reservation {
            budget: self,
            bytes,
        })
    }

    /// Stops the sweep: no point waiting starts.
    fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    fn stopped(&self) -> bool {
        self.lock().stopped
    }
}

/// Whether a point estimated at `bytes` may start beside the points running: always when
/// none runs; else when the estimates together fit the memory available at the start and
/// the new one fits the memory available `now`. (How much of their estimates the points
/// running have yet to touch is not known, so `now` is held against the new point alone,
/// as each point was before the budget: a process that grows while points run can still
/// take memory they will need.)
fn fits(held: Held, bytes: u64, start: Option<u64>, now: Option<u64>) -> bool {
    let together = held.reserved_bytes.saturating_add(bytes);
    let beside_start = start.is_none_or(|s| together <= s);
    let in_now = now.is_none_or(|n| bytes <= n);
    held.running == 0 || (beside_start && in_now)
}

/// A point's share of a [`MemoryBudget`], given back when dropped.
struct Reservation<'a> {
    budget: &'a MemoryBudget,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut held = self.budget.lock();
        held.reserved_bytes = held.reserved_bytes.saturating_sub(self.bytes);
        held.running -= 1;
        drop(held);
        self.budget.changed.notify_all();
    }
}

/// Runs the points `indices` on `jobs` threads; `done` hears of each point as it finishes.
/// Every point writes only its own file, so the files do not depend on `jobs`. After a
/// failure no new point starts; the error of the lowest failed point is returned.
pub fn run_points(
    m: &Manifest,
    indices: &[usize],
    dir: &Path,
    jobs: usize,
    reproduce: &(dyn Fn(&Point) -> String + Sync),
    done: &(dyn Fn(&Point, &Outcome) + Sync),
) -> Result<Vec<Outcome>, PointError> {
    let next = AtomicUsize::new(0);
    let budget = MemoryBudget::of_host();
    let results: Mutex<Vec<Option<Result<Outcome, Error>>>> =
        Mutex::new((0..indices.len()).map(|_| None).collect());
    let worker = || {
        while !budget.stopped() {
            let i = next.fetch_add(1, Ordering::SeqCst);
            let Some(&index) = indices.get(i) else { break };
            let Some(p) = m.points.get(index) else { break };
            let outcome = match run_point(m, p, dir, &budget, reproduce) {
                // Stopped while waiting for memory: not run, as a point never started.
                Ok(None) => break,
                Ok(Some(o)) => Ok(o),
                Err(e) => Err(e),
            };
            match &outcome {
                Ok(o) => done(p, o),
                Err(_) => budget.stop(),
            }
            if let Ok(mut r) = results.lock() {
                r[i] = Some(outcome);
            }
        }
    };
    std::thread::scope(|s| {
        // No more threads than points: `--jobs` is a bound, not a count to spawn.
        for _ in 0..jobs.clamp(1, indices.len().max(1)) {
            s.spawn(worker);
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut outcomes = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Some(Ok(o)) => outcomes.push(o),
            Some(Err(error)) => {
                let point = &m.points[indices[i]];
                return Err(PointError {
                    point: point.index,
                    file: point.file.clone(),
                    error,
                });
            }
            None => {}
        }
    }
    Ok(outcomes)
}

/// The first point of a sweep that failed (in the manifest's order), and why.
#[derive(Debug)]
pub struct PointError {
    pub point: usize,
    pub file: String,
    pub error: Error,
}

/// Refuses sweeps whose point files differ (or come in another order), or that hold none.
fn check_same_points(
    (base, a): (&Path, &SweepIndex),
    (new, b): (&Path, &SweepIndex),
) -> Result<(), InputError> {
    let files = |i: &SweepIndex| i.points.iter().map(|p| p.file.clone()).collect::<Vec<_>>();
    let (fa, fb) = (files(a), files(b));
    let both = format!("{} and {}", base.display(), new.display());
    if fa != fb {
        let only = fa
            .iter()
            .find(|f| !fb.contains(f))
            .map(|f| format!("`{f}` is only in {}", base.display()))
            .or_else(|| {
                fb.iter()
                    .find(|f| !fa.contains(f))
                    .map(|f| format!("`{f}` is only in {}", new.display()))
            })
            .unwrap_or_else(|| "the points come in another order".to_owned());
        return Err(InputError::plain(
            both,
            format!(
                "the sweeps have different points ({only}); compare sweeps of the same manifest"
            ),
        ));
    }
    if fa.is_empty() {
        return Err(InputError::plain(
            both,
            "the sweeps hold no point: nothing to compare (a CI check that compares nothing would pass)",
        ));
    }
    Ok(())
}

/// Compares two sweep directories point by point: the same point files, each pair of
/// results compared as [`crate::experiments::compare::compare_files`] compares two files.
pub fn compare_sweeps(
    base: &Path,
    new: &Path,
    tol: Tolerance,
    metrics: &[String],
    configs: Configs,
) -> Result<Comparison, InputError> {
    let (a, b) = (read_index(base)?, read_index(new)?);
    check_same_points((base, &a), (new, &b))?;
    let mut total = Comparison::default();
    // A metric is asked of the points that have metrics: a refused point has none.
    let mut held = vec![false; metrics.len()];
    let mut known = Vec::new();
    for (point_a, point_b) in a.points.iter().zip(&b.points) {
        let file = &point_a.file;
        let (pa, pb) = (base.join(file), new.join(file));
        let (ra, rb) = (load_point(base, point_a)?, load_point(new, point_b)?);
        // As for two files: the side with metrics when BASE's point was refused, so that
        // the order of the sweeps does not decide the exit code.
        let asked = if is_refused(&ra) { &rb } else { &ra };
        if !is_refused(asked) {
            known.extend(mark_metrics(asked, metrics, &mut held));
        }
        let names = (pa.display().to_string(), pb.display().to_string());
        let c = compare_across((&names.0, &ra), (&names.1, &rb), tol, metrics, configs)?;
        for change in c.config_changes {
            if !total.config_changes.contains(&change) {
                total.config_changes.push(change);
            }
        }
        total.compared += c.compared;
        total.points += 1;
        total.moved.extend(c.moved.into_iter().map(|mut m| {
            m.point = Some(file.clone());
            m
        }));
        total
            .added
            .extend(c.added.into_iter().map(|path| format!("{file}: {path}")));
    }
    let whose = format!(
        "any measured point of {} or {}",
        base.display(),
        new.display()
    );
    check_metrics(&whose, metrics, &held, &known)?;
    crate::experiments::compare::check_compared(&total, base)?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(reserved_bytes: u64, running: usize) -> Held {
        Held {
            reserved_bytes,
            running,
            stopped: false,
        }
    }

    #[test]
    fn a_point_starts_when_it_fits_beside_the_running_ones_or_none_runs() {
        assert!(
            fits(held(0, 0), 30, Some(10), Some(5)),
            "alone, whatever its size"
        );
        assert!(fits(held(6, 1), 4, Some(10), Some(8)));
        assert!(
            !fits(held(6, 1), 5, Some(10), Some(8)),
            "beyond the start's memory"
        );
        assert!(
            !fits(held(6, 1), 4, Some(10), Some(3)),
            "beyond the memory free now"
        );
        assert!(!fits(held(10, 2), 1, Some(10), Some(8)));
        assert!(
            fits(held(u64::MAX, 3), u64::MAX, None, None),
            "memory not known"
        );
    }

    #[test]
    fn a_waiting_point_starts_once_a_running_one_ends() {
        let budget = MemoryBudget::starting_with(Some(10));
        // The memory available now is the host's: hold this test's estimates far below it.
        let first = budget.reserve(6).expect("none runs");
        std::thread::scope(|s| {
            let second = s.spawn(|| {
                let _held = budget.reserve(6).expect("not stopped");
                *budget.lock()
            });
            // The second waits: 6 + 6 is above 10. (Were it not to, it would have taken
            // its share by now, and the check below would see 12.)
            std::thread::sleep(std::time::Duration::from_millis(200));
            assert_eq!(*budget.lock(), held(6, 1), "the second point waits");
            drop(first);
            assert_eq!(second.join().unwrap(), held(6, 1), "then runs alone");
        });
        assert_eq!(*budget.lock(), held(0, 0));
    }

    #[test]
    fn a_point_waiting_when_the_sweep_stops_does_not_start() {
        let budget = MemoryBudget::starting_with(Some(10));
        let first = budget.reserve(6).expect("none runs");
        std::thread::scope(|s| {
            let second = s.spawn(|| budget.reserve(6).is_none());
            std::thread::sleep(std::time::Duration::from_millis(100));
            budget.stop();
            // Room is made too: a waiting point that ignored the stop would now start
            // (and the test fail) rather than wait for ever.
            drop(first);
            assert!(second.join().unwrap(), "the waiting point gave up");
        });
        assert!(budget.reserve(1).is_none(), "nothing starts after a stop");
    }
}
