//! `pimdes run --trace FILE`: a batch's timeline as Chrome trace-event JSON (Perfetto,
//! chrome://tracing), in simulated microseconds. Processes and threads:
//!
//! - `batches`: one thread per top-level host thread; a span per batch, and nested in it
//!   the batch's critical path, one span per stage (or wait);
//! - `host`: one thread per top-level host thread: its host tasks (on the pool), ownership
//!   switches and waits for the DPUs;
//! - `ranks`: one thread per rank: SDK calls, pushes, pulls, launches, kernels;
//! - `DPU d, batch b`: one thread per tasklet, its activity (running, dma, mutex, barrier).

use crate::engine::Time;
use crate::index::Recording;
use crate::machine::Machine;
use crate::system::exec::{Timeline, Track};
use crate::trace::{ArgValue, Trace};
use std::ops::Range;

/// Upper bound on the events of one trace file (about 150 bytes each).
pub const MAX_TRACE_EVENTS: usize = 1_000_000;

/// Which DPUs a trace shows tasklet by tasklet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceDpus {
    /// The DPU with the longest kernel in each traced batch.
    Busiest,
    List(Vec<u32>),
}

/// What `--trace` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRequest {
    pub batches: Range<u64>,
    pub dpus: TraceDpus,
    pub max_events: usize,
}

/// At most this many (batch, DPU) pairs are recorded tasklet by tasklet in one trace.
pub const MAX_TRACED_DPU_BATCHES: u64 = 64;

impl TraceRequest {
    /// The (batch, DPU) pairs recorded tasklet by tasklet.
    pub fn recordings(&self) -> u64 {
        let dpus = match &self.dpus {
            TraceDpus::Busiest => 1,
            TraceDpus::List(list) => list.len() as u64,
        };
        (self.batches.end - self.batches.start).saturating_mul(dpus)
    }

    /// Spans each recording may keep: half the file's bound shared among them, so the
    /// recordings never hold more than the trace can write and leave the other half to
    /// the batches', host's and ranks' spans (the recordings alone once filled the bound,
    /// and the last of them was cut).
    pub fn spans_per_recording(&self) -> usize {
        let n = self.recordings().clamp(1, MAX_TRACED_DPU_BATCHES) as usize;
        self.max_events / 2 / n
    }
}

const PID_BATCHES: u32 = 1;
const PID_HOST: u32 = 2;
const PID_RANKS: u32 = 3;
const PID_FIRST_DPU: u32 = 10;

/// The trace of the requested batches of `timeline`; `tasklets` holds the recorded DPUs,
/// by batch.
pub fn build_trace(
    machine: &Machine,
    request: &TraceRequest,
    timeline: &Timeline,
    tasklets: &[(u64, Recording)],
) -> Trace {
    let mut trace = Trace::new(request.max_events);
    name_tracks(&mut trace, machine, timeline);
    let wanted = |b: u64| request.batches.contains(&b);
    let mut batches: Vec<_> = timeline
        .batches
        .iter()
        .filter(|b| wanted(b.batch))
        .collect();
    batches.sort_by_key(|b| b.batch);
    for b in &batches {
        let name = format!("batch {}", b.batch);
        let args = [("queries", ArgValue::U64(b.queries))];
        trace.span(PID_BATCHES, b.slot, &name, "batch", b.start, b.end, &args);
        for seg in &b.segments {
            let stage = seg.stage.map_or("waiting", |i| b.stages[i].name);
            trace.span(
                PID_BATCHES,
                b.slot,
                stage,
                "critical path",
                seg.start,
                seg.end,
                &[],
            );
        }
    }
    for s in timeline.spans.iter().filter(|s| wanted(s.batch)) {
        let stage = match s.stage {
            None => "waiting",
            Some(i) => batches
                .iter()
                .find(|b| b.batch == s.batch)
                .and_then(|b| b.stages.get(i))
                .map_or("", |st| st.name),
        };
        let mut args = vec![("batch", ArgValue::U64(s.batch)), ("stage", stage.into())];
        if s.bytes > 0 {
            args.push(("bytes", ArgValue::U64(s.bytes)));
        }
        if s.threads > 0 {
            args.push(("threads", ArgValue::U64(s.threads as u64)));
        }
        let (pid, tid) = match s.track {
            Track::Slot(t) => (PID_HOST, t),
            Track::Rank(r) => (PID_RANKS, r),
        };
        trace.span(pid, tid, s.name, stage, s.start, s.end, &args);
    }
    add_tasklets(&mut trace, machine, timeline, tasklets);
    trace.set_other("time_unit", "simulated microseconds".into());
    // `truncated` is the file's bound; a timeline cut at its own share is counted apart.
    let cut = tasklets.iter().filter(|(_, r)| r.cut()).count() as u64;
    if cut > 0 {
        trace.set_other("tasklet_timelines_cut", ArgValue::U64(cut));
    }
    trace
}

fn name_tracks(trace: &mut Trace, machine: &Machine, timeline: &Timeline) {
    trace.process(PID_BATCHES, "batches (critical path)", 0);
    trace.process(PID_HOST, "host", 1);
    trace.process(PID_RANKS, "ranks", 2);
    let slots = timeline
        .batches
        .iter()
        .map(|b| b.slot + 1)
        .max()
        .unwrap_or(1);
    for s in 0..slots {
        let name = format!("top-level thread {s}");
        trace.thread(PID_BATCHES, s, &name, s as i64);
        trace.thread(PID_HOST, s, &name, s as i64);
    }
    for r in 0..machine.ranks {
        trace.thread(PID_RANKS, r, &format!("rank {r}"), r as i64);
    }
}

/// Each recorded DPU as a process of its own, each launch's kernel starting where its
/// rank's did.
fn add_tasklets(
    trace: &mut Trace,
    machine: &Machine,
    timeline: &Timeline,
    tasklets: &[(u64, Recording)],
) {
    for (i, (batch, r)) in tasklets.iter().enumerate() {
        let rank = machine.rank_of(r.dpu);
        // The rank's kernels of the batch, in time order: one per launch.
        let kernels: Vec<Time> = timeline
            .spans
            .iter()
            .filter(|s| s.batch == *batch && s.track == Track::Rank(rank) && s.name == "kernel")
            .map(|s| s.start)
            .collect();
        if kernels.is_empty() {
            continue;
        }
        assert_eq!(kernels.len(), r.launches.len(), "one kernel per launch");
        let pid = PID_FIRST_DPU + i as u32;
        let name = format!("DPU {} (rank {rank}), batch {batch}", r.dpu);
        trace.process(pid, &name, 3 + i as i64);
        let spans = r.launches.iter().flat_map(|t| &t.spans);
        let tasklets = spans.map(|s| s.tasklet + 1).max().unwrap_or(0);
        for id in 0..tasklets {
            trace.thread(pid, id, &format!("tasklet {id}"), id as i64);
        }
        for (t, &start) in r.launches.iter().zip(&kernels) {
            t.add_to_trace(trace, pid, 0, machine.dpu.clock, start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasklet_recordings_leave_half_the_trace_to_the_system_spans() {
        let request = |batches: Range<u64>, dpus: TraceDpus| TraceRequest {
            batches,
            dpus,
            max_events: MAX_TRACE_EVENTS,
        };
        // Five batches of two DPUs: ten recordings share half the bound.
        let ten = request(0..5, TraceDpus::List(vec![0, 1]));
        assert_eq!(ten.spans_per_recording(), 50_000);
        assert_eq!(
            request(0..1, TraceDpus::Busiest).spans_per_recording(),
            500_000
        );
        // Beyond the most recordings a trace keeps, the share does not shrink further.
        let many = request(0..100, TraceDpus::List(vec![0, 1, 2]));
        assert_eq!(many.spans_per_recording(), 500_000 / 64);
    }
}
