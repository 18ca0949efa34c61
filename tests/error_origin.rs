//! An error names where the wrong value came from: the `--set` override that set (or
//! introduced) a key is blamed, not the file, and each reason is the real one.

mod common;

use common::{Outcome, assert_bad, pimdes};
use std::path::PathBuf;

const MACHINE: &str = "machines/paper-1012.toml";
const WORKLOAD: &str = "workloads/tiny.toml";

fn partition(sets: &[&str]) -> Outcome {
    let mut args = vec!["partition", "--machine", MACHINE, "--workload", WORKLOAD];
    for s in sets {
        args.extend_from_slice(&["--set", s]);
    }
    pimdes(&args)
}

#[test]
fn an_unknown_override_path_is_blamed_on_the_override() {
    for (set, field) in [
        ("nosuch.key=1", "`nosuch`"),
        ("queries.nosuch=1", "`nosuch`"),
        ("machine.nosuch.x=1", "`nosuch`"),
        ("machine.dpu.nosuch=1", "`nosuch`"),
    ] {
        let o = partition(&[set]);
        assert_bad(
            &o,
            &[&format!("error: --set {set}: "), "unknown field", field],
        );
        assert!(!o.stderr.contains(".toml"), "{}", o.stderr);
    }
}

/// A file's own unknown key stays the file's, even when an override sets a key whose name
/// appears in the message's list of expected keys.
#[test]
fn an_unknown_key_in_the_file_stays_the_files() {
    let text =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(WORKLOAD)).unwrap();
    let dir = std::env::temp_dir().join(format!("pimdes-origin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("skw.toml");
    std::fs::write(&path, text.replace("skew = 1.0", "skw = 1.0")).unwrap();
    let o = pimdes(&[
        "partition",
        "--machine",
        MACHINE,
        "--workload",
        path.to_str().unwrap(),
        "--set",
        "queries.skew=1.0",
    ]);
    assert_bad(&o, &["skw.toml: key `queries.skw`", "unknown field `skw`"]);
}

#[test]
fn a_section_made_by_an_override_names_its_missing_key() {
    let o = partition(&["deviation.base_partition=3"]);
    assert_bad(
        &o,
        &[
            "--set deviation.base_partition=3: key `deviation.factor`",
            "missing field `factor`",
            "comes from this override",
            "--set deviation.factor=",
        ],
    );
}

#[test]
fn chunk_pairs_above_32_bits_says_so() {
    let o = partition(&["partition.chunk_pairs=5000000000"]);
    assert_bad(
        &o,
        &[
            "--set partition.chunk_pairs=5000000000",
            "`partition.chunk_pairs`",
            "above the largest chunk, 2^32-1",
        ],
    );
    assert!(!o.stderr.contains("at least 1"), "{}", o.stderr);
}

#[test]
fn an_mram_override_that_does_not_fit_is_blamed_for_it() {
    let set = "machine.dpu.mram_size_bytes=8192";
    let o = pimdes(&[
        "run",
        "--machine",
        MACHINE,
        "--workload",
        WORKLOAD,
        "--quiet",
        "--set",
        set,
    ]);
    assert_bad(
        &o,
        &[
            &format!("error: --set {set}: key `dpu.mram_size_bytes`"),
            "does not fit in MRAM",
        ],
    );
    // With the same MRAM written in the machine file, the failure is the data's.
    let text =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(MACHINE)).unwrap();
    let small = text.replace("mram_size_bytes = 67108864", "mram_size_bytes = 8192");
    assert_ne!(small, text);
    let dir = std::env::temp_dir().join(format!("pimdes-origin-mram-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("small.toml");
    std::fs::write(&path, small).unwrap();
    let o = pimdes(&[
        "run",
        "--machine",
        path.to_str().unwrap(),
        "--workload",
        WORKLOAD,
        "--quiet",
    ]);
    assert_bad(
        &o,
        &[
            "workloads/tiny.toml: key `data.pairs`",
            "does not fit in MRAM",
        ],
    );
}

/// A kernel limit names the machine file when the file set the key.
#[test]
fn a_kernel_limit_names_the_machine_file() {
    let text =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(MACHINE)).unwrap();
    let small = text.replace("wram_size_bytes = 65536", "wram_size_bytes = 1024");
    assert_ne!(small, text);
    let dir = std::env::temp_dir().join(format!("pimdes-origin-wram-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("small-wram.toml");
    std::fs::write(&path, small).unwrap();
    let o = pimdes(&[
        "microbench",
        "arithmetic",
        "--machine",
        path.to_str().unwrap(),
    ]);
    assert_bad(
        &o,
        &[
            "small-wram.toml: key `dpu.wram_size_bytes`",
            "WRAM overflow",
        ],
    );
}

/// A WRAM overflow is a rule over the WRAM's size, each stack's size and the run's tasklets:
/// every override of one of them is named, the machine's first (the machine file only when
/// no override set any, tested above).
#[test]
fn a_wram_overflow_names_the_override_that_filled_it() {
    let text =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(MACHINE)).unwrap();
    let big_stacks = text.replace(
        "stack_bytes_per_tasklet = 1024 ",
        "stack_bytes_per_tasklet = 2704 ",
    );
    assert_ne!(big_stacks, text);
    let dir = std::env::temp_dir().join(format!("pimdes-origin-stack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big-stacks.toml");
    std::fs::write(&path, big_stacks).unwrap();
    let run = |machine: &str, sets: &[&str]| {
        let mut args = vec!["run", "--machine", machine, "--workload", WORKLOAD];
        for s in sets {
            args.extend_from_slice(&["--set", s]);
        }
        args.extend_from_slice(&["--set", "machine.usable_dpus=16"]);
        pimdes(&args)
    };
    let stacks = "machine.dpu.stack_bytes_per_tasklet=100000";
    let tasklets = "run.tasklets=24";
    let file = path.to_str().unwrap();
    for (machine, sets, blamed) in [
        (
            MACHINE,
            vec![stacks],
            format!("error: --set {stacks}: key `dpu.stack_bytes_per_tasklet`"),
        ),
        (
            file,
            vec![tasklets],
            format!("error: --set {tasklets}: key `run.tasklets`"),
        ),
        (
            MACHINE,
            vec![tasklets, "machine.dpu.stack_bytes_per_tasklet=2704"],
            "error: --set machine.dpu.stack_bytes_per_tasklet=2704 and --set run.tasklets=24: key `dpu.stack_bytes_per_tasklet`".to_owned(),
        ),
    ] {
        assert_bad(&run(machine, &sets), &[&blamed, "WRAM overflow"]);
    }
}

/// An override that replaces a whole section decides every key in it: a rule it breaks
/// names that override, not the file whose section it replaced.
#[test]
fn a_whole_section_override_is_blamed_for_its_keys() {
    let set = "machine.dma={min_size_bytes = 4096, max_size_bytes = 2048, alignment_bytes = 8, \
               read_latency_fixed_cycles = 77, write_latency_fixed_cycles = 61, \
               latency_cycles_per_byte = 0.5, occupancy_fixed_cycles = 16, \
               occupancy_cycles_per_byte = 0.5}";
    let o = partition(&[set]);
    assert_bad(
        &o,
        &[
            &format!("error: --set {set}: key `dma.max_size_bytes`"),
            "is below dma.min_size_bytes = 4096",
        ],
    );
    assert!(!o.stderr.contains(".toml"), "{}", o.stderr);
}

/// A get batch's task limit and a DPU's data capacity are rules between the workload and
/// the machine: an override of either side is named, as for predecessor rounds.
#[test]
fn pim_trees_get_limits_name_the_machines_overrides_too() {
    let one_dpu = [
        "machine.ranks=1",
        "machine.usable_dpus=1",
        "run.index=pim-tree",
    ];
    let get = [
        "queries.kind=get",
        "queries.batch_size=60000",
        "data.pairs=300000",
    ];
    let tasks = [&one_dpu[..], &get].concat();
    let o = common::run_tiny(&["--quiet"], &tasks);
    assert_bad(
        &o,
        &[
            "--set queries.batch_size=60000 and --set data.pairs=300000 and --set machine.usable_dpus=1 and --set machine.ranks=1: key `queries.batch_size`",
            "get tasks (",
            "PIM-tree allows at most 12800 per DPU per round",
        ],
    );
    let data = [&one_dpu[..], &["queries.kind=get", "data.pairs=400000"]].concat();
    let o = common::run_tiny(&["--quiet"], &data);
    assert_bad(
        &o,
        &[
            "--set data.pairs=400000 and --set machine.usable_dpus=1 and --set machine.ranks=1: key `data.pairs`",
            "the data does not fit in PIM-tree's data-node region",
            "a size fixed in PIM-tree's source, whatever the MRAM",
        ],
    );
}

#[test]
fn pim_trees_task_limit_names_the_overrides_that_shrank_the_machine() {
    // The tiny workload fits PIM-tree's tasks on the 2-rank machine; on 16 DPUs one DPU
    // gets more tasks a round than its buffers take. The file's batch size was blamed.
    let sets = [
        "machine.ranks=1",
        "machine.usable_dpus=16",
        "run.index=pim-tree",
    ];
    let o = common::run_tiny(&["--quiet"], &sets);
    assert_bad(
        &o,
        &[
            "--set machine.usable_dpus=16 and --set machine.ranks=1: key `usable_dpus`",
            "tasks, at most 12800 per DPU per round",
        ],
    );
    assert!(!o.stderr.contains("tiny.toml"), "{}", o.stderr);
}
