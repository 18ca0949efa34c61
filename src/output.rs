//! Output files (`--out`, `--trace`, a sweep's files), written so that nothing is lost or
//! damaged.
//!
//! A report that took minutes to simulate must not be lost, and writing it must never
//! damage anything else: so every output target is checked before the simulation (only a
//! regular file or a new path, never a symbolic link, a device or an input file, in a
//! directory where a file can be created), and written through a temporary file beside it
//! that is fsynced, renamed over the target, and removed on every failure path, and on
//! SIGINT, SIGTERM and SIGHUP once [`remove_temporaries_on_signals`] is installed.

use crate::config::InputError;
use crate::error::Error;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One output flag and its path, e.g. `--out report.json`.
#[derive(Debug, Clone, Copy)]
pub struct OutputTarget<'a> {
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
pub type InputFile<'a> = (&'static str, &'a Path);

/// Checks every output target before anything is simulated: each is a regular file or a
/// new path in a writable directory, none is an input, and no two are the same file.
pub fn check_targets(targets: &[OutputTarget], inputs: &[InputFile]) -> Result<(), InputError> {
    let mut seen: Vec<(PathBuf, &OutputTarget)> = Vec::new();
    for target in targets {
        // The path's own form first (`x.json/`): the file system's answer for it is less
        // clear ("Not a directory").
        let canonical = canonical_target(target)?;
        check_file_type(target)?;
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

/// Checks that each of `targets` is a regular file or a new path, as [`check_targets`] does,
/// without asking whether its directory is writable: for files that a later step writes
/// only if their bytes change (a sweep's tables and figures), found before the work that
/// precedes them.
pub fn check_file_types(targets: &[OutputTarget]) -> Result<(), InputError> {
    for target in targets {
        canonical_target(target)?;
        check_file_type(target)?;
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
    // The rename would replace a file this user may not write (as `>` would not): opening
    // it for writing, without truncating, asks the file system exactly that. Not through a
    // link, and without blocking, should the path have become a FIFO since it was looked at.
    let opened = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(target.path);
    match opened {
        // Removed since it was looked at: a new path, which can be written.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(target.bad(format!(
            "exists and cannot be written ({e}); pimdes does not replace a file it may not write: give another path, or make the file writable"
        ))),
        Ok(file) if !file.metadata().is_ok_and(|m| m.is_file()) => Err(target.bad(
            "changed while it was checked and is no longer a regular file; give a new path",
        )),
        Ok(_) => Ok(()),
    }
}

/// The target's directory, canonicalized, joined with its file name: the same path for
/// every spelling of one target (no symbolic link at the end, checked before).
fn canonical_target(target: &OutputTarget) -> Result<PathBuf, InputError> {
    // `Path::file_name` reads `x.json/` and `dir/new/.` as `x.json` and `new`, but the
    // final rename cannot make a file of either: a trailing `/` or `/.` names a directory.
    let text = target.path.as_os_str().as_encoded_bytes();
    if text.ends_with(b"/") || text.ends_with(b"/.") {
        return Err(target.bad("ends with `/`, so it names a directory, not a file"));
    }
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
    match create_registered(&tmp) {
        Ok(file) => {
            drop(file);
            remove_registered(&tmp);
            Ok(())
        }
        Err(e) => Err(target.bad(format!(
            "cannot create a file in directory `{}`: {e}",
            directory_of(target.path).display()
        ))),
    }
}

/// The marker between a target's name and the rest of its temporary file's name.
const TEMPORARY_MARK: &str = ".tmp-";

/// The temporary file beside `path`: hidden, named after the target, this process and a
/// counter (two threads of one process may write beside each other), `.NAME.tmp-PID-N`.
fn temporary_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let pid = std::process::id();
    path.with_file_name(format!(".{name}{TEMPORARY_MARK}{pid}-{n}"))
}

/// The target a temporary file name belongs to (`.NAME.tmp-PID-N` gives `NAME`), for
/// removing what a killed process left; `None` for any other name.
pub fn temporary_target(file_name: &str) -> Option<&str> {
    legacy_temporary_target(file_name.strip_prefix('.')?)
}

/// The target of a temporary file named `NAME.tmp-PID-N`, not hidden, as earlier versions
/// named them; `None` for any other name (`results.csv.tmp-keep`, `x.json.tmp-1` and
/// `results.csv.tmp-2024-01-01` are a user's files: only two numbers make our tail).
pub fn legacy_temporary_target(file_name: &str) -> Option<&str> {
    let (target, tail) = file_name.rsplit_once(TEMPORARY_MARK)?;
    let number = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let ours = tail
        .split_once('-')
        .is_some_and(|(pid, n)| number(pid) && number(n));
    ours.then_some(target)
}

/// Whether the process that named temporary file `file_name` (`...tmp-PID-N`) is another
/// pimdes that still runs on this machine (the same executable, so that a process id
/// reused by another program does not keep a leftover forever): its file is being
/// written, not left behind by a killed process. False wherever processes cannot be looked
/// up (no `/proc`), so that leftovers are still cleared there.
pub fn written_by_a_live_process(file_name: &str) -> bool {
    let pid = file_name
        .rsplit_once(TEMPORARY_MARK)
        .and_then(|(_, tail)| tail.split_once('-'))
        .and_then(|(pid, _)| pid.parse::<u32>().ok());
    let exe = |pid: &str| std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    pid.is_some_and(|pid| {
        pid != std::process::id() && exe(&pid.to_string()).is_some_and(|e| Some(e) == exe("self"))
    })
}

/// Writes `bytes` to the target atomically: all of it or nothing, and the temporary file
/// is removed whatever fails. The target is checked again just before the rename, since
/// the file system may have changed during the simulation.
pub fn write_atomically(target: OutputTarget, bytes: &[u8]) -> Result<(), Error> {
    write_all_atomically(&[(target, bytes)])
}

/// Writes several outputs of one command (a run's `--out` and `--trace`): every one is
/// written whole to its temporary file and every target checked before any is replaced,
/// so a failure of one (a full disk, a target that became a directory) leaves every
/// target as it was. The renames then run under the temporaries' lock, so a signal's
/// handler waits for all of them (or runs first, and none happens). Only a failure of a
/// rename itself can leave the first outputs replaced and the others not; the error says
/// which were.
pub fn write_all_atomically(outputs: &[(OutputTarget, &[u8])]) -> Result<(), Error> {
    let fail = |target: &OutputTarget, reason: String| Error::Output {
        path: target.path.display().to_string(),
        reason,
    };
    let mut written: Vec<PathBuf> = Vec::with_capacity(outputs.len());
    let discard = |written: &[PathBuf]| written.iter().for_each(|t| remove_registered(t));
    for (target, bytes) in outputs {
        let tmp = temporary_path(target.path);
        // A replaced file keeps its permission bits (a private file stays private; no
        // setuid, setgid or sticky bit); its owner becomes this user, as with any file
        // written anew.
        let mode = std::fs::symlink_metadata(target.path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| std::fs::Permissions::from_mode(m.permissions().mode() & 0o777));
        if let Err(e) = write_synced(&tmp, bytes, mode) {
            remove_registered(&tmp);
            discard(&written);
            return Err(fail(target, format!("writing `{}`: {e}", tmp.display())));
        }
        written.push(tmp);
    }
    for (target, _) in outputs {
        if let Err(e) = check_file_type(target) {
            discard(&written);
            return Err(fail(target, e.reason));
        }
    }
    rename_all(outputs, &written)?;
    // Makes the renames durable; a directory that cannot be synced (some file systems)
    // still holds the complete files, so this is best effort.
    for (target, _) in outputs {
        if let Ok(dir) = File::open(directory_of(target.path)) {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

/// Renames each written temporary file to its target, all under the temporaries' lock;
/// on a failure removes the ones left and names the targets already replaced.
fn rename_all(outputs: &[(OutputTarget, &[u8])], written: &[PathBuf]) -> Result<(), Error> {
    let mut list = temporaries();
    let mut result = Ok(());
    for (i, ((target, _), tmp)) in outputs.iter().zip(written).enumerate() {
        let renamed = match list.dying {
            true => Err(std::io::Error::other(
                "the process is being stopped by a signal",
            )),
            false => std::fs::rename(tmp, target.path),
        };
        if let Err(e) = renamed {
            let done: Vec<String> = outputs[..i].iter().map(|(t, _)| t.origin()).collect();
            let note = match done.is_empty() {
                true => String::new(),
                false => format!(" ({} already replaced)", done.join(", ")),
            };
            for left in &written[i..] {
                let _ = std::fs::remove_file(left);
            }
            result = Err(Error::Output {
                path: target.path.display().to_string(),
                reason: format!("{e}{note}"),
            });
            break;
        }
    }
    list.paths.retain(|p| !written.contains(p));
    result
}

/// Creates `path` (never an existing file, so nothing is followed or clobbered), gives it
/// `mode` (before any byte is in it), writes `bytes` and fsyncs them.
fn write_synced(
    path: &Path,
    bytes: &[u8],
    mode: Option<std::fs::Permissions>,
) -> std::io::Result<()> {
    let mut file = create_registered(path)?;
    if let Some(mode) = mode {
        file.set_permissions(mode)?;
    }
    file.write_all(bytes)?;
    file.sync_all()?;
    hold_for_tests();
    Ok(())
}

/// For the signal tests only: `PIMDES_TEST_HOLD_TEMPORARY_MS` keeps a written temporary
/// file in place that long before the rename, so a test can signal the process while it
/// exists (the window is otherwise microseconds wide).
fn hold_for_tests() {
    let hold_ms = std::env::var("PIMDES_TEST_HOLD_TEMPORARY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(ms) = hold_ms {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(60_000)));
    }
}

/// The temporary files that exist now, for removal on a signal; `dying` once a signal
/// came, after which no new one is created.
struct Temporaries {
    paths: Vec<PathBuf>,
    dying: bool,
}

static TEMPORARIES: Mutex<Temporaries> = Mutex::new(Temporaries {
    paths: Vec::new(),
    dying: false,
});

fn temporaries() -> std::sync::MutexGuard<'static, Temporaries> {
    // A panic while holding the lock leaves the list itself intact.
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates `path` new and records it, under the lock, so a signal handler either sees it
/// or runs before it exists (and then it is never created).
fn create_registered(path: &Path) -> std::io::Result<File> {
    let mut list = temporaries();
    if list.dying {
        return Err(std::io::Error::other(
            "the process is being stopped by a signal",
        ));
    }
    let file = OpenOptions::new().write(true).create_new(true).open(path)?;
    list.paths.push(path.to_path_buf());
    Ok(file)
}

/// Removes `path` if it still exists (after a failure) and forgets it.
fn remove_registered(path: &Path) {
    let mut list = temporaries();
    let _ = std::fs::remove_file(path);
    list.paths.retain(|p| p != path);
}

/// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove every temporary file this
/// process holds, then end the process as the signal would have (so a shell or a job
/// scheduler sees the signal). A signal the process inherited as ignored (`nohup`, a
/// script's background job) stays ignored. Call once, from the command line's `main`. On
/// failure nothing is installed.
pub fn remove_temporaries_on_signals() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let wanted: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| !inherited_as_ignored(s))
        .collect();
    // The handlers are registered on the thread that reads them, so a thread that cannot
    // start leaves no handler swallowing signals.
    let (ready, installed) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("pimdes-signals".into())
        .spawn(move || {
            let mut signals = match signal_hook::iterator::Signals::new(&wanted) {
                Ok(s) => {
                    let _ = ready.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            if let Some(signal) = signals.forever().next() {
                remove_all_temporaries();
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                // Only reached if the default action did not end the process.
                std::process::exit(128 + signal);
            }
        })?;
    installed
        .recv()
        .unwrap_or_else(|_| Err(std::io::Error::other("the signal thread ended")))
}

/// Whether `signal`'s current action is "ignore" (as `nohup` leaves SIGHUP, and a shell
/// leaves SIGINT for a background job), which the handlers must not override.
fn inherited_as_ignored(signal: i32) -> bool {
    let mut current = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a null new action only reads the current one into `current`, which is a
    // properly sized, zeroed `sigaction` that outlives the call.
    let read = unsafe { libc::sigaction(signal, std::ptr::null(), current.as_mut_ptr()) };
    // SAFETY: zero is a valid `sigaction`, and the call either filled it or left it zero.
    read == 0 && unsafe { current.assume_init() }.sa_sigaction == libc::SIG_IGN
}

fn remove_all_temporaries() {
    let mut list = temporaries();
    list.dying = true;
    for path in list.paths.drain(..) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_lead_back_to_their_target() {
        let tmp = temporary_path(Path::new("/d/run.json"));
        let name = tmp.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(".run.json.tmp-"), "{name}");
        assert_eq!(temporary_target(name), Some("run.json"));
        assert_eq!(
            temporary_target(".a.tmp-b.json.tmp-12-0"),
            Some("a.tmp-b.json")
        );
        for other in [
            "run.json",
            ".run.json",
            ".run.json.tmp-",
            ".x.tmp-1a",
            "a.tmp-1-0",
            ".x.tmp-1",
            ".x.tmp-2024-01-01",
            ".x.tmp-1-",
        ] {
            assert_eq!(temporary_target(other), None, "{other}");
        }
        // A user's files that only look like an earlier version's temporaries.
        assert_eq!(
            legacy_temporary_target("results.csv.tmp-12-3"),
            Some("results.csv")
        );
        for users in ["results.csv.tmp-2024-01-01", "x.json.tmp-1", "x.tmp--1"] {
            assert_eq!(legacy_temporary_target(users), None, "{users}");
        }
    }

    #[test]
    fn a_failed_write_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("pimdes-output-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("target.json")).unwrap();
        let target = OutputTarget {
            flag: "--out",
            path: &dir.join("target.json"),
        };
        // The target became a directory after the check: the write fails, cleanly.
        let error = write_atomically(target, b"{}").unwrap_err();
        assert_eq!(error.exit_code(), crate::error::EXIT_FAILURE);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "only the directory is left: {left:?}");
        assert!(temporaries().paths.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
