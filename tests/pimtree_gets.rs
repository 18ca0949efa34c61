//! PIM-tree's get batches end to end on small configurations: every answer checked,
//! query fusion sending each distinct key once, PIM-tree's transfers padded over all DPUs,
//! determinism across thread counts, and the inputs it refuses.

mod common;

use common::{assert_bad, pimdes};

use pimdes::config::Override;
use pimdes::experiments::run::{RunReport, Silent, run};
use pimdes::host::{Direction, Host, moved_bytes};
use pimdes::machine::Machine;
use pimdes::partition::by_name;
use pimdes::pimtree::gets::GetRound;
use pimdes::system::program::TransferKind;
use pimdes::workload::Workload;

/// 16 DPUs in one rank of the paper's server.
fn machine(extra: &[&str]) -> Machine {
    let mut o = vec!["machine.ranks=1", "machine.usable_dpus=16"];
    o.extend_from_slice(extra);
    let o: Vec<Override> = o.iter().map(|s| Override::parse(s).unwrap()).collect();
    Machine::from_toml_str(
        "paper-2rank.toml",
        include_str!("../machines/paper-2rank.toml"),
        &o,
    )
    .unwrap()
}

fn workload(extra: &[&str]) -> Workload {
    let mut o = vec![
        "data.pairs=60000",
        "queries.batch_size=4000",
        "batches.warmup=1",
        "batches.measured=2",
    ];
    o.extend_from_slice(extra);
    let o: Vec<Override> = o.iter().map(|s| Override::parse(s).unwrap()).collect();
    Workload::from_toml_str(
        "pim-tree-get.toml",
        include_str!("../workloads/pim-tree-get.toml"),
        &o,
    )
    .unwrap()
}

fn run_on(m: &Machine, w: &Workload) -> RunReport {
    run(
        m,
        w,
        by_name("qdd-double-scan").unwrap().as_ref(),
        &mut Silent,
    )
    .unwrap()
}

fn field(r: &RunReport, key: &str) -> f64 {
    r.index_f64(&["pim_tree", key])
}

#[test]
fn answers_are_verified_and_the_breakdown_tiles_the_batch() {
    let r = run_on(&machine(&[]), &workload(&[]));
    assert_eq!(r.index, "pim-tree");
    assert!(r.answers_verified);
    let b = &r.breakdown_us;
    let stages = [
        "sort",
        "task_generation",
        "cpu_to_dpu",
        "dpu_kernel",
        "dpu_to_cpu",
        "fill",
    ];
    let sum: f64 = stages.iter().map(|s| b.get(s)).sum::<f64>() + b.get("waiting");
    assert!((sum - r.batch_time_us.mean).abs() < 1e-6 * sum);
    for s in stages {
        assert!(b.get(s) > 0.0, "stage {s} took no time");
    }
    let classes = b.get("cpu") + b.get("communication") + b.get("pim") + b.get("waiting");
    assert!((classes - sum).abs() < 1e-6 * sum);
    assert_eq!(field(&r, "rounds_per_batch"), 1.0);
    let split = &r.launch_split["dpu_kernel"];
    let parts = split.launch_us + split.slowest_dpu_us + split.until_seen_us;
    assert!(
        (parts - b.get("dpu_kernel")).abs() < 1e-6 * parts,
        "{split:?}"
    );
    assert_eq!(split.launches, 1.0, "one launch per round");
}

#[test]
fn skewed_batches_send_fewer_distinct_keys() {
    let m = machine(&[]);
    let flat = run_on(&m, &workload(&["queries.skew=0"]));
    let skewed = run_on(&m, &workload(&["queries.skew=1.5"]));
    assert!(flat.answers_verified && skewed.answers_verified);
    let (f, s) = (
        field(&flat, "distinct_keys_per_batch"),
        field(&skewed, "distinct_keys_per_batch"),
    );
    assert!(
        f <= 4000.0 && s < 0.8 * f,
        "distinct keys: flat {f}, skewed {s}"
    );
    // Fewer tasks: less to move (the reply buffers shrink with the distinct keys).
    assert!(field(&skewed, "payload_bytes_per_query") < field(&flat, "payload_bytes_per_query"));
}

#[test]
fn every_distinct_key_is_one_task_on_its_dpu() {
    let keys: Vec<u64> = (0..10_000u64).map(|i| (i % 37) * 1_000_003).collect();
    let r = GetRound::plan(&keys, 16);
    assert_eq!(r.distinct.len(), 37);
    assert_eq!(r.tasks.iter().map(Vec::len).sum::<usize>(), 37);
    for (i, &k) in keys.iter().enumerate() {
        assert_eq!(r.distinct[r.key_of_query[i] as usize], k);
    }
}

#[test]
fn parallel_all_pads_every_dpu_to_the_largest_buffer_of_the_set() {
    // Two ranks of 4 DPUs; the largest buffer (4,000 B) is on rank 1.
    let m = machine(&["machine.ranks=2", "machine.usable_dpus=8"]);
    let sizes = [104, 200, 304, 400, 4000, 0, 16, 16];
    assert_eq!(
        moved_bytes(&m, TransferKind::ParallelAll, &sizes),
        7 * 4000,
        "seven DPUs in the set, each moving the set's largest buffer"
    );
    assert_eq!(
        moved_bytes(&m, TransferKind::Parallel, &sizes),
        4 * 400 + 3 * 4000
    );
    // One large buffer on rank 0: per-rank padding leaves rank 1 small, padding over
    // the set makes rank 1 move 16,000 B. With a rank as fast as one DPU (0.33 GB/s),
    // rank 1 then takes 16,000 B / 0.33 GB/s = 48.48 us after the 100 us call.
    let m = machine(&[
        "machine.ranks=2",
        "machine.usable_dpus=8",
        "machine.transfer.cpu_dpu_gb_per_s_per_rank=0.33",
        "machine.transfer.cpu_dpu_gb_per_s_per_dpu=0.33",
        "machine.transfer.call_fixed_us=100",
        "machine.transfer.rank_fixed_us=0",
    ]);
    let host = Host::new(&m);
    let sizes = [4000, 0, 0, 0, 16, 16, 16, 16];
    let all = host.transfer(Direction::CpuDpu, TransferKind::ParallelAll, &sizes);
    let per_rank = host.transfer(Direction::CpuDpu, TransferKind::Parallel, &sizes);
    assert_eq!((all.moved_bytes, per_rank.moved_bytes), (20_000, 4064));
    assert_eq!(all.payload_bytes, per_rank.payload_bytes);
    let us = |t: pimdes::engine::Time| t.ps() as f64 / 1e6;
    assert!(
        (us(all.time) - (100.0 + 16_000.0 / 0.33e3)).abs() < 0.01,
        "{:?}",
        all.time
    );
    assert!(
        (us(per_rank.time) - (100.0 + 4_000.0 / 0.33e3)).abs() < 0.01,
        "{:?}",
        per_rank.time
    );
}

#[test]
fn same_report_on_one_and_several_threads() {
    let w = workload(&["queries.skew=1.2"]);
    let m = machine(&[]);
    let part = |r: &RunReport| {
        let mut v = serde_json::to_value(r).unwrap();
        v.as_object_mut().unwrap().remove("host");
        serde_json::to_string(&v).unwrap()
    };
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    let a = pool(1).install(|| part(&run_on(&m, &w)));
    let b = pool(3).install(|| part(&run_on(&m, &w)));
    assert_eq!(a, b);
}

#[test]
fn a_slower_poll_lengthens_the_kernel_stage() {
    let m = machine(&[]);
    let fast = run_on(&m, &workload(&["run.poll_interval_us=1"]));
    let slow = run_on(&m, &workload(&["run.poll_interval_us=400"]));
    let (f, s) = (
        fast.breakdown_us.get("dpu_kernel"),
        slow.breakdown_us.get("dpu_kernel"),
    );
    // The host sees the end at the first poll after it: a multiple of 400 us.
    assert!(s >= 400.0 && f < s, "fast {f} us, slow {s} us");
    assert!((s / 400.0 - (s / 400.0).round()).abs() < 1e-6, "{s}");
}

const ARGS: [&str; 6] = [
    "run",
    "--machine",
    "machines/paper-2rank.toml",
    "--workload",
    "workloads/pim-tree-get.toml",
    "--set",
];

fn run_cli(sets: &[&str]) -> common::Outcome {
    run_cli_flags(&[], sets)
}

fn run_cli_flags(flags: &[&str], sets: &[&str]) -> common::Outcome {
    let mut args: Vec<&str> = ARGS[..5].to_vec();
    args.extend_from_slice(flags);
    for s in [
        "data.pairs=60000",
        "queries.batch_size=4000",
        "batches.warmup=1",
    ]
    .iter()
    .chain(sets)
    {
        args.extend(["--set", s]);
    }
    pimdes(&args)
}

#[test]
fn data_beyond_the_data_node_region_fails_before_simulating() {
    let o = run_cli(&[
        "machine.ranks=1",
        "machine.usable_dpus=1",
        "data.pairs=400000",
        "queries.batch_size=100",
    ]);
    assert_bad(
        &o,
        &[
            "data.pairs",
            "400000 keys per DPU on average",
            "data-node region",
        ],
    );
    // The mean fits, the fullest DPU does not.
    let o = run_cli(&[
        "machine.ranks=1",
        "machine.usable_dpus=2",
        "data.pairs=655300",
        "queries.batch_size=100",
    ]);
    assert_bad(
        &o,
        &[
            "data.pairs",
            "holds",
            "keys",
            "data-node region",
            "but the region holds 327679 (7864320 bytes, a size fixed in PIM-tree's source, whatever the MRAM)",
        ],
    );
}

#[test]
fn mram_smaller_than_the_layout_is_refused() {
    let o = run_cli(&["machine.dpu.mram_size_bytes=33554432"]);
    assert_bad(&o, &["dpu.mram_size_bytes", "PIM-tree's MRAM regions"]);
}

#[test]
fn more_tasks_than_a_round_allows_are_refused() {
    let o = run_cli(&[
        "machine.ranks=1",
        "machine.usable_dpus=2",
        "queries.skew=0",
        "queries.batch_size=80000",
    ]);
    assert_bad(&o, &["queries.batch_size", "12800 per DPU per round"]);
}

#[test]
fn open_arrivals_are_not_supported() {
    assert_bad(
        &run_cli(&["run.arrival=open", "run.queries_per_s=1000000"]),
        &["run.arrival", "closed arrivals only"],
    );
}

#[test]
fn a_bad_poll_interval_is_an_input_error() {
    for bad in ["-1", "1e9", "nan"] {
        let o = run_cli(&[&format!("run.poll_interval_us={bad}")]);
        assert_bad(
            &o,
            &[
                "key `run.poll_interval_us`",
                "is not between 0 and 1000000 microseconds",
            ],
        );
    }
}

#[test]
fn a_trace_records_the_busiest_dpu_and_a_listed_one() {
    let dir = std::env::temp_dir().join(format!("pimdes-pimtree-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    let p = path.to_str().unwrap();
    // The rerun of each recorded DPU must take the cycles of its first run (else exit 3).
    for dpus in ["busiest", "3,11"] {
        let flags = [
            "--trace",
            p,
            "--trace-dpus",
            dpus,
            "--trace-batches",
            "1..3",
        ];
        let o = run_cli_flags(&flags, &[]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let names: Vec<&str> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("tasklet ")),
            "tasklet tracks in the trace ({dpus})"
        );
        if dpus == "3,11" {
            for want in ["DPU 3 (rank 0), batch 1", "DPU 11 (rank 0), batch 2"] {
                assert!(names.contains(&want), "{want} missing: {names:?}");
            }
        }
        assert!(!o.stderr.contains("no tasklet timelines"), "{}", o.stderr);
    }
    // Predecessor kernels record no timelines: the run says so rather than nothing.
    let flags = ["--trace", p, "--trace-dpus", "3"];
    let o = run_cli_flags(&flags, &["queries.kind=predecessor"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "warning: the trace has no tasklet timelines: pim-tree records none for predecessor queries"
        ),
        "{}",
        o.stderr
    );
    // The cap of 64 DPU timelines binds the gets (20 batches x 4 DPUs), not the
    // predecessor run, which records none.
    let many = [
        "--trace",
        p,
        "--trace-batches",
        "1..21",
        "--trace-dpus",
        "0,1,2,3",
    ];
    let o = run_cli_flags(&many, &[]);
    assert_bad(
        &o,
        &["--trace-batches", "20 batches x 4 DPUs is 80 DPU timelines"],
    );
    let o = run_cli_flags(&many, &["queries.kind=predecessor"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_poll_interval_with_sync_launches_is_refused() {
    // The file polls; the override that made its launches sync broke the rule, and is named.
    let o = run_cli(&["run.launch=sync"]);
    assert_bad(
        &o,
        &[
            "error: --set run.launch=sync: key `run.launch`",
            "only async launches poll",
            "a --set cannot remove a key",
        ],
    );
}

/// PIM-tree allows fewer chunks than DPUs, which leaves some of B+-Forest's base partitions
/// empty: a deviation of one of them has no keys to amplify and is refused (it panicked);
/// one that holds a chunk runs.
#[test]
fn a_deviation_of_an_empty_base_partition_is_refused() {
    let small = [
        "machine.ranks=1",
        "machine.usable_dpus=16",
        "data.pairs=3000",
        "deviation.factor=2",
    ];
    // 10 chunks over 16 DPUs: base partition 2 holds none, 3 holds chunk 1.
    let o = run_cli(&[&small[..], &["deviation.base_partition=2"]].concat());
    assert_bad(
        &o,
        &[
            "key `deviation.base_partition`",
            "base partition 2 holds no chunk",
            "10 chunks for 16 DPUs",
            "choose another (1 and 3 are the nearest that hold one)",
        ],
    );
    let o = run_cli(&[&small[..], &["deviation.base_partition=3"]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
}

/// `partition` on a PIM-tree workload partitions as B+-Forest would, and says so.
#[test]
fn partition_of_a_pim_tree_workload_says_it_is_bforests() {
    let o = pimdes(&[
        "partition",
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/pim-tree-get.toml",
        "--set",
        "data.pairs=200000",
        "--set",
        "queries.batch_size=5000",
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stderr.contains("warning: the workload's index is pim-tree, which places its data by hash: this is B+-Forest's partitioning"),
        "{}",
        o.stderr
    );
}

/// A run under another protocol than PIM-tree's own gets a note naming each setting that
/// differs, the tasklets among them; its own protocol gets none.
#[test]
fn another_protocol_is_noted_setting_by_setting() {
    let note = |r: &RunReport| {
        let mut notes = r
            .warnings
            .iter()
            .filter(|w| w.contains("another host protocol"));
        notes.next().cloned()
    };
    let own = run_on(&machine(&[]), &workload(&["batches.warmup=2"]));
    assert_eq!(note(&own), None, "{:?}", own.warnings);
    let more = run_on(
        &machine(&[]),
        &workload(&["run.tasklets=16", "batches.warmup=2"]),
    );
    let said = note(&more).expect("a note");
    assert!(said.starts_with("pim-tree runs here with another host protocol than its own: run.tasklets = 16 (its own: run.tasklets = 11"), "{said}");
    let both = workload(&["run.tasklets=16", "run.batches_in_flight=1"]);
    let said = note(&run_on(&machine(&[]), &both)).expect("a note");
    assert!(
        said.contains("run.tasklets = 16, run.batches_in_flight = 1 ("),
        "{said}"
    );
}

/// `pim_tree.task_imbalance` is the busiest DPU's tasks over the mean per DPU: with one
/// measured batch, `max_tasks_per_dpu` over `distinct_keys_per_batch` spread over the DPUs.
#[test]
fn the_task_imbalance_is_the_busiest_dpus_tasks_over_the_mean() {
    for skew in ["queries.skew=0", "queries.skew=1.2"] {
        let r = run_on(&machine(&[]), &workload(&["batches.measured=1", skew]));
        let expected =
            field(&r, "max_tasks_per_dpu") * r.dpus as f64 / field(&r, "distinct_keys_per_batch");
        let imbalance = field(&r, "task_imbalance");
        assert!(
            (imbalance - expected).abs() < 1e-12,
            "{imbalance} against {expected}"
        );
        assert!(imbalance >= 1.0, "{imbalance}");
    }
}
