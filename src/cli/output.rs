//! Stdout: a report that cannot be written is an error (exit 1), never lost with exit 0.
//! Output files are [`crate::output`]'s.

use crate::error::Error;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

/// Fails when stdout was closed (`>&-`), so the report is not lost with exit 0.
pub(crate) fn check_stdout_open() -> Result<(), Error> {
    let closed = Error::Output {
        path: "stdout".into(),
        reason: "it is closed (`>&-`); redirect it to a file instead".into(),
    };
    match std::io::stdout().as_fd().try_clone_to_owned() {
        Err(_) => Err(closed),
        Ok(_) if stdout_replaced_by_runtime() => Err(closed),
        Ok(_) => Ok(()),
    }
}

/// Whether stdout is the `/dev/null` the Rust runtime opens, read-write, in place of a
/// closed descriptor 1 at start-up. A shell's `>/dev/null` opens it write-only, so the two
/// can be told apart on Linux through `/proc`; elsewhere this says no.
fn stdout_replaced_by_runtime() -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    let is_null = std::fs::read_link("/proc/self/fd/1").is_ok_and(|p| p == Path::new("/dev/null"));
    let read_write = std::fs::read_to_string("/proc/self/fdinfo/1").is_ok_and(|info| {
        info.lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
            .is_some_and(|flags| flags & 0o3 == 0o2)
    });
    is_null && read_write
}

/// Writes all output at once, so a failure never leaves half a report. It writes to a
/// duplicate of the descriptor rather than through [`std::io::Stdout`], which hides a
/// closed descriptor; a closed pipe is an error too (Rust ignores SIGPIPE).
pub(crate) fn write_stdout(text: &str) -> Result<(), Error> {
    let fail = |e: std::io::Error| Error::Output {
        path: "stdout".into(),
        reason: e.to_string(),
    };
    let stdout = std::io::stdout().lock();
    let fd = stdout.as_fd().try_clone_to_owned().map_err(fail)?;
    let mut file = File::from(fd);
    file.write_all(text.as_bytes())
        .and_then(|_| file.flush())
        .map_err(fail)
}
