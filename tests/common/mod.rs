//! Shared helpers of the integration tests.
#![allow(dead_code)]

use pimdes::config::Override;
use pimdes::machine::Machine;

pub const PRIM: &str = include_str!("../../machines/upmem-2556-350mhz.toml");

/// Whether a warning is the chunk-floor one, which runs of the tiny workload get (its
/// chunks are coarse for its few pairs per DPU): tests of other warnings leave it out.
pub fn is_chunk_floor(warning: &str) -> bool {
    warning.starts_with(pimdes::partition::prepared::CHUNK_FLOOR_NOTE)
}

/// `warnings` without the chunk-floor one ([`is_chunk_floor`]).
pub fn other_warnings<S: AsRef<str>>(warnings: &[S]) -> Vec<&str> {
    let all = warnings.iter().map(AsRef::as_ref);
    all.filter(|w| !is_chunk_floor(w)).collect()
}

/// The PrIM machine, with `--set`-style overrides (`machine.` prefix added).
pub fn machine(sets: &[&str]) -> Machine {
    let overrides: Vec<Override> = sets
        .iter()
        .map(|s| Override::parse(&format!("machine.{s}")).unwrap())
        .collect();
    Machine::from_toml_str("upmem-2556-350mhz.toml", PRIM, &overrides).unwrap()
}

/// What one run of the `pimdes` binary printed and returned.
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// `pimdes run` of `workloads/tiny.toml` on `machines/paper-2rank.toml` with `flags`, then
/// each of `sets` as a `--set`.
pub fn run_tiny(flags: &[&str], sets: &[&str]) -> Outcome {
    tiny("run", flags, sets)
}

/// `pimdes command` (run, partition, ...) of `workloads/tiny.toml` on
/// `machines/paper-2rank.toml` with `flags`, then each of `sets` as a `--set`.
pub fn tiny(command: &str, flags: &[&str], sets: &[&str]) -> Outcome {
    let mut args = vec![
        command,
        "--machine",
        "machines/paper-2rank.toml",
        "--workload",
        "workloads/tiny.toml",
    ];
    args.extend_from_slice(flags);
    for set in sets {
        args.extend(["--set", set]);
    }
    pimdes(&args)
}

/// Runs the `pimdes` binary from the crate's root.
pub fn pimdes(args: &[&str]) -> Outcome {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs");
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Bad input: exit code 2, nothing on stdout, and an error on stderr containing `needles`.
#[track_caller]
pub fn assert_bad(o: &Outcome, needles: &[&str]) {
    assert_eq!(o.code, Some(2), "exit code; stderr: {}", o.stderr);
    assert!(o.stdout.is_empty(), "no partial output, got: {}", o.stdout);
    assert!(o.stderr.starts_with("error: "), "stderr: {}", o.stderr);
    for n in needles {
        assert!(o.stderr.contains(n), "stderr lacks {n:?}: {}", o.stderr);
    }
}
