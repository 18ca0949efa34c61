//! What a command will cost the simulating host, estimated from the configuration before
//! anything is generated: host memory and simulated events (hence wall time). A run that
//! cannot fit in memory, or whose events are beyond [`Limits::max_events`], is refused at
//! once with the estimate and the keys to change, instead of running the host out of
//! memory or for days; a long but feasible run is announced (see [`RunEstimate::long`]).
//!
//! Every constant below was measured on this project's runs (2-core machine, 2026-12);
//! the estimate is meant to be right within a factor of about two, not exact.

use crate::config::InputError;
use crate::index::bforest::stream::{Budget, most_fragments_per_dpu};
use crate::machine::Machine;
use crate::workload::{QueryKind, Workload};

/// Fixed cost: the binary, thread stacks, the report.
const BASE_BYTES: u64 = 32 << 20;
/// Per DPU: its state and touched MRAM pages at the smallest data: one 64 KiB page of the
/// MRAM page pool (`dpu::pages`) at least. Measured 2026-12-06 on `paper-2rank` with
/// `tiny.toml`, 2 pairs per DPU (`partition.chunk_pairs=2`): 65,536 DPUs peaked at
/// 4,268,696 KiB and 16,384 at 1,073,820 KiB, 65.0 KiB per DPU between them. (Before the
/// page pool: 2^17 DPUs with 10 pairs each, 1.26 GB, and 10 KiB here.)
const PER_DPU_BYTES: u64 = 66 << 10;
/// Per pair: the data, the trees in MRAM and the reference (measured: 63.25 M pairs on 128
/// DPUs, 1.14 GB peak; about 18 bytes, rounded up).
const PER_PAIR_BYTES: u64 = 20;
/// Per query of every batch, all generated up front (measured: 0.7 M more queries, 46 MB),
/// and the reference's sorted copy of it (24 bytes; measured at paper scale: +469 MB for
/// 30 M queries after the copy, 16 bytes more per query), which since 2026-12-05 keeps
/// each query's index beside it (measured at paper scale: peak RSS 11.17 GB against 11.05
/// GB, 4 bytes more per query), and since 2026-12-06 each query's place in that order
/// (measured at paper scale: 11.29 GB against 11.17 GB, 4 bytes more per query).
const PER_QUERY_BYTES: u64 = 94;
/// Per chunk of the partitioners' chunk boundaries and loads (`partition` holds only
/// these, never the pairs; measured: 2^30 pairs in chunks of 300, 3.58 M chunks, 146 MB
/// peak, about 41 bytes each, rounded up).
const PER_CHUNK_BYTES: u64 = 48;

/// DPU events per query of a get (measured: 5.3 on `workloads/tiny.toml` as a get batch,
/// 5.6 with one pair per range).
const EVENTS_PER_QUERY: u64 = 6;
/// Pairs a range scans per DPU event (measured: 19.1 events per query at 100 pairs per
/// range, 140.6 at 1,000 on `workloads/tiny.toml`: 7.4 pairs per event).
const RANGE_PAIRS_PER_EVENT: u64 = 7;
/// Wall nanoseconds per estimated DPU event, both cores, including the host-side work
/// around the kernels. Fitted on `workloads/tiny.toml` alone (machines/paper-2rank.toml,
/// `batches.measured=200`, 2026-12-05, at 2b3cded): 4.04-4.11 s of wall for 80.8 M
/// estimated events (77.3 M simulated), 50-51 ns each; 100 before the engine's speed-ups
/// of 2026-12-04 and -05. Checked out of sample (docs/reliability.md): paper-raq estimated
/// at 41 s, measured 49-53 s; its 100 M batch, streamed, at 253 s, measured 255 s; its
/// 1.1 G batch at skew 1.0, streamed, at 3,275 s, measured 3,190 s (with the reference's
/// term, added later).
const NS_PER_EVENT: u64 = 50;
/// Wall nanoseconds per pair to generate the data and build B+-Forest's trees (measured:
/// 17 ns from 0.6 M to 6 M pairs) or PIM-tree's images (measured: about 270 ns at 500 M
/// pairs on 2,538 DPUs, its image building repeated per DPU group).
const NS_PER_PAIR_BFOREST: u64 = 20;
const NS_PER_PAIR_PIMTREE: u64 = 300;
/// PIM-tree's wall nanoseconds per DPU, once and per batch, whatever its data: each DPU's
/// image is built, launched and dropped. Fitted on 4,096 DPUs of 2 pairs each
/// (`paper-2rank`, `tiny.toml`, `partition.chunk_pairs=2`, batches of 2,000, 2026-12-06):
/// 4.61 s with 2 batches, 5.63 s with 4. Out of that fit, 16,384 DPUs with 2 batches are
/// estimated at 18.5 s and measured 15.9 s. (Without these terms such runs went past 60 s
/// unannounced.)
const NS_PER_DPU_PIMTREE: u64 = 880_000;
const NS_PER_DPU_BATCH_PIMTREE: u64 = 125_000;
/// B+-Forest's wall nanoseconds per DPU and batch, whatever its queries: each batch launches
/// every DPU. Fitted on `paper-2rank` (128 DPUs), `tiny.toml` with get batches of 10
/// queries, 2,000 and 8,000 measured batches (2026-12-06): 1.51 and 6.06 s. Out of that fit,
/// per batch: 1,012 DPUs (`paper-1012`, 500 and 2,000 batches) estimated 5.97 ms, measured
/// 4.59 ms; 16 DPUs estimated 0.094 ms, measured 0.137 ms. (Without this term a run of many
/// small batches went past 60 s unannounced.)
const NS_PER_DPU_BATCH_BFOREST: u64 = 5_900;
/// Wall nanoseconds per pair the ranges cover, for the reference's answers, worked out while
/// the trees are built (each range query of each batch meets every chunk it overlaps).
/// Measured on `paper-2rank`, `tiny.toml` with batches of 3,000 range-count-if queries
/// (2026-12-07, at 8c9a0ba; the build phase less its 0.023 s at 100 pairs per range): 0.28,
/// 0.26 and 0.19 ns per covered pair at 60,000, 300,000 and 600,000 pairs per range (0.25,
/// 1.16 and 1.74 s). Fitted on all three, not checked out of sample. (Without this term
/// such runs spent half a minute building before any estimate.)
const REFERENCE_NS_PER_COVERED_PAIR: f64 = 0.25;
/// A run estimated above this is announced on stderr before it starts.
const LONG_RUN_S: f64 = 60.0;

/// What a command may cost; [`Limits::host`] is what the command line uses.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Host memory a run may need; `None`: the host's available memory now (not checked
    /// where it cannot be read).
    pub max_host_bytes: Option<u64>,
    /// Simulated DPU events a run may take, and queries a `partition` may generate.
    pub max_events: u64,
}

impl Limits {
    /// The command line's limits: the host's available memory, and 10^12 events (about 14
    /// hours at `NS_PER_EVENT`; the paper's largest batch, 1.1 G queries, is about 10^10).
    pub fn host() -> Limits {
        Limits {
            max_host_bytes: None,
            max_events: 1_000_000_000_000,
        }
    }

    fn host_bytes(&self) -> Option<u64> {
        self.max_host_bytes.or_else(available_bytes)
    }
}

/// A run's estimated cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunEstimate {
    pub host_bytes: u64,
    pub events: u64,
    pub wall_s: f64,
}

impl RunEstimate {
    /// A line for stderr when the run is long enough to be worth announcing.
    pub fn long(&self) -> Option<String> {
        let what = format!(
            "this run ({:.1e} simulated DPU events, {} MiB of host memory)",
            self.events as f64,
            self.host_bytes >> 20
        );
        note(&what, self.wall_s)
    }
}

fn human_duration(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} minutes", s / 60.0)
    } else {
        format!("{:.1} hours", s / 3600.0)
    }
}

/// PIM-tree's predecessor and scan runs plan every round of every batch before the DPUs
/// run, with the reply each task must give: per predecessor query about five tasks with
/// their words and expected replies, per pair a scan covers its key, value and pointer, its
/// data task and reply, and its place in the answers. [est] from the sizes of those
/// structures (`pimtree::ordered`, `pimtree::round`); the paper-scale scan comparison
/// (3 x 10^7 covered pairs beside 500 M pairs) peaked at 9.6 GiB.
const PIMTREE_BYTES_PER_QUERY: u64 = 200;
const PIMTREE_BYTES_PER_COVERED_PAIR: u64 = 96;
/// PIM-tree keeps no trees between batches: per pair it holds the reference's share, and
/// the pairs of the DPU group whose images are being built, up to a group's worth
/// (`GROUP_PAIR_BYTES` of 16-byte pairs for gets; predecessor and scan groups are half as
/// many pairs, beside their level-0 nodes' entries). Fitted on two runs on
/// `machines/paper-2rank.toml` with `workloads/pim-tree-get.toml`, 20 M pairs, batches of
/// 1,000 (2026-12-06): gets peaked at 459 MiB, which with the group's 16 bytes a pair
/// leaves 6 for the rest; predecessors at 953 MiB, 42 bytes a pair in their group. Checked
/// out of that fit: predecessors at 10 M and 40 M pairs estimated at 499 and 1,872 MiB,
/// measured 560 and 1,808; range-count-if at 20 M 1,226 against 1,090; at paper scale
/// (`upmem-2538`, 500 M pairs, docs/performance.md and docs/pim-tree.md; estimated on
/// 1,012 DPUs, as the test does, about 0.1 GiB below 2,538's) gets 9.5 GiB against 7.63
/// (`workloads/pim-tree-get.toml`, measured 2026-12-06), predecessors 16.4 GiB against
/// 12.85, the scan comparison 10.8 GiB against 9.6. Until then PIM-tree took B+-Forest's
/// 20 bytes a pair and no group: its predecessor runs were estimated at half their peak at
/// 20 M pairs, and its paper-scale runs 40-65 % above theirs.
const PIMTREE_BYTES_PER_PAIR: u64 = 6;
const PIMTREE_GROUP_BYTES_PER_PAIR_GET: u64 = 16;
const PIMTREE_GROUP_BYTES_PER_PAIR_ORDERED: u64 = 42;

/// Whether the run streams its batches (B+-Forest only).
fn streamed(workload: &Workload) -> bool {
    workload.index == crate::index::bforest::NAME && workload.streams()
}

/// Wall nanoseconds of a streamed batch per query per pass over it (the counting pass and
/// one per group: drawing, and routing what the group needs) and per pair (the reference
/// draws every chunk's pairs again for each batch). [est] set before any streamed run, not
/// fitted; checked afterwards on paper-raq (docs/performance.md), with `NS_PER_EVENT` at
/// 100 then: the whole run's estimate was 7 minutes for 100 M (measured 5.6) and 37
/// minutes for 500 M (measured 35.4).
const NS_PER_STREAMED_QUERY_PASS: u64 = 30;
const NS_PER_STREAMED_PAIR: u64 = 20;

/// Wall nanoseconds streaming adds to a run (0 when it holds its batches).
fn streaming_ns(machine: &Machine, workload: &Workload) -> f64 {
    if !streamed(workload) {
        return 0.0;
    }
    // About one fragment per query; the groups (at most one per DPU), and the counting
    // pass.
    let groups = workload
        .batch_size
        .div_ceil(workload.stream_fragments)
        .min(u64::from(machine.dpus));
    let pass = (workload.batch_size * NS_PER_STREAMED_QUERY_PASS) as f64;
    let counting = workload.total_batches() as f64 * pass;
    let per_simulated = groups as f64 * pass + (workload.pairs * NS_PER_STREAMED_PAIR) as f64;
    counting + per_simulated * workload.simulated_batches() as f64
}

/// Host-memory terms of a run: (key to name, bytes). A streamed run holds a group of
/// fragments and a window of them ([`crate::index::bforest::stream::Budget`]), not its
/// batches.
fn run_memory_terms(machine: &Machine, workload: &Workload) -> [(&'static str, u64); 3] {
    let queries = run_queries(workload);
    let held = if streamed(workload) {
        (
            "batches.stream_fragments",
            streamed_bytes(machine, workload),
        )
    } else {
        (
            "queries.batch_size",
            queries.saturating_mul(PER_QUERY_BYTES),
        )
    };
    let pimtree = workload.index == crate::index::pimtree::NAME;
    let planned = match workload.kind {
        _ if !pimtree => 0,
        QueryKind::Get => 0,
        QueryKind::Predecessor => queries.saturating_mul(PIMTREE_BYTES_PER_QUERY),
        QueryKind::RangeCountIf | QueryKind::RangeMax => queries
            .saturating_mul(workload.range_pairs)
            .saturating_mul(PIMTREE_BYTES_PER_COVERED_PAIR),
    };
    let pairs = match pimtree {
        true => pimtree_pair_bytes(workload),
        false => workload.pairs.saturating_mul(PER_PAIR_BYTES),
    };
    [
        (
            "ranks",
            u64::from(machine.dpus).saturating_mul(PER_DPU_BYTES),
        ),
        ("data.pairs", pairs),
        (held.0, held.1.saturating_add(planned)),
    ]
}

/// Host bytes of PIM-tree's pairs: the reference's share of each, and one DPU group's.
fn pimtree_pair_bytes(workload: &Workload) -> u64 {
    // A get group holds 16 bytes a pair, a predecessor or scan group 32 (`group_count`).
    let (per_pair, code_bytes) = match workload.kind {
        QueryKind::Get => (PIMTREE_GROUP_BYTES_PER_PAIR_GET, 16),
        _ => (PIMTREE_GROUP_BYTES_PER_PAIR_ORDERED, 32),
    };
    let group_pairs = (crate::index::pimtree::GROUP_PAIR_BYTES / code_bytes).min(workload.pairs);
    (workload.pairs.saturating_mul(PIMTREE_BYTES_PER_PAIR))
        .saturating_add(group_pairs.saturating_mul(per_pair))
}

/// Host bytes of a streamed run's batches: what one batch holds at once, and every batch's
/// count, kept until the run ends ([`Budget`]).
fn streamed_bytes(machine: &Machine, workload: &Workload) -> u64 {
    let budget = Budget::new(workload.stream_fragments);
    let dpu_fragments = most_fragments_per_dpu(
        workload.kind,
        machine.mram_size_bytes,
        workload.max_launches,
    );
    let counted = budget.counted_bytes(workload.batch_size, u64::from(machine.dpus));
    // A get meets one routing entry; a range at most all of them, at most 3 per DPU (a
    // tested guarantee of the partitioners, docs/partitioners.md).
    let per_query = match workload.kind.is_range() {
        true => 3 * u64::from(machine.dpus),
        false => 1,
    };
    let batch = (
        workload.batch_size,
        workload.batch_size.saturating_mul(per_query),
    );
    budget
        .host_bytes(dpu_fragments, batch)
        .saturating_add(counted.saturating_mul(workload.total_batches()))
}

/// DPU events of a run: every query of every batch, plus the pairs its range scans.
fn run_events(workload: &Workload) -> u64 {
    let range = match workload.kind {
        QueryKind::Get | QueryKind::Predecessor => 0,
        _ => workload.range_pairs / RANGE_PAIRS_PER_EVENT,
    };
    let simulated = workload
        .batch_size
        .saturating_mul(workload.simulated_batches());
    simulated.saturating_mul(EVENTS_PER_QUERY.saturating_add(range))
}

/// Pairs the batches' ranges cover in all (none for get and predecessor queries).
fn covered_pairs(workload: &Workload) -> u64 {
    match workload.kind {
        QueryKind::Get | QueryKind::Predecessor => 0,
        // The reference answers every batch it holds, simulated or not.
        _ => (workload.batch_size)
            .saturating_mul(workload.total_batches())
            .saturating_mul(workload.range_pairs),
    }
}

/// Estimates a `pimdes run` and refuses it above `limits`: the memory error names the key
/// of the largest term, the events error the batch keys.
pub fn check_run(
    machine: &Machine,
    workload: &Workload,
    limits: &Limits,
) -> Result<RunEstimate, InputError> {
    let terms = run_memory_terms(machine, workload);
    let host_bytes = terms
        .iter()
        .fold(BASE_BYTES, |sum, (_, b)| sum.saturating_add(*b));
    let events = run_events(workload);
    let batches = workload.simulated_batches();
    let (ns_per_pair, ns_per_dpu) = match workload.index.as_str() {
        "pim-tree" => (
            NS_PER_PAIR_PIMTREE,
            NS_PER_DPU_PIMTREE as f64 + batches as f64 * NS_PER_DPU_BATCH_PIMTREE as f64,
        ),
        _ => (
            NS_PER_PAIR_BFOREST,
            batches as f64 * NS_PER_DPU_BATCH_BFOREST as f64,
        ),
    };
    let wall_ns = events as f64 * NS_PER_EVENT as f64
        + covered_pairs(workload) as f64 * REFERENCE_NS_PER_COVERED_PAIR
        + workload.pairs as f64 * ns_per_pair as f64
        + f64::from(machine.dpus) * ns_per_dpu
        + streaming_ns(machine, workload);
    let estimate = RunEstimate {
        host_bytes,
        events,
        wall_s: wall_ns / 1e9,
    };
    if let Some(available) = limits.host_bytes().filter(|&a| host_bytes > a) {
        return Err(memory_error(
            machine, workload, &terms, host_bytes, available,
        ));
    }
    if events > limits.max_events {
        return Err(events_error(workload, &estimate, limits.max_events));
    }
    Ok(estimate)
}

fn memory_error(
    machine: &Machine,
    workload: &Workload,
    terms: &[(&'static str, u64); 3],
    bytes: u64,
    available: u64,
) -> InputError {
    let mib = |b: u64| b >> 20;
    let (key, _) = terms
        .iter()
        .copied()
        .max_by_key(|&(_, b)| b)
        .unwrap_or(("data.pairs", 0));
    let held = if streamed(workload) {
        format!(
            "{} fragments of a streamed batch at once (batches.stream_fragments)",
            workload.stream_fragments
        )
    } else {
        format!("{} queries in all batches", run_queries(workload))
    };
    let reason = format!(
        "the run would need about {} MiB of host memory ({} MiB for {} DPUs, {} MiB for {} pairs, {} MiB for {held}), more than the {} MiB available; {}",
        mib(bytes),
        mib(terms[0].1),
        machine.dpus,
        mib(terms[1].1),
        workload.pairs,
        mib(terms[2].1),
        mib(available),
        memory_advice(workload, terms, available)
    );
    match key {
        "ranks" => machine.attribution.error_at(key, reason),
        // Held batches: the batch size or the number of batches, whichever a `--set` raised.
        "queries.batch_size" => workload.attribution.error_at_any(
            &[
                "queries.batch_size",
                "batches.warmup",
                "batches.measured",
                "queries.range_pairs",
            ],
            reason,
        ),
        _ => workload.attribution.error_at(key, reason),
    }
}

/// The keys that lower a run's host memory, as they apply to its index and batches: of the
/// one part that alone needs more than is `available`, if one does (streaming does not
/// help a run whose pairs alone do not fit), else of every part.
fn memory_advice(workload: &Workload, terms: &[(&'static str, u64); 3], available: u64) -> String {
    match terms.iter().find(|(_, b)| *b > available) {
        Some(("ranks", _)) => return "lower the number of DPUs (they alone do not fit)".into(),
        Some(("data.pairs", _)) => return "lower data.pairs (the pairs alone do not fit)".into(),
        _ => {}
    }
    let mut keys = vec!["data.pairs".to_owned()];
    if streamed(workload) {
        keys.push("batches.stream_fragments".to_owned());
    } else {
        let cooldown = match workload.cooldown_batches() {
            0 => String::new(),
            n => format!(
                "; {} with run.batches_in_flight = {}",
                crate::config::counted(n, "cool-down batch"),
                workload.batches_in_flight
            ),
        };
        keys.extend([
            "queries.batch_size".to_owned(),
            format!("the number of batches (batches.warmup, batches.measured{cooldown})"),
        ]);
    }
    // PIM-tree plans a range batch by the pairs its ranges cover.
    if workload.index == crate::index::pimtree::NAME && workload.kind.is_range() {
        keys.push("queries.range_pairs".to_owned());
    }
    let mut advice = format!("lower {} or the number of DPUs", keys.join(", "));
    if workload.index == crate::index::bforest::NAME && !streamed(workload) {
        advice.push_str(", or stream the batches (batches.streaming = \"always\")");
    }
    advice
}

/// The keys a run's simulated batches add up from, for a message.
fn batch_terms(workload: &Workload) -> String {
    let mut terms = match workload.simulate_warmup {
        true => "batches.warmup + batches.measured".to_owned(),
        false => "batches.measured: batches.simulate_warmup = false".to_owned(),
    };
    if workload.cooldown_batches() > 0 {
        let k = workload.batches_in_flight;
        terms.push_str(&format!(
            " + {} cool-down (run.batches_in_flight = {k})",
            k - 1
        ));
    }
    terms
}

fn events_error(workload: &Workload, estimate: &RunEstimate, max_events: u64) -> InputError {
    let range = match workload.kind {
        QueryKind::Get | QueryKind::Predecessor => String::new(),
        _ => format!(" plus one per {RANGE_PAIRS_PER_EVENT} pairs of queries.range_pairs"),
    };
    workload.attribution.error_at(
        "queries.batch_size",
        format!(
            "the run would simulate about {:.1e} DPU events ({} queries per batch x {} batches ({}) x {EVENTS_PER_QUERY} events per query{range}), about {} of wall time, above the limit of {:.0e} events; lower queries.batch_size or the number of batches",
            estimate.events as f64,
            workload.batch_size,
            workload.simulated_batches(),
            batch_terms(workload),
            human_duration(estimate.wall_s),
            max_events as f64
        ),
    )
}

/// Queries `partition` generates and routes: the reference batch and every measured
/// batch (the other warm-up batches are never generated).
fn partition_queries(workload: &Workload) -> u64 {
    workload
        .batch_size
        .saturating_mul(workload.measured_batches.saturating_add(1))
}

/// Wall nanoseconds per chunk and per query of `partition` (measured: paper-raq, 1.67 M
/// chunks and 21 M queries, 0.98 s; 2^30 pairs, 3.58 M chunks, 0.32 s).
const NS_PER_CHUNK: u64 = 90;
const NS_PER_PARTITION_QUERY: u64 = 45;

/// Per DPU and measured batch: the queries it serves and those on its hot tree, kept for
/// every measured batch until the imbalance is computed (two u64).
const PER_DPU_BATCH_BYTES: u64 = 16;

/// Estimates a `pimdes partition` and refuses it when its chunk boundaries and per-batch
/// loads would not fit in host memory (it never holds the pairs themselves; naming the key
/// of the larger term) or when it would generate more queries than `limits.max_events`
/// (naming `queries.batch_size`). Returns the estimated wall time, seconds.
pub fn check_partition(
    machine: &Machine,
    workload: &Workload,
    limits: &Limits,
) -> Result<f64, InputError> {
    let chunks = workload.chunks();
    let chunk_bytes = chunks.saturating_mul(PER_CHUNK_BYTES);
    let load_bytes = workload
        .measured_batches
        .saturating_mul(u64::from(machine.dpus))
        .saturating_mul(PER_DPU_BATCH_BYTES);
    let bytes = BASE_BYTES
        .saturating_add(chunk_bytes)
        .saturating_add(load_bytes);
    if let Some(available) = limits.host_bytes().filter(|&a| bytes > a) {
        let key = if chunk_bytes >= load_bytes {
            "data.pairs"
        } else {
            "batches.measured"
        };
        return Err(workload.attribution.error_at(
            key,
            format!(
                "partitioning would need about {} MiB of host memory ({} MiB for {chunks} chunks of {} pairs (partition.chunk_pairs), {} MiB for the loads of {} DPUs in {} measured batches), more than the {} MiB available; lower data.pairs or batches.measured, or raise partition.chunk_pairs",
                bytes >> 20,
                chunk_bytes >> 20,
                workload.chunk_pairs,
                load_bytes >> 20,
                machine.dpus,
                workload.measured_batches,
                available >> 20
            ),
        ));
    }
    let queries = partition_queries(workload);
    let wall_s = (chunks as f64 * NS_PER_CHUNK as f64
        + queries as f64 * NS_PER_PARTITION_QUERY as f64)
        / 1e9;
    if queries > limits.max_events {
        return Err(workload.attribution.error_at(
            "queries.batch_size",
            format!(
                "partitioning would simulate about {queries} queries ({} per batch x {} batches: the reference batch and batches.measured), about {} of wall time, above the limit of {:.0e}; lower queries.batch_size or batches.measured",
                workload.batch_size,
                workload.measured_batches.saturating_add(1),
                human_duration(wall_s),
                limits.max_events as f64
            ),
        ));
    }
    Ok(wall_s)
}

/// Per query of the batch `pimdes calibrate host` times, which it holds whole with its
/// routed fragments, packed buffers, partial results and PIM-tree's sorted, deduplicated
/// and bucketed copies. Measured 2026-12-06 on `paper-2rank` with `tiny.toml`, one run: 1 M
/// and 4 M queries peaked at 146,620 and 544,496 KiB for gets and for range-count-if alike,
/// 136 bytes per query between them (no margin added). Out of that fit: `paper-1012` with
/// `paper-raq.toml` (500 M pairs) and 3 M queries, estimated at 522 MB, measured 455,900 KiB
/// (467 MB): 12 % high.
const CALIBRATE_BYTES_PER_QUERY: u64 = 136;

/// Estimates `pimdes calibrate host` as [`check_partition`] does its partitioning, and then
/// refuses a batch 0 that would not fit in host memory beside it (naming
/// `queries.batch_size`).
pub fn check_calibrate(
    machine: &Machine,
    workload: &Workload,
    limits: &Limits,
) -> Result<(), InputError> {
    check_partition(machine, workload, limits)?;
    let chunk_bytes = workload.chunks().saturating_mul(PER_CHUNK_BYTES);
    let batch_bytes = workload
        .batch_size
        .saturating_mul(CALIBRATE_BYTES_PER_QUERY);
    let bytes = (BASE_BYTES.saturating_add(chunk_bytes)).saturating_add(batch_bytes);
    match limits.host_bytes().filter(|&a| bytes > a) {
        None => Ok(()),
        Some(available) => Err(workload.attribution.error_at(
            "queries.batch_size",
            format!(
                "calibrate host holds batch 0 whole: about {} MiB of host memory ({} MiB for its {} queries), more than the {} MiB available; lower queries.batch_size (a few million queries time the host steps well)",
                bytes >> 20,
                batch_bytes >> 20,
                workload.batch_size,
                available >> 20
            ),
        )),
    }
}

/// A line for stderr when a `partition` estimated at `wall_s` is long enough to announce.
pub fn long_note(wall_s: f64) -> Option<String> {
    note("partitioning", wall_s)
}

/// `note: WHAT is estimated at about ...` when `wall_s` is above `LONG_RUN_S`.
pub fn note(what: &str, wall_s: f64) -> Option<String> {
    (wall_s > LONG_RUN_S).then(|| {
        format!(
            "note: {what} is estimated at about {} of wall time; progress follows on stderr",
            human_duration(wall_s)
        )
    })
}

/// Queries of every batch of a run, warm-up included.
fn run_queries(workload: &Workload) -> u64 {
    workload.batch_size.saturating_mul(workload.total_batches())
}

/// Hands the allocator's free memory back to the operating system. glibc keeps the freed
/// heap of an earlier point of a sweep (10 GB after a paper-scale point), which the next
/// point's estimate would otherwise see as taken and refuse that point for.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own heap; it touches
    // no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Host bytes of a PrIM suite's point per byte of MRAM its DPUs fill: the MRAM pages, the
/// host's inputs and its expected outputs. [est] Measured 1.5 (prim-va) to 3.0 (prim-red)
/// with 2^26 elements on one DPU (peak RSS against MRAM filled; prim-sel and prim-uni 2.5,
/// 2026-12-06), rounded up.
const PRIM_HOST_BYTES_PER_MRAM_BYTE: u64 = 4;

/// Refuses a PrIM suite's point whose DPUs fill `mram_bytes` of MRAM in all when the host
/// memory it needs is above what the host has; the reason, with both in MiB.
pub fn check_prim_point(mram_bytes: u64, limits: &Limits) -> Result<(), String> {
    let need = mram_bytes
        .saturating_mul(PRIM_HOST_BYTES_PER_MRAM_BYTE)
        .saturating_add(BASE_BYTES);
    match limits.host_bytes() {
        Some(available) if need > available => Err(format!(
            "needs about {} MiB of host memory ({PRIM_HOST_BYTES_PER_MRAM_BYTE} times the {} MiB of MRAM the DPUs fill), above the {} MiB available",
            need >> 20,
            mram_bytes >> 20,
            available >> 20
        )),
        _ => Ok(()),
    }
}

/// The host's available memory in bytes (`MemAvailable` of `/proc/meminfo`); `None` where
/// it cannot be read, and then nothing is refused.
pub fn available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(workload: &str, text: &str, sets: &[&str]) -> (Machine, Workload) {
        let overrides: Vec<_> = sets
            .iter()
            .map(|s| crate::config::Override::parse(s).unwrap())
            .collect();
        let m = include_str!("../../machines/paper-1012.toml");
        let machine = Machine::from_toml_str("m.toml", m, &overrides).unwrap();
        (
            machine,
            Workload::from_toml_str(workload, text, &overrides).unwrap(),
        )
    }

    const NO_LIMIT: Limits = Limits {
        max_host_bytes: Some(u64::MAX),
        max_events: u64::MAX,
    };

    #[test]
    fn a_prim_point_is_refused_above_four_times_its_mram() {
        let gib = 1u64 << 30;
        let limits = Limits {
            max_host_bytes: Some(8 * gib),
            max_events: u64::MAX,
        };
        // 1 GiB of MRAM needs about 4 GiB (and 32 MiB more): within 8 GiB.
        assert_eq!(check_prim_point(gib, &limits), Ok(()));
        let e = check_prim_point(2 * gib, &limits).unwrap_err();
        assert!(
            e.contains("about 8224 MiB") && e.contains("8192 MiB available"),
            "{e}"
        );
    }

    /// The paper-scale run (measured at 49-53 s) is not announced, the same with twice its
    /// batches is, and the tiny one is not.
    #[test]
    fn long_runs_are_announced_short_ones_are_not() {
        let paper = include_str!("../../workloads/paper-raq.toml");
        let (m, w) = inputs("paper-raq.toml", paper, &[]);
        let e = check_run(&m, &w, &NO_LIMIT).unwrap();
        // 30 batches x 1 M queries x (6 + 100 / 7 = 20) events, 50 ns each; the reference's
        // 30 x 1 M x 100 covered pairs at 0.25 ns; 500 M pairs at 20 ns; 30 batches x 1,012
        // DPUs at 5.9 us: 30 + 0.75 + 10 + 0.179 s.
        assert_eq!(e.events, 600_000_000);
        assert!((e.wall_s - 40.929).abs() < 1e-3, "{}", e.wall_s);
        assert_eq!(e.long(), None);
        let (m, w) = inputs("paper-raq.toml", paper, &["batches.measured=50"]);
        let e = check_run(&m, &w, &NO_LIMIT).unwrap();
        assert_eq!(e.events, 1_200_000_000);
        assert!(
            e.long().unwrap().contains("about 72 s of wall time"),
            "{e:?}"
        );
        // The 1.1 G batch of docs/reliability.md's example note (measured: 3,190 s):
        // 2.2 G queries x 20 events x 50 ns, the reference's 2.2 G x 100 covered pairs at
        // 0.25 ns (55 s), 10 s of pairs, and per batch 15 passes over the streamed queries
        // at 30 ns and the pairs again at 20 ns (and 12 ms of DPU batches).
        let big = [
            "queries.batch_size=1100000000",
            "batches.warmup=1",
            "batches.measured=1",
            "batches.max_launches=4",
        ];
        let (m, w) = inputs("paper-raq.toml", paper, &big);
        let e = check_run(&m, &w, &NO_LIMIT).unwrap();
        assert!((e.wall_s - 3275.012).abs() < 1e-3, "{}", e.wall_s);
        assert_eq!(
            e.long().unwrap(),
            "note: this run (4.4e10 simulated DPU events, 14210 MiB of host memory) is \
             estimated at about 55 minutes of wall time; progress follows on stderr"
        );
        let tiny = include_str!("../../workloads/tiny.toml");
        let (m, w) = inputs("tiny.toml", tiny, &[]);
        assert_eq!(check_run(&m, &w, &NO_LIMIT).unwrap().long(), None);
        // Many batches of a few gets: their launches, not their events, take the time
        // (measured: about 72 s).
        // On 128 DPUs, as measured on paper-2rank.
        let small = [
            "machine.ranks=2",
            "machine.usable_dpus=128",
            "queries.kind=\"get\"",
            "queries.batch_size=10",
            "batches.measured=99990",
        ];
        let (m, w) = inputs("tiny.toml", tiny, &small);
        let e = check_run(&m, &w, &NO_LIMIT).unwrap();
        assert!(
            e.long().unwrap().contains("about 76 s of wall time"),
            "{e:?}"
        );
    }

    #[test]
    fn the_note_starts_above_a_minute() {
        assert_eq!(long_note(59.9), None);
        let note = long_note(600.0).unwrap();
        assert!(note.contains("about 10 minutes of wall time"), "{note}");
    }

    #[test]
    fn limits_refuse_naming_the_keys() {
        let tiny = include_str!("../../workloads/tiny.toml");
        let (m, w) = inputs("tiny.toml", tiny, &["queries.kind=\"get\""]);
        // 5 batches x 20,000 gets x 6 events.
        let at = |max_events| Limits {
            max_host_bytes: Some(u64::MAX),
            max_events,
        };
        assert!(check_run(&m, &w, &at(600_000)).is_ok());
        let e = check_run(&m, &w, &at(599_999)).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("queries.batch_size"));
        assert!(e.reason.contains("about 6.0e5 DPU events"), "{e}");
        let small = Limits {
            max_host_bytes: Some(32 << 20),
            max_events: u64::MAX,
        };
        let e = check_run(&m, &w, &small).unwrap_err();
        assert!(e.reason.contains("more than the 32 MiB available"), "{e}");
        // calibrate host: batch 0's 20,000 queries at 136 bytes (2.6 MiB) beside the fixed
        // 32 MiB and the partitioning's 0.1 MiB, which fit in 33 MiB.
        let tight = Limits {
            max_host_bytes: Some(33 << 20),
            max_events: u64::MAX,
        };
        assert!(check_partition(&m, &w, &tight).is_ok());
        let e = check_calibrate(&m, &w, &tight).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("queries.batch_size"));
        assert!(e.reason.contains("holds batch 0 whole"), "{e}");
        let roomy = Limits {
            max_host_bytes: Some(35 << 20),
            max_events: u64::MAX,
        };
        assert!(check_calibrate(&m, &w, &roomy).is_ok());
        // partition: the reference batch and 3 measured batches of 20,000 queries.
        assert!(check_partition(&m, &w, &at(80_000)).is_ok());
        let e = check_partition(&m, &w, &at(79_999)).unwrap_err();
        assert!(e.reason.contains("about 80000 queries"), "{e}");
    }

    #[test]
    fn a_streamed_run_needs_memory_of_its_budget_not_of_its_batches() {
        let tiny = include_str!("../../workloads/tiny.toml");
        let unlimited = Limits {
            max_host_bytes: Some(u64::MAX),
            max_events: u64::MAX,
        };
        let bytes = |sets: &[&str]| {
            let sets = [sets, &["batches.warmup=1", "batches.measured=1"]].concat();
            let (m, w) = inputs("tiny.toml", tiny, &sets);
            check_run(&m, &w, &unlimited).unwrap().host_bytes
        };
        let big = "queries.batch_size=1100000000";
        let streamed = bytes(&[big]);
        // Only the counts' checkpoints grow with the batch: one per Mi queries here.
        let at_100m = bytes(&["queries.batch_size=100000000"]);
        assert!(
            streamed > at_100m && streamed - at_100m < 1 << 20,
            "{streamed}, {at_100m}"
        );
        assert!(streamed < 8 << 30, "{streamed}");
        let smaller = bytes(&[big, "batches.stream_fragments=1000000"]);
        assert!(smaller < streamed / 10, "{smaller} against {streamed}");
        let held = bytes(&[big, "batches.streaming=\"never\""]);
        assert!(held > 10 * streamed, "{held} against {streamed}");
        // A small batch streamed holds no more fragments than it has: 20,000 gets are
        // 20,000 fragments, not the default budget's 80 Mi (4.4 GB).
        let small_gets = bytes(&["batches.streaming=\"always\"", "queries.kind=\"get\""]);
        assert!(small_gets < 128 << 20, "{small_gets}");
    }

    /// PIM-tree's runs, their estimates against measured peaks: on 128 DPUs with batches of
    /// 1,000 (2026-12-06; two of them were the fit), and at paper scale (docs).
    #[test]
    fn pim_tree_runs_are_estimated_near_their_peaks() {
        let text = include_str!("../../workloads/pim-tree-get.toml");
        let mib = |kind: &str, pairs: u64| {
            let sets = [
                "machine.ranks=2".to_owned(),
                "machine.usable_dpus=128".to_owned(),
                format!("data.pairs={pairs}"),
                "queries.batch_size=1000".to_owned(),
                format!("queries.kind=\"{kind}\""),
            ];
            let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
            let (m, w) = inputs("pim-tree-get.toml", text, &sets);
            check_run(&m, &w, &NO_LIMIT).unwrap().host_bytes >> 20
        };
        // (kind, pairs, measured peak in MiB); the first predecessor and get rows are the fit.
        let measured = [
            ("predecessor", 20_000_000, 953),
            ("get", 20_000_000, 459),
            ("predecessor", 10_000_000, 560),
            ("predecessor", 40_000_000, 1808),
            ("range-count-if", 20_000_000, 1090),
        ];
        for (kind, pairs, peak) in measured {
            let ratio = mib(kind, pairs) as f64 / peak as f64;
            assert!((0.85..1.15).contains(&ratio), "{kind} {pairs}: {ratio}");
        }
        // At paper scale (1,012 DPUs here, 2,538 measured: about 100 MiB apart), in GiB.
        let paper = |kind: &str, batch: &str, pairs_covered: &str| {
            let sets = [kind, batch, pairs_covered];
            let (m, w) = inputs("pim-tree-get.toml", text, &sets);
            check_run(&m, &w, &NO_LIMIT).unwrap().host_bytes as f64 / (1u64 << 30) as f64
        };
        let million = "queries.batch_size=1000000";
        let range = "queries.range_pairs=100";
        let estimates = [
            (paper("queries.kind=\"get\"", million, range), 7.63),
            (paper("queries.kind=\"predecessor\"", million, range), 12.85),
            (
                paper(
                    "queries.kind=\"range-count-if\"",
                    "queries.batch_size=10000",
                    range,
                ),
                9.6,
            ),
        ];
        for (estimate, peak) in estimates {
            let ratio = estimate / peak;
            assert!(
                (1.0..1.3).contains(&ratio),
                "{estimate} GiB for {peak}: {ratio}"
            );
        }
    }
}
