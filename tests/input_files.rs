//! `--machine` and `--workload` must be regular files of at most 1 MiB: a FIFO does not
//! block, a device is not read forever, a huge file is not read into memory.

mod common;

use common::{Outcome, assert_bad};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WORKLOAD: &str = "workloads/tiny.toml";

/// Runs `partition` with `machine`, killed after 20 s so a hang fails instead of blocking.
fn partition_with_machine(machine: &str) -> Outcome {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args(["partition", "--machine", machine, "--workload", WORKLOAD])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("pimdes hung on --machine {machine}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pimdes-in-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let fifo = scratch("fifo").join("machine.toml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let o = partition_with_machine(fifo.to_str().unwrap());
    assert_bad(&o, &["machine.toml", "not a regular file"]);
}

#[test]
fn a_device_or_directory_is_refused() {
    let o = partition_with_machine("/dev/zero");
    assert_bad(&o, &["/dev/zero", "not a regular file"]);
    let o = partition_with_machine("machines");
    assert_bad(&o, &["machines", "is a directory"]);
}

#[test]
fn a_file_over_one_mebibyte_is_refused() {
    let big = scratch("big").join("machine.toml");
    let mut text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("machines/paper-1012.toml"),
    )
    .unwrap();
    while text.len() <= 1 << 20 {
        text.push_str("# padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&big, text).unwrap();
    let o = partition_with_machine(big.to_str().unwrap());
    assert_bad(&o, &["machine.toml", "1048576-byte (1 MiB) limit"]);
}

/// A byte that is not UTF-8 is placed as an editor shows it: line and column.
#[test]
fn a_file_that_is_not_utf8_names_the_line_and_column() {
    let file = scratch("utf8").join("machine.toml");
    let mut bytes = b"name = \"x\"\n# caf".to_vec();
    bytes.extend([0xe9, b'\n']);
    std::fs::write(&file, bytes).unwrap();
    let o = partition_with_machine(file.to_str().unwrap());
    assert_bad(&o, &["machine.toml", "not UTF-8 text (line 2, column 6:"]);
}

/// An integer beyond 64 bits in a file is said as `--set` says it, not in the parser's
/// Rust words.
#[test]
fn an_integer_beyond_toml_in_a_file_is_said_plainly() {
    let file = scratch("huge").join("machine.toml");
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("machines/paper-2rank.toml"),
    )
    .unwrap();
    let text = text.replacen("ranks = 2", "ranks = 99999999999999999999", 1);
    assert!(text.contains("99999999999999999999"));
    std::fs::write(&file, text).unwrap();
    let o = partition_with_machine(file.to_str().unwrap());
    assert_bad(
        &o,
        &[
            "99999999999999999999 is beyond TOML's integers (-2^63 to 2^63 - 1)",
            "line",
        ],
    );
    assert!(!o.stderr.contains("i128"), "{}", o.stderr);
}
