//! `pimdes microbench NAME --json` prints one JSON report whose records have exactly the
//! fields the issue lists, each naming its suite, beside the effective machine; without
//! `--json`, tables for people.

mod common;

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args(args)
        // A slow build may run long enough for a progress line; this test checks the output.
        .arg("--quiet")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

fn keys(suite: &str, machine: Option<&str>) -> (usize, Vec<String>) {
    let mut args = vec!["microbench", suite, "--json"];
    if let Some(m) = machine {
        args.extend(["--machine", m]);
    }
    let (code, text) = run(&args);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["suite"], suite);
    assert!(value["config"]["machine"]["dpu"].is_object(), "{text}");
    assert!(value["config_fnv1a64"].is_string());
    let records = value["records"].as_array().expect("an array of records");
    for r in records {
        assert_eq!(r["suite"], suite, "every record names its suite");
    }
    let mut keys: Vec<String> = records[0].as_object().unwrap().keys().cloned().collect();
    keys.sort();
    for r in records {
        let mut k: Vec<String> = r.as_object().unwrap().keys().cloned().collect();
        k.sort();
        assert_eq!(k, keys, "every record of {suite} has the same fields");
    }
    (records.len(), keys)
}

#[test]
fn records_have_the_listed_fields() {
    let (n, k) = keys("mram", None);
    assert_eq!(n, 2 * 9, "read and write, 8 to 2,048 bytes");
    assert_eq!(
        k,
        [
            "bandwidth_mb_per_s",
            "direction",
            "latency_cycles",
            "size_bytes",
            "suite",
            "tasklets"
        ]
    );
    let (_, k) = keys("stream", None);
    assert_eq!(
        k,
        [
            "bandwidth_mb_per_s",
            "kernel",
            "memory",
            "suite",
            "tasklets"
        ]
    );
    let (_, k) = keys("transfer", None);
    assert_eq!(
        k,
        [
            "bandwidth_gb_per_s",
            "bound",
            "direction",
            "dpus",
            "mode",
            "ranks",
            "size_per_dpu_bytes",
            "suite",
            "time_us"
        ]
    );
}

#[test]
fn arithmetic_sweeps_the_machines_tasklets() {
    let (n, k) = keys("arithmetic", Some("machines/upmem-v1b-400mhz.toml"));
    assert_eq!(k, ["mops", "op", "suite", "tasklets", "type"]);
    // 4 ops x 4 types x 16 tasklets on a v1B DPU.
    assert_eq!(n, 4 * 4 * 16);
}

#[test]
fn tables_are_for_people() {
    let (code, text) = run(&["microbench", "mram"]);
    assert_eq!(code, 0);
    assert!(text.contains("MRAM <-> WRAM DMA, one tasklet"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("read") && l.contains(" 2048 "))
        .unwrap();
    assert!(row.contains("1101.0") && row.contains("651.04"), "{row}");
    // A transfer row says its ranks: with 16 DPUs a rank, 32 DPUs are two ranks.
    let sets = [
        "--set",
        "machine.dpus_per_rank=16",
        "--set",
        "machine.usable_dpus=640",
    ];
    let (code, text) = run(&[&["microbench", "transfer"][..], &sets].concat());
    assert_eq!(code, 0);
    assert!(text.contains("direction  mode     ranks  DPUs"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("broadcast  parallel     2    32"));
    // It ends with the terms that bound it, each over its run of sizes.
    let bounds = "  per-call to 32K, per-dpu-rate from 64K";
    assert!(row.is_some_and(|r| r.ends_with(bounds)), "{text}");
    assert!(!text.contains("(a row of several ranks"), "{text}");
    // With a DPU unusable, a row of two ranks holds fewer than 32, and a note says why.
    let sets = [
        "--set",
        "machine.dpus_per_rank=16",
        "--set",
        "machine.usable_dpus=639",
    ];
    let (code, text) = run(&[&["microbench", "transfer"][..], &sets].concat());
    assert_eq!(code, 0);
    let note = "(a row of several ranks takes every usable DPU on them: 639 of the 40 ranks' 640 DPUs are usable (`usable_dpus`), so 2 ranks hold 31)";
    assert!(text.contains(note), "{text}");
}

/// `--out FILE` writes the JSON report beside the tables, as `run` does; an input file or a
/// directory as FILE is refused before anything runs.
#[test]
fn out_writes_the_json_report() {
    let dir = std::env::temp_dir().join(format!("pimdes-mb-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("mram.json");
    let (code, text) = run(&["microbench", "mram", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(text.contains("MRAM <-> WRAM DMA, one tasklet"), "{text}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    // With --json too, stdout holds the same report as the file.
    let both = dir.join("both.json");
    let (code, json) = run(&[
        "microbench",
        "mram",
        "--json",
        "--out",
        both.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let printed: serde_json::Value = serde_json::from_str(&json).unwrap();
    let written_too: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&both).unwrap()).unwrap();
    assert_eq!(printed, written_too);
    assert_eq!(written["records"], printed["records"]);
    assert_eq!(written["suite"], "mram");
    let machine = "machines/paper-2rank.toml";
    let before = std::fs::read(machine).unwrap();
    for (target, reason) in [
        (machine, "is the input file given to --machine"),
        (dir.to_str().unwrap(), "is a directory"),
    ] {
        let o = common::pimdes(&["microbench", "mram", "--machine", machine, "--out", target]);
        common::assert_bad(&o, &["--out", reason]);
    }
    assert_eq!(std::fs::read(machine).unwrap(), before);
}

/// The transfer records of `sets` (`microbench.transfer.*` and `machine.*` overrides), on
/// the default machine.
fn transfers(sets: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["microbench", "transfer", "--json"];
    for s in sets {
        args.extend(["--set", s]);
    }
    let (code, text) = run(&args);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["records"].as_array().unwrap().clone()
}

fn find<'a>(
    records: &'a [serde_json::Value],
    direction: &str,
    mode: &str,
    dpus: u64,
    size: u64,
) -> &'a serde_json::Value {
    records
        .iter()
        .find(|r| {
            r["direction"] == direction
                && r["mode"] == mode
                && r["dpus"] == dpus
                && r["size_per_dpu_bytes"] == size
        })
        .unwrap_or_else(|| panic!("no {direction} {mode} {dpus} DPUs {size} B"))
}

/// Hand-worked against machines/upmem-2556-350mhz.toml: call 100 us (check below), CPU->DPU
/// 0.33 GB/s per DPU and 6.68 per rank, DPU->CPU 0.12 and 4.74, host cap 25.
#[test]
fn each_record_names_the_term_that_set_its_time() {
    let machine = common::machine(&[]);
    assert_eq!(machine.transfer.call_fixed.as_us_f64(), 100.0);
    let r = transfers(&[
        "microbench.transfer.sizes_bytes=[8, 33554432]",
        "microbench.transfer.ranks=[1, 2, 40]",
    ]);
    // 5 kinds x 2 sizes x (7 sets in one rank + 2 + 40 ranks).
    assert_eq!(r.len(), 5 * 2 * 9);
    // 8 bytes: 100 us of call against nanoseconds of bytes.
    assert_eq!(find(&r, "cpu-dpu", "parallel", 64, 8)["bound"], "per-call");
    // 64 x 32 MiB at 6.68 GB/s = 321 ms; 64 x 0.33 = 21 GB/s is not the limit.
    let x = find(&r, "cpu-dpu", "parallel", 64, 32 << 20);
    assert_eq!(x["bound"], "per-rank-rate");
    let want_us = 100.0 + 64.0 * 33_554_432.0 / 6.68e9 * 1e6;
    assert!(
        (x["time_us"].as_f64().unwrap() - want_us).abs() < 1.0,
        "{x}"
    );
    // One DPU alone: 0.33 GB/s.
    assert_eq!(
        find(&r, "cpu-dpu", "parallel", 1, 32 << 20)["bound"],
        "per-dpu-rate"
    );
    // Every rank: 40 x 6.68 GB/s is far above the 25 GB/s cap.
    let all = find(&r, "cpu-dpu", "parallel", 2556, 32 << 20);
    assert_eq!(
        (all["bound"].as_str(), all["ranks"].as_u64()),
        (Some("host-cap"), Some(40))
    );
    // Serial 8-byte calls: 100 us each.
    assert_eq!(find(&r, "dpu-cpu", "serial", 64, 8)["bound"], "per-call");
    // The tutorial's what-if: DPU->CPU at 9.48 GB/s per rank is above 64 x 0.12 = 7.68.
    let r = transfers(&[
        "microbench.transfer.sizes_bytes=[33554432]",
        "microbench.transfer.ranks=[1]",
        "machine.transfer.dpu_cpu_gb_per_s_per_rank=9.48",
    ]);
    assert_eq!(
        find(&r, "dpu-cpu", "parallel", 64, 32 << 20)["bound"],
        "per-dpu-rate"
    );
}

#[test]
fn bad_sweep_settings_name_their_key() {
    let cases: [(&[&str], &str); 18] = [
        // More DPUs than the machine has: said as such, not as an MRAM shortfall.
        (
            &[
                "prim-va",
                "--set",
                "machine.ranks=1",
                "--set",
                "machine.usable_dpus=2",
                "--set",
                "microbench.prim.input_size=1048576",
            ],
            "prim-va on 4 DPUs: machine upmem-2556-350mhz has 2 usable DPUs (machine.usable_dpus) (4 is among the default counts",
        ),
        (
            &["transfer", "--set", "microbench.transfer.sizes_bytes=[0]"],
            "0 is out of range: each must be from 8 to 67108864",
        ),
        (
            &[
                "transfer",
                "--set",
                "microbench.transfer.sizes_bytes=[8, 8]",
            ],
            "8 is listed twice",
        ),
        (
            &[
                "transfer",
                "--set",
                "microbench.transfer.sizes_bytes=[8, 12]",
            ],
            "12 is not a multiple of 8: the SDK moves MRAM in whole 8-byte words",
        ),
        (
            &["transfer", "--set", "microbench.transfer.ranks=[41]"],
            "41 is out of range: each must be from 1 to 40",
        ),
        (
            &["transfer", "--set", "microbench.transfer.ranks=[1.5]"],
            "1.5 is not an integer",
        ),
        (
            &["transfer", "--set", "microbench.transfer.ranks=4"],
            "expected a list",
        ),
        (
            &["transfer", "--set", "microbench.transfer.size=[8]"],
            "unknown key",
        ),
        (
            &["mram", "--set", "microbench.transfer.ranks=[1]"],
            "for the transfer suite",
        ),
        (
            &["mram", "--set", "microbench.prim.dpus=[1]"],
            "for the prim-* suites",
        ),
        (
            &["prim-va", "--set", "microbench.prim.input_size=0"],
            "expected an integer from 1 to 4294967295",
        ),
        (
            &["prim-va", "--set", "microbench.prim.dpus=[3000]"],
            "3000 is out of range: each must be from 1 to 2556",
        ),
        (
            &["prim-va", "--set", "microbench.prim.tasklets=16"],
            "unknown key; the PrIM suites take",
        ),
        (
            &[
                "prim-red",
                "--set",
                "microbench.prim.input_size=100000000",
                "--set",
                "microbench.prim.dpus=[1,4]",
            ],
            "needs 800000000 bytes of MRAM per DPU",
        ),
        // PrIM's binary search misses queries at sizes PrIM did not run (exit 3 before).
        (
            &["prim-bs", "--set", "microbench.prim.input_size=1000"],
            "error: --set microbench.prim.input_size=1000: key `microbench.prim.input_size`: prim-bs with 1000 elements",
        ),
        (
            &["prim-bs", "--set", "microbench.prim.input_size=32"],
            "a power of two of at least 64 elements",
        ),
        // A machine that holds none of a suite's points runs nothing: refused, not exit 0.
        (
            &["prim-va", "--set", "machine.dpu.mram_size_bytes=8"],
            "none of the",
        ),
        // MRAM raised to 128 GiB lets 2^32 - 1 elements fit on one DPU; the host's memory
        // (about 256 GiB needed) does not. Before, the run aborted allocating.
        (
            &[
                "prim-sel",
                "--set",
                "machine.ranks=1",
                "--set",
                "machine.usable_dpus=64",
                "--set",
                "machine.dpu.mram_size_bytes=137438953472",
                "--set",
                "microbench.prim.input_size=4294967295",
                "--set",
                "microbench.prim.dpus=[1]",
            ],
            "MiB of host memory",
        ),
    ];
    for (args, needle) in cases {
        let o = common::pimdes(&[&["microbench"][..], args].concat());
        common::assert_bad(&o, &[needle]);
    }
}

/// Instruction costs may be 0 (a what-if), but not all of an arithmetic loop's at once:
/// its throughput would be unbounded (it printed `inf` and wrote `null`, which the schema
/// refuses). One cost left is enough.
#[test]
fn an_arithmetic_loop_of_no_cycle_is_refused() {
    let free = [
        "--set",
        "machine.dpu.instructions.wram_access=0",
        "--set",
        "machine.dpu.instructions.loop_iteration=0",
    ];
    for suite in ["arithmetic", "all"] {
        let args = [
            &["microbench", suite][..],
            &free,
            &["--set", "machine.dpu.instructions.mul_f32=0"],
        ];
        let o = common::pimdes(&args.concat());
        common::assert_bad(
            &o,
            &[
                "key `dpu.instructions.mul_f32`",
                "dpu.instructions.mul_f32, dpu.instructions.wram_access and dpu.instructions.loop_iteration are all 0",
                "throughput is unbounded",
            ],
        );
    }
    let (code, out) = run(&[&["microbench", "arithmetic", "--json"][..], &free].concat());
    assert_eq!(code, 0);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let records = report["records"].as_array().unwrap();
    assert!(
        records
            .iter()
            .all(|r| r["mops"].as_f64().is_some_and(f64::is_finite))
    );
}

#[test]
fn prim_suites_carry_the_issues_fields_and_take_their_sweep() {
    let (n, k) = keys("prim-sel", None);
    assert_eq!(n, 14, "the published SEL runs");
    assert_eq!(
        k,
        [
            "benchmark",
            "cpu_dpu_ms",
            "dpu_cpu_ms",
            "dpus",
            "hardware",
            "input_per_dpu",
            "input_size",
            "kernel_ms",
            "slowest_dpu_ms",
            "suite",
            "tasklets"
        ]
    );
    let (code, text) = run(&[
        "microbench",
        "prim-bs",
        "--json",
        "--set",
        "microbench.prim.input_size=4096",
        "--set",
        "microbench.prim.dpus=[1,2]",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let records = v["records"].as_array().unwrap();
    let points: Vec<(u64, u64)> = records
        .iter()
        .map(|r| {
            (
                r["dpus"].as_u64().unwrap(),
                r["input_size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(points, [(1, 4096), (2, 4096)]);
    assert!(
        records.iter().all(|r| r["hardware"].is_null()),
        "no published run of that size"
    );
    assert_eq!(v["config"]["prim"]["dpus"], serde_json::json!([1, 2]));
}
