//! Safe output files (`--out`, `--trace`) and stdout.
//!
//! A report that took minutes to simulate must not be lost, and writing it must never
//! damage anything else: so every output target is checked before the simulation (only a
//! regular file or a new path, never a symbolic link, a device or an input file, in a
//! directory where a file can be created), and written through a temporary file beside it
//! that is fsynced, renamed over the target, and removed on every failure path.

use crate::config::InputError;
use crate::error::Error;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// One output flag and its path, e.g. `--out report.json`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutputTarget<'a> {
    pub flag: &'static str,
    pub path: &'a Path,
}

impl OutputTarget<'_> {
    fn origin(&self) -> String {
        format!("{} {}", self.flag, self.path.display())
    }

    fn bad(&self, reason: impl Into<String>) -> InputError {
        InputError::plain(self.origin(), reason)
    }
}

/// One input flag and its path, e.g. `--machine m.toml`, which no output may replace.
pub(crate) type InputFile<'a> = (&'static str, &'a Path);

/// Checks every output target before anything is simulated: each is a regular file or a
/// new path in a writable directory, none is an input, and no two are the same file.
pub(crate) fn check_targets(
    targets: &[OutputTarget],
    inputs: &[InputFile],
) -> Result<(), InputError> {
    let mut seen: Vec<(PathBuf, &OutputTarget)> = Vec::new();
    for target in targets {
        check_file_type(target)?;
        let canonical = canonical_target(target)?;
        for (flag, input) in inputs {
            // An input that cannot be resolved does not exist; loading it reports that.
            if std::fs::canonicalize(input).is_ok_and(|i| i == canonical) {
                return Err(target.bad(format!(
                    "is the input file given to {flag}; writing it would destroy the input: give another path"
                )));
            }
        }
        if let Some((_, other)) = seen.iter().find(|(p, _)| *p == canonical) {
            return Err(target.bad(format!(
                "is the same file as {}; give each output its own path",
                other.origin()
            )));
        }
        check_writable_directory(target, &canonical)?;
        seen.push((canonical, target));
    }
    Ok(())
}

/// An existing target must be a regular file; a symbolic link is refused (not followed),
/// so a report never lands somewhere the path does not say, and a device or FIFO is
/// refused so a report is never sent where it cannot be read back (for stdout, use
/// `--json`).
fn check_file_type(target: &OutputTarget) -> Result<(), InputError> {
    let metadata = match std::fs::symlink_metadata(target.path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(target.bad(format!("cannot inspect the path: {e}"))),
    };
    let kind = metadata.file_type();
    if kind.is_symlink() {
        return Err(target.bad(
            "is a symbolic link; pimdes does not write through links: give the link's target or a new path",
        ));
    }
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, FIFO or socket)"
        };
        return Err(target.bad(format!(
            "exists and is {what}; only a regular file or a new path can be written"
        )));
    }
    Ok(())
}

/// The target's directory, canonicalized, joined with its file name: the same path for
/// every spelling of one target (no symbolic link at the end, checked before).
fn canonical_target(target: &OutputTarget) -> Result<PathBuf, InputError> {
    let Some(name) = target.path.file_name() else {
        return Err(target.bad("names a directory, not a file"));
    };
    let directory = directory_of(target.path);
    let canonical = std::fs::canonicalize(directory).map_err(|e| {
        target.bad(format!(
            "its directory `{}` cannot be used: {e}",
            directory.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(target.bad(format!("`{}` is not a directory", directory.display())));
    }
    Ok(canonical.join(name))
}

fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Creates and removes the temporary file where the real write will create it, so an
/// unwritable directory is reported before the simulation, not after it.
fn check_writable_directory(target: &OutputTarget, canonical: &Path) -> Result<(), InputError> {
    let tmp = temporary_path(canonical);
    let file = OpenOptions::new().write(true).create_new(true).open(&tmp);
    match file {
        Ok(f) => {
            drop(f);
            let _ = std::fs::remove_file(&tmp);
            Ok(())
        }
        Err(e) => Err(target.bad(format!(
            "cannot create a file in directory `{}`: {e}",
            directory_of(target.path).display()
        ))),
    }
}

/// The temporary file beside `path`: hidden, named after the target and this process.
fn temporary_path(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Writes `bytes` to the target atomically: all of it or nothing, and the temporary file
/// is removed whatever fails. The target is checked again just before the rename, since
/// the file system may have changed during the simulation.
pub(crate) fn write_atomically(target: OutputTarget, bytes: &[u8]) -> Result<(), Error> {
    let fail = |reason: String| Error::Output {
        path: target.path.display().to_string(),
        reason,
    };
    let tmp = temporary_path(target.path);
    let written = write_synced(&tmp, bytes)
        .map_err(|e| fail(format!("writing `{}`: {e}", tmp.display())))
        .and_then(|()| check_file_type(&target).map_err(|e| fail(e.reason)))
        .and_then(|()| std::fs::rename(&tmp, target.path).map_err(|e| fail(e.to_string())));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    // Makes the rename itself durable; a directory that cannot be synced (some file
    // systems) still holds the complete file, so this is best effort.
    if let Ok(dir) = File::open(directory_of(target.path)) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Creates `path` (never an existing file, so nothing is followed or clobbered), writes
/// `bytes` and fsyncs them.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

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
