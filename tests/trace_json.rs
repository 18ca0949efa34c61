//! `pimdes::trace::Trace`: the Chrome trace-event JSON it writes parses back, is
//! byte-identical for the same input, keeps exact microsecond timestamps, and honours its
//! event bound without losing metadata.

use pimdes::engine::Time;
use pimdes::trace::{ArgValue, Trace};
use serde_json::Value;

fn json(trace: &Trace) -> String {
    let mut out = Vec::new();
    trace.write_to(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn parse(trace: &Trace) -> Value {
    serde_json::from_str(&json(trace)).unwrap()
}

fn events(v: &Value) -> &Vec<Value> {
    v["traceEvents"].as_array().unwrap()
}

/// A small timeline: a host thread, a rank, a DPU with two tasklets.
fn sample(max_events: usize) -> Trace {
    let mut t = Trace::new(max_events);
    t.set_other("machine", ArgValue::Str("upmem-2556-350mhz"));
    t.set_other("seed", ArgValue::U64(42));
    t.process(0, "host", 0);
    t.thread(0, 0, "host thread 0", 0);
    t.process(1, "rank 0", 1);
    t.process(2, "DPU 0", 2);
    for tasklet in 0..2 {
        t.thread(2, tasklet, &format!("tasklet {tasklet}"), tasklet as i64);
    }
    t.span(0, 0, "route", "host", Time(0), Time(2_000_000), &[]);
    t.span(
        1,
        0,
        "transfer to DPUs",
        "rank",
        Time(2_000_000),
        Time(5_500_001),
        &[],
    );
    for tasklet in 0..2u32 {
        let start = Time(5_500_001 + tasklet as u64 * 2858);
        let args = [
            ("cycles", ArgValue::U64(81)),
            ("id", ArgValue::from(tasklet)),
        ];
        t.span(
            2,
            tasklet,
            "dma",
            "tasklet",
            start,
            Time(start.ps() + 231_429),
            &args,
        );
    }
    t.instant(0, 0, "batch done", "host", Time(9_000_000), &[]);
    t
}

#[test]
fn the_output_is_chrome_trace_json() {
    let v = parse(&sample(100));
    assert_eq!(v["displayTimeUnit"], "ns");
    let all = events(&v);
    // A name and a sort index for each of 3 processes and 3 threads.
    let metadata = all.iter().filter(|e| e["ph"] == "M").count();
    assert_eq!(metadata, 2 * 3 + 2 * 3);
    let names: Vec<&str> = all
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["host thread 0", "tasklet 0", "tasklet 1"]);
    let spans: Vec<&Value> = all.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(spans.len(), 4);
    for s in &spans {
        assert!(s["ts"].is_number() && s["dur"].is_number(), "{s}");
        assert!(s["pid"].is_u64() && s["tid"].is_u64() && s["cat"].is_string());
    }
    let instant = all.iter().find(|e| e["ph"] == "i").unwrap();
    assert_eq!(
        (&instant["name"], &instant["s"]),
        (&"batch done".into(), &"t".into())
    );
    assert_eq!(v["otherData"]["machine"], "upmem-2556-350mhz");
    assert_eq!(v["otherData"]["seed"], 42);
    assert_eq!(v["otherData"]["events"], 5);
    assert_eq!(v["otherData"]["truncated"], false);
}

#[test]
fn one_event_per_line() {
    let text = json(&sample(100));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], r#"{"traceEvents":["#);
    assert!(lines[lines.len() - 1].starts_with(r#"],"displayTimeUnit":"ns","otherData":{"#));
    let body = &lines[1..lines.len() - 1];
    assert_eq!(body.len(), 12 + 5);
    for line in body {
        let line = line.strip_suffix(',').unwrap_or(line);
        let e: Value = serde_json::from_str(line).unwrap();
        assert!(e.is_object());
    }
}

#[test]
fn timestamps_are_exact_microseconds() {
    let text = json(&sample(100));
    assert!(text.contains(r#""ts":0.000000,"dur":2.000000"#), "{text}");
    assert!(text.contains(r#""ts":2.000000,"dur":3.500001"#), "{text}");
    assert!(text.contains(r#""ts":5.502859,"dur":0.231429"#), "{text}");
    let mut t = Trace::new(10);
    t.span(0, 0, "a", "c", Time(1), Time(123_456_790), &[]);
    t.instant(
        0,
        0,
        "b",
        "c",
        Time(123_456_789),
        &[("at", ArgValue::Time(Time(7)))],
    );
    let text = json(&t);
    assert!(text.contains(r#""ts":0.000001,"dur":123.456789"#), "{text}");
    assert!(
        text.contains(r#""ts":123.456789,"args":{"at":0.000007}"#),
        "{text}"
    );
}

#[test]
fn the_same_input_gives_the_same_bytes() {
    assert_eq!(json(&sample(100)), json(&sample(100)));
    assert_eq!(json(&sample(3)), json(&sample(3)));
}

#[test]
fn strings_are_escaped() {
    let mut t = Trace::new(10);
    let nasty = "quote \" backslash \\ newline \n tab \t nul \u{0} é ✓";
    t.process(1, nasty, 0);
    t.thread(1, 2, nasty, 0);
    t.span(
        1,
        2,
        nasty,
        nasty,
        Time(0),
        Time(1),
        &[(nasty, ArgValue::Str(nasty))],
    );
    t.set_other(nasty, ArgValue::Str(nasty));
    let v = parse(&t);
    let e = &events(&v)[4];
    assert_eq!((&e["name"], &e["cat"]), (&nasty.into(), &nasty.into()));
    assert_eq!(e["args"][nasty], nasty);
    assert_eq!(events(&v)[0]["args"]["name"], nasty);
    assert_eq!(v["otherData"][nasty], nasty);
}

#[test]
fn the_bound_cuts_the_trace_at_a_time_and_keeps_all_metadata() {
    let mut t = sample(3);
    // Five events, three kept: those starting before the fourth's start, on any track.
    assert!(t.truncated());
    assert_eq!((t.events(), t.dropped_events()), (3, 2));
    assert_eq!(t.cut_at(), Some(Time(5_502_859)));
    // An event starting at or after the cut is dropped; one before it is kept and pushes
    // the cut back to the start of the latest event it displaces.
    assert!(!t.span(0, 0, "late", "host", Time(6_000_000), Time(6_000_001), &[]));
    assert!(t.span(0, 0, "early", "host", Time(1_000_000), Time(1_500_000), &[]));
    assert_eq!(t.cut_at(), Some(Time(5_500_001)));
    assert_eq!((t.events(), t.dropped_events()), (3, 4));
    // Metadata is not counted: adding it to a full trace still works.
    t.thread(0, 1, "host thread 1", 1);
    let v = parse(&t);
    let all = events(&v);
    assert_eq!(all.iter().filter(|e| e["ph"] == "M").count(), 12 + 2);
    let kept: Vec<&str> = all
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    // In the order added.
    assert_eq!(kept, ["route", "transfer to DPUs", "early"]);
    // The last event says where the trace was cut, at the cut.
    let note = "trace cut at 5.500001 us by its bound of 3 events: the 4 events starting from then on were dropped";
    let marker = all.last().unwrap();
    assert_eq!((&marker["ph"], &marker["s"]), (&"i".into(), &"g".into()));
    assert_eq!(marker["name"], note);
    assert!(json(&t).contains(r#""ts":5.500001}"#));
    let other = &v["otherData"];
    assert_eq!(other["truncated"], true);
    assert_eq!(
        (&other["max_events"], &other["dropped_events"]),
        (&3.into(), &4.into())
    );
    assert_eq!(other["truncation"], note);
}

/// Events of one start are kept or dropped together, so the cut is clean: nothing kept
/// starts at or after it.
#[test]
fn the_cut_drops_every_event_of_its_start() {
    let mut t = Trace::new(2);
    assert!(t.span(0, 0, "a", "host", Time(1), Time(2), &[]));
    assert!(t.span(0, 1, "b", "host", Time(5), Time(6), &[]));
    assert!(!t.span(0, 2, "c", "host", Time(5), Time(7), &[]));
    assert_eq!(
        (t.events(), t.dropped_events(), t.cut_at()),
        (1, 2, Some(Time(5)))
    );
    assert!(!t.instant(0, 0, "d", "host", Time(5), &[]));
    assert!(t.instant(0, 0, "e", "host", Time(4), &[]));
    assert_eq!((t.events(), t.cut_at()), (2, Some(Time(5))));
}

#[test]
fn a_zero_bound_keeps_only_metadata() {
    let v = parse(&sample(0));
    assert!(events(&v).iter().all(|e| e["ph"] == "M" || e["s"] == "g"));
    assert_eq!(v["otherData"]["events"], 0);
    assert_eq!(v["otherData"]["dropped_events"], 5);
}

#[test]
fn an_empty_trace_is_valid() {
    let v = parse(&Trace::new(10));
    assert!(events(&v).is_empty());
    assert_eq!(v["otherData"]["truncated"], false);
}

#[test]
fn reserved_other_keys_stay_the_writers() {
    let mut t = Trace::new(10);
    t.set_other("truncated", ArgValue::Bool(true));
    t.set_other("events", ArgValue::U64(99));
    t.set_other("run", ArgValue::U64(1));
    t.set_other("run", ArgValue::U64(2));
    let v = parse(&t);
    assert_eq!(v["otherData"]["truncated"], false);
    assert_eq!(v["otherData"]["events"], 0);
    assert_eq!(v["otherData"]["run"], 2);
}

#[test]
fn an_end_before_the_start_is_a_zero_duration() {
    let mut t = Trace::new(10);
    t.span(0, 0, "backwards", "c", Time(5), Time(3), &[]);
    assert!(json(&t).contains(r#""ts":0.000005,"dur":0.000000"#));
}
