//! A small, deterministic SVG writer for the experiments' figures: line charts with error
//! bars and stacked bar charts, axes with round ticks, and a legend. The same data gives the
//! same bytes (numbers are printed with fixed decimals, nothing depends on fonts or time).

use std::fmt::Write;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 470.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 90.0;
/// Colour-blind-safe palette (Okabe and Ito), cycled.
const COLOURS: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000",
];

/// One line of a line chart: points (x, y, one-sigma error).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64, f64)>,
}

/// One bar of a stacked chart: its category label and its segments' heights (one per
/// segment name).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub segments: Vec<f64>,
}

/// Axis titles and the figure's title.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels {
    pub title: String,
    pub x: String,
    pub y: String,
}

/// Round tick values covering `lo..=hi`: 1, 2 or 5 times a power of ten apart.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * power);
    // The tolerance keeps 0.6 / 0.1 = 5.999... from adding a tick below the data.
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// A number as a tick label: short, exact for round values.
fn number(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.1e}");
    }
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The plotting area's mapping from data to pixels.
struct Frame {
    x: (f64, f64),
    y: (f64, f64),
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        let (lo, hi) = self.x;
        LEFT + (x - lo) / (hi - lo).max(f64::MIN_POSITIVE) * (WIDTH - LEFT - RIGHT)
    }

    fn py(&self, y: f64) -> f64 {
        let (lo, hi) = self.y;
        HEIGHT - BOTTOM - (y - lo) / (hi - lo).max(f64::MIN_POSITIVE) * (HEIGHT - TOP - BOTTOM)
    }
}

fn header(svg: &mut String, labels: &Labels) {
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        (WIDTH - RIGHT + LEFT) / 2.0,
        escape(&labels.title)
    );
}

/// The y axis with its ticks, grid lines and title.
fn y_axis(svg: &mut String, frame: &Frame, y_ticks: &[f64], title: &str) {
    for &t in y_ticks {
        let y = frame.py(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#dddddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            number(t)
        );
    }
    let mid = (TOP + HEIGHT - BOTTOM) / 2.0;
    let _ = writeln!(
        svg,
        r#"<text x="18" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 18 {mid:.1})">{}</text>"#,
        escape(title)
    );
    let _ = writeln!(
        svg,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="black"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black"/>"#,
        HEIGHT - BOTTOM,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT,
        HEIGHT - BOTTOM
    );
}

fn x_title(svg: &mut String, title: &str) {
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        (WIDTH - RIGHT + LEFT) / 2.0,
        HEIGHT - 8.0,
        escape(title)
    );
}

fn legend(svg: &mut String, names: &[String]) {
    for (i, name) in names.iter().enumerate() {
        let y = TOP + 10.0 + 20.0 * i as f64;
        let x = WIDTH - RIGHT + 16.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="14" height="10" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            y - 9.0,
            COLOURS[i % COLOURS.len()],
            x + 20.0,
            y,
            escape(name)
        );
    }
}

/// The range of `values` padded so nothing sits on the frame, including 0 when `from_zero`.
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi - lo < 1e-12 * hi.abs().max(1.0) {
        let pad = hi.abs().max(1.0) * 0.1;
        return (lo - pad, hi + pad);
    }
    (lo, hi)
}

/// A line chart of `lines`, each with markers and one-sigma error bars.
pub fn line_chart(labels: &Labels, lines: &[Line]) -> String {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let ys = lines
        .iter()
        .flat_map(|l| l.points.iter().flat_map(|p| [p.1 - p.2, p.1 + p.2]));
    let x_ticks = {
        let (lo, hi) = range(xs, false);
        ticks(lo, hi)
    };
    let y_ticks = {
        let (lo, hi) = range(ys, true);
        ticks(lo, hi)
    };
    let frame = Frame {
        x: (x_ticks[0], *x_ticks.last().unwrap_or(&1.0)),
        y: (y_ticks[0], *y_ticks.last().unwrap_or(&1.0)),
    };
    let mut svg = String::new();
    header(&mut svg, labels);
    y_axis(&mut svg, &frame, &y_ticks, &labels.y);
    for &t in &x_ticks {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            frame.px(t),
            HEIGHT - BOTTOM + 18.0,
            number(t)
        );
    }
    x_title(&mut svg, &labels.x);
    for (i, line) in lines.iter().enumerate() {
        draw_line(&mut svg, &frame, line, COLOURS[i % COLOURS.len()]);
    }
    let names: Vec<String> = lines.iter().map(|l| l.label.clone()).collect();
    legend(&mut svg, &names);
    svg.push_str("</svg>\n");
    svg
}

fn draw_line(svg: &mut String, frame: &Frame, line: &Line, colour: &str) {
    let path: Vec<String> = line
        .points
        .iter()
        .map(|&(x, y, _)| format!("{:.1},{:.1}", frame.px(x), frame.py(y)))
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
        path.join(" ")
    );
    for &(x, y, e) in &line.points {
        let (px, py) = (frame.px(x), frame.py(y));
        if e > 0.0 {
            let _ = writeln!(
                svg,
                r#"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="{colour}"/>"#,
                frame.py(y - e),
                frame.py(y + e)
            );
        }
        let _ = writeln!(
            svg,
            r#"<circle cx="{px:.1}" cy="{py:.1}" r="3.5" fill="{colour}"/>"#
        );
    }
}

/// A stacked bar chart: one bar per `bars` entry, its segments stacked in `segment_names`
/// order.
pub fn stacked_bars(labels: &Labels, segment_names: &[String], bars: &[Bar]) -> String {
    let totals = bars.iter().map(|b| b.segments.iter().sum::<f64>());
    let y_ticks = {
        let (lo, hi) = range(totals, true);
        ticks(lo, hi)
    };
    let frame = Frame {
        x: (0.0, bars.len().max(1) as f64),
        y: (y_ticks[0], *y_ticks.last().unwrap_or(&1.0)),
    };
    let mut svg = String::new();
    header(&mut svg, labels);
    y_axis(&mut svg, &frame, &y_ticks, &labels.y);
    let slot = frame.px(1.0) - frame.px(0.0);
    for (i, bar) in bars.iter().enumerate() {
        let x = frame.px(i as f64) + slot * 0.15;
        let mut base = 0.0;
        for (k, &h) in bar.segments.iter().enumerate() {
            let (top, bottom) = (frame.py(base + h), frame.py(base));
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                slot * 0.7,
                (bottom - top).max(0.0),
                COLOURS[k % COLOURS.len()]
            );
            base += h;
        }
        let (lx, ly) = (frame.px(i as f64 + 0.5), HEIGHT - BOTTOM + 12.0);
        let _ = writeln!(
            svg,
            r#"<text x="{lx:.1}" y="{ly:.1}" text-anchor="end" font-size="10" transform="rotate(-35 {lx:.1} {ly:.1})">{}</text>"#,
            escape(&bar.label)
        );
    }
    x_title(&mut svg, &labels.x);
    legend(&mut svg, segment_names);
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let labels: Vec<String> = ticks(0.6, 1.2).into_iter().map(number).collect();
        assert_eq!(labels, ["0.6", "0.7", "0.8", "0.9", "1", "1.1", "1.2"]);
        let t = ticks(3.0, 1234.0);
        assert!(t[0] <= 3.0 && *t.last().unwrap() >= 1234.0, "{t:?}");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(12000.0), "12000");
        assert_eq!(number(2.5e7), "2.5e7");
    }

    #[test]
    fn the_same_data_gives_the_same_bytes_and_escapes_text() {
        let labels = Labels {
            title: "a < b & c".into(),
            x: "skew".into(),
            y: "IF_q".into(),
        };
        let lines = [Line {
            label: "qdd".into(),
            points: vec![(0.6, 1.2, 0.1), (1.0, 1.5, 0.0)],
        }];
        let a = line_chart(&labels, &lines);
        assert_eq!(a, line_chart(&labels, &lines));
        assert!(
            a.contains("a &lt; b &amp; c") && a.starts_with("<svg"),
            "{a}"
        );
        assert_eq!(a.matches("<circle").count(), 2);
        let bars = [Bar {
            label: "0.6".into(),
            segments: vec![1.0, 2.0],
        }];
        let b = stacked_bars(&labels, &["cpu".into(), "pim".into()], &bars);
        assert_eq!(
            b.matches("<rect x=").count(),
            2 + 2,
            "two segments, two legend keys"
        );
    }
}
