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
