//! A randomized soak in the style of TigerBeetle's VOPR: from one seed, draw a small
//! machine, workload, index, partitioner, policies and host protocol (as `--set` overrides
//! of two shipped files, so every case is also a plain `pimdes run` command line), run it on
//! one thread and on two, and check the invariants every run must keep:
//!
//! - every answer verified against the plain reference;
//! - the batch-time breakdown adds up both ways (stages + waiting, and cpu + communication
//!   + pim + waiting), and simulated times are ordered (latency and kernel percentiles);
//! - imbalance factors at least 1;
//! - the same report on one thread and on two (the `host` block aside);
//! - where warm-up batches may go unsimulated (B+-Forest, one batch in flight, closed
//!   arrivals), the same report with `batches.simulate_warmup = false` (the configuration
//!   aside).
//!
//! A case the drawn inputs make infeasible (a partition that cannot meet its cap, data that
//! does not fit in MRAM) is bad input, counted apart, not a failure. A failure names the
//! case's seed: `pimdes soak --seed N --cases 1` reruns it alone.

use crate::config::Override;
use crate::error::Error;
use crate::experiments::compare::first_difference;
use crate::experiments::estimate::{Limits, check_run};
use crate::experiments::partition::choose_partitioner;
use crate::experiments::run::{RunReport, Silent, run};
use crate::machine::Machine;
use crate::rng::{Purpose, stream};
use crate::workload::Workload;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// The files every case overrides (embedded, so the soak needs no files).
pub const MACHINE_FILE: &str = "machines/paper-2rank.toml";
pub const WORKLOAD_FILE: &str = "workloads/tiny.toml";
const MACHINE_TEXT: &str = include_str!("../../machines/paper-2rank.toml");
const WORKLOAD_TEXT: &str = include_str!("../../workloads/tiny.toml");

/// A case above this work is refused by the estimate (about a second of simulation).
const LIMITS: Limits = Limits {
    max_host_bytes: Some(2 << 30),
    max_events: 3_000_000,
};

/// One drawn case: the overrides of [`MACHINE_FILE`] and [`WORKLOAD_FILE`].
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub seed: u64,
    pub sets: Vec<String>,
}

impl Case {
    /// The `pimdes run` command line that runs this case.
    pub fn command_line(&self) -> String {
        let sets: String = self.sets.iter().map(|s| format!(" --set '{s}'")).collect();
        format!("pimdes run --machine {MACHINE_FILE} --workload {WORKLOAD_FILE}{sets}")
    }
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Ran, and every invariant held.
    Held,
    /// The drawn inputs are infeasible or too large: the input error's text.
    Refused(String),
    /// An invariant broke, a simulator bug was reported, or it panicked: what happened.
    Failed(String),
}

fn pick<'a, T>(rng: &mut ChaCha8Rng, from: &'a [T]) -> &'a T {
    &from[rng.random_range(0..from.len())]
}

/// Draws case `seed`: every choice from the seed alone.
pub fn draw(seed: u64) -> Case {
    let mut rng = stream(seed, Purpose::Soak, 0);
    let pim_tree = rng.random_range(0..5u32) == 0;
    let (mut sets, dpus) = draw_machine(&mut rng);
    sets.extend(draw_workload(&mut rng, pim_tree));
    sets.extend(draw_protocol(&mut rng, pim_tree));
    // Drawn last, so that the draws before it are those of the cases before it was added.
    sets.extend(draw_deviation(&mut rng, dpus));
    Case { seed, sets }
}

/// A ZcAmp deviation in one case of four, of one of the drawn machine's `dpus` base
/// partitions (which may hold no chunk, then refused), or in one such case of eight of a base
/// partition the machine does not have (refused).
fn draw_deviation(rng: &mut ChaCha8Rng, dpus: u32) -> Vec<String> {
    if rng.random_range(0..4u32) != 0 {
        return Vec::new();
    }
    let base = match rng.random_range(0..8u32) {
        0 => rng.random_range(dpus..dpus + 16),
        _ => rng.random_range(0..dpus),
    };
    vec![
        format!("deviation.base_partition={base}"),
        format!("deviation.factor={}", pick(rng, &[0.5, 2.0, 10.0])),
    ]
}

/// The machine's overrides, and its DPU count.
fn draw_machine(rng: &mut ChaCha8Rng) -> (Vec<String>, u32) {
    let ranks = rng.random_range(1..=3u32);
    let dpus = rng.random_range(1..=(ranks * 16));
    let sets = vec![
        format!("machine.ranks={ranks}"),
        format!("machine.usable_dpus={dpus}"),
        format!("machine.host.threads={}", rng.random_range(1..=8u32)),
        format!(
            "machine.transfer.host_cap_cpu_dpu_gb_per_s={}",
            pick(rng, &[2.0, 7.0, 200.0])
        ),
        format!(
            "machine.transfer.host_cap_dpu_cpu_gb_per_s={}",
            pick(rng, &[2.0, 4.5, 200.0])
        ),
        format!("machine.dpu.clock_mhz={}", pick(rng, &[100, 350, 1000])),
    ];
    (sets, dpus)
}

fn draw_workload(rng: &mut ChaCha8Rng, pim_tree: bool) -> Vec<String> {
    let kind = *pick(rng, &["get", "predecessor", "range-count-if", "range-max"]);
    let pairs = rng.random_range(2_000..=60_000u64);
    let mut sets = vec![
        format!("data.pairs={pairs}"),
        format!("queries.kind=\"{kind}\""),
        format!("queries.batch_size={}", rng.random_range(20..=3_000u64)),
        format!(
            "queries.skew={}",
            pick(rng, &[0.0, 0.5, 0.99, 1.0, 1.2, 1.5])
        ),
        format!(
            "queries.distribution=\"{}\"",
            pick(rng, &["zipf-composite", "zipf-slices"])
        ),
        format!("queries.range_pairs={}", rng.random_range(1..=200u64)),
        format!("batches.warmup={}", rng.random_range(1..=2u32)),
        format!("batches.measured={}", rng.random_range(1..=3u32)),
        format!("run.tasklets={}", rng.random_range(1..=16u32)),
        format!(
            "run.evaluation=\"{}\"",
            pick(rng, &["tasklet-static", "tasklet-dynamic"])
        ),
        format!("partition.chunk_pairs={}", rng.random_range(20..=300u64)),
        format!("partition.alpha={}", rng.random_range(2..=20u64)),
    ];
    let partitioners = crate::partition::names();
    sets.push(format!(
        "partition.partitioner=\"{}\"",
        pick(rng, &partitioners)
    ));
    if pim_tree {
        sets.push("run.index=\"pim-tree\"".into());
    }
    sets
}

/// The host protocol; PIM-tree plans its batches up front, so it takes closed arrivals.
fn draw_protocol(rng: &mut ChaCha8Rng, pim_tree: bool) -> Vec<String> {
    let mut sets = vec![format!(
        "run.batches_in_flight={}",
        rng.random_range(1..=3u32)
    )];
    if rng.random_range(0..2u32) == 0 {
        sets.push("run.launch=\"async\"".into());
        sets.push(format!(
            "run.poll_interval_us={}",
            pick(rng, &[1.0, 10.0, 100.0])
        ));
    }
    if !pim_tree && rng.random_range(0..3u32) == 0 {
        sets.push("run.arrival=\"open\"".into());
        sets.push(format!(
            "run.queries_per_s={}",
            pick(rng, &[1e6, 1e8, 1e10])
        ));
    }
    sets
}

/// Runs `case` on one thread and on two and checks every invariant.
pub fn check(case: &Case) -> Outcome {
    let one = match on_threads(case, 1) {
        Ok(r) => r,
        Err(e) if e.exit_code() == crate::error::EXIT_BAD_INPUT => {
            return Outcome::Refused(e.to_string());
        }
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    if let Err(broken) = run_invariants(&one) {
        return Outcome::Failed(broken);
    }
    let two = match on_threads(case, 2) {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(format!("on two threads: {e}")),
    };
    if comparable(&one) != comparable(&two) {
        return Outcome::Failed("the reports on one and on two threads differ".into());
    }
    match warmup_skip_differs(case, &one) {
        Some(broken) => Outcome::Failed(broken),
        None => Outcome::Held,
    }
}

/// Where warm-up batches may go unsimulated (B+-Forest, one batch in flight, closed
/// arrivals), the run measures the same batches without them: what went wrong otherwise.
fn warmup_skip_differs(case: &Case, full: &RunReport) -> Option<String> {
    let eligible = |w: Workload| {
        w.index == crate::index::bforest::NAME && w.warmup_shapes_measured().is_none()
    };
    let workload = overrides(case).and_then(|o| workload_of(&o));
    if !workload.is_ok_and(eligible) {
        return None;
    }
    let mut skipping = case.clone();
    skipping.sets.push("batches.simulate_warmup=false".into());
    let measured = |r: &RunReport| {
        let mut v = comparable(r);
        if let Some(o) = v.as_object_mut() {
            o.remove("config");
            o.remove("config_fnv1a64");
        }
        v
    };
    match on_threads(&skipping, 1) {
        Ok(r) if measured(&r) == measured(full) => None,
        Ok(r) => {
            let at = first_difference(&measured(full), &measured(&r), "");
            Some(format!(
                "the report differs with the warm-up batches unsimulated, first at `{}`",
                at.unwrap_or_default()
            ))
        }
        Err(e) => Some(format!("with the warm-up batches unsimulated: {e}")),
    }
}

/// The case run on a pool of `threads` threads, panics caught as failures.
fn on_threads(case: &Case, threads: usize) -> Result<RunReport, Error> {
    let bug = |what: String| Error::Verification(what);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| bug(format!("cannot build a thread pool: {e}")))?;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.install(|| run_case(case))
    }));
    result.unwrap_or_else(|payload| Err(bug(format!("panicked: {}", panic_message(&*payload)))))
}

/// The message of a caught panic (empty when it carried no text).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

fn overrides(case: &Case) -> Result<Vec<Override>, Error> {
    let parsed = case.sets.iter().map(|s| Override::parse(s));
    Ok(parsed.collect::<Result<Vec<_>, _>>()?)
}

fn workload_of(overrides: &[Override]) -> Result<Workload, Error> {
    Ok(Workload::from_toml_str(
        WORKLOAD_FILE,
        WORKLOAD_TEXT,
        overrides,
    )?)
}

fn run_case(case: &Case) -> Result<RunReport, Error> {
    let overrides = overrides(case)?;
    let machine = Machine::from_toml_str(MACHINE_FILE, MACHINE_TEXT, &overrides)?;
    let workload = workload_of(&overrides)?;
    let partitioner = choose_partitioner(&None, &workload)?;
    check_run(&machine, &workload, &LIMITS)?;
    run(&machine, &workload, partitioner.as_ref(), &mut Silent)
        .map_err(|e| e.attributed(&machine.attribution, Some(&workload.attribution)))
}

/// The report without the simulating host's facts, which differ from run to run.
fn comparable(report: &RunReport) -> serde_json::Value {
    let mut v = serde_json::to_value(report).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("host");
    }
    v
}

/// The invariants every run report keeps; the first broken one, named.
pub fn run_invariants(r: &RunReport) -> Result<(), String> {
    let mean = r.batch_time_us.mean;
    let split = ["cpu", "communication", "pim"];
    let named = &r.breakdown_us.0;
    let sum = |keep: &dyn Fn(&str) -> bool| -> f64 {
        named.iter().filter(|(n, _)| keep(n)).map(|(_, v)| v).sum()
    };
    let stages = sum(&|n| !split.contains(&n));
    let classes = sum(&|n| split.contains(&n) || n == "waiting");
    let close = |a: f64| (a - mean).abs() <= 1e-6 * mean.max(1.0);
    let l = &r.latency_us;
    let k = &r.dpu_kernel_us;
    // B+-Forest reports its imbalance factors; PIM-tree (placement by hash) has none.
    let forest = r.index == crate::index::bforest::NAME;
    let at_least_one = |x: f64| !forest || (x.is_finite() && x >= 1.0 - 1e-9);
    let checks = [
        ("answers verified", r.answers_verified),
        ("batch time positive", mean > 0.0 && mean.is_finite()),
        ("stages + waiting = batch time", close(stages)),
        (
            "cpu + communication + pim + waiting = batch time",
            close(classes),
        ),
        (
            "latency percentiles ordered",
            0.0 <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max,
        ),
        (
            "kernel percentiles ordered",
            0.0 <= k.min && k.min <= k.p50 && k.p50 <= k.p99 && k.p99 <= k.max,
        ),
        ("batch interval positive", r.batch_interval_us.mean > 0.0),
        ("throughput positive", r.throughput_queries_per_s > 0.0),
        (
            "IF_q >= 1",
            at_least_one(r.index_f64(&["imbalance", "queries"])),
        ),
        (
            "IF_d >= 1",
            at_least_one(r.index_f64(&["imbalance", "data"])),
        ),
    ];
    match checks.iter().find(|(_, ok)| !ok) {
        Some((what, _)) => Err(format!("invariant broken: {what}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_is_drawn_from_its_seed_alone() {
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5).sets, draw(6).sets);
        let line = draw(5).command_line();
        assert!(line.starts_with("pimdes run --machine machines/paper-2rank.toml --workload workloads/tiny.toml --set 'machine.ranks="), "{line}");
    }
}
