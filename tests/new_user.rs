//! What a new user meets first: `--help` names every index, partitioner and policy, and an
//! override that resizes a machine whose file fixes its usable DPUs says what it kept.

mod common;

use common::{is_chunk_floor, pimdes};

#[test]
fn run_help_lists_every_name_the_run_accepts() {
    let o = pimdes(&["run", "--help"]);
    assert_eq!(o.code, Some(0));
    let names = pimdes::index::names()
        .iter()
        .copied()
        .chain(pimdes::partition::names())
        .chain([
            "host-binary-search",
            "tasklet-static",
            "tasklet-dynamic",
            "host-merge",
        ]);
    for name in names {
        assert!(
            o.stdout.contains(name),
            "`{name}` missing from:\n{}",
            o.stdout
        );
    }
    assert!(o.stdout.contains("docs/file-formats.md"), "{}", o.stdout);
}

#[test]
fn resizing_a_machine_with_fixed_usable_dpus_warns() {
    let args = [
        "partition",
        "--machine",
        "machines/paper-1012.toml",
        "--workload",
        "workloads/tiny.toml",
        "--quiet",
        "--set",
        "machine.ranks=20",
    ];
    let o = pimdes(&args);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stderr.contains("warning: --set machine.ranks=20 resizes the machine, but its file's usable_dpus = 1012 stays")
            && o.stderr.contains("machine.usable_dpus=1280"),
        "{}",
        o.stderr
    );
    assert!(o.stdout.contains("(1012 DPUs)"), "{}", o.stdout);
    let o = pimdes(&[&args[..], &["--set", "machine.usable_dpus=1280"]].concat());
    let warnings: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning"))
        .collect();
    let chunks = |w: &&str| is_chunk_floor(w.trim_start_matches("warning: "));
    assert!(warnings.iter().all(chunks), "{}", o.stderr);
    assert!(o.stdout.contains("(1280 DPUs)"), "{}", o.stdout);
}

/// The resizing warning is in the JSON of every report that has warnings (scripts read
/// those, not stderr), and printed once.
#[test]
fn the_resizing_warning_is_in_each_json_report() {
    let flags = ["--json", "--quiet"];
    let run = common::tiny("run", &flags, &["machine.ranks=3", "batches.measured=1"]);
    let partition = common::tiny("partition", &flags, &["machine.ranks=3"]);
    let microbench = pimdes(&[
        "microbench",
        "arithmetic",
        "--machine",
        "machines/paper-2rank.toml",
        "--set",
        "machine.ranks=3",
        "--json",
        "--quiet",
    ]);
    for (command, o) in [
        ("run", run),
        ("partition", partition),
        ("microbench", microbench),
    ] {
        assert_eq!(o.code, Some(0), "{command}: {}", o.stderr);
        let report: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        let warnings = report["warnings"].as_array().expect("a warnings list");
        let resized = |w: &str| w.contains("--set machine.ranks=3 resizes the machine");
        let in_json = warnings.iter().filter(|w| resized(w.as_str().unwrap()));
        assert_eq!(in_json.count(), 1, "{command}: {warnings:?}");
        assert_eq!(
            o.stderr.matches("resizes the machine").count(),
            1,
            "{command}: {}",
            o.stderr
        );
    }
}

#[test]
fn shell_completions_cover_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let o = pimdes(&["completions", shell]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        for command in [
            "run",
            "partition",
            "sweep",
            "experiment",
            "plot",
            "soak",
            "compare",
        ] {
            assert!(o.stdout.contains(command), "{shell}: no `{command}`");
        }
        // Values complete too: partitioners and scales, and (but in fish, whose script
        // from clap_complete completes no positional value) suites and experiments.
        let mut values = vec!["qdd-double-scan", "paper"];
        if shell != "fish" {
            values.extend(["prim-gemv", "get-vs-pim-tree"]);
        }
        for value in values {
            assert!(o.stdout.contains(value), "{shell}: no `{value}`");
        }
    }
    let o = pimdes(&["completions", "nosuch"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
}

/// The tutorial's "Numbers for scripts": its `pimdes run ... --json` command (joined from
/// its continuation lines, without `--out`) gives a number at every path its `jq` line
/// reads, and those numbers are the ones the text states.
#[test]
fn the_tutorials_json_example_reads_the_numbers_it_states() {
    let text = include_str!("../docs/tutorial.md");
    let section = text
        .split("## 7. Numbers for scripts")
        .nth(1)
        .and_then(|s| s.split("## 8.").next())
        .expect("the tutorial has its section 7");
    let block = section
        .split("```sh")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let command = block.split("\njq").next().unwrap().replace("\\\n", " ");
    let args: Vec<&str> = command.split_whitespace().skip(1).collect();
    let out_at = args.iter().position(|a| *a == "--out").unwrap();
    let args: Vec<&str> = [&args[..out_at], &args[out_at + 2..]].concat();
    let o = pimdes(&args);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let report: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let jq = block.lines().find(|l| l.starts_with("jq")).unwrap();
    let paths: Vec<&str> = jq.split('\'').nth(1).unwrap().split(", ").collect();
    let stated = ["12724.6", "10743.0", "2.419"];
    assert_eq!(paths.len(), stated.len());
    for (path, want) in paths.iter().zip(stated) {
        let value = path
            .trim_start_matches('.')
            .split('.')
            .fold(&report, |v, k| &v[k]);
        let x = value.as_f64().unwrap_or_else(|| panic!("{path}: {value}"));
        let decimals = want.split('.').nth(1).unwrap().len();
        assert_eq!(format!("{x:.decimals$}"), want, "{path}");
        assert!(section.contains(want), "the text states {want}");
    }
}

/// A DPU clock changed alone changes MRAM's speed too (DMA costs are in DPU cycles): the
/// timing commands say so, unless a DMA cycle count was changed with it (not a DMA size,
/// nor a cycle count set to the file's value); `partition`, which times nothing, does not.
#[test]
fn a_clock_change_says_it_speeds_up_mram() {
    let note = |o: &common::Outcome| o.stderr.contains("scales MRAM's speed with the core's");
    let clock = ["machine.dpu.clock_mhz=700", "batches.measured=1"];
    let run = common::run_tiny(&["--quiet"], &clock);
    assert!(run.code == Some(0) && note(&run), "{}", run.stderr);
    let with_dma = [&clock[..], &["machine.dma.occupancy_fixed_cycles=32"]].concat();
    let run = common::run_tiny(&["--quiet"], &with_dma);
    assert!(run.code == Some(0) && !note(&run), "{}", run.stderr);
    for other in [
        "machine.dma.max_size_bytes=1024",
        "machine.dma.occupancy_fixed_cycles=16",
    ] {
        let run = common::run_tiny(&["--quiet"], &[&clock[..], &[other]].concat());
        assert!(run.code == Some(0) && note(&run), "{other}: {}", run.stderr);
    }
    let partition = common::tiny("partition", &["--quiet"], &clock[..1]);
    assert!(
        partition.code == Some(0) && !note(&partition),
        "{}",
        partition.stderr
    );
    let mram = pimdes(&["microbench", "mram", "--set", clock[0], "--quiet"]);
    assert!(mram.code == Some(0) && note(&mram), "{}", mram.stderr);
}
