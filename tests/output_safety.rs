//! `--out` and `--trace` never touch anything but a regular file or a new path, never an
//! input, and are checked before the simulation; stdout failures exit 1 with a message.

mod common;

use common::{Outcome, assert_bad, pimdes};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const MACHINE: &str = "machines/paper-1012.toml";
const WORKLOAD: &str = "workloads/tiny.toml";

/// A fresh temporary directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pimdes-out-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A quiet run of the tiny workload, before its output flags.
const RUN: [&str; 6] = [
    "run",
    "--machine",
    MACHINE,
    "--workload",
    WORKLOAD,
    "--quiet",
];

fn run(extra: &[&str]) -> Outcome {
    pimdes(&[&RUN[..], extra].concat())
}

fn run_out(out: &Path) -> Outcome {
    run(&["--out", out.to_str().unwrap()])
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_symlink_target_is_refused_and_left_alone() {
    let dir = scratch("symlink");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let link = dir.join("report.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let o = run_out(&link);
    assert_bad(&o, &["--out", "report.json", "symbolic link"]);
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(entries(&dir), ["report.json", "victim.txt"]);
}

#[test]
fn a_device_or_directory_target_is_refused() {
    let o = run_out(Path::new("/dev/null"));
    assert_bad(&o, &["--out /dev/null", "not a regular file"]);
    // A path ending in `/` or `/.` names a directory, even one that does not exist yet;
    // it used to pass the checks and fail after the simulation with exit code 1.
    let dir = scratch("trailing");
    // An existing file with a `/` after it too (the file system said "Not a directory").
    std::fs::write(dir.join("old.json"), "mine").unwrap();
    for path in ["new.json/", "new/.", "old.json/"] {
        let target = format!("{}/{path}", dir.display());
        let o = run_out(Path::new(&target));
        assert_bad(&o, &["--out", "names a directory, not a file"]);
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("old.json")).unwrap(),
        "mine"
    );
    let dir = scratch("directory");
    let o = run(&["--trace", dir.to_str().unwrap()]);
    assert_bad(&o, &["--trace", "is a directory"]);
}

#[test]
fn an_input_file_is_never_an_output() {
    let o = run(&["--out", "./workloads/../workloads/tiny.toml"]);
    assert_bad(&o, &["--out", "input file given to --workload"]);
    let o = run(&["--trace", MACHINE]);
    assert_bad(&o, &["--trace", "input file given to --machine"]);
}

#[test]
fn out_and_trace_on_one_path_is_refused() {
    let dir = scratch("same");
    let out = dir.join("a.json");
    let spelled_again = dir.join(".").join("a.json");
    let o = run(&[
        "--out",
        out.to_str().unwrap(),
        "--trace",
        spelled_again.to_str().unwrap(),
    ]);
    assert_bad(&o, &["--trace", "same file as --out"]);
    assert!(entries(&dir).is_empty());
}

#[test]
fn a_missing_or_unwritable_directory_is_refused_before_simulating() {
    let o = run_out(Path::new("/nonexistent-pimdes-dir/report.json"));
    assert_bad(&o, &["--out", "/nonexistent-pimdes-dir", "cannot be used"]);
    // /proc refuses new files even to root, unlike a directory without write permission.
    let o = run_out(Path::new("/proc/pimdes-report.json"));
    assert_bad(&o, &["--out", "cannot create a file in directory `/proc`"]);
}

#[test]
fn a_regular_target_is_replaced_whole_with_no_temporary_left() {
    let dir = scratch("ok");
    let out = dir.join("report.json");
    std::fs::write(&out, "old").unwrap();
    let trace = dir.join("trace.json");
    let o = run(&[
        "--out",
        out.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let report = std::fs::read_to_string(&out).unwrap();
    assert!(report.starts_with('{') && report.ends_with("}\n"));
    assert_eq!(entries(&dir), ["report.json", "trace.json"]);
}

/// A file this user may not write is refused, as a shell's `>` would refuse it, and left
/// as it was. Root may write a file of mode 0444, so as root the test takes a sysfs file,
/// which refuses writing to everyone (and is skipped where there is none).
#[test]
fn a_file_that_cannot_be_written_is_refused_and_left_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("read-only");
    let mine = dir.join("report.json");
    std::fs::write(&mine, "original").unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o444)).unwrap();
    let sysfs = Path::new("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
    let writable = |p: &Path| std::fs::OpenOptions::new().write(true).open(p).is_ok();
    let target = [mine.as_path(), sysfs]
        .into_iter()
        .find(|p| p.is_file() && !writable(p));
    let Some(target) = target else {
        eprintln!("skipped: this user may write every candidate (root without sysfs)");
        return;
    };
    let before = std::fs::read(target).unwrap();
    let o = run_out(target);
    assert_bad(&o, &["--out", "exists and cannot be written"]);
    assert_eq!(std::fs::read(target).unwrap(), before);
}

/// A replaced file keeps its mode: a private report stays private.
#[test]
fn a_replaced_file_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("mode");
    let out = dir.join("report.json");
    for mode in [0o600, 0o640] {
        std::fs::write(&out, "old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(mode)).unwrap();
        let o = run_out(&out);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        let meta = std::fs::metadata(&out).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, mode);
        assert!(std::fs::read_to_string(&out).unwrap().starts_with('{'));
    }
    assert_eq!(entries(&dir), ["report.json"]);
}

/// The shell closes stdout (`>&-`) before starting the binary.
#[test]
fn closed_stdout_exits_1_with_a_message() {
    let o = Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" >&-")
        .arg(env!("CARGO_BIN_EXE_pimdes"))
        .args(["partition", "--machine", MACHINE, "--workload", WORKLOAD])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write stdout: it is closed"),
        "{stderr}"
    );
}

/// Help and the version are output too: a closed stdout or a full device fails them
/// (they exited 0, clap printing them unchecked).
#[cfg(target_os = "linux")]
#[test]
fn help_and_version_that_cannot_be_written_exit_1() {
    for (args, to) in [
        ("--help", ">&-"),
        ("--version", ">&-"),
        ("run --help", ">/dev/full"),
        ("help sweep", ">/dev/full"),
    ] {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("exec \"$0\" {args} {to}"))
            .arg(env!("CARGO_BIN_EXE_pimdes"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args} {to}: {stderr}");
        assert!(stderr.contains("cannot write stdout"), "{stderr}");
    }
    let help = pimdes(&["--help"]);
    assert_eq!(help.code, Some(0), "{}", help.stderr);
    assert!(
        help.stdout.starts_with("A discrete-event simulator"),
        "{}",
        help.stdout
    );
}

#[test]
fn a_closed_pipe_exits_1_with_a_message() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args(["partition", "--machine", MACHINE, "--workload", WORKLOAD])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Closes the only read end before the report is written.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write stdout: Broken pipe"),
        "{stderr}"
    );
}

/// `partition --out` goes through the same checks as `run`'s: it once overwrote its own
/// machine file with exit 0.
#[test]
fn partition_out_is_checked_like_run_out() {
    let dir = scratch("partition");
    let machine = dir.join("m.toml");
    std::fs::copy(MACHINE, &machine).unwrap();
    let before = std::fs::read_to_string(&machine).unwrap();
    let m = machine.to_str().unwrap();
    let o = pimdes(&[
        "partition",
        "--machine",
        m,
        "--workload",
        WORKLOAD,
        "--quiet",
        "--out",
        m,
    ]);
    assert_bad(&o, &["--out", "input file given to --machine"]);
    assert_eq!(std::fs::read_to_string(&machine).unwrap(), before);
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&machine, &link).unwrap();
    let args = ["partition", "--machine", MACHINE, "--workload", WORKLOAD];
    let o = pimdes(&[&args[..], &["--out", link.to_str().unwrap()]].concat());
    assert_bad(&o, &["--out", "symbolic link"]);
    let out = dir.join("p.json");
    let o = pimdes(&[&args[..], &["--quiet", "--out", out.to_str().unwrap()]].concat());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(entries(&dir), ["link.json", "m.toml", "p.json"]);
}

/// Waits (at most 20 s) for the report's temporary file to hold the report (not the empty
/// probe that checks the directory before the simulation).
fn wait_for_written_temporary(dir: &Path) {
    let written = (0..2000).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::read_dir(dir).unwrap().any(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(".report.json.tmp-") && e.metadata().is_ok_and(|m| m.len() > 0)
        })
    });
    assert!(written, "no written temporary file: {:?}", entries(dir));
}

/// A signal while the report's temporary file exists removes it, and the process ends by
/// that signal (so a shell or scheduler sees it), leaving no file at all.
#[test]
fn a_signal_during_the_write_leaves_no_temporary_file() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    for (signal, number) in [("TERM", 15), ("INT", 2), ("HUP", 1)] {
        let dir = scratch(&format!("signal-{signal}"));
        let out = dir.join("report.json");
        let mut command = Command::new(env!("CARGO_BIN_EXE_pimdes"));
        command
            .args(["partition", "--machine", MACHINE, "--workload", WORKLOAD])
            .args(["--quiet", "--out", out.to_str().unwrap()])
            .env("PIMDES_TEST_HOLD_TEMPORARY_MS", "20000")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // The signal's default action in the child, whatever the tests inherited: run as
        // a script's background job (`cargo test &`), they inherit SIGINT ignored, which
        // pimdes rightly keeps ignored (the test below).
        // SAFETY: `signal` is async-signal-safe, as `pre_exec` requires.
        unsafe {
            command.pre_exec(move || {
                libc::signal(number, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = command.spawn().unwrap();
        // The written temporary file, not the empty probe made before the simulation: a
        // signal then would land while no report is being written.
        wait_for_written_temporary(&dir);
        let sent = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(number), "SIG{signal}: {status:?}");
        assert!(entries(&dir).is_empty(), "SIG{signal}: {:?}", entries(&dir));
    }
}

/// A signal inherited as ignored (`nohup`, a script's background job) stays ignored: the
/// command finishes and writes its report.
#[test]
fn an_ignored_hangup_stays_ignored() {
    let dir = scratch("nohup");
    let out = dir.join("report.json");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("trap '' HUP; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_pimdes"))
        .args(["partition", "--machine", MACHINE, "--workload", WORKLOAD])
        .args(["--quiet", "--out", out.to_str().unwrap()])
        .env("PIMDES_TEST_HOLD_TEMPORARY_MS", "500")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_written_temporary(&dir);
    let sent = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(entries(&dir), ["report.json"]);
}

/// A run's two outputs are replaced together or not at all: when `--out` cannot be
/// written (here its target became a directory during the run), the old `--trace` file
/// stays as it was. Before, the trace was put in place before the report was written.
#[test]
fn a_failed_report_leaves_the_old_trace_in_place() {
    let dir = scratch("two-outputs");
    let (out, trace) = (dir.join("report.json"), dir.join("trace.json"));
    std::fs::write(&out, "old report").unwrap();
    std::fs::write(&trace, "old trace").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_pimdes"))
        .args(RUN)
        .args(["--out", out.to_str().unwrap()])
        .args(["--trace", trace.to_str().unwrap()])
        .env("PIMDES_TEST_HOLD_TEMPORARY_MS", "1500")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the trace's temporary file is written, the report's target turns into a
    // directory before its own temporary file is written and checked.
    let written = (0..2000).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::read_dir(&dir).unwrap().any(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(".trace.json.tmp-") && e.metadata().is_ok_and(|m| m.len() > 0)
        })
    });
    assert!(written, "no written trace: {:?}", entries(&dir));
    std::fs::remove_file(&out).unwrap();
    std::fs::create_dir(&out).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is a directory"), "{stderr}");
    let kept = std::fs::read_to_string(&trace).unwrap();
    assert!(kept == "old trace", "trace replaced ({} bytes)", kept.len());
    assert_eq!(entries(&dir), ["report.json", "trace.json"]);
}
