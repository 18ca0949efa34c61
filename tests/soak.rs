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
                "soak case {s}: {what}; reproduce with `pimdes soak --seed {s} --cases 1` or `{}`",
                case.command_line()
            ),
        }
    }
    // Most drawn cases are feasible, so the invariants are exercised, not skipped.
    assert!(held * 4 >= CASES * 3, "only {held} of {CASES} cases ran");
}

/// The invariants can fail: a report with one broken fact is caught.
#[test]
fn a_broken_invariant_is_caught() {
    let case = draw(SEED);
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
    assert_eq!(run_invariants(&report), Ok(()), "{case:?}");
    let mut wrong = report.clone();
    wrong.answers_verified = false;
    assert_eq!(
        run_invariants(&wrong),
        Err("invariant broken: answers verified".into())
    );
    let mut wrong = report.clone();
    wrong.breakdown_us.0[0].1 += 1.0;
    assert_eq!(
        run_invariants(&wrong),
        Err("invariant broken: stages + waiting = batch time".into())
    );
    let mut wrong = report;
    wrong.latency_us.p50 = wrong.latency_us.max + 1.0;
    assert_eq!(
        run_invariants(&wrong),
        Err("invariant broken: latency percentiles ordered".into())
    );
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
