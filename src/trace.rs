//! A writer of Chrome trace-event JSON (the format ui.perfetto.dev and chrome://tracing
//! open), for timelines of a simulated run. It knows nothing of what is traced: callers
//! name processes and threads (host threads, ranks, DPUs, tasklets) and add spans.
//!
//! Timestamps are simulated microseconds, written as exact decimals of the integer
//! picoseconds of [`Time`] (six decimals, never through a float), so the same run gives a
//! byte-identical file. Events are written in the order they were added. A bound on their
//! number keeps a long run's trace from exhausting memory: past it, the trace is cut at a
//! time, keeping every event that starts before it and none that starts at or after it,
//! whatever track it is on (no track stops early), and it says where in the file. Name and thread metadata is neither counted nor dropped: a cut trace keeps its
//! labels.
//!
//! ```
//! use pimdes::engine::Time;
//! use pimdes::trace::{ArgValue, Trace};
//!
//! let mut trace = Trace::new(1000);
//! trace.process(1, "host", 0);
//! trace.thread(1, 0, "thread 0", 0);
//! trace.span(1, 0, "route", "host", Time(0), Time(1_500_000), &[("queries", ArgValue::U64(64))]);
//! let mut json = Vec::new();
//! trace.write_to(&mut json).unwrap();
//! assert!(String::from_utf8(json).unwrap().contains(r#""ts":0.000000,"dur":1.500000"#));
//! ```

use crate::engine::Time;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;

/// Keys of `otherData` that the writer fills itself (a caller's value under one of them is
/// not written).
const RESERVED_OTHER_KEYS: [&str; 5] = [
    "events",
    "max_events",
    "dropped_events",
    "truncated",
    "truncation",
];

/// The value of one event argument (shown in the viewer's details pane).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgValue<'a> {
    U64(u64),
    I64(i64),
    Bool(bool),
    Str(&'a str),
    /// A simulated time, written in microseconds like the timestamps.
    Time(Time),
}

impl From<u64> for ArgValue<'_> {
    fn from(v: u64) -> Self {
        ArgValue::U64(v)
    }
}

impl From<u32> for ArgValue<'_> {
    fn from(v: u32) -> Self {
        ArgValue::U64(v as u64)
    }
}

impl From<i64> for ArgValue<'_> {
    fn from(v: i64) -> Self {
        ArgValue::I64(v)
    }
}

impl From<bool> for ArgValue<'_> {
    fn from(v: bool) -> Self {
        ArgValue::Bool(v)
    }
}

impl<'a> From<&'a str> for ArgValue<'a> {
    fn from(v: &'a str) -> Self {
        ArgValue::Str(v)
    }
}

impl From<Time> for ArgValue<'_> {
    fn from(v: Time) -> Self {
        ArgValue::Time(v)
    }
}

/// A trace being built: metadata and events, each already rendered as one JSON object.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    max_events: usize,
    metadata: Vec<String>,
    /// Kept events by (start, order added): the latest-starting go first when the bound
    /// is passed, and the file lists them in the order added.
    events: BTreeMap<(Time, u64), String>,
    /// Events added so far, kept or not (the next one's place in the order).
    added: u64,
    /// Events dropped by the bound.
    dropped_events: u64,
    /// Where the bound cut the trace: every event starting at or after it was dropped.
    cut: Option<Time>,
    other: BTreeMap<String, String>,
}

impl Trace {
    /// An empty trace that keeps at most `max_events` spans and instants.
    pub fn new(max_events: usize) -> Trace {
        Trace {
            max_events,
            ..Trace::default()
        }
    }

    /// Names process `pid` (a group of threads: the host, a rank, a DPU) and places it
    /// among the others by `sort_index` (lower first).
    pub fn process(&mut self, pid: u32, name: &str, sort_index: i64) {
        let mut e = Event::start("M", pid, None, "process_name");
        e.args(&[("name", ArgValue::Str(name))]);
        self.metadata.push(e.finish());
        let mut e = Event::start("M", pid, None, "process_sort_index");
        e.args(&[("sort_index", ArgValue::I64(sort_index))]);
        self.metadata.push(e.finish());
    }

    /// Names thread `tid` of process `pid` (one track: a host thread, a tasklet) and
    /// places it within the process by `sort_index` (lower first).
    pub fn thread(&mut self, pid: u32, tid: u32, name: &str, sort_index: i64) {
        let mut e = Event::start("M", pid, Some(tid), "thread_name");
        e.args(&[("name", ArgValue::Str(name))]);
        self.metadata.push(e.finish());
        let mut e = Event::start("M", pid, Some(tid), "thread_sort_index");
        e.args(&[("sort_index", ArgValue::I64(sort_index))]);
        self.metadata.push(e.finish());
    }

    /// Adds a complete event (`"ph":"X"`): `name` on thread `tid` of `pid` from `start` to
    /// `end` (an `end` before `start` is written as zero duration). `category` is the
    /// viewer's filter tag. Returns whether it is kept for now (false when the bound cut
    /// the trace at or before `start`; a later event that starts earlier may still
    /// displace it).
    #[allow(clippy::too_many_arguments)]
    pub fn span(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        category: &str,
        start: Time,
        end: Time,
        args: &[(&str, ArgValue<'_>)],
    ) -> bool {
        if !self.has_room(start) {
            return false;
        }
        let mut e = Event::start("X", pid, Some(tid), name);
        e.str_field("cat", category);
        e.time_field("ts", start);
        e.time_field("dur", end.saturating_sub(start));
        e.args(args);
        self.keep(e, start)
    }

    /// Adds an instant event (`"ph":"i"`, thread scope) at `at`; returns whether it is kept
    /// (as for [`span`](Self::span)).
    pub fn instant(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        category: &str,
        at: Time,
        args: &[(&str, ArgValue<'_>)],
    ) -> bool {
        if !self.has_room(at) {
            return false;
        }
        let mut e = Event::start("i", pid, Some(tid), name);
        e.str_field("cat", category);
        e.str_field("s", "t");
        e.time_field("ts", at);
        e.args(args);
        self.keep(e, at)
    }

    /// Sets `otherData[key]` (run-level facts: machine, workload, seed). Setting a key
    /// again replaces its value; the keys the writer fills itself (`events`, `max_events`,
    /// `dropped_events`, `truncated`, `truncation`) are ignored.
    pub fn set_other(&mut self, key: &str, value: ArgValue<'_>) {
        if RESERVED_OTHER_KEYS.contains(&key) {
            return;
        }
        let mut rendered = String::new();
        push_value(&mut rendered, value);
        self.other.insert(key.to_owned(), rendered);
    }

    /// Whether the bound cut the trace.
    pub fn truncated(&self) -> bool {
        self.dropped_events > 0
    }

    /// Where the bound cut the trace: no event starting at or after it was kept.
    pub fn cut_at(&self) -> Option<Time> {
        self.cut
    }

    /// Events refused because the bound was reached.
    pub fn dropped_events(&self) -> u64 {
        self.dropped_events
    }

    /// Spans and instants kept (metadata not counted).
    pub fn events(&self) -> usize {
        self.events.len()
    }

    /// Whether an event starting at `start` may be kept: one at or after the cut is dropped.
    fn has_room(&mut self, start: Time) -> bool {
        if self.cut.is_some_and(|cut| start >= cut) {
            self.dropped_events += 1;
            return false;
        }
        true
    }

    /// Keeps `e`; past the bound, drops the latest-starting events, every one of their
    /// start at once, and cuts the trace there. Returns whether `e` is still kept.
    fn keep(&mut self, e: Event, start: Time) -> bool {
        let place = (start, self.added);
        self.added += 1;
        self.events.insert(place, e.finish());
        while self.events.len() > self.max_events {
            let Some((&(latest, _), _)) = self.events.last_key_value() else {
                break;
            };
            while self
                .events
                .last_key_value()
                .is_some_and(|(k, _)| k.0 == latest)
            {
                self.events.pop_last();
                self.dropped_events += 1;
            }
            self.cut = Some(latest);
        }
        self.events.contains_key(&place)
    }

    /// Writes `{"traceEvents":[...],"displayTimeUnit":"ns","otherData":{...}}`, one event
    /// per line: metadata first, then the events in the order they were added, then, if
    /// the trace was cut, a global instant at the cut saying so.
    pub fn write_to(&self, w: &mut impl io::Write) -> io::Result<()> {
        w.write_all(b"{\"traceEvents\":[")?;
        let marker = self.truncation_marker();
        let mut events: Vec<(&u64, &String)> = self
            .events
            .iter()
            .map(|((_, order), e)| (order, e))
            .collect();
        events.sort_unstable_by_key(|(order, _)| **order);
        let events = events.into_iter().map(|(_, e)| e);
        let lines = self.metadata.iter().chain(events).chain(&marker);
        for (i, line) in lines.enumerate() {
            w.write_all(if i == 0 { b"\n" } else { b",\n" })?;
            w.write_all(line.as_bytes())?;
        }
        w.write_all(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":")?;
        w.write_all(self.other_data().as_bytes())?;
        w.write_all(b"}\n")
    }

    /// What the cut says, in the marker event, in `otherData` and in a run's warning.
    pub fn truncation_note(&self) -> String {
        let mut at = String::new();
        push_us(&mut at, self.cut.unwrap_or_default());
        format!(
            "trace cut at {at} us by its bound of {} events: the {} events starting from then on were dropped",
            self.max_events, self.dropped_events
        )
    }

    fn truncation_marker(&self) -> Option<String> {
        let cut = self.cut?;
        let mut e = Event::start("i", 0, Some(0), &self.truncation_note());
        e.str_field("cat", "trace");
        e.str_field("s", "g");
        e.time_field("ts", cut);
        Some(e.finish())
    }

    fn other_data(&self) -> String {
        let mut out = String::from("{");
        let mut field = |key: &str, value: &str| {
            if out.len() > 1 {
                out.push(',');
            }
            push_str(&mut out, key);
            out.push(':');
            out.push_str(value);
        };
        field("events", &self.events.len().to_string());
        field("max_events", &self.max_events.to_string());
        field("dropped_events", &self.dropped_events.to_string());
        field("truncated", if self.truncated() { "true" } else { "false" });
        if self.truncated() {
            let mut note = String::new();
            push_str(&mut note, &self.truncation_note());
            field("truncation", &note);
        }
        for (key, value) in &self.other {
            field(key, value);
        }
        out.push('}');
        out
    }
}

/// One event's JSON object under construction.
struct Event(String);

impl Event {
    /// `{"ph":..,"pid":..,"tid":..,"name":..` (no tid for process metadata).
    fn start(phase: &str, pid: u32, tid: Option<u32>, name: &str) -> Event {
        let mut s = String::with_capacity(128);
        s.push_str("{\"ph\":");
        push_str(&mut s, phase);
        push_display(&mut s, format_args!(",\"pid\":{pid}"));
        if let Some(tid) = tid {
            push_display(&mut s, format_args!(",\"tid\":{tid}"));
        }
        let mut e = Event(s);
        e.str_field("name", name);
        e
    }

    fn key(&mut self, key: &str) {
        self.0.push(',');
        push_str(&mut self.0, key);
        self.0.push(':');
    }

    fn str_field(&mut self, key: &str, value: &str) {
        self.key(key);
        push_str(&mut self.0, value);
    }

    fn time_field(&mut self, key: &str, t: Time) {
        self.key(key);
        push_us(&mut self.0, t);
    }

    /// `"args":{..}`, omitted when empty. A repeated key is written as given (the caller's
    /// to avoid; viewers keep the last).
    fn args(&mut self, args: &[(&str, ArgValue<'_>)]) {
        if args.is_empty() {
            return;
        }
        self.key("args");
        self.0.push('{');
        for (i, (key, value)) in args.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            push_str(&mut self.0, key);
            self.0.push(':');
            push_value(&mut self.0, *value);
        }
        self.0.push('}');
    }

    fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// Appends formatted text; writing to a `String` cannot fail.
fn push_display(out: &mut String, args: std::fmt::Arguments<'_>) {
    let _ = out.write_fmt(args);
}

/// Appends `s` as a JSON string literal, escaped by serde_json.
fn push_str(out: &mut String, s: &str) {
    // `Value`'s Display is serde_json's own serialiser and, unlike `to_string`, infallible.
    push_display(out, format_args!("{}", serde_json::Value::from(s)));
}

/// Appends `t` in microseconds with exactly six decimals: `Time(1)` is `0.000001`.
fn push_us(out: &mut String, t: Time) {
    let ps = t.ps();
    push_display(
        out,
        format_args!("{}.{:06}", ps / 1_000_000, ps % 1_000_000),
    );
}

fn push_value(out: &mut String, value: ArgValue<'_>) {
    match value {
        ArgValue::U64(v) => push_display(out, format_args!("{v}")),
        ArgValue::I64(v) => push_display(out, format_args!("{v}")),
        ArgValue::Bool(v) => out.push_str(if v { "true" } else { "false" }),
        ArgValue::Str(s) => push_str(out, s),
        ArgValue::Time(t) => push_us(out, t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(trace: &Trace) -> String {
        let mut out = Vec::new();
        trace.write_to(&mut out).expect("writing to a Vec");
        String::from_utf8(out).expect("UTF-8")
    }

    fn parse(trace: &Trace) -> serde_json::Value {
        serde_json::from_str(&json(trace)).expect("valid JSON")
    }

    #[test]
    fn microseconds_are_exact_decimals() {
        let cases = [
            (0, "0.000000"),
            (1, "0.000001"),
            (999_999, "0.999999"),
            (1_000_000, "1.000000"),
            (123_456_789, "123.456789"),
            (u64::MAX, "18446744073709.551615"),
        ];
        for (ps, want) in cases {
            let mut s = String::new();
            push_us(&mut s, Time(ps));
            assert_eq!(s, want, "{ps} ps");
        }
    }

    #[test]
    fn a_span_is_a_complete_event() {
        let mut t = Trace::new(10);
        let args = [
            ("bytes", ArgValue::U64(2048)),
            ("delta", ArgValue::I64(-3)),
            ("hot", ArgValue::Bool(true)),
            ("at", ArgValue::Time(Time(1))),
            ("who", ArgValue::Str("dpu \"7\"\n\\")),
        ];
        assert!(t.span(2, 5, "read", "dma", Time(1), Time(123_456_790), &args));
        let v = parse(&t);
        let e = &v["traceEvents"][0];
        assert_eq!(e["ph"], "X");
        assert_eq!((e["pid"].as_u64(), e["tid"].as_u64()), (Some(2), Some(5)));
        assert_eq!((&e["name"], &e["cat"]), (&"read".into(), &"dma".into()));
        assert_eq!(e["args"]["who"], "dpu \"7\"\n\\");
        assert_eq!(e["args"]["delta"], -3);
        assert_eq!(e["args"]["hot"], true);
        assert!(json(&t).contains(r#""ts":0.000001,"dur":123.456789,"#));
        assert_eq!(v["displayTimeUnit"], "ns");
        assert_eq!(v["otherData"]["truncated"], false);
    }
}
