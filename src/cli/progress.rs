//! Progress of long commands on stderr, from a ticker thread: on a terminal one line is
//! rewritten every second; otherwise (a log file, CI) a plain line every [`PLAIN_EVERY`].
//! Each line has the phase (or the batch, with an estimate of the time left) and the elapsed
//! time. Commands shorter than one tick print nothing, so quick runs and their error
//! messages stay as they were. Wall time is only shown here: it never reaches a result.

use crate::experiments::run::Progress;
use crate::meter::Meter;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Interval of the plain lines when stderr is not a terminal.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);
/// Interval of the redraws on a terminal.
const TERMINAL_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
struct State {
    status: String,
    /// When the current phase (or batch) started, for the meter's estimate.
    phase_from: Option<Instant>,
    /// When the first batch started, for the estimate.
    batches_from: Option<Instant>,
    /// The batches done and in all, while batches run.
    batch: Option<(u64, u64)>,
    finished: bool,
    printed: bool,
    /// A line printed once, when the first batch starts (after every input check), such
    /// as the run's estimated wall time.
    note: Option<String>,
    /// The run's estimated wall time and when it was made: the time left until the first
    /// batch is done and measures the rest.
    estimate: Option<(Instant, Duration)>,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// Progress lines of `command` on stderr while it lives.
pub struct StderrProgress {
    shared: Shared,
    meter: Arc<Meter>,
    ticker: Option<std::thread::JoinHandle<()>>,
    terminal: bool,
}

impl StderrProgress {
    pub fn new(command: &'static str, terminal: bool) -> StderrProgress {
        let shared: Shared = Arc::default();
        let every = interval_override().unwrap_or(if terminal {
            TERMINAL_EVERY
        } else {
            PLAIN_EVERY
        });
        let meter: Arc<Meter> = Arc::default();
        let ticker = {
            let shared = Arc::clone(&shared);
            let meter = Arc::clone(&meter);
            std::thread::spawn(move || tick(&shared, &meter, command, terminal, every))
        };
        StderrProgress {
            shared,
            meter,
            ticker: Some(ticker),
            terminal,
        }
    }

    /// Prints `note` on stderr when the first batch starts: after the index is built, so
    /// an input error found while building is not preceded by it.
    pub fn note_at_first_batch(&mut self, note: String) {
        self.set(|s| s.note = Some(note));
    }

    /// The run's estimated wall time from now (`pimdes run` estimates every run): the time
    /// left shown while the first batch runs.
    pub fn estimate_from_now(&mut self, wall: Duration) {
        self.set(|s| s.estimate = Some((Instant::now(), wall)));
    }

    /// Runs `print` (a line on stdout) with the ticker held off, after clearing the line it
    /// is redrawing on a terminal (both may share the screen), which it redraws at its next
    /// tick.
    pub fn above<R>(&self, print: impl FnOnce() -> R) -> R {
        let mut state = self.shared.0.lock().unwrap_or_else(|e| e.into_inner());
        if self.terminal && state.printed {
            eprint!("\r\x1b[K");
            state.printed = false;
        }
        print()
    }

    fn set(&self, update: impl FnOnce(&mut State)) {
        let mut state = self.shared.0.lock().unwrap_or_else(|e| e.into_inner());
        update(&mut state);
    }
}

/// The ticker: a line every `every` until the command finishes.
fn tick(shared: &Shared, meter: &Meter, command: &str, terminal: bool, every: Duration) {
    let started = Instant::now();
    let (lock, wake) = &**shared;
    let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        // Finished before the ticker first waited (a command that ended at once).
        if state.finished {
            return;
        }
        state = wake
            .wait_timeout(state, every)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if state.finished {
            return;
        }
        if state.status.is_empty() {
            continue;
        }
        let line = format!(
            "{command}: {}{}{}, {} elapsed",
            state.status,
            run_left(&state, meter),
            measured(&state, meter),
            clock(started.elapsed())
        );
        let mut err = std::io::stderr().lock();
        let _ = if terminal {
            write!(err, "\r{line}\x1b[K")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
        state.printed = true;
    }
}

impl Drop for StderrProgress {
    fn drop(&mut self) {
        self.set(|s| s.finished = true);
        self.shared.1.notify_all();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        let printed = self.shared.0.lock().map(|s| s.printed).unwrap_or(false);
        if printed && self.terminal {
            eprintln!();
        }
    }
}

/// `PIMDES_PROGRESS_EVERY_MS`, when set to a number of milliseconds (at least 10): the
/// interval for both kinds of stderr, so tests can see the lines of a short run.
fn interval_override() -> Option<Duration> {
    let ms: u64 = std::env::var("PIMDES_PROGRESS_EVERY_MS")
        .ok()?
        .parse()
        .ok()?;
    Some(Duration::from_millis(ms.max(10)))
}

/// For a command with one long phase: the phase and the elapsed time while it lives
/// (nothing with `quiet`).
pub fn heartbeat(command: &'static str, quiet: bool, phase: &str) -> Option<StderrProgress> {
    (!quiet).then(|| {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let mut p = StderrProgress::new(command, terminal);
        p.phase(phase);
        p
    })
}

/// `m:ss` (or `h:mm:ss`).
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// How far a measured phase has come, and the time it has left: ", 37 %, about 0:42 left"
/// (in a batch: "; this batch 37 %, about 0:42 left").
fn measured(state: &State, meter: &Meter) -> String {
    let (Some(from), Some((done, total))) = (state.phase_from, meter.progress()) else {
        return String::new();
    };
    let percent = done * 100 / total;
    // While batches run, the meter measures the current batch.
    let what = if state.batches_from.is_some() {
        "; this batch "
    } else {
        ", "
    };
    match estimate_left(from.elapsed(), done, total) {
        Some(d) => format!("{what}{percent} %, about {} left", clock(d)),
        None => format!("{what}{percent} %"),
    }
}

/// While batches run, the time the run has left: ", about 1:20 left", refreshed on every
/// line: from the batches done and the part of the current one the meter has seen, or,
/// when the meter sees nothing, the estimate at the batch's start counted down; in the
/// first batch, before either measures anything, the run's estimate counted down.
fn run_left(state: &State, meter: &Meter) -> String {
    let (Some(from), Some(batch_from), Some(batches)) =
        (state.batches_from, state.phase_from, state.batch)
    else {
        return String::new();
    };
    let left = match meter.progress() {
        Some((d, t)) => run_estimate(from.elapsed(), batches, d as f64 / t.max(1) as f64),
        None => run_estimate(batch_from.duration_since(from), batches, 0.0)
            .map(|l| l.saturating_sub(batch_from.elapsed())),
    };
    let estimated = || {
        let (at, wall) = state.estimate?;
        Some(wall.saturating_sub(at.elapsed())).filter(|l| !l.is_zero())
    };
    let left = left.or_else(|| (batches.0 == 0).then(estimated).flatten());
    match left {
        Some(left) => format!(", about {} left", clock(left)),
        None => String::new(),
    }
}

/// Time left for `total` batches when `done` of them and the fraction `part` of the next
/// took `spent`.
fn run_estimate(spent: Duration, (done, total): (u64, u64), part: f64) -> Option<Duration> {
    let progress = done as f64 + part.clamp(0.0, 1.0);
    (progress > 0.0 && progress < total as f64)
        .then(|| spent.mul_f64((total as f64 - progress) / progress))
}

/// Time left for `total` items when `done` of them took `spent`.
fn estimate_left(spent: Duration, done: u64, total: u64) -> Option<Duration> {
    (done > 0 && done < total).then(|| spent.mul_f64((total - done) as f64 / done as f64))
}

impl Progress for StderrProgress {
    fn batch(&mut self, done: u64, total: u64, unsimulated: u64) {
        self.meter.reset();
        let terminal = self.terminal;
        self.set(|s| {
            if let Some(note) = s.note.take() {
                // On a terminal, over the progress line being redrawn.
                let clear = if terminal && s.printed {
                    "\r\x1b[K"
                } else {
                    ""
                };
                eprintln!("{clear}{note}");
            }
            // An index may measure a long batch on the meter.
            s.phase_from = Some(Instant::now());
            s.batches_from.get_or_insert_with(Instant::now);
            s.batch = Some((done, total));
            s.status = format!("batch {}/{}", unsimulated + done + 1, unsimulated + total);
        });
    }

    fn phase(&mut self, what: &str) {
        self.set(|s| {
            s.status = what.to_owned();
            s.batch = None;
            s.phase_from = Some(Instant::now());
        });
    }

    fn meter(&self) -> Arc<Meter> {
        Arc::clone(&self.meter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_and_estimate() {
        assert_eq!(clock(Duration::from_secs(61)), "1:01");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
        let left = estimate_left(Duration::from_secs(10), 5, 20).unwrap();
        assert_eq!(left, Duration::from_secs(30));
        assert_eq!(estimate_left(Duration::from_secs(10), 0, 20), None);
        assert_eq!(estimate_left(Duration::from_secs(10), 20, 20), None);
        // Halfway through the first of two batches after 60 s: three times that is left.
        let left = run_estimate(Duration::from_secs(60), (0, 2), 0.5).unwrap();
        assert_eq!(left, Duration::from_secs(180));
        assert_eq!(run_estimate(Duration::from_secs(5), (0, 2), 0.0), None);
        assert_eq!(run_estimate(Duration::from_secs(5), (2, 2), 0.0), None);
    }
}
