//! Bad machine-model values, through `pimdes microbench`: each is an error on stderr naming
//! the file or the override and the dotted key, exit code 2, nothing on stdout.

mod common;

use common::{Outcome, assert_bad, pimdes};

use std::path::PathBuf;

fn with_set(set: &str) -> Outcome {
    pimdes(&["microbench", "mram", "--set", set])
}

/// The PrIM machine file with `edit` applied, in a temporary directory.
fn machine_file(name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("machines/upmem-2556-350mhz.toml"),
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("pimdes-machine-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, edit(text)).unwrap();
    path
}

#[test]
fn out_of_range_values_name_the_override_and_key() {
    let o = with_set("machine.dpu.max_tasklets=0");
    assert_bad(
        &o,
        &[
            "--set machine.dpu.max_tasklets=0",
            "dpu.max_tasklets",
            "between 1",
        ],
    );
    // The needles name the key as the error does (`key `...``) and its reason, not only
    // the text of the override the error repeats.
    let o = with_set("machine.dpu.clock_mhz=-350");
    assert_bad(&o, &["key `dpu.clock_mhz`", "-350 is not between 1 and"]);
    let o = with_set("machine.transfer.cpu_dpu_gb_per_s_per_rank=0");
    assert_bad(
        &o,
        &[
            "key `transfer.cpu_dpu_gb_per_s_per_rank`",
            "0 is not between 0.000001",
        ],
    );
    let o = with_set("machine.dma.alignment_bytes=12");
    assert_bad(&o, &["dma.alignment_bytes", "power of two"]);
}

#[test]
fn inexact_per_byte_costs_and_durations_are_refused_not_rounded() {
    let o = with_set("machine.dma.latency_cycles_per_byte=0.0005");
    assert_bad(&o, &["dma.latency_cycles_per_byte", "multiple of 0.001"]);
    // Durations are whole picoseconds: a fraction of one had been rounded, to 0 unsaid.
    let sub_ps = "is not a whole number of picoseconds";
    for (set, step) in [
        (
            "machine.host.route_ns_per_query=0.0001",
            "steps of 0.001 ns",
        ),
        ("machine.host.pack_ns_per_byte=0.2505", "steps of 0.001 ns"),
        (
            "machine.host.merge_ns_per_result=1e-300",
            "steps of 0.001 ns",
        ),
        (
            "machine.transfer.call_fixed_us=1e-7",
            "steps of 0.000001 us",
        ),
    ] {
        let key = set
            .split('=')
            .next()
            .unwrap()
            .trim_start_matches("machine.");
        assert_bad(&with_set(set), &[&format!("key `{key}`"), sub_ps, step]);
    }
    for exact in [
        "machine.host.route_ns_per_query=0.001",
        "machine.transfer.call_fixed_us=0.000001",
    ] {
        let o = with_set(exact);
        assert_eq!(o.code, Some(0), "{exact}: {}", o.stderr);
    }
}

#[test]
fn an_engine_busy_longer_than_its_latency_is_refused() {
    let o = with_set("machine.dma.occupancy_fixed_cycles=500");
    assert_bad(
        &o,
        &["dma.occupancy_fixed_cycles", "longer than its latency"],
    );
}

#[test]
fn a_latency_cut_alone_names_the_occupancy_keys_to_cut_with_it() {
    // The "faster MRAM" question: halving the per-byte latency leaves the engine's
    // occupancy above it, and the user needs to know which keys hold the occupancy.
    let o = with_set("machine.dma.latency_cycles_per_byte=0.25");
    assert_bad(
        &o,
        &[
            "dma.latency_cycles_per_byte",
            "a 2048-byte read would keep the engine busy",
            "dma.occupancy_cycles_per_byte = 0.5",
            "dma.latency_cycles_per_byte = 0.25",
            "change the two together",
        ],
    );
}

#[test]
fn unknown_keys_and_wrong_types_name_the_key() {
    let o = with_set("machine.dma.alpha=77");
    assert_bad(
        &o,
        &[
            "--set machine.dma.alpha=77",
            "key `dma.alpha`",
            "unknown field `alpha`",
        ],
    );
    let o = with_set("machine.dpu.clock_mhz=fast");
    assert_bad(
        &o,
        &["key `dpu.clock_mhz`", "invalid type: string \"fast\""],
    );
    let o = pimdes(&["microbench", "mram", "--set", "queries.skew=1"]);
    assert_bad(&o, &["--set queries.skew=1", "machine keys"]);
}

#[test]
fn an_empty_name_is_refused() {
    for set in ["machine.name=\"\"", "machine.name=\"  \""] {
        assert_bad(
            &with_set(set),
            &[&format!("--set {set}"), "key `name`: is empty"],
        );
    }
}

#[test]
fn a_file_missing_a_section_names_the_file_and_the_key() {
    let path = machine_file("no-dma.toml", |t| {
        let start = t.find("[dma]").unwrap();
        let end = t.find("[transfer]").unwrap();
        format!("{}{}", &t[..start], &t[end..])
    });
    let o = pimdes(&["microbench", "mram", "--machine", path.to_str().unwrap()]);
    assert_bad(&o, &["no-dma.toml", "dma"]);
    let path = machine_file("bad-value.toml", |t| {
        t.replace("issue_slots_per_cycle = 1", "issue_slots_per_cycle = 0")
    });
    let o = pimdes(&["microbench", "mram", "--machine", path.to_str().unwrap()]);
    assert_bad(
        &o,
        &["bad-value.toml", "dpu.pipeline.issue_slots_per_cycle"],
    );
}

#[test]
fn a_machine_too_small_for_the_benchmark_is_bad_input() {
    // 1 KiB of WRAM is all stack: the kernel cannot allocate its buffer.
    let o = with_set("machine.dpu.wram_size_bytes=1024");
    assert_bad(&o, &["DPU 0", "WRAM overflow"]);
}

#[test]
fn an_unknown_suite_lists_the_known_ones() {
    let o = pimdes(&["microbench", "gups"]);
    assert_bad(
        &o,
        &[
            "unknown microbenchmark `gups`",
            "arithmetic, mram, stream, transfer, prim-va, prim-red, prim-bs, prim-gemv, prim-sel, prim-uni, apps, all",
        ],
    );
    // The name is checked before the settings, which it decides: an unknown name with a
    // suite's --set is the name's error, not the setting's.
    let o = pimdes(&[
        "microbench",
        "gups",
        "--set",
        "microbench.transfer.ranks=[1]",
    ]);
    assert_bad(&o, &["NAME", "unknown microbenchmark `gups`"]);
}

#[test]
fn bad_system_scale_transfer_terms_name_their_key() {
    let o = with_set("machine.transfer.ownership_switch=\"sometimes\"");
    assert_bad(&o, &["transfer.ownership_switch", "sometimes"]);
    let o = with_set("machine.transfer.rank_fixed_us=-1");
    assert_bad(&o, &["key `transfer.rank_fixed_us`", "-1 is not between 0"]);
    let o = with_set("machine.transfer.host_cap_dpu_cpu_gb_per_s=0");
    assert_bad(
        &o,
        &[
            "key `transfer.host_cap_dpu_cpu_gb_per_s`",
            "0 is not between 0.000001",
        ],
    );
    // No cap at all for a direction.
    let path = machine_file("no-cap.toml", |t| {
        t.lines()
            .filter(|l| !l.starts_with("host_cap_gb_per_s"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    let o = pimdes(&["microbench", "mram", "--machine", path.to_str().unwrap()]);
    assert_bad(
        &o,
        &[
            "no-cap.toml",
            "transfer.host_cap_cpu_dpu_gb_per_s",
            "missing",
        ],
    );
}

#[test]
fn the_transposition_term_needs_both_of_its_keys_or_neither() {
    for (key, missing) in [
        ("threads_per_rank", "transfer.transpose_gb_per_s_per_thread"),
        ("transpose_gb_per_s_per_thread", "transfer.threads_per_rank"),
    ] {
        let path = machine_file(&format!("without-{missing}.toml"), |text| {
            text.lines()
                .filter(|l| !l.starts_with(missing.trim_start_matches("transfer.")))
                .collect::<Vec<_>>()
                .join("\n")
        });
        let o = pimdes(&["microbench", "mram", "--machine", path.to_str().unwrap()]);
        assert_bad(&o, &[missing, "both (or neither)", key]);
    }
    let o = with_set("machine.transfer.threads_per_rank=0");
    assert_bad(&o, &["transfer.threads_per_rank", "not between 1 and 256"]);
}
