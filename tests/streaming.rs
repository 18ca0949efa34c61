//! Streamed batches (`batches.streaming`): the report of a streamed run equals the held
//! run's bit for bit, for every query kind and key law, with budgets that cut a batch into
//! many groups, windows and slabs; a wrong partial answer is caught; and what a streamed run
//! cannot take is refused.

mod common;

use common::{assert_bad, pimdes};
use pimdes::config::Override;
use pimdes::dpu::{LaunchError, LaunchReport, TaskletTimeline};
use pimdes::error::Error;
use pimdes::experiments::partition::EffectiveConfig;
use pimdes::experiments::run::{Silent, drive, run};
use pimdes::forest::batch::DpuBatch;
use pimdes::index::Index;
use pimdes::index::bforest::{BForest, Policies};
use pimdes::machine::Machine;
use pimdes::partition::by_name;
use pimdes::policies::{
    BatchEnv, Cost, EvaluationPolicy, Metrics, Part, RoutingPolicy, Shape, evaluation_policies,
    routing_policies,
};
use pimdes::system::System;
use pimdes::workload::Query;
use pimdes::workload::Workload;
use pimdes::workload::queries::Drawn;
use std::ops::Range;

/// Two ranks of 16 DPUs.
fn machine() -> Machine {
    let text = include_str!("../machines/paper-2rank.toml");
    Machine::from_toml_str("paper-2rank.toml", text, &machine_sets(&[])).unwrap()
}

fn workload(extra: &[&str]) -> Workload {
    let mut o = vec![
        "data.pairs=120000",
        "queries.batch_size=3000",
        "batches.warmup=1",
        "batches.measured=2",
        "partition.alpha=4",
    ];
    o.extend_from_slice(extra);
    let o: Vec<Override> = o.iter().map(|s| Override::parse(s).unwrap()).collect();
    Workload::from_toml_str("tiny.toml", include_str!("../workloads/tiny.toml"), &o).unwrap()
}

/// The run's report without what may differ between the two ways of running it: the host's
/// facts, the configuration (which names the way) and the `streamed` flag.
fn report(sets: &[&str]) -> (bool, serde_json::Value) {
    let w = workload(sets);
    let qdd = by_name("qdd-double-scan").unwrap();
    let r = run(&machine(), &w, qdd.as_ref(), &mut Silent).unwrap();
    let mut v = serde_json::to_value(&r).unwrap();
    let o = v.as_object_mut().unwrap();
    for k in ["host", "config", "config_fnv1a64"] {
        o.remove(k).unwrap();
    }
    let streamed = o.remove("streamed").unwrap().as_bool().unwrap();
    (streamed, v)
}

#[test]
fn a_streamed_run_reports_what_a_held_run_reports() {
    let cases: [&[&str]; 4] = [
        &["queries.kind=\"range-count-if\""],
        &["queries.kind=\"get\""],
        &["queries.kind=\"range-max\""],
        &[
            "queries.distribution=\"zipf-slices\"",
            "queries.kind=\"get\"",
        ],
    ];
    for case in cases {
        let held = report(&[case, &["batches.streaming=\"never\""]].concat());
        assert!(!held.0);
        // One DPU per group and window; a few of each; all at once (one slab each).
        for budget in ["1", "97", "2500", "83886080"] {
            let budget_set = format!("batches.stream_fragments={budget}");
            let sets = [case, &["batches.streaming=\"always\"", &budget_set]].concat();
            let streamed = report(&sets);
            assert!(streamed.0);
            assert_eq!(streamed.1, held.1, "{case:?}, budget {budget}");
        }
    }
}

/// Batches of several slabs (at least 64 Ki queries each): the groups' passes resume the
/// stream from each slab's checkpoint and number the fragments' origins across slabs.
#[test]
fn a_batch_of_several_slabs_streams_as_it_is_held() {
    let case = ["queries.batch_size=150000", "batches.measured=1"];
    let held = report(&[&case[..], &["batches.streaming=\"never\""]].concat());
    // Slabs of 64 Ki (3 per batch) with one DPU per group, and of 75,000 (2 per batch).
    for budget in ["1", "600000"] {
        let budget_set = format!("batches.stream_fragments={budget}");
        let sets = [&case[..], &["batches.streaming=\"always\"", &budget_set]].concat();
        let streamed = report(&sets);
        assert!(streamed.0);
        assert_eq!(streamed.1, held.1, "budget {budget}");
    }
}

#[test]
fn auto_streams_only_above_the_threshold() {
    assert!(!workload(&[]).streams());
    let big = workload(&["queries.batch_size=40000000", "batches.measured=1"]);
    assert!(big.streams(), "80 M queries in all");
    let never = ["queries.batch_size=40000000", "batches.streaming=\"never\""];
    assert!(!workload(&never).streams());
}

/// The registry's evaluation, with one DPU's first partial answer changed (or, truncating,
/// its last one left out).
struct Corrupting {
    inner: Box<dyn EvaluationPolicy>,
    dpu: usize,
    truncate: bool,
}

impl EvaluationPolicy for Corrupting {
    fn name(&self) -> &'static str {
        "corrupting"
    }

    fn evaluate(
        &self,
        env: &BatchEnv,
        system: &mut System,
        batches: &[DpuBatch],
        dpus: Range<usize>,
    ) -> Result<Part, LaunchError> {
        let mut part = self.inner.evaluate(env, system, batches, dpus.clone())?;
        if dpus.contains(&self.dpu) {
            let results = &mut part.results[self.dpu - dpus.start];
            if self.truncate {
                results.pop();
            } else {
                results[0] = Some(results[0].unwrap_or(0) + 1);
            }
        }
        Ok(part)
    }

    fn metrics(&self, reports: &[LaunchReport]) -> Metrics {
        self.inner.metrics(reports)
    }

    fn record(
        &self,
        env: &BatchEnv,
        system: &mut System,
        batches: &[DpuBatch],
        dpu: u32,
        max_spans: usize,
    ) -> Result<(LaunchReport, TaskletTimeline), LaunchError> {
        self.inner.record(env, system, batches, dpu, max_spans)
    }
}

#[test]
fn a_wrong_partial_answer_fails_a_streamed_batch() {
    for (truncate, expected) in [
        (false, "batch 0, DPU 5, record 0"),
        // A result list one short: before, its missing record panicked on an index.
        (true, "batch 0, DPU 5: the DPU answered "),
    ] {
        let reason = streamed_failure(truncate);
        assert!(reason.starts_with(expected), "{reason}");
    }
}

/// The verification failure of a streamed run whose DPU 5 answers wrong (or too few).
fn streamed_failure(truncate: bool) -> String {
    let m = machine();
    let w = workload(&[
        "batches.streaming=\"always\"",
        "batches.stream_fragments=500",
    ]);
    let mut policies = Policies::of(&w).unwrap();
    let inner = evaluation_policies().into_iter().next().unwrap();
    policies.evaluation = Box::new(Corrupting {
        inner,
        dpu: 5,
        truncate,
    });
    verification_failure(&m, &w, policies)
}

/// The reason a run of B+-Forest with `policies` fails its verification (a panic if it does
/// not fail so).
fn verification_failure(m: &Machine, w: &Workload, policies: Policies) -> String {
    let qdd = by_name("qdd-double-scan").unwrap();
    let mut index =
        pimdes::meter::quietly(|p| BForest::with_policies(m, w, qdd.as_ref(), policies, p))
            .unwrap();
    let config = EffectiveConfig {
        machine: m.raw.clone(),
        workload: w.raw.clone(),
    };
    let clock = pimdes::experiments::run::WallClock::start();
    match drive(m, w, &mut index, config, &mut Silent, clock, None) {
        Err(Error::Verification(reason)) => reason,
        other => panic!("expected a verification failure, got {other:?}"),
    }
}

/// The registry's routing with every DPU's fragments given twice: more than the run counted
/// up front, when it chose how many launches its largest shares need.
struct Doubling(Box<dyn RoutingPolicy>);

impl RoutingPolicy for Doubling {
    fn name(&self) -> &'static str {
        "doubling"
    }

    fn route(&self, env: &BatchEnv, queries: &[Query]) -> Vec<DpuBatch> {
        let mut batches = self.0.route(env, queries);
        for b in &mut batches {
            b.cold.extend(b.cold.clone());
            b.hot.extend(b.hot.clone());
            b.origin.extend(b.origin.clone());
        }
        batches
    }

    fn cost(&self, env: &BatchEnv, shape: &Shape) -> Cost {
        self.0.cost(env, shape)
    }
}

/// A batch whose shares outgrow the launches chosen for it is a simulator failure with a
/// reason (it once was an assertion, and before that an MRAM overflow nobody saw).
#[test]
fn shares_beyond_the_counted_launches_are_a_failure_not_a_panic() {
    let w = workload(&[]);
    let qdd = by_name("qdd-double-scan").unwrap();
    let roomy = pimdes::meter::quietly(|p| BForest::new(&machine(), &w, qdd.as_ref(), p));
    // An MRAM that holds exactly the largest need the run counted.
    let need = roomy.unwrap().mram().max_needed_bytes;
    let set = Override::parse(&format!("machine.dpu.mram_size_bytes={need}")).unwrap();
    let text = include_str!("../machines/paper-2rank.toml");
    let m = Machine::from_toml_str("paper-2rank.toml", text, &machine_sets(&[set])).unwrap();
    let mut policies = Policies::of(&w).unwrap();
    policies.routing = Box::new(Doubling(routing_policies().into_iter().next().unwrap()));
    let reason = verification_failure(&m, &w, policies);
    assert!(
        reason.contains("gave more fragments than counted"),
        "{reason}"
    );
}

/// [`machine`]'s overrides and `more`.
fn machine_sets(more: &[Override]) -> Vec<Override> {
    let mut o: Vec<Override> = ["machine.ranks=2", "machine.usable_dpus=32"]
        .iter()
        .map(|s| Override::parse(s).unwrap())
        .collect();
    o.extend_from_slice(more);
    o
}

const RUN: [&str; 8] = [
    "run",
    "--machine",
    "machines/paper-2rank.toml",
    "--workload",
    "workloads/tiny.toml",
    "--set",
    "batches.streaming=\"always\"",
    "--json",
];

fn run_cli(extra: &[&str]) -> common::Outcome {
    pimdes(&[&RUN[..], extra].concat())
}

#[test]
fn a_streamed_run_refuses_a_trace() {
    let o = run_cli(&["--trace", "/tmp/pimdes-streaming-never-written.json"]);
    assert_bad(&o, &["batches.streaming", "--trace"]);
    assert!(!std::path::Path::new("/tmp/pimdes-streaming-never-written.json").exists());
}

#[test]
fn a_streamed_run_refuses_open_arrivals() {
    let sets = [
        "--set",
        "run.arrival=\"open\"",
        "--set",
        "run.queries_per_s=1e9",
    ];
    // The message names what made this run stream, not a query count it does not exceed.
    let o = run_cli(&sets);
    assert_bad(&o, &["batches.streaming", "run.arrival", "= \"always\")"]);
    assert!(!o.stderr.contains("fewer queries"), "{}", o.stderr);
}

#[test]
fn bad_streaming_keys_are_refused() {
    let o = run_cli(&["--set", "batches.streaming=\"sometimes\""]);
    assert_bad(&o, &["batches.streaming", "sometimes"]);
    let o = run_cli(&["--set", "batches.stream_fragments=0"]);
    assert_bad(&o, &["batches.stream_fragments", "between 1 and"]);
    let o = run_cli(&[
        "--set",
        "run.index=\"pim-tree\"",
        "--set",
        "queries.kind=\"get\"",
    ]);
    assert_bad(&o, &["batches.streaming", "only b+forest streams"]);
}

#[test]
fn a_streamed_batch_too_large_for_mram_is_refused_naming_the_dpu() {
    let sets = [
        "--set",
        "machine.dpu.mram_size_bytes=300000",
        "--set",
        "queries.batch_size=2000000",
        "--set",
        "batches.measured=1",
    ];
    let o = run_cli(&sets);
    assert_bad(
        &o,
        &[
            "key `dpu.mram_size_bytes`",
            "the data does not fit in MRAM: DPU 122 needs 17162704 bytes",
            "buffers for up to 533646 queries) but has 300000",
        ],
    );
}

#[test]
fn a_batch_resumed_from_checkpoints_is_the_batch() {
    for law in ["zipf-composite", "zipf-slices"] {
        let w = workload(&[&format!("queries.distribution=\"{law}\"")]);
        let data = pimdes::workload::DataSet::generate(&w);
        let g = pimdes::workload::QueryGenerator::new(&w, &data, 32);
        for b in 0..w.total_batches() {
            let whole = g.batch(b);
            let mut s = g.stream(b);
            let mut checkpoints = Vec::new();
            while s.drawn() < w.batch_size {
                checkpoints.push(s.checkpoint());
                s.fill(&mut Vec::new(), 700);
            }
            assert!(s.next_query().is_none(), "a batch ends at its size");
            // Slabs drawn again, last first.
            let mut again = vec![Vec::new(); checkpoints.len()];
            for (i, c) in checkpoints.iter().enumerate().rev() {
                g.resume(b, c).fill(&mut again[i], 700);
            }
            assert_eq!(again.concat(), whole, "{law}, batch {b}");
        }
    }
}

/// A group's pass skips the draws that cannot meet its keys without working out their keys:
/// draw for draw, the queries it keeps are the batch's, every query it skips lies outside
/// the keys, and the stream ends where the plain draws leave it.
#[test]
fn a_stream_that_skips_draws_outside_some_keys_is_the_batch() {
    // (overrides, DPUs): 30 DPUs cut the key space into Zipf-slices of two spans; the empty
    // list is taken with 64-bit values (no value domain).
    let laws: [(&[&str], u32); 6] = [
        (&["queries.kind=\"range-count-if\""], 32),
        (&["queries.kind=\"get\"", "queries.skew=1.2"], 32),
        (
            &["queries.kind=\"predecessor\"", "queries.prefix_bits=0"],
            32,
        ),
        (
            &[
                "queries.distribution=\"zipf-slices\"",
                "queries.kind=\"range-max\"",
            ],
            30,
        ),
        // ZcAmp splits the segments at its interval's ends into other spans.
        (&["deviation.base_partition=3", "deviation.factor=50"], 32),
        (&[], 32),
    ];
    let top = 1u64 << 50; // the span of one of 2^14 key prefixes, plus one
    // Sets of sorted, disjoint key intervals, as a group's key ranges are.
    let sets: [&[(u64, u64)]; 8] = [
        &[],
        &[(0, u64::MAX)],
        &[(0, 0)],
        &[(5 * top + 17, 5 * top + 90)],
        &[(top - 1, 3 * top)],
        &[(1 << 62, (1 << 63) + 12345)],
        &[(0, top / 2), (5 * top, 5 * top + 100), (1 << 63, u64::MAX)],
        &[
            (2 * top, 2 * top + 5),
            (2 * top + 6, 4 * top),
            (9 * top, 9 * top),
        ],
    ];
    for (law, dpus) in laws {
        let mut w = workload(law);
        if law.is_empty() {
            w.value_domain = None;
        }
        let data = pimdes::workload::DataSet::generate(&w);
        let g = pimdes::workload::QueryGenerator::new(&w, &data, dpus);
        for b in 0..2 {
            let whole = g.batch(b);
            let mut plain = g.stream(b);
            while plain.next_query().is_some() {}
            let mut skipped = 0; // of draws not all skipped for an empty set of keys
            for keys in sets {
                let mut s = g.stream(b);
                let reach = s.reach(keys);
                for (i, q) in whole.iter().enumerate() {
                    match s.next_reaching(&reach).expect("a draw per query") {
                        Drawn::Query(got) => assert_eq!(got, *q, "{law:?} {b} query {i}"),
                        Drawn::Skipped => {
                            skipped += !keys.is_empty() as usize;
                            let meets = keys.iter().any(|k| q.lo <= k.1 && q.hi >= k.0);
                            assert!(!meets, "{law:?} {b} {keys:?}: query {i} {q:?} skipped");
                        }
                    }
                }
                assert_eq!(s.next_reaching(&reach), None, "the batch ends at its size");
                assert!(s.checkpoint() == plain.checkpoint(), "{law:?} {b} {keys:?}");
            }
            // Every draw can reach some key of the one segment of `prefix_bits = 0`.
            let one_segment = law.contains(&"queries.prefix_bits=0");
            assert_eq!(skipped > 0, !one_segment, "{law:?} {b}: {skipped} skipped");
        }
    }
}

/// The run streams because of the overrides that made it big, and open arrivals came from
/// another: both are named, not the workload file, which sets no `batches.streaming`.
#[test]
fn the_overrides_that_made_a_run_stream_are_named() {
    let sets = [
        "queries.batch_size=40000000",
        "run.arrival=open",
        "run.queries_per_s=1e6",
    ];
    let o = common::run_tiny(&[], &sets);
    assert_bad(
        &o,
        &[
            "error: --set queries.batch_size=40000000 and --set run.arrival=open: key `queries.batch_size`",
            "this run streams its batches",
        ],
    );
    assert!(!o.stderr.contains("tiny.toml"), "{}", o.stderr);
}
