//! A DPU's share of a batch split over several launches (`batches.max_launches`) when its
//! buffers do not fit in MRAM beside its trees: the fewest launches that fit are taken,
//! every answer is still checked, held and streamed runs agree, one launch is today's
//! batch bit for bit, and what cannot be split is refused with the key to change.

mod common;

use common::{assert_bad, pimdes};
use pimdes::forest::batch::{DpuBatch, largest_launch_records, launch_records};
use pimdes::workload::Query;
use serde_json::Value;

/// MRAM that holds tiny.toml's trees on paper-2rank but not a whole batch's buffers (the
/// busiest DPU needs 263,408 bytes in one launch, 177,424 in two).
const SMALL_MRAM: &str = "machine.dpu.mram_size_bytes=200000";

/// `pimdes run` of tiny.toml on paper-2rank, quiet, with `extra` arguments.
fn run_text(extra: &[&str]) -> common::Outcome {
    let base = [
        "run",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
        "--quiet",
    ];
    pimdes(&[&base[..], extra].concat())
}

/// [`run_text`] with a JSON report.
fn run(extra: &[&str]) -> common::Outcome {
    run_text(&[&["--json"][..], extra].concat())
}

fn report(extra: &[&str]) -> Value {
    let o = run(extra);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

/// The report without the parts that name the configuration or the host.
fn results(mut v: Value) -> Value {
    let o = v.as_object_mut().unwrap();
    for k in [
        "host",
        "config",
        "config_fnv1a64",
        "command_line",
        "streamed",
    ] {
        o.remove(k);
    }
    v
}

#[test]
fn records_split_in_order_into_near_equal_launches() {
    for records in [0usize, 1, 7, 100, 101] {
        for launches in 1..=9u32 {
            let parts: Vec<_> = (0..launches)
                .map(|l| launch_records(records, l, launches))
                .collect();
            assert_eq!(parts[0].start, 0);
            assert_eq!(parts.last().unwrap().end, records);
            assert!(parts.windows(2).all(|w| w[0].end == w[1].start));
            let largest = parts.iter().map(|r| r.len()).max().unwrap();
            let smallest = parts.iter().map(|r| r.len()).min().unwrap();
            assert!(largest - smallest <= 1, "{records} in {launches}");
            assert_eq!(
                largest as u64,
                largest_launch_records(records as u64, launches)
            );
        }
    }
    let q = |k: u64| Query {
        lo: k,
        hi: k,
        value: 0,
    };
    let batch = DpuBatch {
        cold: (0..5).map(q).collect(),
        hot: (5..8).map(q).collect(),
        origin: (10..18).collect(),
    };
    let parts: Vec<DpuBatch> = (0..3).map(|l| batch.launch_part(l, 3)).collect();
    // 8 records in 3 launches: 2, 3, 3; the second launch straddles cold and hot.
    assert_eq!(parts[1].cold, vec![q(2), q(3), q(4)]);
    assert!(parts[1].hot.is_empty());
    assert_eq!(parts[2].cold, Vec::new());
    assert_eq!(parts[2].hot, vec![q(5), q(6), q(7)]);
    let origins: Vec<u32> = parts.iter().flat_map(|p| p.origin.clone()).collect();
    assert_eq!(origins, batch.origin);
}

#[test]
fn one_launch_is_the_default_and_a_batch_too_big_for_it_is_refused() {
    let o = run(&["--set", SMALL_MRAM]);
    assert_bad(
        &o,
        &[
            "dpu.mram_size_bytes",
            "DPU 103 needs 263408 bytes",
            "batches.max_launches",
        ],
    );
    let plain = report(&[]);
    assert_eq!(plain["launches_per_batch"], 1);
    let explicit = report(&["--set", "batches.max_launches=4"]);
    assert_eq!(
        results(plain),
        results(explicit),
        "a batch that fits takes one launch whatever the limit"
    );
}

#[test]
fn the_fewest_launches_that_fit_are_taken_and_every_answer_is_checked() {
    let split = report(&["--set", SMALL_MRAM, "--set", "batches.max_launches=8"]);
    assert_eq!(split["launches_per_batch"], 2);
    assert_eq!(split["mram"]["max_needed_bytes"], 177424);
    assert_eq!(split["answers_verified"], true);
    let whole = report(&[]);
    // Same answers and queries, so the same fragments; two launches cost each DPU two
    // launches' fixed work, and the kernel stage waits for the slowest DPU of each.
    let f = |v: &Value| v["policies"]["routing"]["metrics"]["fragments"].clone();
    assert_eq!(f(&split), f(&whole));
    let kernel = |v: &Value| v["breakdown_us"]["dpu_kernel"].as_f64().unwrap();
    assert!(
        kernel(&split) > kernel(&whole),
        "{} vs {}",
        kernel(&split),
        kernel(&whole)
    );
    let events = |v: &Value| {
        v["policies"]["evaluation"]["metrics"]["events"]
            .as_f64()
            .unwrap()
    };
    assert!(events(&split) > events(&whole));
}

#[test]
fn the_run_table_says_when_a_batch_was_split() {
    let split = run_text(&["--set", SMALL_MRAM, "--set", "batches.max_launches=8"]);
    assert_eq!(split.code, Some(0), "{}", split.stderr);
    assert!(
        split.stdout.contains("launches per batch")
            && split
                .stdout
                .contains("up to 2 (each DPU's buffers split to fit MRAM)"),
        "{}",
        split.stdout
    );
    let whole = run_text(&[]);
    assert_eq!(whole.code, Some(0), "{}", whole.stderr);
    assert!(
        !whole.stdout.contains("launches per batch"),
        "{}",
        whole.stdout
    );
}

/// Each batch takes the fewest launches that fit its own shares: under open arrivals the
/// small batches fit in one launch on the MRAM that splits a full batch in two, so they
/// report as on an MRAM that never splits.
#[test]
fn a_batch_that_fits_takes_one_launch_though_a_full_one_would_not() {
    let open = [
        "--set",
        "run.arrival=open",
        "--set",
        "run.queries_per_s=100000",
        "--set",
        "batches.warmup=3",
    ];
    let small = report(
        &[
            &open[..],
            &["--set", SMALL_MRAM, "--set", "batches.max_launches=8"],
        ]
        .concat(),
    );
    let roomy = report(&open);
    assert_eq!(small["launches_per_batch"], 1);
    let without_mram = |mut v: Value| {
        v.as_object_mut().unwrap().remove("mram");
        results(v)
    };
    assert_eq!(without_mram(small), without_mram(roomy));
}

#[test]
fn held_and_streamed_split_batches_report_the_same() {
    let sets = ["--set", SMALL_MRAM, "--set", "batches.max_launches=3"];
    let held = report(&[&sets[..], &["--set", "batches.streaming=\"never\""]].concat());
    for budget in ["97", "700", "83886080"] {
        let b = format!("batches.stream_fragments={budget}");
        let streamed = report(
            &[
                &sets[..],
                &["--set", "batches.streaming=\"always\"", "--set", &b],
            ]
            .concat(),
        );
        assert_eq!(streamed["streamed"], true);
        assert_eq!(results(streamed), results(held.clone()), "budget {budget}");
    }
}

#[test]
fn a_bad_launch_limit_is_refused() {
    for bad in ["0", "1025"] {
        let o = run(&["--set", &format!("batches.max_launches={bad}")]);
        assert_bad(&o, &["batches.max_launches", "is not between 1 and 1024"]);
    }
    let o = run(&["--set", SMALL_MRAM, "--set", "batches.max_launches=1"]);
    assert_bad(&o, &["buffers for up to 5375 queries"]);
}
