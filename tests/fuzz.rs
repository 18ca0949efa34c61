//! A mutation fuzzer of the input files and `--set` overrides: it takes the shipped machine
//! and workload files (shrunk to a tiny scale), mutates their text and adds overrides, and
//! runs the library entry points that `pimdes partition`, `run` and `microbench` run, in the
//! order the command line runs them. It asserts that nothing panics, that every failure
//! is bad input (exit 2) naming its origin and reason, never a simulator bug, and that every
//! success passes the command's own invariants.
//!
//! CI runs a small fixed budget. The long run (see docs/reliability.md):
//!
//! ```sh
//! PIMDES_FUZZ_CASES=100000 cargo test --profile checked --test fuzz -- --nocapture
//! ```
//!
//! `PIMDES_FUZZ_SEED` picks another seed; `PIMDES_FUZZ_CASE=N` runs case N alone and prints
//! its inputs.

use pimdes::config::Override;
use pimdes::error::Error;
use pimdes::experiments::estimate::{Limits, check_partition, check_run};
use pimdes::experiments::partition::{choose_partitioner, run_partition};
use pimdes::experiments::run::{Silent, run};
use pimdes::experiments::soak::{panic_message, run_invariants};
use pimdes::machine::Machine;
use pimdes::microbench;
use pimdes::workload::Workload;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

const MACHINES: [(&str, &str); 5] = [
    (
        "paper-1012.toml",
        include_str!("../machines/paper-1012.toml"),
    ),
    (
        "paper-2rank.toml",
        include_str!("../machines/paper-2rank.toml"),
    ),
    (
        "upmem-2538.toml",
        include_str!("../machines/upmem-2538.toml"),
    ),
    (
        "upmem-2556-350mhz.toml",
        include_str!("../machines/upmem-2556-350mhz.toml"),
    ),
    (
        "upmem-v1b-400mhz.toml",
        include_str!("../machines/upmem-v1b-400mhz.toml"),
    ),
];
const WORKLOADS: [(&str, &str); 5] = [
    (
        "paper-get.toml",
        include_str!("../workloads/paper-get.toml"),
    ),
    (
        "paper-raq.toml",
        include_str!("../workloads/paper-raq.toml"),
    ),
    (
        "pim-tree-get.toml",
        include_str!("../workloads/pim-tree-get.toml"),
    ),
    (
        "quick-raq.toml",
        include_str!("../workloads/quick-raq.toml"),
    ),
    ("tiny.toml", include_str!("../workloads/tiny.toml")),
];

/// The CI budget: a few seconds on the project's 2-core machine.
const CI_CASES: u64 = 400;
const DEFAULT_SEED: u64 = 20_261_203;
/// The fuzzer's own work limit: a case above it is refused like a too-large run (about a
/// second of simulation), so a mutation that asks for a paper-scale run costs nothing.
const LIMITS: Limits = Limits {
    max_host_bytes: Some(1 << 30),
    max_events: 5_000_000,
};
/// A case slower than this counts as a hang.
const HANG: Duration = Duration::from_secs(60);

/// Values a mutation puts in place of a value.
const VALUES: [&str; 34] = [
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "11",
    "24",
    "64",
    "4096",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "0.5",
    "1e-9",
    "1e-300",
    "1e300",
    "1.0e10",
    "nan",
    "inf",
    "-inf",
    "\"\"",
    "\"x\"",
    "\"get\"",
    "\"range-count-if\"",
    "\"pim-tree\"",
    "true",
    "[]",
    "[1, 2]",
    "{}",
];

/// One case's inputs: two files' texts and the overrides.
#[derive(Debug, Clone)]
struct Case {
    command: Command,
    machine: (String, String),
    workload: (String, String),
    sets: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Command {
    Partition,
    Run,
    Microbench(&'static str),
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    Ok,
    /// Bad input, with the key (or "-") it named.
    BadInput(String),
    /// Refused by the work or memory estimate.
    TooLarge,
    /// Defects: each fails the test.
    Bug(String),
    Panic(String),
    Invariant(String),
}

impl Verdict {
    fn is_defect(&self) -> bool {
        matches!(
            self,
            Verdict::Bug(_) | Verdict::Panic(_) | Verdict::Invariant(_)
        )
    }
}

/// The shipped file shrunk to a tiny scale: the same keys, smaller sizes.
fn shrink(text: &str, sets: &[(&str, toml::Value)]) -> String {
    let mut table: toml::Table = toml::from_str(text).expect("shipped files parse");
    for (path, value) in sets {
        let (section, key) = path.split_once('.').map_or(("", *path), |(s, k)| (s, k));
        let t = if section.is_empty() {
            &mut table
        } else {
            table
                .entry(section)
                .or_insert_with(|| toml::Value::Table(Default::default()))
                .as_table_mut()
                .expect("a section")
        };
        if t.contains_key(key) || section == "data" || section == "queries" {
            t.insert(key.to_owned(), value.clone());
        }
    }
    toml::to_string(&table).expect("tables serialise")
}

/// The machine shrunk to one rank of 8 DPUs, or (`faulty`) to two ranks of 4 with one
/// DPU unusable, so multi-rank paths are fuzzed too.
fn tiny_machine(text: &str, faulty: bool) -> String {
    let mut table: toml::Table = toml::from_str(text).expect("shipped files parse");
    let (ranks, per_rank) = if faulty { (2, 4) } else { (1, 8) };
    table.insert("ranks".into(), toml::Value::Integer(ranks));
    table.insert("dpus_per_rank".into(), toml::Value::Integer(per_rank));
    table.remove("usable_dpus");
    if faulty {
        table.insert("usable_dpus".into(), toml::Value::Integer(7));
    }
    toml::to_string(&table).expect("tables serialise")
}

fn tiny_workload(text: &str) -> String {
    use toml::Value::Integer;
    shrink(
        text,
        &[
            ("data.pairs", Integer(20_000)),
            ("queries.batch_size", Integer(400)),
            ("queries.range_pairs", Integer(20)),
            ("batches.warmup", Integer(1)),
            ("batches.measured", Integer(1)),
            ("partition.chunk_pairs", Integer(50)),
        ],
    )
}

/// Every dotted key of the base files (`machine.` before the machine's), with a value it
/// has there, for overrides.
fn known_keys(machines: &[String], workloads: &[String]) -> Vec<(String, Option<String>)> {
    fn walk(prefix: &str, table: &toml::Table, out: &mut Vec<(String, Option<String>)>) {
        for (k, v) in table {
            let path = format!("{prefix}{k}");
            match v {
                toml::Value::Table(t) => walk(&format!("{path}."), t, out),
                _ => out.push((path, Some(v.to_string()))),
            }
        }
    }
    let mut keys = Vec::new();
    for m in machines {
        walk("machine.", &toml::from_str(m).unwrap(), &mut keys);
    }
    for w in workloads {
        walk("", &toml::from_str(w).unwrap(), &mut keys);
    }
    // Keys the shipped files leave at their defaults.
    keys.extend(
        [
            "run.launch",
            "run.batches_in_flight",
            "run.arrival",
            "run.queries_per_s",
            "run.poll_interval_us",
            "run.routing",
            "run.evaluation",
            "run.postprocessing",
            "queries.distribution",
            "data.value_domain",
            "deviation.base_partition",
            "deviation.factor",
            "partition.count_both_ends",
            "partition.double_scan_gates",
            "machine.usable_dpus",
        ]
        .map(|k| (k.to_owned(), None)),
    );
    keys.sort();
    keys.dedup_by(|a, b| a.0 == b.0);
    keys
}

/// A value for a mutation: an interesting one, or the old one scaled.
fn value(rng: &mut ChaCha8Rng, old: Option<&str>) -> String {
    let scaled = old.and_then(|o| o.trim().replace('_', "").parse::<f64>().ok());
    match (rng.random_range(0..2u32), scaled) {
        (0, Some(x)) => {
            let factors = [0.5, 2.0, 10.0, 1000.0, 0.001, 1e6, 1e9, 1e-6];
            let factor = factors[rng.random_range(0..factors.len())];
            let y = x * factor;
            if y.fract() == 0.0 && y.abs() < 1e18 {
                format!("{}", y as i64)
            } else {
                format!("{y:e}")
            }
        }
        _ => VALUES[rng.random_range(0..VALUES.len())].to_owned(),
    }
}

/// One mutation of a file's text.
fn mutate_text(rng: &mut ChaCha8Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let assignments: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(" = "))
        .collect();
    let pick = |rng: &mut ChaCha8Rng, from: &[usize]| from[rng.random_range(0..from.len())];
    match rng.random_range(0..10u32) {
        0..=4 if !assignments.is_empty() => {
            let i = pick(rng, &assignments);
            let (key, old) = lines[i].split_once(" = ").expect("an assignment");
            let new = value(rng, Some(old));
            lines[i] = format!("{key} = {new}");
        }
        5 if !assignments.is_empty() => {
            lines.remove(pick(rng, &assignments));
        }
        6 if !assignments.is_empty() => {
            let i = pick(rng, &assignments);
            let copy = lines[i].clone();
            lines.insert(i, copy);
        }
        7 => {
            let at = rng.random_range(0..=lines.len());
            lines.insert(at, "nosuch_key = 1".into());
        }
        8 => {
            let mut bytes = text.as_bytes().to_vec();
            if !bytes.is_empty() {
                let at = rng.random_range(0..bytes.len());
                bytes[at] ^= 1 << rng.random_range(0..8u32);
            }
            return String::from_utf8_lossy(&bytes).into_owned();
        }
        _ => {
            let cut = rng.random_range(0..=text.len());
            let cut = (0..=cut)
                .rev()
                .find(|&c| text.is_char_boundary(c))
                .unwrap_or(0);
            return text[..cut].to_owned();
        }
    }
    lines.join("\n") + "\n"
}

/// One override: a known key with a drawn value, or a malformed one.
fn mutate_set(rng: &mut ChaCha8Rng, keys: &[(String, Option<String>)]) -> String {
    match rng.random_range(0..12u32) {
        0 => "nosuch.key=1".into(),
        1 => {
            ["=1", "novalue", "queries.skew=", ".a=1", "a..b=1"][rng.random_range(0..5usize)].into()
        }
        _ => {
            let (key, old) = &keys[rng.random_range(0..keys.len())];
            format!("{key}={}", value(rng, old.as_deref()))
        }
    }
}

struct Bases {
    machines: Vec<String>,
    workloads: Vec<String>,
    keys: Vec<(String, Option<String>)>,
}

fn bases() -> Bases {
    let machines: Vec<String> = [false, true]
        .into_iter()
        .flat_map(|faulty| MACHINES.iter().map(move |(_, t)| tiny_machine(t, faulty)))
        .collect();
    let workloads: Vec<String> = WORKLOADS.iter().map(|(_, t)| tiny_workload(t)).collect();
    let keys = known_keys(&machines, &workloads);
    Bases {
        machines,
        workloads,
        keys,
    }
}

/// Case `n` of the fuzz run with `seed`: its own random stream, so it reproduces alone.
fn case(seed: u64, n: u64, b: &Bases) -> Case {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let command = match rng.random_range(0..10u32) {
        0..=3 => Command::Partition,
        4..=7 => Command::Run,
        _ => Command::Microbench(
            ["arithmetic", "mram", "stream", "transfer"][rng.random_range(0..4usize)],
        ),
    };
    let m = rng.random_range(0..b.machines.len());
    let w = rng.random_range(0..WORKLOADS.len());
    let mut machine = b.machines[m].clone();
    let mut workload = b.workloads[w].clone();
    let mut sets = Vec::new();
    for _ in 0..rng.random_range(1..=6u32) {
        match rng.random_range(0..3u32) {
            0 => machine = mutate_text(&mut rng, &machine),
            1 => workload = mutate_text(&mut rng, &workload),
            _ => sets.push(mutate_set(&mut rng, &b.keys)),
        }
    }
    Case {
        command,
        machine: (MACHINES[m % MACHINES.len()].0.to_owned(), machine),
        workload: (WORKLOADS[w].0.to_owned(), workload),
        sets,
    }
}

/// Runs a case as the command line would, up to the report.
fn execute(c: &Case) -> Result<Verdict, Error> {
    let overrides = c
        .sets
        .iter()
        .map(|s| Override::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    if let Command::Microbench(name) = c.command {
        // microbench takes machine keys only; the CLI refuses the others first.
        let machine_only: Vec<Override> = overrides
            .into_iter()
            .filter(|o| o.strip_prefix("machine").is_some())
            .collect();
        let machine = Machine::from_toml_str(&c.machine.0, &c.machine.1, &machine_only)?;
        microbench::check_mram(name, &machine)?;
        let records = microbench::run(name, &machine)
            .expect("a known suite")
            .map_err(|e| e.attributed(&machine.attribution, None))?;
        return Ok(check_records(&records));
    }
    let machine = Machine::from_toml_str(&c.machine.0, &c.machine.1, &overrides)?;
    let workload = Workload::from_toml_str(&c.workload.0, &c.workload.1, &overrides)?;
    let partitioner = choose_partitioner(&None, &workload)?;
    if c.command == Command::Partition {
        check_partition(&machine, &workload, &LIMITS)?;
        let report = run_partition(&machine, &workload, partitioner.as_ref())?;
        let i = &report.imbalance;
        return Ok(invariant(&[
            ("IF_d >= 1", i.data >= 1.0 - 1e-9),
            ("IF_q >= 1", i.queries.is_nan() || i.queries >= 1.0 - 1e-9),
        ]));
    }
    check_run(&machine, &workload, &LIMITS)?;
    let report = run(&machine, &workload, partitioner.as_ref(), &mut Silent)
        .map_err(|e| e.attributed(&machine.attribution, Some(&workload.attribution)))?;
    Ok(check_run_report(&report))
}

fn invariant(checks: &[(&str, bool)]) -> Verdict {
    match checks.iter().find(|(_, ok)| !ok) {
        Some((what, _)) => Verdict::Invariant((*what).to_owned()),
        None => Verdict::Ok,
    }
}

fn check_records(records: &[microbench::Record]) -> Verdict {
    let json = serde_json::to_value(records).expect("records serialise");
    let all_finite = json.as_array().is_some_and(|a| {
        a.iter().all(|r| {
            r.as_object().is_some_and(|o| {
                o.values()
                    .all(|v| v.as_f64().is_none_or(|x| x.is_finite() && x >= 0.0))
            })
        })
    });
    invariant(&[
        ("records", !records.is_empty()),
        ("finite, non-negative numbers", all_finite),
    ])
}

fn check_run_report(r: &pimdes::experiments::run::RunReport) -> Verdict {
    match run_invariants(r) {
        Ok(()) => Verdict::Ok,
        Err(broken) => Verdict::Invariant(broken),
    }
}

/// Runs case `c` and sorts its end.
fn judge(c: &Case) -> Verdict {
    match catch_unwind(AssertUnwindSafe(|| execute(c))) {
        Err(payload) => Verdict::Panic(panic_message(&*payload)),
        Ok(Ok(verdict)) => verdict,
        Ok(Err(e)) => sort_error(e),
    }
}

fn sort_error(e: Error) -> Verdict {
    let text = e.to_string();
    match e {
        Error::Input(i)
            if i.reason.contains("would need about")
                || i.reason.contains("would simulate about") =>
        {
            Verdict::TooLarge
        }
        Error::Input(i) if i.origin.is_empty() || i.reason.is_empty() => {
            Verdict::Bug(format!("an input error without origin or reason: {text}"))
        }
        Error::Input(i) => Verdict::BadInput(i.key.unwrap_or_else(|| "-".into())),
        // A kernel at a machine limit is bad input once attributed (an Input error);
        // anything else here is a simulator bug, since the inputs are all the fuzzer varies.
        _ => Verdict::Bug(text),
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

thread_local! {
    /// Set on the fuzzing thread: its caught panics print nothing (they are counted).
    static SILENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Silences the panics of the calling thread only; other tests' panics still print.
fn silence_panics_here() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !SILENT.with(|s| s.get()) {
                previous(info);
            }
        }));
    });
    SILENT.with(|s| s.set(true));
}

/// Aborts the test process, naming the case, when one case runs longer than [`HANG`]: a
/// hang would otherwise block CI without saying which case.
fn watchdog(seed: u64) -> std::sync::Arc<std::sync::Mutex<(u64, Instant)>> {
    let current = std::sync::Arc::new(std::sync::Mutex::new((0, Instant::now())));
    let watched = std::sync::Arc::clone(&current);
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let (n, since) = *watched.lock().unwrap_or_else(|e| e.into_inner());
            if since.elapsed() > HANG {
                eprintln!(
                    "fuzz: case {n} has run for over {HANG:?}: a hang; rerun it with PIMDES_FUZZ_SEED={seed} PIMDES_FUZZ_CASE={n}"
                );
                std::process::abort();
            }
        }
    });
    current
}

fn class(verdict: &Verdict, keys: bool) -> String {
    match verdict {
        Verdict::BadInput(key) if keys => format!("bad input {key}"),
        Verdict::BadInput(_) => "bad input".to_owned(),
        other => format!("{other:?}")
            .split('(')
            .next()
            .unwrap_or("")
            .to_owned(),
    }
}

#[test]
fn mutated_inputs_never_panic_and_fail_only_as_bad_input() {
    let seed = env_u64("PIMDES_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let b = bases();
    let cases: Vec<u64> = match env_u64("PIMDES_FUZZ_CASE") {
        Some(n) => vec![n],
        None => (0..env_u64("PIMDES_FUZZ_CASES").unwrap_or(CI_CASES)).collect(),
    };
    println!("fuzz: seed {seed}, {} cases", cases.len());
    silence_panics_here();
    let current = watchdog(seed);
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let mut defects = Vec::new();
    let mut slowest = (Duration::ZERO, 0);
    for &n in &cases {
        let c = case(seed, n, &b);
        if cases.len() == 1 {
            println!("{c:#?}");
        }
        *current.lock().unwrap_or_else(|e| e.into_inner()) = (n, Instant::now());
        let start = Instant::now();
        let verdict = judge(&c);
        slowest = slowest.max((start.elapsed(), n));
        let class = class(&verdict, cases.len() <= 1000);
        *totals
            .entry(format!("{:?} {class}", c.command))
            .or_default() += 1;
        if verdict.is_defect() {
            defects.push(format!("case {n} ({:?}): {verdict:?}", c.command));
        }
    }
    for (class, count) in &totals {
        println!("  {count:>7}  {class}");
    }
    println!("slowest case: {} ({:?})", slowest.1, slowest.0);
    assert!(
        defects.is_empty(),
        "{} defect(s); rerun one with PIMDES_FUZZ_SEED={seed} PIMDES_FUZZ_CASE=N and --nocapture:\n{}",
        defects.len(),
        defects.join("\n")
    );
    // The simulation itself is reached, not only the parsers: about 2 % of cases each.
    if cases.len() >= 400 {
        for command in ["Run Ok", "Partition Ok"] {
            let ok = totals.get(command).copied().unwrap_or(0);
            assert!(
                ok * 100 >= cases.len() as u64,
                "only {ok} cases of `{command}`"
            );
        }
    }
}

/// The fuzzer starts from valid inputs: every shrunk file pair runs as is.
#[test]
fn the_shrunk_bases_run() {
    let b = bases();
    for (m, machine) in b.machines.iter().enumerate() {
        for (w, workload) in b.workloads.iter().enumerate() {
            for command in [Command::Partition, Command::Run] {
                let c = Case {
                    command,
                    machine: (MACHINES[m % MACHINES.len()].0.to_owned(), machine.clone()),
                    workload: (WORKLOADS[w].0.to_owned(), workload.clone()),
                    sets: Vec::new(),
                };
                let verdict = judge(&c);
                assert_eq!(
                    verdict,
                    Verdict::Ok,
                    "machine base {m} ({}) with {}: {command:?}",
                    c.machine.0,
                    c.workload.0
                );
            }
        }
    }
}
