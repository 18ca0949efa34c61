//! [`Meter`]: how far a long phase has come (work done of a total), shared between the
//! threads that do the work and the thread that shows progress. It only ever reaches
//! progress lines on stderr, never a result.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Work done of a total; a total of 0 means the phase is not measured.
#[derive(Debug, Default)]
pub struct Meter {
    done: AtomicU64,
    total: AtomicU64,
}

impl Meter {
    /// A new measured phase of `total` units, none done.
    pub fn start(&self, total: u64) {
        self.done.store(0, Relaxed);
        self.total.store(total, Relaxed);
    }

    /// The phase is no longer measured.
    pub fn reset(&self) {
        self.start(0);
    }

    /// `units` more are done.
    pub fn add(&self, units: u64) {
        self.done.fetch_add(units, Relaxed);
    }

    /// (done, total) of a measured phase, done capped at total.
    pub fn progress(&self) -> Option<(u64, u64)> {
        let total = self.total.load(Relaxed);
        (total > 0).then(|| (self.done.load(Relaxed).min(total), total))
    }
}

/// What a long build reports: the phase it is in, and how far that phase has come. An
/// index may keep the meter to report how far a long batch has come.
pub struct Phases<'a> {
    phase: &'a mut dyn FnMut(&str),
    pub meter: Arc<Meter>,
}

impl<'a> Phases<'a> {
    pub fn new(phase: &'a mut dyn FnMut(&str), meter: Arc<Meter>) -> Phases<'a> {
        Phases { phase, meter }
    }

    /// Enters phase `what`, not measured until [`Meter::start`].
    pub fn phase(&mut self, what: &str) {
        self.meter.reset();
        (self.phase)(what);
    }
}

/// Runs `f` with phases that go nowhere (for callers that show no progress).
pub fn quietly<R>(f: impl FnOnce(&mut Phases<'_>) -> R) -> R {
    let mut ignore = |_: &str| {};
    f(&mut Phases::new(&mut ignore, Arc::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_is_measured_from_its_start_and_capped_at_its_total() {
        let m: Arc<Meter> = Arc::default();
        assert_eq!(m.progress(), None);
        m.start(10);
        m.add(4);
        assert_eq!(m.progress(), Some((4, 10)));
        m.add(20);
        assert_eq!(m.progress(), Some((10, 10)));
        let mut seen = Vec::new();
        {
            let mut record = |p: &str| seen.push(p.to_owned());
            let mut phases = Phases::new(&mut record, Arc::clone(&m));
            phases.phase("next");
            assert_eq!(phases.meter.progress(), None);
        }
        assert_eq!(seen, ["next"]);
    }
}
