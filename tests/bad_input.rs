//! Every class of bad input: a clear error on stderr naming the file or flag and the key,
//! exit code 2, and nothing on stdout.

mod common;

use common::{Outcome, assert_bad, pimdes};

use std::path::PathBuf;

const MACHINE: &str = "machines/paper-1012.toml";
const WORKLOAD: &str = "workloads/tiny.toml";

/// Runs `partition --json` on the paper machine with extra arguments; `--workload`
/// defaults to the tiny workload.
fn partition(extra: &[&str]) -> Outcome {
    let mut args = vec!["partition", "--machine", MACHINE, "--json"];
    if !extra.contains(&"--workload") {
        args.extend_from_slice(&["--workload", WORKLOAD]);
    }
    args.extend_from_slice(extra);
    pimdes(&args)
}

/// A workload file in a temporary directory: the tiny workload with `edit` applied.
fn workload_file(name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let text =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(WORKLOAD)).unwrap();
    let dir = std::env::temp_dir().join(format!("pimdes-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, edit(text)).unwrap();
    path
}

#[test]
fn missing_file() {
    let o = pimdes(&[
        "partition",
        "--machine",
        "machines/nope.toml",
        "--workload",
        WORKLOAD,
    ]);
    assert_bad(&o, &["machines/nope.toml", "cannot read"]);
}

#[test]
fn invalid_toml() {
    let w = workload_file("invalid.toml", |t| t + "\n[oops\n");
    let o = partition(&["--workload", w.to_str().unwrap()]);
    assert_bad(&o, &["invalid.toml", "invalid TOML"]);
}

#[test]
fn unknown_key_in_file() {
    let w = workload_file("unknown.toml", |t| {
        t.replace("[queries]", "[queries]\nskw = 1.0")
    });
    let o = partition(&["--workload", w.to_str().unwrap()]);
    assert_bad(
        &o,
        &["unknown.toml", "`queries.skw`", "unknown field `skw`"],
    );
}

#[test]
fn missing_key_is_named_by_its_dotted_key() {
    let w = workload_file("no-alpha.toml", |t| {
        t.lines()
            .filter(|l| !l.starts_with("alpha"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    let o = partition(&["--workload", w.to_str().unwrap()]);
    assert_bad(&o, &["no-alpha.toml: key `partition.alpha`: missing"]);
    let w = workload_file("empty.toml", |_| String::new());
    let o = partition(&["--workload", w.to_str().unwrap()]);
    assert_bad(&o, &["empty.toml: key `seed`: missing"]);
    // An override that replaced a section is blamed for the key it left out.
    let o = partition(&["--set", "machine.dpu={clock_mhz=1}"]);
    let blamed = "--set machine.dpu={clock_mhz=1}: key `dpu.mram_size_bytes`: missing";
    assert_bad(&o, &[blamed, "`dpu` replaced the section"]);
}

#[test]
fn wrong_type_in_file() {
    let w = workload_file("type.toml", |t| t.replace("skew = 1.0", "skew = \"high\""));
    let o = partition(&["--workload", w.to_str().unwrap()]);
    assert_bad(&o, &["type.toml", "`queries.skew`", "invalid type"]);
    // One line: the key is named once, not again by the TOML library's "in `key`".
    assert_eq!(o.stderr.trim_end().lines().count(), 1, "{}", o.stderr);
}

#[test]
fn wrong_type_in_override() {
    let o = partition(&["--set", "queries.batch_size=many"]);
    assert_bad(
        &o,
        &["--set queries.batch_size=many", "`queries.batch_size`"],
    );
}

#[test]
fn an_array_where_a_section_belongs() {
    // serde would read a section from an array by position (warm-up 1, measured 2).
    let expected = ["`batches`", "is a section of keys, given an array"];
    let o = partition(&["--set", "batches=[1,2]"]);
    assert_bad(&o, &[&["--set batches=[1,2]"], &expected[..]].concat());
    let w = workload_file("array.toml", |t| {
        let t = t.replace("[batches]\nwarmup = 2\nmeasured = 3\n", "");
        t.replace("seed = 7", "seed = 7\nbatches = [1, 1]")
    });
    let o = partition(&["--workload", w.to_str().unwrap()]);
    assert_bad(&o, &[&["array.toml"], &expected[..]].concat());
    // A nested section of the machine, named as its override would set it.
    let o = partition(&["--set", "machine.dpu.pipeline=[11,1]"]);
    let said = [
        "--set machine.dpu.pipeline=[11,1]",
        "`--set machine.dpu.pipeline.KEY=VALUE`",
    ];
    assert_bad(&o, &said);
}

#[test]
fn integer_beyond_toml_in_override() {
    let set = "queries.batch_size=18446744073709551615";
    let o = partition(&["--set", set]);
    assert_bad(&o, &[set, "`queries.batch_size`", "beyond TOML's integers"]);
}

#[test]
fn too_many_warmup_batches_in_override() {
    let o = partition(&["--set", "batches.warmup=9223372036854775807"]);
    assert_bad(
        &o,
        &["--set batches.warmup=", "`batches.warmup`", "must be below"],
    );
    // A sum over the bound blames the `--set` that raised it (it blamed the file's
    // batches.measured).
    let o = partition(&["--set", "batches.warmup=99999"]);
    assert_bad(
        &o,
        &[
            "--set batches.warmup=99999: key `batches.warmup`",
            "warmup + measured is 99999 + 3 = 100002, more than 100000",
        ],
    );
}

#[test]
fn negative_skew() {
    let o = partition(&["--set", "queries.skew=-0.5"]);
    assert_bad(&o, &["--set queries.skew=-0.5", "`queries.skew`", ">= 0"]);
}

#[test]
fn alpha_zero() {
    let o = partition(&["--set", "partition.alpha=0"]);
    assert_bad(
        &o,
        &["--set partition.alpha=0", "`partition.alpha`", "positive"],
    );
}

#[test]
fn batch_size_zero() {
    let w = workload_file("batch0.toml", |t| {
        t.replace("batch_size = 20_000", "batch_size = 0")
    });
    let o = partition(&["--workload", w.to_str().unwrap()]);
    assert_bad(&o, &["batch0.toml", "`queries.batch_size`"]);
}

#[test]
fn fewer_pairs_than_dpus() {
    let o = partition(&["--set", "data.pairs=1000"]);
    assert_bad(
        &o,
        &[
            "--set data.pairs=1000",
            "`data.pairs`",
            "fewer than the machine's 1012 DPUs",
        ],
    );
}

#[test]
fn fewer_chunks_than_dpus() {
    let o = partition(&["--set", "partition.chunk_pairs=1000"]);
    assert_bad(
        &o,
        &[
            "--set partition.chunk_pairs=1000",
            "`partition.chunk_pairs`",
            "600 chunks",
        ],
    );
    // More DPUs from the machine's overrides: they are named, not the workload file.
    let o = partition(&[
        "--set",
        "machine.ranks=40",
        "--set",
        "machine.usable_dpus=2560",
    ]);
    let named = "--set machine.usable_dpus=2560 and --set machine.ranks=40: key `usable_dpus`";
    assert_bad(
        &o,
        &[named, "2000 chunks, fewer than the machine's 2560 DPUs"],
    );
    // Both sides overridden: both named, the workload's first.
    let sets = [
        "--set",
        "data.pairs=300000",
        "--set",
        "machine.usable_dpus=1010",
    ];
    let o = partition(&sets);
    let named = "--set data.pairs=300000 and --set machine.usable_dpus=1010: key `data.pairs`";
    assert_bad(
        &o,
        &[named, "1000 chunks, fewer than the machine's 1010 DPUs"],
    );
}

#[test]
fn data_cap_below_one() {
    let o = partition(&["--set", "partition.data_cap=0.9"]);
    assert_bad(
        &o,
        &[
            "--set partition.data_cap=0.9",
            "`partition.data_cap`",
            "at least 1",
        ],
    );
}

#[test]
fn data_cap_too_tight_for_chunks() {
    // 600,000 pairs over 1,012 DPUs is 592.9 pairs each: with a cap of exactly 1.0, parts
    // of whole 300-pair chunks cannot hold all the data in 1,012 parts.
    let o = partition(&[
        "--partitioner",
        "ccp-capped",
        "--set",
        "partition.data_cap=1.0",
    ]);
    assert_bad(&o, &["`partition.data_cap`", "ccp-capped"]);
}

#[test]
fn base_partition_out_of_range() {
    let o = partition(&[
        "--set",
        "deviation.base_partition=1012",
        "--set",
        "deviation.factor=10",
    ]);
    assert_bad(
        &o,
        &[
            "--set deviation.base_partition=1012",
            "`deviation.base_partition`",
            "0 to 1011",
        ],
    );
    // Fewer DPUs from the machine's --set put the partition out of range: both are named.
    let sets = [
        "deviation.base_partition=3",
        "deviation.factor=10",
        "machine.usable_dpus=2",
    ];
    let o = partition(&sets.iter().flat_map(|s| ["--set", s]).collect::<Vec<_>>());
    let named = "--set deviation.base_partition=3 and --set machine.usable_dpus=2";
    assert_bad(&o, &[named, "0 to 1"]);
}

#[test]
fn incomplete_deviation_section() {
    let o = partition(&["--set", "deviation.factor=10"]);
    assert_bad(
        &o,
        &[
            "--set deviation.factor=10: key `deviation.base_partition`",
            "missing field `base_partition`",
        ],
    );
}

#[test]
fn override_path_that_does_not_exist() {
    let o = partition(&["--set", "queries.skewness=1.2"]);
    assert_bad(
        &o,
        &["--set queries.skewness=1.2", "unknown field `skewness`"],
    );
    let o = partition(&["--set", "machine.rank=20"]);
    assert_bad(&o, &["--set machine.rank=20", "unknown field `rank`"]);
    let o = partition(&["--set", "queries.skew.x=1"]);
    assert_bad(
        &o,
        &["--set queries.skew.x=1", "`queries.skew`", "not a section"],
    );
}

#[test]
fn malformed_override() {
    let o = partition(&["--set", "queries.skew"]);
    assert_bad(&o, &["--set queries.skew", "expected key=value"]);
    // TOML would read the line after the break as another key and drop it silently.
    let o = partition(&["--set", "queries.skew=0.5\nseed=5"]);
    assert_bad(&o, &["`queries.skew`", "line break"]);
    // One value over several lines (a TOML multi-line string) is one value.
    let o = partition(&["--set", "description=\"\"\"two\nlines\"\"\""]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    // A key of 40,000 parts overflowed the stack building its tables.
    let deep = format!("{}c=1", "a.".repeat(40_000));
    let o = partition(&["--set", &deep]);
    assert_bad(&o, &["40001 dotted parts", "no key has more than 8"]);
}

#[test]
fn impossible_machine() {
    // The file's usable_dpus no longer fits: the override that shrank the machine is named.
    let o = partition(&["--set", "machine.ranks=10"]);
    assert_bad(
        &o,
        &["--set machine.ranks=10", "`ranks`", "usable_dpus = 1012"],
    );
    let o = partition(&["--set", "machine.dpu.mram_size_bytes=1001"]);
    assert_bad(
        &o,
        &["--set machine.dpu.mram_size_bytes=1001", "multiple of 8"],
    );
    // Beyond any what-if: the MRAM size is named, not a transfer rate it would outrun.
    let o = partition(&["--set", "machine.dpu.mram_size_bytes=9223372036854775800"]);
    assert_bad(
        &o,
        &["key `dpu.mram_size_bytes`", "at most 1099511627776 (1 TiB)"],
    );
}

/// A rule between several keys that an override breaks names that override, not the file
/// at another key of the rule.
#[test]
fn a_rule_between_keys_blames_the_override_that_broke_it() {
    let cases = [
        (
            "machine.dma.min_size_bytes=4096",
            "below dma.min_size_bytes",
        ),
        (
            "machine.dma.alignment_bytes=16",
            "multiples of dma.alignment_bytes",
        ),
        (
            "machine.dma.read_latency_fixed_cycles=0",
            "longer than its latency",
        ),
        ("machine.dpu.mram_size_bytes=1099511627776", "too slow"),
        ("data.pairs=1", "more than the 1 pairs"),
        ("queries.batch_size=1100000000", "pairs covered"),
        (
            "machine.dpu.max_tasklets=1",
            "at most 1 (--set machine.dpu.max_tasklets=1)",
        ),
    ];
    for (set, reason) in cases {
        let args = [
            "run",
            "--machine",
            MACHINE,
            "--workload",
            WORKLOAD,
            "--set",
            set,
        ];
        let o = pimdes(&args);
        let key = set
            .split('=')
            .next()
            .unwrap()
            .trim_start_matches("machine.");
        assert_bad(&o, &[&format!("--set {set}"), &format!("`{key}`"), reason]);
    }
    // Both sides of the tasklet rule overridden: both are named.
    let both = ["run.tasklets=24", "machine.dpu.max_tasklets=16"];
    let args = ["run", "--machine", MACHINE, "--workload", WORKLOAD];
    let o = pimdes(&[&args[..], &["--set", both[0], "--set", both[1]]].concat());
    let named = "--set run.tasklets=24 and --set machine.dpu.max_tasklets=16: key `run.tasklets`";
    let sides = "24 tasklets requested (--set run.tasklets=24); the machine's DPUs run at most 16 (--set machine.dpu.max_tasklets=16)";
    assert_bad(&o, &[named, sides]);
    // Neither side overridden: the rule is between the two files, each named.
    let text = std::fs::read_to_string(WORKLOAD).unwrap();
    let bad = format!("{text}\n[run]\ntasklets = 25\n");
    let path = std::env::temp_dir().join(format!("pimdes-tasklets-{}.toml", std::process::id()));
    std::fs::write(&path, bad).unwrap();
    let o = pimdes(&[
        "run",
        "--machine",
        MACHINE,
        "--workload",
        path.to_str().unwrap(),
    ]);
    let files = format!(
        "25 tasklets requested (run.tasklets of {}, 16 when it is not set); the machine's DPUs run at most 24 (dpu.max_tasklets of {MACHINE})",
        path.display()
    );
    assert_bad(&o, &[&files]);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn unknown_partitioner() {
    let o = partition(&["--partitioner", "random"]);
    assert_bad(
        &o,
        &[
            "--partitioner",
            "unknown partitioner `random`",
            "qdd-double-scan",
        ],
    );
    let o = pimdes(&[
        "partition",
        "--machine",
        MACHINE,
        "--workload",
        WORKLOAD,
        "--set",
        "partition.partitioner=best",
    ]);
    assert_bad(
        &o,
        &["`partition.partitioner`", "unknown partitioner `best`"],
    );
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let o = partition(&["--frobnicate"]);
    assert_eq!(o.code, Some(2));
    assert!(o.stdout.is_empty());
}

/// A machine too small for a kernel is the machine description's fault: exit code 2, and the
/// error names the machine key, not a simulator bug. Every configuration fails; the error is
/// the first configuration's (1 tasklet), whichever thread met its own first.
#[test]
fn machine_too_small_for_a_microbenchmark_names_the_key() {
    let o = pimdes(&[
        "microbench",
        "arithmetic",
        "--set",
        "machine.dpu.wram_size_bytes=512",
    ]);
    assert_bad(
        &o,
        &[
            "error: --set machine.dpu.wram_size_bytes=512: key `dpu.wram_size_bytes`",
            "WRAM overflow",
            "DPU 0",
            "the stacks of 1 tasklet (",
        ],
    );
    assert!(!o.stderr.contains("simulator bug"), "{}", o.stderr);
}

#[test]
fn machine_too_small_for_the_index_kernel_names_the_key() {
    let o = pimdes(&[
        "run",
        "--machine",
        MACHINE,
        "--workload",
        WORKLOAD,
        "--quiet",
        "--set",
        "machine.dpu.wram_size_bytes=1024",
    ]);
    assert_bad(
        &o,
        &[
            "error: --set machine.dpu.wram_size_bytes=1024: key `dpu.wram_size_bytes`",
            "WRAM overflow",
        ],
    );
}

#[test]
fn mram_too_small_for_a_microbenchmark_names_the_key() {
    let o = pimdes(&[
        "microbench",
        "mram",
        "--set",
        "machine.dpu.mram_size_bytes=4096",
    ]);
    assert_bad(
        &o,
        &[
            // Checked before the kernel runs (tests/validated_products.rs).
            "key `dpu.mram_size_bytes`",
            "each DPU has 4096",
        ],
    );
}

/// A value of the wrong type is refused in the file's words, not Rust's: a choice of
/// names lists the names, a section is a table, a count a whole number in the key's range.
#[test]
fn a_value_of_the_wrong_type_says_what_the_key_takes() {
    for (set, reason) in [
        (
            "queries.kind=1",
            "1 is not a name; expected one of `get`, `predecessor`, `range-count-if`, `range-max`",
        ),
        (
            "run.launch=true",
            "true is not a name; expected `sync` or `async`",
        ),
        ("deviation=1", "integer `1`, expected a table of keys"),
        // A whole number's range is the one the key takes (the schema's), not its type's.
        (
            "batches.warmup=1.5",
            "`1.5`, expected a whole number, 1 or more",
        ),
        (
            "machine.dpu.max_tasklets=-3",
            "integer `-3`, expected a whole number from 1 to 32",
        ),
        (
            "machine.transfer.threads_per_rank=-1",
            "integer `-1`, expected a whole number from 1 to 256",
        ),
        (
            "seed=-1",
            "integer `-1`, expected a whole number, 0 or more",
        ),
        ("queries.skew=abc", "string \"abc\", expected a number"),
        // A huge number is shown as written, not in three hundred digits.
        (
            "machine.dpu.clock_mhz=1e300",
            "1e300 is not between 1 and 10000",
        ),
    ] {
        let o = partition(&["--set", set]);
        assert_bad(&o, &[&format!("--set {set}"), reason]);
    }
    // The same in a file.
    let text = std::fs::read_to_string(WORKLOAD).unwrap();
    let bad = text.replacen("kind = \"range-count-if\"", "kind = 3", 1);
    assert_ne!(bad, text);
    let path = std::env::temp_dir().join(format!("pimdes-kind-{}.toml", std::process::id()));
    std::fs::write(&path, bad).unwrap();
    let o = partition(&["--workload", path.to_str().unwrap()]);
    assert_bad(
        &o,
        &[
            "key `queries.kind`",
            "3 is not a name; expected one of `get`",
        ],
    );
}

#[test]
fn a_poll_interval_below_a_picosecond_is_refused_not_rounded() {
    let sets = [
        "--set",
        "run.launch=\"async\"",
        "--set",
        "run.poll_interval_us=0.0000001",
    ];
    let args = [
        &["run", "--machine", MACHINE, "--workload", WORKLOAD][..],
        &sets,
    ]
    .concat();
    let o = pimdes(&args);
    let reason = "1e-7 is not a whole number of picoseconds";
    assert_bad(
        &o,
        &["key `run.poll_interval_us`", reason, "steps of 0.000001 us"],
    );
}

/// A workload given as `--machine` and a machine as `--workload` are named as such, not as
/// a file with an unknown section.
#[test]
fn swapped_files_are_named_as_swapped() {
    let o = pimdes(&["run", "--machine", WORKLOAD, "--workload", MACHINE]);
    assert_bad(
        &o,
        &[
            "error: workloads/tiny.toml: this is a workload file (it has [data] and [queries] and [batches]), not a machine file: were --machine and --workload swapped?",
        ],
    );
    let o = pimdes(&["run", "--machine", MACHINE, "--workload", MACHINE]);
    assert_bad(
        &o,
        &[
            "error: machines/paper-1012.toml: this is a machine file (it has [dpu] and [dma] and [transfer]), not a workload file",
        ],
    );
}

/// A key set in the wrong section (or at the top) is named where it lives.
#[test]
fn a_key_in_the_wrong_section_names_where_it_lives() {
    let args = ["run", "--machine", MACHINE, "--workload", WORKLOAD];
    for (set, hint) in [
        ("tasklets=4", "did you mean `run.tasklets`?"),
        (
            "queries.chunk_pairs=4",
            "did you mean `partition.chunk_pairs`?",
        ),
        // A machine key's `--set` is told as a `--set` writes it.
        (
            "machine.max_tasklets=4",
            "did you mean `machine.dpu.max_tasklets`?",
        ),
        (
            "machine.dpu.latency_cycles_per_byte=1",
            "did you mean `machine.dma.latency_cycles_per_byte`?",
        ),
        // A machine key without `machine.` lands in the workload, which names it.
        (
            "dpu.clock_mhz=700",
            "`dpu.clock_mhz` is a machine key: did you mean `machine.dpu.clock_mhz`?",
        ),
        ("ranks=4", "did you mean `machine.ranks`?"),
    ] {
        let o = pimdes(&[&args[..], &["--set", set]].concat());
        assert_bad(&o, &[&format!("--set {set}"), "unknown field", hint]);
    }
    // A key no section has gets no guess.
    let o = pimdes(&[&args[..], &["--set", "run.clock_mhz=4"]].concat());
    assert_bad(&o, &["unknown field `clock_mhz`"]);
    assert!(!o.stderr.contains("did you mean"), "{}", o.stderr);
}
