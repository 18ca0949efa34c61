//! What a new user meets first: `--help` names every index, partitioner and policy, and an
//! override that resizes a machine whose file fixes its usable DPUs says what it kept.

mod common;

use common::pimdes;

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
    assert!(!o.stderr.contains("warning"), "{}", o.stderr);
    assert!(o.stdout.contains("(1280 DPUs)"), "{}", o.stdout);
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
    }
    let o = pimdes(&["completions", "nosuch"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
}
