//! `Dpu::launch_recorded`: per-tasklet timelines against hand-worked numbers on the PrIM
//! machine (revolver interval 11 cycles, alpha_read = 77, beta = 0.5 cycle/byte, mutex_lock
//! 3, mutex_unlock 2 and barrier_wait 10 instructions), their structure (spans tile each
//! tasklet's life), the bound, and that recording changes nothing the model computes.

mod common;

use pimdes::dpu::{
    Dpu, Kernel, KernelError, LaunchReport, Tasklet, TaskletActivity, TaskletSpan, TaskletTimeline,
};

const RUNNING: TaskletActivity = TaskletActivity::Running;
const DMA: TaskletActivity = TaskletActivity::Dma;

fn span(tasklet: u32, activity: TaskletActivity, start: u64, end: u64) -> TaskletSpan {
    TaskletSpan {
        tasklet,
        activity,
        start_cycle: start,
        end_cycle: end,
    }
}

fn recorded<K: Kernel>(kernel: &K, tasklets: u32) -> (LaunchReport, TaskletTimeline) {
    let m = common::machine(&[]);
    let mut dpu = Dpu::new(&m.dpu, 0);
    dpu.launch_recorded(kernel, tasklets, usize::MAX).unwrap()
}

/// Computes 10 instructions, then reads 8 bytes.
struct ComputeThenRead;

impl Kernel for ComputeThenRead {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(8)?;
        t.compute(10).await?;
        t.mram_read(0, buf, 8).await
    }
}

#[test]
fn compute_then_read_is_running_then_dma() {
    // 10 x 11 = 110 cycles of compute, then 77 + 0.5 x 8 = 81 cycles of DMA.
    let (report, timeline) = recorded(&ComputeThenRead, 1);
    assert_eq!(report.cycles, 191);
    assert!(!timeline.truncated);
    assert_eq!(
        timeline.spans,
        vec![span(0, RUNNING, 0, 110), span(0, DMA, 110, 191)]
    );
}

/// Every tasklet takes mutex 0, computes 100 instructions and releases it.
struct Critical;

impl Kernel for Critical {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.mutex_lock(0).await?;
        t.compute(100).await?;
        t.mutex_unlock(0).await
    }
}

#[test]
fn a_contended_mutex_shows_a_mutex_span() {
    // Tasklet 0: lock 3 x 11 = 33, compute to 33 + 1100 = 1133, unlock 2 x 11 -> 1155.
    // Tasklet 1 waits from 0 to the hand-over at 1133, then lock 33 -> 1166, compute
    // -> 2266, unlock -> 2288 (two computing tasklets still issue every 11 cycles).
    let (report, timeline) = recorded(&Critical, 2);
    assert_eq!(report.tasklet_cycles, vec![1155, 2288]);
    assert_eq!(
        timeline.spans,
        vec![
            span(0, RUNNING, 0, 1155),
            span(1, TaskletActivity::Mutex { id: 0 }, 0, 1133),
            span(1, RUNNING, 1133, 2288),
        ]
    );
}

/// Tasklet i computes 10 (i + 1) instructions, waits at barrier 3, then computes 5.
struct Staggered;

impl Kernel for Staggered {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        t.compute(10 * (t.id() as u64 + 1)).await?;
        t.barrier_wait(3).await?;
        t.compute(5).await
    }
}

#[test]
fn a_barrier_shows_barrier_spans_for_the_early_tasklets() {
    // Tasklet 0 arrives at 110, tasklet 1 (the last) at 220; both then pay the barrier's
    // 10 instructions (-> 330) and compute 5 (-> 385).
    let (report, timeline) = recorded(&Staggered, 2);
    assert_eq!(report.tasklet_cycles, vec![385, 385]);
    assert_eq!(
        timeline.spans,
        vec![
            span(0, RUNNING, 0, 110),
            span(0, TaskletActivity::Barrier { id: 3 }, 110, 220),
            span(0, RUNNING, 220, 385),
            span(1, RUNNING, 0, 385),
        ]
    );
}

/// A mix of everything: per item, a read, a compute, a contended counter update under a
/// mutex, and a write back; a barrier between two rounds. Items go to tasklets through the
/// shared counter (the dynamic work split of the forest kernel).
struct Mixed {
    items: u64,
}

impl Mixed {
    async fn round(&self, t: &Tasklet, buf: u32, round: u64) -> Result<(), KernelError> {
        let counter = t.globals();
        loop {
            t.mutex_lock(0).await?;
            let item = t.wram_read_u64(counter)?;
            t.wram_write_u64(counter, item + 1)?;
            t.compute(4).await?;
            t.mutex_unlock(0).await?;
            if item >= self.items * (round + 1) {
                return Ok(());
            }
            let addr = (item % self.items) * 64;
            t.mram_read(addr, buf, 64).await?;
            let word = t.wram_read_u64(buf)?;
            t.wram_write_u64(buf, word.wrapping_mul(31).wrapping_add(item))?;
            t.compute(20 + item % 7 * 13).await?;
            t.mram_write(buf, addr, 64).await?;
        }
    }
}

impl Kernel for Mixed {
    fn wram_globals_bytes(&self) -> u32 {
        8
    }

    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(64)?;
        self.round(t, buf, 0).await?;
        t.barrier_wait(1).await?;
        if t.id() == 0 {
            // Skip the overshoot of round 0 (each tasklet took one item past the end).
            t.wram_write_u64(t.globals(), self.items)?;
            // Its cost keeps the others waiting at barrier 2 (which they otherwise all
            // reach at the same cycle: a zero-length wait, which a timeline drops).
            t.compute(50).await?;
        }
        t.barrier_wait(2).await?;
        self.round(t, buf, 1).await
    }
}

fn mixed_dpu() -> Dpu {
    let m = common::machine(&[]);
    let mut dpu = Dpu::new(&m.dpu, 0);
    let words: Vec<u64> = (0..8 * 300).map(|i| i * 7 + 1).collect();
    dpu.mram_mut().write_u64s(0, &words);
    dpu
}

const MIXED: Mixed = Mixed { items: 300 };

/// The spans of each tasklet start at 0, follow each other without gaps or overlaps, never
/// repeat an activity back to back, and end at the tasklet's finish cycle.
fn assert_tiles(report: &LaunchReport, timeline: &TaskletTimeline) {
    for (t, &finish) in report.tasklet_cycles.iter().enumerate() {
        let mine: Vec<&TaskletSpan> = timeline
            .spans
            .iter()
            .filter(|s| s.tasklet as usize == t)
            .collect();
        let mut at = 0;
        for (i, s) in mine.iter().enumerate() {
            assert_eq!(
                s.start_cycle, at,
                "tasklet {t} span {i} starts at the last end"
            );
            assert!(
                s.end_cycle > s.start_cycle,
                "tasklet {t} span {i} is not empty"
            );
            if i > 0 {
                assert_ne!(
                    s.activity,
                    mine[i - 1].activity,
                    "tasklet {t} span {i} merged"
                );
            }
            at = s.end_cycle;
        }
        assert_eq!(at, finish, "tasklet {t} spans end at its finish");
    }
    let order: Vec<u32> = timeline.spans.iter().map(|s| s.tasklet).collect();
    assert!(order.is_sorted(), "spans are grouped by tasklet");
}

#[test]
fn recording_changes_neither_the_report_nor_the_mram() {
    for tasklets in [1, 5, 16, 24] {
        let mut plain = mixed_dpu();
        let plain_report = plain.launch(&MIXED, tasklets).unwrap();
        let mut traced = mixed_dpu();
        let (report, timeline) = traced.launch_recorded(&MIXED, tasklets, 1 << 20).unwrap();
        assert_eq!(report, plain_report, "{tasklets} tasklets");
        assert!(traced.mram() == plain.mram(), "{tasklets} tasklets: MRAM");
        assert!(!timeline.truncated);
        assert_tiles(&report, &timeline);
        // A truncated recording changes nothing either.
        let mut cut = mixed_dpu();
        let (cut_report, _) = cut.launch_recorded(&MIXED, tasklets, 2).unwrap();
        assert_eq!(cut_report, plain_report);
        assert!(cut.mram() == plain.mram());
    }
}

#[test]
fn a_busy_launch_shows_every_activity() {
    let (report, timeline) = mixed_dpu().launch_recorded(&MIXED, 16, 1 << 20).unwrap();
    let has = |a: TaskletActivity| timeline.spans.iter().any(|s| s.activity == a);
    assert!(has(RUNNING) && has(DMA));
    assert!(has(TaskletActivity::Mutex { id: 0 }));
    assert!(has(TaskletActivity::Barrier { id: 1 }));
    assert!(has(TaskletActivity::Barrier { id: 2 }));
    // DMA spans: one per transfer at least (a tasklet waits on one DMA at a time).
    let dma_spans = timeline.spans.iter().filter(|s| s.activity == DMA).count() as u64;
    assert_eq!(dma_spans, report.stats.dma_reads + report.stats.dma_writes);
}

#[test]
fn the_timeline_is_deterministic() {
    let a = mixed_dpu().launch_recorded(&MIXED, 11, 1 << 20).unwrap();
    let b = mixed_dpu().launch_recorded(&MIXED, 11, 1 << 20).unwrap();
    assert_eq!(a, b);
}

#[test]
fn the_span_bound_truncates() {
    let (_, full) = mixed_dpu().launch_recorded(&MIXED, 8, usize::MAX).unwrap();
    let n = full.spans.len();
    assert!(n > 100, "{n} spans");
    let (_, exact) = mixed_dpu().launch_recorded(&MIXED, 8, n).unwrap();
    assert_eq!(
        exact, full,
        "a bound of exactly the span count truncates nothing"
    );
    let (_, cut) = mixed_dpu().launch_recorded(&MIXED, 8, n - 1).unwrap();
    assert!(cut.truncated);
    assert_eq!(cut.spans.len(), n - 1);
    let (_, tiny) = mixed_dpu().launch_recorded(&MIXED, 8, 10).unwrap();
    assert!(tiny.truncated);
    assert_eq!(tiny.spans.len(), 10);
    // The kept spans are spans of the full timeline.
    assert!(tiny.spans.iter().all(|s| full.spans.contains(s)));
    let (_, none) = mixed_dpu().launch_recorded(&MIXED, 8, 0).unwrap();
    assert!(none.truncated && none.spans.is_empty());
}

#[test]
fn a_bad_tasklet_count_is_the_launch_error() {
    let m = common::machine(&[]);
    let mut dpu = Dpu::new(&m.dpu, 0);
    for tasklets in [0, 25, u32::MAX] {
        let err = dpu.launch_recorded(&Critical, tasklets, 100).unwrap_err();
        assert!(
            matches!(err, KernelError::TooManyTasklets { .. }),
            "{err:?}"
        );
    }
}

#[test]
fn a_timeline_becomes_trace_spans_in_microseconds() {
    use pimdes::engine::Time;
    use pimdes::trace::Trace;
    let m = common::machine(&[]);
    let (_, timeline) = recorded(&Critical, 2);
    let mut trace = Trace::new(100);
    let start = Time(1_000_000);
    assert!(timeline.add_to_trace(&mut trace, 7, 100, m.dpu.clock, start));
    let mut out = Vec::new();
    trace.write_to(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let names: Vec<(&str, u64)> = events
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    assert_eq!(names, [("running", 100), ("mutex", 101), ("running", 101)]);
    assert_eq!(events[1]["args"]["id"], 0);
    assert_eq!(events[1]["args"]["end_cycle"], 1133);
    // 1133 cycles at 350 MHz = 3,237,142.86 ps, rounded up; the next span starts there.
    assert!(text.contains(r#""ts":1.000000,"dur":3.237143"#), "{text}");
    assert!(text.contains(r#""ts":4.237143,"#), "{text}");
    // A trace too small for the timeline says so; a cut timeline leaves a marker.
    assert!(!timeline.add_to_trace(&mut Trace::new(2), 7, 0, m.dpu.clock, start));
    let (_, cut) = mixed_dpu().launch_recorded(&MIXED, 4, 5).unwrap();
    let mut trace = Trace::new(100);
    assert!(cut.add_to_trace(&mut trace, 0, 0, m.dpu.clock, Time::ZERO));
    assert_eq!(trace.events(), 6);
}
