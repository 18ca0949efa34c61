//! The randomized soak (`pimdes soak`): a short run in CI, from a seed it prints. The long
//! run is a command (docs/reliability.md): `pimdes soak --seed N --cases 2000`.

mod common;

use common::{assert_bad, pimdes};
use pimdes::experiments::soak::{Outcome, check, draw, run_invariants};

/// The CI soak's first seed; `PIMDES_SOAK_SEED` picks another.
const SEED: u64 = 20_261_203;
const CASES: u64 = 30;

#[test]
fn drawn_runs_keep_every_invariant() {
    let seed = std::env::var("PIMDES_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED);
    println!("soak: seeds {seed} to {}", seed + CASES - 1);
    let mut held = 0;
    for s in seed..seed + CASES {
        let case = draw(s);
        match check(&case) {
            Outcome::Held => held += 1,
            Outcome::Refused(_) => {}
            Outcome::Failed(what) => panic!(
                "soak case {s}: {what}; rerun it with `pimdes soak --seed {s} --cases 1`; its run on one thread alone: `RAYON_NUM_THREADS=1 {}`",
                case.command_line()
            ),
        }
    }
    // Most drawn cases are feasible, so the invariants are exercised, not skipped.
    assert!(held * 4 >= CASES * 3, "only {held} of {CASES} cases ran");
}

/// The invariants can fail: a report with any one broken fact is caught (the tiny
/// workload as is, on B+-Forest).
#[test]
fn a_broken_invariant_is_caught() {
    let machine = pimdes::machine::Machine::from_toml_str(
        "m.toml",
        include_str!("../machines/paper-2rank.toml"),
        &[],
    )
    .unwrap();
    let workload = pimdes::workload::Workload::from_toml_str(
        "w.toml",
        include_str!("../workloads/tiny.toml"),
        &[],
    )
    .unwrap();
    let p = pimdes::partition::by_name("qdd-double-scan").unwrap();
    let mut silent = pimdes::experiments::run::Silent;
    let report =
        pimdes::experiments::run::run(&machine, &workload, p.as_ref(), &mut silent).unwrap();
    assert_eq!(run_invariants(&report), Ok(()));
    type Break = fn(&mut pimdes::experiments::run::RunReport);
    let breaks: [(Break, &str); 8] = [
        (|r| r.answers_verified = false, "answers verified"),
        (
            |r| r.breakdown_us.0[0].1 += 1.0,
            "stages + waiting = batch time",
        ),
        (
            |r| {
                let pim = r.breakdown_us.0.iter_mut().find(|(n, _)| n == "pim");
                pim.unwrap().1 += 1.0;
            },
            "cpu + communication + pim + waiting = batch time",
        ),
        (
            |r| r.latency_us.p50 = r.latency_us.max + 1.0,
            "latency percentiles ordered",
        ),
        (|r| r.dpu_kernel_us.min = -1.0, "kernel percentiles ordered"),
        (|r| r.throughput_queries_per_s = 0.0, "throughput positive"),
        (
            |r| {
                r.index_fields["imbalance"]["queries"] = serde_json::json!(0.5);
            },
            "IF_q >= 1",
        ),
        (
            |r| {
                r.index_fields.remove("imbalance");
            },
            "IF_q >= 1",
        ),
    ];
    for (spoil, what) in breaks {
        let mut wrong = report.clone();
        spoil(&mut wrong);
        assert_eq!(
            run_invariants(&wrong),
            Err(format!("invariant broken: {what}"))
        );
    }
}

#[test]
fn the_soak_command_reports_totals_and_refuses_bad_flags() {
    let o = pimdes(&["soak", "--seed", "7", "--cases", "3", "--quiet"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.starts_with("soak from seed 7: 3 cases, "),
        "{}",
        o.stdout
    );
    assert_bad(
        &pimdes(&["soak", "--cases", "0"]),
        &["--cases", "not between 1 and 100000"],
    );
    let max = u64::MAX.to_string();
    assert_bad(
        &pimdes(&["soak", "--seed", &max, "--cases", "2"]),
        &["--seed", "pass 2^64 - 1"],
    );
}

/// `--verbose` says each case's outcome in words and the command that reruns it.
#[test]
fn verbose_names_each_case_and_its_command() {
    let o = pimdes(&[
        "soak",
        "--seed",
        "5",
        "--cases",
        "2",
        "--verbose",
        "--quiet",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", o.stdout);
    for (at, seed) in [(0, 5), (2, 6)] {
        assert_eq!(lines[at], format!("seed {seed}: held every invariant"));
        assert_eq!(lines[at + 1], format!("  {}", draw(seed).command_line()));
    }
}
